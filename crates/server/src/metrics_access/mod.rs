//! `/metrics` only for who may read it: each scrape's bearer token is reviewed by
//! kube-apiserver (a TokenReview, then a SubjectAccessReview for `get` on the non-resource path
//! `/metrics`), as controller-runtime's metrics filter and kube-rbac-proxy do. Answers are kept
//! for a short while in a bounded cache, keyed by the token's digest (never the token), so a
//! scrape storm does not become an API storm. Refusals are logged and counted, by reason only.

mod decision;

use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode, header};
use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use kube::api::{Api, PostParams};
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use decision::{Access, Credential, METRICS_PATH};

use crate::error_chain::error_chain;

/// How long an answer is kept. A grant is kept a minute, as controller-runtime's filter keeps
/// an authenticated token; a refusal ten seconds, as kube-apiserver's token cache keeps a
/// failure, so a newly bound Prometheus is let in soon and a revoked one is shut out within
/// a minute.
const ALLOWED_FOR: Duration = Duration::from_secs(60);
const REFUSED_FOR: Duration = Duration::from_secs(10);
/// Distinct tokens remembered at once; a handful of Prometheus replicas need a few.
const CAPACITY: u64 = 1024;

/// Why a scrape could not be decided.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("cannot create a TokenReview")]
    TokenReview(#[source] kube::Error),
    #[error("cannot create a SubjectAccessReview")]
    AccessReview(#[source] kube::Error),
}

#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // label values are written as Prometheus users expect them
enum Reason {
    /// 401: no token, or one kube-apiserver does not authenticate.
    unauthenticated,
    /// 403: the user may not `get` `/metrics`.
    forbidden,
    /// 500: a review could not be made (kube-apiserver unreachable, or refusing jobwarden).
    review_failed,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusedLabels {
    reason: Reason,
}

/// Answers kept per token digest, each for as long as its kind allows.
struct KeepFor;

impl moka::Expiry<[u8; 32], Access> for KeepFor {
    fn expire_after_create(&self, _: &[u8; 32], access: &Access, _: Instant) -> Option<Duration> {
        Some(match access {
            Access::Allowed { .. } => ALLOWED_FOR,
            Access::Unauthenticated { .. } | Access::Forbidden { .. } => REFUSED_FOR,
        })
    }
}

/// The gate in front of `/metrics`.
pub(crate) struct MetricsAccess {
    client: kube::Client,
    answers: moka::future::Cache<[u8; 32], Access>,
    refused: Family<RefusedLabels, Counter>,
}

impl MetricsAccess {
    /// A gate that reviews tokens with `client`; registers `jobwarden_metrics_scrapes_refused`.
    pub(crate) fn new(client: kube::Client, registry: &mut Registry) -> MetricsAccess {
        let refused = Family::<RefusedLabels, Counter>::default();
        registry.sub_registry_with_prefix("jobwarden").register(
            "metrics_scrapes_refused",
            "Scrapes of /metrics refused, by reason: unauthenticated (401), forbidden (403), review_failed (500)",
            refused.clone(),
        );
        // Each reason served at 0 from the start, so an increase() sees the first refusal.
        for reason in [
            Reason::unauthenticated,
            Reason::forbidden,
            Reason::review_failed,
        ] {
            let _series = refused.get_or_create(&RefusedLabels { reason });
        }
        MetricsAccess {
            client,
            answers: moka::future::Cache::builder()
                .max_capacity(CAPACITY)
                .expire_after(KeepFor)
                .build(),
            refused,
        }
    }

    /// `None` when the scrape may read the metrics; else the refusal to send.
    pub(crate) async fn refusal(&self, headers: &HeaderMap) -> Option<(StatusCode, String)> {
        let authorization = headers.get(header::AUTHORIZATION).map(|h| h.as_bytes());
        let access = match decision::credential(authorization) {
            Credential::Bearer(token) => {
                let key = digest(token);
                self.answers
                    .try_get_with(key, self.review(token))
                    .await
                    .map_err(|error| error_chain(&*error))
            }
            Credential::Missing => Ok(Access::Unauthenticated {
                reason: "no bearer token".to_owned(),
            }),
            Credential::Empty => Ok(Access::Unauthenticated {
                reason: "an empty bearer token".to_owned(),
            }),
        };
        let (status, reason, body) = match access {
            Ok(Access::Allowed { .. }) => return None,
            Ok(refused @ Access::Unauthenticated { .. }) => {
                (StatusCode::UNAUTHORIZED, Reason::unauthenticated, refused)
            }
            Ok(refused @ Access::Forbidden { .. }) => {
                (StatusCode::FORBIDDEN, Reason::forbidden, refused)
            }
            Err(error) => {
                self.refused
                    .get_or_create(&RefusedLabels {
                        reason: Reason::review_failed,
                    })
                    .inc();
                tracing::warn!(status = 500, reason = "review_failed", %error, "refused a /metrics scrape");
                return Some((
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("Internal Server Error: \"{METRICS_PATH}\": {error}\n"),
                ));
            }
        };
        self.refused.get_or_create(&RefusedLabels { reason }).inc();
        match &body {
            Access::Forbidden { user, reason: why } => {
                tracing::warn!(status = status.as_u16(), reason = "forbidden", %user, detail = %why, "refused a /metrics scrape")
            }
            Access::Unauthenticated { reason: why } => {
                tracing::warn!(status = status.as_u16(), reason = "unauthenticated", detail = %why, "refused a /metrics scrape")
            }
            Access::Allowed { .. } => {}
        }
        Some((status, body.message()))
    }

    /// Asks kube-apiserver who holds `token`, then whether that user may read `/metrics`.
    async fn review(&self, token: &str) -> Result<Access, ReviewError> {
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &decision::token_review(token))
            .await
            .map_err(ReviewError::TokenReview)?;
        let user = match decision::authenticated_user(reviewed.status.as_ref()) {
            Ok(user) => user,
            Err(reason) => return Ok(Access::Unauthenticated { reason }),
        };
        let reviewed = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &decision::access_review(&user))
            .await
            .map_err(ReviewError::AccessReview)?;
        Ok(Access::from_review(&user, reviewed.status.as_ref()))
    }
}

/// The cache key: a token is a credential, so only its SHA-256 is kept.
fn digest(token: &str) -> [u8; 32] {
    let mut key = [0; 32];
    key.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref());
    key
}
