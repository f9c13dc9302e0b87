//! A run's world: its namespace, identity and certificate on the control plane, the Job, the
//! kubelet the test plays, and what a run leaves behind compared with an undisturbed run's.

use super::*;
use crate::disruption::processes::Replica;

/// This suite's own plane: its replicas lead through the one Lease of jobwarden's namespace, and one test cuts them off from the API server.
static PLANE: SharedPlane = SharedPlane::new();

pub(crate) struct Env {
    pub(crate) plane: &'static ControlPlane,
    /// The admin's client, for the test's own reads and writes.
    pub(crate) client: Client,
    /// What jobwarden runs as.
    pub(crate) identity: Installed,
    pub(crate) certificate: ServingCertificate,
    pub(crate) reader_token: String,
    pub(crate) ns: String,
    pub(crate) controller: String,
    pub(crate) dir: PathBuf,
    pub(crate) started: Instant,
}

impl Env {
    pub(crate) async fn new(scenario: &str) -> Option<Env> {
        let plane = PLANE.get()?;
        let client = plane.client().await;
        let ns = plane
            .create_namespace(&client, &format!("disrupt-{scenario}"))
            .await;
        let dir = std::env::temp_dir().join(format!("jobwarden-{ns}"));
        std::fs::create_dir_all(&dir).expect("the test's folder");
        let identity = plane.installed_identity().await;
        identity.grant_in(plane, &ns);
        let reader_token = plane.metrics_reader_token(&ns, "prometheus").await;
        Some(Env {
            plane,
            client,
            identity,
            certificate: jobwarden_envtest::serving_certificate(&dir),
            reader_token,
            controller: format!("jobwarden.io/e2e-{scenario}"),
            ns,
            dir,
            started: Instant::now(),
        })
    }

    /// The installed identity's kubeconfig, the test's namespace its context's (so the Lease
    /// lives there), and, when given, the server reached through a proxy on this port.
    pub(crate) fn kubeconfig(&self, proxy_port: Option<u16>) -> PathBuf {
        let mut config = Kubeconfig::read_from(self.identity.kubeconfig(&self.ns))
            .expect("the identity's kubeconfig");
        if let Some(port) = proxy_port {
            for cluster in config
                .clusters
                .iter_mut()
                .filter_map(|c| c.cluster.as_mut())
            {
                cluster.server = Some(format!("https://127.0.0.1:{port}"));
            }
        }
        let path = self
            .dir
            .join(format!("kubeconfig-{}", proxy_port.unwrap_or(0)));
        let text = serde_json::to_string(&config).expect("the kubeconfig as JSON");
        std::fs::write(&path, text).expect("the kubeconfig is written");
        path
    }

    /// `host:port` of the API server.
    pub(crate) fn api_server(&self) -> String {
        let config = Kubeconfig::read_from(self.plane.kubeconfig()).expect("the kubeconfig");
        let server = config
            .clusters
            .iter()
            .find_map(|c| c.cluster.as_ref()?.server.clone())
            .expect("a server");
        server
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .to_owned()
    }

    pub(crate) fn jobs(&self) -> Api<Job> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    pub(crate) fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    pub(crate) async fn create_job(&self) {
        let job: Job = serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "indexed"},
            "spec": {
                "managedBy": self.controller,
                "completions": shape().completions, "parallelism": shape().parallelism,
                "completionMode": "Indexed",
                "template": {"spec": {
                    "schedulerName": "jobwarden-e2e-nobody",
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox"}],
                }},
            },
        }))
        .expect("a Job");
        self.jobs()
            .create(&PostParams::default(), &job)
            .await
            .expect("the Job is created");
    }

    pub(crate) async fn wait_job(&self, what: &str, f: impl Fn(&Job) -> bool) -> Job {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Ok(job) = self.jobs().get("indexed").await
                && f(&job)
            {
                return job;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(crate) async fn lease(&self) -> Lease {
        Api::<Lease>::namespaced(self.client.clone(), &self.ns)
            .get(LEASE)
            .await
            .expect("the Lease")
    }

    /// The kubelet's part for every pod of the namespace: running as soon as it is seen,
    /// succeeded a second later; a deleted pod is killed (exit 143).
    pub(crate) fn kubelet(&self) -> tokio::task::JoinHandle<()> {
        jobwarden_envtest::kubelet(self.pods())
    }

    pub(crate) async fn teardown(self, replicas: Vec<Replica>) {
        for mut r in replicas {
            if r.child.try_wait().ok().flatten().is_none() {
                r.signal(libc::SIGTERM);
                let _ = r.exited(Duration::from_secs(20)).await;
            }
        }
        self.identity.assert_nothing_refused();
        let _ = Api::<Namespace>::all(self.client.clone())
            .delete(&self.ns, &DeleteParams::default())
            .await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) fn succeeded(job: &Job) -> i32 {
    job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0)
}

pub(crate) fn complete(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Complete" && c.status == "True")
        })
}

