//! Tables over `plan` for KEP-3998's success policy, and for which policy wins when a success
//! rule and a failure are met in one sync. The Jobs' builders are in `policy.rs`; the
//! runner is `testing::plan_table`.

use jobwarden_rules::condition::*;
use jobwarden_rules::well_known::*;
use serde_json::json;

use super::policy::{exit_rule, leader};
use crate::plan::DeleteReason::*;
use crate::testing::plan_table::{row, table};
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

/// The leader/workers Job of KEP-3998's open questions: index 0 decides, reason
/// `LeaderSucceeded`, and the workers' pods do what `when` says once it has.
fn leader_with(when: &str) -> JobBuilder {
    leader(3).success_rule_settings(&[Some("LeaderSucceeded")], &[Some(when)])
}

/// ... as stored once the leader succeeded at 10 s: `SuccessCriteriaMet`, naming rule 0.
fn leader_met(when: &str) -> JobBuilder {
    leader_with(when)
        .completed_indexes("0")
        .succeeded(1)
        .condition_with_message(
            SUCCESS_CRITERIA_MET,
            "True",
            "LeaderSucceeded",
            "Matched rules at index 0",
            10,
        )
}

const LEADER_MET: (&str, &str, &str) = (SUCCESS_CRITERIA_MET, "True", "LeaderSucceeded");
const LEADER_COMPLETE: (&str, &str, &str) = (COMPLETE, "True", "LeaderSucceeded");

#[test]
fn a_reason_per_success_rule() {
    let two_reasons = || {
        JobBuilder::indexed(10, 10)
            .success_rules(&[(Some("0"), None), (Some("1-9"), Some(5))])
            .success_rule_settings(&[Some("LeaderSucceeded"), Some("WorkersSucceeded")], &[])
            .started(0)
    };
    table([
        row(
            "the rule's reason on SuccessCriteriaMet, the message still names the rule",
            leader_with("Terminate"),
            [
                pod("a").index(0).succeeded_at(5),
                pod("b").index(1).running(),
            ],
            10,
        )
        .conditions(&[LEADER_MET])
        .messages(&["Matched rules at index 0"])
        .deletes(&[("b", JobFinishing)]),
        row(
            "two rules, two reasons: five workers give WorkersSucceeded",
            two_reasons().completed_indexes("1-4").succeeded(4),
            [
                pod("a").index(0).running(),
                pod("f").index(5).succeeded_at(5),
            ],
            10,
        )
        .conditions(&[(SUCCESS_CRITERIA_MET, "True", "WorkersSucceeded")])
        .messages(&["Matched rules at index 1"]),
        row(
            "two rules, two reasons: the leader gives LeaderSucceeded",
            two_reasons(),
            [pod("a").index(0).succeeded_at(5)],
            10,
        )
        .conditions(&[LEADER_MET]),
        row(
            "a rule without a reason in the list: upstream's SuccessPolicy",
            JobBuilder::indexed(3, 3)
                .success_rules(&[(Some("2"), None), (Some("0"), None)])
                .success_rule_settings(&[Some("Other")], &[])
                .started(0),
            [pod("a").index(0).succeeded_at(5)],
            10,
        )
        .conditions(&[(SUCCESS_CRITERIA_MET, "True", REASON_SUCCESS_POLICY)])
        .messages(&["Matched rules at index 1"]),
        row(
            "Complete carries the rule's reason and message",
            leader_met("Terminate"),
            [pod("a").index(0).succeeded_at(5).no_finalizer()],
            20,
        )
        .conditions(&[LEADER_MET, LEADER_COMPLETE])
        .messages(&["Matched rules at index 0", "Matched rules at index 0"])
        .completion_time(20)
        .finished("LeaderSucceeded"),
    ]);
}

