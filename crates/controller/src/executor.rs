//! Applies a `Plan` through a small `ClusterApi`, in the order that keeps every pod outcome
//! counted exactly once: status, then finalizers, then deletions, creations and events. It
//! decides nothing itself, and never writes a status that breaks the status-transition rules.

use jobwarden_rules::JobObject;
use serde_json::Value;

use crate::plan::{JobEvent, Plan, PodRef};
use crate::status_patch::{patched, status_patch};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The resourceVersion precondition failed: someone else wrote first.
    #[error("conflict: the object changed since it was read")]
    Conflict,
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    Other(String),
}

/// The writes the controller makes. The real one is `kube_api::KubeApi`; tests use an
/// in-memory cluster.
pub trait ClusterApi {
    /// A merge patch of `jobs/status` carrying `metadata.resourceVersion` as a precondition.
    fn patch_job_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Removes jobwarden's tracking finalizer, and only it. A pod already gone is fine.
    fn remove_pod_finalizer(
        &self,
        namespace: &str,
        pod: &PodRef,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Deletes the pod with this uid. A pod already gone is fine.
    fn delete_pod(
        &self,
        namespace: &str,
        pod: &PodRef,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Creates the pod and returns its generated name.
    fn create_pod(
        &self,
        namespace: &str,
        pod: &Value,
    ) -> impl Future<Output = Result<String, ApiError>> + Send;
    /// Best effort: a lost event loses no state.
    fn emit_event(
        &self,
        job: &Value,
        event: &JobEvent,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// `plan` produced a status the rules reject: a bug, so nothing is written.
    #[error("planned status breaks the status rules: {0}")]
    InvalidStatus(String),
    #[error("cannot encode the status patch: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("{step}: {source}")]
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

/// What was done, for metrics.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Applied {
    pub status_written: bool,
    pub finalizers_removed: usize,
    pub deleted: usize,
    pub created: usize,
}

fn api(step: &'static str) -> impl FnOnce(ApiError) -> ApplyError {
    move |source| ApplyError::Api { step, source }
}

fn event(warning: bool, reason: &str, message: String) -> JobEvent {
    JobEvent {
        warning,
        reason: reason.to_owned(),
        message,
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

/// Applies `plan` to the Job `stored` (its raw JSON as read). Stops at the first failed write:
/// the next `plan` starts from whatever the API then holds.
pub async fn apply<A: ClusterApi>(
    api_: &A,
    stored: &Value,
    plan: &Plan,
) -> Result<Applied, ApplyError> {
    let meta = stored.get("metadata");
    let field = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let (namespace, name) = (field("namespace"), field("name"));
    let mut done = Applied::default();

    if let Some(status) = &plan.status
        && let Some(patch) = status_patch(stored, status)?
    {
        if let Err(e) = check_status_patch(stored, &patch) {
            tracing::error!(job = name, namespace, error = %e, "refusing to write a status that breaks the rules");
            return Err(e);
        }
        api_.patch_job_status(namespace, name, &patch)
            .await
            .map_err(api("writing status"))?;
        done.status_written = true;
    }
    for pod in &plan.remove_finalizers {
        api_.remove_pod_finalizer(namespace, pod)
            .await
            .map_err(api("removing a finalizer"))?;
        done.finalizers_removed += 1;
    }
    for deletion in &plan.delete {
        api_.delete_pod(namespace, &deletion.pod)
            .await
            .map_err(api("deleting a pod"))?;
        done.deleted += 1;
        let note = event(
            false,
            "SuccessfulDelete",
            format!("Deleted pod: {}", deletion.pod.name),
        );
        publish(api_, stored, &note).await;
    }
    for creation in &plan.create {
        match api_.create_pod(namespace, &creation.pod).await {
            Ok(pod_name) => {
                done.created += 1;
                publish(
                    api_,
                    stored,
                    &event(
                        false,
                        "SuccessfulCreate",
                        format!("Created pod: {pod_name}"),
                    ),
                )
                .await;
            }
            Err(e) => {
                publish(
                    api_,
                    stored,
                    &event(true, "FailedCreate", format!("Error creating: {e}")),
                )
                .await;
                return Err(api("creating a pod")(e));
            }
        }
    }
    for e in &plan.events {
        publish(api_, stored, e).await;
    }
    Ok(done)
}

async fn publish<A: ClusterApi>(api_: &A, stored: &Value, e: &JobEvent) {
    if let Err(err) = api_.emit_event(stored, e).await {
        tracing::warn!(reason = %e.reason, error = %err, "could not record an event");
    }
}
