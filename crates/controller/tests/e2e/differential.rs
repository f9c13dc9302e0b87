//! jobwarden against upstream's Job controller, side by side on one real API server.
//!
//! Each scenario runs twice at once, in two namespaces: as a plain Job, which
//! kube-controller-manager's Job controller runs, and delegated to jobwarden through
//! `spec.managedBy`. The same scripted kubelet plays both, and the test compares what a user
//! of the Job sees: the final status (counters, indexes, conditions with type, status and
//! reason), the order in which the conditions first appeared, the number of pods created, and
//! the shape of the first pod. Every difference must be one of [`INTENDED`], and every
//! intended difference must still show, so that a new difference, or one that went away,
//! fails the test.

mod cases;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{StreamExt as _, TryStreamExt as _};
use jobwarden_controller::{ControllerConfig, ControllerMetrics};
use jobwarden_envtest::ControlPlane;
use jobwarden_runtime::client::ControllerClients;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::support::{counter, eventually, is_true, only_active, run_pod, terminal, wait_for_job};
use cases::{Scenario, Steps, scenarios};
use jobwarden_envtest::delegated_job;

/// The controller name of the jobwarden that runs the delegated side.
const JOBWARDEN: &str = "jobwarden.io/differential";

/// Where jobwarden knowingly differs from upstream (docs/controller.md, "knowingly differs"):
/// (scenario, what, upstream's value, jobwarden's value). `*` stands for every scenario.
const INTENDED: &[(&str, &str, &str, &str)] = &[
    // KEP-4443: a FailJob rule's name in the reason, which upstream never shipped.
    (
        "named-rule-exit-code-2",
        "condition FailureTarget",
        "True PodFailurePolicy",
        "True PodFailurePolicy_ExitCode2",
    ),
    (
        "named-rule-exit-code-2",
        "condition Failed",
        "True PodFailurePolicy",
        "True PodFailurePolicy_ExitCode2",
    ),
    (
        "unnamed-rule",
        "condition FailureTarget",
        "True PodFailurePolicy",
        "True PodFailurePolicy_1",
    ),
    (
        "unnamed-rule",
        "condition Failed",
        "True PodFailurePolicy",
        "True PodFailurePolicy_1",
    ),
    // With manualSelector the API server adds no uid label to the template; jobwarden's pod
    // watch selects on it, so its pods (and the pods it adopts) always carry it.
    (
        "manual-selector-adopts",
        "pod labels",
        "app",
        "app,batch.kubernetes.io/controller-uid,batch.kubernetes.io/job-name",
    ),
    // jobwarden's own tracking finalizer, so the two controllers never touch each other's
    // pods, and the annotation naming the controller that made the pod.
    (
        "*",
        "pod finalizers",
        "batch.kubernetes.io/job-tracking",
        "jobwarden.io/job-tracking",
    ),
];

/// What a user of the Job sees, flattened to comparable lines.
type Observed = BTreeMap<String, String>;

/// How the scripted kubelet ends a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Succeed,
    Fail(i32),
    /// Runs until it is deleted.
    Hold,
}

/// A pod as the kubelet tells it apart: its completion index (Indexed Jobs) and how many pods
/// of the same index, or of the Job for NonIndexed, came before it.
#[derive(Debug, Clone, Copy)]
struct PodKey {
    index: Option<i32>,
    attempt: usize,
}

type Script = fn(PodKey) -> Fate;

/// One side: a namespace, and who runs its Job.
struct Side {
    client: Client,
    ns: String,
    managed_by: Option<&'static str>,
}

impl Side {
    fn jobs(&self) -> Api<Job> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn job(&self, spec: Value) -> Job {
        let mut job = delegated_job("job", JOBWARDEN, spec);
        match self.managed_by {
            Some(name) => job["spec"]["managedBy"] = json!(name),
            None => {
                if let Some(spec) = job["spec"].as_object_mut() {
                    spec.remove("managedBy");
                }
            }
        }
        serde_json::from_value(job).expect("a Job")
    }

