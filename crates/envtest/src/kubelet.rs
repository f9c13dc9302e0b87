//! A kubelet for load on a real API server: it watches a namespace's pods and ends each one,
//! succeeded, about a second after it first sees it, as a node would run a short container.
//! Pods are never scheduled on the envtest control plane (it has no nodes), so the tests and
//! benchmarks that need pods to finish play this part. Its client is the caller's: name it
//! (User-Agent) to tell its requests apart in the audit log.

use std::collections::HashSet;
use std::time::Duration;

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, ResourceExt as _};
use serde_json::json;

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
                let now = k8s_openapi::jiff::Timestamp::now().to_string();
                let status = json!({"status": {
                    "phase": "Succeeded",
                    "containerStatuses": [{
                        "name": "main", "image": "busybox", "imageID": "", "ready": false,
                        "restartCount": 0,
                        "state": {"terminated": {"exitCode": 0, "startedAt": now, "finishedAt": now}},
                    }],
                }});
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
