//! The serving certificate: parsed from PEM, held where every new TLS handshake picks it up, and
//! replaced when the files on disk change. A new certificate that does not load never replaces
//! a working one; the old one keeps serving and the failure is logged and counted.
//!
//! Files are polled by content rather than watched with inotify: Kubernetes updates a mounted
//! Secret by swapping a `..data` symlink, which leaves the watched `tls.crt` path untouched.

use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::error_chain::error_chain;
use crate::metrics::Metrics;

/// Why a certificate could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("cannot read {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the certificate file holds no PEM CERTIFICATE block")]
    NoCertificate,
    #[error("the certificate file is not valid PEM: {0}")]
    CertificatePem(String),
    #[error("the key file holds no PEM private key: {0}")]
    KeyPem(String),
    #[error("the certificate cannot be parsed: {0}")]
    Certificate(String),
    #[error("the key does not load or does not match the certificate: {0}")]
    Key(rustls::Error),
}

/// A certificate ready to serve, with what logs and metrics say about it.
#[derive(Debug, Clone)]
pub struct LoadedCert {
    pub key: Arc<CertifiedKey>,
    /// notAfter, Unix seconds.
    pub not_after: i64,
    pub subject: String,
    pub dns_names: Vec<String>,
}

/// Parses a PEM chain (leaf first) and its PEM private key, checking that they belong together.
pub fn load_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<LoadedCert, CertError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CertError::CertificatePem(e.to_string()))?;
    let leaf = chain.first().ok_or(CertError::NoCertificate)?;
    let (not_after, subject, dns_names) = describe(leaf)?;
    let key =
        PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| CertError::KeyPem(e.to_string()))?;
    let key = CertifiedKey::from_der(chain, key, &provider()).map_err(CertError::Key)?;
    Ok(LoadedCert {
        key: Arc::new(key),
        not_after,
        subject,
        dns_names,
    })
}

fn describe(leaf: &CertificateDer<'_>) -> Result<(i64, String, Vec<String>), CertError> {
    let (_, cert) = x509_parser::parse_x509_certificate(leaf)
        .map_err(|e| CertError::Certificate(e.to_string()))?;
    let dns_names = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    x509_parser::extensions::GeneralName::DNSName(dns) => Some(dns.to_string()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    Ok((
        cert.validity().not_after.timestamp(),
        cert.subject().to_string(),
        dns_names,
    ))
}

/// The crypto provider jobwarden serves with (ring), named once so every config agrees.
pub fn provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

/// The TLS server configuration: TLS 1.3 and 1.2 only (rustls has nothing older), HTTP/2 and
/// HTTP/1.1 offered by ALPN, the certificate taken from `store` at every handshake.
pub fn server_config(store: Arc<CertStore>) -> Result<ServerConfig, rustls::Error> {
    let mut config = ServerConfig::builder_with_provider(Arc::new(provider()))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(store);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Counts of certificate loads, for readiness and for tests that wait on a reload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReloadCounts {
    /// Certificates loaded after the first.
    pub loaded: u64,
    /// New file contents that could not be loaded.
    pub failed: u64,
}

/// The certificate every new handshake uses.
#[derive(Debug)]
pub struct CertStore {
    current: RwLock<Arc<CertifiedKey>>,
}

impl CertStore {
    pub fn new(first: &LoadedCert) -> Self {
        CertStore {
            current: RwLock::new(first.key.clone()),
        }
    }

    fn replace(&self, next: &LoadedCert) {
        // A poisoned lock only means a panic elsewhere while holding it; the Arc inside is
        // still whole, so keep serving rather than fail every handshake.
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = next.key.clone();
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        )
    }
}

/// Where the certificate and key live on disk.
#[derive(Debug, Clone)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl CertFiles {
    async fn read(&self) -> Result<(Vec<u8>, Vec<u8>), CertError> {
        let read = |path: PathBuf| async move {
            tokio::fs::read(&path)
                .await
                .map_err(|source| CertError::Read {
                    path: path.display().to_string(),
                    source,
                })
        };
        Ok((
            read(self.cert.clone()).await?,
            read(self.key.clone()).await?,
        ))
    }

    /// Loads the certificate once, at start: failing here stops the server.
    pub async fn load(&self) -> Result<(LoadedCert, Vec<u8>, Vec<u8>), CertError> {
        let (cert, key) = self.read().await?;
        let loaded = load_pem(&cert, &key)?;
        Ok((loaded, cert, key))
    }
}

/// What the reloader saw on disk, so an unchanged file (good or bad) is not reloaded or
/// reported again at every poll.
#[derive(PartialEq, Eq)]
enum Seen {
    Contents(Vec<u8>, Vec<u8>),
    ReadError(String),
}

/// Polls the files every `interval` until cancelled and swaps in each new certificate that
/// loads.
///
/// A new certificate that loads is used at once. One that does not is reported only when the
/// same contents are read again at the next poll: the two files cannot be read atomically, so
/// a read can straddle kubelet's symlink swap (new certificate, old key), and writers that
/// replace the files one by one leave a mismatched pair for a moment. Neither is an error.
pub(crate) async fn watch_files(
    files: CertFiles,
    initial: (Vec<u8>, Vec<u8>),
    interval: Duration,
    store: Arc<CertStore>,
    metrics: Arc<Metrics>,
    counts: watch::Sender<ReloadCounts>,
    stop: CancellationToken,
) {
    let mut current = Seen::Contents(initial.0, initial.1);
    let mut unsettled: Option<Seen> = None;
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let (now, outcome) = match files.read().await {
            Ok((cert, key)) => {
                let outcome = if Seen::Contents(cert.clone(), key.clone()) == current {
                    None
                } else {
                    Some(load_pem(&cert, &key))
                };
                (Seen::Contents(cert, key), outcome)
            }
            Err(e) => {
                let now = Seen::ReadError(error_chain(&e));
                let outcome = (now != current).then_some(Err(e));
                (now, outcome)
            }
        };
        match outcome {
            None => unsettled = None,
            Some(Ok(loaded)) => {
                current = now;
                unsettled = None;
                store.replace(&loaded);
                metrics.certificate_loaded(false, loaded.not_after);
                counts.send_modify(|c| c.loaded += 1);
                tracing::info!(
                    subject = %loaded.subject,
                    dns_names = ?loaded.dns_names,
                    not_after = loaded.not_after,
                    "serving a new TLS certificate"
                );
            }
            Some(Err(error)) if unsettled.as_ref() != Some(&now) => {
                tracing::debug!(
                    error = error_chain(&error),
                    "new TLS certificate files do not load yet; checking again"
                );
                unsettled = Some(now);
            }
            Some(Err(error)) => {
                current = now;
                unsettled = None;
                metrics.certificate_reload_failed();
                counts.send_modify(|c| c.failed += 1);
                tracing::error!(
                    error = error_chain(&error),
                    cert = %files.cert.display(),
                    key = %files.key.display(),
                    "new TLS certificate files do not load; the previous certificate keeps serving"
                );
            }
        }
    }
}
