//! `jobwarden simulate` as users run it, the built binary with real files, stdin and flags:
//! the final statuses of the stories the reconcile loop's end-to-end tests hold a real cluster
//! to (KEP-3998 stories 1 and 2, KEP-4443's named rules, per-index back-off), exit statuses,
//! and inputs that are wrong or hostile, none of which may panic.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::run;
use crate::support::svg;
use run::{jobwarden, stderr, stdout};

use jobwarden_envtest::delegated_job;

/// A Job as the e2e tests build it, delegated to jobwarden, in a namespace of its own.
fn e2e_job(name: &str, spec: Value) -> Value {
    let mut job = delegated_job(name, "jobwarden.io/job-controller", spec);
    job["metadata"]["namespace"] = json!("e2e");
    job
}

/// Simulates `job` (given on stdin) with `args`, as JSON; returns the story.
fn story(job: &Value, args: &[&str]) -> Value {
    let mut all = vec!["simulate", "-", "-o", "json"];
    all.extend_from_slice(args);
    let out = jobwarden(&all, Some(job.to_string().as_bytes()));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

fn condition(story: &Value, type_: &str) -> Option<(String, String, String)> {
    story["finalStatus"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            let f = |k: &str| c[k].as_str().unwrap_or("").to_owned();
            (f("status"), f("reason"), f("message"))
        })
}

fn counter(story: &Value, k: &str) -> i64 {
    story["finalStatus"][k].as_i64().unwrap_or(0)
}

/// The e2e test's `success_policy_story`: `finish` lists the indexes whose pods succeed, the
/// others run until deleted; the Job meets its criteria by rule `rule` and ends `Complete`.
fn success_policy_story(rules: Value, finish: &str, rule: usize, succeeded: i64) {
    let job = e2e_job(
        "sim",
        json!({"completions": 10, "parallelism": 10, "completionMode": "Indexed",
               "successPolicy": {"rules": rules}}),
    );
    let pod = format!("{finish}=succeeded,after:1s");
    let s = story(&job, &["--pod", &pod, "--default", "running"]);
    let message = format!("Matched rules at index {rule}");
    let want = Some(("True".to_owned(), "SuccessPolicy".to_owned(), message));
    assert_eq!(condition(&s, "SuccessCriteriaMet"), want);
    assert_eq!(condition(&s, "Complete"), want);
    assert_eq!(condition(&s, "Failed"), None);
    assert_eq!(counter(&s, "active"), 0);
    assert_eq!(counter(&s, "succeeded"), succeeded);
    assert!(s["finalStatus"]["completionTime"].is_string());
    // The story ends once no pod holds the tracking finalizer, as the e2e test waits for.
    assert_eq!(s["end"]["finished"], true);
}

#[test]
fn kep_3998_story_1_ends_as_on_a_cluster() {
    success_policy_story(json!([{"succeededIndexes": "0"}]), "0", 0, 1);
}

#[test]
fn kep_3998_story_2_ends_as_on_a_cluster() {
    let rules = json!([
        {"succeededIndexes": "0", "succeededCount": 1},
        {"succeededIndexes": "1-9", "succeededCount": 5},
    ]);
    success_policy_story(rules, "1-5", 1, 5);
}

