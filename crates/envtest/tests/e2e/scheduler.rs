//! kube-scheduler in a worker plane (issue 48's test bed), on the real thing: a fleet whose
//! worker runs kube-scheduler (`Fleet::start_scheduled`), Nodes laid out by `Nodes` (one with
//! two GPUs, one tainted), a pod that fits bound by the scheduler and played to `Succeeded` by
//! the kubelet of bound pods, a pod that fits nowhere left `Pending` as `Unschedulable` and
//! never touched; the layout changed under them (cordoned, uncordoned, untainted, retainted,
//! deleted); and what kube-apiserver does to a Node created bare (the not-ready taint the
//! helper takes off).
//!
//! Skipped with one line without the control-plane binaries (kube-scheduler among them).

use std::future::Future;
use std::time::{Duration, Instant};

use jobwarden_envtest::{
    Fleet, NOT_READY_TAINT, NodeLayout, kubelet_of_bound_pods, pod_phase, scheduled_job,
};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

/// How long a condition may take on a busy two-core machine.
const PATIENCE: Duration = Duration::from_secs(180);

/// Asks `done` every 200 ms until it says yes, for at most [`PATIENCE`].
async fn wait_for<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !done().await {
        assert!(started.elapsed() < PATIENCE, "no {what} after {PATIENCE:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A pod for the default scheduler: the pod template of the Jobs the placement tests run
/// (`scheduled_job`), its container asking for `resources`.
fn pod(name: &str, resources: Value) -> Pod {
    let job = scheduled_job(name, "", json!({}));
    let mut spec = job["spec"]["template"]["spec"].clone();
    spec["containers"][0]["resources"] = resources;
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("a pod")
}

fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

/// The pod's `PodScheduled` condition: its status, reason and message.
fn scheduled_condition(pod: &Pod) -> Option<(String, Option<String>, String)> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .map(|c| {
            let message = c.message.clone().unwrap_or_default();
            (c.status.clone(), c.reason.clone(), message)
        })
}

fn taints(node: &Node) -> Vec<(String, String)> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .map(|t| (t.key.clone(), t.effect.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_binds_what_fits_and_the_kubelet_plays_only_bound_pods() {
    let fleet = match tokio::task::block_in_place(|| Fleet::start_scheduled(1)) {
        Ok(fleet) => fleet,
        Err(e) if e.starts_with("skipped:") => {
            eprintln!("{e}");
            return;
        }
        Err(e) => panic!("the fleet did not start: {e}"),
    };
    assert_eq!(fleet.management.pids().len(), 3, "no scheduler there");
    let worker = &fleet.workers[0];
    assert_eq!(
        worker.pids().len(),
        4,
        "etcd, kube-apiserver, kube-controller-manager, kube-scheduler"
    );
    let client = worker.client().await;
    let nodes = worker.nodes().await;

    // kube-apiserver's TaintNodesByCondition admission taints a Node created bare, whatever
    // it says; nothing but the node lifecycle controller (not run here) or `Nodes` takes the
    // taint off.
    let bare: Node = serde_json::from_value(json!({"metadata": {"name": "bare"}})).expect("a Node");
    let bare = Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &bare)
        .await
        .expect("a bare Node is created");
    assert_eq!(
        taints(&bare),
        [(NOT_READY_TAINT.to_owned(), "NoSchedule".to_owned())]
    );
    nodes
        .delete("bare")
        .await
        .expect("the bare Node is deleted");

    let laid_out = nodes
        .lay_out(&[
            NodeLayout::new("gpu-node")
                .resource("nvidia.com/gpu", "2")
                .label("accelerator", "nvidia"),
            NodeLayout::new("tainted-node")
                .resource("cpu", "128")
                .resource("memory", "512Gi")
                .taint("dedicated", "another-team", "NoSchedule"),
        ])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let gpu = &laid_out[0];
    assert_eq!(taints(gpu), []);
    assert_eq!(
        taints(&laid_out[1]),
        [("dedicated".to_owned(), "NoSchedule".to_owned())]
    );
    let status = gpu.status.as_ref().expect("a status");
    assert_eq!(
        status
            .allocatable
            .as_ref()
            .and_then(|a| a.get("nvidia.com/gpu"))
            .map(|q| q.0.as_str()),
        Some("2")
    );
    let ready = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.as_str());
    assert_eq!(ready, Some("True"));

    let namespace = worker.create_namespace(&client, "scheduled").await;
    let pods = Api::<Pod>::namespaced(client.clone(), &namespace);
    let kubelet = kubelet_of_bound_pods(pods.clone());
    // The one that fits nowhere first: the kubelet sees it on every pass while the other runs.
    for pod in [
        pod("too-big", json!({"requests": {"cpu": "64"}})),
        pod(
            "one-gpu",
            json!({"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}),
        ),
    ] {
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("the pod is created");
    }

    wait_for("one-gpu bound to gpu-node and Succeeded", || async {
        pods.get("one-gpu")
            .await
            .is_ok_and(|p| node_name(&p) == Some("gpu-node") && pod_phase(&p) == "Succeeded")
    })
    .await;
    // Each node ruled out for its own reason: the GPU node's 4 cpu, the big node's taint. (A
    // first attempt may have seen fewer Nodes; the scheduler tries again as they come.)
    wait_for(
        "too-big PodScheduled=False, Unschedulable, for want of cpu and for a taint",
        || async {
            pods.get("too-big").await.is_ok_and(|p| {
                scheduled_condition(&p).is_some_and(|(status, reason, said)| {
                    status == "False"
                        && reason.as_deref() == Some("Unschedulable")
                        && said.contains("0/2 nodes are available")
                        && said.contains("1 Insufficient cpu")
                        && said.contains("1 node(s) had untolerated taint")
                })
            })
        },
    )
    .await;
    let too_big = pods.get("too-big").await.expect("too-big is there");
    assert_eq!(node_name(&too_big), None, "never bound");
    let status = too_big.status.clone().unwrap_or_default();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert!(
        status.start_time.is_none() && status.container_statuses.is_none(),
        "the kubelet never touched too-big: {status:#?}"
    );

    // The layout changed mid-scenario: a cordoned node takes no new pod until uncordoned.
    nodes
        .cordon("gpu-node")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    pods.create(
        &PostParams::default(),
        &pod(
            "second-gpu",
            json!({"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}),
        ),
    )
    .await
    .expect("the pod is created");
    wait_for("second-gpu unschedulable on the cordoned node", || async {
        pods.get("second-gpu").await.is_ok_and(|p| {
            scheduled_condition(&p).is_some_and(|(status, _, said)| {
                status == "False" && said.contains("unschedulable")
            })
        })
    })
    .await;
    nodes
        .uncordon("gpu-node")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // The taint taken off, too-big fits on the big node at last, and runs once bound.
    nodes
        .untaint("tainted-node", "dedicated")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    for (name, node) in [("second-gpu", "gpu-node"), ("too-big", "tainted-node")] {
        wait_for(&format!("{name} bound to {node} and Succeeded"), || async {
            pods.get(name)
                .await
                .is_ok_and(|p| node_name(&p) == Some(node) && pod_phase(&p) == "Succeeded")
        })
        .await;
    }
    kubelet.abort();

    let retainted = nodes
        .retaint(
            "tainted-node",
            &[jobwarden_envtest::taint("gone", "", "NoExecute")],
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        taints(&retainted),
        [("gone".to_owned(), "NoExecute".to_owned())]
    );
    nodes
        .delete("gpu-node")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(nodes.get("gpu-node").await.is_err(), "gpu-node is gone");
}
