//! A worker's room on a real control plane (issue 48): the memory the dispatcher's view of a
//! worker's Nodes and unfinished pods takes in the running process, beside the pure core's
//! figures (`crates/dispatcher/benches/room.rs`).
//!
//! Starts a fleet (a management plane and one worker, etcd and kube-apiserver v1.36.2 and
//! kube-controller-manager), runs jobwarden on it (the release binary, `serve --no-webhook`
//! under the installed identity, its policy naming the worker `east`, no Node laid out for
//! it), then grows the worker in steps, each to a total of nodes and pods given as
//! `NODESxPODS` (default `500x5000 2000x20000 5000x50000`, the last the pure core's size):
//! first the step's Nodes ([`jobwarden_envtest::Nodes`]: 4 cpu, 16Gi, 110 pods, Ready,
//! untainted), waiting until `jobwarden_dispatch_worker_nodes{worker="east"}` counts them all,
//! then its pods, bound to them in turn (`spec.nodeName` set; no kubelet runs them, so they
//! stay `Pending`, unfinished), each one container requesting 100m cpu and 128Mi, waiting
//! until `jobwarden_dispatch_worker_free{resource="pods"}` is the nodes' 110 each less every
//! pod. jobwarden's resident memory (`VmRSS`) is read with the view empty and after each wait
//! (once it has been unchanged for a few seconds); a node's bytes are the growth over the
//! step's Nodes divided by their number, a pod's the growth over its pods.
//!
//! RSS is not the view's live bytes: it holds the allocator's slack (pages freed but kept for
//! reuse), and what the watches' lists and events left behind (the k8s-openapi objects are
//! dropped once read into views, but the pages that held them may stay resident, and a view
//! may be allocated in pages they freed). The pure core's counting allocator is the exact
//! figure; this one is what a node's RSS shows.
//!
//! ```sh
//! bench/room_memory_real.sh             # jobwarden in release; 500x5000, 2000x20000, 5000x50000
//! bench/room_memory_real.sh 10000x0 10000x50000   # Nodes alone, then pods alone
//! ```
//!
//! A step's Nodes take a few MiB, about what the allocator gives back or keeps from the step
//! before: lay out Nodes alone (`10000x0`) for a node's figure that stands out of that noise.

use std::io::Write as _;
use std::time::{Duration, Instant};

use futures::{StreamExt as _, TryStreamExt as _};
use jobwarden_envtest::measure::{Usage, command_line};
use jobwarden_envtest::{DispatcherRun, DispatcherSettings, Fleet, NodeLayout, Nodes};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};

const WORKER: &str = "east";
/// Requests in flight at once: kube-rs has no client-side rate limit, so this bounds the load
/// on the worker's kube-apiserver (which shares the two cores with everything else).
const IN_FLIGHT: usize = 32;
/// A [`NodeLayout::new`] Node's room for pods (a kubelet's default).
const PODS_PER_NODE: u64 = 110;
/// Far beyond a step's wait for the view: reaching it is a failure.
const TIMEOUT: Duration = Duration::from_secs(1200);
/// How long jobwarden's RSS must stay unchanged before it is read: the watches' last events
/// are being turned into views for a moment after the gauges show them.
const SETTLED: Duration = Duration::from_secs(5);

/// A step's totals.
#[derive(Debug, Clone, Copy)]
struct Size {
    nodes: usize,
    pods: usize,
}

fn sizes(args: &[String]) -> Vec<Size> {
    let given: Vec<Size> = args
        .iter()
        .map(|a| {
            let (n, p) = a
                .split_once('x')
                .unwrap_or_else(|| panic!("a size is NODESxPODS, not {a:?}"));
            let number = |s: &str| {
                s.parse::<usize>()
                    .unwrap_or_else(|e| panic!("{s:?} in {a:?}: {e}"))
            };
            Size {
                nodes: number(n),
                pods: number(p),
            }
        })
        .collect();
    let sizes = if given.is_empty() {
        vec![
            Size {
                nodes: 500,
                pods: 5000,
            },
            Size {
                nodes: 2000,
                pods: 20000,
            },
            Size {
                nodes: 5000,
                pods: 50000,
            },
        ]
    } else {
        given
    };
    // Each step adds to the last: totals never shrink (`10000x0` lays out Nodes alone).
    for pair in sizes.windows(2) {
        assert!(
            pair[1].nodes >= pair[0].nodes && pair[1].pods >= pair[0].pods,
            "each size must hold at least the one before: {sizes:?}"
        );
    }
    assert!(
        sizes.iter().all(|s| s.nodes > 0 || s.pods == 0),
        "pods need nodes to be bound to: {sizes:?}"
    );
    sizes
}

fn pod(i: usize, node: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("pod-{i}"), "labels": {"app": "room-memory"}},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": false,
            "containers": [{
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
            }],
        },
    }))
    .expect("a Pod")
}

fn node_name(i: usize) -> String {
    format!("node-{i:05}")
}

