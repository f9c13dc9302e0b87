//! Defaulting on the raw JSON of a Job, never through typed structs, so fields this build does
//! not know survive. `pod_replacement_policy` is what the mutating webhook applies;
//! `upstream_defaults` and `prepare_for_create`/`prepare_for_update` are what a server-side dry
//! run does before validating, and what `jobwarden check` does to a manifest.

use serde_json::{Map, Value, json};

use super::well_known::{
    CONTROLLER_UID_LABEL, JOB_NAME_LABEL, LEGACY_CONTROLLER_UID_LABEL, LEGACY_JOB_NAME_LABEL,
};

/// The uid `check` gives a manifest that has none, where the apiserver would generate one.
pub const PLACEHOLDER_UID: &str = "00000000-0000-0000-0000-000000000000";

fn is_set(map: &Map<String, Value>, key: &str) -> bool {
    map.get(key).is_some_and(|v| !v.is_null())
}

fn set_if_absent(map: &mut Map<String, Value>, key: &str, value: Value) -> bool {
    if is_set(map, key) {
        return false;
    }
    map.insert(key.to_owned(), value);
    true
}

fn spec_mut(job: &mut Value) -> Option<&mut Map<String, Value>> {
    job.get_mut("spec").and_then(Value::as_object_mut)
}

/// KEP-3939's default: `Failed` when a pod failure policy is set, else `TerminatingOrFailed`.
/// Only an absent (or null) field is defaulted; an explicit value, even an invalid one, stays.
/// Returns whether the object changed.
pub fn pod_replacement_policy(job: &mut Value) -> bool {
    let Some(spec) = spec_mut(job) else {
        return false;
    };
    let policy = pod_replacement_policy_for(is_set(spec, "podFailurePolicy"));
    set_if_absent(spec, "podReplacementPolicy", json!(policy))
}

/// The `podReplacementPolicy` an unset field defaults to, by whether `podFailurePolicy` is set:
/// what `pod_replacement_policy` writes, for a caller that writes a patch instead.
pub fn pod_replacement_policy_for(has_pod_failure_policy: bool) -> &'static str {
    if has_pod_failure_policy {
        "Failed"
    } else {
        "TerminatingOrFailed"
    }
}

/// Everything upstream's `SetDefaults_Job` does, in its order.
pub fn upstream_defaults(job: &mut Value) {
    let template_labels = job
        .pointer("/spec/template/metadata/labels")
        .filter(|l| !l.is_null())
        .cloned();
    if let Some(spec) = spec_mut(job) {
        match (is_set(spec, "completions"), is_set(spec, "parallelism")) {
            (false, false) => {
                spec.insert("completions".into(), json!(1));
                spec.insert("parallelism".into(), json!(1));
            }
            (_, false) => {
                spec.insert("parallelism".into(), json!(1));
            }
            _ => {}
        }
        let backoff = if is_set(spec, "backoffLimitPerIndex") {
            i32::MAX
        } else {
            6
        };
        set_if_absent(spec, "backoffLimit", json!(backoff));
    }
    if let (Some(labels), Some(meta)) = (
        template_labels,
        job.get_mut("metadata").and_then(Value::as_object_mut),
    ) {
        let empty = meta
            .get("labels")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty);
        if empty {
            meta.insert("labels".into(), labels);
        }
    }
    pod_replacement_policy(job);
    let Some(spec) = spec_mut(job) else {
        return;
    };
    set_if_absent(spec, "completionMode", json!("NonIndexed"));
    set_if_absent(spec, "suspend", json!(false));
    set_if_absent(spec, "manualSelector", json!(false));
    let rules = spec
        .get_mut("podFailurePolicy")
        .and_then(|p| p.get_mut("rules"))
        .and_then(Value::as_array_mut);
    for rule in rules.into_iter().flatten() {
        let patterns = rule
            .get_mut("onPodConditions")
            .and_then(Value::as_array_mut);
        for pattern in patterns
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            if pattern
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                pattern.insert("status".into(), json!("True"));
            }
        }
    }
}

