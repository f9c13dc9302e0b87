//! The scenario grammar as tables (good and bad entries, with the errors people read), and
//! whole stories: their steps, how they end, and their final statuses checked against the
//! reconcile loop itself run over the same pod outcomes.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::scenario::*;
use super::story::*;
use super::*;
use crate::in_memory::{InMemoryCluster, LoopRunConfig, Outcome, SeenPod, run_until_finished};

// ---- the grammar ----

#[test]
fn entries_that_parse_and_how_they_read_back() {
    // (entry, pods, attempts, canonical outcome)
    let table: &[(&str, &str, Option<&str>, &str)] = &[
        ("0=succeeded", "0", None, "succeeded,after:10s"),
        ("3=exit:42", "3", None, "exit:42,after:10s"),
        (" 3 = exit:42 , after:30s ", "3", None, "exit:42,after:30s"),
        (
            "1-5=succeeded,after:1m30s",
            "1-5",
            None,
            "succeeded,after:1m30s",
        ),
        ("0,2,4-6=failed", "0,2,4-6", None, "exit:1,after:10s"),
        ("3@1=exit:42", "3", Some("1"), "exit:42,after:10s"),
        ("3@2-3=succeeded", "3", Some("2,3"), "succeeded,after:10s"),
        ("3@2-4=succeeded", "3", Some("2-4"), "succeeded,after:10s"),
        (
            "1=disrupted",
            "1",
            None,
            "exit:143,condition:DisruptionTarget=True,after:10s",
        ),
        (
            "1=disrupted,exit:0,after:5s",
            "1",
            None,
            "exit:0,condition:DisruptionTarget=True,after:5s",
        ),
        ("2=deleted,after:1h", "2", None, "deleted,after:1h0m0s"),
        ("2=running", "2", None, "running"),
        ("0=exit:main=2", "0", None, "exit:0,exit:main=2,after:10s"),
        (
            "0=failed,exit:setup=3,exit:main=0",
            "0",
            None,
            "exit:1,exit:setup=3,exit:main=0,after:10s",
        ),
        (
            "0=exit:1,condition:example.com/Preempted=False",
            "0",
            None,
            "exit:1,condition:example.com/Preempted=False,after:10s",
        ),
        ("0=exit:-1", "0", None, "exit:-1,after:10s"),
        ("0=succeeded,after:PT5M", "0", None, "succeeded,after:5m0s"),
    ];
    for (text, pods, attempts, canonical) in table {
        let e = parse_entry(text).unwrap_or_else(|err| panic!("{text}: {err}"));
        assert_eq!(e.pods.to_string(), *pods, "{text}");
        assert_eq!(
            e.attempts.as_ref().map(ToString::to_string).as_deref(),
            *attempts,
            "{text}"
        );
        assert_eq!(e.script.to_string(), *canonical, "{text}");
        // The canonical form is itself an outcome that reads back the same.
        assert_eq!(
            parse_outcome(canonical),
            Ok(e.script.clone()),
            "{canonical}"
        );
    }
}

#[test]
fn entries_that_do_not_parse_say_why() {
    let table: &[(&str, &str)] = &[
        ("3", "expected PODS=OUTCOME"),
        ("", "expected PODS=OUTCOME"),
        ("=succeeded", "no pods named"),
        (
            "x=succeeded",
            "cannot convert string to integer for index: \"x\"",
        ),
        (
            "5-2=succeeded",
            "non-increasing order, previous: 5, current: 2",
        ),
        ("3,1=succeeded", "non-increasing order"),
        ("-1=succeeded", "cannot convert string to integer"),
        ("99999999999=succeeded", "too large index"),
        ("3@=exit:1", "no attempts named"),
        ("3@0=exit:1", "attempts count from 1"),
        ("3@x=exit:1", "attempts \"x\""),
        ("3=", "no outcome"),
        ("3=done", "\"done\" is not an outcome item"),
        ("3=succeeded,failed", "says both succeeded and failed"),
        (
            "3=succeeded,exit:1",
            "succeeded means every container exits 0",
        ),
        ("3=failed,exit:0", "failed, yet every container exits 0"),
        ("3=running,after:5s", "running never ends on its own"),
        ("3=deleted,exit:1", "deleted takes only after:"),
        ("3=exit:1,exit:2", "a second exit code"),
        ("3=exit:main=1,exit:main=2", "given two exit codes"),
        ("3=exit:Main=1", "\"Main\" is not a container name"),
        ("3=exit:=1", "\"\" is not a container name"),
        (
            "3=exit:forty",
            "exit code \"forty\" is not a 32-bit integer",
        ),
        ("3=exit:2147483648", "not a 32-bit integer"),
        ("3=exit:1,,after:5s", "an empty item between commas"),
        ("3=exit:1,after:5s,after:6s", "a second after:"),
        ("3=exit:1,after:-5s", "is negative"),
        ("3=exit:1,after:1.5s", "whole number of seconds"),
        ("3=exit:1,after:soon", "is not a duration"),
        ("3=exit:1,condition:Ready", "the kubelet sets Ready itself"),
        ("3=exit:1,condition:Bad Type", "is not a pod condition type"),
        ("3=exit:1,condition:X=Maybe", "True, False or Unknown"),
        ("3=exit:1,condition:X,condition:X=False", "given twice"),
        ("3=after:5s", "say how the pod ends"),
        ("3=condition:DisruptionTarget", "say how the pod ends"),
    ];
    for (text, want) in table {
        let err = parse_entry(text).expect_err(text).to_string();
        assert!(err.contains(want), "{text}: {err}");
    }
    let long = format!("0={}", "succeeded,".repeat(10_000));
    assert!(parse_entry(&long).is_err());
}

