//! Where a Job fits (issue 48), on kube-scheduler and Nodes laid out per scenario: a Job goes
//! only where its pods fit now, waits with the reason per worker when nothing fits, is placed
//! when room frees, and moves when its copy cannot be scheduled after all. Each test holds, on
//! top of the census's one copy at a time, that no pod was ever found unschedulable, but in
//! the scenario of the move.

use jobwarden_envtest::NodeLayout;
use jobwarden_envtest::kubelet::RUNS_SECONDS_ANNOTATION;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::dispatch::env::*;

pub(super) const GPU: &str = "nvidia.com/gpu";
/// A pod held running until [`release`] (the test kubelet reads the annotation each round).
const HELD: &str = "100000";

/// A Job of `pods` pods at once, each requesting `requests` (and, for an extended resource,
/// the same limits, as the API requires), its pods for the worker's kube-scheduler, held
/// running when `held`, else running a second.
pub(super) fn spec(pods: u32, requests: Value, held: bool, extra: Value) -> Value {
    let mut resources = json!({"requests": requests.clone()});
    if requests.get(GPU).is_some() {
        resources["limits"] = json!({GPU: requests[GPU].clone()});
    }
    let mut pod = json!({
        "metadata": {"annotations": {RUNS_SECONDS_ANNOTATION: if held { HELD } else { "1" }}},
        "spec": {"restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "busybox", "resources": resources}]},
    });
    if let (Some(target), Some(more)) = (pod["spec"].as_object_mut(), extra.as_object()) {
        for (k, v) in more {
            target.insert(k.clone(), v.clone());
        }
    }
    json!({"parallelism": pods, "completions": pods, "template": pod})
}

impl Test {
    /// Creates a dispatched Job whose pods kube-scheduler places.
    pub(super) async fn create_scheduled(
        &self,
        name: &str,
        spec: Value,
        annotations: Value,
    ) -> Job {
        let mut job = jobwarden_envtest::scheduled_job(name, DISPATCHER, spec);
        job["metadata"]["annotations"] = annotations;
        let job: Job = serde_json::from_value(job).expect("a Job");
        self.jobs()
            .create(&PostParams::default(), &job)
            .await
            .unwrap_or_else(|e| panic!("the Job {name} is created: {e}"))
    }

    pub(super) async fn complete(&self, name: &str) -> Job {
        self.wait_job(name, "Complete", |j| condition(j, "Complete").is_some())
            .await
    }

    pub(super) async fn placed(&self, name: &str) -> String {
        let job = self
            .wait_job(name, "a worker recorded", |j| recorded(j).is_some())
            .await;
        recorded(&job).unwrap_or_default()
    }

    /// Waits for the Warning `reason` on the Job `name` whose message holds every one of
    /// `words`; returns the message.
    pub(super) async fn warning(&self, name: &str, reason: &str, words: &[&str]) -> String {
        let prefix = format!("{reason}: ");
        let started = std::time::Instant::now();
        loop {
            let events = self.events(name).await;
            if let Some(e) = events
                .iter()
                .rev()
                .find(|e| e.starts_with(&prefix) && words.iter().all(|w| e.contains(w)))
            {
                return e.clone();
            }
            assert!(
                started.elapsed() < PATIENCE,
                "{reason} on {name} naming {words:?} not within {PATIENCE:?}; its events: {events:#?}\njobwarden's log:\n{}",
                self.world.jobwarden_log()
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }

    /// The Jobs of `names` recorded on a worker now, with the worker.
    pub(super) async fn placed_now<'n>(&self, names: &[&'n str]) -> Vec<(&'n str, String)> {
        let mut placed = Vec::new();
        for name in names {
            if let Some(w) = self.jobs().get(name).await.ok().as_ref().and_then(recorded) {
                placed.push((*name, w));
            }
        }
        placed
    }

    /// The Jobs of `names` recorded on a worker, once `count` of them are.
    pub(super) async fn placed_count<'n>(
        &self,
        names: &[&'n str],
        count: usize,
    ) -> Vec<(&'n str, String)> {
        let started = std::time::Instant::now();
        loop {
            let placed = self.placed_now(names).await;
            if placed.len() >= count {
                return placed;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "{count} of {names:?} placed not within {PATIENCE:?}: {placed:?}; jobwarden's log:\n{}",
                self.world.jobwarden_log()
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }

    /// Ends a placement test: no pod was unschedulable unless `moved` names it.
    pub(super) async fn finish_placing(self, moved: &[&str]) {
        let unschedulable: Vec<String> = self
            .unschedulable_pods()
            .into_iter()
            .filter(|p| !moved.iter().any(|m| p.contains(m)))
            .collect();
        assert!(
            unschedulable.is_empty(),
            "pods found unschedulable: {unschedulable:?}; jobwarden's log:\n{}",
            self.world.jobwarden_log()
        );
        self.finish().await;
    }
}

pub(super) fn node(name: &str, cpu: &str) -> NodeLayout {
    NodeLayout::new(name).resource("cpu", cpu)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gpu_job_goes_to_the_only_worker_with_gpus_though_the_other_has_fewer_jobs() {
    let Some(test) = Test::placing(
        "gpu",
        &[node("east-cpu-1", "4"), node("east-cpu-2", "4")],
        &[node("west-gpu", "4").resource(GPU, "2")],
    )
    .await
    else {
        return;
    };
    // west holds a Job already: by count, east would take the next.
    test.create_scheduled(
        "busy",
        spec(1, json!({"cpu": "1"}), true, json!({})),
        json!({"jobwarden.io/workers": "west"}),
    )
    .await;
    assert_eq!(test.placed("busy").await, "west");
    test.create_scheduled(
        "train",
        spec(2, json!({GPU: "1"}), false, json!({})),
        json!({}),
    )
    .await;
    assert_eq!(test.placed("train").await, "west");
    test.complete("train").await;
    test.release("west", "busy").await;
    test.complete("busy").await;
    test.finish_placing(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_selectors_taints_and_required_affinity_decide_the_worker() {
    let Some(test) = Test::placing(
        "selectors",
        &[node("east-ssd", "4")
            .label("disk", "ssd")
            .taint("dedicated", "ml", "NoSchedule")],
        &[node("west-b", "4").label("zone", "b")],
    )
    .await
    else {
        return;
    };
    let tolerates = json!({
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ml",
                         "effect": "NoSchedule"}],
    });
    test.create_scheduled(
        "ssd",
        spec(1, json!({"cpu": "1"}), false, tolerates),
        json!({}),
    )
    .await;
    let zone_b = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["b"]}]}]}}}});
    test.create_scheduled(
        "zone-b",
        spec(1, json!({"cpu": "1"}), false, zone_b),
        json!({}),
    )
    .await;
    // The selector without the toleration: the taint keeps it from east, the selector from west.
    let untolerated = json!({"nodeSelector": {"disk": "ssd"}});
    test.create_scheduled(
        "no-toleration",
        spec(1, json!({"cpu": "1"}), false, untolerated),
        json!({}),
    )
    .await;
    assert_eq!(test.placed("ssd").await, "east");
    assert_eq!(test.placed("zone-b").await, "west");
    test.complete("ssd").await;
    test.complete("zone-b").await;
    test.warning(
        "no-toleration",
        "NoWorkerFits",
        &["east: ", "dedicated=ml:NoSchedule", "west: "],
    )
    .await;
    let waiting = test.jobs().get("no-toleration").await.expect("the Job");
    assert_eq!(recorded(&waiting), None);
    // It would wait for ever: it goes, so that no later test finds a Job waiting.
    test.jobs()
        .delete("no-toleration", &Default::default())
        .await
        .expect("the waiting Job deleted");
    test.finish_placing(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_two_cpu_jobs_on_two_two_cpu_workers_two_run_two_wait_then_run() {
    let Some(test) = Test::placing("burst", &[node("east-1", "2")], &[node("west-1", "2")]).await
    else {
        return;
    };
    let names = ["j1", "j2", "j3", "j4"];
    for name in names {
        test.create_scheduled(
            name,
            spec(1, json!({"cpu": "2"}), true, json!({})),
            json!({}),
        )
        .await;
    }
    // Two are placed, one on each worker; two wait, with no copy and a Warning naming cpu.
    let placed = test.placed_count(&names, 2).await;
    assert_eq!(placed.len(), 2, "never more than room for two: {placed:?}");
    let mut workers: Vec<&str> = placed.iter().map(|(_, w)| w.as_str()).collect();
    workers.sort_unstable();
    assert_eq!(workers, ["east", "west"], "{placed:?}");
    let waiting: Vec<&str> = names
        .into_iter()
        .filter(|n| !placed.iter().any(|(p, _)| p == n))
        .collect();
    for name in &waiting {
        test.warning(name, "NoWorkerFits", &["insufficient cpu"])
            .await;
        let job = test.jobs().get(name).await.expect("the Job");
        assert_eq!(recorded(&job), None, "{name} waits unplaced");
        assert!(
            test.census.of(&uid(&job)).copies.is_empty(),
            "{name} has no copy"
        );
    }
    // Room frees: the two that waited run.
    for (name, worker) in &placed {
        test.release(worker, name).await;
    }
    for name in &waiting {
        let worker = test.placed(name).await;
        test.wait_job(name, "running", |j| {
            j.status.as_ref().and_then(|s| s.active).unwrap_or(0) > 0
                || condition(j, "Complete").is_some()
        })
        .await;
        test.release(&worker, name).await;
    }
    for name in names {
        test.complete(name).await;
    }
    test.finish_placing(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_no_node_can_hold_waits_unplaced_then_fails_by_its_deadline() {
    let Some(test) = Test::placing("huge", &[node("east-1", "2")], &[node("west-1", "2")]).await
    else {
        return;
    };
    let mut huge = spec(1, json!({"cpu": "64"}), false, json!({}));
    huge["activeDeadlineSeconds"] = json!(25);
    test.create_scheduled("huge", huge, json!({})).await;
    let message = test
        .warning(
            "huge",
            "NoWorkerFits",
            &["does not fit on any node today", "cpu"],
        )
        .await;
    assert!(
        message.contains("east: ") && message.contains("west: "),
        "{message}"
    );
    let explained = std::process::Command::new(env!("CARGO_BIN_EXE_jobwarden"))
        .args([
            "explain",
            "-n",
            &test.ns,
            "huge",
            "--jobwarden-namespace",
            &test.world.dispatcher.identity.namespace,
            "--config",
            &test.world.dispatcher.policy().display().to_string(),
        ])
        .env("KUBECONFIG", test.world.fleet.management.kubeconfig())
        .output()
        .expect("explain runs");
    let text = String::from_utf8_lossy(&explained.stdout);
    assert!(
        text.contains("does not fit on any node today") && text.contains("cpu"),
        "explain says why: {text}\n{}",
        String::from_utf8_lossy(&explained.stderr)
    );
    let failed = test
        .wait_job("huge", "Failed", |j| condition(j, "Failed").is_some())
        .await;
    assert_eq!(
        condition(&failed, "Failed").as_deref(),
        Some("DeadlineExceeded")
    );
    assert_eq!(recorded(&failed), None);
    assert!(test.census.of(&uid(&failed)).copies.is_empty());
    test.finish_placing(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_that_cannot_be_scheduled_moves_and_completes_on_the_other_worker() {
    let Some(test) = Test::placing("moves", &[node("east-1", "4")], &[node("west-1", "4")]).await
    else {
        return;
    };
    // What placement does not model: the pods want a node running an `anchor` pod, which only
    // west has. west holds a Job already, so east, less loaded, takes the Job first.
    test.create_scheduled(
        "busy",
        spec(1, json!({"cpu": "1"}), true, json!({})),
        json!({"jobwarden.io/workers": "west"}),
    )
    .await;
    assert_eq!(test.placed("busy").await, "west");
    let anchor: Pod = serde_json::from_value(json!({
        "metadata": {"name": "anchor", "labels": {"app": "anchor"},
                     "annotations": {RUNS_SECONDS_ANNOTATION: HELD}},
        "spec": {"nodeName": "west-1", "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "busybox"}]},
    }))
    .expect("a pod");
    test.worker_pods("west")
        .create(&PostParams::default(), &anchor)
        .await
        .expect("the anchor pod");
    let beside_anchor = json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "anchor"}}, "topologyKey": "kubernetes.io/hostname"}]}}});
    let user = test
        .create_scheduled(
            "picky",
            spec(1, json!({"cpu": "1"}), false, beside_anchor),
            json!({"jobwarden.io/unschedulable-seconds": "20"}),
        )
        .await;
    assert_eq!(test.placed("picky").await, "east");
    let moved = test
        .wait_job("picky", "moved to west", |j| {
            recorded(j).as_deref() == Some("west")
        })
        .await;
    assert_eq!(
        moved
            .annotations()
            .get("jobwarden.io/moved-from")
            .map(String::as_str),
        Some("east")
    );
    test.warning(
        "picky",
        "Moved",
        &["worker east", "worker west", "could not be scheduled"],
    )
    .await;
    let done = test.complete("picky").await;
    let history = test.census.of(&uid(&user));
    assert_eq!(
        history.workers.len(),
        2,
        "a copy on each worker, one after the other: {history:#?}"
    );
    assert!(
        test.copy_on("east", "picky", &uid(&user)).await.is_none(),
        "the first copy is gone"
    );
    assert!(
        done.status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .is_some()
    );
    test.release("west", "busy").await;
    test.complete("busy").await;
    let pods: Api<Pod> = test.worker_pods("west");
    let _ = pods.delete("anchor", &Default::default()).await;
    test.finish_placing(&["east/picky"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eighteen_one_cpu_jobs_over_six_cpus_complete_on_both_workers() {
    let Some(test) =
        Test::placing("eighteen", &[node("east-1", "3")], &[node("west-1", "3")]).await
    else {
        return;
    };
    let names: Vec<String> = (1..=18).map(|i| format!("j{i}")).collect();
    for name in &names {
        test.create_scheduled(
            name,
            spec(1, json!({"cpu": "1"}), false, json!({})),
            json!({}),
        )
        .await;
    }
    let mut on = std::collections::BTreeMap::<String, usize>::new();
    for name in &names {
        let job = test.complete(name).await;
        *on.entry(recorded(&job).unwrap_or_default()).or_default() += 1;
    }
    assert_eq!(
        on.keys().map(String::as_str).collect::<Vec<_>>(),
        ["east", "west"],
        "{on:?}"
    );
    test.finish_placing(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_indexed_job_of_three_gpus_goes_where_three_are_free_not_two() {
    let Some(test) = Test::placing(
        "indexed-gpus",
        &[node("east-gpu", "8").resource(GPU, "2")],
        &[
            node("west-gpu-1", "8").resource(GPU, "2"),
            node("west-gpu-2", "8").resource(GPU, "1"),
        ],
    )
    .await
    else {
        return;
    };
    // west holds a Job: by count, east would take the next.
    test.create_scheduled(
        "busy",
        spec(1, json!({"cpu": "1"}), true, json!({})),
        json!({"jobwarden.io/workers": "west"}),
    )
    .await;
    assert_eq!(test.placed("busy").await, "west");
    let mut indexed = spec(3, json!({GPU: "1"}), false, json!({}));
    indexed["completionMode"] = json!("Indexed");
    test.create_scheduled("indexed", indexed, json!({})).await;
    assert_eq!(test.placed("indexed").await, "west");
    test.complete("indexed").await;
    test.release("west", "busy").await;
    test.complete("busy").await;
    test.finish_placing(&[]).await;
}
