//! Fair shares between teams (issue 53) on real clusters: two teams named by namespace in the
//! policy file (swapped in as the kubelet swaps a mounted ConfigMap), a fleet of 8 GPUs (a Node
//! of 4 on each worker), Jobs of one pod asking for 1 GPU, bound by each worker's
//! kube-scheduler, held running until the test ends them. A team that comes late gets each
//! GPU that frees, not the older Jobs of the team that holds the fleet; and, as in every
//! placement test, no pod is ever unschedulable and no Job has two copies.

use serde_json::json;

use crate::dispatch::env::*;
use crate::dispatch::placement::{GPU, node, spec};

/// The policy the dispatch suite runs with, plus `shares` naming one team per namespace.
fn with_teams(original: &str, teams: &[(&str, &str)]) -> String {
    let entries: String = teams
        .iter()
        .map(|(team, ns)| format!("    - {{name: {team}, namespaces: {{names: [{ns}]}}}}\n"))
        .collect();
    original.replacen(
        "dispatch:\n",
        &format!("dispatch:\n  shares:\n{entries}"),
        1,
    )
}

impl Test {
    /// Lets the held Job `name` end once it runs (placed, and its pod up on its worker: a
    /// pod released before it exists would run on).
    async fn run_out(&self, name: &str) {
        let worker = self.placed(name).await;
        self.wait_job(name, "running", |j| {
            j.status.as_ref().and_then(|s| s.active).unwrap_or(0) > 0
                || condition(j, "Complete").is_some()
        })
        .await;
        self.release(&worker, name).await;
    }
}

/// A GPU Job of one pod, held running.
fn gpu_job() -> serde_json::Value {
    spec(1, json!({"cpu": "1", GPU: "1"}), true, json!({}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latecomer_team_gets_each_gpu_that_frees() {
    let gpus = |name: &str| node(name, "16").resource(GPU, "4");
    let Some(early) = Test::placing("early", &[gpus("east-gpu")], &[gpus("west-gpu")]).await else {
        return;
    };
    let late = early.beside("late").await;
    let original = std::fs::read_to_string(early.world.dispatcher.policy()).expect("the policy");
    let applied = "jobwarden_policy_reloads_total{result=\"applied\"}";
    let before = early.leader_sample(applied).await;
    early.swap_policy(&with_teams(
        &original,
        &[("early", &early.ns), ("late", &late.ns)],
    ));
    early
        .wait_for("the teams taken up", || async {
            early.leader_sample(applied).await > before
        })
        .await;

    // The early team fills the fleet: 8 run, 2 wait.
    let early_names: Vec<String> = (0..10).map(|i| format!("e{i}")).collect();
    for name in &early_names {
        early.create_scheduled(name, gpu_job(), json!({})).await;
    }
    let names: Vec<&str> = early_names.iter().map(String::as_str).collect();
    let running = early.placed_count(&names, 8).await;
    assert_eq!(running.len(), 8, "room for 8 GPUs: {running:?}");
    let waiting: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !running.iter().any(|(r, _)| r == n))
        .collect();
    for name in &waiting {
        early.warning(name, "NoWorkerFits", &[GPU]).await;
    }

    // The late team comes: its Jobs wait too, until a GPU frees; each freed GPU is theirs.
    for name in ["l0", "l1"] {
        late.create_scheduled(name, gpu_job(), json!({})).await;
        late.warning(name, "NoWorkerFits", &[GPU]).await;
    }
    for (freed, (name, worker)) in running.iter().take(2).enumerate() {
        early.release(worker, name).await;
        early.complete(name).await;
        let placed = late.placed_count(&["l0", "l1"], freed + 1).await;
        assert_eq!(placed.len(), freed + 1, "{placed:?}");
        for name in &waiting {
            let job = early.jobs().get(name).await.expect("the Job");
            assert_eq!(recorded(&job), None, "{name} of the early team still waits");
        }
    }

    // The end: every Job runs and completes; the policy as it was.
    for (name, worker) in running.iter().skip(2) {
        early.release(worker, name).await;
    }
    for name in ["l0", "l1"] {
        late.run_out(name).await;
        late.complete(name).await;
    }
    for name in &waiting {
        early.run_out(name).await;
    }
    for name in &names {
        early.complete(name).await;
    }
    early.swap_policy(&original);
    late.finish_placing(&[]).await;
    early.finish_placing(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_needing_a_whole_node_is_not_overtaken_by_a_stream() {
    let gpus = |name: &str| node(name, "16").resource(GPU, "4");
    let Some(stream) = Test::placing("stream", &[gpus("east-gpu")], &[gpus("west-gpu")]).await
    else {
        return;
    };
    let whole = stream.beside("whole").await;
    let original = std::fs::read_to_string(stream.world.dispatcher.policy()).expect("the policy");
    let applied = "jobwarden_policy_reloads_total{result=\"applied\"}";
    let before = stream.leader_sample(applied).await;
    stream.swap_policy(&with_teams(
        &original,
        &[("stream", &stream.ns), ("whole", &whole.ns)],
    ));
    stream
        .wait_for("the teams taken up", || async {
            stream.leader_sample(applied).await > before
        })
        .await;

    let first: Vec<String> = (0..8).map(|i| format!("s{i:02}")).collect();
    for name in &first {
        stream.create_scheduled(name, gpu_job(), json!({})).await;
    }
    let names: Vec<&str> = first.iter().map(String::as_str).collect();
    let mut running: Vec<(String, String)> = stream
        .placed_count(&names, 8)
        .await
        .into_iter()
        .map(|(n, w)| (n.to_owned(), w))
        .collect();

    // One pod of 4 GPUs: only an empty Node holds it. It waits, and room is held for it.
    whole
        .create_scheduled(
            "big",
            spec(1, json!({"cpu": "1", GPU: "4"}), true, json!({})),
            json!({}),
        )
        .await;
    whole.warning("big", "NoWorkerFits", &[GPU]).await;
    whole
        .wait_for("room held for the big Job", || async {
            whole
                .events("big")
                .await
                .iter()
                .any(|e| e.contains("RoomHeld"))
        })
        .await;
    // A Job that needs no GPU is placed while it waits.
    whole
        .create_scheduled(
            "cpu-only",
            spec(1, json!({"cpu": "1"}), true, json!({})),
            json!({}),
        )
        .await;
    whole.placed("cpu-only").await;
    let big = whole.jobs().get("big").await.expect("the big Job");
    assert_eq!(recorded(&big), None, "the big Job still waits");

    // The stream goes on: each GPU Job that ends is followed by a new one.
    let mut made = Vec::new();
    for round in 0..8 {
        let (name, worker) = running.remove(0);
        stream.release(&worker, &name).await;
        stream.complete(&name).await;
        let next = format!("n{round:02}");
        stream.create_scheduled(&next, gpu_job(), json!({})).await;
        made.push(next);
        let placed = whole
            .jobs()
            .get("big")
            .await
            .ok()
            .as_ref()
            .and_then(recorded);
        if placed.is_some() {
            break;
        }
    }
    whole.placed("big").await;

    // The end: every Job runs and completes; the policy as it was.
    whole.run_out("big").await;
    whole.run_out("cpu-only").await;
    for (name, worker) in &running {
        stream.release(worker, name).await;
    }
    for name in &made {
        stream.run_out(name).await;
    }
    for name in ["big", "cpu-only"] {
        whole.complete(name).await;
    }
    for name in first.iter().chain(&made) {
        stream.complete(name).await;
    }
    stream.swap_policy(&original);
    whole.finish_placing(&[]).await;
    stream.finish_placing(&[]).await;
}
