//! How kube-apiserver stores what it is sent: Go's JSON encoding drops `null`s and the zero
//! values of `omitempty` value fields, and an object that is no JSON object is refused.

use serde_json::{Map, Value, json};

use jobwarden_controller::cluster::ApiError;

/// The object's `metadata`, made an empty object when missing. `None` when the object is no
/// JSON object at all, or its metadata is something else: the API server refuses those.
pub(super) fn metadata_mut(v: &mut Value) -> Option<&mut Map<String, Value>> {
    let meta = v
        .as_object_mut()?
        .entry("metadata")
        .or_insert_with(|| json!({}));
    meta.as_object_mut()
}

/// Refuses what kube-apiserver could not decode as an object: the rest of this module may then
/// index `metadata`, `spec` and `status` without a panic.
pub(super) fn well_formed(v: &Value) -> Result<(), ApiError> {
    let part_ok = |k: &str| v.get(k).is_none_or(|p| p.is_object() || p.is_null());
    if v.is_object() && ["metadata", "spec", "status"].into_iter().all(part_ok) {
        Ok(())
    } else {
        Err(ApiError::refused(
            400,
            "BadRequest",
            "the object, its metadata, spec and status must be JSON objects",
        ))
    }
}

/// What Go's JSON encoding of the stored object leaves out: `null`s everywhere (pointer and
/// `omitempty` fields), and in a Job's status the `omitempty` value fields at their zero
/// value (`active`, `succeeded`, `failed`: int32; `completedIndexes`: string; empty lists).
/// `ready`, `terminating` and `failedIndexes` are pointers: a zero is kept.
pub fn normalize(v: &mut Value) {
    drop_nulls(v);
    let is_job = v.get("kind").and_then(Value::as_str) == Some("Job")
        || v.get("spec").and_then(|s| s.get("template")).is_some();
    if is_job && let Some(status) = v.get_mut("status").and_then(Value::as_object_mut) {
        omit_empty_job_status(status);
    }
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in ["finalizers", "labels", "annotations", "ownerReferences"] {
            let empty = match meta.get(k) {
                Some(Value::Array(a)) => a.is_empty(),
                Some(Value::Object(o)) => o.is_empty(),
                _ => false,
            };
            if empty {
                meta.remove(k);
            }
        }
    }
}

fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.retain(|_, x| !x.is_null());
            o.values_mut().for_each(drop_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// `JobStatus`'s `omitempty` value fields at their zero value.
fn omit_empty_job_status(status: &mut Map<String, Value>) {
    for k in ["active", "succeeded", "failed"] {
        if status.get(k).and_then(Value::as_i64) == Some(0) {
            status.remove(k);
        }
    }
    if status.get("completedIndexes").and_then(Value::as_str) == Some("") {
        status.remove("completedIndexes");
    }
    if status
        .get("conditions")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
    {
        status.remove("conditions");
    }
    if let Some(u) = status
        .get_mut("uncountedTerminatedPods")
        .and_then(Value::as_object_mut)
    {
        u.retain(|_, list| list.as_array().is_none_or(|a| !a.is_empty()));
    }
    for c in status
        .get_mut("conditions")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(c) = c.as_object_mut() {
            c.retain(|k, v| {
                !(matches!(k.as_str(), "reason" | "message") && v.as_str() == Some(""))
            });
        }
    }
}
