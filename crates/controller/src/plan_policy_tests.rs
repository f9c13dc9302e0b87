//! Tables over `plan` for the policies: pod failure policy (with KEP-4443's named reasons),
//! `backoffLimitPerIndex`/`maxFailedIndexes`, KEP-3998's success policy, and which of them wins
//! when several are met in one sync.

use jobwarden_rules::condition::*;
use serde_json::{Value, json};

use super::tests::{Expect, check, run, secs};
use super::*;
use crate::testing::*;

fn exit_rule(action: &str, codes: &[i32]) -> Value {
    json!({"action": action, "onExitCodes": {"containerName": "c", "operator": "In", "values": codes}})
}

fn condition_rule(action: &str, type_: &str) -> Value {
    json!({"action": action, "onPodConditions": [{"type": type_, "status": "True"}]})
}

/// KEP-4443's story: exit code 2 and 3 each fail the Job under their own name.
fn named_rules() -> JobBuilder {
    JobBuilder::non_indexed(1, 1)
        .backoff_limit(0)
        .pod_failure_policy(json!([
            exit_rule("FailJob", &[2]),
            exit_rule("FailJob", &[3])
        ]))
        .rule_names(&[Some("ExitCode2"), Some("ExitCode3")])
        .started(0)
}

#[test]
fn fail_job_rules_fail_the_job_with_the_rule_name() {
    check(
        "exit code 2: FailureTarget PodFailurePolicy_ExitCode2 with upstream's message",
        named_rules().build(),
        vec![pod("a").exit_code(2, 5)],
        10,
        Expect {
            conditions: Some(vec![(FAILURE_TARGET, "True", "PodFailurePolicy_ExitCode2")]),
            messages: Some(vec![
                "Container c for pod ns/a failed with exit code 2 matching FailJob rule at index 0",
            ]),
            uncounted_failed: Some(vec!["a"]),
            removes_finalizers: Some(vec!["a"]),
            creates: Some(vec![]),
            finished: Some(None),
            ..Default::default()
        },
    );
    check(
        "exit code 3: PodFailurePolicy_ExitCode3",
        named_rules().build(),
        vec![pod("a").exit_code(3, 5)],
        10,
        Expect {
            conditions: Some(vec![(FAILURE_TARGET, "True", "PodFailurePolicy_ExitCode3")]),
            messages: Some(vec![
                "Container c for pod ns/a failed with exit code 3 matching FailJob rule at index 1",
            ]),
            ..Default::default()
        },
    );
    check(
        "an unnamed rule gives its index",
        JobBuilder::non_indexed(1, 1)
            .pod_failure_policy(json!([
                exit_rule("FailJob", &[2]),
                exit_rule("FailJob", &[3])
            ]))
            .rule_names(&[Some("ExitCode2"), None])
            .started(0)
            .build(),
        vec![pod("a").exit_code(3, 5)],
        10,
        Expect {
            conditions: Some(vec![(FAILURE_TARGET, "True", "PodFailurePolicy_1")]),
            ..Default::default()
        },
    );
    check(
        "no names at all: every rule is named by its index",
        JobBuilder::non_indexed(1, 1)
            .pod_failure_policy(json!([exit_rule("FailJob", &[2])]))
            .started(0)
            .build(),
        vec![pod("a").exit_code(2, 5)],
        10,
        Expect {
            conditions: Some(vec![(FAILURE_TARGET, "True", "PodFailurePolicy_0")]),
            ..Default::default()
        },
    );
    let mut named_by_field = JobBuilder::non_indexed(1, 1)
        .pod_failure_policy(json!([exit_rule("FailJob", &[2])]))
        .started(0)
        .build();
    named_by_field["spec"]["podFailurePolicy"]["rules"][0]["name"] = json!("Fatal");
    check(
        "a name field on the rule (forward compatible)",
        named_by_field,
        vec![pod("a").exit_code(2, 5)],
        10,
        Expect {
            conditions: Some(vec![(FAILURE_TARGET, "True", "PodFailurePolicy_Fatal")]),
            ..Default::default()
        },
    );
    check(
        "a pod condition rule, upstream's message",
        JobBuilder::non_indexed(1, 1)
            .pod_failure_policy(json!([condition_rule("FailJob", "ConfigIssue")]))
            .rule_names(&[Some("BadConfig")])
            .started(0)
            .build(),
        vec![pod("a").failed_at(5).pod_condition("ConfigIssue", "True")],
        10,
        Expect {
            conditions: Some(vec![(FAILURE_TARGET, "True", "PodFailurePolicy_BadConfig")]),
            messages: Some(vec![
                "Pod ns/a has condition ConfigIssue matching FailJob rule at index 0",
            ]),
            ..Default::default()
        },
    );
    check(
        "an init container's exit code matches too",
        JobBuilder::non_indexed(1, 1)
            .pod_failure_policy(json!([{"action": "FailJob",
                "onExitCodes": {"operator": "In", "values": [42]}}]))
            .started(0)
            .build(),
        vec![pod("a").init_exit_code(42, 5)],
        10,
        Expect {
            messages: Some(vec![
                "Container init for pod ns/a failed with exit code 42 matching FailJob rule at index 0",
            ]),
            ..Default::default()
        },
    );
    check(
        "the other pods are deleted and, as the Job is failing, counted failed",
        JobBuilder::non_indexed(3, 2)
            .pod_failure_policy(json!([exit_rule("FailJob", &[2])]))
            .rule_names(&[Some("ExitCode2")])
            .started(0)
            .build(),
        vec![pod("a").exit_code(2, 5), pod("b").ready()],
        10,
        Expect {
            deletes: Some(vec![("b", DeleteReason::JobFinishing)]),
            uncounted_failed: Some(vec!["a", "b"]),
            active: Some(0),
            ready: Some(0),
            terminating: Some(1),
            ..Default::default()
        },
    );
    check(
        "FailureTarget stored, nothing left: Failed with the same reason and message",
        named_rules()
            .failed(1)
            .condition(FAILURE_TARGET, "True", "PodFailurePolicy_ExitCode2", 10)
            .build(),
        vec![pod("a").exit_code(2, 5).no_finalizer()],
        20,
        Expect {
            conditions: Some(vec![
                (FAILURE_TARGET, "True", "PodFailurePolicy_ExitCode2"),
                (FAILED, "True", "PodFailurePolicy_ExitCode2"),
            ]),
            events: Some(vec!["PodFailurePolicy_ExitCode2"]),
            finished: Some(Some("PodFailurePolicy_ExitCode2")),
            completion_time: Some(None),
            ..Default::default()
        },
    );
    check(
        "a terminating pod is not failed yet (podReplacementPolicy: Failed): no rule applies",
        JobBuilder::non_indexed(1, 1)
            .pod_failure_policy(json!([condition_rule("FailJob", "DisruptionTarget")]))
            .started(0)
            .build(),
        vec![
            pod("a")
                .running()
                .pod_condition("DisruptionTarget", "True")
                .deleting_at(5),
        ],
        10,
        Expect {
            conditions: Some(vec![]),
            terminating: Some(1),
            creates: Some(vec![]),
            ..Default::default()
        },
    );
}

