//! Upstream's `validatePodTemplateUpdate` (v1.36 gates): the pod template is immutable, except
//! that a suspended Job that is not running (never started, or stopped with `Suspended=True`,
//! and no active pods) may change its scheduling directives and container resources. Compared
//! on raw JSON, so a template field this build does not know is still held immutable.

use serde_json::{Map, Value};

use super::field::{BadValue, FieldError, FieldPath};
use super::{ErrorList, JobObject, condition, go_json, semantic};

/// `shouldAllowMutablePodTemplate` on the stored Job.
fn may_mutate_suspended_template(old: &JobObject<'_>) -> bool {
    old.is_suspended()
        && (old.status.start_time.is_none() || old.has_condition(condition::SUSPENDED))
        && old.status.active.unwrap_or(0) == 0
}

/// Scheduling directives upstream lets a qualifying suspended Job change: removed from both
/// sides before comparing. Only node affinity leaves `affinity`; other kinds stay immutable.
fn strip_scheduling_directives(template: &mut Value) {
    if let Some(meta) = template.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("labels");
        meta.remove("annotations");
    }
    if let Some(spec) = template.get_mut("spec").and_then(Value::as_object_mut) {
        for key in ["nodeSelector", "tolerations", "schedulingGates"] {
            spec.remove(key);
        }
        if let Some(affinity) = spec.get_mut("affinity").and_then(Value::as_object_mut) {
            affinity.remove("nodeAffinity");
        }
    }
}

fn containers_mut<'a>(spec: &'a mut Value, key: &str) -> Option<&'a mut Vec<Value>> {
    spec.get_mut(key).and_then(Value::as_array_mut)
}

fn names(list: &[Value]) -> Vec<Option<&str>> {
    list.iter()
        .map(|c| c.get("name").and_then(Value::as_str))
        .collect()
}

/// Container resources may change when the list keeps its length and each position its name.
fn strip_mutable_resources(new_spec: &mut Value, old_spec: &mut Value) {
    for key in ["containers", "initContainers"] {
        let same_shape = match (
            new_spec.get(key).and_then(Value::as_array),
            old_spec.get(key).and_then(Value::as_array),
        ) {
            (Some(n), Some(o)) => names(n) == names(o),
            _ => false,
        };
        if !same_shape {
            continue;
        }
        for spec in [&mut *new_spec, &mut *old_spec] {
            for c in containers_mut(spec, key).into_iter().flatten() {
                if let Some(c) = c.as_object_mut() {
                    c.remove("resources");
                }
            }
        }
    }
}

pub fn validate(new: &JobObject<'_>, old: &JobObject<'_>) -> ErrorList {
    let template_path = FieldPath::new("spec.template");
    if !may_mutate_suspended_template(old) {
        if semantic::equal(new.raw_template(), old.raw_template()) {
            return ErrorList::new();
        }
        return vec![FieldError::immutable(
            &template_path,
            BadValue::Json(go_json::pod_template(Some(new.raw_template()))),
        )];
    }
    // Only the pod spec is compared (upstream ignores the template's metadata here), less what
    // a qualifying suspended Job may change.
    let spec_of = |job: &JobObject<'_>| {
        let mut template = job.raw_template().clone();
        strip_scheduling_directives(&mut template);
        template
            .get_mut("spec")
            .map(Value::take)
            .unwrap_or_else(|| Value::Object(Map::new()))
    };
    let (mut new_spec, mut old_spec) = (spec_of(new), spec_of(old));
    strip_mutable_resources(&mut new_spec, &mut old_spec);
    if semantic::equal(&new_spec, &old_spec) {
        return ErrorList::new();
    }
    let raw_spec = new.raw_template().get("spec").unwrap_or(&Value::Null);
    vec![FieldError::immutable(
        &template_path.child("spec"),
        go_json::bad_value(raw_spec),
    )]
}
