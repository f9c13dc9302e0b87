//! One Job's sync, from the caches: the Job as the watch cache holds it, its pods from the pod
//! cache, and what the controller remembers between syncs (expectations, the Jobs' event
//! buckets). Claims the Job's pods (`claiming`), plans, applies (`executor`), keeps the
//! expectations in step with the writes it made (`expectations`), and hands its events
//! (`pod_events` words the pods') to the runtime's event outbox without waiting for them to
//! be written. Every read is a cache read but claiming's (a GET before adopting, a labelled
//! LIST for a `manualSelector` Job). The kube wiring (`reconcile`), the scale benchmark and
//! the tests all drive this same type.
//!
//! Beside it, what a sync does to the cluster and remembers: `adoption` (which pods a Job
//! claims, pure) under `claiming`; `status_patch` (the write a status becomes) under
//! `executor`; `orphans` (pods whose Job is gone: a pure decision and the release it leads
//! to, which the loop runs).

pub(crate) mod adoption;
mod claiming;
pub mod executor;
mod expectations;
pub(crate) mod orphans;
mod pod_events;
pub(crate) mod status_patch;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use jobwarden_rules::JobObject;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher;

use crate::cluster::ClusterApi;
use crate::metrics::{
    ControllerMetrics, CreatedLabels, FinishedLabels, StartTimeoutLabels, SyncLabels,
};
use crate::plan::backoff::BackoffRecord;
use crate::plan::{Finish, InFlight, Plan, PlanConfig, plan};
use crate::pods::CachedPod;
use crate::pods::cache::{PodCache, PodObservation};
use claiming::{Claiming, SelectorLists};
use executor::{Applied, ApplyError};
use expectations::{EXPECTATIONS_TIMEOUT, Expectations};
use jobwarden_events::{EventRecord, JobRef};
use jobwarden_rules::well_known::{
    INDEXED, NON_INDEXED, REASON_COMPLETIONS_REACHED, REASON_POD_FAILURE_POLICY,
    REASON_SUCCESS_POLICY,
};
use jobwarden_runtime::events::limiter::EventLimiter;
use jobwarden_runtime::events::outbox::{Delivery, EventOutbox};
use jobwarden_runtime::job_cache::CachedJob;
use pod_events::pods_message;

/// How many deleted Jobs' uids are remembered, so their orphaned pods are released without
/// asking the API server whether the Job is gone.
const REMEMBERED_GONE_JOBS: usize = 10_000;

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("the cached Job does not decode: {0}")]
    Decode(String),
    #[error(transparent)]
    Apply(#[from] ApplyError),
}

impl SyncError {
    /// Someone wrote first: sync again soon, from the newer object.
    pub fn is_conflict(&self) -> bool {
        matches!(self, SyncError::Apply(e) if e.is_conflict())
    }
}

/// What a sync did, for the loop and the tests.
#[derive(Debug, Default)]
pub struct SyncReport {
    /// Look again after this long even if no event arrives.
    pub requeue_after: Option<Duration>,
    /// Why nothing was planned, if so.
    pub skipped: Option<&'static str>,
    pub status_written: bool,
    pub created: usize,
    pub deleted: usize,
    pub finalizers_removed: usize,
    /// Events the Job's spam filter let through, handed to the outbox (written before the
    /// sync returns with inline delivery, by the writer task otherwise).
    pub events_recorded: usize,
    pub finished: Option<Finish>,
}

#[derive(Default)]
struct Memory {
    expectations: Expectations,
    events: EventLimiter,
    /// Each Job's back-off as of its last status write (upstream's `backoffStore`).
    backoff: HashMap<String, BackoffRecord>,
    /// Unfinished managed Jobs, for the `jobs_managed` gauge.
    managed: HashSet<String>,
    /// Uids of foreign Jobs already counted.
    foreign: HashSet<String>,
    /// Jobs deleted while we watched: their pods are orphans.
    gone: HashSet<String>,
}

