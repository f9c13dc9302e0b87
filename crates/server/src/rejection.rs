//! Why a request got no review, and what the webhook answers then: the HTTP status, the
//! verdict label of the metrics, and the message. Reading the body (`request_body`) and
//! reviewing it (`routes`) both end in one.

use axum::http::StatusCode;
use jobwarden_admission::Unreadable;

/// A request that got no review, with the HTTP status that says why.
#[derive(Debug)]
pub(crate) enum Rejection {
    UnsupportedMediaType(String),
    TooLarge(usize),
    /// The body budget (its total, in bytes) stayed full until the request's deadline.
    OverBudget(usize),
    BodyUnreadable(String),
    Empty,
    Unreadable(Unreadable),
    ReviewFailed,
}

/// Every verdict label a [`Rejection`] can give (the metrics serve each from the start).
pub(crate) const VERDICTS: [&str; 5] = [
    "bad_content_type",
    "too_large",
    "over_budget",
    "unreadable",
    "error",
];

impl Rejection {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Rejection::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Rejection::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Rejection::OverBudget(_) => StatusCode::SERVICE_UNAVAILABLE,
            Rejection::BodyUnreadable(_) | Rejection::Empty | Rejection::Unreadable(_) => {
                StatusCode::BAD_REQUEST
            }
            Rejection::ReviewFailed => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub(crate) fn verdict(&self) -> &'static str {
        match self {
            Rejection::UnsupportedMediaType(_) => "bad_content_type",
            Rejection::TooLarge(_) => "too_large",
            Rejection::OverBudget(_) => "over_budget",
            Rejection::BodyUnreadable(_) | Rejection::Empty | Rejection::Unreadable(_) => {
                "unreadable"
            }
            Rejection::ReviewFailed => "error",
        }
    }

    pub(crate) fn message(&self) -> String {
        match self {
            Rejection::UnsupportedMediaType(got) => {
                format!("Content-Type must be application/json, got {got:?}")
            }
            Rejection::TooLarge(max) => {
                format!("request body is larger than the limit of {max} bytes")
            }
            Rejection::OverBudget(total) => format!(
                "request bodies being read hold all {total} bytes the server may buffer (--max-buffered-body-bytes), and not enough was freed before the request deadline; retry"
            ),
            Rejection::BodyUnreadable(e) => format!("cannot read the request body: {e}"),
            Rejection::Empty => "request body is empty".to_owned(),
            Rejection::Unreadable(e) => e.to_string(),
            Rejection::ReviewFailed => "the review failed unexpectedly".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rejections_verdict_is_listed() {
        for rejection in [
            Rejection::UnsupportedMediaType("text/plain".into()),
            Rejection::TooLarge(1),
            Rejection::OverBudget(1),
            Rejection::BodyUnreadable("cut off".into()),
            Rejection::Empty,
            Rejection::ReviewFailed,
        ] {
            assert!(VERDICTS.contains(&rejection.verdict()), "{rejection:?}");
        }
    }
}
