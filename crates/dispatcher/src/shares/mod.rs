//! Fair shares between teams (the policy's `dispatch.shares`): which waiting Job is placed
//! next, and the room held for it when it fits nowhere yet. [`Shares`] keeps the teams, what
//! each uses ([`Ledger`]), the waiting Jobs in order ([`Order`]) and the holds ([`Holds`])
//! consistent with each other; the caller tells it what the Job watch shows and what this
//! replica chose. No I/O, no async, no clock: a Job's age is its creationTimestamp.
//!
//! The order is dominant resource fairness (Ghodsi et al., NSDI '11) weighted: the team with
//! the lowest dominant share ÷ weight goes first, then its oldest Job.

mod hold;
mod ledger;
mod order;
mod summary;
mod teams;

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use k8s_openapi::jiff::Timestamp;

use crate::room::{Fit, Resources};

pub use hold::{Hold, Holds, blocks, choose_hold};
pub use ledger::{Changed, Dominant, Ledger, dominant};
pub use order::{JobKey, Order, Priority};
pub use summary::TeamSummary;
pub use teams::{TeamId, Teams};

/// What the Job watch (or a sync) shows of a Job, as shares count it.
#[derive(Debug, Clone, PartialEq)]
pub enum JobState {
    /// It waits to be placed.
    Waiting { created: Timestamp },
    /// It is placed and unfinished: `requests` is what all the pods it runs at once request
    /// (`pods_at_once` × one pod's requests).
    Placed { requests: Resources },
    /// Neither: finished, or placed and running no pod. It counts for nothing.
    Uncounted,
}

/// Teams, their usage, the waiting Jobs in order, and the holds, kept consistent.
#[derive(Debug, Clone, Default)]
pub struct Shares {
    teams: Teams,
    ledger: Ledger,
    order: Order,
    holds: Holds,
    /// The workers' allocatable summed, judged by their Nodes.
    fleet: Resources,
}

impl Shares {
    pub fn new(teams: Teams) -> Shares {
        Shares {
            teams,
            ..Shares::default()
        }
    }

    pub fn teams(&self) -> &Teams {
        &self.teams
    }

    /// A new policy's teams: every Job known is counted again under the team `team_of` gives
    /// its UID (the caller knows its namespace). The holds stay: they do not depend on teams.
    pub fn set_teams(&mut self, teams: Teams, team_of: impl Fn(&str) -> TeamId) {
        let placed: Vec<_> = self
            .ledger
            .jobs()
            .map(|(uid, _, r)| (uid.clone(), r.clone()))
            .collect();
        let waiting: Vec<_> = self.order.iter().map(|(_, k)| k.clone()).collect();
        self.teams = teams;
        self.ledger = Ledger::default();
        self.order = Order::default();
        for (uid, requests) in placed {
            self.ledger.chose(&uid, team_of(&uid), requests);
        }
        for key in waiting {
            self.order.insert(&key.uid, team_of(&key.uid), key.created);
        }
        self.rekey_all();
    }

    /// The fleet's allocatable changed (a worker came, went, or its Nodes did): every team's
    /// dominant share is worked out again.
    pub fn set_fleet_allocatable(&mut self, fleet: Resources) {
        if fleet != self.fleet {
            self.fleet = fleet;
            self.rekey_all();
        }
    }

    pub fn fleet_allocatable(&self) -> &Resources {
        &self.fleet
    }

    fn rekey_all(&mut self) {
        let teams: Vec<TeamId> = self.teams.iter().collect();
        for team in teams {
            self.rekey(team);
        }
    }

    fn rekey(&mut self, team: TeamId) {
        let share = self.ledger.dominant_share(team, &self.fleet);
        self.order
            .rekey(team, Priority(share / self.teams.weight(team)));
    }

    fn rekey_changed(&mut self, changed: Changed) {
        for team in changed.teams() {
            self.rekey(team);
        }
    }

    /// The Job as the watch shows it. A Job placed or no longer counted ends its hold. The
    /// word is taken as it comes: an event older than this replica's own `chose` (the watch
    /// not yet showing the record) would put the Job back in line, so the caller passes on
    /// only what is at least as new as its choice, as for `placement::reservations`.
    pub fn observe(&mut self, uid: &str, team: TeamId, state: JobState) {
        match state {
            JobState::Waiting { created } => {
                let changed = self.ledger.forget(uid);
                self.rekey_changed(changed);
                self.order.insert(uid, team, created);
            }
            JobState::Placed { requests } => self.chose(uid, team, requests),
            JobState::Uncounted => self.forget(uid),
        }
    }

    /// The Job waits to be placed.
    pub fn waiting(&mut self, uid: &str, team: TeamId, created: Timestamp) {
        self.observe(uid, team, JobState::Waiting { created });
    }

    /// This replica placed the Job (before the record is written): it counts against its team
    /// from now on, leaves the order, and its hold ends. Also the watch's word for a Job
    /// placed and unfinished.
    pub fn chose(&mut self, uid: &str, team: TeamId, requests: Resources) {
        self.order.remove(uid);
        self.holds.release(uid);
        let changed = self.ledger.chose(uid, team, requests);
        self.rekey_changed(changed);
    }

    /// The Job is gone (deleted, or finished): it neither waits nor counts, nor holds.
    pub fn forget(&mut self, uid: &str) {
        self.order.remove(uid);
        self.holds.release(uid);
        let changed = self.ledger.forget(uid);
        self.rekey_changed(changed);
    }

