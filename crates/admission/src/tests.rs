//! The adapter at its boundary: AdmissionReview JSON in, AdmissionReview JSON out, for good
//! requests, hostile ones and each policy.

use std::collections::BTreeMap;

use base64::Engine as _;
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::policy::{Identities, NamespaceMatch};
use crate::{Context, NamespaceLookup, Policy, Reviewer, Unreadable, Verdict, Webhook};

fn job(spec: Value) -> Value {
    let uid = "0b5e8c43-6a48-4b8e-8f5c-3f8f6c7a1d20";
    let mut full = json!({
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
        "completions": 1, "parallelism": 1, "completionMode": "NonIndexed", "suspend": false,
        "template": {
            "metadata": {"labels": {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "j",
                                     "controller-uid": uid, "job-name": "j"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}
        }
    });
    for (k, v) in spec.as_object().into_iter().flatten() {
        full[k] = v.clone();
    }
    json!({"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "namespace": "ns", "uid": uid}, "spec": full, "status": {}})
}

fn request(operation: &str, object: Value, old: Option<Value>) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "req-1", "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
        "operation": operation, "namespace": "ns", "name": "j",
        "userInfo": {"username": "alice", "groups": ["devs", "system:authenticated"]},
        "object": object, "oldObject": old, "dryRun": false}})
}

