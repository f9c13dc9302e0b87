//! The status the dispatcher writes on a user's Job: its copy's, mirrored (every field of the
//! copy's status, conditions included, fields this build does not know too), or a failure of
//! its own (`WorkerLost`, `DeadlineExceeded` before any copy ran). Every write is held to
//! kube-apiserver's Job status rules (`jobwarden_rules::validate_status_update`) before it is
//! sent, and shaped so they accept it:
//!
//! * counters never go down (a copy made again after its worker was lost starts from zero);
//! * `startTime` stays as first written while the Job is not suspended (the API server
//!   refuses a change), and `completionTime` once written;
//! * a `Complete`, `Failed`, `FailureTarget` or `SuccessCriteriaMet` condition that is true on
//!   the user's Job stays, and conditions of types the Job API does not define (someone
//!   else's) are kept.
//!
//! Pure: the caller gives the time.

use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};

use jobwarden_rules::condition::{
    COMPLETE, FAILED, FAILURE_TARGET, SUCCESS_CRITERIA_MET, SUSPENDED,
};
use jobwarden_rules::well_known::JOB_STATUS_FIELDS;
use jobwarden_rules::{ErrorList, JobObject};

/// Condition types the Job API defines: mirrored from the copy. Others are someone else's.
const JOB_CONDITION_TYPES: [&str; 5] = [
    SUSPENDED,
    COMPLETE,
    FAILED,
    FAILURE_TARGET,
    SUCCESS_CRITERIA_MET,
];

/// Conditions that, once true, the API server never lets go.
const STICKY_CONDITIONS: [&str; 4] = [COMPLETE, FAILED, FAILURE_TARGET, SUCCESS_CRITERIA_MET];

/// A write the status rules refuse: the dispatcher does not send it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", .errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct Refused {
    pub errors: ErrorList,
}

/// The user's Job's status made to show its copy's: `Ok(None)` when it shows it already (or
/// the user's Job has finished: its status is final).
pub fn mirror(user: &Value, copy: &Value) -> Result<Option<Value>, Refused> {
    if is_finished(user) {
        return Ok(None);
    }
    let old = status_of(user);
    let source = status_of(copy);
    let mut new = old.clone();
    for field in JOB_STATUS_FIELDS {
        match source.get(field) {
            Some(v) if !v.is_null() => new.insert(field.to_owned(), v.clone()),
            _ => new.remove(field),
        };
    }
    // A field of the Job API's status this build does not know yet travels too.
    for (field, value) in &source {
        if !JOB_STATUS_FIELDS.contains(&field.as_str()) {
            new.insert(field.clone(), value.clone());
        }
    }
    for counter in ["succeeded", "failed"] {
        let most = int(&old, counter).max(int(&new, counter));
        if most > 0 {
            new.insert(counter.to_owned(), json!(most));
        }
    }
    let conditions = merged_conditions(conditions(&old), conditions(&source));
    if conditions.is_empty() {
        new.remove("conditions");
    } else {
        new.insert("conditions".to_owned(), Value::Array(conditions));
    }
    let resuming = condition_status(&old, SUSPENDED) == Some("True")
        && condition_status(&new, SUSPENDED) == Some("False");
    if !is_suspended(user)
        && !resuming
        && let Some(first) = old.get("startTime").filter(|t| !t.is_null())
    {
        new.insert("startTime".to_owned(), first.clone());
    }
    if let Some(done) = old.get("completionTime").filter(|t| !t.is_null()) {
        new.insert("completionTime".to_owned(), done.clone());
    }
    // Clocks of two clusters: a copy that ended before the user's Job's kept start (its
    // worker's clock behind) ends at that start instead, as the rules require.
    if let (Some(start), Some(end)) = (time(&new, "startTime"), time(&new, "completionTime"))
        && end < start
        && let Some(kept) = new.get("startTime").cloned()
    {
        new.insert("completionTime".to_owned(), kept);
    }
    written(user, &old, new)
}

