//! KEP-4443 named pod failure policy rules. Upstream never shipped the `name` field, and
//! kube-apiserver drops unknown fields before a webhook sees them, so names come from the
//! annotation `jobwarden.io/pod-failure-policy-rule-names` (a JSON array aligned with the rules)
//! and, forward compatibly, from a `name` field on a rule. The failure reason a rule gives is
//! `PodFailurePolicy_{name}`, or `PodFailurePolicy_{index}` when it has none.
//!
//! Every reason the Job controller itself uses lacks the `PodFailurePolicy_` prefix, so the only
//! way a name can clash with a controller reason is by being another rule's index: that is the
//! rule enforced here.

use serde_json::Value;

use super::field::{BadValue, FieldError, FieldPath};
use super::{ErrorList, JobObject, names};

pub const ANNOTATION: &str = "jobwarden.io/pod-failure-policy-rule-names";
pub const REASON_PREFIX: &str = "PodFailurePolicy_";

const ANNOTATIONS: FieldPath<'static> = FieldPath::new("metadata.annotations");
const RULES: FieldPath<'static> = FieldPath::new("spec.podFailurePolicy.rules");

fn raw_rules<'a>(job: &'a JobObject<'_>) -> &'a [Value] {
    // No policy, no rules: the raw JSON is not needed (nor built) to say so.
    if job.spec.pod_failure_policy.is_none() {
        return &[];
    }
    super::member(job.raw(), &["spec", "podFailurePolicy", "rules"])
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// A jobwarden annotation extending a policy's rules (the names here, the success rules'
/// settings in `success_rule_settings.rs`): a JSON array of strings or nulls, one per rule,
/// `null` and `""` alike meaning "not set"; or why it cannot be read.
pub(crate) fn parse_annotation(text: &str) -> Result<Vec<Option<String>>, ()> {
    let Ok(Value::Array(items)) = serde_json::from_str::<Value>(text) else {
        return Err(());
    };
    items
        .into_iter()
        .map(|item| match item {
            Value::Null => Ok(None),
            Value::String(s) if s.is_empty() => Ok(None),
            Value::String(s) => Ok(Some(s)),
            _ => Err(()),
        })
        .collect()
}

/// The names in force, one per rule (`None` = unnamed), ignoring whatever is malformed: the
/// controller's reading of a Job the webhook has already admitted.
pub fn effective_names(job: &JobObject<'_>) -> Vec<Option<String>> {
    let from_annotation = job
        .annotation(ANNOTATION)
        .and_then(|a| parse_annotation(a).ok())
        .unwrap_or_default();
    let count = job
        .spec
        .pod_failure_policy
        .as_ref()
        .map_or(0, |p| p.rules.len());
    let rules = raw_rules(job);
    (0..count)
        .map(|i| {
            from_annotation.get(i).cloned().flatten().or_else(|| {
                rules
                    .get(i)
                    .and_then(|r| r.get("name"))
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
            })
        })
        .collect()
}

/// The condition reason a FailJob match of rule `index` gives: `PodFailurePolicy_{name}`.
pub fn failure_reason(names: &[Option<String>], index: usize) -> String {
    match names.get(index).cloned().flatten() {
        Some(name) => format!("{REASON_PREFIX}{name}"),
        None => format!("{REASON_PREFIX}{index}"),
    }
}

/// Whether the Job names any of its rules.
pub fn names_any_rule(job: &JobObject<'_>) -> bool {
    effective_names(job).iter().any(Option::is_some)
}

pub fn validate(job: &JobObject<'_>) -> ErrorList {
    let rule_count = job.spec.pod_failure_policy.as_ref().map(|p| p.rules.len());
    let (mut errs, from_annotation) = match job.annotation(ANNOTATION) {
        Some(text) => validate_annotation(text, rule_count),
        None => (ErrorList::new(), Vec::new()),
    };
    let Some(count) = rule_count else {
        return errs;
    };
    let (field_errs, names) = names_in_force(&from_annotation, raw_rules(job), count);
    errs.extend(field_errs);
    for (i, name) in names.iter().enumerate() {
        if let Some(name) = name {
            errs.extend(validate_name(name, i, &names[..i], count));
        }
    }
    errs
}

/// The annotation parses and fits the policy's rules; its names (empty when it does not).
fn validate_annotation(text: &str, rule_count: Option<usize>) -> (ErrorList, Vec<Option<String>>) {
    let path = ANNOTATIONS.key(ANNOTATION);
    match (parse_annotation(text), rule_count) {
        (Err(()), _) => (
            vec![FieldError::invalid(
                &path,
                BadValue::Str(text.to_owned()),
                "must be a JSON array of strings or nulls, one per spec.podFailurePolicy.rules entry",
            )],
            Vec::new(),
        ),
        (Ok(_), None) => (
            vec![FieldError::forbidden(
                &path,
                "may only be set on a Job with spec.podFailurePolicy",
            )],
            Vec::new(),
        ),
        (Ok(names), Some(count)) if names.len() > count => (
            vec![FieldError::too_many(&path, names.len(), count)],
            Vec::new(),
        ),
        (Ok(names), Some(_)) => (ErrorList::new(), names),
    }
}

/// Each rule's name, from the annotation or else its own `name` field, one per rule; the
/// errors of `name` fields that are not strings or disagree with the annotation.
fn names_in_force(
    from_annotation: &[Option<String>],
    rules: &[Value],
    count: usize,
) -> (ErrorList, Vec<Option<String>>) {
    let mut errs = ErrorList::new();
    let mut names: Vec<Option<String>> = Vec::with_capacity(count);
    for i in 0..count {
        let rule = RULES.index(i);
        let path = rule.child("name");
        let annotated = from_annotation.get(i).cloned().flatten();
        let field = match rules.get(i).and_then(|r| r.get("name")) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s.is_empty() => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                errs.push(FieldError::invalid(
                    &path,
                    BadValue::json(other),
                    "must be a string",
                ));
                None
            }
        };
        if let (Some(a), Some(f)) = (&annotated, &field)
            && a != f
        {
            errs.push(FieldError::invalid(
                &path,
                BadValue::Str(f.clone()),
                format!("must equal the name {a:?} given for this rule in metadata.annotations[{ANNOTATION}]"),
            ));
        }
        names.push(annotated.or(field));
    }
    (errs, names)
}

