//! The copy of a user's Job that runs on a worker, built from the user's Job's raw JSON so that
//! no field our `k8s-openapi` does not know is lost; how a copy is recognised (its origin UID,
//! never its name); and the spec patch that carries a change of the user's Job (suspend,
//! parallelism, scheduling directives of a suspended Job) to its copy. Pure.
//!
//! What the copy leaves out, and why:
//! * `spec.managedBy`: the worker's own Job controller runs the copy.
//! * `spec.selector` and the template's controller-uid labels: they name the user's Job's UID;
//!   the worker's API server generates the copy's own (unless `manualSelector`).
//! * `spec.ttlSecondsAfterFinished`: the worker's TTL controller would delete the copy before
//!   its final status reached the user's Job (kueue #14734); the user's Job keeps its own, and
//!   the dispatcher deletes the copy once the user's Job shows how it ended.
//! * the dispatcher's own annotations: they describe the user's Job's placement, not the copy.

pub mod record;
pub mod status;

use serde_json::{Map, Value, json};

use jobwarden_rules::well_known::{
    CONTROLLER_UID_LABEL, COPY_WORKER_LABEL, JOB_NAME_LABEL, LEGACY_CONTROLLER_UID_LABEL,
    LEGACY_JOB_NAME_LABEL, ON_WORKER_LOST_ANNOTATION, ORIGIN_LABEL, ORIGIN_UID_LABEL,
    WORKER_ANNOTATION, WORKER_LOST_SINCE_ANNOTATION, WORKERS_ANNOTATION,
};

/// Annotations of the user's Job that stay on it.
const DISPATCH_ANNOTATIONS: [&str; 4] = [
    WORKER_ANNOTATION,
    WORKERS_ANNOTATION,
    ON_WORKER_LOST_ANNOTATION,
    WORKER_LOST_SINCE_ANNOTATION,
];

/// Labels the API server adds to a Job's pod template from the Job's UID and name.
const GENERATED_TEMPLATE_LABELS: [&str; 4] = [
    CONTROLLER_UID_LABEL,
    LEGACY_CONTROLLER_UID_LABEL,
    JOB_NAME_LABEL,
    LEGACY_JOB_NAME_LABEL,
];

/// Spec fields the copy never carries (the selector only without `manualSelector`).
const LEFT_OUT_OF_SPEC: [&str; 2] = ["managedBy", "ttlSecondsAfterFinished"];

/// The fields of `batch/v1` JobSpec this build knows. A field a newer worker defaults on the
/// copy, which the user's Job lacks, is left alone rather than removed on every sync.
const KNOWN_SPEC_FIELDS: [&str; 16] = [
    "activeDeadlineSeconds",
    "backoffLimit",
    "backoffLimitPerIndex",
    "completionMode",
    "completions",
    "managedBy",
    "manualSelector",
    "maxFailedIndexes",
    "parallelism",
    "podFailurePolicy",
    "podReplacementPolicy",
    "selector",
    "successPolicy",
    "suspend",
    "template",
    "ttlSecondsAfterFinished",
];

/// Why a Job cannot be copied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CopyError {
    #[error("the Job has no {0}")]
    Missing(&'static str),
}

fn manual_selector(spec: &Value) -> bool {
    spec.get("manualSelector").and_then(Value::as_bool) == Some(true)
}

fn without(map: Option<&Value>, keys: &[&str]) -> Map<String, Value> {
    let mut map = map.and_then(Value::as_object).cloned().unwrap_or_default();
    for key in keys {
        map.remove(*key);
    }
    map
}

/// The user's spec as the copy carries it.
fn copy_spec(spec: &Value) -> Value {
    let manual = manual_selector(spec);
    let mut out = without(Some(spec), &LEFT_OUT_OF_SPEC);
    if !manual {
        out.remove("selector");
        if let Some(labels) = out
            .get_mut("template")
            .and_then(|t| t.get_mut("metadata"))
            .and_then(|m| m.get_mut("labels"))
            .and_then(Value::as_object_mut)
        {
            for key in GENERATED_TEMPLATE_LABELS {
                labels.remove(key);
            }
        }
    }
    Value::Object(out)
}

