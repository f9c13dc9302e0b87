//! Where a dispatched Job would fit now: each candidate judged by the dispatcher's room core
//! over its Nodes and pods as read; a placed Job's copy's pods, bound or unschedulable; the
//! workers it was moved from.

use k8s_openapi::api::core::v1::Node;

use super::*;
use crate::dispatch::{CopyReading, DispatchReading};
use crate::fit::{fit_now, pod_places};
use crate::workers::view::{Listing, WorkerRead, WorkerReading};

const DISPATCHER: &str = "jobwarden.io/dispatcher";

/// A Job of `pods` pods at once, each asking one GPU.
fn gpu_job(pods: i64) -> JobB {
    job(Some(DISPATCHER))
        .set("/spec/parallelism", json!(pods))
        .set("/spec/completions", json!(pods))
        .set(
            "/spec/template/spec/containers",
            json!([{"name": "main", "image": "x",
                    "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                                  "limits": {"nvidia.com/gpu": "1"}}}]),
        )
}

fn node(name: &str, gpus: &str, taint: Option<&str>) -> Node {
    let mut n = json!({
        "metadata": {"name": name},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": gpus},
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    });
    if let Some(key) = taint {
        n["spec"]["taints"] = json!([{"key": key, "value": "gpu", "effect": "NoSchedule"}]);
    }
    serde_json::from_value(n).expect("a Node")
}

/// A running pod on `node` holding one GPU.
fn gpu_pod(name: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "other", "uid": name},
        "spec": {"nodeName": node, "containers": [{"name": "c",
            "resources": {"requests": {"nvidia.com/gpu": "1"}}}]},
        "status": {"phase": "Running"}
    }))
    .expect("a Pod")
}

fn read(name: &str, nodes: Vec<Node>, pods: Vec<Pod>) -> WorkerReading {
    WorkerReading {
        name: name.to_owned(),
        unbounded: false,
        draining: false,
        read: WorkerRead::Read {
            via: "Secret s".to_owned(),
            nodes: Listing::Items(nodes),
            pods: Listing::Items(pods),
        },
    }
}

fn fleet() -> Vec<WorkerReading> {
    vec![
        // Two nodes of one GPU each, both taken.
        read(
            "alpha",
            vec![node("a1", "1", None), node("a2", "1", None)],
            vec![gpu_pod("p1", "a1"), gpu_pod("p2", "a2")],
        ),
        // Room, behind a taint the Job does not tolerate.
        read("beta", vec![node("b1", "4", Some("dedicated"))], Vec::new()),
        WorkerReading {
            name: "gamma".to_owned(),
            unbounded: false,
            draining: false,
            read: WorkerRead::Lost {
                via: "Secret s".to_owned(),
                reason: "worker gamma does not answer: timed out".to_owned(),
            },
        },
        read("delta", vec![node("d1", "2", None)], Vec::new()),
    ]
}

fn not_placed(job: JobB, fleet: Vec<WorkerReading>) -> Explanation {
    let observed = Observed {
        job: job.0,
        pods: Vec::new(),
        events: Vec::new(),
        lease: LeaseReading::NotRead,
        dispatch: Some(DispatchReading {
            policy: Ok(jobwarden_admission::policy::Dispatch::default()),
            copy: CopyReading::NotPlaced,
            fleet,
            order: None,
        }),
    };
    explain(&observed, t(5), &settings()).expect("explained")
}

