//! `jobwarden serve --dev` as a test starts it, the built binary or the image: where it listens
//! and its self-signed certificate, read from what it prints at start, and one request to each
//! listener (the webhook's over HTTPS, trusting that certificate; the metrics listener's, plain
//! HTTP under `--dev`).

use std::io::{BufRead as _, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use serde_json::Value;

/// A running `serve --dev`, killed when dropped.
pub struct DevServer {
    child: Child,
    /// `host:port` of the webhook (HTTPS) and of /healthz, /readyz and /metrics.
    pub https: String,
    pub metrics: String,
    pub cert_pem: String,
}

impl Drop for DevServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl DevServer {
    /// `jobwarden serve --dev` on free loopback ports from the built binary.
    pub fn start() -> DevServer {
        let mut command = Command::new(env!("CARGO_BIN_EXE_jobwarden"));
        command.args(DEV_ARGS).env_remove("KUBECONFIG");
        DevServer::start_with(command)
    }

    /// Starts `command`, which runs `jobwarden` with [`DEV_ARGS`], and waits until its JSON log
    /// says where it listens and it has printed its certificate.
    pub fn start_with(mut command: Command) -> DevServer {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("jobwarden serve --dev starts");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let mut addrs = None;
        let mut cert_pem = String::new();
        let mut in_cert = false;
        let mut seen = String::new();
        for line in lines.by_ref() {
            let line = line.expect("stderr is text");
            seen.push_str(&line);
            seen.push('\n');
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && v["message"] == "jobwarden webhook serving"
            {
                addrs = Some((
                    v["https_addr"].as_str().expect("https_addr").to_owned(),
                    v["metrics_addr"].as_str().expect("metrics_addr").to_owned(),
                ));
            }
            if line.starts_with("-----BEGIN CERTIFICATE-----") {
                in_cert = true;
            }
            if in_cert {
                cert_pem.push_str(&line);
                cert_pem.push('\n');
                in_cert = !line.starts_with("-----END CERTIFICATE-----");
            }
            // The log lines come from a background writer: in either order with the certificate.
            if addrs.is_some() && cert_pem.contains("-----END CERTIFICATE-----") {
                break;
            }
        }
        // Keep reading stderr so the server never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        let Some((https, metrics)) = addrs else {
            panic!("serve --dev never said where it listens; it printed:\n{seen}");
        };
        assert!(!cert_pem.is_empty(), "serve --dev prints its certificate");
        DevServer {
            child,
            https,
            metrics,
            cert_pem,
        }
    }

    /// POSTs `body` (JSON) to the webhook at `path` over HTTPS, trusting the server's own
    /// certificate for `localhost`: the status and the body.
    pub fn post(&self, path: &str, body: &str) -> (u16, String) {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        use rustls::pki_types::pem::PemObject as _;
        roots
            .add(
                rustls::pki_types::CertificateDer::from_pem_slice(self.cert_pem.as_bytes())
                    .expect("PEM"),
            )
            .expect("the --dev certificate as a root");
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connection = rustls::ClientConnection::new(
            Arc::new(config),
            "localhost".try_into().expect("a server name"),
        )
        .expect("a TLS client");
        let tcp = TcpStream::connect(&self.https).expect("connect to the webhook");
        let mut tls = rustls::StreamOwned::new(connection, tcp);
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        exchange(&mut tls, request.as_bytes())
    }

    /// GETs `path` from the metrics listener: the status and the body.
    pub fn get(&self, path: &str) -> (u16, String) {
        let mut tcp = TcpStream::connect(&self.metrics).expect("connect to the metrics listener");
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        exchange(&mut tcp, request.as_bytes())
    }
}

/// What `serve --dev` is started with: loopback ports the system picks, JSON logs.
pub const DEV_ARGS: [&str; 5] = [
    "serve",
    "--dev",
    "--listen=127.0.0.1:0",
    "--metrics-listen=127.0.0.1:0",
    "--log-format=json",
];

/// One HTTP/1.1 exchange: the status and the body.
fn exchange(stream: &mut (impl Read + Write), request: &[u8]) -> (u16, String) {
    stream.write_all(request).expect("send the request");
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .expect("read the response");
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("an HTTP status");
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}
