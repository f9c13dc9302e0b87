//! `backoffLimitPerIndex` (KEP-3850), as upstream's `indexed_job_utils.go`: which indexes have
//! failed for good, which failed pod each pending index is to be replaced from (its failure
//! counts travel to the replacement as annotations), and how long that index backs off. Pure
//! reads of the pods; the failure history lives in the pods themselves, so a new leader sees
//! exactly what the old one saw.

use std::collections::BTreeMap;
use std::time::Duration;

use jobwarden_rules::indexes::IndexSet;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::backoff::{self, BackoffRecord};
use crate::pods::failure_policy::Action;
use crate::pods::view::PodView;
use jobwarden_rules::well_known::{INDEX_FAILURE_COUNT_KEY, INDEX_IGNORED_FAILURE_COUNT_KEY};

/// Upstream's `isIndexFailed`: the pod's failure ends its index when a `FailIndex` rule matched,
/// or when it counts and the index had already used up `limit` failures before it.
pub fn is_index_failed(pod: &PodView, only_replace_failed: bool, limit: i32) -> bool {
    if !pod.is_failed(only_replace_failed) {
        return false;
    }
    if pod
        .policy
        .as_ref()
        .is_some_and(|m| m.action == Action::FailIndex)
    {
        return true;
    }
    pod.counts_as_failure() && pod.index_failures >= limit
}

/// Upstream's `calculateFailedIndexes`: what is stored, plus the indexes whose not yet counted
/// pods failed them. An index already completed is not added: failed and completed indexes must
/// stay disjoint for the status to be accepted, and a success is never taken back.
pub fn failed_indexes(
    stored: Option<&str>,
    completions: i32,
    pods: &[PodView],
    only_replace_failed: bool,
    limit: i32,
    completed: &IndexSet,
) -> IndexSet {
    let mut failed = IndexSet::parse_lenient(stored.unwrap_or(""), completions);
    for p in pods.iter().filter(|p| p.tracked) {
        if let Some(i) = p
            .index
            .filter(|i| *i < completions && !completed.contains(*i))
            && is_index_failed(p, only_replace_failed, limit)
        {
            failed.insert(i);
        }
    }
    failed
}

/// Upstream's `getPodsWithDelayedDeletionPerIndex`: for each index still to run (not completed,
/// not failed, no active pod), the failed pod its replacement inherits the failure counts from.
/// That pod keeps its tracking finalizer (and stays uncounted) until the replacement exists, so
/// the counts survive a crash in between. When several failed, the one with the most failures
/// and, among those, the latest finish is taken.
pub fn pods_awaiting_replacement<'p>(
    pods: &'p [PodView<'p>],
    completions: i32,
    only_replace_failed: bool,
    completed: &IndexSet,
    failed: &IndexSet,
) -> BTreeMap<i32, &'p PodView<'p>> {
    let active: IndexSet = IndexSet::from_indexes(
        pods.iter()
            .filter(|p| p.is_active())
            .filter_map(|p| p.index),
    );
    let mut out: BTreeMap<i32, &PodView> = BTreeMap::new();
    for p in pods
        .iter()
        .filter(|p| p.tracked && p.is_failed(only_replace_failed))
    {
        let Some(i) = p.index.filter(|i| *i < completions) else {
            continue;
        };
        if completed.contains(i) || failed.contains(i) || active.contains(i) {
            continue;
        }
        let newer = out.get(&i).is_none_or(|last| {
            absolute_failures(last) <= absolute_failures(p) && p.finished_at >= last.finished_at
        });
        if newer {
            out.insert(i, p);
        }
    }
    out
}

fn absolute_failures(p: &PodView) -> i64 {
    i64::from(p.index_failures) + i64::from(p.index_ignored_failures)
}

/// Upstream's `getNewIndexFailureCounts`: the replaced pod's counts, plus its own failure on
/// the counted or the ignored side. `(0, 0)` for an index's first pod.
pub fn replacement_counts(replaced: Option<&PodView>) -> (i32, i32) {
    let Some(p) = replaced else {
        return (0, 0);
    };
    if p.counts_as_failure() {
        (p.index_failures.saturating_add(1), p.index_ignored_failures)
    } else {
        (p.index_failures, p.index_ignored_failures.saturating_add(1))
    }
}

/// Writes the counts on a pod manifest about to be created, as upstream's
/// `addIndexFailureCountAnnotation`: the failure count always, the ignored count when non-zero.
pub fn annotate(pod: &mut Value, (failures, ignored): (i32, i32)) {
    let Some(meta) = pod.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
    let Some(annotations) = annotations.as_object_mut() else {
        return;
    };
    annotations.insert(
        INDEX_FAILURE_COUNT_KEY.to_owned(),
        json!(failures.to_string()),
    );
    if ignored > 0 {
        annotations.insert(
            INDEX_IGNORED_FAILURE_COUNT_KEY.to_owned(),
            json!(ignored.to_string()),
        );
    }
}

