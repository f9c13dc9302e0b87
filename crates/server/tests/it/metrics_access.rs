//! The secured operations listener at its boundary: a real TLS listener serving the webhook's
//! certificate, a real rustls client, and kube-apiserver's review APIs played by `reviews`
//! (the real ones answer in the root crate's `tests/it/metrics.rs`). 401 without a valid token, 403
//! without the right, 200 with it; the probes open; refusals counted by reason only.

use crate::support;

use std::net::SocketAddr;

use hyper::StatusCode;
use support::reviews::{OUTAGE_TOKEN, READER, Reviews, STRANGER};
use support::{Answer, Harness, Proto, full};

const READER_TOKEN: &str = "token-of-the-reader";
const STRANGER_TOKEN: &str = "token-of-a-stranger";

async fn secured() -> (Harness, Reviews) {
    let reviews = Reviews::default();
    let harness = Harness::start_with_cluster(Some(reviews.client()), |_| {}).await;
    (harness, reviews)
}

/// GET `path` on the metrics listener over TLS, with `token` as a bearer token when given.
async fn get(harness: &Harness, path: &str, token: Option<&str>) -> Answer {
    let client = support::Client::new(harness.server.metrics_addr(), harness.ca.roots());
    let mut conn = client.connect(Proto::Http1).await.unwrap();
    let mut request = conn.request("GET", path);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    conn.send(request.body(full("")).unwrap()).await.unwrap()
}

fn refused(metrics: &str, reason: &str) -> u64 {
    let line = format!("jobwarden_metrics_scrapes_refused_total{{reason=\"{reason}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&line)?.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_answer_only_a_token_allowed_to_get_them() {
    let (harness, reviews) = secured().await;

    for probe in ["/healthz", "/readyz"] {
        let answer = get(&harness, probe, None).await;
        assert_eq!(answer.status, StatusCode::OK, "{probe}: {}", answer.text());
    }

    let anonymous = get(&harness, "/metrics", None).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert_eq!(anonymous.text(), "Unauthorized\n");
    let forged = get(&harness, "/metrics", Some("not-a-token")).await;
    assert_eq!(forged.status, StatusCode::UNAUTHORIZED);

    let stranger = get(&harness, "/metrics", Some(STRANGER_TOKEN)).await;
    assert_eq!(stranger.status, StatusCode::FORBIDDEN);
    assert_eq!(
        stranger.text(),
        format!("forbidden: User \"{STRANGER}\" cannot get path \"/metrics\"\n")
    );

    let reader = get(&harness, "/metrics", Some(READER_TOKEN)).await;
    assert_eq!(reader.status, StatusCode::OK, "{}", reader.text());
    let text = reader.text();
    assert!(text.contains("jobwarden_admission_requests"), "{text}");
    assert_eq!(refused(&text, "unauthenticated"), 2, "{text}");
    assert_eq!(refused(&text, "forbidden"), 1, "{text}");
    assert_eq!(reviews.asked("subjectaccessreviews", READER), 1);
    // Who was refused at the TokenReview is never asked about at the SubjectAccessReview.
    assert_eq!(reviews.asked("tokenreviews", "not-a-token"), 1);
    assert_eq!(reviews.asked("subjectaccessreviews", ""), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_storm_costs_the_api_server_fewer_reviews_than_scrapes() {
    let (harness, reviews) = secured().await;
    const SCRAPES: usize = 20;
    let scrapes = (0..SCRAPES).map(|_| get(&harness, "/metrics", Some(READER_TOKEN)));
    for answer in futures::future::join_all(scrapes).await {
        assert_eq!(answer.status, StatusCode::OK);
    }
    // Concurrent scrapes with one token share one review, and later ones read the cached
    // answer; only a scrape a full minute after the first (the cache's life) asks again.
    let asked = reviews.asked("tokenreviews", READER_TOKEN);
    assert!((1..SCRAPES).contains(&asked), "{asked} TokenReviews");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_that_cannot_be_made_is_a_500_and_is_not_cached() {
    let (harness, reviews) = secured().await;
    for _ in 0..2 {
        let answer = get(&harness, "/metrics", Some(OUTAGE_TOKEN)).await;
        assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(
            answer
                .text()
                .starts_with("Internal Server Error: \"/metrics\": cannot create a TokenReview: "),
            "{}",
            answer.text()
        );
    }
    assert_eq!(reviews.asked("tokenreviews", OUTAGE_TOKEN), 2);
    let text = get(&harness, "/metrics", Some(READER_TOKEN)).await.text();
    assert_eq!(refused(&text, "review_failed"), 2, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_on_the_secured_port_is_told_to_use_https() {
    let (harness, _) = secured().await;
    let addr: SocketAddr = harness.server.metrics_addr();
    let (status, body) = support::http_get(addr, "/healthz").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("HTTPS"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turned_off_or_without_a_cluster_the_metrics_are_plain_and_open() {
    let reviews = Reviews::default();
    let off =
        Harness::start_with_cluster(Some(reviews.client()), |s| s.metrics_secure = false).await;
    let without_cluster = Harness::start().await;
    for harness in [off, without_cluster] {
        let (status, text) = support::http_get(harness.server.metrics_addr(), "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(text.contains("jobwarden_admission_requests"), "{text}");
        assert!(
            !text.contains("jobwarden_metrics_scrapes_refused"),
            "{text}"
        );
    }
    assert_eq!(reviews.asked("tokenreviews", ""), 0);
}
