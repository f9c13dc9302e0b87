//! Tables over `plan` for the pods: which are created (and how), which are removed, how each
//! outcome is recorded before its finalizer goes, and how failed pods are replaced. A Job in one
//! line, its pods in the next, the expected plan after; one `#[test]` a concern, one row a case.
//! The runner is `testing::plan_table`; the Job's course is in `lifecycle.rs` and the
//! policies in `policy.rs`.

use jobwarden_rules::well_known::TRACKING_FINALIZER;

use crate::plan::backoff::BackoffRecord;
use crate::plan::{DeleteReason::*, InFlight};
use crate::testing::plan_table::{row, table};
use crate::testing::*;

#[test]
fn creates_pods_up_to_parallelism_and_remaining_completions() {
    table([
        row("non-indexed, new", JobBuilder::non_indexed(3, 2), [], 0)
            .creates(&[None, None])
            .active(2)
            .ready(0)
            .terminating(0)
            .start_time(0),
        row("indexed, new", JobBuilder::indexed(3, 2), [], 0)
            .creates(&[Some(0), Some(1)])
            .active(2)
            .completed_indexes(""),
        row(
            "non-indexed, fewer completions left than parallelism",
            JobBuilder::non_indexed(3, 5).started(0).succeeded(2),
            [],
            10,
        )
        .creates(&[None]),
        row(
            "indexed, skips completed and running indexes",
            JobBuilder::indexed(4, 2)
                .started(0)
                .completed_indexes("0")
                .succeeded(1),
            [pod("b").index(1).running()],
            10,
        )
        .creates(&[Some(2)])
        .active(2),
        row(
            "non-indexed, already at parallelism",
            JobBuilder::non_indexed(3, 2)
                .started(0)
                .active(2)
                .ready(2)
                .terminating(0),
            [pod("a").ready(), pod("b").ready()],
            10,
        )
        .creates(&[])
        .deletes(&[])
        .no_status_write(),
        row(
            "work queue, one success: no new pods",
            JobBuilder::work_queue(2).started(0),
            [pod("a").succeeded_at(5), pod("b").running()],
            10,
        )
        .creates(&[])
        .active(1),
    ]);
}

#[test]
fn created_pods_follow_the_template() {
    table([row(
        "indexed: the pod is the template's, with its index, finalizer and owner",
        JobBuilder::indexed(2, 1),
        [],
        0,
    )
    .created_pods_have(&["metadata", "generateName"], &[Some("job-0-")])
    .created_pods_have(
        &["metadata", "finalizers", "0"],
        &[Some(TRACKING_FINALIZER)],
    )
    .created_pods_have(
        &["metadata", "ownerReferences", "0", "uid"],
        &[Some(JOB_UID)],
    )
    .created_pods_have(&["spec", "hostname"], &[Some("job-0")])]);
}

#[test]
fn touches_only_its_own_jobs_and_pods() {
    table([
        row(
            "managed by another controller",
            JobBuilder::non_indexed(1, 1).managed_by("kueue.x-k8s.io/multikueue"),
            [pod("a").succeeded_at(1)],
            10,
        )
        .skipped()
        .no_status_write()
        .creates(&[])
        .removes_finalizers(&[]),
        row(
            "managed by the built-in controller",
            JobBuilder::non_indexed(1, 1).not_managed(),
            [],
            10,
        )
        .skipped()
        .no_status_write()
        .creates(&[]),
        row(
            "a pod controlled by another Job is not ours",
            JobBuilder::non_indexed(1, 1).started(0),
            [pod("x").owned_by("other").succeeded_at(1)],
            10,
        )
        .removes_finalizers(&[])
        .creates(&[None])
        .uncounted_succeeded(&[]),
        row(
            "unknown completion mode",
            JobBuilder::non_indexed(1, 1).completion_mode("Sharded"),
            [],
            0,
        )
        .skipped()
        .no_status_write()
        .creates(&[])
        .events(&["UnknownCompletionMode"]),
    ]);
}

