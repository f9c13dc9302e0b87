//! End-to-end tests of the reconcile loop against a real cluster, playing the kubelet the way
//! upstream's integration tests do: pods are never scheduled (an unknown `schedulerName`), and
//! the test patches their phase and container exit codes itself.
//!
//! Run them with a kubeconfig for a disposable cluster, Kubernetes 1.32 or newer (for
//! `spec.managedBy`), e.g. a kind cluster:
//!
//! ```sh
//! kind create cluster --name jobwarden-e2e
//! kind get kubeconfig --name jobwarden-e2e > /tmp/e2e.kubeconfig
//! JOBWARDEN_E2E_KUBECONFIG=/tmp/e2e.kubeconfig cargo test -p jobwarden-controller --test e2e
//! ```
//!
//! Without `JOBWARDEN_E2E_KUBECONFIG` every test prints a skip message and passes. Each test
//! makes its own namespace and runs its own controller under its own controller name, so the
//! tests run in parallel without touching each other's Jobs; the namespaces are deleted at the
//! end.

use std::time::Duration;

use jobwarden_controller::{ControllerConfig, ControllerMetrics};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const TIMEOUT: Duration = Duration::from_secs(90);

struct Env {
    client: Client,
    ns: String,
    controller: String,
    metrics: ControllerMetrics,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<anyhow::Result<()>>>,
}

async fn setup(scenario: &str) -> Option<Env> {
    let Ok(path) = std::env::var("JOBWARDEN_E2E_KUBECONFIG") else {
        eprintln!("skipping {scenario}: JOBWARDEN_E2E_KUBECONFIG is not set");
        return None;
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kubeconfig = Kubeconfig::read_from(path).expect("the kubeconfig reads");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("the kubeconfig is usable");
    let client = Client::try_from(config).expect("a client");
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() % 1_000_000)
        .unwrap_or(0);
    let ns = format!("jobwarden-e2e-{scenario}-{stamp}");
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": ns}})).expect("namespace");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("the namespace is created");
    let controller = format!("jobwarden.io/e2e-{scenario}");
    let config = ControllerConfig {
        controller_name: controller.clone(),
        lease_namespace: ns.clone(),
        lease_name: "jobwarden-e2e".to_owned(),
        identity: format!("e2e-{scenario}"),
        ..Default::default()
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let metrics = ControllerMetrics::default();
    let task = tokio::spawn(jobwarden_controller::run(
        client.clone(),
        config,
        metrics.clone(),
        async move {
            let _ = stopped.await;
        },
    ));
    Some(Env {
        client,
        ns,
        controller,
        metrics,
        stop: Some(stop),
        task: Some(task),
    })
}

impl Env {
    fn jobs(&self) -> Api<Job> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// A Job whose pods never get scheduled, delegated to this test's controller.
    fn job(&self, name: &str, spec: Value) -> Job {
        let mut job = json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name},
            "spec": {
                "managedBy": self.controller,
                "template": {"spec": {
                    "schedulerName": "jobwarden-e2e-nobody",
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox"}],
                }},
            },
        });
        if let (Some(target), Some(extra)) = (job["spec"].as_object_mut(), spec.as_object()) {
            for (k, v) in extra {
                target.insert(k.clone(), v.clone());
            }
        }
        serde_json::from_value(job).expect("test Job")
    }

    async fn create(&self, job: &Job) -> Job {
        self.jobs()
            .create(&PostParams::default(), job)
            .await
            .expect("the Job is created")
    }

    async fn job_pods(&self, name: &str) -> Vec<Pod> {
        let job = self.jobs().get(name).await.expect("the Job exists");
        let uid = job.uid().unwrap_or_default();
        self.pods()
            .list(
                &ListParams::default().labels(&format!("batch.kubernetes.io/controller-uid={uid}")),
            )
            .await
            .expect("pods list")
            .items
    }

    /// Waits until `f` holds for the Job, returning it.
    async fn wait_job(&self, name: &str, what: &str, f: impl Fn(&Job) -> bool) -> Job {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let job = self.jobs().get(name).await.expect("the Job exists");
            if f(&job) {
                return job;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}: {:?}",
                job.status
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Waits until the Job has exactly `n` active (not terminal, not deleted) pods.
    async fn wait_active_pods(&self, name: &str, n: usize) -> Vec<Pod> {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let active: Vec<Pod> = self
                .job_pods(name)
                .await
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none() && !terminal(p))
                .collect();
            if active.len() == n {
                return active;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {n} active pods, have {}",
                active.len()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The kubelet's part: the pod runs, then its container exits with `code`.
    async fn finish_pod(&self, pod: &Pod, code: i32) {
        let name = pod.name_any();
        let running = json!({"status": {"phase": "Running"}});
        self.pods()
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&running))
            .await
            .expect("the pod runs");
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let phase = if code == 0 { "Succeeded" } else { "Failed" };
        let done = json!({"status": {
            "phase": phase,
            "containerStatuses": [{
                "name": "main", "image": "busybox", "imageID": "", "ready": false,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": code, "startedAt": now, "finishedAt": now}},
            }],
        }});
        self.pods()
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&done))
            .await
            .expect("the pod ends");
    }

    async fn no_finalizers_left(&self, name: &str) {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let held = self
                .job_pods(name)
                .await
                .iter()
                .filter(|p| {
                    p.finalizers()
                        .iter()
                        .any(|f| f == "jobwarden.io/job-tracking")
                })
                .count();
            if held == 0 {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "pods keep the finalizer"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn teardown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let result = tokio::time::timeout(Duration::from_secs(30), task).await;
            assert!(
                matches!(result, Ok(Ok(Ok(())))),
                "the controller stopped and released its Lease: {result:?}"
            );
        }
        let _ = Api::<Namespace>::all(self.client.clone())
            .delete(&self.ns, &DeleteParams::default())
            .await;
    }
}

