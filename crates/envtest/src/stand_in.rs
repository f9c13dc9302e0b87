//! CRDs of kinds a bare kube-apiserver does not serve (cert-manager's, the Prometheus
//! Operator's), reduced to their names: group, version `v1`, kind, plural, namespaced scope,
//! and any spec. Created, they make the API server serve the kinds, so a test can dry-run
//! objects of them or see an install find them served; their specs are those projects' to
//! validate.

use serde_json::{Value, json};

pub fn stand_in_crd(group: &str, kind: &str, plural: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    })
}
