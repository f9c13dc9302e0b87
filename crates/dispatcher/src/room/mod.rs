//! Room on a worker (issue 48): a pure model of kube-scheduler's filter, enough to say
//! whether all the pods a Job runs at once fit on a worker's nodes now, and why not. The
//! watches fill a [`Room`] per worker with compact [`NodeView`]s and [`PodView`]s; [`fits`]
//! judges a Job's [`PodShape`] against it and the [`Reservation`]s of Jobs placed there
//! whose pods are not seen yet. No I/O, no async, no clock.
//!
//! What it models: node cordon (NodeUnschedulable), NoSchedule/NoExecute taints against
//! tolerations (TaintToleration), nodeSelector and required node affinity (NodeAffinity),
//! requests against allocatable, including extended resources and the pod count
//! (NodeResourcesFit). What it leaves to the worker's scheduler is [`ROOM_LIMITS`].

mod fit;
mod resources;
mod shape;
mod short;
mod views;
mod worker_room;

#[cfg(test)]
mod tests;

pub use fit::{Placement, Reservation, fits, place};
pub use resources::{
    Amount, CPU, EPHEMERAL_STORAGE, MAX_AMOUNT, MEMORY, PODS, QuantityError, ResourceError,
    Resources, parse_amount,
};
pub use shape::{Exclusion, PodShape, ShapeError, UNSCHEDULABLE_TAINT, pods_at_once};
pub use short::{Fit, Lack, Need, Short};
pub use views::{Effect, NodeView, PodView, TaintView, Unschedulable, pod_requests};
pub use worker_room::{OwnerPods, Room, RoomSummary};

/// What the model does not judge: the worker's scheduler does, and a copy whose pods it
/// cannot place is moved by the dispatcher's rules.
pub const ROOM_LIMITS: &[&str] = &[
    "inter-pod affinity and anti-affinity",
    "topology spread constraints",
    "volumes (zones, attach limits, node affinity of persistent volumes)",
    "dynamic resource allocation (resource claims)",
    "host ports",
    "preferred node affinity and every other score (only the filter is modelled)",
    "nodeName set in the template",
    "in-place resized pods' allocated resources (their spec requests count)",
    "preemption (a pod of higher priority may take the room of others)",
];