/// A status counter as the API server returns it: `active`, `succeeded` and `failed` are Go
/// `int32`s with `omitempty`, so a zero is not there at all.
fn counter(v: Option<i32>) -> i32 {
    v.unwrap_or(0)
}

fn terminal(p: &Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn condition(job: &Job, type_: &str) -> Option<(String, String)> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

fn is_true(job: &Job, type_: &str) -> bool {
    condition(job, type_).is_some_and(|(s, _)| s == "True")
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.annotations().get(key).map(String::as_str)
}

#[tokio::test]
async fn non_indexed_job_runs_to_completion() {
    let Some(env) = setup("nonindexed").await else {
        return;
    };
    env.create(&env.job("work", json!({"completions": 3, "parallelism": 2})))
        .await;
    let first = env.wait_active_pods("work", 2).await;
    for pod in &first {
        assert!(
            pod.finalizers()
                .iter()
                .any(|f| f == "jobwarden.io/job-tracking")
        );
        env.finish_pod(pod, 0).await;
    }
    let last = env.wait_active_pods("work", 1).await;
    env.finish_pod(&last[0], 0).await;
    let job = env
        .wait_job("work", "Complete", |j| is_true(j, "Complete"))
        .await;
    let status = job.status.clone().unwrap_or_default();
    assert_eq!(counter(status.succeeded), 3);
    assert!(is_true(&job, "SuccessCriteriaMet"));
    assert!(status.completion_time.is_some() && status.start_time.is_some());
    env.no_finalizers_left("work").await;
    env.teardown().await;
}

#[tokio::test]
async fn indexed_job_runs_to_completion() {
    let Some(env) = setup("indexed").await else {
        return;
    };
    env.create(&env.job(
        "idx",
        json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed"}),
    ))
    .await;
    let pods = env.wait_active_pods("idx", 3).await;
    let mut indexes: Vec<String> = pods
        .iter()
        .filter_map(|p| {
            annotation(p, "batch.kubernetes.io/job-completion-index").map(str::to_owned)
        })
        .collect();
    indexes.sort();
    assert_eq!(indexes, ["0", "1", "2"]);
    for pod in &pods {
        let index = annotation(pod, "batch.kubernetes.io/job-completion-index").unwrap_or("");
        let hostname = pod.spec.as_ref().and_then(|s| s.hostname.clone());
        assert_eq!(hostname, Some(format!("idx-{index}")));
        assert_eq!(
            pod.labels()
                .get("batch.kubernetes.io/job-completion-index")
                .map(String::as_str),
            Some(index)
        );
        // As upstream's addCompletionIndexEnvVariable: read from the label.
        let index_env = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.env.as_ref())
            .and_then(|env| env.iter().find(|e| e.name == "JOB_COMPLETION_INDEX"))
            .and_then(|e| e.value_from.as_ref())
            .and_then(|v| v.field_ref.as_ref())
            .map(|f| f.field_path.clone());
        assert_eq!(
            index_env.as_deref(),
            Some("metadata.labels['batch.kubernetes.io/job-completion-index']")
        );
        env.finish_pod(pod, 0).await;
    }
    let job = env
        .wait_job("idx", "Complete", |j| is_true(j, "Complete"))
        .await;
    let status = job.status.clone().unwrap_or_default();
    assert_eq!(status.completed_indexes.as_deref(), Some("0-2"));
    assert_eq!(counter(status.succeeded), 3);
    env.no_finalizers_left("idx").await;
    env.teardown().await;
}