/// The copy to create on `worker`: same namespace and name, the user's labels and annotations
/// (less the dispatcher's), the origin labels and the worker's name, the spec as
/// [`copy_spec`] leaves it, no status.
pub fn copy_of(user: &Value, origin: &str, worker: &str) -> Result<Value, CopyError> {
    let meta = user.get("metadata").ok_or(CopyError::Missing("metadata"))?;
    let text = |key: &'static str| {
        meta.get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or(CopyError::Missing(key))
    };
    let (name, namespace, uid) = (text("name")?, text("namespace")?, text("uid")?);
    let spec = user.get("spec").ok_or(CopyError::Missing("spec"))?;
    let mut labels = without(
        meta.get("labels"),
        &[CONTROLLER_UID_LABEL, LEGACY_CONTROLLER_UID_LABEL],
    );
    labels.insert(ORIGIN_UID_LABEL.to_owned(), json!(uid));
    labels.insert(ORIGIN_LABEL.to_owned(), json!(origin));
    labels.insert(COPY_WORKER_LABEL.to_owned(), json!(worker));
    let mut metadata = json!({"name": name, "namespace": namespace, "labels": labels});
    let annotations = without(meta.get("annotations"), &DISPATCH_ANNOTATIONS);
    if !annotations.is_empty() {
        metadata["annotations"] = Value::Object(annotations);
    }
    Ok(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": copy_spec(spec),
    }))
}

/// The value of a label of a Job.
pub fn label<'v>(job: &'v Value, key: &str) -> Option<&'v str> {
    job.get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
}

/// The label selector of the copies a worker holds for `origin`: the watch of a worker's
/// copies, and the fence's list.
pub fn copies_selector(origin: &str, worker: &str) -> String {
    format!("{ORIGIN_LABEL}={origin},{COPY_WORKER_LABEL}={worker}")
}

/// The worker a copy was made for.
pub fn worker_of(job: &Value) -> Option<&str> {
    label(job, COPY_WORKER_LABEL)
}

/// The origin UID a copy names; `None` for a Job that is no copy.
pub fn origin_uid(job: &Value) -> Option<&str> {
    label(job, ORIGIN_UID_LABEL).filter(|u| !u.is_empty())
}

/// Whether `job` is this dispatcher's copy of the Job with UID `user_uid`: the name is never
/// enough (kueue #11849: a same-named Job on a worker was taken for a copy).
pub fn is_copy_of(job: &Value, user_uid: &str, origin: &str) -> bool {
    origin_uid(job) == Some(user_uid) && label(job, ORIGIN_LABEL) == Some(origin)
}

/// The JSON Patch that brings the copy's spec in line with the user's, `None` when they agree.
/// Each changed top-level spec field is replaced whole, behind a `test` of the copy's UID, so
/// the patch can only reach the copy it was computed for. A change the Job API does not allow
/// (it was allowed on the user's Job, so the worker will allow it too, at the same version) is
/// the worker's to refuse.
pub fn spec_patch(user: &Value, copy: &Value) -> Option<json_patch::Patch> {
    let copy_uid = copy.pointer("/metadata/uid").and_then(Value::as_str)?;
    let desired = copy_spec(user.get("spec")?);
    let current_spec = copy.get("spec")?;
    // What the worker generated on the copy (the selector, the template's labels) set aside.
    let current = copy_spec(current_spec);
    let (desired, current) = (desired.as_object()?, current.as_object()?);
    let mut ops: Vec<Value> = Vec::new();
    for key in KNOWN_SPEC_FIELDS {
        let (want, have) = (desired.get(key), current.get(key));
        let path = format!("/spec/{key}");
        match (want, have) {
            (Some(want), Some(have)) if jobwarden_rules::semantic::equal(want, have) => {}
            (Some(want), _) => {
                let mut want = want.clone();
                if key == "template" && !manual_selector(current_spec) {
                    keep_generated_labels(&mut want, current_spec);
                }
                let op = if have.is_some() { "replace" } else { "add" };
                ops.push(json!({"op": op, "path": path, "value": want}));
            }
            (None, Some(have)) if !jobwarden_rules::semantic::equal(have, &Value::Null) => {
                ops.push(json!({"op": "remove", "path": path}));
            }
            (None, _) => {}
        }
    }
    if ops.is_empty() {
        return None;
    }
    ops.insert(
        0,
        json!({"op": "test", "path": "/metadata/uid", "value": copy_uid}),
    );
    serde_json::from_value(Value::Array(ops)).ok()
}

