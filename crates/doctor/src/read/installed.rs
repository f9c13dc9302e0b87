//! What doctor reads of an installed jobwarden: its Deployments (and from the webhook's pod
//! template, the policy file and serving certificate it mounts), the namespace's pods and the
//! Lease, the FlowSchemas and priority levels, the webhook configurations, the two webhook probes, the ServiceAccounts' access
//! reviews, the metrics reader role, every stored Job, counted page by page (the dispatcher's
//! among them kept for the dispatch checks), and, when the policy the controller runs names
//! workers, what the dispatch checks judge ([`super::dispatch`]).

use std::collections::{BTreeMap, BTreeSet};

use jobwarden_admission::Policy;
use jobwarden_audit::{DEFAULT_STUCK_AFTER, JobLister, ListScope};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Pod, Secret};
use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use serde_json::Value;

use jobwarden_rules::well_known::LEASE_NAME;

use super::{Cluster, collection, with_causes};
use crate::access::Access;
use crate::dispatch::jobs::DispatchedJob;
use crate::installed::certificate::Serving;
use crate::installed::deployment::{
    DEFAULT_CONFIGURATIONS, DeploymentView, FileSource, PART_OF, ServeCommandLine, file_source,
};
use crate::installed::permissions::{
    metrics_reader_name, service_account_groups, service_account_user, uses, worker_secrets,
};
use crate::installed::policy_in_force::{
    POLICY_APPLIED, POLICY_LOADED, POLICY_REFUSED, PolicyEvent,
};
use crate::installed::registration::Registered;
use crate::installed::stored_jobs::Tally;
use crate::installed::webhook_probe::{Probed, admitted_probe, denied_probe, probe_namespace};
use crate::installed::{AccountAnswers, InstalledObserved};

/// The stored Jobs' pass: their tally, and the dispatcher's Jobs not finished (for the dispatch
/// checks), or why the Jobs could not be listed.
#[derive(Debug, Clone)]
pub struct Counted {
    pub tally: Result<Tally, String>,
    pub dispatched: Result<Vec<DispatchedJob>, String>,
}

fn api_error(e: kube::Error) -> String {
    match e {
        kube::Error::Api(status) => status.message,
        other => with_causes(&other),
    }
}

fn json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}

/// `counted`: the stored Jobs' pass of an earlier run, which `--wait` reuses: listing every
/// Job again every few seconds would cost a large cluster dearly, and what is read from them
/// only ever warns (the counts, lost workers, the namespaces Jobs need on a worker), so it
/// never decides whether a run passes.
pub async fn read(
    cluster: &Cluster,
    namespace: &str,
    command_line: &dyn ServeCommandLine,
    policy_given: Option<&Policy>,
    counted: Option<Counted>,
) -> (InstalledObserved, Counted) {
    let client = &cluster.client;
    let deployments = deployments(cluster, namespace, command_line).await;
    let found: &[DeploymentView] = deployments.as_deref().unwrap_or_default();
    let webhook = found.iter().find(|d| d.serves_webhook());
    let configurations = webhook
        .and_then(|d| d.flags.as_ref().ok())
        .map_or(DEFAULT_CONFIGURATIONS.to_owned(), |f| {
            f.webhook_configurations.clone()
        });
    // The dispatcher runs beside the Job controller: its workers are the controller's policy's.
    let controller = found.iter().find(|d| d.runs_controller());
    let policies = policies(cluster, namespace, found, policy_given, command_line).await;
    let dispatcher = policies.dispatcher();
    let pods = list_all(Api::<Pod>::namespaced(client.clone(), namespace)).await;
    let lease = Api::<Lease>::namespaced(client.clone(), namespace)
        .get_opt(LEASE_NAME)
        .await
        .map_err(api_error);
    let now = Timestamp::now();
    let flow_schemas = list_all(Api::<FlowSchema>::all(client.clone())).await;
    let priority_levels = list_all(Api::<PriorityLevelConfiguration>::all(client.clone())).await;
    let registered = registered(cluster, &configurations).await;
    let (denied, admitted) = probe(cluster, &registered).await;
    let counted = match counted {
        Some(counted) => counted,
        None => {
            stored(
                cluster,
                policies.webhook.as_ref().ok(),
                dispatcher.as_deref(),
            )
            .await
        }
    };
    let dispatch = dispatch(
        cluster,
        namespace,
        &policies.controller,
        controller,
        &counted,
    )
    .await;
    let observed = InstalledObserved {
        serving: serving(cluster, namespace, webhook).await,
        accounts: accounts(cluster, namespace, found, &policies.worker_secrets()).await,
        metrics_reader: metrics_reader(cluster, &configurations).await,
        stored: counted.tally.clone(),
        dispatch,
        deployments,
        pods,
        lease,
        flow_schemas,
        priority_levels,
        configurations,
        policy: policies.webhook,
        registered,
        denied,
        admitted,
        now,
        mounted_policy: policies.mounted,
        policy_events: policy_events(cluster, namespace).await,
    };
    (observed, counted)
}

