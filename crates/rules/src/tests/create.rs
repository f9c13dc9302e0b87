//! Create-time validation, case by case from upstream's `validation_test.go` and
//! UPSTREAM-RULES.md §9, with both sides of every limit.

use serde_json::{Value, json};

use super::builder::exit_rule;
use super::{JobBuilder, create_errors};

fn check(cases: Vec<(&str, JobBuilder, Vec<&str>)>) {
    for (name, job, want) in cases {
        assert_eq!(create_errors(&job.build()), want, "case: {name}");
    }
}

const LABELS_MISMATCH: &str = "spec.template.metadata.labels: Invalid value: {\"batch.kubernetes.io/controller-uid\":\"11111111-2222-3333-4444-555555555555\",\"batch.kubernetes.io/job-name\":\"myjob\",\"controller-uid\":\"11111111-2222-3333-4444-555555555555\",\"job-name\":\"myjob\"}: `selector` does not match template `labels`";

fn b() -> JobBuilder {
    JobBuilder::new()
}

#[test]
fn counts_and_completion_mode() {
    check(vec![
        ("valid", b(), vec![]),
        (
            "negative counts",
            b().spec("parallelism", json!(-1))
                .spec("completions", json!(-1))
                .spec("activeDeadlineSeconds", json!(-1))
                .spec("backoffLimit", json!(-1))
                .spec("ttlSecondsAfterFinished", json!(-1)),
            vec![
                "spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
                "spec.completions: Invalid value: -1: must be greater than or equal to 0",
                "spec.activeDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
                "spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0",
                "spec.ttlSecondsAfterFinished: Invalid value: -1: must be greater than or equal to 0",
            ],
        ),
        (
            "zero counts",
            b().spec("parallelism", json!(0))
                .spec("completions", json!(0)),
            vec![],
        ),
        (
            "completion mode Foo",
            b().spec("completionMode", json!("Foo")),
            vec![
                "spec.completionMode: Unsupported value: \"Foo\": supported values: \"NonIndexed\", \"Indexed\"",
            ],
        ),
        (
            "indexed without completions",
            b().indexed(1).spec("completions", Value::Null),
            vec!["spec.completions: Required value: when completion mode is Indexed"],
        ),
        (
            "indexed parallelism 100000",
            b().indexed(2).spec("parallelism", json!(100_000)),
            vec![],
        ),
        (
            "indexed parallelism 100001",
            b().indexed(2).spec("parallelism", json!(100_001)),
            vec![
                "spec.parallelism: Invalid value: 100001: must be less than or equal to 100000 when completion mode is Indexed",
            ],
        ),
        (
            "backoffLimitPerIndex on NonIndexed",
            b().spec("backoffLimitPerIndex", json!(1)),
            vec!["spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode"],
        ),
        (
            "maxFailedIndexes without backoffLimitPerIndex",
            b().indexed(3).spec("maxFailedIndexes", json!(1)),
            vec!["spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified"],
        ),
        (
            "maxFailedIndexes equal to completions",
            b().indexed(10)
                .spec("backoffLimitPerIndex", json!(1))
                .spec("maxFailedIndexes", json!(10)),
            vec![],
        ),
        (
            "maxFailedIndexes above completions",
            b().indexed(10)
                .spec("backoffLimitPerIndex", json!(1))
                .spec("maxFailedIndexes", json!(11)),
            vec![
                "spec.maxFailedIndexes: Invalid value: 11: must be less than or equal to completions",
            ],
        ),
        (
            "completions 100001 needs maxFailedIndexes",
            b().indexed(100_001).spec("backoffLimitPerIndex", json!(1)),
            vec![
                "spec.maxFailedIndexes: Required value: must be specified when completions is above 100000",
            ],
        ),
        (
            "completions 100001 with parallelism 10001",
            b().indexed(100_001)
                .spec("parallelism", json!(10_001))
                .spec("backoffLimitPerIndex", json!(1))
                .spec("maxFailedIndexes", json!(1)),
            vec![
                "spec.parallelism: Invalid value: 10001: must be less than or equal to 10000 when completions are above 100000 and used with backoff limit per index",
            ],
        ),
        (
            "completions 100001 with maxFailedIndexes 100001",
            b().indexed(100_001)
                .spec("backoffLimitPerIndex", json!(1))
                .spec("maxFailedIndexes", json!(100_001)),
            vec![
                "spec.maxFailedIndexes: Invalid value: 100001: must be less than or equal to 100000",
                "spec.maxFailedIndexes: Invalid value: 100001: must be less than or equal to 10000 when completions are above 100000 and used with backoff limit per index",
            ],
        ),
        (
            "completions 1e9, parallelism and maxFailedIndexes 10000",
            b().indexed(1_000_000_000)
                .spec("parallelism", json!(10_000))
                .spec("backoffLimitPerIndex", json!(1))
                .spec("maxFailedIndexes", json!(10_000)),
            vec![],
        ),
    ]);
}

