//! KEP-3998's two open questions, answered per success policy rule: the reason of the
//! `SuccessCriteriaMet` and `Complete` conditions (`setSuccessCriterionMetReason`) and what
//! becomes of the pods still running once the rule is met (`whenCriterionAchieved`).
//! kube-apiserver prunes fields it does not know, so both travel in annotations holding a JSON
//! list aligned with `spec.successPolicy.rules`, as KEP-4443's rule names do
//! (`rule_names.rs`): `null` or `""` (or no entry at all, for a shorter list) keeps the
//! default, `SuccessPolicy` and `Terminate`.
//!
//! Errors name the annotation, and the entry by its position
//! (`metadata.annotations[jobwarden.io/success-policy-rule-reasons][1]`), which is the rule's
//! index. Reasons may repeat: two rules may well mean the same thing to whoever reads the
//! reason (the message still names the rule). A reason must not be one the Job controller
//! gives for another outcome, so a `Complete` condition never reads like a failure or like
//! `completions` reached.

use super::field::{BadValue, FieldError, FieldPath};
use super::well_known::*;
use super::{ErrorList, JobObject, names, rule_names};

pub const REASONS_ANNOTATION: &str = "jobwarden.io/success-policy-rule-reasons";
pub const WHEN_ACHIEVED_ANNOTATION: &str = "jobwarden.io/success-policy-when-achieved";

const ANNOTATIONS: FieldPath<'static> = FieldPath::new("metadata.annotations");

/// Reasons the Job controller writes for other outcomes: a success rule may not borrow them.
const RESERVED_REASONS: [&str; 8] = [
    REASON_COMPLETIONS_REACHED,
    REASON_BACKOFF_LIMIT_EXCEEDED,
    REASON_DEADLINE_EXCEEDED,
    REASON_POD_FAILURE_POLICY,
    REASON_FAILED_INDEXES,
    REASON_MAX_FAILED_INDEXES_EXCEEDED,
    REASON_JOB_SUSPENDED,
    REASON_JOB_RESUMED,
];

/// KEP-3998's `whenCriterionAchieved`: what the pods still running do once the rule is met.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WhenAchieved {
    /// They are deleted (upstream's only behaviour).
    #[default]
    Terminate,
    /// They run to their end; one that fails is neither replaced nor judged by a policy.
    Continue,
    /// They run to their end; one that fails is judged by the failure policies and replaced.
    ContinueWithRecreations,
}

