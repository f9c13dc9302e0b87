//! Back-offs, disruptions, per-index limits, deadlines, and the stories that cannot end or
//! cannot start.

use super::*;

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

fn pull_error_job(name: &str, backoff_limit: i32) -> Value {
    let mut j = job(name, json!({"backoffLimit": backoff_limit}));
    j["metadata"]["annotations"] = json!({"jobwarden.io/pod-start-timeout": "30s"});
    j
}

#[test]
fn a_pod_that_cannot_pull_its_image_is_failed_at_its_start_timeout() {
    // The first pod never pulls its image: failed at 30 s, replaced after the back-off.
    let story = same_end_as_the_reconcile_loop(
        &pull_error_job("pull", 1),
        &scenario("succeeded,after:5s", &["0=pull-error"]),
    );
    let told = kinds(&story);
    for want in [
        "0 waiting None ImagePullBackOff",
        "0 waits 30 StartTimeout",
        "30 ended None Failed",
        "30 deleted None",
        "30 waits 10 BackOff",
        "40 created None",
    ] {
        assert!(told.iter().any(|k| k == want), "{want} not in {told:#?}");
    }
    let text = crate::text::render(&story);
    assert!(
        text.contains("cannot start: container main waiting with ImagePullBackOff"),
        "{text}"
    );
    assert!(
        text.contains("failed by the controller: Container \"main\" was still waiting (ImagePullBackOff) 30s after the pod was scheduled; jobwarden.io/pod-start-timeout is 30s"),
        "{text}"
    );
    assert!(
        text.contains("deleted by the controller: it did not start in time"),
        "{text}"
    );
    assert_eq!(story.end.condition.as_deref(), Some("Complete"));
    assert_eq!(story.final_status["failed"], 1);
}

#[test]
fn pods_that_never_start_exhaust_the_backoff_limit() {
    let story = same_end_as_the_reconcile_loop(
        &pull_error_job("never", 1),
        &scenario("waiting:InvalidImageName", &[]),
    );
    assert_eq!(story.end.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(story.final_status["failed"], 2);
    // Without a start timeout the story cannot end, and says why.
    let story = tell(&job("forever", json!({})), &scenario("pull-error", &[]));
    assert!(
        story
            .end
            .stopped
            .as_deref()
            .is_some_and(|s| s.contains("1 pod(s) never start")),
        "{:?}",
        story.end
    );
}
