//! Managing the active pods, as upstream's `manageJob`: a suspended Job's pods are deleted;
//! pods beyond what is wanted are deleted (repeated or invalid indexes first, then the least
//! advanced); else the missing pods are created, once the back-off allows (the Job's, or each
//! index's with `backoffLimitPerIndex`). Deleting and creating never happen in the same sync.
//! And `deleteActivePods`, for a Job that is finishing.

use std::collections::BTreeMap;
use std::time::Duration;

use jobwarden_rules::indexes::IndexSet;

use super::backoff::{self, BackoffRecord};
use super::facts::{JobFacts, count};
use super::finished_pods::Finished;
use super::per_index;
use super::types::{CreateReason, DeleteReason, PodCreation, PodDeletion, PodRef};
use crate::pods::Phase;
use crate::pods::template::build_pod;
use crate::pods::view::PodView;

/// What `manageJob` decided, and the pod counts after it.
#[derive(Default)]
pub(super) struct Managed {
    pub active: i32,
    pub deleted: i32,
    pub deleted_ready: i32,
    pub create: Vec<PodCreation>,
    pub delete: Vec<PodDeletion>,
    /// Finalizers to remove first: deleted pods that are not counted.
    pub release: Vec<PodRef>,
    /// When a back-off ends.
    pub requeue: Option<Duration>,
    /// Pods are wanted but wait for a back-off to end.
    pub waiting: bool,
}