#[tokio::test]
async fn backoff_limit_exceeded_fails_the_job() {
    let Some(env) = setup("backoff").await else {
        return;
    };
    env.create(&env.job(
        "doomed",
        json!({"completions": 2, "parallelism": 2, "backoffLimit": 0}),
    ))
    .await;
    let pods = env.wait_active_pods("doomed", 2).await;
    env.finish_pod(&pods[0], 1).await;
    let job = env
        .wait_job("doomed", "Failed", |j| is_true(j, "Failed"))
        .await;
    assert_eq!(
        condition(&job, "FailureTarget"),
        Some(("True".to_owned(), "BackoffLimitExceeded".to_owned()))
    );
    assert_eq!(
        condition(&job, "Failed"),
        Some(("True".to_owned(), "BackoffLimitExceeded".to_owned()))
    );
    let status = job.status.clone().unwrap_or_default();
    assert_eq!(counter(status.active), 0);
    assert_eq!(status.completion_time, None);
    // The failed pod, and the running one deleted with the Job's failure.
    assert_eq!(counter(status.failed), 2);
    env.no_finalizers_left("doomed").await;
    env.teardown().await;
}

#[tokio::test]
async fn suspend_then_resume() {
    let Some(env) = setup("suspend").await else {
        return;
    };
    env.create(&env.job("pausable", json!({"completions": 2, "parallelism": 2})))
        .await;
    let pods = env.wait_active_pods("pausable", 2).await;
    env.finish_pod(&pods[0], 0).await;
    env.wait_job("pausable", "one success counted", |j| {
        counter(j.status.as_ref().and_then(|s| s.succeeded)) == 1
    })
    .await;

    let suspend = json!({"spec": {"suspend": true}});
    env.jobs()
        .patch("pausable", &PatchParams::default(), &Patch::Merge(&suspend))
        .await
        .expect("suspended");
    let job = env
        .wait_job("pausable", "Suspended=True", |j| is_true(j, "Suspended"))
        .await;
    assert_eq!(
        condition(&job, "Suspended").map(|c| c.1),
        Some("JobSuspended".to_owned())
    );
    // Upstream clears startTime in the write that sets Suspended=True (v1.36's
    // MutableSchedulingDirectivesForSuspendedJobs), so the same Job object shows both.
    assert_eq!(
        job.status.as_ref().and_then(|s| s.start_time.clone()),
        None,
        "startTime is cleared with Suspended=True"
    );
    env.wait_active_pods("pausable", 0).await;

    let resume = json!({"spec": {"suspend": false}});
    env.jobs()
        .patch("pausable", &PatchParams::default(), &Patch::Merge(&resume))
        .await
        .expect("resumed");
    let job = env
        .wait_job("pausable", "Suspended=False", |j| {
            condition(j, "Suspended").is_some_and(|(s, _)| s == "False")
        })
        .await;
    assert_eq!(
        condition(&job, "Suspended").map(|c| c.1),
        Some("JobResumed".to_owned())
    );
    assert!(
        job.status
            .as_ref()
            .and_then(|s| s.start_time.clone())
            .is_some(),
        "startTime is set again on resume"
    );
    // The success before the suspension still counts: one pod is left to run.
    let pods = env.wait_active_pods("pausable", 1).await;
    env.finish_pod(&pods[0], 0).await;
    let job = env
        .wait_job("pausable", "Complete", |j| is_true(j, "Complete"))
        .await;
    assert_eq!(counter(job.status.and_then(|s| s.succeeded)), 2);
    env.teardown().await;
}

