//! `plan(job, pods, now, config) -> Plan`: everything the controller decides for one Job, as a
//! pure function of what the API holds. It follows upstream's `syncJob` step by step; it never
//! performs I/O, never reads a clock, and plans at most one status write so that each write can
//! be checked against the status-transition rules before it is made.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use jobwarden_rules::JobObject;
use jobwarden_rules::condition::{
    COMPLETE, FAILED, FAILURE_TARGET, SUCCESS_CRITERIA_MET, SUSPENDED,
};
use jobwarden_rules::indexes::IndexSet;
use jobwarden_rules::rule_names;
use k8s_openapi::api::batch::v1::{JobCondition, JobStatus, UncountedTerminatedPods};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::backoff::{self, BackoffRecord};
use crate::cluster_api::EventRecord;
use crate::conditions;
use crate::per_index;
use crate::pod_failure_policy::{self, Action};
use crate::pod_template::{JobIdentity, build_pod};
use crate::pods::{CachedPod, Phase, PodView};
use crate::success_policy;
use jobwarden_rules::well_known::*;

/// Tunables of `plan`; the defaults are upstream's.
#[derive(Debug, Clone)]
pub struct PlanConfig {
    /// The `spec.managedBy` value of the Jobs this controller runs.
    pub controller_name: String,
    /// Upstream's `MaxPodCreateDeletePerSync`.
    pub max_pod_changes_per_sync: usize,
    /// Upstream's `MaxUncountedPods`: keeps `uncountedTerminatedPods` small.
    pub max_uncounted_pods: usize,
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// KEP-4443: a `FailJob` rule fails the Job with reason `PodFailurePolicy_{name}`. Off, the
    /// reason is upstream's plain `PodFailurePolicy` (what `simulate` shows for a Job the
    /// built-in controller runs).
    pub rule_named_reasons: bool,
}

impl Default for PlanConfig {
    fn default() -> Self {
        PlanConfig {
            controller_name: JOBWARDEN_CONTROLLER_NAME.to_owned(),
            max_pod_changes_per_sync: 500,
            max_uncounted_pods: 500,
            backoff_base: backoff::DEFAULT_BACKOFF,
            backoff_max: backoff::MAX_BACKOFF,
            rule_named_reasons: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub name: String,
    pub uid: String,
}

/// Why a pod is created, as upstream's `job_pods_creation_total` labels it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateReason {
    New,
    RecreateTerminatingOrFailed,
    RecreateFailed,
}

impl CreateReason {
    pub fn label(self) -> &'static str {
        match self {
            CreateReason::New => "new",
            CreateReason::RecreateTerminatingOrFailed => "recreate_terminating_or_failed",
            CreateReason::RecreateFailed => "recreate_failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PodCreation {
    pub index: Option<i32>,
    pub reason: CreateReason,
    /// The pod manifest to POST (built from the raw template).
    pub pod: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// `spec.suspend` became true.
    Suspended,
    /// More pods are active than wanted, or an Indexed pod has a duplicate or invalid index.
    Excess,
    /// The Job met its success criteria or is failing; what is left is terminated.
    JobFinishing,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodDeletion {
    pub pod: PodRef,
    pub reason: DeleteReason,
}

/// The Job reached a terminal condition in this plan's status write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finish {
    pub succeeded: bool,
    pub reason: String,
}

/// Why a plan does nothing at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// `spec.managedBy` names another controller (or none): never touch it.
    ForeignManager(Option<String>),
    UnknownCompletionMode(String),
}

/// What to do, in the order the executor does it: write the status, remove finalizers, delete
/// pods, create pods, emit events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// The whole new status, when it differs from the stored one.
    pub status: Option<JobStatus>,
    /// Only pods whose outcome is already in the stored status or in `status` above (or whose
    /// outcome is not counted at all).
    pub remove_finalizers: Vec<PodRef>,
    pub delete: Vec<PodDeletion>,
    pub create: Vec<PodCreation>,
    pub events: Vec<EventRecord>,
    /// Look again after this long even if nothing changes (back-off, deadline, next step).
    pub requeue_after: Option<Duration>,
    pub finished: Option<Finish>,
    pub skipped: Option<Skip>,
    /// The back-off to remember once this plan's status is written.
    pub backoff: Option<BackoffRecord>,
}

impl Plan {
    /// Whether applying the plan would change nothing.
    pub fn is_noop(&self) -> bool {
        self.status.is_none()
            && self.remove_finalizers.is_empty()
            && self.delete.is_empty()
            && self.create.is_empty()
            && self.events.is_empty()
    }

    fn requeue(&mut self, after: Duration) {
        self.requeue_after = Some(self.requeue_after.map_or(after, |d| d.min(after)));
    }

