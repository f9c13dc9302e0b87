//! Which commit the running jobwarden was built from, beside this binary's. An image's labels
//! cannot be read from the API, so the leader says it: it writes its revision on the Lease
//! with every renewal (`jobwarden.io/revision`). A difference is worth knowing (a doctor of
//! another release judges an install by its own rules), never a failure. Pure.

use k8s_openapi::api::coordination::v1::Lease;

use jobwarden_rules::well_known::{LEASE_NAME, LEASE_REVISION_ANNOTATION};

use crate::catalogue::RUNNING_REVISION;
use crate::check::Check;

/// What `git rev-parse HEAD` could not say (build.rs of the binary): no comparison is made.
pub const UNKNOWN: &str = "unknown";

/// `binary`: the revision of the binary running doctor; `lease`: the controller's Lease as
/// read (the Lease check reports a Lease missing or unreadable); `controllers`: whether a
/// Deployment runs the controller, whose leader writes it.
pub fn running_revision(
    namespace: &str,
    binary: &str,
    lease: &Result<Option<Lease>, String>,
    controllers: bool,
) -> Check {
    if !controllers {
        return RUNNING_REVISION.skipped("no Deployment runs the controller, whose leader says it");
    }
    let Ok(Some(lease)) = lease else {
        return RUNNING_REVISION.skipped("no Lease to read it from (see the controller Lease)");
    };
    let running = lease
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(LEASE_REVISION_ANNOTATION))
        .map(String::as_str)
        .filter(|r| !r.is_empty());
    let Some(running) = running else {
        return RUNNING_REVISION.warning(
            format!(
                "binary revision {}, running image revision not said: its leader writes no {LEASE_REVISION_ANNOTATION} on Lease {namespace}/{LEASE_NAME} (a jobwarden older than this binary)",
                short(binary)
            ),
            "install the image built from the commit this binary was (`jobwarden --version` names it)",
        );
    };
    let both = format!(
        "binary revision {}, running image revision {}",
        short(binary),
        short(running)
    );
    if binary == UNKNOWN || running == UNKNOWN {
        return RUNNING_REVISION.skipped(format!("{both}: built without git, not compared"));
    }
    if binary != running {
        return RUNNING_REVISION.warning(
            format!("{both}: doctor judges the install by another commit's rules"),
            "run the doctor of the running release, or install the image of this one (`jobwarden --version` names its commit)",
        );
    }
    RUNNING_REVISION.ok(both)
}

/// As `git log --oneline` abbreviates a commit.
fn short(revision: &str) -> &str {
    revision.get(..12).unwrap_or(revision)
}