#[test]
fn ignore_and_count_rules() {
    check(
        "Ignore: not counted in failed nor towards the back-off limit, finalizer removed",
        JobBuilder::non_indexed(1, 1)
            .backoff_limit(0)
            .pod_failure_policy(json!([condition_rule("Ignore", "DisruptionTarget")]))
            .started(0)
            .build(),
        vec![
            pod("a")
                .failed_at(5)
                .pod_condition("DisruptionTarget", "True"),
        ],
        100,
        Expect {
            conditions: Some(vec![]),
            failed: Some(0),
            uncounted_failed: Some(vec![]),
            removes_finalizers: Some(vec!["a"]),
            creates: Some(vec![None]),
            ..Default::default()
        },
    );
    check(
        "Ignore by exit code; the replacement still backs off, as upstream",
        JobBuilder::non_indexed(1, 1)
            .backoff_limit(0)
            .pod_failure_policy(json!([exit_rule("Ignore", &[143])]))
            .started(0)
            .build(),
        vec![pod("a").exit_code(143, 5).no_finalizer()],
        8,
        Expect {
            conditions: Some(vec![]),
            failed: Some(0),
            creates: Some(vec![]),
            requeue: Some(secs(7)),
            ..Default::default()
        },
    );
    check(
        "Count: counted as usual, so the back-off limit of 0 is exceeded",
        JobBuilder::non_indexed(1, 1)
            .backoff_limit(0)
            .pod_failure_policy(json!([
                exit_rule("Count", &[1]),
                exit_rule("FailJob", &[1])
            ]))
            .started(0)
            .build(),
        vec![pod("a").failed_at(5)],
        10,
        Expect {
            conditions: Some(vec![(
                FAILURE_TARGET,
                "True",
                REASON_BACKOFF_LIMIT_EXCEEDED,
            )]),
            uncounted_failed: Some(vec!["a"]),
            ..Default::default()
        },
    );
    check(
        "no rule matches: counted as usual",
        JobBuilder::non_indexed(1, 1)
            .backoff_limit(1)
            .pod_failure_policy(json!([exit_rule("FailJob", &[2])]))
            .started(0)
            .build(),
        vec![pod("a").failed_at(5)],
        10,
        Expect {
            conditions: Some(vec![]),
            uncounted_failed: Some(vec!["a"]),
            removes_finalizers: Some(vec!["a"]),
            ..Default::default()
        },
    );
}

