//! The writes the controller makes (and its one read outside the caches), as a small trait: the real implementation is
//! `kube_api::KubeApi`; `in_memory::InMemoryCluster` stands in for kube-apiserver in tests, the
//! scale benchmark and `jobwarden simulate`. Reads never go through here: the controller reads
//! its watch caches.

use serde_json::Value;

use crate::plan::PodRef;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// A precondition (resourceVersion or uid) failed: someone else wrote first.
    #[error("conflict: the object changed since it was read")]
    Conflict,
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    Other(String),
}

/// The Job an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// An event to record on a Job, core/v1 style.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    pub warning: bool,
    pub reason: String,
    pub message: String,
}

pub trait ClusterApi: Send + Sync {
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
    /// Creates the pod and returns its generated name.
    fn create_pod(
        &self,
        namespace: &str,
        pod: &Value,
    ) -> impl Future<Output = Result<String, ApiError>> + Send;
    /// The uid of the Job `namespace/name`, or `None` when there is none: the one read outside
    /// the caches, to confirm that an orphaned pod's Job is really gone.
    fn job_uid(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<String>, ApiError>> + Send;
    /// Best effort: a lost event loses no state.
    fn create_event(
        &self,
        job: &JobRef,
        event: &EventRecord,
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

    fn create_pod(
        &self,
        namespace: &str,
        pod: &Value,
    ) -> impl Future<Output = Result<String, ApiError>> + Send {
        (**self).create_pod(namespace, pod)
    }

    fn job_uid(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<String>, ApiError>> + Send {
        (**self).job_uid(namespace, name)
    }

    fn create_event(
        &self,
        job: &JobRef,
        event: &EventRecord,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        (**self).create_event(job, event)
    }
}