/// Rule `i`'s name makes a valid reason, is not an earlier rule's name, and is not another
/// rule's index (whose unnamed reason it would then share).
fn validate_name(name: &str, i: usize, earlier: &[Option<String>], count: usize) -> ErrorList {
    let mut errs = ErrorList::new();
    let rule = RULES.index(i);
    let path = rule.child("name");
    let reason = format!("{REASON_PREFIX}{name}");
    for msg in names::condition_reason(&reason) {
        errs.push(FieldError::invalid(
            &path,
            BadValue::Str(name.to_owned()),
            format!("must make a valid condition reason {reason:?}: {msg}"),
        ));
    }
    if earlier.iter().any(|e| e.as_deref() == Some(name)) {
        errs.push(FieldError::duplicate(&path, BadValue::Str(name.to_owned())));
    }
    if let Some(n) = as_index(name)
        && n != i
        && n < count
    {
        errs.push(FieldError::invalid(
            &path,
            BadValue::Str(name.to_owned()),
            format!("must not be the index of another rule (rules[{n}]), whose unnamed reason is {REASON_PREFIX}{n}"),
        ));
    }
    errs
}

/// A name made only of ASCII digits names an index; anything else cannot be one.
fn as_index(name: &str) -> Option<usize> {
    if !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(annotation: Option<&str>, rules: Value) -> Value {
        let mut meta = json!({"name": "j"});
        if let Some(a) = annotation {
            meta["annotations"] = json!({ ANNOTATION: a });
        }
        let mut spec = json!({});
        if !rules.is_null() {
            spec["podFailurePolicy"] = json!({ "rules": rules });
        }
        json!({"metadata": meta, "spec": spec})
    }

    fn rule() -> Value {
        json!({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}})
    }

    fn named(name: Value) -> Value {
        let mut r = rule();
        r["name"] = name;
        r
    }

    fn errors(raw: &Value) -> Vec<String> {
        let job = JobObject::parse(raw).expect("test job parses");
        validate(&job).iter().map(ToString::to_string).collect()
    }

    const ANN: &str = "metadata.annotations[jobwarden.io/pod-failure-policy-rule-names]";

    #[test]
    fn accepted_names() {
        for (annotation, rules) in [
            (
                Some(r#"["ExitCode42", "Disruption"]"#),
                json!([rule(), rule()]),
            ),
            (Some(r#"["7", "Other"]"#), json!([rule(), rule()])),
            (
                Some(r#"[null, "", "Named"]"#),
                json!([rule(), rule(), rule()]),
            ),
            (Some(r#"["OnlyFirst"]"#), json!([rule(), rule(), rule()])),
            (Some(r#"["0"]"#), json!([rule()])),
            (Some("[]"), json!([])),
            (
                None,
                json!([named(json!("ExitCode10")), named(json!("ExitCode11"))]),
            ),
            (Some(r#"["Same"]"#), json!([named(json!("Same"))])),
            (Some(&format!("[\"{}\"]", "X".repeat(111))), json!([rule()])),
            (None, Value::Null),
        ] {
            let raw = job(annotation, rules);
            assert_eq!(errors(&raw), Vec::<String>::new(), "{annotation:?}");
        }
    }

    #[test]
    fn rejected_names() {
        let too_long = format!("[\"{}\"]", "X".repeat(112));
        for (annotation, rules, want) in [
            (
                Some(r#"["Retry", "Retry"]"#),
                json!([rule(), rule()]),
                "spec.podFailurePolicy.rules[1].name: Duplicate value: \"Retry\"",
            ),
            (
                Some(r#"["first", "2", "third"]"#),
                json!([rule(), rule(), rule()]),
                "spec.podFailurePolicy.rules[1].name: Invalid value: \"2\": must not be the index of another rule (rules[2]), whose unnamed reason is PodFailurePolicy_2",
            ),
            (
                Some(r#"["exit-code-2"]"#),
                json!([rule()]),
                "spec.podFailurePolicy.rules[0].name: Invalid value: \"exit-code-2\": must make a valid condition reason \"PodFailurePolicy_exit-code-2\": a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (regex used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')",
            ),
            (
                Some(too_long.as_str()),
                json!([rule()]),
                "must be no more than 128 characters",
            ),
            (
                Some(r#"["a", "#),
                json!([rule(), rule()]),
                "must be a JSON array of strings or nulls",
            ),
            (
                Some(r#"{"0":"a"}"#),
                json!([rule(), rule()]),
                "must be a JSON array of strings or nulls",
            ),
            (
                Some(r#"["a", 1]"#),
                json!([rule(), rule()]),
                "must be a JSON array of strings or nulls",
            ),
            (
                Some(r#"["a", "b", "c"]"#),
                json!([rule(), rule()]),
                "metadata.annotations[jobwarden.io/pod-failure-policy-rule-names]: Too many: 3: must have at most 2 items",
            ),
            (
                Some(r#"["a"]"#),
                Value::Null,
                "metadata.annotations[jobwarden.io/pod-failure-policy-rule-names]: Forbidden: may only be set on a Job with spec.podFailurePolicy",
            ),
            (
                Some(r#"["A"]"#),
                json!([named(json!("B"))]),
                "spec.podFailurePolicy.rules[0].name: Invalid value: \"B\": must equal the name \"A\"",
            ),
            (
                None,
                json!([named(json!(5))]),
                "spec.podFailurePolicy.rules[0].name: Invalid value: 5: must be a string",
            ),
            (
                None,
                json!([named(json!("A")), named(json!("A"))]),
                "Duplicate value: \"A\"",
            ),
            (
                Some(r#"["1", "0"]"#),
                json!([rule(), rule()]),
                "rules[0].name: Invalid value: \"1\": must not be the index",
            ),
        ] {
            let raw = job(annotation, rules);
            let got = errors(&raw);
            assert!(
                got.iter().any(|e| e.contains(want)),
                "{annotation:?}: {got:?} lacks {want}"
            );
            if want.starts_with("must be a JSON") {
                assert!(got.iter().all(|e| e.starts_with(ANN)));
            }
        }
    }

    #[test]
    fn reasons_per_rule() {
        let raw = job(
            Some(r#"["ExitCode2", null]"#),
            json!([rule(), rule(), named(json!("Field"))]),
        );
        let job = JobObject::parse(&raw).expect("parses");
        let names = effective_names(&job);
        assert_eq!(
            (0..3)
                .map(|i| failure_reason(&names, i))
                .collect::<Vec<_>>(),
            [
                "PodFailurePolicy_ExitCode2",
                "PodFailurePolicy_1",
                "PodFailurePolicy_Field"
            ]
        );
        assert!(names_any_rule(&job));
    }
}