    async fn wait_job(&self, what: &str, f: impl Fn(&Job) -> bool) -> Job {
        wait_for_job(&self.jobs(), "job", &format!("{}: {what}", self.ns), f).await
    }

    async fn wait_active(&self, n: usize) -> Vec<Pod> {
        eventually(&format!("{}: {n} active pods", self.ns), || async {
            let pods = self.pods().list(&Default::default()).await;
            let active = only_active(pods.map_err(|e| e.to_string())?.items);
            if active.len() == n {
                Ok(active)
            } else {
                Err(format!("{} active", active.len()))
            }
        })
        .await
    }

    async fn set_suspend(&self, suspend: bool) {
        self.jobs()
            .patch(
                "job",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"suspend": suspend}})),
            )
            .await
            .expect("the Job is patched");
    }
}

/// The kubelet's part, as the e2e suite plays it. A pod deleted meanwhile is fine: the
/// controller has moved on.
async fn play(pods: &Api<Pod>, name: &str, fate: Fate) {
    let code = match fate {
        Fate::Hold => None,
        Fate::Succeed => Some(0),
        Fate::Fail(code) => Some(code),
    };
    let _ = run_pod(pods, name, code).await;
}

/// What the watches saw of one side while it ran.
#[derive(Default)]
struct Seen {
    /// Condition types, in the order they first appeared.
    conditions: Vec<String>,
    /// Pods created, by uid.
    pods: Vec<String>,
    /// The first pod, as created.
    first_pod: Option<Pod>,
}