#[test]
fn the_first_entry_that_names_a_pod_decides() {
    let scenario = Scenario::default()
        .with_entries_first(
            ["3@1=exit:42", "3=succeeded,after:1s", "0-9=running"]
                .iter()
                .map(|t| parse_entry(t).expect("parses"))
                .collect(),
        )
        .expect("few entries");
    let fate = |number, attempt| {
        let (entry, script) = scenario.script_for(PodKey { number, attempt });
        (entry, script.to_string())
    };
    assert_eq!(fate(3, 1), (Some(0), "exit:42,after:10s".to_owned()));
    assert_eq!(fate(3, 2), (Some(1), "succeeded,after:1s".to_owned()));
    assert_eq!(fate(4, 1), (Some(2), "running".to_owned()));
    assert_eq!(fate(10, 1), (None, "succeeded,after:10s".to_owned()));
    assert_eq!(fate(i64::MAX, 1), (None, "succeeded,after:10s".to_owned()));
}

#[test]
fn scenario_documents_good_and_hostile() {
    let good = json!({"description": "d", "default": "running",
                      "pods": ["0=succeeded,after:20s", "1@1=exit:3"]});
    let s = Scenario::from_document(&good).expect("reads");
    assert_eq!(s.description.as_deref(), Some("d"));
    assert_eq!(s.default.fate, Fate::Runs);
    assert_eq!(s.entries.len(), 2);
    assert_eq!(Scenario::from_document(&json!({})), Ok(Scenario::default()));
    assert_eq!(
        Scenario::from_document(&json!({"pods": null, "default": null})),
        Ok(Scenario::default())
    );
    let hostile: &[(Value, &str)] = &[
        (json!([]), "a scenario is a mapping"),
        (json!("0=succeeded"), "a scenario is a mapping"),
        (Value::Null, "a scenario is a mapping"),
        (json!({"pod": []}), "unknown field \"pod\""),
        (json!({"pods": "0=succeeded"}), "pods: must be a list"),
        (json!({"pods": [3]}), "pods[0]: must be a string"),
        (json!({"pods": [{"index": 3}]}), "pods[0]: must be a string"),
        (
            json!({"pods": ["0=succeeded", "1=nope"]}),
            "pods[1]: \"1=nope\"",
        ),
        (json!({"default": 0}), "default: must be an outcome"),
        (json!({"default": "3=exit:1"}), "default: "),
        (
            json!({"description": ["x"]}),
            "description: must be a string",
        ),
        (
            json!({"description": "x".repeat(MAX_ENTRY_LEN + 1)}),
            "too long",
        ),
        (
            json!({"pods": vec!["0=succeeded"; MAX_ENTRIES + 1]}),
            "more than 10000 entries",
        ),
    ];
    for (doc, want) in hostile {
        let err = Scenario::from_document(doc).expect_err(want).to_string();
        assert!(err.contains(want), "{doc:.80}: {err}");
    }
}