/// The user's Job failed by the dispatcher itself, as upstream's controller fails a Job:
/// `FailureTarget` and `Failed` with `reason` and `message`, no pods counted as running, a
/// `startTime` (a finished Job must have one; `now` when no copy ever ran).
pub fn failed(
    user: &Value,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> Result<Option<Value>, Refused> {
    if is_finished(user) {
        return Ok(None);
    }
    let old = status_of(user);
    let mut new = old.clone();
    let at = json!(now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
    let condition = |type_: &str| {
        json!({"type": type_, "status": "True", "reason": reason, "message": message,
               "lastProbeTime": at, "lastTransitionTime": at})
    };
    // A FailureTarget already true stays as written; a false one gives way to the true one.
    let mut conditions: Vec<Value> = conditions(&old)
        .iter()
        .filter(|c| match c.get("type").and_then(Value::as_str) {
            Some(FAILED) => false,
            Some(FAILURE_TARGET) => c.get("status").and_then(Value::as_str) == Some("True"),
            _ => true,
        })
        .cloned()
        .collect();
    if condition_status(&old, FAILURE_TARGET) != Some("True") {
        conditions.push(condition(FAILURE_TARGET));
    }
    conditions.push(condition(FAILED));
    new.insert("conditions".to_owned(), Value::Array(conditions));
    for count in ["active", "ready", "terminating"] {
        new.insert(count.to_owned(), json!(0));
    }
    new.remove("uncountedTerminatedPods");
    if old.get("startTime").is_none_or(Value::is_null) {
        new.insert("startTime".to_owned(), at);
    }
    written(user, &old, new)
}

/// The merge patch of `jobs/status` from `old` to `new` (`None` when equal), with the stored
/// resourceVersion as its precondition, once the rules accept the status it leaves.
fn written(
    user: &Value,
    old: &Map<String, Value>,
    new: Map<String, Value>,
) -> Result<Option<Value>, Refused> {
    if *old == new {
        return Ok(None);
    }
    let changes = merge_diff(&Value::Object(old.clone()), &Value::Object(new));
    let mut proposed = user.clone();
    json_patch::merge(&mut proposed, &json!({"status": changes}));
    let (Ok(before), Ok(after)) = (JobObject::parse(user), JobObject::parse(&proposed)) else {
        return Err(Refused {
            errors: ErrorList::new(),
        });
    };
    let errors = jobwarden_rules::validate_status_update(&after, &before);
    if !errors.is_empty() {
        return Err(Refused { errors });
    }
    let resource_version = user
        .pointer("/metadata/resourceVersion")
        .cloned()
        .unwrap_or(Value::Null);
    Ok(Some(json!({
        "metadata": {"resourceVersion": resource_version},
        "status": changes,
    })))
}

/// The JSON merge patch (RFC 7386) that turns `old` into `new`: a member gone is sent as null,
/// an object changed is sent as its own merge patch, anything else whole. (`{}` sent for an
/// emptied `uncountedTerminatedPods` would merge into nothing, and leave the pods it listed.)
fn merge_diff(old: &Value, new: &Value) -> Value {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut patch = Map::new();
            for (k, v) in n {
                match o.get(k) {
                    Some(was) if was == v => {}
                    Some(was @ Value::Object(_)) if v.is_object() => {
                        patch.insert(k.clone(), merge_diff(was, v));
                    }
                    _ => {
                        patch.insert(k.clone(), v.clone());
                    }
                }
            }
            for k in o.keys() {
                if !n.contains_key(k) {
                    patch.insert(k.clone(), Value::Null);
                }
            }
            Value::Object(patch)
        }
        _ => new.clone(),
    }
}

/// The copy's conditions in its order (where a sticky one is true on the user's Job, as it is
/// written there), then those of the user's Job the copy has no word on: conditions of types
/// other than the Job API's, and the sticky ones that are true.
fn merged_conditions(user: &[Value], copy: &[Value]) -> Vec<Value> {
    let type_of = |c: &Value| c.get("type").and_then(Value::as_str).map(str::to_owned);
    let sticky_on_user = |t: &str| {
        STICKY_CONDITIONS
            .contains(&t)
            .then(|| {
                user.iter().find(|c| {
                    c.get("type").and_then(Value::as_str) == Some(t)
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
            })
            .flatten()
    };
    let mut merged: Vec<Value> = copy
        .iter()
        .map(|c| match type_of(c).as_deref().and_then(sticky_on_user) {
            Some(kept) => kept.clone(),
            None => c.clone(),
        })
        .collect();
    for c in user {
        let Some(t) = type_of(c) else { continue };
        if merged
            .iter()
            .any(|m| type_of(m).as_deref() == Some(t.as_str()))
        {
            continue;
        }
        let kept = if JOB_CONDITION_TYPES.contains(&t.as_str()) {
            sticky_on_user(&t).is_some()
        } else {
            true
        };
        if kept {
            merged.push(c.clone());
        }
    }
    merged
}

fn status_of(job: &Value) -> Map<String, Value> {
    job.get("status")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

fn conditions(status: &Map<String, Value>) -> &[Value] {
    status
        .get("conditions")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn condition_status<'s>(status: &'s Map<String, Value>, type_: &str) -> Option<&'s str> {
    conditions(status)
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
        .and_then(|c| c.get("status"))
        .and_then(Value::as_str)
}

fn int(status: &Map<String, Value>, key: &str) -> i64 {
    status.get(key).and_then(Value::as_i64).unwrap_or(0)
}

fn time(status: &Map<String, Value>, key: &str) -> Option<Timestamp> {
    status.get(key)?.as_str()?.parse().ok()
}

fn is_suspended(job: &Value) -> bool {
    job.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true)
}

/// `Complete=True` or `Failed=True`.
pub fn is_finished(job: &Value) -> bool {
    let status = status_of(job);
    condition_status(&status, COMPLETE) == Some("True")
        || condition_status(&status, FAILED) == Some("True")
}

/// The terminal condition a Job shows, if any.
pub fn terminal_condition(job: &Value) -> Option<&'static str> {
    let status = status_of(job);
    [COMPLETE, FAILED]
        .into_iter()
        .find(|t| condition_status(&status, t) == Some("True"))
}

#[cfg(test)]
mod tests;
