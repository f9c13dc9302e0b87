//! The thin shell: every request doctor makes, with the caller's own credentials. It reads,
//! asks access reviews and sends server-side dry runs (`dryRun=All`: admitted and validated,
//! never stored); it writes nothing. What it gets back goes, unjudged, to the pure checks.

pub mod api;
pub mod dispatch;
pub mod installed;
pub mod pre;

use futures::{StreamExt as _, stream};
use http_body_util::{BodyExt as _, Limited};
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};

pub use jobwarden_audit::connect::with_causes;

use crate::access::Access;
use crate::answer::{Answer, Reply};
use crate::pre::Allowed;

/// A body larger than this is no answer doctor needs (a Job, a Status, a small list).
const BODY_LIMIT: usize = 4 << 20;

/// Access reviews in flight at once: quick for a hundred of them, gentle on the API server.
const REVIEWS_AT_ONCE: usize = 8;

/// The client, and the address it calls (for messages).
#[derive(Clone)]
pub struct Cluster {
    pub client: Client,
    pub server: String,
}

impl Cluster {
    /// One request, its answer kept whole: status code, `Warning` headers and JSON body.
    async fn send(&self, request: http::Request<Vec<u8>>) -> Reply {
        let response = self
            .client
            .send(request.map(Body::from))
            .await
            .map_err(|e| with_causes(&e))?;
        let code = response.status().as_u16();
        let warnings = response
            .headers()
            .get_all(http::header::WARNING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(warning_text)
            .collect();
        let bytes = Limited::new(response.into_body(), BODY_LIMIT)
            .collect()
            .await
            .map_err(|e| format!("cannot read the answer: {e}"))?
            .to_bytes();
        let body = serde_json::from_slice(&bytes).unwrap_or_else(
            |_| json!({"message": String::from_utf8_lossy(&bytes).chars().take(500).collect::<String>()}),
        );
        Ok(Answer {
            code,
            warnings,
            body,
        })
    }

    /// GET `path`, its answer kept whole (a 401 is an answer).
    pub async fn ask(&self, path: &str) -> Reply {
        let request = http::Request::get(path)
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        self.send(request).await
    }

    /// GET `path`: the object, `None` on 404, `Err` with the refusal otherwise.
    pub async fn get(&self, path: &str) -> Result<Option<Value>, String> {
        let request = http::Request::get(path)
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        let answer = self.send(request).await?;
        match answer.code {
            200..=299 => Ok(Some(answer.body)),
            404 => Ok(None),
            _ => Err(crate::answer::refusal(&answer)),
        }
    }

    /// A server-side dry run of creating `object` at the collection `path`.
    pub async fn dry_run_create(&self, path: &str, object: &Value) -> Reply {
        self.post(&format!("{path}?dryRun=All"), object).await
    }

    /// POST `object` to `path`: only ever a dry run, or a review (access reviews and
    /// SelfSubjectReviews are answered, never stored).
    async fn post(&self, path: &str, object: &Value) -> Reply {
        let body = serde_json::to_vec(object).map_err(|e| e.to_string())?;
        let request = http::Request::post(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body)
            .map_err(|e| e.to_string())?;
        self.send(request).await
    }

    /// Creates a review (SelfSubjectReview, an access review): stored nowhere.
    pub async fn review(&self, path: &str, review: &Value) -> Reply {
        self.post(path, review).await
    }

    /// May the caller do this (a SelfSubjectAccessReview)?
    pub async fn may(&self, access: &Access) -> Allowed {
        let (key, attributes) = access.review_attributes();
        let review = json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {key: attributes},
        });
        self.allowed(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            &review,
        )
        .await
    }

    /// May `user` (in `groups`) do this (a SubjectAccessReview)?
    pub async fn user_may(&self, user: &str, groups: &[String], access: &Access) -> Allowed {
        let (key, attributes) = access.review_attributes();
        let review = json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": groups, key: attributes},
        });
        self.allowed(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            &review,
        )
        .await
    }

    async fn allowed(&self, path: &str, review: &Value) -> Allowed {
        let answer = self.review(path, review).await?;
        if !answer.succeeded() {
            return Err(crate::answer::refusal(&answer));
        }
        Ok(answer.body["status"]["allowed"].as_bool().unwrap_or(false))
    }

    /// [`may`](Self::may) for each, a few at a time, in the order given.
    pub async fn may_each(&self, accesses: Vec<Access>) -> Vec<(Access, Allowed)> {
        stream::iter(accesses)
            .map(|a| async move {
                let allowed = self.may(&a).await;
                (a, allowed)
            })
            .buffered(REVIEWS_AT_ONCE)
            .collect()
            .await
    }

    /// [`user_may`](Self::user_may) for each, a few at a time, in the order given.
    pub async fn user_may_each(
        &self,
        user: &str,
        groups: &[String],
        accesses: Vec<Access>,
    ) -> Vec<(Access, Allowed)> {
        stream::iter(accesses)
            .map(|a| async move {
                let allowed = self.user_may(user, groups, &a).await;
                (a, allowed)
            })
            .buffered(REVIEWS_AT_ONCE)
            .collect()
            .await
    }
}

/// A `Warning` header's text: `299 - "text"` → `text`.
fn warning_text(header: &str) -> String {
    let quoted = header.splitn(3, ' ').nth(2).unwrap_or(header).trim();
    quoted
        .strip_prefix('"')
        .and_then(|q| q.strip_suffix('"'))
        .unwrap_or(quoted)
        .replace("\\\"", "\"")
}

/// The collection path of a resource: `/api/v1/namespaces/x/pods`,
/// `/apis/batch/v1/namespaces/x/jobs`, `/apis/admissionregistration.k8s.io/v1/...`.
pub fn collection(group: &str, version: &str, namespace: Option<&str>, plural: &str) -> String {
    let base = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    match namespace {
        Some(ns) => format!("{base}/namespaces/{ns}/{plural}"),
        None => format!("{base}/{plural}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warning_headers_read_as_their_text() {
        assert_eq!(
            warning_text(
                r#"299 - "would violate PodSecurity \"restricted:latest\": runAsNonRoot != true""#
            ),
            r#"would violate PodSecurity "restricted:latest": runAsNonRoot != true"#
        );
        assert_eq!(warning_text("odd"), "odd");
    }

    #[test]
    fn collection_paths() {
        assert_eq!(
            collection("", "v1", Some("x"), "pods"),
            "/api/v1/namespaces/x/pods"
        );
        assert_eq!(
            collection("batch", "v1", None, "jobs"),
            "/apis/batch/v1/jobs"
        );
    }
}
