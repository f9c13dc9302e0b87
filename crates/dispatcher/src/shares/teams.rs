//! The teams of the policy's `dispatch.shares`, and which one a namespace belongs to. Built
//! once per policy; a namespace is placed by the names of every team first, then by their
//! selectors in the policy's order, else it is the `default` team's.

use std::collections::{BTreeMap, HashMap};

use jobwarden_admission::policy::{DEFAULT_TEAM, NamespaceMatch, Share};

/// A team, by its place in [`Teams`] (the policy's order, `default` last unless named).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TeamId(pub(crate) u32);

impl TeamId {
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}

#[derive(Debug, Clone)]
struct Team {
    name: String,
    weight: f64,
    /// The team's selector alone: its names are in [`Teams::by_name`], which all teams'
    /// names are looked up in before any selector is tried.
    selector: Option<NamespaceMatch>,
}

/// The teams of a policy.
#[derive(Debug, Clone)]
pub struct Teams {
    teams: Vec<Team>,
    /// A namespace named by a team: the first team naming it (the policy refuses two).
    by_name: HashMap<String, TeamId>,
    default: TeamId,
}

impl Default for Teams {
    /// No shares: every namespace is the `default` team's.
    fn default() -> Teams {
        Teams::from_policy(&[])
    }
}

/// A weight the policy would refuse counts as 1: `Dispatch::problems` refuses such a policy,
/// so this only keeps a bad value from ordering a team always first or always last.
fn usable_weight(weight: f64) -> f64 {
    if weight.is_finite() && weight > 0.0 {
        weight
    } else {
        1.0
    }
}

fn id(index: usize) -> TeamId {
    TeamId(u32::try_from(index).unwrap_or(u32::MAX))
}

impl Teams {
    /// The teams of `dispatch.shares`, in its order, then `default` (weight 1) unless a share
    /// names it. A share whose name an earlier one has is left out (the policy refuses it).
    pub fn from_policy(shares: &[Share]) -> Teams {
        let mut teams: Vec<Team> = Vec::with_capacity(shares.len() + 1);
        let mut by_name = HashMap::new();
        for share in shares {
            if teams.iter().any(|t| t.name == share.name) {
                continue;
            }
            let me = id(teams.len());
            for ns in &share.namespaces.names {
                by_name.entry(ns.clone()).or_insert(me);
            }
            teams.push(Team {
                name: share.name.clone(),
                weight: usable_weight(share.weight),
                selector: share.namespaces.selector.clone().map(|s| NamespaceMatch {
                    names: Vec::new(),
                    selector: Some(s),
                }),
            });
        }
        let default = match teams.iter().position(|t| t.name == DEFAULT_TEAM) {
            Some(at) => id(at),
            None => {
                teams.push(Team {
                    name: DEFAULT_TEAM.to_owned(),
                    weight: 1.0,
                    selector: None,
                });
                id(teams.len() - 1)
            }
        };
        Teams {
            teams,
            by_name,
            default,
        }
    }

    /// The team of a namespace: the team that names it, else the first whose selector
    /// matches its labels (`None` when they are not known: then only names count), else
    /// `default`.
    pub fn team_of(&self, namespace: &str, labels: Option<&BTreeMap<String, String>>) -> TeamId {
        if let Some(team) = self.by_name.get(namespace) {
            return *team;
        }
        self.teams
            .iter()
            .position(|t| {
                t.selector
                    .as_ref()
                    .is_some_and(|s| s.matches(namespace, labels))
            })
            .map_or(self.default, id)
    }

    /// The team a name is, if the policy has it.
    pub fn find(&self, name: &str) -> Option<TeamId> {
        self.teams.iter().position(|t| t.name == name).map(id)
    }

    pub fn default_team(&self) -> TeamId {
        self.default
    }

    pub fn name(&self, team: TeamId) -> &str {
        self.teams.get(team.index()).map_or("", |t| &t.name)
    }

    /// A team's weight; an unknown team weighs 1.
    pub fn weight(&self, team: TeamId) -> f64 {
        self.teams.get(team.index()).map_or(1.0, |t| t.weight)
    }

    pub fn len(&self) -> usize {
        self.teams.len()
    }

    pub fn is_empty(&self) -> bool {
        self.teams.is_empty()
    }

    /// Every team, in the policy's order, `default` last unless the policy names it.
    pub fn iter(&self) -> impl Iterator<Item = TeamId> + '_ {
        (0..self.teams.len()).map(id)
    }
}
