//! What doctor reads for the dispatch checks: each worker's kubeconfig where the policy says it
//! is (a Secret in jobwarden's namespace, or the Secret jobwarden's controller Deployment mounts
//! where a `kubeconfigFile` points), read with the caller's credentials; and, with a
//! kubeconfig the dispatcher accepts (and only then: a refused one is never used), the worker
//! asked as the dispatcher: its version, a SelfSubjectReview, SelfSubjectAccessReviews of every
//! call the dispatcher makes there, and the namespaces its Jobs need, each looked at only where
//! a review says the dispatcher may (so doctor itself is never refused there). Workers are
//! read at once, each with a short timeout: one that does not answer delays the run once.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::join_all;
use jobwarden_admission::policy::{Dispatch, Worker, WorkerSource};
use jobwarden_dispatcher::worker::credential_source::SECRET_KEY;
use jobwarden_rules::well_known::LEASE_NAME;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};

use super::{Cluster, with_causes};
use crate::access::Access;
use crate::dispatch::DispatchObserved;
use crate::dispatch::jobs::{DispatchedJob, wanted_namespaces};
use crate::dispatch::room::{LeaderMetrics, lease_views};
use crate::dispatch::worker::{
    KubeconfigRead, NamespaceFound, NamespaceSeen, Reached, WorkerObserved, accepted, reviews,
};
use crate::installed::deployment::{FileSource, file_source};
use crate::installed::permissions::worker_room_uses;

/// The longest doctor waits for one answer of a worker.
const WORKER_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything the dispatch checks judge. `pod_spec`: the controller Deployment's pod template,
/// where a `kubeconfigFile` is found mounted.
pub async fn read(
    cluster: &Cluster,
    namespace: &str,
    dispatch: &Dispatch,
    pod_spec: Option<&Value>,
    metrics_secure: Option<bool>,
    jobs: Result<Vec<DispatchedJob>, String>,
) -> DispatchObserved {
    let labels = namespace_labels(cluster, dispatch, &jobs).await;
    let workers = join_all(dispatch.workers.iter().map(|w| {
        let wanted = jobs
            .as_ref()
            .map(|jobs| wanted_namespaces(w, jobs, &labels))
            .map_err(Clone::clone);
        worker(cluster, namespace, w, pod_spec, wanted)
    }))
    .await;
    DispatchObserved {
        namespace: namespace.to_owned(),
        policy: dispatch.clone(),
        workers,
        jobs,
        leader_metrics: leader_metrics(cluster, namespace, pod_spec, metrics_secure).await,
        namespace_labels: labels,
        now: k8s_openapi::jiff::Timestamp::now(),
    }
}

/// How the leader knows each worker's room: what it says on its Lease, with every renewal;
/// else (a jobwarden that says nothing there) its `/metrics`, through the API server's pod
/// proxy with the caller's credentials (`get` on `pods/proxy`): the leader is the Lease's
/// holder (a replica's identity is its pod's name), its port the controller's container port
/// named `metrics`. Metrics served only to authorized readers (`--metrics-secure`, the
/// default) are not read: the proxy does not pass the caller's credentials on, so the leader
/// would refuse it.
async fn leader_metrics(
    cluster: &Cluster,
    namespace: &str,
    pod_spec: Option<&Value>,
    metrics_secure: Option<bool>,
) -> LeaderMetrics {
    let unreadable = |why: String| LeaderMetrics::Unreadable(why);
    let lease = match Api::<Lease>::namespaced(cluster.client.clone(), namespace)
        .get_opt(LEASE_NAME)
        .await
    {
        Ok(lease) => lease,
        Err(e) => {
            return unreadable(format!(
                "cannot read Lease {namespace}/{LEASE_NAME}: {}",
                api_error(e)
            ));
        }
    };
    let now = k8s_openapi::jiff::Timestamp::now();
    if let Some(said) = lease
        .as_ref()
        .and_then(|l| lease_views(l, now, crate::installed::lease::STALE_AFTER))
    {
        return said;
    }
    if metrics_secure != Some(false) {
        return unreadable(
            "the leader serves its metrics to authorized readers only (--metrics-secure), which the API server's pod proxy cannot be".to_owned(),
        );
    }
    let port = pod_spec
        .and_then(|s| s.pointer("/containers"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("ports").and_then(Value::as_array))
        .flatten()
        .find(|p| p.get("name").and_then(Value::as_str) == Some("metrics"))
        .and_then(|p| p.get("containerPort").and_then(Value::as_i64));
    let Some(port) = port else {
        return unreadable(
            "jobwarden's controller Deployment names no container port metrics".to_owned(),
        );
    };
    let holder = lease
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty());
    let Some(pod) = holder else {
        return unreadable(format!("no replica holds Lease {namespace}/{LEASE_NAME}"));
    };
    let path = format!("/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy/metrics");
    let request = match http::Request::get(&path).body(Vec::new()) {
        Ok(request) => request,
        Err(e) => return unreadable(e.to_string()),
    };
    match cluster.client.request_text(request).await {
        Ok(text) => LeaderMetrics::Read { pod, text },
        Err(kube::Error::Api(s)) if s.code == 403 => unreadable(format!(
            "you may not read the leader's metrics through the API server (get on pods/proxy in namespace {namespace}): {}",
            s.message
        )),
        Err(e) => unreadable(format!(
            "cannot read the leader's ({pod}) metrics: {}",
            with_causes(&e)
        )),
    }
}

