//! `jobwarden.io/pod-start-timeout`: a pending pod whose kubelet reports it cannot start a
//! container (`NotStarted`) for longer than the timeout is failed, with the pod condition
//! `jobwarden.io/PodStartTimeout` saying why, and deleted. From then on it is a failed pod like
//! any other: `backoffLimit`, `backoffLimitPerIndex` and the pod failure policy (which may
//! match the condition) decide what follows. The sync that fails pods does nothing else to the
//! active pods, as a sync that deletes pods creates none; a pod not yet out of time sets the
//! next look at its deadline, so nothing polls.

use std::time::Duration;

use jobwarden_rules::pod_timing::START_TIMEOUT_CONDITION;
use jobwarden_rules::seconds;

use super::facts::JobFacts;
use super::types::{DeleteReason, PodDeletion, PodRef, PodStartFailure, event};
use crate::pods::Phase;
use crate::pods::view::PodView;
use jobwarden_events::EventRecord;

/// The pods to fail and delete now, and when the next one runs out of time.
#[derive(Debug, Default)]
pub(super) struct TimedOut {
    pub fail: Vec<PodStartFailure>,
    pub delete: Vec<PodDeletion>,
    pub requeue: Option<Duration>,
}

impl TimedOut {
    pub fn acts(&self) -> bool {
        !self.delete.is_empty()
    }

    /// One event for the sync, naming the pods.
    pub fn event(&self) -> Option<EventRecord> {
        let first = self.fail.first()?;
        let names: Vec<&str> = self.fail.iter().map(|f| f.pod.name.as_str()).collect();
        Some(event(
            true,
            "PodStartTimeout",
            &format!(
                "Failed pods that did not start in time: {}: {}",
                names.join(", "),
                first.message
            ),
        ))
    }
}

pub(super) fn check(facts: &JobFacts<'_>, active: &[&PodView<'_>]) -> TimedOut {
    let mut out = TimedOut::default();
    let Some(timeout) = facts.start_timeout else {
        return out;
    };
    // A pod failed here whose deletion did not follow (the controller stopped in between).
    for p in facts
        .pods
        .iter()
        .filter(|p| p.phase == Phase::Failed && !p.deleting && failed_for_not_starting(p))
    {
        if !facts.in_flight.deleting.contains(&*p.uid) {
            out.delete.push(deletion(p));
        }
    }
    for p in active {
        let Some(stuck) = &p.not_started else {
            continue;
        };
        if facts.in_flight.deleting.contains(&*p.uid) {
            continue;
        }
        let since = stuck.since.unwrap_or(facts.now);
        let waited: Duration = facts
            .now
            .duration_since(since)
            .try_into()
            .unwrap_or(Duration::ZERO);
        if waited < timeout {
            let left = timeout - waited;
            out.requeue = Some(out.requeue.map_or(left, |d| d.min(left)));
            continue;
        }
        out.fail.push(PodStartFailure {
            pod: PodRef::of(p),
            reason: stuck.reason,
            message: format!(
                "Container {:?} was still waiting ({}) {} after the pod was scheduled; jobwarden.io/pod-start-timeout is {}",
                &*stuck.container,
                stuck.reason,
                seconds::format(waited.as_secs()),
                seconds::format(timeout.as_secs()),
            ),
            at: facts.now,
        });
        out.delete.push(deletion(p));
    }
    out
}

fn failed_for_not_starting(p: &PodView<'_>) -> bool {
    p.conditions
        .iter()
        .any(|(t, s)| &**t == START_TIMEOUT_CONDITION && &**s == "True")
}

fn deletion(p: &PodView<'_>) -> PodDeletion {
    PodDeletion {
        pod: PodRef::of(p),
        reason: DeleteReason::StartTimedOut,
    }
}
