//! The fleet a dispatcher's end-to-end tests run on (`Fleet::shared`: a management plane and
//! two workers, started at once): each plane runs Jobs with upstream's controllers, the
//! management one deletes a finished Job after its TTL, a worker's kubeconfig made from
//! deploy/worker/ can do exactly what its role says (everywhere, or in its namespaces only),
//! and a worker's kube-apiserver stops and starts again while a Job runs, which goes on.
//!
//! Skipped with one line without the control-plane binaries or with JOBWARDEN_E2E_KUBECONFIG.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::{Duration, Instant};

use futures::StreamExt as _;

use jobwarden_envtest::{ControlPlane, Fleet, WORKER_DISPATCHER_USER, delegated_job, kubelet};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, ResourceExt as _};
use serde_json::{Value, json};

/// Stopping a plane's kube-apiserver disturbs every test on it: that test holds this for
/// writing, the others for reading.
static DISRUPTION: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// How long a condition may take on a busy two-core machine.
const PATIENCE: Duration = Duration::from_secs(180);

/// Asks `done` every 200 ms until it says yes, for at most [`PATIENCE`].
async fn wait_for<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !done().await {
        assert!(started.elapsed() < PATIENCE, "no {what} after {PATIENCE:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A Job run by the cluster's own Job controller (no `spec.managedBy`), as a dispatcher's copy
/// is, its pods ended by the test's kubelet.
fn plain_job(name: &str, spec: Value) -> Job {
    let mut job = delegated_job(name, "", spec);
    if let Some(spec) = job["spec"].as_object_mut() {
        spec.remove("managedBy");
    }
    serde_json::from_value(job).expect("a Job")
}

fn has_condition(job: &Job, kind: &str) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == kind && c.status == "True"))
}

fn succeeded(job: &Job) -> i32 {
    job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0)
}

/// Creates `job` in a new namespace of `plane` and plays the kubelet there until it is
/// `Complete`; returns the client and namespace.
async fn run_to_completion(plane: &ControlPlane, prefix: &str, job: Job) -> (Client, String) {
    let client = plane.client().await;
    let namespace = plane.create_namespace(&client, prefix).await;
    let kubelet = kubelet(Api::<Pod>::namespaced(client.clone(), &namespace));
    let jobs = Api::<Job>::namespaced(client.clone(), &namespace);
    let name = job.name_any();
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("the Job is created");
    wait_for(&format!("Complete on {name} in {namespace}"), || async {
        jobs.get(&name)
            .await
            .is_ok_and(|j| has_condition(&j, "Complete"))
    })
    .await;
    kubelet.abort();
    (client, namespace)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_planes_start_at_once_and_each_runs_jobs() {
    let Some(fleet) = Fleet::shared() else { return };
    let _shared = DISRUPTION.read().await;
    let servers: BTreeSet<String> = fleet
        .planes()
        .map(|p| {
            let config = Kubeconfig::read_from(p.kubeconfig()).expect("a kubeconfig");
            config.clusters[0]
                .cluster
                .as_ref()
                .and_then(|c| c.server.clone())
                .expect("a server")
        })
        .collect();
    assert_eq!(servers.len(), 1 + Fleet::SHARED_WORKERS, "{servers:?}");
    for plane in fleet.planes() {
        assert_eq!(
            plane.pids().len(),
            3,
            "etcd, kube-apiserver, kube-controller-manager"
        );
    }

    let runs = fleet.workers.iter().map(|worker| {
        run_to_completion(
            worker,
            "fleet-worker",
            plain_job("two-pods", json!({"completions": 2, "parallelism": 2})),
        )
    });
    futures::future::join_all(runs).await;

    // The management plane's TTL-after-finished controller deletes a Job once it is finished.
    let (client, namespace) = run_to_completion(
        &fleet.management,
        "fleet-management",
        plain_job("short-lived", json!({"ttlSecondsAfterFinished": 2})),
    )
    .await;
    let jobs = Api::<Job>::namespaced(client, &namespace);
    wait_for("the finished Job deleted after its TTL", || async {
        jobs.get_opt("short-lived").await.is_ok_and(|j| j.is_none())
    })
    .await;
}

/// The kubeconfig `dispatcher_kubeconfig` gives: one cluster with its CA inline, one user with
/// a token inline and no other way to authenticate (what the dispatcher accepts), and a client
/// made from it.
async fn dispatcher_client(text: &str) -> Client {
    let config = Kubeconfig::from_yaml(text).expect("the worker kubeconfig is YAML");
    let [cluster] = config.clusters.as_slice() else {
        panic!("one cluster: {text}");
    };
    let cluster = cluster.cluster.as_ref().expect("a cluster");
    assert!(
        cluster.certificate_authority_data.is_some() && cluster.certificate_authority.is_none()
    );
    assert_ne!(cluster.insecure_skip_tls_verify, Some(true));
    let [user] = config.auth_infos.as_slice() else {
        panic!("one user: {text}");
    };
    let user = user.auth_info.as_ref().expect("credentials");
    assert!(user.token.is_some(), "a token inline");
    assert!(
        user.exec.is_none()
            && user.auth_provider.is_none()
            && user.token_file.is_none()
            && user.client_certificate.is_none()
            && user.client_certificate_data.is_none()
            && user.username.is_none()
            && user.password.is_none(),
        "no other credential: {text}"
    );
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = Config::from_custom_kubeconfig(config, &KubeConfigOptions::default())
        .await
        .expect("the worker kubeconfig is usable");
    Client::try_from(config).expect("a client")
}

/// Whether kube-apiserver says the client may `verb` `resource` (`group/resource[/sub]`,
/// `""` for core) in `namespace` (cluster-wide when `None`), on object `name` if given.
async fn may(
    client: &Client,
    verb: &str,
    resource: &str,
    namespace: Option<&str>,
    name: Option<&str>,
) -> bool {
    let (group, resource) = resource.split_once('/').unwrap_or(("", resource));
    let (resource, subresource) = match resource.split_once('/') {
        Some((r, s)) => (r, Some(s.to_owned())),
        None => (resource, None),
    };
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.to_owned()),
                resource: Some(resource.to_owned()),
                subresource,
                verb: Some(verb.to_owned()),
                namespace: namespace.map(str::to_owned),
                name: name.map(str::to_owned),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .expect("a SelfSubjectAccessReview")
        .status
        .is_some_and(|s| s.allowed)
}