/// Watches the side's Job and pods, and plays `script` on every new pod once `gate` pods have
/// been created (so that a scenario can hold its first failure until the Job's pods all exist,
/// as a real kubelet would often be slower than the controller).
fn observe(
    side: &Side,
    script: Option<Script>,
    gate: usize,
) -> (Arc<Mutex<Seen>>, oneshot::Sender<()>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (stop, mut stopped) = oneshot::channel::<()>();
    let jobs = side.jobs();
    let pods = side.pods();
    let seen_jobs = seen.clone();
    let seen_pods = seen.clone();
    tokio::spawn(async move {
        let mut job_events = watcher(jobs, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        let mut pod_events = watcher(pods.clone(), watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        let mut attempts: HashMap<Option<i32>, usize> = HashMap::new();
        let mut held: Vec<(String, PodKey)> = Vec::new();
        loop {
            tokio::select! {
                _ = &mut stopped => return,
                Ok(Some(job)) = job_events.try_next() => {
                    let mut s = seen_jobs.lock().expect("seen");
                    for c in job.status.and_then(|s| s.conditions).unwrap_or_default() {
                        if !s.conditions.contains(&c.type_) {
                            s.conditions.push(c.type_);
                        }
                    }
                }
                Ok(Some(pod)) = pod_events.try_next() => {
                    let uid = pod.uid().unwrap_or_default();
                    let new = {
                        let mut s = seen_pods.lock().expect("seen");
                        let new = !s.pods.contains(&uid);
                        if new {
                            s.pods.push(uid);
                            // The first pod a controller made (a bare pod made by the test
                            // has no owner when it appears).
                            if !pod.owner_references().is_empty() {
                                s.first_pod.get_or_insert_with(|| pod.clone());
                            }
                        }
                        new
                    };
                    let Some(script) = script.filter(|_| new) else {
                        continue;
                    };
                    if pod.metadata.deletion_timestamp.is_some() || terminal(&pod) {
                        continue;
                    }
                    let index = pod
                        .annotations()
                        .get("batch.kubernetes.io/job-completion-index")
                        .and_then(|i| i.parse().ok());
                    let attempt = attempts.entry(index).or_default();
                    held.push((pod.name_any(), PodKey { index, attempt: *attempt }));
                    *attempt += 1;
                    if seen_pods.lock().expect("seen").pods.len() >= gate {
                        for (name, key) in held.drain(..) {
                            play(&pods, &name, script(key)).await;
                        }
                    }
                }
            }
        }
    });
    (seen, stop)
}

/// Waits for the Job to finish and every pod to lose its tracking finalizer, then reads what
/// a user would compare.
async fn finish(side: &Side, seen: &Mutex<Seen>) -> Observed {
    side.wait_job("a terminal condition", |j| {
        is_true(j, "Complete") || is_true(j, "Failed")
    })
    .await;
    eventually(&format!("{}: pods without finalizers", side.ns), || async {
        let pods = side.pods().list(&Default::default()).await;
        let held = pods.map_err(|e| e.to_string())?.items;
        let held = held.iter().filter(|p| !p.finalizers().is_empty()).count();
        if held == 0 {
            Ok(())
        } else {
            Err(format!("{held} pods keep one"))
        }
    })
    .await;
    // The counters settle with the last finalizer.
    let status = side
        .wait_job("settled counters", |j| {
            let s = j.status.clone().unwrap_or_default();
            counter(s.active) == 0
                && s.terminating.unwrap_or(0) == 0
                && s.uncounted_terminated_pods.as_ref().is_none_or(|u| {
                    u.succeeded.as_ref().is_none_or(Vec::is_empty)
                        && u.failed.as_ref().is_none_or(Vec::is_empty)
                })
        })
        .await
        .status
        .unwrap_or_default();
    let seen = seen.lock().expect("seen");
    let mut out = Observed::new();
    let mut put = |k: &str, v: String| {
        out.insert(k.to_owned(), v);
    };
    put("succeeded", counter(status.succeeded).to_string());
    put("failed", counter(status.failed).to_string());
    put("active", counter(status.active).to_string());
    put("ready", status.ready.unwrap_or(0).to_string());
    put("terminating", status.terminating.unwrap_or(0).to_string());
    put(
        "completedIndexes",
        status.completed_indexes.clone().unwrap_or_default(),
    );
    put(
        "failedIndexes",
        status.failed_indexes.clone().unwrap_or_default(),
    );
    put("startTime set", status.start_time.is_some().to_string());
    put(
        "completionTime set",
        status.completion_time.is_some().to_string(),
    );
    for c in status.conditions.clone().unwrap_or_default() {
        put(
            &format!("condition {}", c.type_),
            format!("{} {}", c.status, c.reason.unwrap_or_default()),
        );
    }
    put("condition order", seen.conditions.join(", "));
    put("pods created", seen.pods.len().to_string());
    if let Some(pod) = &seen.first_pod {
        pod_shape(pod, &mut put);
    }
    out
}

/// The parts of a pod the controller writes, without names and uids.
fn pod_shape(pod: &Pod, put: &mut impl FnMut(&str, String)) {
    let keys = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>().join(",");
    let mut annotations = pod.annotations().clone();
    // jobwarden names the controller that made the pod (docs/controller.md).
    annotations.remove("jobwarden.io/created-by");
    put("pod labels", keys(pod.labels()));
    put("pod annotations", keys(&annotations));
    put("pod finalizers", pod.finalizers().join(","));
    let spec = pod.spec.clone().unwrap_or_default();
    put("pod hostname", spec.hostname.unwrap_or_default());
    let env: Vec<String> = spec
        .containers
        .first()
        .and_then(|c| c.env.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            let from = e
                .value_from
                .and_then(|v| v.field_ref)
                .map(|f| f.field_path)
                .unwrap_or_default();
            format!("{}={}{}", e.name, e.value.unwrap_or_default(), from)
        })
        .collect();
    put("pod env", env.join(","));
    let owners: Vec<String> = pod
        .owner_references()
        .iter()
        .map(|o| {
            format!(
                "{} controller={:?} blockOwnerDeletion={:?}",
                o.kind, o.controller, o.block_owner_deletion
            )
        })
        .collect();
    put("pod owners", owners.join(","));
}

/// Runs one scenario on one side.
async fn run(side: Side, scenario: &Scenario) -> Observed {
    let (seen, stop) = observe(&side, scenario.script, scenario.gate);
    let mut job = side.job(scenario.spec.clone());
    job.metadata.annotations = serde_json::from_value(scenario.annotations.clone()).ok();
    let pods = side.pods();
    if let Steps::BarePodBeforeManualSelector = scenario.steps {
        let bare: Pod = serde_json::from_value(json!({
            "metadata": {"name": "bare", "labels": {"app": "manual-adoption"}},
            "spec": {
                "schedulerName": "jobwarden-e2e-nobody",
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox"}],
            },
        }))
        .expect("a pod");
        pods.create(&PostParams::default(), &bare)
            .await
            .expect("the bare pod is created");
    }
    side.jobs()
        .create(&PostParams::default(), &job)
        .await
        .expect("the Job is created");
    match scenario.steps {
        Steps::None => {}
        Steps::BarePodBeforeManualSelector => {
            eventually(&format!("{}: the bare pod adopted", side.ns), || async {
                match pods.get_opt("bare").await.map_err(|e| e.to_string())? {
                    Some(p) if p.owner_references().is_empty() => Err("not yet".to_owned()),
                    _ => Ok(()),
                }
            })
            .await;
            for pod in side.wait_active(2).await {
                play(&pods, &pod.name_any(), Fate::Succeed).await;
            }
        }
        Steps::SuspendResume => {
            let first = side.wait_active(2).await;
            play(&pods, &first[0].name_any(), Fate::Succeed).await;
            side.wait_job("one success counted", |j| {
                counter(j.status.as_ref().and_then(|s| s.succeeded)) == 1
            })
            .await;
            side.set_suspend(true).await;
            side.wait_job("Suspended=True", |j| is_true(j, "Suspended"))
                .await;
            side.wait_active(0).await;
            side.set_suspend(false).await;
            for pod in side.wait_active(1).await {
                play(&pods, &pod.name_any(), Fate::Succeed).await;
            }
        }
        Steps::DeleteRunningPod => {
            let first = side.wait_active(1).await;
            play(&pods, &first[0].name_any(), Fate::Hold).await;
            pods.delete(&first[0].name_any(), &DeleteParams::default())
                .await
                .expect("deleted");
            side.wait_job("the failure counted", |j| {
                counter(j.status.as_ref().and_then(|s| s.failed)) == 1
            })
            .await;
            let replacement = side.wait_active(1).await;
            play(&pods, &replacement[0].name_any(), Fate::Succeed).await;
        }
        Steps::BarePodJoins => {
            let running = side.wait_active(2).await;
            for pod in &running {
                play(&pods, &pod.name_any(), Fate::Hold).await;
            }
            let uid = side
                .wait_job("created", |_| true)
                .await
                .uid()
                .unwrap_or_default();
            // Pending beside two running pods: the one an excess deletion picks first.
            let bare: Pod = serde_json::from_value(json!({
                "metadata": {"name": "bare", "labels": {
                    "batch.kubernetes.io/controller-uid": uid, "controller-uid": uid,
                    "batch.kubernetes.io/job-name": "job", "job-name": "job",
                }},
                "spec": {
                    "schedulerName": "jobwarden-e2e-nobody",
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox"}],
                },
            }))
            .expect("a pod");
            pods.create(&PostParams::default(), &bare)
                .await
                .expect("the bare pod is created");
            eventually(&format!("{}: the bare pod claimed", side.ns), || async {
                match pods.get_opt("bare").await.map_err(|e| e.to_string())? {
                    Some(p)
                        if p.metadata.deletion_timestamp.is_none()
                            && p.owner_references().is_empty() =>
                    {
                        Err("not yet".to_owned())
                    }
                    _ => Ok(()),
                }
            })
            .await;
            for pod in &running {
                play(&pods, &pod.name_any(), Fate::Succeed).await;
            }
        }
    }
    let observed = finish(&side, &seen).await;
    let _ = stop.send(());
    observed
}

/// The lines where the two sides differ: (what, upstream, jobwarden).
fn differences(upstream: &Observed, jobwarden: &Observed) -> Vec<(String, String, String)> {
    let mut keys: Vec<&String> = upstream.keys().chain(jobwarden.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|k| {
            let (u, j) = (upstream.get(k), jobwarden.get(k));
            (u != j).then(|| {
                let show = |v: Option<&String>| v.cloned().unwrap_or_else(|| "(none)".to_owned());
                (k.clone(), show(u), show(j))
            })
        })
        .collect()
}

fn intended(scenario: &str) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = INTENDED
        .iter()
        .filter(|(s, ..)| *s == scenario || *s == "*")
        .map(|(_, what, u, j)| ((*what).to_owned(), (*u).to_owned(), (*j).to_owned()))
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobwarden_ends_every_scenario_as_upstreams_job_controller_does() {
    let Some(plane) = ControlPlane::shared_with_upstream() else {
        return;
    };
    let client = plane.client().await;
    let lease_ns = plane.create_namespace(&client, "differential-lease").await;
    // jobwarden runs as the install's ServiceAccount, its Lease's Role granted in lease_ns.
    let installed = plane.installed_identity().await;
    installed.grant_in(plane, &lease_ns);
    let (stop, stopped) = oneshot::channel::<()>();
    let config = ControllerConfig {
        controller_name: JOBWARDEN.to_owned(),
        lease_namespace: lease_ns.clone(),
        identity: "differential".to_owned(),
        ..Default::default()
    };
    let clients = ControllerClients::new(
        installed.config(&lease_ns).await,
        JOBWARDEN,
        None,
        config.renew_deadline,
    )
    .expect("the controller's clients");
    let controller = tokio::spawn(jobwarden_controller::run(
        clients,
        config,
        ControllerMetrics::default(),
        async move {
            let _ = stopped.await;
        },
    ));

    let scenarios = scenarios();
    let runs = scenarios.iter().map(|scenario| {
        let (plane, client) = (plane, client.clone());
        async move {
            let side = |ns: String, managed_by| Side {
                client: client.clone(),
                ns,
                managed_by,
            };
            let upstream_ns = plane
                .create_namespace(&client, &format!("up-{}", scenario.name))
                .await;
            let jobwarden_ns = plane
                .create_namespace(&client, &format!("jw-{}", scenario.name))
                .await;
            let (upstream, jobwarden) = tokio::join!(
                run(side(upstream_ns, None), scenario),
                run(side(jobwarden_ns, Some(JOBWARDEN)), scenario),
            );
            (scenario.name, upstream, jobwarden)
        }
    });
    let results = futures::future::join_all(runs).await;
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(30), controller).await;
    installed.assert_nothing_refused();

    let mut report = Vec::new();
    for (name, upstream, jobwarden) in &results {
        let found = differences(upstream, jobwarden);
        let want = intended(name);
        for d in found.iter().filter(|d| !want.contains(d)) {
            report.push(format!(
                "{name}: {}: upstream {:?}, jobwarden {:?} (not an intended difference)",
                d.0, d.1, d.2
            ));
        }
        for d in want.iter().filter(|d| !found.contains(d)) {
            report.push(format!(
                "{name}: {}: the intended difference (upstream {:?}, jobwarden {:?}) did not show",
                d.0, d.1, d.2
            ));
        }
    }
    let shown: Vec<String> = results
        .iter()
        .map(|(name, upstream, _)| format!("{name}: {upstream:?}"))
        .collect();
    assert!(
        report.is_empty(),
        "{}\n\nupstream's side:\n{}",
        report.join("\n"),
        shown.join("\n")
    );
}
