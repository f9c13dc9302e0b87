//! A worker's room from its Nodes and unfinished pods, built and summed by the dispatcher's
//! `room` core: the very view placement decides by, never a second count. Pure.

use std::collections::BTreeMap;

use jobwarden_dispatcher::room::{NodeView, PodView, Resources, Room, RoomSummary};
use k8s_openapi::api::core::v1::{Node, Pod};

use serde::Serialize;

/// A worker's room as the `room` core sums it: cpu in cores, memory in bytes, `pods`, and each
/// extended resource by its name.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoomLine {
    /// Nodes a pod may be placed on (not cordoned, Ready).
    pub nodes_schedulable: usize,
    pub nodes_total: usize,
    pub free: BTreeMap<String, f64>,
    pub allocatable: BTreeMap<String, f64>,
}

/// The room core filled as the dispatcher's watches fill it: every Node, every pod that holds
/// room (`PodView::from_pod` leaves out those that hold none), by UID.
pub fn room(nodes: &[Node], pods: &[Pod]) -> Room {
    let mut room = Room::new();
    for node in nodes {
        room.apply_node(NodeView::from_node(node));
    }
    for pod in pods {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        if let Some(view) = PodView::from_pod(pod) {
            room.apply_pod(uid, view);
        }
    }
    room
}

/// The summary as `workers` shows it: cpu in cores, everything else in its own unit (memory in
/// bytes).
pub fn room_of(nodes: &[Node], pods: &[Pod]) -> RoomLine {
    line(&room(nodes, pods).summary())
}

pub fn line(s: &RoomSummary) -> RoomLine {
    RoomLine {
        nodes_schedulable: s.schedulable_nodes as usize,
        nodes_total: s.nodes as usize,
        free: amounts(&s.free, &s.allocatable),
        allocatable: amounts(&s.allocatable, &s.allocatable),
    }
}

/// Each resource the nodes offer, its amount in `r` (zero when none is left: the core keeps
/// no zero amounts, and a free of nothing must still be shown).
fn amounts(r: &Resources, offered: &Resources) -> BTreeMap<String, f64> {
    offered
        .iter()
        .map(|(name, _)| (name.to_owned(), r.in_units(name)))
        .collect()
}