/// The management cluster's labels of the dispatched Jobs' namespaces, when a worker chooses
/// its namespaces by a selector (else none are needed).
async fn namespace_labels(
    cluster: &Cluster,
    dispatch: &Dispatch,
    jobs: &Result<Vec<DispatchedJob>, String>,
) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut labels = BTreeMap::new();
    let selects = dispatch
        .workers
        .iter()
        .map(|w| &w.namespaces)
        .chain(dispatch.shares.iter().map(|s| &s.namespaces))
        .any(|n| n.selector.is_some());
    let Ok(jobs) = jobs else { return labels };
    if !selects {
        return labels;
    }
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    let mut names: Vec<&str> = jobs.iter().map(|j| j.namespace.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        if let Ok(Some(ns)) = namespaces.get_opt(name).await {
            labels.insert(name.to_owned(), ns.metadata.labels.unwrap_or_default());
        }
    }
    labels
}

async fn worker(
    cluster: &Cluster,
    namespace: &str,
    spec: &Worker,
    pod_spec: Option<&Value>,
    wanted: Result<BTreeMap<String, Vec<String>>, String>,
) -> WorkerObserved {
    let kubeconfig = kubeconfig(cluster, namespace, spec, pod_spec).await;
    let reached = match accepted(&kubeconfig) {
        Some(Ok(config)) => Some(reach(config, spec, wanted).await),
        _ => None,
    };
    WorkerObserved {
        name: spec.name.clone(),
        kubeconfig,
        reached,
    }
}

/// The worker's kubeconfig, where the policy says it is.
async fn kubeconfig(
    cluster: &Cluster,
    namespace: &str,
    spec: &Worker,
    pod_spec: Option<&Value>,
) -> KubeconfigRead {
    match spec.source() {
        Some(WorkerSource::Local) => KubeconfigRead::Local,
        Some(WorkerSource::Secret(name)) => {
            let from = format!("Secret {namespace}/{name}");
            secret_key(cluster, namespace, name, SECRET_KEY, from).await
        }
        Some(WorkerSource::File(path)) => match pod_spec.and_then(|s| file_source(s, path)) {
            Some(FileSource::Secret { name, key }) => {
                let from = format!("Secret {namespace}/{name} (key {key}, mounted at {path})");
                secret_key(cluster, namespace, &name, &key, from).await
            }
            Some(FileSource::ConfigMap { name, key }) => {
                let from = format!("ConfigMap {namespace}/{name} (key {key}, mounted at {path})");
                config_map_key(cluster, namespace, &name, &key, from).await
            }
            None => KubeconfigRead::Unreadable {
                from: format!("the file {path}"),
                why: "a file in jobwarden's container that doctor finds mounted from no Secret of jobwarden's controller Deployment".to_owned(),
            },
        },
        None => KubeconfigRead::Unreadable {
            from: "the policy".to_owned(),
            why: "it names not exactly one of kubeconfigSecret, kubeconfigFile and local".to_owned(),
        },
    }
}