/// A replaced template keeps the labels the worker generated, or its selector would no longer
/// match it.
fn keep_generated_labels(template: &mut Value, current_spec: &Value) {
    let generated: Map<String, Value> = current_spec
        .pointer("/template/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter(|(k, _)| GENERATED_TEMPLATE_LABELS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    if generated.is_empty() {
        return;
    }
    let Some(template) = template.as_object_mut() else {
        return;
    };
    let meta = template
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(meta) = meta.as_object_mut() else {
        return;
    };
    let labels = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(labels) = labels.as_object_mut() {
        labels.extend(generated);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A user's Job as the management cluster's API server stores it.
    fn user() -> Value {
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {
                "name": "train", "namespace": "ml", "uid": "u-1", "resourceVersion": "7",
                "creationTimestamp": "2026-11-27T10:00:00Z", "generation": 1,
                "labels": {"team": "a"},
                "annotations": {
                    "jobwarden.io/worker": "east", "jobwarden.io/workers": "east,west",
                    "jobwarden.io/on-worker-lost": "Wait", "note": "kept"},
                "finalizers": ["x/y"],
                "managedFields": [{"manager": "kubectl"}],
            },
            "spec": {
                "managedBy": "jobwarden.io/dispatcher",
                "ttlSecondsAfterFinished": 60,
                "parallelism": 2, "completions": 4, "backoffLimit": 6,
                "completionMode": "NonIndexed", "suspend": false,
                "podReplacementPolicy": "TerminatingOrFailed",
                "futureField": {"x": 1},
                "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}},
                "template": {
                    "metadata": {"labels": {
                        "app": "train",
                        "batch.kubernetes.io/controller-uid": "u-1", "controller-uid": "u-1",
                        "batch.kubernetes.io/job-name": "train", "job-name": "train"}},
                    "spec": {"restartPolicy": "Never",
                             "containers": [{"name": "c", "image": "busybox"}]}
                }
            },
            "status": {"active": 2, "startTime": "2026-11-27T10:00:01Z"}
        })
    }

    /// The copy as the worker's API server stores it once created from [`copy_of`].
    fn stored_copy(user: &Value) -> Value {
        let mut copy = copy_of(user, "mgmt", "east").expect("a copy");
        copy["metadata"]["uid"] = json!("c-1");
        copy["metadata"]["resourceVersion"] = json!("3");
        copy["spec"]["selector"] =
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "c-1"}});
        let labels = &mut copy["spec"]["template"]["metadata"]["labels"];
        labels["batch.kubernetes.io/controller-uid"] = json!("c-1");
        labels["controller-uid"] = json!("c-1");
        labels["batch.kubernetes.io/job-name"] = json!("train");
        labels["job-name"] = json!("train");
        copy
    }

    #[test]
    fn the_copy_keeps_what_the_user_wrote_and_names_its_origin() {
        let copy = copy_of(&user(), "mgmt", "east").expect("a copy");
        assert_eq!(
            copy,
            json!({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {
                    "name": "train", "namespace": "ml",
                    "labels": {"team": "a", "jobwarden.io/origin-uid": "u-1",
                               "jobwarden.io/origin": "mgmt", "jobwarden.io/worker": "east"},
                    "annotations": {"note": "kept"},
                },
                "spec": {
                    "parallelism": 2, "completions": 4, "backoffLimit": 6,
                    "completionMode": "NonIndexed", "suspend": false,
                    "podReplacementPolicy": "TerminatingOrFailed",
                    "futureField": {"x": 1},
                    "template": {
                        "metadata": {"labels": {"app": "train"}},
                        "spec": {"restartPolicy": "Never",
                                 "containers": [{"name": "c", "image": "busybox"}]}
                    }
                }
            })
        );
        assert!(is_copy_of(&copy, "u-1", "mgmt"));
        assert!(!is_copy_of(&copy, "u-2", "mgmt"), "another Job's copy");
        assert!(!is_copy_of(&copy, "u-1", "other"), "another origin's copy");
    }

    #[test]
    fn a_manual_selector_is_kept_with_its_labels() {
        let mut user = user();
        user["spec"]["manualSelector"] = json!(true);
        user["spec"]["selector"] = json!({"matchLabels": {"app": "train"}});
        let copy = copy_of(&user, "mgmt", "east").expect("a copy");
        assert_eq!(copy["spec"]["selector"], user["spec"]["selector"]);
        assert_eq!(copy["spec"]["template"], user["spec"]["template"]);
    }

    #[test]
    fn a_job_without_identity_is_not_copied() {
        let mut user = user();
        user["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove("uid");
        assert_eq!(copy_of(&user, "o", "east"), Err(CopyError::Missing("uid")));
        assert_eq!(
            copy_of(&json!(null), "o", "east"),
            Err(CopyError::Missing("metadata"))
        );
    }

    #[test]
    fn a_same_named_job_that_is_no_copy_is_never_taken_for_one() {
        let foreign =
            json!({"metadata": {"name": "train", "namespace": "ml", "labels": {"app": "x"}}});
        assert_eq!(origin_uid(&foreign), None);
        assert!(!is_copy_of(&foreign, "u-1", "mgmt"));
    }

    #[test]
    fn an_unchanged_job_needs_no_patch() {
        let user = user();
        assert_eq!(spec_patch(&user, &stored_copy(&user)), None);
    }

    #[test]
    fn suspend_and_parallelism_travel_to_the_copy_behind_its_uid() {
        let user0 = user();
        let copy = stored_copy(&user0);
        let mut user = user0.clone();
        user["spec"]["suspend"] = json!(true);
        user["spec"]["parallelism"] = json!(1);
        let patch = spec_patch(&user, &copy).expect("a patch");
        assert_eq!(
            serde_json::to_value(&patch).expect("JSON"),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "c-1"},
                {"op": "replace", "path": "/spec/parallelism", "value": 1},
                {"op": "replace", "path": "/spec/suspend", "value": true},
            ])
        );
        let mut patched = copy.clone();
        json_patch::patch(&mut patched, &patch).expect("applies");
        assert_eq!(
            spec_patch(&user, &patched),
            None,
            "applied once, it is done"
        );
    }

    #[test]
    fn a_replaced_template_keeps_the_workers_labels() {
        let user0 = user();
        let copy = stored_copy(&user0);
        let mut user = user0.clone();
        user["spec"]["template"]["spec"]["nodeSelector"] = json!({"pool": "gpu"});
        let patch = spec_patch(&user, &copy).expect("a patch");
        let mut patched = copy.clone();
        json_patch::patch(&mut patched, &patch).expect("applies");
        assert_eq!(
            patched["spec"]["template"]["metadata"]["labels"]["batch.kubernetes.io/controller-uid"],
            json!("c-1")
        );
        assert_eq!(
            patched["spec"]["template"]["spec"]["nodeSelector"],
            json!({"pool": "gpu"})
        );
        assert_eq!(spec_patch(&user, &patched), None);
    }

    #[test]
    fn a_removed_deadline_is_removed_and_a_field_only_the_worker_knows_is_left() {
        let mut user0 = user();
        user0["spec"]["activeDeadlineSeconds"] = json!(600);
        let mut copy = stored_copy(&user0);
        copy["spec"]["newerDefault"] = json!("set by a newer worker");
        let mut user = user0.clone();
        user["spec"]
            .as_object_mut()
            .expect("spec")
            .remove("activeDeadlineSeconds");
        let patch = spec_patch(&user, &copy).expect("a patch");
        assert_eq!(
            serde_json::to_value(&patch).expect("JSON"),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "c-1"},
                {"op": "remove", "path": "/spec/activeDeadlineSeconds"},
            ])
        );
    }

    #[test]
    fn a_copy_without_a_uid_is_not_patched() {
        let user = user();
        let mut copy = stored_copy(&user);
        copy["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove("uid");
        copy["spec"]["parallelism"] = json!(9);
        assert_eq!(spec_patch(&user, &copy), None);
    }
}
