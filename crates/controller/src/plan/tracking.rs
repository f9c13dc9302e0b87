//! Upstream's tracking step (`trackJobStatusAndRemoveFinalizers`), once the outcome is
//! decided: a finished pod is first listed in `uncountedTerminatedPods` (an Indexed success: in
//! `completedIndexes`), then released, then moved into the counters.

use std::collections::{BTreeMap, HashSet};

use jobwarden_rules::indexes::IndexSet;

use super::facts::JobFacts;
use super::outcome::Finishing;
use super::types::PodRef;
use crate::pods::Phase;
use crate::pods::view::PodView;

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
    let mut t = count_released(facts);
    let failing = finishing.is_some_and(|f| !f.success);
    let mut candidates: Vec<&PodView> = facts.pods.iter().filter(|p| p.tracked).collect();
    candidates.sort_by(|a, b| a.index.cmp(&b.index).then_with(|| a.name.cmp(&b.name)));
    let mut new_indexes = 0usize;
    for p in candidates {
        if !can_remove_finalizer(facts, finishing.is_some(), awaiting, p) {
            continue;
        }
        t.release.push(PodRef::of(p));
        if t.list_uncounted(facts, p, failing, prev_indexes) {
            new_indexes += 1;
        }
        if new_indexes + t.uncounted_succeeded.len() + t.uncounted_failed.len()
            >= facts.config.max_uncounted_pods
        {
            t.reached_max = true;
            break;
        }
    }
    t
}

/// The stored uncounted lists, less the pods whose finalizer is gone: those are counted now,
/// their UIDs moved into the counters. Nothing released yet.
fn count_released(facts: &JobFacts<'_>) -> Tracked {
    let old = facts.stored();
    let uncounted = old.uncounted_terminated_pods.clone().unwrap_or_default();
    let mut uncounted_succeeded = uncounted.succeeded.unwrap_or_default();
    let mut uncounted_failed = uncounted.failed.unwrap_or_default();
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
    Tracked {
        release: Vec::new(),
        uncounted_succeeded,
        uncounted_failed,
        counted_succeeded,
        counted_failed,
        reached_max: false,
    }
}

/// Upstream's `canRemoveFinalizer`: a failed pod whose index awaits its replacement keeps the
/// finalizer (and stays uncounted) until the replacement carries its failure count.
fn can_remove_finalizer(
    facts: &JobFacts<'_>,
    finishing: bool,
    awaiting: &BTreeMap<i32, &PodView<'_>>,
    p: &PodView<'_>,
) -> bool {
    let awaits_replacement = awaiting.values().any(|a| a.uid == p.uid);
    facts.deleting
        || finishing
        || p.phase == Phase::Succeeded
        || (p.is_failed(facts.only_replace_failed) && !awaits_replacement)
}

impl Tracked {
    /// Lists a released pod as uncounted, once; whether it is a success at an index new to
    /// `completedIndexes` (an Indexed success is recorded there, not in the lists).
    fn list_uncounted(
        &mut self,
        facts: &JobFacts<'_>,
        p: &PodView<'_>,
        failing: bool,
        prev_indexes: &IndexSet,
    ) -> bool {
        let uid = p.uid.to_string();
        if p.phase == Phase::Succeeded && !self.uncounted_failed.contains(&uid) {
            if facts.indexed {
                return p
                    .index
                    .is_some_and(|i| facts.valid_index(p) && !prev_indexes.contains(i));
            }
            if !self.uncounted_succeeded.contains(&uid) {
                self.uncounted_succeeded.push(uid);
            }
        } else if (p.is_failed(facts.only_replace_failed) || failing)
            && !self.uncounted_failed.contains(&uid)
            && facts.valid_index(p)
            // A failure an `Ignore` rule matched loses its finalizer but is never counted.
            && p.counts_as_failure()
        {
            self.uncounted_failed.push(uid);
        }
        false
    }
}
