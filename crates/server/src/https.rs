//! The HTTPS admission listener: accept within the connection limit, TLS handshake within its
//! timeout, then HTTP/1.1 or HTTP/2 (chosen by ALPN) on each connection, every connection
//! watched so that stopping the listener lets in-flight requests finish before it returns.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::limits::Limits;

/// Serves until `stop_accepting` is cancelled, then waits up to `drain_timeout` for open
/// connections to finish their requests (HTTP/1.1 closes after the current response; HTTP/2
/// sends GOAWAY and completes the open streams).
pub(crate) async fn serve(
    listener: TcpListener,
    tls: TlsAcceptor,
    app: Router,
    limits: Limits,
    stop_accepting: CancellationToken,
    drain_timeout: Duration,
) {
    let builder = Arc::new(limits.connection_builder());
    let service = TowerToHyperService::new(app);
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections as usize));
    loop {
        // Take a connection slot before accepting, so that at the limit new connections wait
        // in the kernel's backlog instead of costing a task and a handshake each.
        let slot = tokio::select! {
            _ = stop_accepting.cancelled() => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            _ = stop_accepting.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Usually out of file descriptors: pause rather than spin on the error.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        // Admission answers are small; do not let Nagle hold them back.
        let _ = stream.set_nodelay(true);
        let tls = tls.clone();
        let builder = builder.clone();
        let service = service.clone();
        let watcher = graceful.watcher();
        let handshake_timeout = limits.tls_handshake_timeout;
        tokio::spawn(async move {
            let _slot = slot;
            let stream = match tokio::time::timeout(handshake_timeout, tls.accept(stream)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            if let Err(error) = watcher.watch(connection).await {
                // Clients dropping connections is routine; nothing for an operator to do.
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => tracing::info!("all admission connections closed"),
        _ = tokio::time::sleep(drain_timeout) => {
            tracing::warn!(?drain_timeout, "shutdown timeout reached with requests still open");
        }
    }
}
