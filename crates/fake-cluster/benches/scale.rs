//! The reconcile loop at cluster scale, with no cluster: the in-memory API server holding N Jobs
//! of M pods, a kubelet ending each pod about a second after it starts, and the very loop a
//! cluster runs (watches trailing the writes by 50 ms, the applier, batching, expectations,
//! events), on tokio's paused clock. Each scenario runs in a process of its own, so its peak
//! memory is its own. Reports the API requests by verb and resource, per pod, the syncs, the
//! CPU time per pod (the in-memory API server's JSON work included: it runs in the same
//! process) and the peak resident memory; and, separately, what the controller's caches alone
//! cost for 10,000 Jobs and 100,000 pods.
//!
//! ```sh
//! cargo bench -p jobwarden-fake-cluster --bench scale                       # the suite
//! cargo bench -p jobwarden-fake-cluster --bench scale -- run 200 50 Indexed # one run: N Jobs × M pods
//! ```

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jobwarden_controller::ControllerMetrics;
use jobwarden_controller::plan::PlanConfig;
use jobwarden_controller::sync::JobController;
use jobwarden_fake_cluster::{
    InMemoryCluster, LoopRunConfig, Outcome, Request, SeenPod, run_until_finished,
};
use jobwarden_runtime::job_cache::CachedJob;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::{reflector, watcher};
use serde_json::{Value, json};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `VmRSS` or `VmHWM` of this process, in MiB.
fn memory(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// User plus system CPU time of this process.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|t| t.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are the 14th and 15th fields; the 3rd is fields[0] here. Linux counts
    // them in USER_HZ, 100 on every architecture it supports.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

fn job(name: &str, pods: i32, mode: &str) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "scale"},
        "spec": {
            "managedBy": "jobwarden.io/job-controller",
            "completions": pods, "parallelism": pods, "completionMode": mode,
            "template": {"spec": {"restartPolicy": "Never",
                                  "containers": [{"name": "main", "image": "busybox:1.36",
                                                  "command": ["sh", "-c", "sleep 1"]}]}},
        },
    })
}

fn after_a_second(p: &SeenPod) -> Outcome {
    if p.running_for >= Duration::from_secs(1) {
        Outcome::succeed()
    } else {
        Outcome::Run
    }
}

fn requests_since(
    cluster: &InMemoryCluster,
    before: &BTreeMap<Request, u64>,
) -> BTreeMap<Request, u64> {
    cluster.with(|s| {
        s.requests
            .iter()
            .map(|(r, n)| (*r, n - before.get(r).copied().unwrap_or(0)))
            .filter(|(_, n)| *n > 0)
            .collect()
    })
}

fn syncs(metrics: &ControllerMetrics) -> u64 {
    ["success", "conflict", "error"]
        .iter()
        .map(|r| {
            metrics
                .syncs
                .get_or_create(&jobwarden_controller::metrics::SyncLabels {
                    result: (*r).to_owned(),
                })
                .get()
        })
        .sum()
}

fn print_requests(label: &str, requests: &BTreeMap<Request, u64>, pods: u64) {
    let total: u64 = requests.values().sum();
    let detail: Vec<String> = requests
        .iter()
        .map(|(r, n)| format!("{} {} {n}", r.verb, r.resource))
        .collect();
    println!(
        "| {label} | requests | {total} ({:.2} per pod): {} |",
        total as f64 / pods.max(1) as f64,
        detail.join(", ")
    );
}

