//! The room of one worker at scale (issue 48), pure core only: 5,000 nodes and 50,000
//! unfinished pods built from k8s-openapi objects shaped like a cloud cluster's, then the bytes
//! the views keep per node and per pod (a counting allocator: bytes live after building less
//! before), the time of one `fits` with 0, 100 and 1,000 reservations, and of one pod event.
//!
//! ```sh
//! cargo bench -p jobwarden-dispatcher --bench room
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use jobwarden_dispatcher::room::{
    Fit, NodeView, PodShape, PodView, Reservation, Room, fits, pods_at_once,
};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

/// The system allocator, counting the bytes live.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

const NODES: usize = 5_000;
const PODS: usize = 50_000;

fn node_name(i: usize) -> String {
    format!(
        "ip-10-{}-{}-{}.eu-west-1.compute.internal",
        i / 65536,
        (i / 256) % 256,
        i % 256
    )
}

fn uid(kind: u8, i: usize) -> String {
    format!("{kind:02x}3e4567-e89b-12d3-a456-{i:012}")
}

/// A node as a managed cloud cluster labels it: 20 labels, a GPU pool of one in ten with
/// its taint, hugepages on all.
fn node(i: usize) -> Node {
    let name = node_name(i);
    let gpu = i.is_multiple_of(10);
    let mut labels = json!({
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": name,
        "node.kubernetes.io/instance-type": if gpu { "p4d.24xlarge" } else { "m6i.4xlarge" },
        "beta.kubernetes.io/instance-type": if gpu { "p4d.24xlarge" } else { "m6i.4xlarge" },
        "topology.kubernetes.io/region": "eu-west-1",
        "topology.kubernetes.io/zone": format!("eu-west-1{}", ["a", "b", "c"][i % 3]),
        "failure-domain.beta.kubernetes.io/region": "eu-west-1",
        "failure-domain.beta.kubernetes.io/zone": format!("eu-west-1{}", ["a", "b", "c"][i % 3]),
        "eks.amazonaws.com/nodegroup": if gpu { "gpu-pool" } else { "general-pool" },
        "eks.amazonaws.com/nodegroup-image": "ami-0123456789abcdef0",
        "eks.amazonaws.com/capacityType": "ON_DEMAND",
        "k8s.io/cloud-provider-aws": "0123456789abcdef0123456789abcdef",
        "topology.ebs.csi.aws.com/zone": format!("eu-west-1{}", ["a", "b", "c"][i % 3]),
        "node.kubernetes.io/lifecycle": "normal",
        "team": format!("team-{}", i % 40),
        "cost-center": format!("cc-{}", i % 12),
        "jobwarden.io/pool": "batch",
    });
    let mut alloc = json!({"cpu": "15890m", "memory": "63950828Ki", "ephemeral-storage": "95491281146",
        "pods": "110", "hugepages-1Gi": "0", "hugepages-2Mi": "0", "attachable-volumes-aws-ebs": "25"});
    let mut taints = json!([]);
    if gpu {
        alloc["nvidia.com/gpu"] = json!("8");
        labels["nvidia.com/gpu.product"] = json!("NVIDIA-A100-SXM4-40GB");
        taints = json!([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]);
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints, "providerID": format!("aws:///eu-west-1a/i-{i:017x}")},
        "status": {"allocatable": alloc},
    }))
    .unwrap()
}

/// A Job's pod: two containers (one a sidecar), bound to a node but for one in a hundred;
/// one in twenty asks for a GPU (they land on the GPU nodes: `i * 7919 % 5000` keeps `i`'s
/// last digit, so five per GPU node, of eight).
fn pod(i: usize) -> Pod {
    let bound = !i.is_multiple_of(100);
    let mut requests = json!({"cpu": "250m", "memory": "512Mi"});
    let node = (i * 7919) % NODES;
    if i.is_multiple_of(20) {
        requests["nvidia.com/gpu"] = json!("1");
    }
    let mut spec = json!({
        "containers": [{"name": "main", "resources": {"requests": requests, "limits": {"memory": "1Gi"}}}],
        "initContainers": [{"name": "proxy", "restartPolicy": "Always",
            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}],
    });
    if bound {
        spec["nodeName"] = json!(node_name(node));
    }
    serde_json::from_value(json!({
        "metadata": {"namespace": format!("team-{}", i % 40), "name": format!("job-{}-{i}", i / 10),
            "uid": uid(1, i),
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": format!("job-{}", i / 10),
                "uid": uid(2, i / 10), "controller": true, "blockOwnerDeletion": true}]},
        "spec": spec,
        "status": {"phase": if bound { "Running" } else { "Pending" }},
    }))
    .unwrap()
}