/// Upstream's `getRemainingTimePerIndex`: the index backs off as if it alone had failed
/// (counted and ignored failures alike) since the replaced pod finished.
pub fn remaining(
    replaced: Option<&PodView>,
    now: Timestamp,
    base: Duration,
    max: Duration,
) -> Duration {
    let Some(p) = replaced else {
        return Duration::ZERO;
    };
    let record = BackoffRecord {
        failures_after_last_success: u32::try_from(absolute_failures(p) + 1).unwrap_or(u32::MAX),
        last_failure: p.finished_at,
    };
    backoff::remaining(&record, now, base, max)
}

#[cfg(test)]
mod tests {
    use super::backoff::{DEFAULT_BACKOFF, MAX_BACKOFF};
    use super::*;
    use crate::pods::CachedPod;
    use crate::testing::*;

    fn view(pod: &CachedPod) -> PodView<'_> {
        PodView {
            pod,
            policy: None,
            tracked: pod.has_finalizer,
        }
    }

    fn cached(b: PodBuilder) -> CachedPod {
        CachedPod::from_pod(&b.build())
    }

    #[test]
    fn an_index_fails_once_its_failures_reach_the_limit() {
        let first = cached(pod("a").index(0).failed_at(5));
        let second = cached(pod("b").index(0).index_failures(1).failed_at(5));
        let running = cached(pod("c").index(0).index_failures(5).running());
        assert!(!is_index_failed(&view(&first), true, 1));
        assert!(is_index_failed(&view(&second), true, 1));
        assert!(is_index_failed(&view(&first), true, 0));
        assert!(!is_index_failed(&view(&running), true, 0));
    }

    #[test]
    fn failed_indexes_join_the_stored_ones_but_never_a_completed_one() {
        let cached = [
            cached(pod("a").index(1).failed_at(5)),
            cached(pod("b").index(3).failed_at(5)),
            cached(pod("c").index(4).failed_at(5).no_finalizer()),
        ];
        let pods: Vec<PodView> = cached.iter().map(view).collect();
        let completed = IndexSet::parse_lenient("3", 6);
        let got = failed_indexes(Some("0"), 6, &pods, true, 0, &completed);
        assert_eq!(got.to_string(), "0,1");
    }

    #[test]
    fn the_replacement_inherits_from_the_latest_most_failed_pod() {
        let cached = [
            cached(pod("a").index(0).failed_at(5)),
            cached(pod("b").index(0).index_failures(1).failed_at(20)),
            cached(pod("c").index(1).failed_at(5)),
            cached(pod("d").index(1).running()),
            cached(pod("e").index(2).failed_at(5)),
        ];
        let pods: Vec<PodView> = cached.iter().map(view).collect();
        let none = IndexSet::new();
        let failed = IndexSet::parse_lenient("2", 3);
        let got = pods_awaiting_replacement(&pods, 3, true, &none, &failed);
        let names: Vec<(i32, &str)> = got.iter().map(|(i, p)| (*i, p.name.as_str())).collect();
        assert_eq!(names, [(0, "b")]);
        assert_eq!(replacement_counts(got.get(&0).copied()), (2, 0));
        assert_eq!(replacement_counts(None), (0, 0));
    }

    #[test]
    fn per_index_backoff_counts_every_failure_of_the_index() {
        let twice = cached(pod("b").index(0).index_failures(1).failed_at(20));
        let twice = view(&twice);
        let d = |s| Duration::from_secs(s);
        assert_eq!(
            remaining(Some(&twice), at(25), DEFAULT_BACKOFF, MAX_BACKOFF),
            d(15)
        );
        assert_eq!(
            remaining(Some(&twice), at(40), DEFAULT_BACKOFF, MAX_BACKOFF),
            d(0)
        );
        assert_eq!(remaining(None, at(0), DEFAULT_BACKOFF, MAX_BACKOFF), d(0));
    }

    #[test]
    fn counts_are_written_on_the_new_pod() {
        let mut p = json!({"metadata": {"annotations": {"x": "1"}}});
        annotate(&mut p, (2, 0));
        assert_eq!(
            p["metadata"]["annotations"],
            json!({"x": "1", INDEX_FAILURE_COUNT_KEY: "2"})
        );
        annotate(&mut p, (2, 1));
        assert_eq!(
            p["metadata"]["annotations"][INDEX_IGNORED_FAILURE_COUNT_KEY],
            "1"
        );
    }
}
