//! What doctor reads of an installed jobwarden: its Deployments (and from the webhook's pod
//! template, the policy file and serving certificate it mounts), the namespace's pods and the
//! Lease, the FlowSchemas and priority levels, the webhook configurations, the two webhook probes, the ServiceAccounts' access
//! reviews, the metrics reader role, and every stored Job, counted page by page.

use std::collections::{BTreeMap, BTreeSet};

use jobwarden_admission::Policy;
use jobwarden_audit::{DEFAULT_STUCK_AFTER, JobLister, ListScope};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use serde_json::Value;

use jobwarden_rules::well_known::LEASE_NAME;

use super::{Cluster, collection, with_causes};
use crate::access::Access;
use crate::installed::certificate::Serving;
use crate::installed::deployment::{
    DEFAULT_CONFIGURATIONS, DeploymentView, FileSource, PART_OF, ServeCommandLine, file_source,
};
use crate::installed::permissions::{
    metrics_reader_name, service_account_groups, service_account_user, uses,
};
use crate::installed::registration::Registered;
use crate::installed::stored_jobs::Tally;
use crate::installed::webhook_probe::{Probed, admitted_probe, denied_probe, probe_namespace};
use crate::installed::{AccountAnswers, InstalledObserved};

fn api_error(e: kube::Error) -> String {
    match e {
        kube::Error::Api(status) => status.message,
        other => with_causes(&other),
    }
}

fn json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}

/// `counted`: the stored Jobs' tally of an earlier run, which `--wait` reuses: listing every
/// Job again every few seconds would cost a large cluster dearly, and the counts only ever
/// warn, so they never decide whether a run passes.
pub async fn read(
    cluster: &Cluster,
    namespace: &str,
    command_line: &dyn ServeCommandLine,
    policy_given: Option<&Policy>,
    counted: Option<Result<Tally, String>>,
) -> InstalledObserved {
    let client = &cluster.client;
    let deployments = Api::<Deployment>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(PART_OF))
        .await
        .map(|list| {
            list.items
                .iter()
                .map(|d| DeploymentView::of(&json(d), command_line))
                .collect::<Vec<_>>()
        })
        .map_err(api_error);
    let found: &[DeploymentView] = deployments.as_deref().unwrap_or_default();
    let webhook = found.iter().find(|d| d.serves_webhook());
    let configurations = webhook
        .and_then(|d| d.flags.as_ref().ok())
        .map_or(DEFAULT_CONFIGURATIONS.to_owned(), |f| {
            f.webhook_configurations.clone()
        });
    let policy = match policy_given {
        Some(p) => Ok(p.clone()),
        None => install_policy(cluster, namespace, webhook, command_line).await,
    };
    let pods = Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(api_error);
    let lease = Api::<Lease>::namespaced(client.clone(), namespace)
        .get_opt(LEASE_NAME)
        .await
        .map_err(api_error);
    let now = Timestamp::now();
    let flow_schemas = Api::<FlowSchema>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(api_error);
    let priority_levels = Api::<PriorityLevelConfiguration>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(api_error);
    let registered = registered(cluster, &configurations).await;
    let (denied, admitted) = probe(cluster, &registered).await;
    InstalledObserved {
        serving: serving(cluster, namespace, webhook).await,
        accounts: accounts(cluster, namespace, found).await,
        metrics_reader: Api::<ClusterRole>::all(client.clone())
            .get_opt(&metrics_reader_name(&configurations))
            .await
            .map(|r| r.map(|r| json(&r)))
            .map_err(api_error),
        stored: match counted {
            Some(tally) => tally,
            None => stored(cluster, policy.as_ref().ok()).await,
        },
        deployments,
        pods,
        lease,
        flow_schemas,
        priority_levels,
        configurations,
        policy,
        registered,
        denied,
        admitted,
        now,
    }
}

/// The policy the webhook's replicas run: their `serve` arguments, with the file `--config`
/// names read from the ConfigMap mounted there.
async fn install_policy(
    cluster: &Cluster,
    namespace: &str,
    webhook: Option<&DeploymentView>,
    command_line: &dyn ServeCommandLine,
) -> Result<Policy, String> {
    let Some(webhook) = webhook else {
        return Err("no Deployment serves the webhook to read its policy from".to_owned());
    };
    let path = webhook.flags.as_ref().ok().and_then(|f| f.config.clone());
    let Some(path) = path else {
        return command_line.policy(&webhook.args, None);
    };
    let Some(FileSource::ConfigMap { name, key }) = file_source(&webhook.pod_spec, &path) else {
        return Err(format!(
            "Deployment {} reads its policy from {path}, which is in no ConfigMap",
            webhook.name
        ));
    };
    let map = Api::<ConfigMap>::namespaced(cluster.client.clone(), namespace)
        .get(&name)
        .await
        .map_err(|e| format!("cannot read ConfigMap {namespace}/{name}: {}", api_error(e)))?;
    let text = map
        .data
        .and_then(|d| d.get(&key).cloned())
        .ok_or_else(|| format!("ConfigMap {namespace}/{name} has no key {key}"))?;
    command_line
        .policy(&webhook.args, Some(&text))
        .map_err(|e| format!("ConfigMap {namespace}/{name}: {e}"))
}

