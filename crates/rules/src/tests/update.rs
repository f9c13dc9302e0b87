//! Spec updates: what upstream holds immutable, what it lets change (and when), and
//! jobwarden's own update rules.

use serde_json::{Value, json};

use super::builder::exit_rule;
use super::{JobBuilder, update_errors};

fn b() -> JobBuilder {
    JobBuilder::new()
}

fn check(cases: Vec<(&str, JobBuilder, JobBuilder, Vec<&str>)>) {
    for (name, old, new, want) in cases {
        let got = update_errors(&new.build(), &old.build());
        // Upstream validates the spec twice on update; the message de-duplicates, so compare
        // the distinct errors in order.
        let mut distinct: Vec<String> = Vec::new();
        for e in got {
            if !distinct.contains(&e) {
                distinct.push(e);
            }
        }
        assert_eq!(distinct, want, "case: {name}");
    }
}

/// A Job whose template may change while suspended (1.36): suspended, never started, no pods.
fn suspended() -> JobBuilder {
    b().spec("suspend", json!(true))
}

#[test]
fn mutable_and_immutable_fields() {
    let sp = json!([{"succeededCount": 2}]);
    check(vec![
        (
            "mutable fields",
            b().spec("parallelism", json!(5))
                .spec("activeDeadlineSeconds", json!(2))
                .spec("ttlSecondsAfterFinished", json!(1)),
            b().spec("parallelism", json!(2))
                .spec("activeDeadlineSeconds", json!(3))
                .spec("ttlSecondsAfterFinished", json!(2))
                .spec("manualSelector", json!(true)),
            vec![],
        ),
        (
            "NonIndexed completions",
            b(),
            b().spec("completions", json!(4)),
            vec!["spec.completions: Invalid value: 4: field is immutable"],
        ),
        (
            "elastic Indexed in tandem",
            b().indexed(1),
            b().indexed(2).spec("parallelism", json!(2)),
            vec![],
        ),
        (
            "elastic Indexed out of tandem",
            b().indexed(1),
            b().indexed(2).spec("parallelism", json!(3)),
            vec![
                "spec.completions: Invalid value: 2: can only be modified in tandem with spec.parallelism",
            ],
        ),
        (
            "Indexed completions removed",
            b().indexed(1),
            b().indexed(1).spec("completions", Value::Null),
            vec!["spec.completions: Required value: when completion mode is Indexed"],
        ),
        (
            "Indexed parallelism alone",
            b().indexed(2).spec("parallelism", json!(2)),
            b().indexed(2).spec("parallelism", json!(3)),
            vec![],
        ),
        (
            "successPolicy added",
            b().indexed(3),
            b().indexed(3).success_rules(sp.clone()),
            vec![
                "spec.successPolicy: Invalid value: {\"Rules\":[{\"SucceededIndexes\":null,\"SucceededCount\":2}]}: field is immutable",
            ],
        ),
        (
            "successPolicy removed",
            b().indexed(3).success_rules(sp),
            b().indexed(3),
            vec!["spec.successPolicy: Invalid value: null: field is immutable"],
        ),
        (
            "podFailurePolicy added",
            b().restart_never()
                .spec("podReplacementPolicy", json!("Failed")),
            b().pfp_rules(json!([exit_rule("FailJob", "In", json!([1, 2]))])),
            vec![
                "spec.podFailurePolicy: Invalid value: {\"Rules\":[{\"Action\":\"FailJob\",\"OnExitCodes\":{\"ContainerName\":null,\"Operator\":\"In\",\"Values\":[1,2]},\"OnPodConditions\":null}]}: field is immutable",
            ],
        ),
        (
            "completionMode",
            b().indexed(1),
            b().spec("completionMode", json!("NonIndexed")),
            vec!["spec.completionMode: Invalid value: \"NonIndexed\": field is immutable"],
        ),
        (
            "backoffLimitPerIndex set",
            b().indexed(3),
            b().indexed(3).spec("backoffLimitPerIndex", json!(1)),
            vec!["spec.backoffLimitPerIndex: Invalid value: 1: field is immutable"],
        ),
        (
            "maxFailedIndexes set",
            b().indexed(3).spec("backoffLimitPerIndex", json!(1)),
            b().indexed(3)
                .spec("backoffLimitPerIndex", json!(1))
                .spec("maxFailedIndexes", json!(2)),
            vec![],
        ),
        (
            "managedBy set",
            b(),
            b().spec("managedBy", json!("example.com/custom-controller")),
            vec![
                "spec.managedBy: Invalid value: \"example.com/custom-controller\": field is immutable",
            ],
        ),
        (
            "managedBy unset",
            b().spec("managedBy", json!("example.com/a")),
            b(),
            vec!["spec.managedBy: Invalid value: null: field is immutable"],
        ),
        (
            "selector",
            b(),
            b().set("/spec/selector/matchLabels/job-name", json!("myjob")),
            vec![
                "spec.selector: Invalid value: {\"matchLabels\":{\"batch.kubernetes.io/controller-uid\":\"11111111-2222-3333-4444-555555555555\",\"job-name\":\"myjob\"}}: field is immutable",
            ],
        ),
        (
            "podReplacementPolicy is mutable",
            b(),
            b().spec("podReplacementPolicy", json!("Failed")),
            vec![],
        ),
        (
            "metadata labels",
            b(),
            b().set("/metadata/labels", json!({"a": "b"})),
            vec![],
        ),
        (
            "spec re-validated",
            b(),
            b().spec("parallelism", json!(-2)),
            vec!["spec.parallelism: Invalid value: -2: must be greater than or equal to 0"],
        ),
    ]);
}

