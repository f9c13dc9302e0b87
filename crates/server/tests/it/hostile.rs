//! Hostile requests, each sent to a real server over real sockets: what a confused or malicious
//! client can do to the admission port. Every one gets a clear answer (a 4xx with a message, or
//! the connection closed when there is no HTTP to answer in), and after each the server still
//! reviews a good request. Timeouts are set short here so the slow attacks end quickly; no test
//! asserts on how long anything took, and every wait is bounded.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use jobwarden_admission::Webhook;
use jobwarden_server::Settings;
use rustls::pki_types::ServerName;
use support::{
    Answer, Conn, Harness, Proto, Refusal, eventually, expected, full, job_review, metric,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// A bound on every wait in this file, far above the server's own short timeouts: a server
/// that never answers fails the test instead of hanging it.
const PATIENCE: Duration = Duration::from_secs(60);

const MAX_BODY: usize = 1024 * 1024;

fn short_limits(s: &mut Settings) {
    s.limits.max_body_bytes = MAX_BODY;
    s.limits.request_timeout = Duration::from_secs(2);
    s.limits.header_timeout = Duration::from_secs(2);
    s.limits.tls_handshake_timeout = Duration::from_secs(2);
}

async fn hostile_server() -> Harness {
    Harness::start_with(short_limits).await
}

/// The server still answers a good review, on a new connection of each protocol.
async fn still_serving(harness: &Harness, uid: &str) {
    for proto in [Proto::Http1, Proto::Http2] {
        let mut conn = harness.client().connect(proto).await.unwrap();
        let body = job_review(uid);
        let answer = conn.post_json("/validate", body.clone()).await.unwrap();
        assert_eq!(answer.status, 200, "{}", answer.text());
        assert_eq!(answer.body.as_ref(), expected(Webhook::Validate, &body));
    }
}

async fn post(conn: &mut Conn, body: impl Into<Bytes>) -> Answer {
    let body = body.into();
    let request = conn
        .request("POST", "/validate")
        .header("content-type", "application/json")
        .header("content-length", body.len())
        .body(full(body))
        .unwrap();
    tokio::time::timeout(PATIENCE, conn.send(request))
        .await
        .expect("an answer")
        .unwrap()
}

/// A review whose Job is `spec` (merged over a minimal valid spec).
fn review_with_spec(uid: &str, spec: &str) -> Vec<u8> {
    let good = String::from_utf8(job_review(uid)).unwrap();
    let marker = "\"spec\":{";
    let at = good.find(marker).unwrap() + marker.len();
    format!("{}{spec},{}", &good[..at], &good[at..]).into_bytes()
}

/// A TLS connection speaking HTTP/1.1, for writing raw bytes.
async fn raw_tls(harness: &Harness) -> TlsStream<TcpStream> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(harness.ca.roots())
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(harness.server.https_addr())
        .await
        .unwrap();
    TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap()
}