#[test]
fn metadata_selector_and_restart_policy() {
    check(vec![
        (
            "dotted name is fine for NonIndexed",
            b().set("/metadata/name", json!("a.b"))
                .set("/spec/template/metadata/labels/job-name", json!("a.b"))
                .set(
                    "/spec/template/metadata/labels/batch.kubernetes.io~1job-name",
                    json!("a.b"),
                ),
            vec![],
        ),
        (
            "restartPolicy Always",
            b().set("/spec/template/spec/restartPolicy", json!("Always")),
            vec![
                "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"",
            ],
        ),
        (
            "restartPolicy empty",
            b().set("/spec/template/spec/restartPolicy", Value::Null),
            vec![
                "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"",
            ],
        ),
        (
            "selector that does not select the template",
            b().spec("manualSelector", json!(true))
                .spec("selector", json!({"matchLabels": {"app": "x"}})),
            vec![LABELS_MISMATCH],
        ),
        (
            "no selector",
            b().spec("selector", Value::Null),
            vec!["spec.selector: Required value", LABELS_MISMATCH],
        ),
        (
            "bad selector operator",
            b().spec("manualSelector", json!(true)).spec(
                "selector",
                json!({"matchExpressions": [{"key": "job-name", "operator": "Near"}]}),
            ),
            vec![
                "spec.selector.matchExpressions[0].operator: Invalid value: \"Near\": not a valid selector operator",
            ],
        ),
        (
            "generated label missing",
            b().set("/spec/template/metadata/labels/job-name", Value::Null),
            vec!["spec.template.metadata.labels[job-name]: Required value: must be 'myjob'"],
        ),
    ]);
    // The hostname rule itself, with a name whose labels match.
    for (len, completions, ok) in [
        (61, 10, true),
        (62, 10, false),
        (60, 100, true),
        (61, 100, false),
    ] {
        let name = "x".repeat(len);
        let job = b()
            .set("/metadata/name", json!(name))
            .set("/spec/template/metadata/labels/job-name", json!(name))
            .set(
                "/spec/template/metadata/labels/batch.kubernetes.io~1job-name",
                json!(name),
            )
            .indexed(completions)
            .build();
        let errs = create_errors(&job);
        let want = format!(
            "metadata.name: Invalid value: \"{name}\": will not able to create pod with invalid DNS label: {name}-{}",
            completions - 1
        );
        assert_eq!(errs.is_empty(), ok, "{len}/{completions}: {errs:?}");
        if !ok {
            assert_eq!(errs, vec![want]);
        }
    }
}

