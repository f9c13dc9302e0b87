//! The operations listener (`--metrics-listen`): `/healthz`, `/readyz` and `/metrics`. Where
//! `serve` talks to a cluster and `--metrics-secure` holds (the default), it speaks TLS with
//! the serving certificate, reloaded as the webhook's is and with the same protocol versions
//! and cipher suites, and `/metrics` answers only callers whose token may `get` it. Without a
//! cluster there is no one to review tokens, so it stays plain HTTP and says so.

use std::sync::Arc;

use axum::Router;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::https;
use crate::limits::Limits;
use crate::metrics_access::MetricsAccess;
use crate::serve_error::ServeError;
use crate::tls_reload::{self, CertStore};

/// How `/metrics` is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MetricsMode {
    /// TLS, and a TokenReview and SubjectAccessReview for every scrape (cached briefly).
    Secure,
    /// Plain HTTP, open: `--metrics-secure=false` (a mesh in front does the same, say).
    PlainAsAsked,
    /// Plain HTTP, open: no cluster to review tokens with (`--dev`, or no kubeconfig).
    PlainWithoutCluster,
}

impl MetricsMode {
    pub(crate) fn choose(metrics_secure: bool, has_cluster: bool) -> MetricsMode {
        match (metrics_secure, has_cluster) {
            (false, _) => MetricsMode::PlainAsAsked,
            (true, false) => MetricsMode::PlainWithoutCluster,
            (true, true) => MetricsMode::Secure,
        }
    }

    /// Says, once at start, who can read the metrics.
    pub(crate) fn log(self) {
        match self {
            MetricsMode::Secure => tracing::info!(
                "/metrics over HTTPS, for bearer tokens allowed to get /metrics (TokenReview and SubjectAccessReview); /healthz and /readyz open"
            ),
            MetricsMode::PlainAsAsked => tracing::warn!(
                "--metrics-secure=false: /metrics in plain HTTP, open to anyone who reaches the port"
            ),
            MetricsMode::PlainWithoutCluster => tracing::warn!(
                "no cluster to review tokens with (--dev, or no kubeconfig): /metrics in plain HTTP, open to anyone who reaches the port"
            ),
        }
    }
}

/// The gate for `/metrics` in secure mode, its refusals counted in `registry`.
pub(crate) fn gate(
    mode: MetricsMode,
    client: Option<&kube::Client>,
    registry: &mut Registry,
) -> Option<Arc<MetricsAccess>> {
    match (mode, client) {
        (MetricsMode::Secure, Some(client)) => {
            Some(Arc::new(MetricsAccess::new(client.clone(), registry)))
        }
        _ => None,
    }
}

/// Serves `router` on `listener` until `stop`: over TLS with `certificate` when given, else in
/// plain HTTP.
pub(crate) fn serve(
    listener: TcpListener,
    router: Router,
    certificate: Option<Arc<CertStore>>,
    limits: &Limits,
    stop: CancellationToken,
) -> Result<JoinHandle<()>, ServeError> {
    let Some(certificate) = certificate else {
        return Ok(tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await
            {
                tracing::warn!(%error, "the metrics listener failed");
            }
        }));
    };
    let config = tls_reload::server_config(certificate).map_err(|source| ServeError::Tls {
        flag: "--metrics-listen",
        source,
    })?;
    // A scrape or a probe takes no longer than any request may: that is all the drain needs.
    let drain = limits.request_timeout;
    Ok(tokio::spawn(https::serve(
        listener,
        TlsAcceptor::from(Arc::new(config)),
        router,
        limits.clone(),
        stop,
        drain,
    )))
}

#[cfg(test)]
mod tests {
    use super::MetricsMode;

    #[test]
    fn metrics_are_secured_wherever_there_is_a_cluster_unless_turned_off() {
        for (secure, cluster, want) in [
            (true, true, MetricsMode::Secure),
            (true, false, MetricsMode::PlainWithoutCluster),
            (false, true, MetricsMode::PlainAsAsked),
            (false, false, MetricsMode::PlainAsAsked),
        ] {
            assert_eq!(
                MetricsMode::choose(secure, cluster),
                want,
                "{secure} {cluster}"
            );
        }
    }
}
