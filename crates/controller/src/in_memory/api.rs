//! The in-memory cluster as a `ClusterApi`: each call counted as a request (verb, resource), or
//! failed once the crash budget is spent.

use serde_json::Value;

use super::{InMemoryCluster, Request, str_at};
use crate::cluster_api::{ApiError, ClusterApi, EventRecord, JobRef};
use crate::plan::PodRef;

impl ClusterApi for InMemoryCluster {
    fn patch_job_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        let r = self.call(
            Request {
                verb: "patch",
                resource: "jobs/status",
            },
            |s| s.patch_job_status(namespace, name, patch).map(drop),
        );
        std::future::ready(r)
    }

    fn remove_pod_finalizer(
        &self,
        namespace: &str,
        pod: &PodRef,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        let r = self.call(
            Request {
                verb: "patch",
                resource: "pods",
            },
            |s| s.remove_pod_finalizer(namespace, pod),
        );
        std::future::ready(r)
    }

    fn delete_pod(
        &self,
        namespace: &str,
        pod: &PodRef,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        let r = self.call(
            Request {
                verb: "delete",
                resource: "pods",
            },
            |s| s.delete_pod(namespace, pod),
        );
        std::future::ready(r)
    }

    fn create_pod(
        &self,
        namespace: &str,
        pod: &Value,
    ) -> impl Future<Output = Result<String, ApiError>> + Send {
        let r = self.call(
            Request {
                verb: "create",
                resource: "pods",
            },
            |s| s.create_pod(namespace, pod),
        );
        std::future::ready(r)
    }

    fn job_uid(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<String>, ApiError>> + Send {
        let r = self.call(
            Request {
                verb: "get",
                resource: "jobs",
            },
            |s| {
                Ok(s.job(namespace, name)
                    .and_then(|j| str_at(&j, &["metadata", "uid"]).map(str::to_owned)))
            },
        );
        std::future::ready(r)
    }

    fn create_event(
        &self,
        job: &JobRef,
        event: &EventRecord,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        let r = self.call(
            Request {
                verb: "create",
                resource: "events",
            },
            |s| {
                s.create_event(job, event);
                Ok(())
            },
        );
        std::future::ready(r)
    }
}
