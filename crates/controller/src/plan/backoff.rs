//! The delay before a failed pod is replaced: upstream's exponential back-off (10 s, doubling,
//! at most 10 min) counted over the failures since the last success. The record is kept per Job
//! by the controller between syncs, as upstream's `backoffStore` keeps it, so a failed pod that
//! is gone still holds its replacement back; a controller that has none (after a restart or a
//! leader change) reads it from the failed pods that are left. Pure arithmetic; it never sleeps
//! and never reads a clock.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::pods::view::PodView;
use crate::pods::{CachedPod, Phase};

/// Upstream's `DefaultJobPodFailureBackOff`.
pub const DEFAULT_BACKOFF: Duration = Duration::from_secs(10);
/// Upstream's `MaxJobPodFailureBackOff` (`10 * time.Minute` in kube-controller-manager v1.36).
pub const MAX_BACKOFF: Duration = Duration::from_secs(600);

/// Failures since the last success, and when the latest of them happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BackoffRecord {
    pub failures_after_last_success: u32,
    pub last_failure: Option<Timestamp>,
}

impl BackoffRecord {
    /// Upstream's `newBackoffRecord`: the record after the pods that finished since it was
    /// written. A success resets it; only failures after the last success count.
    pub fn updated(&self, succeeded: &[&PodView<'_>], failed: &[&PodView<'_>]) -> BackoffRecord {
        let last_success = succeeded.iter().map(|p| finished(p)).max();
        let Some(last_success) = last_success else {
            let Some(last) = failed.iter().map(|p| finished(p)).max() else {
                return *self;
            };
            return BackoffRecord {
                failures_after_last_success: self
                    .failures_after_last_success
                    .saturating_add(u32::try_from(failed.len()).unwrap_or(u32::MAX)),
                last_failure: last,
            };
        };
        let after: Vec<Option<Timestamp>> = failed
            .iter()
            .map(|p| finished(p))
            .filter(|t| *t > last_success)
            .collect();
        BackoffRecord {
            failures_after_last_success: u32::try_from(after.len()).unwrap_or(u32::MAX),
            last_failure: after.into_iter().max().flatten(),
        }
    }
}

/// Upstream's `getFinishedTime`, falling back to the creation time as it does.
fn finished(p: &CachedPod) -> Option<Timestamp> {
    p.finished_at.or(p.created)
}

/// The record read from the pods themselves, for a controller that remembers none: the
/// finished pods stay in the API until the Job goes, so a new leader sees at least the history
/// that is left (upstream's new leader starts from nothing, so this never replaces sooner).
pub fn record_from_pods(pods: &[PodView], only_replace_failed: bool) -> BackoffRecord {
    let last_success = pods
        .iter()
        .filter(|p| p.phase == Phase::Succeeded)
        .filter_map(|p| p.finished_at)
        .max();
    let mut record = BackoffRecord::default();
    for p in pods.iter().filter(|p| p.is_failed(only_replace_failed)) {
        let Some(at) = p.finished_at else { continue };
        if last_success.is_some_and(|s| at <= s) {
            continue;
        }
        record.failures_after_last_success += 1;
        record.last_failure = record.last_failure.max(Some(at));
    }
    record
}

/// Upstream's `getRemainingTimeForFailuresCount`.
pub fn remaining(
    record: &BackoffRecord,
    now: Timestamp,
    base: Duration,
    max: Duration,
) -> Duration {
    let Some(last) = record.last_failure else {
        return Duration::ZERO;
    };
    if record.failures_after_last_success == 0 {
        return Duration::ZERO;
    }
    let mut delay = base;
    for _ in 1..record.failures_after_last_success {
        delay = delay.saturating_mul(2);
        if delay >= max {
            delay = max;
            break;
        }
    }
    let elapsed = now
        .duration_since(last)
        .try_into()
        .unwrap_or(Duration::ZERO);
    delay.saturating_sub(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn record(n: u32, last: i64) -> BackoffRecord {
        BackoffRecord {
            failures_after_last_success: n,
            last_failure: Some(at(last)),
        }
    }

    #[test]
    fn delay_doubles_from_ten_seconds_up_to_ten_minutes() {
        let cases = [
            (1, 10),
            (2, 20),
            (3, 40),
            (4, 80),
            (5, 160),
            (6, 320),
            (7, 600),
            (8, 600),
            (30, 600),
        ];
        for (failures, secs) in cases {
            let got = remaining(
                &record(failures, 1000),
                at(1000),
                DEFAULT_BACKOFF,
                MAX_BACKOFF,
            );
            assert_eq!(got, Duration::from_secs(secs), "{failures} failures");
        }
    }

    #[test]
    fn time_already_waited_is_deducted() {
        let r = record(2, 1000);
        assert_eq!(
            remaining(&r, at(1015), DEFAULT_BACKOFF, MAX_BACKOFF),
            Duration::from_secs(5)
        );
        assert_eq!(
            remaining(&r, at(1020), DEFAULT_BACKOFF, MAX_BACKOFF),
            Duration::ZERO
        );
        assert_eq!(
            remaining(&r, at(5000), DEFAULT_BACKOFF, MAX_BACKOFF),
            Duration::ZERO
        );
    }

    #[test]
    fn no_failure_means_no_delay() {
        assert_eq!(
            remaining(
                &BackoffRecord::default(),
                at(0),
                DEFAULT_BACKOFF,
                MAX_BACKOFF
            ),
            Duration::ZERO
        );
    }
}