/// Creates Nodes `from..to`, [`IN_FLIGHT`] at a time; returns the seconds it took.
async fn create_nodes(nodes: &Nodes, from: usize, to: usize) -> f64 {
    let started = Instant::now();
    futures::stream::iter(from..to)
        .map(|i| {
            let nodes = nodes.clone();
            async move { nodes.create(&NodeLayout::new(&node_name(i))).await }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_for_each(|_| async { Ok(()) })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    started.elapsed().as_secs_f64()
}

/// Creates pods `from..to`, pod `i` bound to Node `i % nodes`; returns the seconds it took.
async fn create_pods(pods: &Api<Pod>, from: usize, to: usize, nodes: usize) -> f64 {
    let started = Instant::now();
    futures::stream::iter(from..to)
        .map(|i| {
            let pods = pods.clone();
            async move {
                pods.create(&PostParams::default(), &pod(i, &node_name(i % nodes)))
                    .await
                    .map_err(|e| format!("pod-{i} is created: {e}"))
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_for_each(|_| async { Ok(()) })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    started.elapsed().as_secs_f64()
}

/// Waits until the leader's view of the worker is fresh with `nodes` schedulable nodes and
/// `pods` of their room taken; returns the seconds it took.
async fn view_shows(run: &DispatcherRun, nodes: usize, pods: usize) -> f64 {
    let started = Instant::now();
    let want_free = (nodes as u64 * PODS_PER_NODE - pods as u64) as f64;
    loop {
        let seen = run.leader().map(|(_, e)| {
            (
                e.series(
                    "jobwarden_dispatch_worker_view",
                    &format!("worker=\"{WORKER}\",state=\"fresh\""),
                ),
                e.series(
                    "jobwarden_dispatch_worker_nodes",
                    &format!("worker=\"{WORKER}\""),
                ),
                e.series(
                    "jobwarden_dispatch_worker_free",
                    &format!("worker=\"{WORKER}\",resource=\"pods\""),
                ),
            )
        });
        if seen == Some((Some(1.0), Some(nodes as f64), Some(want_free))) {
            return started.elapsed().as_secs_f64();
        }
        assert!(
            started.elapsed() < TIMEOUT,
            "the view did not show {nodes} nodes and {pods} pods within {TIMEOUT:?}: \
             (fresh, nodes, free pods) = {seen:?}\n{}",
            run.logs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// jobwarden's usage once its RSS has stayed the same for [`SETTLED`].
async fn settled(pid: u32) -> Usage {
    let mut last = Usage::of(pid);
    let mut since = Instant::now();
    while since.elapsed() < SETTLED {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = Usage::of(pid);
        if now.rss_kib != last.rss_kib {
            since = Instant::now();
        }
        last = now;
    }
    last
}

/// `kib` shared over `count`, in bytes with thousands separated as BENCHMARKS.md writes them.
fn bytes(kib: i64, count: usize) -> String {
    if count == 0 {
        return "–".to_owned();
    }
    let each = (kib as f64 * 1024.0 / count as f64).round() as i64;
    let digits = each.unsigned_abs().to_string();
    let mut grouped = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(d);
    }
    format!("{}{grouped} B", if each < 0 { "-" } else { "" })
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

#[tokio::main]
async fn main() {
    let (binary, rest) =
        command_line::binary_and_args("usage: room_memory JOBWARDEN_BINARY [NODESxPODS...]");
    let sizes = sizes(&rest);
    let started = Instant::now();
    let fleet = Fleet::start(1).unwrap_or_else(|e| panic!("{e}"));
    let mut settings = DispatcherSettings::new(&[WORKER]);
    // Every Node on the worker is the benchmark's: a roomy one would be one more in the view.
    settings.roomy_nodes = false;
    let run = fleet
        .run_dispatcher(&binary, &settings)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let pid = run.replicas[0].pid();
    let worker = &fleet.workers[0];
    let admin = worker.client().await;
    let nodes = Nodes::new(admin.clone());
    // The namespace comes with its `default` ServiceAccount, which the ServiceAccount admission
    // plugin wants before it admits a pod.
    let ns = worker.create_namespace(&admin, "room").await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    eprintln!(
        "fleet and jobwarden ready in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    view_shows(&run, 0, 0).await;
    let empty = settled(pid).await;
    eprintln!("empty view: RSS {:.1} MiB", mib(empty.rss_kib));

    let mut rows = Vec::new();
    let mut last = Size { nodes: 0, pods: 0 };
    let mut before = empty;
    for size in sizes {
        let nodes_secs = create_nodes(&nodes, last.nodes, size.nodes).await;
        let nodes_seen = view_shows(&run, size.nodes, last.pods).await;
        let with_nodes = settled(pid).await;
        let pods_secs = create_pods(&pods, last.pods, size.pods, size.nodes).await;
        let pods_seen = view_shows(&run, size.nodes, size.pods).await;
        let with_pods = settled(pid).await;
        let (new_nodes, new_pods) = (size.nodes - last.nodes, size.pods - last.pods);
        let grown = |a: &Usage, b: &Usage| a.rss_kib as i64 - b.rss_kib as i64;
        let row = format!(
            "| {} nodes + {} pods | {new_nodes} in {nodes_secs:.0} s, {new_pods} in {pods_secs:.0} s | {nodes_seen:.1} s / {pods_seen:.1} s | {:.1} → {:.1} → {:.1} MiB | **{}** | **{}** | {:+.1} MiB | {:.1} MiB | {:.2} s |",
            size.nodes,
            size.pods,
            mib(before.rss_kib),
            mib(with_nodes.rss_kib),
            mib(with_pods.rss_kib),
            bytes(grown(&with_nodes, &before), new_nodes),
            bytes(grown(&with_pods, &with_nodes), new_pods),
            mib(with_pods.rss_kib) - mib(empty.rss_kib),
            mib(with_pods.peak_kib),
            with_pods.cpu_seconds - before.cpu_seconds,
        );
        eprintln!("{row}");
        rows.push(row);
        before = with_pods;
        last = size;
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "\n| worker holds | created (nodes, pods) | until the view showed them (nodes / pods) | jobwarden RSS: before → with the nodes → with the pods | per node | per pod | growth over the empty view | peak RSS (VmHWM) | jobwarden CPU over the step |\n|---|---|---:|---:|---:|---:|---:|---:|---:|"
    );
    for row in rows {
        let _ = writeln!(out, "{row}");
    }
    let _ = out.flush();
}
