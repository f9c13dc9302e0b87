//! Applies a `Plan` through a `ClusterApi`: creations, then the status, then finalizers, then
//! the pods that did not start in time failed, then deletions. Pods come first, as in
//! upstream's `syncJob` (`manageJob` before the status write), so `status.active` counts only
//! pods that exist: when a creation fails, the status written counts the pods that were made.
//! The status comes before the finalizers, which keeps every pod outcome counted exactly once.
//! The executor decides nothing itself, never writes a status that breaks the
//! status-transition rules, and reports exactly which writes were made, so the caller's
//! expectations match what the API server will show. Pods are created in
//! slow-start batches (1, 2, 4, …) as upstream's `manageJob` does, so a quota or an admission
//! webhook refusing pods stops the burst after the first failure.

use futures::StreamExt as _;
use futures::future::join_all;
use jobwarden_rules::JobObject;
use k8s_openapi::api::batch::v1::JobStatus;
use serde_json::Value;

use super::status_patch::{patched, status_patch};
use crate::cluster::{ApiError, ClusterApi};
use crate::plan::{Plan, PodRef};

/// Finalizer removals and deletions in flight at once for one Job: upstream runs them all in
/// parallel; a bound keeps one large Job from queueing hundreds of requests at a time.
const PARALLEL_POD_WRITES: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// `plan` produced a status the rules reject: a bug, so nothing is written.
    #[error("planned status breaks the status rules: {0}")]
    InvalidStatus(String),
    #[error("cannot encode the status patch")]
    Encode(#[from] serde_json::Error),
    /// `step` says which write failed (`writing status`, `deleting a pod`, …); the API's
    /// answer is the source.
    #[error("{step}")]
    Api {
        step: &'static str,
        #[source]
        source: ApiError,
    },
}

impl ApplyError {
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            ApplyError::Api {
                source: ApiError::Conflict,
                ..
            }
        )
    }
}

/// What was done. Every write not listed here was not made (or failed).
#[derive(Debug, Default)]
pub struct Applied {
    pub status_written: bool,
    pub finalizers_removed: Vec<PodRef>,
    /// Pods failed for not starting in time.
    pub failed_pods: Vec<PodRef>,
    pub deleted: Vec<PodRef>,
    /// Names of the pods created.
    pub created: Vec<String>,
    /// Why the creations stopped short of the plan. The status, finalizer and deletion steps
    /// still ran, as upstream's sync goes on to its status write after a `manageJob` error.
    pub create_error: Option<ApiError>,
    /// The first failed write of the status, finalizer and deletion steps; the steps after it
    /// were not attempted.
    pub error: Option<ApplyError>,
}

impl Applied {
    fn failed(mut self, step: &'static str, source: ApiError) -> Applied {
        self.error = Some(ApplyError::Api { step, source });
        self
    }
}

/// The status rules on the Job as it would be stored after `patch`.
pub fn check_status_patch(stored: &Value, patch: &Value) -> Result<(), ApplyError> {
    let after = patched(stored, patch);
    let (Ok(new), Ok(old)) = (JobObject::parse(&after), JobObject::parse(stored)) else {
        return Err(ApplyError::InvalidStatus(
            "the patched Job does not decode".to_owned(),
        ));
    };
    let errors = jobwarden_rules::validate_status_update(&new, &old);
    if errors.is_empty() {
        return Ok(());
    }
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    Err(ApplyError::InvalidStatus(text.join("; ")))
}

/// Applies `plan` to the Job `stored` (its raw JSON as cached). Stops after the first failed
/// write of the status, finalizer and deletion steps: the next `plan` starts from whatever the
/// API then holds.
pub async fn apply<A: ClusterApi>(api: &A, stored: &Value, plan: &Plan) -> Applied {
    let meta = stored.get("metadata");
    let field = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let (namespace, name) = (field("namespace"), field("name"));
    let mut done = Applied::default();

    create_pods(api, namespace, plan, &mut done).await;

    let not_created = plan.create.len().saturating_sub(done.created.len());
    match write_status(api, stored, (namespace, name), plan, not_created).await {
        Ok(written) => done.status_written = written,
        Err(e) => {
            done.error = Some(e);
            return done;
        }
    }
    if let Some(e) = remove_finalizers(api, namespace, plan, &mut done).await {
        return done.failed("removing a finalizer", e);
    }
    // A pod that did not start in time is failed before it is deleted, so that the condition
    // saying why is there for the pod failure policy to match.
    if let Some(e) = fail_pods(api, namespace, plan, &mut done).await {
        return done.failed("failing a pod that did not start", e);
    }
    if let Some(e) = delete_pods(api, namespace, plan, &mut done).await {
        return done.failed("deleting a pod", e);
    }
    done
}