    fn remove_finalizer(&mut self, pod: &PodView) {
        if !self.remove_finalizers.iter().any(|p| *p.uid == *pod.uid) {
            self.remove_finalizers.push(pod_ref(pod));
        }
    }

    fn event(&mut self, warning: bool, reason: &str, message: &str) {
        self.events.push(EventRecord {
            warning,
            reason: reason.to_owned(),
            message: message.to_owned(),
        });
    }
}

fn pod_ref(p: &PodView) -> PodRef {
    PodRef {
        name: p.name.clone(),
        uid: p.uid.to_string(),
    }
}

/// The terminal outcome the Job is heading to.
#[derive(Debug, Clone)]
struct Finishing {
    success: bool,
    reason: String,
    message: String,
    /// The interim condition (`SuccessCriteriaMet` or `FailureTarget`) is already stored.
    interim_stored: bool,
}

/// Whether the controller named in `config` runs this Job.
pub fn is_managed_by(job: &JobObject<'_>, controller_name: &str) -> bool {
    job.spec.managed_by.as_deref() == Some(controller_name)
}

/// Timestamps are stored with whole seconds; planning with the stored precision keeps
/// `completionTime >= startTime` comparisons the same before and after a round trip.
fn whole_seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// What the controller has asked the API server for and not yet seen in its caches
/// (`expectations`): `plan` must not act on a picture it knows to be incomplete.
#[derive(Debug, Clone)]
pub struct InFlight {
    /// Every pod creation and deletion asked for has shown up in the pod cache (upstream's
    /// `satisfiedExpectations`). Until then no pod is created or deleted, and no new outcome
    /// or terminal condition is recorded.
    pub pods_settled: bool,
    /// Pods whose tracking finalizer is being removed: their outcome is recorded, they count
    /// as released.
    pub removing_finalizers: HashSet<String>,
    /// Pods whose deletion is under way: never asked for twice.
    pub deleting: HashSet<String>,
    /// The Job's back-off as of the last status write, as upstream's `backoffStore` keeps
    /// it; `None` when this controller has none yet (a restart, a new leader).
    pub backoff: Option<BackoffRecord>,
}

impl Default for InFlight {
    fn default() -> Self {
        InFlight {
            pods_settled: true,
            removing_finalizers: HashSet::new(),
            deleting: HashSet::new(),
            backoff: None,
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
    let mut out = Plan::default();
    if !is_managed_by(job, &config.controller_name) {
        out.skipped = Some(Skip::ForeignManager(job.spec.managed_by.clone()));
        return out;
    }
    let now = whole_seconds(now);
    let job_uid = job.metadata.uid.as_deref().unwrap_or("");
    let namespace = job.metadata.namespace.as_deref().unwrap_or("");
    let policy = job.spec.pod_failure_policy.as_ref();
    let views: Vec<PodView> = pods
        .iter()
        .filter(|p| p.owner_uid.as_deref() == Some(job_uid))
        .map(|p| PodView {
            pod: p,
            // Upstream matches only failed pods; those are terminal or being deleted.
            policy: policy
                .filter(|_| p.phase == Phase::Failed || p.deleting)
                .and_then(|policy| pod_failure_policy::match_pod(policy, p, namespace)),
            tracked: p.has_finalizer && !in_flight.removing_finalizers.contains(&*p.uid),
        })
        .collect();

    if job.is_finished() {
        // Upstream's orphan clean-up: a finished Job records nothing more, so a pod still
        // carrying the finalizer is only kept from going away.
        for p in views.iter().filter(|p| p.tracked) {
            out.remove_finalizer(p);
        }
        return out;
    }

    let mode = job.spec.completion_mode.as_deref().unwrap_or(NON_INDEXED);
    let indexed = mode == INDEXED;
    if (mode != NON_INDEXED && !indexed) || (indexed && job.spec.completions.is_none()) {
        out.skipped = Some(Skip::UnknownCompletionMode(mode.to_owned()));
        out.event(
            true,
            "UnknownCompletionMode",
            "Skipped Job sync because completion mode is unknown",
        );
        return out;
    }
    Pass::new(job, &views, now, config, indexed, in_flight).run(out)
}

/// One pass of `syncJob` over a Job and its pods.
struct Pass<'a> {
    job: &'a JobObject<'a>,
    pods: &'a [PodView<'a>],
    now: Timestamp,
    config: &'a PlanConfig,
    indexed: bool,
    in_flight: &'a InFlight,
    completions: Option<i32>,
    only_replace_failed: bool,
    suspended: bool,
    deleting: bool,
    /// `backoffLimitPerIndex`, for Indexed Jobs that set it.
    per_index_limit: Option<i32>,
}

