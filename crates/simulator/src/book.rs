//! The book of pods the scenario decides: which entry names each pod, when it was created,
//! started and ended, and which failed pods still wait for a replacement. The observer keeps
//! it as it watches; the kubelet asks it what becomes of each pod.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use super::scenario::{PodKey, PodScript, Scenario};
use super::story::{PodCreated, PodLabel};
use jobwarden_fake_cluster::{Outcome, SeenPod};

/// A pod the controller created, as the scenario sees it.
#[derive(Debug, Clone)]
pub(super) struct BookedPod {
    pub label: PodLabel,
    script: PodScript,
    /// Seconds since the Job was created: when the pod was created, started running, ended.
    created_at: u64,
    pub started: Option<u64>,
    pub ended_at: Option<u64>,
    /// It ended `Failed`.
    pub failed: bool,
    pub deleted: bool,
    pub gone: bool,
    /// Second the kubelet first reported it could not start a container (told then).
    pub waiting_since: Option<u64>,
}

/// What the kubelet does with a pod its script decides, once it has run for `running_for`.
pub(super) fn outcome(script: &PodScript, running_for: Duration) -> Outcome {
    if running_for < script.after {
        return Outcome::Run;
    }
    script.fate.clone()
}

/// The pods the scenario decides, by uid.
pub(super) struct PodBook {
    scenario: Scenario,
    pub pods: HashMap<String, BookedPod>,
    attempts: HashMap<i32, u32>,
    created: u64,
    used: Vec<bool>,
    /// Pods the scenario deleted (as opposed to the controller).
    pub deleted_by_scenario: HashSet<String>,
}

impl PodBook {
    pub(super) fn new(scenario: Scenario) -> PodBook {
        let used = vec![false; scenario.entries.len()];
        PodBook {
            scenario,
            pods: HashMap::new(),
            attempts: HashMap::new(),
            created: 0,
            used,
            deleted_by_scenario: HashSet::new(),
        }
    }

    pub(super) fn created(&self) -> u64 {
        self.created
    }

    /// A new pod: its number, attempt, and the entry that decides it.
    pub(super) fn book(
        &mut self,
        uid: &str,
        name: &str,
        index: Option<i32>,
        at: u64,
    ) -> PodCreated {
        let number = self.created;
        self.created += 1;
        let attempt = index.map(|i| {
            let a = self.attempts.entry(i).or_insert(0);
            *a = a.saturating_add(1);
            *a
        });
        let key = PodKey {
            number: index.map_or(i64::try_from(number).unwrap_or(i64::MAX), i64::from),
            attempt: attempt.unwrap_or(1),
        };
        let (entry, script) = self.scenario.script_for(key);
        let script = script.clone();
        if let Some(used) = entry.and_then(|e| self.used.get_mut(e)) {
            *used = true;
        }
        let label = PodLabel {
            name: name.to_owned(),
            number,
            index,
            attempt,
        };
        let created = PodCreated {
            pod: label.clone(),
            scenario_entry: entry
                .and_then(|e| self.scenario.entries.get(e).map(|e| e.text.clone())),
            fate: script.to_string(),
        };
        self.pods.insert(
            uid.to_owned(),
            BookedPod {
                label,
                script,
                created_at: at,
                started: None,
                ended_at: None,
                failed: false,
                deleted: false,
                gone: false,
                waiting_since: None,
            },
        );
        created
    }

    /// The kubelet's question: what becomes of this running pod now?
    pub(super) fn decide(&self, seen: &SeenPod) -> Outcome {
        let Some(p) = self.pods.get(&seen.uid) else {
            return Outcome::Run;
        };
        outcome(&p.script, seen.running_for)
    }

    pub(super) fn deleted_by_scenario(&mut self, uid: &str) {
        self.deleted_by_scenario.insert(uid.to_owned());
    }

    /// The next second, after `now`, at which a running pod's scripted end comes.
    pub(super) fn next_end(&self, now: u64) -> Option<u64> {
        self.pods
            .values()
            .filter(|p| {
                p.ended_at.is_none() && !p.deleted && !p.gone && p.script.fate != Outcome::Run
            })
            .filter_map(|p| {
                let start = p.started?;
                Some(start.saturating_add(p.script.after.as_secs()).max(now + 1))
            })
            .min()
    }

    /// Pods that never start and are still there.
    pub(super) fn never_starting(&self) -> usize {
        self.pods
            .values()
            .filter(|p| p.ended_at.is_none() && !p.deleted && !p.gone && p.waiting_since.is_some())
            .count()
    }

    /// Whether a pod held pending since `since` runs out of `timeout` at `until`.
    pub(super) fn start_deadline_at(&self, timeout: Option<u64>, until: u64) -> bool {
        timeout.is_some_and(|t| {
            self.pods.values().any(|p| {
                p.ended_at.is_none()
                    && p.waiting_since
                        .is_some_and(|s| s.saturating_add(t) == until)
            })
        })
    }

    /// Pods still running that the scenario lets run for ever.
    pub(super) fn running_for_ever(&self) -> usize {
        self.pods
            .values()
            .filter(|p| {
                p.ended_at.is_none() && !p.deleted && !p.gone && p.script.fate == Outcome::Run
            })
            .count()
    }

    pub(super) fn unused_entries(&self) -> Vec<String> {
        self.scenario
            .entries
            .iter()
            .zip(&self.used)
            .filter(|(_, used)| !**used)
            .map(|(e, _)| e.text.clone())
            .collect()
    }

    /// The failed pods no pod has replaced yet, in creation order: for an Indexed Job the
    /// latest pod of each index still to run (`done` says which are completed or failed), when
    /// it failed; for a NonIndexed Job, whose pods replace no one in particular, the failed
    /// pods that ended after the last pod was created. Returns their uids and labels.
    pub(super) fn awaiting_replacement(
        &self,
        done: impl Fn(i32) -> bool,
    ) -> Vec<(&str, &PodLabel)> {
        let mut latest: BTreeMap<i32, (&str, &BookedPod)> = BTreeMap::new();
        let last_created = self.pods.values().map(|p| p.created_at).max().unwrap_or(0);
        let mut out: Vec<(&str, &BookedPod)> = Vec::new();
        for (uid, p) in &self.pods {
            match p.label.index {
                Some(i) => {
                    let newer = latest
                        .get(&i)
                        .is_none_or(|(_, l)| l.label.number < p.label.number);
                    if newer {
                        latest.insert(i, (uid, p));
                    }
                }
                None if p.failed && p.ended_at.is_some_and(|e| e >= last_created) => {
                    out.push((uid, p));
                }
                None => {}
            }
        }
        out.extend(
            latest
                .into_iter()
                .filter(|(i, (_, p))| p.failed && !done(*i))
                .map(|(_, held)| held),
        );
        out.sort_by_key(|(_, p)| p.label.number);
        out.into_iter().map(|(uid, p)| (uid, &p.label)).collect()
    }
}
