//! The dispatcher's calls to the API servers, thin: the user's Jobs on the management cluster
//! (records, lost marks, status), and the copies on a worker (create from raw JSON, a JSON
//! Patch behind the copy's UID, a UID-preconditioned delete with background propagation so
//! the worker's garbage collector takes the pods). Every write checks the leadership flag
//! first: a replica that lost its Lease sends nothing more. It decides nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::batch::v1::Job;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    Preconditions, PropagationPolicy,
};
use kube::core::Status;
use serde_json::{Value, json};

use jobwarden_events::{EventRecord, EventReporter, JobRef, Seen, record_repeated_job_event};
use jobwarden_rules::well_known::{
    CONTROLLER_UID_LABEL, MOVED_FROM_ANNOTATION, WORKER_ANNOTATION, WORKER_LOST_SINCE_ANNOTATION,
};
use jobwarden_runtime::events::{EventWriteError, EventWriter};

use crate::worker::fence::LiveJob;

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "jobwarden-dispatcher";

#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// A precondition failed (resourceVersion, UID, a JSON Patch `test`): someone wrote first,
    /// or the object is another one of the same name.
    #[error("conflict: the object changed since it was read")]
    Conflict,
    #[error("already exists")]
    AlreadyExists,
    #[error("not found")]
    NotFound,
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// Refused for another reason; kube-apiserver's words.
    #[error("{}", .0.message)]
    Refused(Box<Status>),
    /// No answer: connection, TLS, timeout.
    #[error("the request got no answer")]
    Unanswered(#[source] Arc<kube::Error>),
    #[error("not the leader any more: the write was not sent")]
    NotLeading,
    #[error("the object to send does not decode")]
    Manifest(#[source] Arc<serde_json::Error>),
}

impl From<kube::Error> for ApiError {
    fn from(e: kube::Error) -> ApiError {
        match e {
            kube::Error::Api(status) if status.reason == "AlreadyExists" => ApiError::AlreadyExists,
            // A failed JSON Patch `test` is refused as 422 Invalid, "the server rejected our
            // request due to an error in our request"; a failed precondition as 409.
            kube::Error::Api(status)
                if status.is_conflict()
                    || status.code == 422 && status.message.contains("test") =>
            {
                ApiError::Conflict
            }
            kube::Error::Api(status) if status.is_not_found() => ApiError::NotFound,
            kube::Error::Api(status) if status.code == 403 => ApiError::Forbidden(status.message),
            kube::Error::Api(status) => ApiError::Refused(status),
            other => ApiError::Unanswered(Arc::new(other)),
        }
    }
}

impl ApiError {
    /// Whether the API server answered at all (a refusal is an answer; so is 401 for the
    /// prober, which reads the status itself).
    pub fn answered(&self) -> bool {
        !matches!(self, ApiError::Unanswered(_))
    }
}

fn jobs(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &ApiResource::erase::<Job>(&()))
}

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..Default::default()
    }
}

fn object_json(object: DynamicObject) -> Value {
    serde_json::to_value(object).unwrap_or(Value::Null)
}

/// Up while this replica leads: every write checks it first, so a leader that lost its Lease
/// sends nothing more, not even from a sync already under way.
#[derive(Clone)]
struct Leading(Arc<AtomicBool>);

impl Leading {
    fn may_write(&self) -> Result<(), ApiError> {
        if self.0.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(ApiError::NotLeading)
        }
    }
}

/// Writes on the management cluster's user Jobs and their Events, fenced by leadership.
#[derive(Clone)]
pub struct Management {
    client: Client,
    leading: Leading,
    reporter: EventReporter,
}