impl<'a> Pass<'a> {
    fn new(
        job: &'a JobObject<'a>,
        pods: &'a [PodView<'a>],
        now: Timestamp,
        config: &'a PlanConfig,
        indexed: bool,
        in_flight: &'a InFlight,
    ) -> Self {
        // The apiserver defaults the policy; read it the same way when it is absent (a Job
        // stored before the field existed).
        let only_replace_failed = match job.spec.pod_replacement_policy.as_deref() {
            Some(p) => p == POLICY_FAILED,
            None => job.spec.pod_failure_policy.is_some(),
        };
        Pass {
            job,
            pods,
            now,
            config,
            indexed,
            in_flight,
            completions: job.spec.completions,
            only_replace_failed,
            suspended: job.is_suspended(),
            deleting: job.metadata.deletion_timestamp.is_some(),
            per_index_limit: job.spec.backoff_limit_per_index.filter(|_| indexed),
        }
    }

    fn valid_index(&self, p: &PodView) -> bool {
        !self.indexed || p.index.is_some_and(|i| i < self.completions.unwrap_or(0))
    }

    fn backoff_limit(&self) -> i64 {
        match self.job.spec.backoff_limit {
            Some(b) => i64::from(b),
            None if self.job.spec.backoff_limit_per_index.is_some() => i64::from(i32::MAX),
            None => 6,
        }
    }

    fn run(self, mut out: Plan) -> Plan {
        let old = &self.job.status;
        let mut status = old.clone();
        let mut conds: Vec<JobCondition> = old.conditions.clone().unwrap_or_default();
        let uncounted = old.uncounted_terminated_pods.clone().unwrap_or_default();
        let mut uncounted_succeeded = uncounted.succeeded.unwrap_or_default();
        let mut uncounted_failed = uncounted.failed.unwrap_or_default();
        let in_succeeded: HashSet<String> = uncounted_succeeded.iter().cloned().collect();
        let in_failed: HashSet<String> = uncounted_failed.iter().cloned().collect();

        let active: Vec<&PodView> = self.pods.iter().filter(|p| p.is_active()).collect();
        let mut active_count = count(active.len());
        let mut ready = count(active.iter().filter(|p| p.ready).count());
        let mut terminating = count(self.pods.iter().filter(|p| p.is_terminating()).count());

        // Upstream's `getNewFinishedPods`: finished pods not yet in the status.
        let newly_succeeded: Vec<&PodView> = self
            .pods
            .iter()
            .filter(|p| p.tracked && !in_succeeded.contains(&*p.uid) && self.valid_index(p))
            .filter(|p| p.phase == Phase::Succeeded)
            .collect();
        let newly_failed: Vec<&PodView> = self
            .pods
            .iter()
            .filter(|p| p.tracked && !in_failed.contains(&*p.uid) && self.valid_index(p))
            .filter(|p| p.is_failed(self.only_replace_failed))
            .collect();
        let new_succeeded = newly_succeeded.len();
        let new_failed = newly_failed
            .iter()
            .filter(|p| p.counts_as_failure())
            .count();
        // Upstream's `newBackoffRecord`: the remembered record moved on by the pods that
        // finished since; with nothing remembered, read from the failed pods that are left.
        out.backoff = Some(match &self.in_flight.backoff {
            Some(record) => record.updated(&newly_succeeded, &newly_failed),
            None => backoff::record_from_pods(self.pods, self.only_replace_failed),
        });
        let mut succeeded = i64::from(old.succeeded.unwrap_or(0))
            + new_succeeded as i64
            + uncounted_succeeded.len() as i64;
        let failed =
            i64::from(old.failed.unwrap_or(0)) + new_failed as i64 + uncounted_failed.len() as i64;

        if status.start_time.is_none() && !self.suspended {
            status.start_time = Some(Time(self.now));
        }

        // Completed indexes: what is stored, plus the succeeded pods not yet recorded.
        let completions = self.completions.unwrap_or(0);
        let prev_indexes = if self.indexed {
            IndexSet::parse_lenient(old.completed_indexes.as_deref().unwrap_or(""), completions)
        } else {
            IndexSet::new()
        };
        let mut succeeded_indexes = prev_indexes.clone();
        if self.indexed {
            for p in self
                .pods
                .iter()
                .filter(|p| p.tracked && p.phase == Phase::Succeeded)
            {
                if let Some(i) = p.index.filter(|_| self.valid_index(p)) {
                    succeeded_indexes.insert(i);
                }
            }
            succeeded = succeeded_indexes.count() as i64;
        }

        let failed_indexes = self.per_index_limit.map(|limit| {
            per_index::failed_indexes(
                old.failed_indexes.as_deref(),
                completions,
                self.pods,
                self.only_replace_failed,
                limit,
                &succeeded_indexes,
            )
        });

        // Upstream's order: an outcome already stored, then every failure policy, and only
        // then the success policy, so a sync that meets both fails the Job (KEP-3998).
        let mut finishing = self.stored_outcome(&conds);
        if finishing.is_none() {
            finishing = self.failure(
                failed,
                &status,
                failed_indexes.as_ref(),
                &succeeded_indexes,
                &mut out,
            );
        }
        if finishing.is_none() {
            finishing = self.success_policy(&succeeded_indexes);
        }
        // Upstream's `satisfiedExpectations`: a new outcome waits until every pod asked for
        // (or deleted) shows in the cache, so that no pod can appear after it.
        let settled = self.in_flight.pods_settled;
        if !settled && finishing.as_ref().is_some_and(|f| !f.interim_stored) {
            finishing = None;
        }
        // Computed before any pod is created, as upstream: in the pass that creates the
        // replacement the failed pod still waits, and it is counted in the next.
        let awaiting = match &failed_indexes {
            Some(failed) => per_index::pods_awaiting_replacement(
                self.pods,
                completions,
                self.only_replace_failed,
                &succeeded_indexes,
                failed,
            ),
            None => BTreeMap::new(),
        };

        if finishing.is_some() {
            // Upstream's `deleteActivePods`: the finalizers stay, so each outcome is recorded
            // below before the pod may go.
            for p in active
                .iter()
                .filter(|p| !self.in_flight.deleting.contains(&*p.uid))
            {
                out.delete.push(PodDeletion {
                    pod: pod_ref(p),
                    reason: DeleteReason::JobFinishing,
                });
            }
            terminating += active_count;
            active_count = 0;
            ready = 0;
        } else {
            let mut managed = false;
            if !self.deleting && settled {
                let counts = self.manage(
                    &active,
                    succeeded,
                    failed,
                    &succeeded_indexes,
                    failed_indexes.as_ref(),
                    &awaiting,
                    &mut out,
                );
                active_count = counts.active;
                ready -= counts.deleted_ready;
                terminating += counts.deleted;
                managed = true;
            }
            let complete = settled
                && match self.completions {
                    None => succeeded > 0 && active_count == 0,
                    Some(c) => succeeded >= i64::from(c) && active_count == 0,
                };
            if complete {
                finishing = Some(Finishing {
                    success: true,
                    reason: REASON_COMPLETIONS_REACHED.to_owned(),
                    message: MESSAGE_COMPLETIONS_REACHED.to_owned(),
                    interim_stored: false,
                });
            } else if managed {
                self.suspend_condition(active_count, &mut conds, &mut status, &mut out);
            }
        }

        status.active = Some(active_count);
        status.ready = Some(ready.max(0));
        status.terminating = Some(terminating);

        // Pods whose finalizer is gone are counted now: their UIDs move into the counters.
        let with_finalizer: HashSet<&str> = self
            .pods
            .iter()
            .filter(|p| p.tracked)
            .map(|p| &*p.uid)
            .collect();
        let mut counted_succeeded = i64::from(old.succeeded.unwrap_or(0));
        let mut counted_failed = i64::from(old.failed.unwrap_or(0));
        uncounted_succeeded.retain(|uid| {
            let keep = with_finalizer.contains(uid.as_str());
            counted_succeeded += i64::from(!keep);
            keep
        });
        uncounted_failed.retain(|uid| {
            let keep = with_finalizer.contains(uid.as_str());
            counted_failed += i64::from(!keep);
            keep
        });

        let reached_max = self.record_finished_pods(
            finishing.as_ref(),
            &prev_indexes,
            &awaiting,
            &mut uncounted_succeeded,
            &mut uncounted_failed,
            &mut out,
        );

        status.failed = Some(clamp(counted_failed));
        if self.indexed {
            status.succeeded = Some(clamp(succeeded_indexes.count() as i64));
            status.completed_indexes = Some(succeeded_indexes.to_string());
            if let Some(failed) = &failed_indexes {
                status.failed_indexes = Some(failed.to_string());
            }
        } else {
            status.succeeded = Some(clamp(counted_succeeded));
        }
        let uncounted_empty = uncounted_succeeded.is_empty() && uncounted_failed.is_empty();
        status.uncounted_terminated_pods = Some(UncountedTerminatedPods {
            succeeded: Some(uncounted_succeeded).filter(|v| !v.is_empty()),
            failed: Some(uncounted_failed).filter(|v| !v.is_empty()),
        });

        if let Some(f) = &finishing {
            self.finish(
                f,
                reached_max || !uncounted_empty,
                terminating,
                &mut conds,
                &mut status,
                &mut out,
            );
        }

        status.conditions = Some(conds).filter(|c| !c.is_empty());
        if !same_status(&status, old) {
            out.status = Some(status);
        }
        if !out.remove_finalizers.is_empty() {
            // The counters follow the finalizers; look again as soon as they are gone.
            out.requeue(Duration::ZERO);
        }
        out
    }

    /// The outcome already decided in an earlier pass, read back from the interim conditions.
    fn stored_outcome(&self, conds: &[JobCondition]) -> Option<Finishing> {
        let from = |c: &JobCondition, success: bool| Finishing {
            success,
            reason: c.reason.clone().unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
            interim_stored: true,
        };
        if let Some(c) =
            conditions::find(conds, SUCCESS_CRITERIA_MET).filter(|c| c.status == "True")
        {
            return Some(from(c, true));
        }
        conditions::find(conds, FAILURE_TARGET)
            .filter(|c| c.status == "True")
            .map(|c| from(c, false))
    }

    /// Every failure policy, in upstream's order: a `FailJob` rule, the back-off limit, the
    /// active deadline, then the per-index limits.
    fn failure(
        &self,
        failed: i64,
        status: &JobStatus,
        failed_indexes: Option<&IndexSet>,
        succeeded_indexes: &IndexSet,
        out: &mut Plan,
    ) -> Option<Finishing> {
        let fail = |reason: &str, message: &str| {
            Some(Finishing {
                success: false,
                reason: reason.to_owned(),
                message: message.to_owned(),
                interim_stored: false,
            })
        };
        if let Some(f) = self.fail_job_rule() {
            return Some(f);
        }
        if failed > self.backoff_limit() || self.past_backoff_limit_on_failure() {
            return fail(
                REASON_BACKOFF_LIMIT_EXCEEDED,
                MESSAGE_BACKOFF_LIMIT_EXCEEDED,
            );
        }
        if self.past_deadline(status, out) {
            return fail(REASON_DEADLINE_EXCEEDED, MESSAGE_DEADLINE_EXCEEDED);
        }
        let failed_indexes = failed_indexes?;
        let failed_count = failed_indexes.count();
        if let Some(max) = self.job.spec.max_failed_indexes
            && failed_count > u64::try_from(max).unwrap_or(0)
        {
            return fail(
                REASON_MAX_FAILED_INDEXES_EXCEEDED,
                MESSAGE_MAX_FAILED_INDEXES_EXCEEDED,
            );
        }
        let completions = u64::try_from(self.completions.unwrap_or(0)).unwrap_or(0);
        if failed_count > 0 && failed_count + succeeded_indexes.count() >= completions {
            return fail(REASON_FAILED_INDEXES, MESSAGE_FAILED_INDEXES);
        }
        None
    }

    /// Upstream's `getFailJobMessage`: the first failed pod a `FailJob` rule matches, with
    /// KEP-4443's reason `PodFailurePolicy_{name}` (the rule's index when unnamed) in place of
    /// upstream's plain `PodFailurePolicy`.
    fn fail_job_rule(&self) -> Option<Finishing> {
        let m = self.pods.iter().find_map(|p| {
            let m = p.policy.as_ref()?;
            (p.is_failed(self.only_replace_failed) && m.action == Action::FailJob).then_some(m)
        })?;
        let reason = if self.config.rule_named_reasons {
            rule_names::failure_reason(&rule_names::effective_names(self.job), m.rule)
        } else {
            REASON_POD_FAILURE_POLICY.to_owned()
        };
        Some(Finishing {
            success: false,
            reason,
            message: m.message.clone(),
            interim_stored: false,
        })
    }

    /// Whether the active deadline has passed; when it has not, look again when it falls.
    fn past_deadline(&self, status: &JobStatus, out: &mut Plan) -> bool {
        let (Some(deadline), Some(start)) =
            (self.job.spec.active_deadline_seconds, &status.start_time)
        else {
            return false;
        };
        if self.suspended {
            // The deadline clock stops while suspended; resuming resets `startTime`.
            return false;
        }
        let elapsed = self.now.as_second() - start.0.as_second();
        if elapsed >= deadline {
            return true;
        }
        out.requeue(Duration::from_secs(
            u64::try_from(deadline - elapsed).unwrap_or(0),
        ));
        false
    }

    /// KEP-3998: the first success rule the succeeded indexes satisfy.
    fn success_policy(&self, succeeded_indexes: &IndexSet) -> Option<Finishing> {
        if !self.indexed {
            return None;
        }
        let policy = self.job.spec.success_policy.as_ref()?;
        let rule =
            success_policy::matched_rule(policy, self.completions.unwrap_or(0), succeeded_indexes)?;
        Some(Finishing {
            success: true,
            reason: REASON_SUCCESS_POLICY.to_owned(),
            message: success_policy::message(rule),
            interim_stored: false,
        })
    }

    /// Upstream's `pastBackoffLimitOnFailure`: with `restartPolicy: OnFailure` failures show up
    /// as container restarts of live pods, never as failed pods.
    fn past_backoff_limit_on_failure(&self) -> bool {
        let policy = self
            .job
            .raw_template()
            .get("spec")
            .and_then(|s| s.get("restartPolicy"))
            .and_then(Value::as_str);
        if policy != Some("OnFailure") {
            return false;
        }
        let restarts: i64 = self
            .pods
            .iter()
            .filter(|p| matches!(p.phase, Phase::Running | Phase::Pending))
            .map(|p| p.restarts)
            .sum();
        let limit = self.backoff_limit();
        if limit == 0 {
            restarts > 0
        } else {
            restarts >= limit
        }
    }

    /// Upstream's `manageJob`: delete what is too much, else create what is missing.
    #[allow(clippy::too_many_arguments)]
    fn manage(
        &self,
        active: &[&PodView],
        succeeded: i64,
        failed: i64,
        succeeded_indexes: &IndexSet,
        failed_indexes: Option<&IndexSet>,
        awaiting: &BTreeMap<i32, &PodView>,
        out: &mut Plan,
    ) -> ManageCounts {
        let mut counts = ManageCounts {
            active: count(active.len()),
            deleted: 0,
            deleted_ready: 0,
        };
        if self.suspended {
            self.delete_pods(active, DeleteReason::Suspended, &mut counts, out);
            return counts;
        }
        let parallelism = i64::from(self.job.spec.parallelism.unwrap_or(1).max(0));
        let active_len = active.len() as i64;
        let want = match self.completions {
            None if succeeded > 0 => active_len,
            None => parallelism,
            Some(c) => (i64::from(c) - succeeded).min(parallelism).max(0),
        };
        let mut to_delete = self.active_pods_for_removal(active, (active_len - want).max(0));
        to_delete.truncate(self.config.max_pod_changes_per_sync);
        if !to_delete.is_empty() {
            // Upstream never creates and deletes in the same pass; deleting wins.
            self.delete_pods(&to_delete, DeleteReason::Excess, &mut counts, out);
            return counts;
        }
        let terminating: Vec<&PodView> = self.pods.iter().filter(|p| p.is_terminating()).collect();
        // KEP-3939: with `Failed`, a terminating pod still holds its place until it is terminal.
        let held = if self.only_replace_failed {
            terminating.len() as i64
        } else {
            0
        };
        let mut diff = want - held - active_len;
        if diff <= 0 {
            return counts;
        }
        // With a per-index limit each index backs off on its own (below), not the Job.
        if self.per_index_limit.is_none() {
            let record = out.backoff.unwrap_or_default();
            let wait = backoff::remaining(
                &record,
                self.now,
                self.config.backoff_base,
                self.config.backoff_max,
            );
            if !wait.is_zero() {
                out.requeue(wait);
                return counts;
            }
        }
        diff = diff.min(self.config.max_pod_changes_per_sync as i64);
        let identity = JobIdentity {
            name: self.job.name(),
            namespace: self.job.metadata.namespace.as_deref().unwrap_or(""),
            uid: self.job.metadata.uid.as_deref().unwrap_or(""),
            controller_name: &self.config.controller_name,
        };
        let template = self.job.raw_template();
        let mut indexes: Vec<Option<i32>> = if self.indexed {
            let mut taken = succeeded_indexes.clone();
            if let Some(failed) = failed_indexes {
                // A failed index is never retried.
                taken.union_with(failed);
            }
            let holders = active.iter().copied().chain(
                terminating
                    .iter()
                    .copied()
                    .filter(|_| self.only_replace_failed),
            );
            for p in holders {
                if let Some(i) = p.index {
                    taken.insert(i);
                }
            }
            (0..self.completions.unwrap_or(0))
                .filter(|i| !taken.contains(*i))
                .take(usize::try_from(diff).unwrap_or(0))
                .map(Some)
                .collect()
        } else {
            (0..diff).map(|_| None).collect()
        };
        if self.per_index_limit.is_some() {
            // Upstream's `getPodCreationInfoForIndependentIndexes`: create the indexes whose
            // back-off is over; when none is, look again when the first one's ends.
            let wait = |i: &Option<i32>| {
                let replaced = i.and_then(|i| awaiting.get(&i).copied());
                per_index::remaining(
                    replaced,
                    self.now,
                    self.config.backoff_base,
                    self.config.backoff_max,
                )
            };
            let soonest = indexes.iter().map(wait).min();
            indexes.retain(|i| wait(i).is_zero());
            if indexes.is_empty() {
                if let Some(w) = soonest.filter(|w| !w.is_zero()) {
                    out.requeue(w);
                }
                return counts;
            }
        }
        let reason = if failed == 0 && terminating.is_empty() {
            CreateReason::New
        } else if self.only_replace_failed {
            CreateReason::RecreateFailed
        } else {
            CreateReason::RecreateTerminatingOrFailed
        };
        for index in indexes {
            let mut pod = build_pod(&identity, template, index);
            if self.per_index_limit.is_some() {
                let replaced = index.and_then(|i| awaiting.get(&i).copied());
                per_index::annotate(&mut pod, per_index::replacement_counts(replaced));
            }
            out.create.push(PodCreation { index, reason, pod });
            counts.active += 1;
        }
        counts
    }

    /// Upstream's `activePodsForRemoval`: for Indexed Jobs, pods with an invalid or repeated
    /// index go first; then the least advanced pods.
    fn active_pods_for_removal<'p>(
        &self,
        active: &[&'p PodView<'p>],
        at_least: i64,
    ) -> Vec<&'p PodView<'p>> {
        let mut remove: Vec<&PodView> = Vec::new();
        let mut left: Vec<&PodView> = Vec::new();
        if self.indexed {
            let mut by_index: Vec<&PodView> = active.to_vec();
            by_index.sort_by(|a, b| {
                a.index
                    .cmp(&b.index)
                    .then_with(|| advancement(a).cmp(&advancement(b)))
            });
            for (n, p) in by_index.iter().enumerate() {
                let repeated = by_index
                    .get(n + 1)
                    .is_some_and(|next| next.index.is_some() && next.index == p.index);
                if !self.valid_index(p) || repeated {
                    remove.push(p);
                } else {
                    left.push(p);
                }
            }
        } else {
            left = active.to_vec();
        }
        let missing = usize::try_from(at_least)
            .unwrap_or(0)
            .saturating_sub(remove.len());
        if missing > 0 {
            left.sort_by_key(|p| advancement(p));
            remove.extend(left.into_iter().take(missing));
        }
        remove
    }

    /// Upstream's `deleteJobPods`: the finalizer goes first, so these pods are not counted.
    fn delete_pods(
        &self,
        pods: &[&PodView],
        reason: DeleteReason,
        counts: &mut ManageCounts,
        out: &mut Plan,
    ) {
        for p in pods {
            if p.tracked {
                out.remove_finalizer(p);
            }
            out.delete.push(PodDeletion {
                pod: pod_ref(p),
                reason,
            });
            counts.active -= 1;
            counts.deleted += 1;
            counts.deleted_ready += i32::from(p.ready);
        }
    }

    fn suspend_condition(
        &self,
        active: i32,
        conds: &mut Vec<JobCondition>,
        status: &mut JobStatus,
        out: &mut Plan,
    ) {
        if self.suspended {
            if active == 0
                && conditions::ensure(
                    conds,
                    SUSPENDED,
                    "True",
                    REASON_JOB_SUSPENDED,
                    MESSAGE_JOB_SUSPENDED,
                    self.now,
                )
            {
                out.event(false, "Suspended", MESSAGE_JOB_SUSPENDED);
                // Upstream clears it in the same write (MutableSchedulingDirectivesFor-
                // SuspendedJobs, on by default in v1.36), so the template's scheduling
                // directives may change while suspended; resuming sets it again.
                status.start_time = None;
            }
        } else if conditions::ensure(
            conds,
            SUSPENDED,
            "False",
            REASON_JOB_RESUMED,
            MESSAGE_JOB_RESUMED,
            self.now,
        ) {
            out.event(false, "Resumed", MESSAGE_JOB_RESUMED);
            // `activeDeadlineSeconds` counts running time since the last resume, as upstream.
            status.start_time = Some(Time(self.now));
        }
    }

    /// Upstream's tracking loop: finished pods go into `uncountedTerminatedPods` (or, for
    /// Indexed successes, into `completedIndexes`) in this plan's status; their finalizers
    /// are removed only after that status is stored. Returns whether the per-pass cap was hit.
    fn record_finished_pods(
        &self,
        finishing: Option<&Finishing>,
        prev_indexes: &IndexSet,
        awaiting: &BTreeMap<i32, &PodView>,
        uncounted_succeeded: &mut Vec<String>,
        uncounted_failed: &mut Vec<String>,
        out: &mut Plan,
    ) -> bool {
        let failing = finishing.is_some_and(|f| !f.success);
        let mut candidates: Vec<&PodView> = self.pods.iter().filter(|p| p.tracked).collect();
        candidates.sort_by(|a, b| a.index.cmp(&b.index).then_with(|| a.name.cmp(&b.name)));
        let mut new_indexes = 0usize;
        for p in candidates {
            let considered_failed = p.is_failed(self.only_replace_failed);
            // Upstream's `canRemoveFinalizer`: a failed pod whose index awaits its replacement
            // keeps the finalizer (and stays uncounted) until the replacement carries its
            // failure count.
            let awaits_replacement = awaiting.values().any(|a| a.uid == p.uid);
            let removable = self.deleting
                || finishing.is_some()
                || p.phase == Phase::Succeeded
                || (considered_failed && !awaits_replacement);
            if !removable {
                continue;
            }
            out.remove_finalizer(p);
            let uid = p.uid.to_string();
            if p.phase == Phase::Succeeded && !uncounted_failed.contains(&uid) {
                if self.indexed {
                    if p.index
                        .is_some_and(|i| self.valid_index(p) && !prev_indexes.contains(i))
                    {
                        new_indexes += 1;
                    }
                } else if !uncounted_succeeded.contains(&uid) {
                    uncounted_succeeded.push(uid.clone());
                }
            } else if (considered_failed || failing)
                && !uncounted_failed.contains(&uid)
                && self.valid_index(p)
                // A failure an `Ignore` rule matched loses its finalizer but is never counted.
                && p.counts_as_failure()
            {
                uncounted_failed.push(uid);
            }
            if new_indexes + uncounted_succeeded.len() + uncounted_failed.len()
                >= self.config.max_uncounted_pods
            {
                return true;
            }
        }
        false
    }

    /// The interim condition first; the terminal one in a later pass, once every pod is
    /// counted and none is left running or terminating (UPSTREAM-RULES §6.4).
    fn finish(
        &self,
        f: &Finishing,
        pods_uncounted: bool,
        terminating: i32,
        conds: &mut Vec<JobCondition>,
        status: &mut JobStatus,
        out: &mut Plan,
    ) {
        let interim = if f.success {
            SUCCESS_CRITERIA_MET
        } else {
            FAILURE_TARGET
        };
        if !f.interim_stored {
            conditions::ensure(conds, interim, "True", &f.reason, &f.message, self.now);
            out.requeue(Duration::ZERO);
            return;
        }
        if pods_uncounted
            || terminating > 0
            || status.active.unwrap_or(0) > 0
            || !self.in_flight.pods_settled
        {
            return;
        }
        if f.success {
            conditions::ensure(conds, COMPLETE, "True", &f.reason, &f.message, self.now);
            // A start time written by a replica whose clock ran ahead must not make the
            // completion time precede it.
            let start = status.start_time.as_ref().map(|t| t.0);
            let at = start.map_or(self.now, |s| s.max(self.now));
            status.completion_time = Some(Time(at));
            if let Some(c) = self.completions
                && status.succeeded.unwrap_or(0) > c
            {
                out.event(
                    true,
                    "TooManySucceededPods",
                    "Too many succeeded pods running after completion count reached",
                );
            }
            out.event(false, "Completed", "Job completed");
        } else {
            conditions::ensure(conds, FAILED, "True", &f.reason, &f.message, self.now);
            out.event(true, &f.reason, &f.message);
        }
        out.finished = Some(Finish {
            succeeded: f.success,
            reason: f.reason.clone(),
        });
    }
}

