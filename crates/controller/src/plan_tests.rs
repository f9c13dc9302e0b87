//! Tables over `plan`: a Job in one line, its pods in the next, the expected plan after.

use std::time::Duration;

use jobwarden_rules::JobObject;
use jobwarden_rules::condition::*;
use serde_json::Value;

use super::*;
use crate::testing::*;

/// What a case expects; unset fields are not checked.
#[derive(Default)]
pub(super) struct Expect {
    pub(super) skipped: bool,
    pub(super) no_status_write: bool,
    pub(super) creates: Option<Vec<Option<i32>>>,
    pub(super) deletes: Option<Vec<(&'static str, DeleteReason)>>,
    pub(super) removes_finalizers: Option<Vec<&'static str>>,
    pub(super) active: Option<i32>,
    pub(super) ready: Option<i32>,
    pub(super) terminating: Option<i32>,
    pub(super) succeeded: Option<i32>,
    pub(super) failed: Option<i32>,
    pub(super) completed_indexes: Option<&'static str>,
    pub(super) uncounted_succeeded: Option<Vec<&'static str>>,
    pub(super) uncounted_failed: Option<Vec<&'static str>>,
    /// `(type, status, reason)` of every condition, in order.
    pub(super) conditions: Option<Vec<(&'static str, &'static str, &'static str)>>,
    pub(super) start_time: Option<Option<i64>>,
    pub(super) completion_time: Option<Option<i64>>,
    pub(super) events: Option<Vec<&'static str>>,
    pub(super) requeue: Option<Option<Duration>>,
    pub(super) finished: Option<Option<&'static str>>,
    /// `status.failedIndexes` (`None` = absent).
    pub(super) failed_indexes: Option<Option<&'static str>>,
    /// The message of every condition, in order.
    pub(super) messages: Option<Vec<&'static str>>,
}

pub(super) fn run(job: &Value, pods: Vec<PodBuilder>, now: i64) -> Plan {
    run_remembering(job, pods, now, &InFlight::default())
}

/// `run`, for a controller that remembers `in_flight` from its earlier syncs.
pub(super) fn run_remembering(
    job: &Value,
    pods: Vec<PodBuilder>,
    now: i64,
    in_flight: &InFlight,
) -> Plan {
    let job = JobObject::parse(job).expect("test jobs parse");
    let pods: Vec<Arc<CachedPod>> = pods.into_iter().map(PodBuilder::cached).collect();
    plan(&job, &pods, at(now), &PlanConfig::default(), in_flight)
}

fn uid(name: &str) -> String {
    format!("uid-{name}")
}

pub(super) fn check(name: &str, job: Value, pods: Vec<PodBuilder>, now: i64, e: Expect) {
    let old = JobObject::parse(&job).expect("test jobs parse").status;
    let p = run(&job, pods, now);
    assert_eq!(
        p.skipped.is_some(),
        e.skipped,
        "{name}: skipped {:?}",
        p.skipped
    );
    if e.no_status_write {
        assert_eq!(p.status, None, "{name}: status written");
    }
    let s = p.status.clone().unwrap_or(old);
    if let Some(c) = e.creates {
        let got: Vec<Option<i32>> = p.create.iter().map(|c| c.index).collect();
        assert_eq!(got, c, "{name}: creations");
    }
    if let Some(d) = e.deletes {
        let got: Vec<(String, DeleteReason)> = p
            .delete
            .iter()
            .map(|d| (d.pod.name.clone(), d.reason))
            .collect();
        let want: Vec<(String, DeleteReason)> =
            d.into_iter().map(|(n, r)| (n.to_owned(), r)).collect();
        assert_eq!(got, want, "{name}: deletions");
    }
    if let Some(r) = e.removes_finalizers {
        let got: Vec<&str> = p
            .remove_finalizers
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(got, r, "{name}: finalizers removed");
    }
    let num = |v: Option<i32>| v.unwrap_or(0);
    if let Some(v) = e.active {
        assert_eq!(num(s.active), v, "{name}: active");
    }
    if let Some(v) = e.ready {
        assert_eq!(num(s.ready), v, "{name}: ready");
    }
    if let Some(v) = e.terminating {
        assert_eq!(num(s.terminating), v, "{name}: terminating");
    }
    if let Some(v) = e.succeeded {
        assert_eq!(num(s.succeeded), v, "{name}: succeeded");
    }
    if let Some(v) = e.failed {
        assert_eq!(num(s.failed), v, "{name}: failed");
    }
    if let Some(v) = e.completed_indexes {
        assert_eq!(
            s.completed_indexes.as_deref().unwrap_or(""),
            v,
            "{name}: completedIndexes"
        );
    }
    let uncounted = s.uncounted_terminated_pods.clone().unwrap_or_default();
    if let Some(v) = e.uncounted_succeeded {
        let want: Vec<String> = v.iter().map(|n| uid(n)).collect();
        assert_eq!(
            uncounted.succeeded.unwrap_or_default(),
            want,
            "{name}: uncounted succeeded"
        );
    }
    if let Some(v) = e.uncounted_failed {
        let want: Vec<String> = v.iter().map(|n| uid(n)).collect();
        assert_eq!(
            uncounted.failed.unwrap_or_default(),
            want,
            "{name}: uncounted failed"
        );
    }
    if let Some(v) = e.conditions {
        let got: Vec<(String, String, String)> = s
            .conditions
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.type_, c.status, c.reason.unwrap_or_default()))
            .collect();
        let want: Vec<(String, String, String)> = v
            .into_iter()
            .map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned()))
            .collect();
        assert_eq!(got, want, "{name}: conditions");
    }
    if let Some(v) = e.failed_indexes {
        assert_eq!(s.failed_indexes.as_deref(), v, "{name}: failedIndexes");
    }
    if let Some(v) = e.messages {
        let got: Vec<String> = s
            .conditions
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.message.unwrap_or_default())
            .collect();
        assert_eq!(got, v, "{name}: condition messages");
    }
    if let Some(v) = e.start_time {
        assert_eq!(s.start_time.map(|t| t.0), v.map(at), "{name}: startTime");
    }
    if let Some(v) = e.completion_time {
        assert_eq!(
            s.completion_time.map(|t| t.0),
            v.map(at),
            "{name}: completionTime"
        );
    }
    if let Some(v) = e.events {
        let got: Vec<&str> = p.events.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(got, v, "{name}: events");
    }
    if let Some(v) = e.requeue {
        assert_eq!(p.requeue_after, v, "{name}: requeue");
    }
    if let Some(v) = e.finished {
        assert_eq!(
            p.finished.as_ref().map(|f| f.reason.as_str()),
            v,
            "{name}: finished"
        );
    }
}

