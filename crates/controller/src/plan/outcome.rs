//! Deciding the outcome a Job is heading to, in upstream's order: an outcome already stored
//! (the interim `SuccessCriteriaMet` or `FailureTarget` condition) stands; else every failure
//! policy (a `FailJob` rule, the back-off limit, the active deadline, `maxFailedIndexes`, failed
//! indexes); and only then the success policy (KEP-3998) or the completions reached. So a sync
//! that meets both fails the Job, and a Job that met its success criteria ends `Complete`
//! whatever its lingering pods do.
//!
//! A success rule may let the pods still running carry on (`whenCriterionAchieved`, jobwarden's
//! answer to KEP-3998's open question). The API server refuses `FailureTarget` beside
//! `SuccessCriteriaMet`, so nothing can fail such a Job any more: what would have ended a
//! running Job (its deadline, a suspension, and with `ContinueWithRecreations` the failure
//! policies) ends its lingering pods instead, and the Job completes.

use std::time::Duration;

use jobwarden_rules::condition::{FAILURE_TARGET, SUCCESS_CRITERIA_MET};
use jobwarden_rules::indexes::IndexSet;
use jobwarden_rules::rule_names;
use jobwarden_rules::success_rule_settings::{self, WhenAchieved};
use k8s_openapi::api::batch::v1::JobCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use super::conditions;
use super::facts::JobFacts;
use super::finished_pods::Finished;
use super::success_policy;
use crate::pods::Phase;
use crate::pods::failure_policy::Action;
use jobwarden_rules::well_known::*;

/// The terminal outcome the Job is heading to.
#[derive(Debug, Clone)]
pub(super) struct Finishing {
    pub success: bool,
    pub reason: String,
    pub message: String,
    /// The interim condition (`SuccessCriteriaMet` or `FailureTarget`) is already stored.
    pub interim_stored: bool,
    /// What the pods still running do: always `Terminate` for a failure.
    pub lingering: WhenAchieved,
    /// Why the pods a success rule let run on are deleted after all: the reason of what would
    /// have ended a running Job (`DeadlineExceeded`, `JobSuspended`, a failure policy's).
    pub lingering_ended: Option<String>,
}

impl Finishing {
    fn new(success: bool, reason: &str, message: &str) -> Finishing {
        Finishing {
            success,
            reason: reason.to_owned(),
            message: message.to_owned(),
            interim_stored: false,
            lingering: WhenAchieved::Terminate,
            lingering_ended: None,
        }
    }

    /// The pods still running are to be deleted.
    pub fn terminates(&self) -> bool {
        self.lingering == WhenAchieved::Terminate || self.lingering_ended.is_some()
    }

    /// The pods still running carry on, in this mode.
    pub fn continues(&self) -> Option<WhenAchieved> {
        (!self.terminates()).then_some(self.lingering)
    }
}

/// The outcome before any pod is touched, and when to look again for a deadline still ahead.
/// A new outcome waits while pod creations or deletions are on their way to the cache
/// (upstream's `satisfiedExpectations`), so that no pod can appear after it.
pub(super) fn decide(
    facts: &JobFacts<'_>,
    finished: &Finished<'_>,
    start_time: Option<&Time>,
    failed_indexes: Option<&IndexSet>,
) -> (Option<Finishing>, Option<Duration>) {
    let (mut outcome, mut deadline) =
        match stored(facts, facts.stored().conditions.as_deref().unwrap_or(&[])) {
            Some(stored) => (Some(stored), None),
            None => {
                let (mut outcome, deadline) = failure(facts, finished, start_time, failed_indexes);
                if outcome.is_none() {
                    outcome = success_policy_met(facts, &finished.succeeded_indexes);
                }
                if !facts.in_flight.pods_settled {
                    outcome = None;
                }
                (outcome, deadline)
            }
        };
    if let Some(f) = outcome.as_mut()
        && f.lingering != WhenAchieved::Terminate
    {
        let (ended, left) = lingering_end(facts, f.lingering, finished, start_time, failed_indexes);
        f.lingering_ended = ended;
        deadline = left;
    }
    (outcome, deadline)
}