#[test]
fn success_policy() {
    let indexes_64k: String = {
        // "0,2,4,..." up to exactly 65536 bytes, with completions large enough.
        let mut s = String::new();
        let mut i = 0u32;
        while s.len() < 65_536 {
            let next = if s.is_empty() {
                i.to_string()
            } else {
                format!(",{i}")
            };
            if s.len() + next.len() > 65_536 {
                break;
            }
            s.push_str(&next);
            i += 2;
        }
        while s.len() < 65_536 {
            s.insert(0, '0');
        }
        s
    };
    assert_eq!(indexes_64k.len(), 65_536);
    let rules20: Vec<Value> = (0..20).map(|_| json!({"succeededCount": 5})).collect();
    let rules21: Vec<Value> = (0..21).map(|_| json!({"succeededCount": 5})).collect();
    check(vec![
        (
            "mixed valid rules",
            b().indexed(10).success_rules(json!([{"succeededCount": 1, "succeededIndexes": "0,2,4"}, {"succeededIndexes": "1,3,5-9"}])),
            vec![],
        ),
        (
            "NonIndexed",
            b().success_rules(json!([])),
            vec!["spec.successPolicy: Invalid value: {\"Rules\":[]}: requires indexed completion mode"],
        ),
        (
            "no rules",
            b().indexed(5).spec("successPolicy", json!({})),
            vec!["spec.successPolicy.rules: Required value: at least one rules must be specified when the successPolicy is specified"],
        ),
        (
            "empty rule",
            b().indexed(5).success_rules(json!([{}])),
            vec!["spec.successPolicy.rules[0]: Required value: at least one of succeededCount or succeededIndexes must be specified"],
        ),
        ("20 rules", b().indexed(5).success_rules(json!(rules20)), vec![]),
        (
            "21 rules",
            b().indexed(5).success_rules(json!(rules21)),
            vec!["spec.successPolicy.rules: Too many: 21: must have at most 20 items"],
        ),
        (
            "64 KiB of indexes",
            b().indexed(1_000_000).success_rules(json!([{"succeededIndexes": indexes_64k}])),
            vec![],
        ),
        (
            "64 KiB + 1 of indexes",
            b().indexed(1_000_000).success_rules(json!([{"succeededIndexes": format!("0{indexes_64k}")}])),
            vec!["spec.successPolicy.rules[0].succeededIndexes: Too long: may not be more than 65536 bytes"],
        ),
        (
            "unparsable indexes",
            b().indexed(5).success_rules(json!([{"succeededIndexes": "invalid-format"}])),
            vec!["spec.successPolicy.rules[0].succeededIndexes: Invalid value: \"invalid-format\": error parsing succeededIndexes: cannot convert string to integer for index: \"invalid\""],
        ),
        (
            "index too large",
            b().indexed(5).success_rules(json!([{"succeededIndexes": "5"}])),
            vec!["spec.successPolicy.rules[0].succeededIndexes: Invalid value: \"5\": error parsing succeededIndexes: too large index: \"5\""],
        ),
        ("succeededCount 0", b().indexed(5).success_rules(json!([{"succeededCount": 0}])), vec![]),
        (
            "succeededCount -1",
            b().indexed(5).success_rules(json!([{"succeededCount": -1}])),
            vec!["spec.successPolicy.rules[0].succeededCount: Invalid value: -1: must be greater than or equal to 0"],
        ),
        ("succeededCount = completions", b().indexed(5).success_rules(json!([{"succeededCount": 5}])), vec![]),
        (
            "succeededCount above completions",
            b().indexed(5).success_rules(json!([{"succeededCount": 6}])),
            vec!["spec.successPolicy.rules[0].succeededCount: Invalid value: 6: must be less than or equal to 5 (the number of specified completions)"],
        ),
        (
            "succeededCount above the indexes named",
            b().indexed(5).success_rules(json!([{"succeededCount": 4, "succeededIndexes": "0-2"}])),
            vec!["spec.successPolicy.rules[0].succeededCount: Invalid value: 4: must be less than or equal to 3 (the number of indexes in the specified succeededIndexes field)"],
        ),
        (
            "parse error and count",
            b().indexed(5).success_rules(json!([{"succeededCount": 1, "succeededIndexes": "x"}])),
            vec![
                "spec.successPolicy.rules[0].succeededIndexes: Invalid value: \"x\": error parsing succeededIndexes: cannot convert string to integer for index: \"x\"",
                "spec.successPolicy.rules[0].succeededCount: Invalid value: 1: must be less than or equal to 0 (the number of indexes in the specified succeededIndexes field)",
            ],
        ),
        (
            "no completions: upstream panics, jobwarden reports completions",
            b().indexed(5).spec("completions", Value::Null).spec("parallelism", json!(2)).success_rules(json!([{"succeededCount": 1}])),
            vec!["spec.completions: Required value: when completion mode is Indexed"],
        ),
    ]);
}