pub(super) fn secs(n: u64) -> Option<Duration> {
    Some(Duration::from_secs(n))
}

#[test]
fn creates_pods_up_to_parallelism_and_remaining_completions() {
    check(
        "non-indexed, new",
        JobBuilder::non_indexed(3, 2).build(),
        vec![],
        0,
        Expect {
            creates: Some(vec![None, None]),
            active: Some(2),
            ready: Some(0),
            terminating: Some(0),
            start_time: Some(Some(0)),
            ..Default::default()
        },
    );
    check(
        "indexed, new",
        JobBuilder::indexed(3, 2).build(),
        vec![],
        0,
        Expect {
            creates: Some(vec![Some(0), Some(1)]),
            active: Some(2),
            completed_indexes: Some(""),
            ..Default::default()
        },
    );
    check(
        "non-indexed, fewer completions left than parallelism",
        JobBuilder::non_indexed(3, 5)
            .started(0)
            .succeeded(2)
            .build(),
        vec![],
        10,
        Expect {
            creates: Some(vec![None]),
            ..Default::default()
        },
    );
    check(
        "indexed, skips completed and running indexes",
        JobBuilder::indexed(4, 2)
            .started(0)
            .completed_indexes("0")
            .succeeded(1)
            .build(),
        vec![pod("b").index(1).running()],
        10,
        Expect {
            creates: Some(vec![Some(2)]),
            active: Some(2),
            ..Default::default()
        },
    );
    check(
        "non-indexed, already at parallelism",
        JobBuilder::non_indexed(3, 2)
            .started(0)
            .active(2)
            .ready(2)
            .terminating(0)
            .build(),
        vec![pod("a").ready(), pod("b").ready()],
        10,
        Expect {
            creates: Some(vec![]),
            deletes: Some(vec![]),
            no_status_write: true,
            ..Default::default()
        },
    );
    check(
        "work queue, one success: no new pods",
        JobBuilder::work_queue(2).started(0).build(),
        vec![pod("a").succeeded_at(5), pod("b").running()],
        10,
        Expect {
            creates: Some(vec![]),
            active: Some(1),
            ..Default::default()
        },
    );
}

#[test]
fn created_pods_follow_the_template() {
    let job = JobBuilder::indexed(2, 1).build();
    let p = run(&job, vec![], 0);
    let pod = &p.create[0].pod;
    assert_eq!(pod["metadata"]["generateName"], "job-0-");
    assert_eq!(
        pod["metadata"]["finalizers"][0],
        jobwarden_rules::well_known::TRACKING_FINALIZER
    );
    assert_eq!(pod["metadata"]["ownerReferences"][0]["uid"], JOB_UID);
    assert_eq!(pod["spec"]["hostname"], "job-0");
}

