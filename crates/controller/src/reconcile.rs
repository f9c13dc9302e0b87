//! The kube-runtime wiring: watches Jobs and the pods that carry a Job uid label in every
//! namespace, and for each Job reads it and its pods fresh, plans, applies. It acts only on
//! Jobs whose `spec.managedBy` is this controller's, and on no other Job or pod.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use jobwarden_rules::JobObject;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::executor::{self, ApplyError, ClusterApi};
use crate::kube_api::{KubeApi, api_error};
use crate::metrics::{ControllerMetrics, CreatedLabels, FinishedLabels, SyncLabels};
use crate::plan::{PlanConfig, PodRef, is_managed_by, plan};
use jobwarden_rules::well_known::{CONTROLLER_UID_LABEL, INDEXED, NON_INDEXED, TRACKING_FINALIZER};

/// A safety net: look at every managed Job at least this often even if no event arrives.
const RESYNC: Duration = Duration::from_secs(300);
const RETRY: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("reading from the API: {0}")]
    Read(#[from] kube::Error),
    #[error("decoding the Job: {0}")]
    Decode(String),
    #[error(transparent)]
    Apply(#[from] ApplyError),
}

pub struct Context {
    pub client: Client,
    pub api: KubeApi,
    pub plan_config: PlanConfig,
    pub metrics: ControllerMetrics,
    /// Unfinished managed Jobs, by namespace/name, for the `jobs_managed` gauge.
    managed: Mutex<HashSet<String>>,
    /// Uids of foreign Jobs already counted.
    foreign: Mutex<HashSet<String>>,
}

impl Context {
    pub fn new(
        client: Client,
        plan_config: PlanConfig,
        metrics: ControllerMetrics,
        identity: &str,
    ) -> Self {
        Context {
            api: KubeApi::new(client.clone(), &plan_config.controller_name, identity),
            client,
            plan_config,
            metrics,
            managed: Mutex::default(),
            foreign: Mutex::default(),
        }
    }

    fn set_managed(&self, key: String, unfinished: bool) {
        let mut set = self.managed.lock().unwrap_or_else(|e| e.into_inner());
        if unfinished {
            set.insert(key);
        } else {
            set.remove(&key);
        }
        self.metrics
            .jobs_managed
            .set(i64::try_from(set.len()).unwrap_or(i64::MAX));
    }

    fn saw_foreign(&self, uid: String) {
        let mut set = self.foreign.lock().unwrap_or_else(|e| e.into_inner());
        if set.insert(uid) {
            self.metrics.foreign_jobs_seen.inc();
        }
    }
}

/// The Job a pod belongs to, from its controller owner reference.
fn owner_job(pod: &Pod) -> Option<(String, String)> {
    pod.owner_references()
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == "Job" && o.api_version == "batch/v1")
        .map(|o| (o.name.clone(), o.uid.clone()))
}

fn has_our_finalizer(pod: &Pod) -> bool {
    pod.finalizers().iter().any(|f| f == TRACKING_FINALIZER)
}

pub async fn reconcile(job: Arc<Job>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let managed_by = job.spec.as_ref().and_then(|s| s.managed_by.as_deref());
    if managed_by != Some(ctx.plan_config.controller_name.as_str()) {
        if managed_by.is_some() {
            ctx.saw_foreign(job.uid().unwrap_or_default());
        }
        return Ok(Action::await_change());
    }
    let started = Instant::now();
    let result = sync(&job, &ctx).await;
    ctx.metrics
        .sync_duration
        .observe(started.elapsed().as_secs_f64());
    let label = match &result {
        Ok(_) => "success",
        Err(ReconcileError::Apply(e)) if e.is_conflict() => "conflict",
        Err(_) => "error",
    };
    ctx.metrics
        .syncs
        .get_or_create(&SyncLabels {
            result: label.to_owned(),
        })
        .inc();
    match result {
        // Someone wrote the Job since it was read: read again at once.
        Err(ReconcileError::Apply(e)) if e.is_conflict() => {
            Ok(Action::requeue(Duration::from_millis(100)))
        }
        other => other,
    }
}

/// Reads the Job and its pods fresh from the API (not the watch cache), so a plan never acts
/// on a state older than its own last write.
async fn sync(job: &Job, ctx: &Context) -> Result<Action, ReconcileError> {
    let namespace = job.namespace().unwrap_or_default();
    let name = job.name_any();
    let key = format!("{namespace}/{name}");
    let jobs: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &namespace,
        &ApiResource::erase::<Job>(&()),
    );
    let Some(fresh) = jobs.get_opt(&name).await? else {
        ctx.set_managed(key, false);
        return Ok(Action::await_change());
    };
    let raw: Value =
        serde_json::to_value(&fresh).map_err(|e| ReconcileError::Decode(e.to_string()))?;
    let parsed = JobObject::parse(&raw).map_err(|e| ReconcileError::Decode(e.to_string()))?;
    if !is_managed_by(&parsed, &ctx.plan_config.controller_name) {
        // The name now belongs to a different Job.
        ctx.set_managed(key, false);
        return Ok(Action::await_change());
    }
    let uid = parsed.metadata.uid.clone().unwrap_or_default();
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), &namespace)
        .list(&ListParams::default().labels(&format!("{CONTROLLER_UID_LABEL}={uid}")))
        .await?
        .items;
    let p = plan(&parsed, &pods, Timestamp::now(), &ctx.plan_config);
    let applied = executor::apply(&ctx.api, &raw, &p).await;
    if let Err(ApplyError::InvalidStatus(_)) = &applied {
        ctx.metrics.rejected_status_writes.inc();
    }
    let applied = applied?;
    for creation in p.create.iter().take(applied.created) {
        ctx.metrics
            .pods_created
            .get_or_create(&CreatedLabels {
                reason: creation.reason.label().to_owned(),
            })
            .inc();
    }
    if let Some(finish) = &p.finished {
        let mode = if parsed.is_indexed() {
            INDEXED
        } else {
            NON_INDEXED
        };
        ctx.metrics
            .jobs_finished
            .get_or_create(&FinishedLabels {
                completion_mode: mode.to_owned(),
                result: if finish.succeeded {
                    "succeeded"
                } else {
                    "failed"
                }
                .to_owned(),
                reason: metric_reason(&finish.reason).to_owned(),
            })
            .inc();
    }
    ctx.set_managed(key, !parsed.is_finished() && p.finished.is_none());
    Ok(Action::requeue(
        p.requeue_after.unwrap_or(RESYNC).min(RESYNC),
    ))
}