const VERBS: [&str; 8] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

/// What the dispatcher must not do on a worker, beside what it may.
const RESOURCES: [&str; 11] = [
    "batch/jobs",
    "batch/jobs/status",
    "batch/cronjobs",
    "/pods",
    "/pods/status",
    "/secrets",
    "/configmaps",
    "/events",
    "/namespaces",
    "/serviceaccounts/token",
    "rbac.authorization.k8s.io/rolebindings",
];

/// deploy/worker/'s ClusterRole: the copies' Jobs, the pods read (where a Job fits) and a
/// taken-back copy's deleted, and the get of a namespace. (Its Nodes, read too, are not among
/// [`RESOURCES`]: a namespaced grant could not give them.)
fn the_role_grants(verb: &str, resource: &str) -> bool {
    match resource {
        "batch/jobs" => ["get", "list", "watch", "create", "patch", "delete"].contains(&verb),
        "/pods" => ["get", "list", "watch", "deletecollection"].contains(&verb),
        "/namespaces" => verb == "get",
        _ => false,
    }
}

/// Every verb on every resource of [`RESOURCES`] in `namespace` (cluster-wide when `None`):
/// `(verb, resource)` where the answer is not `expected(verb, resource)`.
async fn unexpected_answers(
    client: &Client,
    namespace: Option<&str>,
    expected: impl Fn(&str, &str) -> bool,
) -> Vec<String> {
    let mut wrong = Vec::new();
    for resource in RESOURCES {
        for verb in VERBS {
            // The get of a namespace names it: the namespace is its own.
            let name = (resource == "/namespaces").then_some(namespace).flatten();
            let allowed = may(client, verb, resource, namespace, name).await;
            if allowed != expected(verb, resource) {
                wrong.push(format!(
                    "{verb} {resource} in {namespace:?}: allowed {allowed}"
                ));
            }
        }
    }
    wrong
}