fn per_index(limit: i32) -> JobBuilder {
    JobBuilder::indexed(3, 3)
        .backoff_limit_per_index(limit)
        .started(0)
}

#[test]
fn backoff_limit_per_index() {
    check(
        "a new Job writes an empty failedIndexes",
        per_index(1).build(),
        vec![],
        0,
        Expect {
            creates: Some(vec![Some(0), Some(1), Some(2)]),
            failed_indexes: Some(Some("")),
            ..Default::default()
        },
    );
    check(
        "without backoffLimitPerIndex failedIndexes stays absent",
        JobBuilder::indexed(3, 3).started(0).build(),
        vec![],
        0,
        Expect {
            failed_indexes: Some(None),
            ..Default::default()
        },
    );
    check(
        "first failure of an index: it backs off on its own, the pod waits uncounted",
        per_index(1).build(),
        vec![
            pod("a").index(0).failed_at(5),
            pod("b").index(1).running(),
            pod("c").index(2).running(),
        ],
        10,
        Expect {
            creates: Some(vec![]),
            removes_finalizers: Some(vec![]),
            uncounted_failed: Some(vec![]),
            failed_indexes: Some(Some("")),
            requeue: Some(secs(5)),
            ..Default::default()
        },
    );
    check(
        "back-off over: the index is recreated, the failed pod still waits",
        per_index(1).build(),
        vec![
            pod("a").index(0).failed_at(5),
            pod("b").index(1).running(),
            pod("c").index(2).running(),
        ],
        15,
        Expect {
            creates: Some(vec![Some(0)]),
            removes_finalizers: Some(vec![]),
            ..Default::default()
        },
    );
    check(
        "the replacement exists: the failed pod is counted and let go",
        per_index(1).build(),
        vec![
            pod("a").index(0).failed_at(5),
            pod("a2").index(0).index_failures(1).running(),
            pod("b").index(1).running(),
            pod("c").index(2).running(),
        ],
        20,
        Expect {
            creates: Some(vec![]),
            removes_finalizers: Some(vec!["a"]),
            uncounted_failed: Some(vec!["a"]),
            failed_indexes: Some(Some("")),
            ..Default::default()
        },
    );
    check(
        "the index's last allowed attempt fails: the index is failed, not retried",
        per_index(1).failed(1).build(),
        vec![
            pod("a2").index(0).index_failures(1).failed_at(30),
            pod("b").index(1).running(),
            pod("c").index(2).running(),
        ],
        100,
        Expect {
            creates: Some(vec![]),
            failed_indexes: Some(Some("0")),
            uncounted_failed: Some(vec!["a2"]),
            removes_finalizers: Some(vec!["a2"]),
            conditions: Some(vec![]),
            ..Default::default()
        },
    );
    check(
        "every index completed or failed, some failed: FailedIndexes",
        per_index(1)
            .failed(2)
            .failed_indexes("0")
            .completed_indexes("1")
            .succeeded(1)
            .build(),
        vec![pod("c").index(2).succeeded_at(40)],
        100,
        Expect {
            conditions: Some(vec![(FAILURE_TARGET, "True", REASON_FAILED_INDEXES)]),
            messages: Some(vec![MESSAGE_FAILED_INDEXES]),
            completed_indexes: Some("1,2"),
            failed_indexes: Some(Some("0")),
            ..Default::default()
        },
    );
    check(
        "more than maxFailedIndexes failed: MaxFailedIndexesExceeded at once, the rest deleted",
        JobBuilder::indexed(4, 4)
            .backoff_limit_per_index(0)
            .max_failed_indexes(1)
            .failed_indexes("0")
            .failed(1)
            .started(0)
            .build(),
        vec![
            pod("b").index(1).failed_at(30),
            pod("c").index(2).running(),
            pod("d").index(3).running(),
        ],
        100,
        Expect {
            conditions: Some(vec![(
                FAILURE_TARGET,
                "True",
                REASON_MAX_FAILED_INDEXES_EXCEEDED,
            )]),
            messages: Some(vec![MESSAGE_MAX_FAILED_INDEXES_EXCEEDED]),
            failed_indexes: Some(Some("0,1")),
            deletes: Some(vec![
                ("c", DeleteReason::JobFinishing),
                ("d", DeleteReason::JobFinishing),
            ]),
            ..Default::default()
        },
    );
    check(
        "at maxFailedIndexes, not beyond: the Job runs on",
        JobBuilder::indexed(4, 4)
            .backoff_limit_per_index(0)
            .max_failed_indexes(1)
            .started(0)
            .build(),
        vec![
            pod("a").index(0).failed_at(30),
            pod("b").index(1).running(),
            pod("c").index(2).running(),
            pod("d").index(3).running(),
        ],
        100,
        Expect {
            conditions: Some(vec![]),
            failed_indexes: Some(Some("0")),
            creates: Some(vec![]),
            ..Default::default()
        },
    );
    check(
        "FailIndex: the index fails on its first failure",
        per_index(5)
            .pod_failure_policy(json!([exit_rule("FailIndex", &[7])]))
            .build(),
        vec![
            pod("a").index(0).exit_code(7, 5),
            pod("b").index(1).running(),
            pod("c").index(2).running(),
        ],
        100,
        Expect {
            failed_indexes: Some(Some("0")),
            uncounted_failed: Some(vec!["a"]),
            creates: Some(vec![]),
            conditions: Some(vec![]),
            ..Default::default()
        },
    );
    check(
        "an ignored failure does not bring the index closer to its limit",
        per_index(0)
            .pod_failure_policy(json!([exit_rule("Ignore", &[143])]))
            .build(),
        vec![
            pod("a").index(0).exit_code(143, 5),
            pod("b").index(1).running(),
            pod("c").index(2).running(),
        ],
        100,
        Expect {
            failed_indexes: Some(Some("")),
            creates: Some(vec![Some(0)]),
            uncounted_failed: Some(vec![]),
            ..Default::default()
        },
    );
}