/// What ends the pods a success rule let run on: a suspension, `activeDeadlineSeconds` (it
/// bounds the Job's running time whatever the rule says), and with `ContinueWithRecreations`
/// every failure policy, in upstream's order. `None` while they may carry on, with when to
/// look again for the deadline.
fn lingering_end(
    facts: &JobFacts<'_>,
    mode: WhenAchieved,
    finished: &Finished<'_>,
    start_time: Option<&Time>,
    failed_indexes: Option<&IndexSet>,
) -> (Option<String>, Option<Duration>) {
    if facts.suspended {
        return (Some(REASON_JOB_SUSPENDED.to_owned()), None);
    }
    if mode == WhenAchieved::ContinueWithRecreations {
        let (failed, left) = failure(facts, finished, start_time, failed_indexes);
        return (failed.map(|f| f.reason), left);
    }
    match deadline(facts, start_time) {
        Deadline::Passed => (Some(REASON_DEADLINE_EXCEEDED.to_owned()), None),
        Deadline::In(left) => (None, Some(left)),
        Deadline::None => (None, None),
    }
}

/// `Complete`'s criteria without a success policy: enough pods succeeded (for a Job without
/// `completions`, any) and none is left running.
pub(super) fn completions_reached(
    facts: &JobFacts<'_>,
    succeeded: i64,
    active: i32,
) -> Option<Finishing> {
    let reached = match facts.completions {
        None => succeeded > 0,
        Some(c) => succeeded >= i64::from(c),
    };
    (facts.in_flight.pods_settled && reached && active == 0).then(|| {
        Finishing::new(
            true,
            REASON_COMPLETIONS_REACHED,
            MESSAGE_COMPLETIONS_REACHED,
        )
    })
}

/// The outcome decided in an earlier sync, read back from the interim conditions. The success
/// rule that was met is read back from upstream's message, `Matched rules at index <i>`, which
/// is how the controller knows what it said about the lingering pods.
fn stored(facts: &JobFacts<'_>, conds: &[JobCondition]) -> Option<Finishing> {
    let from = |c: &JobCondition, success: bool| Finishing {
        interim_stored: true,
        ..Finishing::new(
            success,
            c.reason.as_deref().unwrap_or_default(),
            c.message.as_deref().unwrap_or_default(),
        )
    };
    if let Some(c) = conditions::find(conds, SUCCESS_CRITERIA_MET).filter(|c| c.status == "True") {
        let mut f = from(c, true);
        if let Some(rule) = c
            .message
            .as_deref()
            .and_then(success_policy::rule_of_message)
            && facts.job.spec.success_policy.is_some()
        {
            f.lingering = when_achieved(facts, rule);
        }
        return Some(f);
    }
    conditions::find(conds, FAILURE_TARGET)
        .filter(|c| c.status == "True")
        .map(|c| from(c, false))
}

/// Rule `rule`'s `whenCriterionAchieved`; upstream's `Terminate` when the controller is
/// upstream's.
fn when_achieved(facts: &JobFacts<'_>, rule: usize) -> WhenAchieved {
    if facts.config.jobwarden_extensions {
        success_rule_settings::when_achieved(facts.job, rule)
    } else {
        WhenAchieved::Terminate
    }
}

/// Every failure policy, in upstream's order: a `FailJob` rule, the back-off limit, the
/// active deadline, then the per-index limits.
fn failure(
    facts: &JobFacts<'_>,
    finished: &Finished<'_>,
    start_time: Option<&Time>,
    failed_indexes: Option<&IndexSet>,
) -> (Option<Finishing>, Option<Duration>) {
    let fail = |reason, message| Some(Finishing::new(false, reason, message));
    if let Some(f) = fail_job_rule(facts) {
        return (Some(f), None);
    }
    if finished.failed > facts.backoff_limit() || past_backoff_limit_on_failure(facts) {
        return (
            fail(
                REASON_BACKOFF_LIMIT_EXCEEDED,
                MESSAGE_BACKOFF_LIMIT_EXCEEDED,
            ),
            None,
        );
    }
    match deadline(facts, start_time) {
        Deadline::Passed => {
            return (
                fail(REASON_DEADLINE_EXCEEDED, MESSAGE_DEADLINE_EXCEEDED),
                None,
            );
        }
        Deadline::In(left) => {
            return (
                per_index_failure(facts, finished, failed_indexes),
                Some(left),
            );
        }
        Deadline::None => {}
    }
    (per_index_failure(facts, finished, failed_indexes), None)
}