impl Managed {
    /// Upstream's `deleteJobPods`: the finalizer goes first, so these pods are not counted.
    fn delete(&mut self, pods: &[&PodView<'_>], reason: DeleteReason) {
        for p in pods {
            if p.tracked {
                self.release.push(PodRef::of(p));
            }
            self.delete.push(PodDeletion {
                pod: PodRef::of(p),
                reason,
            });
            self.active -= 1;
            self.deleted += 1;
            self.deleted_ready += i32::from(p.ready);
        }
    }
}

/// Upstream's `deleteActivePods`: every active pod of a finishing Job, finalizers kept so each
/// outcome is recorded before the pod may go; none asked for twice. `lingering_ended`: these
/// are pods a success rule had let run on.
pub(super) fn delete_active_pods(
    facts: &JobFacts<'_>,
    active: &[&PodView<'_>],
    lingering_ended: bool,
) -> Vec<PodDeletion> {
    let reason = if lingering_ended {
        DeleteReason::LingeringEnded
    } else {
        DeleteReason::JobFinishing
    };
    active
        .iter()
        .filter(|p| !facts.in_flight.deleting.contains(&*p.uid))
        .map(|p| PodDeletion {
            pod: PodRef::of(p),
            reason,
        })
        .collect()
}

/// Upstream's `manageJob`: delete what is too much, else create what is missing.
pub(super) fn manage_job(
    facts: &JobFacts<'_>,
    active: &[&PodView<'_>],
    finished: &Finished<'_>,
    failed_indexes: Option<&IndexSet>,
    awaiting: &BTreeMap<i32, &PodView<'_>>,
    backoff_record: &BackoffRecord,
) -> Managed {
    let mut m = Managed {
        active: count(active.len()),
        ..Managed::default()
    };
    if facts.suspended {
        m.delete(active, DeleteReason::Suspended);
        return m;
    }
    let active_len = active.len() as i64;
    let want = wanted(facts, finished, active_len);
    let mut to_delete = active_pods_for_removal(facts, active, (active_len - want).max(0));
    to_delete.truncate(facts.config.max_pod_changes_per_sync);
    if !to_delete.is_empty() {
        m.delete(&to_delete, DeleteReason::Excess);
        return m;
    }
    let terminating: Vec<&PodView> = facts.pods.iter().filter(|p| p.is_terminating()).collect();
    // KEP-3939: with `Failed`, a terminating pod still holds its place until it is terminal.
    let held = if facts.only_replace_failed {
        terminating.len() as i64
    } else {
        0
    };
    let diff = want - held - active_len;
    if diff <= 0 {
        return m;
    }
    // With a per-index limit each index backs off on its own (below), not the Job.
    if facts.per_index_limit.is_none() {
        let wait = backoff::remaining(
            backoff_record,
            facts.now,
            facts.backoff.initial,
            facts.backoff.max,
        );
        if !wait.is_zero() {
            m.requeue = Some(wait);
            m.waiting = true;
            return m;
        }
    }
    let diff = usize::try_from(diff)
        .unwrap_or(0)
        .min(facts.config.max_pod_changes_per_sync);
    let mut indexes =
        indexes_to_create(facts, active, &terminating, finished, failed_indexes, diff);
    if facts.per_index_limit.is_some() {
        let soonest = keep_indexes_past_backoff(facts, awaiting, &mut indexes);
        if indexes.is_empty() {
            m.requeue = soonest.filter(|w| !w.is_zero());
            m.waiting = m.requeue.is_some();
            return m;
        }
    }
    let reason = create_reason(facts, finished, &terminating);
    m.create_pods(facts, awaiting, indexes, reason);
    m
}

/// How many pods should be active: `parallelism`, bounded by the completions still missing.
/// Without `completions`, once one pod succeeded no new pod is started.
fn wanted(facts: &JobFacts<'_>, finished: &Finished<'_>, active_len: i64) -> i64 {
    let parallelism = i64::from(facts.job.spec.parallelism.unwrap_or(1).max(0));
    match facts.completions {
        None if finished.succeeded > 0 => active_len,
        None => parallelism,
        Some(c) => (i64::from(c) - finished.succeeded).min(parallelism).max(0),
    }
}

/// Upstream's `getPodCreationInfoForIndependentIndexes`: keeps the indexes whose back-off is
/// over; the soonest any of them ends (to look again then, when none is over).
fn keep_indexes_past_backoff(
    facts: &JobFacts<'_>,
    awaiting: &BTreeMap<i32, &PodView<'_>>,
    indexes: &mut Vec<Option<i32>>,
) -> Option<Duration> {
    let wait = |i: &Option<i32>| {
        let replaced = i.and_then(|i| awaiting.get(&i).copied());
        per_index::remaining(
            replaced,
            facts.now,
            facts.backoff.initial,
            facts.backoff.max,
        )
    };
    let soonest = indexes.iter().map(wait).min();
    indexes.retain(|i| wait(i).is_zero());
    soonest
}

/// Why pods are created: the first ones, or replacements (of which pods, per KEP-3939).
fn create_reason(
    facts: &JobFacts<'_>,
    finished: &Finished<'_>,
    terminating: &[&PodView<'_>],
) -> CreateReason {
    if finished.failed == 0 && terminating.is_empty() {
        CreateReason::New
    } else if facts.only_replace_failed {
        CreateReason::RecreateFailed
    } else {
        CreateReason::RecreateTerminatingOrFailed
    }
}

impl Managed {
    /// A pod for each index (`None`: unindexed), carrying the failure counts of the pod it
    /// replaces when each index has its own back-off limit.
    fn create_pods(
        &mut self,
        facts: &JobFacts<'_>,
        awaiting: &BTreeMap<i32, &PodView<'_>>,
        indexes: Vec<Option<i32>>,
        reason: CreateReason,
    ) {
        let identity = facts.identity();
        let template = facts.job.raw_template();
        for index in indexes {
            let mut pod = build_pod(&identity, template, index);
            if facts.per_index_limit.is_some() {
                let replaced = index.and_then(|i| awaiting.get(&i).copied());
                per_index::annotate(&mut pod, per_index::replacement_counts(replaced));
            }
            self.create.push(PodCreation { index, reason, pod });
            self.active += 1;
        }
    }
}

/// `diff` pods to create: for an Indexed Job the lowest indexes nobody holds (succeeded,
/// failed for good, active, or terminating under `Failed`); else as many unindexed pods.
fn indexes_to_create(
    facts: &JobFacts<'_>,
    active: &[&PodView<'_>],
    terminating: &[&PodView<'_>],
    finished: &Finished<'_>,
    failed_indexes: Option<&IndexSet>,
    diff: usize,
) -> Vec<Option<i32>> {
    if !facts.indexed {
        return vec![None; diff];
    }
    let mut taken = finished.succeeded_indexes.clone();
    if let Some(failed) = failed_indexes {
        // A failed index is never retried.
        taken.union_with(failed);
    }
    let holders = active
        .iter()
        .chain(terminating.iter().filter(|_| facts.only_replace_failed));
    for p in holders {
        if let Some(i) = p.index {
            taken.insert(i);
        }
    }
    (0..facts.completions.unwrap_or(0))
        .filter(|i| !taken.contains(*i))
        .take(diff)
        .map(Some)
        .collect()
}

/// Upstream's `activePodsForRemoval`: for Indexed Jobs, pods with an invalid or repeated
/// index go first; then the least advanced pods.
fn active_pods_for_removal<'p>(
    facts: &JobFacts<'_>,
    active: &[&'p PodView<'p>],
    at_least: i64,
) -> Vec<&'p PodView<'p>> {
    let mut remove: Vec<&PodView> = Vec::new();
    let mut left: Vec<&PodView> = Vec::new();
    if facts.indexed {
        let mut by_index: Vec<&PodView> = active.to_vec();
        by_index.sort_by(|a, b| {
            a.index
                .cmp(&b.index)
                .then_with(|| advancement(a).cmp(&advancement(b)))
        });
        for (n, p) in by_index.iter().enumerate() {
            let repeated = by_index
                .get(n + 1)
                .is_some_and(|next| next.index.is_some() && next.index == p.index);
            if !facts.valid_index(p) || repeated {
                remove.push(p);
            } else {
                left.push(p);
            }
        }
    } else {
        left = active.to_vec();
    }
    let missing = usize::try_from(at_least)
        .unwrap_or(0)
        .saturating_sub(remove.len());
    if missing > 0 {
        left.sort_by_key(|p| advancement(p));
        remove.extend(left.into_iter().take(missing));
    }
    remove
}

/// Upstream's `controller.ActivePods` order, least advanced first: pending before running,
/// not ready before ready, newer before older.
fn advancement(
    p: &PodView<'_>,
) -> (
    u8,
    bool,
    std::cmp::Reverse<Option<k8s_openapi::jiff::Timestamp>>,
) {
    let phase = match p.phase {
        Phase::Pending => 0,
        Phase::Unknown => 1,
        _ => 2,
    };
    (phase, p.ready, std::cmp::Reverse(p.created))
}
