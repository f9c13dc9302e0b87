//! The leader under its own load, on a real kube-apiserver (issue 34): the built binary's
//! `serve --no-webhook`, under the ServiceAccount and RBAC `deploy/` installs, at its default
//! client rate (50 qps, burst 100), runs an Indexed Job of 200 pods and then one of 1,000 (of
//! 1,000 and then 5,000 with `JOBWARDEN_E2E_SCALE=full`, issue 34's sizes),
//! whose pods a kubelet played by the test ends a second after they appear. A sync creates up
//! to 500 pods, which queue for 10 s at that rate: before the Lease had a client of its own,
//! a renewal waited behind them and the leader stepped down mid-run.
//!
//! Asserted on what the cluster and the metrics say, never on time: leadership never changed
//! hands (the Lease's holder and transitions, its LeaderElection Events, the loss counter),
//! each Job ends Complete with every index succeeded once, every pod lost its tracking
//! finalizer, and kube-apiserver refused jobwarden nothing. The API server's side as well:
//! deploy/'s FlowSchema puts the Lease's requests, and no others, in the `leader-election`
//! priority level (as kube-apiserver's answers name it), and the renewals went there.
//!
//! About a minute on the project's two-core machine (five at full scale). Skipped with one line without the
//! control-plane binaries, and with `JOBWARDEN_E2E_KUBECONFIG` (a cluster elsewhere cannot
//! reach this machine's loopback).

use crate::support;

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::json;
use support::installed::InstalledNamespace;
use support::served::Served;

const CONTROLLER: &str = "jobwarden.io/e2e-scale";
const LEASE: &str = "jobwarden-job-controller";
const FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// Far beyond what the 5,000-pod Job needs at 50 qps (about 200 s): reaching it is a failure.
const TIMEOUT: Duration = Duration::from_secs(1200);

fn indexed_job(name: &str, pods: u32) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "managedBy": CONTROLLER,
            "completions": pods, "parallelism": pods, "completionMode": "Indexed",
            "template": {"spec": {
                "schedulerName": "jobwarden-e2e-nobody",
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox"}],
            }},
        },
    }))
    .expect("a Job")
}

/// The sum of every series of `name` (any labels) in a Prometheus exposition.
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// deploy/'s FlowSchema for the Lease (deploy/base/flowschema.yaml).
const LEASE_FLOW_SCHEMA: &str = "jobwarden-leader-election";

/// How kube-apiserver's API Priority and Fairness classified a GET of `path` sent by `client`:
/// the FlowSchema and priority level its answer names (`X-Kubernetes-PF-FlowSchema-UID`,
/// `X-Kubernetes-PF-PriorityLevel-UID`), by name.
async fn classified(client: &Client, admin: &Client, path: &str) -> (String, String) {
    let request = axum::http::Request::get(path)
        .body(Vec::new())
        .expect("a request");
    let answer = client
        .send(request.map(kube::client::Body::from))
        .await
        .expect("an answer");
    let header = |name: &str| {
        answer
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("GET {path}: no {name} in the answer"))
            .to_owned()
    };
    let (schema_uid, level_uid) = (
        header("X-Kubernetes-PF-FlowSchema-UID"),
        header("X-Kubernetes-PF-PriorityLevel-UID"),
    );
    (
        name_of::<FlowSchema>(admin, schema_uid).await,
        name_of::<PriorityLevelConfiguration>(admin, level_uid).await,
    )
}

/// The name of the cluster-scoped `K` whose uid is `uid`; the uid itself when none has it.
async fn name_of<K>(admin: &Client, uid: String) -> String
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    Api::<K>::all(admin.clone())
        .list(&ListParams::default())
        .await
        .expect("a list")
        .items
        .into_iter()
        .find(|o| o.uid().as_deref() == Some(uid.as_str()))
        .map(|o| o.name_any())
        .unwrap_or(uid)
}

/// How many requests kube-apiserver dispatched under the Lease's FlowSchema.
async fn dispatched_for_the_lease(admin: &Client) -> f64 {
    let request = axum::http::Request::get("/metrics")
        .body(Vec::new())
        .expect("a request");
    let text = admin
        .request_text(request)
        .await
        .expect("kube-apiserver's metrics");
    let series = format!("flow_schema=\"{LEASE_FLOW_SCHEMA}\"");
    let lease_series: Vec<&str> = text.lines().filter(|l| l.contains(&series)).collect();
    metric(
        &lease_series.join("\n"),
        "apiserver_flowcontrol_dispatched_requests_total",
    )
}

/// The Lease's holder and transitions.
async fn lease(client: &Client, ns: &str) -> (String, i32) {
    let lease = Api::<Lease>::namespaced(client.clone(), ns)
        .get(LEASE)
        .await
        .expect("the Lease");
    let spec = lease.spec.unwrap_or_default();
    (
        spec.holder_identity.unwrap_or_default(),
        spec.lease_transitions.unwrap_or(0),
    )
}

