//! The pods a success rule lets run on once the Job has met its success criteria
//! (`whenCriterionAchieved`, KEP-3998's open question): what `Continue` makes of a failed one's
//! index, and the event said when they are deleted after all.

use jobwarden_rules::indexes::IndexSet;
use jobwarden_rules::well_known::REASON_JOB_SUSPENDED;

use super::facts::JobFacts;
use super::finished_pods::Finished;
use super::types::event;
use jobwarden_events::EventRecord;

/// With `Continue` and `backoffLimitPerIndex`: the index of a pod that failed with no pod left
/// to run it is failed for good, since nothing replaces it, whatever the per-index limit had
/// left. A completed index, or one another pod still runs, is not (failed and completed
/// indexes must stay disjoint, and a running pod may yet succeed).
pub(super) fn failed_indexes(facts: &JobFacts<'_>, finished: &Finished<'_>) -> IndexSet {
    let running = IndexSet::from_indexes(
        facts
            .pods
            .iter()
            .filter(|p| p.is_active())
            .filter_map(|p| p.index),
    );
    IndexSet::from_indexes(
        facts
            .pods
            .iter()
            .filter(|p| p.tracked && p.is_failed(facts.only_replace_failed))
            .filter(|p| facts.valid_index(p))
            .filter_map(|p| p.index)
            .filter(|i| !running.contains(*i) && !finished.succeeded_indexes.contains(*i)),
    )
}

/// Said once, in the sync that deletes the lingering pods: `why` is the reason of what would
/// have ended a running Job.
pub(super) fn ended_event(why: &str) -> EventRecord {
    event(
        why != REASON_JOB_SUSPENDED,
        "LingeringPodsDeleted",
        &format!(
            "{why}: the pods still running after the success criteria were met are deleted; the Job completes"
        ),
    )
}
