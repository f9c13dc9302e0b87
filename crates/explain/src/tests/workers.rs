//! `jobwarden workers`: the fleet from what was read, and its table, by tables.

use std::collections::BTreeMap;

use jobwarden_dispatcher::worker::credentials::{Refusal, RefusalReason};
use serde_json::{Value, json};

use crate::workers::room_of::RoomLine;
use crate::workers::text::render;
use crate::workers::view::*;

const DISPATCHER: &str = "jobwarden.io/dispatcher";

/// A worker whose Nodes the `room` core summed to `room`.
fn summed(name: &str, room: RoomLine) -> WorkerView {
    WorkerView {
        name: name.to_owned(),
        state: State::Answering,
        via: Some(format!("Secret jobwarden-system/jobwarden-worker-{name}")),
        why: None,
        room: RoomView::Nodes(room),
        placed: 0,
    }
}

fn room(nodes: (usize, usize), free: &[(&str, f64)], all: &[(&str, f64)]) -> RoomLine {
    let map = |pairs: &[(&str, f64)]| -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    };
    RoomLine {
        nodes_schedulable: nodes.0,
        nodes_total: nodes.1,
        free: map(free),
        allocatable: map(all),
    }
}

const GI: f64 = 1024.0 * 1024.0 * 1024.0;

fn dispatched(uid: &str, worker: Option<&str>, finished: bool) -> Value {
    let mut j = json!({
        "metadata": {"name": uid, "namespace": "ns", "uid": uid, "annotations": {}},
        "spec": {"managedBy": DISPATCHER},
        "status": {}
    });
    if let Some(w) = worker {
        j["metadata"]["annotations"]["jobwarden.io/worker"] = json!(w);
    }
    if finished {
        j["status"]["conditions"] = json!([{"type": "Complete", "status": "True"}]);
    }
    j
}

fn reading(name: &str, read: WorkerRead) -> WorkerReading {
    WorkerReading {
        name: name.to_owned(),
        unbounded: false,
        draining: false,
        read,
    }
}

#[test]
fn jobs_are_counted_where_recorded_and_waiting_ones_by_the_dispatchers_latest_warning() {
    let mut not_ours = dispatched("other", Some("alpha"), false);
    not_ours["spec"]["managedBy"] = json!("kueue.x-k8s.io/multikueue");
    let jobs = JobsRead {
        held: BTreeMap::new(),
        jobs: vec![
            dispatched("a1", Some("alpha"), false),
            dispatched("a2", Some("alpha"), false),
            dispatched("a3", Some("alpha"), true),
            dispatched("b1", Some("beta"), false),
            dispatched("w1", None, false),
            dispatched("w2", None, false),
            dispatched("w3", None, false),
            dispatched("done", None, true),
            not_ours,
        ],
        latest_warning: BTreeMap::from([
            ("w1".to_owned(), "NoWorkerFits".to_owned()),
            ("w2".to_owned(), "NoWorkerFits".to_owned()),
        ]),
    };
    let lost = |name: &str| {
        reading(
            name,
            WorkerRead::Lost {
                via: "v".to_owned(),
                reason: "r".to_owned(),
            },
        )
    };
    let view = fleet(
        &[lost("alpha"), lost("beta"), lost("gamma")],
        &jobs,
        DISPATCHER,
    );
    let placed: Vec<(&str, usize)> = view
        .workers
        .iter()
        .map(|w| (w.name.as_str(), w.placed))
        .collect();
    assert_eq!(placed, [("alpha", 2), ("beta", 1), ("gamma", 0)]);
    assert_eq!(
        view.waiting,
        WaitingView {
            total: 3,
            by_reason: BTreeMap::from([("NoWorkerFits".to_owned(), 2), (NOT_SAID.to_owned(), 1)]),
        }
    );
}