/// Everything the peer sends until it closes (or resets) the connection.
async fn read_to_close(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> String {
    let mut got = Vec::new();
    let read = tokio::time::timeout(PATIENCE, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server never closed the connection");
    String::from_utf8_lossy(&got).into_owned()
}

/// Bodies a client controls: each is refused with a 4xx that says why, or, when it is a
/// readable AdmissionReview, denied with a message naming the field. HTTP/1.1 and HTTP/2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_bodies_get_a_clear_answer() {
    // One connection carries every case, and building the largest bodies takes a while in a
    // debug build on a busy machine: keep it from being closed as idle in between.
    let harness = Harness::start_with(|s| {
        short_limits(s);
        s.limits.header_timeout = PATIENCE;
    })
    .await;
    let good = job_review("hostile-body");
    let deep = |depth: usize| {
        let mut body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"deep","object":"#.to_vec();
        body.extend(std::iter::repeat_n(b'[', depth));
        body.extend(std::iter::repeat_n(b']', depth));
        body.extend_from_slice(b"}}");
        body
    };
    let mut invalid_utf8 = good.clone();
    let at = invalid_utf8
        .windows(4)
        .position(|w| w == b"\"pi\"")
        .unwrap();
    invalid_utf8[at + 1] = 0xff;
    invalid_utf8[at + 2] = 0xfe;
    let duplicate_uid = String::from_utf8(good.clone())
        .unwrap()
        .replacen("\"uid\":", "\"uid\":\"first\",\"uid\":", 1)
        .into_bytes();
    let duplicate_in_spec = review_with_spec("dup-spec", r#""parallelism":1,"parallelism":1000"#);

    // (what, body, status, the answer says)
    let refused: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "body over the limit",
            vec![b' '; MAX_BODY + 1],
            413,
            "larger than the limit",
        ),
        (
            "nested 100 000 deep",
            deep(100_000),
            400,
            "recursion limit exceeded",
        ),
        (
            "nested 1 000 000 deep, unclosed",
            vec![b'['; 1_000_000],
            400,
            "recursion limit exceeded",
        ),
        (
            "invalid UTF-8 in a string",
            invalid_utf8,
            400,
            "cannot be read as JSON",
        ),
        (
            "duplicate key in the envelope",
            duplicate_uid,
            400,
            "duplicate key \"uid\"",
        ),
        (
            "duplicate key in the Job",
            duplicate_in_spec,
            400,
            "duplicate key \"parallelism\"",
        ),
    ];
    // Readable reviews whose numbers do not fit: denied, naming the field.
    let out_of_range: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "completions 2^31",
            review_with_spec("r1", r#""completions":2147483648"#),
            "completions",
        ),
        (
            "completions 1e400",
            review_with_spec("r2", r#""completions":1e400"#),
            "number out of range",
        ),
        (
            "parallelism -2^63-1",
            review_with_spec("r3", r#""parallelism":-9223372036854775809"#),
            "parallelism",
        ),
        (
            "parallelism 1.5",
            review_with_spec("r4", r#""parallelism":1.5"#),
            "parallelism",
        ),
        (
            "parallelism 10^30",
            review_with_spec("r5", r#""parallelism":1000000000000000000000000000000"#),
            "parallelism",
        ),
    ];
    let mut too_large = 0;
    for proto in [Proto::Http1, Proto::Http2] {
        for (what, body, status, says) in &refused {
            // A refused HTTP/1.1 body may be left unread, so each case gets its own connection.
            let mut conn = harness.client().connect(proto).await.unwrap();
            let request = conn
                .request("POST", "/validate")
                .header("content-type", "application/json")
                .header("content-length", body.len())
                .body(full(body.clone()))
                .unwrap();
            let outcome = tokio::time::timeout(PATIENCE, conn.send_refusable(request))
                .await
                .expect("an answer")
                .unwrap_or_else(|error| panic!("{what} ({proto:?}): {error}"));
            if *status == 413 {
                too_large += 1;
            }
            let answer = match outcome {
                Refusal::Answered(answer) => answer,
                // The server answers 413 from the Content-Length and closes without reading
                // the body; a client still writing it may see the close before the answer.
                // Which one it sees is a race; the server's own count below says it refused.
                Refusal::Closed if *status == 413 => continue,
                Refusal::Closed => panic!("{what} ({proto:?}): closed without an answer"),
            };
            assert_eq!(
                answer.status,
                *status,
                "{what} ({proto:?}): {}",
                answer.text()
            );
            assert!(
                answer.text().contains(says),
                "{what} ({proto:?}): {}",
                answer.text()
            );
        }
        let mut conn = harness.client().connect(proto).await.unwrap();
        for (what, body, says) in &out_of_range {
            let answer = post(&mut conn, body.clone()).await;
            if answer.status == 200 {
                let json = answer.json();
                assert_eq!(json["response"]["allowed"], false, "{what}: {json}");
                let message = json["response"]["status"]["message"].as_str().unwrap_or("");
                assert!(message.contains(says), "{what}: {json}");
            } else {
                assert_eq!(answer.status, 400, "{what}: {}", answer.text());
                assert!(answer.text().contains(says), "{what}: {}", answer.text());
            }
        }
        still_serving(&harness, "after-bodies").await;
    }
    // Every oversize body was refused as such by the server, whatever the client saw: none
    // was reviewed.
    let metrics = harness.server.metrics_addr();
    assert!(
        eventually(3000, || async {
            metric(metrics, TOO_LARGE).await == f64::from(too_large)
        })
        .await,
        "{} refused as too large, want {too_large}",
        metric(metrics, TOO_LARGE).await
    );
}

/// The server's count of requests refused for their size.
const TOO_LARGE: &str = "jobwarden_admission_requests_total{endpoint=\"validate\",operation=\"unknown\",verdict=\"too_large\"}";

/// A 100 MiB Content-Length and no body: refused before a byte of it is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_content_length_with_no_body_is_refused_at_once() {
    let harness = hostile_server().await;
    for proto in [Proto::Http1, Proto::Http2] {
        let mut conn = harness.client().connect(proto).await.unwrap();
        let (_tx, body) =
            http_body_util::channel::Channel::<Bytes, std::convert::Infallible>::new(1);
        let request = conn
            .request("POST", "/validate")
            .header("content-type", "application/json")
            .header("content-length", 100 * 1024 * 1024)
            .body(http_body_util::BodyExt::boxed(body))
            .unwrap();
        let answer = tokio::time::timeout(PATIENCE, conn.send(request))
            .await
            .expect("an answer")
            .unwrap();
        assert_eq!(answer.status, 413, "{proto:?}: {}", answer.text());
        assert!(answer.text().contains("larger than the limit"));
    }
    still_serving(&harness, "after-content-length").await;
}

/// A body that starts and never finishes: 408 when the request deadline passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_finishes_gets_408() {
    let harness = hostile_server().await;
    for proto in [Proto::Http1, Proto::Http2] {
        let mut conn = harness.client().connect(proto).await.unwrap();
        let (mut tx, body) =
            http_body_util::channel::Channel::<Bytes, std::convert::Infallible>::new(1);
        let request = conn
            .request("POST", "/validate")
            .header("content-type", "application/json")
            .header("content-length", 10_000)
            .body(http_body_util::BodyExt::boxed(body))
            .unwrap();
        tx.send_data(Bytes::from_static(b"{\"apiVersion\":"))
            .await
            .unwrap();
        let answer = tokio::time::timeout(PATIENCE, conn.send(request))
            .await
            .expect("an answer")
            .unwrap();
        assert_eq!(answer.status, 408, "{proto:?}: {}", answer.text());
        drop(tx);
    }
    still_serving(&harness, "after-slow-body").await;
}

/// Slowloris: request headers one byte a second. The header timeout ends it with a 408 and
/// the connection is closed, while other clients are served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_sent_one_byte_a_second_are_cut_off() {
    let harness = hostile_server().await;
    let mut stream = raw_tls(&harness).await;
    let head = b"POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n";
    let mut written = 0;
    for byte in head {
        if stream.write_all(&[*byte]).await.is_err() || stream.flush().await.is_err() {
            break;
        }
        written += 1;
        tokio::time::sleep(Duration::from_secs(1)).await;
        // Served meanwhile.
        if written == 1 {
            still_serving(&harness, "during-slowloris").await;
        }
    }
    assert!(
        written < head.len(),
        "the server waited for all {} bytes",
        head.len()
    );
    // hyper closes the connection at the header timeout (without a 408: the request line
    // never arrived, so there is no request to answer).
    let answer = read_to_close(&mut stream).await;
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer:?}"
    );
    still_serving(&harness, "after-slowloris").await;
}

