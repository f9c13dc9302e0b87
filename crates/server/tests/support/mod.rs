//! What the server tests share: a CA and serving certificates made in the test, written in the
//! layout kubelet gives a mounted Secret (`tls.crt -> ..data/tls.crt`, `..data -> ..<version>`),
//! the real server started on loopback ports, and a real rustls + hyper client for HTTP/1.1 and
//! HTTP/2. Every loop here is bounded by a count, so a broken server fails a test instead of
//! hanging it.
#![allow(dead_code)] // each test binary uses its own part of this module

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
use hyper::StatusCode;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use jobwarden_admission::Policy;
use jobwarden_server::{CertFiles, Limits, RunningServer, Settings, TlsSource};
use prometheus_client::registry::Registry;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::RootCertStore;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

pub mod reviews;

pub type Body = BoxBody<Bytes, Infallible>;

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

/// A certificate authority made for one test.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A serving certificate and key, PEM.
#[derive(Clone)]
pub struct ServingCert {
    pub cert_pem: String,
    pub key_pem: String,
    pub der: CertificateDer<'static>,
}

impl TestCa {
    pub fn new() -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "jobwarden test CA");
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        TestCa { issuer }
    }

    /// A serving certificate for localhost, as cert-manager would issue for the Service.
    pub fn issue(&self) -> ServingCert {
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        ServingCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
        }
    }

    pub fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots.add(self.issuer.der().clone()).unwrap();
        roots
    }
}

/// A directory laid out like a Secret volume, whose contents change the way kubelet changes
/// them: write a new hidden version directory, then atomically swap the `..data` symlink.
pub struct SecretVolume {
    dir: tempfile::TempDir,
    version: u32,
}

impl SecretVolume {
    pub fn new(cert_pem: &str, key_pem: &str) -> SecretVolume {
        let dir = tempfile::tempdir().unwrap();
        let mut volume = SecretVolume { dir, version: 0 };
        volume.swap(cert_pem, key_pem);
        std::os::unix::fs::symlink("..data/tls.crt", volume.path().join("tls.crt")).unwrap();
        std::os::unix::fs::symlink("..data/tls.key", volume.path().join("tls.key")).unwrap();
        volume
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn files(&self) -> CertFiles {
        CertFiles {
            cert: self.path().join("tls.crt"),
            key: self.path().join("tls.key"),
        }
    }

    /// Publishes new contents atomically, as kubelet's AtomicWriter does.
    pub fn swap(&mut self, cert_pem: &str, key_pem: &str) {
        self.version += 1;
        let version = format!("..v{}", self.version);
        let target = self.path().join(&version);
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("tls.crt"), cert_pem).unwrap();
        std::fs::write(target.join("tls.key"), key_pem).unwrap();
        let tmp = self.path().join("..data_tmp");
        std::os::unix::fs::symlink(&version, &tmp).unwrap();
        std::fs::rename(&tmp, self.path().join("..data")).unwrap();
    }
}

/// Settings for a test server on loopback ports, certificate polled often.
pub fn settings(files: CertFiles) -> Settings {
    Settings {
        listen: "127.0.0.1:0".parse().unwrap(),
        metrics_listen: "127.0.0.1:0".parse().unwrap(),
        tls: TlsSource::Files {
            files,
            poll_interval: Duration::from_millis(50),
        },
        policy: Policy::default(),
        policies: None,
        limits: Limits::default(),
        shutdown_delay: Duration::ZERO,
        shutdown_timeout: Duration::from_secs(30),
        metrics_secure: true,
    }
}

/// A CA, a Secret volume holding a certificate it issued, and the server serving it.
pub struct Harness {
    pub ca: TestCa,
    pub volume: SecretVolume,
    pub first: ServingCert,
    pub server: RunningServer,
}

impl Harness {
    pub async fn start() -> Harness {
        Harness::start_with(|_| {}).await
    }

