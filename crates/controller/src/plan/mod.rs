//! `plan(job, pods, now, config, in_flight) -> Plan`: everything the controller decides for one
//! Job, as a pure function of what its caches hold and what it remembers. [`plan`] reads as
//! upstream's `syncJob`: a list of steps, each a function in the module named for its concern
//! (`finished_pods` counting, `outcome` deciding, `tracking` the finalizers, `manage` the active
//! pods, `suspend`, `finish` the conditions, `status` the write). It never performs I/O, never
//! reads a clock, and plans at most one status write so that each write can be checked against
//! the status-transition rules before it is made.
//!
//! The steps stand on the rules they apply, each in a file of its own that `explain` and
//! `simulate` read too: `backoff` (the delay before a failed pod is replaced), `per_index`
//! (`backoffLimitPerIndex`), `success_policy` (KEP-3998's rules matched) and `conditions`.

pub mod backoff;
pub mod conditions;
mod facts;
mod finish;
mod finished_pods;
mod lingering;
mod manage;
mod outcome;
pub mod per_index;
mod start_timeout;
mod status;
pub mod success_policy;
mod suspend;
mod tracking;
mod types;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jobwarden_rules::JobObject;
use jobwarden_rules::indexes::IndexSet;
use jobwarden_rules::success_rule_settings::WhenAchieved;
use jobwarden_rules::well_known::WORKER_ANNOTATION;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

pub use status::same_status;
pub use types::{
    CreateReason, DeleteReason, Finish, InFlight, LocalDispatch, Plan, PlanConfig, PodCreation,
    PodDeletion, PodRef, PodStartFailure, Skip,
};

use crate::pods::CachedPod;
use crate::pods::view::PodView;
use facts::{JobFacts, count};
use finished_pods::Finished;
use outcome::Finishing;

/// Pods by state, as the status reports them.
struct PodCounts {
    active: i32,
    ready: i32,
    terminating: i32,
}

pub fn plan(
    job: &JobObject<'_>,
    pods: &[Arc<CachedPod>],
    now: Timestamp,
    config: &PlanConfig,
    in_flight: &InFlight,
) -> Plan {
    if !config.runs(
        job.spec.managed_by.as_deref(),
        job.annotation(WORKER_ANNOTATION),
    ) {
        return skip(Skip::ForeignManager(job.spec.managed_by.clone()));
    }
    let views = facts::pod_views(job, pods, in_flight);
    if job.is_finished() {
        return release_pods_of_finished_job(&views);
    }
    let Some(facts) = JobFacts::new(job, &views, now, config, in_flight) else {
        return unknown_completion_mode(job);
    };
    let mut out = Plan::default();
    let mut status = facts.stored().clone();
    let mut conds = status.conditions.clone().unwrap_or_default();

    // What finished since the last write, and the back-off as it stands with it.
    let finished = finished_pods::count(&facts);
    let backoff = finished.backoff(&facts);
    out.backoff = Some(backoff);
    if status.start_time.is_none() && !facts.suspended {
        status.start_time = Some(Time(facts.now));
    }
    let mut failed_indexes = failed_indexes(&facts, &finished);

    // The outcome: one already stored, else the failure policies, else the success policy.
    let (mut finishing, deadline) = outcome::decide(
        &facts,
        &finished,
        status.start_time.as_ref(),
        failed_indexes.as_ref(),
    );
    out.requeue(deadline);
    // The pods a success rule let run on (KEP-3998's `whenCriterionAchieved`).
    let continuing = finishing.as_ref().and_then(Finishing::continues);
    if continuing == Some(WhenAchieved::Continue)
        && let Some(failed) = failed_indexes.as_mut()
    {
        failed.union_with(&lingering::failed_indexes(&facts, &finished));
    }
    // Computed before any pod is created, as upstream: in the sync that creates the
    // replacement the failed pod still waits, and it is counted in the next. With `Continue`
    // nothing is replaced, so nothing waits.
    let awaiting = if continuing == Some(WhenAchieved::Continue) {
        BTreeMap::new()
    } else {
        awaiting_replacement(&facts, &finished, failed_indexes.as_ref())
    };

    // The active pods: all deleted for a finishing Job, left alone while a success rule lets
    // them run on, else managed.
    let active: Vec<&PodView> = views.iter().filter(|p| p.is_active()).collect();
    let mut pods = PodCounts {
        active: count(active.len()),
        ready: count(active.iter().filter(|p| p.ready).count()),
        terminating: count(views.iter().filter(|p| p.is_terminating()).count()),
    };
    // A replacement still to come after its back-off: the Job is not done.
    let mut pods_to_come = false;
    if let Some(f) = finishing.as_ref().filter(|f| f.terminates()) {
        out.delete = manage::delete_active_pods(&facts, &active, f.lingering_ended.is_some());
        if let Some(why) = &f.lingering_ended
            && !out.delete.is_empty()
        {
            out.events.push(lingering::ended_event(why));
        }
        pods.terminating += pods.active;
        pods.active = 0;
        pods.ready = 0;
    } else if continuing != Some(WhenAchieved::Continue) {
        let manages = !facts.deleting && facts.in_flight.pods_settled;
        let timed_out = if manages && !facts.suspended {
            start_timeout::check(&facts, &active)
        } else {
            start_timeout::TimedOut::default()
        };
        if timed_out.acts() {
            // Pods that did not start in time are failed and deleted; the next sync counts
            // them and replaces them after the back-off.
            out.events.extend(timed_out.event());
            out.fail = timed_out.fail;
            out.delete = timed_out.delete;
        } else if manages {
            out.requeue(timed_out.requeue);
            let m = manage::manage_job(
                &facts,
                &active,
                &finished,
                failed_indexes.as_ref(),
                &awaiting,
                &backoff,
            );
            pods.active = m.active;
            pods.ready -= m.deleted_ready;
            pods.terminating += m.deleted;
            pods_to_come = m.waiting;
            out.release(m.release);
            out.delete = m.delete;
            out.create = m.create;
            out.requeue(m.requeue);
        }
        if finishing.is_none() {
            finishing = outcome::completions_reached(&facts, finished.succeeded, pods.active);
            if finishing.is_none()
                && manages
                && let Some(e) = suspend::update_condition(
                    &facts,
                    pods.active,
                    &mut conds,
                    &mut status.start_time,
                )
            {
                out.events.push(e);
            }
        }
    }
    status.active = Some(pods.active);
    status.ready = Some(pods.ready.max(0));
    status.terminating = Some(pods.terminating);

    // Finished pods into the status; their finalizers go once it is written.
    // Pods a success rule lets run on are counted as any running Job's are.
    let tracked = tracking::track(
        &facts,
        finishing.as_ref().filter(|f| f.terminates()),
        &finished.prev_indexes,
        &awaiting,
    );
    out.release(tracked.release.iter().cloned());
    status::write_counters(
        &facts,
        &mut status,
        &tracked,
        &finished.succeeded_indexes,
        failed_indexes.as_ref(),
    );

    // The interim condition, or once everything is counted, the terminal one.
    if let Some(f) = &finishing {
        let enacted = finish::enact(
            &facts,
            f,
            tracked.pods_uncounted() || pods_to_come,
            pods.terminating,
            &mut conds,
            &mut status,
        );
        if enacted.interim_added {
            out.requeue(Some(Duration::ZERO));
        }
        out.events.extend(enacted.events);
        out.finished = enacted.finished;
    }

    status.conditions = Some(conds).filter(|c| !c.is_empty());
    if !same_status(&status, facts.stored()) {
        out.status = Some(status);
    }
    if !out.remove_finalizers.is_empty() {
        // The counters follow the finalizers; look again as soon as they are gone.
        out.requeue(Some(Duration::ZERO));
    }
    out
}

