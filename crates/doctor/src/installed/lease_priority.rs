//! The controller's Lease in kube-apiserver's API Priority and Fairness: a FlowSchema that names
//! the ServiceAccount the controller runs as, for its Lease requests, in a priority level that
//! exists (deploy/base/flowschema.yaml puts them in `leader-election`, where
//! kube-controller-manager's Lease is). Without one, the renewals share the `service-accounts`
//! FlowSchema's flow in `workload-low` with every other request of that ServiceAccount, and on a
//! busy API server wait behind the controller's own pod creates. A warning, never an error: the
//! chart leaves the FlowSchema out on request (`leaderElection.flowSchema=false`). Pure.
//!
//! Judged: the FlowSchemas that name the ServiceAccount itself (or every ServiceAccount of its
//! namespace); of those, the one of lowest precedence wins, as kube-apiserver matches. One that
//! matches it only through a group (`system:serviceaccounts`) is kube-apiserver's concern.

use std::collections::BTreeSet;

use k8s_openapi::api::flowcontrol::v1::{
    FlowSchema, PolicyRulesWithSubjects, PriorityLevelConfiguration, ResourcePolicyRule,
};

use super::deployment::DeploymentView;
use crate::catalogue::LEASE_PRIORITY;
use crate::check::Check;

const LEASES: (&str, &str) = ("coordination.k8s.io", "leases");
/// The verb a renewal uses: a merge patch.
const RENEW: &str = "patch";

/// `flow_schemas` and `levels`: the cluster's; `controllers`: the Deployments that run the
/// controller, in `namespace`.
pub fn lease_priority(
    namespace: &str,
    flow_schemas: &Result<Vec<FlowSchema>, String>,
    levels: &Result<Vec<PriorityLevelConfiguration>, String>,
    controllers: &[&DeploymentView],
) -> Check {
    if controllers.is_empty() {
        return LEASE_PRIORITY.skipped("no Deployment runs the controller");
    }
    let schemas = match flow_schemas {
        Ok(schemas) => schemas,
        Err(e) => {
            return LEASE_PRIORITY.cannot_tell(
                format!("cannot read FlowSchemas: {e}"),
                "`kubectl get flowschemas` lists them (doctor needs `list` on flowschemas.flowcontrol.apiserver.k8s.io)",
            );
        }
    };
    let accounts: BTreeSet<&str> = controllers
        .iter()
        .map(|d| d.service_account.as_str())
        .collect();
    let mut placed = Vec::new();
    for account in accounts {
        let who = format!("ServiceAccount {namespace}/{account}");
        let Some(schema) = schemas
            .iter()
            .filter(|s| names_the_lease_of(s, namespace, account))
            .min_by_key(|s| precedence(s))
        else {
            return LEASE_PRIORITY.warning(
                format!("no FlowSchema gives the Lease requests of {who} a priority level of their own: API Priority and Fairness queues its renewals with its pod creates, and on a busy API server a renewal can miss the renew deadline"),
                "apply the install again (`kubectl apply -k deploy/`: deploy/base/flowschema.yaml), or with Helm set `leaderElection.flowSchema=true`",
            );
        };
        let name = schema.metadata.name.clone().unwrap_or_default();
        let level = schema
            .spec
            .as_ref()
            .map(|s| s.priority_level_configuration.name.clone())
            .unwrap_or_default();
        let level_missing = match levels {
            Ok(levels) => !levels
                .iter()
                .any(|l| l.metadata.name.as_deref() == Some(level.as_str())),
            Err(_) => false,
        };
        if level_missing || dangling(schema) {
            return LEASE_PRIORITY.warning(
                format!("FlowSchema {name} puts the Lease requests of {who} in priority level {level}, which does not exist: kube-apiserver ignores the FlowSchema"),
                format!("point FlowSchema {name} at a priority level that exists (kube-apiserver's own `leader-election`), or create {level}"),
            );
        }
        placed.push(format!("{who}: FlowSchema {name}, priority level {level}"));
    }
    LEASE_PRIORITY.ok(format!("the Lease requests of {}", placed.join("; ")))
}

fn precedence(schema: &FlowSchema) -> i32 {
    schema
        .spec
        .as_ref()
        .and_then(|s| s.matching_precedence)
        .unwrap_or(1000)
}

/// kube-apiserver's `Dangling` condition: the priority level it names does not exist.
fn dangling(schema: &FlowSchema) -> bool {
    schema
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_.as_deref() == Some("Dangling") && c.status.as_deref() == Some("True"))
}

/// A rule of `schema` names the ServiceAccount and matches a renewal of a Lease in `namespace`.
fn names_the_lease_of(schema: &FlowSchema, namespace: &str, account: &str) -> bool {
    let rules: &[PolicyRulesWithSubjects] = schema
        .spec
        .as_ref()
        .and_then(|s| s.rules.as_deref())
        .unwrap_or_default();
    rules.iter().any(|r| {
        let named = r.subjects.iter().any(|s| {
            s.service_account.as_ref().is_some_and(|sa| {
                sa.namespace == namespace && (sa.name == account || sa.name == "*")
            })
        });
        named
            && r.resource_rules
                .as_deref()
                .unwrap_or_default()
                .iter()
                .any(|rr| matches_renewal(rr, namespace))
    })
}

fn matches_renewal(rule: &ResourcePolicyRule, namespace: &str) -> bool {
    let has = |list: &[String], want: &str| list.iter().any(|x| x == want || x == "*");
    has(&rule.api_groups, LEASES.0)
        && has(&rule.resources, LEASES.1)
        && has(&rule.verbs, RENEW)
        && has(rule.namespaces.as_deref().unwrap_or_default(), namespace)
}