/// The object under `key`, created when absent or null. A value of another type is left for
/// decoding to report, so `None`.
fn object_at<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    let slot = map
        .entry(key.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
}

/// Upstream's `PrepareForCreate` for a manifest that has not been through an apiserver: a uid if
/// it has none, the generated selector and template labels unless `manualSelector` is true, and
/// an empty status.
pub fn prepare_for_create(job: &mut Value) {
    let Some(root) = job.as_object_mut() else {
        return;
    };
    let Some(meta) = object_at(root, "metadata") else {
        return;
    };
    let name = meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if meta
        .get("uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        meta.insert("uid".into(), json!(PLACEHOLDER_UID));
    }
    let uid = meta
        .get("uid")
        .and_then(Value::as_str)
        .unwrap_or(PLACEHOLDER_UID)
        .to_owned();
    root.insert("status".into(), json!({}));
    let _ = generate_selector(root, &name, &uid);
}

/// Upstream's `PrepareForUpdate` for `check --old`: the status is the stored one, and a manifest
/// that omits what the apiserver generated (uid, selector, labels) gets the stored values, as a
/// `kubectl apply` would keep them.
pub fn prepare_for_update(job: &mut Value, old: &Value) {
    let Some(root) = job.as_object_mut() else {
        return;
    };
    root.insert(
        "status".into(),
        old.get("status").cloned().unwrap_or_else(|| json!({})),
    );
    let Some(meta) = object_at(root, "metadata") else {
        return;
    };
    if meta
        .get("uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
        && let Some(uid) = old.pointer("/metadata/uid")
    {
        meta.insert("uid".into(), uid.clone());
    }
    let name = meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let uid = meta
        .get("uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if let (Some(spec), Some(selector)) = (
        root.get_mut("spec").and_then(Value::as_object_mut),
        old.pointer("/spec/selector"),
    ) {
        set_if_absent(spec, "selector", selector.clone());
    }
    if !uid.is_empty() {
        let _ = generate_selector(root, &name, &uid);
    }
}

fn generate_selector(root: &mut Map<String, Value>, name: &str, uid: &str) -> Option<()> {
    let spec = object_at(root, "spec")?;
    if spec.get("manualSelector").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    let template = object_at(spec, "template")?;
    let labels = object_at(object_at(template, "metadata")?, "labels")?;
    for (key, value) in [
        (LEGACY_JOB_NAME_LABEL, name),
        (JOB_NAME_LABEL, name),
        (LEGACY_CONTROLLER_UID_LABEL, uid),
        (CONTROLLER_UID_LABEL, uid),
    ] {
        set_if_absent(labels, key, json!(value));
    }
    let match_labels = object_at(object_at(spec, "selector")?, "matchLabels")?;
    set_if_absent(match_labels, CONTROLLER_UID_LABEL, json!(uid));
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaulted(spec: Value) -> Value {
        let mut job = json!({"metadata": {"name": "j"}, "spec": spec});
        upstream_defaults(&mut job);
        job["spec"].take()
    }

    #[test]
    fn upstream_defaults_table() {
        let s = defaulted(json!({}));
        assert_eq!(
            s,
            json!({"completions": 1, "parallelism": 1, "backoffLimit": 6,
                   "completionMode": "NonIndexed", "suspend": false, "manualSelector": false,
                   "podReplacementPolicy": "TerminatingOrFailed"})
        );
        let s = defaulted(json!({"parallelism": 0}));
        assert_eq!(
            (s.get("completions"), &s["backoffLimit"]),
            (None, &json!(6))
        );
        assert_eq!(
            defaulted(json!({"completions": 2}))["parallelism"],
            json!(1)
        );
        assert_eq!(
            defaulted(json!({"backoffLimitPerIndex": 1}))["backoffLimit"],
            json!(2147483647)
        );
        let s = defaulted(json!({"podFailurePolicy": {"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}, {"type": "X", "status": "False"}]}
        ]}}));
        assert_eq!(s["podReplacementPolicy"], json!("Failed"));
        assert_eq!(
            s.pointer("/podFailurePolicy/rules/0/onPodConditions"),
            Some(
                &json!([{"type": "DisruptionTarget", "status": "True"}, {"type": "X", "status": "False"}])
            )
        );
        assert_eq!(
            defaulted(json!({"podReplacementPolicy": ""}))["podReplacementPolicy"],
            json!("")
        );
        assert_eq!(
            defaulted(json!({"podFailurePolicy": null}))["podReplacementPolicy"],
            json!("TerminatingOrFailed")
        );
    }

    #[test]
    fn job_labels_come_from_template_only_when_empty() {
        let mut job = json!({"metadata": {"name": "j"}, "spec": {"template": {"metadata": {"labels": {"a": "b"}}}}});
        upstream_defaults(&mut job);
        assert_eq!(job.pointer("/metadata/labels"), Some(&json!({"a": "b"})));
        let mut job = json!({"metadata": {"labels": {"x": "y"}}, "spec": {"template": {"metadata": {"labels": {"a": "b"}}}}});
        upstream_defaults(&mut job);
        assert_eq!(job.pointer("/metadata/labels"), Some(&json!({"x": "y"})));
    }

    #[test]
    fn mutation_leaves_unknown_fields_and_hostile_shapes_alone() {
        let mut job = json!({"spec": {"futureField": {"a": 1}}});
        assert!(pod_replacement_policy(&mut job));
        assert_eq!(
            job,
            json!({"spec": {"futureField": {"a": 1}, "podReplacementPolicy": "TerminatingOrFailed"}})
        );
        assert!(!pod_replacement_policy(&mut job));
        for mut hostile in [json!(null), json!([1]), json!({"spec": 3}), json!("x")] {
            let before = hostile.clone();
            assert!(!pod_replacement_policy(&mut hostile));
            upstream_defaults(&mut hostile);
            assert_eq!(hostile, before);
        }
    }

    #[test]
    fn prepare_for_create_generates_selector_and_labels() {
        let mut job =
            json!({"metadata": {"name": "j"}, "spec": {"template": {}}, "status": {"active": 3}});
        prepare_for_create(&mut job);
        assert_eq!(job["status"], json!({}));
        assert_eq!(
            job.pointer("/spec/selector/matchLabels/batch.kubernetes.io~1controller-uid"),
            Some(&json!(PLACEHOLDER_UID))
        );
        assert_eq!(
            job.pointer("/spec/template/metadata/labels/job-name"),
            Some(&json!("j"))
        );
        let mut manual =
            json!({"metadata": {"name": "j", "uid": "u"}, "spec": {"manualSelector": true}});
        prepare_for_create(&mut manual);
        assert_eq!(manual.pointer("/spec/selector"), None);
    }

    #[test]
    fn prepare_for_update_keeps_stored_status_and_generated_fields() {
        let mut old = json!({"metadata": {"name": "j", "uid": "u1"}, "spec": {}});
        prepare_for_create(&mut old);
        old["status"] = json!({"active": 1});
        let mut new =
            json!({"metadata": {"name": "j"}, "spec": {"parallelism": 2}, "status": {"active": 9}});
        prepare_for_update(&mut new, &old);
        assert_eq!(new["status"], json!({"active": 1}));
        assert_eq!(new.pointer("/metadata/uid"), Some(&json!("u1")));
        assert_eq!(new.pointer("/spec/selector"), old.pointer("/spec/selector"));
        assert_eq!(
            new.pointer("/spec/template/metadata/labels"),
            old.pointer("/spec/template/metadata/labels")
        );
    }
}