    pub async fn start_with(adjust: impl FnOnce(&mut Settings)) -> Harness {
        Harness::start_with_cluster(None, adjust).await
    }

    /// The server with a cluster client (a fake one: `reviews`), so its metrics are secured.
    pub async fn start_with_cluster(
        cluster: Option<kube::Client>,
        adjust: impl FnOnce(&mut Settings),
    ) -> Harness {
        let ca = TestCa::new();
        let first = ca.issue();
        let volume = SecretVolume::new(&first.cert_pem, &first.key_pem);
        let mut settings = settings(volume.files());
        adjust(&mut settings);
        let server = jobwarden_server::start(settings, Registry::default(), cluster)
            .await
            .unwrap();
        Harness {
            ca,
            volume,
            first,
            server,
        }
    }

    pub fn client(&self) -> Client {
        Client::new(self.server.https_addr(), self.ca.roots())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Http1,
    Http2,
}

/// A client that trusts one CA.
#[derive(Clone)]
pub struct Client {
    addr: SocketAddr,
    roots: Arc<RootCertStore>,
}

enum Sender {
    Http1(http1::SendRequest<Body>),
    Http2(http2::SendRequest<Body>),
}

/// One TLS connection, HTTP/1.1 or HTTP/2.
pub struct Conn {
    sender: Sender,
    authority: String,
    /// The certificate the server presented in this connection's handshake.
    pub peer_cert: CertificateDer<'static>,
}

/// What came back.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub content_type: String,
    pub body: Bytes,
}

impl Answer {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

impl Client {
    pub fn new(addr: SocketAddr, roots: RootCertStore) -> Client {
        Client {
            addr,
            roots: Arc::new(roots),
        }
    }

    pub async fn connect(&self, proto: Proto) -> std::io::Result<Conn> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(std::io::Error::other)?
            .with_root_certificates(self.roots.clone())
            .with_no_client_auth();
        config.alpn_protocols = vec![match proto {
            Proto::Http1 => b"http/1.1".to_vec(),
            Proto::Http2 => b"h2".to_vec(),
        }];
        let tcp = TcpStream::connect(self.addr).await?;
        let name = ServerName::try_from("localhost").map_err(std::io::Error::other)?;
        let tls = TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await?;
        let (_, session) = tls.get_ref();
        let peer_cert = session
            .peer_certificates()
            .and_then(|c| c.first())
            .cloned()
            .ok_or_else(|| std::io::Error::other("no peer certificate"))?;
        let alpn = session.alpn_protocol().map(<[u8]>::to_vec);
        let io = TokioIo::new(tls);
        let sender = match proto {
            Proto::Http1 => {
                assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]));
                let (sender, connection) =
                    http1::handshake(io).await.map_err(std::io::Error::other)?;
                tokio::spawn(connection);
                Sender::Http1(sender)
            }
            Proto::Http2 => {
                assert_eq!(alpn.as_deref(), Some(&b"h2"[..]));
                let (sender, connection) = http2::handshake(TokioExecutor::new(), io)
                    .await
                    .map_err(std::io::Error::other)?;
                tokio::spawn(connection);
                Sender::Http2(sender)
            }
        };
        Ok(Conn {
            sender,
            authority: format!("localhost:{}", self.addr.port()),
            peer_cert,
        })
    }
}

impl Conn {
    pub fn request(&self, method: &str, path: &str) -> hyper::http::request::Builder {
        let builder = hyper::Request::builder().method(method);
        match self.sender {
            // HTTP/2 carries the authority in the request line; HTTP/1.1 in Host.
            Sender::Http2(_) => builder.uri(format!("https://{}{path}", self.authority)),
            Sender::Http1(_) => builder.uri(path).header("host", &self.authority),
        }
    }

    pub async fn send(&mut self, request: hyper::Request<Body>) -> hyper::Result<Answer> {
        let response = match &mut self.sender {
            Sender::Http1(sender) => {
                sender.ready().await?;
                sender.send_request(request).await?
            }
            Sender::Http2(sender) => {
                sender.ready().await?;
                sender.send_request(request).await?
            }
        };
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let body = response.into_body().collect().await?.to_bytes();
        Ok(Answer {
            status,
            content_type,
            body,
        })
    }