impl Management {
    pub fn new(client: Client, leading: Arc<AtomicBool>, reporter: EventReporter) -> Management {
        Management {
            client,
            leading: Leading(leading),
            reporter,
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    fn may_write(&self) -> Result<(), ApiError> {
        self.leading.may_write()
    }

    /// The record: `jobwarden.io/worker: to`, the lost mark removed (and the workers it left
    /// for want of room, `moved_from`, when it moves for that), behind the Job's
    /// resourceVersion (two writers never both win). Returns the Job as written.
    pub async fn record(
        &self,
        ns: &str,
        name: &str,
        resource_version: &str,
        to: &str,
        moved_from: Option<&str>,
    ) -> Result<Value, ApiError> {
        self.may_write()?;
        let mut patch = json!({"metadata": {
            "resourceVersion": resource_version,
            "annotations": {WORKER_ANNOTATION: to, WORKER_LOST_SINCE_ANNOTATION: null},
        }});
        if let Some(moved_from) = moved_from {
            patch["metadata"]["annotations"][MOVED_FROM_ANNOTATION] = json!(moved_from);
        }
        jobs(&self.client, ns)
            .patch(name, &params(), &Patch::Merge(&patch))
            .await
            .map(object_json)
            .map_err(ApiError::from)
    }

    /// Sets (`Some`) or removes the lost mark. No precondition: the mark is the dispatcher's
    /// alone, and a later sync corrects a stale one.
    pub async fn lost_mark(
        &self,
        ns: &str,
        name: &str,
        since: Option<&str>,
    ) -> Result<Value, ApiError> {
        self.may_write()?;
        let patch = json!({"metadata": {"annotations": {WORKER_LOST_SINCE_ANNOTATION: since}}});
        jobs(&self.client, ns)
            .patch(name, &params(), &Patch::Merge(&patch))
            .await
            .map(object_json)
            .map_err(ApiError::from)
    }

    /// A `jobs/status` merge patch (it carries its resourceVersion precondition).
    pub async fn status(&self, ns: &str, name: &str, patch: &Value) -> Result<Value, ApiError> {
        self.may_write()?;
        jobs(&self.client, ns)
            .patch_status(name, &params(), &Patch::Merge(patch))
            .await
            .map(object_json)
            .map_err(ApiError::from)
    }

    /// The Job `ns/name` as the API server holds it now (not the cache): its UID and record,
    /// `None` when there is none. The read that confirms a copy must go.
    pub async fn live(&self, ns: &str, name: &str) -> Result<Option<LiveJob>, ApiError> {
        let found = jobs(&self.client, ns)
            .get_metadata_opt(name)
            .await
            .map_err(ApiError::from)?;
        Ok(found.and_then(|j| {
            let worker = j
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(WORKER_ANNOTATION))
                .cloned();
            Some(LiveJob {
                uid: j.metadata.uid?,
                worker,
            })
        }))
    }
}

impl EventWriter for Management {
    async fn write_event(
        &self,
        job: &JobRef,
        event: &EventRecord,
        seen: Seen,
    ) -> Result<(), EventWriteError> {
        if self.leading.may_write().is_err() {
            return Err(EventWriteError::NotLeading);
        }
        record_repeated_job_event(&self.client, job, event, &self.reporter, seen)
            .await
            .map_err(|e| EventWriteError::Failed(Box::new(e)))
    }
}

/// Calls on one worker, with its own client (and so its own request budget).
#[derive(Clone)]
pub struct Worker {
    client: Client,
    leading: Leading,
}

impl Worker {
    pub fn new(client: Client, leading: Arc<AtomicBool>) -> Worker {
        Worker {
            client,
            leading: Leading(leading),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    fn may_write(&self) -> Result<(), ApiError> {
        self.leading.may_write()
    }

    /// Creates the copy; returns it as stored.
    pub async fn create(&self, copy: &Value) -> Result<Value, ApiError> {
        self.may_write()?;
        let ns = copy
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let object: DynamicObject =
            serde_json::from_value(copy.clone()).map_err(|e| ApiError::Manifest(Arc::new(e)))?;
        let post = PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..Default::default()
        };
        jobs(&self.client, ns)
            .create(&post, &object)
            .await
            .map(object_json)
            .map_err(ApiError::from)
    }

    /// The Job `ns/name` there, whoever's it is (after a create found one).
    pub async fn get(&self, ns: &str, name: &str) -> Result<Option<Value>, ApiError> {
        jobs(&self.client, ns)
            .get_opt(name)
            .await
            .map(|o| o.map(object_json))
            .map_err(ApiError::from)
    }

    /// A JSON Patch of the copy (it tests the copy's UID first). Sent as a request of its
    /// own: kube's `Patch::Json` is tied to another json-patch release than the workspace's.
    pub async fn patch(
        &self,
        ns: &str,
        name: &str,
        patch: &json_patch::Patch,
    ) -> Result<(), ApiError> {
        self.may_write()?;
        let body = serde_json::to_vec(patch).map_err(|e| ApiError::Manifest(Arc::new(e)))?;
        let request = http::Request::patch(format!(
            "/apis/batch/v1/namespaces/{ns}/jobs/{name}?fieldManager={FIELD_MANAGER}"
        ))
        .header(http::header::CONTENT_TYPE, "application/json-patch+json")
        .body(body)
        .map_err(|e| ApiError::Unanswered(Arc::new(kube::Error::HttpError(e))))?;
        self.client
            .request::<Value>(request)
            .await
            .map(drop)
            .map_err(ApiError::from)
    }

    /// Deletes the copy with this UID and, through the worker's garbage collector, its pods.
    /// A copy already gone, or replaced by another object of its name, is fine.
    pub async fn delete(&self, ns: &str, name: &str, uid: &str) -> Result<(), ApiError> {
        self.may_write()?;
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match jobs(&self.client, ns).delete(name, &params).await {
            Ok(_) => Ok(()),
            Err(e) => match ApiError::from(e) {
                ApiError::NotFound | ApiError::Conflict => Ok(()),
                other => Err(other),
            },
        }
    }

    /// Deletes the pods of the copy with this UID (by its `controller-uid` label, so no other
    /// pod can match): a copy taken back must stop running now, and a worker whose API server
    /// just came back has a controller manager (its garbage collector) blind for up to a
    /// minute.
    pub async fn delete_pods_of(&self, ns: &str, copy_uid: &str) -> Result<(), ApiError> {
        self.may_write()?;
        let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(self.client.clone(), ns);
        let selector = format!("{CONTROLLER_UID_LABEL}={copy_uid}");
        pods.delete_collection(
            &DeleteParams::background(),
            &ListParams::default().labels(&selector),
        )
        .await
        .map(drop)
        .map_err(ApiError::from)
    }

    /// Every copy of `origin` there (in `namespace`, or in all), fresh from the API server: the
    /// fence's list when the worker answers again.
    pub async fn list_copies(
        &self,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<Value>, ApiError> {
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => jobs(&self.client, ns),
            None => Api::all_with(self.client.clone(), &ApiResource::erase::<Job>(&())),
        };
        let list = api
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(ApiError::from)?;
        Ok(list.items.into_iter().map(object_json).collect())
    }

    /// Whether the namespace exists there (and may be read: a grant in that namespace lets
    /// the dispatcher read it, none elsewhere).
    pub async fn has_namespace(&self, ns: &str) -> Result<bool, ApiError> {
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        match namespaces.get_metadata_opt(ns).await {
            Ok(found) => Ok(found.is_some()),
            Err(e) => match ApiError::from(e) {
                ApiError::Forbidden(_) => Ok(false),
                other => Err(other),
            },
        }
    }
}
