//! The teams as `jobwarden workers` shows them (issue 53), pure: the fair order's own core
//! (`jobwarden_dispatcher::shares`) filled from what was read, as the dispatcher fills it from
//! its watches: the policy's teams, each dispatched Job placed (its requests counted) or
//! waiting, and the fleet's allocatable from the workers' Nodes. Room held is the dispatcher's
//! own state: it is read from its `RoomHeld` Events on the Jobs still waiting.

use std::collections::BTreeMap;

use jobwarden_admission::policy::Share;
use jobwarden_dispatcher::copy::record;
use jobwarden_dispatcher::copy::status::is_finished;
use jobwarden_dispatcher::room::{PODS, PodShape, Resources, pods_at_once};
use jobwarden_dispatcher::shares::{Shares, Teams};
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

/// A Job that holds room, and where.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeldView {
    /// namespace/name.
    pub job: String,
    #[serde(skip)]
    pub uid: String,
    pub worker: String,
}

/// One team.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TeamView {
    pub name: String,
    pub weight: f64,
    /// Its weight over the weights of the teams with Jobs placed or waiting (its own counted).
    pub fair_share: f64,
    /// What its placed, unfinished Jobs request: cpu in cores, the rest in their units.
    pub usage: BTreeMap<String, f64>,
    /// Its dominant share of the fleet, and of which resource.
    pub dominant_share: f64,
    pub dominant_resource: Option<String>,
    pub placed: u32,
    pub waiting: usize,
    pub held: Vec<HeldView>,
}

/// What the teams are read from.
pub struct TeamsRead<'a> {
    pub shares: &'a [Share],
    /// The dispatcher's Jobs.
    pub jobs: &'a [Value],
    /// The labels of each namespace, where a team names a selector.
    pub namespaces: &'a BTreeMap<String, BTreeMap<String, String>>,
    /// The workers' allocatable, summed.
    pub fleet: Resources,
    /// The worker named by the latest `RoomHeld` Event, by the UID of the Job it is on.
    pub held: &'a BTreeMap<String, String>,
}

/// Every team of the policy, `default` last; empty when the policy names none.
pub fn teams(read: &TeamsRead<'_>) -> Vec<TeamView> {
    match filled(read) {
        Some((shares, held)) => rows(&shares, held),
        None => Vec::new(),
    }
}

/// The teams table's rows, from the filled core and the room held by team name.
fn rows(shares: &Shares, mut held: BTreeMap<String, Vec<HeldView>>) -> Vec<TeamView> {
    shares
        .team_summary()
        .into_iter()
        .map(|t| TeamView {
            usage: amounts(&t.usage),
            dominant_share: t.dominant.as_ref().map_or(0.0, |d| d.share),
            dominant_resource: t.dominant.as_ref().map(|d| d.resource.to_string()),
            placed: t.placed,
            waiting: t.waiting,
            held: held.remove(&t.name).unwrap_or_default(),
            fair_share: t.fair_share,
            weight: t.weight,
            name: t.name,
        })
        .collect()
}

/// A waiting Job's turn in the fair order, as `explain` tells it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnView {
    /// Its team (of its namespace), and the team's row of the teams table.
    pub team: TeamView,
    /// Its place among the waiting Jobs, from 1 (the next to go), and how many wait.
    pub place: usize,
    pub waiting: usize,
    /// The worker room is held on for it, if it is the head of the order and holds room.
    pub held_for_it: Option<String>,
    /// Room held for other Jobs: which Job, on which worker.
    pub held_for_others: Vec<HeldView>,
}

/// The turn of the waiting Job `uid`; `None` when the policy names no team or the Job does
/// not wait.
pub fn turn(read: &TeamsRead<'_>, uid: &str) -> Option<TurnView> {
    let (shares, held) = filled(read)?;
    let place = shares.position(uid)? + 1;
    let team = shares.teams().name(shares.team_of_job(uid)?).to_owned();
    let (mine, others): (Vec<HeldView>, Vec<HeldView>) =
        held.values().flatten().cloned().partition(|h| h.uid == uid);
    let team = rows(&shares, held).into_iter().find(|t| t.name == team)?;
    Some(TurnView {
        team,
        place,
        waiting: shares.waiting_count(),
        held_for_it: mine.into_iter().next().map(|h| h.worker),
        held_for_others: others,
    })
}

/// The fair order's core filled from what was read, and the room held, by team name; `None`
/// when the policy names no team.
fn filled(read: &TeamsRead<'_>) -> Option<(Shares, BTreeMap<String, Vec<HeldView>>)> {
    if read.shares.is_empty() {
        return None;
    }
    let mut shares = Shares::new(Teams::from_policy(read.shares));
    shares.set_fleet_allocatable(read.fleet.clone());
    let mut held: BTreeMap<String, Vec<HeldView>> = BTreeMap::new();
    for job in read.jobs.iter().filter(|j| !is_finished(j)) {
        let text = |p: &str| job.pointer(p).and_then(Value::as_str).unwrap_or_default();
        let (ns, uid) = (text("/metadata/namespace"), text("/metadata/uid"));
        let team = shares.teams().team_of(ns, read.namespaces.get(ns));
        if record::recorded(job).is_some() {
            shares.chose(uid, team, requests(job));
            continue;
        }
        let created = text("/metadata/creationTimestamp")
            .parse::<Timestamp>()
            .unwrap_or(Timestamp::UNIX_EPOCH);
        shares.waiting(uid, team, created);
        if let Some(worker) = read.held.get(uid) {
            let name = shares.teams().name(team).to_owned();
            held.entry(name).or_default().push(HeldView {
                job: format!("{ns}/{}", text("/metadata/name")),
                uid: uid.to_owned(),
                worker: worker.clone(),
            });
        }
    }
    Some((shares, held))
}

/// What a placed Job's pods at once request; nothing while it is suspended.
fn requests(job: &Value) -> Resources {
    let suspended = job.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
    match PodShape::of_job(job) {
        Ok(shape) if !suspended => shape.requests.times(u64::from(pods_at_once(job))),
        _ => Resources::default(),
    }
}

/// Cores for cpu, each other resource in its own unit; not the pod count.
fn amounts(r: &Resources) -> BTreeMap<String, f64> {
    r.iter()
        .filter(|(name, amount)| *name != PODS && *amount > 0)
        .map(|(name, _)| (name.to_owned(), r.in_units(name)))
        .collect()
}