/// jobwarden's Deployments in `namespace`, as doctor views them.
async fn deployments(
    cluster: &Cluster,
    namespace: &str,
    command_line: &dyn ServeCommandLine,
) -> Result<Vec<DeploymentView>, String> {
    Api::<Deployment>::namespaced(cluster.client.clone(), namespace)
        .list(&ListParams::default().labels(PART_OF))
        .await
        .map(|list| {
            list.items
                .iter()
                .map(|d| DeploymentView::of(&json(d), command_line))
                .collect::<Vec<_>>()
        })
        .map_err(api_error)
}

/// Every object `api` lists, or why it could not.
async fn list_all<K>(api: Api<K>) -> Result<Vec<K>, String>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(api_error)
}

/// The policies the install runs (each the one given, when one is), or why each could not be
/// read.
struct Policies {
    /// The hash of the policy file the webhook's Deployment mounts (`None`: it has none).
    mounted: Result<Option<String>, String>,
    /// The policy the webhook runs.
    webhook: Result<Policy, String>,
    /// The policy the controller runs, and so its dispatcher.
    controller: Result<Policy, String>,
}

impl Policies {
    /// The dispatcher's name, when the policy the controller runs names workers.
    fn dispatcher(&self) -> Option<String> {
        self.controller
            .as_ref()
            .ok()
            .filter(|p| p.dispatch.is_enabled())
            .map(|p| p.dispatch.controller_name.clone())
    }

    /// The Secrets the controller's policy reads workers' kubeconfigs from.
    fn worker_secrets(&self) -> Vec<&str> {
        self.controller
            .as_ref()
            .map(worker_secrets)
            .unwrap_or_default()
    }
}

/// The policies of the Deployments `found`: the webhook's is read once when it also runs the
/// controller.
async fn policies(
    cluster: &Cluster,
    namespace: &str,
    found: &[DeploymentView],
    policy_given: Option<&Policy>,
    command_line: &dyn ServeCommandLine,
) -> Policies {
    let webhook = found.iter().find(|d| d.serves_webhook());
    let mounted = install_policy_and_hash(
        cluster,
        namespace,
        webhook.or(found.first()),
        "serves the webhook",
        command_line,
    )
    .await;
    let mounted_policy = mounted
        .as_ref()
        .map(|(_, hash)| hash.clone())
        .map_err(Clone::clone);
    let policy = match policy_given {
        Some(p) => Ok(p.clone()),
        None if webhook.is_some() => mounted.map(|(policy, _)| policy),
        None => {
            install_policy(
                cluster,
                namespace,
                webhook,
                "serves the webhook",
                command_line,
            )
            .await
        }
    };
    let controller = found.iter().find(|d| d.runs_controller());
    let controller_policy = match (policy_given, controller, webhook) {
        (Some(p), _, _) => Ok(p.clone()),
        (None, Some(c), Some(w)) if c.name == w.name => policy.clone(),
        (None, c, _) => {
            install_policy(cluster, namespace, c, "runs the controller", command_line).await
        }
    };
    Policies {
        mounted: mounted_policy,
        webhook: policy,
        controller: controller_policy,
    }
}

/// The dispatch checks' readings, when the policy the controller runs names workers.
async fn dispatch(
    cluster: &Cluster,
    namespace: &str,
    controller_policy: &Result<Policy, String>,
    controller: Option<&DeploymentView>,
    counted: &Counted,
) -> Option<crate::dispatch::DispatchObserved> {
    match controller_policy {
        Ok(p) if p.dispatch.is_enabled() => Some(
            super::dispatch::read(
                cluster,
                namespace,
                &p.dispatch,
                controller.map(|c| &c.pod_spec),
                controller.and_then(|c| c.flags.as_ref().ok().map(|f| f.secures_metrics)),
                counted.dispatched.clone(),
            )
            .await,
        ),
        _ => None,
    }
}

/// The ClusterRole that lets a scraper read the metrics, if there is one.
async fn metrics_reader(cluster: &Cluster, configurations: &str) -> Result<Option<Value>, String> {
    Api::<ClusterRole>::all(cluster.client.clone())
        .get_opt(&metrics_reader_name(configurations))
        .await
        .map(|r| r.map(|r| json(&r)))
        .map_err(api_error)
}

/// The policy jobwarden's controller Deployment in `namespace` runs (and so its dispatcher),
/// with that Deployment's pod template (where a worker's `kubeconfigFile` is mounted from):
/// what `explain` reads to reach a dispatched Job's worker.
pub async fn controller_policy(
    cluster: &Cluster,
    namespace: &str,
    command_line: &dyn ServeCommandLine,
) -> Result<(Policy, Value), String> {
    let deployments = Api::<Deployment>::namespaced(cluster.client.clone(), namespace)
        .list(&ListParams::default().labels(PART_OF))
        .await
        .map_err(|e| {
            format!(
                "cannot list jobwarden's Deployments in namespace {namespace}: {}",
                api_error(e)
            )
        })?;
    let views: Vec<DeploymentView> = deployments
        .items
        .iter()
        .map(|d| DeploymentView::of(&json(d), command_line))
        .collect();
    let controller = views.iter().find(|d| d.runs_controller());
    let policy = install_policy(
        cluster,
        namespace,
        controller,
        "runs the controller",
        command_line,
    )
    .await?;
    Ok((
        policy,
        controller.map(|c| c.pod_spec.clone()).unwrap_or_default(),
    ))
}

