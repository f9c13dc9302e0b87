//! The waiting Jobs in the order placements take them: first the team with the lowest
//! dominant share ÷ weight, then within a team the oldest Job (creationTimestamp, then UID).
//! Kept incrementally so that the next Job is found in O(log n) among 10,000 waiting: a
//! sorted set of Jobs per team, and a sorted set of the teams that have waiting Jobs, keyed
//! by their priority. Changing a team's priority (`rekey`) moves one entry.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use super::teams::TeamId;

/// A waiting Job's place within its team: older first, UID for Jobs created the same second
/// (creationTimestamp has seconds only), so the order never depends on a hash.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobKey {
    pub created: Timestamp,
    pub uid: Arc<str>,
}

/// A team's dominant share ÷ weight, ordered totally (`f64::total_cmp`) so that it can key a
/// sorted set; lower goes first. The ledger never makes a NaN (weights are positive and
/// finite, shares finite); were one given, it would sort after every number.
#[derive(Debug, Clone, Copy, Default)]
pub struct Priority(pub f64);

impl PartialEq for Priority {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Priority {}

impl PartialOrd for Priority {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Priority {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

#[derive(Debug, Clone, Default)]
pub struct Order {
    jobs: HashMap<Arc<str>, (TeamId, JobKey)>,
    /// By team index: its waiting Jobs.
    per_team: Vec<BTreeSet<JobKey>>,
    /// By team index: its priority now (kept for teams without waiting Jobs too, so that a
    /// team whose first Job arrives is keyed by its usage at once).
    priority: Vec<Priority>,
    /// The teams with waiting Jobs, lowest priority first, ties by team (the policy's order).
    teams: BTreeSet<(Priority, TeamId)>,
}

impl Order {
    /// The Job waits (again); a Job already waiting is moved to its new team or key.
    pub fn insert(&mut self, uid: &str, team: TeamId, created: Timestamp) {
        if let Some((t, key)) = self.jobs.get(uid)
            && *t == team
            && key.created == created
        {
            return;
        }
        self.remove(uid);
        let key = JobKey {
            created,
            uid: uid.into(),
        };
        self.grow(team);
        let priority = self.priority(team);
        if let Some(set) = self.per_team.get_mut(team.index()) {
            if set.is_empty() {
                self.teams.insert((priority, team));
            }
            set.insert(key.clone());
        }
        self.jobs.insert(key.uid.clone(), (team, key));
    }

    /// The Job waits no more; returns its team if it was waiting.
    pub fn remove(&mut self, uid: &str) -> Option<TeamId> {
        let (team, key) = self.jobs.remove(uid)?;
        let priority = self.priority(team);
        if let Some(set) = self.per_team.get_mut(team.index()) {
            set.remove(&key);
            if set.is_empty() {
                self.teams.remove(&(priority, team));
            }
        }
        Some(team)
    }

    /// The team's priority changed (its usage, its weight or the fleet did).
    pub fn rekey(&mut self, team: TeamId, priority: Priority) {
        self.grow(team);
        let old = self.priority(team);
        if old == priority {
            return;
        }
        if self.teams.remove(&(old, team)) {
            self.teams.insert((priority, team));
        }
        if let Some(p) = self.priority.get_mut(team.index()) {
            *p = priority;
        }
    }

    fn grow(&mut self, team: TeamId) {
        let len = team.index() + 1;
        if self.per_team.len() < len {
            self.per_team.resize_with(len, BTreeSet::new);
            self.priority.resize(len, Priority::default());
        }
    }

    pub fn priority(&self, team: TeamId) -> Priority {
        self.priority.get(team.index()).copied().unwrap_or_default()
    }

    /// The Job placements take next: the oldest of the team first in the order.
    pub fn next(&self) -> Option<&JobKey> {
        let (_, team) = self.teams.first()?;
        self.per_team.get(team.index())?.first()
    }

    /// Every waiting Job with its team, team by team in the order of their priorities now
    /// (placing a team's Jobs raises its priority, which this order does not foresee).
    pub fn iter(&self) -> impl Iterator<Item = (TeamId, &JobKey)> + '_ {
        self.teams.iter().flat_map(move |(_, team)| {
            self.per_team
                .get(team.index())
                .into_iter()
                .flatten()
                .map(move |key| (*team, key))
        })
    }

    /// The team of a waiting Job, with its key.
    pub fn get(&self, uid: &str) -> Option<(TeamId, &JobKey)> {
        self.jobs.get(uid).map(|(t, k)| (*t, k))
    }

    /// How many of the team's Jobs wait.
    pub fn waiting(&self, team: TeamId) -> usize {
        self.per_team.get(team.index()).map_or(0, BTreeSet::len)
    }

    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }
}
