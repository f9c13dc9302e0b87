//! The proposals' own stories (KEP-3998's leader and workers, KEP-4443's named rules), each
//! final status checked against the reconcile loop run over the same pod outcomes.

use super::*;

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