/// The annotations of the pods a plan creates.
fn created_annotations(p: &Plan) -> Vec<Value> {
    p.create
        .iter()
        .map(|c| c.pod["metadata"]["annotations"].clone())
        .collect()
}

#[test]
fn replacements_carry_the_index_failure_counts() {
    let fresh = run(&per_index(2).build(), vec![], 0);
    assert!(
        created_annotations(&fresh)
            .iter()
            .all(|a| a[INDEX_FAILURE_COUNT_KEY] == "0"
                && a.get(INDEX_IGNORED_FAILURE_COUNT_KEY).is_none()),
        "{:?}",
        created_annotations(&fresh)
    );

    let counted = run(
        &per_index(2).build(),
        vec![
            pod("a").index(0).index_failures(1).failed_at(5),
            pod("b").index(1).running(),
            pod("c").index(2).running(),
        ],
        100,
    );
    let got = created_annotations(&counted);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0][COMPLETION_INDEX_KEY], "0");
    assert_eq!(got[0][INDEX_FAILURE_COUNT_KEY], "2");

    let ignored = run(
        &per_index(2)
            .pod_failure_policy(json!([exit_rule("Ignore", &[143])]))
            .build(),
        vec![
            pod("a").index(0).index_failures(1).exit_code(143, 5),
            pod("b").index(1).running(),
            pod("c").index(2).running(),
        ],
        100,
    );
    let got = created_annotations(&ignored);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0][INDEX_FAILURE_COUNT_KEY], "1");
    assert_eq!(got[0][INDEX_IGNORED_FAILURE_COUNT_KEY], "1");
}

