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
use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

pub use status::same_status;
pub use types::{
    CreateReason, DeleteReason, Finish, InFlight, LocalDispatch, Plan, PlanConfig, PodCreation,
    PodDeletion, PodRef, PodStartFailure, Skip,
};

use crate::pods::CachedPod;
use crate::pods::view::PodView;
use backoff::BackoffRecord;
use facts::{JobFacts, count};
use finished_pods::Finished;
use outcome::Finishing;

/// Pods by state, as the status reports them.
struct PodCounts {
    active: i32,
    ready: i32,
    terminating: i32,
}

impl PodCounts {
    fn of(views: &[PodView<'_>], active: &[&PodView<'_>]) -> PodCounts {
        PodCounts {
            active: count(active.len()),
            ready: count(active.iter().filter(|p| p.ready).count()),
            terminating: count(views.iter().filter(|p| p.is_terminating()).count()),
        }
    }
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
    let mut d = Draft::new(&facts);

    // What finished since the last write, and the back-off as it stands with it.
    let finished = finished_pods::count(&facts);
    let backoff = finished.backoff(&facts);
    d.out.backoff = Some(backoff);
    if d.status.start_time.is_none() && !facts.suspended {
        d.status.start_time = Some(Time(facts.now));
    }
    let mut failed_indexes = failed_indexes(&facts, &finished);

    // The outcome: one already stored, else the failure policies, else the success policy.
    let (mut finishing, deadline) = outcome::decide(
        &facts,
        &finished,
        d.status.start_time.as_ref(),
        failed_indexes.as_ref(),
    );
    d.out.requeue(deadline);
    // The pods a success rule let run on (KEP-3998's `whenCriterionAchieved`).
    let continuing =
        finishing.as_ref().and_then(Finishing::continues) == Some(WhenAchieved::Continue);
    if continuing && let Some(failed) = failed_indexes.as_mut() {
        failed.union_with(&lingering::failed_indexes(&facts, &finished));
    }
    // Computed before any pod is created, as upstream: in the sync that creates the
    // replacement the failed pod still waits, and it is counted in the next. With `Continue`
    // nothing is replaced, so nothing waits.
    let awaiting = if continuing {
        BTreeMap::new()
    } else {
        awaiting_replacement(&facts, &finished, failed_indexes.as_ref())
    };
    let known = Known {
        facts: &facts,
        finished: &finished,
        failed_indexes: failed_indexes.as_ref(),
        awaiting: &awaiting,
        backoff,
    };

    let (pods, pods_to_come) = d.active_pods(&known, &views, &mut finishing, continuing);

    // Finished pods into the status; their finalizers go once it is written.
    // Pods a success rule lets run on are counted as any running Job's are.
    let uncounted = d.track_finished_pods(&known, finishing.as_ref().filter(|f| f.terminates()));
    // The interim condition, or once everything is counted, the terminal one.
    if let Some(f) = &finishing {
        d.enact(&facts, f, uncounted || pods_to_come, pods.terminating);
    }
    d.into_plan(&facts)
}

/// What the steps after the outcome read: the Job, what finished since the last write (and
/// the back-off with it), the indexes failed for good and the failed pods whose replacement
/// waits for its back-off.
struct Known<'k, 'a> {
    facts: &'k JobFacts<'a>,
    finished: &'k Finished<'a>,
    failed_indexes: Option<&'k IndexSet>,
    awaiting: &'k BTreeMap<i32, &'a PodView<'a>>,
    backoff: BackoffRecord,
}

/// One sync's decisions so far: the plan, and the status and conditions it is to write.
struct Draft {
    out: Plan,
    status: JobStatus,
    conds: Vec<JobCondition>,
}

impl Draft {
    fn new(facts: &JobFacts<'_>) -> Draft {
        let status = facts.stored().clone();
        let conds = status.conditions.clone().unwrap_or_default();
        Draft {
            out: Plan::default(),
            status,
            conds,
        }
    }

