//! Reading and setting Job conditions the way upstream's controller does
//! (`ensureJobConditionStatus`): a condition is updated in place, never removed, and a `False`
//! one is never added where none existed. Pure list edits.

use k8s_openapi::api::batch::v1::JobCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

pub fn find<'a>(conditions: &'a [JobCondition], type_: &str) -> Option<&'a JobCondition> {
    conditions.iter().find(|c| c.type_ == type_)
}

pub fn is_true(conditions: &[JobCondition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == "True")
}

pub fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> JobCondition {
    JobCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// Sets the condition's status, reason and message; returns whether anything changed.
pub fn ensure(
    conditions: &mut Vec<JobCondition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == type_) {
        let same = existing.status == status
            && existing.reason.as_deref() == Some(reason)
            && existing.message.as_deref() == Some(message);
        if same {
            return false;
        }
        *existing = new_condition(type_, status, reason, message, now);
        return true;
    }
    if status == "False" {
        return false;
    }
    conditions.push(new_condition(type_, status, reason, message, now));
    true
}