#[test]
fn a_worker_not_read_is_said_with_why_and_its_room_unread() {
    let refusal = Refusal {
        reason: RefusalReason::ExecPlugin,
        message: "it runs a program (users[0].user.exec)".to_owned(),
    };
    let forbidden = |why: &str| Listing::Forbidden(why.to_owned());
    let cases: Vec<(WorkerReading, State, Option<&str>, RoomView)> = vec![
        (
            reading(
                "a",
                WorkerRead::NoKubeconfig("Secret s does not exist".to_owned()),
            ),
            State::Connecting,
            Some("Secret s does not exist"),
            RoomView::Unread,
        ),
        (
            reading(
                "b",
                WorkerRead::Refused {
                    via: "Secret s".to_owned(),
                    refusal,
                },
            ),
            State::Refused,
            Some(
                "the dispatcher refuses its kubeconfig (exec_plugin): it runs a program (users[0].user.exec)",
            ),
            RoomView::Unread,
        ),
        (
            reading(
                "c",
                WorkerRead::Lost {
                    via: "Secret s".to_owned(),
                    reason: "worker c does not answer: timed out".to_owned(),
                },
            ),
            State::Lost,
            Some("worker c does not answer: timed out"),
            RoomView::Unread,
        ),
        (
            reading(
                "d",
                WorkerRead::Read {
                    via: "Secret s".to_owned(),
                    nodes: forbidden("nodes is forbidden"),
                    pods: Listing::Items(Vec::new()),
                },
            ),
            State::Answering,
            None,
            RoomView::Counting {
                why: "nodes is forbidden".to_owned(),
            },
        ),
        (
            WorkerReading {
                unbounded: true,
                ..reading(
                    "e",
                    WorkerRead::Read {
                        via: "Secret s".to_owned(),
                        nodes: forbidden("nodes is forbidden"),
                        pods: Listing::Forbidden("pods is forbidden".to_owned()),
                    },
                )
            },
            State::Answering,
            None,
            RoomView::Unbounded,
        ),
        (
            WorkerReading {
                draining: true,
                ..reading(
                    "f",
                    WorkerRead::Read {
                        via: "Secret s".to_owned(),
                        nodes: Listing::Items(Vec::new()),
                        pods: Listing::Items(Vec::new()),
                    },
                )
            },
            State::Draining,
            None,
            RoomView::Nodes(RoomLine::default()),
        ),
        (
            WorkerReading {
                draining: true,
                ..reading(
                    "g",
                    WorkerRead::Lost {
                        via: "Secret s".to_owned(),
                        reason: "gone".to_owned(),
                    },
                )
            },
            State::Lost,
            Some("gone"),
            RoomView::Unread,
        ),
    ];
    for (r, state, why, room) in cases {
        let view = fleet(std::slice::from_ref(&r), &JobsRead::default(), DISPATCHER);
        let w = &view.workers[0];
        assert_eq!(
            (w.state, w.why.as_deref(), &w.room),
            (state, why, &room),
            "{}",
            r.name
        );
    }
}

#[test]
fn the_table_shows_free_of_allocatable_and_why_a_worker_is_not_read() {
    let mut alpha = summed(
        "alpha",
        room(
            (3, 4),
            &[
                ("cpu", 12.5),
                ("memory", 47.5 * GI),
                ("nvidia.com/gpu", 0.0),
                ("pods", 300.0),
            ],
            &[
                ("cpu", 64.0),
                ("memory", 256.0 * GI),
                ("nvidia.com/gpu", 8.0),
                ("pods", 440.0),
            ],
        ),
    );
    alpha.placed = 7;
    let beta = summed(
        "beta",
        room(
            (2, 2),
            &[("cpu", 0.25), ("memory", 512.0 * 1024.0 * 1024.0)],
            &[("cpu", 4.0), ("memory", 8.0 * GI)],
        ),
    );
    let gamma = WorkerView {
        name: "gamma".to_owned(),
        state: State::Lost,
        via: Some("Secret s".to_owned()),
        why: Some("worker gamma does not answer: connection refused".to_owned()),
        room: RoomView::Unread,
        placed: 3,
    };
    let delta = WorkerView {
        room: RoomView::Counting {
            why: "nodes is forbidden".to_owned(),
        },
        ..summed("delta", RoomLine::default())
    };
    let epsilon = WorkerView {
        room: RoomView::Unbounded,
        placed: 1,
        ..summed("epsilon", RoomLine::default())
    };
    let view = WorkersView {
        teams: Vec::new(),
        workers: vec![alpha, beta, gamma, delta, epsilon],
        waiting: WaitingView {
            total: 5,
            by_reason: BTreeMap::from([
                ("NoWorkerFits".to_owned(), 3),
                ("WorkerLost".to_owned(), 2),
            ]),
        },
    };
    let want = "\
WORKER   STATE      NODES      FREE CPU  FREE MEMORY   FREE GPU  PLACED
alpha    answering  3/4        12.5/64   47.5Gi/256Gi  0/8       7
beta     answering  2/2        0.25/4    512Mi/8Gi     -         0
gamma    lost       -          -         -             -         3       worker gamma does not answer: connection refused
delta    answering  counting   -         -             -         0       placement counts Jobs here: nodes is forbidden
epsilon  answering  unbounded  -         -             -         1       capacity: Unbounded: placed by count
Waiting for a worker: 5 Jobs (NoWorkerFits 3, WorkerLost 2).
";
    assert_eq!(render(&view), want);
    let empty = WorkersView {
        teams: Vec::new(),
        workers: Vec::new(),
        waiting: WaitingView::default(),
    };
    assert!(render(&empty).ends_with("No Job waits for a worker.\n"));
}

