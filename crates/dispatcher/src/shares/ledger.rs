//! What each team uses of the fleet: the requests of its placed, unfinished Jobs, and its
//! dominant share (DRF: the largest fraction it holds of any one resource of the fleet).
//! Kept from the Job watch (`observe`) and from this replica's own choices (`chose`), as
//! `placement::reservations` is: a placement counts against its team from the moment it is
//! chosen, or a burst of placements would all go to the team that was last at the moment
//! the burst began.
//!
//! The resources counted: every one a Job requests (cpu, memory, ephemeral-storage,
//! nvidia.com/gpu and any other extended resource, hugepages) but `pods`. The pod count is
//! a node's slot limit, not something a team is entitled to a share of: counted, a team of
//! many tiny pods would look as big as one of many GPUs. `ephemeral-storage` counts: it is
//! requested and scheduled on like memory, and when a node's disk is what runs out, a team
//! filling it holds the fleet as surely as with cpu. (It rarely dominates: nodes' disks are
//! large beside what pods ask.)

use std::collections::HashMap;
use std::sync::Arc;

use crate::room::{PODS, Resources};

use super::teams::TeamId;

/// The resource a team holds the largest fraction of, and that fraction.
#[derive(Debug, Clone, PartialEq)]
pub struct Dominant {
    pub resource: Box<str>,
    /// Usage ÷ the fleet's allocatable; above 1 when the fleet shrank under the team.
    pub share: f64,
}

/// The teams whose usage an update changed: the team the Job was counted against before,
/// and the one it is counted against now (either `None`, or the same team twice).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Changed {
    pub was: Option<TeamId>,
    pub is: Option<TeamId>,
}

impl Changed {
    /// Each team changed, once.
    pub fn teams(self) -> impl Iterator<Item = TeamId> {
        let again = self.is.filter(|t| Some(*t) != self.was);
        self.was.into_iter().chain(again)
    }
}

#[derive(Debug, Clone, Default)]
struct TeamUsage {
    usage: Resources,
    placed: u32,
}

#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// The Jobs counted: their team and their requests (pods at once × one pod's).
    jobs: HashMap<Arc<str>, (TeamId, Resources)>,
    teams: Vec<TeamUsage>,
    /// What an unknown team uses (a reference to nothing needs a place to live).
    none: Resources,
}

impl Ledger {
    /// The Job as the watch shows it: `Some(requests)` when it is placed and unfinished,
    /// with the requests of all the pods it runs at once; `None` when it is not counted
    /// (waiting, finished, deleted, or placed but running no pod).
    pub fn observe(&mut self, uid: &str, team: TeamId, counted: Option<Resources>) -> Changed {
        match counted {
            Some(requests) => self.count(uid, team, requests),
            None => self.forget(uid),
        }
    }

    /// This replica placed the Job (before the record is written, before the watch shows it).
    pub fn chose(&mut self, uid: &str, team: TeamId, requests: Resources) -> Changed {
        self.count(uid, team, requests)
    }

    /// The Job counts no more.
    pub fn forget(&mut self, uid: &str) -> Changed {
        let Some((was, requests)) = self.jobs.remove(uid) else {
            return Changed::default();
        };
        self.uncharge(was, &requests);
        Changed {
            was: Some(was),
            is: None,
        }
    }

    fn count(&mut self, uid: &str, team: TeamId, requests: Resources) -> Changed {
        let was = match self.jobs.get_mut(uid) {
            Some((t, r)) if *t == team && *r == requests => return Changed::default(),
            Some(_) => self.forget(uid).was,
            None => None,
        };
        self.charge(team, &requests);
        self.jobs.insert(uid.into(), (team, requests));
        Changed {
            was,
            is: Some(team),
        }
    }

    fn slot(&mut self, team: TeamId) -> Option<&mut TeamUsage> {
        let at = team.index();
        if self.teams.len() <= at {
            self.teams.resize_with(at + 1, TeamUsage::default);
        }
        self.teams.get_mut(at)
    }

    fn charge(&mut self, team: TeamId, requests: &Resources) {
        if let Some(t) = self.slot(team) {
            t.usage.add(requests);
            t.placed += 1;
        }
    }

    fn uncharge(&mut self, team: TeamId, requests: &Resources) {
        if let Some(t) = self.slot(team) {
            t.usage.sub(requests);
            t.placed = t.placed.saturating_sub(1);
            if t.placed == 0 {
                // Exact again (no drift left behind by a saturated sum).
                t.usage = Resources::default();
            }
        }
    }

    /// The sum of the requests of the team's counted Jobs.
    pub fn usage(&self, team: TeamId) -> &Resources {
        self.teams
            .get(team.index())
            .map_or(&self.none, |t| &t.usage)
    }

    /// How many of the team's Jobs are counted.
    pub fn placed(&self, team: TeamId) -> u32 {
        self.teams.get(team.index()).map_or(0, |t| t.placed)
    }

    /// The team of a counted Job.
    pub fn team_of(&self, uid: &str) -> Option<TeamId> {
        self.jobs.get(uid).map(|(t, _)| *t)
    }

    /// Every counted Job with its team and requests (to count them again under new teams).
    pub fn jobs(&self) -> impl Iterator<Item = (&Arc<str>, TeamId, &Resources)> + '_ {
        self.jobs.iter().map(|(uid, (t, r))| (uid, *t, r))
    }

    /// The team's dominant share of `fleet` (the workers' allocatable summed); 0 when it uses
    /// nothing.
    pub fn dominant_share(&self, team: TeamId, fleet: &Resources) -> f64 {
        dominant(self.usage(team), fleet).map_or(0.0, |d| d.share)
    }

    /// Which resource is the team's dominant one, and its share.
    pub fn dominant(&self, team: TeamId, fleet: &Resources) -> Option<Dominant> {
        dominant(self.usage(team), fleet)
    }
}

/// The largest fraction `usage` holds of any resource of `fleet`, but `pods` (see the module's
/// doc). A resource the fleet has none of is skipped: a Job asking for it fits on no worker,
/// so usage of it can only be what a worker that left the fleet still runs, and an infinite
/// share would put the team last for good for what it cannot be given anyway. Ties go to
/// the resource listed first (cpu, memory, ephemeral-storage, then by name).
pub fn dominant(usage: &Resources, fleet: &Resources) -> Option<Dominant> {
    let mut best: Option<(&str, f64)> = None;
    for (resource, used) in usage.iter() {
        let allocatable = fleet.get(resource);
        if resource == PODS || allocatable == 0 {
            continue;
        }
        // Both below 2^64: f64's 53 bits give a fraction far finer than any weight.
        let share = used as f64 / allocatable as f64;
        if best.is_none_or(|(_, b)| share > b) {
            best = Some((resource, share));
        }
    }
    best.map(|(resource, share)| Dominant {
        resource: resource.into(),
        share,
    })
}
