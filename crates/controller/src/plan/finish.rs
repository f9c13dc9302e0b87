//! Recording the outcome, as upstream's `enactJobFinished`: the interim condition
//! (`SuccessCriteriaMet` or `FailureTarget`) first, in its own write; the terminal one
//! (`Complete` with `completionTime`, or `Failed`) in a later sync, once every pod is counted,
//! none is left running or terminating, and no pod change is still on its way to the cache
//! (UPSTREAM-RULES §6.4).

use jobwarden_rules::condition::{COMPLETE, FAILED, FAILURE_TARGET, SUCCESS_CRITERIA_MET};
use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::conditions;
use super::facts::JobFacts;
use super::outcome::Finishing;
use super::types::{Finish, event};
use jobwarden_events::EventRecord;

/// What recording the outcome did.
#[derive(Default)]
pub(super) struct Enacted {
    /// The interim condition was added: the next step comes as soon as it is stored.
    pub interim_added: bool,
    pub events: Vec<EventRecord>,
    pub finished: Option<Finish>,
}

/// `pods_pending`: some pod's outcome is not yet counted, or a replacement is still to come.
pub(super) fn enact(
    facts: &JobFacts<'_>,
    f: &Finishing,
    pods_pending: bool,
    terminating: i32,
    conds: &mut Vec<JobCondition>,
    status: &mut JobStatus,
) -> Enacted {
    let now = facts.now;
    if !f.interim_stored {
        let interim = if f.success {
            SUCCESS_CRITERIA_MET
        } else {
            FAILURE_TARGET
        };
        conditions::ensure(conds, interim, "True", &f.reason, &f.message, now);
        return Enacted {
            interim_added: true,
            ..Enacted::default()
        };
    }
    let busy = pods_pending || terminating > 0 || status.active.unwrap_or(0) > 0;
    if busy || !facts.in_flight.pods_settled {
        return Enacted::default();
    }
    let mut events = Vec::new();
    if f.success {
        conditions::ensure(conds, COMPLETE, "True", &f.reason, &f.message, now);
        // A start time written by a replica whose clock ran ahead must not make the
        // completion time precede it.
        let start = status.start_time.as_ref().map(|t| t.0);
        status.completion_time = Some(Time(start.map_or(now, |s| s.max(now))));
        if let Some(c) = facts.completions
            && status.succeeded.unwrap_or(0) > c
        {
            events.push(event(
                true,
                "TooManySucceededPods",
                "Too many succeeded pods running after completion count reached",
            ));
        }
        events.push(event(false, "Completed", "Job completed"));
    } else {
        conditions::ensure(conds, FAILED, "True", &f.reason, &f.message, now);
        events.push(event(true, &f.reason, &f.message));
    }
    Enacted {
        interim_added: false,
        events,
        finished: Some(Finish {
            succeeded: f.success,
            reason: f.reason.clone(),
        }),
    }
}