#[test]
fn touches_only_its_own_jobs_and_pods() {
    check(
        "managed by another controller",
        JobBuilder::non_indexed(1, 1)
            .managed_by("kueue.x-k8s.io/multikueue")
            .build(),
        vec![pod("a").succeeded_at(1)],
        10,
        Expect {
            skipped: true,
            no_status_write: true,
            creates: Some(vec![]),
            removes_finalizers: Some(vec![]),
            ..Default::default()
        },
    );
    check(
        "managed by the built-in controller",
        JobBuilder::non_indexed(1, 1).not_managed().build(),
        vec![],
        10,
        Expect {
            skipped: true,
            no_status_write: true,
            creates: Some(vec![]),
            ..Default::default()
        },
    );
    check(
        "a pod controlled by another Job is not ours",
        JobBuilder::non_indexed(1, 1).started(0).build(),
        vec![pod("x").owned_by("other").succeeded_at(1)],
        10,
        Expect {
            removes_finalizers: Some(vec![]),
            creates: Some(vec![None]),
            uncounted_succeeded: Some(vec![]),
            ..Default::default()
        },
    );
    check(
        "unknown completion mode",
        JobBuilder::non_indexed(1, 1)
            .completion_mode("Sharded")
            .build(),
        vec![],
        0,
        Expect {
            skipped: true,
            no_status_write: true,
            creates: Some(vec![]),
            events: Some(vec!["UnknownCompletionMode"]),
            ..Default::default()
        },
    );
}

#[test]
fn removes_excess_and_duplicate_pods() {
    check(
        "parallelism lowered: the least advanced pod goes, finalizer first",
        JobBuilder::non_indexed(5, 1).started(0).build(),
        vec![pod("a").ready(), pod("b")],
        10,
        Expect {
            deletes: Some(vec![("b", DeleteReason::Excess)]),
            removes_finalizers: Some(vec!["b"]),
            creates: Some(vec![]),
            active: Some(1),
            ready: Some(1),
            terminating: Some(1),
            failed: Some(0),
            uncounted_failed: Some(vec![]),
            ..Default::default()
        },
    );
    check(
        "indexed: a repeated index is removed, keeping the more advanced pod",
        JobBuilder::indexed(3, 3).started(0).build(),
        vec![
            pod("a").index(0).ready(),
            pod("b").index(0),
            pod("c").index(1).running(),
            pod("d").index(2).running(),
        ],
        10,
        Expect {
            deletes: Some(vec![("b", DeleteReason::Excess)]),
            creates: Some(vec![]),
            active: Some(3),
            ..Default::default()
        },
    );
    check(
        "indexed: an index beyond completions is removed",
        JobBuilder::indexed(2, 2).started(0).build(),
        vec![pod("a").index(0).running(), pod("b").index(7).running()],
        10,
        Expect {
            deletes: Some(vec![("b", DeleteReason::Excess)]),
            creates: Some(vec![]),
            ..Default::default()
        },
    );
}

