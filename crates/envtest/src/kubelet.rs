//! The kubelet's part, which the e2e tests play (the control plane runs no kubelet): every pod
//! of a namespace runs as soon as it is seen, and its container `main` exits 0 a second later;
//! a pod being deleted is killed (exit 143). Pods are read by polling, as a test's own reads,
//! so a slow watch cannot hide one.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

/// Plays the kubelet for the pods `pods` lists until the task is aborted.
pub fn kubelet(pods: Api<Pod>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut running: HashMap<String, Instant> = HashMap::new();
        loop {
            if let Ok(list) = pods.list(&ListParams::default()).await {
                for pod in list.items {
                    step(&pods, &pod, &mut running).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
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
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let end = |code: i32| {
        json!({"status": {
            "phase": if code == 0 { "Succeeded" } else { "Failed" },
            "containerStatuses": [{
                "name": "main", "image": "busybox", "imageID": "", "ready": false,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": code, "startedAt": now, "finishedAt": now}},
            }],
        }})
    };
    let patch = match pod_phase(pod) {
        "Succeeded" | "Failed" => return,
        _ if pod.metadata.deletion_timestamp.is_some() => end(143),
        "Running"
            if running
                .get(&uid)
                .is_some_and(|t| t.elapsed() >= Duration::from_secs(1)) =>
        {
            end(0)
        }
        "Running" => {
            running.entry(uid).or_insert_with(Instant::now);
            return;
        }
        _ => {
            running.insert(uid, Instant::now());
            json!({"status": {"phase": "Running", "startTime": now}})
        }
    };
    // A pod deleted meanwhile is no longer the kubelet's business.
    let _ = pods
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await;
}