async fn secret_key(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    key: &str,
    from: String,
) -> KubeconfigRead {
    match Api::<Secret>::namespaced(cluster.client.clone(), namespace)
        .get_opt(name)
        .await
    {
        Ok(Some(secret)) => match secret.data.as_ref().and_then(|d| d.get(key)) {
            Some(bytes) => match String::from_utf8(bytes.0.clone()) {
                Ok(text) => KubeconfigRead::Read { from, text },
                Err(_) => KubeconfigRead::Missing {
                    why: format!("{from}: its key {key:?} is not UTF-8 text"),
                    from,
                },
            },
            None => KubeconfigRead::Missing {
                why: format!("{from} has no key {key:?}"),
                from,
            },
        },
        Ok(None) => KubeconfigRead::Missing {
            why: format!("{from} does not exist"),
            from,
        },
        Err(e) => KubeconfigRead::Unreadable {
            from,
            why: api_error(e),
        },
    }
}

async fn config_map_key(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    key: &str,
    from: String,
) -> KubeconfigRead {
    match Api::<ConfigMap>::namespaced(cluster.client.clone(), namespace)
        .get_opt(name)
        .await
    {
        Ok(Some(map)) => match map.data.as_ref().and_then(|d| d.get(key)) {
            Some(text) => KubeconfigRead::Read {
                from,
                text: text.clone(),
            },
            None => KubeconfigRead::Missing {
                why: format!("{from} has no key {key:?}"),
                from,
            },
        },
        Ok(None) => KubeconfigRead::Missing {
            why: format!("{from} does not exist"),
            from,
        },
        Err(e) => KubeconfigRead::Unreadable {
            from,
            why: api_error(e),
        },
    }
}

fn api_error(e: kube::Error) -> String {
    match e {
        kube::Error::Api(status) => status.message,
        other => with_causes(&other),
    }
}

/// The worker asked as the dispatcher, with the kubeconfig it accepts.
async fn reach(
    config: Kubeconfig,
    spec: &Worker,
    wanted: Result<BTreeMap<String, Vec<String>>, String>,
) -> Result<Reached, String> {
    let mut config = kube::Config::from_custom_kubeconfig(config, &KubeConfigOptions::default())
        .await
        .map_err(|e| with_causes(&e))?;
    config.connect_timeout = Some(WORKER_TIMEOUT);
    config.read_timeout = Some(WORKER_TIMEOUT);
    let server = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_owned();
    let client = kube::Client::try_from(config).map_err(|e| with_causes(&e))?;
    let worker = Cluster { client, server };
    let mut reached = Reached {
        server: worker.server.clone(),
        version: worker.ask("/version").await,
        whoami: Err("not asked".to_owned()),
        permissions: Vec::new(),
        room: Vec::new(),
        namespaces: Ok(Vec::new()),
    };
    if reached.version.is_err() {
        return Ok(reached);
    }
    reached.whoami = worker
        .review(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
        )
        .await;
    if reached.whoami.as_ref().is_ok_and(|a| a.code == 401) {
        return Ok(reached);
    }
    reached.permissions = worker.may_each(reviews(spec)).await;
    reached.room = worker.may_each(worker_room_uses(None)).await;
    reached.namespaces = match wanted {
        Ok(wanted) => {
            let mut seen = Vec::new();
            for (name, jobs) in wanted {
                let found = namespace_found(&worker, &name).await;
                seen.push(NamespaceSeen { name, jobs, found });
            }
            Ok(seen)
        }
        Err(e) => Err(e),
    };
    Ok(reached)
}

/// Whether the dispatcher sees namespace `name` there: asked first whether it may get it (as
/// the request is authorized: in namespace `name`), then got, so doctor is never refused.
async fn namespace_found(worker: &Cluster, name: &str) -> NamespaceFound {
    let access = Access::resource(Some(name), "", "namespaces", Some(name), "get");
    match worker.may(&access).await {
        Ok(true) => match worker.get(&format!("/api/v1/namespaces/{name}")).await {
            Ok(Some(_)) => NamespaceFound::Exists,
            Ok(None) => NamespaceFound::Missing,
            Err(e) => NamespaceFound::Unknown(e),
        },
        Ok(false) => NamespaceFound::NotAllowed,
        Err(e) => NamespaceFound::Unknown(e),
    }
}
