//! What the Job watch cache keeps of a Job: its JSON text without `managedFields` (every field
//! kept, known to our `k8s-openapi` or not, so the pods built from its template and the status
//! patches computed on it lose nothing), and the few metadata fields the cache is keyed and
//! routed by. A Job costs its text, not a tree of it; a sync parses the one Job it plans.
//! It decodes straight from a watch event, as a kube `Resource`.

use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use jobwarden_rules::condition::{COMPLETE, FAILED};
use jobwarden_rules::well_known::WORKER_ANNOTATION;

#[derive(Debug, Clone)]
pub struct CachedJob {
    /// name, namespace, uid, resourceVersion, generation and deletionTimestamp only.
    pub metadata: ObjectMeta,
    /// `spec.managedBy`, for routing without parsing the text.
    pub managed_by: Option<Box<str>>,
    /// The dispatcher's record (`jobwarden.io/worker`): where a dispatched Job is placed; the
    /// Job controller runs the Jobs placed on the local worker.
    pub worker: Option<Box<str>>,
    /// `Complete` or `Failed` is true.
    pub finished: bool,
    /// The whole Job as the API server returned it, less `metadata.managedFields`.
    pub json: Arc<str>,
}

impl CachedJob {
    pub fn from_value(mut job: Value) -> CachedJob {
        if let Some(meta) = job.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        let meta = job.get("metadata");
        let field = |k: &str| {
            meta.and_then(|m| m.get(k))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let metadata = ObjectMeta {
            name: field("name"),
            namespace: field("namespace"),
            uid: field("uid"),
            resource_version: field("resourceVersion"),
            // A spec change moves it: the controllers sync such a change at once.
            generation: meta
                .and_then(|m| m.get("generation"))
                .and_then(Value::as_i64),
            deletion_timestamp: meta
                .and_then(|m| m.get("deletionTimestamp"))
                .and_then(|t| serde_json::from_value(t.clone()).ok()),
            ..ObjectMeta::default()
        };
        let worker = meta
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(WORKER_ANNOTATION))
            .and_then(Value::as_str)
            .map(Box::from);
        let managed_by = job
            .get("spec")
            .and_then(|s| s.get("managedBy"))
            .and_then(Value::as_str)
            .map(Box::from);
        let finished = job
            .get("status")
            .and_then(|s| s.get("conditions"))
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    matches!(
                        c.get("type").and_then(Value::as_str),
                        Some(COMPLETE | FAILED)
                    ) && c.get("status").and_then(Value::as_str) == Some("True")
                })
            });
        CachedJob {
            metadata,
            managed_by,
            worker,
            finished,
            json: Arc::from(serde_json::to_string(&job).unwrap_or_default()),
        }
    }

    /// The Job as JSON, for planning.
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.json).unwrap_or(Value::Null)
    }

    pub fn uid(&self) -> &str {
        self.metadata.uid.as_deref().unwrap_or("")
    }

    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }

    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or("")
    }

    pub fn resource_version(&self) -> &str {
        self.metadata.resource_version.as_deref().unwrap_or("")
    }

    pub fn is_managed_by(&self, controller_name: &str) -> bool {
        self.managed_by.as_deref() == Some(controller_name)
    }
}

impl<'de> Deserialize<'de> for CachedJob {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(CachedJob::from_value)
    }
}

impl Resource for CachedJob {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Job".into()
    }

    fn group(_: &()) -> Cow<'_, str> {
        "batch".into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        "jobs".into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_every_field_but_managed_fields() {
        let job: CachedJob = serde_json::from_value(json!({
            "metadata": {"name": "j", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                         "managedFields": [{"manager": "kubectl"}]},
            "spec": {"managedBy": "jobwarden.io/job-controller", "futureField": {"x": 1}},
            "status": {"conditions": [{"type": "Complete", "status": "True"}]},
        }))
        .expect("decodes");
        assert_eq!(job.name(), "j");
        assert_eq!(job.resource_version(), "7");
        assert!(job.is_managed_by("jobwarden.io/job-controller"));
        assert!(job.finished);
        let v = job.value();
        assert_eq!(v["spec"]["futureField"], json!({"x": 1}));
        assert!(v["metadata"].get("managedFields").is_none());
    }
}
