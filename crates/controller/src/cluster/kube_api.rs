//! The real `ClusterApi`: the executor's writes as kube-apiserver calls. Merge patches on
//! `jobs/status` with the resourceVersion precondition, strategic-merge removal of only our
//! finalizer, uid-preconditioned deletes, a pod that did not start failed through its
//! `status`, creates from raw JSON, core/v1 Events (one object per event, as upstream's
//! recorder writes them), a metadata-only GET to confirm an orphan, and the labelled LIST of
//! a `manualSelector` Job's pods. It decides nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    Preconditions,
};
use kube::core::Selector;
use serde_json::{Value, json};

use super::{ApiError, ClusterApi, LiveJob};
use crate::plan::{PodRef, PodStartFailure};
use crate::pods::CachedPod;
use jobwarden_events::{EventRecord, EventReporter, JobRef, Seen, record_repeated_job_event};
use jobwarden_rules::well_known::{CONTROLLER_UID_LABEL, TRACKING_FINALIZER};
use jobwarden_runtime::events::{EventWriteError, EventWriter};

pub struct KubeApi {
    client: Client,
    /// Up while this replica leads: every write checks it first, so a leader that lost its
    /// Lease sends nothing more, not even from a sync already under way.
    leading: Option<Arc<AtomicBool>>,
    /// The controller name: the events' reporting component.
    controller_name: String,
    /// This replica: the events' reporting instance.
    identity: String,
    field_manager: String,
}

impl KubeApi {
    pub fn new(client: Client, controller_name: &str, identity: &str) -> Self {
        KubeApi {
            client,
            leading: None,
            controller_name: controller_name.to_owned(),
            identity: identity.to_owned(),
            field_manager: "jobwarden-controller".to_owned(),
        }
    }

    /// Writes only while `leading` is up.
    pub fn fenced(self, leading: Arc<AtomicBool>) -> Self {
        KubeApi {
            leading: Some(leading),
            ..self
        }
    }

    fn may_write(&self) -> Result<(), ApiError> {
        match &self.leading {
            Some(l) if !l.load(Ordering::SeqCst) => Err(ApiError::NotLeading),
            _ => Ok(()),
        }
    }

    /// A strategic merge patch of a pod.
    async fn patch_pod(&self, namespace: &str, name: &str, patch: Value) -> Result<(), ApiError> {
        Api::<Pod>::namespaced(self.client.clone(), namespace)
            .patch(name, &self.params(), &Patch::Strategic(patch))
            .await
            .map(drop)
            .map_err(ApiError::from)
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

impl ClusterApi for KubeApi {
    async fn patch_job_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<(), ApiError> {
        self.may_write()?;
        self.dynamic::<Job>(namespace)
            .patch_status(name, &self.params(), &Patch::Merge(patch))
            .await
            .map(drop)
            .map_err(ApiError::from)
    }

    async fn remove_pod_finalizer(&self, namespace: &str, pod: &PodRef) -> Result<(), ApiError> {
        self.may_write()?;
        // The strategic-merge directive removes our entry only, whatever else the list holds;
        // the uid makes it fail (409) on a different pod that reuses the name.
        let patch = json!({"metadata": {
            "uid": pod.uid,
            "$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER],
        }});
        self.patch_pod(namespace, &pod.name, patch).await
    }

    async fn delete_pod(&self, namespace: &str, pod: &PodRef) -> Result<(), ApiError> {
        self.may_write()?;
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(pod.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        Api::<Pod>::namespaced(self.client.clone(), namespace)
            .delete(&pod.name, &params)
            .await
            .map(drop)
            .map_err(ApiError::from)
    }

    async fn fail_pod(&self, namespace: &str, failure: &PodStartFailure) -> Result<(), ApiError> {
        self.may_write()?;
        Api::<Pod>::namespaced(self.client.clone(), namespace)
            .patch_status(
                &failure.pod.name,
                &self.params(),
                &Patch::Strategic(failure.status_patch()),
            )
            .await
            .map(drop)
            .map_err(ApiError::from)
    }

    async fn create_pod(&self, namespace: &str, pod: &Value) -> Result<String, ApiError> {
        self.may_write()?;
        let object: DynamicObject =
            serde_json::from_value(pod.clone()).map_err(|e| ApiError::PodManifest(Arc::new(e)))?;
        let created = self
            .dynamic::<Pod>(namespace)
            .create(&PostParams::default(), &object)
            .await
            .map_err(ApiError::from)?;
        Ok(created.metadata.name.unwrap_or_default())
    }

    async fn live_job(&self, namespace: &str, name: &str) -> Result<Option<LiveJob>, ApiError> {
        Api::<Job>::namespaced(self.client.clone(), namespace)
            .get_metadata_opt(name)
            .await
            .map(|job| {
                job.map(|j| LiveJob {
                    uid: j.metadata.uid.unwrap_or_default(),
                    deleting: j.metadata.deletion_timestamp.is_some(),
                })
            })
            .map_err(ApiError::from)
    }

    async fn list_pods(
        &self,
        namespace: &str,
        selector: &LabelSelector,
    ) -> Result<Vec<CachedPod>, ApiError> {
        let selector =
            Selector::try_from(selector.clone()).map_err(|e| ApiError::Selector(Arc::new(e)))?;
        let listed = Api::<Pod>::namespaced(self.client.clone(), namespace)
            .list(&ListParams::default().labels_from(&selector))
            .await
            .map_err(ApiError::from)?;
        Ok(listed.items.iter().map(CachedPod::from_pod).collect())
    }

    async fn adopt_pod(&self, namespace: &str, pod: &PodRef, job: &JobRef) -> Result<(), ApiError> {
        self.may_write()?;
        // Upstream's adoption patch: the owner reference (merged by uid), the finalizer, and
        // the pod's uid as a precondition. The API server refuses a second controller. The uid
        // label (already there on a pod matching a generated selector) lets the pod watch see
        // a pod a manualSelector Job adopts.
        let patch = json!({"metadata": {
            "uid": pod.uid,
            "labels": {CONTROLLER_UID_LABEL: job.uid},
            "ownerReferences": [{
                "apiVersion": "batch/v1", "kind": "Job", "name": job.name, "uid": job.uid,
                "controller": true, "blockOwnerDeletion": true,
            }],
            "finalizers": [TRACKING_FINALIZER],
        }});
        self.patch_pod(namespace, &pod.name, patch).await
    }

    async fn release_pod(
        &self,
        namespace: &str,
        pod: &PodRef,
        job_uid: &str,
    ) -> Result<(), ApiError> {
        self.may_write()?;
        let patch = json!({"metadata": {
            "uid": pod.uid,
            "ownerReferences": [{"$patch": "delete", "uid": job_uid}],
            "$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER],
        }});
        self.patch_pod(namespace, &pod.name, patch).await
    }
}

impl EventWriter for KubeApi {
    async fn write_event(
        &self,
        job: &JobRef,
        event: &EventRecord,
        seen: Seen,
    ) -> Result<(), EventWriteError> {
        self.may_write()?;
        let reporter = EventReporter {
            component: self.controller_name.clone(),
            instance: self.identity.clone(),
        };
        record_repeated_job_event(&self.client, job, event, &reporter, seen)
            .await
            .map_err(|e| ApiError::from(e).into())
    }
}