/// Runs `name` with `pods` pods to its end, while the test's kubelet ends each pod a second
/// after it appears; then checks its status and that no pod keeps the finalizer.
async fn run_to_the_end(client: &Client, ns: &str, name: &str, pods: u32) {
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    jobs.create(&PostParams::default(), &indexed_job(name, pods))
        .await
        .expect("the Job is created");
    let started = Instant::now();
    let job = loop {
        let job = jobs.get(name).await.expect("the Job");
        let complete = job
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == "Complete" && c.status == "True")
            });
        if complete {
            break job;
        }
        assert!(started.elapsed() < TIMEOUT, "{name} never completed");
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let status = job.status.unwrap_or_default();
    assert_eq!(status.succeeded, Some(i32::try_from(pods).expect("pods")));
    assert_eq!(status.completed_indexes, Some(format!("0-{}", pods - 1)));
    assert_eq!(status.failed.unwrap_or(0), 0);
    assert_eq!(status.active.unwrap_or(0), 0);
    assert!(status.completion_time.is_some());
    let uncounted = status.uncounted_terminated_pods.unwrap_or_default();
    assert!(
        uncounted.succeeded.unwrap_or_default().is_empty()
            && uncounted.failed.unwrap_or_default().is_empty(),
        "a Complete Job counts every pod"
    );

    // Each pod's outcome is in the status once it is Complete; the finalizers come off in
    // the syncs that follow.
    let all_pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let selector = format!("job-name={name}");
    loop {
        let listed = all_pods
            .list(&ListParams::default().labels(&selector))
            .await
            .expect("the pods")
            .items;
        let held = listed
            .iter()
            .filter(|p| p.finalizers().iter().any(|f| f == FINALIZER))
            .count();
        if held == 0 {
            assert_eq!(listed.len(), pods as usize, "one pod per index, no more");
            break;
        }
        assert!(
            started.elapsed() < TIMEOUT,
            "{held} pods of {name} keep the tracking finalizer"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_keeps_its_lease_through_indexed_jobs_of_many_pods() {
    let Some(InstalledNamespace {
        plane,
        admin,
        ns,
        identity,
        dir,
    }) = InstalledNamespace::new("jobwarden-scale").await
    else {
        return;
    };
    let served = tokio::task::block_in_place(|| {
        Served::start(
            &dir,
            &identity,
            &ns,
            &[
                "--no-webhook",
                "--audit-interval-seconds=0",
                "--controller-name",
                CONTROLLER,
            ],
        )
    });
    let reader = plane.metrics_reader_token(&ns, "prometheus").await;
    let metrics = || {
        let (served, reader) = (&served, reader.as_str());
        tokio::task::block_in_place(move || served.get("/metrics", Some(reader)))
    };
    let started = Instant::now();
    while metric(&metrics(), "jobwarden_controller_leader") != 1.0 {
        assert!(started.elapsed() < TIMEOUT, "jobwarden never led");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (holder, transitions) = lease(&admin, &ns).await;
    // The Lease's requests travel in kube-apiserver's leader-election priority level; the
    // controller's other work does not. kube-apiserver takes up a new FlowSchema from its own
    // watch: wait until it classifies by it.
    let as_installed = identity.client(&ns).await;
    let lease_path = format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{LEASE}");
    let wanted = (LEASE_FLOW_SCHEMA.to_owned(), "leader-election".to_owned());
    let waited = Instant::now();
    loop {
        let got = classified(&as_installed, &admin, &lease_path).await;
        if got == wanted {
            break;
        }
        assert!(
            waited.elapsed() < TIMEOUT,
            "the Lease's GET is classified as {got:?}, not {wanted:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (_, pods_level) = classified(
        &as_installed,
        &admin,
        &format!("/api/v1/namespaces/{ns}/pods"),
    )
    .await;
    assert_ne!(pods_level, "leader-election", "the pods' requests");
    let dispatched_before = dispatched_for_the_lease(&admin).await;

    let kubelet = jobwarden_envtest::kubelet::finish_pods_after_a_second(admin.clone(), &ns);
    // 1,000 and 5,000 pods with JOBWARDEN_E2E_SCALE=full (issue 34's sizes).
    run_to_the_end(&admin, &ns, "first", crate::support::scale(1000, 200)).await;
    run_to_the_end(&admin, &ns, "second", crate::support::scale(5000, 1000)).await;
    kubelet.abort();

    let text = metrics();
    assert_eq!(
        metric(&text, "jobwarden_controller_leader_losses_total"),
        0.0,
        "the leader stepped down: {}",
        text.lines()
            .filter(|l| l.starts_with("jobwarden_controller_leader"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(metric(&text, "jobwarden_controller_leader"), 1.0);
    assert_eq!(
        lease(&admin, &ns).await,
        (holder.clone(), transitions),
        "the Lease changed hands"
    );
    // client-go's words on the Lease: one replica became leader, once, and never stopped.
    let said: Vec<String> = Api::<Event>::namespaced(admin.clone(), &ns)
        .list(&ListParams::default().fields("reason=LeaderElection"))
        .await
        .expect("the Events")
        .items
        .into_iter()
        .filter_map(|e| e.message)
        .collect();
    assert_eq!(said, [format!("{holder} became leader")]);
    assert!(
        dispatched_for_the_lease(&admin).await > dispatched_before,
        "no renewal went through {LEASE_FLOW_SCHEMA}"
    );
    identity.assert_nothing_refused();
    drop(served);
    let _ = std::fs::remove_dir_all(&dir);
}
