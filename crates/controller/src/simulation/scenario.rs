//! What a scenario says becomes of each pod. Entries read `PODS[@ATTEMPTS]=OUTCOME` and are
//! tried in order, the first that names a pod deciding (as pod failure policy rules are); a
//! pod no entry names gets the default. Pure parsing and matching: no clock, no cluster, and
//! no input, however hostile, panics or grows without bound.

use std::fmt;
use std::time::Duration;

use jobwarden_rules::indexes::IndexSet;
use serde_json::Value;

use super::seconds;

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

/// How a pod ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// It never ends on its own; only a deletion (the controller's) stops it.
    Runs,
    /// It ends: each container exits with its code in `exit_codes` (by name, init containers
    /// included), the others with `default_exit`; the pod gets `conditions` (type, status).
    Ends {
        default_exit: i32,
        exit_codes: Vec<(String, i32)>,
        conditions: Vec<(String, String)>,
    },
    /// Someone deletes it (`kubectl delete pod`); the kubelet then kills it (exit code 143).
    Deleted,
}

/// What becomes of one pod, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodScript {
    pub fate: Fate,
    /// How long after the pod starts running its fate comes (ignored for `Runs`).
    pub after: Duration,
}

impl PodScript {
    /// The default default: every container exits 0, ten seconds after the pod starts.
    pub fn succeeds() -> PodScript {
        PodScript {
            fate: Fate::Ends {
                default_exit: 0,
                exit_codes: Vec::new(),
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
            Fate::Runs => f.write_str("running"),
            Fate::Deleted => write!(f, "deleted,after:{after}"),
            Fate::Ends {
                default_exit,
                exit_codes,
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
            if let Fate::Ends {
                default_exit,
                exit_codes,
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

/// One `--pod` value or scenario entry: `PODS[@ATTEMPTS]=OUTCOME`, e.g. `3=exit:42`,
/// `1-5=succeeded,after:30s`, `0@1=disrupted`.
pub fn parse_entry(text: &str) -> Result<Entry, ScenarioError> {
    if text.len() > MAX_ENTRY_LEN {
        return err(format!("an entry longer than {MAX_ENTRY_LEN} bytes"));
    }
    let Some((key, outcome)) = text.split_once('=') else {
        return err(format!(
            "{text:?}: expected PODS=OUTCOME, for example 3=exit:42 or 0-4=succeeded"
        ));
    };
    let (pods, attempts) = match key.trim().split_once('@') {
        Some((pods, attempts)) => (pods, Some(attempts)),
        None => (key.trim(), None),
    };
    let pods = index_set(pods, "pods").map_err(|e| ScenarioError(format!("{text:?}: {e}")))?;
    let attempts = match attempts {
        None => None,
        Some(a) => {
            let set =
                index_set(a, "attempts").map_err(|e| ScenarioError(format!("{text:?}: {e}")))?;
            if set.contains(0) {
                return err(format!(
                    "{text:?}: attempts count from 1 (the first pod of an index)"
                ));
            }
            Some(set)
        }
    };
    let script = parse_outcome(outcome).map_err(|e| ScenarioError(format!("{text:?}: {e}")))?;
    Ok(Entry {
        text: text.trim().to_owned(),
        pods,
        attempts,
        script,
    })
}

/// Indexes in the syntax of `succeededIndexes`: `3`, `1-5`, `0,2,4-6`, ascending.
fn index_set(text: &str, what: &str) -> Result<IndexSet, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(format!(
            "no {what} named (write them like succeededIndexes: 3, 1-5 or 0,2,4-6)"
        ));
    }
    IndexSet::parse(text, i32::MAX).map_err(|e| format!("{what} {text:?}: {e}"))
}

/// The kind word of an outcome: at most one per outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Succeeded,
    Failed,
    Running,
    Deleted,
    Disrupted,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Succeeded => "succeeded",
            Kind::Failed => "failed",
            Kind::Running => "running",
            Kind::Deleted => "deleted",
            Kind::Disrupted => "disrupted",
        }
    }
}

/// An outcome: comma-separated items, one kind (`succeeded`, `failed`, `running`, `deleted`,
/// `disrupted`) and any of `exit:CODE`, `exit:CONTAINER=CODE`, `condition:TYPE[=STATUS]`,
/// `after:DURATION`.
pub fn parse_outcome(text: &str) -> Result<PodScript, String> {
    if text.len() > MAX_ENTRY_LEN {
        return Err(format!("an outcome longer than {MAX_ENTRY_LEN} bytes"));
    }
    if text.trim().is_empty() {
        return Err(
            "no outcome: say succeeded, failed, exit:CODE, disrupted, deleted or running"
                .to_owned(),
        );
    }
    let mut kind: Option<Kind> = None;
    let mut default_exit: Option<i32> = None;
    let mut exit_codes: Vec<(String, i32)> = Vec::new();
    let mut conditions: Vec<(String, String)> = Vec::new();
    let mut after: Option<Duration> = None;
    for item in text.split(',').map(str::trim) {
        let this = match item {
            "succeeded" => Some(Kind::Succeeded),
            "failed" => Some(Kind::Failed),
            "running" => Some(Kind::Running),
            "deleted" => Some(Kind::Deleted),
            "disrupted" => Some(Kind::Disrupted),
            _ => None,
        };
        if let Some(this) = this {
            if let Some(before) = kind {
                return Err(format!(
                    "says both {} and {}: an outcome has one of succeeded, failed, running, deleted, disrupted",
                    before.word(),
                    this.word()
                ));
            }
            kind = Some(this);
            continue;
        }
        match item.split_once(':') {
            Some(("exit", spec)) => match spec.split_once('=') {
                None => {
                    if default_exit.is_some() {
                        return Err(format!("{item:?}: a second exit code for every container"));
                    }
                    default_exit = Some(exit_code(spec)?);
                }
                Some((name, code)) => {
                    let name = container_name(name)?;
                    if exit_codes.iter().any(|(n, _)| *n == name) {
                        return Err(format!(
                            "{item:?}: container {name:?} is given two exit codes"
                        ));
                    }
                    exit_codes.push((name, exit_code(code)?));
                }
            },
            Some(("condition", spec)) => {
                let (type_, status) = match spec.split_once('=') {
                    Some((t, s)) => (t.trim(), s.trim()),
                    None => (spec.trim(), "True"),
                };
                let type_ = condition_type(type_)?;
                if !matches!(status, "True" | "False" | "Unknown") {
                    return Err(format!(
                        "{item:?}: a condition's status is True, False or Unknown"
                    ));
                }
                if conditions.iter().any(|(t, _)| *t == type_) {
                    return Err(format!("{item:?}: condition {type_} is given twice"));
                }
                conditions.push((type_, status.to_owned()));
            }
            Some(("after", spec)) => {
                if after.is_some() {
                    return Err(format!("{item:?}: a second after:"));
                }
                after = Some(seconds::parse(spec).map_err(|e| format!("after: {e}"))?);
            }
            _ if item.is_empty() => {
                return Err(format!("{text:?}: an empty item between commas"));
            }
            _ => {
                return Err(format!(
                    "{item:?} is not an outcome item (succeeded, failed, running, deleted, disrupted, exit:CODE, exit:CONTAINER=CODE, condition:TYPE[=STATUS], after:DURATION)"
                ));
            }
        }
    }
    let has_codes = default_exit.is_some() || !exit_codes.is_empty();
    let after_or_default = after.unwrap_or(DEFAULT_AFTER);
    let ends = |default_exit: i32, mut conditions: Vec<(String, String)>| {
        conditions.sort();
        PodScript {
            fate: Fate::Ends {
                default_exit,
                exit_codes: exit_codes.clone(),
                conditions,
            },
            after: after_or_default,
        }
    };
    match kind {
        Some(Kind::Running) => {
            if has_codes || !conditions.is_empty() || after.is_some() {
                return Err(
                    "running never ends on its own: it takes no exit:, condition: or after:"
                        .to_owned(),
                );
            }
            Ok(PodScript {
                fate: Fate::Runs,
                after: Duration::ZERO,
            })
        }
        Some(Kind::Deleted) => {
            if has_codes || !conditions.is_empty() {
                return Err(
                    "deleted pods are killed by the kubelet (exit code 143): deleted takes only after:"
                        .to_owned(),
                );
            }
            Ok(PodScript {
                fate: Fate::Deleted,
                after: after_or_default,
            })
        }
        Some(Kind::Succeeded) => {
            if has_codes {
                return Err(
                    "succeeded means every container exits 0: drop the exit: items, or say failed"
                        .to_owned(),
                );
            }
            Ok(ends(0, conditions))
        }
        Some(Kind::Failed) => {
            let default = default_exit.unwrap_or(1);
            if default == 0 && exit_codes.iter().all(|(_, c)| *c == 0) {
                return Err("failed, yet every container exits 0".to_owned());
            }
            Ok(ends(default, conditions))
        }
        Some(Kind::Disrupted) => {
            if !conditions.iter().any(|(t, _)| t == DISRUPTION_TARGET) {
                conditions.push((DISRUPTION_TARGET.to_owned(), "True".to_owned()));
            }
            Ok(ends(default_exit.unwrap_or(KILLED_EXIT_CODE), conditions))
        }
        None if has_codes => Ok(ends(default_exit.unwrap_or(0), conditions)),
        None => Err(
            "say how the pod ends: succeeded, failed, exit:CODE, disrupted, deleted or running"
                .to_owned(),
        ),
    }
}

fn exit_code(text: &str) -> Result<i32, String> {
    let text = text.trim();
    text.parse::<i32>()
        .map_err(|_| format!("exit code {text:?} is not a 32-bit integer"))
}

/// A container name as the API accepts it (a DNS label): anything else cannot be in the Job.
fn container_name(text: &str) -> Result<String, String> {
    let name = text.trim();
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(name.to_owned())
    } else {
        Err(format!("{name:?} is not a container name"))
    }
}

/// A pod condition type: a qualified name (`DisruptionTarget`, `example.com/Preempted`).
/// `Ready` is the kubelet's own and set by it.
fn condition_type(text: &str) -> Result<String, String> {
    let ok = !text.is_empty()
        && text.len() <= 316
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'))
        && text
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric());
    if !ok {
        return Err(format!("{text:?} is not a pod condition type"));
    }
    if text == "Ready" {
        return Err("the kubelet sets Ready itself (False when the pod ends)".to_owned());
    }
    Ok(text.to_owned())
}
