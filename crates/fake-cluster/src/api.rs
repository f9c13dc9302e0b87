//! The in-memory cluster as a `ClusterApi` (and the runtime's `EventWriter`): each call
//! counted as a request (verb, resource), or failed once the crash budget is spent.

use std::future::{Ready, ready};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use super::{InMemoryCluster, Request, State, str_at};
use jobwarden_controller::cluster::{ApiError, ClusterApi, LiveJob};
use jobwarden_controller::plan::{PodRef, PodStartFailure};
use jobwarden_controller::pods::CachedPod;
use jobwarden_events::{EventRecord, JobRef, Seen};
use jobwarden_runtime::events::{EventWriteError, EventWriter};

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

    fn fail_pod(
        &self,
        namespace: &str,
        failure: &PodStartFailure,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        self.answer("patch", "pods/status", |s| s.fail_pod(namespace, failure))
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

    fn list_pods(
        &self,
        namespace: &str,
        selector: &LabelSelector,
    ) -> impl Future<Output = Result<Vec<CachedPod>, ApiError>> + Send {
        self.answer("list", "pods", |s| {
            Ok(s.pods_matching(namespace, selector)
                .into_iter()
                .filter_map(|p| serde_json::from_value::<Pod>(p).ok())
                .map(|p| CachedPod::from_pod(&p))
                .collect())
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
}

impl EventWriter for InMemoryCluster {
    fn write_event(
        &self,
        job: &JobRef,
        event: &EventRecord,
        seen: Seen,
    ) -> impl Future<Output = Result<(), EventWriteError>> + Send {
        let answer = self.answer("create", "events", |s| {
            s.create_event(job, event, seen.count);
            Ok(())
        });
        ready(answer.into_inner().map_err(EventWriteError::from))
    }
}