/// One run: `jobs` Jobs of `pods` pods each, to the end; then, with `delete`, the Jobs are
/// deleted as a namespace teardown does, and the requests that costs are reported apart.
fn run(jobs: usize, pods: i32, mode: &str, delete: bool) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let base = Timestamp::from_second(1_700_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
        let cluster = Arc::new(InMemoryCluster::new(base));
        cluster.with(|s| s.keep_history = false);
        let names: Vec<(String, String)> = (0..jobs)
            .map(|i| {
                let name = format!("job-{i}");
                cluster
                    .write(|s| s.create_job(job(&name, pods, mode)))
                    .expect("a valid Job");
                ("scale".to_owned(), name)
            })
            .collect();
        let rss_before = memory("VmRSS");
        let cpu = cpu_time();
        let wall = Instant::now();
        let config = LoopRunConfig {
            give_up_after: Duration::from_secs(24 * 3600),
            ..LoopRunConfig::default()
        };
        let report = run_until_finished(cluster.clone(), &names, config.clone(), after_a_second).await;
        let cpu = cpu_time().saturating_sub(cpu);
        let total_pods = jobs as u64 * u64::try_from(pods).unwrap_or(0);
        let requests = requests_since(&cluster, &BTreeMap::new());
        let label = format!("{jobs} × {pods} ({mode})");
        println!("| {label} | finished | {} in {:.1} s of Job time, {:.1} s of wall time |", report.finished, report.took.as_secs_f64(), wall.elapsed().as_secs_f64());
        print_requests(&label, &requests, total_pods);
        println!("| {label} | syncs | {} |", syncs(&report.metrics));
        println!(
            "| {label} | CPU per pod | {:.0} µs (controller and in-memory API server together) |",
            cpu.as_secs_f64() * 1e6 / total_pods.max(1) as f64
        );
        println!(
            "| {label} | memory | peak {:.0} MiB resident; {:.0} MiB before the loop; the in-memory cluster holds {:.0} MiB of JSON |",
            memory("VmHWM"),
            rss_before,
            cluster.with(|s| s.stored_bytes()) as f64 / 1048576.0
        );
        if delete {
            let before = cluster.with(|s| s.requests.clone());
            for (ns, name) in &names {
                cluster.write(|s| s.delete_job(ns, name)).expect("deleted");
            }
            let report = run_until_finished(cluster.clone(), &[], config, after_a_second).await;
            let mut requests = requests_since(&cluster, &before);
            // The new run's own list and watch of each resource are not the deletion's.
            for resource in ["jobs", "pods"] {
                for verb in ["list", "watch"] {
                    if let Some(n) = requests.get_mut(&Request { verb, resource }) {
                        *n -= 1;
                    }
                }
            }
            requests.retain(|_, n| *n > 0);
            println!(
                "| deleting those {jobs} Jobs and {} finished pods | finished | {} |",
                total_pods, report.finished
            );
            print_requests("deleting them", &requests, total_pods);
        }
    });
}

/// A pod as kube-apiserver returns it to a watch, managedFields and all.
fn realistic_pod(i: usize, job_uid: &str) -> Value {
    let name = format!("job-{}-{}-x7k2p", i / 10, i % 10);
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "generateName": format!("job-{}-{}-", i / 10, i % 10), "namespace": "scale",
            "uid": format!("{i:08x}-1111-4222-8333-444455556666"),
            "resourceVersion": format!("{}", 100_000 + i), "creationTimestamp": "2026-11-22T10:00:00Z",
            "labels": {"batch.kubernetes.io/controller-uid": job_uid, "batch.kubernetes.io/job-name": format!("job-{}", i / 10),
                       "controller-uid": job_uid, "job-name": format!("job-{}", i / 10),
                       "batch.kubernetes.io/job-completion-index": format!("{}", i % 10)},
            "annotations": {"batch.kubernetes.io/job-completion-index": format!("{}", i % 10),
                            "jobwarden.io/created-by": "jobwarden.io/job-controller"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": format!("job-{}", i / 10),
                                 "uid": job_uid, "controller": true, "blockOwnerDeletion": true}],
            "finalizers": ["jobwarden.io/job-tracking"],
            "managedFields": [
                {"manager": "jobwarden-controller", "operation": "Update", "apiVersion": "v1", "time": "2026-11-22T10:00:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, "f:batch.kubernetes.io/job-completion-index": {}},
                 "f:finalizers": {".": {}, "v:\"jobwarden.io/job-tracking\"": {}}, "f:labels": {".": {}}}, "f:spec": {"f:containers": {}}}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2026-11-22T10:00:02Z",
                 "fieldsType": "FieldsV1", "subresource": "status", "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:phase": {}}}}
            ],
        },
        "spec": {
            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "sleep 1"],
                            "env": [{"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                     "fieldPath": "metadata.labels['batch.kubernetes.io/job-completion-index']"}}}],
                            "resources": {}, "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent",
                            "volumeMounts": [{"name": "kube-api-access-abcde", "readOnly": true,
                                              "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}],
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "serviceAccount": "default", "nodeName": "node-1",
            "hostname": format!("job-{}-{}", i / 10, i % 10), "securityContext": {}, "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority",
            "volumes": [{"name": "kube-api-access-abcde", "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}],
                "defaultMode": 420}}]
        },
        "status": {
            "phase": "Running", "hostIP": "10.0.0.1", "podIP": format!("10.1.{}.{}", i / 250 % 250, i % 250),
            "startTime": "2026-11-22T10:00:01Z", "qosClass": "BestEffort",
            "conditions": [
                {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": "2026-11-22T10:00:02Z"},
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-22T10:00:01Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-22T10:00:02Z"},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-11-22T10:00:02Z"},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-22T10:00:00Z"}],
            "containerStatuses": [{"name": "main", "state": {"running": {"startedAt": "2026-11-22T10:00:02Z"}},
                                   "ready": true, "restartCount": 0, "image": "docker.io/library/busybox:1.36",
                                   "imageID": "docker.io/library/busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                                   "containerID": "containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                                   "started": true}]
        }
    })
}