impl WhenAchieved {
    /// In the sorted order upstream lists supported values in.
    pub const NAMES: [&'static str; 3] = ["Continue", "ContinueWithRecreations", "Terminate"];

    pub fn parse(s: &str) -> Option<WhenAchieved> {
        match s {
            "Terminate" => Some(WhenAchieved::Terminate),
            "Continue" => Some(WhenAchieved::Continue),
            "ContinueWithRecreations" => Some(WhenAchieved::ContinueWithRecreations),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WhenAchieved::Terminate => "Terminate",
            WhenAchieved::Continue => "Continue",
            WhenAchieved::ContinueWithRecreations => "ContinueWithRecreations",
        }
    }
}

/// The entry for rule `index` of the annotation `key`, ignoring whatever is malformed: the
/// controller's reading of a Job the webhook has already admitted.
fn entry(job: &JobObject<'_>, key: &str, index: usize) -> Option<String> {
    job.annotation(key)
        .and_then(|text| rule_names::parse_annotation(text).ok())
        .and_then(|list| list.into_iter().nth(index))
        .flatten()
}

/// The reason rule `index` gives `SuccessCriteriaMet` and `Complete`: the annotated one when it
/// is a valid reason, else upstream's `SuccessPolicy`.
pub fn reason(job: &JobObject<'_>, index: usize) -> String {
    entry(job, REASONS_ANNOTATION, index)
        .filter(|r| reason_problems(r).is_empty())
        .unwrap_or_else(|| REASON_SUCCESS_POLICY.to_owned())
}

/// What rule `index` does with the pods still running once it is met.
pub fn when_achieved(job: &JobObject<'_>, index: usize) -> WhenAchieved {
    entry(job, WHEN_ACHIEVED_ANNOTATION, index)
        .and_then(|w| WhenAchieved::parse(&w))
        .unwrap_or_default()
}

/// Whether the Job sets either annotation.
pub fn any_set(job: &JobObject<'_>) -> bool {
    job.annotation(REASONS_ANNOTATION).is_some()
        || job.annotation(WHEN_ACHIEVED_ANNOTATION).is_some()
}

/// What is wrong with a reason, in the words of the message that reports it.
fn reason_problems(reason: &str) -> Vec<String> {
    let mut problems = names::condition_reason(reason);
    if RESERVED_REASONS.contains(&reason) || reason.starts_with(rule_names::REASON_PREFIX) {
        problems
            .push("must not be a reason the Job controller gives for another outcome".to_owned());
    }
    problems
}

pub fn validate(job: &JobObject<'_>) -> ErrorList {
    let mut errs = ErrorList::new();
    let rule_count = job.spec.success_policy.as_ref().map(|p| p.rules.len());
    for key in [REASONS_ANNOTATION, WHEN_ACHIEVED_ANNOTATION] {
        let Some(text) = job.annotation(key) else {
            continue;
        };
        let path = ANNOTATIONS.key(key);
        let Ok(entries) = rule_names::parse_annotation(text) else {
            errs.push(FieldError::invalid(
                &path,
                BadValue::Str(text.to_owned()),
                "must be a JSON array of strings or nulls, one per spec.successPolicy.rules entry",
            ));
            continue;
        };
        // Without a success policy the list aligns with nothing: a warning says so.
        if let Some(count) = rule_count
            && entries.len() > count
        {
            errs.push(FieldError::too_many(&path, entries.len(), count));
        }
        for (i, value) in entries.iter().enumerate() {
            let Some(value) = value else { continue };
            let entry_path = path.index(i);
            if key == REASONS_ANNOTATION {
                for problem in reason_problems(value) {
                    errs.push(FieldError::invalid(
                        &entry_path,
                        BadValue::Str(value.clone()),
                        problem,
                    ));
                }
            } else if WhenAchieved::parse(value).is_none() {
                errs.push(FieldError::not_supported(
                    &entry_path,
                    BadValue::Str(value.clone()),
                    &WhenAchieved::NAMES,
                ));
            }
        }
    }
    errs
}

/// Advice on a Job whose annotations will do nothing: the built-in Job controller runs it, or
/// it has no success policy for them to extend.
pub fn warnings(job: &JobObject<'_>, controller_name: &str) -> Vec<String> {
    let mut warnings = Vec::new();
    for key in [REASONS_ANNOTATION, WHEN_ACHIEVED_ANNOTATION] {
        if job.annotation(key).is_none() {
            continue;
        }
        if job.spec.success_policy.is_none() {
            warnings.push(format!(
                "metadata.annotations[{key}]: has no effect on a Job without spec.successPolicy"
            ));
        } else if job.spec.managed_by.as_deref() != Some(controller_name) {
            warnings.push(format!(
                "metadata.annotations[{key}]: success policy rule settings take effect only for Jobs with spec.managedBy {controller_name:?}; the built-in Job controller ignores them"
            ));
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const OURS: &str = JOBWARDEN_CONTROLLER_NAME;

    fn job(reasons: Option<&str>, when: Option<&str>, rules: usize) -> Value {
        let mut annotations = json!({});
        if let Some(r) = reasons {
            annotations[REASONS_ANNOTATION] = json!(r);
        }
        if let Some(w) = when {
            annotations[WHEN_ACHIEVED_ANNOTATION] = json!(w);
        }
        let mut spec = json!({"completionMode": "Indexed", "completions": 10, "managedBy": OURS});
        if rules > 0 {
            let rules: Vec<Value> = (0..rules).map(|_| json!({"succeededCount": 1})).collect();
            spec["successPolicy"] = json!({ "rules": rules });
        }
        json!({"metadata": {"name": "j", "annotations": annotations}, "spec": spec})
    }

    fn errors(raw: &Value) -> Vec<String> {
        let job = JobObject::parse(raw).expect("test job parses");
        validate(&job).iter().map(ToString::to_string).collect()
    }

    const REASONS: &str = "metadata.annotations[jobwarden.io/success-policy-rule-reasons]";
    const WHEN: &str = "metadata.annotations[jobwarden.io/success-policy-when-achieved]";

    #[test]
    fn accepted_settings() {
        let longest = format!("[\"{}\"]", "R".repeat(128));
        for (reasons, when, rules) in [
            (
                Some(r#"["LeaderSucceeded", "WorkersSucceeded"]"#),
                Some(r#"["Continue", "Terminate"]"#),
                2,
            ),
            (Some(r#"["Same", "Same"]"#), None, 2),
            (Some(r#"[null, "", "Third"]"#), Some("[]"), 3),
            (
                Some(r#"["OnlyFirst"]"#),
                Some(r#"["ContinueWithRecreations"]"#),
                3,
            ),
            (Some(r#"["SuccessPolicy"]"#), None, 1),
            (Some(r#"["a:b,c_1"]"#), None, 1),
            (Some(longest.as_str()), None, 1),
            (None, Some(r#"[null, "Terminate"]"#), 2),
            (None, None, 0),
        ] {
            let raw = job(reasons, when, rules);
            assert_eq!(errors(&raw), Vec::<String>::new(), "{reasons:?} {when:?}");
        }
    }

    #[test]
    fn rejected_settings() {
        let too_long = format!("[\"{}\"]", "R".repeat(129));
        for (reasons, when, rules, want) in [
            (
                Some(r#"["Leader", "#),
                None,
                2,
                format!(
                    "{REASONS}: Invalid value: \"[\\\"Leader\\\", \": must be a JSON array of strings or nulls, one per spec.successPolicy.rules entry"
                ),
            ),
            (
                None,
                Some(r#"{"0": "Continue"}"#),
                1,
                format!(
                    "{WHEN}: Invalid value: \"{{\\\"0\\\": \\\"Continue\\\"}}\": must be a JSON array of strings or nulls, one per spec.successPolicy.rules entry"
                ),
            ),
            (
                Some(r#"["A", 1]"#),
                None,
                2,
                format!("{REASONS}: Invalid value: \"[\\\"A\\\", 1]\": must be a JSON array"),
            ),
            (
                Some(r#"["A", "B", "C"]"#),
                None,
                2,
                format!("{REASONS}: Too many: 3: must have at most 2 items"),
            ),
            (
                None,
                Some(r#"["Continue", "Continue"]"#),
                1,
                format!("{WHEN}: Too many: 2: must have at most 1 item"),
            ),
            (
                Some(r#"["Leader", "leader-succeeded"]"#),
                None,
                2,
                format!(
                    "{REASONS}[1]: Invalid value: \"leader-succeeded\": a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (regex used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')"
                ),
            ),
            (
                Some(too_long.as_str()),
                None,
                1,
                format!("{REASONS}[0]: Invalid value: \"RRRR"),
            ),
            (
                Some(too_long.as_str()),
                None,
                1,
                "must be no more than 128 characters".to_owned(),
            ),
            (
                Some(r#"[null, "BackoffLimitExceeded"]"#),
                None,
                2,
                format!(
                    "{REASONS}[1]: Invalid value: \"BackoffLimitExceeded\": must not be a reason the Job controller gives for another outcome"
                ),
            ),
            (
                Some(r#"["CompletionsReached"]"#),
                None,
                1,
                "must not be a reason the Job controller gives".to_owned(),
            ),
            (
                Some(r#"["PodFailurePolicy_ExitCode2"]"#),
                None,
                1,
                "must not be a reason the Job controller gives".to_owned(),
            ),
            (
                None,
                Some(r#"["Terminate", "continue"]"#),
                2,
                format!(
                    "{WHEN}[1]: Unsupported value: \"continue\": supported values: \"Continue\", \"ContinueWithRecreations\", \"Terminate\""
                ),
            ),
            (
                None,
                Some(r#"["Never"]"#),
                0,
                format!("{WHEN}[0]: Unsupported value: \"Never\""),
            ),
        ] {
            let raw = job(reasons, when, rules);
            let got = errors(&raw);
            assert!(
                got.iter().any(|e| e.contains(&want)),
                "{reasons:?} {when:?}: {got:?} lacks {want}"
            );
        }
    }

    #[test]
    fn settings_per_rule() {
        let raw = job(
            Some(r#"["LeaderSucceeded", null, "bad reason"]"#),
            Some(r#"["Continue", "ContinueWithRecreations", "Sometimes"]"#),
            4,
        );
        let job = JobObject::parse(&raw).expect("parses");
        assert_eq!(
            (0..4).map(|i| reason(&job, i)).collect::<Vec<_>>(),
            [
                "LeaderSucceeded",
                "SuccessPolicy",
                "SuccessPolicy",
                "SuccessPolicy"
            ]
        );
        assert_eq!(
            (0..4).map(|i| when_achieved(&job, i)).collect::<Vec<_>>(),
            [
                WhenAchieved::Continue,
                WhenAchieved::ContinueWithRecreations,
                WhenAchieved::Terminate,
                WhenAchieved::Terminate
            ]
        );
        let unreadable = job_with_text("[", "[");
        let unreadable = JobObject::parse(&unreadable).expect("parses");
        assert_eq!(reason(&unreadable, 0), "SuccessPolicy");
        assert_eq!(when_achieved(&unreadable, 0), WhenAchieved::Terminate);
    }

    fn job_with_text(reasons: &str, when: &str) -> Value {
        job(Some(reasons), Some(when), 1)
    }

    #[test]
    fn warnings_when_nothing_reads_them() {
        let warn = |raw: Value| {
            let job = JobObject::parse(&raw).expect("parses");
            warnings(&job, OURS)
        };
        assert!(warn(job(Some(r#"["A"]"#), Some(r#"["Continue"]"#), 1)).is_empty());
        assert!(warn(job(None, None, 1)).is_empty());
        let mut builtin = job(Some(r#"["A"]"#), None, 1);
        builtin["spec"]["managedBy"] = Value::Null;
        assert_eq!(
            warn(builtin),
            [format!(
                "{REASONS}: success policy rule settings take effect only for Jobs with spec.managedBy \"jobwarden.io/job-controller\"; the built-in Job controller ignores them"
            )]
        );
        assert_eq!(
            warn(job(Some(r#"["A"]"#), Some(r#"["Continue"]"#), 0)),
            [
                format!("{REASONS}: has no effect on a Job without spec.successPolicy"),
                format!("{WHEN}: has no effect on a Job without spec.successPolicy"),
            ]
        );
    }
}
