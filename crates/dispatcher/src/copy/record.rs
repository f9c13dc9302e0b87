//! What the dispatcher keeps on a user's Job, read back: its record (`jobwarden.io/worker`),
//! the lost mark (`jobwarden.io/worker-lost-since`), and the user's own choices
//! (`jobwarden.io/workers`, `jobwarden.io/on-worker-lost`). The dispatcher decides from them,
//! and `explain` and `doctor` tell them. Pure.

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use std::time::Duration;

use jobwarden_rules::well_known::{
    DEFAULT_MAX_MOVES, MAX_MOVES_ANNOTATION, MOVED_FROM_ANNOTATION, ON_WORKER_DRAIN_ANNOTATION,
    ON_WORKER_LOST_ANNOTATION, UNSCHEDULABLE_SECONDS_ANNOTATION, WORKER_ANNOTATION,
    WORKER_LOST_SINCE_ANNOTATION, WORKERS_ANNOTATION,
};

use crate::placement::Named;

/// What a Job does once its worker has been lost for `workerLostSeconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnWorkerLost {
    /// Another worker runs it (the default).
    Redispatch,
    /// It stays, and goes on when its worker answers again.
    Wait,
    /// It fails with the reason `WorkerLost`.
    Fail,
}

impl OnWorkerLost {
    pub const VALUES: [&str; 3] = ["Redispatch", "Wait", "Fail"];

    /// The annotation's value; absent or unknown is the default (the webhook refuses an
    /// unknown one).
    pub fn parse(value: Option<&str>) -> OnWorkerLost {
        match value.map(str::trim) {
            Some("Wait") => OnWorkerLost::Wait,
            Some("Fail") => OnWorkerLost::Fail,
            _ => OnWorkerLost::Redispatch,
        }
    }
}

/// What a Job on a draining worker does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnWorkerDrain {
    /// It stays to its end (the default).
    Finish,
    /// It moves at once.
    Redispatch,
}

/// What the Job does when its worker drains.
pub fn on_worker_drain(job: &Value) -> OnWorkerDrain {
    match annotation(job, ON_WORKER_DRAIN_ANNOTATION) {
        Some("Redispatch") => OnWorkerDrain::Redispatch,
        _ => OnWorkerDrain::Finish,
    }
}

/// The annotation `key` of `job`, trimmed; `None` when absent or blank.
pub fn annotation<'v>(job: &'v Value, key: &str) -> Option<&'v str> {
    job.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// The worker the Job is recorded on.
pub fn recorded(job: &Value) -> Option<&str> {
    annotation(job, WORKER_ANNOTATION)
}

/// When the Job's worker was first seen lost, as written on it.
pub fn lost_since(job: &Value) -> Option<Timestamp> {
    annotation(job, WORKER_LOST_SINCE_ANNOTATION).and_then(|t| t.parse().ok())
}

/// The workers the Job names.
pub fn named(job: &Value) -> Named {
    Named::parse(annotation(job, WORKERS_ANNOTATION))
}

/// What the Job does once its worker is lost.
pub fn on_worker_lost(job: &Value) -> OnWorkerLost {
    OnWorkerLost::parse(annotation(job, ON_WORKER_LOST_ANNOTATION))
}

/// The workers the Job left because its copy could not be scheduled there, oldest first.
pub fn moved_from(job: &Value) -> Vec<&str> {
    annotation(job, MOVED_FROM_ANNOTATION)
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|w| !w.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// How long the Job's copy may stay unschedulable before it moves: its own
/// `jobwarden.io/unschedulable-seconds`, else the policy's (`default`). A value the webhook
/// would refuse counts as absent.
pub fn unschedulable_limit(job: &Value, default: Duration) -> Duration {
    annotation(job, UNSCHEDULABLE_SECONDS_ANNOTATION)
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|s| *s > 0)
        .map_or(default, Duration::from_secs)
}

/// How many times the Job may move because its copy could not be scheduled.
pub fn max_moves(job: &Value) -> u32 {
    annotation(job, MAX_MOVES_ANNOTATION)
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_MAX_MOVES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_record_and_the_choices_are_read_back() {
        let job = json!({"metadata": {"annotations": {
            "jobwarden.io/worker": " east ", "jobwarden.io/workers": "east,west",
            "jobwarden.io/worker-lost-since": "2026-11-27T10:00:00Z",
            "jobwarden.io/on-worker-lost": "Wait"}}});
        assert_eq!(recorded(&job), Some("east"));
        assert_eq!(
            named(&job),
            Named::Only(vec!["east".to_owned(), "west".to_owned()])
        );
        assert_eq!(lost_since(&job), "2026-11-27T10:00:00Z".parse().ok());
        assert_eq!(on_worker_lost(&job), OnWorkerLost::Wait);
        let plain = json!({"metadata": {"annotations": {"jobwarden.io/worker": ""}}});
        assert_eq!(recorded(&plain), None);
        assert_eq!(named(&plain), Named::Any);
        assert_eq!(on_worker_lost(&plain), OnWorkerLost::Redispatch);
    }

    #[test]
    fn the_moves_and_their_limits_are_read_back() {
        let job = json!({"metadata": {"annotations": {
            "jobwarden.io/moved-from": "alpha, beta", "jobwarden.io/max-moves": "1",
            "jobwarden.io/unschedulable-seconds": "20"}}});
        let policy = Duration::from_secs(300);
        assert_eq!(moved_from(&job), ["alpha", "beta"]);
        assert_eq!(max_moves(&job), 1);
        assert_eq!(unschedulable_limit(&job, policy), Duration::from_secs(20));
        let plain = json!({"metadata": {"annotations": {
            "jobwarden.io/unschedulable-seconds": "0", "jobwarden.io/max-moves": "many"}}});
        assert!(moved_from(&plain).is_empty());
        assert_eq!(max_moves(&plain), DEFAULT_MAX_MOVES);
        assert_eq!(unschedulable_limit(&plain, policy), policy);
    }
}