#[test]
fn records_each_outcome_before_removing_its_finalizer() {
    check(
        "non-indexed success: listed as uncounted, finalizer removed",
        JobBuilder::non_indexed(3, 1).started(0).build(),
        vec![pod("a").succeeded_at(5)],
        10,
        Expect {
            uncounted_succeeded: Some(vec!["a"]),
            succeeded: Some(0),
            removes_finalizers: Some(vec!["a"]),
            creates: Some(vec![None]),
            requeue: Some(Some(Duration::ZERO)),
            ..Default::default()
        },
    );
    check(
        "non-indexed success, finalizer gone: moved into the counter",
        JobBuilder::non_indexed(3, 1)
            .started(0)
            .uncounted(&["a"], &[])
            .build(),
        vec![pod("a").succeeded_at(5).no_finalizer()],
        10,
        Expect {
            uncounted_succeeded: Some(vec![]),
            succeeded: Some(1),
            removes_finalizers: Some(vec![]),
            ..Default::default()
        },
    );
    check(
        "non-indexed success listed but finalizer still there (crash): not listed twice",
        JobBuilder::non_indexed(3, 1)
            .started(0)
            .uncounted(&["a"], &[])
            .build(),
        vec![pod("a").succeeded_at(5)],
        10,
        Expect {
            uncounted_succeeded: Some(vec!["a"]),
            succeeded: Some(0),
            removes_finalizers: Some(vec!["a"]),
            ..Default::default()
        },
    );
    check(
        "already counted success (no finalizer, not listed): ignored",
        JobBuilder::non_indexed(3, 1)
            .started(0)
            .succeeded(1)
            .build(),
        vec![pod("a").succeeded_at(5).no_finalizer()],
        10,
        Expect {
            uncounted_succeeded: Some(vec![]),
            succeeded: Some(1),
            removes_finalizers: Some(vec![]),
            creates: Some(vec![None]),
            ..Default::default()
        },
    );
    check(
        "indexed success: straight into completedIndexes",
        JobBuilder::indexed(3, 1).started(0).build(),
        vec![pod("a").index(1).succeeded_at(5)],
        10,
        Expect {
            completed_indexes: Some("1"),
            succeeded: Some(1),
            uncounted_succeeded: Some(vec![]),
            removes_finalizers: Some(vec!["a"]),
            creates: Some(vec![Some(0)]),
            ..Default::default()
        },
    );
    check(
        "indexed success already recorded (crash): counted once",
        JobBuilder::indexed(3, 1)
            .started(0)
            .completed_indexes("1")
            .succeeded(1)
            .build(),
        vec![
            pod("a").index(1).succeeded_at(5),
            pod("b").index(0).running(),
        ],
        10,
        Expect {
            completed_indexes: Some("1"),
            succeeded: Some(1),
            removes_finalizers: Some(vec!["a"]),
            ..Default::default()
        },
    );
    check(
        "indexed: completed indexes are written in canonical form",
        JobBuilder::indexed(6, 1)
            .started(0)
            .completed_indexes("0-1,3")
            .succeeded(3)
            .build(),
        vec![
            pod("c").index(2).succeeded_at(5),
            pod("e").index(4).succeeded_at(5),
        ],
        10,
        Expect {
            completed_indexes: Some("0-4"),
            succeeded: Some(5),
            ..Default::default()
        },
    );
    check(
        "failure: listed, then counted",
        JobBuilder::non_indexed(3, 1).started(0).build(),
        vec![pod("a").failed_at(5)],
        100,
        Expect {
            uncounted_failed: Some(vec!["a"]),
            failed: Some(0),
            removes_finalizers: Some(vec!["a"]),
            ..Default::default()
        },
    );
    check(
        "failure, finalizer gone: counted",
        JobBuilder::non_indexed(3, 1)
            .started(0)
            .uncounted(&[], &["a"])
            .build(),
        vec![pod("a").failed_at(5).no_finalizer()],
        100,
        Expect {
            uncounted_failed: Some(vec![]),
            failed: Some(1),
            ..Default::default()
        },
    );
    check(
        "a pod deleted with the finalizer counts as failed",
        JobBuilder::non_indexed(3, 1).started(0).build(),
        vec![pod("a").running().deleting_at(5)],
        100,
        Expect {
            uncounted_failed: Some(vec!["a"]),
            terminating: Some(1),
            active: Some(1),
            creates: Some(vec![None]),
            ..Default::default()
        },
    );
    check(
        "a running pod keeps its finalizer",
        JobBuilder::non_indexed(3, 1).started(0).build(),
        vec![pod("a").running()],
        10,
        Expect {
            removes_finalizers: Some(vec![]),
            uncounted_failed: Some(vec![]),
            uncounted_succeeded: Some(vec![]),
            ..Default::default()
        },
    );
}