#[test]
fn when_achieved_continue() {
    table([
        row(
            "the leader succeeded: SuccessCriteriaMet, the workers keep running",
            leader_with("Continue"),
            [
                pod("a").index(0).succeeded_at(5),
                pod("b").index(1).ready(),
                pod("c").index(2).running(),
            ],
            10,
        )
        .conditions(&[LEADER_MET])
        .deletes(&[])
        .creates(&[])
        .active(2)
        .ready(1)
        .terminating(0)
        .completed_indexes("0")
        .removes_finalizers(&["a"])
        .not_finished(),
        row(
            "a worker succeeds: counted in succeeded and completedIndexes",
            leader_met("Continue"),
            [
                pod("a").index(0).succeeded_at(5).no_finalizer(),
                pod("b").index(1).succeeded_at(15),
                pod("c").index(2).running(),
            ],
            20,
        )
        .conditions(&[LEADER_MET])
        .completed_indexes("0,1")
        .succeeded(2)
        .active(1)
        .removes_finalizers(&["b"])
        .not_finished(),
        row(
            "a worker fails: counted in failed, not replaced, no back-off limit",
            leader_met("Continue").backoff_limit(0),
            [
                pod("a").index(0).succeeded_at(5).no_finalizer(),
                pod("b").index(1).failed_at(15),
                pod("c").index(2).running(),
            ],
            20,
        )
        .conditions(&[LEADER_MET])
        .uncounted_failed(&["b"])
        .removes_finalizers(&["b"])
        .creates(&[])
        .deletes(&[])
        .active(1)
        .not_finished(),
        row(
            "a FailJob match is a plain failure: no rule acts any more",
            leader_met("Continue").pod_failure_policy(json!([exit_rule("FailJob", &[2])])),
            [
                pod("b").index(1).exit_code(2, 15),
                pod("c").index(2).running(),
            ],
            20,
        )
        .conditions(&[LEADER_MET])
        .uncounted_failed(&["b"])
        .deletes(&[])
        .not_finished(),
        row(
            "the last worker is counted: Complete LeaderSucceeded",
            leader_met("Continue")
                .completed_indexes("0,1")
                .succeeded(2)
                .failed(1),
            [
                pod("b").index(1).succeeded_at(15).no_finalizer(),
                pod("c").index(2).failed_at(25).no_finalizer(),
            ],
            30,
        )
        .conditions(&[LEADER_MET, LEADER_COMPLETE])
        .succeeded(2)
        .failed(1)
        .completion_time(30)
        .finished("LeaderSucceeded"),
        row(
            "backoffLimitPerIndex: a failed worker's index fails for good, it has no retry",
            leader_met("Continue").backoff_limit_per_index(1),
            [pod("b").index(1).failed_at(15), pod("c").index(2).running()],
            20,
        )
        .conditions(&[LEADER_MET])
        .failed_indexes("1")
        .uncounted_failed(&["b"])
        .removes_finalizers(&["b"])
        .creates(&[])
        .not_finished(),
        row(
            "backoffLimitPerIndex: an index another pod still runs is not failed",
            leader_met("Continue").backoff_limit_per_index(1),
            [
                pod("b").index(1).failed_at(5).no_finalizer(),
                pod("b2").index(1).running(),
                pod("c").index(2).failed_at(15),
            ],
            20,
        )
        .failed_indexes("2")
        .active(1),
        row(
            "activeDeadlineSeconds ahead: look again then",
            leader_met("Continue").deadline(60),
            [pod("c").index(2).running()],
            20,
        )
        .deletes(&[])
        .requeue_after(40),
        row(
            "activeDeadlineSeconds passed: the workers are deleted, no FailureTarget",
            leader_met("Continue").deadline(30),
            [pod("c").index(2).running()],
            40,
        )
        .conditions(&[LEADER_MET])
        .deletes(&[("c", LingeringEnded)])
        .events(&["LingeringPodsDeleted"])
        .active(0)
        .terminating(1)
        .not_finished(),
        row(
            "... and once they are gone, Complete",
            leader_met("Continue").deadline(30),
            [pod("c")
                .index(2)
                .failed_at(40)
                .deleting_at(40)
                .no_finalizer()],
            41,
        )
        .conditions(&[LEADER_MET, LEADER_COMPLETE])
        .finished("LeaderSucceeded"),
        row(
            "suspended: the workers are deleted; startTime stays, no Suspended condition",
            leader_met("Continue").suspend(true),
            [pod("c").index(2).running()],
            20,
        )
        .conditions(&[LEADER_MET])
        .deletes(&[("c", LingeringEnded)])
        .events(&["LingeringPodsDeleted"])
        .start_time(0),
        row(
            "a SuccessCriteriaMet whose message names no rule: Terminate",
            leader_with("Continue")
                .completed_indexes("0")
                .succeeded(1)
                .condition(SUCCESS_CRITERIA_MET, "True", "LeaderSucceeded", 10),
            [pod("c").index(2).running()],
            20,
        )
        .deletes(&[("c", JobFinishing)]),
    ]);
}