#[test]
fn per_index_backoff_doubles_with_the_index_failures() {
    // Two earlier failures of index 0 (one ignored): the third waits 40 s.
    let job = per_index(5)
        .pod_failure_policy(json!([exit_rule("Ignore", &[143])]))
        .build();
    let pods = || {
        vec![
            pod("a")
                .index(0)
                .index_failures(1)
                .ignored_failures(1)
                .failed_at(10),
            pod("b").index(1).running(),
            pod("c").index(2).running(),
        ]
    };
    check(
        "40 s after the index's third failure",
        job.clone(),
        pods(),
        30,
        Expect {
            creates: Some(vec![]),
            requeue: Some(secs(20)),
            ..Default::default()
        },
    );
    check(
        "and then it is recreated",
        job,
        pods(),
        50,
        Expect {
            creates: Some(vec![Some(0)]),
            ..Default::default()
        },
    );
}

/// KEP-3998 story 1: the leader (index 0) decides.
fn leader(completions: i32) -> JobBuilder {
    JobBuilder::indexed(completions, completions)
        .success_rules(&[(Some("0"), None)])
        .started(0)
}

#[test]
fn success_policy() {
    let met = (SUCCESS_CRITERIA_MET, "True", REASON_SUCCESS_POLICY);
    check(
        "indexes only: the leader succeeded, the workers are deleted",
        leader(3).build(),
        vec![
            pod("a").index(0).succeeded_at(5),
            pod("b").index(1).ready(),
            pod("c").index(2).running(),
        ],
        10,
        Expect {
            conditions: Some(vec![met]),
            messages: Some(vec!["Matched rules at index 0"]),
            completed_indexes: Some("0"),
            succeeded: Some(1),
            deletes: Some(vec![
                ("b", DeleteReason::JobFinishing),
                ("c", DeleteReason::JobFinishing),
            ]),
            creates: Some(vec![]),
            active: Some(0),
            ready: Some(0),
            terminating: Some(2),
            // Upstream lets the lingering pods go uncounted once the Job has succeeded: they
            // neither failed nor succeeded.
            uncounted_failed: Some(vec![]),
            removes_finalizers: Some(vec!["a", "b", "c"]),
            finished: Some(None),
            ..Default::default()
        },
    );
    check(
        "indexes only: a worker's success is not enough",
        leader(3).build(),
        vec![
            pod("a").index(0).running(),
            pod("b").index(1).succeeded_at(5),
            pod("c").index(2).running(),
        ],
        10,
        Expect {
            conditions: Some(vec![]),
            completed_indexes: Some("1"),
            deletes: Some(vec![]),
            ..Default::default()
        },
    );
    check(
        "count only: two of any indexes",
        JobBuilder::indexed(4, 4)
            .success_rules(&[(None, Some(2))])
            .started(0)
            .completed_indexes("3")
            .succeeded(1)
            .build(),
        vec![
            pod("a").index(0).running(),
            pod("b").index(1).succeeded_at(5),
            pod("c").index(2).running(),
        ],
        10,
        Expect {
            conditions: Some(vec![met]),
            completed_indexes: Some("1,3"),
            ..Default::default()
        },
    );
    check(
        "both (story 2): the second rule, five of the workers",
        JobBuilder::indexed(10, 10)
            .success_rules(&[(Some("0"), Some(1)), (Some("1-9"), Some(5))])
            .started(0)
            .completed_indexes("1-4")
            .succeeded(4)
            .build(),
        vec![
            pod("a").index(0).running(),
            pod("f").index(5).succeeded_at(5),
        ],
        10,
        Expect {
            conditions: Some(vec![met]),
            messages: Some(vec!["Matched rules at index 1"]),
            completed_indexes: Some("1-5"),
            deletes: Some(vec![("a", DeleteReason::JobFinishing)]),
            ..Default::default()
        },
    );
    check(
        "both: four of the workers is not enough",
        JobBuilder::indexed(10, 10)
            .success_rules(&[(Some("0"), Some(1)), (Some("1-9"), Some(5))])
            .started(0)
            .completed_indexes("1-3")
            .succeeded(3)
            .build(),
        vec![pod("f").index(5).succeeded_at(5)],
        10,
        Expect {
            conditions: Some(vec![]),
            completed_indexes: Some("1-3,5"),
            ..Default::default()
        },
    );
    check(
        "SuccessCriteriaMet stored, a worker still terminating: not Complete yet",
        leader(3)
            .completed_indexes("0")
            .succeeded(1)
            .condition(SUCCESS_CRITERIA_MET, "True", REASON_SUCCESS_POLICY, 10)
            .build(),
        vec![pod("b").index(1).running().deleting_at(10).no_finalizer()],
        20,
        Expect {
            conditions: Some(vec![met]),
            terminating: Some(1),
            finished: Some(None),
            ..Default::default()
        },
    );
    check(
        "SuccessCriteriaMet stored, no pod left: Complete with the same reason",
        leader(3)
            .completed_indexes("0")
            .succeeded(1)
            .failed(2)
            .condition(SUCCESS_CRITERIA_MET, "True", REASON_SUCCESS_POLICY, 10)
            .build(),
        vec![pod("a").index(0).succeeded_at(5).no_finalizer()],
        20,
        Expect {
            conditions: Some(vec![met, (COMPLETE, "True", REASON_SUCCESS_POLICY)]),
            completion_time: Some(Some(20)),
            finished: Some(Some(REASON_SUCCESS_POLICY)),
            events: Some(vec!["Completed"]),
            ..Default::default()
        },
    );
    check(
        "all indexes succeeded at once: the first rule that holds gives the reason",
        JobBuilder::indexed(2, 2)
            .success_rules(&[(None, Some(2)), (Some("0"), None)])
            .started(0)
            .build(),
        vec![
            pod("a").index(0).succeeded_at(5),
            pod("b").index(1).succeeded_at(5),
        ],
        10,
        Expect {
            conditions: Some(vec![met]),
            messages: Some(vec!["Matched rules at index 0"]),
            ..Default::default()
        },
    );
}