#[test]
fn pod_failure_policy() {
    let in_values = |n: i32| json!((1..=n).collect::<Vec<_>>());
    let condition_rule = |n: usize| {
        let patterns: Vec<Value> = (0..n)
            .map(|i| json!({"type": format!("C{i}"), "status": "True"}))
            .collect();
        json!({"action": "Ignore", "onPodConditions": patterns})
    };
    let rules21: Vec<Value> = (0..21)
        .map(|i| exit_rule("FailJob", "In", json!([i + 1])))
        .collect();
    check(vec![
        (
            "five valid rules",
            b().pfp_rules(json!([
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                {"action": "FailJob", "onPodConditions": [{"type": "CustomConditionType", "status": "False"}]},
                {"action": "Count", "onExitCodes": {"containerName": "abc", "operator": "In", "values": [1, 2, 3]}},
                {"action": "Ignore", "onExitCodes": {"containerName": "def", "operator": "In", "values": [4]}},
                {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [5, 6, 7]}}
            ])),
            vec![],
        ),
        ("negative exit codes", b().pfp_rules(json!([exit_rule("FailJob", "NotIn", json!([-1073741819, -1073741676, -1073741510]))])), vec![]),
        (
            "FailIndex without backoffLimitPerIndex",
            b().indexed(2).pfp_rules(json!([exit_rule("FailIndex", "In", json!([1]))])),
            vec!["spec.podFailurePolicy.rules[0].action: Invalid value: \"FailIndex\": requires the backoffLimitPerIndex to be set"],
        ),
        (
            "FailIndex with backoffLimitPerIndex",
            b().indexed(2).spec("backoffLimitPerIndex", json!(1)).pfp_rules(json!([exit_rule("FailIndex", "In", json!([1]))])),
            vec![],
        ),
        (
            "rule without matcher",
            b().pfp_rules(json!([{"action": "FailJob"}])),
            vec!["spec.podFailurePolicy.rules[0]: Invalid value: specifying one of OnExitCodes and OnPodConditions is required"],
        ),
        (
            "duplicates",
            b().pfp_rules(json!([exit_rule("FailJob", "In", json!([12, 13, 13, 13]))])),
            vec![
                "spec.podFailurePolicy.rules[0].onExitCodes.values[2]: Duplicate value: 13",
                "spec.podFailurePolicy.rules[0].onExitCodes.values[3]: Duplicate value: 13",
            ],
        ),
        ("255 values", b().pfp_rules(json!([exit_rule("FailJob", "In", in_values(255))])), vec![]),
        (
            "256 values",
            b().pfp_rules(json!([exit_rule("FailJob", "In", in_values(256))])),
            vec!["spec.podFailurePolicy.rules[0].onExitCodes.values: Too many: 256: must have at most 255 items"],
        ),
        (
            "21 rules",
            b().pfp_rules(json!(rules21)),
            vec!["spec.podFailurePolicy.rules: Too many: 21: must have at most 20 items"],
        ),
        ("20 pod conditions", b().pfp_rules(json!([condition_rule(20)])), vec![]),
        (
            "21 pod conditions",
            b().pfp_rules(json!([condition_rule(21)])),
            vec!["spec.podFailurePolicy.rules[0].onPodConditions: Too many: 21: must have at most 20 items"],
        ),
        (
            "unordered",
            b().pfp_rules(json!([exit_rule("FailJob", "In", json!([19, 11]))])),
            vec!["spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: [19,11]: must be ordered"],
        ),
        (
            "empty values",
            b().pfp_rules(json!([exit_rule("FailJob", "In", json!([]))])),
            vec!["spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: []: at least one value is required"],
        ),
        (
            "empty action",
            b().pfp_rules(json!([exit_rule("", "In", json!([1]))])),
            vec!["spec.podFailurePolicy.rules[0].action: Required value: valid values: [\"Count\" \"FailIndex\" \"FailJob\" \"Ignore\"]"],
        ),
        (
            "empty operator",
            b().pfp_rules(json!([exit_rule("FailJob", "", json!([1]))])),
            vec!["spec.podFailurePolicy.rules[0].onExitCodes.operator: Required value: valid values: [\"In\" \"NotIn\"]"],
        ),
        (
            "zero with In, unordered",
            b().pfp_rules(json!([exit_rule("Ignore", "In", json!([1, 0, 2]))])),
            vec![
                "spec.podFailurePolicy.rules[0].onExitCodes.values[1]: Invalid value: 0: must not be 0 for the In operator",
                "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: [1,0,2]: must be ordered",
            ],
        ),
        ("zero with NotIn", b().pfp_rules(json!([exit_rule("FailJob", "NotIn", json!([0]))])), vec![]),
        (
            "unknown container",
            b().pfp_rules(json!([exit_rule("FailJob", "In", json!([1])), {"action": "FailJob", "onExitCodes": {"containerName": "xyz", "operator": "In", "values": [1]}}])),
            vec!["spec.podFailurePolicy.rules[1].onExitCodes.containerName: Invalid value: \"xyz\": must be one of the container or initContainer names in the pod template"],
        ),
        (
            "unknown action, operator and status",
            b().pfp_rules(json!([
                exit_rule("UnknownAction", "UnknownOperator", json!([1])),
                {"action": "Ignore", "onPodConditions": [{"type": "Ready", "status": "UnknownStatus"}]}
            ])),
            vec![
                "spec.podFailurePolicy.rules[0].action: Unsupported value: \"UnknownAction\": supported values: \"Count\", \"FailIndex\", \"FailJob\", \"Ignore\"",
                "spec.podFailurePolicy.rules[0].onExitCodes.operator: Unsupported value: \"UnknownOperator\": supported values: \"In\", \"NotIn\"",
                "spec.podFailurePolicy.rules[1].onPodConditions[0].status: Unsupported value: \"UnknownStatus\": supported values: \"False\", \"True\", \"Unknown\"",
            ],
        ),
        (
            "both matchers",
            b().pfp_rules(json!([{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}, "onPodConditions": [{"type": "Ready", "status": "True"}]}])),
            vec!["spec.podFailurePolicy.rules[0]: Invalid value: specifying both OnExitCodes and OnPodConditions is not supported"],
        ),
        (
            "condition type with spaces",
            b().pfp_rules(json!([{"action": "Ignore", "onPodConditions": [{"type": "Invalid Condition Type", "status": "True"}]}])),
            vec!["spec.podFailurePolicy.rules[0].onPodConditions[0].type: Invalid value: \"Invalid Condition Type\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"],
        ),
        (
            "OnFailure with a policy",
            b().pfp_rules(json!([])).set("/spec/template/spec/restartPolicy", json!("OnFailure")),
            vec!["spec.template.spec.restartPolicy: Invalid value: \"OnFailure\": only \"Never\" is supported when podFailurePolicy is specified"],
        ),
    ]);
}