async fn registered(cluster: &Cluster, name: &str) -> Result<Registered, String> {
    let mutating = Api::<MutatingWebhookConfiguration>::all(cluster.client.clone())
        .get_opt(name)
        .await
        .map_err(api_error)?;
    let validating = Api::<ValidatingWebhookConfiguration>::all(cluster.client.clone())
        .get_opt(name)
        .await
        .map_err(api_error)?;
    Ok(Registered {
        mutating,
        validating,
    })
}

/// Both probes, in a namespace the validating webhook selects (`default` when it does).
async fn probe(cluster: &Cluster, registered: &Result<Registered, String>) -> (Probed, Probed) {
    let Some(validating) = registered.as_ref().ok().and_then(|r| r.validating.as_ref()) else {
        return (Probed::NotRegistered, Probed::NotRegistered);
    };
    let labels = |ns: &Namespace| -> (String, BTreeMap<String, String>) {
        (
            ns.metadata.name.clone().unwrap_or_default(),
            ns.metadata.labels.clone().unwrap_or_default(),
        )
    };
    let namespaces = Api::<Namespace>::all(cluster.client.clone());
    let mut candidates = Vec::new();
    if let Ok(Some(default)) = namespaces.get_opt("default").await {
        candidates.push(labels(&default));
    }
    if let Ok(list) = namespaces.list(&ListParams::default().limit(500)).await {
        candidates.extend(
            list.items
                .iter()
                .map(labels)
                .filter(|(n, _)| n != "default"),
        );
    }
    let Some(namespace) = probe_namespace(validating, &candidates) else {
        return (Probed::NoNamespace, Probed::NoNamespace);
    };
    let path = collection("batch", "v1", Some(&namespace), "jobs");
    let (refused_job, accepted_job) = (denied_probe(), admitted_probe());
    let (denied, admitted) = futures::join!(
        cluster.dry_run_create(&path, &refused_job),
        cluster.dry_run_create(&path, &accepted_job),
    );
    (
        Probed::Sent {
            namespace: namespace.clone(),
            reply: denied,
        },
        Probed::Sent {
            namespace,
            reply: admitted,
        },
    )
}

/// The serving certificate from the Secret the webhook's `--tls-cert` is mounted from.
async fn serving(cluster: &Cluster, namespace: &str, webhook: Option<&DeploymentView>) -> Serving {
    let Some(webhook) = webhook else {
        return Serving::Unknown("no Deployment serves the webhook".to_owned());
    };
    let Some(path) = webhook.flags.as_ref().ok().and_then(|f| f.tls_cert.clone()) else {
        return Serving::Unknown(format!("Deployment {} has no --tls-cert", webhook.name));
    };
    let Some(FileSource::Secret { name, key }) = file_source(&webhook.pod_spec, &path) else {
        return Serving::Unknown(format!(
            "Deployment {} reads --tls-cert {path} from no Secret",
            webhook.name
        ));
    };
    let secret = format!("{namespace}/{name}");
    match Api::<Secret>::namespaced(cluster.client.clone(), namespace)
        .get(&name)
        .await
    {
        Ok(s) => match s.data.and_then(|d| d.get(&key).cloned()) {
            Some(pem) => Serving::Read { secret, pem: pem.0 },
            None => Serving::Unreadable {
                error: format!("it has no key {key}"),
                secret,
            },
        },
        Err(kube::Error::Api(status)) if status.code == 404 => Serving::Missing { secret },
        Err(e) => Serving::Unreadable {
            secret,
            error: api_error(e),
        },
    }
}

/// Each ServiceAccount's access reviews for what its Deployments' faces use.
async fn accounts(
    cluster: &Cluster,
    namespace: &str,
    deployments: &[DeploymentView],
) -> Vec<AccountAnswers> {
    let mut by_account: BTreeMap<&str, (Vec<String>, BTreeSet<Access>)> = BTreeMap::new();
    for d in deployments {
        let Ok(flags) = &d.flags else { continue };
        let entry = by_account.entry(&d.service_account).or_default();
        entry.0.push(format!("Deployment {}", d.name));
        entry.1.extend(uses(flags, namespace));
    }
    let groups = service_account_groups(namespace);
    let mut out = Vec::new();
    for (name, (deployments, needed)) in by_account {
        let user = service_account_user(namespace, name);
        out.push(AccountAnswers {
            name: name.to_owned(),
            deployments,
            answers: cluster
                .user_may_each(&user, &groups, needed.into_iter().collect())
                .await,
        });
    }
    out
}

/// Every stored Job, page by page, counted as the audit would report them.
async fn stored(cluster: &Cluster, policy: Option<&Policy>) -> Result<Tally, String> {
    let default = Policy::default();
    let policy = policy.unwrap_or(&default);
    let mut lister = JobLister::new(cluster.client.clone(), ListScope::default());
    let mut tally = Tally::default();
    let now = Timestamp::now();
    while let Some(page) = lister.next_page().await.map_err(|e| with_causes(&e))? {
        for job in &page.items {
            tally.add(job, policy, now, DEFAULT_STUCK_AFTER);
        }
    }
    Ok(tally)
}
