//! `spec.podFailurePolicy`, as upstream's `validatePodFailurePolicy` and its rule, exit-code and
//! pod-condition helpers check it. The restartPolicy and podReplacementPolicy rules that depend
//! on it live with those fields in `job_spec`.

use std::collections::HashSet;

use k8s_openapi::api::batch::v1::{
    PodFailurePolicyOnExitCodesRequirement, PodFailurePolicyOnPodConditionsPattern,
    PodFailurePolicyRule,
};
use serde_json::Value;

use super::field::{BadValue, FieldError, FieldPath};
use super::{ErrorList, JobObject, go_json, names};

pub const MAX_RULES: usize = 20;
pub const MAX_EXIT_CODE_VALUES: usize = 255;
pub const MAX_POD_CONDITION_PATTERNS: usize = 20;

const ACTIONS: [&str; 4] = ["Count", "FailIndex", "FailJob", "Ignore"];
const OPERATORS: [&str; 2] = ["In", "NotIn"];
const CONDITION_STATUSES: [&str; 3] = ["False", "True", "Unknown"];

/// Go's `%q` of a string slice: `["Count" "FailIndex"]`.
fn go_quoted_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

/// Names of the template's containers and init containers (not ephemeral ones).
fn container_names<'a>(job: &'a JobObject<'_>) -> HashSet<&'a str> {
    let spec = &job.template.spec;
    spec.containers
        .iter()
        .chain(&spec.init_containers)
        .map(|c| c.name.as_str())
        .collect()
}

pub fn validate(job: &JobObject<'_>, path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::new();
    let Some(policy) = &job.spec.pod_failure_policy else {
        return errs;
    };
    let rules_path = path.child("rules");
    if policy.rules.len() > MAX_RULES {
        errs.push(FieldError::too_many(
            &rules_path,
            policy.rules.len(),
            MAX_RULES,
        ));
    }
    let containers = container_names(job);
    let raw_rules = super::member(job.raw(), &["spec", "podFailurePolicy", "rules"]);
    for (i, rule) in policy.rules.iter().enumerate() {
        let raw_rule = raw_rules.and_then(|r| r.get(i));
        errs.extend(validate_rule(
            job,
            rule,
            raw_rule,
            &rules_path.index(i),
            &containers,
        ));
    }
    errs
}

fn validate_rule(
    job: &JobObject<'_>,
    rule: &PodFailurePolicyRule,
    raw_rule: Option<&Value>,
    path: &FieldPath,
    containers: &HashSet<&str>,
) -> ErrorList {
    let mut errs = validate_action(job, &rule.action, &path.child("action"));
    if let Some(on_exit_codes) = &rule.on_exit_codes {
        let raw_values = raw_rule.and_then(|r| super::member(r, &["onExitCodes", "values"]));
        errs.extend(validate_on_exit_codes(
            on_exit_codes,
            raw_values,
            &path.child("onExitCodes"),
            containers,
        ));
    }
    let patterns = rule.on_pod_conditions.as_deref().unwrap_or_default();
    if !patterns.is_empty() {
        errs.extend(validate_on_pod_conditions(
            patterns,
            &path.child("onPodConditions"),
        ));
    }
    errs.extend(validate_requirement_kind(
        rule.on_exit_codes.is_some(),
        !patterns.is_empty(),
        path,
    ));
    errs
}

/// The action is one of [`ACTIONS`]; `FailIndex` needs a per-index backoff limit.
fn validate_action(job: &JobObject<'_>, action: &str, action_path: &FieldPath) -> ErrorList {
    match action {
        "" => vec![FieldError::required(
            action_path,
            format!("valid values: {}", go_quoted_list(&ACTIONS)),
        )],
        "FailIndex" if job.spec.backoff_limit_per_index.is_none() => vec![FieldError::invalid(
            action_path,
            BadValue::json_str(action),
            "requires the backoffLimitPerIndex to be set",
        )],
        action if !ACTIONS.contains(&action) => vec![FieldError::not_supported(
            action_path,
            BadValue::json_str(action),
            &ACTIONS,
        )],
        _ => ErrorList::new(),
    }
}

