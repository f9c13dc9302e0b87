//! The chosen install, as rendered manifests (`kubectl kustomize deploy/`, `helm template`):
//! what `--pre` asks permission for, which APIs it needs served, which namespace it goes to,
//! which pods it runs and which webhook configurations it registers. Read from the objects
//! themselves, so nothing here is a list of kinds that could drift from deploy/ or the chart.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::access::{Access, granted_by};

/// The group whose kinds mean the install needs cert-manager.
pub const CERT_MANAGER_GROUP: &str = "cert-manager.io";

/// The rendered objects, and where they were read from (for messages).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Install {
    pub sources: Vec<String>,
    pub objects: Vec<Value>,
}

/// A kind as the manifests write it: `("apps/v1", "Deployment")`.
pub type TypeRef = (String, String);

/// Where a kind lives in the API, as discovery says (or, for a kind the server does not serve,
/// as guessed from its name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    pub group: String,
    /// The plural: `deployments`.
    pub plural: String,
    pub namespaced: bool,
}

/// The verbs applying an install asks for on each of its objects: `kubectl apply` gets,
/// creates, and patches on the next apply; `helm install` and `upgrade` do the same.
pub const APPLY_VERBS: [&str; 3] = ["create", "get", "patch"];

/// A pod as one of the install's Deployments or Jobs would make it, for a server-side dry run.
#[derive(Debug, Clone, PartialEq)]
pub struct PodProbe {
    /// `Deployment jobwarden`, `Job jobwarden-register`: whose pod it is.
    pub owner: String,
    pub namespace: String,
    pub pod: Value,
}

fn text<'v>(o: &'v Value, pointer: &str) -> Option<&'v str> {
    o.pointer(pointer).and_then(Value::as_str)
}

/// `apps/v1` → `apps`; `v1` → `` (the core group).
pub fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}

impl Install {
    /// Every kind the install creates.
    pub fn kinds(&self) -> BTreeSet<TypeRef> {
        self.objects
            .iter()
            .filter_map(|o| {
                Some((
                    text(o, "/apiVersion")?.to_owned(),
                    text(o, "/kind")?.to_owned(),
                ))
            })
            .collect()
    }

    /// The install's kinds of cert-manager's group.
    pub fn cert_manager_kinds(&self) -> Vec<TypeRef> {
        self.kinds()
            .into_iter()
            .filter(|(v, _)| group_of(v) == CERT_MANAGER_GROUP)
            .collect()
    }

    /// The namespace a namespaced object goes to: its own, else `default_namespace` (what
    /// `kubectl apply -n` and `helm install -n` give an object that names none).
    fn namespace_of<'a>(o: &'a Value, default_namespace: &'a str) -> &'a str {
        text(o, "/metadata/namespace").unwrap_or(default_namespace)
    }

    /// The one namespace the install's objects name (`kubectl kustomize` and `helm template -n`
    /// write it into each namespaced object); `None` when they name none or several.
    pub fn namespace(&self) -> Option<String> {
        let named: BTreeSet<&str> = self
            .objects
            .iter()
            .filter_map(|o| text(o, "/metadata/namespace"))
            .collect();
        let mut named = named.into_iter();
        match (named.next(), named.next()) {
            (Some(one), None) => Some(one.to_owned()),
            _ => None,
        }
    }

    /// The Namespace object the install creates for `namespace`, if it does.
    pub fn namespace_object(&self, namespace: &str) -> Option<&Value> {
        self.objects.iter().find(|o| {
            text(o, "/kind") == Some("Namespace") && text(o, "/metadata/name") == Some(namespace)
        })
    }

