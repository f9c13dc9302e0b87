//! Fair shares between teams (issue 53) on real clusters: two teams named by namespace in the
//! policy file (swapped in as the kubelet swaps a mounted ConfigMap), a fleet of 8 GPUs (a Node
//! of 4 on each worker), Jobs of one pod asking for 1 GPU, bound by each worker's
//! kube-scheduler, held running until the test ends them. A team that comes late gets each
//! GPU that frees, not the older Jobs of the team that holds the fleet; and, as in every
//! placement test, no pod is ever unschedulable and no Job has two copies.

use serde_json::json;

use crate::dispatch::env::*;
use crate::dispatch::fleet_changes::Restore;
use crate::dispatch::placement::{GPU, node, spec};
use crate::dispatch::seen::{explain_args, jobwarden};

/// The policy the dispatch suite runs with, plus `shares` naming one team per namespace, each
/// of the weight given.
fn with_teams(original: &str, teams: &[(&str, &str, u32)]) -> String {
    let entries: String = teams
        .iter()
        .map(|(team, ns, weight)| {
            format!("    - {{name: {team}, namespaces: {{names: [{ns}]}}, weight: {weight}}}\n")
        })
        .collect();
    original.replacen(
        "dispatch:\n",
        &format!("dispatch:\n  shares:\n{entries}"),
        1,
    )
}

impl Test {
    async fn delete_job(&self, name: &str) {
        self.jobs()
            .delete(name, &kube::api::DeleteParams::background())
            .await
            .unwrap_or_else(|e| panic!("the Job {name} is deleted: {e}"));
    }

    /// Swaps in `original` with these teams and waits until the leader has taken it up.
    async fn take_up_teams(&self, original: &str, teams: &[(&str, &str, u32)]) {
        let applied = "jobwarden_policy_reloads_total{result=\"applied\"}";
        let before = self.leader_sample(applied).await;
        self.world.swap_policy(&with_teams(original, teams));
        self.wait_for("the teams taken up", || async {
            self.leader_sample(applied).await > before
        })
        .await;
    }

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
    // Refused on reload, naming the field: a namespace in two teams, a weight of 0.
    let original = &early.world.policy;
    let restore = Restore::policy(&early);
    let refused = "jobwarden_policy_reloads_total{result=\"refused\"}";
    for (teams, said) in [
        (
            [
                ("early", early.ns.as_str(), 1),
                ("late", early.ns.as_str(), 1),
            ],
            "is named by two teams",
        ),
        (
            [
                ("early", early.ns.as_str(), 1),
                ("late", late.ns.as_str(), 0),
            ],
            "dispatch.shares[1].weight: 0: must be a positive",
        ),
    ] {
        let before = early.leader_sample(refused).await;
        early.world.swap_policy(&with_teams(original, &teams));
        early
            .wait_for("the teams refused", || async {
                early.leader_sample(refused).await > before
            })
            .await;
        let logs = early.world.replica_logs();
        assert!(
            logs.iter().any(|log| log.contains(said)),
            "the refusal says {said:?}: {}",
            early.world.jobwarden_log()
        );
    }
    early
        .take_up_teams(original, &[("early", &early.ns, 1), ("late", &late.ns, 1)])
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
    // explain tells a waiting Job its team and its turn (the other tests' Jobs may wait too).
    let (_, told) = jobwarden(&late, &explain_args(&late, "l1", &[])).await;
    assert!(
        told.contains("Its turn: team late (weight 1), ")
            && told.contains("The team uses 0% of the fleet, against a fair share of "),
        "{told}"
    );
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
    drop(restore);
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
    let original = &stream.world.policy;
    let restore = Restore::policy(&stream);
    stream
        .take_up_teams(
            original,
            &[("stream", &stream.ns, 1), ("whole", &whole.ns, 1)],
        )
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
    drop(restore);
    whole.finish_placing(&[]).await;
    stream.finish_placing(&[]).await;
}

/// A fleet full of another team's Jobs; team A (weight 1) submits 8, then team B (weight 3) 12.
/// As the other team's Jobs end one at a time, the GPUs go by dominant share ÷ weight: B's
/// first Job runs by the second GPU freed, and the full fleet settles at A 2, B 6.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_share_the_gpus_that_free_three_to_one() {
    let gpus = |name: &str| node(name, "16").resource(GPU, "4");
    let Some(first) = Test::placing("first", &[gpus("east-gpu")], &[gpus("west-gpu")]).await else {
        return;
    };
    let (a, b) = (first.beside("a").await, first.beside("b").await);
    let original = &first.world.policy;
    let restore = Restore::policy(&first);
    let teams = [
        ("first", first.ns.as_str(), 1),
        ("a", &a.ns, 1),
        ("b", &b.ns, 3),
    ];
    first.take_up_teams(original, &teams).await;

    let holders: Vec<String> = (0..8).map(|i| format!("f{i}")).collect();
    for name in &holders {
        first.create_scheduled(name, gpu_job(), json!({})).await;
    }
    let names: Vec<&str> = holders.iter().map(String::as_str).collect();
    let running = first.placed_count(&names, 8).await;
    // A's Jobs are older than B's: A's last one is seen waiting before B submits.
    let a_names: Vec<String> = (0..8).map(|i| format!("a{i}")).collect();
    let b_names: Vec<String> = (0..12).map(|i| format!("b{i:02}")).collect();
    for name in &a_names {
        a.create_scheduled(name, gpu_job(), json!({})).await;
    }
    a.warning("a7", "NoWorkerFits", &[GPU]).await;
    for name in &b_names {
        b.create_scheduled(name, gpu_job(), json!({})).await;
    }
    b.warning("b11", "NoWorkerFits", &[GPU]).await;

    let a_names: Vec<&str> = a_names.iter().map(String::as_str).collect();
    let b_names: Vec<&str> = b_names.iter().map(String::as_str).collect();
    let mut placed = (Vec::new(), Vec::new());
    for (freed, (name, worker)) in running.iter().enumerate() {
        first.release(worker, name).await;
        first.complete(name).await;
        first
            .wait_for("the freed GPU taken", || async {
                a.placed_now(&a_names).await.len() + b.placed_now(&b_names).await.len() > freed
            })
            .await;
        placed = (a.placed_now(&a_names).await, b.placed_now(&b_names).await);
        assert_eq!(
            placed.0.len() + placed.1.len(),
            freed + 1,
            "one Job per GPU: {placed:?}"
        );
        if freed == 1 {
            assert!(
                !placed.1.is_empty(),
                "B's first Job runs by the second GPU freed: {placed:?}"
            );
        }
    }
    assert_eq!(
        (placed.0.len(), placed.1.len()),
        (2, 6),
        "A 2 GPUs, B 6: {placed:?}"
    );

    // The end: the Jobs still waiting go, the running ones complete; the policy as it was.
    for (test, names, running) in [(&a, &a_names, &placed.0), (&b, &b_names, &placed.1)] {
        for name in names
            .iter()
            .filter(|n| !running.iter().any(|(r, _)| r == *n))
        {
            test.delete_job(name).await;
        }
        for (name, worker) in running {
            test.release(worker, name).await;
            test.complete(name).await;
        }
    }
    drop(restore);
    a.finish_placing(&[]).await;
    b.finish_placing(&[]).await;
    first.finish_placing(&[]).await;
}
