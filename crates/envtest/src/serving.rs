//! What a test needs to run `jobwarden serve` as a cluster would and to call it: a serving
//! certificate for 127.0.0.1 from a CA made for the test (as cert-manager would issue one), a
//! blocking HTTPS GET that trusts that CA and can carry a bearer token, as Prometheus scrapes
//! and the kubelet probes the metrics listener, and a plain-HTTP GET for `--metrics-secure=false`.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};

/// `tls.crt` and `tls.key` written in a folder, and the CA that signed them.
pub struct ServingCertificate {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca_pem: String,
}

/// A CA and a certificate it signed for 127.0.0.1, written in `dir`.
pub fn serving_certificate(dir: &Path) -> ServingCertificate {
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().expect("a key")).expect("a CA");
    let key = KeyPair::generate().expect("a key");
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .expect("params")
        .signed_by(&key, &ca)
        .expect("a serving certificate");
    let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert_path, cert.pem()).expect("tls.crt is written");
    std::fs::write(&key_path, key.serialize_pem()).expect("tls.key is written");
    ServingCertificate {
        cert: cert_path,
        key: key_path,
        ca_pem: ca.pem(),
    }
}

/// GET `path` over HTTPS on a loopback port, trusting `ca_pem` for 127.0.0.1, with `token` as
/// a bearer token when given: the whole response, status line first, or `None` when nothing
/// answers (or the TLS handshake fails).
pub fn https_get(port: u16, path: &str, ca_pem: &str, token: Option<&str>) -> Option<String> {
    https_request(port, "GET", path, ca_pem, token, None)
}

/// [`https_get`]'s POST of a JSON `body` (an AdmissionReview to `/validate`, say).
pub fn https_post(port: u16, path: &str, ca_pem: &str, body: &str) -> Option<String> {
    https_request(port, "POST", path, ca_pem, None, Some(body))
}

fn https_request(
    port: u16,
    method: &str,
    path: &str,
    ca_pem: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> Option<String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.ok()?).ok()?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from("127.0.0.1").ok()?;
    let connection = rustls::ClientConnection::new(Arc::new(config), name).ok()?;
    let tcp = TcpStream::connect(("127.0.0.1", port)).ok()?;
    tcp.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    let authorization = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let content = body
        .map(|b| {
            format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                b.len()
            )
        })
        .unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{authorization}{content}Connection: close\r\n\r\n{}",
        body.unwrap_or_default()
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = Vec::new();
    // A server that closes without TLS's close_notify still sent the whole response.
    match stream.read_to_end(&mut response) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !response.is_empty() => {}
        Err(_) => return None,
    }
    Some(String::from_utf8_lossy(&response).into_owned())
}

/// A plain-HTTP GET of `path` on a loopback port, such as `jobwarden serve`'s `/readyz` and
/// `/metrics`: the whole response, status line first, or `None` when nothing answers.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response)
}
