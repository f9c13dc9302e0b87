//! When a cluster fails (issue 43): a worker's kube-apiserver stopped with a Job running on it,
//! for longer than `workerLostSeconds` (20 s here) and shorter, for each `on-worker-lost`
//! choice; the management cluster's own kube-apiserver stopped; the leader killed or stopped
//! while a Job moves. Each test stops what the others use, so each runs alone. They assert on
//! statuses, Events, annotations and counters; the clock they read is the one written on the
//! Jobs.

use std::time::{Duration, Instant};

use jobwarden_envtest::ControlPlane;
use jobwarden_envtest::kubelet::RUNS_SECONDS_ANNOTATION;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use kube::api::DeleteParams;
use serde_json::{Value, json};

use crate::dispatch::env::*;

/// A Job of one pod that runs `seconds`.
fn runs_for(seconds: u64) -> Value {
    json!({"template": {
        "metadata": {"annotations": {RUNS_SECONDS_ANNOTATION: seconds.to_string()}},
        "spec": {"schedulerName": "jobwarden-e2e-nobody", "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "busybox"}]},
    }})
}

fn plane(test: &Test, worker: &str) -> &'static ControlPlane {
    let i = WORKERS
        .iter()
        .position(|w| *w == worker)
        .unwrap_or_else(|| panic!("no worker {worker}"));
    &test.world.fleet.workers[i]
}

fn other(worker: &str) -> &'static str {
    WORKERS
        .iter()
        .find(|w| **w != worker)
        .copied()
        .unwrap_or("east")
}

/// A plane's kube-apiserver stopped; started again by [`Stopped::start`], or when dropped (a
/// test that fails midway leaves no API server down for the next).
struct Stopped {
    plane: &'static ControlPlane,
    started: bool,
}

impl Stopped {
    /// Stops it (returns once it is gone).
    async fn stop(plane: &'static ControlPlane) -> Stopped {
        tokio::task::spawn_blocking(move || plane.stop_apiserver())
            .await
            .expect("the stop does not panic")
            .unwrap_or_else(|e| panic!("kube-apiserver stops: {e}"));
        Stopped {
            plane,
            started: false,
        }
    }

    /// Starts it again (returns once it is ready).
    async fn start(mut self) {
        let plane = self.plane;
        self.started = true;
        tokio::task::spawn_blocking(move || plane.start_apiserver())
            .await
            .expect("the start does not panic")
            .unwrap_or_else(|e| panic!("kube-apiserver starts again: {e}"));
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        if !self.started
            && let Err(e) = self.plane.start_apiserver()
        {
            eprintln!("kube-apiserver did not start again after a failed test: {e}");
        }
    }
}

fn lost_since(job: &Job) -> Option<Timestamp> {
    job.annotations()
        .get("jobwarden.io/worker-lost-since")?
        .parse()
        .ok()
}

/// The Job's true terminal conditions: exactly one there must be at its end.
fn terminal(job: &Job) -> Vec<String> {
    job.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .filter(|c| matches!(c.type_.as_str(), "Complete" | "Failed") && c.status == "True")
        .map(|c| c.type_.clone())
        .collect()
}

