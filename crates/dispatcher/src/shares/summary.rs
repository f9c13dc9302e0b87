//! Each team as `jobwarden workers` prints it: its weight and fair share, what it uses, its
//! Jobs placed and waiting, and the room held for its Jobs.

use crate::room::Resources;

use super::Shares;
use super::hold::Hold;
use super::ledger::Dominant;
use super::teams::TeamId;

#[derive(Debug, Clone, PartialEq)]
pub struct TeamSummary {
    pub team: TeamId,
    pub name: String,
    pub weight: f64,
    /// The weight ÷ the weights of the teams with Jobs placed or waiting, this team's
    /// included even when it has none: the fraction of its dominant resource it is entitled
    /// to as soon as it asks. Idle teams are left out of the sum because DRF gives what they
    /// leave to the others; counting them would promise fractions nobody could reach.
    pub fair_share: f64,
    /// The requests of its placed, unfinished Jobs.
    pub usage: Resources,
    pub dominant: Option<Dominant>,
    /// Dominant share ÷ weight: the team with the lowest goes first.
    pub priority: f64,
    pub placed: u32,
    pub waiting: usize,
    /// The workers held for its Jobs.
    pub holds: Vec<Hold>,
}

impl Shares {
    /// Every team, in the policy's order (`default` last unless named).
    pub fn team_summary(&self) -> Vec<TeamSummary> {
        let active = |t: TeamId| self.ledger.placed(t) > 0 || self.order.waiting(t) > 0;
        let active_weight: f64 = self
            .teams
            .iter()
            .filter(|t| active(*t))
            .map(|t| self.teams.weight(t))
            .sum();
        self.teams
            .iter()
            .map(|team| {
                let weight = self.teams.weight(team);
                let total = if active(team) {
                    active_weight
                } else {
                    active_weight + weight
                };
                TeamSummary {
                    team,
                    name: self.teams.name(team).to_owned(),
                    weight,
                    fair_share: weight / total,
                    usage: self.ledger.usage(team).clone(),
                    dominant: self.ledger.dominant(team, &self.fleet),
                    priority: self.priority(team),
                    placed: self.ledger.placed(team),
                    waiting: self.order.waiting(team),
                    holds: self.holds_of_team(team),
                }
            })
            .collect()
    }

    fn holds_of_team(&self, team: TeamId) -> Vec<Hold> {
        self.holds
            .iter()
            .filter(|h| self.order.get(&h.holder).is_some_and(|(t, _)| t == team))
            .cloned()
            .collect()
    }
}
