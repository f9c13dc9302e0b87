//! What each face uses of the API, from the code: the webhook's namespace watch
//! (crates/server/src/namespaces.rs) and its read of its webhook configurations
//! (src/cli/registered_webhooks.rs), the controller's kube calls (crates/controller/src/
//! kube_api.rs, reconcile.rs, leader.rs), the core/v1 Events that the controller and the
//! in-process audit create (crates/events), and the reviews of scrapers' tokens
//! (crates/server/src/metrics_access). The readable summary: the e2e suites run jobwarden
//! under exactly what deploy/ grants, and fail naming a refused call.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::objects::*;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    /// None: cluster-wide (a ClusterRole bound by a ClusterRoleBinding).
    pub namespace: Option<String>,
    pub group: String,
    pub resource: String,
    /// None: any object of the resource.
    pub object: Option<String>,
    pub verb: String,
}

pub fn grants(
    namespace: Option<&str>,
    group: &str,
    resource: &str,
    object: Option<&str>,
    verbs: &[&str],
) -> Vec<Grant> {
    verbs
        .iter()
        .map(|v| Grant {
            namespace: namespace.map(str::to_owned),
            group: group.to_owned(),
            resource: resource.to_owned(),
            object: object.map(str::to_owned),
            verb: (*v).to_owned(),
        })
        .collect()
}

/// `configurations`: the name of its webhook configurations (src/cli/registered_webhooks.rs
/// reads them at start).
pub fn webhook_needs(configurations: &str) -> Vec<Grant> {
    [
        grants(None, "", "namespaces", None, &["get", "list", "watch"]),
        grants(
            None,
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            Some(configurations),
            &["get"],
        ),
        grants(
            None,
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
            Some(configurations),
            &["get"],
        ),
    ]
    .concat()
}

/// Every face that serves /metrics secured: a TokenReview of each scraper's token, then a
/// SubjectAccessReview of its `get` on /metrics.
pub fn metrics_needs() -> Vec<Grant> {
    [
        grants(
            None,
            "authentication.k8s.io",
            "tokenreviews",
            None,
            &["create"],
        ),
        grants(
            None,
            "authorization.k8s.io",
            "subjectaccessreviews",
            None,
            &["create"],
        ),
    ]
    .concat()
}

pub fn controller_needs(namespace: &str) -> Vec<Grant> {
    let lease = jobwarden_controller::ControllerConfig::default().lease_name;
    [
        grants(None, "batch", "jobs", None, &["get", "list", "watch"]),
        grants(None, "batch", "jobs/status", None, &["patch"]),
        grants(
            None,
            "",
            "pods",
            None,
            &["get", "list", "watch", "create", "delete", "patch"],
        ),
        // A pod that did not start in time is failed through its status before it is deleted.
        grants(None, "", "pods/status", None, &["patch"]),
        // core/v1 Events, one object per event, as upstream's recorder writes them.
        grants(None, "", "events", None, &["create"]),
        // The Lease lives in the pod's own namespace; RBAC cannot limit create by name.
        grants(
            Some(namespace),
            "coordination.k8s.io",
            "leases",
            None,
            &["create"],
        ),
        grants(
            Some(namespace),
            "coordination.k8s.io",
            "leases",
            Some(&lease),
            // Leader election writes merge patches with the resourceVersion read.
            &["get", "patch"],
        ),
    ]
    .concat()
}

/// What the bindings grant each ServiceAccount of `namespace`.
pub fn grants_by_service_account(
    objects: &[Value],
    namespace: &str,
) -> BTreeMap<String, BTreeSet<Grant>> {
    let mut out: BTreeMap<String, BTreeSet<Grant>> = BTreeMap::new();
    for binding in objects
        .iter()
        .filter(|o| matches!(kind(o), "ClusterRoleBinding" | "RoleBinding"))
    {
        let role_kind = str_at(binding, "/roleRef/kind");
        let role_name = str_at(binding, "/roleRef/name");
        let binding_ns = binding
            .pointer("/metadata/namespace")
            .and_then(Value::as_str);
        let role = objects
            .iter()
            .find(|o| {
                kind(o) == role_kind
                    && name(o) == role_name
                    && (role_kind == "ClusterRole"
                        || o.pointer("/metadata/namespace").and_then(Value::as_str) == binding_ns)
            })
            .unwrap_or_else(|| {
                panic!(
                    "{} {}: no {role_kind} {role_name}",
                    kind(binding),
                    name(binding)
                )
            });
        // A ClusterRole bound by a RoleBinding grants only in the RoleBinding's namespace.
        let scope = if kind(binding) == "RoleBinding" {
            binding_ns.map(str::to_owned)
        } else {
            None
        };
        for subject in array(&binding["subjects"]) {
            assert_eq!(
                subject["kind"],
                "ServiceAccount",
                "{}: {subject}",
                name(binding)
            );
            assert_eq!(
                subject["namespace"],
                namespace,
                "{} {}: subject {subject} is not in jobwarden's namespace",
                kind(binding),
                name(binding)
            );
            let granted = out.entry(str_at(&subject, "/name").to_owned()).or_default();
            for rule in array(&role["rules"]) {
                let objects_named = strings(&rule["resourceNames"]);
                let named: Vec<Option<&str>> = if objects_named.is_empty() {
                    vec![None]
                } else {
                    objects_named.iter().map(|n| Some(n.as_str())).collect()
                };
                for group in strings(&rule["apiGroups"]) {
                    for resource in strings(&rule["resources"]) {
                        for object in &named {
                            for verb in strings(&rule["verbs"]) {
                                granted.insert(Grant {
                                    namespace: scope.clone(),
                                    group: group.clone(),
                                    resource: resource.clone(),
                                    object: object.map(str::to_owned),
                                    verb,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    out
}