/// `onPodConditions`: at most [`MAX_POD_CONDITION_PATTERNS`], each a qualified condition type
/// and one of [`CONDITION_STATUSES`].
fn validate_on_pod_conditions(
    patterns: &[PodFailurePolicyOnPodConditionsPattern],
    conditions_path: &FieldPath,
) -> ErrorList {
    let mut errs = ErrorList::new();
    if patterns.len() > MAX_POD_CONDITION_PATTERNS {
        errs.push(FieldError::too_many(
            conditions_path,
            patterns.len(),
            MAX_POD_CONDITION_PATTERNS,
        ));
    }
    for (j, pattern) in patterns.iter().enumerate() {
        let pattern_path = conditions_path.index(j);
        let type_path = pattern_path.child("type");
        for msg in names::qualified_name(&pattern.type_) {
            errs.push(FieldError::invalid(
                &type_path,
                BadValue::Str(pattern.type_.clone()),
                msg,
            ));
        }
        let status_path = pattern_path.child("status");
        match pattern.status.as_deref().unwrap_or("") {
            "" => errs.push(FieldError::required(
                &status_path,
                format!("valid values: {}", go_quoted_list(&CONDITION_STATUSES)),
            )),
            s if !CONDITION_STATUSES.contains(&s) => errs.push(FieldError::not_supported(
                &status_path,
                BadValue::json_str(s),
                &CONDITION_STATUSES,
            )),
            _ => {}
        }
    }
    errs
}

/// A rule matches on exit codes or on pod conditions: exactly one of the two.
fn validate_requirement_kind(
    has_exit_codes: bool,
    has_pod_conditions: bool,
    path: &FieldPath,
) -> ErrorList {
    match (has_exit_codes, has_pod_conditions) {
        (true, true) => vec![FieldError::invalid(
            path,
            BadValue::Omit,
            "specifying both OnExitCodes and OnPodConditions is not supported",
        )],
        (false, false) => vec![FieldError::invalid(
            path,
            BadValue::Omit,
            "specifying one of OnExitCodes and OnPodConditions is required",
        )],
        _ => ErrorList::new(),
    }
}

fn validate_on_exit_codes(
    req: &PodFailurePolicyOnExitCodesRequirement,
    raw_values: Option<&Value>,
    path: &FieldPath,
    containers: &HashSet<&str>,
) -> ErrorList {
    let mut errs = ErrorList::new();
    let operator_path = path.child("operator");
    match req.operator.as_str() {
        "" => errs.push(FieldError::required(
            &operator_path,
            format!("valid values: {}", go_quoted_list(&OPERATORS)),
        )),
        op if !OPERATORS.contains(&op) => errs.push(FieldError::not_supported(
            &operator_path,
            BadValue::json_str(op),
            &OPERATORS,
        )),
        _ => {}
    }
    if let Some(name) = &req.container_name
        && !containers.contains(name.as_str())
    {
        errs.push(FieldError::invalid(
            &path.child("containerName"),
            BadValue::Str(name.clone()),
            "must be one of the container or initContainer names in the pod template",
        ));
    }
    let values_path = path.child("values");
    // Printed from the raw JSON so an omitted list reads `null` and an empty one `[]`.
    let values_json =
        || BadValue::Json(raw_values.map_or_else(|| "null".to_owned(), go_json::value));
    if req.values.is_empty() {
        errs.push(FieldError::invalid(
            &values_path,
            values_json(),
            "at least one value is required",
        ));
    } else if req.values.len() > MAX_EXIT_CODE_VALUES {
        errs.push(FieldError::too_many(
            &values_path,
            req.values.len(),
            MAX_EXIT_CODE_VALUES,
        ));
    }
    let mut seen = HashSet::with_capacity(req.values.len());
    for (j, &value) in req.values.iter().enumerate() {
        let value_path = values_path.index(j);
        if req.operator == "In" && value == 0 {
            errs.push(FieldError::invalid(
                &value_path,
                BadValue::Int(0),
                "must not be 0 for the In operator",
            ));
        }
        if !seen.insert(value) {
            errs.push(FieldError::duplicate(
                &value_path,
                BadValue::Int(value.into()),
            ));
        }
    }
    if req.values.windows(2).any(|w| matches!(w, [a, b] if a > b)) {
        errs.push(FieldError::invalid(
            &values_path,
            values_json(),
            "must be ordered",
        ));
    }
    errs
}
