//! Each pod's history as the story tells it: when it was created, which attempt of its index
//! it is, how it ended, the rule its failure matched, and how long the controller held its
//! replacement back; and the Job's conditions with their times. Judged by the controller's own
//! code: the back-off is `backoff`'s record over the failures since the last success (or
//! `per_index`'s under `backoffLimitPerIndex`). Pure.

use std::time::Duration;

use jobwarden_controller::plan::backoff::{self, BackoffRecord, DEFAULT_BACKOFF, MAX_BACKOFF};
use jobwarden_controller::plan::per_index;
use jobwarden_controller::pods::Phase;
use jobwarden_controller::pods::failure_policy::{Action, PolicyMatch};
use jobwarden_controller::pods::view::PodView;
use jobwarden_rules::JobObject;
use jobwarden_rules::well_known::POLICY_FAILED;
use k8s_openapi::api::batch::v1::JobCondition;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::explanation::*;

/// The pods not yet finished, and the finished ones oldest end first. `views` are sorted by
/// index, then creation.
pub(crate) fn pods(
    job: &JobObject<'_>,
    views: &[PodView],
    names: &[Option<String>],
    finished: Option<Timestamp>,
) -> (Vec<ActivePod>, Vec<FinishedPod>) {
    let indexed = job.is_indexed();
    let attempts = attempts(views, indexed);
    let backoffs = backoff_ends(job, views, finished);
    let mut active = Vec::new();
    let mut done = Vec::new();
    for ((p, attempt), backoff_until) in views.iter().zip(attempts).zip(backoffs) {
        let index = p.index.filter(|_| indexed);
        if !p.is_terminal() {
            active.push(ActivePod {
                name: p.name.clone(),
                index,
                attempt,
                created: p.created,
                phase: phase_name(p.phase).to_owned(),
                terminating: p.deleting,
            });
            continue;
        }
        done.push(FinishedPod {
            name: p.name.clone(),
            index,
            attempt,
            created: p.created,
            phase: phase_name(p.phase).to_owned(),
            finished_at: p.finished_at,
            deleted: p.deleting,
            exit_codes: p
                .exited
                .iter()
                .map(|c| ExitCode {
                    container: c.name.to_string(),
                    code: c.exit_code,
                    init: c.init,
                })
                .collect(),
            conditions: p
                .conditions
                .iter()
                .map(|(type_, status)| PodCondition {
                    type_: type_.to_string(),
                    status: status.to_string(),
                })
                .collect(),
            rule: p.policy.as_ref().map(|m| matched_rule(m, names)),
            backoff_until,
        });
    }
    done.sort_by(|a, b| (a.finished_at, &a.name).cmp(&(b.finished_at, &b.name)));
    (active, done)
}

/// Which pod of its index each is, from 1, in creation order among the pods that are left
/// (an Indexed Job's; `None` for a NonIndexed Job's).
fn attempts(views: &[PodView], indexed: bool) -> Vec<Option<u32>> {
    let mut last: Option<(Option<i32>, u32)> = None;
    views
        .iter()
        .map(|p| {
            if !indexed {
                return None;
            }
            let attempt = match last {
                Some((index, n)) if index == p.index => n.saturating_add(1),
                _ => 1,
            };
            last = Some((p.index, attempt));
            Some(attempt)
        })
        .collect()
}

/// For each failed pod whose replacement the controller backs off, when that back-off ends:
/// under `backoffLimitPerIndex` its index's own, from the failure counts the pod carries; else
/// the Job's, over the failures since the last success up to this one, oldest end first, as
/// the controller's record grows. None for a failure after which nothing is replaced (a
/// `FailJob` or `FailIndex` match, an index out of retries, any failure once a `FailJob` match
/// has doomed the Job) and for a back-off the Job's end (`finished`) cut short.
fn backoff_ends(
    job: &JobObject<'_>,
    views: &[PodView],
    finished: Option<Timestamp>,
) -> Vec<Option<Timestamp>> {
    let only_replace_failed = job.spec.pod_replacement_policy.as_deref() == Some(POLICY_FAILED);
    let ends_something = |p: &PodView| {
        p.policy
            .as_ref()
            .is_some_and(|m| matches!(m.action, Action::FailJob | Action::FailIndex))
    };
    let mut out = vec![None; views.len()];
    match job
        .spec
        .backoff_limit_per_index
        .filter(|_| job.is_indexed())
    {
        Some(limit) => {
            for (slot, p) in out.iter_mut().zip(views) {
                if !p.is_failed(only_replace_failed)
                    || ends_something(p)
                    || per_index::is_index_failed(p, only_replace_failed, limit)
                {
                    continue;
                }
                if let Some(at) = p.finished_at {
                    let left = per_index::remaining(Some(p), at, DEFAULT_BACKOFF, MAX_BACKOFF);
                    *slot = Some(add(at, left));
                }
            }
        }
        None => {
            let mut order: Vec<usize> = (0..views.len())
                .filter(|i| views[*i].finished_at.is_some())
                .collect();
            order.sort_by(|a, b| {
                let (a, b) = (&views[*a], &views[*b]);
                (a.finished_at, &a.name).cmp(&(b.finished_at, &b.name))
            });
            let mut record = BackoffRecord::default();
            for i in order {
                let p = &views[i];
                if p.phase == Phase::Succeeded {
                    record = record.updated(&[p], &[]);
                    continue;
                }
                if !p.is_failed(only_replace_failed) {
                    continue;
                }
                record = record.updated(&[], &[p]);
                if let (Some(at), false) = (p.finished_at, ends_something(p)) {
                    let left = backoff::remaining(&record, at, DEFAULT_BACKOFF, MAX_BACKOFF);
                    out[i] = Some(add(at, left));
                }
            }
        }
    }
    // A FailJob match ends the Job: the failures from then on are replaced by nothing.
    let fail_job = views
        .iter()
        .filter(|p| {
            p.policy
                .as_ref()
                .is_some_and(|m| m.action == Action::FailJob)
        })
        .filter_map(|p| p.finished_at)
        .min();
    for (until, p) in out.iter_mut().zip(views) {
        let cut_short = finished.is_some_and(|end| until.is_some_and(|u| u > end))
            || fail_job.is_some_and(|f| p.finished_at.is_some_and(|at| at >= f));
        if cut_short {
            *until = None;
        }
    }
    out
}

/// The Job's conditions, in the order the status lists them.
pub(crate) fn conditions(conditions: &Option<Vec<JobCondition>>) -> Vec<ConditionLine> {
    conditions
        .iter()
        .flatten()
        .map(|c| ConditionLine {
            type_: c.type_.clone(),
            status: c.status.clone(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            at: c.last_transition_time.as_ref().map(|t| t.0),
        })
        .collect()
}

pub(crate) fn matched_rule(m: &PolicyMatch, names: &[Option<String>]) -> MatchedRule {
    MatchedRule {
        index: m.rule,
        name: names.get(m.rule).cloned().flatten(),
        // `Action`'s variants are spelled as the API spells them.
        action: m.action.as_str().to_owned(),
    }
}

fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Pending => "Pending",
        Phase::Running => "Running",
        Phase::Succeeded => "Succeeded",
        Phase::Failed => "Failed",
        Phase::Unknown => "Unknown",
    }
}

pub(crate) fn add(t: Timestamp, d: Duration) -> Timestamp {
    SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX)
}