/// What the controller's caches alone hold for `jobs` Jobs and `pods` pods: watch events fed
/// to the Job cache and the pod cache, as a relist would.
fn caches(jobs: usize, pods: usize) {
    let before = memory("VmRSS");
    let (store, mut writer) = reflector::store::<CachedJob>();
    let controller = JobController::new(
        Arc::new(InMemoryCluster::default()),
        PlanConfig::default(),
        ControllerMetrics::default(),
    );
    let uid = |j: usize| format!("{j:08x}-aaaa-4bbb-8ccc-dddddddddddd");
    writer.apply_watcher_event(&watcher::Event::Init);
    for j in 0..jobs {
        let mut v = job(&format!("job-{j}"), 10, "Indexed");
        v["metadata"]["uid"] = json!(uid(j));
        v["metadata"]["resourceVersion"] = json!(format!("{}", 10 + j));
        v["spec"]["selector"] =
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid(j)}});
        v["status"] = json!({"active": 10, "ready": 10, "terminating": 0, "startTime": "2026-11-22T10:00:00Z",
                             "uncountedTerminatedPods": {}});
        let text = serde_json::to_string(&v).unwrap_or_default();
        let cached: CachedJob = serde_json::from_str(&text).expect("decodes");
        writer.apply_watcher_event(&watcher::Event::InitApply(cached));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    controller.observe_pods(&watcher::Event::Init);
    for i in 0..pods {
        let text = serde_json::to_string(&realistic_pod(i, &uid(i / 10))).unwrap_or_default();
        let pod: Pod = serde_json::from_str(&text).expect("decodes");
        controller.observe_pods(&watcher::Event::InitApply(pod));
    }
    controller.observe_pods(&watcher::Event::InitDone);
    let after = memory("VmRSS");
    let peak = memory("VmHWM");
    assert_eq!(store.state().len(), jobs);
    assert_eq!(controller.pods().len(), pods);
    // A watch that restarts lists again: the new pod index is built beside the old one.
    controller.observe_pods(&watcher::Event::Init);
    for i in 0..pods {
        let text = serde_json::to_string(&realistic_pod(i, &uid(i / 10))).unwrap_or_default();
        let pod: Pod = serde_json::from_str(&text).expect("decodes");
        controller.observe_pods(&watcher::Event::InitApply(pod));
    }
    controller.observe_pods(&watcher::Event::InitDone);
    let pod_text = serde_json::to_string(&realistic_pod(0, &uid(0))).map_or(0, |t| t.len());
    println!(
        "| caches: {jobs} Jobs and {pods} pods | memory | {:.0} MiB resident for the caches ({:.0} MiB before, {:.0} MiB after, peak {peak:.0} MiB); a relist of every pod peaks at {:.0} MiB; each pod is {pod_text} bytes of JSON on the wire |",
        after - before,
        before,
        after,
        memory("VmHWM"),
    );
}

fn child(args: &[&str]) {
    let exe = std::env::current_exe().expect("the bench binary");
    let status = Command::new(exe).args(args).status().expect("runs");
    assert!(status.success(), "{args:?} failed");
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let arg = |i: usize| args.get(i).map(String::as_str);
    match arg(0) {
        Some("run") => {
            let jobs = arg(1).and_then(|a| a.parse().ok()).unwrap_or(1);
            let pods = arg(2).and_then(|a| a.parse().ok()).unwrap_or(1000);
            let mode = arg(3).unwrap_or("Indexed");
            let delete = arg(4) == Some("delete");
            run(jobs, pods, mode, delete);
        }
        Some("caches") => {
            let jobs = arg(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
            let pods = arg(2).and_then(|a| a.parse().ok()).unwrap_or(100_000);
            caches(jobs, pods);
        }
        _ => {
            println!("| run | what | result |\n|---|---|---|");
            child(&["run", "1", "1000", "Indexed"]);
            child(&["run", "20", "50", "NonIndexed", "delete"]);
            child(&["run", "1", "500", "Indexed"]);
            child(&["run", "1", "500", "NonIndexed"]);
            child(&["run", "10000", "10", "Indexed"]);
            child(&["caches", "10000", "100000"]);
        }
    }
}