fn skip(why: Skip) -> Plan {
    Plan {
        skipped: Some(why),
        ..Plan::default()
    }
}

/// Upstream's orphan clean-up: a finished Job records nothing more, so a pod still carrying
/// the finalizer is only kept from going away.
fn release_pods_of_finished_job(views: &[PodView<'_>]) -> Plan {
    let mut out = Plan::default();
    out.release(views.iter().filter(|p| p.tracked).map(PodRef::of));
    out
}

fn unknown_completion_mode(job: &JobObject<'_>) -> Plan {
    let mode = job.spec.completion_mode.clone().unwrap_or_default();
    let mut out = skip(Skip::UnknownCompletionMode(mode));
    out.events.push(types::event(
        true,
        "UnknownCompletionMode",
        "Skipped Job sync because completion mode is unknown",
    ));
    out
}

/// Upstream's `calculateFailedIndexes`, for Jobs with `backoffLimitPerIndex`.
fn failed_indexes(facts: &JobFacts<'_>, finished: &Finished<'_>) -> Option<IndexSet> {
    facts.per_index_limit.map(|limit| {
        per_index::failed_indexes(
            facts.stored().failed_indexes.as_deref(),
            facts.completions.unwrap_or(0),
            facts.pods,
            facts.only_replace_failed,
            limit,
            &finished.succeeded_indexes,
        )
    })
}

/// Upstream's `getPodsWithDelayedDeletionPerIndex`.
fn awaiting_replacement<'a>(
    facts: &JobFacts<'a>,
    finished: &Finished<'_>,
    failed_indexes: Option<&IndexSet>,
) -> BTreeMap<i32, &'a PodView<'a>> {
    match failed_indexes {
        Some(failed) => per_index::pods_awaiting_replacement(
            facts.pods,
            facts.completions.unwrap_or(0),
            facts.only_replace_failed,
            &finished.succeeded_indexes,
            failed,
        ),
        None => BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests;