#[test]
fn pod_template_while_running_or_suspended() {
    let node_selector = |j: JobBuilder| {
        j.set(
            "/spec/template/spec/nodeSelector",
            json!({"disktype": "ssd"}),
        )
    };
    let resources = |j: JobBuilder| {
        j.set(
            "/spec/template/spec/containers/0/resources",
            json!({"requests": {"cpu": "1"}}),
        )
    };
    let image = |j: JobBuilder| j.set("/spec/template/spec/containers/0/image", json!("busybox:2"));
    let immutable_template = |new: &JobBuilder| {
        let t = new.clone().build()["spec"]["template"].clone();
        let meta = t["metadata"].as_object().cloned().unwrap_or_default();
        let mut parts: Vec<String> = meta
            .iter()
            .map(|(k, v)| {
                format!(
                    "{}:{}",
                    serde_json::to_string(k).unwrap_or_default(),
                    crate::go_json::value(v)
                )
            })
            .collect();
        parts.push(format!("\"Spec\":{}", crate::go_json::value(&t["spec"])));
        format!(
            "spec.template: Invalid value: {{{}}}: field is immutable",
            parts.join(",")
        )
    };
    let started = |j: JobBuilder| j.status("startTime", json!("2026-01-01T00:00:00Z"));
    let running_change = node_selector(b());
    let running_want = immutable_template(&running_change);
    let active_change = resources(suspended().status("active", json!(1)));
    let active_want = immutable_template(&active_change);
    let no_condition_change = node_selector(started(suspended()));
    let no_condition_want = immutable_template(&no_condition_change);
    let resuming_change = resources(b().conditions(&["Suspended"]));
    let resuming_want = immutable_template(&resuming_change);
    let image_change = image(suspended());
    let image_want = format!(
        "spec.template.spec: Invalid value: {}: field is immutable",
        crate::go_json::value(&image_change.clone().build()["spec"]["template"]["spec"])
    );
    check(vec![
        (
            "running Job, nodeSelector",
            b(),
            running_change,
            vec![&running_want],
        ),
        (
            "suspended, never started: nodeSelector",
            suspended(),
            node_selector(suspended()),
            vec![],
        ),
        (
            "suspended, never started: labels and tolerations",
            suspended(),
            suspended()
                .set("/spec/template/metadata/labels/extra", json!("x"))
                .set(
                    "/spec/template/spec/tolerations",
                    json!([{"key": "k", "operator": "Exists"}]),
                ),
            vec![],
        ),
        (
            "suspended after running with Suspended=True: resources",
            started(suspended()).conditions(&["Suspended"]),
            resources(started(suspended()).conditions(&["Suspended"])),
            vec![],
        ),
        (
            "started, no Suspended condition: nodeSelector",
            started(suspended()),
            no_condition_change,
            vec![&no_condition_want],
        ),
        (
            "suspended with an active pod: resources",
            suspended().status("active", json!(1)),
            active_change,
            vec![&active_want],
        ),
        (
            "resuming: resources",
            b().conditions(&["Suspended"]),
            resuming_change,
            vec![&resuming_want],
        ),
        (
            "suspended: image",
            suspended(),
            image_change,
            vec![&image_want],
        ),
        (
            "resume and change nodeSelector at once",
            suspended(),
            node_selector(b()),
            vec![],
        ),
    ]);
}

