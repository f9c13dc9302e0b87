//! Why `serve` could not start or stopped: one variant per thing that failed, its cause kept as
//! the `source`, never repeated in the message, so a chain printer (the binary's `{:#}` at its
//! edge, `error_chain` in logs) shows each cause once.

use tokio::task::JoinError;

use crate::config::PolicyError;
use crate::listen::ListenError;
use crate::tls_reload::{CertError, CertFiles};

/// What the reconcile loop's hook fails with: the controller's own errors, boxed, since this
/// crate never depends on the controller crate.
pub type ControllerError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(
        "--no-webhook runs only the reconcile loop, which needs a cluster (in-cluster or a kubeconfig)"
    )]
    NoWebhookWithoutCluster,
    #[error(
        "--no-webhook serves /metrics over HTTPS: give --tls-cert and --tls-key (the serving certificate), or --metrics-secure=false"
    )]
    NoWebhookWithoutCertificate,
    #[error("--tls-cert and --tls-key are required (or --dev)")]
    NoCertificate,
    #[error("cannot make the --dev certificate")]
    DevCertificate(#[source] rcgen::Error),
    #[error(
        "--max-buffered-body-bytes ({buffered}) must be at least --max-body-bytes ({body}), or a body of the largest size could never be read"
    )]
    BudgetBelowBodyLimit { buffered: usize, body: usize },
    #[error("cannot load the TLS certificate {} with key {}", files.cert.display(), files.key.display())]
    CertificateFiles {
        files: CertFiles,
        #[source]
        source: CertError,
    },
    #[error("cannot load the in-memory TLS certificate")]
    CertificatePem(#[source] CertError),
    /// `flag` names the listener: `--listen` or `--metrics-listen`.
    #[error("cannot configure TLS for {flag}")]
    Tls {
        flag: &'static str,
        #[source]
        source: rustls::Error,
    },
    #[error(transparent)]
    Listen(#[from] ListenError),
    #[error("the server task panicked")]
    ServerPanicked(#[source] JoinError),
    #[error("the HTTPS listener panicked")]
    ListenerPanicked(#[source] JoinError),
    #[error("the HTTPS listener stopped unexpectedly")]
    ListenerStopped,
    #[error("the reconcile loop failed")]
    ControllerFailed(#[source] ControllerError),
    #[error("the reconcile loop panicked")]
    ControllerPanicked(#[source] JoinError),
    #[error("the reconcile loop stopped unexpectedly")]
    ControllerStopped,
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::path::PathBuf;

    use super::ServeError;
    use crate::error_chain::error_chain;
    use crate::tls_reload::{CertError, CertFiles};

    #[test]
    fn a_cause_is_printed_once() {
        let error = ServeError::CertificateFiles {
            files: CertFiles {
                cert: PathBuf::from("/tls/tls.crt"),
                key: PathBuf::from("/tls/tls.key"),
            },
            source: CertError::Read {
                path: "/tls/tls.crt".to_owned(),
                source: io::Error::from(io::ErrorKind::NotFound),
            },
        };
        assert_eq!(
            error_chain(&error),
            "cannot load the TLS certificate /tls/tls.crt with key /tls/tls.key: \
             cannot read /tls/tls.crt: entity not found"
        );
    }
}