struct ManageCounts {
    active: i32,
    deleted: i32,
    deleted_ready: i32,
}

/// Upstream's `controller.ActivePods` order, least advanced first: pending before running,
/// not ready before ready, newer before older.
fn advancement(p: &PodView) -> (u8, bool, std::cmp::Reverse<Option<Timestamp>>) {
    let phase = match p.phase {
        Phase::Pending => 0,
        Phase::Unknown => 1,
        _ => 2,
    };
    (phase, p.ready, std::cmp::Reverse(p.created))
}

fn clamp(n: i64) -> i32 {
    i32::try_from(n.max(0)).unwrap_or(i32::MAX)
}

/// Status equality over the fields the controller owns, with "absent" and "empty" alike, as the
/// apiserver stores them.
pub fn same_status(a: &JobStatus, b: &JobStatus) -> bool {
    fn uncounted(s: &JobStatus) -> (Vec<String>, Vec<String>) {
        let u = s.uncounted_terminated_pods.clone().unwrap_or_default();
        (
            u.succeeded.unwrap_or_default(),
            u.failed.unwrap_or_default(),
        )
    }
    a.active.unwrap_or(0) == b.active.unwrap_or(0)
        && a.ready == b.ready
        && a.terminating == b.terminating
        && a.succeeded.unwrap_or(0) == b.succeeded.unwrap_or(0)
        && a.failed.unwrap_or(0) == b.failed.unwrap_or(0)
        && a.completed_indexes.as_deref().unwrap_or("")
            == b.completed_indexes.as_deref().unwrap_or("")
        && a.failed_indexes == b.failed_indexes
        && uncounted(a) == uncounted(b)
        && a.start_time == b.start_time
        && a.completion_time == b.completion_time
        && a.conditions.as_deref().unwrap_or(&[]) == b.conditions.as_deref().unwrap_or(&[])
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "plan_policy_tests.rs"]
mod policy_tests;
