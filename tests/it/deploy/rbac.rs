//! What each face uses of the API is listed once, in the product: doctor asks the installed
//! ServiceAccounts for exactly these (crates/doctor/src/installed/permissions.rs, which names
//! the code that makes each call). Here they are held equal to what deploy/'s and the chart's
//! RBAC grant each ServiceAccount; the e2e suites run jobwarden under exactly that RBAC, and
//! fail naming a refused call.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

pub use jobwarden_doctor::access::Access as Grant;
pub use jobwarden_doctor::installed::permissions::{
    controller_uses as controller_needs, dispatcher_uses as dispatcher_needs,
    metrics_uses as metrics_needs, webhook_uses as webhook_needs,
    worker_room_uses as worker_room_needs, worker_uses as worker_needs,
};

use crate::deploy::objects::*;

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
            out.entry(str_at(&subject, "/name").to_owned())
                .or_default()
                .extend(jobwarden_doctor::access::granted_by(
                    &role["rules"],
                    scope.as_deref(),
                ));
        }
    }
    out
}