#[test]
fn a_scenario_must_fit_its_job() {
    let indexed = JobShape {
        indexed: Some(10),
        containers: vec!["main".into()],
        init_containers: vec!["setup".into()],
        restarts_on_failure: false,
    };
    let non_indexed = JobShape {
        indexed: None,
        ..indexed.clone()
    };
    let on_failure = JobShape {
        restarts_on_failure: true,
        ..indexed.clone()
    };
    let with = |entries: &[&str]| {
        Scenario::default()
            .with_entries_first(
                entries
                    .iter()
                    .map(|t| parse_entry(t).expect("parses"))
                    .collect(),
            )
            .expect("few entries")
    };
    assert_eq!(with(&["9=exit:setup=1"]).check_against(&indexed), Ok(()));
    assert_eq!(
        with(&["1=disrupted", "2=deleted", "3=running", "4=exit:main=0"])
            .check_against(&on_failure),
        Ok(())
    );
    assert_eq!(with(&["3@2=exit:1"]).check_against(&indexed), Ok(()));
    assert_eq!(with(&["12=exit:1"]).check_against(&non_indexed), Ok(()));
    let cases: &[(&[&str], &JobShape, &str)] = &[
        (
            &["5-10=exit:1"],
            &indexed,
            "index 10 is not below the Job's completions (10)",
        ),
        (&["3@2=exit:1"], &non_indexed, "this Job is NonIndexed"),
        (&["3=exit:1"], &on_failure, "restartPolicy: OnFailure"),
        (&["3=failed"], &on_failure, "does not model restarts"),
        (
            &["3=exit:sidecar=1"],
            &indexed,
            "no container \"sidecar\" (containers: \"main\"; init containers: \"setup\")",
        ),
    ];
    for (entries, job, want) in cases {
        let err = with(entries)
            .check_against(job)
            .expect_err(want)
            .to_string();
        assert!(err.contains(want), "{entries:?}: {err}");
    }
    let bad_default = Scenario {
        default: parse_outcome("exit:sidecar=1").expect("parses"),
        ..Scenario::default()
    };
    let err = bad_default.check_against(&indexed).expect_err("no sidecar");
    assert!(err.to_string().starts_with("default: "), "{err}");
}

// ---- whole stories ----

fn job(name: &str, spec: Value) -> Value {
    let mut job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "managedBy": "jobwarden.io/job-controller",
            "template": {"spec": {"restartPolicy": "Never",
                                  "containers": [{"name": "main", "image": "busybox"}]}},
        },
    });
    if let (Some(target), Some(extra)) = (job["spec"].as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            if v.is_null() {
                target.remove(k);
            } else {
                target.insert(k.clone(), v.clone());
            }
        }
    }
    job
}

fn scenario(default: &str, entries: &[&str]) -> Scenario {
    let mut s = Scenario::default()
        .with_entries_first(
            entries
                .iter()
                .map(|t| parse_entry(t).expect("parses"))
                .collect(),
        )
        .expect("few entries");
    s.default = parse_outcome(default).expect("parses");
    s
}

fn tell(job: &Value, s: &Scenario) -> Story {
    simulate(job, s, &Limits::default()).expect("a story")
}

fn conditions(status: &Value) -> Vec<(String, String, String, String)> {
    status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let f = |k: &str| c[k].as_str().unwrap_or("").to_owned();
            (f("type"), f("status"), f("reason"), f("message"))
        })
        .collect()
}

/// What the reconcile loop's e2e tests look at: counters and conditions, never times.
fn outcome(status: &Value) -> Value {
    json!({
        "active": status["active"], "succeeded": status["succeeded"], "failed": status["failed"],
        "completedIndexes": status["completedIndexes"], "failedIndexes": status["failedIndexes"],
        "terminating": status["terminating"], "ready": status["ready"],
        "uncounted": status["uncountedTerminatedPods"],
        "conditions": conditions(status).iter()
            .map(|(t, s, r, m)| format!("{t}={s} {r}: {m}")).collect::<Vec<_>>(),
        "completionTime": !status["completionTime"].is_null(),
    })
}

