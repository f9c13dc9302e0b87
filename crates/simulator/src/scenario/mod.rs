//! What a scenario says becomes of each pod. Entries read `PODS[@ATTEMPTS]=OUTCOME` and are
//! tried in order, the first that names a pod deciding (as pod failure policy rules are); a
//! pod no entry names gets the default. Pure parsing and matching: no clock, no cluster, and
//! no input, however hostile, panics or grows without bound.

use std::fmt;
use std::time::Duration;

use jobwarden_rules::indexes::IndexSet;
use serde_json::Value;

use jobwarden_fake_cluster::Outcome;
use jobwarden_rules::seconds;

mod entry;
pub use entry::{parse_entry, parse_outcome};

/// When a pod ends if its outcome says no `after:`: ten seconds after it starts.
pub const DEFAULT_AFTER: Duration = Duration::from_secs(10);
/// At most this many entries in a scenario (files and `--pod` flags together).
pub const MAX_ENTRIES: usize = 10_000;
/// The longest entry, or default, accepted: an index list as long as a `succeededIndexes`.
pub const MAX_ENTRY_LEN: usize = 64 * 1024;
/// Container exit codes of a pod the kubelet kills (SIGTERM): what a deleted or disrupted
/// pod's containers report unless the scenario says otherwise.
pub const KILLED_EXIT_CODE: i32 = 143;
/// The pod condition a disruption (eviction, preemption, node pressure) adds.
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";

/// Why a scenario (or one entry of it) cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError(pub String);

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScenarioError {}

fn err<T>(message: impl Into<String>) -> Result<T, ScenarioError> {
    Err(ScenarioError(message.into()))
}

/// The waiting reason `pull-error` stands for.
pub const PULL_ERROR_REASON: &str = "ImagePullBackOff";

/// What becomes of one pod, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodScript {
    /// What the kubelet does once `after` has passed: `Run` for a pod that never ends on its
    /// own (only a deletion, the controller's, stops it); `Delete` kills it with exit code 143;
    /// `NeverStart` holds it pending from the start, its container waiting.
    pub fate: Outcome,
    /// How long after the pod starts running its fate comes (ignored for `Run`).
    pub after: Duration,
}

impl PodScript {
    /// The default default: every container exits 0, ten seconds after the pod starts.
    pub fn succeeds() -> PodScript {
        PodScript {
            fate: Outcome::End {
                default: 0,
                codes: Vec::new(),
                conditions: Vec::new(),
            },
            after: DEFAULT_AFTER,
        }
    }
}

/// The canonical spelling, which parses back to the same script.
impl fmt::Display for PodScript {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let after = seconds::format(self.after.as_secs());
        match &self.fate {
            Outcome::Run => f.write_str("running"),
            Outcome::NeverStart { reason } if reason == PULL_ERROR_REASON => {
                f.write_str("pull-error")
            }
            Outcome::NeverStart { reason } => write!(f, "waiting:{reason}"),
            Outcome::Delete => write!(f, "deleted,after:{after}"),
            Outcome::End {
                default: default_exit,
                codes: exit_codes,
                conditions,
            } => {
                if *default_exit == 0 && exit_codes.is_empty() && conditions.is_empty() {
                    return write!(f, "succeeded,after:{after}");
                }
                write!(f, "exit:{default_exit}")?;
                for (name, code) in exit_codes {
                    write!(f, ",exit:{name}={code}")?;
                }
                for (type_, status) in conditions {
                    write!(f, ",condition:{type_}={status}")?;
                }
                write!(f, ",after:{after}")
            }
        }
    }
}

/// One `PODS[@ATTEMPTS]=OUTCOME` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// As written, for messages.
    pub text: String,
    /// Completion indexes (Indexed Jobs) or positions in creation order from 0 (NonIndexed).
    pub pods: IndexSet,
    /// Which attempts of an index, from 1; `None` names them all.
    pub attempts: Option<IndexSet>,
    pub script: PodScript,
}

/// A whole scenario: entries in order, then the default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    /// What the scenario is about, from its file; shown at the head of the story.
    pub description: Option<String>,
    pub entries: Vec<Entry>,
    pub default: PodScript,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            description: None,
            entries: Vec::new(),
            default: PodScript::succeeds(),
        }
    }
}

/// The shape of the Job a scenario is played against: what its entries may name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobShape {
    /// `Some(completions)` for an Indexed Job.
    pub indexed: Option<i32>,
    pub containers: Vec<String>,
    pub init_containers: Vec<String>,
    /// `restartPolicy: OnFailure`: the kubelet restarts a failed container in place, so a pod
    /// never fails by its exit code alone.
    pub restarts_on_failure: bool,
}

/// A pod as the scenario names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodKey {
    /// The completion index (Indexed) or the position in creation order from 0 (NonIndexed).
    pub number: i64,
    /// 1 for the first pod of an index, 2 for its replacement, and so on (1 for NonIndexed).
    pub attempt: u32,
}