/// The status step: the planned status (adjusted for creations that fell short) as a patch,
/// checked against the status rules before it is sent; whether a status was written (none is
/// when nothing changes).
async fn write_status<A: ClusterApi>(
    api: &A,
    stored: &Value,
    (namespace, name): (&str, &str),
    plan: &Plan,
    not_created: usize,
) -> Result<bool, ApplyError> {
    let Some(status) = status_to_write(stored, plan, not_created) else {
        return Ok(false);
    };
    let Some(patch) = status_patch(stored, &status)? else {
        return Ok(false);
    };
    if let Err(e) = check_status_patch(stored, &patch) {
        tracing::error!(job = name, namespace, error = %e, "refusing to write a status that breaks the rules");
        return Err(e);
    }
    if let Err(source) = api.patch_job_status(namespace, name, &patch).await {
        return Err(ApplyError::Api {
            step: "writing status",
            source,
        });
    }
    Ok(true)
}

/// The finalizer step; the first error other than a pod already gone.
async fn remove_finalizers<A: ClusterApi>(
    api: &A,
    namespace: &str,
    plan: &Plan,
    done: &mut Applied,
) -> Option<ApiError> {
    let results = parallel(
        plan.remove_finalizers
            .iter()
            .map(|pod| api.remove_pod_finalizer(namespace, pod))
            .collect(),
    )
    .await;
    // A pod already gone (or replaced by another of the same name) holds no finalizer.
    first_error(plan.remove_finalizers.iter().zip(results), |pod| {
        done.finalizers_removed.push(pod.clone())
    })
}

/// The step failing pods that did not start in time; the first error other than a pod gone.
async fn fail_pods<A: ClusterApi>(
    api: &A,
    namespace: &str,
    plan: &Plan,
    done: &mut Applied,
) -> Option<ApiError> {
    let results = parallel(
        plan.fail
            .iter()
            .map(|f| api.fail_pod(namespace, f))
            .collect(),
    )
    .await;
    first_error(plan.fail.iter().zip(results), |failure| {
        done.failed_pods.push(failure.pod.clone())
    })
}

/// The deletion step; the first error other than a pod already gone.
async fn delete_pods<A: ClusterApi>(
    api: &A,
    namespace: &str,
    plan: &Plan,
    done: &mut Applied,
) -> Option<ApiError> {
    let pods: Vec<PodRef> = plan.delete.iter().map(|d| d.pod.clone()).collect();
    let results = parallel(
        pods.iter()
            .map(|pod| api.delete_pod(namespace, pod))
            .collect(),
    )
    .await;
    // A pod already gone (or replaced by another of the same name) is deleted.
    first_error(pods.into_iter().zip(results), |pod| done.deleted.push(pod))
}

/// Each write's target handed to `succeeded` unless its write failed for a reason other than
/// the pod being gone; the first such failure. Every result is looked at, so every write that
/// was made is reported.
fn first_error<T>(
    results: impl Iterator<Item = (T, Result<(), ApiError>)>,
    mut succeeded: impl FnMut(T),
) -> Option<ApiError> {
    let mut first = None;
    for (target, r) in results {
        match r {
            Err(e) if !e.pod_is_gone() => {
                first.get_or_insert(e);
            }
            _ => succeeded(target),
        }
    }
    first
}

/// Upstream's slow start: batches of 1, 2, 4, …; a batch with a failure ends the burst.
async fn create_pods<A: ClusterApi>(api: &A, namespace: &str, plan: &Plan, done: &mut Applied) {
    let mut pending = plan.create.iter();
    let mut batch = 1;
    loop {
        let chunk: Vec<_> = pending.by_ref().take(batch).collect();
        if chunk.is_empty() {
            return;
        }
        let results = join_all(chunk.iter().map(|c| api.create_pod(namespace, &c.pod))).await;
        for r in results {
            match r {
                Ok(pod_name) => done.created.push(pod_name),
                Err(e) => {
                    done.create_error.get_or_insert(e);
                }
            }
        }
        if done.create_error.is_some() {
            return;
        }
        batch *= 2;
    }
}

/// The planned status, with `active` counting only the pods that were created. A plan that
/// changes nothing else still needs a write when creations fell short: the stored `active`
/// may already count them.
fn status_to_write(stored: &Value, plan: &Plan, not_created: usize) -> Option<JobStatus> {
    if not_created == 0 {
        return plan.status.clone();
    }
    let mut status = match &plan.status {
        Some(s) => s.clone(),
        None => serde_json::from_value(stored.get("status")?.clone()).ok()?,
    };
    let missing = i32::try_from(not_created).unwrap_or(i32::MAX);
    status.active = Some(status.active.unwrap_or(0).saturating_sub(missing).max(0));
    Some(status)
}

/// Runs the writes, a bounded number at a time; results in their order.
async fn parallel<Fut>(writes: Vec<Fut>) -> Vec<Result<(), ApiError>>
where
    Fut: Future<Output = Result<(), ApiError>>,
{
    futures::stream::iter(writes)
        .buffered(PARALLEL_POD_WRITES)
        .collect()
        .await
}
