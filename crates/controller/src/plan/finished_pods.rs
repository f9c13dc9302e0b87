//! Counting finished pods, exactly once: what finished since the status was written
//! (upstream's `getNewFinishedPods`, `calculateSucceededIndexes`). The tracking step that then
//! puts each finished pod into the status before its finalizer may go is `tracking`.

use std::collections::HashSet;

use jobwarden_rules::indexes::IndexSet;

use super::backoff::{self, BackoffRecord};
use super::facts::JobFacts;
use crate::pods::Phase;
use crate::pods::view::PodView;

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
