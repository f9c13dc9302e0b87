//! A replay of the part of kustomize deploy/ uses: resources (files and directories),
//! namespace, labels, configMapGenerator, images, JSON 6902 patches and replacements of one
//! field into another. Any other kustomization field, or another shape of these, fails the
//! test: the replay must never quietly skip what kustomize would do. Generated names keep
//! no hash suffix. Transformers run in kustomize's order: namespace, patches, labels,
//! images, replacements.

use std::path::Path;

use serde_json::{Value, json};

use crate::deploy::objects::{array, kind, name, str_at, strings, yaml_docs};

const KNOWN: [&str; 9] = [
    "apiVersion",
    "kind",
    "namespace",
    "labels",
    "resources",
    "patches",
    "configMapGenerator",
    "images",
    "replacements",
];

/// The kinds deploy/ holds that kube-apiserver serves cluster-scoped.
pub fn cluster_scoped(kind: &str) -> bool {
    matches!(
        kind,
        "Namespace"
            | "ClusterRole"
            | "ClusterRoleBinding"
            | "MutatingWebhookConfiguration"
            | "ValidatingWebhookConfiguration"
            | "FlowSchema"
    )
}

/// kustomize 5 sets the kustomization's namespace on every kind its built-in schema (of an
/// older Kubernetes) does not know to be cluster-scoped; flowcontrol's v1 FlowSchema came after
/// it, so it gets one, which kube-apiserver drops (the e2e suites apply deploy/'s FlowSchema as
/// rendered).
fn namespaced_by_kustomize(kind: &str) -> bool {
    !cluster_scoped(kind) || kind == "FlowSchema"
}

pub fn build(dir: &Path) -> Vec<Value> {
    let file = dir.join("kustomization.yaml");
    let k = read(&file).into_iter().next().expect("a kustomization");
    for key in k.as_object().expect("a mapping").keys() {
        assert!(
            KNOWN.contains(&key.as_str()),
            "{}: tests/it/deploy/kustomize.rs does not replay kustomize's `{key}`; teach it before using it",
            file.display()
        );
    }
    assert_eq!(k["kind"], "Kustomization", "{}", file.display());

    let mut objects = Vec::new();
    for resource in strings(&k["resources"]) {
        let path = dir.join(&resource);
        if path.is_dir() {
            objects.extend(build(&path));
        } else {
            objects.extend(read(&path));
        }
    }
    for generator in array(&k["configMapGenerator"]) {
        only_keys(&generator, &["name", "files"]);
        let mut data = serde_json::Map::new();
        for f in strings(&generator["files"]) {
            let text = std::fs::read_to_string(dir.join(&f)).expect("a generator file");
            data.insert(f, Value::String(text));
        }
        objects.push(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": generator["name"]},
            "data": data,
        }));
    }
    if let Some(ns) = k["namespace"].as_str() {
        for o in objects
            .iter_mut()
            .filter(|o| namespaced_by_kustomize(kind(o)))
        {
            o["metadata"]["namespace"] = Value::from(ns);
        }
    }
    for p in array(&k["patches"]) {
        only_keys(&p, &["path", "target"]);
        let ops: json_patch::Patch = serde_json::from_value(
            read(&dir.join(str_at(&p, "/path")))
                .into_iter()
                .next()
                .expect("a patch"),
        )
        .expect("patches in deploy/ are JSON 6902 operation lists");
        let target = &p["target"];
        only_keys(target, &["group", "version", "kind", "name"]);
        let mut hit = 0;
        for o in objects.iter_mut().filter(|o| matches(o, target)) {
            json_patch::patch(o, &ops)
                .unwrap_or_else(|e| panic!("patch {} on {}: {e}", p["path"], name(o)));
            hit += 1;
        }
        assert_eq!(hit, 1, "patch {} must hit one object", p["path"]);
    }
    for l in array(&k["labels"]) {
        only_keys(&l, &["pairs", "includeSelectors"]);
        assert_eq!(
            l["includeSelectors"], false,
            "labels on selectors are not replayed"
        );
        for o in objects.iter_mut() {
            for (key, value) in l["pairs"].as_object().expect("pairs") {
                o["metadata"]["labels"][key] = value.clone();
            }
        }
    }
    for image in array(&k["images"]) {
        only_keys(&image, &["name", "newName", "newTag"]);
        let new = format!(
            "{}:{}",
            str_at(&image, "/newName"),
            str_at(&image, "/newTag")
        );
        for o in objects.iter_mut().filter(|o| kind(o) == "Deployment") {
            for c in o["spec"]["template"]["spec"]["containers"]
                .as_array_mut()
                .expect("containers")
            {
                let current = c["image"].as_str().unwrap_or_default();
                let bare = current.split([':', '@']).next().unwrap_or_default();
                if bare == str_at(&image, "/name") {
                    c["image"] = Value::from(new.clone());
                }
            }
        }
    }
    for r in array(&k["replacements"]) {
        only_keys(&r, &["source", "targets"]);
        let source = &r["source"];
        only_keys(source, &["kind", "name", "fieldPath"]);
        let value = objects
            .iter()
            .find(|o| matches(o, source))
            .and_then(|o| field(o, str_at(source, "/fieldPath")))
            .unwrap_or_else(|| panic!("replacement source {source} not found"))
            .clone();
        for target in array(&r["targets"]) {
            only_keys(&target, &["select", "fieldPaths"]);
            let mut hit = 0;
            for o in objects.iter_mut().filter(|o| matches(o, &target["select"])) {
                for path in strings(&target["fieldPaths"]) {
                    *field_mut(o, &path)
                        .unwrap_or_else(|| panic!("replacement target {path} not found")) =
                        value.clone();
                    hit += 1;
                }
            }
            assert!(hit > 0, "replacement target {target} matches nothing");
        }
    }
    objects
}

fn read(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    yaml_docs(&text)
}

fn only_keys(v: &Value, allowed: &[&str]) {
    for key in v.as_object().expect("a mapping").keys() {
        assert!(
            allowed.contains(&key.as_str()),
            "tests/it/deploy/kustomize.rs does not replay `{key}` in {v}"
        );
    }
}

/// A patch target or replacement selector: kind and name, and group/version when given.
fn matches(o: &Value, target: &Value) -> bool {
    let api_version = o["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    target["kind"] == kind(o)
        && target["name"] == name(o)
        && target.get("group").is_none_or(|g| g == group)
        && target.get("version").is_none_or(|v| v == version)
}

/// kustomize's field paths: `a.b.[key=value].c`.
fn field<'v>(o: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.')
        .try_fold(o, |v, segment| match list_selector(segment) {
            Some((key, value)) => v.as_array()?.iter().find(|e| e[key] == value),
            None => v.get(segment),
        })
}

fn field_mut<'v>(o: &'v mut Value, path: &str) -> Option<&'v mut Value> {
    path.split('.')
        .try_fold(o, |v, segment| match list_selector(segment) {
            Some((key, value)) => v.as_array_mut()?.iter_mut().find(|e| e[key] == value),
            None => v.get_mut(segment),
        })
}

fn list_selector(segment: &str) -> Option<(&str, &str)> {
    segment
        .strip_prefix('[')?
        .strip_suffix(']')?
        .split_once('=')
}
