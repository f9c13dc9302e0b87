//! The executor: a Job's plan carried out step by step. The steps that take more than a call:
//! the record written, the copy made (or found to be another's), patched, mirrored and
//! deleted, each with its Events and metrics. Each says what it left: the Job as it wrote it,
//! nothing, or a look again at once.

use std::time::{Duration, Instant};

use jobwarden_events::JobRef;
use serde_json::Value;

use crate::api::ApiError;
use crate::copy;
use crate::placement::Unfit;
use crate::plan::{DeleteReason, Plan, Step};
use crate::sync::{Dispatcher, Outcome, SyncError, lock, resource_version};

/// What a step left.
pub(crate) enum Done {
    /// The user's Job as the step wrote it (the next write carries its resourceVersion).
    Wrote(Value),
    Nothing,
    /// Look at the Job again after this (a worker found unfit by trying).
    Again(Outcome),
}

const AT_ONCE: Outcome = Outcome {
    requeue_after: Duration::ZERO,
};

impl Dispatcher {
    /// The executor: each step in order (the longer ones below), stopping at the first
    /// that fails. `Ok(Some(..))` when a step asks to look again at once (a worker found unfit
    /// by trying).
    pub(super) async fn carry_out(
        &self,
        job: &JobRef,
        user: Value,
        plan: Plan,
    ) -> Result<Option<Outcome>, SyncError> {
        let (ns, name) = (job.namespace.as_str(), job.name.as_str());
        // The Job as last written by this sync: a later write in the same sync carries its
        // resourceVersion (the object changed only by this sync's own writes since `plan` read it).
        let mut current = user;
        for step in plan.steps {
            let done = match step {
                Step::Record {
                    to,
                    replacing,
                    moved_from,
                } => {
                    self.record(
                        job,
                        &current,
                        &to,
                        replacing.as_deref(),
                        moved_from.as_deref(),
                    )
                    .await?
                }
                Step::Create { worker, copy } => self.create(job, &worker, &copy).await?,
                Step::PatchCopy { worker, patch } => self.patch_copy(job, &worker, &patch).await?,
                Step::Mirror { worker, patch } => {
                    self.mirror(job, &current, &worker, patch).await?
                }
                Step::DeleteCopy {
                    worker,
                    uid,
                    reason,
                } => self.delete_copy(job, &worker, &uid, reason).await?,
                Step::MarkLost { since } => Done::Wrote(
                    self.management
                        .lost_mark(ns, name, Some(&since.to_string()))
                        .await?,
                ),
                Step::ClearLost => Done::Wrote(self.management.lost_mark(ns, name, None).await?),
                Step::Fail { mut patch, .. } => {
                    patch["metadata"]["resourceVersion"] =
                        Value::String(resource_version(&current).to_owned());
                    Done::Wrote(self.management.status(ns, name, &patch).await?)
                }
                Step::Event(record) => {
                    self.say(job, record.warning, &record.reason, record.message);
                    Done::Nothing
                }
            };
            match done {
                Done::Wrote(written) => current = written,
                Done::Nothing => {}
                Done::Again(outcome) => return Ok(Some(outcome)),
            }
        }
        Ok(None)
    }

    /// Writes the record (`jobwarden.io/worker: to`, and the workers it left), counting the
    /// Job on `to` from now (and giving its room and count back if the write fails).
    pub(crate) async fn record(
        &self,
        job: &JobRef,
        current: &Value,
        to: &str,
        replacing: Option<&str>,
        moved_from: Option<&str>,
    ) -> Result<Done, SyncError> {
        let (ns, name) = (job.namespace.as_str(), job.name.as_str());
        lock(&self.loads).chose(&job.uid, to);
        let written = match self
            .management
            .record(ns, name, resource_version(current), to, moved_from)
            .await
        {
            Ok(written) => written,
            Err(e) => {
                lock(&self.loads).unchose(&job.uid);
                let _ = lock(&self.reservations).forget(&job.uid);
                return Err(e.into());
            }
        };
        if self.link(to).is_some_and(|l| l.is_local()) {
            self.say(
                job,
                false,
                "Dispatched",
                format!(
                    "Placed on worker {to}, this cluster: jobwarden's Job controller runs it here"
                ),
            );
        }
        if let Some(from) = replacing {
            let why = lock(&self.avoid).get(&job.uid).and_then(|a| {
                a.iter()
                    .find(|(w, _)| *w == from)
                    .map(|(_, why)| why.clone())
            });
            self.metrics.redispatched(match why {
                _ if moved_from.is_some() => "unschedulable",
                Some(Unfit::Draining) => "worker_draining",
                Some(Unfit::HoldsAnotherJob) => "holds_another_job",
                Some(Unfit::NoNamespace) => "no_namespace",
                Some(Unfit::Refused(_)) => "copy_refused",
                _ => "worker_lost",
            });
        }
        Ok(Done::Wrote(written))
    }

