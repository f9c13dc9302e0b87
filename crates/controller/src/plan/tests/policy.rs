//! Tables over `plan` for the policies: pod failure policy (with KEP-4443's named reasons) and
//! `backoffLimitPerIndex`/`maxFailedIndexes`; KEP-3998's success policy, and which policy wins
//! when several are met in one sync, are in `success_policy.rs`. The runner is
//! `testing::plan_table`.

use jobwarden_rules::condition::*;
use jobwarden_rules::well_known::*;
use serde_json::{Value, json};

use crate::plan::DeleteReason::*;
use crate::testing::plan_table::{row, table};
use crate::testing::*;

pub(super) fn exit_rule(action: &str, codes: &[i32]) -> Value {
    json!({"action": action, "onExitCodes": {"containerName": "c", "operator": "In", "values": codes}})
}

/// An exit code rule without `containerName`: init containers match too.
fn any_container_exit_rule(action: &str, codes: &[i32]) -> Value {
    json!({"action": action, "onExitCodes": {"operator": "In", "values": codes}})
}

fn condition_rule(action: &str, type_: &str) -> Value {
    json!({"action": action, "onPodConditions": [{"type": type_, "status": "True"}]})
}

/// A rule with a `name` field, as a future API may carry it.
fn named(name: &str, mut rule: Value) -> Value {
    rule["name"] = json!(name);
    rule
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

/// Three indexes, each allowed `limit` failures of its own.
fn per_index(limit: i32) -> JobBuilder {
    JobBuilder::indexed(3, 3)
        .backoff_limit_per_index(limit)
        .started(0)
}

/// KEP-3998 story 1: the leader (index 0) decides.
pub(super) fn leader(completions: i32) -> JobBuilder {
    JobBuilder::indexed(completions, completions)
        .success_rules(&[(Some("0"), None)])
        .started(0)
}

#[test]
fn fail_job_rules_fail_the_job_with_the_rule_name() {
    table([
        row(
            "exit code 2: FailureTarget PodFailurePolicy_ExitCode2 with upstream's message",
            named_rules(),
            [pod("a").exit_code(2, 5)],
            10,
        )
        .conditions(&[(FAILURE_TARGET, "True", "PodFailurePolicy_ExitCode2")])
        .messages(&[
            "Container c for pod ns/a failed with exit code 2 matching FailJob rule at index 0",
        ])
        .uncounted_failed(&["a"])
        .removes_finalizers(&["a"])
        .creates(&[])
        .not_finished(),
        row(
            "exit code 3: PodFailurePolicy_ExitCode3",
            named_rules(),
            [pod("a").exit_code(3, 5)],
            10,
        )
        .conditions(&[(FAILURE_TARGET, "True", "PodFailurePolicy_ExitCode3")])
        .messages(&[
            "Container c for pod ns/a failed with exit code 3 matching FailJob rule at index 1",
        ]),
        row(
            "an unnamed rule gives its index",
            JobBuilder::non_indexed(1, 1)
                .pod_failure_policy(json!([
                    exit_rule("FailJob", &[2]),
                    exit_rule("FailJob", &[3])
                ]))
                .rule_names(&[Some("ExitCode2"), None])
                .started(0),
            [pod("a").exit_code(3, 5)],
            10,
        )
        .conditions(&[(FAILURE_TARGET, "True", "PodFailurePolicy_1")]),
        row(
            "no names at all: every rule is named by its index",
            JobBuilder::non_indexed(1, 1)
                .pod_failure_policy(json!([exit_rule("FailJob", &[2])]))
                .started(0),
            [pod("a").exit_code(2, 5)],
            10,
        )
        .conditions(&[(FAILURE_TARGET, "True", "PodFailurePolicy_0")]),
        row(
            "a name field on the rule (forward compatible)",
            JobBuilder::non_indexed(1, 1)
                .pod_failure_policy(json!([named("Fatal", exit_rule("FailJob", &[2]))]))
                .started(0),
            [pod("a").exit_code(2, 5)],
            10,
        )
        .conditions(&[(FAILURE_TARGET, "True", "PodFailurePolicy_Fatal")]),
        row(
            "a pod condition rule, upstream's message",
            JobBuilder::non_indexed(1, 1)
                .pod_failure_policy(json!([condition_rule("FailJob", "ConfigIssue")]))
                .rule_names(&[Some("BadConfig")])
                .started(0),
            [pod("a").failed_at(5).pod_condition("ConfigIssue", "True")],
            10,
        )
        .conditions(&[(FAILURE_TARGET, "True", "PodFailurePolicy_BadConfig")])
        .messages(&["Pod ns/a has condition ConfigIssue matching FailJob rule at index 0"]),
        row(
            "an init container's exit code matches too",
            JobBuilder::non_indexed(1, 1)
                .pod_failure_policy(json!([any_container_exit_rule("FailJob", &[42])]))
                .started(0),
            [pod("a").init_exit_code(42, 5)],
            10,
        )
        .messages(&[
            "Container init for pod ns/a failed with exit code 42 matching FailJob rule at index 0",
        ]),
        row(
            "the other pods are deleted and, as the Job is failing, counted failed",
            JobBuilder::non_indexed(3, 2)
                .pod_failure_policy(json!([exit_rule("FailJob", &[2])]))
                .rule_names(&[Some("ExitCode2")])
                .started(0),
            [pod("a").exit_code(2, 5), pod("b").ready()],
            10,
        )
        .deletes(&[("b", JobFinishing)])
        .uncounted_failed(&["a", "b"])
        .active(0)
        .ready(0)
        .terminating(1),
        row(
            "FailureTarget stored, nothing left: Failed with the same reason and message",
            named_rules().failed(1).condition(
                FAILURE_TARGET,
                "True",
                "PodFailurePolicy_ExitCode2",
                10,
            ),
            [pod("a").exit_code(2, 5).no_finalizer()],
            20,
        )
        .conditions(&[
            (FAILURE_TARGET, "True", "PodFailurePolicy_ExitCode2"),
            (FAILED, "True", "PodFailurePolicy_ExitCode2"),
        ])
        .events(&["PodFailurePolicy_ExitCode2"])
        .finished("PodFailurePolicy_ExitCode2")
        .no_completion_time(),
        row(
            "a terminating pod is not failed yet (podReplacementPolicy: Failed): no rule applies",
            JobBuilder::non_indexed(1, 1)
                .pod_failure_policy(json!([condition_rule("FailJob", "DisruptionTarget")]))
                .started(0),
            [pod("a")
                .running()
                .pod_condition("DisruptionTarget", "True")
                .deleting_at(5)],
            10,
        )
        .conditions(&[])
        .terminating(1)
        .creates(&[]),
    ]);
}

#[test]
fn ignore_and_count_rules() {
    table([
        row(
            "Ignore: not counted in failed nor towards the back-off limit, finalizer removed",
            JobBuilder::non_indexed(1, 1)
                .backoff_limit(0)
                .pod_failure_policy(json!([condition_rule("Ignore", "DisruptionTarget")]))
                .started(0),
            [pod("a")
                .failed_at(5)
                .pod_condition("DisruptionTarget", "True")],
            100,
        )
        .conditions(&[])
        .failed(0)
        .uncounted_failed(&[])
        .removes_finalizers(&["a"])
        .creates(&[None]),
        row(
            "Ignore by exit code; the replacement still backs off, as upstream",
            JobBuilder::non_indexed(1, 1)
                .backoff_limit(0)
                .pod_failure_policy(json!([exit_rule("Ignore", &[143])]))
                .started(0),
            [pod("a").exit_code(143, 5).no_finalizer()],
            8,
        )
        .conditions(&[])
        .failed(0)
        .creates(&[])
        .requeue_after(7),
        row(
            "Count: counted as usual, so the back-off limit of 0 is exceeded",
            JobBuilder::non_indexed(1, 1)
                .backoff_limit(0)
                .pod_failure_policy(json!([
                    exit_rule("Count", &[1]),
                    exit_rule("FailJob", &[1])
                ]))
                .started(0),
            [pod("a").failed_at(5)],
            10,
        )
        .conditions(&[(FAILURE_TARGET, "True", REASON_BACKOFF_LIMIT_EXCEEDED)])
        .uncounted_failed(&["a"]),
        row(
            "no rule matches: counted as usual",
            JobBuilder::non_indexed(1, 1)
                .backoff_limit(1)
                .pod_failure_policy(json!([exit_rule("FailJob", &[2])]))
                .started(0),
            [pod("a").failed_at(5)],
            10,
        )
        .conditions(&[])
        .uncounted_failed(&["a"])
        .removes_finalizers(&["a"]),
    ]);
}

#[test]
fn backoff_limit_per_index() {
    table([
        row(
            "a new Job writes an empty failedIndexes",
            per_index(1),
            [],
            0,
        )
        .creates(&[Some(0), Some(1), Some(2)])
        .failed_indexes(""),
        row(
            "without backoffLimitPerIndex failedIndexes stays absent",
            JobBuilder::indexed(3, 3).started(0),
            [],
            0,
        )
        .no_failed_indexes(),
        row(
            "first failure of an index: it backs off on its own, the pod waits uncounted",
            per_index(1),
            [
                pod("a").index(0).failed_at(5),
                pod("b").index(1).running(),
                pod("c").index(2).running(),
            ],
            10,
        )
        .creates(&[])
        .removes_finalizers(&[])
        .uncounted_failed(&[])
        .failed_indexes("")
        .requeue_after(5),
        row(
            "back-off over: the index is recreated, the failed pod still waits",
            per_index(1),
            [
                pod("a").index(0).failed_at(5),
                pod("b").index(1).running(),
                pod("c").index(2).running(),
            ],
            15,
        )
        .creates(&[Some(0)])
        .removes_finalizers(&[]),
        row(
            "the replacement exists: the failed pod is counted and let go",
            per_index(1),
            [
                pod("a").index(0).failed_at(5),
                pod("a2").index(0).index_failures(1).running(),
                pod("b").index(1).running(),
                pod("c").index(2).running(),
            ],
            20,
        )
        .creates(&[])
        .removes_finalizers(&["a"])
        .uncounted_failed(&["a"])
        .failed_indexes(""),
        row(
            "the index's last allowed attempt fails: the index is failed, not retried",
            per_index(1).failed(1),
            [
                pod("a2").index(0).index_failures(1).failed_at(30),
                pod("b").index(1).running(),
                pod("c").index(2).running(),
            ],
            100,
        )
        .creates(&[])
        .failed_indexes("0")
        .uncounted_failed(&["a2"])
        .removes_finalizers(&["a2"])
        .conditions(&[]),
        row(
            "every index completed or failed, some failed: FailedIndexes",
            per_index(1)
                .failed(2)
                .failed_indexes("0")
                .completed_indexes("1")
                .succeeded(1),
            [pod("c").index(2).succeeded_at(40)],
            100,
        )
        .conditions(&[(FAILURE_TARGET, "True", REASON_FAILED_INDEXES)])
        .messages(&[MESSAGE_FAILED_INDEXES])
        .completed_indexes("1,2")
        .failed_indexes("0"),
        row(
            "more than maxFailedIndexes failed: MaxFailedIndexesExceeded at once, the rest deleted",
            JobBuilder::indexed(4, 4)
                .backoff_limit_per_index(0)
                .max_failed_indexes(1)
                .failed_indexes("0")
                .failed(1)
                .started(0),
            [
                pod("b").index(1).failed_at(30),
                pod("c").index(2).running(),
                pod("d").index(3).running(),
            ],
            100,
        )
        .conditions(&[(FAILURE_TARGET, "True", REASON_MAX_FAILED_INDEXES_EXCEEDED)])
        .messages(&[MESSAGE_MAX_FAILED_INDEXES_EXCEEDED])
        .failed_indexes("0,1")
        .deletes(&[("c", JobFinishing), ("d", JobFinishing)]),
        row(
            "at maxFailedIndexes, not beyond: the Job runs on",
            JobBuilder::indexed(4, 4)
                .backoff_limit_per_index(0)
                .max_failed_indexes(1)
                .started(0),
            [
                pod("a").index(0).failed_at(30),
                pod("b").index(1).running(),
                pod("c").index(2).running(),
                pod("d").index(3).running(),
            ],
            100,
        )
        .conditions(&[])
        .failed_indexes("0")
        .creates(&[]),
        row(
            "FailIndex: the index fails on its first failure",
            per_index(5).pod_failure_policy(json!([exit_rule("FailIndex", &[7])])),
            [
                pod("a").index(0).exit_code(7, 5),
                pod("b").index(1).running(),
                pod("c").index(2).running(),
            ],
            100,
        )
        .failed_indexes("0")
        .uncounted_failed(&["a"])
        .creates(&[])
        .conditions(&[]),
        row(
            "an ignored failure does not bring the index closer to its limit",
            per_index(0).pod_failure_policy(json!([exit_rule("Ignore", &[143])])),
            [
                pod("a").index(0).exit_code(143, 5),
                pod("b").index(1).running(),
                pod("c").index(2).running(),
            ],
            100,
        )
        .failed_indexes("")
        .creates(&[Some(0)])
        .uncounted_failed(&[]),
    ]);
}

#[test]
fn replacements_carry_the_index_failure_counts() {
    let annotation = |key| ["metadata", "annotations", key];
    table([
        row(
            "a new Job: every pod starts with no failures",
            per_index(2),
            [],
            0,
        )
        .created_pods_have(&annotation(INDEX_FAILURE_COUNT_KEY), &[Some("0"); 3])
        .created_pods_have(&annotation(INDEX_IGNORED_FAILURE_COUNT_KEY), &[None; 3]),
        row(
            "a counted failure: the replacement carries it",
            per_index(2),
            [
                pod("a").index(0).index_failures(1).failed_at(5),
                pod("b").index(1).running(),
                pod("c").index(2).running(),
            ],
            100,
        )
        .created_pods_have(&annotation(COMPLETION_INDEX_KEY), &[Some("0")])
        .created_pods_have(&annotation(INDEX_FAILURE_COUNT_KEY), &[Some("2")]),
        row(
            "an ignored failure: counted apart",
            per_index(2).pod_failure_policy(json!([exit_rule("Ignore", &[143])])),
            [
                pod("a").index(0).index_failures(1).exit_code(143, 5),
                pod("b").index(1).running(),
                pod("c").index(2).running(),
            ],
            100,
        )
        .created_pods_have(&annotation(INDEX_FAILURE_COUNT_KEY), &[Some("1")])
        .created_pods_have(&annotation(INDEX_IGNORED_FAILURE_COUNT_KEY), &[Some("1")]),
    ]);
}

#[test]
fn per_index_backoff_doubles_with_the_index_failures() {
    // Two earlier failures of index 0 (one ignored): the third waits 40 s.
    let job = || per_index(5).pod_failure_policy(json!([exit_rule("Ignore", &[143])]));
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

    table([
        row("40 s after the index's third failure", job(), pods(), 30)
            .creates(&[])
            .requeue_after(20),
        row("and then it is recreated", job(), pods(), 50).creates(&[Some(0)]),
    ]);
}

#[test]
fn every_planned_status_passes_the_status_rules() {
    // The runner checks every row's planned status as the executor would (it refuses a status
    // the rules reject); these rows, one a policy, are here for that check alone.
    table([
        row(
            "a FailJob rule met",
            named_rules(),
            [pod("a").exit_code(2, 5)],
            10,
        ),
        row(
            "an index failed beside a completed one",
            per_index(0),
            [
                pod("a").index(0).failed_at(5),
                pod("b").index(1).succeeded_at(5),
                pod("c").index(2).running(),
            ],
            10,
        ),
        row(
            "the success policy met while a worker runs",
            leader(3),
            [
                pod("a").index(0).succeeded_at(5),
                pod("b").index(1).running(),
            ],
            10,
        ),
    ]);
}
