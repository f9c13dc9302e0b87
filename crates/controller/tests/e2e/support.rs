//! Each test's own namespace and controller, the kubelet's part, and reading a Job back. The
//! controller runs as a cluster runs it: under the ServiceAccount and RBAC that `kubectl
//! kustomize deploy/` installs (its Lease's Role granted in the test's namespace too), and a
//! test ends by checking that kube-apiserver refused it nothing.

use std::time::Duration;

use jobwarden_controller::{ControllerConfig, ControllerMetrics};
use jobwarden_envtest::{ControlPlane, Installed};
use jobwarden_runtime::client::ControllerClients;
use jobwarden_runtime::leader::SettingsError;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use jobwarden_envtest::delegated_job;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const TIMEOUT: Duration = Duration::from_secs(90);

pub struct Env {
    /// The admin's client: the test's own reads and writes, and the kubelet's part.
    pub client: Client,
    /// What the controller runs as.
    pub identity: Installed,
    pub ns: String,
    pub controller: String,
    pub metrics: ControllerMetrics,
    pub stop: Option<oneshot::Sender<()>>,
    pub task: Option<JoinHandle<Result<(), SettingsError>>>,
}

pub async fn setup(scenario: &str) -> Option<Env> {
    let mut env = setup_without_controller(scenario).await?;
    env.start_controller().await;
    Some(env)
}

/// The namespace and names, the controller not started yet: what is made now is there before
/// it lists anything.
pub async fn setup_without_controller(scenario: &str) -> Option<Env> {
    let plane = ControlPlane::shared()?;
    let client = plane.client().await;
    let ns = plane
        .create_namespace(&client, &format!("jobwarden-e2e-{scenario}"))
        .await;
    let identity = plane.installed_identity().await;
    identity.grant_in(plane, &ns);
    Some(Env {
        client,
        identity,
        ns,
        controller: format!("jobwarden.io/e2e-{scenario}"),
        metrics: ControllerMetrics::default(),
        stop: None,
        task: None,
    })
}

impl Env {
    /// Starts the controller as the installed ServiceAccount, its Lease the install's own
    /// (the name its Role grants) in the test's namespace.
    pub async fn start_controller(&mut self) {
        let config = ControllerConfig {
            controller_name: self.controller.clone(),
            lease_namespace: self.ns.clone(),
            identity: format!("e2e-{}", self.ns),
            ..Default::default()
        };
        let clients = ControllerClients::new(
            self.identity.config(&self.ns).await,
            &config.controller_name,
            None,
            config.renew_deadline,
        )
        .expect("the controller's clients");
        let (stop, stopped) = oneshot::channel::<()>();
        self.task = Some(tokio::spawn(jobwarden_controller::run(
            clients,
            config,
            self.metrics.clone(),
            async move {
                let _ = stopped.await;
            },
        )));
        self.stop = Some(stop);
    }

    pub fn jobs(&self) -> Api<Job> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// A Job whose pods never get scheduled, delegated to this test's controller.
    pub fn job(&self, name: &str, spec: Value) -> Job {
        serde_json::from_value(delegated_job(name, &self.controller, spec)).expect("test Job")
    }

    pub async fn create(&self, job: &Job) -> Job {
        self.jobs()
            .create(&PostParams::default(), job)
            .await
            .expect("the Job is created")
    }

    pub async fn job_pods(&self, name: &str) -> Vec<Pod> {
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
    pub async fn wait_job(&self, name: &str, what: &str, f: impl Fn(&Job) -> bool) -> Job {
        wait_for_job(&self.jobs(), name, what, f).await
    }

    /// Waits until the Job has exactly `n` active (not terminal, not deleted) pods.
    pub async fn wait_active_pods(&self, name: &str, n: usize) -> Vec<Pod> {
        eventually(&format!("{n} active pods"), || async {
            let active = only_active(self.job_pods(name).await);
            if active.len() == n {
                Ok(active)
            } else {
                Err(format!("{} active", active.len()))
            }
        })
        .await
    }

    /// The kubelet's part: the pod runs, then its container exits with `code`.
    pub async fn finish_pod(&self, pod: &Pod, code: i32) {
        run_pod(&self.pods(), &pod.name_any(), Some(code))
            .await
            .expect("the kubelet's status writes");
    }

    pub async fn no_finalizers_left(&self, name: &str) {
        eventually("pods without the finalizer", || async {
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
                Ok(())
            } else {
                Err(format!("{held} pods keep it"))
            }
        })
        .await
    }

    pub async fn teardown(mut self) {
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
        self.identity.assert_nothing_refused();
        let _ = Api::<Namespace>::all(self.client.clone())
            .delete(&self.ns, &DeleteParams::default())
            .await;
    }
}

/// Polls `look` until it answers `Ok`, every 200 ms, for at most [`TIMEOUT`]; then fails
/// with `what` and the last answer. A read that fails (a connection the server closed) is an
/// answer like any other: the next poll reads again.
pub async fn eventually<T, F, Fut>(what: &str, mut look: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        match look().await {
            Ok(found) => return found,
            Err(last) => assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}: {last}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `f` holds for the Job `name`, returning it.
pub async fn wait_for_job(
    jobs: &Api<Job>,
    name: &str,
    what: &str,
    f: impl Fn(&Job) -> bool,
) -> Job {
    eventually(what, || async {
        let job = jobs.get(name).await.map_err(|e| e.to_string())?;
        if f(&job) {
            Ok(job)
        } else {
            Err(format!("{:?}", job.status))
        }
    })
    .await
}

/// The pods neither terminal nor deleted.
pub fn only_active(pods: Vec<Pod>) -> Vec<Pod> {
    pods.into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && !terminal(p))
        .collect()
}

/// The kubelet's part: the pod `name` runs, then, with `Some(code)`, its container exits with
/// `code` (a failure unless 0); with `None` it keeps running.
pub async fn run_pod(pods: &Api<Pod>, name: &str, code: Option<i32>) -> Result<(), kube::Error> {
    let running = json!({"status": {"phase": "Running"}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&running))
        .await?;
    let Some(code) = code else {
        return Ok(());
    };
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let done = json!({"status": {
        "phase": if code == 0 { "Succeeded" } else { "Failed" },
        "containerStatuses": [{
            "name": "main", "image": "busybox", "imageID": "", "ready": false,
            "restartCount": 0,
            "state": {"terminated": {"exitCode": code, "startedAt": now, "finishedAt": now}},
        }],
    }});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&done))
        .await?;
    Ok(())
}

/// A status counter as the API server returns it: `active`, `succeeded` and `failed` are Go
/// `int32`s with `omitempty`, so a zero is not there at all.
pub fn counter(v: Option<i32>) -> i32 {
    v.unwrap_or(0)
}

pub fn terminal(p: &Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

pub fn condition(job: &Job, type_: &str) -> Option<(String, String)> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

pub fn is_true(job: &Job, type_: &str) -> bool {
    condition(job, type_).is_some_and(|(s, _)| s == "True")
}

pub fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.annotations().get(key).map(String::as_str)
}
