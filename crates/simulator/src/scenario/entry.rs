//! One entry's grammar: `PODS[@ATTEMPTS]=OUTCOME`, and an outcome's `exit:N,after:5s,...`.

use super::*;
use jobwarden_rules::pod_timing::NOT_STARTED_REASONS;

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
    /// `pull-error` or `waiting:REASON`: it never starts.
    NeverStarts,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Succeeded => "succeeded",
            Kind::Failed => "failed",
            Kind::Running => "running",
            Kind::Deleted => "deleted",
            Kind::Disrupted => "disrupted",
            Kind::NeverStarts => "pull-error",
        }
    }
}

/// An outcome: comma-separated items, one kind (`succeeded`, `failed`, `running`, `deleted`,
/// `disrupted`, `pull-error`, `waiting:REASON`) and any of `exit:CODE`, `exit:CONTAINER=CODE`,
/// `condition:TYPE[=STATUS]`, `after:DURATION`.
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
    let mut items = Items::default();
    for item in text.split(',').map(str::trim) {
        items.read(text, item)?;
    }
    items.script()
}

/// An outcome's items as read so far.
#[derive(Default)]
struct Items {
    kind: Option<Kind>,
    default_exit: Option<i32>,
    exit_codes: Vec<(String, i32)>,
    conditions: Vec<(String, String)>,
    after: Option<Duration>,
    waiting: Option<String>,
}

impl Items {
    /// One comma-separated `item` of the outcome `text`: its kind word, or one of its details.
    fn read(&mut self, text: &str, item: &str) -> Result<(), String> {
        let waiting_reason = self.waiting_reason(item)?;
        let this = match item {
            _ if waiting_reason => Some(Kind::NeverStarts),
            "succeeded" => Some(Kind::Succeeded),
            "failed" => Some(Kind::Failed),
            "running" => Some(Kind::Running),
            "deleted" => Some(Kind::Deleted),
            "disrupted" => Some(Kind::Disrupted),
            _ => None,
        };
        if let Some(this) = this {
            if let Some(before) = self.kind {
                return Err(format!(
                    "says both {} and {}: an outcome has one of succeeded, failed, running, deleted, disrupted, pull-error, waiting:REASON",
                    before.word(),
                    this.word()
                ));
            }
            self.kind = Some(this);
            return Ok(());
        }
        match item.split_once(':') {
            Some(("exit", spec)) => self.exit(item, spec),
            Some(("condition", spec)) => self.condition(item, spec),
            Some(("after", spec)) => {
                if self.after.is_some() {
                    return Err(format!("{item:?}: a second after:"));
                }
                self.after = Some(seconds::parse(spec).map_err(|e| format!("after: {e}"))?);
                Ok(())
            }
            _ if item.is_empty() => Err(format!("{text:?}: an empty item between commas")),
            _ => Err(format!(
                "{item:?} is not an outcome item (succeeded, failed, running, deleted, disrupted, pull-error, waiting:REASON, exit:CODE, exit:CONTAINER=CODE, condition:TYPE[=STATUS], after:DURATION)"
            )),
        }
    }

    /// `pull-error` or `waiting:REASON`, kept; whether `item` is one.
    fn waiting_reason(&mut self, item: &str) -> Result<bool, String> {
        let reason = match item.split_once(':') {
            Some(("waiting", reason)) => reason.trim(),
            _ if item == "pull-error" => PULL_ERROR_REASON,
            _ => return Ok(false),
        };
        if !NOT_STARTED_REASONS.contains(&reason) {
            return Err(format!(
                "{item:?}: a pod that never starts waits with one of {}",
                NOT_STARTED_REASONS.join(", ")
            ));
        }
        self.waiting = Some(reason.to_owned());
        Ok(true)
    }

