//! What each of jobwarden's faces asks of the API server, from the code: the webhook's
//! namespace watch (crates/server/src/namespaces.rs) and its read of its webhook
//! configurations (src/cli/registered_webhooks.rs), the controller's kube calls
//! (crates/controller/src/cluster/kube_api.rs, reconcile.rs; the Lease's in
//! crates/runtime/src/leader/), the core/v1 Events the controller and the in-process audit
//! create (crates/events), the reviews of scrapers' tokens (crates/server/src/metrics_access),
//! and the dispatcher's calls on the management cluster and on each worker
//! (crates/dispatcher/src/api.rs). tests/it/deploy/ holds these lists equal to what
//! deploy/'s and the chart's RBAC grant each ServiceAccount, and the e2e suites run jobwarden
//! under exactly that RBAC; doctor asks whether the installed ServiceAccounts still have them.

use jobwarden_rules::well_known::LEASE_NAME;
use serde_json::Value;

use super::deployment::ServeFlags;
use crate::access::{Access, listed};
use crate::catalogue::{METRICS_READER, SERVICE_ACCOUNT};
use crate::check::Check;
use crate::pre::Allowed;

/// The webhook: namespace labels (a metadata-only watch) and its own configurations, named
/// `configurations`, read once at start; and, as every replica follows the policy file, the
/// Events that say on its own Pod in `namespace` which policy it runs or refused
/// (crates/server/src/policy_reload/pod_event.rs).
pub fn webhook_uses(configurations: &str, namespace: &str) -> Vec<Access> {
    [
        Access::verbs(Some(namespace), "", "events", None, &["create"]),
        Access::verbs(None, "", "namespaces", None, &["get", "list", "watch"]),
        Access::verbs(
            None,
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            Some(configurations),
            &["get"],
        ),
        Access::verbs(
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
pub fn metrics_uses() -> Vec<Access> {
    [
        Access::verbs(
            None,
            "authentication.k8s.io",
            "tokenreviews",
            None,
            &["create"],
        ),
        Access::verbs(
            None,
            "authorization.k8s.io",
            "subjectaccessreviews",
            None,
            &["create"],
        ),
    ]
    .concat()
}

/// The controller, its Lease in `namespace` (the pod's own).
pub fn controller_uses(namespace: &str) -> Vec<Access> {
    [
        Access::verbs(None, "batch", "jobs", None, &["get", "list", "watch"]),
        Access::verbs(None, "batch", "jobs/status", None, &["patch"]),
        Access::verbs(
            None,
            "",
            "pods",
            None,
            &["get", "list", "watch", "create", "delete", "patch"],
        ),
        // A pod that did not start in time is failed through its status before it is deleted.
        Access::verbs(None, "", "pods/status", None, &["patch"]),
        // core/v1 Events, one object per event, as upstream's recorder writes them.
        Access::verbs(None, "", "events", None, &["create"]),
        // RBAC cannot limit create by name.
        Access::verbs(
            Some(namespace),
            "coordination.k8s.io",
            "leases",
            None,
            &["create"],
        ),
        // Leader election writes merge patches with the resourceVersion read.
        Access::verbs(
            Some(namespace),
            "coordination.k8s.io",
            "leases",
            Some(LEASE_NAME),
            &["get", "patch"],
        ),
    ]
    .concat()
}

/// The dispatcher (issues 42-44), which runs beside the Job controller on the replica holding
/// the Lease, so it is part of the controller's face: it shares the controller's reads of
/// Jobs, its status writes and its Events, and adds what is its own. Its worker kubeconfigs are
/// the `secrets` named in its policy, in `namespace` (the pod's own), read by name: a watch
/// with the field selector `metadata.name=<secret>` (crates/dispatcher/src/worker/credential_source.rs),
/// which RBAC grants by `resourceNames`. No worker Secret, no Secret read at all.
pub fn dispatcher_uses(namespace: &str, secrets: &[&str]) -> Vec<Access> {
    [
        // The chosen worker is written on the user's Job (an annotation) before the copy is
        // made; the copy's status is mirrored onto it.
        Access::verbs(
            None,
            "batch",
            "jobs",
            None,
            &["get", "list", "watch", "patch"],
        ),
        Access::verbs(None, "batch", "jobs/status", None, &["patch"]),
        // core/v1 Events on the user's Jobs, aggregated by patching the one already written.
        Access::verbs(None, "", "events", None, &["create", "patch"]),
        // Namespace labels, for workers choosing namespaces by a selector. The get also covers
        // kube-system's, whose UID is the default origin of the copies.
        Access::verbs(None, "", "namespaces", None, &["get", "list", "watch"]),
        // The workers' kubeconfigs (key `kubeconfig`), watched so a change is taken up at once.
        secrets
            .iter()
            .flat_map(|secret| {
                Access::verbs(
                    Some(namespace),
                    "",
                    "secrets",
                    Some(secret),
                    &["get", "list", "watch"],
                )
            })
            .collect(),
        // The local worker (`local: true`) is judged by this cluster's own Nodes, as a worker
        // by its (its pods are read under the Job controller's grant).
        Access::verbs(None, "", "nodes", None, &["get", "list", "watch"]),
    ]
    .concat()
}

/// The kubeconfig Secrets `policy`'s workers name, each once: what its dispatcher reads.
pub fn worker_secrets(policy: &jobwarden_admission::Policy) -> Vec<&str> {
    let mut names: Vec<&str> = policy
        .dispatch
        .workers
        .iter()
        .filter_map(|w| w.kubeconfig_secret.as_deref())
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// What the dispatcher reads of a worker to know where a Job fits (docs/dispatch.md#where-a-job-fits):
/// its Nodes and its unfinished pods, listed and watched cluster-wide (`None`), or the pods of
/// the one namespace a RoleBinding grants (`Some`: no Nodes then, and placement counts Jobs on
/// that worker). Apart from [`worker_uses`]: a worker without them still runs Jobs.
pub fn worker_room_uses(namespace: Option<&str>) -> Vec<Access> {
    let pods = Access::verbs(namespace, "", "pods", None, &["get", "list", "watch"]);
    match namespace {
        None => [
            Access::verbs(None, "", "nodes", None, &["get", "list", "watch"]),
            pods,
        ]
        .concat(),
        Some(_) => pods,
    }
}

/// What the dispatcher asks of a worker cluster, as the identity that deploy/worker/ (or the
/// chart's `worker.enabled`) installs there: in every namespace (`None`), or in one namespace
/// its role is granted in by a RoleBinding (`Some`), where `get` on `namespaces` is the get of
/// that namespace alone (it checks that the Job's namespace exists there). kube-apiserver
/// authorizes `GET /api/v1/namespaces/X` as a request in namespace X, so an access review of
/// it names X as both the name and the namespace (`kubectl auth can-i` drops the namespace of
/// a cluster-scoped resource and says no). The copies' pods are the worker's Job
/// controller's, never the dispatcher's.
pub fn worker_uses(namespace: Option<&str>) -> Vec<Access> {
    [
        Access::verbs(
            namespace,
            "batch",
            "jobs",
            None,
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        Access::verbs(namespace, "", "pods", None, &["deletecollection"]),
        Access::verbs(namespace, "", "namespaces", None, &["get"]),
    ]
    .concat()
}

/// What a replica running with `flags` in `namespace` uses, its dispatcher reading the
/// workers' Secrets `secrets`.
pub fn uses(flags: &ServeFlags, namespace: &str, secrets: &[&str]) -> Vec<Access> {
    let mut out = Vec::new();
    if flags.serves_webhook {
        out.extend(webhook_uses(&flags.webhook_configurations, namespace));
    }
    if flags.runs_controller {
        out.extend(controller_uses(namespace));
        out.extend(dispatcher_uses(namespace, secrets));
    }
    if flags.secures_metrics {
        out.extend(metrics_uses());
    }
    out.sort();
    out.dedup();
    out
}

/// `system:serviceaccount:NAMESPACE:NAME`, as kube-apiserver names a ServiceAccount.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The groups kube-apiserver puts a ServiceAccount in: an access review must name them, or
/// bindings to them would not count.
pub fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".to_owned(),
        format!("system:serviceaccounts:{namespace}"),
        "system:authenticated".to_owned(),
    ]
}

/// One ServiceAccount's answers: does it hold everything its replicas use.
pub fn service_account(
    namespace: &str,
    name: &str,
    deployments: &[String],
    answers: &[(Access, Allowed)],
) -> Check {
    let user = service_account_user(namespace, name);
    let denied: Vec<&Access> = answers
        .iter()
        .filter(|(_, a)| matches!(a, Ok(false)))
        .map(|(access, _)| access)
        .collect();
    let secret_denied = denied
        .iter()
        .any(|a| matches!(a, Access::Resource { resource, .. } if resource == "secrets"));
    if secret_denied {
        return SERVICE_ACCOUNT.error(
            format!("{user} may not {}", listed(&denied, 6)),
            "a worker's kubeconfig Secret is named in the policy but jobwarden may not read it: name it in the dispatcher's Role (resourceNames in deploy/dispatch/secrets.yaml; the chart renders them from the policy's dispatch.workers)",
        );
    }
    if !denied.is_empty() {
        return SERVICE_ACCOUNT.error(
            format!("{user} may not {}", listed(&denied, 6)),
            format!(
                "jobwarden's calls are refused: apply the install's RBAC again (`kubectl apply -k deploy/`, or `helm upgrade`), which grants exactly what {} use{}",
                deployments.join(" and "),
                if deployments.len() == 1 { "s" } else { "" }
            ),
        );
    }
    if let Some((access, Err(e))) = answers.iter().find(|(_, a)| a.is_err()) {
        return SERVICE_ACCOUNT.cannot_tell(
            format!("cannot tell what {user} may do ({access}): {e}"),
            "doctor asks with SubjectAccessReviews, which need create on subjectaccessreviews (authorization.k8s.io)",
        );
    }
    SERVICE_ACCOUNT.ok(format!(
        "{user} holds all {} permissions {} use{}",
        answers.len(),
        deployments.join(" and "),
        if deployments.len() == 1 { "s" } else { "" }
    ))
}

/// The ClusterRole an operator binds a Prometheus to (`<configurations>-metrics-reader`).
pub fn metrics_reader_name(configurations: &str) -> String {
    format!("{configurations}-metrics-reader")
}

/// The metrics reader role: there, and granting `get` on `/metrics`.
pub fn metrics_reader(name: &str, role: &Result<Option<Value>, String>) -> Check {
    let grants = |role: &Value| {
        crate::access::granted_by(&role["rules"], None).contains(&Access::Path {
            path: "/metrics".to_owned(),
            verb: "get".to_owned(),
        })
    };
    match role {
        Ok(Some(role)) if grants(role) => METRICS_READER.ok(format!(
            "ClusterRole {name} grants get on /metrics (bind a Prometheus to it)"
        )),
        Ok(Some(_)) => METRICS_READER.warning(
            format!("ClusterRole {name} does not grant get on /metrics"),
            "apply the install again: the role grants exactly that",
        ),
        Ok(None) => METRICS_READER.warning(
            format!("no ClusterRole {name}: nobody can be allowed to read jobwarden's /metrics"),
            "apply the install again, then bind Prometheus's ServiceAccount to it (docs/operations.md#who-may-read-the-metrics)",
        ),
        Err(e) => METRICS_READER.cannot_tell(
            format!("cannot read ClusterRole {name}: {e}"),
            format!("`kubectl get clusterrole {name} -o yaml` shows it"),
        ),
    }
}