fn forbidden(result: Result<impl Sized, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(s)) if s.code == 403)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_kubeconfig_does_what_the_worker_role_grants_everywhere_and_no_more() {
    let Some(fleet) = Fleet::shared() else { return };
    let _shared = DISRUPTION.read().await;
    let worker = &fleet.workers[0];
    let admin = worker.client().await;
    let namespace = worker.create_namespace(&admin, "fleet-grants").await;
    let text = worker
        .dispatcher_kubeconfig(None)
        .await
        .expect("the worker identity");
    let dispatcher = dispatcher_client(&text).await;

    let whoami = Api::<SelfSubjectReview>::all(dispatcher.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("a SelfSubjectReview");
    let user = whoami
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username);
    assert_eq!(user.as_deref(), Some(WORKER_DISPATCHER_USER));

    for scope in [Some(namespace.as_str()), None] {
        let wrong = unexpected_answers(&dispatcher, scope, the_role_grants).await;
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    // Real calls: a copy made, listed cluster-wide, deleted; the namespace read; the pods
    // listed; no Secret.
    let jobs = Api::<Job>::namespaced(dispatcher.clone(), &namespace);
    jobs.create(&PostParams::default(), &plain_job("copy", json!({})))
        .await
        .expect("the dispatcher creates a Job");
    let all = Api::<Job>::all(dispatcher.clone())
        .list(&ListParams::default())
        .await
        .expect("the dispatcher lists Jobs everywhere");
    assert!(all.items.iter().any(|j| j.name_any() == "copy"));
    Api::<Namespace>::all(dispatcher.clone())
        .get(&namespace)
        .await
        .expect("the dispatcher gets the Job's namespace");
    jobs.delete("copy", &DeleteParams::background())
        .await
        .expect("the dispatcher deletes the Job");
    Api::<Pod>::namespaced(dispatcher.clone(), &namespace)
        .list(&ListParams::default())
        .await
        .expect("the dispatcher lists pods (where a Job fits)");
    assert!(forbidden(
        Api::<Secret>::namespaced(dispatcher.clone(), &namespace)
            .list(&ListParams::default())
            .await
    ));
    // kube-apiserver's audit log names the dispatcher's refusals, as the dispatcher's own tests
    // read them ("nothing refused").
    let refused: Vec<String> = worker
        .refusals_of(WORKER_DISPATCHER_USER)
        .expect("an audit log")
        .into_iter()
        .map(|r| r.call)
        .collect();
    assert!(
        refused.contains(&format!("list secrets in namespace {namespace}")),
        "{refused:#?}"
    );
}

/// With the namespaced variant, the identity gets its namespace and lists and watches the Jobs
/// there, and reaches nothing elsewhere: not another namespace, not the cluster-wide list, not
/// the list of namespaces. (docs/dispatch.md reports this for the dispatcher's author: with
/// namespace-scoped grants, it must watch each namespace.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_namespaced_worker_kubeconfig_reaches_its_namespaces_only() {
    let Some(fleet) = Fleet::shared() else { return };
    let _shared = DISRUPTION.read().await;
    let worker = &fleet.workers[1];
    let admin = worker.client().await;
    let granted = worker.create_namespace(&admin, "fleet-granted").await;
    let other = worker.create_namespace(&admin, "fleet-other").await;
    let text = worker
        .dispatcher_kubeconfig(Some(&[granted.as_str()]))
        .await
        .expect("the worker identity");
    let dispatcher = dispatcher_client(&text).await;

    let wrong = unexpected_answers(&dispatcher, Some(&granted), the_role_grants).await;
    assert!(wrong.is_empty(), "in its namespace: {wrong:#?}");
    for scope in [Some(other.as_str()), None] {
        let wrong = unexpected_answers(&dispatcher, scope, |_, _| false).await;
        assert!(wrong.is_empty(), "outside its namespace: {wrong:#?}");
    }

    let namespaces = Api::<Namespace>::all(dispatcher.clone());
    namespaces
        .get(&granted)
        .await
        .expect("the dispatcher gets its namespace");
    assert!(forbidden(namespaces.get(&other).await));
    assert!(forbidden(namespaces.list(&ListParams::default()).await));

    let here = Api::<Job>::namespaced(dispatcher.clone(), &granted);
    here.create(&PostParams::default(), &plain_job("copy", json!({})))
        .await
        .expect("the dispatcher creates a Job in its namespace");
    let listed = here
        .list(&ListParams::default())
        .await
        .expect("the dispatcher lists its namespace's Jobs");
    assert_eq!(listed.items.len(), 1);
    let mut watch = here
        .watch(&WatchParams::default(), "0")
        .await
        .expect("the dispatcher watches its namespace's Jobs")
        .boxed();
    let first = watch.next().await;
    assert!(
        matches!(first, Some(Ok(WatchEvent::Added(ref j))) if j.name_any() == "copy"),
        "{first:?}"
    );
    drop(watch);
    let elsewhere = Api::<Job>::namespaced(dispatcher.clone(), &other);
    assert!(forbidden(
        elsewhere
            .create(&PostParams::default(), &plain_job("copy", json!({})))
            .await
    ));
    let everywhere = Api::<Job>::all(dispatcher.clone());
    assert!(forbidden(everywhere.list(&ListParams::default()).await));
    assert!(forbidden(
        everywhere.watch(&WatchParams::default(), "0").await
    ));

    // Granting it in the other namespace too is one more RoleBinding; the first stays.
    let text = worker
        .dispatcher_kubeconfig(Some(&[granted.as_str(), other.as_str()]))
        .await
        .expect("the worker identity in two namespaces");
    let dispatcher = dispatcher_client(&text).await;
    for scope in [&granted, &other] {
        let wrong = unexpected_answers(&dispatcher, Some(scope), the_role_grants).await;
        assert!(wrong.is_empty(), "in {scope}: {wrong:#?}");
    }
    assert!(!may(&dispatcher, "list", "batch/jobs", None, None).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_s_apiserver_stops_and_starts_again_and_its_jobs_go_on() {
    let Some(fleet) = Fleet::shared() else { return };
    let _alone = DISRUPTION.write().await;
    let worker: &'static ControlPlane = &fleet.workers[0];
    let [etcd, apiserver, controller_manager] = worker.pids()[..] else {
        panic!("three processes: {:?}", worker.pids());
    };
    let client = worker.client().await;
    let namespace = worker.create_namespace(&client, "fleet-restart").await;
    let kubelet = kubelet(Api::<Pod>::namespaced(client.clone(), &namespace));
    let jobs = Api::<Job>::namespaced(client.clone(), &namespace);
    let job = plain_job("one-at-a-time", json!({"completions": 4, "parallelism": 1}));
    let uid = jobs
        .create(&PostParams::default(), &job)
        .await
        .expect("the Job is created")
        .uid();
    wait_for("a first pod succeeded", || async {
        jobs.get("one-at-a-time")
            .await
            .is_ok_and(|j| succeeded(&j) >= 1)
    })
    .await;

    tokio::task::spawn_blocking(move || worker.stop_apiserver())
        .await
        .expect("stopping does not panic")
        .expect("kube-apiserver stops");
    assert!(
        jobs.get("one-at-a-time").await.is_err(),
        "nothing answers while kube-apiserver is stopped"
    );
    assert!(worker.stop_apiserver().is_err(), "it is stopped already");

    tokio::task::spawn_blocking(move || worker.start_apiserver())
        .await
        .expect("starting does not panic")
        .expect("kube-apiserver starts again");
    let [etcd_after, apiserver_after, controller_manager_after] = worker.pids()[..] else {
        panic!("three processes: {:?}", worker.pids());
    };
    assert_eq!(
        (etcd_after, controller_manager_after),
        (etcd, controller_manager)
    );
    assert_ne!(apiserver_after, apiserver);

    // etcd kept the Job, and kube-controller-manager (the same process) finishes it.
    let kept = jobs.get("one-at-a-time").await.expect("the Job is kept");
    assert_eq!(kept.uid(), uid);
    assert!(
        !has_condition(&kept, "Complete"),
        "the Job was to finish after the restart: {:?}",
        kept.status
    );
    wait_for("Complete after the restart", || async {
        jobs.get("one-at-a-time")
            .await
            .is_ok_and(|j| has_condition(&j, "Complete") && succeeded(&j) == 4)
    })
    .await;
    kubelet.abort();
}
