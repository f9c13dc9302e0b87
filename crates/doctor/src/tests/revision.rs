//! The revision the running leader says, beside this binary's.

use k8s_openapi::api::coordination::v1::Lease;
use serde_json::json;

use super::expect;
use super::{OK, SKIPPED, WARNING};
use crate::catalogue::RUNNING_REVISION;
use crate::check::Status;
use crate::installed::revision::running_revision;

const OURS: &str = "0123456789abcdef0123456789abcdef01234567";
const OLDER: &str = "fedcba9876543210fedcba9876543210fedcba98";

/// The controller's Lease, its holder saying `revision` (`None`: no annotation at all).
fn lease(revision: Option<&str>) -> Result<Option<Lease>, String> {
    let annotations = revision.map(|r| json!({"jobwarden.io/revision": r}));
    Ok(Some(
        serde_json::from_value(json!({
            "metadata": {"name": "jobwarden-job-controller", "namespace": "jobwarden-system",
                         "annotations": annotations},
            "spec": {"holderIdentity": "jobwarden-abc"},
        }))
        .expect("a Lease"),
    ))
}

/// What the test calls it; the binary's revision, the Lease read, whether a Deployment runs
/// the controller; the status and what the message says.
type Row = (
    &'static str,
    &'static str,
    Result<Option<Lease>, String>,
    bool,
    Status,
    &'static [&'static str],
);

#[test]
fn the_running_revision_by_table() {
    let cases: [Row; 8] = [
        (
            "the same commit",
            OURS,
            lease(Some(OURS)),
            true,
            OK,
            &["binary revision 0123456789ab, running image revision 0123456789ab"],
        ),
        (
            "an image of another commit",
            OURS,
            lease(Some(OLDER)),
            true,
            WARNING,
            &[
                "binary revision 0123456789ab, running image revision fedcba987654",
                "another commit",
            ],
        ),
        (
            "a leader too old to say",
            OURS,
            lease(None),
            true,
            WARNING,
            &["running image revision not said", "jobwarden.io/revision"],
        ),
        (
            "an empty annotation is none",
            OURS,
            lease(Some("")),
            true,
            WARNING,
            &["not said"],
        ),
        (
            "a binary built without git",
            "unknown",
            lease(Some(OURS)),
            true,
            SKIPPED,
            &[
                "binary revision unknown, running image revision 0123456789ab",
                "not compared",
            ],
        ),
        (
            "no Lease: the Lease check says so",
            OURS,
            Ok(None),
            true,
            SKIPPED,
            &["no Lease"],
        ),
        (
            "an unreadable Lease",
            OURS,
            Err("forbidden".to_owned()),
            true,
            SKIPPED,
            &["no Lease"],
        ),
        (
            "no controller",
            OURS,
            lease(Some(OURS)),
            false,
            SKIPPED,
            &["no Deployment runs the controller"],
        ),
    ];
    for (name, binary, read, controllers, status, fragments) in cases {
        let check = running_revision("jobwarden-system", binary, &read, controllers);
        assert!(
            check.kind == RUNNING_REVISION && check.status == status,
            "{name}: {check:?}"
        );
        expect(&check, RUNNING_REVISION, status, fragments);
    }
}
