//! The fleet as `jobwarden workers` shows it, pure: per worker whether it answers, the room its
//! Nodes have (summed by the dispatcher's own `room` core, never a second count), the Jobs
//! placed there; and the Jobs waiting for a worker, by the reason the dispatcher last gave.

use std::collections::BTreeMap;

use jobwarden_dispatcher::copy::record;
use jobwarden_dispatcher::copy::status::is_finished;
use jobwarden_dispatcher::room::Resources;
use jobwarden_dispatcher::worker::credentials::Refusal;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde::Serialize;
use serde_json::Value;

use super::room_of::{RoomLine, room_of};
use super::teams::TeamView;

/// What was read of one worker.
#[derive(Debug, Clone)]
pub struct WorkerReading {
    pub name: String,
    /// The policy's `capacity: Unbounded`: placed by count, its Nodes not read.
    pub unbounded: bool,
    /// The policy's `draining: true`: it takes no new Job.
    pub draining: bool,
    pub read: WorkerRead,
}

/// A worker's answer, or why there is none.
#[derive(Debug, Clone)]
pub enum WorkerRead {
    /// No kubeconfig reaches it (none where the policy says, or the caller may not read it).
    NoKubeconfig(String),
    /// The kubeconfig found is refused by the dispatcher's judge, and was not used.
    Refused { via: String, refusal: Refusal },
    /// It does not answer, or refuses the credentials (401): why.
    Lost { via: String, reason: String },
    /// It answered: its Nodes and its unfinished pods, each listed or refused (403: its role is
    /// granted in chosen namespaces only).
    Read {
        via: String,
        nodes: Listing<Node>,
        pods: Listing<Pod>,
    },
}

/// A cluster-wide list, or the refusal of it.
#[derive(Debug, Clone)]
pub enum Listing<T> {
    Items(Vec<T>),
    Forbidden(String),
}

/// How a worker answers, in the dispatcher's words (`jobwarden_dispatch_workers{state}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum State {
    Answering,
    /// It answers, and the policy drains it (`draining: true`): it takes no new Job.
    Draining,
    /// No kubeconfig for it yet: the dispatcher, too, waits for one.
    Connecting,
    Lost,
    Refused,
}

impl State {
    pub fn label(self) -> &'static str {
        match self {
            State::Answering => "answering",
            State::Draining => "draining",
            State::Connecting => "connecting",
            State::Lost => "lost",
            State::Refused => "refused",
        }
    }
}

/// Where a worker's room comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum RoomView {
    /// Its Nodes and pods, read now.
    Nodes(RoomLine),
    /// `capacity: Unbounded`: placed by count.
    Unbounded,
    /// Its role cannot list Nodes or pods cluster-wide: placement counts Jobs there.
    Counting { why: String },
    /// Not read: the worker was not reached.
    Unread,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerView {
    pub name: String,
    pub state: State,
    /// The kubeconfig it was reached with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// Why it is not answering, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    pub room: RoomView,
    /// Unfinished Jobs recorded on it (`jobwarden.io/worker`).
    pub placed: usize,
}

/// The Jobs with no worker, by the reason of the dispatcher's latest Warning on each
/// (`NotSaid` when it gave none yet).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitingView {
    pub total: usize,
    pub by_reason: BTreeMap<String, usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkersView {
    pub workers: Vec<WorkerView>,
    pub waiting: WaitingView,
    /// The policy's teams (`dispatch.shares`), `default` last; empty without.
    pub teams: Vec<TeamView>,
}

/// The reason of a waiting Job the dispatcher has said nothing about yet.
pub const NOT_SAID: &str = "NotSaid";

/// The management cluster's side: the dispatcher's Jobs, and the reason of its latest Warning
/// Event on each, by the Job's UID.
#[derive(Debug, Clone, Default)]
pub struct JobsRead {
    pub jobs: Vec<Value>,
    pub latest_warning: BTreeMap<String, String>,
    /// The worker each waiting Job holds room on, by UID (its latest `RoomHeld` Event).
    pub held: BTreeMap<String, String>,
}

/// The fleet: each worker in the policy's order, then the waiting Jobs. Only the unfinished
/// Jobs of `dispatcher` count.
pub fn fleet(readings: &[WorkerReading], jobs: &JobsRead, dispatcher: &str) -> WorkersView {
    let unfinished: Vec<&Value> = jobs
        .jobs
        .iter()
        .filter(|j| {
            j.pointer("/spec/managedBy").and_then(Value::as_str) == Some(dispatcher)
                && !is_finished(j)
        })
        .collect();
    let mut placed: BTreeMap<&str, usize> = BTreeMap::new();
    let mut waiting = WaitingView::default();
    for job in &unfinished {
        match record::recorded(job) {
            Some(worker) => *placed.entry(worker).or_default() += 1,
            None => {
                let uid = job
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let reason = jobs
                    .latest_warning
                    .get(uid)
                    .map_or(NOT_SAID, String::as_str);
                waiting.total += 1;
                *waiting.by_reason.entry(reason.to_owned()).or_default() += 1;
            }
        }
    }
    let workers = readings
        .iter()
        .map(|r| worker_view(r, placed.get(r.name.as_str()).copied().unwrap_or(0)))
        .collect();
    WorkersView {
        workers,
        waiting,
        teams: Vec::new(),
    }
}

/// The workers' allocatable summed, as the dispatcher sums it for the fair order: each worker
/// read, by its Nodes and pods.
pub fn fleet_allocatable(readings: &[WorkerReading]) -> Resources {
    let mut fleet = Resources::default();
    for r in readings.iter().filter(|r| !r.unbounded) {
        if let WorkerRead::Read {
            nodes: Listing::Items(nodes),
            pods,
            ..
        } = &r.read
        {
            let pods: &[Pod] = match pods {
                Listing::Items(pods) => pods,
                Listing::Forbidden(_) => &[],
            };
            fleet.add(&super::room_of::room(nodes, pods).summary().allocatable);
        }
    }
    fleet
}

fn worker_view(r: &WorkerReading, placed: usize) -> WorkerView {
    let (state, via, why, room) = match &r.read {
        WorkerRead::NoKubeconfig(why) => {
            (State::Connecting, None, Some(why.clone()), RoomView::Unread)
        }
        WorkerRead::Refused { via, refusal } => (
            State::Refused,
            Some(via.clone()),
            Some(format!(
                "the dispatcher refuses its kubeconfig ({}): {}",
                refusal.reason.label(),
                refusal.message
            )),
            RoomView::Unread,
        ),
        WorkerRead::Lost { via, reason } => (
            State::Lost,
            Some(via.clone()),
            Some(reason.clone()),
            RoomView::Unread,
        ),
        WorkerRead::Read { via, nodes, pods } => {
            let room = match (nodes, pods) {
                _ if r.unbounded => RoomView::Unbounded,
                (Listing::Items(nodes), Listing::Items(pods)) => {
                    RoomView::Nodes(room_of(nodes, pods))
                }
                (Listing::Forbidden(why), _) | (_, Listing::Forbidden(why)) => {
                    RoomView::Counting { why: why.clone() }
                }
            };
            (State::Answering, Some(via.clone()), None, room)
        }
    };
    // A worker placed by count shows so whether or not it answers.
    let room = if r.unbounded {
        RoomView::Unbounded
    } else {
        room
    };
    // Draining says what the dispatcher does with a worker that answers; a lost or refused
    // one is said as such first.
    let state = if r.draining && state == State::Answering {
        State::Draining
    } else {
        state
    };
    WorkerView {
        name: r.name.clone(),
        state,
        via,
        why,
        room,
        placed,
    }
}