/// The policy `deployment`'s replicas run: their `serve` arguments, with the file `--config`
/// names read from the ConfigMap mounted there. `face`: what the Deployment was looked for as.
async fn install_policy(
    cluster: &Cluster,
    namespace: &str,
    deployment: Option<&DeploymentView>,
    face: &str,
    command_line: &dyn ServeCommandLine,
) -> Result<Policy, String> {
    install_policy_and_hash(cluster, namespace, deployment, face, command_line)
        .await
        .map(|(policy, _)| policy)
}

/// [`install_policy`], with the hash of the file's text as jobwarden names it (`None`
/// without a `--config`).
async fn install_policy_and_hash(
    cluster: &Cluster,
    namespace: &str,
    deployment: Option<&DeploymentView>,
    face: &str,
    command_line: &dyn ServeCommandLine,
) -> Result<(Policy, Option<String>), String> {
    let Some(deployment) = deployment else {
        return Err(format!(
            "no Deployment in namespace {namespace} {face} to read its policy from"
        ));
    };
    let path = deployment
        .flags
        .as_ref()
        .ok()
        .and_then(|f| f.config.clone());
    let Some(path) = path else {
        return command_line
            .policy(&deployment.args, None)
            .map(|policy| (policy, None));
    };
    let Some(FileSource::ConfigMap { name, key }) = file_source(&deployment.pod_spec, &path) else {
        return Err(format!(
            "Deployment {} reads its policy from {path}, which is in no ConfigMap",
            deployment.name
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
    let hash = jobwarden_admission::policy::content_hash(text.as_bytes());
    command_line
        .policy(&deployment.args, Some(&text))
        .map(|policy| (policy, Some(hash)))
        .map_err(|e| format!("ConfigMap {namespace}/{name}: {e}"))
}

/// The policy Events on the Pods of `namespace`, newest included (kube-apiserver keeps them
/// an hour).
async fn policy_events(cluster: &Cluster, namespace: &str) -> Result<Vec<PolicyEvent>, String> {
    let events = Api::<Event>::namespaced(cluster.client.clone(), namespace)
        .list(&ListParams::default().fields("involvedObject.kind=Pod"))
        .await
        .map_err(api_error)?;
    Ok(events
        .items
        .into_iter()
        .filter(|e| {
            matches!(
                e.reason.as_deref(),
                Some(POLICY_LOADED | POLICY_APPLIED | POLICY_REFUSED)
            )
        })
        .map(|e| PolicyEvent {
            pod: e.involved_object.name.clone().unwrap_or_default(),
            reason: e.reason.clone().unwrap_or_default(),
            message: e.message.clone().unwrap_or_default(),
            at: e
                .last_timestamp
                .as_ref()
                .or(e.first_timestamp.as_ref())
                .map(|t| t.0)
                .or_else(|| e.event_time.as_ref().map(|t| t.0)),
        })
        .collect())
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
    secrets: &[&str],
) -> Vec<AccountAnswers> {
    let mut by_account: BTreeMap<&str, (Vec<String>, BTreeSet<Access>)> = BTreeMap::new();
    for d in deployments {
        let Ok(flags) = &d.flags else { continue };
        let entry = by_account.entry(&d.service_account).or_default();
        entry.0.push(format!("Deployment {}", d.name));
        entry.1.extend(uses(flags, namespace, secrets));
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

/// Every stored Job, page by page, counted as the audit would report them; the Jobs of the
/// dispatcher named `dispatcher` kept.
async fn stored(cluster: &Cluster, policy: Option<&Policy>, dispatcher: Option<&str>) -> Counted {
    let default = Policy::default();
    let policy = policy.unwrap_or(&default);
    let mut lister = JobLister::new(cluster.client.clone(), ListScope::default());
    let mut tally = Tally::default();
    let mut dispatched = Vec::new();
    let now = Timestamp::now();
    loop {
        match lister.next_page().await {
            Ok(Some(page)) => {
                for job in &page.items {
                    tally.add(job, policy, now, DEFAULT_STUCK_AFTER);
                    if let Some(job) = dispatcher.and_then(|d| DispatchedJob::of(job, d)) {
                        dispatched.push(job);
                    }
                }
            }
            Ok(None) => {
                return Counted {
                    tally: Ok(tally),
                    dispatched: Ok(dispatched),
                };
            }
            Err(e) => {
                let e = with_causes(&e);
                return Counted {
                    tally: Err(e.clone()),
                    dispatched: Err(e),
                };
            }
        }
    }
}
