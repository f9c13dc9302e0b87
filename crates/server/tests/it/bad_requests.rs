//! Bodies that are not a good AdmissionReview, sent over HTTPS: each gets a clear 4xx (or, for
//! a well-formed review of the wrong shape, a denial that still carries the uid), and the server
//! keeps answering on the same connection or a new one.

use crate::support;

use bytes::Bytes;
use jobwarden_admission::Webhook;
use support::{Answer, Conn, Harness, Proto, Refusal, expected, full, job_review};

/// Sends `body` with `content_type` to /validate.
async fn post(conn: &mut Conn, content_type: &str, body: impl Into<Bytes>) -> Answer {
    let body = body.into();
    let request = conn
        .request("POST", "/validate")
        .header("content-type", content_type)
        .header("content-length", body.len())
        .body(full(body))
        .unwrap();
    conn.send(request).await.unwrap()
}

/// The server still answers a good review on `conn`.
async fn still_answers(conn: &mut Conn, uid: &str) {
    let body = job_review(uid);
    let answer = conn.post_json("/validate", body.clone()).await.unwrap();
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.body.as_ref(), expected(Webhook::Validate, &body));
}

fn assert_refused(answer: &Answer, status: u16, says: &str) {
    assert_eq!(answer.status, status, "{}", answer.text());
    assert!(
        answer.text().contains(says),
        "expected {says:?} in {:?}",
        answer.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_bodies_get_a_clear_4xx_and_the_server_keeps_answering() {
    let harness = Harness::start().await;
    let review = job_review("7c9e6679-7425-40de-944b-e07fc1f90ae7");
    let truncated = review[..review.len() / 2].to_vec();
    let cases: Vec<(&str, &str, Vec<u8>, u16, &str)> = vec![
        ("empty", "application/json", vec![], 400, "empty"),
        ("whitespace", "application/json", b" \n".to_vec(), 400, "empty"),
        ("not JSON", "application/json", b"<xml/>".to_vec(), 400, "cannot be read as JSON"),
        ("truncated", "application/json", truncated, 400, "cannot be read as JSON"),
        (
            "wrong kind",
            "application/json",
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"1"}}"#.to_vec(),
            400,
            "not an admission.k8s.io/v1 AdmissionReview",
        ),
        (
            "wrong version",
            "application/json",
            br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"1"}}"#
                .to_vec(),
            400,
            "v1beta1",
        ),
        (
            "no uid",
            "application/json",
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}"#.to_vec(),
            400,
            "uid",
        ),
        ("JSON array", "application/json", b"[1,2]".to_vec(), 400, "AdmissionReview"),
        ("text/plain", "text/plain", review.clone(), 415, "application/json"),
    ];
    for proto in [Proto::Http1, Proto::Http2] {
        let mut conn = harness.client().connect(proto).await.unwrap();
        for (what, content_type, body, status, says) in &cases {
            let answer = post(&mut conn, content_type, body.clone()).await;
            assert_refused(&answer, *status, says);
            assert!(
                answer.content_type.starts_with("text/plain"),
                "{what}: {}",
                answer.content_type
            );
            still_answers(&mut conn, "after-bad-body").await;
        }
        // charset and case in the media type are fine.
        let answer = post(&mut conn, "Application/JSON; charset=utf-8", review.clone()).await;
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
    let refused = support::metric(
        harness.server.metrics_addr(),
        "jobwarden_admission_requests_total{endpoint=\"validate\",operation=\"unknown\",verdict=\"unreadable\"}",
    )
    .await;
    assert_eq!(refused, 16.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_review_of_the_wrong_shape_is_denied_with_its_uid() {
    let harness = Harness::start().await;
    let mut conn = harness.client().connect(Proto::Http2).await.unwrap();
    let shapes = [
        // object is not a Job at all
        serde_json::json!({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
            "uid":"shape-1","kind":{"group":"batch","version":"v1","kind":"Job"},
            "resource":{"group":"batch","version":"v1","resource":"jobs"},
            "operation":"CREATE","userInfo":{"username":"u"},"object":"not an object"}}),
        // spec of the wrong type
        serde_json::json!({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
            "uid":"shape-2","kind":{"group":"batch","version":"v1","kind":"Job"},
            "resource":{"group":"batch","version":"v1","resource":"jobs"},
            "operation":"CREATE","userInfo":{"username":"u"},
            "object":{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"},"spec":5}}}),
        // request fields of the wrong type
        serde_json::json!({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
            "uid":"shape-3","kind":"Job","operation":7}}),
    ];
    for review in shapes {
        let body = serde_json::to_vec(&review).unwrap();
        let answer = conn.post_json("/validate", body.clone()).await.unwrap();
        assert_eq!(answer.status, 200, "{}", answer.text());
        assert_eq!(answer.body.as_ref(), expected(Webhook::Validate, &body));
        let json = answer.json();
        assert_eq!(json["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(json["kind"], "AdmissionReview");
        assert_eq!(json["response"]["uid"], review["request"]["uid"]);
        assert_eq!(json["response"]["allowed"], false);
        assert_eq!(json["response"]["status"]["code"], 400, "{json}");
    }
    still_answers(&mut conn, "after-shapes").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_body_gets_413_and_the_server_keeps_answering() {
    let harness = Harness::start_with(|s| s.limits.max_body_bytes = 64 * 1024).await;
    let oversized = Bytes::from(vec![b' '; 64 * 1024 + 1]);
    for proto in [Proto::Http2, Proto::Http1] {
        let mut conn = harness.client().connect(proto).await.unwrap();
        let request = conn
            .request("POST", "/validate")
            .header("content-type", "application/json")
            .header("content-length", oversized.len())
            .body(full(oversized.clone()))
            .unwrap();
        // Refused from the Content-Length without reading the body: the client sees the 413,
        // or, when the close overtakes it, the connection closed under its body.
        match conn.send_refusable(request).await.unwrap() {
            Refusal::Answered(answer) => {
                assert_refused(&answer, 413, "larger than the limit of 65536 bytes")
            }
            Refusal::Closed => {}
        }
        // HTTP/1.1 cannot reuse a connection whose request body was left unread; a new
        // connection must work.
        let mut conn = harness.client().connect(proto).await.unwrap();
        still_answers(&mut conn, "after-oversize").await;
    }

    // Without a Content-Length the cap holds while reading.
    let mut conn = harness.client().connect(Proto::Http2).await.unwrap();
    let (mut tx, body) =
        http_body_util::channel::Channel::<Bytes, std::convert::Infallible>::new(4);
    let request = conn
        .request("POST", "/validate")
        .header("content-type", "application/json")
        .body(http_body_util::BodyExt::boxed(body))
        .unwrap();
    let sending = tokio::spawn(async move {
        for _ in 0..32 {
            if tx.send_data(Bytes::from(vec![b' '; 4096])).await.is_err() {
                return;
            }
        }
    });
    let answer = conn.send(request).await.unwrap();
    assert_refused(&answer, 413, "larger than the limit");
    sending.await.unwrap();
    let mut conn = harness.client().connect(Proto::Http2).await.unwrap();
    still_answers(&mut conn, "after-streamed-oversize").await;
    // The server's own count: all three were refused for their size, none reviewed.
    let metrics = harness.server.metrics_addr();
    let too_large = "jobwarden_admission_requests_total{endpoint=\"validate\",operation=\"unknown\",verdict=\"too_large\"}";
    assert!(
        support::eventually(3000, || async {
            support::metric(metrics, too_large).await == 3.0
        })
        .await,
        "{} refused as too large, want 3",
        support::metric(metrics, too_large).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_methods_and_paths_are_refused() {
    let harness = Harness::start().await;
    let mut conn = harness.client().connect(Proto::Http1).await.unwrap();
    let get = conn
        .request("GET", "/validate")
        .body(full(Bytes::new()))
        .unwrap();
    assert_eq!(conn.send(get).await.unwrap().status, 405);
    let answer = conn.post_json("/nowhere", job_review("x")).await.unwrap();
    assert_eq!(answer.status, 404);
    still_answers(&mut conn, "after-405").await;
}