    /// The active pods: all deleted for a finishing Job, left alone while a success rule lets
    /// them run on (`continuing`), else managed; a Job still without an outcome may reach one
    /// here. The pod counts after, and whether a replacement is still to come after its
    /// back-off (then the Job is not done).
    fn active_pods(
        &mut self,
        known: &Known<'_, '_>,
        views: &[PodView<'_>],
        finishing: &mut Option<Finishing>,
        continuing: bool,
    ) -> (PodCounts, bool) {
        let facts = known.facts;
        let active: Vec<&PodView> = views.iter().filter(|p| p.is_active()).collect();
        let mut pods = PodCounts::of(views, &active);
        let mut pods_to_come = false;
        if let Some(f) = finishing.as_ref().filter(|f| f.terminates()) {
            self.delete_active_pods(facts, &active, f, &mut pods);
        } else if !continuing {
            let manages = !facts.deleting && facts.in_flight.pods_settled;
            pods_to_come = self.manage_active_pods(known, &active, manages, &mut pods);
            if finishing.is_none() {
                *finishing = self.completions_reached_or_suspended(known, pods.active, manages);
            }
        }
        self.set_pod_counts(&pods);
        (pods, pods_to_come)
    }

    /// A finishing Job's active pods are all deleted, and count as terminating from now.
    fn delete_active_pods(
        &mut self,
        facts: &JobFacts<'_>,
        active: &[&PodView<'_>],
        f: &Finishing,
        pods: &mut PodCounts,
    ) {
        self.out.delete = manage::delete_active_pods(facts, active, f.lingering_ended.is_some());
        if let Some(why) = &f.lingering_ended
            && !self.out.delete.is_empty()
        {
            self.out.events.push(lingering::ended_event(why));
        }
        pods.terminating += pods.active;
        pods.active = 0;
        pods.ready = 0;
    }

    /// A running Job's active pods: those that did not start in time are failed and deleted,
    /// else, when the controller `manages` them now, `manageJob` deletes or creates. Whether a
    /// replacement is still to come after its back-off.
    fn manage_active_pods(
        &mut self,
        known: &Known<'_, '_>,
        active: &[&PodView<'_>],
        manages: bool,
        pods: &mut PodCounts,
    ) -> bool {
        let facts = known.facts;
        let timed_out = if manages && !facts.suspended {
            start_timeout::check(facts, active)
        } else {
            start_timeout::TimedOut::default()
        };
        if timed_out.acts() {
            // Pods that did not start in time are failed and deleted; the next sync counts
            // them and replaces them after the back-off.
            self.out.events.extend(timed_out.event());
            self.out.fail = timed_out.fail;
            self.out.delete = timed_out.delete;
            return false;
        }
        if !manages {
            return false;
        }
        self.out.requeue(timed_out.requeue);
        let m = manage::manage_job(
            facts,
            active,
            known.finished,
            known.failed_indexes,
            known.awaiting,
            &known.backoff,
        );
        pods.active = m.active;
        pods.ready -= m.deleted_ready;
        pods.terminating += m.deleted;
        self.out.release(m.release);
        self.out.delete = m.delete;
        self.out.create = m.create;
        self.out.requeue(m.requeue);
        m.waiting
    }

    /// A Job without an outcome yet may have reached its completions now; if not, and the
    /// controller manages its pods, the Suspended condition follows `spec.suspend`.
    fn completions_reached_or_suspended(
        &mut self,
        known: &Known<'_, '_>,
        active: i32,
        manages: bool,
    ) -> Option<Finishing> {
        let facts = known.facts;
        let finishing = outcome::completions_reached(facts, known.finished.succeeded, active);
        if finishing.is_none()
            && manages
            && let Some(e) = suspend::update_condition(
                facts,
                active,
                &mut self.conds,
                &mut self.status.start_time,
            )
        {
            self.out.events.push(e);
        }
        finishing
    }

    fn set_pod_counts(&mut self, pods: &PodCounts) {
        self.status.active = Some(pods.active);
        self.status.ready = Some(pods.ready.max(0));
        self.status.terminating = Some(pods.terminating);
    }

    /// The tracking step, and the counters it leaves written into the status; whether some
    /// finished pod is not counted yet. `terminating`: the outcome, when it ends the pods.
    fn track_finished_pods(
        &mut self,
        known: &Known<'_, '_>,
        terminating: Option<&Finishing>,
    ) -> bool {
        let tracked = tracking::track(
            known.facts,
            terminating,
            &known.finished.prev_indexes,
            known.awaiting,
        );
        self.out.release(tracked.release.iter().cloned());
        status::write_counters(
            known.facts,
            &mut self.status,
            &tracked,
            &known.finished.succeeded_indexes,
            known.failed_indexes,
        );
        tracked.pods_uncounted()
    }

    /// Records the outcome: the interim condition, or the terminal one once nothing is pending.
    fn enact(&mut self, facts: &JobFacts<'_>, f: &Finishing, pods_pending: bool, terminating: i32) {
        let enacted = finish::enact(
            facts,
            f,
            pods_pending,
            terminating,
            &mut self.conds,
            &mut self.status,
        );
        if enacted.interim_added {
            self.out.requeue(Some(Duration::ZERO));
        }
        self.out.events.extend(enacted.events);
        self.out.finished = enacted.finished;
    }

    /// The plan, with a status write only when the status changed.
    fn into_plan(mut self, facts: &JobFacts<'_>) -> Plan {
        self.status.conditions = Some(self.conds).filter(|c| !c.is_empty());
        if !same_status(&self.status, facts.stored()) {
            self.out.status = Some(self.status);
        }
        if !self.out.remove_finalizers.is_empty() {
            // The counters follow the finalizers; look again as soon as they are gone.
            self.out.requeue(Some(Duration::ZERO));
        }
        self.out
    }
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
