//! The kubelet's part, which the e2e tests and the scale benchmark play (the control plane runs
//! no kubelet), three ways:
//!
//! * [`kubelet`]: every pod of a namespace runs as soon as it is seen, and its container `main`
//!   exits 0 a second later; a pod being deleted is killed (exit 143). A pod may say otherwise
//!   in its annotations: [`EXIT_CODE_ANNOTATION`] (the code `main` exits with) and
//!   [`RUNS_SECONDS_ANNOTATION`] (how long it runs first). Pods are read by polling, as a
//!   test's own reads, so a slow watch cannot hide one. For planes without kube-scheduler,
//!   where no pod is ever bound.
//! * [`kubelet_of_bound_pods`]: the same, for the pods bound to a node (`spec.nodeName`) only,
//!   as real kubelets are: on a plane with kube-scheduler, a pod it could not place stays
//!   `Pending`, untouched.
//! * [`finish_pods_after_a_second`]: for load, each pod is watched and ended, succeeded, a
//!   second after it first appears (no Running step), with as few requests as a kubelet makes.
//!   Its client is the caller's: name it (User-Agent) to tell its requests apart in the audit
//!   log.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};

/// The exit code of a pod's container `main` (default 0), for [`kubelet`].
pub const EXIT_CODE_ANNOTATION: &str = "e2e.jobwarden.io/exit-code";
/// How many seconds a pod runs before `main` exits (default 1), for [`kubelet`].
pub const RUNS_SECONDS_ANNOTATION: &str = "e2e.jobwarden.io/runs-seconds";

/// The value of one of the pod's annotations, read as a number.
fn annotated<T: std::str::FromStr>(pod: &Pod, key: &str) -> Option<T> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)?
        .trim()
        .parse()
        .ok()
}

/// Plays the kubelet for the pods `pods` lists until the task is aborted.
pub fn kubelet(pods: Api<Pod>) -> tokio::task::JoinHandle<()> {
    play(pods, false)
}

/// Plays the kubelets of every node for the pods `pods` lists that are bound to one, until
/// the task is aborted; an unbound pod is never touched (not even deleted: kube-apiserver
/// deletes an unbound pod at once, no kubelet involved).
pub fn kubelet_of_bound_pods(pods: Api<Pod>) -> tokio::task::JoinHandle<()> {
    play(pods, true)
}

fn play(pods: Api<Pod>, bound_only: bool) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut running: HashMap<String, Instant> = HashMap::new();
        loop {
            if let Ok(list) = pods.list(&ListParams::default()).await {
                for pod in list.items.iter().filter(|p| !bound_only || is_bound(p)) {
                    step(&pods, pod, &mut running).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// Whether a scheduler bound the pod to a node.
pub fn is_bound(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

/// The pod's `status.phase`, `Pending` until one is written.
pub fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

async fn step(pods: &Api<Pod>, pod: &Pod, running: &mut HashMap<String, Instant>) {
    let (name, uid) = (pod.name_any(), pod.uid().unwrap_or_default());
    let patch = match pod_phase(pod) {
        "Succeeded" | "Failed" => return,
        _ if pod.metadata.deletion_timestamp.is_some() => ended(143),
        "Running"
            if running.get(&uid).is_some_and(|t| {
                t.elapsed()
                    >= Duration::from_secs(annotated(pod, RUNS_SECONDS_ANNOTATION).unwrap_or(1))
            }) =>
        {
            ended(annotated(pod, EXIT_CODE_ANNOTATION).unwrap_or(0))
        }
        "Running" => {
            running.entry(uid).or_insert_with(Instant::now);
            return;
        }
        _ => {
            running.insert(uid, Instant::now());
            let now = k8s_openapi::jiff::Timestamp::now().to_string();
            json!({"status": {"phase": "Running", "startTime": now}})
        }
    };
    // A pod deleted meanwhile is no longer the kubelet's business.
    let _ = pods
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await;
}

/// The status of a pod whose container `main` exited with `code` just now.
fn ended(code: i32) -> Value {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    json!({"status": {
        "phase": if code == 0 { "Succeeded" } else { "Failed" },
        "containerStatuses": [{
            "name": "main", "image": "busybox", "imageID": "", "ready": false,
            "restartCount": 0,
            "state": {"terminated": {"exitCode": code, "startedAt": now, "finishedAt": now}},
        }],
    }})
}

/// Ends every pod of `namespace` about a second after it appears; runs until aborted.
pub fn finish_pods_after_a_second(client: Client, namespace: &str) -> tokio::task::JoinHandle<()> {
    let pods: Api<Pod> = Api::namespaced(client, namespace);
    tokio::spawn(async move {
        let mut seen = HashSet::new();
        let mut events = watcher(pods.clone(), watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Ok(Some(pod)) = events.try_next().await {
            let done = pod.metadata.deletion_timestamp.is_some()
                || pod
                    .status
                    .as_ref()
                    .and_then(|s| s.phase.as_deref())
                    .is_some_and(|p| p == "Succeeded" || p == "Failed");
            if done || !seen.insert(pod.uid().unwrap_or_default()) {
                continue;
            }
            let (pods, name) = (pods.clone(), pod.name_any());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let status = ended(0);
                // A write the API server refuses under load is tried again; a pod deleted
                // meanwhile is no longer the kubelet's business.
                for _ in 0..5 {
                    let patched = pods
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                        .await;
                    if patched.is_ok() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            });
        }
    })
}
