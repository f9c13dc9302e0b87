//! The pure audit of one stored Job: every violation jobwarden's rules would deny today, in the
//! rules' own words. Pure: no I/O, no clock, no async; it never writes a rule of its own, only
//! decides which of the rules' verdicts apply to an object that is already stored.
//!
//! What "would deny today" means for a stored Job, and why:
//!
//! * **spec** and **rule_names**: the validating webhook's verdict on an update that leaves the
//!   Job as it is (`validate_update(job, job)`). That is upstream's own notion of a stored object
//!   that no longer passes: it re-validates the whole Job on every update, with the ratcheting
//!   upstream applies to stored Jobs (the `batch.kubernetes.io/` template labels are required
//!   only if the stored Job already has them), so a Job created before those labels existed is
//!   not reported; create-only checks never fire. The immutability checks compare the Job with
//!   itself and stay silent.
//! * **policy**: the policy file's refusals that concern a stored Job. `allowedManagedBy` is
//!   checked by the webhook on create only because `spec.managedBy` is immutable; a stored Job
//!   outside the allow-list was created before the webhook or before the policy, and would be
//!   refused if created today. The resume policy judges a transition, not a state, and
//!   `suspendOnCreate`/`delegate` are mutations, not refusals: none of them can be audited.
//! * **status**: two kinds.
//!   1. Upstream's status checks that v1.36 applies to *every* `jobs/status` write, whatever it
//!      changes (negative counters, malformed `uncountedTerminatedPods`, `SuccessCriteriaMet`
//!      beside `Failed` or `FailureTarget`, `Complete` without `SuccessCriteriaMet` on a Job with
//!      a success policy): found by validating a status update that changes nothing. Such a Job
//!      is stuck, since its controller can no longer write its status at all.
//!   2. States no Job controller of any version writes, which prove that something bypassed the
//!      contract (a status written while `validate-status` failed open, a hand edit, an external
//!      controller before the webhook): `Complete` and `Failed` both true, and a Job suspended
//!      after it finished (KEP-2232, jobwarden's rule; upstream lacks it).
//!
//!   The other status checks are deliberately left out. Upstream ratchets them (a stored status
//!   that breaks them still accepts unrelated updates) because older apiservers and controllers
//!   wrote such statuses in the normal course of things: every Job that completed before the
//!   controller added `SuccessCriteriaMet` (or failed before it added `FailureTarget`) lacks
//!   them, `completedIndexes` goes out of range when an elastic Indexed Job scales down, and so
//!   on (`tests/conformance/cases/117`–`144` hold such Jobs, all accepted by a v1.36 apiserver).
//!   Reporting them would flag every old Job of an upgraded cluster. `Complete` beside
//!   `FailureTarget` stays out for the same reason: controllers before v1.31 could race into it.

use std::fmt;

use jobwarden_admission::Policy;
use jobwarden_admission::wire::UserInfo;
use jobwarden_rules::condition::SUSPENDED;
use jobwarden_rules::{
    DecodeError, FieldError, JobObject, job_update, rule_names, status_transitions,
};
use k8s_openapi::api::batch::v1::JobStatus;
use serde::Serialize;
use serde_json::Value;

/// Which family of rules a violation breaks: a small fixed set, safe as a metric label and an
/// Event reason (never user text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The Job API contract for the spec and metadata, as kube-apiserver validates it.
    Spec,
    /// KEP-4443's pod failure policy rule names (`jobwarden.io/pod-failure-policy-rule-names`).
    RuleNames,
    /// The policy file (`allowedManagedBy`).
    Policy,
    /// The status, and a finished Job that was suspended.
    Status,
    /// A Job delegated to a controller that shows no sign of running it (`stuck`): not a rule
    /// a write breaks, but a stored Job the audit reports all the same.
    StuckDelegation,
}