impl Scenario {
    /// Reads a scenario document (a YAML or JSON file, already decoded):
    ///
    /// ```yaml
    /// description: the leader fails once, then everything succeeds
    /// default: succeeded,after:20s
    /// pods:
    /// - 0@1=exit:1,after:5s
    /// - 3=running
    /// ```
    ///
    /// Every field is optional; any other field is refused, as kubectl's strict decoding does.
    pub fn from_document(doc: &Value) -> Result<Scenario, ScenarioError> {
        let Some(fields) = doc.as_object() else {
            return err(
                "a scenario is a mapping with the fields description, default and pods".to_owned(),
            );
        };
        let mut scenario = Scenario::default();
        for (key, value) in fields {
            match key.as_str() {
                "description" => match value {
                    Value::String(s) if s.len() <= MAX_ENTRY_LEN => {
                        scenario.description = Some(s.clone());
                    }
                    Value::String(_) => return err("description: too long"),
                    Value::Null => {}
                    _ => return err("description: must be a string"),
                },
                "default" => match value {
                    Value::String(s) => {
                        scenario.default =
                            parse_outcome(s).map_err(|e| ScenarioError(format!("default: {e}")))?;
                    }
                    Value::Null => {}
                    _ => {
                        return err("default: must be an outcome such as \"succeeded,after:10s\"");
                    }
                },
                "pods" => {
                    let items = match value {
                        Value::Array(items) => items.as_slice(),
                        Value::Null => &[],
                        _ => {
                            return err("pods: must be a list of entries such as \"3=exit:42\"");
                        }
                    };
                    if items.len() > MAX_ENTRIES {
                        return err(format!("pods: more than {MAX_ENTRIES} entries"));
                    }
                    for (i, item) in items.iter().enumerate() {
                        let Value::String(text) = item else {
                            return err(format!(
                                "pods[{i}]: must be a string such as \"3=exit:42\""
                            ));
                        };
                        let entry = parse_entry(text)
                            .map_err(|e| ScenarioError(format!("pods[{i}]: {e}")))?;
                        scenario.entries.push(entry);
                    }
                }
                other => {
                    return err(format!(
                        "unknown field {other:?} (a scenario has description, default and pods)"
                    ));
                }
            }
        }
        Ok(scenario)
    }

    /// Puts `entries` (the `--pod` flags) before the file's, so they are tried first.
    pub fn with_entries_first(mut self, entries: Vec<Entry>) -> Result<Scenario, ScenarioError> {
        if entries.len() + self.entries.len() > MAX_ENTRIES {
            return err(format!("more than {MAX_ENTRIES} entries"));
        }
        let mut all = entries;
        all.append(&mut self.entries);
        self.entries = all;
        Ok(self)
    }

    /// Refuses what cannot apply to this Job: indexes beyond `completions`, attempts of a
    /// NonIndexed Job, containers the template does not have.
    pub fn check_against(&self, job: &JobShape) -> Result<(), ScenarioError> {
        let scripts = self
            .entries
            .iter()
            .map(|e| (format!("{:?}", e.text), &e.script))
            .chain(std::iter::once(("default".to_owned(), &self.default)));
        for (label, script) in scripts {
            if let Outcome::End {
                default: default_exit,
                codes: exit_codes,
                conditions,
            } = &script.fate
            {
                let fails = *default_exit != 0 || exit_codes.iter().any(|(_, c)| *c != 0);
                let disrupted = conditions.iter().any(|(t, _)| t == DISRUPTION_TARGET);
                if job.restarts_on_failure && fails && !disrupted {
                    return err(format!(
                        "{label}: the Job's pods have restartPolicy: OnFailure, so the kubelet restarts a failed container in place and the pod does not fail; the simulation does not model restarts: say succeeded, running, deleted or disrupted"
                    ));
                }
                for (name, _) in exit_codes {
                    if !job.containers.contains(name) && !job.init_containers.contains(name) {
                        return err(format!(
                            "{label}: the Job's pod template has no container {name:?} ({})",
                            describe_containers(job)
                        ));
                    }
                }
            }
        }
        for e in &self.entries {
            match job.indexed {
                Some(completions) => {
                    if let Some(last) = e.pods.intervals().last().map(|i| i.last)
                        && last >= completions
                    {
                        return err(format!(
                            "{:?}: index {last} is not below the Job's completions ({completions})",
                            e.text
                        ));
                    }
                }
                None => {
                    if e.attempts.is_some() {
                        return err(format!(
                            "{:?}: attempts are counted per completion index, and this Job is NonIndexed: name its pods by their order of creation instead (0 is the first pod, 1 the next, …)",
                            e.text
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// The entry (by position) that decides this pod's fate, if any, and the script.
    pub fn script_for(&self, pod: PodKey) -> (Option<usize>, &PodScript) {
        let number = i32::try_from(pod.number).ok();
        let attempt = i32::try_from(pod.attempt).ok();
        for (i, e) in self.entries.iter().enumerate() {
            let pod_named = number.is_some_and(|n| e.pods.contains(n));
            let attempt_named = match &e.attempts {
                None => true,
                Some(a) => attempt.is_some_and(|n| a.contains(n)),
            };
            if pod_named && attempt_named {
                return (Some(i), &e.script);
            }
        }
        (None, &self.default)
    }
}

fn describe_containers(job: &JobShape) -> String {
    let list = |names: &[String]| {
        names
            .iter()
            .map(|n| format!("{n:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if job.init_containers.is_empty() {
        format!("containers: {}", list(&job.containers))
    } else {
        format!(
            "containers: {}; init containers: {}",
            list(&job.containers),
            list(&job.init_containers)
        )
    }
}