    /// POSTs a JSON body to `path`.
    pub async fn post_json(&mut self, path: &str, body: impl Into<Bytes>) -> hyper::Result<Answer> {
        let body = body.into();
        let request = self
            .request("POST", path)
            .header("content-type", "application/json")
            .header("content-length", body.len())
            .body(full(body))
            .unwrap();
        self.send(request).await
    }
}

/// What became of a request that the server may refuse before reading its body (a declared
/// `Content-Length` over the limit): the contract is an answer, or the connection closed under
/// a client still sending the body. Never a review.
#[derive(Debug)]
pub enum Refusal {
    /// The server's answer reached the client.
    Answered(Answer),
    /// The server closed the connection (HTTP/1.1) or reset the stream (HTTP/2) while the
    /// client was still writing the body; whatever it answered was lost with the connection.
    Closed,
}

impl Conn {
    /// Sends a request the server may refuse unread. Any error other than the connection or
    /// stream being closed under the request is returned as it came.
    pub async fn send_refusable(
        &mut self,
        request: hyper::Request<Body>,
    ) -> hyper::Result<Refusal> {
        match self.send(request).await {
            Ok(answer) => Ok(Refusal::Answered(answer)),
            Err(error) if closed_under_request(&error) => Ok(Refusal::Closed),
            Err(error) => Err(error),
        }
    }
}

/// Whether `error` says the peer closed the connection, or reset the stream, under a request:
/// judged from the error's kind and its causes, never from its message.
pub fn closed_under_request(error: &hyper::Error) -> bool {
    if error.is_closed() || error.is_incomplete_message() || error.is_canceled() {
        return true;
    }
    let mut cause = std::error::Error::source(error);
    while let Some(current) = cause {
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            if matches!(
                io.kind(),
                BrokenPipe | ConnectionReset | ConnectionAborted | UnexpectedEof
            ) {
                return true;
            }
        }
        if let Some(h2) = current.downcast_ref::<h2::Error>()
            && (h2.is_reset() || h2.is_go_away())
        {
            return true;
        }
        cause = current.source();
    }
    false
}

/// GET over plain HTTP (the metrics listener).
pub async fn http_get(addr: SocketAddr, path: &str) -> (StatusCode, String) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = http1::handshake::<_, Body>(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::get(path)
        .header("host", addr.to_string())
        .body(full(Bytes::new()))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// The value of one metric line (`name{labels} value`), summed over the lines starting with
/// `prefix`.
pub async fn metric(addr: SocketAddr, prefix: &str) -> f64 {
    let (_, text) = http_get(addr, "/metrics").await;
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Polls `check` up to `attempts` times, 20 ms apart; true as soon as it holds. Callers give
/// a minute (3000) or so: on a busy machine a debug build can be slow, and a passing check
/// returns at once anyway.
pub async fn eventually<F, Fut>(attempts: u32, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..attempts {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// A valid Job create review, for tests that need any answerable request.
pub fn job_review(uid: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
            "name": "pi",
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "admin", "groups": ["system:masters"]},
            "object": {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "pi", "namespace": "default"},
                "spec": {
                    "completions": 1,
                    "parallelism": 1,
                    "backoffLimit": 6,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "pi", "image": "perl:5"}]
                        }
                    }
                }
            },
            "oldObject": null,
            "dryRun": false
        }
    }))
    .unwrap()
}

/// What `jobwarden review` prints for `body` with the default policy.
pub fn expected(webhook: jobwarden_admission::Webhook, body: &[u8]) -> Vec<u8> {
    jobwarden_admission::Reviewer::new(Policy::default())
        .review(webhook, body, &jobwarden_admission::Context::default())
        .unwrap()
        .body
}