    /// Makes the copy on `worker`; a Job of its name there that is not its copy, a namespace
    /// missing there, or a refusal makes the worker unfit for it (and the Job is placed again).
    pub(crate) async fn create(
        &self,
        job: &JobRef,
        worker: &str,
        made: &Value,
    ) -> Result<Done, SyncError> {
        let (ns, name) = (job.namespace.as_str(), job.name.as_str());
        let Some(api) = self.link(worker).and_then(|l| l.api()) else {
            return Err(SyncError::NotConnected(worker.to_owned()));
        };
        match api.create(made).await {
            Ok(_) => {
                self.metrics.created(worker);
                self.say(
                    job,
                    false,
                    "Dispatched",
                    format!("Created the Job's copy on worker {worker}"),
                );
                Ok(Done::Nothing)
            }
            Err(ApiError::AlreadyExists) => {
                let found = api.get(ns, name).await?;
                let ours = found
                    .as_ref()
                    .is_some_and(|f| copy::is_copy_of(f, &job.uid, &self.settings.origin));
                if !ours {
                    self.unfit(job, worker, Unfit::HoldsAnotherJob);
                    self.say(job, true, "WorkerHoldsAnotherJob", format!(
                        "worker {worker} holds a Job {ns}/{name} that is not this Job's copy: it is left untouched, and the Job goes elsewhere"
                    ));
                    return Ok(Done::Again(AT_ONCE));
                }
                if found.as_ref().and_then(|f| copy::worker_of(f)) != Some(worker) {
                    // Its copy for another worker of the policy on the same cluster (the Job
                    // moved between them): that worker's fence takes it back, then this one is
                    // made.
                    return Ok(Done::Again(Outcome {
                        requeue_after: crate::worker::link::PROBE_EVERY,
                    }));
                }
                // Ours, made by an earlier sync or another leader: adopted; the watch brings it.
                Ok(Done::Nothing)
            }
            Err(ApiError::NotFound) => {
                if let Some(link) = self.link(worker) {
                    link.namespace_missing(ns);
                }
                self.unfit(job, worker, Unfit::NoNamespace);
                Ok(Done::Again(AT_ONCE))
            }
            Err(ApiError::Forbidden(why)) => {
                self.say(
                    job,
                    true,
                    "CopyRefused",
                    format!("worker {worker} refused the Job's copy: {why}"),
                );
                self.unfit(job, worker, Unfit::Refused(format!("forbidden: {why}")));
                Ok(Done::Again(AT_ONCE))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Patches the copy's spec (suspend, resume, what may change while suspended).
    pub(crate) async fn patch_copy(
        &self,
        job: &JobRef,
        worker: &str,
        patch: &json_patch::Patch,
    ) -> Result<Done, SyncError> {
        let Some(api) = self.link(worker).and_then(|l| l.api()) else {
            return Err(SyncError::NotConnected(worker.to_owned()));
        };
        if let Err(e) = api.patch(&job.namespace, &job.name, patch).await {
            if !matches!(e, ApiError::Conflict) {
                self.say(
                    job,
                    true,
                    "CopyNotUpdated",
                    format!("the change could not reach the Job's copy on worker {worker}: {e}"),
                );
            }
            return Err(e.into());
        }
        Ok(Done::Nothing)
    }

    /// Writes the copy's status on the user's Job, behind the resourceVersion last written.
    pub(crate) async fn mirror(
        &self,
        job: &JobRef,
        current: &Value,
        worker: &str,
        mut patch: Value,
    ) -> Result<Done, SyncError> {
        let (ns, name) = (job.namespace.as_str(), job.name.as_str());
        patch["metadata"]["resourceVersion"] = Value::String(resource_version(current).to_owned());
        let asked = Instant::now();
        let answer = self.management.status(ns, name, &patch).await;
        self.metrics
            .mirror_write
            .observe(asked.elapsed().as_secs_f64());
        match answer {
            Ok(written) => {
                self.metrics.mirrored("written");
                if let Some(at) = lock(&self.pending).remove(&format!("{ns}/{name}")) {
                    self.metrics.mirror_lag.observe(at.elapsed().as_secs_f64());
                }
                Ok(Done::Wrote(written))
            }
            Err(e) => {
                if matches!(e, ApiError::Conflict) {
                    self.metrics.mirrored("conflict");
                } else {
                    self.metrics.mirrored("error");
                    self.say(job, true, "MirrorFailed", format!("the status of the Job's copy on worker {worker} could not be written here: {e}"));
                }
                Err(e.into())
            }
        }
    }

    /// Deletes the copy on `worker`, and its pods unless it finished.
    pub(crate) async fn delete_copy(
        &self,
        job: &JobRef,
        worker: &str,
        uid: &str,
        reason: DeleteReason,
    ) -> Result<Done, SyncError> {
        let Some(api) = self.link(worker).and_then(|l| l.api()) else {
            return Err(SyncError::NotConnected(worker.to_owned()));
        };
        api.delete(&job.namespace, &job.name, uid).await?;
        if reason != DeleteReason::Finished {
            // Still running: stopped now, not when the worker's garbage collector gets to them.
            api.delete_pods_of(&job.namespace, uid).await?;
        }
        self.metrics.deleted(worker, reason.label());
        let why = match reason {
            // The Job shows its end (its status, `kubectl describe`'s "Completed At" and pod
            // counts), and a finished Job's copy always goes then: an Event would only say so
            // again, one write more per Job on the management cluster (`jobwarden explain`
            // still tells where the copy went).
            DeleteReason::Finished => return Ok(Done::Nothing),
            DeleteReason::JobFailed => "the Job failed here",
            DeleteReason::JobDeleted => "the Job is being deleted",
            DeleteReason::Moved => "its pods could not be scheduled there; the Job moves",
            DeleteReason::Drained => "the worker is draining; the Job moves",
        };
        self.say(
            job,
            false,
            "CopyDeleted",
            format!("Deleted the Job's copy on worker {worker} ({why}); its pods go with it"),
        );
        Ok(Done::Nothing)
    }
}
