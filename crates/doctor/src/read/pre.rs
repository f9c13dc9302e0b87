//! What `--pre` reads: where the install's kinds live in the API (discovery), the caller's
//! access reviews, cert-manager's group, the namespace, dry runs of the install's pods, and the
//! webhook configurations already registered.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{Cluster, collection};
use crate::access::Access;
use crate::pre::install::{
    CERT_MANAGER_GROUP, Install, Resource, TypeRef, WebhookConfiguration, group_of,
};
use crate::pre::{Allowed, GrantAnswers, NamespaceState, PreObserved};

pub async fn read(cluster: &Cluster, install: &Install, namespace: &str) -> PreObserved {
    let resources = discover(cluster, &install.kinds()).await;
    let access = cluster
        .may_each(install.accesses(&resources, namespace))
        .await;
    let grants = grant_answers(cluster, install, namespace).await;
    let cert_manager = served_kinds(cluster, &format!("/apis/{CERT_MANAGER_GROUP}/v1")).await;
    let state = namespace_state(cluster, namespace).await;
    let may_create_namespace = cluster
        .may(&Access::resource(None, "", "namespaces", None, "create"))
        .await;
    let mut pod_security = Vec::new();
    if matches!(state, NamespaceState::Exists { .. }) {
        for probe in install.pod_probes(namespace) {
            let path = collection("", "v1", Some(&probe.namespace), "pods");
            let reply = cluster.dry_run_create(&path, &probe.pod).await;
            pod_security.push((probe.owner, reply));
        }
    }
    PreObserved {
        access,
        grants,
        cert_manager,
        namespace: state,
        may_create_namespace,
        pod_security,
        registered: registered_configurations(cluster).await,
    }
}

/// Where each kind lives: discovery's answer, or for a kind the server does not serve (a CRD
/// not yet installed) a guess from its name, as kubectl would have to make.
async fn discover(cluster: &Cluster, kinds: &BTreeSet<TypeRef>) -> BTreeMap<TypeRef, Resource> {
    let mut lists: BTreeMap<String, Option<Value>> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for (api_version, kind) in kinds {
        let path = if api_version.contains('/') {
            format!("/apis/{api_version}")
        } else {
            format!("/api/{api_version}")
        };
        if !lists.contains_key(&path) {
            let list = cluster.get(&path).await.ok().flatten();
            lists.insert(path.clone(), list);
        }
        let served = lists.get(&path).and_then(Option::as_ref).and_then(|list| {
            list["resources"].as_array()?.iter().find(|r| {
                r["kind"] == kind.as_str() && r["name"].as_str().is_some_and(|n| !n.contains('/'))
            })
        });
        let group = group_of(api_version).to_owned();
        let resource = match served {
            Some(r) => Resource {
                group,
                plural: r["name"].as_str().unwrap_or_default().to_owned(),
                namespaced: r["namespaced"].as_bool().unwrap_or(true),
            },
            None => Resource {
                group,
                plural: plural(kind),
                namespaced: !(kind.starts_with("Cluster")
                    || kind == "Namespace"
                    || kind.ends_with("WebhookConfiguration")),
            },
        };
        out.insert((api_version.clone(), kind.clone()), resource);
    }
    out
}

/// `Issuer` → `issuers`, `NetworkPolicy` → `networkpolicies`: Kubernetes' plural rule.
fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        return format!("{stem}ies");
    }
    if lower.ends_with('s') || lower.ends_with("ch") || lower.ends_with('x') {
        return format!("{lower}es");
    }
    format!("{lower}s")
}

async fn grant_answers(cluster: &Cluster, install: &Install, namespace: &str) -> GrantAnswers {
    if !install.grants_rbac() {
        return GrantAnswers::default();
    }
    let rbac = "rbac.authorization.k8s.io";
    let mut either: Allowed = Ok(true);
    for resource in ["clusterroles", "roles"] {
        for verb in ["escalate", "bind"] {
            match cluster
                .may(&Access::resource(None, rbac, resource, None, verb))
                .await
            {
                Ok(true) => {}
                other => {
                    either = other;
                    break;
                }
            }
        }
    }
    if either == Ok(true) {
        return GrantAnswers {
            escalate_and_bind: Some(either),
            held: Vec::new(),
        };
    }
    GrantAnswers {
        escalate_and_bind: Some(either),
        held: cluster.may_each(install.granted(namespace)).await,
    }
}

/// The kinds a group version serves (`Ok(empty)`: not served at all).
async fn served_kinds(cluster: &Cluster, path: &str) -> Result<Vec<String>, String> {
    Ok(cluster
        .get(path)
        .await?
        .map(|list| {
            list["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r["kind"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default())
}

pub async fn namespace_state(cluster: &Cluster, namespace: &str) -> NamespaceState {
    match cluster
        .get(&format!("/api/v1/namespaces/{namespace}"))
        .await
    {
        Ok(Some(ns)) => NamespaceState::Exists {
            labels: ns["metadata"]["labels"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect(),
            terminating: ns["status"]["phase"] == "Terminating",
        },
        Ok(None) => NamespaceState::Absent,
        Err(e) => NamespaceState::Unknown(e),
    }
}

/// Every registered webhook configuration, both kinds.
async fn registered_configurations(cluster: &Cluster) -> Result<Vec<WebhookConfiguration>, String> {
    let mut out = Vec::new();
    for plural in [
        "mutatingwebhookconfigurations",
        "validatingwebhookconfigurations",
    ] {
        let path = collection("admissionregistration.k8s.io", "v1", None, plural);
        let list = cluster.get(&path).await?.unwrap_or_default();
        let kind = if plural.starts_with("mutating") {
            "MutatingWebhookConfiguration"
        } else {
            "ValidatingWebhookConfiguration"
        };
        for item in list["items"].as_array().into_iter().flatten() {
            // Items of a list carry no kind of their own.
            let mut item = item.clone();
            item["kind"] = Value::from(kind);
            out.extend(WebhookConfiguration::of(&item));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn plurals_as_kubernetes_makes_them() {
        for (kind, plural) in [
            ("Issuer", "issuers"),
            ("Certificate", "certificates"),
            ("ClusterIssuer", "clusterissuers"),
            ("NetworkPolicy", "networkpolicies"),
            ("Gateway", "gateways"),
            ("Ingress", "ingresses"),
        ] {
            assert_eq!(super::plural(kind), plural);
        }
    }
}
