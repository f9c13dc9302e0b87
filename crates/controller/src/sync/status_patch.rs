//! The `jobs/status` merge patch for a planned status: only the fields the controller owns, only
//! where they differ from what is stored, and the stored resourceVersion as a precondition.
//! Pure JSON work on the raw Job, so fields and conditions it does not own survive untouched.

use jobwarden_rules::well_known::JOB_STATUS_FIELDS;
use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
use serde_json::{Map, Value, json};

/// `{"metadata": {"resourceVersion": ...}, "status": {...changed owned fields...}}`, or `None`
/// when nothing owned changes.
pub fn status_patch(stored: &Value, new: &JobStatus) -> Result<Option<Value>, serde_json::Error> {
    let new_json = serde_json::to_value(new)?;
    let old_status = stored.get("status").cloned().unwrap_or(json!({}));
    let mut changes = Map::new();
    // The controller owns every field of the Job API's status. `failedIndexes` is written only
    // for Jobs with `backoffLimitPerIndex`; for any other Job the plan leaves it as stored.
    for field in JOB_STATUS_FIELDS {
        let old = old_status.get(field).cloned().unwrap_or(Value::Null);
        let mut wanted = new_json.get(field).cloned().unwrap_or(Value::Null);
        let mut old = old;
        if field == "conditions" {
            wanted = merged_conditions(&old, new.conditions.as_deref().unwrap_or(&[]))?;
        }
        if field == "uncountedTerminatedPods" {
            // A merge patch only removes a key set to null: an emptied list must be sent as
            // null explicitly, or the stored UIDs would stay and be counted again.
            old = explicit_lists(&old);
            wanted = explicit_lists(&wanted);
        }
        if old != wanted {
            changes.insert(field.to_owned(), wanted);
        }
    }
    if changes.is_empty() {
        return Ok(None);
    }
    let resource_version = stored
        .get("metadata")
        .and_then(|m| m.get("resourceVersion"))
        .cloned()
        .unwrap_or(Value::Null);
    Ok(Some(json!({
        "metadata": {"resourceVersion": resource_version},
        "status": Value::Object(changes),
    })))
}

fn explicit_lists(uncounted: &Value) -> Value {
    let list = |k: &str| {
        uncounted
            .get(k)
            .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
            .cloned()
            .unwrap_or(Value::Null)
    };
    json!({"succeeded": list("succeeded"), "failed": list("failed")})
}

/// The planned conditions, each kept byte for byte as stored when the plan left it unchanged,
/// so a field of a condition our `k8s-openapi` does not know is not lost.
fn merged_conditions(stored: &Value, planned: &[JobCondition]) -> Result<Value, serde_json::Error> {
    if planned.is_empty() && stored.is_null() {
        return Ok(Value::Null);
    }
    let stored: Vec<Value> = stored.as_array().cloned().unwrap_or_default();
    let mut out = Vec::with_capacity(planned.len());
    for c in planned {
        let unchanged = stored.iter().find(|raw| {
            raw.get("type").and_then(Value::as_str) == Some(c.type_.as_str())
                && serde_json::from_value::<JobCondition>((*raw).clone())
                    .ok()
                    .as_ref()
                    == Some(c)
        });
        match unchanged {
            Some(raw) => out.push(raw.clone()),
            None => out.push(serde_json::to_value(c)?),
        }
    }
    Ok(Value::Array(out))
}

/// The Job as it will be stored once `patch` is applied: what the status rules are checked on.
pub fn patched(stored: &Value, patch: &Value) -> Value {
    let mut job = stored.clone();
    if let Some(status) = patch.get("status") {
        json_patch::merge(&mut job, &json!({"status": status}));
    }
    job
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::conditions::new_condition;
    use crate::testing::at;

    #[test]
    fn only_changed_owned_fields_with_the_resource_version() {
        let stored = json!({
            "metadata": {"resourceVersion": "42"},
            "status": {"active": 1, "succeeded": 2, "somethingNew": {"x": 1}},
        });
        let new = JobStatus {
            active: Some(0),
            succeeded: Some(2),
            ..Default::default()
        };
        let patch = status_patch(&stored, &new)
            .expect("serializes")
            .expect("changes");
        assert_eq!(
            patch,
            json!({"metadata": {"resourceVersion": "42"}, "status": {"active": 0}})
        );
        let after = patched(&stored, &patch);
        assert_eq!(after["status"]["somethingNew"], json!({"x": 1}));
    }

    #[test]
    fn emptied_uncounted_lists_are_removed_explicitly() {
        let stored = json!({
            "metadata": {"resourceVersion": "7"},
            "status": {"uncountedTerminatedPods": {"succeeded": ["a"], "failed": ["b"]}},
        });
        let new = JobStatus {
            uncounted_terminated_pods: Some(Default::default()),
            ..Default::default()
        };
        let patch = status_patch(&stored, &new)
            .expect("serializes")
            .expect("changes");
        assert_eq!(
            patch["status"]["uncountedTerminatedPods"],
            json!({"succeeded": null, "failed": null})
        );
        let after = patched(&stored, &patch);
        assert_eq!(after["status"]["uncountedTerminatedPods"], json!({}));
        let again = status_patch(&after, &new).expect("serializes");
        assert_eq!(again, None);
    }

    #[test]
    fn nothing_changed_is_no_patch() {
        let stored = json!({"metadata": {"resourceVersion": "1"}, "status": {"active": 1}});
        let new = JobStatus {
            active: Some(1),
            ..Default::default()
        };
        assert_eq!(status_patch(&stored, &new).expect("serializes"), None);
    }

    #[test]
    fn unchanged_conditions_keep_unknown_fields() {
        let stored = json!({
            "metadata": {"resourceVersion": "1"},
            "status": {"conditions": [{"type": "Custom", "status": "True", "futureField": 1}]},
        });
        let mut custom: JobCondition =
            serde_json::from_value(json!({"type": "Custom", "status": "True"})).expect("parses");
        custom.reason = None;
        let added = new_condition(
            "SuccessCriteriaMet",
            "True",
            "CompletionsReached",
            "m",
            at(0),
        );
        let new = JobStatus {
            conditions: Some(vec![custom, added]),
            ..Default::default()
        };
        let patch = status_patch(&stored, &new)
            .expect("serializes")
            .expect("changes");
        let conds = &patch["status"]["conditions"];
        assert_eq!(conds[0]["futureField"], 1);
        assert_eq!(conds[1]["type"], "SuccessCriteriaMet");
    }
}
