//! A dispatched Job's part of the story, pure: where the dispatcher recorded it
//! (`jobwarden.io/worker`), whether that worker is marked lost and what the Job will do then
//! (`jobwarden.io/worker-lost-since`, `dispatch.workerLostSeconds`,
//! `jobwarden.io/on-worker-lost`), what the dispatcher last said while it waits, and its copy
//! as read from the worker: recognised by its origin UID (a Job of the name that is not the
//! copy is someone else's), and told by the very story a Job and its pods get here, as the
//! worker's built-in Job controller runs it (`story` tells it and hands it in).

use std::collections::BTreeMap;
use std::time::Duration;

use jobwarden_admission::policy::Dispatch;
use jobwarden_dispatcher::copy::origin_uid;
use jobwarden_dispatcher::copy::record::{self, OnWorkerLost};
use jobwarden_dispatcher::placement::Named;
use jobwarden_dispatcher::worker::credentials::Refusal;
use jobwarden_rules::well_known::WORKER_LOST_SINCE_ANNOTATION;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::explanation::*;
use crate::fit::{fit_now, fits_nowhere_today, moved_from, pod_places};
use crate::workers::teams::{TeamsRead, TurnView, turn};
use crate::workers::view::{JobsRead, WorkerReading, fleet_allocatable};

/// What was read for a dispatched Job.
#[derive(Debug, Clone)]
pub struct DispatchReading {
    /// The policy's `dispatch` section (the installed one, or the file given), or why it could
    /// not be read.
    pub policy: Result<Dispatch, String>,
    pub copy: CopyReading,
    /// For a Job not placed: every worker of the policy, its Nodes and pods read now (as
    /// `jobwarden workers` reads them); empty for a placed Job.
    pub fleet: Vec<WorkerReading>,
    /// For a Job not placed, where the policy names teams: what its turn in the fair order is
    /// judged from, or why that could not be read; `None` otherwise.
    pub order: Option<Result<OrderReading, String>>,
}

/// What a waiting Job's turn is judged from, read as `jobwarden workers` reads it.
#[derive(Debug, Clone, Default)]
pub struct OrderReading {
    /// The dispatcher's Jobs, and the room held (its `RoomHeld` Events).
    pub jobs: JobsRead,
    /// The namespaces' labels, where a team names a selector.
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
}

/// The copy on the recorded worker, as read there.
#[derive(Debug, Clone)]
pub enum CopyReading {
    /// No worker is recorded.
    NotPlaced,
    /// The recorded worker is this cluster.
    Local,
    /// No kubeconfig reaches the worker: why.
    NoKubeconfig(String),
    /// The kubeconfig found is refused by the dispatcher's judge, and was not used.
    Refused { via: String, refusal: Refusal },
    /// The worker gave no answer, or refused the read: why.
    Unreachable { via: String, reason: String },
    /// The worker answered: its Job of the name (`None`: there is none), and, for the copy,
    /// its pods (by its `controller-uid` label) and its events.
    Read {
        via: String,
        job: Option<Value>,
        pods: Result<Vec<Pod>, String>,
        events: Result<Vec<Event>, String>,
    },
}

/// The worker a Job is recorded on (`jobwarden.io/worker`).
pub fn recorded_worker(job: &Value) -> Option<&str> {
    record::recorded(job)
}

fn add(t: Timestamp, d: Duration) -> Option<Timestamp> {
    t.checked_add(d).ok()
}

/// What the worker answered of the copy: the copy, its pods and its events.
type CopyRead<'a> = (
    &'a Value,
    &'a Result<Vec<Pod>, String>,
    &'a Result<Vec<Event>, String>,
);

/// The copy among what the worker answered: its Job of the name, if that is this Job's copy
/// (its origin UID is `uid`), with its pods and events.
pub(crate) fn copy_read<'a>(
    reading: Option<&'a DispatchReading>,
    uid: &str,
) -> Option<CopyRead<'a>> {
    match reading.map(|r| &r.copy) {
        Some(CopyReading::Read {
            job: Some(copy),
            pods,
            events,
            ..
        }) if !uid.is_empty() && origin_uid(copy) == Some(uid) => Some((copy, pods, events)),
        _ => None,
    }
}

/// The dispatch part of the story of `job` (whose `spec.managedBy` is `dispatcher`), told at
/// `now` from its events (`said`: every one, as the story reads them), what was read for it,
/// and its copy's story when the copy was read.
pub(crate) fn view(
    job: &Value,
    said: &[EventLine],
    reading: Option<&DispatchReading>,
    copy_story: Option<Explanation>,
    finished: bool,
    now: Timestamp,
    dispatcher: &str,
) -> DispatchView {
    let worker = recorded_worker(job).map(str::to_owned);
    let (worker_lost_seconds, policy_unreadable) = worker_lost_seconds(reading);
    let lost = lost_view(job, worker.is_some(), worker_lost_seconds, now);
    let said = dispatcher_events(said, dispatcher);
    let dispatcher_said = last_word(&said, worker.is_some(), finished);
    let copy = copy_view(
        job,
        reading.map(|r| &r.copy),
        worker.as_deref(),
        &said,
        copy_story,
    );
    // Computed now, beside what the dispatcher last said: the same core over the same Nodes.
    let fit = match reading {
        Some(r) if worker.is_none() && !finished => fit_now(job, &r.fleet),
        _ => Vec::new(),
    };
    let uid = job
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (turn, turn_unread) = match reading {
        Some(r) if worker.is_none() && !finished => turn_of(r, uid),
        _ => (None, None),
    };
    let copy_pods = match copy_read(reading, uid) {
        Some((_, Ok(pods), _)) if !finished => pod_places(pods),
        _ => Vec::new(),
    };
    DispatchView {
        dispatcher: dispatcher.to_owned(),
        worker,
        named_workers: match record::named(job) {
            Named::Any => Vec::new(),
            Named::Only(names) => names,
        },
        on_worker_lost: on_worker_lost(job).to_owned(),
        worker_lost_seconds,
        policy_unreadable,
        lost,
        dispatcher_said,
        copy,
        fits_nowhere_today: fits_nowhere_today(&fit),
        fit,
        copy_pods,
        moved_from: moved_from(job),
        turn,
        turn_unread,
    }
}

