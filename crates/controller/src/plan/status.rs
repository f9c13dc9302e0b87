//! The status a sync writes: its counters from the tracking step, and the comparison that
//! decides whether there is anything to write at all.

use jobwarden_rules::indexes::IndexSet;
use k8s_openapi::api::batch::v1::{JobStatus, UncountedTerminatedPods};

use super::facts::{JobFacts, clamp};
use super::tracking::Tracked;

/// `succeeded`, `failed`, `completedIndexes`, `failedIndexes` and `uncountedTerminatedPods`.
pub(super) fn write_counters(
    facts: &JobFacts<'_>,
    status: &mut JobStatus,
    tracked: &Tracked,
    succeeded_indexes: &IndexSet,
    failed_indexes: Option<&IndexSet>,
) {
    status.failed = Some(clamp(tracked.counted_failed));
    if facts.indexed {
        status.succeeded = Some(clamp(succeeded_indexes.count() as i64));
        status.completed_indexes = Some(succeeded_indexes.to_string());
        if let Some(failed) = failed_indexes {
            status.failed_indexes = Some(failed.to_string());
        }
    } else {
        status.succeeded = Some(clamp(tracked.counted_succeeded));
    }
    let list = |uids: &Vec<String>| Some(uids.clone()).filter(|v| !v.is_empty());
    status.uncounted_terminated_pods = Some(UncountedTerminatedPods {
        succeeded: list(&tracked.uncounted_succeeded),
        failed: list(&tracked.uncounted_failed),
    });
}

/// Status equality over the fields the controller owns, with "absent" and "empty" alike, as
/// the apiserver stores them.
pub fn same_status(a: &JobStatus, b: &JobStatus) -> bool {
    fn uncounted(s: &JobStatus) -> (Vec<String>, Vec<String>) {
        let u = s.uncounted_terminated_pods.clone().unwrap_or_default();
        (
            u.succeeded.unwrap_or_default(),
            u.failed.unwrap_or_default(),
        )
    }
    a.active.unwrap_or(0) == b.active.unwrap_or(0)
        && a.ready == b.ready
        && a.terminating == b.terminating
        && a.succeeded.unwrap_or(0) == b.succeeded.unwrap_or(0)
        && a.failed.unwrap_or(0) == b.failed.unwrap_or(0)
        && a.completed_indexes.as_deref().unwrap_or("")
            == b.completed_indexes.as_deref().unwrap_or("")
        && a.failed_indexes == b.failed_indexes
        && uncounted(a) == uncounted(b)
        && a.start_time == b.start_time
        && a.completion_time == b.completion_time
        && a.conditions.as_deref().unwrap_or(&[]) == b.conditions.as_deref().unwrap_or(&[])
}
