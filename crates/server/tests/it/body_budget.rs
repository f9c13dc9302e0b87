//! The memory budget for request bodies, seen from outside: large bodies sent at once take at
//! most the budget between them (the rest wait), a small review is answered meanwhile, and
//! once the large ones are done everything held is given back. Real clients over real TLS;
//! the server's own gauge says what it holds.

use crate::support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::channel::{Channel, Sender};
use jobwarden_admission::Webhook;
use support::{Answer, Harness, Proto, eventually, expected, job_review, metric};
use tokio::task::JoinHandle;

const PATIENCE: Duration = Duration::from_secs(60);
const KIB: usize = 1024;
const MAX_BODY: usize = 1024 * KIB;
const BUDGET: usize = 4 * MAX_BODY + 512 * KIB;

const HELD: &str = "jobwarden_admission_request_body_bytes";
const IN_FLIGHT: &str = "jobwarden_admission_requests_in_flight";

/// A review padded with trailing whitespace (still the same JSON) to `len` bytes.
fn padded_review(uid: &str, len: usize) -> Bytes {
    let mut body = job_review(uid);
    assert!(body.len() <= len);
    body.resize(len, b' ');
    Bytes::from(body)
}

/// A request whose body the test sends piece by piece, answered on a task of its own.
struct Slow {
    body: Bytes,
    sent: usize,
    tx: Sender<Bytes, Infallible>,
    answer: JoinHandle<Answer>,
}

impl Slow {
    /// Starts a POST of `body`, declaring its length or not (chunked on HTTP/1.1, no length
    /// on HTTP/2), and sends nothing of it yet.
    async fn start(harness: &Harness, proto: Proto, body: Bytes, declared: bool) -> Slow {
        let mut conn = harness.client().connect(proto).await.unwrap();
        let (tx, channel) = Channel::<Bytes, Infallible>::new(4);
        let mut request = conn
            .request("POST", "/validate")
            .header("content-type", "application/json");
        if declared {
            request = request.header("content-length", body.len());
        }
        let request = request
            .body(http_body_util::BodyExt::boxed(channel))
            .unwrap();
        let answer = tokio::spawn(async move {
            tokio::time::timeout(PATIENCE, conn.send(request))
                .await
                .expect("an answer in time")
                .unwrap()
        });
        Slow {
            body,
            sent: 0,
            tx,
            answer,
        }
    }

    /// Sends the next `len` bytes of the body, in pieces of 16 KiB.
    async fn send(&mut self, len: usize) {
        let end = (self.sent + len).min(self.body.len());
        for start in (self.sent..end).step_by(16 * KIB) {
            let piece = self.body.slice(start..(start + 16 * KIB).min(end));
            self.tx.send_data(piece).await.unwrap();
        }
        self.sent = end;
    }

    /// Sends the rest of the body and returns the answer.
    async fn finish(mut self) -> (Bytes, Answer) {
        self.send(self.body.len()).await;
        drop(self.tx);
        (self.body, self.answer.await.unwrap())
    }
}

/// Polls the server's gauge of held body bytes until `stop`, keeping the largest value seen.
fn watch_held(metrics: SocketAddr, stop: Arc<AtomicBool>) -> (Arc<AtomicU64>, JoinHandle<()>) {
    let most = Arc::new(AtomicU64::new(0));
    let task = tokio::spawn({
        let most = most.clone();
        async move {
            // Bounded: a minute of polling at most, whatever happens to the test.
            for _ in 0..6000 {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                most.fetch_max(metric(metrics, HELD).await as u64, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    });
    (most, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_share_the_budget_and_a_small_review_gets_through() {
    let harness = Harness::start_with(|s| {
        s.limits.max_body_bytes = MAX_BODY;
        s.limits.max_buffered_body_bytes = BUDGET;
        s.limits.request_timeout = PATIENCE;
        s.limits.header_timeout = PATIENCE;
    })
    .await;
    let metrics = harness.server.metrics_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let (most_held, watcher) = watch_held(metrics, stop.clone());

    // Four bodies declaring the largest size take four of the budget's 4.5 MiB at once, even
    // before most of their bytes have arrived.
    let mut holders = Vec::new();
    for i in 0..4 {
        let proto = [Proto::Http1, Proto::Http2][i % 2];
        let body = padded_review(&format!("large-{i}"), MAX_BODY);
        let mut slow = Slow::start(&harness, proto, body, true).await;
        slow.send(64 * KIB).await;
        holders.push(slow);
    }
    assert!(
        eventually(3000, || async {
            metric(metrics, HELD).await == (4 * MAX_BODY) as f64
        })
        .await,
        "held {}",
        metric(metrics, HELD).await
    );

    // A fifth does not fit: it is in flight, waiting, and holds nothing.
    let mut waiting = Slow::start(
        &harness,
        Proto::Http1,
        padded_review("large-waiting", MAX_BODY),
        true,
    )
    .await;
    waiting.send(64 * KIB).await;
    assert!(
        eventually(3000, || async { metric(metrics, IN_FLIGHT).await == 5.0 }).await,
        "in flight {}",
        metric(metrics, IN_FLIGHT).await
    );
    assert_eq!(metric(metrics, HELD).await, (4 * MAX_BODY) as f64);

    // A body of unknown length is held as it arrives: 100 KiB sent, at most twice that held.
    let mut chunked = Slow::start(
        &harness,
        Proto::Http2,
        padded_review("unknown-length", 100 * KIB),
        false,
    )
    .await;
    chunked.send(100 * KIB).await;
    assert!(
        eventually(3000, || async {
            let held = metric(metrics, HELD).await as usize;
            (4 * MAX_BODY + 100 * KIB..=4 * MAX_BODY + 200 * KIB).contains(&held)
        })
        .await,
        "held {}",
        metric(metrics, HELD).await
    );

    // An ordinary review fits in what is left and is answered while all of them wait.
    let small = job_review("small");
    let mut conn = harness.client().connect(Proto::Http2).await.unwrap();
    let answer = tokio::time::timeout(PATIENCE, conn.post_json("/validate", small.clone()))
        .await
        .expect("an answer in time")
        .unwrap();
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.body.as_ref(), expected(Webhook::Validate, &small));

    // Once the bodies arrive, every one is reviewed, the waiting one included.
    holders.push(chunked);
    holders.push(waiting);
    for slow in holders {
        let (body, answer) = slow.finish().await;
        assert_eq!(answer.status, 200, "{}", answer.text());
        assert_eq!(answer.body.as_ref(), expected(Webhook::Validate, &body));
    }
    assert!(
        eventually(3000, || async { metric(metrics, HELD).await == 0.0 }).await,
        "still held: {}",
        metric(metrics, HELD).await
    );
    stop.store(true, Ordering::SeqCst);
    watcher.await.unwrap();
    let most = most_held.load(Ordering::SeqCst) as usize;
    assert!(most <= BUDGET, "held {most} bytes, budget {BUDGET}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_below_the_body_limit_is_refused_at_start() {
    let ca = support::TestCa::new();
    let cert = ca.issue();
    let volume = support::SecretVolume::new(&cert.cert_pem, &cert.key_pem);
    let mut settings = support::settings(volume.files());
    settings.limits.max_body_bytes = MAX_BODY;
    settings.limits.max_buffered_body_bytes = MAX_BODY - 1;
    let error = jobwarden_server::start(settings, Default::default(), None)
        .await
        .err()
        .expect("the server must not start");
    assert!(
        format!("{error:#}").contains("--max-buffered-body-bytes"),
        "{error:#}"
    );
}
