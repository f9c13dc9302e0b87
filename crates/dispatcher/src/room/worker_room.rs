//! One worker's room: its nodes, and its unfinished pods charged as they come and go. Every
//! event updates the sums it touches (the pod's node, or the worker's unbound sum) and the
//! owner index; nothing rescans the pods.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::resources::Resources;
use super::views::{NodeView, PodView, Unschedulable};

/// A node name's slot: the node once seen, and what the pods bound to it request (a pod can
/// be seen before its node).
#[derive(Debug, Clone, Default)]
pub(crate) struct NodeSlot {
    pub(crate) view: Option<NodeView>,
    pub(crate) used: Resources,
    pub(crate) bound: u32,
}

/// One worker's view of its nodes and unfinished pods.
#[derive(Debug, Clone, Default)]
pub struct Room {
    /// By name: placement walks nodes in this order, so it is deterministic.
    pub(crate) nodes: BTreeMap<Box<str>, NodeSlot>,
    pub(crate) pods: HashMap<Arc<str>, PodView>,
    owners: HashMap<Box<str>, Vec<Arc<str>>>,
    /// What unbound pods the scheduler has not (yet) found unschedulable request: they are
    /// about to take room somewhere on the worker.
    pub(crate) unbound: Resources,
    /// Those pods by uid: placement places them first, in an order that does not depend on
    /// the hash map's.
    pub(crate) pending: BTreeSet<Arc<str>>,
}

/// The worker as `jobwarden workers` prints it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoomSummary {
    pub nodes: u32,
    /// Not cordoned.
    pub schedulable_nodes: u32,
    /// Allocatable of the schedulable nodes.
    pub allocatable: Resources,
    /// Their allocatable less their bound pods' requests, less what pending unbound pods ask.
    pub free: Resources,
    /// Unbound pods the scheduler has not found unschedulable.
    pub pending_pods: u32,
}

/// A Job's pods seen on the worker (by controller uid).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnerPods {
    pub total: u32,
    pub bound: u32,
    /// The longest-unschedulable of its pods, if any is.
    pub unschedulable: Option<Unschedulable>,
}

/// Whether a pod's requests are charged, and where.
enum Charge<'a> {
    Node(&'a str),
    Unbound,
    /// Unbound and found unschedulable: it holds no room (the scheduler found none for it;
    /// were it charged, one pod that never fits would block the worker).
    Nothing,
}

fn charge_of(pod: &PodView) -> Charge<'_> {
    match (&pod.node, &pod.unschedulable) {
        (Some(n), _) => Charge::Node(n),
        (None, None) => Charge::Unbound,
        (None, Some(_)) => Charge::Nothing,
    }
}

impl Room {
    pub fn new() -> Room {
        Room::default()
    }

    pub fn apply_node(&mut self, node: NodeView) {
        let slot = self.nodes.entry(node.name.clone()).or_default();
        slot.view = Some(node);
    }

    pub fn delete_node(&mut self, name: &str) {
        if let Some(slot) = self.nodes.get_mut(name) {
            slot.view = None;
            if slot.bound == 0 {
                self.nodes.remove(name);
            }
        }
    }

    pub fn apply_pod(&mut self, uid: &str, pod: PodView) {
        let old = self.pods.remove_entry(uid);
        let key: Arc<str> = match &old {
            Some((key, _)) => key.clone(),
            None => uid.into(),
        };
        if let Some((_, old)) = &old {
            self.uncharge(&key, old);
            if old.owner != pod.owner {
                self.unindex(old.owner.as_deref(), uid);
            }
        }
        self.charge(&key, &pod);
        if old.as_ref().is_none_or(|(_, o)| o.owner != pod.owner)
            && let Some(owner) = &pod.owner
        {
            self.owners
                .entry(owner.clone())
                .or_default()
                .push(key.clone());
        }
        self.pods.insert(key, pod);
    }

    pub fn delete_pod(&mut self, uid: &str) {
        if let Some((key, old)) = self.pods.remove_entry(uid) {
            self.uncharge(&key, &old);
            self.unindex(old.owner.as_deref(), uid);
        }
    }

    fn charge(&mut self, uid: &Arc<str>, pod: &PodView) {
        match charge_of(pod) {
            Charge::Node(n) => {
                let slot = self.nodes.entry(n.into()).or_default();
                slot.used.add(&pod.requests);
                slot.bound += 1;
            }
            Charge::Unbound => {
                self.unbound.add(&pod.requests);
                self.pending.insert(uid.clone());
            }
            Charge::Nothing => {}
        }
    }

    fn uncharge(&mut self, uid: &Arc<str>, pod: &PodView) {
        match charge_of(pod) {
            Charge::Node(n) => {
                if let Some(slot) = self.nodes.get_mut(n) {
                    slot.used.sub(&pod.requests);
                    slot.bound = slot.bound.saturating_sub(1);
                    if slot.bound == 0 {
                        // Exact again (no drift left behind by a saturated sum).
                        slot.used = Resources::default();
                        if slot.view.is_none() {
                            self.nodes.remove(n);
                        }
                    }
                }
            }
            Charge::Unbound => {
                self.unbound.sub(&pod.requests);
                self.pending.remove(uid);
                if self.pending.is_empty() {
                    self.unbound = Resources::default();
                }
            }
            Charge::Nothing => {}
        }
    }

    fn unindex(&mut self, owner: Option<&str>, uid: &str) {
        let Some(owner) = owner else { return };
        if let Some(uids) = self.owners.get_mut(owner) {
            uids.retain(|u| &**u != uid);
            if uids.is_empty() {
                self.owners.remove(owner);
            }
        }
    }

    /// The nodes seen, by name.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeView> + '_ {
        self.nodes.values().filter_map(|s| s.view.as_ref())
    }

    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// The UIDs of the pods seen (a relist removes those it no longer finds).
    pub fn pod_uids(&self) -> impl Iterator<Item = &str> + '_ {
        self.pods.keys().map(|k| &**k)
    }

    pub fn summary(&self) -> RoomSummary {
        let mut s = RoomSummary {
            pending_pods: u32::try_from(self.pending.len()).unwrap_or(u32::MAX),
            ..RoomSummary::default()
        };
        for slot in self.nodes.values() {
            let Some(node) = &slot.view else { continue };
            s.nodes += 1;
            if node.unschedulable {
                continue;
            }
            s.schedulable_nodes += 1;
            s.allocatable.add(&node.allocatable);
            let mut free = node.allocatable.clone();
            free.sub(&slot.used);
            s.free.add(&free);
        }
        s.free.sub(&self.unbound);
        s
    }

    /// The pods of one owner (a Job's uid on the worker) seen there.
    pub fn pods_of(&self, owner_uid: &str) -> OwnerPods {
        let mut out = OwnerPods::default();
        for pod in self
            .owners
            .get(owner_uid)
            .into_iter()
            .flatten()
            .filter_map(|uid| self.pods.get(uid))
        {
            out.total += 1;
            if pod.node.is_some() {
                out.bound += 1;
            }
            if let Some(u) = &pod.unschedulable
                && out.unschedulable.as_ref().is_none_or(|o| u.since < o.since)
            {
                out.unschedulable = Some((**u).clone());
            }
        }
        out
    }
}
