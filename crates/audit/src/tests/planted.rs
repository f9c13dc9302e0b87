//! Planted violations, one kind per row, each with the exact line a denial prints; the statuses
//! v1.36's controller writes on its way to the end of a Job, none of which is a violation; and
//! the webhook itself agreeing, word for word, with what the audit says.

use jobwarden_admission::{Context, Policy, Reviewer, Webhook};
use serde_json::{Value, json};

use super::builder::{NAMESPACE, Stored, condition, job};
use crate::violations::{Rule, Violation, audit_job};

fn policy_allowing(managed_by: &[&str]) -> Policy {
    Policy {
        allowed_managed_by: managed_by.iter().map(|s| (*s).to_owned()).collect(),
        ..Policy::default()
    }
}

fn audit(stored: &Value, policy: &Policy) -> Vec<(Rule, String)> {
    audit_job(stored, policy)
        .expect("the Job decodes")
        .iter()
        .map(|v| (v.rule, v.to_string()))
        .collect()
}

fn lines(rule: Rule, want: &[&str]) -> Vec<(Rule, String)> {
    want.iter().map(|l| (rule, (*l).to_owned())).collect()
}

#[test]
fn each_kind_of_violation_is_reported_as_a_denial_words_it() {
    let kueue = policy_allowing(&["kueue.x-k8s.io/multikueue"]);
    let empty = Policy::default();
    let rows: Vec<(&str, Stored, &Policy, Rule, Vec<&str>)> = vec![
        (
            "negative parallelism",
            job("a").spec("parallelism", json!(-1)),
            &empty,
            Rule::Spec,
            vec!["spec.parallelism: Invalid value: -1: must be greater than or equal to 0"],
        ),
        (
            "a success policy on a NonIndexed Job",
            job("a").spec("successPolicy", json!({"rules": [{"succeededCount": 1}]})),
            &empty,
            Rule::Spec,
            // Upstream prints the internal Go struct, field names and all.
            vec![
                "spec.successPolicy: Invalid value: {\"Rules\":[{\"SucceededIndexes\":null,\"SucceededCount\":1}]}: requires indexed completion mode",
            ],
        ),
        (
            "a managedBy of 64 bytes",
            job("a").spec(
                "managedBy",
                json!(format!("example.com/{}", "x".repeat(52))),
            ),
            &empty,
            Rule::Spec,
            vec!["spec.managedBy: Too long: may not be more than 63 bytes"],
        ),
        (
            "OnFailure with a pod failure policy",
            job("a")
                .pfp_rules(1)
                .set("/spec/template/spec/restartPolicy", json!("OnFailure")),
            &empty,
            Rule::Spec,
            vec![
                "spec.template.spec.restartPolicy: Invalid value: \"OnFailure\": only \"Never\" is supported when podFailurePolicy is specified",
            ],
        ),
        (
            "a repeated rule name",
            job("a").pfp_rules(2).rule_names(r#"["Retry", "Retry"]"#),
            &empty,
            Rule::RuleNames,
            vec!["spec.podFailurePolicy.rules[1].name: Duplicate value: \"Retry\""],
        ),
        (
            "a rule name that is another rule's index",
            job("a")
                .pfp_rules(3)
                .rule_names(r#"["first", "2", "third"]"#),
            &empty,
            Rule::RuleNames,
            vec![
                "spec.podFailurePolicy.rules[1].name: Invalid value: \"2\": must not be the index of another rule (rules[2]), whose unnamed reason is PodFailurePolicy_2",
            ],
        ),
        (
            "rule names without a pod failure policy",
            job("a").rule_names(r#"["A"]"#),
            &empty,
            Rule::RuleNames,
            vec![
                "metadata.annotations[jobwarden.io/pod-failure-policy-rule-names]: Forbidden: may only be set on a Job with spec.podFailurePolicy",
            ],
        ),
        (
            "a rule-name annotation that is not JSON",
            job("a").pfp_rules(1).rule_names(r#"["a", "#),
            &empty,
            Rule::RuleNames,
            vec![
                "metadata.annotations[jobwarden.io/pod-failure-policy-rule-names]: Invalid value: \"[\\\"a\\\", \": must be a JSON array of strings or nulls, one per spec.podFailurePolicy.rules entry",
            ],
        ),
        (
            "a managedBy outside the allow-list",
            job("a").spec("managedBy", json!("example.com/other")),
            &kueue,
            Rule::Policy,
            vec![
                "spec.managedBy \"example.com/other\" is not one of the controllers this cluster allows: \"jobwarden.io/job-controller\", \"kubernetes.io/job-controller\", \"kueue.x-k8s.io/multikueue\"",
            ],
        ),
        (
            "a negative failed counter",
            job("a").started().status("failed", json!(-2)),
            &empty,
            Rule::Status,
            vec!["status.failed: Invalid value: -2: must be greater than or equal to 0"],
        ),
        (
            "an uncounted pod listed twice",
            job("a").started().status("active", json!(1)).status(
                "uncountedTerminatedPods",
                json!({"succeeded": ["p1"], "failed": ["p1"]}),
            ),
            &empty,
            Rule::Status,
            vec!["status.uncountedTerminatedPods.failed[0]: Duplicate value: \"p1\""],
        ),
        (
            "SuccessCriteriaMet beside Failed",
            job("a").started().conditions(&[
                condition(
                    "SuccessCriteriaMet",
                    "True",
                    "CompletionsReached",
                    "m",
                    "10:05",
                ),
                condition(
                    "FailureTarget",
                    "True",
                    "BackoffLimitExceeded",
                    "m",
                    "10:06",
                ),
                condition("Failed", "True", "BackoffLimitExceeded", "m", "10:07"),
            ]),
            &empty,
            Rule::Status,
            vec![
                "status.conditions: Invalid value: cannot set SuccessCriteriaMet=True and Failed=true conditions",
                "status.conditions: Invalid value: cannot set SuccessCriteriaMet=True and FailureTarget=true conditions",
            ],
        ),
        (
            "Complete without SuccessCriteriaMet under a success policy",
            job("a")
                .indexed(3)
                .spec(
                    "successPolicy",
                    json!({"rules": [{"succeededIndexes": "0"}]}),
                )
                .started()
                .conditions(&[condition("Complete", "True", "SuccessPolicy", "m", "10:10")])
                .status("completionTime", json!("2026-01-01T10:10:00Z"))
                .status("completedIndexes", json!("0")),
            &empty,
            Rule::Status,
            vec![
                "status.conditions: Invalid value: cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True",
            ],
        ),
        (
            "Complete and Failed both true",
            job("a").completed("CompletionsReached", "m").conditions(&[
                condition(
                    "FailureTarget",
                    "True",
                    "BackoffLimitExceeded",
                    "m",
                    "10:05",
                ),
                condition("Failed", "True", "BackoffLimitExceeded", "m", "10:06"),
                condition("Complete", "True", "CompletionsReached", "m", "10:10"),
            ]),
            &empty,
            Rule::Status,
            vec![
                "status.conditions: Invalid value: cannot set Complete=True and Failed=true conditions",
            ],
        ),
        (
            "a Job suspended after it completed",
            job("a")
                .completed("CompletionsReached", "m")
                .spec("suspend", json!(true)),
            &empty,
            Rule::Status,
            vec![
                "spec.suspend: Forbidden: cannot suspend a finished Job (it has the condition Complete=True)",
            ],
        ),
        (
            "a Job suspended after it failed",
            job("a")
                .failed("BackoffLimitExceeded", "m")
                .spec("suspend", json!(true)),
            &empty,
            Rule::Status,
            vec![
                "spec.suspend: Forbidden: cannot suspend a finished Job (it has the condition Failed=True)",
            ],
        ),
        (
            "suspended after finishing, even when once suspended and resumed",
            job("a")
                .completed("CompletionsReached", "m")
                .conditions(&[
                    condition("Suspended", "False", "JobResumed", "Job resumed", "10:01"),
                    condition(
                        "SuccessCriteriaMet",
                        "True",
                        "CompletionsReached",
                        "m",
                        "10:05",
                    ),
                    condition("Complete", "True", "CompletionsReached", "m", "10:10"),
                ])
                .spec("suspend", json!(true)),
            &empty,
            Rule::Status,
            vec![
                "spec.suspend: Forbidden: cannot suspend a finished Job (it has the condition Complete=True)",
            ],
        ),
    ];
    for (what, stored, policy, rule, want) in rows {
        assert_eq!(audit(&stored.build(), policy), lines(rule, &want), "{what}");
    }
}

#[test]
fn every_violation_of_a_job_is_reported_once_in_order() {
    let stored = job("a")
        .spec("parallelism", json!(-1))
        .pfp_rules(2)
        .rule_names(r#"["X", "X"]"#)
        .spec("managedBy", json!("example.com/other"))
        .started()
        .status("active", json!(-1))
        .build();
    let found = audit_job(&stored, &policy_allowing(&["example.com/allowed"])).expect("decodes");
    let rules: Vec<Rule> = found.iter().map(|v| v.rule).collect();
    assert_eq!(
        rules,
        [Rule::Spec, Rule::RuleNames, Rule::Policy, Rule::Status],
        "{found:?}"
    );
}

#[test]
fn policy_allows_its_list_the_two_known_controllers_and_no_managed_by() {
    let policy = policy_allowing(&["kueue.x-k8s.io/multikueue"]);
    for managed_by in [
        Some("kueue.x-k8s.io/multikueue"),
        Some("jobwarden.io/job-controller"),
        Some("kubernetes.io/job-controller"),
        None,
    ] {
        let mut stored = job("a");
        if let Some(m) = managed_by {
            stored = stored.spec("managedBy", json!(m));
        }
        assert_eq!(audit(&stored.build(), &policy), vec![], "{managed_by:?}");
    }
    // Without an allow-list, any well-formed controller name is accepted (with a warning on
    // create, which is not a denial).
    let other = job("a")
        .spec("managedBy", json!("example.com/other"))
        .build();
    assert_eq!(audit(&other, &Policy::default()), vec![]);
}

/// The statuses v1.36's controller writes while it runs Jobs to their end, and those older
/// versions left behind: none is a violation.
#[test]
fn statuses_written_by_the_job_controller_are_clean() {
    let pfp_rules =
        json!([{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]);
    let rows: Vec<(&str, Stored)> = vec![
        ("new, no status yet", job("a")),
        (
            "running, one pod counted, one ready",
            job("a")
                .spec("parallelism", json!(2))
                .spec("completions", json!(4))
                .started()
                .status("active", json!(2))
                .status("ready", json!(1))
                .status("terminating", json!(0))
                .status("uncountedTerminatedPods", json!({"succeeded": ["pod-uid-1"]})),
        ),
        (
            "succeeded",
            job("a")
                .completed("CompletionsReached", "Reached expected number of succeeded pods")
                .status("succeeded", json!(1)),
        ),
        (
            "Indexed, every index succeeded",
            job("a")
                .indexed(3)
                .completed("CompletionsReached", "Reached expected number of succeeded pods")
                .status("succeeded", json!(3))
                .status("completedIndexes", json!("0-2")),
        ),
        (
            "Indexed, a success policy met, the rest terminated",
            job("a")
                .indexed(5)
                .spec("successPolicy", json!({"rules": [{"succeededIndexes": "0", "succeededCount": 1}]}))
                .completed("SuccessPolicy", "Matched rules at index 0")
                .status("succeeded", json!(1))
                .status("failed", json!(0))
                .status("completedIndexes", json!("0")),
        ),
        (
            "failed by the back-off limit",
            job("a")
                .failed("BackoffLimitExceeded", "Job has reached the specified backoff limit")
                .status("failed", json!(7)),
        ),
        (
            "failed by the active deadline",
            job("a")
                .spec("activeDeadlineSeconds", json!(60))
                .failed("DeadlineExceeded", "Job was active longer than specified deadline"),
        ),
        (
            "failed by a pod failure policy rule",
            job("a")
                .spec("podFailurePolicy", json!({"rules": pfp_rules}))
                .failed("PodFailurePolicy", "Container main for pod team-a/a-x failed with exit code 42 matching FailJob rule at index 0")
                .status("failed", json!(1)),
        ),
        (
            "failed by a named rule under jobwarden's controller",
            job("a")
                .spec("managedBy", json!("jobwarden.io/job-controller"))
                .spec("podFailurePolicy", json!({"rules": pfp_rules}))
                .rule_names(r#"["ExitCode42"]"#)
                .failed("PodFailurePolicy_ExitCode42", "Container main for pod team-a/a-x failed with exit code 42 matching FailJob rule \"ExitCode42\"")
                .status("failed", json!(1)),
        ),
        (
            "failed indexes with a back-off limit per index",
            job("a")
                .indexed(3)
                .spec("backoffLimitPerIndex", json!(1))
                .failed("FailedIndexes", "Job has failed indexes")
                .status("failed", json!(2))
                .status("succeeded", json!(2))
                .status("completedIndexes", json!("0,2"))
                .status("failedIndexes", json!("1")),
        ),
        (
            "suspended while running",
            job("a").spec("suspend", json!(true)).conditions(&[condition(
                "Suspended", "True", "JobSuspended", "Job suspended", "10:03",
            )]),
        ),
        (
            "resumed",
            job("a")
                .started()
                .conditions(&[condition("Suspended", "False", "JobResumed", "Job resumed", "10:00")])
                .status("active", json!(1))
                .status("ready", json!(1)),
        ),
        (
            "suspended while running, and its last pod succeeded before it was deleted",
            job("a")
                .spec("suspend", json!(true))
                .completed("CompletionsReached", "Reached expected number of succeeded pods")
                .conditions(&[
                    condition("Suspended", "True", "JobSuspended", "Job suspended", "10:04"),
                    condition("SuccessCriteriaMet", "True", "CompletionsReached", "m", "10:05"),
                    condition("Complete", "True", "CompletionsReached", "m", "10:10"),
                ])
                .status("succeeded", json!(1)),
        ),
        (
            "created suspended with zero completions, finished without starting (PR #132614)",
            job("a")
                .spec("suspend", json!(true))
                .spec("completions", json!(0))
                .spec("parallelism", json!(0))
                .conditions(&[
                    condition("SuccessCriteriaMet", "True", "CompletionsReached", "m", "10:00"),
                    condition("Complete", "True", "CompletionsReached", "m", "10:00"),
                ])
                .status("completionTime", json!("2026-01-01T10:00:00Z")),
        ),
        (
            "completed before v1.31: no SuccessCriteriaMet",
            job("a")
                .started()
                .conditions(&[condition("Complete", "True", "", "", "10:10")])
                .status("completionTime", json!("2026-01-01T10:10:00Z"))
                .status("succeeded", json!(1)),
        ),
        (
            "failed before v1.31: no FailureTarget",
            job("a")
                .started()
                .conditions(&[condition("Failed", "True", "BackoffLimitExceeded", "m", "10:10")])
                .status("failed", json!(7)),
        ),
        (
            "created before the batch.kubernetes.io/ labels (v1.27)",
            job("a").set("/metadata/uid", json!("0b5e8c43-6a48-4b8e-8f5c-3f8f6c7a1d20")),
        ),
    ];
    for (what, stored) in rows {
        let mut raw = stored.build();
        if what.contains("(v1.27)") {
            drop_prefixed_labels(&mut raw);
        }
        assert_eq!(audit(&raw, &Policy::default()), vec![], "{what}");
    }
}

fn drop_prefixed_labels(raw: &mut Value) {
    let uid = raw["metadata"]["uid"].clone();
    if let Some(labels) = raw
        .pointer_mut("/spec/template/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.retain(|k, _| !k.starts_with("batch.kubernetes.io/"));
    }
    raw["spec"]["selector"] = json!({"matchLabels": {"controller-uid": uid}});
}

fn review(operation: &str, sub_resource: Option<&str>, object: &Value, policy: &Policy) -> Value {
    let mut request = json!({
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
        "name": object["metadata"]["name"],
        "namespace": NAMESPACE,
        "operation": operation,
        "userInfo": {"username": "someone"},
        "object": object,
        "oldObject": if operation == "UPDATE" { object.clone() } else { Value::Null },
    });
    if let Some(sub) = sub_resource {
        request["subResource"] = json!(sub);
    }
    let body =
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
    let reviewed = Reviewer::new(policy.clone())
        .review(
            Webhook::Validate,
            &serde_json::to_vec(&body).expect("serialisable"),
            &Context::default(),
        )
        .expect("a readable review");
    serde_json::from_slice(&reviewed.body).expect("the response is JSON")
}

fn causes(response: &Value) -> Vec<(String, String)> {
    response["response"]["status"]["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["field"].as_str().unwrap_or("").to_owned(),
                c["message"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn unique(mut pairs: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut seen = std::collections::HashSet::new();
    pairs.retain(|p| seen.insert(p.clone()));
    pairs
}

fn of_rules(found: &[Violation], rules: &[Rule]) -> Vec<(String, String)> {
    found
        .iter()
        .filter(|v| rules.contains(&v.rule))
        .map(|v| (v.field.clone(), v.message.clone()))
        .collect()
}

/// The webhook, asked about the stored Job written back unchanged, denies it with exactly the
/// fields and messages the audit reports; the policy's refusal on create is the audit's word for
/// word.
#[test]
fn the_webhook_denies_what_the_audit_reports_in_the_same_words() {
    let policy = policy_allowing(&["example.com/allowed"]);
    let stored = job("a")
        .spec("parallelism", json!(-1))
        .spec("backoffLimit", json!(-3))
        .pfp_rules(3)
        .rule_names(r#"["first", "2", "first"]"#)
        .spec("managedBy", json!("example.com/other"))
        .started()
        .status("active", json!(-1))
        .status("uncountedTerminatedPods", json!({"succeeded": ["p", "p"]}))
        .build();
    let found = audit_job(&stored, &policy).expect("decodes");

    let spec_update = review("UPDATE", None, &stored, &policy);
    assert_eq!(spec_update["response"]["allowed"], false);
    let spec = of_rules(&found, &[Rule::Spec, Rule::RuleNames]);
    assert!(spec.len() >= 4, "{found:?}");
    assert_eq!(unique(causes(&spec_update)), spec);

    let status_update = review("UPDATE", Some("status"), &stored, &policy);
    assert_eq!(status_update["response"]["allowed"], false);
    let status = of_rules(&found, &[Rule::Status]);
    assert_eq!(status.len(), 2, "{found:?}");
    assert_eq!(unique(causes(&status_update)), status);

    // The spec errors come first on create too; a valid Job shows the policy's refusal.
    let valid_but_unlisted = job("a")
        .spec("managedBy", json!("example.com/other"))
        .build();
    let create = review("CREATE", None, &valid_but_unlisted, &policy);
    let refusal = audit_job(&valid_but_unlisted, &policy).expect("decodes");
    assert_eq!(refusal.len(), 1);
    assert_eq!(
        create["response"]["status"]["message"],
        format!("jobs.batch \"a\" is forbidden: {}", refusal[0])
    );
    assert_eq!(create["response"]["status"]["code"], 403);
}

#[test]
fn a_job_that_is_not_an_object_cannot_be_audited() {
    assert!(audit_job(&json!("a string"), &Policy::default()).is_err());
    assert!(audit_job(&json!({"spec": {"parallelism": "two"}}), &Policy::default()).is_err());
}

#[test]
fn rule_name_errors_are_told_apart_by_their_paths() {
    use jobwarden_rules::{BadValue, FieldError, FieldPath};
    let of = |path: &str| {
        Rule::of_spec_error(&FieldError::invalid(
            &FieldPath::new(path),
            BadValue::Omit,
            "x",
        ))
    };
    for (path, want) in [
        ("spec.podFailurePolicy.rules[1].name", Rule::RuleNames),
        ("spec.podFailurePolicy.rules[12].name", Rule::RuleNames),
        (
            "metadata.annotations[jobwarden.io/pod-failure-policy-rule-names]",
            Rule::RuleNames,
        ),
        ("spec.podFailurePolicy.rules[1].action", Rule::Spec),
        ("spec.podFailurePolicy.rules[].name", Rule::Spec),
        ("spec.podFailurePolicy.rules[1].name.x", Rule::Spec),
        ("metadata.annotations[other]", Rule::Spec),
        ("metadata.name", Rule::Spec),
    ] {
        assert_eq!(of(path), want, "{path}");
    }
}
