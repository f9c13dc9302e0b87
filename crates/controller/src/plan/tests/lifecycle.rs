//! Tables over `plan` for the Job's course: completion, failure, the active deadline, suspend
//! and resume, a Job being deleted or already finished, and when the status is written at all.
//! The pods' tables are `pods.rs`; the runner is `testing::plan_table`.

use jobwarden_rules::condition::*;
use jobwarden_rules::well_known::*;

use crate::plan::DeleteReason::*;
use crate::testing::plan_table::{row, table};
use crate::testing::*;

#[test]
fn completion_waits_for_every_pod() {
    let scm = (SUCCESS_CRITERIA_MET, "True", REASON_COMPLETIONS_REACHED);
    let complete = (COMPLETE, "True", REASON_COMPLETIONS_REACHED);

    table([
        row(
            "completions reached: SuccessCriteriaMet at once",
            JobBuilder::non_indexed(2, 2).started(0).succeeded(2),
            [
                pod("a").succeeded_at(5).no_finalizer(),
                pod("b").succeeded_at(6).no_finalizer(),
            ],
            10,
        )
        .conditions(&[scm])
        .no_completion_time()
        .creates(&[])
        .not_finished()
        .requeue_after(0),
        row(
            "completions reached with uncounted pods: SuccessCriteriaMet still at once",
            JobBuilder::non_indexed(2, 2).started(0).succeeded(1),
            [
                pod("a").succeeded_at(5).no_finalizer(),
                pod("b").succeeded_at(6),
            ],
            10,
        )
        .conditions(&[scm])
        .uncounted_succeeded(&["b"])
        .removes_finalizers(&["b"]),
        row(
            "completions reached with one pod too many: it is deleted and success declared",
            JobBuilder::non_indexed(2, 3).started(0).succeeded(2),
            [pod("c").running()],
            10,
        )
        .deletes(&[("c", Excess)])
        .conditions(&[scm])
        .active(0)
        .terminating(1),
        row(
            "SuccessCriteriaMet stored, nothing left: Complete and completionTime",
            JobBuilder::non_indexed(2, 2)
                .started(0)
                .succeeded(2)
                .condition(SUCCESS_CRITERIA_MET, "True", REASON_COMPLETIONS_REACHED, 10),
            [pod("a").succeeded_at(5).no_finalizer()],
            20,
        )
        .conditions(&[scm, complete])
        .completion_time(20)
        .events(&["Completed"])
        .finished(REASON_COMPLETIONS_REACHED)
        .active(0)
        .terminating(0),
        row(
            "SuccessCriteriaMet stored, a pod still terminating: not Complete yet",
            JobBuilder::non_indexed(2, 2)
                .started(0)
                .succeeded(2)
                .condition(SUCCESS_CRITERIA_MET, "True", REASON_COMPLETIONS_REACHED, 10),
            [pod("c").running().deleting_at(9).no_finalizer()],
            20,
        )
        .conditions(&[scm])
        .no_completion_time()
        .terminating(1)
        .not_finished(),
        row(
            "SuccessCriteriaMet stored, a pod still uncounted: not Complete yet",
            JobBuilder::non_indexed(2, 2)
                .started(0)
                .succeeded(1)
                .condition(SUCCESS_CRITERIA_MET, "True", REASON_COMPLETIONS_REACHED, 10),
            [pod("b").succeeded_at(6)],
            20,
        )
        .conditions(&[scm])
        .uncounted_succeeded(&["b"])
        .not_finished(),
        row(
            "indexed: all indexes completed",
            JobBuilder::indexed(3, 3)
                .started(0)
                .completed_indexes("0,1")
                .succeeded(2),
            [pod("c").index(2).succeeded_at(5)],
            10,
        )
        .conditions(&[scm])
        .completed_indexes("0-2")
        .succeeded(3),
        row(
            "indexed: one index missing, not complete",
            JobBuilder::indexed(3, 3)
                .started(0)
                .completed_indexes("0,1")
                .succeeded(2),
            [pod("c").index(2).running()],
            10,
        )
        .conditions(&[])
        .not_finished(),
        row(
            "work queue: first success completes once nothing runs",
            JobBuilder::work_queue(2).started(0),
            [pod("a").succeeded_at(5), pod("b").succeeded_at(6)],
            10,
        )
        .conditions(&[scm]),
    ]);
}

