//! Turning a Job's pod template into the pod to create: upstream's labels, annotations, index
//! environment and hostname, the controller owner reference and jobwarden's tracking finalizer.
//! Works on the raw template JSON so no field our `k8s-openapi` does not know is dropped; it
//! never talks to the API.

use serde_json::{Map, Value, json};

use jobwarden_rules::well_known::{
    COMPLETION_INDEX_ENV, COMPLETION_INDEX_KEY, CONTROLLER_UID_LABEL, CREATED_BY_ANNOTATION,
    JOB_NAME_LABEL, TRACKING_FINALIZER,
};

/// Upstream's `names.MaxGeneratedNameLength`: 63 less the 5 random characters the apiserver adds.
const MAX_GENERATED_NAME_LENGTH: usize = 58;

/// The identity of the Job a pod is built for.
#[derive(Debug, Clone)]
pub struct JobIdentity<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    pub uid: &'a str,
    /// The controller creating the pod, recorded in `jobwarden.io/created-by`.
    pub controller_name: &'a str,
}

/// The pod for `index` (Indexed) or for no index (NonIndexed), ready to POST.
pub fn build_pod(job: &JobIdentity<'_>, raw_template: &Value, index: Option<i32>) -> Value {
    let template_meta = raw_template.get("metadata");
    let copied = |key: &str| -> Map<String, Value> {
        template_meta
            .and_then(|m| m.get(key))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let mut labels = copied("labels");
    let mut annotations = copied("annotations");
    annotations.insert(CREATED_BY_ANNOTATION.to_owned(), json!(job.controller_name));
    let mut finalizers: Vec<Value> = template_meta
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !finalizers.iter().any(|f| f == TRACKING_FINALIZER) {
        finalizers.push(json!(TRACKING_FINALIZER));
    }
    // With `manualSelector: true` the apiserver does not add these; jobwarden lists its pods by
    // the uid label, so it must always be there.
    labels
        .entry(CONTROLLER_UID_LABEL)
        .or_insert_with(|| json!(job.uid));
    labels
        .entry(JOB_NAME_LABEL)
        .or_insert_with(|| json!(job.name));

    let mut spec = raw_template.get("spec").cloned().unwrap_or(json!({}));
    let generate_name = match index {
        Some(i) => {
            annotations.insert(COMPLETION_INDEX_KEY.to_owned(), json!(i.to_string()));
            labels.insert(COMPLETION_INDEX_KEY.to_owned(), json!(i.to_string()));
            if let Some(spec) = spec.as_object_mut() {
                spec.insert("hostname".to_owned(), json!(format!("{}-{i}", job.name)));
                for list in ["initContainers", "containers"] {
                    if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
                        containers.iter_mut().for_each(add_index_env);
                    }
                }
            }
            generate_name_with_index(job.name, i)
        }
        None => format!("{}-", job.name),
    };

    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": generate_name,
            "namespace": job.namespace,
            "labels": labels,
            "annotations": annotations,
            "finalizers": finalizers,
            "ownerReferences": [{
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": job.name,
                "uid": job.uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": spec,
    })
}

/// Upstream's `addCompletionIndexEnvVariable`: read through the downward API from the index
/// label (PodIndexLabel is GA), and left alone when the user already defined the variable.
fn add_index_env(container: &mut Value) {
    let Some(container) = container.as_object_mut() else {
        return;
    };
    let env = container.entry("env").or_insert_with(|| json!([]));
    let Some(env) = env.as_array_mut() else {
        return;
    };
    if env
        .iter()
        .any(|v| v.get("name").and_then(Value::as_str) == Some(COMPLETION_INDEX_ENV))
    {
        return;
    }
    env.push(json!({
        "name": COMPLETION_INDEX_ENV,
        "valueFrom": {"fieldRef": {
            "fieldPath": format!("metadata.labels['{COMPLETION_INDEX_KEY}']"),
        }},
    }));
}

