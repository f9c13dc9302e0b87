//! Resources, reservations and what the Event says.

use super::builders::{GPU, JobB, NodeB, job, node, pod, room};
use crate::room::{Fit, Reservation, Room, fits};

fn say(j: &JobB, room: &Room, reserved: &[Reservation]) -> String {
    match fits(&j.shape(), j.at_once(), room, reserved) {
        Fit::Fits => "fits".into(),
        Fit::Short(s) => format!("{}: {s}", s.reason_label()),
    }
}

fn reserve(j: &JobB) -> Reservation {
    Reservation {
        shape: j.shape(),
        pods: j.at_once(),
    }
}

#[test]
fn resources_node_by_node() {
    let gpus = |a: u32, b: u32| vec![node("a").gpu(a), node("b").gpu(b)];
    let cases: Vec<(&str, JobB, Vec<NodeB>, &str)> = vec![
        (
            "Indexed 3 x 1 GPU where 3 are free (2 + 1)",
            job().indexed(3).gpu(1),
            gpus(2, 1),
            "fits",
        ),
        (
            "Indexed 3 x 1 GPU where 2 are free",
            job().indexed(3).gpu(1),
            gpus(2, 0),
            "insufficient_resources: 2 of 3 pods fit: insufficient nvidia.com/gpu (2 free on 2 nodes)",
        ),
        (
            "2 x 2 GPUs where 4 are free but split 3 + 1",
            job().pods(2).gpu(2),
            gpus(3, 1),
            "insufficient_resources: 1 of 2 pods fit: insufficient nvidia.com/gpu (4 free on 2 nodes)",
        ),
        (
            "a node takes several pods",
            job().pods(4).requests("cpu", "1"),
            vec![node("a").cpu("4")],
            "fits",
        ),
        (
            "cpu and memory",
            job()
                .pods(4)
                .requests("cpu", "1500m")
                .requests("memory", "6Gi"),
            vec![node("a").cpu("4"), node("b").cpu("2")],
            "insufficient_resources: 3 of 4 pods fit: insufficient cpu (6 free on 2 nodes), memory (32Gi free on 2 nodes)",
        ),
        (
            "the pod count",
            job().pods(3),
            vec![node("a").alloc("pods", "1"), node("b").alloc("pods", "1")],
            "insufficient_resources: 2 of 3 pods fit: insufficient pods (2 free on 2 nodes)",
        ),
        (
            "an extended resource no node has",
            job().requests("example.com/fpga", "1"),
            vec![node("a")],
            "never_fits: does not fit on any node today: needs 1 example.com/fpga, the largest node has 0",
        ),
        (
            "more than any node's allocatable",
            job().requests("cpu", "64"),
            vec![node("a").cpu("2"), node("b").cpu("1")],
            "never_fits: does not fit on any node today: needs 64 cpu, the largest node has 2",
        ),
        (
            "each resource fits somewhere, never together",
            job().requests("cpu", "4").gpu(1),
            vec![node("a").cpu("8"), node("b").cpu("2").gpu(1)],
            "never_fits: does not fit on any node today: no node has all it requests at once",
        ),
        (
            "nodes the filters rule out are named too",
            job().pods(2).gpu(1),
            vec![
                node("a").gpu(1),
                node("b").gpu(4).taint("dedicated=gpu:NoSchedule"),
            ],
            "insufficient_resources: 1 of 2 pods fit: insufficient nvidia.com/gpu (1 free on 1 node); taint dedicated=gpu:NoSchedule not tolerated (1 node)",
        ),
        (
            "a huge request never fits, without a panic",
            job().requests("memory", "99999Ei"),
            vec![node("a").alloc("memory", "99999Ei")],
            "fits",
        ),
        (
            "no pods at once: nothing to fit",
            job().pods(0),
            vec![],
            "fits",
        ),
    ];
    for (what, j, nodes, want) in cases {
        assert_eq!(say(&j, &room(&nodes), &[]), want, "{what}");
    }
}

#[test]
fn the_issues_example() {
    let mut alpha = room(&[node("a").gpu(1), node("b").gpu(1)]);
    alpha.apply_pod("p1", pod().on("a").requests(GPU, "1").view());
    alpha.apply_pod("p2", pod().on("b").requests(GPU, "1").view());
    let beta = room(&[node("c").gpu(8).taint("dedicated=gpu:NoSchedule")]);
    let j = job().pods(2).gpu(1);
    let event: Vec<String> = [("alpha", &alpha), ("beta", &beta)]
        .iter()
        .map(|(w, r)| format!("{w}: {}", say(&j, r, &[]).split_once(": ").unwrap().1))
        .collect();
    assert_eq!(
        event.join("; "),
        "alpha: 0 of 2 pods fit: insufficient nvidia.com/gpu (0 free on 2 nodes); \
         beta: taint dedicated=gpu:NoSchedule not tolerated"
    );
}