#[test]
fn failure_targets_first_then_fails_once_pods_are_gone() {
    let target = (FAILURE_TARGET, "True", REASON_BACKOFF_LIMIT_EXCEEDED);
    let failed = (FAILED, "True", REASON_BACKOFF_LIMIT_EXCEEDED);

    table([
        row(
            "backoff limit exceeded: FailureTarget, running pods deleted and counted failed",
            JobBuilder::non_indexed(5, 2)
                .backoff_limit(1)
                .started(0)
                .failed(1),
            [pod("a").failed_at(5), pod("b").ready()],
            100,
        )
        .conditions(&[target])
        .deletes(&[("b", JobFinishing)])
        .uncounted_failed(&["a", "b"])
        .removes_finalizers(&["a", "b"])
        .active(0)
        .ready(0)
        .terminating(1)
        .creates(&[])
        .not_finished(),
        row(
            "at the backoff limit, not beyond: the pod is replaced",
            JobBuilder::non_indexed(5, 1)
                .backoff_limit(1)
                .started(0)
                .failed(1),
            [pod("a").failed_at(5).no_finalizer()],
            100,
        )
        .conditions(&[])
        .creates(&[None]),
        row(
            "FailureTarget stored, pods still terminating: not Failed yet",
            JobBuilder::non_indexed(5, 2)
                .backoff_limit(1)
                .started(0)
                .failed(3)
                .condition(FAILURE_TARGET, "True", REASON_BACKOFF_LIMIT_EXCEEDED, 10),
            [pod("b").running().deleting_at(10).no_finalizer()],
            20,
        )
        .conditions(&[target])
        .terminating(1)
        .not_finished()
        .creates(&[]),
        row(
            "FailureTarget stored, no pod left: Failed, no completionTime",
            JobBuilder::non_indexed(5, 2)
                .backoff_limit(1)
                .started(0)
                .failed(3)
                .condition(FAILURE_TARGET, "True", REASON_BACKOFF_LIMIT_EXCEEDED, 10),
            [pod("a").failed_at(5).no_finalizer()],
            20,
        )
        .conditions(&[target, failed])
        .no_completion_time()
        .events(&[REASON_BACKOFF_LIMIT_EXCEEDED])
        .finished(REASON_BACKOFF_LIMIT_EXCEEDED)
        .terminating(0),
        row(
            "indexed: backoff limit exceeded",
            JobBuilder::indexed(3, 2).backoff_limit(0).started(0),
            [pod("a").index(0).failed_at(5), pod("b").index(1).running()],
            100,
        )
        .conditions(&[target])
        .deletes(&[("b", JobFinishing)])
        .uncounted_failed(&["a", "b"]),
        row(
            "restartPolicy OnFailure: restarts count against the limit",
            JobBuilder::non_indexed(1, 1)
                .restart_on_failure()
                .backoff_limit(2)
                .started(0),
            [pod("a").restarts(2)],
            100,
        )
        .conditions(&[target]),
        row(
            "restartPolicy OnFailure: fewer restarts than the limit",
            JobBuilder::non_indexed(1, 1)
                .restart_on_failure()
                .backoff_limit(3)
                .started(0),
            [pod("a").restarts(2)],
            100,
        )
        .conditions(&[]),
    ]);
}

#[test]
fn active_deadline() {
    let target = (FAILURE_TARGET, "True", REASON_DEADLINE_EXCEEDED);

    table([
        row(
            "deadline passed: FailureTarget DeadlineExceeded, pods deleted",
            JobBuilder::non_indexed(3, 1).deadline(30).started(0),
            [pod("a").running()],
            30,
        )
        .conditions(&[target])
        .deletes(&[("a", JobFinishing)]),
        row(
            "deadline ahead: look again when it falls",
            JobBuilder::non_indexed(3, 1)
                .deadline(30)
                .started(0)
                .active(1)
                .ready(0)
                .terminating(0),
            [pod("a").running()],
            12,
        )
        .conditions(&[])
        .requeue_after(18)
        .no_status_write(),
        row(
            "suspended: the deadline does not run",
            JobBuilder::non_indexed(3, 1)
                .deadline(30)
                .suspend(true)
                .started(0),
            [],
            1000,
        )
        .conditions(&[(SUSPENDED, "True", REASON_JOB_SUSPENDED)]),
        row(
            "after a resume the deadline counts from the resume",
            JobBuilder::non_indexed(3, 1)
                .deadline(30)
                .started(100)
                .condition(SUSPENDED, "False", REASON_JOB_RESUMED, 100),
            [pod("a").running()],
            120,
        )
        .conditions(&[(SUSPENDED, "False", REASON_JOB_RESUMED)])
        .requeue_after(10),
    ]);
}