/// The same Job run by the reconcile loop (watches, batching, the applier) on tokio's paused
/// clock, its pods ending as `s` says (attempts aside, which these stories do not use).
fn reconcile_loop_status(job: &Value, s: &Scenario) -> Value {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let cluster = Arc::new(InMemoryCluster::new(CLOCK_START));
    let created = cluster
        .write(|st| st.create_job(job.clone()))
        .expect("a valid Job");
    let ns = created["metadata"]["namespace"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let name = created["metadata"]["name"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let indexed = created["spec"]["completionMode"] == "Indexed";
    let decide = |p: &SeenPod| {
        let number = if indexed {
            i64::from(p.index.unwrap_or(-1))
        } else {
            i64::try_from(p.ordinal).unwrap_or(0) - 1
        };
        let (_, script) = s.script_for(PodKey { number, attempt: 1 });
        if p.running_for < script.after {
            return Outcome::Run;
        }
        match &script.fate {
            Fate::Runs => Outcome::Run,
            Fate::Deleted => Outcome::Delete,
            Fate::Ends {
                default_exit,
                exit_codes,
                conditions,
            } => Outcome::End {
                default: *default_exit,
                codes: exit_codes.clone(),
                conditions: conditions.clone(),
            },
        }
    };
    let report = runtime.block_on(run_until_finished(
        cluster.clone(),
        &[(ns.clone(), name.clone())],
        LoopRunConfig {
            give_up_after: Duration::from_secs(24 * 3600),
            ..LoopRunConfig::default()
        },
        decide,
    ));
    assert!(report.finished, "the reconcile loop did not finish {name}");
    cluster
        .with(|st| st.job(&ns, &name))
        .map(|j| j["status"].clone())
        .unwrap_or(Value::Null)
}

/// Pod names differ between two runs that create pods at different moments; the policy's
/// messages name them.
fn without_pod_names(v: Value, job_name: &str) -> Value {
    let text = v.to_string();
    let mut out = String::new();
    let mut rest = text.as_str();
    let marker = format!("/{job_name}-");
    while let Some(at) = rest.find(&marker) {
        out.push_str(&rest[..at]);
        out.push_str("/<pod>");
        let after = &rest[at + marker.len()..];
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(after.len());
        rest = &after[end..];
    }
    out.push_str(rest);
    serde_json::from_str(&out).unwrap_or(Value::Null)
}

fn same_end_as_the_reconcile_loop(job: &Value, s: &Scenario) -> Story {
    let story = tell(job, s);
    assert!(story.end.finished, "{:?}", story.end);
    let name = story.job.name.clone();
    assert_eq!(
        without_pod_names(outcome(&story.final_status), &name),
        without_pod_names(outcome(&reconcile_loop_status(job, s)), &name),
        "{name}"
    );
    story
}

fn kinds(story: &Story) -> Vec<String> {
    story
        .steps
        .iter()
        .map(|s| match &s.what {
            Happening::PodCreated(c) => format!("{} created {:?}", s.at, c.pod.index),
            Happening::PodEnded(e) => format!("{} ended {:?} {}", s.at, e.pod.index, e.phase),
            Happening::PodDeleted(d) => format!("{} deleted {:?}", s.at, d.pod.index),
            Happening::Status(_) => format!("{} status", s.at),
            Happening::Condition(c) => format!("{} {}={} {}", s.at, c.type_, c.status, c.reason),
            Happening::Waiting(w) => format!("{} waits {} {:?}", s.at, w.seconds, w.cause),
            Happening::ControllerError(e) => format!("{} error {}", s.at, e.message),
        })
        .collect()
}

#[test]
fn kep_3998_story_1_the_leader_decides() {
    let job = job(
        "leader",
        json!({"completions": 10, "parallelism": 10, "completionMode": "Indexed",
               "successPolicy": {"rules": [{"succeededIndexes": "0"}]}}),
    );
    let s = scenario("succeeded,after:1h", &["0=succeeded,after:20s"]);
    let story = same_end_as_the_reconcile_loop(&job, &s);
    let st = &story.final_status;
    assert_eq!(
        conditions(st),
        [
            (
                "SuccessCriteriaMet",
                "True",
                "SuccessPolicy",
                "Matched rules at index 0"
            ),
            (
                "Complete",
                "True",
                "SuccessPolicy",
                "Matched rules at index 0"
            ),
        ]
        .map(|(a, b, c, d)| (a.into(), b.into(), c.into(), d.into()))
    );
    assert_eq!(
        (st["succeeded"].as_i64(), st["active"].as_i64()),
        (Some(1), None)
    );
    assert_eq!(st["completedIndexes"], "0");
    assert!(st["completionTime"].is_string());
    assert_eq!(story.end.at, 20);
    assert_eq!(story.end.condition.as_deref(), Some("Complete"));
    let k = kinds(&story);
    assert_eq!(k.iter().filter(|l| l.starts_with("0 created")).count(), 10);
    assert!(
        k.contains(&"20 ended Some(0) Succeeded".to_owned()),
        "{k:#?}"
    );
    // The nine workers are deleted once the criteria are met, and killed; Complete comes last.
    let met = k.iter().position(|l| l.contains("SuccessCriteriaMet=True"));
    let deleted: Vec<usize> = (0..k.len()).filter(|i| k[*i].contains("deleted")).collect();
    assert_eq!(deleted.len(), 9);
    assert!(
        met.is_some_and(|m| deleted.iter().all(|d| *d > m)),
        "{k:#?}"
    );
    let complete = k.iter().position(|l| l.contains("Complete=True"));
    let last_end = k.iter().rposition(|l| l.contains("ended"));
    assert!(complete > last_end, "{k:#?}");
    // Deletions are told in creation order, whatever order the controller made them in.
    let order: Vec<&String> = deleted.iter().map(|i| &k[*i]).collect();
    let want: Vec<String> = (1..10).map(|i| format!("20 deleted Some({i})")).collect();
    assert_eq!(order, want.iter().collect::<Vec<_>>());
    assert!(story.unused_entries.is_empty());
}

#[test]
fn kep_3998_story_2_five_workers_before_the_leader() {
    let job = job(
        "workers",
        json!({"completions": 10, "parallelism": 10, "completionMode": "Indexed",
               "successPolicy": {"rules": [
                   {"succeededIndexes": "0", "succeededCount": 1},
                   {"succeededIndexes": "1-9", "succeededCount": 5}]}}),
    );
    let entries: Vec<String> = (1..10)
        .map(|i| format!("{i}=succeeded,after:{}s", i * 5 + 5))
        .collect();
    let refs: Vec<&str> = entries.iter().map(String::as_str).collect();
    let mut with_leader = vec!["0=succeeded,after:1h"];
    with_leader.extend(refs);
    let s = scenario("running", &with_leader);
    let story = same_end_as_the_reconcile_loop(&job, &s);
    let st = &story.final_status;
    assert_eq!(st["succeeded"], 5);
    assert_eq!(st["completedIndexes"], "1-5");
    assert_eq!(
        conditions(st)
            .iter()
            .map(|c| (c.0.as_str(), c.2.as_str(), c.3.as_str()))
            .collect::<Vec<_>>(),
        [
            (
                "SuccessCriteriaMet",
                "SuccessPolicy",
                "Matched rules at index 1"
            ),
            ("Complete", "SuccessPolicy", "Matched rules at index 1"),
        ]
    );
    assert_eq!(story.end.at, 30);
    // Workers 6 to 9 never got to their end: their entries named a pod, so none is unused.
    assert!(story.unused_entries.is_empty());
}

fn named_rules_job(names: &str) -> Value {
    let rule = |c: i32| {
        json!({"action": "FailJob",
               "onExitCodes": {"containerName": "main", "operator": "In", "values": [c]}})
    };
    let mut j = job(
        "named",
        json!({"completions": 1, "parallelism": 1, "backoffLimit": 0,
               "podFailurePolicy": {"rules": [rule(2), rule(3), rule(4),
                   {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}}),
    );
    j["metadata"]["annotations"] = json!({"jobwarden.io/pod-failure-policy-rule-names": names});
    j
}

#[test]
fn kep_4443_a_failure_is_named_after_its_rule() {
    let names = r#"["ExitCode2", "ExitCode3", null, null]"#;
    for (code, reason, rule) in [
        (2, "PodFailurePolicy_ExitCode2", 0),
        (3, "PodFailurePolicy_ExitCode3", 1),
        (4, "PodFailurePolicy_2", 2),
    ] {
        let job = named_rules_job(names);
        let s = scenario(&format!("exit:{code},after:5s"), &[]);
        let story = same_end_as_the_reconcile_loop(&job, &s);
        let st = &story.final_status;
        let pod = story
            .steps
            .iter()
            .find_map(|s| match &s.what {
                Happening::PodCreated(c) => Some(c.pod.name.clone()),
                _ => None,
            })
            .expect("a pod");
        let message = format!(
            "Container main for pod default/{pod} failed with exit code {code} matching FailJob rule at index {rule}"
        );
        assert_eq!(
            conditions(st),
            [
                (
                    "FailureTarget".to_owned(),
                    "True".to_owned(),
                    reason.to_owned(),
                    message.clone()
                ),
                (
                    "Failed".to_owned(),
                    "True".to_owned(),
                    reason.to_owned(),
                    message
                ),
            ]
        );
        assert_eq!(st["failed"], 1);
        assert!(st["completionTime"].is_null());
        let matched = story.steps.iter().find_map(|s| match &s.what {
            Happening::PodEnded(e) => e.pod_failure_policy.clone(),
            _ => None,
        });
        let name = [Some("ExitCode2"), Some("ExitCode3"), None][rule].map(str::to_owned);
        assert_eq!(
            matched,
            Some(PolicyResult::Matched(RuleMatch {
                rule,
                name,
                action: "FailJob".to_owned()
            }))
        );
        assert_eq!(story.end.reason.as_deref(), Some(reason));
    }
}

#[test]
fn without_managed_by_the_story_uses_upstreams_reason() {
    let mut job = named_rules_job(r#"["ExitCode2", "ExitCode3", null, null]"#);
    if let Some(spec) = job["spec"].as_object_mut() {
        spec.remove("managedBy");
    }
    let story = tell(&job, &scenario("exit:3,after:5s", &[]));
    assert_eq!(story.runner.controller, Controller::BuiltIn);
    assert_eq!(story.runner.managed_by, None);
    let reasons: Vec<String> = conditions(&story.final_status)
        .into_iter()
        .map(|c| c.2)
        .collect();
    assert_eq!(reasons, ["PodFailurePolicy", "PodFailurePolicy"]);
    // The rule that matched is still told, with its name.
    assert!(story.steps.iter().any(|s| matches!(&s.what,
        Happening::PodEnded(e) if matches!(&e.pod_failure_policy,
            Some(PolicyResult::Matched(m)) if m.name.as_deref() == Some("ExitCode3")))));
    job["spec"]["managedBy"] = json!("kubernetes.io/job-controller");
    assert_eq!(
        tell(&job, &scenario("exit:3,after:5s", &[]))
            .runner
            .controller,
        Controller::BuiltIn
    );
}

#[test]
fn a_job_of_another_controller_cannot_be_simulated() {
    let j = job("kueue", json!({"managedBy": "kueue.x-k8s.io/multikueue"}));
    let err = simulate(&j, &Scenario::default(), &Limits::default()).expect_err("foreign");
    assert_eq!(
        err,
        SimulationError::ForeignController("kueue.x-k8s.io/multikueue".to_owned())
    );
    assert!(err.to_string().contains("only jobwarden's"), "{err}");
}

#[test]
fn a_disrupted_pod_is_ignored_and_replaced_after_the_back_off() {
    let job = named_rules_job(r#"["ExitCode2", "ExitCode3", null, null]"#);
    let s = scenario("succeeded", &["0=disrupted,after:5s", "1=exit:3,after:5s"]);
    let story = same_end_as_the_reconcile_loop(&job, &s);
    let k = kinds(&story);
    assert_eq!(
        k.iter()
            .filter(|l| l.contains("created") || l.contains("ended") || l.contains("waits"))
            .cloned()
            .collect::<Vec<_>>(),
        [
            "0 created None",
            "5 ended None Failed",
            "5 waits 10 BackOff",
            "15 created None",
            "20 ended None Failed",
        ],
        "{k:#?}"
    );
    let policies: Vec<Option<PolicyResult>> = story
        .steps
        .iter()
        .filter_map(|s| match &s.what {
            Happening::PodEnded(e) => Some(e.pod_failure_policy.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        policies,
        [
            Some(PolicyResult::Matched(RuleMatch {
                rule: 3,
                name: None,
                action: "Ignore".to_owned()
            })),
            Some(PolicyResult::Matched(RuleMatch {
                rule: 1,
                name: Some("ExitCode3".to_owned()),
                action: "FailJob".to_owned()
            })),
        ]
    );
    // The ignored failure is not counted.
    assert_eq!(story.final_status["failed"], 1);
    assert_eq!(
        story.end.reason.as_deref(),
        Some("PodFailurePolicy_ExitCode3")
    );
}

#[test]
fn per_index_back_off_fails_indexes_not_the_job() {
    let job = job(
        "per-index",
        json!({"completions": 10, "parallelism": 5, "completionMode": "Indexed",
               "backoffLimitPerIndex": 1, "maxFailedIndexes": 3,
               "podFailurePolicy": {"rules": [{"action": "FailIndex",
                   "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}]}}),
    );
    let s = scenario(
        "succeeded,after:5s",
        &["3=exit:1,after:5s", "7=exit:42,after:5s"],
    );
    let story = same_end_as_the_reconcile_loop(&job, &s);
    let st = &story.final_status;
    assert_eq!(st["completedIndexes"], "0-2,4-6,8,9");
    assert_eq!(st["failedIndexes"], "3,7");
    assert_eq!(st["failed"], 3);
    assert_eq!(story.end.reason.as_deref(), Some("FailedIndexes"));
    // Index 3 ran twice, its second attempt after a back-off.
    let attempts: Vec<Option<u32>> = story
        .steps
        .iter()
        .filter_map(|s| match &s.what {
            Happening::PodCreated(c) if c.pod.index == Some(3) => Some(c.pod.attempt),
            _ => None,
        })
        .collect();
    assert_eq!(attempts, [Some(1), Some(2)]);
    assert!(
        story
            .steps
            .iter()
            .any(|s| matches!(&s.what, Happening::Waiting(w) if w.cause == WaitCause::BackOff))
    );
}

#[test]
fn attempts_name_the_retries_of_an_index() {
    let job = job(
        "retry",
        json!({"completions": 2, "parallelism": 2, "completionMode": "Indexed",
               "backoffLimitPerIndex": 2}),
    );
    let s = scenario("succeeded,after:5s", &["1@1-2=exit:1,after:5s"]);
    let story = tell(&job, &s);
    let ended: Vec<(Option<u32>, String)> = story
        .steps
        .iter()
        .filter_map(|s| match &s.what {
            Happening::PodEnded(e) if e.pod.index == Some(1) => {
                Some((e.pod.attempt, e.phase.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        ended,
        [
            (Some(1), "Failed".to_owned()),
            (Some(2), "Failed".to_owned()),
            (Some(3), "Succeeded".to_owned())
        ]
    );
    assert_eq!(story.final_status["completedIndexes"], "0,1");
    assert_eq!(story.end.condition.as_deref(), Some("Complete"));
}

#[test]
fn back_offs_double_until_the_backoff_limit() {
    let job = job("flaky", json!({"backoffLimit": 3}));
    let story = tell(&job, &scenario("exit:1,after:1s", &[]));
    let waits: Vec<u64> = story
        .steps
        .iter()
        .filter_map(|s| match &s.what {
            Happening::Waiting(w) => Some(w.seconds),
            _ => None,
        })
        .collect();
    assert_eq!(waits, [10, 20, 40]);
    assert_eq!(story.final_status["failed"], 4);
    assert_eq!(story.end.reason.as_deref(), Some("BackoffLimitExceeded"));
}

#[test]
fn the_active_deadline_ends_a_job_whose_pods_run_for_ever() {
    let job = job(
        "deadline",
        json!({"activeDeadlineSeconds": 90, "parallelism": 2}),
    );
    let story = tell(&job, &scenario("running", &[]));
    assert!(story.steps.iter().any(|s| s.at == 0
        && matches!(&s.what, Happening::Waiting(w)
            if w.cause == WaitCause::ActiveDeadline && w.until == 90)));
    assert_eq!(story.end.at, 90);
    assert_eq!(story.end.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(story.final_status["failed"], 2);
}

#[test]
fn stories_that_cannot_end_stop_with_a_reason() {
    // Pods that run for ever and nothing that could end them.
    let story = tell(
        &job("forever", json!({"parallelism": 3, "completions": 3})),
        &scenario("running", &[]),
    );
    assert!(!story.end.finished);
    let why = story.end.stopped.clone().unwrap_or_default();
    assert!(why.contains("3 pods run for ever"), "{why}");

    // A suspended Job runs nothing.
    let story = tell(
        &job("asleep", json!({"suspend": true})),
        &Scenario::default(),
    );
    let why = story.end.stopped.clone().unwrap_or_default();
    assert!(why.contains("suspended"), "{why}");
    assert!(
        conditions(&story.final_status)
            .iter()
            .any(|c| c.0 == "Suspended")
    );

    // Failures for ever: the clock limit.
    let flaky = job("flaky", json!({"backoffLimit": 1_000_000}));
    let limits = Limits {
        max_time: Duration::from_secs(3600),
        ..Limits::default()
    };
    let story = simulate(&flaky, &scenario("exit:1,after:1s", &[]), &limits).expect("a story");
    let why = story.end.stopped.clone().unwrap_or_default();
    assert!(
        why.contains("after the limit of 1h0m0s (--max-time)"),
        "{why}"
    );
    assert!(story.end.at <= 3600);

    // The step limit.
    let limits = Limits {
        max_steps: 5,
        ..Limits::default()
    };
    let story = simulate(&flaky, &scenario("exit:1,after:1s", &[]), &limits).expect("a story");
    let why = story.end.stopped.clone().unwrap_or_default();
    assert!(
        why.contains("the clock moved 5 times (the limit, --max-steps)"),
        "{why}"
    );

    // The pod limit, on a Job that wants a hundred thousand pods at once.
    let huge = job(
        "huge",
        json!({"completions": 100_000, "parallelism": 100_000, "completionMode": "Indexed"}),
    );
    let limits = Limits {
        max_pods: 1000,
        ..Limits::default()
    };
    let story = simulate(&huge, &Scenario::default(), &limits).expect("a story");
    let why = story.end.stopped.clone().unwrap_or_default();
    assert!(why.contains("more than 1000 pods"), "{why}");
}

#[test]
fn an_invalid_job_or_an_unfitting_scenario_is_refused() {
    let bad = job("bad", json!({"parallelism": -1}));
    let err = simulate(&bad, &Scenario::default(), &Limits::default()).expect_err("invalid");
    assert!(
        matches!(&err, SimulationError::Invalid(m) if m.contains("spec.parallelism: Invalid value: -1")),
        "{err}"
    );
    let nameless = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {}, "spec": {}});
    assert!(matches!(
        simulate(&nameless, &Scenario::default(), &Limits::default()),
        Err(SimulationError::Invalid(_))
    ));
    let generated = {
        let mut j = job("", json!({}));
        j["metadata"] = json!({"generateName": "gen-"});
        j
    };
    assert_eq!(tell(&generated, &Scenario::default()).job.name, "gen-abcde");
    let ok = job("ok", json!({"completions": 2, "completionMode": "Indexed"}));
    let err = simulate(
        &ok,
        &scenario("succeeded", &["2=exit:1"]),
        &Limits::default(),
    )
    .expect_err("index 2 of 2");
    assert!(matches!(err, SimulationError::Scenario(_)), "{err}");
    for hostile in [json!(null), json!([]), json!("job"), json!({"spec": 3})] {
        assert!(simulate(&hostile, &Scenario::default(), &Limits::default()).is_err());
    }
}

#[test]
fn pods_that_end_as_they_start_all_run_in_one_moment() {
    let j = job(
        "instant",
        json!({"completions": 300, "parallelism": 1, "completionMode": "Indexed"}),
    );
    let story = tell(&j, &scenario("succeeded,after:0s", &[]));
    assert!(story.end.finished, "{:?}", story.end);
    assert_eq!(story.end.at, 0);
    assert_eq!(story.final_status["succeeded"], 300);
    assert_eq!(story.final_status["completedIndexes"], "0-299");
}

#[test]
fn unused_entries_are_reported() {
    let story = tell(
        &job("one", json!({})),
        &scenario("succeeded", &["0=succeeded", "5=exit:1"]),
    );
    assert_eq!(story.unused_entries, ["5=exit:1"]);
}

#[test]
fn init_containers_and_several_containers_are_told_apart() {
    let mut j = job("multi", json!({"backoffLimit": 0}));
    j["spec"]["template"]["spec"]["initContainers"] =
        json!([{"name": "setup", "image": "busybox"}]);
    j["spec"]["template"]["spec"]["containers"] =
        json!([{"name": "main", "image": "busybox"}, {"name": "sidecar", "image": "busybox"}]);
    let story = tell(&j, &scenario("exit:setup=7", &[]));
    let codes = story.steps.iter().find_map(|s| match &s.what {
        Happening::PodEnded(e) => Some(e.exit_codes.clone()),
        _ => None,
    });
    assert_eq!(
        codes,
        Some(vec![ExitCode {
            container: "setup".into(),
            init: true,
            code: 7
        }])
    );
    let story = tell(&j, &scenario("exit:sidecar=2", &[]));
    let text = text::render(&story);
    assert!(
        text.contains("failed: main exited 0, sidecar exited 2"),
        "{text}"
    );
}