/// Upstream's `podGenerateNameWithIndex`: the Job name is cut so that the index survives.
pub fn generate_name_with_index(job_name: &str, index: i32) -> String {
    let suffix = format!("-{index}-");
    let full = format!("{job_name}{suffix}");
    if full.len() <= MAX_GENERATED_NAME_LENGTH {
        return full;
    }
    let keep = MAX_GENERATED_NAME_LENGTH.saturating_sub(suffix.len());
    let mut cut = keep.min(job_name.len());
    while !job_name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{suffix}", &job_name[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> JobIdentity<'static> {
        JobIdentity {
            name: "pi",
            namespace: "ns",
            uid: "uid-1",
            controller_name: "jobwarden.io/job-controller",
        }
    }

    fn template() -> Value {
        json!({
            "metadata": {
                "labels": {"app": "pi", CONTROLLER_UID_LABEL: "uid-1", JOB_NAME_LABEL: "pi"},
                "annotations": {"note": "x"},
                "finalizers": ["example.com/keep"],
            },
            "spec": {
                "restartPolicy": "Never",
                "initContainers": [{"name": "init", "image": "busybox"}],
                "containers": [{"name": "main", "image": "busybox", "futureField": {"a": 1},
                                "env": [{"name": "A", "value": "1"}]}],
            },
        })
    }

    #[test]
    fn non_indexed_pod_keeps_the_template_and_gains_owner_and_finalizer() {
        let pod = build_pod(&job(), &template(), None);
        assert_eq!(pod["metadata"]["generateName"], "pi-");
        assert_eq!(pod["metadata"]["namespace"], "ns");
        assert_eq!(pod["metadata"]["labels"]["app"], "pi");
        assert_eq!(pod["metadata"]["labels"][CONTROLLER_UID_LABEL], "uid-1");
        assert_eq!(pod["metadata"]["annotations"]["note"], "x");
        assert_eq!(
            pod["metadata"]["annotations"][CREATED_BY_ANNOTATION],
            "jobwarden.io/job-controller"
        );
        assert_eq!(
            pod["metadata"]["finalizers"],
            json!(["example.com/keep", TRACKING_FINALIZER])
        );
        let owner = &pod["metadata"]["ownerReferences"][0];
        assert_eq!(owner["kind"], "Job");
        assert_eq!(owner["uid"], "uid-1");
        assert_eq!(owner["controller"], true);
        assert_eq!(pod["spec"]["containers"][0]["futureField"], json!({"a": 1}));
        assert!(pod["spec"].get("hostname").is_none());
        assert_eq!(
            pod["spec"]["containers"][0]["env"],
            json!([{"name": "A", "value": "1"}])
        );
        assert!(
            pod["metadata"]["labels"]
                .get(COMPLETION_INDEX_KEY)
                .is_none()
        );
    }

    #[test]
    fn indexed_pod_carries_its_index_everywhere_upstream_puts_it() {
        let pod = build_pod(&job(), &template(), Some(3));
        assert_eq!(pod["metadata"]["generateName"], "pi-3-");
        assert_eq!(pod["metadata"]["annotations"][COMPLETION_INDEX_KEY], "3");
        assert_eq!(pod["metadata"]["labels"][COMPLETION_INDEX_KEY], "3");
        assert_eq!(pod["spec"]["hostname"], "pi-3");
        // Upstream's `addCompletionIndexEnvVariable` reads the label (PodIndexLabel is GA).
        let env_ref = json!({"name": COMPLETION_INDEX_ENV, "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.labels['batch.kubernetes.io/job-completion-index']"}}});
        assert_eq!(pod["spec"]["containers"][0]["env"][1], env_ref);
        assert_eq!(pod["spec"]["initContainers"][0]["env"][0], env_ref);
    }

    #[test]
    fn a_user_defined_index_variable_is_left_alone() {
        let mut t = template();
        t["spec"]["containers"][0]["env"] = json!([{"name": COMPLETION_INDEX_ENV, "value": "7"}]);
        let pod = build_pod(&job(), &t, Some(1));
        assert_eq!(
            pod["spec"]["containers"][0]["env"],
            json!([{"name": COMPLETION_INDEX_ENV, "value": "7"}])
        );
    }

    #[test]
    fn missing_identity_labels_are_added() {
        let t = json!({"spec": {"containers": []}});
        let pod = build_pod(&job(), &t, None);
        assert_eq!(pod["metadata"]["labels"][CONTROLLER_UID_LABEL], "uid-1");
        assert_eq!(pod["metadata"]["labels"][JOB_NAME_LABEL], "pi");
        assert_eq!(pod["metadata"]["finalizers"], json!([TRACKING_FINALIZER]));
    }

    #[test]
    fn long_names_are_cut_so_the_index_survives() {
        let name = "a".repeat(60);
        let got = generate_name_with_index(&name, 12);
        assert_eq!(got.len(), MAX_GENERATED_NAME_LENGTH);
        assert!(got.ends_with("-12-"));
        assert_eq!(generate_name_with_index("short", 0), "short-0-");
    }
}