#[test]
fn removes_excess_and_duplicate_pods() {
    table([
        row(
            "parallelism lowered: the least advanced pod goes, finalizer first",
            JobBuilder::non_indexed(5, 1).started(0),
            [pod("a").ready(), pod("b")],
            10,
        )
        .deletes(&[("b", Excess)])
        .removes_finalizers(&["b"])
        .creates(&[])
        .active(1)
        .ready(1)
        .terminating(1)
        .failed(0)
        .uncounted_failed(&[]),
        row(
            "indexed: a repeated index is removed, keeping the more advanced pod",
            JobBuilder::indexed(3, 3).started(0),
            [
                pod("a").index(0).ready(),
                pod("b").index(0),
                pod("c").index(1).running(),
                pod("d").index(2).running(),
            ],
            10,
        )
        .deletes(&[("b", Excess)])
        .creates(&[])
        .active(3),
        row(
            "indexed: an index beyond completions is removed",
            JobBuilder::indexed(2, 2).started(0),
            [pod("a").index(0).running(), pod("b").index(7).running()],
            10,
        )
        .deletes(&[("b", Excess)])
        .creates(&[]),
    ]);
}

#[test]
fn records_each_outcome_before_removing_its_finalizer() {
    table([
        row(
            "non-indexed success: listed as uncounted, finalizer removed",
            JobBuilder::non_indexed(3, 1).started(0),
            [pod("a").succeeded_at(5)],
            10,
        )
        .uncounted_succeeded(&["a"])
        .succeeded(0)
        .removes_finalizers(&["a"])
        .creates(&[None])
        .requeue_after(0),
        row(
            "non-indexed success, finalizer gone: moved into the counter",
            JobBuilder::non_indexed(3, 1)
                .started(0)
                .uncounted(&["a"], &[]),
            [pod("a").succeeded_at(5).no_finalizer()],
            10,
        )
        .uncounted_succeeded(&[])
        .succeeded(1)
        .removes_finalizers(&[]),
        row(
            "non-indexed success listed but finalizer still there (crash): not listed twice",
            JobBuilder::non_indexed(3, 1)
                .started(0)
                .uncounted(&["a"], &[]),
            [pod("a").succeeded_at(5)],
            10,
        )
        .uncounted_succeeded(&["a"])
        .succeeded(0)
        .removes_finalizers(&["a"]),
        row(
            "already counted success (no finalizer, not listed): ignored",
            JobBuilder::non_indexed(3, 1).started(0).succeeded(1),
            [pod("a").succeeded_at(5).no_finalizer()],
            10,
        )
        .uncounted_succeeded(&[])
        .succeeded(1)
        .removes_finalizers(&[])
        .creates(&[None]),
        row(
            "indexed success: straight into completedIndexes",
            JobBuilder::indexed(3, 1).started(0),
            [pod("a").index(1).succeeded_at(5)],
            10,
        )
        .completed_indexes("1")
        .succeeded(1)
        .uncounted_succeeded(&[])
        .removes_finalizers(&["a"])
        .creates(&[Some(0)]),
        row(
            "indexed success already recorded (crash): counted once",
            JobBuilder::indexed(3, 1)
                .started(0)
                .completed_indexes("1")
                .succeeded(1),
            [
                pod("a").index(1).succeeded_at(5),
                pod("b").index(0).running(),
            ],
            10,
        )
        .completed_indexes("1")
        .succeeded(1)
        .removes_finalizers(&["a"]),
        row(
            "indexed: completed indexes are written in canonical form",
            JobBuilder::indexed(6, 1)
                .started(0)
                .completed_indexes("0-1,3")
                .succeeded(3),
            [
                pod("c").index(2).succeeded_at(5),
                pod("e").index(4).succeeded_at(5),
            ],
            10,
        )
        .completed_indexes("0-4")
        .succeeded(5),
        row(
            "failure: listed, then counted",
            JobBuilder::non_indexed(3, 1).started(0),
            [pod("a").failed_at(5)],
            100,
        )
        .uncounted_failed(&["a"])
        .failed(0)
        .removes_finalizers(&["a"]),
        row(
            "failure, finalizer gone: counted",
            JobBuilder::non_indexed(3, 1)
                .started(0)
                .uncounted(&[], &["a"]),
            [pod("a").failed_at(5).no_finalizer()],
            100,
        )
        .uncounted_failed(&[])
        .failed(1),
        row(
            "a pod deleted with the finalizer counts as failed",
            JobBuilder::non_indexed(3, 1).started(0),
            [pod("a").running().deleting_at(5)],
            100,
        )
        .uncounted_failed(&["a"])
        .terminating(1)
        .active(1)
        .creates(&[None]),
        row(
            "a running pod keeps its finalizer",
            JobBuilder::non_indexed(3, 1).started(0),
            [pod("a").running()],
            10,
        )
        .removes_finalizers(&[])
        .uncounted_failed(&[])
        .uncounted_succeeded(&[]),
    ]);
}