pub struct JobController<A> {
    api: A,
    config: PlanConfig,
    pods: PodCache,
    /// When each `manualSelector` Job's pods were last listed by its selector.
    selector_lists: SelectorLists,
    memory: Mutex<Memory>,
    events_out: EventOutbox,
    metrics: ControllerMetrics,
}

impl<A: ClusterApi> JobController<A> {
    pub fn new(api: A, config: PlanConfig, metrics: ControllerMetrics) -> Self {
        JobController {
            api,
            config,
            pods: PodCache::default(),
            selector_lists: SelectorLists::default(),
            memory: Mutex::default(),
            events_out: EventOutbox::new(Delivery::Inline, metrics.events.clone()),
            metrics,
        }
    }

    /// Events written by a writer task apart from the syncs ([`JobController::write_events`]),
    /// not by each sync before it returns.
    pub fn with_event_writer(self) -> Self {
        JobController {
            events_out: EventOutbox::new(Delivery::Background, self.metrics.events.clone()),
            ..self
        }
    }

    /// The event writer: writes queued Events until `stop` resolves, then those left.
    pub async fn write_events(&self, stop: impl Future<Output = ()>) {
        self.events_out.run_writer(&self.api, stop).await;
    }

    pub fn api(&self) -> &A {
        &self.api
    }

    pub fn config(&self) -> &PlanConfig {
        &self.config
    }

    pub fn pods(&self) -> &PodCache {
        &self.pods
    }

    fn memory(&self) -> MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies a pod watch event to the cache and the expectations; returns what it meant, so
    /// the caller can sync the Jobs concerned and look after orphans.
    pub fn observe_pods(&self, event: &watcher::Event<Pod>) -> Vec<PodObservation> {
        let observations = self.pods.apply(event);
        let mut m = self.memory();
        for o in &observations {
            let Some(job) = &o.job else { continue };
            let e = &mut m.expectations;
            if o.appeared {
                e.creation_observed(&job.uid, 1);
            }
            if o.deleting {
                e.deletion_observed(&job.uid, &o.pod_uid);
            }
            if o.released {
                e.finalizer_removal_observed(&job.uid, &o.pod_uid);
            }
        }
        drop(m);
        self.metrics
            .cached_pods
            .set(i64::try_from(self.pods.len()).unwrap_or(i64::MAX));
        observations
    }

    /// The Job left the cache: forget it, and remember that its pods are orphans.
    pub fn job_gone(&self, uid: &str) {
        let mut m = self.memory();
        m.expectations.forget(uid);
        m.events.forget(uid);
        m.backoff.remove(uid);
        self.selector_lists.forget(uid);
        if m.managed.remove(uid) {
            self.metrics
                .jobs_managed
                .set(i64::try_from(m.managed.len()).unwrap_or(i64::MAX));
        }
        if m.gone.len() >= REMEMBERED_GONE_JOBS {
            m.gone.clear();
        }
        m.gone.insert(uid.to_owned());
    }

    /// Counts a Job whose `spec.managedBy` names another controller, once.
    pub fn saw_foreign(&self, job: &CachedJob) {
        if job.managed_by.is_some() && self.memory().foreign.insert(job.uid().to_owned()) {
            self.metrics.foreign_jobs_seen.inc();
        }
    }

    /// Whether the Job with this uid was deleted while the controller watched.
    pub fn is_gone(&self, uid: &str) -> bool {
        self.memory().gone.contains(uid)
    }

