//! Spec updates: upstream's `ValidateJobSpecUpdate` (the spec re-validated, then the fields that
//! are immutable or change only under conditions, in upstream's order) and jobwarden's own update
//! rules (rule names are immutable; a finished Job cannot be suspended).

use serde_json::Value;

use super::field::{BadValue, FieldError, FieldPath};
use super::{
    ErrorList, JobObject, condition, go_json, job_spec, rule_names, semantic,
    success_rule_settings, template_update,
};

fn int_or_null(v: Option<i32>) -> BadValue {
    v.map_or_else(
        || BadValue::Json("null".to_owned()),
        |v| BadValue::Int(v.into()),
    )
}

fn str_or_null(v: Option<&str>) -> BadValue {
    v.map_or_else(|| BadValue::Json("null".to_owned()), BadValue::json_str)
}

/// Whether a pointer-valued object field changed: set vs unset, or different content.
fn object_changed(new: &JobObject<'_>, old: &JobObject<'_>, pointer: &str) -> bool {
    let present = |j: &JobObject<'_>| j.raw().pointer(pointer).is_some_and(|v| !v.is_null());
    present(new) != present(old) || !semantic::equal_at(new.raw(), old.raw(), pointer)
}

pub fn validate_spec_update(new: &JobObject<'_>, old: &JobObject<'_>) -> ErrorList {
    let spec = FieldPath::new("spec");
    let (n, o) = (&new.spec, &old.spec);
    let mut errs = job_spec::validate_job_spec(new);

    if n.completions != o.completions {
        if !new.is_indexed() {
            errs.push(FieldError::immutable(
                &spec.child("completions"),
                int_or_null(n.completions),
            ));
        } else if let Some(c) = n.completions
            && Some(c) != n.parallelism
        {
            errs.push(FieldError::invalid(
                &spec.child("completions"),
                BadValue::Int(c.into()),
                "can only be modified in tandem with spec.parallelism",
            ));
        }
    }
    if object_changed(new, old, "/spec/selector") {
        errs.push(FieldError::immutable(
            &spec.child("selector"),
            BadValue::Json(go_json::label_selector(new.raw().pointer("/spec/selector"))),
        ));
    }
    errs.extend(template_update::validate(new, old));
    if n.completion_mode != o.completion_mode {
        errs.push(FieldError::immutable(
            &spec.child("completionMode"),
            str_or_null(n.completion_mode.as_deref()),
        ));
    }
    if object_changed(new, old, "/spec/podFailurePolicy") {
        errs.push(FieldError::immutable(
            &spec.child("podFailurePolicy"),
            BadValue::Json(go_json::pod_failure_policy(
                new.raw().pointer("/spec/podFailurePolicy"),
            )),
        ));
    }
    if n.backoff_limit_per_index != o.backoff_limit_per_index {
        errs.push(FieldError::immutable(
            &spec.child("backoffLimitPerIndex"),
            int_or_null(n.backoff_limit_per_index),
        ));
    }
    if n.managed_by != o.managed_by {
        errs.push(FieldError::immutable(
            &spec.child("managedBy"),
            str_or_null(n.managed_by.as_deref()),
        ));
    }
    if object_changed(new, old, "/spec/successPolicy") {
        errs.push(FieldError::immutable(
            &spec.child("successPolicy"),
            BadValue::Json(go_json::success_policy(
                new.raw().pointer("/spec/successPolicy"),
            )),
        ));
    }
    errs
}

/// Rules upstream lacks: jobwarden's annotations extending the two policies (KEP-4443's rule
/// names, KEP-3998's reasons and `whenCriterionAchieved`) are as immutable as the policies
/// themselves, and KEP-2232's "a finished Job cannot be suspended".
pub fn validate_jobwarden_update(new: &JobObject<'_>, old: &JobObject<'_>) -> ErrorList {
    let mut errs = ErrorList::new();
    for key in [
        rule_names::ANNOTATION,
        success_rule_settings::REASONS_ANNOTATION,
        success_rule_settings::WHEN_ACHIEVED_ANNOTATION,
    ] {
        let new_value = new.annotation(key);
        if new_value != old.annotation(key) {
            let value = new_value.map_or(BadValue::Json(Value::Null.to_string()), |s| {
                BadValue::Str(s.to_owned())
            });
            errs.push(FieldError::immutable(
                &FieldPath::new("metadata").child("annotations").key(key),
                value,
            ));
        }
    }
    if new.is_suspended() && !old.is_suspended() && old.is_finished() {
        let finished_as = if old.has_condition(condition::COMPLETE) {
            condition::COMPLETE
        } else {
            condition::FAILED
        };
        errs.push(FieldError::forbidden(
            &FieldPath::new("spec").child("suspend"),
            format!("cannot suspend a finished Job (it has the condition {finished_as}=True)"),
        ));
    }
    errs
}