#[test]
fn failed_pods_are_replaced_after_a_backoff() {
    table([
        row(
            "one failure 5 s ago: wait 5 s more",
            JobBuilder::non_indexed(3, 1).started(0).failed(1),
            [pod("a").failed_at(5).no_finalizer()],
            10,
        )
        .creates(&[])
        .requeue_after(5),
        row(
            "one failure 10 s ago: replace",
            JobBuilder::non_indexed(3, 1).started(0).failed(1),
            [pod("a").failed_at(5).no_finalizer()],
            15,
        )
        .creates(&[None]),
        row(
            "two failures: 20 s after the last",
            JobBuilder::non_indexed(3, 1).started(0).failed(2),
            [
                pod("a").failed_at(5).no_finalizer(),
                pod("b").failed_at(20).no_finalizer(),
            ],
            30,
        )
        .creates(&[])
        .requeue_after(10),
        row(
            "a success after the failures resets the back-off",
            JobBuilder::non_indexed(3, 1)
                .started(0)
                .failed(2)
                .succeeded(1),
            [
                pod("a").failed_at(5).no_finalizer(),
                pod("b").failed_at(20).no_finalizer(),
                pod("c").succeeded_at(25).no_finalizer(),
            ],
            26,
        )
        .creates(&[None]),
        row(
            "indexed: the failed index is the one recreated",
            JobBuilder::indexed(3, 3).started(0).failed(1),
            [
                pod("a").index(0).running(),
                pod("b").index(1).failed_at(5).no_finalizer(),
                pod("c").index(2).running(),
            ],
            100,
        )
        .creates(&[Some(1)]),
    ]);
}

#[test]
fn pod_replacement_policy() {
    table([
        row(
            "Failed: a terminating pod holds its place and is not yet failed",
            JobBuilder::non_indexed(3, 1)
                .replace_only_failed()
                .started(0),
            [pod("a").running().deleting_at(5)],
            100,
        )
        .creates(&[])
        .terminating(1)
        .active(0)
        .uncounted_failed(&[])
        .removes_finalizers(&[]),
        row(
            "Failed: once terminal it is counted and replaced",
            JobBuilder::non_indexed(3, 1)
                .replace_only_failed()
                .started(0),
            [pod("a").failed_at(5).deleting_at(5)],
            100,
        )
        .creates(&[None])
        .terminating(0)
        .uncounted_failed(&["a"]),
        row(
            "TerminatingOrFailed: replaced as soon as it terminates, counted failed",
            JobBuilder::non_indexed(3, 1).started(0),
            [pod("a").running().deleting_at(5)],
            100,
        )
        .creates(&[None])
        .terminating(1)
        .uncounted_failed(&["a"])
        .removes_finalizers(&["a"]),
        row(
            "indexed, Failed: the terminating index is not recreated",
            JobBuilder::indexed(2, 2).replace_only_failed().started(0),
            [pod("a").index(0).running().deleting_at(5)],
            100,
        )
        .creates(&[Some(1)])
        .terminating(1),
        row(
            "indexed, TerminatingOrFailed: the terminating index is recreated",
            JobBuilder::indexed(2, 2).started(0),
            [pod("a").index(0).running().deleting_at(5)],
            100,
        )
        .creates(&[Some(0), Some(1)])
        .terminating(1),
    ]);
}

