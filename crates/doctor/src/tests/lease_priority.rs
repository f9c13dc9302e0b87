//! The Lease's priority level: which FlowSchema kube-apiserver would match a renewal of the
//! controller's ServiceAccount with, and whether its priority level exists.

use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use serde_json::{Value, json};

use super::expect;
use super::installed::deployment;
use super::{OK, SKIPPED, UNKNOWN, WARNING};
use crate::catalogue::LEASE_PRIORITY;
use crate::check::Status;
use crate::installed::lease_priority::lease_priority;

/// deploy/base/flowschema.yaml's, for `account`, at `precedence`, in `level`.
fn schema(name: &str, account: &str, precedence: i32, level: &str) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {
            "priorityLevelConfiguration": {"name": level},
            "matchingPrecedence": precedence,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{
                "subjects": [{"kind": "ServiceAccount",
                              "serviceAccount": {"name": account, "namespace": "jobwarden-system"}}],
                "resourceRules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                   "verbs": ["get", "create", "patch"], "namespaces": ["*"]}],
            }],
        },
    })
}

fn schemas(objects: &[Value]) -> Result<Vec<FlowSchema>, String> {
    Ok(objects
        .iter()
        .map(|o| serde_json::from_value(o.clone()).expect("a FlowSchema"))
        .collect())
}

fn levels() -> Result<Vec<PriorityLevelConfiguration>, String> {
    Ok(["exempt", "leader-election", "workload-low", "catch-all"]
        .iter()
        .map(|n| serde_json::from_value(json!({"metadata": {"name": n}})).expect("a level"))
        .collect())
}

/// What the test calls it, the cluster's FlowSchemas, the status and what the message says.
type Row = (
    &'static str,
    Result<Vec<FlowSchema>, String>,
    Status,
    &'static [&'static str],
);

#[test]
fn the_lease_priority_level_by_table() {
    let deploy = schema(
        "jobwarden-leader-election",
        "jobwarden",
        250,
        "leader-election",
    );
    let mut dangling = schema("jobwarden-leader-election", "jobwarden", 250, "gone");
    dangling["status"] = json!({"conditions": [{"type": "Dangling", "status": "True"}]});
    let mut for_pods_only = deploy.clone();
    for_pods_only["spec"]["rules"][0]["resourceRules"][0]["resources"] = json!(["pods"]);
    let mut every_account = schema("namespace-wide", "*", 300, "leader-election");
    every_account["spec"]["rules"][0]["resourceRules"][0]["verbs"] = json!(["*"]);
    let cases: [Row; 8] = [
        (
            "deploy/'s",
            schemas(std::slice::from_ref(&deploy)),
            OK,
            &[
                "ServiceAccount jobwarden-system/jobwarden: FlowSchema jobwarden-leader-election, priority level leader-election",
            ],
        ),
        (
            "none",
            schemas(&[]),
            WARNING,
            &[
                "no FlowSchema gives the Lease requests of ServiceAccount jobwarden-system/jobwarden",
            ],
        ),
        (
            "another account's",
            schemas(&[schema("other", "someone", 250, "leader-election")]),
            WARNING,
            &["no FlowSchema"],
        ),
        (
            "for other resources",
            schemas(&[for_pods_only]),
            WARNING,
            &["no FlowSchema"],
        ),
        (
            "every account of the namespace, every verb",
            schemas(&[every_account]),
            OK,
            &["FlowSchema namespace-wide"],
        ),
        (
            "the lowest precedence wins",
            schemas(&[
                deploy.clone(),
                schema("earlier", "jobwarden", 100, "workload-low"),
            ]),
            OK,
            &["FlowSchema earlier, priority level workload-low"],
        ),
        (
            "a priority level that does not exist",
            schemas(&[dangling]),
            WARNING,
            &["priority level gone, which does not exist"],
        ),
        (
            "unreadable",
            Err("flowschemas.flowcontrol.apiserver.k8s.io is forbidden".into()),
            UNKNOWN,
            &["cannot read FlowSchemas", "forbidden"],
        ),
    ];
    let controller = deployment("jobwarden", &[]);
    for (what, read, status, says) in cases {
        let check = lease_priority("jobwarden-system", &read, &levels(), &[&controller]);
        assert_eq!(check.status, status, "{what}: {}", check.message);
        expect(&check, LEASE_PRIORITY, status, says);
    }
    // Priority levels unreadable: the Dangling condition still tells.
    let check = lease_priority(
        "jobwarden-system",
        &schemas(std::slice::from_ref(&deploy)),
        &Err("forbidden".into()),
        &[&controller],
    );
    expect(&check, LEASE_PRIORITY, OK, &["leader-election"]);
    let check = lease_priority("jobwarden-system", &schemas(&[deploy]), &levels(), &[]);
    expect(
        &check,
        LEASE_PRIORITY,
        SKIPPED,
        &["no Deployment runs the controller"],
    );
}