#[test]
fn bound_and_unbound_pods_take_room() {
    let mut r = room(&[node("a").cpu("4"), node("b").cpu("4")]);
    let two = job().requests("cpu", "2");
    r.apply_pod("p1", pod().on("a").requests("cpu", "3").view());
    r.apply_pod("p2", pod().on("b").requests("cpu", "3").view());
    assert_eq!(
        say(&two, &r, &[]),
        "insufficient_resources: 0 of 1 pods fit: insufficient cpu (2 free on 2 nodes)"
    );
    r.delete_pod("p2");
    assert_eq!(say(&two, &r, &[]), "fits");
    // A pod the scheduler is about to bind takes room first: only b can hold it.
    r.apply_pod("p3", pod().requests("cpu", "3").view());
    assert_eq!(
        say(&two, &r, &[]),
        "insufficient_resources: 0 of 1 pods fit: insufficient cpu (2 free on 2 nodes)"
    );
    // One that fits on no node is owed by the worker as a whole.
    r.apply_pod("p5", pod().requests("cpu", "3500m").view());
    r.delete_pod("p3");
    assert_eq!(
        say(&two, &r, &[]),
        "insufficient_resources: 0 of 1 pods fit: insufficient cpu (1500m free on 2 nodes)"
    );
    r.delete_pod("p5");
    r.apply_pod("p3", pod().requests("cpu", "3").view());
    // One it found unschedulable holds nothing.
    r.apply_pod(
        "p3",
        pod()
            .requests("cpu", "3")
            .unschedulable("2026-11-28T10:00:00Z", "x")
            .view(),
    );
    assert_eq!(say(&two, &r, &[]), "fits");
    // Bound, it takes its node's room.
    r.apply_pod("p3", pod().on("b").requests("cpu", "3").view());
    assert!(say(&two, &r, &[]).starts_with("insufficient_resources: 0 of 1"));
    // A pod on a node not seen yet counts once the node comes.
    r.delete_pod("p3");
    r.apply_pod("p4", pod().on("c").requests("cpu", "4").view());
    assert_eq!(say(&two, &r, &[]), "fits");
    r.apply_node(node("c").cpu("4").view());
    r.delete_node("b");
    assert!(say(&two, &r, &[]).starts_with("insufficient_resources: 0 of 1"));
}

#[test]
fn a_burst_never_overcommits() {
    let r = room(&[node("a").cpu("4"), node("b").cpu("2")]);
    let j = job().requests("cpu", "2");
    let mut reserved = Vec::new();
    let mut placed = 0;
    for _ in 0..10 {
        if fits(&j.shape(), 1, &r, &reserved) == Fit::Fits {
            reserved.push(reserve(&j));
            placed += 1;
        }
    }
    assert_eq!(placed, 3, "6 cpus hold three 2-cpu pods, not more");
    assert_eq!(
        say(&j, &r, &reserved),
        "insufficient_resources: 0 of 1 pods fit: insufficient cpu (0 free on 2 nodes)"
    );
    // A reservation only takes nodes its own shape accepts: a GPU Job held on the tainted
    // node leaves the plain node to others.
    let r = room(&[
        node("a").cpu("2"),
        node("g").cpu("2").gpu(1).taint("gpu:NoSchedule"),
    ]);
    let gpu_job = job().requests("cpu", "2").gpu(1).tolerate("gpu:");
    assert_eq!(say(&gpu_job, &r, &[]), "fits");
    let reserved = [reserve(&gpu_job)];
    assert_eq!(say(&j, &r, &reserved), "fits");
    assert!(say(&gpu_job, &r, &reserved).starts_with("insufficient_resources: 0 of 1"));
    // Once its pod is seen unbound, the reservation gives way to it, never counted twice.
    let mut r = r;
    r.apply_pod(
        "g1",
        pod()
            .owner("gj")
            .requests("cpu", "2")
            .requests(GPU, "1")
            .view(),
    );
    assert_eq!(r.pods_of("gj").total, 1);
    assert_eq!(say(&j, &r, &[]), "fits");
}

#[test]
fn the_room_is_kept_incrementally() {
    let mut r = room(&[node("a").cpu("4").gpu(2), node("b").cpu("2").cordoned()]);
    r.apply_pod(
        "p1",
        pod()
            .owner("j1")
            .on("a")
            .requests("cpu", "1")
            .requests(GPU, "1")
            .view(),
    );
    r.apply_pod("p2", pod().owner("j1").requests("cpu", "1").view());
    r.apply_pod(
        "p3",
        pod()
            .owner("j1")
            .unschedulable("2026-11-28T10:00:00Z", "0/2 nodes are available")
            .view(),
    );
    r.apply_pod(
        "p4",
        pod()
            .owner("j1")
            .unschedulable("2026-11-28T11:00:00Z", "later")
            .view(),
    );
    let s = r.summary();
    assert_eq!((s.nodes, s.schedulable_nodes, s.pending_pods), (2, 1, 1));
    assert_eq!((s.allocatable.cpu_millis, s.free.cpu_millis), (4000, 2000));
    assert_eq!((s.allocatable.get(GPU), s.free.get(GPU)), (2, 1));
    let o = r.pods_of("j1");
    assert_eq!((o.total, o.bound), (4, 1));
    assert_eq!(
        &*o.unschedulable.unwrap().message,
        "0/2 nodes are available"
    );
    // An update moves the charge; a delete takes it back exactly.
    r.apply_pod("p2", pod().owner("j1").on("a").requests("cpu", "1").view());
    assert_eq!(r.summary().free.cpu_millis, 2000);
    assert_eq!(r.summary().pending_pods, 0);
    r.apply_pod("p2", pod().owner("j2").on("a").requests("cpu", "1").view());
    assert_eq!((r.pods_of("j1").total, r.pods_of("j2").total), (3, 1));
    for p in ["p1", "p2", "p3", "p4"] {
        r.delete_pod(p);
    }
    assert_eq!(r.summary().free.cpu_millis, 4000);
    assert_eq!(r.pods_of("j1"), Default::default());
    r.delete_pod("never-seen");
}