    /// Keeps only the Jobs `present` says exist (after a relist of the Jobs).
    pub fn retain(&mut self, present: &dyn Fn(&str) -> bool) {
        let gone: Vec<Box<str>> = self
            .ledger
            .jobs()
            .map(|(uid, _, _)| &**uid)
            .chain(self.order.iter().map(|(_, k)| &*k.uid))
            .chain(self.holds.iter().map(|h| &*h.holder))
            .filter(|uid| !present(uid))
            .map(Box::from)
            .collect();
        for uid in gone {
            self.forget(&uid);
        }
    }

    /// The Job placements take next. O(log n).
    pub fn next(&self) -> Option<&JobKey> {
        self.order.next()
    }

    /// The team of a Job waiting or counted.
    pub fn team_of_job(&self, uid: &str) -> Option<TeamId> {
        self.order
            .get(uid)
            .map(|(t, _)| t)
            .or_else(|| self.ledger.team_of(uid))
    }

    /// The Jobs waiting, in the order of their teams' priorities now, each team's oldest
    /// first. Placing a Job raises its team's priority, so placements interleave the teams
    /// where this lists one team's Jobs after the other's: it is the order as of now, for
    /// `explain` and `jobwarden workers`, not a forecast.
    pub fn iter_in_order(&self) -> impl Iterator<Item = &JobKey> + '_ {
        self.order.iter().map(|(_, k)| k)
    }

    /// The Job's place in [`Shares::iter_in_order`] (0: next). O(n), for `explain`.
    pub fn position(&self, uid: &str) -> Option<usize> {
        self.iter_in_order().position(|k| &*k.uid == uid)
    }

    pub fn waiting_count(&self) -> usize {
        self.order.len()
    }

    /// The team's dominant share ÷ weight: lower goes first.
    pub fn priority(&self, team: TeamId) -> f64 {
        self.order.priority(team).0
    }

    pub fn usage(&self, team: TeamId) -> &Resources {
        self.ledger.usage(team)
    }

    pub fn dominant(&self, team: TeamId) -> Option<Dominant> {
        self.ledger.dominant(team, &self.fleet)
    }

    /// Holds `worker` for a waiting Job, short of `short_of` there, unless another Job holds
    /// it (one holder per worker); a Job holding another worker moves its hold here.
    pub fn hold_for(&mut self, uid: &str, worker: &str, short_of: BTreeSet<Box<str>>) -> bool {
        let Some((_, key)) = self.order.get(uid) else {
            return false;
        };
        self.holds.take(Hold {
            holder: key.uid.clone(),
            worker: worker.into(),
            short_of,
            candidates: Box::new([]),
        })
    }

    /// The hold of the head of the order, from its fit on each of its candidate workers (the
    /// fleet's order). It keeps the worker it holds while that worker is still among the same
    /// candidates and still short for it (what it is short of follows the fit); otherwise the
    /// soonest worker no other Job holds is held ([`choose_hold`]), or none (it fits
    /// somewhere now, or on no candidate however much frees: its hold, if any, ends).
    pub fn hold_head(&mut self, uid: &str, candidates: &[(&str, Fit)]) -> Option<&Hold> {
        let holder = self.order.get(uid).map(|(_, k)| k.uid.clone())?;
        if candidates.iter().any(|(_, fit)| *fit == Fit::Fits) {
            // It is placed instead.
            self.holds.release(uid);
            return None;
        }
        let mut names: Vec<Box<str>> = candidates.iter().map(|(w, _)| (*w).into()).collect();
        names.sort();
        let keep = self.holds.of(uid).and_then(|h| {
            let same = h.candidates.is_empty() || *h.candidates == *names;
            let fit = candidates.iter().find(|(w, _)| **w == *h.worker);
            same.then_some(fit?)
        });
        let others: Vec<(&str, Fit)> = candidates
            .iter()
            .filter(|(w, _)| self.holds.on(w).is_none_or(|h| *h.holder == *uid))
            .cloned()
            .collect();
        let (worker, short_of) = keep
            .and_then(|(w, fit)| choose_hold(&[(*w, fit.clone())]))
            .or_else(|| choose_hold(&others))
            .or_else(|| {
                self.holds.release(uid);
                None
            })?;
        let hold = Hold {
            holder,
            worker: worker.into(),
            short_of,
            candidates: names.into(),
        };
        self.holds.take(hold).then(|| self.holds.on(worker))?
    }

    /// Ends the Job's hold (its candidate workers changed, say).
    pub fn release(&mut self, uid: &str) -> Option<Hold> {
        self.holds.release(uid)
    }

    /// Ends the hold on a worker that left the fleet.
    pub fn release_worker(&mut self, worker: &str) -> Option<Hold> {
        self.holds.release_worker(worker)
    }

    /// Every hold, by worker name.
    pub fn holds(&self) -> impl Iterator<Item = &Hold> + '_ {
        self.holds.iter()
    }

    pub fn hold_of(&self, uid: &str) -> Option<&Hold> {
        self.holds.of(uid)
    }

    /// The hold on `worker` by another Job than `uid` that keeps room a Job with `requests`
    /// asks for: while it stands, that Job is not placed there.
    pub fn held_against(&self, worker: &str, uid: &str, requests: &Resources) -> Option<&Hold> {
        self.holds.held_against(worker, uid, requests)
    }
}
