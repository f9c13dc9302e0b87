//! The fair order in a sync (issue 53): with teams in the policy (`dispatch.shares`), a Job
//! being placed takes room only in its turn. [`Fair`] keeps the pure core (`shares`: the teams'
//! usage, the waiting Jobs in order, the holds) in step with what the syncs see, and judges a
//! Job's room against the Jobs ahead of it and the room held for the head of the order.
//!
//! Its turn, on a worker where its pods fit: no hold there keeps a resource it asks for, and
//! none of the first [`AHEAD_JUDGED`] Jobs ahead of it in the order fits there (each would take
//! the room first, and is woken to). A Job ahead that fits nowhere never holds back one that
//! fits: no room sits idle but room held. Judged under the reservations' lock, with the
//! choice recorded at once, so placements within the same second keep the order.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use jobwarden_admission::policy::Share;

use crate::placement::RoomFit;
use crate::plan::WorkerState;
use crate::room::{Fit, PodShape, Resources, pods_at_once};
use crate::shares::{Hold, JobState, Shares, TeamId, Teams};

/// How many Jobs ahead of one being placed are judged against its room: a bound on a sync's
/// cost, reached only when more Jobs than this ahead of it fit nowhere now.
pub const AHEAD_JUDGED: usize = 64;

/// A waiting Job's pods, to judge whether it fits where a later Job would go.
#[derive(Debug, Clone)]
pub struct Waiter {
    pub namespace: String,
    pub name: String,
    pub shape: PodShape,
    pub pods: u32,
    /// The workers that would take it but for room, at its last judgment: it goes first only
    /// where it may go at all.
    pub workers: Vec<String>,
}

impl Waiter {
    /// What all its pods at once ask for.
    pub fn requests(&self) -> Resources {
        self.shape.requests.times(u64::from(self.pods))
    }
}

/// What keeps a Job from a worker where its pods fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Turn {
    /// Room there is held for the head of the order, short of what this Job asks for too.
    Held {
        holder: String,
        short_of: Vec<String>,
    },
    /// A Job ahead of it in the order fits there: it goes first.
    Behind { job: String },
}

impl Turn {
    /// The worker's room as the plan and the Job's Event say it.
    fn room(&self) -> RoomFit {
        let (why, label) = match self {
            Turn::Held { holder, short_of } => (
                format!(
                    "room there is held for Job {holder}, the first in the fair order ({})",
                    short_of.join(", ")
                ),
                "held",
            ),
            Turn::Behind { job } => (format!("Job {job} goes first in the fair order"), "order"),
        };
        RoomFit::Short {
            why,
            label,
            never: false,
        }
    }
}

/// The fair order as the syncs keep it.
#[derive(Debug, Default)]
pub struct Fair {
    pub shares: Shares,
    /// The policy names teams: without, every Job is judged on its own, as before shares (the
    /// team `default`'s usage and waiting Jobs are still counted, for its series).
    enabled: bool,
    /// The waiting Jobs' pods, by UID.
    waiters: HashMap<String, Waiter>,
    /// The holds whose `RoomHeld` Event was said: (holder, worker).
    said: BTreeSet<(String, String)>,
    /// The Jobs this replica placed whose record the watch does not show yet: a sync of a
    /// version from before the choice does not put them back in line.
    chosen: BTreeSet<String>,
}

impl Fair {
    pub fn new(shares: &[Share]) -> Fair {
        Fair {
            shares: Shares::new(Teams::from_policy(shares)),
            enabled: !shares.is_empty(),
            ..Fair::default()
        }
    }

    /// The Job as a sync sees it: placed on `recorded` and running, or waiting, or neither.
    pub fn observe(&mut self, uid: &str, team: TeamId, user: &Value, recorded: bool, done: bool) {
        let suspended = user.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
        if done {
            self.forget(uid);
        } else if recorded {
            let requests = waiter_of(user).filter(|_| !suspended).map(|w| w.requests());
            let state = requests.map_or(JobState::Uncounted, |requests| JobState::Placed {
                requests,
            });
            self.waiters.remove(uid);
            self.chosen.remove(uid);
            self.shares.observe(uid, team, state);
            self.settle_holds();
        }
    }

    /// The Job waits to be placed; `workers`: those that would take it but for room. A Job no
    /// worker would take (its pods fit on no Node, its workers are refused or not ready) waits
    /// for something room cannot bring: it stays out of line, so that it neither heads the
    /// order nor keeps the room held for the Job behind it (it comes in when a worker would).
    pub fn waiting(&mut self, uid: &str, team: TeamId, user: &Value, workers: Vec<String>) {
        if self.chosen.contains(uid) {
            return;
        }
        if workers.is_empty() {
            self.forget(uid);
            return;
        }
        let created = user
            .pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .and_then(|t| t.parse::<Timestamp>().ok())
            .unwrap_or(Timestamp::UNIX_EPOCH);
        if let Some(waiter) = waiter_of(user) {
            self.waiters
                .insert(uid.to_owned(), Waiter { workers, ..waiter });
        }
        self.shares.waiting(uid, team, created);
        self.settle_holds();
    }