#[test]
fn suspend_and_resume() {
    let suspended = (SUSPENDED, "True", REASON_JOB_SUSPENDED);
    let resumed = (SUSPENDED, "False", REASON_JOB_RESUMED);

    table([
        row(
            "suspending a running Job deletes its pods without counting them",
            JobBuilder::non_indexed(4, 2)
                .suspend(true)
                .started(0)
                .active(2),
            [pod("a").ready(), pod("b").running()],
            50,
        )
        .deletes(&[("a", Suspended), ("b", Suspended)])
        .removes_finalizers(&["a", "b"])
        .uncounted_failed(&[])
        .failed(0)
        .active(0)
        .ready(0)
        .terminating(2)
        .conditions(&[suspended])
        .events(&["Suspended"])
        // Upstream clears startTime with Suspended=True (MutableSchedulingDirectivesFor-
        // SuspendedJobs, on by default in v1.36); resuming sets it again.
        .no_start_time(),
        row(
            "created suspended: no pods, no startTime",
            JobBuilder::indexed(3, 3).suspend(true),
            [],
            0,
        )
        .creates(&[])
        .conditions(&[suspended])
        .no_start_time()
        .events(&["Suspended"]),
        row(
            "still suspended: nothing to do",
            JobBuilder::non_indexed(3, 1)
                .suspend(true)
                .active(0)
                .ready(0)
                .terminating(0)
                .succeeded(0)
                .failed(0)
                .condition(SUSPENDED, "True", REASON_JOB_SUSPENDED, 0),
            [],
            100,
        )
        .no_status_write()
        .events(&[])
        .creates(&[]),
        row(
            "resuming: Suspended=False, startTime reset, pods created",
            JobBuilder::non_indexed(3, 2).started(0).condition(
                SUSPENDED,
                "True",
                REASON_JOB_SUSPENDED,
                10,
            ),
            [],
            100,
        )
        .conditions(&[resumed])
        .start_time(100)
        .events(&["Resumed"])
        .creates(&[None, None]),
        row(
            "first resume of a Job created suspended: startTime set",
            JobBuilder::non_indexed(3, 1).condition(SUSPENDED, "True", REASON_JOB_SUSPENDED, 10),
            [],
            100,
        )
        .conditions(&[resumed])
        .start_time(100),
        row(
            "indexed: completed indexes still count after resume",
            JobBuilder::indexed(3, 3)
                .started(0)
                .completed_indexes("0")
                .succeeded(1)
                .condition(SUSPENDED, "True", REASON_JOB_SUSPENDED, 10),
            [pod("a").index(0).succeeded_at(5).no_finalizer()],
            100,
        )
        .creates(&[Some(1), Some(2)])
        .completed_indexes("0")
        .succeeded(1),
        row(
            "never suspended: no Suspended condition",
            JobBuilder::non_indexed(3, 1),
            [],
            0,
        )
        .conditions(&[])
        .events(&[]),
    ]);
}

#[test]
fn deleted_and_finished_jobs_let_their_pods_go() {
    table([
        row(
            "Job being deleted: finalizers removed, nothing created",
            JobBuilder::non_indexed(3, 2).started(0).deleting(),
            [pod("a").running(), pod("b").failed_at(5)],
            100,
        )
        .creates(&[])
        .removes_finalizers(&["a", "b"])
        .uncounted_failed(&["b"]),
        row(
            "finished Job: stray finalizers removed, status untouched",
            JobBuilder::non_indexed(1, 1)
                .started(0)
                .succeeded(1)
                .condition(SUCCESS_CRITERIA_MET, "True", REASON_COMPLETIONS_REACHED, 5)
                .condition(COMPLETE, "True", REASON_COMPLETIONS_REACHED, 6),
            [pod("a").succeeded_at(5)],
            100,
        )
        .no_status_write()
        .removes_finalizers(&["a"])
        .creates(&[]),
    ]);
}

#[test]
fn writes_status_only_when_it_changes() {
    table([
        row(
            "steady state",
            JobBuilder::non_indexed(3, 1)
                .started(0)
                .active(1)
                .ready(1)
                .terminating(0)
                .succeeded(0)
                .failed(0),
            [pod("a").ready()],
            100,
        )
        .no_status_write(),
        row(
            "ready changed",
            JobBuilder::non_indexed(3, 1)
                .started(0)
                .active(1)
                .ready(0)
                .terminating(0),
            [pod("a").ready()],
            100,
        )
        .writes_status()
        .ready(1),
    ]);
}
