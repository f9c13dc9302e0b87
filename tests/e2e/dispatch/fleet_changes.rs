//! The fleet changed under load (issue 49): the running replicas' policy file swapped as the
//! kubelet swaps a ConfigMap's, a worker drained (its `Finish` Job ends there, its
//! `Redispatch` Job moves at once, new Jobs go elsewhere), then removed: refused while a Job is
//! still placed on it, naming that Job, applied once it ended, its series gone. The Lease stays
//! where it was throughout, and the census holds one copy at a time.

use jobwarden_envtest::kubelet::RUNS_SECONDS_ANNOTATION;
use serde_json::{Value, json};

use crate::dispatch::env::*;

const EAST_ENTRY: &str = "- {name: east, kubeconfigSecret: jobwarden-worker-east}";

/// The policy without east's entry.
fn without_east(original: &str) -> String {
    original
        .lines()
        .filter(|l| l.trim() != EAST_ENTRY)
        .map(|l| format!("{l}\n"))
        .collect()
}

/// A Job of one pod held running until released.
fn held() -> Value {
    json!({"template": {
        "metadata": {"annotations": {RUNS_SECONDS_ANNOTATION: "100000"}},
        "spec": {"schedulerName": "jobwarden-e2e-nobody", "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "busybox"}]},
    }})
}

impl Test {
    /// Lets `stays`, held on east, end there; waits until the refused removal of east is
    /// applied, its series gone.
    async fn stays_ends_on_east_then_east_goes(&self) {
        self.release("east", "stays").await;
        let stayed = self
            .wait_job("stays", "Complete", |j| condition(j, "Complete").is_some())
            .await;
        assert_eq!(recorded(&stayed).as_deref(), Some("east"));
        let ended = std::time::Instant::now();
        self.wait_for(
            "the removal applied once the Job ended, east's series gone",
            || async {
                self.world
                    .metrics()
                    .await
                    .is_some_and(|m| !m.contains("worker_up{worker=\"east\"}"))
            },
        )
        .await;
        // A figure, not a bar (issue 55 asks for 45 s): the status mirrored, then the next
        // look at the file, every 2 s.
        eprintln!(
            "east removed {:?} after `stays` was seen Complete",
            ended.elapsed()
        );
    }

    /// Waits until the Job `name` is recorded on `worker` and its copy there has a pod
    /// running, read from the worker: a move writes the record first, and the user's Job
    /// shows the old copy's pod until the new copy's is mirrored.
    async fn running_on(&self, name: &str, worker: &str) {
        let job = self
            .wait_job(name, &format!("recorded on {worker}"), |j| {
                recorded(j).as_deref() == Some(worker)
            })
            .await;
        let uid = uid(&job);
        self.wait_for(&format!("{name}'s copy running on {worker}"), || async {
            self.copy_on(worker, name, &uid)
                .await
                .and_then(|c| c.status?.active)
                .unwrap_or(0)
                > 0
        })
        .await;
    }

    pub(super) async fn leader_sample(&self, series: &str) -> f64 {
        self.world.sample(series).await.unwrap_or(0.0)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_drained_then_removed_under_load_loses_no_job_and_keeps_the_lease() {
    let Some(test) = Test::alone("fleet-change").await else {
        return;
    };
    let original = &test.world.policy;
    assert!(original.contains(EAST_ENTRY), "{original}");
    let restore = Restore::policy(&test);
    let leader = test.world.wait_leader(&test.mgmt).await;

    // Both on east: `moves` first (east and west alike, east by name), `stays` named there.
    let moves = test
        .create(
            "moves",
            held(),
            json!({"jobwarden.io/on-worker-drain": "Redispatch"}),
        )
        .await;
    test.running_on("moves", "east").await;
    test.create("stays", held(), json!({"jobwarden.io/workers": "east"}))
        .await;
    test.running_on("stays", "east").await;

    // east drains: `moves` goes to west at once (its copy on east deleted first), `stays`
    // keeps running there, and new Jobs all go to west.
    let applied = test
        .leader_sample("jobwarden_policy_reloads_total{result=\"applied\"}")
        .await;
    test.world.swap_policy(&original.replace(
        EAST_ENTRY,
        "- {name: east, kubeconfigSecret: jobwarden-worker-east, draining: true}",
    ));
    test.running_on("moves", "west").await;
    assert!(
        test.copy_on("east", "moves", &uid(&moves)).await.is_none(),
        "the copy on east is gone"
    );
    assert!(
        test.leader_sample("jobwarden_policy_reloads_total{result=\"applied\"}")
            .await
            > applied
    );
    assert_eq!(
        test.leader_sample("jobwarden_dispatch_worker_draining{worker=\"east\"}")
            .await,
        1.0
    );
    for i in 0..6 {
        test.create(&format!("new-{i}"), json!({}), json!({})).await;
    }
    for i in 0..6 {
        let job = test
            .wait_job(&format!("new-{i}"), "Complete", |j| {
                condition(j, "Complete").is_some()
            })
            .await;
        assert_eq!(recorded(&job).as_deref(), Some("west"), "new-{i}");
    }
    test.release("west", "moves").await;
    test.wait_job("moves", "Complete", |j| condition(j, "Complete").is_some())
        .await;

    // east removed while `stays` runs there: refused, naming it; applied once it ended.
    let refused = test
        .leader_sample("jobwarden_policy_reloads_total{result=\"refused\"}")
        .await;
    test.world.swap_policy(&without_east(original));
    test.wait_for("the removal refused", || async {
        test.leader_sample("jobwarden_policy_reloads_total{result=\"refused\"}")
            .await
            > refused
    })
    .await;
    let log = test.world.jobwarden_log();
    assert!(
        log.contains("worker east still has 1 Job placed on it")
            && log.contains(&format!("{}/stays", test.ns)),
        "the refusal names the Job: {log}"
    );
    test.stays_ends_on_east_then_east_goes().await;

    // Back as it was, for the tests after this one.
    drop(restore);
    test.world.every_worker_ready().await;
    assert_eq!(
        test.world.leader(&test.mgmt).await,
        Some(leader),
        "the Lease stayed where it was"
    );
    test.finish().await;
}

/// Puts the world back as it was when dropped, the test passed or not: the policy file as
/// installed, and the replica killed for good started again. The tests after it need every
/// worker and both replicas.
pub(super) struct Restore<'t> {
    test: &'t Test,
    killed: Option<usize>,
}

impl<'t> Restore<'t> {
    /// Puts the installed policy back as the policy file when dropped.
    pub(super) fn policy(test: &'t Test) -> Restore<'t> {
        Restore { test, killed: None }
    }
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        let world = self.test.world;
        world.swap_policy(&world.policy);
        if let Some(i) = self.killed.take()
            && let Err(e) = world.try_start_replica(i)
        {
            eprintln!("replica {i} not started again: {e}");
        }
    }
}

/// A removal the leader refused, and the leader SIGKILLed for good while the refused file is
/// mounted: the standby refused it too, from the Jobs it watches, so once it leads east is
/// still in its fleet. The Job placed there runs to its end, mirrored, with one copy ever, and
/// east is removed then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removal_refused_by_the_leader_holds_when_the_standby_takes_over() {
    let Some(test) = Test::alone("refused-hand-over").await else {
        return;
    };
    let original = &test.world.policy;
    let mut restore = Restore::policy(&test);
    let job = test
        .create("stays", held(), json!({"jobwarden.io/workers": "east"}))
        .await;
    test.running_on("stays", "east").await;

    test.world.swap_policy(&without_east(original));
    let refusal = format!(
        "worker east still has 1 Job placed on it ({}/stays)",
        test.ns
    );
    test.wait_for("both replicas refused the removal", || async {
        let logs = test.world.replica_logs();
        logs.iter().filter(|log| log.contains(&refusal)).count() == REPLICAS
    })
    .await;
    let killed = test.world.kill_leader_for_good(&test.mgmt).await;
    restore.killed = Some(killed);
    test.wait_for("the standby leads", || async {
        test.world
            .leader(&test.mgmt)
            .await
            .is_some_and(|l| l != killed)
    })
    .await;
    test.world.every_worker_ready().await;
    assert!(
        test.copy_on("east", "stays", &uid(&job)).await.is_some(),
        "the copy is still on east"
    );

    test.stays_ends_on_east_then_east_goes().await;

    // Back as it was, for the tests after this one: every worker, both replicas.
    drop(restore);
    test.world.every_worker_ready().await;
    test.finish().await;
}