impl Rule {
    pub const ALL: [Rule; 5] = [
        Rule::Spec,
        Rule::RuleNames,
        Rule::Policy,
        Rule::Status,
        Rule::StuckDelegation,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Spec => "spec",
            Rule::RuleNames => "rule_names",
            Rule::Policy => "policy",
            Rule::Status => "status",
            Rule::StuckDelegation => "stuck_delegation",
        }
    }

    /// The family of a spec or update error from the rules: the rule-name paths belong to
    /// KEP-4443, everything else to the spec.
    pub fn of_spec_error(error: &FieldError) -> Rule {
        let annotation = format!("metadata.annotations[{}]", rule_names::ANNOTATION);
        let is_rule_name = error.path == annotation
            || error
                .path
                .strip_prefix("spec.podFailurePolicy.rules[")
                .and_then(|rest| rest.split_once(']'))
                .is_some_and(|(index, tail)| {
                    tail == ".name"
                        && !index.is_empty()
                        && index.bytes().all(|b| b.is_ascii_digit())
                });
        if is_rule_name {
            Rule::RuleNames
        } else {
            Rule::Spec
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing the rules would deny, worded as the denial words it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Violation {
    pub rule: Rule,
    /// The field path, as kube-apiserver names it (`spec.podFailurePolicy.rules[1].name`).
    pub field: String,
    /// For a 422 (spec, rule names, status): the error after its path, as in a denial's
    /// `details.causes[].message` (`Invalid value: -1: must be greater than or equal to 0`).
    /// For a 403 (policy): the refusal as the denial gives it after `is forbidden: `.
    pub message: String,
}

impl Violation {
    pub fn from_field_error(rule: Rule, error: &FieldError) -> Self {
        Violation {
            rule,
            field: error.path.clone(),
            message: error.body(),
        }
    }

    /// A spec or update error from the rules, with its family.
    pub fn of_spec_error(error: &FieldError) -> Self {
        Self::from_field_error(Rule::of_spec_error(error), error)
    }
}

impl fmt::Display for Violation {
    /// Exactly what a denial prints for it: `spec.parallelism: Invalid value: -1: …` for a 422
    /// error, the refusal itself (which names its field) for a policy's 403.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rule {
            Rule::Policy => f.write_str(&self.message),
            _ => write!(f, "{}: {}", self.field, self.message),
        }
    }
}

/// The policy's one refusal that concerns a stored Job.
const MANAGED_BY_FIELD: &str = "spec.managedBy";

/// The one status check upstream ratchets that the audit still applies (see the module docs).
const COMPLETE_AND_FAILED: &str = "cannot set Complete=True and Failed=true conditions";

/// Every violation of one stored Job (its JSON as the API returns it), spec first, then rule
/// names in the webhook's order, then policy, then status. Identical errors are reported once,
/// as kube-apiserver's message does. `Err` when the object cannot be read as a Job at all.
pub fn audit_job(raw: &Value, policy: &Policy) -> Result<Vec<Violation>, DecodeError> {
    let job = JobObject::parse(raw)?;
    let mut out: Vec<Violation> = Vec::new();
    let mut push = |v: Violation| {
        if !out.contains(&v) {
            out.push(v);
        }
    };
    for error in jobwarden_rules::validate_update(&job, &job) {
        push(Violation::of_spec_error(&error));
    }
    if let Some(refusal) = policy.check(&UserInfo::default(), &job, None) {
        push(Violation {
            rule: Rule::Policy,
            field: MANAGED_BY_FIELD.to_owned(),
            message: refusal.0,
        });
    }
    for error in status_transitions::validate(&job, &job) {
        push(Violation::from_field_error(Rule::Status, &error));
    }
    for error in contract_breaches(&job) {
        push(Violation::from_field_error(Rule::Status, &error));
    }
    Ok(out)
}

/// States that no Job controller writes (module docs, status 2), in the rules' words.
fn contract_breaches(job: &JobObject<'_>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if job.is_finished() {
        // The status as it would have been written in one step onto the empty status every Job
        // starts with: the write that made it `Complete` or `Failed` is the one judged.
        let unwritten = JobObject {
            status: JobStatus::default(),
            ..job.clone()
        };
        errors.extend(
            status_transitions::validate(job, &unwritten)
                .into_iter()
                .filter(|e| e.path == "status.conditions" && e.detail == COMPLETE_AND_FAILED),
        );
    }
    if job.is_finished() && job.is_suspended() && suspended_after_finishing(job) {
        let running = JobObject {
            spec: k8s_openapi::api::batch::v1::JobSpec {
                suspend: Some(false),
                ..job.spec.clone()
            },
            ..job.clone()
        };
        errors.extend(
            job_update::validate_jobwarden_update(job, &running)
                .into_iter()
                .filter(|e| e.path == "spec.suspend"),
        );
    }
    errors
}

/// Whether a finished, suspended Job was suspended only after it finished, which jobwarden's
/// webhook refuses. A Job suspended while it ran finishes suspended legitimately (its last pods
/// can succeed while they are being deleted): the controller has then recorded
/// `Suspended=True`, and never touches the conditions of a finished Job again. A Job created
/// suspended with `completions: 0` finishes without ever starting (upstream PR #132614): no
/// `Suspended` condition, but no `startTime` either. Any other finished Job with
/// `spec.suspend: true` had it set after the fact. One window is left: jobwarden's own
/// controller records `Suspended=True` only once no pod is active, so a Job whose last pod
/// succeeded while it was being deleted for the suspension, before that write, is reported.
fn suspended_after_finishing(job: &JobObject<'_>) -> bool {
    !job.has_condition(SUSPENDED) && job.status.start_time.is_some()
}