/// The median time of `f` over `runs` runs of `batch` calls each, per call.
fn time(runs: usize, batch: usize, mut f: impl FnMut(usize)) -> Duration {
    let mut each: Vec<Duration> = (0..runs)
        .map(|r| {
            let start = Instant::now();
            for k in 0..batch {
                f(r * batch + k);
            }
            start.elapsed() / batch as u32
        })
        .collect();
    each.sort();
    each[runs / 2]
}

fn main() {
    let mut room = Room::new();
    let before = live();
    for i in 0..NODES {
        let n = node(i);
        room.apply_node(NodeView::from_node(&n));
    }
    let per_node = (live() - before) as f64 / NODES as f64;
    let before = live();
    for i in 0..PODS {
        let p = pod(i);
        if let Some(v) = PodView::from_pod(&p) {
            room.apply_pod(&uid(1, i), v);
        }
    }
    let per_pod = (live() - before) as f64 / PODS as f64;
    println!(
        "room of {NODES} nodes and {PODS} pods ({} pending): {per_node:.0} bytes per node, {per_pod:.0} bytes per pod, {:.1} MiB in all",
        room.summary().pending_pods,
        (per_node * NODES as f64 + per_pod * PODS as f64) / 1048576.0
    );
    println!(
        "size_of: NodeView {} B, PodView {} B",
        std::mem::size_of::<NodeView>(),
        std::mem::size_of::<PodView>()
    );

    let job: Value = json!({"spec": {"parallelism": 4, "template": {"spec": {"containers": [
        {"name": "main", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]}}}});
    let shape = PodShape::of_job(&job).unwrap();
    let pods = pods_at_once(&job);
    let gpu_job: Value = json!({"spec": {"parallelism": 8, "template": {"spec": {
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
        "containers": [{"name": "main", "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": "2"}}}]}}}});
    let gpu_shape = PodShape::of_job(&gpu_job).unwrap();
    for reserved in [0, 100, 1_000] {
        let reservations: Vec<Reservation> = (0..reserved)
            .map(|k: usize| Reservation {
                shape: if k.is_multiple_of(10) {
                    gpu_shape.clone()
                } else {
                    shape.clone()
                },
                pods: pods_at_once(if k.is_multiple_of(10) { &gpu_job } else { &job }),
            })
            .collect();
        let t = time(15, 4, |_| {
            assert_eq!(
                black_box(fits(&shape, pods, &room, &reservations)),
                Fit::Fits
            );
        });
        let tg = time(15, 4, |_| {
            black_box(fits(&gpu_shape, 8, &room, &reservations));
        });
        let gpu_fit = match fits(&gpu_shape, 8, &room, &reservations) {
            Fit::Fits => "fits".to_string(),
            Fit::Short(s) => s.reason_label().to_string(),
        };
        println!(
            "fits with {reserved} reservations: {:.3} ms (4 × 1 cpu: fits), {:.3} ms (8 × 2 GPUs on the GPU pool: {gpu_fit})",
            t.as_secs_f64() * 1e3,
            tg.as_secs_f64() * 1e3
        );
    }

    // One pod event: a pending pod bound, then deleted and seen again pending.
    let views: Vec<(String, PodView, PodView)> = (0..1_000)
        .map(|k| {
            let i = k * 100;
            let pending = PodView::from_pod(&pod(i)).unwrap();
            let mut bound = pending.clone();
            bound.node = Some(node_name(k).into());
            (uid(1, i), pending, bound)
        })
        .collect();
    let t = time(21, 1_000, |k| {
        let (uid, pending, bound) = &views[k % views.len()];
        if (k / views.len()).is_multiple_of(2) {
            room.apply_pod(uid, bound.clone());
        } else {
            room.delete_pod(uid);
            room.apply_pod(uid, pending.clone());
        }
    });
    println!(
        "one pod event (apply, or delete and apply): {:.2} µs, its view's clone included",
        t.as_secs_f64() * 1e6
    );
    let t = time(21, 10, |_| {
        black_box(room.summary());
    });
    println!("summary: {:.2} ms", t.as_secs_f64() * 1e3);
    let t = time(21, 1_000, |k| {
        black_box(room.pods_of(&uid(2, k % 5_000)));
    });
    println!("pods_of one Job: {:.2} µs", t.as_secs_f64() * 1e6);
}