/// The e2e test's `named_rule_story`: the one pod exits with `code`; the Job fails with
/// `reason`, the message naming the pod and the rule's index.
fn named_rule_story(names: Value, code: i32, reason: &str, rule: usize) {
    let rule_for = |c: i32| {
        json!({"action": "FailJob",
               "onExitCodes": {"containerName": "main", "operator": "In", "values": [c]}})
    };
    let mut job = e2e_job(
        "sim",
        json!({"completions": 1, "parallelism": 1, "backoffLimit": 0,
               "podFailurePolicy": {"rules": [rule_for(2), rule_for(3)]}}),
    );
    job["metadata"]["annotations"] =
        json!({"jobwarden.io/pod-failure-policy-rule-names": names.to_string()});
    let s = story(&job, &["--pod", &format!("0=exit:{code}")]);
    let pod = s["steps"]
        .as_array()
        .and_then(|steps| steps.iter().find(|st| st["kind"] == "podCreated"))
        .and_then(|st| st["pod"]["name"].as_str())
        .expect("a pod was created")
        .to_owned();
    let message = format!(
        "Container main for pod e2e/{pod} failed with exit code {code} matching FailJob rule at index {rule}"
    );
    let want = Some(("True".to_owned(), reason.to_owned(), message));
    assert_eq!(condition(&s, "FailureTarget"), want);
    assert_eq!(condition(&s, "Failed"), want);
    assert_eq!(counter(&s, "failed"), 1);
    assert!(s["finalStatus"]["completionTime"].is_null());
}

#[test]
fn kep_4443_named_rules_end_as_on_a_cluster() {
    let names = json!(["ExitCode2", "ExitCode3"]);
    named_rule_story(names.clone(), 2, "PodFailurePolicy_ExitCode2", 0);
    named_rule_story(names, 3, "PodFailurePolicy_ExitCode3", 1);
    named_rule_story(json!(["ExitCode2", null]), 3, "PodFailurePolicy_1", 1);
}

#[test]
fn backoff_limit_per_index_ends_as_on_a_cluster() {
    let job = e2e_job(
        "idx",
        json!({"completions": 2, "parallelism": 2, "completionMode": "Indexed",
               "backoffLimitPerIndex": 0}),
    );
    let s = story(&job, &["--pod", "1=exit:1"]);
    assert_eq!(
        condition(&s, "Failed"),
        Some((
            "True".to_owned(),
            "FailedIndexes".to_owned(),
            "Job has failed indexes".to_owned()
        ))
    );
    assert_eq!(s["finalStatus"]["failedIndexes"], "1");
    assert_eq!(s["finalStatus"]["completedIndexes"], "0");
    assert_eq!(counter(&s, "failed"), 1);
}

#[test]
fn a_job_without_managed_by_is_told_with_upstreams_reason_and_says_so() {
    let out = jobwarden(
        &["simulate", "-", "--pod", "0=exit:2"],
        Some(
            std::fs::read_to_string("examples/pod-failure-policy-named-rules.yaml")
                .expect("the example reads")
                .replace("managedBy: jobwarden.io/job-controller", "managedBy: null")
                .as_bytes(),
        ),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with(
            "Job default/simulation: no spec.managedBy, so the built-in Job controller would run it."
        ),
        "{text}"
    );
    assert!(text.contains("condition Failed=True, reason PodFailurePolicy: Container main"));
    assert!(text.contains("rule 0 \"ExitCode2\" matched: FailJob"));
    assert!(
        text.contains("Failed after 10s, reason PodFailurePolicy.\n"),
        "{text}"
    );
}

fn temp_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("jobwarden-simulate-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    dir
}

