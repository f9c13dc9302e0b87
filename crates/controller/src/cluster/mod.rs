//! The writes the controller makes (and its one read outside the caches), as a small trait: the
//! real implementation is `kube_api::KubeApi`; `jobwarden-fake-cluster`'s `InMemoryCluster`
//! stands in for kube-apiserver in tests, the scale benchmark and `jobwarden simulate`. Reads
//! never go through here: the controller reads its watch caches.

pub(crate) mod kube_api;

use std::sync::Arc;

use jobwarden_events::JobRef;
use jobwarden_runtime::events::{EventWriteError, EventWriter};
use kube::core::Status;
use serde_json::Value;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::plan::{PodRef, PodStartFailure};
use crate::pods::CachedPod;

#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// A precondition (resourceVersion or uid) failed: someone else wrote first.
    #[error("conflict: the object changed since it was read")]
    Conflict,
    #[error("not found")]
    NotFound,
    /// The API server refused the request for another reason: its Status says why, in
    /// kube-apiserver's words (shown as they are: `simulate` prints them).
    #[error("{}", .0.message)]
    Refused(Box<Status>),
    /// The request got no answer from the API server (connection, TLS, a body that does not
    /// decode): kube's error, with its own causes.
    #[error("the request to the API server failed")]
    Request(#[source] Arc<kube::Error>),
    /// This replica is not the leader any more (its writes are fenced): nothing was sent.
    #[error("not the leader any more: the write was not sent")]
    NotLeading,
    /// The Job's selector is not one a LIST can carry.
    #[error("the selector cannot be sent")]
    Selector(#[source] Arc<kube::core::ParseExpressionError>),
    /// The planned pod is not a Pod kube's client can send.
    #[error("the pod to create does not decode")]
    PodManifest(#[source] Arc<serde_json::Error>),
}

impl ApiError {
    /// kube-apiserver's refusal with `code`, `reason` (`Invalid`, `BadRequest`, ...) and
    /// `message`, as its Status carries them.
    pub fn refused(code: u16, reason: &str, message: impl Into<String>) -> ApiError {
        ApiError::Refused(Box::new(
            Status::failure(&message.into(), reason).with_code(code),
        ))
    }

    /// Whether the object a pod write names is gone: not found, or (its uid precondition
    /// failing) replaced by another object of the same name. Either way nothing is left to
    /// write to, and the write's purpose holds.
    pub fn pod_is_gone(&self) -> bool {
        matches!(self, ApiError::NotFound | ApiError::Conflict)
    }
}

/// An Event write refused because this replica no longer leads is the outbox's cue to stop;
/// any other failure is logged as the API's answer.
impl From<ApiError> for EventWriteError {
    fn from(e: ApiError) -> EventWriteError {
        match e {
            ApiError::NotLeading => EventWriteError::NotLeading,
            other => EventWriteError::Failed(Box::new(other)),
        }
    }
}

impl From<kube::Error> for ApiError {
    fn from(e: kube::Error) -> ApiError {
        match e {
            kube::Error::Api(status) if status.is_conflict() => ApiError::Conflict,
            kube::Error::Api(status) if status.is_not_found() => ApiError::NotFound,
            kube::Error::Api(status) => ApiError::Refused(status),
            other => ApiError::Request(Arc::new(other)),
        }
    }
}

/// A Job as a fresh read from the API server shows it (not the cache).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveJob {
    pub uid: String,
    pub deleting: bool,
}

/// The writes a sync makes; its Events go through the runtime's `EventWriter`, which every
/// cluster API also is.
pub trait ClusterApi: EventWriter + Send + Sync {
    /// A merge patch of `jobs/status` carrying `metadata.resourceVersion` as a precondition.
    fn patch_job_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Removes jobwarden's tracking finalizer, and only it, from the pod with this uid. A pod
    /// already gone is fine.
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
    /// Writes `failure.status_patch()` to the pod's `status` subresource: `Failed`, with the
    /// condition saying it did not start in time.
    fn fail_pod(
        &self,
        namespace: &str,
        failure: &PodStartFailure,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Creates the pod and returns its generated name.
    fn create_pod(
        &self,
        namespace: &str,
        pod: &Value,
    ) -> impl Future<Output = Result<String, ApiError>> + Send;
    /// The Job `namespace/name` as the API server holds it now, or `None` when there is none:
    /// the one read outside the caches, to confirm that an orphaned pod's Job is really gone,
    /// and that a Job about to adopt pods is still the one cached and not being deleted
    /// (upstream's `RecheckDeletionTimestamp`).
    fn live_job(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<LiveJob>, ApiError>> + Send;
    /// The pods of the namespace whose labels match `selector`: a labelled LIST, only for the
    /// Jobs with `manualSelector`, whose pods may lack the label the pod watch selects on.
    fn list_pods(
        &self,
        namespace: &str,
        selector: &LabelSelector,
    ) -> impl Future<Output = Result<Vec<CachedPod>, ApiError>> + Send;
    /// Makes the Job the controller of the pod with this uid and adds the tracking finalizer
    /// (upstream's `AdoptPod`), and the label `batch.kubernetes.io/controller-uid` when it
    /// lacks it, so that the pod watch sees it; refused when another controller owns it.
    fn adopt_pod(
        &self,
        namespace: &str,
        pod: &PodRef,
        job: &JobRef,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Removes the Job's owner reference and the tracking finalizer from the pod with this
    /// uid (upstream's `ReleasePod`, and the finalizer its orphan handling then removes).
    fn release_pod(
        &self,
        namespace: &str,
        pod: &PodRef,
        job_uid: &str,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
}

/// A shared cluster is a cluster: tests and the simulator keep a handle on the one they drive.
impl<T: ClusterApi> ClusterApi for std::sync::Arc<T> {
    fn patch_job_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        (**self).patch_job_status(namespace, name, patch)
    }

    fn remove_pod_finalizer(
        &self,
        namespace: &str,
        pod: &PodRef,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        (**self).remove_pod_finalizer(namespace, pod)
    }

    fn delete_pod(
        &self,
        namespace: &str,
        pod: &PodRef,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        (**self).delete_pod(namespace, pod)
    }

    fn fail_pod(
        &self,
        namespace: &str,
        failure: &PodStartFailure,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        (**self).fail_pod(namespace, failure)
    }

    fn create_pod(
        &self,
        namespace: &str,
        pod: &Value,
    ) -> impl Future<Output = Result<String, ApiError>> + Send {
        (**self).create_pod(namespace, pod)
    }

    fn live_job(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<LiveJob>, ApiError>> + Send {
        (**self).live_job(namespace, name)
    }

    fn list_pods(
        &self,
        namespace: &str,
        selector: &LabelSelector,
    ) -> impl Future<Output = Result<Vec<CachedPod>, ApiError>> + Send {
        (**self).list_pods(namespace, selector)
    }

    fn adopt_pod(
        &self,
        namespace: &str,
        pod: &PodRef,
        job: &JobRef,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        (**self).adopt_pod(namespace, pod, job)
    }

    fn release_pod(
        &self,
        namespace: &str,
        pod: &PodRef,
        job_uid: &str,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        (**self).release_pod(namespace, pod, job_uid)
    }
}
