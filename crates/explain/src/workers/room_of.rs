//! A worker's room from its Nodes and unfinished pods, summed by the dispatcher's `room` core:
//! the very view placement decides by, never a second count.

use k8s_openapi::api::core::v1::{Node, Pod};

use super::view::RoomLine;

// PLACEHOLDER until room-48 is merged: replaced by the room core's summary.
pub fn room_of(nodes: &[Node], _pods: &[Pod]) -> RoomLine {
    RoomLine {
        nodes_schedulable: 0,
        nodes_total: nodes.len(),
        ..RoomLine::default()
    }
}
