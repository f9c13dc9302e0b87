//! Webhook configurations as a test registers them: jobwarden's (shipped or generated)
//! pointed by `clientConfig.url` at a server on this machine, with the test's CA, and scoped to
//! the test's namespaces (no Service, no cert-manager); registered and removed as the admin.

use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

/// Where the configurations send requests: a server of the test's, or a port nobody listens
/// on (an outage).
pub struct Target<'a> {
    pub port: u16,
    pub ca_pem: Option<&'a str>,
}

/// `configurations` (YAML, both kinds) renamed `name`, pointed at the target by URL, and scoped
/// to `namespaces` besides their own selectors (a label selector ANDs its requirements).
pub fn registration(
    configurations: &str,
    name: &str,
    target: &Target<'_>,
    namespaces: &[&str],
) -> String {
    let mut items = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(configurations) {
        let mut config: Value = serde::Deserialize::deserialize(doc).expect("configurations");
        if config.is_null() {
            continue;
        }
        config["metadata"]["name"] = json!(name);
        if let Some(metadata) = config["metadata"].as_object_mut() {
            // No cert-manager here: the CA goes in directly.
            metadata.remove("annotations");
        }
        for webhook in config["webhooks"].as_array_mut().expect("webhooks") {
            let path = webhook["clientConfig"]["service"]["path"]
                .as_str()
                .expect("a path")
                .to_owned();
            let mut client = json!({"url": format!("https://127.0.0.1:{}{path}", target.port)});
            if let Some(ca) = target.ca_pem {
                client["caBundle"] = json!(base64::engine::general_purpose::STANDARD.encode(ca));
            }
            webhook["clientConfig"] = client;
            let scoped = json!({
                "key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces,
            });
            match webhook
                .pointer_mut("/namespaceSelector/matchExpressions")
                .and_then(Value::as_array_mut)
            {
                Some(expressions) => expressions.push(scoped),
                None => webhook["namespaceSelector"] = json!({"matchExpressions": [scoped]}),
            }
        }
        items.push(config);
    }
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

/// Registers the configurations (a `List` from [`registration`]) by server-side apply.
pub async fn register(client: &Client, list: &str) {
    let list: Value = serde_json::from_str(list).expect("a List");
    let apply = PatchParams::apply("jobwarden-webhook-e2e").force();
    for item in list["items"].as_array().into_iter().flatten() {
        let name = item["metadata"]["name"].as_str().unwrap_or_default();
        let applied = match item["kind"].as_str() {
            Some("MutatingWebhookConfiguration") => {
                Api::<MutatingWebhookConfiguration>::all(client.clone())
                    .patch(name, &apply, &Patch::Apply(item))
                    .await
                    .map(|_| ())
            }
            _ => Api::<ValidatingWebhookConfiguration>::all(client.clone())
                .patch(name, &apply, &Patch::Apply(item))
                .await
                .map(|_| ()),
        };
        if let Err(e) = applied {
            panic!("{} {name} is registered: {e}", item["kind"]);
        }
    }
}

/// Deletes both configurations named `name`.
pub async fn unregister(client: &Client, name: &str) {
    let delete = DeleteParams::default();
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .delete(name, &delete)
        .await
        .expect("the MutatingWebhookConfiguration is deleted");
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .delete(name, &delete)
        .await
        .expect("the ValidatingWebhookConfiguration is deleted");
}