fn review(reviewer: &Reviewer, webhook: Webhook, req: &Value) -> (Value, Verdict) {
    let body = serde_json::to_vec(req).unwrap_or_default();
    let reviewed = reviewer
        .review(webhook, &body, &Context::default())
        .expect("an answerable request");
    assert_eq!(reviewed.body.last(), Some(&b'\n'));
    let out: Value = serde_json::from_slice(&reviewed.body).expect("JSON out");
    assert_eq!(out["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(out["kind"], "AdmissionReview");
    assert_eq!(out["response"]["uid"], req["request"]["uid"]);
    assert_eq!(out["response"]["allowed"].as_bool(), Some(reviewed.allowed));
    (out["response"].clone(), reviewed.summary.verdict)
}

fn patched(response: &Value, object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(p) = response["patch"].as_str() {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(p)
            .expect("base64");
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("patch");
        json_patch::patch(&mut object, &patch).expect("applies");
    }
    object
}

#[test]
fn unreadable_bodies_have_no_uid_to_answer() {
    let r = Reviewer::default();
    type Expectation = fn(&Unreadable) -> bool;
    let cases: [(&[u8], Expectation); 6] = [
        (b"", |e| matches!(e, Unreadable::NotJson(_))),
        (b"{\"apiVersion\":", |e| matches!(e, Unreadable::NotJson(_))),
        (b"[1,2]", |e| matches!(e, Unreadable::NotAdmissionReview { .. })),
        (br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"a"}}"#, |e| matches!(e, Unreadable::NotAdmissionReview { .. })),
        (br#"{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"a"}}"#, |e| matches!(e, Unreadable::NotAdmissionReview { .. })),
        (br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":7}}"#, |e| *e == Unreadable::NoUid),
    ];
    for (body, is_expected) in cases {
        let err = r
            .review(Webhook::Validate, body, &Context::default())
            .expect_err("unreadable");
        assert!(
            is_expected(&err),
            "{}: {err}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn wrong_shapes_with_a_uid_get_a_v1_denial() {
    let r = Reviewer::default();
    let mut bad_operation = request("CREATE", job(json!({})), None);
    bad_operation["request"]["operation"] = json!(5);
    let mut bad_object = request("CREATE", job(json!({})), None);
    bad_object["request"]["object"]["spec"]["completions"] = json!("ten");
    let mut huge = request("CREATE", job(json!({})), None);
    huge["request"]["object"]["spec"]["parallelism"] = json!(1e12);
    let no_old = request("UPDATE", job(json!({})), None);
    let mut no_object = request("CREATE", job(json!({})), None);
    no_object["request"]["object"] = Value::Null;
    for req in [bad_operation, bad_object, huge, no_old, no_object] {
        let (resp, verdict) = review(&r, Webhook::Validate, &req);
        assert_eq!(resp["allowed"], false);
        assert_eq!(resp["status"]["code"], 400, "{resp}");
        assert_eq!(resp["status"]["reason"], "BadRequest");
        assert_eq!(verdict, Verdict::Denied { code: 400 });
    }
}

#[test]
fn other_resources_and_operations_are_ignored() {
    let r = Reviewer::default();
    let mut pod = request("CREATE", json!({"kind": "Pod"}), None);
    pod["request"]["kind"] = json!({"group": "", "version": "v1", "kind": "Pod"});
    pod["request"]["resource"] = json!({"group": "", "version": "v1", "resource": "pods"});
    let delete = request("DELETE", Value::Null, Some(job(json!({}))));
    let mut scale = request("UPDATE", json!({}), Some(json!({})));
    scale["request"]["subResource"] = json!("scale");
    for req in [pod, delete, scale] {
        for webhook in [Webhook::Validate, Webhook::Mutate] {
            let (resp, verdict) = review(&r, webhook, &req);
            assert_eq!(resp["allowed"], true);
            assert_eq!(resp.get("patch"), None);
            assert_eq!(verdict, Verdict::Ignored);
        }
    }
}

#[test]
fn invalid_jobs_are_denied_like_kube_apiserver() {
    let (resp, verdict) = review(
        &Reviewer::default(),
        Webhook::Validate,
        &request(
            "CREATE",
            job(json!({"parallelism": -1, "backoffLimit": -1})),
            None,
        ),
    );
    assert_eq!(verdict, Verdict::Denied { code: 422 });
    assert_eq!(
        resp["status"],
        json!({"metadata": {}, "status": "Failure",
               "message": "Job.batch \"j\" is invalid: [spec.parallelism: Invalid value: -1: must be greater than or equal to 0, spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0]",
               "reason": "Invalid",
               "details": {"name": "j", "group": "batch", "kind": "Job", "causes": [
                   {"reason": "FieldValueInvalid", "message": "Invalid value: -1: must be greater than or equal to 0", "field": "spec.parallelism"},
                   {"reason": "FieldValueInvalid", "message": "Invalid value: -1: must be greater than or equal to 0", "field": "spec.backoffLimit"}]},
               "code": 422})
    );
}

#[test]
fn status_updates_use_the_status_rules() {
    let old = job(json!({}));
    let mut new = old.clone();
    new["status"] = json!({"conditions": [{"type": "Failed", "status": "True"}], "startTime": "2026-01-01T00:00:00Z"});
    let mut req = request("UPDATE", new, Some(old));
    req["request"]["subResource"] = json!("status");
    let (resp, _) = review(&Reviewer::default(), Webhook::Validate, &req);
    assert_eq!(
        resp["status"]["message"],
        "Job.batch \"j\" is invalid: status.conditions: Invalid value: cannot set Failed=True condition without the FailureTarget=true condition"
    );
    // The mutating webhook leaves status updates alone.
    let (resp, verdict) = review(&Reviewer::default(), Webhook::Mutate, &req);
    assert_eq!((resp.get("patch"), verdict), (None, Verdict::Ignored));
}

#[test]
fn mutation_defaults_only_what_is_absent_and_keeps_unknown_fields() {
    let r = Reviewer::default();
    let mut object = job(json!({"futureField": {"a": 1}}));
    object["status"] = json!({"newCounter": 3});
    let req = request("CREATE", object.clone(), None);
    let (resp, verdict) = review(&r, Webhook::Mutate, &req);
    assert_eq!(verdict, Verdict::Patched);
    let after = patched(&resp, &object);
    let mut want = object.clone();
    want["spec"]["podReplacementPolicy"] = json!("TerminatingOrFailed");
    assert_eq!(after, want);

    let with_policy = job(json!({"podReplacementPolicy": "Failed"}));
    let (resp, verdict) = review(&r, Webhook::Mutate, &request("CREATE", with_policy, None));
    assert_eq!((resp.get("patch"), verdict), (None, Verdict::Allowed));

    // Garbage objects are allowed unpatched: validation is where they are denied.
    let (resp, _) = review(
        &r,
        Webhook::Mutate,
        &request("CREATE", json!("garbage"), None),
    );
    assert_eq!(
        (resp["allowed"].clone(), resp.get("patch")),
        (json!(true), None)
    );
}

#[test]
fn managed_by_allow_list_and_warning() {
    let foreign = job(json!({"managedBy": "other.io/controller"}));
    let (resp, verdict) = review(
        &Reviewer::default(),
        Webhook::Validate,
        &request("CREATE", foreign.clone(), None),
    );
    assert_eq!(verdict, Verdict::Allowed);
    assert!(
        resp["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("other.io/controller")),
        "{resp}"
    );

    let closed = Reviewer::new(Policy {
        allowed_managed_by: vec!["example.com/batch".into()],
        ..Policy::default()
    });
    let (resp, verdict) = review(
        &closed,
        Webhook::Validate,
        &request("CREATE", foreign, None),
    );
    assert_eq!(verdict, Verdict::Denied { code: 403 });
    assert_eq!(resp["status"]["reason"], "Forbidden");
    assert!(resp["status"]["message"].as_str().is_some_and(|m| {
        m.starts_with("jobs.batch \"j\" is forbidden: spec.managedBy \"other.io/controller\"")
    }));
    for ok in [
        "example.com/batch",
        "jobwarden.io/job-controller",
        "kubernetes.io/job-controller",
    ] {
        let (resp, _) = review(
            &closed,
            Webhook::Validate,
            &request("CREATE", job(json!({"managedBy": ok})), None),
        );
        assert_eq!(resp["allowed"], true, "{ok}");
    }
}

#[test]
fn resume_policy_checks_the_requester() {
    let suspended = job(json!({"suspend": true}));
    let resumed = job(json!({"suspend": false}));
    let policy = |ids: Identities| {
        Reviewer::new(Policy {
            resume: ids,
            ..Policy::default()
        })
    };
    let as_user = |user: &str, groups: &[&str]| {
        let mut req = request("UPDATE", resumed.clone(), Some(suspended.clone()));
        req["request"]["userInfo"] = json!({"username": user, "groups": groups});
        req
    };
    let ops = policy(Identities {
        users: vec!["ops".into()],
        groups: vec!["sre".into()],
        service_accounts: vec!["batch/scheduler".into()],
    });
    for (user, groups, allowed) in [
        ("ops", &[][..], true),
        ("bob", &["sre"][..], true),
        ("system:serviceaccount:batch:scheduler", &[][..], true),
        ("system:serviceaccount:other:scheduler", &[][..], false),
        ("alice", &["devs"][..], false),
    ] {
        let (resp, _) = review(&ops, Webhook::Validate, &as_user(user, groups));
        assert_eq!(resp["allowed"], allowed, "{user}");
        if !allowed {
            assert_eq!(resp["status"]["code"], 403);
        }
    }
    // No policy: anyone may resume; suspending is never restricted.
    let (resp, _) = review(
        &Reviewer::default(),
        Webhook::Validate,
        &as_user("alice", &[]),
    );
    assert_eq!(resp["allowed"], true);
    let suspend = request("UPDATE", suspended.clone(), Some(resumed.clone()));
    let (resp, _) = review(&ops, Webhook::Validate, &suspend);
    assert_eq!(resp["allowed"], true);
}

#[test]
fn suspend_on_create_by_namespace_name_or_labels() {
    let selector = k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
        match_labels: Some(BTreeMap::from([(
            "jobwarden.io/suspend".to_owned(),
            "true".to_owned(),
        )])),
        ..Default::default()
    };
    let r = Reviewer::new(Policy {
        suspend_on_create: NamespaceMatch {
            names: vec!["ns".into()],
            selector: Some(selector),
        },
        ..Policy::default()
    });
    let object = job(json!({"podReplacementPolicy": "Failed"}));
    let (resp, _) = review(
        &r,
        Webhook::Mutate,
        &request("CREATE", object.clone(), None),
    );
    assert_eq!(patched(&resp, &object)["spec"]["suspend"], true);
    assert!(
        resp["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("created suspended"))
    );

    let mut elsewhere = request("CREATE", object.clone(), None);
    elsewhere["request"]["namespace"] = json!("other");
    let body = serde_json::to_vec(&elsewhere).unwrap_or_default();
    let labels = |ns: &str| {
        (ns == "other")
            .then(|| BTreeMap::from([("jobwarden.io/suspend".to_owned(), "true".to_owned())]))
    };
    for (lookup, suspended) in [(None, false), (Some(&labels as NamespaceLookup<'_>), true)] {
        let ctx = Context {
            namespace_labels: lookup,
        };
        let reviewed = r.review(Webhook::Mutate, &body, &ctx).expect("answerable");
        let out: Value = serde_json::from_slice(&reviewed.body).expect("JSON");
        assert_eq!(
            patched(&out["response"], &object)["spec"]["suspend"] == true,
            suspended
        );
    }
    // Updates are never suspended by policy.
    let (resp, _) = review(
        &r,
        Webhook::Mutate,
        &request("UPDATE", object.clone(), Some(object)),
    );
    assert_eq!(resp.get("patch"), None);
}

#[test]
fn named_rules_on_a_job_jobwarden_does_not_run_get_a_warning() {
    let mut object = job(
        json!({"podReplacementPolicy": "Failed", "podFailurePolicy": {"rules": [
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [2]}}]}}),
    );
    object["metadata"]["annotations"] =
        json!({"jobwarden.io/pod-failure-policy-rule-names": "[\"ExitCode2\"]"});
    let (resp, _) = review(
        &Reviewer::default(),
        Webhook::Validate,
        &request("CREATE", object.clone(), None),
    );
    assert_eq!(resp["allowed"], true);
    assert!(
        resp["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("take effect only")),
        "{resp}"
    );
    object["spec"]["managedBy"] = json!("jobwarden.io/job-controller");
    let (resp, _) = review(
        &Reviewer::default(),
        Webhook::Validate,
        &request("CREATE", object, None),
    );
    assert_eq!(resp.get("warnings"), None);
}

#[test]
fn success_rule_settings_that_do_nothing_get_a_warning() {
    let mut object = job(
        json!({"completionMode": "Indexed", "completions": 2, "parallelism": 2,
        "successPolicy": {"rules": [{"succeededIndexes": "0"}]}}),
    );
    object["metadata"]["annotations"] = json!({
        "jobwarden.io/success-policy-rule-reasons": "[\"LeaderSucceeded\"]",
        "jobwarden.io/success-policy-when-achieved": "[\"Continue\"]",
    });
    let warnings = |object: &Value| {
        let (resp, _) = review(
            &Reviewer::default(),
            Webhook::Validate,
            &request("CREATE", object.clone(), None),
        );
        assert_eq!(resp["allowed"], true, "{resp}");
        resp.get("warnings").cloned().unwrap_or(Value::Null)
    };
    assert_eq!(
        warnings(&object),
        json!([
            "metadata.annotations[jobwarden.io/success-policy-rule-reasons]: success policy rule settings take effect only for Jobs with spec.managedBy \"jobwarden.io/job-controller\"; the built-in Job controller ignores them",
            "metadata.annotations[jobwarden.io/success-policy-when-achieved]: success policy rule settings take effect only for Jobs with spec.managedBy \"jobwarden.io/job-controller\"; the built-in Job controller ignores them",
        ])
    );
    object["spec"]["managedBy"] = json!("jobwarden.io/job-controller");
    assert_eq!(warnings(&object), Value::Null);
    object["metadata"]["annotations"]["jobwarden.io/success-policy-when-achieved"] =
        json!("[\"Sometimes\"]");
    let (resp, _) = review(
        &Reviewer::default(),
        Webhook::Validate,
        &request("CREATE", object, None),
    );
    assert_eq!(resp["allowed"], false);
    assert!(
        resp["status"]["message"].as_str().is_some_and(|m| m.contains(
            "metadata.annotations[jobwarden.io/success-policy-when-achieved][0]: Unsupported value: \"Sometimes\""
        )),
        "{resp}"
    );
}

proptest! {
    #[test]
    fn any_bytes_get_an_answer_or_a_reason(body in proptest::collection::vec(any::<u8>(), 0..256)) {
        let r = Reviewer::default();
        for webhook in [Webhook::Validate, Webhook::Mutate] {
            let _ = r.review(webhook, &body, &Context::default());
        }
    }

    #[test]
    fn any_object_gets_a_v1_answer(object in proptest::collection::btree_map("[a-z]{1,6}", any::<i64>(), 0..4), op in "(CREATE|UPDATE|DELETE|X)") {
        let object = json!({"spec": object, "metadata": {"name": 5}});
        let req = request(&op, object.clone(), Some(object));
        let body = serde_json::to_vec(&req).unwrap_or_default();
        for webhook in [Webhook::Validate, Webhook::Mutate] {
            let reviewed = Reviewer::default().review(webhook, &body, &Context::default());
            prop_assert!(reviewed.is_ok());
        }
    }
}

#[test]
fn delegation_sets_managed_by_on_create_when_configured() {
    let mut named = job(
        json!({"podReplacementPolicy": "Failed", "podFailurePolicy": {"rules": [
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [2]}}]}}),
    );
    named["metadata"]["annotations"] =
        json!({"jobwarden.io/pod-failure-policy-rule-names": "[\"ExitCode2\"]"});
    let plain = job(json!({"podReplacementPolicy": "Failed"}));
    let by_rules = Reviewer::new(Policy {
        delegate: crate::policy::Delegation {
            jobs_naming_rules: true,
            ..Default::default()
        },
        ..Policy::default()
    });
    let by_namespace = Reviewer::new(Policy {
        delegate: crate::policy::Delegation {
            namespaces: NamespaceMatch {
                names: vec!["ns".into()],
                selector: None,
            },
            ..Default::default()
        },
        ..Policy::default()
    });
    let managed_by = |r: &Reviewer, object: &Value, op: &str| {
        let old = (op == "UPDATE").then(|| object.clone());
        let (resp, _) = review(r, Webhook::Mutate, &request(op, object.clone(), old));
        patched(&resp, object)["spec"]["managedBy"].clone()
    };
    let ours = json!("jobwarden.io/job-controller");
    assert_eq!(managed_by(&by_rules, &named, "CREATE"), ours);
    assert_eq!(managed_by(&by_rules, &plain, "CREATE"), Value::Null);
    assert_eq!(managed_by(&by_rules, &named, "UPDATE"), Value::Null);
    assert_eq!(managed_by(&by_namespace, &plain, "CREATE"), ours);
    assert_eq!(
        managed_by(&Reviewer::default(), &named, "CREATE"),
        Value::Null
    );
    let mut foreign = named.clone();
    foreign["spec"]["managedBy"] = json!("example.com/other");
    assert_eq!(
        managed_by(&by_rules, &foreign, "CREATE"),
        json!("example.com/other")
    );
}

#[test]
fn policy_problems_name_what_cannot_work() {
    assert_eq!(Policy::default().problems(), Vec::<String>::new());
    let policy: Policy = serde_json::from_value(json!({
        "controllerName": " ",
        "resume": {"serviceAccounts": ["no-slash", "ns/sa"]},
        "suspendOnCreate": {"selector": {"matchExpressions": [{"key": "tier", "operator": "In"}]}},
        "delegate": {"namespaces": {"selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}}
    }))
    .expect("the shape parses");
    assert_eq!(
        policy.problems(),
        [
            "controllerName must not be empty",
            "resume.serviceAccounts: \"no-slash\" must be written namespace/name",
            "suspendOnCreate.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
            "delegate.namespaces.selector.matchExpressions[0].operator: Invalid value: \"Near\": not a valid selector operator",
        ]
    );
    assert!(policy.needs_namespace_labels());
    assert!(!Policy::default().needs_namespace_labels());
}

#[test]
fn pod_timings_are_checked_and_warned_about() {
    let mut object = job(json!({"completions": 1}));
    object["metadata"]["annotations"] = json!({
        "jobwarden.io/pod-failure-backoff": "{\"initial\":\"1s\",\"max\":\"2m\"}",
        "jobwarden.io/pod-start-timeout": "30s",
    });
    let answer = |object: &Value| {
        review(
            &Reviewer::default(),
            Webhook::Validate,
            &request("CREATE", object.clone(), None),
        )
        .0
    };
    let resp = answer(&object);
    assert_eq!(resp["allowed"], true, "{resp}");
    assert_eq!(
        resp["warnings"],
        json!([
            "metadata.annotations[jobwarden.io/pod-failure-backoff]: takes effect only for Jobs with spec.managedBy \"jobwarden.io/job-controller\"; the built-in Job controller ignores it",
            "metadata.annotations[jobwarden.io/pod-start-timeout]: takes effect only for Jobs with spec.managedBy \"jobwarden.io/job-controller\"; the built-in Job controller ignores it",
        ])
    );
    object["spec"]["managedBy"] = json!("jobwarden.io/job-controller");
    assert_eq!(answer(&object).get("warnings"), None);
    object["metadata"]["annotations"]["jobwarden.io/pod-failure-backoff"] =
        json!("{\"initial\":\"1h\"}");
    let resp = answer(&object);
    assert_eq!(resp["allowed"], false);
    assert!(
        resp["status"]["message"].as_str().is_some_and(|m| m.contains(
            "metadata.annotations[jobwarden.io/pod-failure-backoff].initial: Invalid value: \"1h0m0s\": must be less than or equal to 10m0s"
        )),
        "{resp}"
    );
}

/// A policy whose dispatcher has a worker, as the policy file writes it.
fn dispatching(delegate: Value) -> Policy {
    let policy: Policy = serde_json::from_value(json!({
        "dispatch": {"workers": [{"name": "east", "kubeconfigSecret": "jobwarden-worker-east"}]},
        "delegate": delegate,
    }))
    .expect("a policy");
    assert_eq!(policy.problems(), Vec::<String>::new());
    policy
}

#[test]
fn dispatch_namespaces_send_new_jobs_to_the_dispatcher_before_anything_else() {
    let mut named = job(
        json!({"podReplacementPolicy": "Failed", "podFailurePolicy": {"rules": [
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [2]}}]}}),
    );
    named["metadata"]["annotations"] =
        json!({"jobwarden.io/pod-failure-policy-rule-names": "[\"ExitCode2\"]"});
    let plain = job(json!({"podReplacementPolicy": "Failed"}));
    let everything = Reviewer::new(dispatching(json!({
        "jobsNamingRules": true,
        "namespaces": {"names": ["ns", "elsewhere"]},
        "dispatchNamespaces": {"names": ["ns"]},
    })));
    let answer = |r: &Reviewer, object: &Value, op: &str, ns: &str| {
        let old = (op == "UPDATE").then(|| object.clone());
        let mut req = request(op, object.clone(), old);
        req["request"]["namespace"] = json!(ns);
        let (resp, _) = review(r, Webhook::Mutate, &req);
        (
            patched(&resp, object)["spec"]["managedBy"].clone(),
            resp.get("warnings").cloned().unwrap_or(Value::Null),
        )
    };
    let dispatcher = json!("jobwarden.io/dispatcher");
    for object in [&plain, &named] {
        assert_eq!(
            answer(&everything, object, "CREATE", "ns"),
            (
                dispatcher.clone(),
                json!([
                    "spec.managedBy: set to \"jobwarden.io/dispatcher\" by jobwarden: Jobs in namespace \"ns\" are sent to worker clusters by jobwarden's dispatcher"
                ])
            )
        );
    }
    // Elsewhere the other two settings decide as before.
    assert_eq!(
        answer(&everything, &plain, "CREATE", "elsewhere").0,
        json!("jobwarden.io/job-controller")
    );
    assert_eq!(
        answer(&everything, &named, "CREATE", "other").0,
        json!("jobwarden.io/job-controller")
    );
    assert_eq!(
        answer(&everything, &plain, "CREATE", "other"),
        (Value::Null, Value::Null)
    );
    // Only new Jobs, and only those that pick no controller.
    assert_eq!(answer(&everything, &plain, "UPDATE", "ns").0, Value::Null);
    let mut chosen = plain.clone();
    chosen["spec"]["managedBy"] = json!("example.com/mine");
    assert_eq!(
        answer(&everything, &chosen, "CREATE", "ns"),
        (json!("example.com/mine"), Value::Null)
    );

    // By the namespace's labels, when the server knows them.
    let selected = Reviewer::new(dispatching(json!({
        "dispatchNamespaces": {"selector": {"matchLabels": {"jobwarden.io/dispatch": "true"}}},
    })));
    let body = serde_json::to_vec(&request("CREATE", plain.clone(), None)).unwrap_or_default();
    let labels = |ns: &str| {
        (ns == "ns")
            .then(|| BTreeMap::from([("jobwarden.io/dispatch".to_owned(), "true".to_owned())]))
    };
    for (lookup, want) in [
        (None, Value::Null),
        (Some(&labels as NamespaceLookup<'_>), dispatcher.clone()),
    ] {
        let ctx = Context {
            namespace_labels: lookup,
        };
        let reviewed = selected
            .review(Webhook::Mutate, &body, &ctx)
            .expect("answerable");
        let out: Value = serde_json::from_slice(&reviewed.body).expect("JSON");
        assert_eq!(patched(&out["response"], &plain)["spec"]["managedBy"], want);
    }
}

#[test]
fn the_dispatcher_s_name_is_known_where_jobwarden_s_is() {
    let dispatched = job(json!({"managedBy": "jobwarden.io/dispatcher"}));
    let answer = |policy: Policy| {
        review(
            &Reviewer::new(policy),
            Webhook::Validate,
            &request("CREATE", dispatched.clone(), None),
        )
        .0
    };
    // Without workers the dispatcher does not run: a Job naming it waits for nobody.
    let resp = answer(Policy::default());
    assert_eq!(resp["allowed"], true);
    assert!(
        resp["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("neither will run this Job")),
        "{resp}"
    );
    assert_eq!(answer(dispatching(json!({}))).get("warnings"), None);

    let allow_list = |mut policy: Policy| {
        policy.allowed_managed_by = vec!["example.com/batch".into()];
        policy
    };
    assert_eq!(answer(allow_list(dispatching(json!({}))))["allowed"], true);
    let resp = answer(allow_list(Policy::default()));
    assert_eq!(resp["status"]["code"], 403, "{resp}");
    assert_eq!(
        resp["status"]["message"],
        "jobs.batch \"j\" is forbidden: spec.managedBy \"jobwarden.io/dispatcher\" is not one of the controllers this cluster allows: \"jobwarden.io/job-controller\", \"kubernetes.io/job-controller\", \"example.com/batch\""
    );
}

#[test]
fn dispatcher_annotations_are_checked_and_warned_about() {
    let reviewer = Reviewer::new(dispatching(json!({})));
    let mut object = job(json!({}));
    object["metadata"]["annotations"] = json!({
        "jobwarden.io/workers": "east, west",
        "jobwarden.io/on-worker-lost": "Fail",
    });
    let answer = |object: &Value| {
        review(
            &reviewer,
            Webhook::Validate,
            &request("CREATE", object.clone(), None),
        )
        .0
    };
    let resp = answer(&object);
    assert_eq!(resp["allowed"], true, "{resp}");
    assert_eq!(
        resp["warnings"],
        json!([
            "metadata.annotations[jobwarden.io/workers]: takes effect only for Jobs with spec.managedBy \"jobwarden.io/dispatcher\"; no other controller reads it",
            "metadata.annotations[jobwarden.io/on-worker-lost]: takes effect only for Jobs with spec.managedBy \"jobwarden.io/dispatcher\"; no other controller reads it",
        ])
    );
    object["spec"]["managedBy"] = json!("jobwarden.io/dispatcher");
    assert_eq!(answer(&object).get("warnings"), None);

    object["metadata"]["annotations"]["jobwarden.io/workers"] = json!("east,East,east");
    object["metadata"]["annotations"]["jobwarden.io/on-worker-lost"] = json!("Retry");
    let resp = answer(&object);
    assert_eq!(resp["status"]["code"], 422, "{resp}");
    let causes: Vec<(&str, &str)> = resp["status"]["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["field"].as_str().unwrap_or(""),
                c["reason"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        causes,
        [
            (
                "metadata.annotations[jobwarden.io/workers][1]",
                "FieldValueInvalid"
            ),
            (
                "metadata.annotations[jobwarden.io/workers][2]",
                "FieldValueDuplicate"
            ),
            (
                "metadata.annotations[jobwarden.io/on-worker-lost]",
                "FieldValueNotSupported"
            ),
        ]
    );
}

/// The dispatcher writes `jobwarden.io/worker` and `jobwarden.io/worker-lost-since` with merge
/// patches of the user's Job: the API server sends the webhook the Job before and after, the
/// same but for the annotation. Each is allowed, with no warning, whatever the policy.
#[test]
fn the_dispatcher_s_own_annotation_writes_are_allowed() {
    let mut running = job(json!({"managedBy": "jobwarden.io/dispatcher"}));
    running["metadata"]["annotations"] = json!({"jobwarden.io/workers": "east,west"});
    running["status"] = json!({"startTime": "2026-11-27T16:00:00Z", "active": 1, "ready": 1});
    let with = |pairs: &[(&str, &str)]| {
        let mut object = running.clone();
        for (key, value) in pairs {
            object["metadata"]["annotations"][*key] = json!(value);
        }
        object
    };
    let placed = with(&[("jobwarden.io/worker", "east")]);
    let lost = with(&[
        ("jobwarden.io/worker", "east"),
        ("jobwarden.io/worker-lost-since", "2026-11-27T16:13:32Z"),
    ]);
    let moved = with(&[("jobwarden.io/worker", "west")]);
    let mut strict = dispatching(json!({"dispatchNamespaces": {"names": ["ns"]}}));
    strict.allowed_managed_by = vec!["example.com/batch".into()];
    strict.resume.groups = vec!["batch-admins".into()];
    for reviewer in [Reviewer::new(dispatching(json!({}))), Reviewer::new(strict)] {
        for (what, old, new) in [
            ("the record added", &running, &placed),
            ("the lost mark added", &placed, &lost),
            ("the lost mark removed", &lost, &placed),
            ("moved: the record changed, the mark removed", &lost, &moved),
        ] {
            let mut req = request("UPDATE", new.clone(), Some(old.clone()));
            req["request"]["userInfo"] = json!({
                "username": "system:serviceaccount:jobwarden-system:jobwarden",
                "groups": ["system:serviceaccounts", "system:authenticated"],
            });
            let (resp, verdict) = review(&reviewer, Webhook::Validate, &req);
            assert_eq!(verdict, Verdict::Allowed, "{what}: {resp}");
            assert_eq!(resp.get("warnings"), None, "{what}");
        }
    }
}
