//! Who may read `/metrics`, decided from what kube-apiserver said: the bearer token a scrape
//! carries, the TokenReview's answer about it, and the SubjectAccessReview's answer about that
//! user's `get` on the non-resource path `/metrics` (controller-runtime's
//! `WithAuthenticationAndAuthorization`, kube-rbac-proxy). Pure: no I/O, no clock; `mod.rs`
//! makes the two calls and caches the answers.

use k8s_openapi::api::authentication::v1::{
    TokenReview, TokenReviewSpec, TokenReviewStatus, UserInfo,
};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};

/// The non-resource path and verb a scrape needs, as a ClusterRole grants them.
pub const METRICS_PATH: &str = "/metrics";
pub const METRICS_VERB: &str = "get";

/// The credential in a scrape's `Authorization` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential<'a> {
    /// No header, or another scheme (kube-apiserver ignores those too).
    Missing,
    /// `Bearer` and an empty token (two spaces), or a header that is not text.
    Empty,
    Bearer(&'a str),
}

/// Reads the header as kube-apiserver's bearer-token authenticator does: the scheme
/// case-insensitive, the token the second space-separated word.
pub fn credential(authorization: Option<&[u8]>) -> Credential<'_> {
    let Some(header) = authorization else {
        return Credential::Missing;
    };
    let Ok(header) = std::str::from_utf8(header) else {
        return Credential::Empty;
    };
    let mut parts = header.trim().splitn(3, ' ');
    match (parts.next(), parts.next()) {
        (Some(scheme), Some(token)) if scheme.eq_ignore_ascii_case("bearer") => {
            if token.is_empty() {
                Credential::Empty
            } else {
                Credential::Bearer(token)
            }
        }
        _ => Credential::Missing,
    }
}

/// The TokenReview that asks who `token` belongs to. No audiences: the API server's own, as a
/// ServiceAccount token mounted in a Prometheus pod carries.
pub fn token_review(token: &str) -> TokenReview {
    TokenReview {
        spec: TokenReviewSpec {
            token: token.to_owned(),
            audiences: None,
        },
        ..TokenReview::default()
    }
}

/// The user a TokenReview authenticated, or why the token is refused.
pub fn authenticated_user(status: Option<&TokenReviewStatus>) -> Result<UserInfo, String> {
    let Some(status) = status else {
        return Err("the TokenReview came back without a status".to_owned());
    };
    match (&status.authenticated, &status.user) {
        (Some(true), Some(user)) if user.username.as_deref().is_some_and(|u| !u.is_empty()) => {
            Ok(user.clone())
        }
        _ => Err(status
            .error
            .clone()
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| "the token is not authenticated".to_owned())),
    }
}

/// The SubjectAccessReview asking whether `user` may `get` `/metrics`, carrying everything
/// the TokenReview said of the user (groups, uid, extra), as kube-apiserver's delegated
/// authorizer does.
pub fn access_review(user: &UserInfo) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username.clone(),
            groups: user.groups.clone(),
            uid: user.uid.clone(),
            extra: user.extra.clone(),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(METRICS_PATH.to_owned()),
                verb: Some(METRICS_VERB.to_owned()),
            }),
            resource_attributes: None,
        },
        ..SubjectAccessReview::default()
    }
}

/// The answer to one scrape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// 200: the metrics.
    Allowed { user: String },
    /// 401: no token, or one kube-apiserver does not authenticate.
    Unauthenticated { reason: String },
    /// 403: an authenticated user without `get` on `/metrics`.
    Forbidden { user: String, reason: String },
}

impl Access {
    /// The answer for a user whose SubjectAccessReview came back with `status`. An explicit
    /// `denied`, or no status at all, is a refusal.
    pub fn from_review(user: &UserInfo, status: Option<&SubjectAccessReviewStatus>) -> Access {
        let username = user.username.clone().unwrap_or_default();
        match status {
            Some(s) if s.allowed && s.denied != Some(true) => Access::Allowed { user: username },
            Some(s) => Access::Forbidden {
                user: username,
                reason: [s.reason.as_deref(), s.evaluation_error.as_deref()]
                    .into_iter()
                    .flatten()
                    .filter(|r| !r.is_empty())
                    .collect::<Vec<_>>()
                    .join("; "),
            },
            None => Access::Forbidden {
                user: username,
                reason: "the SubjectAccessReview came back without a status".to_owned(),
            },
        }
    }

    /// The response body, in kube-apiserver's words for the same refusal.
    pub fn message(&self) -> String {
        match self {
            Access::Allowed { .. } => String::new(),
            Access::Unauthenticated { .. } => "Unauthorized\n".to_owned(),
            Access::Forbidden { user, reason } if reason.is_empty() => {
                format!("forbidden: User {user:?} cannot {METRICS_VERB} path {METRICS_PATH:?}\n")
            }
            Access::Forbidden { user, reason } => format!(
                "forbidden: User {user:?} cannot {METRICS_VERB} path {METRICS_PATH:?}: {reason}\n"
            ),
        }
    }
}

#[cfg(test)]
mod tests;