#[test]
fn pod_replacement_policy_and_managed_by() {
    check(vec![
        ("TerminatingOrFailed without a policy", b(), vec![]),
        (
            "Failed without a policy",
            b().spec("podReplacementPolicy", json!("Failed")),
            vec![],
        ),
        (
            "TerminatingOrFailed with a policy",
            b().pfp_rules(json!([exit_rule("FailJob", "In", json!([1]))]))
                .spec("podReplacementPolicy", json!("TerminatingOrFailed")),
            vec![
                "spec.podReplacementPolicy: Unsupported value: \"TerminatingOrFailed\": supported values: \"Failed\"",
            ],
        ),
        (
            "empty without a policy",
            b().spec("podReplacementPolicy", json!("")),
            vec![
                "spec.podReplacementPolicy: Unsupported value: \"\": supported values: \"Failed\", \"TerminatingOrFailed\"",
            ],
        ),
        (
            "managedBy of 63 bytes",
            b().spec(
                "managedBy",
                json!(format!("example.com/{}", "x".repeat(51))),
            ),
            vec![],
        ),
        (
            "managedBy of 64 bytes",
            b().spec(
                "managedBy",
                json!(format!("example.com/{}", "x".repeat(52))),
            ),
            vec!["spec.managedBy: Too long: may not be more than 63 bytes"],
        ),
        (
            "managedBy empty",
            b().spec("managedBy", json!("")),
            vec!["spec.managedBy: Required value"],
        ),
    ]);
}