#[test]
fn when_achieved_continue_with_recreations() {
    table([
        row(
            "the leader succeeded: the workers keep running, an index not yet run is started",
            leader_with("ContinueWithRecreations"),
            [
                pod("a").index(0).succeeded_at(5),
                pod("b").index(1).running(),
            ],
            10,
        )
        .conditions(&[LEADER_MET])
        .deletes(&[])
        .creates(&[Some(2)])
        .active(2),
        row(
            "a worker fails: counted, its replacement waits out the back-off",
            leader_met("ContinueWithRecreations"),
            [pod("b").index(1).failed_at(15), pod("c").index(2).running()],
            15,
        )
        .conditions(&[LEADER_MET])
        .uncounted_failed(&["b"])
        .creates(&[])
        .backoff_failures(1)
        .not_finished(),
        row(
            "nothing running while a replacement waits: not Complete",
            leader_met("ContinueWithRecreations").failed(1),
            [pod("b").index(1).failed_at(15).no_finalizer()],
            16,
        )
        .conditions(&[LEADER_MET])
        .creates(&[])
        .requeue_after(9)
        .not_finished(),
        row(
            "the back-off is over: the worker's index is run again",
            leader_met("ContinueWithRecreations").failed(1),
            [pod("b").index(1).failed_at(15).no_finalizer()],
            25,
        )
        .conditions(&[LEADER_MET])
        .creates(&[Some(1), Some(2)])
        .active(2),
        row(
            "the back-off limit exceeded: the workers are deleted, no FailureTarget",
            leader_met("ContinueWithRecreations").backoff_limit(0),
            [pod("b").index(1).failed_at(15), pod("c").index(2).running()],
            20,
        )
        .conditions(&[LEADER_MET])
        .deletes(&[("c", LingeringEnded)])
        .events(&["LingeringPodsDeleted"])
        .creates(&[])
        .uncounted_failed(&["b"])
        .not_finished(),
        row(
            "a FailJob match: the workers are deleted, no FailureTarget",
            leader_met("ContinueWithRecreations")
                .pod_failure_policy(json!([exit_rule("FailJob", &[2])])),
            [
                pod("b").index(1).exit_code(2, 15),
                pod("c").index(2).running(),
            ],
            20,
        )
        .conditions(&[LEADER_MET])
        .deletes(&[("c", LingeringEnded)]),
        row(
            "backoffLimitPerIndex: an index past its limit fails, the others run on",
            leader_met("ContinueWithRecreations").backoff_limit_per_index(1),
            [
                pod("b").index(1).failed_at(15).index_failures(1),
                pod("c").index(2).running(),
            ],
            20,
        )
        .conditions(&[LEADER_MET])
        .failed_indexes("1")
        .deletes(&[])
        .creates(&[])
        .not_finished(),
        row(
            "maxFailedIndexes exceeded: the workers are deleted",
            leader_met("ContinueWithRecreations")
                .backoff_limit_per_index(0)
                .max_failed_indexes(0),
            [pod("b").index(1).failed_at(15), pod("c").index(2).running()],
            20,
        )
        .conditions(&[LEADER_MET])
        .failed_indexes("1")
        .deletes(&[("c", LingeringEnded)]),
        row(
            "every worker done: Complete LeaderSucceeded",
            leader_met("ContinueWithRecreations")
                .completed_indexes("0-2")
                .succeeded(3)
                .failed(1),
            [
                pod("b").index(1).succeeded_at(30).no_finalizer(),
                pod("c").index(2).succeeded_at(30).no_finalizer(),
            ],
            31,
        )
        .conditions(&[LEADER_MET, LEADER_COMPLETE])
        .finished("LeaderSucceeded"),
    ]);
}