#[test]
fn a_job_not_placed_is_judged_now_on_every_candidate() {
    let judged: Vec<(String, String, Option<String>)> = fit_now(&gpu_job(2).0, &fleet())
        .into_iter()
        .map(|f| (f.worker, f.verdict, f.reason))
        .collect();
    assert_eq!(
        judged,
        [
            (
                "alpha".to_owned(),
                "short".to_owned(),
                Some("0 of 2 pods fit: insufficient nvidia.com/gpu (0 free on 2 nodes)".to_owned())
            ),
            (
                "beta".to_owned(),
                "short".to_owned(),
                Some("taint dedicated=gpu:NoSchedule not tolerated".to_owned())
            ),
            (
                "gamma".to_owned(),
                "unread".to_owned(),
                Some("worker gamma does not answer: timed out".to_owned())
            ),
            ("delta".to_owned(), "fits".to_owned(), None),
        ]
    );
    // Its jobwarden.io/workers narrows the candidates; a worker it left is said so.
    let named = gpu_job(2).set(
        "/metadata/annotations",
        json!({
            "jobwarden.io/workers": "alpha,delta",
            "jobwarden.io/moved-from": "delta"}),
    );
    let judged: Vec<(String, String)> = fit_now(&named.0, &fleet())
        .into_iter()
        .map(|f| (f.worker, f.verdict))
        .collect();
    assert_eq!(
        judged,
        [
            ("alpha".to_owned(), "short".to_owned()),
            ("delta".to_owned(), "short".to_owned())
        ]
    );
}

#[test]
fn the_story_tells_each_worker_and_a_job_no_node_could_ever_hold() {
    let e = not_placed(gpu_job(2), fleet());
    let text = render(&e);
    assert!(
        text.contains(
            "Where it would fit now (each worker's Nodes and pods, read now):\n  \
             alpha: 0 of 2 pods fit: insufficient nvidia.com/gpu (0 free on 2 nodes)\n  \
             beta: taint dedicated=gpu:NoSchedule not tolerated\n  \
             gamma: not read: worker gamma does not answer: timed out\n  \
             delta: its pods fit\n"
        ),
        "{text}"
    );
    assert!(!text.contains("does not fit on any node today"), "{text}");

    // One pod asking 16 GPUs: no node of any worker holds 16.
    let huge = gpu_job(1).set(
        "/spec/template/spec/containers",
        json!([{"name": "main", "image": "x",
                "resources": {"requests": {"nvidia.com/gpu": "16"}, "limits": {"nvidia.com/gpu": "16"}}}]),
    );
    let answered = vec![
        read("alpha", vec![node("a1", "1", None)], Vec::new()),
        read("delta", vec![node("d1", "2", None)], Vec::new()),
    ];
    let e = not_placed(huge, answered);
    let d = e.dispatch.as_ref().expect("dispatched");
    assert!(d.fits_nowhere_today, "{:?}", d.fit);
    let text = render(&e);
    assert!(
        text.contains("  alpha: does not fit on any node today: ")
            && text.contains("It does not fit on any node today: no Node of any worker could hold one of its pods"),
        "{text}"
    );
    let json = serde_json::to_value(&e).expect("json");
    assert_eq!(json["dispatch"]["fitsNowhereToday"], json!(true));
    assert_eq!(json["dispatch"]["fit"][0]["worker"], json!("alpha"));
    assert_eq!(json["dispatch"]["fit"][0]["never"], json!(true));
}

#[test]
fn a_placed_copys_pods_are_told_bound_or_unschedulable() {
    let pods: Vec<Pod> = [
        json!({"metadata": {"name": "j-b"}, "spec": {"containers": []},
               "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                   "reason": "Unschedulable",
                   "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}]}}),
        json!({"metadata": {"name": "j-a"}, "spec": {"nodeName": "a1", "containers": []},
               "status": {"phase": "Running"}}),
        json!({"metadata": {"name": "j-done"}, "spec": {"nodeName": "a1", "containers": []},
               "status": {"phase": "Succeeded"}}),
    ]
    .into_iter()
    .map(|p| serde_json::from_value(p).expect("a Pod"))
    .collect();
    let places: Vec<(String, Option<String>, Option<String>)> = pod_places(&pods)
        .into_iter()
        .map(|p| (p.pod, p.node, p.unschedulable))
        .collect();
    assert_eq!(
        places,
        [
            ("j-a".to_owned(), Some("a1".to_owned()), None),
            (
                "j-b".to_owned(),
                None,
                Some("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.".to_owned())
            ),
        ]
    );
}