    /// Syncs one Job from the caches.
    pub async fn sync(&self, job: &CachedJob, now: Timestamp) -> Result<SyncReport, SyncError> {
        let uid = job.uid();
        if !self
            .config
            .runs(job.managed_by.as_deref(), job.worker.as_deref())
        {
            self.saw_foreign(job);
            return Ok(SyncReport {
                skipped: Some("managed by another controller"),
                ..SyncReport::default()
            });
        }
        if !self.pods.is_synced() {
            // Upstream's `WaitForNamedCacheSync`: an empty pod cache before its first list is
            // "not known yet", and planning from it would create again every pod that exists
            // (after a restart, a second pod for each index that finished while no controller
            // ran). The loop holds its syncs until the list is in; this guards other callers.
            return Ok(SyncReport {
                skipped: Some("pod cache not synced yet"),
                requeue_after: Some(Duration::from_secs(1)),
                ..SyncReport::default()
            });
        }
        if self
            .memory()
            .expectations
            .job_is_stale(uid, job.resource_version(), now)
        {
            // Our own last status write is not in the cache yet: planning from this Job would
            // act on a state we have already changed. Its watch event will wake us.
            return Ok(SyncReport {
                skipped: Some("cached Job older than our last status write"),
                requeue_after: Some(EXPECTATIONS_TIMEOUT),
                ..SyncReport::default()
            });
        }
        let started = Instant::now();
        let result = self.sync_from_cache(job, now).await;
        self.metrics
            .sync_duration
            .observe(started.elapsed().as_secs_f64());
        let label = match &result {
            Ok(_) => "success",
            Err(e) if e.is_conflict() => "conflict",
            Err(_) => "error",
        };
        self.metrics
            .syncs
            .get_or_create(&SyncLabels {
                result: label.to_owned(),
            })
            .inc();
        result
    }

    async fn sync_from_cache(
        &self,
        job: &CachedJob,
        now: Timestamp,
    ) -> Result<SyncReport, SyncError> {
        let uid = job.uid();
        let raw = job.value();
        let parsed = JobObject::parse(&raw).map_err(|e| SyncError::Decode(e.to_string()))?;
        let in_flight = self.in_flight(uid, now);
        let job_ref = JobRef {
            namespace: job.namespace().to_owned(),
            name: job.name().to_owned(),
            uid: uid.to_owned(),
        };
        let pods = self.pods_of(job, &parsed, &job_ref, now).await?;
        let p = plan(&parsed, &pods, now, &self.config, &in_flight);
        self.expect(uid, &p, now);
        let applied = executor::apply(&self.api, &raw, &p).await;
        self.settle(uid, job.resource_version(), &p, &applied, now);

        let events_recorded = self.record_events(&job_ref, &p, &applied, now);
        if self.events_out.delivery() == Delivery::Inline {
            self.events_out.write_pending(&self.api).await;
        }
        self.count(&parsed, &p, &applied);
        let finished = parsed.is_finished() || (applied.status_written && p.finished.is_some());
        self.remember(uid, &p, &applied, finished);
        let report = SyncReport {
            requeue_after: p.requeue_after,
            skipped: p.skipped.as_ref().map(|_| "plan skipped the Job"),
            status_written: applied.status_written,
            created: applied.created.len(),
            deleted: applied.deleted.len(),
            finalizers_removed: applied.finalizers_removed.len(),
            events_recorded,
            finished: p.finished.clone().filter(|_| applied.status_written),
        };
        self.report_or_error(report, applied)
    }

    /// What the controller remembers of the Job's writes in flight, for `plan`.
    fn in_flight(&self, uid: &str, now: Timestamp) -> InFlight {
        let mut m = self.memory();
        let backoff = m.backoff.get(uid).copied();
        let e = &mut m.expectations;
        InFlight {
            pods_settled: e.satisfied(uid, now),
            removing_finalizers: e.removing_finalizers(uid),
            deleting: e.deleting(uid),
            backoff,
        }
    }

    /// The Job's pods: claimed (adopted and released as its selector says), unless it is
    /// finished, when upstream's syncJob returns before claiming pods.
    async fn pods_of(
        &self,
        job: &CachedJob,
        parsed: &JobObject<'_>,
        job_ref: &JobRef,
        now: Timestamp,
    ) -> Result<Vec<Arc<CachedPod>>, SyncError> {
        if parsed.is_finished() {
            return Ok(self.pods.for_job(job.uid()));
        }
        let claiming = Claiming {
            api: &self.api,
            cache: &self.pods,
            lists: &self.selector_lists,
        };
        Ok(claiming.claim_pods(job, parsed, job_ref, now).await?)
    }