#[test]
fn completion_waits_for_every_pod() {
    let scm = (SUCCESS_CRITERIA_MET, "True", REASON_COMPLETIONS_REACHED);
    let complete = (COMPLETE, "True", REASON_COMPLETIONS_REACHED);
    check(
        "completions reached: SuccessCriteriaMet at once",
        JobBuilder::non_indexed(2, 2)
            .started(0)
            .succeeded(2)
            .build(),
        vec![
            pod("a").succeeded_at(5).no_finalizer(),
            pod("b").succeeded_at(6).no_finalizer(),
        ],
        10,
        Expect {
            conditions: Some(vec![scm]),
            completion_time: Some(None),
            creates: Some(vec![]),
            finished: Some(None),
            requeue: Some(Some(Duration::ZERO)),
            ..Default::default()
        },
    );
    check(
        "completions reached with uncounted pods: SuccessCriteriaMet still at once",
        JobBuilder::non_indexed(2, 2)
            .started(0)
            .succeeded(1)
            .build(),
        vec![
            pod("a").succeeded_at(5).no_finalizer(),
            pod("b").succeeded_at(6),
        ],
        10,
        Expect {
            conditions: Some(vec![scm]),
            uncounted_succeeded: Some(vec!["b"]),
            removes_finalizers: Some(vec!["b"]),
            ..Default::default()
        },
    );
    check(
        "completions reached with one pod too many: it is deleted and success declared",
        JobBuilder::non_indexed(2, 3)
            .started(0)
            .succeeded(2)
            .build(),
        vec![pod("c").running()],
        10,
        Expect {
            deletes: Some(vec![("c", DeleteReason::Excess)]),
            conditions: Some(vec![scm]),
            active: Some(0),
            terminating: Some(1),
            ..Default::default()
        },
    );
    check(
        "SuccessCriteriaMet stored, nothing left: Complete and completionTime",
        JobBuilder::non_indexed(2, 2)
            .started(0)
            .succeeded(2)
            .condition(SUCCESS_CRITERIA_MET, "True", REASON_COMPLETIONS_REACHED, 10)
            .build(),
        vec![pod("a").succeeded_at(5).no_finalizer()],
        20,
        Expect {
            conditions: Some(vec![scm, complete]),
            completion_time: Some(Some(20)),
            events: Some(vec!["Completed"]),
            finished: Some(Some(REASON_COMPLETIONS_REACHED)),
            active: Some(0),
            terminating: Some(0),
            ..Default::default()
        },
    );
    check(
        "SuccessCriteriaMet stored, a pod still terminating: not Complete yet",
        JobBuilder::non_indexed(2, 2)
            .started(0)
            .succeeded(2)
            .condition(SUCCESS_CRITERIA_MET, "True", REASON_COMPLETIONS_REACHED, 10)
            .build(),
        vec![pod("c").running().deleting_at(9).no_finalizer()],
        20,
        Expect {
            conditions: Some(vec![scm]),
            completion_time: Some(None),
            terminating: Some(1),
            finished: Some(None),
            ..Default::default()
        },
    );
    check(
        "SuccessCriteriaMet stored, a pod still uncounted: not Complete yet",
        JobBuilder::non_indexed(2, 2)
            .started(0)
            .succeeded(1)
            .condition(SUCCESS_CRITERIA_MET, "True", REASON_COMPLETIONS_REACHED, 10)
            .build(),
        vec![pod("b").succeeded_at(6)],
        20,
        Expect {
            conditions: Some(vec![scm]),
            uncounted_succeeded: Some(vec!["b"]),
            finished: Some(None),
            ..Default::default()
        },
    );
    check(
        "indexed: all indexes completed",
        JobBuilder::indexed(3, 3)
            .started(0)
            .completed_indexes("0,1")
            .succeeded(2)
            .build(),
        vec![pod("c").index(2).succeeded_at(5)],
        10,
        Expect {
            conditions: Some(vec![scm]),
            completed_indexes: Some("0-2"),
            succeeded: Some(3),
            ..Default::default()
        },
    );
    check(
        "indexed: one index missing, not complete",
        JobBuilder::indexed(3, 3)
            .started(0)
            .completed_indexes("0,1")
            .succeeded(2)
            .build(),
        vec![pod("c").index(2).running()],
        10,
        Expect {
            conditions: Some(vec![]),
            finished: Some(None),
            ..Default::default()
        },
    );
    check(
        "work queue: first success completes once nothing runs",
        JobBuilder::work_queue(2).started(0).build(),
        vec![pod("a").succeeded_at(5), pod("b").succeeded_at(6)],
        10,
        Expect {
            conditions: Some(vec![scm]),
            ..Default::default()
        },
    );
}

#[test]
fn failure_targets_first_then_fails_once_pods_are_gone() {
    let target = (FAILURE_TARGET, "True", REASON_BACKOFF_LIMIT_EXCEEDED);
    let failed = (FAILED, "True", REASON_BACKOFF_LIMIT_EXCEEDED);
    check(
        "backoff limit exceeded: FailureTarget, running pods deleted and counted failed",
        JobBuilder::non_indexed(5, 2)
            .backoff_limit(1)
            .started(0)
            .failed(1)
            .build(),
        vec![pod("a").failed_at(5), pod("b").ready()],
        100,
        Expect {
            conditions: Some(vec![target]),
            deletes: Some(vec![("b", DeleteReason::JobFinishing)]),
            uncounted_failed: Some(vec!["a", "b"]),
            removes_finalizers: Some(vec!["a", "b"]),
            active: Some(0),
            ready: Some(0),
            terminating: Some(1),
            creates: Some(vec![]),
            finished: Some(None),
            ..Default::default()
        },
    );
    check(
        "at the backoff limit, not beyond: the pod is replaced",
        JobBuilder::non_indexed(5, 1)
            .backoff_limit(1)
            .started(0)
            .failed(1)
            .build(),
        vec![pod("a").failed_at(5).no_finalizer()],
        100,
        Expect {
            conditions: Some(vec![]),
            creates: Some(vec![None]),
            ..Default::default()
        },
    );
    check(
        "FailureTarget stored, pods still terminating: not Failed yet",
        JobBuilder::non_indexed(5, 2)
            .backoff_limit(1)
            .started(0)
            .failed(3)
            .condition(FAILURE_TARGET, "True", REASON_BACKOFF_LIMIT_EXCEEDED, 10)
            .build(),
        vec![pod("b").running().deleting_at(10).no_finalizer()],
        20,
        Expect {
            conditions: Some(vec![target]),
            terminating: Some(1),
            finished: Some(None),
            creates: Some(vec![]),
            ..Default::default()
        },
    );
    check(
        "FailureTarget stored, no pod left: Failed, no completionTime",
        JobBuilder::non_indexed(5, 2)
            .backoff_limit(1)
            .started(0)
            .failed(3)
            .condition(FAILURE_TARGET, "True", REASON_BACKOFF_LIMIT_EXCEEDED, 10)
            .build(),
        vec![pod("a").failed_at(5).no_finalizer()],
        20,
        Expect {
            conditions: Some(vec![target, failed]),
            completion_time: Some(None),
            events: Some(vec![REASON_BACKOFF_LIMIT_EXCEEDED]),
            finished: Some(Some(REASON_BACKOFF_LIMIT_EXCEEDED)),
            terminating: Some(0),
            ..Default::default()
        },
    );
    check(
        "indexed: backoff limit exceeded",
        JobBuilder::indexed(3, 2)
            .backoff_limit(0)
            .started(0)
            .build(),
        vec![pod("a").index(0).failed_at(5), pod("b").index(1).running()],
        100,
        Expect {
            conditions: Some(vec![target]),
            deletes: Some(vec![("b", DeleteReason::JobFinishing)]),
            uncounted_failed: Some(vec!["a", "b"]),
            ..Default::default()
        },
    );
    check(
        "restartPolicy OnFailure: restarts count against the limit",
        JobBuilder::non_indexed(1, 1)
            .restart_on_failure()
            .backoff_limit(2)
            .started(0)
            .build(),
        vec![pod("a").restarts(2)],
        100,
        Expect {
            conditions: Some(vec![target]),
            ..Default::default()
        },
    );
    check(
        "restartPolicy OnFailure: fewer restarts than the limit",
        JobBuilder::non_indexed(1, 1)
            .restart_on_failure()
            .backoff_limit(3)
            .started(0)
            .build(),
        vec![pod("a").restarts(2)],
        100,
        Expect {
            conditions: Some(vec![]),
            ..Default::default()
        },
    );
}