    fn resource<'r>(
        &self,
        o: &Value,
        resources: &'r BTreeMap<TypeRef, Resource>,
    ) -> Option<&'r Resource> {
        let key = (
            text(o, "/apiVersion")?.to_owned(),
            text(o, "/kind")?.to_owned(),
        );
        resources.get(&key)
    }

    /// What applying the install asks of its caller: [`APPLY_VERBS`] on each object, by name
    /// but for `create` (which RBAC cannot limit by name), each once.
    pub fn accesses(
        &self,
        resources: &BTreeMap<TypeRef, Resource>,
        default_namespace: &str,
    ) -> Vec<Access> {
        let mut out = BTreeSet::new();
        for o in &self.objects {
            let Some(r) = self.resource(o, resources) else {
                continue;
            };
            let namespace = r
                .namespaced
                .then(|| Self::namespace_of(o, default_namespace));
            let name = text(o, "/metadata/name");
            for verb in APPLY_VERBS {
                let name = if verb == "create" { None } else { name };
                out.insert(Access::resource(namespace, &r.group, &r.plural, name, verb));
            }
        }
        out.into_iter().collect()
    }

    /// Every permission the install's Roles and ClusterRoles grant. kube-apiserver lets a
    /// caller create such a role, or bind it, only if the caller holds all of them (or may
    /// `escalate` and `bind`): RBAC's escalation prevention.
    pub fn granted(&self, default_namespace: &str) -> Vec<Access> {
        let mut out = BTreeSet::new();
        for o in &self.objects {
            let namespace = match text(o, "/kind") {
                Some("ClusterRole") => None,
                Some("Role") => Some(Self::namespace_of(o, default_namespace)),
                _ => continue,
            };
            out.extend(granted_by(&o["rules"], namespace));
        }
        out.into_iter().collect()
    }

    /// Whether the install creates roles or bindings (and so needs [`granted`](Self::granted)).
    pub fn grants_rbac(&self) -> bool {
        self.objects.iter().any(|o| {
            group_of(text(o, "/apiVersion").unwrap_or_default()) == "rbac.authorization.k8s.io"
        })
    }

    /// The pods of the install's Deployments and Jobs (the chart's hooks), as a dry run can
    /// create them in their namespace before the install exists: the template as it is, but under the namespace's `default`
    /// ServiceAccount (the install's own does not exist yet, and the ServiceAccount admission
    /// plugin would refuse the pod before Pod Security judged it) and a generated name.
    pub fn pod_probes(&self, default_namespace: &str) -> Vec<PodProbe> {
        self.objects
            .iter()
            .filter(|o| matches!(text(o, "/kind"), Some("Deployment" | "Job")))
            .map(|d| {
                let kind = text(d, "/kind").unwrap_or_default();
                let name = text(d, "/metadata/name").unwrap_or("jobwarden");
                let namespace = Self::namespace_of(d, default_namespace).to_owned();
                let mut spec = d["spec"]["template"]["spec"].clone();
                if let Some(spec) = spec.as_object_mut() {
                    spec.insert("serviceAccountName".into(), json!("default"));
                    spec.insert("automountServiceAccountToken".into(), json!(false));
                }
                let pod = json!({
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "generateName": format!("{}{name}-", crate::features::PROBE_PREFIX),
                        "namespace": namespace,
                        "labels": d["spec"]["template"]["metadata"]["labels"],
                    },
                    "spec": spec,
                });
                PodProbe {
                    owner: format!("{kind} {name}"),
                    namespace,
                    pod,
                }
            })
            .collect()
    }

    /// The webhook configurations the install registers: kind, name, and its webhooks' names.
    pub fn webhook_configurations(&self) -> Vec<WebhookConfiguration> {
        self.objects
            .iter()
            .filter_map(WebhookConfiguration::of)
            .collect()
    }
}

/// A Mutating- or ValidatingWebhookConfiguration, as far as names go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfiguration {
    pub kind: String,
    pub name: String,
    pub webhooks: Vec<String>,
}

impl WebhookConfiguration {
    pub fn of(o: &Value) -> Option<WebhookConfiguration> {
        let kind = text(o, "/kind")?;
        if kind != "MutatingWebhookConfiguration" && kind != "ValidatingWebhookConfiguration" {
            return None;
        }
        Some(WebhookConfiguration {
            kind: kind.to_owned(),
            name: text(o, "/metadata/name")?.to_owned(),
            webhooks: o["webhooks"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|w| text(w, "/name").map(str::to_owned))
                .collect(),
        })
    }
}
