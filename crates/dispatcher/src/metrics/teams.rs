//! Each team's series (issue 53), one per team of the policy, so that their number is bounded
//! by the policy, not by the Jobs: its dominant share, its usage by resource, its Jobs waiting.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use jobwarden_admission::policy::DEFAULT_TEAM;

use crate::room::{CPU, MEMORY, PODS, Resources};
use crate::shares::TeamSummary;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TeamLabels {
    pub team: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TeamResourceLabels {
    pub team: String,
    pub resource: String,
}

#[derive(Clone, Debug, Default)]
pub struct TeamMetrics {
    pub dominant_share: Family<TeamLabels, Gauge<f64, AtomicU64>>,
    pub usage: Family<TeamResourceLabels, Gauge<f64, AtomicU64>>,
    pub waiting: Family<TeamLabels, Gauge>,
    /// The resources each team's usage was shown for: one no longer used goes back to 0.
    shown: Arc<Mutex<HashMap<String, BTreeSet<String>>>>,
}

impl TeamMetrics {
    pub(super) fn register(r: &mut Registry) -> TeamMetrics {
        let m = TeamMetrics::default();
        r.register(
            "team_dominant_share",
            "A team's dominant share of the fleet (dispatch.shares): of each resource, what its placed, unfinished Jobs request over the workers' allocatable; the largest",
            m.dominant_share.clone(),
        );
        r.register(
            "team_usage",
            "What a team's placed, unfinished Jobs request, by resource (cpu in cores, memory in bytes, extended resources in units)",
            m.usage.clone(),
        );
        r.register(
            "team_jobs_waiting",
            "A team's dispatched Jobs waiting to be placed, in the fair order",
            m.waiting.clone(),
        );
        // The team `default` is there with or without teams in the policy (every namespace no
        // team names is in it): its series are served from the start.
        m.dominant_share
            .get_or_create(&TeamLabels {
                team: DEFAULT_TEAM.to_owned(),
            })
            .set(0.0);
        m.waiting
            .get_or_create(&TeamLabels {
                team: DEFAULT_TEAM.to_owned(),
            })
            .set(0);
        for resource in [CPU, MEMORY] {
            m.usage
                .get_or_create(&TeamResourceLabels {
                    team: DEFAULT_TEAM.to_owned(),
                    resource: resource.to_owned(),
                })
                .set(0.0);
        }
        m
    }

    /// Every team's series as the summary says them; a resource a team no longer uses reads 0.
    pub fn set(&self, teams: &[TeamSummary]) {
        for t in teams {
            let team = || TeamLabels {
                team: t.name.clone(),
            };
            self.dominant_share
                .get_or_create(&team())
                .set(t.dominant.as_ref().map_or(0.0, |d| d.share));
            self.waiting
                .get_or_create(&team())
                .set(i64::try_from(t.waiting).unwrap_or(i64::MAX));
            self.set_usage(&t.name, &t.usage);
        }
    }

    fn set_usage(&self, team: &str, usage: &Resources) {
        let now: Vec<(&str, f64)> = usage
            .iter()
            .filter(|(r, _)| *r != PODS)
            .map(|(r, _)| (r, usage.in_units(r)))
            .collect();
        let before = match self.shown.lock() {
            Ok(mut shown) => {
                let entry = shown.entry(team.to_owned()).or_default();
                let before = std::mem::take(entry);
                entry.extend(now.iter().map(|(r, _)| (*r).to_owned()));
                before
            }
            Err(_) => BTreeSet::new(),
        };
        let gone = before.iter().filter(|r| !now.iter().any(|(n, _)| n == r));
        for (resource, value) in gone.map(|r| (r.as_str(), 0.0)).chain(now.iter().copied()) {
            self.usage
                .get_or_create(&TeamResourceLabels {
                    team: team.to_owned(),
                    resource: resource.to_owned(),
                })
                .set(value);
        }
    }
}