#[test]
fn active_deadline() {
    let target = (FAILURE_TARGET, "True", REASON_DEADLINE_EXCEEDED);
    check(
        "deadline passed: FailureTarget DeadlineExceeded, pods deleted",
        JobBuilder::non_indexed(3, 1)
            .deadline(30)
            .started(0)
            .build(),
        vec![pod("a").running()],
        30,
        Expect {
            conditions: Some(vec![target]),
            deletes: Some(vec![("a", DeleteReason::JobFinishing)]),
            ..Default::default()
        },
    );
    check(
        "deadline ahead: look again when it falls",
        JobBuilder::non_indexed(3, 1)
            .deadline(30)
            .started(0)
            .active(1)
            .ready(0)
            .terminating(0)
            .build(),
        vec![pod("a").running()],
        12,
        Expect {
            conditions: Some(vec![]),
            requeue: Some(secs(18)),
            no_status_write: true,
            ..Default::default()
        },
    );
    check(
        "suspended: the deadline does not run",
        JobBuilder::non_indexed(3, 1)
            .deadline(30)
            .suspend(true)
            .started(0)
            .build(),
        vec![],
        1000,
        Expect {
            conditions: Some(vec![(SUSPENDED, "True", REASON_JOB_SUSPENDED)]),
            ..Default::default()
        },
    );
    check(
        "after a resume the deadline counts from the resume",
        JobBuilder::non_indexed(3, 1)
            .deadline(30)
            .started(100)
            .condition(SUSPENDED, "False", REASON_JOB_RESUMED, 100)
            .build(),
        vec![pod("a").running()],
        120,
        Expect {
            conditions: Some(vec![(SUSPENDED, "False", REASON_JOB_RESUMED)]),
            requeue: Some(secs(10)),
            ..Default::default()
        },
    );
}

#[test]
fn failed_pods_are_replaced_after_a_backoff() {
    check(
        "one failure 5 s ago: wait 5 s more",
        JobBuilder::non_indexed(3, 1).started(0).failed(1).build(),
        vec![pod("a").failed_at(5).no_finalizer()],
        10,
        Expect {
            creates: Some(vec![]),
            requeue: Some(secs(5)),
            ..Default::default()
        },
    );
    check(
        "one failure 10 s ago: replace",
        JobBuilder::non_indexed(3, 1).started(0).failed(1).build(),
        vec![pod("a").failed_at(5).no_finalizer()],
        15,
        Expect {
            creates: Some(vec![None]),
            ..Default::default()
        },
    );
    check(
        "two failures: 20 s after the last",
        JobBuilder::non_indexed(3, 1).started(0).failed(2).build(),
        vec![
            pod("a").failed_at(5).no_finalizer(),
            pod("b").failed_at(20).no_finalizer(),
        ],
        30,
        Expect {
            creates: Some(vec![]),
            requeue: Some(secs(10)),
            ..Default::default()
        },
    );
    check(
        "a success after the failures resets the back-off",
        JobBuilder::non_indexed(3, 1)
            .started(0)
            .failed(2)
            .succeeded(1)
            .build(),
        vec![
            pod("a").failed_at(5).no_finalizer(),
            pod("b").failed_at(20).no_finalizer(),
            pod("c").succeeded_at(25).no_finalizer(),
        ],
        26,
        Expect {
            creates: Some(vec![None]),
            ..Default::default()
        },
    );
    check(
        "indexed: the failed index is the one recreated",
        JobBuilder::indexed(3, 3).started(0).failed(1).build(),
        vec![
            pod("a").index(0).running(),
            pod("b").index(1).failed_at(5).no_finalizer(),
            pod("c").index(2).running(),
        ],
        100,
        Expect {
            creates: Some(vec![Some(1)]),
            ..Default::default()
        },
    );
}