#[test]
fn the_back_off_survives_the_failed_pod() {
    // A pod deleted while running counted as failed at 40, lost its finalizer and is gone:
    // the controller remembers the failure, as upstream's backoffStore does, and the
    // replacement waits its 10 s.
    let remembered = || InFlight {
        backoff: Some(BackoffRecord {
            failures_after_last_success: 1,
            last_failure: Some(at(40)),
        }),
        ..InFlight::default()
    };
    let job = || JobBuilder::non_indexed(2, 1).started(0).failed(1);
    table([
        row("no replacement yet", job(), [], 45)
            .remembering(remembered())
            .creates(&[])
            .requeue_after(5),
        row("the back-off is over", job(), [], 50)
            .remembering(remembered())
            .creates(&[None]),
        row(
            "a success since resets it",
            job(),
            [pod("s").succeeded_at(48)],
            49,
        )
        .remembering(remembered())
        .backoff_failures(0),
    ]);
}

#[test]
fn with_nothing_remembered_the_back_off_is_read_from_the_failed_pods() {
    // After a restart or a leader change: the failed pods that still exist are the history.
    table([row(
        "two failures since the last success: 20 s after the last one",
        JobBuilder::non_indexed(3, 1).started(0).failed(2),
        [
            pod("a").failed_at(10).no_finalizer(),
            pod("b").failed_at(30).no_finalizer(),
        ],
        35,
    )
    .creates(&[])
    .requeue_after(15)]);
}

#[test]
fn a_job_tunes_its_own_back_off() {
    // `jobwarden.io/pod-failure-backoff`: 1 s doubling to 4 s instead of 10 s to 10 min,
    // for the Job as a whole and, under backoffLimitPerIndex, for each index.
    let tuned = |job: JobBuilder| {
        job.annotation(
            jobwarden_rules::pod_timing::BACKOFF_ANNOTATION,
            r#"{"initial":"1s","max":"4s"}"#,
        )
    };
    table([
        row(
            "one failure this second: wait 1 s",
            tuned(JobBuilder::non_indexed(3, 1).started(0).failed(1)),
            [pod("a").failed_at(5).no_finalizer()],
            5,
        )
        .creates(&[])
        .requeue_after(1),
        row(
            "one failure 1 s ago: replaced",
            tuned(JobBuilder::non_indexed(3, 1).started(0).failed(1)),
            [pod("a").failed_at(5).no_finalizer()],
            6,
        )
        .creates(&[None]),
        row(
            "four failures: 8 s capped at 4 s",
            tuned(JobBuilder::non_indexed(3, 1).started(0).failed(4)),
            [
                pod("a").failed_at(1).no_finalizer(),
                pod("b").failed_at(2).no_finalizer(),
                pod("c").failed_at(3).no_finalizer(),
                pod("d").failed_at(5).no_finalizer(),
            ],
            6,
        )
        .creates(&[])
        .requeue_after(3),
        row(
            "an invalid annotation keeps upstream's 10 s",
            JobBuilder::non_indexed(3, 1)
                .started(0)
                .failed(1)
                .annotation(
                    jobwarden_rules::pod_timing::BACKOFF_ANNOTATION,
                    r#"{"initial":"0s"}"#,
                ),
            [pod("a").failed_at(5).no_finalizer()],
            6,
        )
        .creates(&[])
        .requeue_after(9),
        row(
            "per index: the index's second failure waits 2 s",
            tuned(
                JobBuilder::indexed(2, 2)
                    .backoff_limit_per_index(3)
                    .started(0)
                    .failed_indexes(""),
            ),
            [
                pod("a").index(0).index_failures(1).failed_at(5),
                pod("b").index(1).running(),
            ],
            6,
        )
        .creates(&[])
        .requeue_after(1),
        row(
            "per index: 2 s on, the index is recreated",
            tuned(
                JobBuilder::indexed(2, 2)
                    .backoff_limit_per_index(3)
                    .started(0)
                    .failed_indexes(""),
            ),
            [
                pod("a").index(0).index_failures(1).failed_at(5),
                pod("b").index(1).running(),
            ],
            7,
        )
        .creates(&[Some(0)]),
    ]);
}
