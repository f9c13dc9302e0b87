//! The decisions by tables, over answers recorded from a real kube-apiserver v1.36.2
//! (`recorded/`, each `{code, warnings, body}` as the shell keeps them) and objects and
//! certificates made in the test.

mod api_server;
mod certificate;
mod dispatch;
mod installed;
mod lease;
mod lease_priority;
mod policy_in_force;
mod pre;
mod report;
mod revision;
mod webhook;

use crate::answer::Answer;
use crate::check::{Check, Kind, Status};

// The statuses by short names (`Ok` would shadow `Result`'s).
pub const OK: Status = Status::Ok;
pub const SKIPPED: Status = Status::Skipped;
pub const UNKNOWN: Status = Status::Unknown;
pub const WARNING: Status = Status::Warning;
pub const ERROR: Status = Status::Error;

/// An answer recorded in `recorded/NAME.json`.
macro_rules! recorded {
    ($name:literal) => {
        serde_json::from_str::<crate::answer::Answer>(include_str!(concat!(
            "recorded/",
            $name,
            ".json"
        )))
        .expect("a recorded answer")
    };
}
pub(crate) use recorded;

/// An answer of `code` with a Status `message`, as kube-apiserver refuses.
pub fn refused(code: u16, message: &str) -> Answer {
    Answer {
        code,
        warnings: Vec::new(),
        body: serde_json::json!({"kind": "Status", "status": "Failure", "code": code, "message": message}),
    }
}

/// Asserts the check's kind and status, and that its message holds every fragment.
#[track_caller]
pub fn expect(check: &Check, kind: Kind, status: Status, fragments: &[&str]) {
    assert_eq!(
        (check.kind, check.status),
        (kind, status),
        "{}: {}",
        check.name(),
        check.message
    );
    for f in fragments {
        assert!(
            check.message.contains(f),
            "{}: {:?} lacks {f:?}",
            check.name(),
            check.message
        );
    }
    assert_eq!(
        check.hint.is_some(),
        matches!(status, Status::Unknown | Status::Warning | Status::Error),
        "{}: a hint exactly for checks not made, warnings and errors: {:?}",
        check.name(),
        check.hint
    );
}