/// Places a Job that runs `seconds` with `choice`, and waits until its pod runs; returns the
/// Job and its worker.
async fn running(test: &Test, name: &str, seconds: u64, choice: Option<&str>) -> (Job, String) {
    let annotations = match choice {
        Some(c) => json!({"jobwarden.io/on-worker-lost": c}),
        None => json!({}),
    };
    test.create(name, runs_for(seconds), annotations).await;
    let job = test
        .wait_job(name, "its pod running", |j| {
            j.status.as_ref().and_then(|s| s.active) == Some(1)
        })
        .await;
    let worker = recorded(&job).expect("recorded");
    (job, worker)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_on_a_lost_worker_moves_after_the_grace_and_ends_once_elsewhere() {
    let Some(test) = Test::alone("lost-redispatch").await else {
        return;
    };
    let (job, lost) = running(&test, "moves", 20, None).await;
    let (name, uid) = ("moves", uid(&job));
    test.expect_move(&uid);
    let moves = test
        .world
        .counted("jobwarden_dispatch_redispatches_total{reason=\"worker_lost\"}")
        .await;
    let to = other(&lost);
    let stopped = Stopped::stop(plane(&test, &lost)).await;
    let marked = test
        .wait_job(name, "the lost mark", |j| lost_since(j).is_some())
        .await;
    let since = lost_since(&marked).expect("marked");
    // The leader steps down gracefully while the worker is lost: the standby takes the clock
    // up from the Job, not from its own memory.
    test.world.terminate_leader(&test.mgmt).await;
    let moved = test
        .wait_job(name, "a move to the other worker", |j| {
            recorded(j).as_deref() == Some(to)
        })
        .await;
    assert_eq!(lost_since(&moved), None, "the mark goes with the move");
    test.wait_for("the WorkerLost and Redispatched Events", || async {
        let events = test.events(name).await;
        ["WorkerLost", "Redispatched"]
            .iter()
            .all(|reason| events.iter().any(|e| e.starts_with(reason)))
    })
    .await;
    let redispatched_at = Timestamp::now();
    assert!(
        redispatched_at.duration_since(since).as_secs_f64() >= WORKER_LOST_SECONDS as f64,
        "not before the grace: lost at {since}, moved by {redispatched_at}"
    );
    // The new copy, caught while it runs: it started after the move.
    let started = Instant::now();
    let new_copy = loop {
        if let Some(c) = test.copy_on(to, name, &uid).await {
            break Some(c);
        }
        assert!(started.elapsed() < PATIENCE, "no new copy on {to}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let new_copy = new_copy.expect("the new copy");
    // The lost worker answers again: its stale copy and pods go before anything else.
    stopped.start().await;
    let back = Instant::now();
    test.wait_for("the stale copy and its pods gone", || async {
        test.copy_on(&lost, name, &uid).await.is_none() && test.pods_gone_on(&lost).await
    })
    .await;
    eprintln!(
        "the stale copy was gone {:?} after its worker answered again",
        back.elapsed()
    );
    let done = test
        .wait_job(name, "Complete", |j| condition(j, "Complete").is_some())
        .await;
    assert_eq!(
        terminal(&done),
        ["Complete"],
        "exactly one terminal condition"
    );
    assert_eq!(recorded(&done).as_deref(), Some(to));
    // Its status came from the new copy alone: that copy's pod ran its 20 s after the copy
    // was made, the stale copy's could have ended as soon as its worker came back.
    let created = new_copy
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .expect("a creation time");
    let completed = done
        .status
        .as_ref()
        .and_then(|s| s.completion_time.as_ref())
        .map(|t| t.0)
        .expect("a completion time");
    assert!(
        completed.duration_since(created).as_secs_f64() >= 19.0,
        "completed at {completed}, the new copy made at {created}: a stale status reached it"
    );
    assert_eq!(
        done.status.as_ref().and_then(|s| s.start_time.clone()),
        job.status.as_ref().and_then(|s| s.start_time.clone()),
        "the first startTime stays"
    );
    // Counted by the replica that moved it, which did not lead when `moves` was read.
    test.wait_for("the move counted", || test.world.grew(&moves))
        .await;
    let fenced = test
        .world
        .sample(&format!(
            "jobwarden_dispatch_copies_deleted_total{{worker=\"{lost}\",reason=\"moved\"}}"
        ))
        .await
        .unwrap_or(0.0);
    assert!(fenced >= 1.0, "the fenced copy is counted");
    test.wait_for("the new copy to go once the Job shows its end", || async {
        test.copy_on(to, name, &uid).await.is_none()
    })
    .await;
    let seen = test.finish().await;
    let history = seen.get(&uid).cloned().unwrap_or_default();
    assert_eq!(
        history.copies.len(),
        2,
        "one copy on each worker: {history:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_wait_the_job_completes_on_the_returning_worker() {
    let Some(test) = Test::alone("lost-wait").await else {
        return;
    };
    let (job, lost) = running(&test, "waits", 30, Some("Wait")).await;
    let stopped = Stopped::stop(plane(&test, &lost)).await;
    let marked = test
        .wait_job("waits", "the lost mark", |j| lost_since(j).is_some())
        .await;
    let since = lost_since(&marked).expect("marked");
    // Past the grace, by the clock written on the Job, and a decision's worth more.
    test.wait_for("the grace to pass", || async {
        Timestamp::now().duration_since(since).as_secs_f64() > WORKER_LOST_SECONDS as f64 + 4.0
    })
    .await;
    let waiting = test.jobs().get("waits").await.expect("the Job");
    assert_eq!(
        recorded(&waiting).as_deref(),
        Some(lost.as_str()),
        "it stays"
    );
    stopped.start().await;
    let done = test
        .wait_job("waits", "Complete", |j| condition(j, "Complete").is_some())
        .await;
    assert_eq!(recorded(&done).as_deref(), Some(lost.as_str()));
    assert_eq!(
        lost_since(&done),
        None,
        "the mark goes when the worker answers"
    );
    assert_eq!(terminal(&done), ["Complete"]);
    test.wait_for("the WorkerLost and WorkerAnswers Events", || async {
        let events = test.events("waits").await;
        ["WorkerLost", "WorkerAnswers"]
            .iter()
            .all(|reason| events.iter().any(|e| e.starts_with(reason)))
    })
    .await;
    let events = test.events("waits").await;
    for reason in ["WorkerLost", "WorkerAnswers"] {
        assert!(
            events.iter().any(|e| e.starts_with(reason)),
            "{reason} in {events:#?}"
        );
    }
    assert!(
        !events.iter().any(|e| e.starts_with("Redispatched")),
        "{events:#?}"
    );
    let seen = test.finish().await;
    assert_eq!(seen.get(&uid(&job)).map(|h| h.copies.len()), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_fail_the_job_fails_with_worker_lost() {
    let Some(test) = Test::alone("lost-fail").await else {
        return;
    };
    let (job, lost) = running(&test, "gives-up", 600, Some("Fail")).await;
    let stopped = Stopped::stop(plane(&test, &lost)).await;
    let failed = test
        .wait_job("gives-up", "Failed", |j| condition(j, "Failed").is_some())
        .await;
    assert_eq!(condition(&failed, "Failed").as_deref(), Some("WorkerLost"));
    assert_eq!(
        condition(&failed, "FailureTarget").as_deref(),
        Some("WorkerLost")
    );
    assert_eq!(terminal(&failed), ["Failed"]);
    assert_eq!(
        failed.status.as_ref().and_then(|s| s.active).unwrap_or(0),
        0
    );
    stopped.start().await;
    test.wait_for(
        "its copy and pods gone from the returning worker",
        || async { test.copy_on(&lost, "gives-up", &uid(&job)).await.is_none() },
    )
    .await;
    test.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_stop_of_a_worker_moves_nothing() {
    let Some(test) = Test::alone("lost-blip").await else {
        return;
    };
    let (job, worker) = running(&test, "blip", 8, None).await;
    let plane = plane(&test, &worker);
    let stopped = Stopped::stop(plane).await;
    stopped.start().await;
    let done = test
        .wait_job("blip", "Complete", |j| condition(j, "Complete").is_some())
        .await;
    assert_eq!(
        recorded(&done).as_deref(),
        Some(worker.as_str()),
        "never moved"
    );
    assert_eq!(lost_since(&done), None);
    let events = test.events("blip").await;
    assert!(
        !events.iter().any(|e| e.starts_with("Redispatched")),
        "{events:#?}"
    );
    // A restarted API server refuses every list until its RBAC cache is filled: the worker's
    // room is listed again once it lists (before, one refusal put it on counting for good).
    test.world.every_worker_ready().await;
    let seen = test.finish().await;
    assert_eq!(seen.get(&uid(&job)).map(|h| h.copies.len()), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_management_clusters_outage_loses_no_status_and_no_deletion() {
    let Some(test) = Test::alone("lost-management").await else {
        return;
    };
    // Held running until the management cluster is away: on a busy machine a Job of a few
    // seconds could end, and its copy go, before the API server does.
    let (job, worker) = running(&test, "goes-on", 100_000, None).await;
    let (doomed, doomed_worker) = running(&test, "doomed", 600, None).await;
    let management = &test.world.fleet.management;
    // Deleted at the last moment: the dispatcher may not see it before its API server goes.
    test.jobs()
        .delete("doomed", &DeleteParams::background())
        .await
        .expect("deleted");
    let stopped = Stopped::stop(management).await;
    // The copy runs on while the management cluster is away, to its end.
    test.release(&worker, "goes-on").await;
    test.wait_for(
        "the copy to end while the management cluster is away",
        || async {
            test.copy_on(&worker, "goes-on", &uid(&job))
                .await
                .is_some_and(|c| condition(&c, "Complete").is_some())
        },
    )
    .await;
    stopped.start().await;
    let mgmt = management.client().await;
    let jobs: kube::Api<Job> = kube::Api::namespaced(mgmt, &test.ns);
    let started = Instant::now();
    let done = loop {
        if let Ok(j) = jobs.get("goes-on").await
            && condition(&j, "Complete").is_some()
        {
            break j;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the status never arrived: {}",
            test.world.jobwarden_log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    eprintln!(
        "the copy's status arrived {:?} after the management cluster answered again",
        started.elapsed()
    );
    assert_eq!(done.status.as_ref().and_then(|s| s.succeeded), Some(1));
    assert_eq!(terminal(&done), ["Complete"]);
    test.wait_for("the deleted Job's copy gone", || async {
        test.copy_on(&doomed_worker, "doomed", &uid(&doomed))
            .await
            .is_none()
    })
    .await;
    test.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_killed_during_a_move_leaves_one_copy() {
    let Some(test) = Test::alone("lost-killed").await else {
        return;
    };
    let (job, lost) = running(&test, "moving", 10, None).await;
    let uid = uid(&job);
    test.expect_move(&uid);
    let to = other(&lost);
    let stopped = Stopped::stop(plane(&test, &lost)).await;
    // SIGKILL the moment the move is recorded: its copy is being made, or not yet.
    test.wait_job("moving", "the move recorded", |j| {
        recorded(j).as_deref() == Some(to)
    })
    .await;
    test.world.kill_leader(&test.mgmt).await;
    let done = test
        .wait_job("moving", "Complete", |j| condition(j, "Complete").is_some())
        .await;
    assert_eq!(terminal(&done), ["Complete"]);
    stopped.start().await;
    test.wait_for("the stale copy gone", || async {
        test.copy_on(&lost, "moving", &uid).await.is_none()
    })
    .await;
    let seen = test.finish().await;
    let history = seen.get(&uid).cloned().unwrap_or_default();
    assert_eq!(
        history.copies.len(),
        2,
        "one on each worker, never two on one: {history:#?}"
    );
}