#[test]
fn jobwarden_update_rules() {
    let names = |n: &str| {
        b().pfp_rules(json!([
            exit_rule("FailJob", "In", json!([10])),
            exit_rule("FailJob", "In", json!([11]))
        ]))
        .set(
            "/metadata/annotations",
            json!({"jobwarden.io/pod-failure-policy-rule-names": n}),
        )
    };
    let settings = |reasons: Option<&str>, when: Option<&str>| {
        let mut annotations = json!({});
        if let Some(r) = reasons {
            annotations["jobwarden.io/success-policy-rule-reasons"] = json!(r);
        }
        if let Some(w) = when {
            annotations["jobwarden.io/success-policy-when-achieved"] = json!(w);
        }
        b().indexed(4)
            .success_rules(json!([{"succeededIndexes": "0"}]))
            .set("/metadata/annotations", annotations)
    };
    check(vec![
        (
            "rule names changed",
            names(r#"["a", "b"]"#),
            names(r#"["a", "c"]"#),
            vec![
                "metadata.annotations[jobwarden.io/pod-failure-policy-rule-names]: Invalid value: \"[\\\"a\\\", \\\"c\\\"]\": field is immutable",
            ],
        ),
        (
            "rule names unchanged",
            names(r#"["a", "b"]"#),
            names(r#"["a", "b"]"#),
            vec![],
        ),
        (
            "success rule reasons added",
            settings(None, None),
            settings(Some(r#"["LeaderSucceeded"]"#), None),
            vec![
                "metadata.annotations[jobwarden.io/success-policy-rule-reasons]: Invalid value: \"[\\\"LeaderSucceeded\\\"]\": field is immutable",
            ],
        ),
        (
            "whenCriterionAchieved removed",
            settings(None, Some(r#"["Continue"]"#)),
            settings(None, None),
            vec![
                "metadata.annotations[jobwarden.io/success-policy-when-achieved]: Invalid value: null: field is immutable",
            ],
        ),
        (
            "success rule settings unchanged",
            settings(Some(r#"["LeaderSucceeded"]"#), Some(r#"["Continue"]"#)),
            settings(Some(r#"["LeaderSucceeded"]"#), Some(r#"["Continue"]"#)),
            vec![],
        ),
        (
            "suspend a Complete Job",
            b().conditions(&["SuccessCriteriaMet", "Complete"]),
            b().conditions(&["SuccessCriteriaMet", "Complete"])
                .spec("suspend", json!(true)),
            vec![
                "spec.suspend: Forbidden: cannot suspend a finished Job (it has the condition Complete=True)",
            ],
        ),
        (
            "suspend a Failed Job",
            b().conditions(&["FailureTarget", "Failed"]),
            b().conditions(&["FailureTarget", "Failed"])
                .spec("suspend", json!(true)),
            vec![
                "spec.suspend: Forbidden: cannot suspend a finished Job (it has the condition Failed=True)",
            ],
        ),
        (
            "suspend a running Job",
            b(),
            b().spec("suspend", json!(true)),
            vec![],
        ),
        ("resume a suspended Job", suspended(), b(), vec![]),
    ]);
}
