//! The real `ClusterApi`: the executor's writes as kube-apiserver calls. Merge patches on
//! `jobs/status` with the resourceVersion precondition, strategic-merge removal of only our
//! finalizer, uid-preconditioned deletes, creates from raw JSON. It decides nothing.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions,
};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::{Value, json};

use crate::executor::{ApiError, ClusterApi};
use crate::plan::{JobEvent, PodRef};
use jobwarden_rules::well_known::TRACKING_FINALIZER;

pub struct KubeApi {
    client: Client,
    recorder: Recorder,
    field_manager: String,
}

impl KubeApi {
    pub fn new(client: Client, controller_name: &str, identity: &str) -> Self {
        let reporter = Reporter {
            controller: controller_name.to_owned(),
            instance: Some(identity.to_owned()),
        };
        KubeApi {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            field_manager: "jobwarden-controller".to_owned(),
        }
    }

    fn params(&self) -> PatchParams {
        PatchParams {
            field_manager: Some(self.field_manager.clone()),
            ..Default::default()
        }
    }

    fn dynamic<K: kube::Resource<DynamicType = ()>>(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.client.clone(),
            namespace,
            &ApiResource::erase::<K>(&()),
        )
    }
}

pub fn api_error(e: kube::Error) -> ApiError {
    match e {
        kube::Error::Api(status) if status.is_conflict() => ApiError::Conflict,
        kube::Error::Api(status) if status.is_not_found() => ApiError::NotFound,
        other => ApiError::Other(other.to_string()),
    }
}

/// A pod that is already gone (or replaced by another of the same name) needs nothing more.
fn gone_is_fine(r: Result<(), ApiError>) -> Result<(), ApiError> {
    match r {
        Err(ApiError::NotFound) | Err(ApiError::Conflict) => Ok(()),
        other => other,
    }
}

impl ClusterApi for KubeApi {
    async fn patch_job_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<(), ApiError> {
        self.dynamic::<Job>(namespace)
            .patch_status(name, &self.params(), &Patch::Merge(patch))
            .await
            .map(drop)
            .map_err(api_error)
    }

    async fn remove_pod_finalizer(&self, namespace: &str, pod: &PodRef) -> Result<(), ApiError> {
        // The strategic-merge directive removes our entry only, whatever else the list holds;
        // the uid makes it a no-op on a different pod that reuses the name.
        let patch = json!({"metadata": {
            "uid": pod.uid,
            "$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER],
        }});
        let r = Api::<Pod>::namespaced(self.client.clone(), namespace)
            .patch(&pod.name, &self.params(), &Patch::Strategic(patch))
            .await
            .map(drop)
            .map_err(api_error);
        gone_is_fine(r)
    }

    async fn delete_pod(&self, namespace: &str, pod: &PodRef) -> Result<(), ApiError> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(pod.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        let r = Api::<Pod>::namespaced(self.client.clone(), namespace)
            .delete(&pod.name, &params)
            .await
            .map(drop)
            .map_err(api_error);
        gone_is_fine(r)
    }

    async fn create_pod(&self, namespace: &str, pod: &Value) -> Result<String, ApiError> {
        let object: DynamicObject =
            serde_json::from_value(pod.clone()).map_err(|e| ApiError::Other(e.to_string()))?;
        let created = self
            .dynamic::<Pod>(namespace)
            .create(&PostParams::default(), &object)
            .await
            .map_err(api_error)?;
        Ok(created.metadata.name.unwrap_or_default())
    }

    async fn emit_event(&self, job: &Value, event: &JobEvent) -> Result<(), ApiError> {
        let meta = job.get("metadata");
        let field = |k: &str| {
            meta.and_then(|m| m.get(k))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let regarding = ObjectReference {
            api_version: Some("batch/v1".to_owned()),
            kind: Some("Job".to_owned()),
            name: field("name"),
            namespace: field("namespace"),
            uid: field("uid"),
            ..Default::default()
        };
        let e = Event {
            type_: if event.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: event.reason.clone(),
            note: Some(event.message.clone()),
            action: "Sync".to_owned(),
            secondary: None,
        };
        self.recorder
            .publish(&e, &regarding)
            .await
            .map_err(api_error)
    }
}