    /// After the writes: the back-off record once its failures are stored, and whether the
    /// Job is still managed (a finished one is forgotten).
    fn remember(&self, uid: &str, p: &Plan, applied: &Applied, finished: bool) {
        let mut m = self.memory();
        // Upstream's `updateBackoffRecord`: once the failures it counts are in the status.
        if let Some(record) = p.backoff
            && (applied.status_written || p.status.is_none())
            && applied.error.is_none()
        {
            m.backoff.insert(uid.to_owned(), record);
        }
        let changed = if finished {
            m.events.forget(uid);
            m.backoff.remove(uid);
            m.managed.remove(uid)
        } else {
            m.managed.insert(uid.to_owned())
        };
        if changed {
            self.metrics
                .jobs_managed
                .set(i64::try_from(m.managed.len()).unwrap_or(i64::MAX));
        }
    }

    /// The sync's result: the first failed write (a status the rules refused is counted), else
    /// creations that fell short, else the report.
    fn report_or_error(
        &self,
        report: SyncReport,
        applied: Applied,
    ) -> Result<SyncReport, SyncError> {
        match (applied.error, applied.create_error) {
            (Some(e), _) => {
                if let ApplyError::InvalidStatus(_) = &e {
                    self.metrics.rejected_status_writes.inc();
                }
                Err(e.into())
            }
            (None, Some(source)) => Err(ApplyError::Api {
                step: "creating a pod",
                source,
            }
            .into()),
            (None, None) => Ok(report),
        }
    }

    /// Before writing: what the cache is to show once the writes land.
    fn expect(&self, uid: &str, p: &Plan, now: Timestamp) {
        let mut m = self.memory();
        let e = &mut m.expectations;
        e.expect_creations(uid, p.create.len(), now);
        e.expect_deletions(uid, p.delete.iter().map(|d| d.pod.uid.as_str()), now);
        e.expect_finalizer_removals(uid, p.remove_finalizers.iter().map(|f| f.uid.as_str()));
    }

    /// After writing: the writes that failed or were never made will never show.
    fn settle(&self, uid: &str, version: &str, p: &Plan, applied: &Applied, now: Timestamp) {
        let mut m = self.memory();
        let e = &mut m.expectations;
        e.creation_observed(uid, p.create.len().saturating_sub(applied.created.len()));
        for d in &p.delete {
            if !applied.deleted.iter().any(|x| x.uid == d.pod.uid) {
                e.deletion_observed(uid, &d.pod.uid);
            }
        }
        for f in &p.remove_finalizers {
            if !applied.finalizers_removed.iter().any(|x| x.uid == f.uid) {
                e.finalizer_removal_observed(uid, &f.uid);
            }
        }
        if applied.status_written {
            e.wrote_status(uid, version, now);
        }
    }

    /// The sync's events, at most one per reason, through the Job's rate limit, into the
    /// outbox. A status the API refused carries its events with it: they are recorded when it
    /// is written.
    fn record_events(&self, job: &JobRef, p: &Plan, applied: &Applied, now: Timestamp) -> usize {
        let mut records: Vec<EventRecord> = Vec::new();
        if !applied.deleted.is_empty() {
            let names: Vec<String> = applied.deleted.iter().map(|d| d.name.clone()).collect();
            records.push(normal("SuccessfulDelete", pods_message("Deleted", &names)));
        }
        if !applied.created.is_empty() {
            records.push(normal(
                "SuccessfulCreate",
                pods_message("Created", &applied.created),
            ));
        }
        if let Some(source) = &applied.create_error {
            records.push(EventRecord {
                warning: true,
                reason: "FailedCreate".to_owned(),
                message: format!("Error creating: {source}"),
            });
        }
        if applied.error.is_none() {
            records.extend(p.events.iter().cloned());
        }
        let admitted: Vec<EventRecord> = {
            let mut m = self.memory();
            records
                .into_iter()
                .filter_map(|r| {
                    let reason = r.reason.clone();
                    let a = m.events.admit(&job.uid, r, now);
                    if a.is_none() {
                        tracing::debug!(job = %job.name, %reason, "event dropped: rate limited");
                        self.events_out.dropped("rate_limited", 1);
                    }
                    a
                })
                .collect()
        };
        let recorded = admitted.len();
        self.events_out.push(job, admitted, now);
        recorded
    }