#[test]
fn pod_replacement_policy() {
    check(
        "Failed: a terminating pod holds its place and is not yet failed",
        JobBuilder::non_indexed(3, 1)
            .replace_only_failed()
            .started(0)
            .build(),
        vec![pod("a").running().deleting_at(5)],
        100,
        Expect {
            creates: Some(vec![]),
            terminating: Some(1),
            active: Some(0),
            uncounted_failed: Some(vec![]),
            removes_finalizers: Some(vec![]),
            ..Default::default()
        },
    );
    check(
        "Failed: once terminal it is counted and replaced",
        JobBuilder::non_indexed(3, 1)
            .replace_only_failed()
            .started(0)
            .build(),
        vec![pod("a").failed_at(5).deleting_at(5)],
        100,
        Expect {
            creates: Some(vec![None]),
            terminating: Some(0),
            uncounted_failed: Some(vec!["a"]),
            ..Default::default()
        },
    );
    check(
        "TerminatingOrFailed: replaced as soon as it terminates, counted failed",
        JobBuilder::non_indexed(3, 1).started(0).build(),
        vec![pod("a").running().deleting_at(5)],
        100,
        Expect {
            creates: Some(vec![None]),
            terminating: Some(1),
            uncounted_failed: Some(vec!["a"]),
            removes_finalizers: Some(vec!["a"]),
            ..Default::default()
        },
    );
    check(
        "indexed, Failed: the terminating index is not recreated",
        JobBuilder::indexed(2, 2)
            .replace_only_failed()
            .started(0)
            .build(),
        vec![pod("a").index(0).running().deleting_at(5)],
        100,
        Expect {
            creates: Some(vec![Some(1)]),
            terminating: Some(1),
            ..Default::default()
        },
    );
    check(
        "indexed, TerminatingOrFailed: the terminating index is recreated",
        JobBuilder::indexed(2, 2).started(0).build(),
        vec![pod("a").index(0).running().deleting_at(5)],
        100,
        Expect {
            creates: Some(vec![Some(0), Some(1)]),
            terminating: Some(1),
            ..Default::default()
        },
    );
}

#[test]
fn suspend_and_resume() {
    let suspended = (SUSPENDED, "True", REASON_JOB_SUSPENDED);
    let resumed = (SUSPENDED, "False", REASON_JOB_RESUMED);
    check(
        "suspending a running Job deletes its pods without counting them",
        JobBuilder::non_indexed(4, 2)
            .suspend(true)
            .started(0)
            .active(2)
            .build(),
        vec![pod("a").ready(), pod("b").running()],
        50,
        Expect {
            deletes: Some(vec![
                ("a", DeleteReason::Suspended),
                ("b", DeleteReason::Suspended),
            ]),
            removes_finalizers: Some(vec!["a", "b"]),
            uncounted_failed: Some(vec![]),
            failed: Some(0),
            active: Some(0),
            ready: Some(0),
            terminating: Some(2),
            conditions: Some(vec![suspended]),
            events: Some(vec!["Suspended"]),
            // Upstream clears startTime with Suspended=True (MutableSchedulingDirectivesFor-
            // SuspendedJobs, on by default in v1.36); resuming sets it again.
            start_time: Some(None),
            ..Default::default()
        },
    );
    check(
        "created suspended: no pods, no startTime",
        JobBuilder::indexed(3, 3).suspend(true).build(),
        vec![],
        0,
        Expect {
            creates: Some(vec![]),
            conditions: Some(vec![suspended]),
            start_time: Some(None),
            events: Some(vec!["Suspended"]),
            ..Default::default()
        },
    );
    check(
        "still suspended: nothing to do",
        JobBuilder::non_indexed(3, 1)
            .suspend(true)
            .active(0)
            .ready(0)
            .terminating(0)
            .succeeded(0)
            .failed(0)
            .condition(SUSPENDED, "True", REASON_JOB_SUSPENDED, 0)
            .build(),
        vec![],
        100,
        Expect {
            no_status_write: true,
            events: Some(vec![]),
            creates: Some(vec![]),
            ..Default::default()
        },
    );
    check(
        "resuming: Suspended=False, startTime reset, pods created",
        JobBuilder::non_indexed(3, 2)
            .started(0)
            .condition(SUSPENDED, "True", REASON_JOB_SUSPENDED, 10)
            .build(),
        vec![],
        100,
        Expect {
            conditions: Some(vec![resumed]),
            start_time: Some(Some(100)),
            events: Some(vec!["Resumed"]),
            creates: Some(vec![None, None]),
            ..Default::default()
        },
    );
    check(
        "first resume of a Job created suspended: startTime set",
        JobBuilder::non_indexed(3, 1)
            .condition(SUSPENDED, "True", REASON_JOB_SUSPENDED, 10)
            .build(),
        vec![],
        100,
        Expect {
            conditions: Some(vec![resumed]),
            start_time: Some(Some(100)),
            ..Default::default()
        },
    );
    check(
        "indexed: completed indexes still count after resume",
        JobBuilder::indexed(3, 3)
            .started(0)
            .completed_indexes("0")
            .succeeded(1)
            .condition(SUSPENDED, "True", REASON_JOB_SUSPENDED, 10)
            .build(),
        vec![pod("a").index(0).succeeded_at(5).no_finalizer()],
        100,
        Expect {
            creates: Some(vec![Some(1), Some(2)]),
            completed_indexes: Some("0"),
            succeeded: Some(1),
            ..Default::default()
        },
    );
    check(
        "never suspended: no Suspended condition",
        JobBuilder::non_indexed(3, 1).build(),
        vec![],
        0,
        Expect {
            conditions: Some(vec![]),
            events: Some(vec![]),
            ..Default::default()
        },
    );
}