#[tokio::test]
async fn a_job_not_delegated_to_this_controller_is_left_alone() {
    let Some(env) = setup("foreign").await else {
        return;
    };
    let mut job = env.job("theirs", json!({"completions": 1, "parallelism": 1}));
    if let Some(spec) = job.spec.as_mut() {
        spec.managed_by = Some("example.com/someone-else".to_owned());
    }
    env.create(&job).await;
    // One Job watch delivers every Job in resourceVersion order: once a Job of its own,
    // created afterwards, has its pod, the controller has gone past the foreign one.
    env.create(&env.job("ours", json!({"completions": 1, "parallelism": 1})))
        .await;
    env.wait_active_pods("ours", 1).await;
    assert!(
        env.metrics.foreign_jobs_seen.get() > 0,
        "the foreign Job was seen and counted"
    );
    let job = env.jobs().get("theirs").await.expect("the Job exists");
    assert!(
        env.job_pods("theirs").await.is_empty(),
        "no pod was created"
    );
    let status = job.status.unwrap_or_default();
    assert_eq!(status.start_time, None);
    assert_eq!(status.conditions, None);
    assert_eq!(counter(status.active), 0);
    env.teardown().await;
}

fn index_of(pod: &Pod) -> Option<i32> {
    annotation(pod, "batch.kubernetes.io/job-completion-index").and_then(|i| i.parse().ok())
}

fn message(job: &Job, type_: &str) -> Option<String> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .and_then(|c| c.message.clone())
}