    /// `exit:CODE` or `exit:CONTAINER=CODE`.
    fn exit(&mut self, item: &str, spec: &str) -> Result<(), String> {
        match spec.split_once('=') {
            None => {
                if self.default_exit.is_some() {
                    return Err(format!("{item:?}: a second exit code for every container"));
                }
                self.default_exit = Some(exit_code(spec)?);
            }
            Some((name, code)) => {
                let name = container_name(name)?;
                if self.exit_codes.iter().any(|(n, _)| *n == name) {
                    return Err(format!(
                        "{item:?}: container {name:?} is given two exit codes"
                    ));
                }
                self.exit_codes.push((name, exit_code(code)?));
            }
        }
        Ok(())
    }

    /// `condition:TYPE[=STATUS]`.
    fn condition(&mut self, item: &str, spec: &str) -> Result<(), String> {
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
        if self.conditions.iter().any(|(t, _)| *t == type_) {
            return Err(format!("{item:?}: condition {type_} is given twice"));
        }
        self.conditions.push((type_, status.to_owned()));
        Ok(())
    }

    fn has_codes(&self) -> bool {
        self.default_exit.is_some() || !self.exit_codes.is_empty()
    }

    /// The pod's script, once every item is read: the kind word and the details it takes.
    fn script(self) -> Result<PodScript, String> {
        let has_codes = self.has_codes();
        match self.kind {
            Some(Kind::Running) => {
                if has_codes || !self.conditions.is_empty() || self.after.is_some() {
                    return Err(
                        "running never ends on its own: it takes no exit:, condition: or after:"
                            .to_owned(),
                    );
                }
                Ok(PodScript {
                    fate: Outcome::Run,
                    after: Duration::ZERO,
                })
            }
            Some(Kind::NeverStarts) => {
                if has_codes || !self.conditions.is_empty() || self.after.is_some() {
                    return Err(
                        "a pod that never starts never ends on its own: pull-error and waiting: take no exit:, condition: or after:"
                            .to_owned(),
                    );
                }
                Ok(PodScript {
                    fate: Outcome::NeverStart {
                        reason: self.waiting.unwrap_or_else(|| PULL_ERROR_REASON.to_owned()),
                    },
                    after: Duration::ZERO,
                })
            }
            Some(Kind::Deleted) => {
                if has_codes || !self.conditions.is_empty() {
                    return Err(
                        "deleted pods are killed by the kubelet (exit code 143): deleted takes only after:"
                            .to_owned(),
                    );
                }
                Ok(PodScript {
                    fate: Outcome::Delete,
                    after: self.after.unwrap_or(DEFAULT_AFTER),
                })
            }
            kind => self.ends(kind),
        }
    }

    /// The script of a pod that ends with exit codes: succeeded, failed, disrupted, or exit
    /// codes alone.
    fn ends(mut self, kind: Option<Kind>) -> Result<PodScript, String> {
        let default = match kind {
            Some(Kind::Succeeded) => {
                if self.has_codes() {
                    return Err(
                        "succeeded means every container exits 0: drop the exit: items, or say failed"
                            .to_owned(),
                    );
                }
                0
            }
            Some(Kind::Failed) => {
                let default = self.default_exit.unwrap_or(1);
                if default == 0 && self.exit_codes.iter().all(|(_, c)| *c == 0) {
                    return Err("failed, yet every container exits 0".to_owned());
                }
                default
            }
            Some(Kind::Disrupted) => {
                if !self.conditions.iter().any(|(t, _)| t == DISRUPTION_TARGET) {
                    self.conditions
                        .push((DISRUPTION_TARGET.to_owned(), "True".to_owned()));
                }
                self.default_exit.unwrap_or(KILLED_EXIT_CODE)
            }
            None if self.has_codes() => self.default_exit.unwrap_or(0),
            _ => {
                return Err(
                    "say how the pod ends: succeeded, failed, exit:CODE, disrupted, deleted or running"
                        .to_owned(),
                );
            }
        };
        self.conditions.sort();
        Ok(PodScript {
            fate: Outcome::End {
                default,
                codes: self.exit_codes,
                conditions: self.conditions,
            },
            after: self.after.unwrap_or(DEFAULT_AFTER),
        })
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
