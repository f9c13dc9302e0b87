//! Which Warning Events a pass owes: one per offending Job and rule, not repeated while its
//! violations stay the same, owed again when they change, forgotten once they are fixed or the
//! Job is gone. Pure bookkeeping: it decides what to say, a sink says it.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

use crate::snapshot::JobFindings;
use crate::violations::{Rule, Violation};

/// The Events API's limit on an Event's `note`.
pub const MAX_NOTE_BYTES: usize = 1024;

/// One Warning Event about one Job and one rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditWarning {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub rule: Rule,
    /// CamelCase, fixed per rule.
    pub reason: &'static str,
    /// The violations as a denial prints them, `; `-separated, at most [`MAX_NOTE_BYTES`].
    pub note: String,
    /// Identifies the violations, whole, even when the note had to be shortened.
    fingerprint: u64,
}

/// The Event reason for a rule: `kubectl get events` shows where the warning comes from.
pub fn reason(rule: Rule) -> &'static str {
    match rule {
        Rule::Spec => "AuditInvalidSpec",
        Rule::RuleNames => "AuditInvalidRuleNames",
        Rule::Policy => "AuditPolicyViolation",
        Rule::Status => "AuditInvalidStatus",
        Rule::StuckDelegation => "AuditStuckDelegation",
    }
}

/// The warnings one offending Job gives, one per rule it breaks, in rule order.
pub fn warnings_for(job: &JobFindings) -> Vec<AuditWarning> {
    let mut rules: Vec<Rule> = job.violations.iter().map(|v| v.rule).collect();
    rules.sort();
    rules.dedup();
    rules
        .into_iter()
        .map(|rule| {
            let of_rule: Vec<&Violation> =
                job.violations.iter().filter(|v| v.rule == rule).collect();
            let mut hasher = DefaultHasher::new();
            for v in &of_rule {
                (&v.field, &v.message).hash(&mut hasher);
            }
            AuditWarning {
                namespace: job.namespace.clone(),
                name: job.name.clone(),
                uid: job.uid.clone(),
                rule,
                reason: reason(rule),
                note: note(&of_rule),
                fingerprint: hasher.finish(),
            }
        })
        .collect()
}

/// The violations, `; `-separated, cut after the last whole one that fits with a count of
/// what was left out; a single violation too long on its own is cut at a character boundary.
fn note(violations: &[&Violation]) -> String {
    let lines: Vec<String> = violations.iter().map(ToString::to_string).collect();
    let whole = lines.join("; ");
    if whole.len() <= MAX_NOTE_BYTES {
        return whole;
    }
    for kept in (1..lines.len()).rev() {
        let candidate = format!(
            "{} (and {} more)",
            lines[..kept].join("; "),
            lines.len() - kept
        );
        if candidate.len() <= MAX_NOTE_BYTES {
            return candidate;
        }
    }
    let ellipsis = "…";
    let mut end = MAX_NOTE_BYTES - ellipsis.len();
    while !whole.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{ellipsis}", &whole[..end])
}

/// What has been said, per Job uid and rule.
#[derive(Debug, Default)]
pub struct EventMemory {
    sent: HashMap<(String, Rule), u64>,
}

impl EventMemory {
    /// The warnings owed for this pass's offending Jobs. Everything remembered about a Job and
    /// rule that no longer offends (fixed, or the Job gone) is forgotten first, so a violation
    /// that comes back is reported again.
    pub fn due(&mut self, offending: &[JobFindings]) -> Vec<AuditWarning> {
        let warnings: Vec<AuditWarning> = offending.iter().flat_map(warnings_for).collect();
        let live: HashSet<(&str, Rule)> =
            warnings.iter().map(|w| (w.uid.as_str(), w.rule)).collect();
        self.sent
            .retain(|(uid, rule), _| live.contains(&(uid.as_str(), *rule)));
        warnings
            .into_iter()
            .filter(|w| self.sent.get(&(w.uid.clone(), w.rule)) != Some(&w.fingerprint))
            .collect()
    }

    /// Records that a warning was published; until then it stays owed.
    pub fn sent(&mut self, warning: &AuditWarning) {
        self.sent
            .insert((warning.uid.clone(), warning.rule), warning.fingerprint);
    }

    /// Forgets everything: the next pass owes a warning for every offending Job and rule.
    pub fn clear(&mut self) {
        self.sent.clear();
    }

    /// Job and rule pairs currently remembered.
    pub fn len(&self) -> usize {
        self.sent.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sent.is_empty()
    }
}
