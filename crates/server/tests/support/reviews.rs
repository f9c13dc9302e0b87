//! A stand-in for kube-apiserver's review APIs, as a `kube::Client` whose requests never leave
//! the process: TokenReviews know three tokens, SubjectAccessReviews allow one user `get` on
//! `/metrics`, and a fourth token makes both calls fail as an unreachable API server would.
//! The real kube-apiserver answers the same questions in the root crate's `tests/it/metrics.rs`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use serde_json::{Value, json};

/// The ServiceAccount bound to the metrics reader role.
pub const READER: &str = "system:serviceaccount:monitoring:prometheus";
/// An authenticated user without the role.
pub const STRANGER: &str = "system:serviceaccount:default:app";
/// The token whose review fails (503 from the fake API server).
pub const OUTAGE_TOKEN: &str = "token-during-an-outage";

/// The fake API server and the reviews it was asked for.
#[derive(Clone, Default)]
pub struct Reviews {
    /// Requests by kind (`tokenreviews`, `subjectaccessreviews`), with the token or user asked
    /// about.
    asked: Arc<Mutex<BTreeMap<(String, String), usize>>>,
}

impl Reviews {
    /// A client whose reviews this fake answers.
    pub fn client(&self) -> kube::Client {
        let reviews = self.clone();
        let service = tower::service_fn(move |request: axum::http::Request<kube::client::Body>| {
            let reviews = reviews.clone();
            async move {
                let path = request.uri().path().to_owned();
                let body = request.into_body().collect().await?.to_bytes();
                let (status, answer) = reviews.answer(&path, &body);
                let response = axum::http::Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(answer.to_string())))?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(response)
            }
        });
        kube::Client::new(service, "default")
    }

    /// How many reviews of `kind` asked about `subject` (a token or a user name).
    pub fn asked(&self, kind: &str, subject: &str) -> usize {
        let asked = self.asked.lock().unwrap();
        asked
            .get(&(kind.to_owned(), subject.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    fn answer(&self, path: &str, body: &[u8]) -> (u16, Value) {
        let mut review: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let kind = path.rsplit('/').next().unwrap_or_default().to_owned();
        let subject = match kind.as_str() {
            "tokenreviews" => review["spec"]["token"].as_str(),
            _ => review["spec"]["user"].as_str(),
        }
        .unwrap_or_default()
        .to_owned();
        *self
            .asked
            .lock()
            .unwrap()
            .entry((kind.clone(), subject.clone()))
            .or_default() += 1;
        if subject == OUTAGE_TOKEN {
            return (503, status_503());
        }
        review["status"] = match kind.as_str() {
            "tokenreviews" => match subject.as_str() {
                "token-of-the-reader" => authenticated(READER),
                "token-of-a-stranger" => authenticated(STRANGER),
                _ => json!({"authenticated": false, "error": "invalid bearer token"}),
            },
            "subjectaccessreviews" => {
                let attributes = &review["spec"]["nonResourceAttributes"];
                let asks_metrics = attributes == &json!({"path": "/metrics", "verb": "get"});
                if subject == READER && asks_metrics {
                    json!({"allowed": true, "reason": "RBAC: allowed by ClusterRoleBinding \"prometheus-metrics\""})
                } else {
                    json!({"allowed": false})
                }
            }
            _ => return (404, json!({"kind": "Status", "code": 404})),
        };
        (201, review)
    }
}

fn authenticated(user: &str) -> Value {
    json!({
        "authenticated": true,
        "user": {"username": user, "groups": ["system:serviceaccounts", "system:authenticated"]},
    })
}

fn status_503() -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 503,
        "reason": "ServiceUnavailable", "message": "the server is currently unable to handle the request",
    })
}