/// The waiting Job's turn in the fair order, or why it could not be judged.
fn turn_of(reading: &DispatchReading, uid: &str) -> (Option<TurnView>, Option<String>) {
    let (Ok(policy), Some(order)) = (&reading.policy, &reading.order) else {
        return (None, None);
    };
    match order {
        Ok(order) => {
            let read = TeamsRead {
                shares: &policy.shares,
                jobs: &order.jobs.jobs,
                namespaces: &order.namespaces,
                fleet: fleet_allocatable(&reading.fleet),
                held: &order.jobs.held,
            };
            (turn(&read, uid), None)
        }
        Err(why) => (None, Some(why.clone())),
    }
}

/// The Job's `jobwarden.io/on-worker-lost`, as the story names it.
fn on_worker_lost(job: &Value) -> &'static str {
    match record::on_worker_lost(job) {
        OnWorkerLost::Redispatch => "Redispatch",
        OnWorkerLost::Wait => "Wait",
        OnWorkerLost::Fail => "Fail",
    }
}

/// The policy's `dispatch.workerLostSeconds`, or why the policy could not be read.
fn worker_lost_seconds(reading: Option<&DispatchReading>) -> (Option<u64>, Option<String>) {
    match reading.map(|r| &r.policy) {
        Some(Ok(policy)) => (Some(policy.worker_lost_seconds), None),
        Some(Err(e)) => (None, Some(e.clone())),
        None => (None, Some("not read".to_owned())),
    }
}

/// The worker's lost mark (`jobwarden.io/worker-lost-since`) on a placed Job, and how long the
/// Job keeps its place after it.
fn lost_view(
    job: &Value,
    placed: bool,
    worker_lost_seconds: Option<u64>,
    now: Timestamp,
) -> Option<LostView> {
    record::annotation(job, WORKER_LOST_SINCE_ANNOTATION)
        .filter(|_| placed)
        .map(|mark| {
            let since: Option<Timestamp> = mark.parse().ok();
            let until = since
                .zip(worker_lost_seconds)
                .and_then(|(t, s)| add(t, Duration::from_secs(s)));
            LostView {
                mark: mark.to_owned(),
                since,
                keeps_place_until: until,
                remaining_seconds: until
                    .map(|u| Duration::try_from(u.duration_since(now)).map_or(0, |d| d.as_secs())),
            }
        })
}

/// The dispatcher's Events, oldest first: its reporting component is its name.
fn dispatcher_events(said: &[EventLine], dispatcher: &str) -> Vec<EventLine> {
    let mut said: Vec<EventLine> = said
        .iter()
        .filter(|e| e.from == dispatcher)
        .cloned()
        .collect();
    said.sort_by_key(|e| e.at);
    said
}

/// What the dispatcher last warned of while the Job waits: for a Job not placed, its latest
/// warning; for a placed one, its last word if that is a warning.
fn last_word(said: &[EventLine], placed: bool, finished: bool) -> Option<EventLine> {
    if finished {
        None
    } else if !placed {
        said.iter().rev().find(|e| e.type_ == "Warning").cloned()
    } else {
        said.last().filter(|e| e.type_ == "Warning").cloned()
    }
}

fn copy_view(
    job: &Value,
    reading: Option<&CopyReading>,
    worker: Option<&str>,
    said: &[EventLine],
    copy_story: Option<Explanation>,
) -> CopyView {
    let Some(worker) = worker else {
        return CopyView::NotPlaced;
    };
    let uid = job
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match reading {
        None => CopyView::NotRead,
        Some(CopyReading::NotPlaced) => CopyView::NotPlaced,
        Some(CopyReading::Local) => CopyView::Local,
        Some(CopyReading::NoKubeconfig(reason)) => CopyView::NoKubeconfig {
            reason: reason.clone(),
        },
        Some(CopyReading::Refused { via, refusal }) => CopyView::Refused {
            via: via.clone(),
            reason: refusal.reason.label().to_owned(),
            message: refusal.message.clone(),
        },
        Some(CopyReading::Unreachable { via, reason }) => CopyView::Unreachable {
            via: via.clone(),
            reason: reason.clone(),
        },
        Some(CopyReading::Read { via, job: None, .. }) => CopyView::Missing {
            via: via.clone(),
            deleted: said
                .iter()
                .rev()
                .find(|e| {
                    e.reason == "CopyDeleted" && e.message.contains(&format!("worker {worker}"))
                })
                .cloned(),
        },
        Some(CopyReading::Read {
            via,
            job: Some(copy),
            pods,
            events,
        }) => {
            let origin = origin_uid(copy);
            match copy_story {
                Some(story) if !uid.is_empty() && origin == Some(uid) => CopyView::Read {
                    via: via.clone(),
                    story: Box::new(story),
                    pods_unread: pods.as_ref().err().cloned(),
                    events_unread: events.as_ref().err().cloned(),
                },
                _ => CopyView::NotTheCopy {
                    via: via.clone(),
                    origin_uid: origin.map(str::to_owned),
                },
            }
        }
    }
}