/// `maxFailedIndexes` exceeded, or every index ended with at least one failed.
fn per_index_failure(
    facts: &JobFacts<'_>,
    finished: &Finished<'_>,
    failed_indexes: Option<&IndexSet>,
) -> Option<Finishing> {
    let failed_count = failed_indexes?.count();
    if let Some(max) = facts.job.spec.max_failed_indexes
        && failed_count > u64::try_from(max).unwrap_or(0)
    {
        return Some(Finishing::new(
            false,
            REASON_MAX_FAILED_INDEXES_EXCEEDED,
            MESSAGE_MAX_FAILED_INDEXES_EXCEEDED,
        ));
    }
    let completions = u64::try_from(facts.completions.unwrap_or(0)).unwrap_or(0);
    (failed_count > 0 && failed_count + finished.succeeded_indexes.count() >= completions)
        .then(|| Finishing::new(false, REASON_FAILED_INDEXES, MESSAGE_FAILED_INDEXES))
}

/// Upstream's `getFailJobMessage`: the first failed pod a `FailJob` rule matches, with
/// KEP-4443's reason `PodFailurePolicy_{name}` (the rule's index when unnamed) in place of
/// upstream's plain `PodFailurePolicy`.
fn fail_job_rule(facts: &JobFacts<'_>) -> Option<Finishing> {
    let m = facts.pods.iter().find_map(|p| {
        let m = p.policy.as_ref()?;
        (p.is_failed(facts.only_replace_failed) && m.action == Action::FailJob).then_some(m)
    })?;
    let reason = if facts.config.jobwarden_extensions {
        rule_names::failure_reason(&rule_names::effective_names(facts.job), m.rule)
    } else {
        REASON_POD_FAILURE_POLICY.to_owned()
    };
    Some(Finishing::new(false, &reason, &m.message))
}

enum Deadline {
    None,
    Passed,
    In(Duration),
}

/// `activeDeadlineSeconds` against the time since `startTime`; the clock stops while the Job
/// is suspended (resuming resets `startTime`).
fn deadline(facts: &JobFacts<'_>, start_time: Option<&Time>) -> Deadline {
    let (Some(deadline), Some(start)) = (facts.job.spec.active_deadline_seconds, start_time) else {
        return Deadline::None;
    };
    if facts.suspended {
        return Deadline::None;
    }
    let elapsed = facts.now.as_second() - start.0.as_second();
    if elapsed >= deadline {
        return Deadline::Passed;
    }
    Deadline::In(Duration::from_secs(
        u64::try_from(deadline - elapsed).unwrap_or(0),
    ))
}

/// KEP-3998: the first success rule the succeeded indexes satisfy, with its reason and what
/// it does with the pods still running.
fn success_policy_met(facts: &JobFacts<'_>, succeeded_indexes: &IndexSet) -> Option<Finishing> {
    if !facts.indexed {
        return None;
    }
    let policy = facts.job.spec.success_policy.as_ref()?;
    let rule =
        success_policy::matched_rule(policy, facts.completions.unwrap_or(0), succeeded_indexes)?;
    let reason = if facts.config.jobwarden_extensions {
        success_rule_settings::reason(facts.job, rule)
    } else {
        REASON_SUCCESS_POLICY.to_owned()
    };
    Some(Finishing {
        lingering: when_achieved(facts, rule),
        ..Finishing::new(true, &reason, &success_policy::message(rule))
    })
}

/// Upstream's `pastBackoffLimitOnFailure`: with `restartPolicy: OnFailure` failures show up
/// as container restarts of live pods, never as failed pods.
fn past_backoff_limit_on_failure(facts: &JobFacts<'_>) -> bool {
    let policy = facts
        .job
        .raw_template()
        .get("spec")
        .and_then(|s| s.get("restartPolicy"))
        .and_then(Value::as_str);
    if policy != Some("OnFailure") {
        return false;
    }
    let restarts: i64 = facts
        .pods
        .iter()
        .filter(|p| matches!(p.phase, Phase::Running | Phase::Pending))
        .map(|p| p.restarts)
        .sum();
    let limit = facts.backoff_limit();
    if limit == 0 {
        restarts > 0
    } else {
        restarts >= limit
    }
}