/// Runs a KEP-3998 story: `finish` lists the indexes whose pods succeed; the Job must meet
/// its success criteria by rule `rule`, delete the rest and end `Complete`.
async fn success_policy_story(scenario: &str, rules: Value, finish: &[i32], rule: usize) {
    let Some(env) = setup(scenario).await else {
        return;
    };
    env.create(&env.job(
        "sim",
        json!({"completions": 10, "parallelism": 10, "completionMode": "Indexed",
               "successPolicy": {"rules": rules}}),
    ))
    .await;
    let pods = env.wait_active_pods("sim", 10).await;
    for pod in pods
        .iter()
        .filter(|p| index_of(p).is_some_and(|i| finish.contains(&i)))
    {
        env.finish_pod(pod, 0).await;
    }
    let job = env
        .wait_job("sim", "SuccessCriteriaMet", |j| {
            is_true(j, "SuccessCriteriaMet")
        })
        .await;
    assert_eq!(
        condition(&job, "SuccessCriteriaMet").map(|c| c.1),
        Some("SuccessPolicy".to_owned())
    );
    let want = format!("Matched rules at index {rule}");
    assert_eq!(message(&job, "SuccessCriteriaMet"), Some(want.clone()));
    // The lingering pods are deleted, and only then is the Job Complete.
    let job = env
        .wait_job("sim", "Complete", |j| is_true(j, "Complete"))
        .await;
    assert_eq!(
        condition(&job, "Complete"),
        Some(("True".to_owned(), "SuccessPolicy".to_owned()))
    );
    assert_eq!(message(&job, "Complete"), Some(want));
    let status = job.status.clone().unwrap_or_default();
    assert_eq!(counter(status.active), 0);
    assert_eq!(counter(status.succeeded), count(finish.len()));
    assert!(status.completion_time.is_some());
    assert!(!is_true(&job, "Failed"));
    env.wait_active_pods("sim", 0).await;
    env.no_finalizers_left("sim").await;
    env.teardown().await;
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

#[tokio::test]
async fn success_policy_story_1_the_leader_decides() {
    success_policy_story("leader", json!([{"succeededIndexes": "0"}]), &[0], 0).await;
}

#[tokio::test]
async fn success_policy_story_2_leader_or_five_workers() {
    let rules = json!([
        {"succeededIndexes": "0", "succeededCount": 1},
        {"succeededIndexes": "1-9", "succeededCount": 5},
    ]);
    success_policy_story("workers", rules, &[1, 2, 3, 4, 5], 1).await;
}

/// Runs a KEP-4443 story: the one pod exits with `code`, and the Job must fail with `reason`.
async fn named_rule_story(scenario: &str, names: Value, code: i32, reason: &str, rule: usize) {
    let Some(env) = setup(scenario).await else {
        return;
    };
    let rule_for = |c: i32| {
        json!({"action": "FailJob",
               "onExitCodes": {"containerName": "main", "operator": "In", "values": [c]}})
    };
    let mut job = env.job(
        "sim",
        json!({"completions": 1, "parallelism": 1, "backoffLimit": 0,
               "podFailurePolicy": {"rules": [rule_for(2), rule_for(3)]}}),
    );
    job.metadata.annotations = Some(
        [(
            "jobwarden.io/pod-failure-policy-rule-names".to_owned(),
            names.to_string(),
        )]
        .into(),
    );
    env.create(&job).await;
    let pods = env.wait_active_pods("sim", 1).await;
    env.finish_pod(&pods[0], code).await;
    let job = env
        .wait_job("sim", "Failed", |j| is_true(j, "Failed"))
        .await;
    let want = Some(("True".to_owned(), reason.to_owned()));
    assert_eq!(condition(&job, "FailureTarget"), want);
    assert_eq!(condition(&job, "Failed"), want);
    let expected_message = format!(
        "Container main for pod {}/{} failed with exit code {code} matching FailJob rule at index {rule}",
        env.ns,
        pods[0].name_any()
    );
    assert_eq!(message(&job, "Failed"), Some(expected_message));
    let status = job.status.clone().unwrap_or_default();
    assert_eq!(counter(status.failed), 1);
    assert_eq!(status.completion_time, None);
    env.no_finalizers_left("sim").await;
    env.teardown().await;
}

#[tokio::test]
async fn named_rule_exit_code_2() {
    let names = json!(["ExitCode2", "ExitCode3"]);
    named_rule_story("exitcode2", names, 2, "PodFailurePolicy_ExitCode2", 0).await;
}

#[tokio::test]
async fn named_rule_exit_code_3() {
    let names = json!(["ExitCode2", "ExitCode3"]);
    named_rule_story("exitcode3", names, 3, "PodFailurePolicy_ExitCode3", 1).await;
}

#[tokio::test]
async fn unnamed_rule_is_named_by_its_index() {
    let names = json!(["ExitCode2", null]);
    named_rule_story("unnamed", names, 3, "PodFailurePolicy_1", 1).await;
}

#[tokio::test]
async fn backoff_limit_per_index_fails_an_index_not_the_job() {
    let Some(env) = setup("perindex").await else {
        return;
    };
    env.create(&env.job(
        "idx",
        json!({"completions": 2, "parallelism": 2, "completionMode": "Indexed",
               "backoffLimitPerIndex": 0}),
    ))
    .await;
    let pods = env.wait_active_pods("idx", 2).await;
    for pod in &pods {
        let code = if index_of(pod) == Some(1) { 1 } else { 0 };
        env.finish_pod(pod, code).await;
    }
    let job = env
        .wait_job("idx", "Failed", |j| is_true(j, "Failed"))
        .await;
    assert_eq!(
        condition(&job, "Failed"),
        Some(("True".to_owned(), "FailedIndexes".to_owned()))
    );
    assert_eq!(
        message(&job, "Failed"),
        Some("Job has failed indexes".to_owned())
    );
    let status = job.status.clone().unwrap_or_default();
    assert_eq!(status.failed_indexes.as_deref(), Some("1"));
    assert_eq!(status.completed_indexes.as_deref(), Some("0"));
    assert_eq!(counter(status.failed), 1);
    env.no_finalizers_left("idx").await;
    env.teardown().await;
}

#[tokio::test]
async fn a_pod_deleted_while_running_holds_its_replacement_back_after_it_is_gone() {
    let Some(env) = setup("backoffmemory").await else {
        return;
    };
    env.create(&env.job(
        "once",
        json!({"completions": 1, "parallelism": 1, "backoffLimit": 3}),
    ))
    .await;
    let pods = env.wait_active_pods("once", 1).await;
    let running = json!({"status": {"phase": "Running"}});
    env.pods()
        .patch_status(
            &pods[0].name_any(),
            &PatchParams::default(),
            &Patch::Merge(&running),
        )
        .await
        .expect("the pod runs");
    // Deleted while running: it counts as failed, loses its tracking finalizer, and (never
    // scheduled, so no grace period) is gone at once.
    let deleted_at = k8s_openapi::jiff::Timestamp::now();
    env.pods()
        .delete(&pods[0].name_any(), &DeleteParams::default())
        .await
        .expect("deleted");
    env.wait_job("once", "the failure counted", |j| {
        counter(j.status.as_ref().and_then(|s| s.failed)) == 1
    })
    .await;
    let replacement = env.wait_active_pods("once", 1).await;
    let created = replacement[0]
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .expect("a creation time");
    // Upstream's back-off record outlives the pod: no replacement before its 10 s. (The
    // creation time has whole seconds, hence 9.)
    let waited = created.duration_since(deleted_at);
    assert!(waited.as_secs() >= 9, "replaced after {waited:?}");
    env.teardown().await;
}
