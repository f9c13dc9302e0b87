//! The in-memory cluster as a `ClusterApi`: each call counted as a request (verb, resource), or
//! failed once the crash budget is spent.

use std::future::{Ready, ready};

use serde_json::Value;

use super::{InMemoryCluster, Request, State, str_at};
use jobwarden_controller::cluster_api::{ApiError, ClusterApi, LiveJob};
use jobwarden_controller::plan::PodRef;
use jobwarden_events::{EventRecord, JobRef, Seen};

impl InMemoryCluster {
    /// One request, answered at once: the in-memory API server has no network to wait on.
    fn answer<R>(
        &self,
        verb: &'static str,
        resource: &'static str,
        f: impl FnOnce(&mut State) -> Result<R, ApiError>,
    ) -> Ready<Result<R, ApiError>> {
        ready(self.call(Request { verb, resource }, f))
    }
}

impl ClusterApi for InMemoryCluster {
    fn patch_job_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.answer("patch", "jobs/status", |s| {
            s.patch_job_status(namespace, name, patch).map(drop)
        })
    }

    fn remove_pod_finalizer(
        &self,
        namespace: &str,
        pod: &PodRef,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.answer("patch", "pods", |s| s.remove_pod_finalizer(namespace, pod))
    }

    fn delete_pod(
        &self,
        namespace: &str,
        pod: &PodRef,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.answer("delete", "pods", |s| s.delete_pod(namespace, pod))
    }

    fn create_pod(
        &self,
        namespace: &str,
        pod: &Value,
    ) -> impl Future<Output = Result<String, ApiError>> + Send {
        self.answer("create", "pods", |s| s.create_pod(namespace, pod))
    }

    fn live_job(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<LiveJob>, ApiError>> + Send {
        self.answer("get", "jobs", |s| {
            Ok(s.job(namespace, name).map(|j| LiveJob {
                uid: str_at(&j, &["metadata", "uid"]).unwrap_or("").to_owned(),
                deleting: j["metadata"].get("deletionTimestamp").is_some(),
            }))
        })
    }

    fn adopt_pod(
        &self,
        namespace: &str,
        pod: &PodRef,
        job: &JobRef,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.answer("patch", "pods", |s| s.adopt_pod(namespace, pod, job))
    }

    fn release_pod(
        &self,
        namespace: &str,
        pod: &PodRef,
        job_uid: &str,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.answer("patch", "pods", |s| s.release_pod(namespace, pod, job_uid))
    }

    fn create_event(
        &self,
        job: &JobRef,
        event: &EventRecord,
        seen: Seen,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.answer("create", "events", |s| {
            s.create_event(job, event, seen.count);
            Ok(())
        })
    }
}
