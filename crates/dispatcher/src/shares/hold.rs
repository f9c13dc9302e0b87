//! Room held for the head of the order: a Job first in line that fits nowhere now, but would
//! on some worker once room frees there, would otherwise wait for ever behind smaller Jobs
//! that take each bit of room as it frees. So one worker keeps what it frees of the
//! resources the head lacks there for the head: later Jobs asking for any of those are not
//! placed there until the head is. Jobs that ask for none of them go on being placed (a
//! GPU Job waiting blocks no cpu-only Job). One holder per worker; pure.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::room::{Fit, Resources, Short};

/// A worker whose room is held for one Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub holder: Arc<str>,
    pub worker: Box<str>,
    /// The resources the holder lacks there (`Lack`s of its `Insufficient`).
    pub short_of: BTreeSet<Box<str>>,
    /// The holder's candidate workers when the hold was taken, sorted: the hold ends when
    /// they change (a worker came or went; the soonest may be another now).
    pub candidates: Box<[Box<str>]>,
}

/// How far a worker is from holding the Job: the pods of it that do not fit there now,
/// then how many resources it lacks. Fewer pods missing is sooner: each pod that ends there
/// frees a pod's worth, and fewer resources lacking is fewer kinds of room to wait for.
fn distance(short: &Short) -> Option<(u32, usize)> {
    match short {
        Short::Insufficient {
            fit, wanted, lacks, ..
        } if !lacks.is_empty() => Some((wanted.saturating_sub(*fit), lacks.len())),
        // Nothing named as lacking holds nothing back: there is nothing to keep for it.
        _ => None,
    }
}

/// The worker to hold for the head of the order, from its fit on each candidate worker (in
/// the fleet's order), with the resources it lacks there. `None` when it fits somewhere now
/// (it is placed instead), or fits on no candidate however much frees (never fits, no nodes,
/// every node excluded). Soonest: the fewest of its pods missing, then the fewest resources
/// lacking, then the first in the fleet's order.
pub fn choose_hold<'a>(candidates: &[(&'a str, Fit)]) -> Option<(&'a str, BTreeSet<Box<str>>)> {
    if candidates.iter().any(|(_, fit)| *fit == Fit::Fits) {
        return None;
    }
    let mut best: Option<(&'a str, &Short, (u32, usize))> = None;
    for (worker, fit) in candidates {
        let Fit::Short(short) = fit else { continue };
        let Some(d) = distance(short) else { continue };
        if best.is_none_or(|(_, _, b)| d < b) {
            best = Some((worker, short, d));
        }
    }
    let (worker, short, _) = best?;
    let Short::Insufficient { lacks, .. } = short else {
        return None;
    };
    Some((worker, lacks.iter().map(|l| l.resource.clone()).collect()))
}

/// Whether a Job with these requests would take room the hold keeps: it asks for some of a
/// resource the holder is short of.
pub fn blocks(hold: &Hold, requests: &Resources) -> bool {
    hold.short_of.iter().any(|r| requests.get(r) > 0)
}

/// The holds in force: at most one per worker, at most one per Job.
#[derive(Debug, Clone, Default)]
pub struct Holds {
    by_worker: BTreeMap<Box<str>, Hold>,
    by_holder: HashMap<Arc<str>, Box<str>>,
}

impl Holds {
    /// Takes the hold, unless another Job holds the worker; a Job holding elsewhere moves.
    pub fn take(&mut self, hold: Hold) -> bool {
        if self
            .by_worker
            .get(&hold.worker)
            .is_some_and(|h| h.holder != hold.holder)
        {
            return false;
        }
        self.release(&hold.holder);
        self.by_holder
            .insert(hold.holder.clone(), hold.worker.clone());
        self.by_worker.insert(hold.worker.clone(), hold);
        true
    }

    /// Ends the Job's hold, if it has one.
    pub fn release(&mut self, uid: &str) -> Option<Hold> {
        let worker = self.by_holder.remove(uid)?;
        self.by_worker.remove(&worker)
    }

    /// Ends the hold on a worker (it left the fleet).
    pub fn release_worker(&mut self, worker: &str) -> Option<Hold> {
        let hold = self.by_worker.remove(worker)?;
        self.by_holder.remove(&hold.holder);
        Some(hold)
    }

    pub fn of(&self, uid: &str) -> Option<&Hold> {
        self.by_holder.get(uid).and_then(|w| self.by_worker.get(w))
    }

    pub fn on(&self, worker: &str) -> Option<&Hold> {
        self.by_worker.get(worker)
    }

    /// Every hold, by worker name.
    pub fn iter(&self) -> impl Iterator<Item = &Hold> + '_ {
        self.by_worker.values()
    }

    /// The hold on `worker` by another Job than `uid` that a Job with `requests` would take
    /// room from.
    pub fn held_against(&self, worker: &str, uid: &str, requests: &Resources) -> Option<&Hold> {
        self.on(worker)
            .filter(|h| &*h.holder != uid && blocks(h, requests))
    }
}