#[test]
fn deleted_and_finished_jobs_let_their_pods_go() {
    check(
        "Job being deleted: finalizers removed, nothing created",
        JobBuilder::non_indexed(3, 2).started(0).deleting().build(),
        vec![pod("a").running(), pod("b").failed_at(5)],
        100,
        Expect {
            creates: Some(vec![]),
            removes_finalizers: Some(vec!["a", "b"]),
            uncounted_failed: Some(vec!["b"]),
            ..Default::default()
        },
    );
    check(
        "finished Job: stray finalizers removed, status untouched",
        JobBuilder::non_indexed(1, 1)
            .started(0)
            .succeeded(1)
            .condition(SUCCESS_CRITERIA_MET, "True", REASON_COMPLETIONS_REACHED, 5)
            .condition(COMPLETE, "True", REASON_COMPLETIONS_REACHED, 6)
            .build(),
        vec![pod("a").succeeded_at(5)],
        100,
        Expect {
            no_status_write: true,
            removes_finalizers: Some(vec!["a"]),
            creates: Some(vec![]),
            ..Default::default()
        },
    );
}

#[test]
fn writes_status_only_when_it_changes() {
    check(
        "steady state",
        JobBuilder::non_indexed(3, 1)
            .started(0)
            .active(1)
            .ready(1)
            .terminating(0)
            .succeeded(0)
            .failed(0)
            .build(),
        vec![pod("a").ready()],
        100,
        Expect {
            no_status_write: true,
            ..Default::default()
        },
    );
    let job = JobBuilder::non_indexed(3, 1)
        .started(0)
        .active(1)
        .ready(0)
        .terminating(0)
        .build();
    let p = run(&job, vec![pod("a").ready()], 100);
    assert_eq!(p.status.and_then(|s| s.ready), Some(1), "ready changed");
}

#[test]
fn the_back_off_survives_the_failed_pod() {
    use crate::backoff::BackoffRecord;
    // A pod deleted while running counted as failed at 40, lost its finalizer and is gone:
    // the controller remembers the failure, as upstream's backoffStore does, and the
    // replacement waits its 10 s.
    let remembered = InFlight {
        backoff: Some(BackoffRecord {
            failures_after_last_success: 1,
            last_failure: Some(at(40)),
        }),
        ..InFlight::default()
    };
    let job = JobBuilder::non_indexed(2, 1).started(0).failed(1).build();
    let p = run_remembering(&job, vec![], 45, &remembered);
    assert_eq!(p.create.len(), 0, "no replacement yet");
    assert_eq!(p.requeue_after, Some(Duration::from_secs(5)));
    let p = run_remembering(&job, vec![], 50, &remembered);
    assert_eq!(p.create.len(), 1, "the back-off is over");
    // A success since resets it.
    let p = run_remembering(&job, vec![pod("s").succeeded_at(48)], 49, &remembered);
    assert_eq!(p.backoff.map(|b| b.failures_after_last_success), Some(0));
}

#[test]
fn with_nothing_remembered_the_back_off_is_read_from_the_failed_pods() {
    // After a restart or a leader change: the failed pods that still exist are the history.
    let job = JobBuilder::non_indexed(3, 1).started(0).failed(2).build();
    let pods = vec![
        pod("a").failed_at(10).no_finalizer(),
        pod("b").failed_at(30).no_finalizer(),
    ];
    let p = run(&job, pods, 35);
    assert_eq!(p.create.len(), 0);
    // Two failures since the last success: 20 s after the last one.
    assert_eq!(p.requeue_after, Some(Duration::from_secs(15)));
}
