//! Reading the rendered objects, and rendering them with kubectl.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

use crate::deploy::root;

pub fn kind(o: &Value) -> &str {
    o["kind"].as_str().unwrap_or_default()
}

pub fn name(o: &Value) -> &str {
    o.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

pub fn str_at<'v>(o: &'v Value, pointer: &str) -> &'v str {
    o.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{pointer} missing in {} {}", kind(o), name(o)))
}

pub fn array(v: &Value) -> Vec<Value> {
    v.as_array().cloned().unwrap_or_default()
}

pub fn strings(v: &Value) -> Vec<String> {
    array(v)
        .iter()
        .map(|s| s.as_str().expect("a string").to_owned())
        .collect()
}

pub fn of_kind<'o>(objects: &'o [Value], k: &'o str) -> impl Iterator<Item = &'o Value> {
    objects.iter().filter(move |o| kind(o) == k)
}

pub fn deployments(objects: &[Value]) -> impl Iterator<Item = &Value> {
    of_kind(objects, "Deployment")
}

pub fn webhooks_of(config: &Value) -> &[Value] {
    config["webhooks"].as_array().map_or(&[], Vec::as_slice)
}

pub fn args(d: &Value) -> Vec<String> {
    let containers = array(&d["spec"]["template"]["spec"]["containers"]);
    assert_eq!(containers.len(), 1, "deployment {}: one container", name(d));
    for env in array(&containers[0]["env"]) {
        let var = str_at(&env, "/name");
        assert!(
            !var.starts_with("JOBWARDEN_NO_"),
            "deployment {}: choose the faces with --no-webhook/--no-controller, not {var}",
            name(d)
        );
    }
    strings(&containers[0]["args"])
}

pub fn serves_webhook(d: &Value) -> bool {
    !args(d).iter().any(|a| a == "--no-webhook")
}

pub fn runs_controller(d: &Value) -> bool {
    !args(d).iter().any(|a| a == "--no-controller")
}

/// Whether the Deployment serves /metrics secured (HTTPS, each scrape's token reviewed): the
/// server's default, unless `--metrics-secure=false`.
pub fn secures_metrics(d: &Value) -> bool {
    !args(d).iter().any(|a| a == "--metrics-secure=false")
}

/// A matchLabels selector against a pod's labels.
pub fn selects(selector: &Value, labels: &Value) -> bool {
    let selector = selector.as_object().expect("a matchLabels selector");
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

pub fn namespace_of_install(objects: &[Value]) -> String {
    let namespaces: Vec<&str> = of_kind(objects, "Namespace").map(name).collect();
    assert_eq!(
        namespaces.len(),
        1,
        "one Namespace per install: {namespaces:?}"
    );
    namespaces[0].to_owned()
}

/// The Service the webhooks call: the one with a port to the containers' https port.
pub fn webhook_service(objects: &[Value]) -> &Value {
    let services: Vec<&Value> = of_kind(objects, "Service")
        .filter(|s| {
            array(&s["spec"]["ports"])
                .iter()
                .any(|p| p["targetPort"] == "https")
        })
        .collect();
    assert_eq!(services.len(), 1, "one Service to the https port");
    services[0]
}

/// The Certificate kube-apiserver checks: the one for the Service's DNS names, exactly.
pub fn the_serving_certificate<'o>(objects: &'o [Value], ns: &str, service: &str) -> &'o Value {
    let want = vec![
        format!("{service}.{ns}.svc"),
        format!("{service}.{ns}.svc.cluster.local"),
    ];
    let found: Vec<&Value> = of_kind(objects, "Certificate")
        .filter(|c| !c["spec"]["dnsNames"].is_null())
        .collect();
    assert_eq!(found.len(), 1, "one serving Certificate");
    assert_eq!(
        strings(&found[0]["spec"]["dnsNames"]),
        want,
        "the serving Certificate's dnsNames must be the Service's names"
    );
    found[0]
}

/// Objects by kind/namespace/name; `normalize` drops the hash kustomize adds to a generated
/// ConfigMap's name, the label kustomize may add, and the namespace it gives a cluster-scoped
/// kind it does not know (kube-apiserver drops it too), so the renders can be compared.
pub fn by_identity(objects: &[Value], normalize: bool) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for o in objects {
        let mut o = o.clone();
        if normalize {
            strip_config_map_hash(&mut o);
            if crate::deploy::kustomize::cluster_scoped(kind(&o))
                && let Some(meta) = o["metadata"].as_object_mut()
            {
                meta.remove("namespace");
            }
        }
        let key = format!(
            "{}/{}/{}",
            kind(&o),
            o.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or(""),
            name(&o)
        );
        assert!(out.insert(key.clone(), o).is_none(), "{key} twice");
    }
    out
}

/// `jobwarden-policy-f82hcf6fk7` -> `jobwarden-policy`, wherever it appears.
pub fn strip_config_map_hash(v: &mut Value) {
    match v {
        Value::String(s) if s.starts_with("jobwarden-policy-") => *s = "jobwarden-policy".into(),
        Value::Array(items) => items.iter_mut().for_each(strip_config_map_hash),
        Value::Object(map) => map.values_mut().for_each(strip_config_map_hash),
        _ => {}
    }
}

pub fn yaml_docs(text: &str) -> Vec<Value> {
    use serde::Deserialize as _;
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).expect("valid YAML"))
        .filter(|v| !v.is_null())
        .collect()
}

pub fn kubectl_available() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
}

pub fn kubectl_kustomize(dir: &str) -> Vec<Value> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(root().join(dir))
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl kustomize {dir}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    yaml_docs(&String::from_utf8_lossy(&out.stdout))
}

pub fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
