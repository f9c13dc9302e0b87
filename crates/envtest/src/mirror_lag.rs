//! The dispatcher's mirror seen from outside: each status a copy was stored with on its worker,
//! matched to the first version of the user's Job that shows it, both as a watch delivered
//! them ([`crate::job_versions`]). Pure.
//!
//! How a copy's status is matched: both statuses are reduced to the fields the mirror copies
//! ([`mirrored`]: the pod counters, the indexes, the uncounted pods, and the Job API's
//! conditions by type, status and reason; not the times, which the mirror may keep as first
//! written),
//! and a copy's status counts as shown by the first version of the user's Job that shows it
//! *or a later status of the same copy*: the mirror writes a burst of a copy's changes as one
//! write, so a status its successor replaced within the batch is shown by the successor.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::job_versions::Version;

/// The Job API's condition types, which the mirror copies (others on the user's Job are
/// someone else's).
const JOB_CONDITIONS: [&str; 5] = [
    "Suspended",
    "Complete",
    "Failed",
    "FailureTarget",
    "SuccessCriteriaMet",
];

/// The fields of a Job's status the mirror copies, in a form that compares equal when the
/// user's Job shows what its copy shows.
pub fn mirrored(status: &Value) -> Value {
    let count = |k: &str| status.get(k).and_then(Value::as_i64).unwrap_or(0);
    let text = |k: &str| status.get(k).and_then(Value::as_str).unwrap_or("");
    let uncounted = |k: &str| {
        let mut uids: Vec<&str> = status
            .pointer(&format!("/uncountedTerminatedPods/{k}"))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        uids.sort_unstable();
        uids
    };
    let mut conditions: Vec<String> = status
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let type_ = c.get("type")?.as_str()?;
            let status = c.get("status")?.as_str()?;
            let reason = c.get("reason").and_then(Value::as_str).unwrap_or("");
            JOB_CONDITIONS
                .contains(&type_)
                .then(|| format!("{type_}={status} ({reason})"))
        })
        .collect();
    conditions.sort();
    json!({
        "active": count("active"), "ready": count("ready"), "terminating": count("terminating"),
        "succeeded": count("succeeded"), "failed": count("failed"),
        "completedIndexes": text("completedIndexes"), "failedIndexes": text("failedIndexes"),
        "uncounted": [uncounted("succeeded"), uncounted("failed")],
        "conditions": conditions,
    })
}

/// The lags of one Job's mirror.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lags {
    /// For each status its copy was stored with (each change of [`mirrored`]'s view), from
    /// its arrival to the arrival of the first version of the user's Job that shows it; zero
    /// when the user's Job's version arrived first (the two watches lag apart).
    pub lags: Vec<Duration>,
    /// When each of those statuses arrived, in the same order.
    pub arrived: Vec<Instant>,
    /// Copy statuses no version of the user's Job ever showed.
    pub unmatched: usize,
}

/// Matches the statuses of a copy (`copy`, every version of it, in arrival order) to the
/// versions of its user's Job (`user`, likewise).
pub fn lags(copy: &[Version], user: &[Version]) -> Lags {
    let mut changes: Vec<(&Version, Value)> = Vec::new();
    let mut last = mirrored(&Value::Null);
    for version in copy {
        let view = mirrored(&version.status);
        if view != last {
            changes.push((version, view.clone()));
            last = view;
        }
    }
    let shown: Vec<Value> = user.iter().map(|v| mirrored(&v.status)).collect();
    let mut out = Lags::default();
    let mut from = 0;
    for (i, (version, _)) in changes.iter().enumerate() {
        let later: Vec<&Value> = changes[i..].iter().map(|(_, view)| view).collect();
        match (from..shown.len()).find(|&k| later.contains(&&shown[k])) {
            Some(k) => {
                out.lags
                    .push(user[k].at.saturating_duration_since(version.at));
                out.arrived.push(version.at);
                from = k;
            }
            None => out.unmatched += 1,
        }
    }
    out
}

/// The `q` quantile of `values` (nearest rank); `None` when there are none.
pub fn quantile(values: &[Duration], q: f64) -> Option<Duration> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len().max(1)) - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t0: Instant, ms: u64, status: Value) -> Version {
        Version {
            at: t0 + Duration::from_millis(ms),
            resource_version: ms.to_string(),
            status,
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_status_replaced_within_the_batch_is_shown_by_its_successor() {
        let t0 = Instant::now();
        let running = json!({"active": 1, "ready": 0, "startTime": "t"});
        let uncounted = json!({"active": 0, "uncountedTerminatedPods": {"succeeded": ["p"]}});
        let counted = json!({"active": 0, "succeeded": 1, "uncountedTerminatedPods": {}});
        let complete = json!({"succeeded": 1, "completionTime": "t2", "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True"},
            {"type": "Complete", "status": "True"}]});
        let copy = [
            at(t0, 0, Value::Null),
            at(t0, 100, running.clone()),
            at(t0, 1000, uncounted),
            at(t0, 1100, counted.clone()),
            // A change the mirror does not copy (a time): no status of its own.
            at(
                t0,
                1150,
                json!({"active": 0, "succeeded": 1, "startTime": "other"}),
            ),
            at(t0, 2000, complete.clone()),
        ];
        let user = [
            at(t0, 0, Value::Null),
            // Someone else's condition on the user's Job is not the mirror's.
            at(
                t0,
                450,
                json!({"active": 1, "ready": 0, "conditions": [
                {"type": "example.com/Seen", "status": "True"}]}),
            ),
            at(t0, 1400, counted),
            at(t0, 2400, complete),
        ];
        let got = lags(&copy, &user);
        assert_eq!(got.unmatched, 0);
        assert_eq!(got.lags, [ms(350), ms(400), ms(300), ms(400)]);
        let arrived: Vec<Duration> = got.arrived.iter().map(|a| *a - t0).collect();
        assert_eq!(arrived, [ms(100), ms(1000), ms(1100), ms(2000)]);
    }

    #[test]
    fn a_status_never_shown_is_unmatched_and_an_early_arrival_is_no_lag() {
        let t0 = Instant::now();
        let copy = [
            at(t0, 500, json!({"active": 1})),
            at(t0, 900, json!({"active": 0, "failed": 1})),
        ];
        let user = [at(t0, 400, json!({"active": 1}))];
        let got = lags(&copy, &user);
        assert_eq!(got.lags, [Duration::ZERO]);
        assert_eq!(got.unmatched, 1);
    }

    #[test]
    fn quantiles_by_nearest_rank() {
        let values: Vec<Duration> = (1..=100).rev().map(ms).collect();
        assert_eq!(quantile(&values, 0.5), Some(ms(50)));
        assert_eq!(quantile(&values, 0.99), Some(ms(99)));
        assert_eq!(quantile(&values, 1.0), Some(ms(100)));
        assert_eq!(quantile(&[], 0.5), None);
    }
}
