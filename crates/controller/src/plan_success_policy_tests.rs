//! Tables over `plan` for KEP-3998's success policy, and for which policy wins when a success
//! rule and a failure are met in one sync. The Jobs' builders are in `plan_policy_tests.rs`; the
//! runner is `plan_table.rs`.

use jobwarden_rules::condition::*;
use jobwarden_rules::well_known::*;
use serde_json::json;

use super::{exit_rule, leader};
use crate::plan::DeleteReason::*;
use crate::plan::tests::table::{row, table};
use crate::testing::*;

#[test]
fn success_policy() {
    let met = (SUCCESS_CRITERIA_MET, "True", REASON_SUCCESS_POLICY);

    table([
        row(
            "indexes only: the leader succeeded, the workers are deleted",
            leader(3),
            [
                pod("a").index(0).succeeded_at(5),
                pod("b").index(1).ready(),
                pod("c").index(2).running(),
            ],
            10,
        )
        .conditions(&[met])
        .messages(&["Matched rules at index 0"])
        .completed_indexes("0")
        .succeeded(1)
        .deletes(&[("b", JobFinishing), ("c", JobFinishing)])
        .creates(&[])
        .active(0)
        .ready(0)
        .terminating(2)
        // Upstream lets the lingering pods go uncounted once the Job has succeeded: they
        // neither failed nor succeeded.
        .uncounted_failed(&[])
        .removes_finalizers(&["a", "b", "c"])
        .not_finished(),
        row(
            "indexes only: a worker's success is not enough",
            leader(3),
            [
                pod("a").index(0).running(),
                pod("b").index(1).succeeded_at(5),
                pod("c").index(2).running(),
            ],
            10,
        )
        .conditions(&[])
        .completed_indexes("1")
        .deletes(&[]),
        row(
            "count only: two of any indexes",
            JobBuilder::indexed(4, 4)
                .success_rules(&[(None, Some(2))])
                .started(0)
                .completed_indexes("3")
                .succeeded(1),
            [
                pod("a").index(0).running(),
                pod("b").index(1).succeeded_at(5),
                pod("c").index(2).running(),
            ],
            10,
        )
        .conditions(&[met])
        .completed_indexes("1,3"),
        row(
            "both (story 2): the second rule, five of the workers",
            JobBuilder::indexed(10, 10)
                .success_rules(&[(Some("0"), Some(1)), (Some("1-9"), Some(5))])
                .started(0)
                .completed_indexes("1-4")
                .succeeded(4),
            [
                pod("a").index(0).running(),
                pod("f").index(5).succeeded_at(5),
            ],
            10,
        )
        .conditions(&[met])
        .messages(&["Matched rules at index 1"])
        .completed_indexes("1-5")
        .deletes(&[("a", JobFinishing)]),
        row(
            "both: four of the workers is not enough",
            JobBuilder::indexed(10, 10)
                .success_rules(&[(Some("0"), Some(1)), (Some("1-9"), Some(5))])
                .started(0)
                .completed_indexes("1-3")
                .succeeded(3),
            [pod("f").index(5).succeeded_at(5)],
            10,
        )
        .conditions(&[])
        .completed_indexes("1-3,5"),
        row(
            "SuccessCriteriaMet stored, a worker still terminating: not Complete yet",
            leader(3).completed_indexes("0").succeeded(1).condition(
                SUCCESS_CRITERIA_MET,
                "True",
                REASON_SUCCESS_POLICY,
                10,
            ),
            [pod("b").index(1).running().deleting_at(10).no_finalizer()],
            20,
        )
        .conditions(&[met])
        .terminating(1)
        .not_finished(),
        row(
            "SuccessCriteriaMet stored, no pod left: Complete with the same reason",
            leader(3)
                .completed_indexes("0")
                .succeeded(1)
                .failed(2)
                .condition(SUCCESS_CRITERIA_MET, "True", REASON_SUCCESS_POLICY, 10),
            [pod("a").index(0).succeeded_at(5).no_finalizer()],
            20,
        )
        .conditions(&[met, (COMPLETE, "True", REASON_SUCCESS_POLICY)])
        .completion_time(20)
        .finished(REASON_SUCCESS_POLICY)
        .events(&["Completed"]),
        row(
            "all indexes succeeded at once: the first rule that holds gives the reason",
            JobBuilder::indexed(2, 2)
                .success_rules(&[(None, Some(2)), (Some("0"), None)])
                .started(0),
            [
                pod("a").index(0).succeeded_at(5),
                pod("b").index(1).succeeded_at(5),
            ],
            10,
        )
        .conditions(&[met])
        .messages(&["Matched rules at index 0"]),
    ]);
}

#[test]
fn failure_policies_win_over_the_success_policy() {
    table([
        row(
            "a FailJob rule and the success rule met in one sync: the Job fails",
            leader(3)
                .pod_failure_policy(json!([exit_rule("FailJob", &[2])]))
                .rule_names(&[Some("ExitCode2")]),
            [
                pod("a").index(0).succeeded_at(5),
                pod("b").index(1).exit_code(2, 5),
                pod("c").index(2).running(),
            ],
            10,
        )
        .conditions(&[(FAILURE_TARGET, "True", "PodFailurePolicy_ExitCode2")]),
        row(
            "the back-off limit and the success rule in one sync: the Job fails",
            leader(3).backoff_limit(0),
            [
                pod("a").index(0).succeeded_at(5),
                pod("b").index(1).failed_at(5),
                pod("c").index(2).running(),
            ],
            10,
        )
        .conditions(&[(FAILURE_TARGET, "True", REASON_BACKOFF_LIMIT_EXCEEDED)]),
        row(
            "failed indexes and the success rule in one sync: the Job fails",
            leader(2).backoff_limit_per_index(0),
            [
                pod("a").index(0).succeeded_at(5),
                pod("b").index(1).failed_at(5),
            ],
            10,
        )
        .conditions(&[(FAILURE_TARGET, "True", REASON_FAILED_INDEXES)]),
        row(
            "once SuccessCriteriaMet is stored a FailJob match changes nothing: Complete follows",
            leader(3)
                .pod_failure_policy(json!([exit_rule("FailJob", &[2])]))
                .completed_indexes("0")
                .succeeded(1)
                .condition(SUCCESS_CRITERIA_MET, "True", REASON_SUCCESS_POLICY, 10),
            [pod("b").index(1).exit_code(2, 12)],
            20,
        )
        .conditions(&[(SUCCESS_CRITERIA_MET, "True", REASON_SUCCESS_POLICY)])
        .uncounted_failed(&["b"])
        .removes_finalizers(&["b"])
        .not_finished(),
        row(
            "... and the pass after, Complete",
            leader(3)
                .pod_failure_policy(json!([exit_rule("FailJob", &[2])]))
                .completed_indexes("0")
                .succeeded(1)
                .failed(1)
                .condition(SUCCESS_CRITERIA_MET, "True", REASON_SUCCESS_POLICY, 10),
            [pod("b").index(1).exit_code(2, 12).no_finalizer()],
            30,
        )
        .conditions(&[
            (SUCCESS_CRITERIA_MET, "True", REASON_SUCCESS_POLICY),
            (COMPLETE, "True", REASON_SUCCESS_POLICY),
        ])
        .finished(REASON_SUCCESS_POLICY),
    ]);
}
