//! The `Suspended` condition (KEP-2232), set in the sync that managed the pods: `True`
//! (`JobSuspended`) once a suspended Job has no active pod, with `startTime` cleared in the same
//! write as upstream does (MutableSchedulingDirectivesForSuspendedJobs, on by default in v1.36,
//! so the template's scheduling directives may change while suspended); `False`
//! (`JobResumed`) on resume, with `startTime` set again, so `activeDeadlineSeconds` counts
//! running time only.

use jobwarden_rules::condition::SUSPENDED;
use k8s_openapi::api::batch::v1::JobCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::conditions;
use super::facts::JobFacts;
use super::types::event;
use jobwarden_events::EventRecord;
use jobwarden_rules::well_known::{
    MESSAGE_JOB_RESUMED, MESSAGE_JOB_SUSPENDED, REASON_JOB_RESUMED, REASON_JOB_SUSPENDED,
};

/// Updates the condition and `startTime`; the event to record when the condition changed.
pub(super) fn update_condition(
    facts: &JobFacts<'_>,
    active: i32,
    conds: &mut Vec<JobCondition>,
    start_time: &mut Option<Time>,
) -> Option<EventRecord> {
    if facts.suspended {
        let set = active == 0
            && conditions::ensure(
                conds,
                SUSPENDED,
                "True",
                REASON_JOB_SUSPENDED,
                MESSAGE_JOB_SUSPENDED,
                facts.now,
            );
        set.then(|| {
            *start_time = None;
            event(false, "Suspended", MESSAGE_JOB_SUSPENDED)
        })
    } else {
        let resumed = conditions::ensure(
            conds,
            SUSPENDED,
            "False",
            REASON_JOB_RESUMED,
            MESSAGE_JOB_RESUMED,
            facts.now,
        );
        resumed.then(|| {
            *start_time = Some(Time(facts.now));
            event(false, "Resumed", MESSAGE_JOB_RESUMED)
        })
    }
}