fn error_policy(job: Arc<Job>, error: &ReconcileError, _ctx: Arc<Context>) -> Action {
    tracing::warn!(job = %job.name_any(), namespace = ?job.namespace(), %error, "sync failed; retrying");
    Action::requeue(RETRY)
}

/// The `reason` label of `jobs_finished`: KEP-4443's rule names are the user's words, so they
/// are folded into upstream's `PodFailurePolicy` to keep the label's values a small fixed set
/// (the Job's condition keeps the full reason).
fn metric_reason(reason: &str) -> &str {
    if reason.starts_with(jobwarden_rules::rule_names::REASON_PREFIX) {
        "PodFailurePolicy"
    } else {
        reason
    }
}

/// A pod with our finalizer whose Job is gone (or finished) can never be counted: let it go,
/// as upstream's orphan-pod sync does. Checked against the API, not the cache, before acting.
async fn release_orphan(
    ctx: &Context,
    jobs: &Store<Job>,
    pod: OrphanCandidate,
) -> Result<(), kube::Error> {
    let cached = jobs.get(&ObjectRef::new(&pod.job_name).within(&pod.namespace));
    if cached.is_some_and(|j| j.uid().as_deref() == Some(pod.job_uid.as_str()) && !finished(&j)) {
        return Ok(());
    }
    let fresh = Api::<Job>::namespaced(ctx.client.clone(), &pod.namespace)
        .get_opt(&pod.job_name)
        .await?;
    if let Some(job) = &fresh
        && job.uid().as_deref() == Some(pod.job_uid.as_str())
    {
        let ours = job.spec.as_ref().and_then(|s| s.managed_by.as_deref())
            == Some(ctx.plan_config.controller_name.as_str());
        if !ours || !finished(job) {
            return Ok(());
        }
    }
    tracing::info!(pod = %pod.pod.name, namespace = %pod.namespace, "releasing a pod whose Job is gone");
    if let Err(e) = ctx.api.remove_pod_finalizer(&pod.namespace, &pod.pod).await {
        tracing::warn!(pod = %pod.pod.name, error = %e, "could not release an orphan pod");
    }
    Ok(())
}

fn finished(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
}

struct OrphanCandidate {
    namespace: String,
    pod: PodRef,
    job_name: String,
    job_uid: String,
}

/// Runs the reconcile loop until `stop` resolves, then lets in-flight syncs finish.
pub async fn run_controller(
    ctx: Arc<Context>,
    stop: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let client = ctx.client.clone();
    let (orphan_tx, mut orphan_rx) = mpsc::unbounded_channel::<OrphanCandidate>();
    let pods_wc = watcher::Config::default().labels(CONTROLLER_UID_LABEL);
    let controller = Controller::new(Api::<Job>::all(client.clone()), watcher::Config::default())
        .watches(Api::<Pod>::all(client), pods_wc, move |pod: Pod| {
            let owner = owner_job(&pod);
            if let Some((job_name, job_uid)) = owner.clone()
                && has_our_finalizer(&pod)
            {
                let _ = orphan_tx.send(OrphanCandidate {
                    namespace: pod.namespace().unwrap_or_default(),
                    pod: PodRef {
                        name: pod.name_any(),
                        uid: pod.uid().unwrap_or_default(),
                    },
                    job_name,
                    job_uid,
                });
            }
            owner
                .map(|(name, _)| ObjectRef::new(&name).within(&pod.namespace().unwrap_or_default()))
        });
    let store = controller.store();
    let orphan_ctx = ctx.clone();
    let orphans = tokio::spawn(async move {
        while let Some(candidate) = orphan_rx.recv().await {
            if let Err(e) = release_orphan(&orphan_ctx, &store, candidate).await {
                tracing::warn!(error = %api_error(e), "checking an orphan pod");
            }
        }
    });
    controller
        .graceful_shutdown_on(stop)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "controller event");
            }
        })
        .await;
    orphans.abort();
}

#[cfg(test)]
mod tests {
    use super::metric_reason;

    #[test]
    fn named_failure_reasons_fold_into_one_metric_label() {
        assert_eq!(
            metric_reason("PodFailurePolicy_ExitCode2"),
            "PodFailurePolicy"
        );
        assert_eq!(metric_reason("PodFailurePolicy_1"), "PodFailurePolicy");
        assert_eq!(
            metric_reason("BackoffLimitExceeded"),
            "BackoffLimitExceeded"
        );
        assert_eq!(metric_reason("SuccessPolicy"), "SuccessPolicy");
    }
}