/// What a run left behind, compared with an undisturbed run's.
#[derive(Debug, PartialEq)]
pub(crate) struct Ending {
    pub(crate) pods: usize,
    pub(crate) succeeded_per_index: Vec<usize>,
    pub(crate) succeeded: i32,
    pub(crate) completed_indexes: String,
    pub(crate) conditions: Vec<(String, String)>,
}

pub(crate) async fn ending(env: &Env) -> Ending {
    let job = env.wait_job("Complete", complete).await;
    let deadline = Instant::now() + TIMEOUT;
    let pods = loop {
        let pods = env.pods().list(&ListParams::default()).await.expect("pods");
        let held = pods
            .items
            .iter()
            .any(|p| p.finalizers().iter().any(|f| f == FINALIZER));
        if !held {
            break pods.items;
        }
        assert!(Instant::now() < deadline, "pods keep the finalizer");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let completions = shape().completions;
    let mut per_index = vec![0; completions];
    for p in &pods {
        let index = p
            .annotations()
            .get(COMPLETION_INDEX)
            .and_then(|i| i.parse::<usize>().ok());
        if let Some(i) = index.filter(|i| *i < completions)
            && pod_phase(p) == "Succeeded"
        {
            per_index[i] += 1;
        }
    }
    let status = job.status.unwrap_or_default();
    Ending {
        pods: pods.len(),
        succeeded_per_index: per_index,
        succeeded: status.succeeded.unwrap_or(0),
        completed_indexes: status.completed_indexes.unwrap_or_default(),
        conditions: status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.type_, c.reason.unwrap_or_default()))
            .collect(),
    }
}

/// An undisturbed run's ending: one pod per index, each succeeded once.
pub(crate) fn undisturbed() -> Ending {
    let completions = shape().completions;
    Ending {
        pods: completions,
        succeeded_per_index: vec![1; completions],
        succeeded: i32::try_from(completions).unwrap_or(i32::MAX),
        completed_indexes: format!("0-{}", completions - 1),
        conditions: vec![
            (
                "SuccessCriteriaMet".to_owned(),
                "CompletionsReached".to_owned(),
            ),
            ("Complete".to_owned(), "CompletionsReached".to_owned()),
        ],
    }
}

pub(crate) fn unrecorded_succeeded(pods: &[Pod]) -> usize {
    pods.iter()
        .filter(|p| pod_phase(p) == "Succeeded")
        .filter(|p| p.finalizers().iter().any(|f| f == FINALIZER))
        .count()
}

/// A run under way: the replicas (the first leading, the others standing by), the Job created
/// and the kubelet playing.
pub(crate) struct Run {
    pub(crate) env: Env,
    pub(crate) replicas: Vec<Replica>,
    pub(crate) kubelet: tokio::task::JoinHandle<()>,
}

impl Run {
    /// Starts `identities` through `kubeconfig`, the first as the leader, and the Job.
    pub(crate) async fn start(env: Env, identities: &[&str], kubeconfig: &Path) -> Run {
        let mut replicas = Vec::new();
        for (i, identity) in identities.iter().enumerate() {
            let replica = Replica::start(&env, identity, kubeconfig);
            replica.wait_gauge(i64::from(i == 0), TIMEOUT).await;
            replicas.push(replica);
        }
        env.create_job().await;
        let kubelet = env.kubelet();
        Run {
            env,
            replicas,
            kubelet,
        }
    }

    /// Runs to the end and checks it is an undisturbed run's.
    pub(crate) async fn finish(self) {
        assert_eq!(ending(&self.env).await, undisturbed());
        self.kubelet.abort();
        self.env.teardown(self.replicas).await;
    }
}
