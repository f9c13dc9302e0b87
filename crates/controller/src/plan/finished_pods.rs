//! Counting finished pods, exactly once: what finished since the status was written
//! (upstream's `getNewFinishedPods`, `calculateSucceededIndexes`), and the tracking step that
//! puts each finished pod into the status before its finalizer may go
//! (`trackJobStatusAndRemoveFinalizers`): a pod is first listed in `uncountedTerminatedPods`
//! (an Indexed success: in `completedIndexes`), then released, then moved into the counters.

use std::collections::{BTreeMap, HashSet};

use jobwarden_rules::indexes::IndexSet;

use super::facts::JobFacts;
use super::outcome::Finishing;
use super::types::PodRef;
use crate::backoff::{self, BackoffRecord};
use crate::pods::{Phase, PodView};

/// What finished since the last status write, and the totals with it.
pub(super) struct Finished<'a> {
    pub newly_succeeded: Vec<&'a PodView<'a>>,
    /// Failed pods, those an `Ignore` rule matched included (they back off, they do not count).
    pub newly_failed: Vec<&'a PodView<'a>>,
    /// Upstream's `jobCtx.succeeded`: for an Indexed Job, the succeeded indexes.
    pub succeeded: i64,
    /// Upstream's `jobCtx.failed`: what the back-off limit is checked against.
    pub failed: i64,
    /// `completedIndexes` as stored, and with the indexes that succeeded since.
    pub prev_indexes: IndexSet,
    pub succeeded_indexes: IndexSet,
}

fn uncounted_sets(facts: &JobFacts<'_>) -> (HashSet<String>, HashSet<String>) {
    let u = facts
        .stored()
        .uncounted_terminated_pods
        .clone()
        .unwrap_or_default();
    (
        u.succeeded.unwrap_or_default().into_iter().collect(),
        u.failed.unwrap_or_default().into_iter().collect(),
    )
}

pub(super) fn count<'a>(facts: &JobFacts<'a>) -> Finished<'a> {
    let old = facts.stored();
    let (in_succeeded, in_failed) = uncounted_sets(facts);
    let newly_succeeded: Vec<&PodView> = facts
        .pods
        .iter()
        .filter(|p| p.tracked && !in_succeeded.contains(&*p.uid) && facts.valid_index(p))
        .filter(|p| p.phase == Phase::Succeeded)
        .collect();
    let newly_failed: Vec<&PodView> = facts
        .pods
        .iter()
        .filter(|p| p.tracked && !in_failed.contains(&*p.uid) && facts.valid_index(p))
        .filter(|p| p.is_failed(facts.only_replace_failed))
        .collect();
    let counted_failures = newly_failed
        .iter()
        .filter(|p| p.counts_as_failure())
        .count();
    let mut succeeded = i64::from(old.succeeded.unwrap_or(0))
        + newly_succeeded.len() as i64
        + in_succeeded.len() as i64;
    let failed =
        i64::from(old.failed.unwrap_or(0)) + counted_failures as i64 + in_failed.len() as i64;

    let completions = facts.completions.unwrap_or(0);
    let prev_indexes = if facts.indexed {
        IndexSet::parse_lenient(old.completed_indexes.as_deref().unwrap_or(""), completions)
    } else {
        IndexSet::new()
    };
    let mut succeeded_indexes = prev_indexes.clone();
    if facts.indexed {
        for p in facts
            .pods
            .iter()
            .filter(|p| p.tracked && p.phase == Phase::Succeeded)
        {
            if let Some(i) = p.index.filter(|_| facts.valid_index(p)) {
                succeeded_indexes.insert(i);
            }
        }
        succeeded = succeeded_indexes.count() as i64;
    }
    Finished {
        newly_succeeded,
        newly_failed,
        succeeded,
        failed,
        prev_indexes,
        succeeded_indexes,
    }
}

impl Finished<'_> {
    /// Upstream's `newBackoffRecord`: the remembered record moved on by the pods that finished
    /// since; with nothing remembered, read from the failed pods that are left.
    pub fn backoff(&self, facts: &JobFacts<'_>) -> BackoffRecord {
        match &facts.in_flight.backoff {
            Some(record) => record.updated(&self.newly_succeeded, &self.newly_failed),
            None => backoff::record_from_pods(facts.pods, facts.only_replace_failed),
        }
    }
}