#[test]
fn failure_policies_win_over_the_success_policy() {
    check(
        "a FailJob rule and the success rule met in one sync: the Job fails",
        leader(3)
            .pod_failure_policy(json!([exit_rule("FailJob", &[2])]))
            .rule_names(&[Some("ExitCode2")])
            .build(),
        vec![
            pod("a").index(0).succeeded_at(5),
            pod("b").index(1).exit_code(2, 5),
            pod("c").index(2).running(),
        ],
        10,
        Expect {
            conditions: Some(vec![(FAILURE_TARGET, "True", "PodFailurePolicy_ExitCode2")]),
            ..Default::default()
        },
    );
    check(
        "the back-off limit and the success rule in one sync: the Job fails",
        leader(3).backoff_limit(0).build(),
        vec![
            pod("a").index(0).succeeded_at(5),
            pod("b").index(1).failed_at(5),
            pod("c").index(2).running(),
        ],
        10,
        Expect {
            conditions: Some(vec![(
                FAILURE_TARGET,
                "True",
                REASON_BACKOFF_LIMIT_EXCEEDED,
            )]),
            ..Default::default()
        },
    );
    check(
        "failed indexes and the success rule in one sync: the Job fails",
        leader(2).backoff_limit_per_index(0).build(),
        vec![
            pod("a").index(0).succeeded_at(5),
            pod("b").index(1).failed_at(5),
        ],
        10,
        Expect {
            conditions: Some(vec![(FAILURE_TARGET, "True", REASON_FAILED_INDEXES)]),
            ..Default::default()
        },
    );
    check(
        "once SuccessCriteriaMet is stored a FailJob match changes nothing: Complete follows",
        leader(3)
            .pod_failure_policy(json!([exit_rule("FailJob", &[2])]))
            .completed_indexes("0")
            .succeeded(1)
            .condition(SUCCESS_CRITERIA_MET, "True", REASON_SUCCESS_POLICY, 10)
            .build(),
        vec![pod("b").index(1).exit_code(2, 12)],
        20,
        Expect {
            conditions: Some(vec![(SUCCESS_CRITERIA_MET, "True", REASON_SUCCESS_POLICY)]),
            uncounted_failed: Some(vec!["b"]),
            removes_finalizers: Some(vec!["b"]),
            finished: Some(None),
            ..Default::default()
        },
    );
    check(
        "... and the pass after, Complete",
        leader(3)
            .pod_failure_policy(json!([exit_rule("FailJob", &[2])]))
            .completed_indexes("0")
            .succeeded(1)
            .failed(1)
            .condition(SUCCESS_CRITERIA_MET, "True", REASON_SUCCESS_POLICY, 10)
            .build(),
        vec![pod("b").index(1).exit_code(2, 12).no_finalizer()],
        30,
        Expect {
            conditions: Some(vec![
                (SUCCESS_CRITERIA_MET, "True", REASON_SUCCESS_POLICY),
                (COMPLETE, "True", REASON_SUCCESS_POLICY),
            ]),
            finished: Some(Some(REASON_SUCCESS_POLICY)),
            ..Default::default()
        },
    );
}

#[test]
fn every_planned_status_passes_the_status_rules() {
    // The executor refuses a status the rules reject; check the policy plans here directly.
    let cases: Vec<(Value, Vec<PodBuilder>, i64)> = vec![
        (named_rules().build(), vec![pod("a").exit_code(2, 5)], 10),
        (
            per_index(0).build(),
            vec![
                pod("a").index(0).failed_at(5),
                pod("b").index(1).succeeded_at(5),
                pod("c").index(2).running(),
            ],
            10,
        ),
        (
            leader(3).build(),
            vec![
                pod("a").index(0).succeeded_at(5),
                pod("b").index(1).running(),
            ],
            10,
        ),
    ];
    for (job, pods, now) in cases {
        let p = run(&job, pods, now);
        let Some(status) = p.status else { continue };
        let Some(patch) =
            crate::status_patch::status_patch(&job, &status).expect("the status serializes")
        else {
            continue;
        };
        let checked = crate::executor::check_status_patch(&job, &patch);
        assert!(checked.is_ok(), "{checked:?}\n{patch}");
    }
}