    /// This replica placed the Job: it counts against its team from now.
    pub fn chose(&mut self, uid: &str, team: TeamId, user: &Value) {
        let requests = waiter_of(user).map(|w| w.requests()).unwrap_or_default();
        self.waiters.remove(uid);
        self.chosen.insert(uid.to_owned());
        self.said.retain(|(holder, _)| holder != uid);
        self.shares.chose(uid, team, requests);
        self.settle_holds();
    }

    /// The Job is gone.
    pub fn forget(&mut self, uid: &str) {
        self.waiters.remove(uid);
        self.chosen.remove(uid);
        self.said.retain(|(holder, _)| holder != uid);
        self.shares.forget(uid);
        self.settle_holds();
    }

    /// Room is held for the head of the order only: a Job that is no longer first (a team
    /// with a lower share came, or its own team's share rose) gives its hold up, so that it
    /// never keeps room from the Jobs now ahead of it; it holds again when it is first again.
    fn settle_holds(&mut self) {
        let head = self.shares.next().map(|k| k.uid.clone());
        let stale: Vec<String> = self
            .shares
            .holds()
            .filter(|h| head.as_deref() != Some(&*h.holder))
            .map(|h| h.holder.to_string())
            .collect();
        for holder in stale {
            self.shares.release(&holder);
            self.said.retain(|(h, _)| *h != holder);
        }
    }

    /// Judges the workers where the Job's pods fit against its turn: each that a hold or a
    /// Job ahead keeps from it is short for it. Returns the Jobs ahead that fit where it would
    /// have gone (`namespace`, `name`): their turn has come, and they are to be woken.
    pub fn gate(
        &self,
        uid: &str,
        workers: &mut [WorkerState<'_>],
        fits: impl Fn(&str, &str, &Waiter) -> bool,
    ) -> Vec<(String, String)> {
        let Some(me) = self.waiters.get(uid).filter(|_| self.enabled) else {
            return Vec::new();
        };
        let requests = me.requests();
        let ahead: Vec<(&str, &Waiter)> = self
            .shares
            .iter_in_order()
            .map(|k| &*k.uid)
            .take_while(|a| *a != uid)
            .filter_map(|a| Some((a, self.waiters.get(a)?)))
            .take(AHEAD_JUDGED)
            .collect();
        let mut woken = Vec::new();
        for worker in workers.iter_mut().filter(|w| w.room == RoomFit::Fits) {
            let Some(turn) = self.turn(worker.name, uid, &requests, &ahead, &fits) else {
                continue;
            };
            if let Turn::Behind { job } = &turn
                && let Some((ns, name)) = job.split_once('/')
            {
                woken.push((ns.to_owned(), name.to_owned()));
            }
            worker.room = turn.room();
        }
        woken.sort();
        woken.dedup();
        woken
    }

    /// What keeps the Job `uid` from `worker`, if anything.
    fn turn(
        &self,
        worker: &str,
        uid: &str,
        requests: &Resources,
        ahead: &[(&str, &Waiter)],
        fits: &impl Fn(&str, &str, &Waiter) -> bool,
    ) -> Option<Turn> {
        if let Some(hold) = self.shares.held_against(worker, uid, requests) {
            return Some(self.held(hold));
        }
        ahead
            .iter()
            .find(|(a, waiter)| {
                waiter.workers.iter().any(|w| w == worker)
                    && self
                        .shares
                        .held_against(worker, a, &waiter.requests())
                        .is_none()
                    && fits(worker, a, waiter)
            })
            .map(|(_, waiter)| Turn::Behind {
                job: format!("{}/{}", waiter.namespace, waiter.name),
            })
    }

    fn held(&self, hold: &Hold) -> Turn {
        let holder = self.waiters.get(&*hold.holder).map_or_else(
            || hold.holder.to_string(),
            |w| format!("{}/{}", w.namespace, w.name),
        );
        Turn::Held {
            holder,
            short_of: hold.short_of.iter().map(|r| r.to_string()).collect(),
        }
    }

    /// The head of the order that fits nowhere now holds room on the worker where it would fit
    /// soonest (`candidates`: its fit on each worker it may go to). Returns the worker and what
    /// it is short of there the first time this hold is made, for its one Event.
    pub fn hold_if_head(
        &mut self,
        uid: &str,
        candidates: &[(&str, Fit)],
    ) -> Option<(String, Vec<String>)> {
        if !self.enabled || self.shares.next().is_none_or(|k| &*k.uid != uid) {
            return None;
        }
        let Some(hold) = self.shares.hold_head(uid, candidates) else {
            self.said.retain(|(holder, _)| holder != uid);
            return None;
        };
        let key = (uid.to_owned(), hold.worker.to_string());
        let short_of = hold.short_of.iter().map(|r| r.to_string()).collect();
        let new = !self.said.contains(&key);
        self.said.retain(|(holder, _)| holder != uid);
        self.said.insert(key.clone());
        new.then_some((key.1, short_of))
    }
}

/// A Job's pods as a waiter, if its template can be judged.
fn waiter_of(user: &Value) -> Option<Waiter> {
    let text = |p: &str| user.pointer(p).and_then(Value::as_str).unwrap_or_default();
    Some(Waiter {
        namespace: text("/metadata/namespace").to_owned(),
        name: text("/metadata/name").to_owned(),
        shape: PodShape::of_job(user).ok()?,
        pods: pods_at_once(user),
        workers: Vec::new(),
    })
}

#[cfg(test)]
mod tests;
