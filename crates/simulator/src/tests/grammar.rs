//! The scenario grammar as tables: good and bad entries, with the errors people read.

use super::*;

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
        ("0=pull-error", "0", None, "pull-error"),
        ("0=waiting:ImagePullBackOff", "0", None, "pull-error"),
        (
            "1-3=waiting:CreateContainerConfigError",
            "1-3",
            None,
            "waiting:CreateContainerConfigError",
        ),
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
        (
            "3=waiting:ContainerCreating",
            "a pod that never starts waits with one of CreateContainerConfigError, CreateContainerError, ErrImagePull, ImagePullBackOff, InvalidImageName",
        ),
        ("3=pull-error,after:5s", "never ends on its own"),
        ("3=pull-error,exit:1", "never ends on its own"),
        ("3=pull-error,running", "says both pull-error and running"),
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
    assert_eq!(s.default.fate, Outcome::Run);
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