#[test]
fn the_json_names_each_field_as_docs_cli_md_says() {
    let mut alpha = summed("alpha", room((1, 1), &[("cpu", 1.0)], &[("cpu", 2.0)]));
    alpha.placed = 1;
    let view = WorkersView {
        teams: Vec::new(),
        workers: vec![alpha],
        waiting: WaitingView {
            total: 1,
            by_reason: BTreeMap::from([("NoWorkerFits".to_owned(), 1)]),
        },
    };
    assert_eq!(
        serde_json::to_value(&view).expect("json"),
        json!({
            "workers": [{
                "name": "alpha",
                "state": "answering",
                "via": "Secret jobwarden-system/jobwarden-worker-alpha",
                "room": {
                    "kind": "nodes",
                    "nodesSchedulable": 1,
                    "nodesTotal": 1,
                    "free": {"cpu": 1.0},
                    "allocatable": {"cpu": 2.0}
                },
                "placed": 1
            }],
            "waiting": {"total": 1, "byReason": {"NoWorkerFits": 1}},
            "teams": []
        })
    );
}

#[test]
fn the_teams_table_follows_the_fleet_where_the_policy_names_teams() {
    use crate::workers::teams::{HeldView, TeamView};
    let team =
        |name: &str, weight: f64, fair: f64, gpus: f64, placed: u32, waiting: usize| TeamView {
            name: name.to_owned(),
            weight,
            fair_share: fair,
            usage: BTreeMap::from([
                ("cpu".to_owned(), gpus),
                ("nvidia.com/gpu".to_owned(), gpus),
            ]),
            dominant_share: gpus / 8.0,
            dominant_resource: (gpus > 0.0).then(|| "nvidia.com/gpu".to_owned()),
            placed,
            waiting,
            held: Vec::new(),
        };
    let mut research = team("research", 2.0, 2.0 / 3.0, 6.0, 6, 3);
    research.held.push(HeldView {
        job: "research/big".to_owned(),
        uid: "big".to_owned(),
        worker: "east".to_owned(),
    });
    let view = WorkersView {
        teams: vec![
            research,
            team("prod", 1.0, 1.0 / 3.0, 2.0, 2, 0),
            team("default", 1.0, 0.25, 0.0, 0, 0),
        ],
        workers: Vec::new(),
        waiting: WaitingView::default(),
    };
    let want = "\
WORKER  STATE  NODES  FREE CPU  FREE MEMORY  FREE GPU  PLACED
No Job waits for a worker.

TEAM      WEIGHT  FAIR SHARE  DOMINANT            CPU  MEMORY  GPU  PLACED  WAITING
research  2       67%         75% nvidia.com/gpu  6    0       6    6       3        room held on east for research/big
prod      1       33%         25% nvidia.com/gpu  2    0       2    2       0
default   1       25%         0%                  0    0       0    0       0
";
    assert_eq!(render(&view), want);
}

/// A Node as the kubelet reports it.
fn node(
    name: &str,
    cordoned: bool,
    allocatable: serde_json::Value,
) -> k8s_openapi::api::core::v1::Node {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"unschedulable": cordoned},
        "status": {
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    }))
    .expect("a Node")
}

fn bound_pod(
    uid: &str,
    node: &str,
    requests: serde_json::Value,
) -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(json!({
        "metadata": {"name": uid, "namespace": "ns", "uid": uid},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": requests}}]},
        "status": {"phase": "Running"}
    }))
    .expect("a Pod")
}

#[test]
fn the_room_is_the_room_cores_summary_in_cores_and_bytes() {
    use crate::workers::room_of::room_of;
    let nodes = [
        node(
            "n1",
            false,
            json!({"cpu": "4", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": "2"}),
        ),
        node(
            "n2",
            true,
            json!({"cpu": "8", "memory": "32Gi", "pods": "110"}),
        ),
    ];
    let pods = [bound_pod(
        "p1",
        "n1",
        json!({"cpu": "1500m", "memory": "1Gi", "nvidia.com/gpu": "2"}),
    )];
    let line = room_of(&nodes, &pods);
    assert_eq!((line.nodes_schedulable, line.nodes_total), (1, 2));
    assert_eq!(line.allocatable.get("cpu"), Some(&4.0));
    assert_eq!(line.free.get("cpu"), Some(&2.5));
    assert_eq!(line.free.get("memory"), Some(&(15.0 * GI)));
    assert_eq!(line.free.get("pods"), Some(&109.0));
    assert_eq!(line.free.get("nvidia.com/gpu"), Some(&0.0), "{line:?}");
}