#[test]
fn exit_statuses_say_how_it_went() {
    let leader = "examples/success-policy-leader.yaml";
    // 0: the Job finished, whether it succeeded or failed.
    assert_eq!(
        jobwarden(&["simulate", leader], None).status.code(),
        Some(0)
    );
    let failed = jobwarden(&["simulate", leader, "--default", "exit:1"], None);
    assert_eq!(failed.status.code(), Some(0), "{}", stderr(&failed));
    assert!(stdout(&failed).contains("Failed after"));
    // 3: the story stopped first.
    let out = jobwarden(&["simulate", leader, "--default", "running"], None);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stdout(&out).contains(
            "Stopped at 0s before the Job finished: nothing more can happen: 10 pods run for ever"
        ),
        "{}",
        stdout(&out)
    );
    let out = jobwarden(
        &[
            "simulate",
            leader,
            "--default",
            "running",
            "--pod",
            "0=succeeded,after:2h",
            "--max-time",
            "1h",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(3));
    assert!(stdout(&out).contains("after the limit of 1h0m0s (--max-time)"));
    // 1: the Job is invalid, in check's words.
    let dir = temp_dir("invalid");
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        std::fs::read_to_string(leader)
            .expect("reads")
            .replace("succeededIndexes: \"0\"", "succeededIndexes: \"5-2\""),
    )
    .expect("written");
    let bad = bad.to_string_lossy().into_owned();
    let out = jobwarden(&["simulate", &bad], None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).contains(&format!(
            "{bad}: Job \"leader-decides\": spec.successPolicy.rules[0].succeededIndexes: Invalid value: \"5-2\""
        )),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
    // 2: another controller's Job; input that cannot be read.
    let foreign = std::fs::read_to_string(leader)
        .expect("reads")
        .replace("jobwarden.io/job-controller", "kueue.x-k8s.io/multikueue");
    let out = jobwarden(&["simulate", "-"], Some(foreign.as_bytes()));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("spec.managedBy is \"kueue.x-k8s.io/multikueue\""));
    for (args, want) in [
        (
            vec!["simulate", "no-such-file.yaml"],
            "cannot read no-such-file.yaml",
        ),
        (
            vec!["simulate", leader, "--pod", "3"],
            "--pod \"3\": expected PODS=OUTCOME",
        ),
        (
            vec!["simulate", leader, "--pod", "3=exit:x"],
            "exit code \"x\"",
        ),
        (
            vec!["simulate", leader, "--pod", "10=exit:1"],
            "index 10 is not below the Job's completions (10)",
        ),
        (
            vec!["simulate", leader, "--pod", "3=exit:sidecar=1"],
            "no container \"sidecar\"",
        ),
        (
            vec!["simulate", leader, "--default", "sometimes"],
            "--default: \"sometimes\" is not an outcome item",
        ),
        (
            vec!["simulate", leader, "--max-time", "forever"],
            "--max-time: \"forever\" is not a duration",
        ),
        (
            vec!["simulate", leader, "--scenario", "no-such-scenario.yaml"],
            "cannot read no-such-scenario.yaml",
        ),
        (
            vec!["simulate", "examples/reviews/create-allowed.json"],
            "no batch/v1 Job in the input",
        ),
    ] {
        let out = jobwarden(&args, None);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
        assert_eq!(stdout(&out), "", "{args:?}");
    }
    let two = format!(
        "{}\n---\n{}",
        std::fs::read_to_string(leader).expect("reads"),
        std::fs::read_to_string("examples/backoff-limit-per-index.yaml").expect("reads")
    );
    let out = jobwarden(&["simulate", "-"], Some(two.as_bytes()));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("2 Jobs in the input"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn pod_flags_come_before_the_scenario_files_entries() {
    let out = jobwarden(
        &[
            "simulate",
            "examples/pod-failure-policy-named-rules.yaml",
            "--scenario",
            "examples/simulate/named-rules-exit-code-2.scenario.yaml",
            "--pod",
            "0=exit:4,after:5s",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("Failed after 5s, reason PodFailurePolicy_2.\n"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn hostile_scenario_files_are_refused_clearly() {
    let dir = temp_dir("hostile");
    let laughs = {
        let mut y = String::from(
            "a0: &a0 [\"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\"]\n",
        );
        for i in 1..30 {
            let p = i - 1;
            y.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        y.push_str("pods: *a29\n");
        y
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("binary", vec![0xff, 0xfe, 0x00, 0x01], "not UTF-8"),
        ("empty", Vec::new(), "holds one document, this one holds 0"),
        (
            "two",
            b"pods: []\n---\npods: []\n".to_vec(),
            "holds one document, this one holds 2",
        ),
        (
            "list",
            b"- 0=succeeded\n".to_vec(),
            "a scenario is a mapping",
        ),
        ("scalar", b"succeeded\n".to_vec(), "a scenario is a mapping"),
        (
            "unknown",
            b"pod: [0=succeeded]\n".to_vec(),
            "unknown field \"pod\"",
        ),
        (
            "numbers",
            b"pods: [3]\n".to_vec(),
            "pods[0]: must be a string",
        ),
        (
            "objects",
            b"pods: [{index: 3}]\n".to_vec(),
            "pods[0]: must be a string",
        ),
        (
            "bad-entry",
            b"pods: ['3=exit:forty']\n".to_vec(),
            "pods[0]: \"3=exit:forty\"",
        ),
        (
            "huge-index",
            b"pods: ['99999999999999999999=failed']\n".to_vec(),
            "cannot convert string to integer for index",
        ),
        (
            "long-after",
            b"default: exit:1,after:99999h\n".to_vec(),
            "is longer than",
        ),
        (
            "nested",
            format!("pods: {}{}", "[".repeat(10_000), "]".repeat(10_000)).into_bytes(),
            "invalid YAML",
        ),
        (
            "json-nested",
            format!("{{\"pods\": {}{}}}", "[".repeat(10_000), "]".repeat(10_000)).into_bytes(),
            "invalid JSON",
        ),
        ("laughs", laughs.into_bytes(), "invalid YAML"),
        (
            "big",
            vec![b'#'; 4 * 1024 * 1024],
            "larger than 3145728 bytes",
        ),
        (
            "nul",
            b"pods: [\"0=exit:1\0\"]\n".to_vec(),
            "control characters are not allowed",
        ),
        (
            "escaped-nul",
            b"{\"pods\": [\"0=exit:1\\u0000\"]}".to_vec(),
            "pods[0]: \"0=exit:1\\0\": exit code",
        ),
    ];
    for (name, bytes, want) in cases {
        let path = dir.join(format!("{name}.yaml"));
        std::fs::write(&path, bytes).expect("written");
        let path = path.to_string_lossy().into_owned();
        let out = jobwarden(
            &[
                "simulate",
                "examples/success-policy-leader.yaml",
                "--scenario",
                &path,
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{name}: {}", stderr(&out));
        assert_eq!(stdout(&out), "", "{name}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_job_that_asks_for_too_many_pods_stops_at_the_limit() {
    let job = e2e_job(
        "huge",
        json!({"completions": 100_000, "parallelism": 100_000, "completionMode": "Indexed"}),
    );
    let out = jobwarden(
        &["simulate", "-", "--max-pods", "600", "-o", "json"],
        Some(job.to_string().as_bytes()),
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let story: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(story["end"]["finished"], false);
    assert_eq!(
        story["end"]["stopped"],
        "the controller created more than 600 pods (the limit, --max-pods)"
    );
}

#[test]
fn long_back_offs_are_drawn_compressed_and_every_pod_is_a_bar() {
    // Nine failures of 5-second pods: the back-off doubles from 10 s to the 10-minute cap.
    let job = e2e_job("retries", json!({"backoffLimit": 8}));
    let out = jobwarden(
        &["simulate", "-", "--default", "failed,after:5s", "-o", "svg"],
        Some(job.to_string().as_bytes()),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let picture = stdout(&out);
    let doc = svg::parse(&picture);
    let class = |c: &str| svg::with_class(&doc, c).len();
    assert_eq!(class("bar"), 9);
    assert_eq!(class("backoff"), 8);
    // The waits of 2m40s and more dwarf the 5-second pods: drawn narrow, and marked.
    assert!(class("break") >= 3, "{} breaks", class("break"));
    // A NonIndexed Job's pods follow one another: one pod slot.
    assert_eq!(class("lane"), 1);
    let story = story(&job, &["--default", "failed,after:5s"]);
    assert_eq!(
        condition(&story, "Failed").map(|c| c.1).as_deref(),
        Some("BackoffLimitExceeded")
    );
}
