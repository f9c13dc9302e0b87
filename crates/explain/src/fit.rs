//! Where a dispatched Job would fit now, pure: for a Job not placed, each candidate worker
//! judged by the dispatcher's own `room` core over the worker's Nodes and pods read now (the
//! same readings `jobwarden workers` shows); for a placed Job, where its copy's pods are bound,
//! the scheduler's word on those it cannot place, and the workers it was moved from.

use jobwarden_dispatcher::copy::record;
use jobwarden_dispatcher::placement::Named;
use jobwarden_dispatcher::room::{Fit, PodShape, fits, pods_at_once};
use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;
use serde_json::Value;

use crate::workers::room_of::room;
use crate::workers::view::{Listing, WorkerRead, WorkerReading};

/// The annotation the dispatcher records each worker a Job left on, because its copy's pods
/// could not be scheduled there (comma-separated, oldest first).
pub const MOVED_FROM: &str = "jobwarden.io/moved-from";

/// One candidate worker, judged now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerFit {
    pub worker: String,
    /// `fits`, `short` (its Nodes lack room, or their filters rule the pods out), `draining`
    /// (it takes no new Job), `unbounded` and `counting` (placed by count: its room is not
    /// judged), `unread` (not reached).
    pub verdict: String,
    /// Why not, in the dispatcher's words; for `unread`, why it was not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// No Node of the worker could ever hold one of its pods.
    pub never: bool,
}

/// Each candidate of `job` (the workers its `jobwarden.io/workers` names, else every one),
/// in the policy's order, minus those it was moved from.
pub fn fit_now(job: &Value, fleet: &[WorkerReading]) -> Vec<WorkerFit> {
    let named = record::named(job);
    let left = moved_from(job);
    let shape = PodShape::of_job(job);
    let pods = pods_at_once(job);
    fleet
        .iter()
        .filter(|w| match &named {
            Named::Any => true,
            Named::Only(names) => names.contains(&w.name),
        })
        .map(|w| {
            let judged = |verdict: &str, reason: Option<String>, never: bool| WorkerFit {
                worker: w.name.clone(),
                verdict: verdict.to_owned(),
                reason,
                never,
            };
            if left.contains(&w.name) {
                return judged(
                    "short",
                    Some(format!(
                        "the Job left it: its pods could not be scheduled there ({MOVED_FROM})"
                    )),
                    false,
                );
            }
            if w.draining {
                return judged(
                    "draining",
                    Some("draining: it takes no new Job".to_owned()),
                    false,
                );
            }
            if w.unbounded {
                return judged("unbounded", None, false);
            }
            let (nodes, worker_pods) = match &w.read {
                WorkerRead::Read {
                    nodes: Listing::Items(nodes),
                    pods: Listing::Items(pods),
                    ..
                } => (nodes, pods),
                WorkerRead::Read { .. } => {
                    return judged(
                        "counting",
                        Some("its Nodes or pods may not be listed: placed by count".to_owned()),
                        false,
                    );
                }
                WorkerRead::NoKubeconfig(why) | WorkerRead::Lost { reason: why, .. } => {
                    return judged("unread", Some(why.clone()), false);
                }
                WorkerRead::Refused { refusal, .. } => {
                    return judged(
                        "unread",
                        Some(format!("its kubeconfig is refused: {}", refusal.message)),
                        false,
                    );
                }
            };
            let shape = match &shape {
                Ok(shape) => shape,
                Err(e) => {
                    return judged(
                        "short",
                        Some(format!("its pod template cannot be read: {e}")),
                        false,
                    );
                }
            };
            match fits(shape, pods, &room(nodes, worker_pods), &[]) {
                Fit::Fits => judged("fits", None, false),
                Fit::Short(short) => judged("short", Some(short.to_string()), short.never()),
            }
        })
        .collect()
}

/// Whether no candidate could ever hold one of its pods (and some were judged).
pub fn fits_nowhere_today(judged: &[WorkerFit]) -> bool {
    !judged.is_empty() && judged.iter().all(|f| f.never)
}

/// `jobwarden.io/moved-from`, oldest first.
pub fn moved_from(job: &Value) -> Vec<String> {
    record::annotation(job, MOVED_FROM)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Where one of the copy's pods is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodPlace {
    pub pod: String,
    /// The node it is bound to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The scheduler's message, for a pod `PodScheduled=False` with reason `Unschedulable`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unschedulable: Option<String>,
}

/// Where the copy's unfinished pods are, by name.
pub fn pod_places(pods: &[Pod]) -> Vec<PodPlace> {
    let mut out: Vec<PodPlace> = pods
        .iter()
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .map(|p| {
            let unschedulable = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .find(|c| {
                    c.type_ == "PodScheduled"
                        && c.status == "False"
                        && c.reason.as_deref() == Some("Unschedulable")
                })
                .map(|c| c.message.clone().unwrap_or_default());
            PodPlace {
                pod: p.metadata.name.clone().unwrap_or_default(),
                node: p.spec.as_ref().and_then(|s| s.node_name.clone()),
                unschedulable,
            }
        })
        .collect();
    out.sort_by(|a, b| a.pod.cmp(&b.pod));
    out
}
