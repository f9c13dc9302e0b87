//! Every conformance case sent to the real server over HTTPS, on one HTTP/1.1 keep-alive
//! connection and one HTTP/2 connection: the answer must be byte for byte what
//! `Reviewer::review` (and so `jobwarden review`) gives for the same body, with the verdict
//! kube-apiserver reached.

use crate::support;

use jobwarden_admission::Webhook;
use support::{Harness, Proto, expected};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_gets_the_same_answer_as_review() {
    let cases = jobwarden_corpus::cases();
    assert!(!cases.is_empty(), "no conformance case found");
    let harness = Harness::start().await;
    for proto in [Proto::Http1, Proto::Http2] {
        let mut conn = harness.client().connect(proto).await.unwrap();
        for case in &cases {
            let name = &case.file;
            let (webhook, route) = match case.value["webhook"].as_str() {
                Some("mutate") => (Webhook::Mutate, "/mutate"),
                Some("validate") => (Webhook::Validate, "/validate"),
                other => panic!("{name}: unknown webhook {other:?}"),
            };
            let body = serde_json::to_vec(case.review()).unwrap();
            let answer = conn.post_json(route, body.clone()).await.unwrap();
            assert_eq!(
                answer.status,
                200,
                "{name} over {proto:?}: {}",
                answer.text()
            );
            assert_eq!(answer.content_type, "application/json", "{name}");
            assert_eq!(
                answer.text(),
                String::from_utf8(expected(webhook, &body)).unwrap(),
                "{name} over {proto:?}: not what review prints"
            );
            let response = &answer.json()["response"];
            assert_eq!(
                response["uid"],
                case.review()["request"]["uid"],
                "{name}: uid not echoed"
            );
            assert_eq!(
                response["allowed"], case.value["expect"]["allowed"],
                "{name} over {proto:?}: verdict differs from kube-apiserver's"
            );
        }
    }
    let counted = support::metric(
        harness.server.metrics_addr(),
        "jobwarden_admission_requests_total{",
    )
    .await;
    assert_eq!(counted, (2 * cases.len()) as f64);
    harness.server.shutdown_token().cancel();
    harness.server.wait().await.unwrap();
}