/// A client that opens TCP and starts (or never starts) a TLS handshake: the connection is
/// closed at the handshake timeout, and others are served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_handshake_that_never_completes_is_closed() {
    let harness = hostile_server().await;
    let addr = harness.server.https_addr();
    let mut silent = TcpStream::connect(addr).await.unwrap();
    // The first bytes of a TLS record (handshake, TLS 1.0 framing, length 512), then nothing.
    let mut partial = TcpStream::connect(addr).await.unwrap();
    partial
        .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .await
        .unwrap();
    still_serving(&harness, "during-handshakes").await;
    assert_eq!(read_to_close(&mut silent).await, "");
    assert_eq!(read_to_close(&mut partial).await, "");
    still_serving(&harness, "after-handshakes").await;
}

/// Plain HTTP to the TLS port: an HTTP 400 that says to use HTTPS, then the connection closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_to_the_tls_port_is_told_to_use_https() {
    let harness = hostile_server().await;
    let body = job_review("plain");
    let mut stream = TcpStream::connect(harness.server.https_addr())
        .await
        .unwrap();
    let head = format!(
        "POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body).await.unwrap();
    let answer = read_to_close(&mut stream).await;
    assert!(
        answer.starts_with("HTTP/1.0 400 Bad Request\r\n"),
        "{answer:?}"
    );
    assert!(answer.contains("HTTPS"), "{answer:?}");
    still_serving(&harness, "after-plain-http").await;
}

/// Thousands of idle connections: half never start TLS (closed at the handshake timeout), half
/// finish it and send nothing (closed at the idle timeout). A real client is served while they
/// are open, and the server closes every one of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_idle_connections_do_not_stop_service() {
    // Two file descriptors per connection in this process (client and server side), plus
    // what the test runner holds; scale down honestly where the limit is low.
    let limit = fd_limit();
    let idle = 2000.min((limit.saturating_sub(200) / 2) as usize);
    if idle < 100 {
        eprintln!(
            "skipping: a file descriptor limit of {limit} leaves room for {idle} connections"
        );
        return;
    }
    let harness = hostile_server().await;
    let addr = harness.server.https_addr();
    let mut raw = Vec::new();
    let mut tls = Vec::new();
    for i in 0..idle {
        if i % 2 == 0 {
            raw.push(TcpStream::connect(addr).await.unwrap());
        } else {
            tls.push(raw_tls(&harness).await);
        }
    }
    still_serving(&harness, "during-idle-flood").await;
    for stream in &mut raw {
        assert_eq!(read_to_close(stream).await, "");
    }
    for stream in &mut tls {
        assert_eq!(read_to_close(stream).await, "");
    }
    still_serving(&harness, "after-idle-flood").await;
}

/// Clients that finish the TLS handshake and then say nothing take every connection slot; the
/// idle timeout frees them, so a real client waiting in the backlog is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_cannot_hold_every_slot() {
    let harness = Harness::start_with(|s| {
        short_limits(s);
        s.limits.max_connections = 8;
    })
    .await;
    let mut silent = Vec::new();
    for _ in 0..8 {
        silent.push(raw_tls(&harness).await);
    }
    still_serving(&harness, "after-silent-clients").await;
    for stream in &mut silent {
        assert_eq!(read_to_close(stream).await, "");
    }
}

fn fd_limit() -> u64 {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|soft| soft.parse().ok())
        .unwrap_or(1024)
}