/// The uncounted lists and the counters after the tracking step.
pub(super) struct Tracked {
    /// Finalizers to remove, in the order the pods were looked at.
    pub release: Vec<PodRef>,
    pub uncounted_succeeded: Vec<String>,
    pub uncounted_failed: Vec<String>,
    /// `succeeded` and `failed` with the pods already released moved in.
    pub counted_succeeded: i64,
    pub counted_failed: i64,
    /// The per-sync cap on uncounted pods was reached: the Job cannot finish in this sync.
    pub reached_max: bool,
}

impl Tracked {
    pub fn pods_uncounted(&self) -> bool {
        self.reached_max
            || !self.uncounted_succeeded.is_empty()
            || !self.uncounted_failed.is_empty()
    }
}

/// Upstream's tracking loop. A pod whose finalizer is gone moves from the uncounted lists into
/// the counters; a finished pod that still holds it goes into the lists (or, for Indexed
/// successes, `completedIndexes`) and is released once that status is stored.
pub(super) fn track(
    facts: &JobFacts<'_>,
    finishing: Option<&Finishing>,
    prev_indexes: &IndexSet,
    awaiting: &BTreeMap<i32, &PodView<'_>>,
) -> Tracked {
    let old = facts.stored();
    let uncounted = old.uncounted_terminated_pods.clone().unwrap_or_default();
    let mut uncounted_succeeded = uncounted.succeeded.unwrap_or_default();
    let mut uncounted_failed = uncounted.failed.unwrap_or_default();
    // Pods whose finalizer is gone are counted now: their UIDs move into the counters.
    let with_finalizer: HashSet<&str> = facts
        .pods
        .iter()
        .filter(|p| p.tracked)
        .map(|p| &*p.uid)
        .collect();
    let mut counted_succeeded = i64::from(old.succeeded.unwrap_or(0));
    let mut counted_failed = i64::from(old.failed.unwrap_or(0));
    uncounted_succeeded.retain(|uid| {
        let keep = with_finalizer.contains(uid.as_str());
        counted_succeeded += i64::from(!keep);
        keep
    });
    uncounted_failed.retain(|uid| {
        let keep = with_finalizer.contains(uid.as_str());
        counted_failed += i64::from(!keep);
        keep
    });

    let failing = finishing.is_some_and(|f| !f.success);
    let mut candidates: Vec<&PodView> = facts.pods.iter().filter(|p| p.tracked).collect();
    candidates.sort_by(|a, b| a.index.cmp(&b.index).then_with(|| a.name.cmp(&b.name)));
    let mut release = Vec::new();
    let mut new_indexes = 0usize;
    let mut reached_max = false;
    for p in candidates {
        let considered_failed = p.is_failed(facts.only_replace_failed);
        // Upstream's `canRemoveFinalizer`: a failed pod whose index awaits its replacement
        // keeps the finalizer (and stays uncounted) until the replacement carries its failure
        // count.
        let awaits_replacement = awaiting.values().any(|a| a.uid == p.uid);
        let removable = facts.deleting
            || finishing.is_some()
            || p.phase == Phase::Succeeded
            || (considered_failed && !awaits_replacement);
        if !removable {
            continue;
        }
        release.push(PodRef::of(p));
        let uid = p.uid.to_string();
        if p.phase == Phase::Succeeded && !uncounted_failed.contains(&uid) {
            if facts.indexed {
                if p.index
                    .is_some_and(|i| facts.valid_index(p) && !prev_indexes.contains(i))
                {
                    new_indexes += 1;
                }
            } else if !uncounted_succeeded.contains(&uid) {
                uncounted_succeeded.push(uid);
            }
        } else if (considered_failed || failing)
            && !uncounted_failed.contains(&uid)
            && facts.valid_index(p)
            // A failure an `Ignore` rule matched loses its finalizer but is never counted.
            && p.counts_as_failure()
        {
            uncounted_failed.push(uid);
        }
        if new_indexes + uncounted_succeeded.len() + uncounted_failed.len()
            >= facts.config.max_uncounted_pods
        {
            reached_max = true;
            break;
        }
    }
    Tracked {
        release,
        uncounted_succeeded,
        uncounted_failed,
        counted_succeeded,
        counted_failed,
        reached_max,
    }
}