    fn count(&self, job: &JobObject<'_>, p: &Plan, applied: &Applied) {
        if !applied.created.is_empty() {
            let reason = p
                .create
                .first()
                .map_or("new", |c| c.reason.label())
                .to_owned();
            self.metrics
                .pods_created
                .get_or_create(&CreatedLabels { reason })
                .inc_by(applied.created.len() as u64);
        }
        for failure in p
            .fail
            .iter()
            .filter(|f| applied.failed_pods.contains(&f.pod))
        {
            self.metrics
                .pod_start_timeouts
                .get_or_create(&StartTimeoutLabels {
                    reason: failure.reason.to_owned(),
                })
                .inc();
        }
        if let Some(finish) = p.finished.as_ref().filter(|_| applied.status_written) {
            let mode = if job.is_indexed() {
                INDEXED
            } else {
                NON_INDEXED
            };
            self.metrics
                .jobs_finished
                .get_or_create(&FinishedLabels {
                    completion_mode: mode.to_owned(),
                    result: if finish.succeeded {
                        "succeeded"
                    } else {
                        "failed"
                    }
                    .to_owned(),
                    reason: metric_reason(finish).to_owned(),
                })
                .inc();
        }
    }
}

fn normal(reason: &str, message: String) -> EventRecord {
    EventRecord {
        warning: false,
        reason: reason.to_owned(),
        message,
    }
}

/// The `reason` label of `jobs_finished`: the reasons users write are folded so the label's
/// values stay a small fixed set (the Job's condition keeps the full reason). KEP-4443's rule
/// names fold into upstream's `PodFailurePolicy`, and a success rule's own reason (KEP-3998's
/// `setSuccessCriterionMetReason`) into upstream's `SuccessPolicy`: a success is
/// `CompletionsReached` or a success rule's.
pub fn metric_reason(finish: &Finish) -> &str {
    let reason = finish.reason.as_str();
    if finish.succeeded {
        if reason == REASON_COMPLETIONS_REACHED {
            reason
        } else {
            REASON_SUCCESS_POLICY
        }
    } else if reason.starts_with(jobwarden_rules::rule_names::REASON_PREFIX) {
        REASON_POD_FAILURE_POLICY
    } else {
        reason
    }
}

#[cfg(test)]
mod tests {
    use super::executor::ApplyError;
    use super::{SyncError, metric_reason};
    use crate::cluster::ApiError;
    use crate::plan::Finish;
    use jobwarden_runtime::error_chain;

    /// A sync's errors keep their cause as `source` and never repeat it, so a log line's
    /// chain names each once.
    #[test]
    fn each_cause_is_printed_once() {
        let error = SyncError::from(ApplyError::Api {
            step: "writing status",
            source: ApiError::Conflict,
        });
        assert_eq!(
            error_chain(&error),
            "writing status: conflict: the object changed since it was read"
        );
        let encode = serde_json::from_str::<u8>("x").unwrap_err();
        let text = format!("cannot encode the status patch: {encode}");
        assert_eq!(error_chain(&ApplyError::Encode(encode)), text);
    }

    fn label(succeeded: bool, reason: &str) -> String {
        let finish = Finish {
            succeeded,
            reason: reason.to_owned(),
        };
        metric_reason(&finish).to_owned()
    }

    #[test]
    fn reasons_users_write_fold_into_one_metric_label() {
        for (succeeded, reason, want) in [
            (false, "PodFailurePolicy_ExitCode2", "PodFailurePolicy"),
            (false, "PodFailurePolicy_1", "PodFailurePolicy"),
            (false, "BackoffLimitExceeded", "BackoffLimitExceeded"),
            (false, "DeadlineExceeded", "DeadlineExceeded"),
            (true, "SuccessPolicy", "SuccessPolicy"),
            (true, "LeaderSucceeded", "SuccessPolicy"),
            (true, "WorkersSucceeded", "SuccessPolicy"),
            (true, "CompletionsReached", "CompletionsReached"),
        ] {
            assert_eq!(label(succeeded, reason), want, "{reason}");
        }
    }
}
