//! The server over its life: certificate rotation on disk while requests stream in, a bad new
//! certificate that must not replace the good one, the operations endpoints, and the drain on
//! shutdown with a request still in flight.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bytes::Bytes;
use jobwarden_admission::Webhook;
use jobwarden_server::ReloadCounts;
use support::{Client, Harness, Proto, expected, http_get, job_review, metric};
use tokio::sync::watch;

/// Waits (bounded by a count of changes and a generous guard) until `ready` holds.
async fn wait_for(
    counts: &mut watch::Receiver<ReloadCounts>,
    ready: impl Fn(&ReloadCounts) -> bool,
) -> ReloadCounts {
    let waited = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        counts.wait_for(|c| ready(c)),
    )
    .await;
    *waited
        .expect("the certificate reloader never acted")
        .expect("the certificate reloader stopped")
}

/// Sends one review on `conn` and checks the answer; false on any failure.
async fn one_request(conn: &mut support::Conn, uid: &str) -> bool {
    let body = job_review(uid);
    match conn.post_json("/validate", body.clone()).await {
        Ok(answer) => {
            answer.status == 200 && answer.body.as_ref() == expected(Webhook::Validate, &body)
        }
        Err(_) => false,
    }
}

/// Streams requests from several clients until `stop`: some reuse one connection (HTTP/1.1
/// keep-alive, HTTP/2), some open a new connection (a new handshake) for every request.
/// Each worker is bounded in count. Returns (requests, failures).
fn stream_requests(
    client: Client,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(usize, usize)> {
    tokio::spawn(async move {
        let sent = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(AtomicUsize::new(0));
        let mut workers = Vec::new();
        for (i, (proto, reuse)) in [
            (Proto::Http1, true),
            (Proto::Http2, true),
            (Proto::Http1, false),
            (Proto::Http2, false),
        ]
        .into_iter()
        .enumerate()
        {
            let (client, stop, sent, failed) =
                (client.clone(), stop.clone(), sent.clone(), failed.clone());
            workers.push(tokio::spawn(async move {
                let mut kept = None;
                for n in 0..5_000 {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let conn = match (reuse, kept.take()) {
                        (true, Some(conn)) => Ok(conn),
                        _ => client.connect(proto).await,
                    };
                    let ok = match conn {
                        Ok(mut conn) => {
                            let ok = one_request(&mut conn, &format!("w{i}-{n}")).await;
                            if reuse {
                                kept = Some(conn);
                            }
                            ok
                        }
                        Err(_) => false,
                    };
                    sent.fetch_add(1, Ordering::SeqCst);
                    if !ok {
                        failed.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }));
        }
        for worker in workers {
            worker.await.unwrap();
        }
        (sent.load(Ordering::SeqCst), failed.load(Ordering::SeqCst))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_on_disk_is_picked_up_without_a_failed_request() {
    let mut harness = Harness::start().await;
    let client = harness.client();
    let mut reloads = harness.server.certificate_reloads();
    let mut before = client.connect(Proto::Http2).await.unwrap();
    assert_eq!(before.peer_cert, harness.first.der);

    let stop = Arc::new(AtomicBool::new(false));
    let stream = stream_requests(client.clone(), stop.clone());
    let metrics = harness.server.metrics_addr();
    // Rotate once requests are flowing.
    assert!(
        support::eventually(3000, || async {
            metric(metrics, "jobwarden_admission_requests_total{").await >= 20.0
        })
        .await
    );
    let second = harness.ca.issue();
    harness.volume.swap(&second.cert_pem, &second.key_pem);
    let counts = wait_for(&mut reloads, |c| c.loaded >= 1).await;
    assert_eq!(
        counts,
        ReloadCounts {
            loaded: 1,
            failed: 0
        }
    );

    // New handshakes get the new certificate; a connection made before keeps working.
    let mut after = client.connect(Proto::Http1).await.unwrap();
    assert_eq!(after.peer_cert, second.der);
    assert!(one_request(&mut after, "after-rotation").await);
    assert!(one_request(&mut before, "kept-connection").await);

    // Keep streaming across a second rotation too.
    let third = harness.ca.issue();
    harness.volume.swap(&third.cert_pem, &third.key_pem);
    wait_for(&mut reloads, |c| c.loaded >= 2).await;
    let seen = metric(metrics, "jobwarden_admission_requests_total{").await;
    assert!(
        support::eventually(3000, || async {
            metric(metrics, "jobwarden_admission_requests_total{").await >= seen + 20.0
        })
        .await
    );
    stop.store(true, Ordering::SeqCst);
    let (sent, failed) = stream.await.unwrap();
    assert!(sent >= 40, "only {sent} requests streamed");
    assert_eq!(
        failed, 0,
        "{failed} of {sent} requests failed during rotation"
    );
    assert_eq!(
        client.connect(Proto::Http2).await.unwrap().peer_cert,
        third.der
    );

    assert_eq!(
        metric(metrics, "jobwarden_tls_certificate_reloads_total").await,
        2.0
    );
    assert_eq!(
        metric(metrics, "jobwarden_tls_certificate_reload_failures_total").await,
        0.0
    );
    harness.server.shutdown_token().cancel();
    harness.server.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_new_certificate_keeps_the_old_one_serving() {
    let mut harness = Harness::start().await;
    let client = harness.client();
    let mut reloads = harness.server.certificate_reloads();
    let metrics = harness.server.metrics_addr();
    let other = harness.ca.issue();

    let bad: [(&str, String, String); 4] = [
        ("not PEM", "garbage".to_owned(), other.key_pem.clone()),
        ("empty files", String::new(), String::new()),
        // A certificate with someone else's key: the classic half-finished rotation.
        (
            "mismatched key",
            other.cert_pem.clone(),
            harness.first.key_pem.clone(),
        ),
        (
            "key missing",
            other.cert_pem.clone(),
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".to_owned(),
        ),
    ];
    for (n, (what, cert, key)) in bad.iter().enumerate() {
        harness.volume.swap(cert, key);
        wait_for(&mut reloads, |c| c.failed > n as u64).await;
        let mut conn = client.connect(Proto::Http2).await.unwrap();
        assert_eq!(
            conn.peer_cert, harness.first.der,
            "{what}: the old certificate must serve"
        );
        assert!(one_request(&mut conn, what).await, "{what}");
    }
    assert_eq!(
        metric(metrics, "jobwarden_tls_certificate_reload_failures_total").await,
        4.0
    );
    let (status, _) = http_get(metrics, "/readyz").await;
    assert_eq!(status, 200);

    // A good certificate afterwards is taken up.
    harness.volume.swap(&other.cert_pem, &other.key_pem);
    wait_for(&mut reloads, |c| c.loaded >= 1).await;
    assert_eq!(
        client.connect(Proto::Http1).await.unwrap().peer_cert,
        other.der
    );
    harness.server.shutdown_token().cancel();
    harness.server.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_certificate_at_start_stops_the_server_with_a_clear_message() {
    let ca = support::TestCa::new();
    let good = ca.issue();
    let volume = support::SecretVolume::new(&good.cert_pem, "not a key");
    let error = jobwarden_server::start(
        support::settings(volume.files()),
        prometheus_client::registry::Registry::default(),
        None,
    )
    .await
    .err()
    .expect("the server must not start");
    let message = format!("{error:#}");
    assert!(
        message.contains("cannot load the TLS certificate"),
        "{message}"
    );
    assert!(message.contains("tls.key"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_and_metrics() {
    let harness = Harness::start().await;
    let metrics = harness.server.metrics_addr();
    assert_eq!(
        http_get(metrics, "/healthz").await,
        (hyper::StatusCode::OK, "ok\n".to_owned())
    );
    assert_eq!(
        http_get(metrics, "/readyz").await,
        (hyper::StatusCode::OK, "ok\n".to_owned())
    );

    let mut conn = harness.client().connect(Proto::Http2).await.unwrap();
    assert!(one_request(&mut conn, "metrics-1").await);
    let (status, text) = http_get(metrics, "/metrics").await;
    assert_eq!(status, 200);
    for family in [
        "jobwarden_admission_requests_total{endpoint=\"validate\",operation=\"CREATE\",verdict=",
        "jobwarden_admission_request_duration_seconds_bucket{",
        "jobwarden_admission_requests_in_flight 0",
        "jobwarden_tls_certificate_reloads_total 0",
        "jobwarden_tls_certificate_reload_failures_total 0",
        "jobwarden_tls_certificate_expiry_timestamp_seconds ",
    ] {
        assert!(text.contains(family), "{family} missing from:\n{text}");
    }
    assert!(text.ends_with("# EOF\n"));
    harness.server.shutdown_token().cancel();
    harness.server.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_in_flight_requests_then_stops() {
    let harness = Harness::start().await;
    let metrics = harness.server.metrics_addr();
    let client = harness.client();
    let idle = client.connect(Proto::Http1).await.unwrap();

    // A request whose body arrives in two parts: in flight while the server is told to stop.
    let mut conn = client.connect(Proto::Http1).await.unwrap();
    let body = job_review("in-flight");
    let (head, tail) = body.split_at(body.len() / 2);
    let (mut tx, channel) =
        http_body_util::channel::Channel::<Bytes, std::convert::Infallible>::new(2);
    let request = conn
        .request("POST", "/validate")
        .header("content-type", "application/json")
        .header("content-length", body.len())
        .body(http_body_util::BodyExt::boxed(channel))
        .unwrap();
    tx.send_data(Bytes::copy_from_slice(head)).await.unwrap();
    let response = tokio::spawn(async move { conn.send(request).await });
    assert!(
        support::eventually(3000, || async {
            metric(metrics, "jobwarden_admission_requests_in_flight").await == 1.0
        })
        .await,
        "the request never reached the handler"
    );

    harness.server.shutdown_token().cancel();
    assert!(
        support::eventually(3000, || async {
            http_get(metrics, "/readyz").await.0 == 503
        })
        .await,
        "readiness did not turn false"
    );
    let (status, reason) = http_get(metrics, "/readyz").await;
    assert_eq!((status.as_u16(), reason.as_str()), (503, "shutting down\n"));

    tx.send_data(Bytes::copy_from_slice(tail)).await.unwrap();
    drop(tx);
    let answer = response.await.unwrap().unwrap();
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.body.as_ref(), expected(Webhook::Validate, &body));

    // The idle keep-alive connection did not hold the drain up, and nothing new is accepted.
    harness.server.wait().await.unwrap();
    drop(idle);
    assert!(client.connect(Proto::Http1).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dev_certificate_serves_without_files() {
    let dev = jobwarden_server::dev_cert::make().unwrap();
    let mut settings = support::settings(jobwarden_server::CertFiles {
        cert: "unused".into(),
        key: "unused".into(),
    });
    settings.tls = jobwarden_server::TlsSource::Pem {
        cert_pem: dev.cert_pem.clone().into_bytes(),
        key_pem: dev.key_pem.clone().into_bytes(),
    };
    let server = jobwarden_server::start(settings, Default::default(), None)
        .await
        .unwrap();
    // The printed certificate is what a client trusts.
    let mut roots = rustls::RootCertStore::empty();
    let der = rustls::pki_types::pem::PemObject::from_pem_slice(dev.cert_pem.as_bytes()).unwrap();
    roots.add(der).unwrap();
    let mut conn = Client::new(server.https_addr(), roots)
        .connect(Proto::Http2)
        .await
        .unwrap();
    assert!(one_request(&mut conn, "dev").await);
    server.shutdown_token().cancel();
    server.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_certs_script_makes_what_the_server_serves_and_rotates() {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../certs/make-dev-certs.sh");
    let has_openssl = std::process::Command::new("openssl")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_openssl {
        eprintln!("skipped: openssl is not installed");
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let make = |args: &[&str]| {
        let status = std::process::Command::new("bash")
            .arg(&script)
            .args(args)
            .arg(out.path())
            .status()
            .unwrap();
        assert!(status.success(), "{script:?} {args:?} failed");
    };
    make(&[]);
    let files = jobwarden_server::CertFiles {
        cert: out.path().join("tls.crt"),
        key: out.path().join("tls.key"),
    };
    let server = jobwarden_server::start(support::settings(files), Default::default(), None)
        .await
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    let ca = std::fs::read(out.path().join("ca.crt")).unwrap();
    roots
        .add(rustls::pki_types::pem::PemObject::from_pem_slice(&ca).unwrap())
        .unwrap();
    let client = Client::new(server.https_addr(), roots);
    let mut conn = client.connect(Proto::Http1).await.unwrap();
    assert!(one_request(&mut conn, "script").await);
    let first = conn.peer_cert.clone();

    let mut reloads = server.certificate_reloads();
    make(&["--rotate"]);
    wait_for(&mut reloads, |c| c.loaded >= 1).await;
    let mut conn = client.connect(Proto::Http2).await.unwrap();
    assert_ne!(conn.peer_cert, first);
    assert!(one_request(&mut conn, "script-rotated").await);
    server.shutdown_token().cancel();
    server.wait().await.unwrap();
}
