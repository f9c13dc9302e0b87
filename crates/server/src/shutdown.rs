//! The process signals that stop the server: SIGTERM (what the kubelet sends) and SIGINT
//! (Ctrl-C). What stopping means — readiness false, drain, exit — is in `server.rs`.

/// Completes when SIGTERM or SIGINT arrives. If a handler cannot be installed, that signal
/// is simply not awaited (the process then keeps the default action for it).
pub async fn signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = async {
            match signal(SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot listen for SIGTERM");
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::select! {
            _ = term => "SIGTERM",
            _ = ctrl_c() => "SIGINT",
        }
    }
    #[cfg(not(unix))]
    {
        ctrl_c().await;
        "Ctrl-C"
    }
}

async fn ctrl_c() {
    if let Err(error) = tokio::signal::ctrl_c().await {
        tracing::warn!(%error, "cannot listen for Ctrl-C");
        std::future::pending::<()>().await;
    }
}
