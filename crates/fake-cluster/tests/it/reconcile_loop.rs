//! The reconcile loop as it runs in a cluster (watch streams, the applier, batching,
//! expectations, events, orphans), against the in-memory API server, whose watches trail its
//! writes. Time is tokio's paused clock: the Jobs run minutes of virtual time in milliseconds,
//! and no assertion is about time.

use std::sync::Arc;
use std::time::Duration;

use jobwarden_fake_cluster::{
    InMemoryCluster, LoopRunConfig, Outcome, Request, RunningLoop, SeenPod, World, finalizers,
    meta_key, run_until_finished,
};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

fn job(name: &str, spec: Value) -> Value {
    let mut job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "managedBy": "jobwarden.io/job-controller",
            "template": {"spec": {"restartPolicy": "Never",
                                  "containers": [{"name": "main", "image": "busybox"}]}},
        },
    });
    if let (Some(target), Some(extra)) = (job["spec"].as_object_mut(), spec.as_object()) {
        target.extend(extra.clone());
    }
    job
}

fn cluster_with(jobs: Vec<Value>) -> (Arc<InMemoryCluster>, Vec<(String, String)>) {
    let base = Timestamp::from_second(1_700_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
    let cluster = Arc::new(InMemoryCluster::new(base));
    let names = jobs
        .into_iter()
        .map(|j| {
            let created = cluster.write(|s| s.create_job(j)).expect("a valid Job");
            meta_key(&created)
        })
        .collect();
    (cluster, names)
}

fn requests(cluster: &InMemoryCluster, verb: &'static str, resource: &'static str) -> u64 {
    cluster.with(|s| {
        s.requests
            .get(&Request { verb, resource })
            .copied()
            .unwrap_or(0)
    })
}

fn after_a_second(p: &SeenPod) -> Outcome {
    if p.running_for >= Duration::from_secs(1) {
        Outcome::succeed()
    } else {
        Outcome::Run
    }
}

/// Runs the Jobs to their end with the default loop, pods succeeding after a second.
async fn run_to_the_end(cluster: &Arc<InMemoryCluster>, jobs: &[(String, String)]) {
    let report = run_until_finished(
        cluster.clone(),
        jobs,
        LoopRunConfig::default(),
        after_a_second,
    )
    .await;
    assert!(report.finished);
}

#[tokio::test(start_paused = true)]
async fn an_indexed_job_of_200_pods_costs_two_writes_a_pod() {
    let (cluster, jobs) = cluster_with(vec![job(
        "big",
        json!({"completions": 200, "parallelism": 200, "completionMode": "Indexed"}),
    )]);
    run_to_the_end(&cluster, &jobs).await;
    let job = cluster.with(|s| s.job("ns", "big")).expect("the Job");
    assert_eq!(job["status"]["succeeded"], 200);
    assert_eq!(job["status"]["completedIndexes"], "0-199");
    // Every pod created once and released once; nothing read outside the watches.
    assert_eq!(requests(&cluster, "create", "pods"), 200);
    assert_eq!(requests(&cluster, "patch", "pods"), 200);
    assert_eq!(requests(&cluster, "get", "jobs"), 0);
    assert_eq!(requests(&cluster, "list", "pods"), 1);
    assert_eq!(requests(&cluster, "list", "jobs"), 1);
    // A few status writes and events for the whole Job, not some per pod.
    let status = requests(&cluster, "patch", "jobs/status");
    assert!(status <= 20, "status writes: {status}");
    let events = requests(&cluster, "create", "events");
    assert!(events <= 25, "events: {events}");
}

#[tokio::test(start_paused = true)]
async fn events_are_written_apart_from_the_syncs_and_all_by_a_graceful_stop() {
    let (cluster, jobs) = cluster_with(
        (0..30)
            .map(|i| {
                job(
                    &format!("j{i}"),
                    json!({"completions": 1, "parallelism": 1}),
                )
            })
            .collect(),
    );
    let report = run_until_finished(
        cluster.clone(),
        &jobs,
        LoopRunConfig::default(),
        after_a_second,
    )
    .await;
    assert!(report.finished);
    // The writer wrote every Event the syncs queued, the last ones while the loop stopped.
    assert_eq!(report.metrics.events.events_queued.get(), 0);
    let events = cluster.with(|s| s.events.clone());
    for (_, name) in &jobs {
        let reasons: Vec<&str> = events
            .iter()
            .filter(|e| &e.job.name == name)
            .map(|e| e.record.reason.as_str())
            .collect();
        assert_eq!(reasons, ["SuccessfulCreate", "Completed"], "{name}");
    }
}

#[tokio::test(start_paused = true)]
async fn failed_pods_are_replaced_after_the_back_off_and_counted_once() {
    let (cluster, jobs) = cluster_with(vec![job(
        "flaky",
        json!({"completions": 3, "parallelism": 3, "backoffLimit": 6}),
    )]);
    // The first two pods fail after a second while the third runs on; every later pod
    // succeeds.
    let outcome = |p: &SeenPod| match p.ordinal {
        1 | 2 if p.running_for >= Duration::from_secs(1) => Outcome::exit(1),
        3 if p.running_for >= Duration::from_secs(60) => Outcome::succeed(),
        4.. if p.running_for >= Duration::from_secs(1) => Outcome::succeed(),
        _ => Outcome::Run,
    };
    let report =
        run_until_finished(cluster.clone(), &jobs, LoopRunConfig::default(), outcome).await;
    assert!(report.finished);
    let job = cluster.with(|s| s.job("ns", "flaky")).expect("the Job");
    assert_eq!(job["status"]["succeeded"], 3);
    assert_eq!(job["status"]["failed"], 2);
    assert_eq!(requests(&cluster, "create", "pods"), 5);
    // Upstream's back-off: two failures since the last success, so 20 s after the last one.
    let time = |p: &Value, path: &str| {
        p.pointer(path)
            .and_then(Value::as_str)
            .and_then(|t| t.parse::<Timestamp>().ok())
    };
    let pods = cluster.with(|s| s.last_pod_states());
    let failed_at = pods
        .iter()
        .filter(|p| p["status"]["phase"] == "Failed")
        .filter_map(|p| time(p, "/status/containerStatuses/0/state/terminated/finishedAt"))
        .max()
        .expect("failed pods");
    let replaced_at = pods
        .iter()
        .filter_map(|p| time(p, "/metadata/creationTimestamp"))
        .filter(|t| *t > failed_at)
        .min()
        .expect("replacements");
    let waited = replaced_at.duration_since(failed_at);
    assert!(waited.as_secs() >= 20, "replaced after {waited:?}");
}

#[tokio::test(start_paused = true)]
async fn deleting_finished_jobs_and_their_pods_costs_no_request() {
    let specs = (0..5)
        .map(|i| {
            job(
                &format!("j{i}"),
                json!({"completions": 4, "parallelism": 4}),
            )
        })
        .collect();
    let (cluster, jobs) = cluster_with(specs);
    run_to_the_end(&cluster, &jobs).await;
    let before: u64 = cluster.with(|s| s.requests.values().sum());
    // A namespace torn down: the Jobs go, and the garbage collector takes their pods.
    for (ns, name) in &jobs {
        cluster.write(|s| s.delete_job(ns, name)).expect("deleted");
    }
    let watching = run_until_finished(
        cluster.clone(),
        &[],
        LoopRunConfig::default(),
        after_a_second,
    );
    assert!(watching.await.finished);
    assert_eq!(cluster.with(|s| s.pod_count()), 0);
    let after: u64 = cluster.with(|s| s.requests.values().sum());
    // The second run's own list and watch of Jobs and pods, and nothing else.
    assert_eq!(after - before, 4);
}

#[tokio::test(start_paused = true)]
async fn the_pods_of_a_job_deleted_while_running_are_released() {
    let (cluster, _) = cluster_with(vec![job(
        "doomed",
        json!({"completions": 3, "parallelism": 3}),
    )]);
    // The pods never end: delete the Job once they run, and let the loop see the rest.
    let mut deleted = false;
    let cluster2 = cluster.clone();
    let outcome = move |_: &SeenPod| {
        if !deleted && cluster2.with(|s| s.pods().len()) == 3 {
            deleted = true;
            let _ = cluster2.write(|s| s.delete_job("ns", "doomed"));
        }
        Outcome::Run
    };
    let config = LoopRunConfig {
        give_up_after: Duration::from_secs(120),
        ..LoopRunConfig::default()
    };
    let report = run_until_finished(cluster.clone(), &[], config, outcome).await;
    assert!(report.finished, "no pod keeps the finalizer");
    assert_eq!(
        cluster.with(|s| s.pod_count()),
        0,
        "released, the deleted pods went"
    );
    // The Job's Delete event told the controller: no GET needed to confirm.
    assert_eq!(requests(&cluster, "get", "jobs"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_pod_deleted_while_running_holds_its_replacement_back_after_it_is_gone() {
    let (cluster, jobs) = cluster_with(vec![job(
        "one",
        json!({"completions": 1, "parallelism": 1}),
    )]);
    // The first pod is deleted after running a second: it counts as failed, loses its
    // finalizer and is gone long before its replacement may start.
    let outcome = |p: &SeenPod| match p.ordinal {
        1 if p.running_for >= Duration::from_secs(1) => Outcome::Delete,
        2.. if p.running_for >= Duration::from_secs(1) => Outcome::succeed(),
        _ => Outcome::Run,
    };
    let report =
        run_until_finished(cluster.clone(), &jobs, LoopRunConfig::default(), outcome).await;
    assert!(report.finished);
    let job = cluster.with(|s| s.job("ns", "one")).expect("the Job");
    assert_eq!(job["status"]["failed"], 1);
    assert_eq!(job["status"]["succeeded"], 1);
    let mut created: Vec<Timestamp> = cluster.with(|s| {
        s.last_pod_states()
            .iter()
            .filter_map(|p| p["metadata"]["creationTimestamp"].as_str()?.parse().ok())
            .collect()
    });
    created.sort();
    let gap = created[1].duration_since(created[0]);
    // A second of running, then upstream's 10 s back-off.
    assert!(
        gap.as_secs() >= 11,
        "replaced {gap:?} after the first pod started"
    );
}

/// How a controller is disrupted mid-run, and replaced.
#[derive(Debug, Clone, Copy)]
enum Disruption {
    /// SIGKILL: the loop dies between two API calls, and a new one starts 5 s later, while
    /// the pods go on finishing with no controller running.
    KilledAndRestarted,
    /// SIGTERM: the syncs in flight finish, and a standby starts at once.
    HandedOver,
}

/// What a run of the Indexed Job `restarts` left behind.
#[derive(Debug, PartialEq)]
struct Ending {
    status: (Value, Value, Value, Vec<(String, String)>),
    pods_created: u64,
}

/// An Indexed Job of 12 indexes, 3 at a time, pods finishing a second after they start; the
/// controller disrupted once 5 indexes are counted. Returns the ending and, per index, how
/// many of its pods succeeded.
async fn indexed_run(disruption: Option<Disruption>) -> (Ending, Vec<usize>) {
    let (cluster, jobs) = cluster_with(vec![job(
        "restarts",
        json!({"completions": 12, "parallelism": 3, "completionMode": "Indexed"}),
    )]);
    let config = LoopRunConfig::default();
    let mut world = World::new(&cluster, config.kubelet_period);
    let mut outcome = after_a_second;
    let limit = Duration::from_secs(600);
    let succeeded = |c: &InMemoryCluster| {
        c.with(|s| s.job("ns", "restarts"))
            .and_then(|j| j["status"]["succeeded"].as_i64())
            .unwrap_or(0)
    };
    let finished = |c: &InMemoryCluster| {
        c.with(|s| s.job("ns", "restarts")).is_some_and(|j| {
            j["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Complete"))
        }) && c
            .with(|s| s.pods())
            .iter()
            .all(|p| finalizers(p).is_empty())
    };
    let mut running = RunningLoop::start(&cluster, &config, world.clock());
    if let Some(disruption) = disruption {
        assert!(
            world
                .run_until(limit, &mut outcome, |c| succeeded(c) >= 5)
                .await
        );
        match disruption {
            Disruption::KilledAndRestarted => {
                running.kill().await;
                world
                    .run_until(Duration::from_secs(5), &mut outcome, |_| false)
                    .await;
                // The scenario needs pods that ended while no controller ran.
                let unrecorded = cluster.with(|s| {
                    s.pods()
                        .iter()
                        .filter(|p| p["status"]["phase"] == "Succeeded")
                        .filter(|p| !finalizers(p).is_empty())
                        .count()
                });
                assert!(unrecorded > 0, "pods finished while no controller ran");
            }
            Disruption::HandedOver => running.stop().await,
        }
        running = RunningLoop::start(&cluster, &config, world.clock());
    }
    assert!(world.run_until(limit, &mut outcome, finished).await);
    running.stop().await;
    let _ = &jobs;
    let job = cluster.with(|s| s.job("ns", "restarts")).expect("the Job");
    let st = &job["status"];
    let conditions = st["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| (c["type"].to_string(), c["reason"].to_string()))
        .collect();
    let mut per_index = vec![0; 12];
    for p in cluster.with(|s| s.last_pod_states()) {
        let index = p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
            .as_str()
            .and_then(|i| i.parse::<usize>().ok());
        if let Some(i) = index
            && p["status"]["phase"] == "Succeeded"
        {
            per_index[i] += 1;
        }
    }
    let ending = Ending {
        status: (
            st["succeeded"].clone(),
            st["failed"].clone(),
            st["completedIndexes"].clone(),
            conditions,
        ),
        pods_created: requests(&cluster, "create", "pods"),
    };
    (ending, per_index)
}

#[tokio::test(start_paused = true)]
async fn a_restart_or_a_hand_over_runs_no_index_twice() {
    let (undisturbed, per_index) = indexed_run(None).await;
    assert_eq!(per_index, vec![1; 12]);
    assert_eq!(undisturbed.pods_created, 12);
    for disruption in [Disruption::KilledAndRestarted, Disruption::HandedOver] {
        let (ending, per_index) = indexed_run(Some(disruption)).await;
        assert_eq!(
            per_index,
            vec![1; 12],
            "{disruption:?}: succeeded pods per index"
        );
        assert_eq!(ending, undisturbed, "{disruption:?}");
    }
}

/// The Job's generated selector labels, as the API server set them.
fn selector_labels(cluster: &InMemoryCluster, name: &str) -> Value {
    let job = cluster.with(|s| s.job("ns", name)).expect("the Job");
    job["spec"]["selector"]["matchLabels"].clone()
}

fn owners(pod: &Value) -> Vec<String> {
    pod["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["uid"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_bare_pod_matching_the_selector_is_adopted_and_counted() {
    let (cluster, jobs) = cluster_with(vec![job(
        "adopts",
        json!({"completions": 2, "parallelism": 2}),
    )]);
    let uid = cluster
        .with(|s| s.job("ns", "adopts"))
        .and_then(|j| j["metadata"]["uid"].as_str().map(str::to_owned))
        .expect("a uid");
    // Someone made a pod by hand with the Job's labels, and no owner.
    let bare = json!({"metadata": {"name": "by-hand", "labels": selector_labels(&cluster, "adopts")},
                      "spec": {"restartPolicy": "Never",
                               "containers": [{"name": "main", "image": "busybox"}]}});
    cluster
        .write(|s| s.create_pod("ns", &bare))
        .expect("the bare pod");
    run_to_the_end(&cluster, &jobs).await;
    let job = cluster.with(|s| s.job("ns", "adopts")).expect("the Job");
    assert_eq!(job["status"]["succeeded"], 2);
    let adopted = cluster.with(|s| s.pod("ns", "by-hand")).expect("kept");
    assert_eq!(owners(&adopted), [uid]);
    assert_eq!(
        adopted["metadata"]["ownerReferences"][0]["controller"],
        true
    );
    assert!(finalizers(&adopted).is_empty(), "counted, then released");
    // One pod fewer made, as upstream's controller makes.
    assert_eq!(requests(&cluster, "create", "pods"), 1);
}

/// A bare pod that arrives while the Job's own pods run quietly is claimed at once: its arrival
/// wakes the Job, as upstream's `addPod` wakes every Job whose selector matches an orphan.
/// Before, it waited for the Job's next sync, which nothing here would bring.
#[tokio::test(start_paused = true)]
async fn a_bare_pod_that_joins_a_quiet_job_is_claimed() {
    let (cluster, _) = cluster_with(vec![job(
        "joins",
        json!({"completions": 2, "parallelism": 2}),
    )]);
    let config = LoopRunConfig::default();
    let mut world = World::new(&cluster, config.kubelet_period);
    let mut run_forever = |_: &SeenPod| Outcome::Run;
    let running = RunningLoop::start(&cluster, &config, world.clock());
    let limit = Duration::from_secs(120);
    let ready = |c: &InMemoryCluster| {
        c.with(|s| s.job("ns", "joins"))
            .is_some_and(|j| j["status"]["ready"] == 2)
    };
    assert!(world.run_until(limit, &mut run_forever, ready).await);
    // Quiet: the Job's pods run, and nothing more is written for it.
    world
        .run_until(Duration::from_secs(30), &mut run_forever, |_| false)
        .await;
    let bare = json!({"metadata": {"name": "by-hand", "labels": selector_labels(&cluster, "joins")},
                      "spec": {"restartPolicy": "Never",
                               "containers": [{"name": "main", "image": "busybox"}]}});
    cluster
        .write(|s| s.create_pod("ns", &bare))
        .expect("the bare pod");
    let claimed = |c: &InMemoryCluster| {
        c.with(|s| s.pod("ns", "by-hand"))
            .is_none_or(|p| !owners(&p).is_empty() || !p["metadata"]["deletionTimestamp"].is_null())
    };
    assert!(world.run_until(limit, &mut run_forever, claimed).await);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_pod_whose_labels_no_longer_match_is_released_and_replaced() {
    let (cluster, jobs) = cluster_with(vec![job(
        "releases",
        json!({"completions": 1, "parallelism": 1}),
    )]);
    let cluster2 = cluster.clone();
    // The first pod's labels are changed while it runs; it never ends. Its replacement
    // succeeds.
    let outcome = move |p: &SeenPod| match p.ordinal {
        1 if p.running_for >= Duration::from_secs(1) => {
            let _ = cluster2.write(|s| {
                s.kubelet_update(&p.namespace, &p.name, |pod| {
                    pod["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] =
                        json!("someone-else");
                })
            });
            Outcome::Run
        }
        2.. if p.running_for >= Duration::from_secs(1) => Outcome::succeed(),
        _ => Outcome::Run,
    };
    let config = LoopRunConfig {
        give_up_after: Duration::from_secs(120),
        ..LoopRunConfig::default()
    };
    let report = run_until_finished(cluster.clone(), &jobs, config, outcome).await;
    assert!(report.finished);
    let job = cluster.with(|s| s.job("ns", "releases")).expect("the Job");
    assert_eq!(job["status"]["succeeded"], 1);
    assert_eq!(requests(&cluster, "create", "pods"), 2);
    let released: Vec<Value> = cluster
        .with(|s| s.pods())
        .into_iter()
        .filter(|p| p["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] == "someone-else")
        .collect();
    assert_eq!(released.len(), 1);
    assert!(owners(&released[0]).is_empty(), "{}", released[0]);
    assert!(finalizers(&released[0]).is_empty());
}
