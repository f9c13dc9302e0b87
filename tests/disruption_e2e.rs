//! The controller disrupted mid-run on a real kube-apiserver, as a platform team disrupts it:
//! the built binary's `serve --no-webhook` as one or two real processes (each its own
//! `HOSTNAME`, so its own identity in the Lease), SIGKILLed and restarted, SIGKILLed or
//! SIGTERMed beside a standby, or cut off from the API server by a TCP proxy in the test. The
//! test plays the kubelet: a pod runs as soon as it appears and succeeds a second later.
//!
//! Each run is an Indexed Job of 12 indexes, 3 at a time, disrupted once 5 indexes are counted
//! (`JOBWARDEN_DISRUPTION_SCALE=issue` runs issue 21's 40 indexes, 10 at a time, disrupted
//! after 19).
//! After any disruption: no index has two succeeded pods, 12 pods were made (an undisturbed
//! run's count), the final status is an undisturbed run's; a SIGTERMed leader's standby leads
//! within 3 s; a leader cut off longer than its renew deadline says so (gauge 0) before its
//! Lease expires, and leads again within seconds of the API server's return.
//!
//! Each process runs as a cluster runs it: under the ServiceAccount and RBAC `kubectl kustomize
//! deploy/` installs (its Lease's Role granted in the test's namespace), its metrics over HTTPS
//! read with a token bound to the metrics reader role; a run ends by checking that
//! kube-apiserver refused it nothing.
//!
//! It runs on the test binary's own control plane (`jobwarden-envtest`) and is skipped with one
//! line when the binaries are absent; with `JOBWARDEN_E2E_KUBECONFIG` (a cluster elsewhere)
//! it runs there too, but for the cut-off test, which needs the API server on this machine.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use jobwarden_envtest::{ControlPlane, Installed, ServingCertificate};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::Kubeconfig;
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const TIMEOUT: Duration = Duration::from_secs(180);

/// The Job: 12 indexes, 3 at a time, disrupted once 5 are counted; with
/// `JOBWARDEN_DISRUPTION_SCALE=issue`, issue 21's own 40 indexes, 10 at a time, disrupted after
/// 19 (the figures in docs/operations.md were measured so).
#[derive(Debug, Clone, Copy)]
struct Shape {
    completions: usize,
    parallelism: usize,
    disrupt_after: i32,
}

fn shape() -> Shape {
    match std::env::var("JOBWARDEN_DISRUPTION_SCALE").as_deref() {
        Ok("issue") => Shape {
            completions: 40,
            parallelism: 10,
            disrupt_after: 19,
        },
        _ => Shape {
            completions: 12,
            parallelism: 3,
            disrupt_after: 5,
        },
    }
}

/// Waits until the disruption point: `disrupt_after` indexes counted.
async fn wait_disruption_point(env: &Env) {
    let after = shape().disrupt_after;
    env.wait_job(&format!("{after} indexes counted"), |j| {
        succeeded(j) >= after
    })
    .await;
}
const LEASE: &str = "jobwarden-job-controller";
const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
const FINALIZER: &str = "jobwarden.io/job-tracking";

/// One `jobwarden serve --no-webhook` process; SIGKILLed when dropped.
struct Replica {
    child: Child,
    identity: String,
    metrics_port: u16,
    /// What /metrics is read with: the serving CA, and a token bound to the reader role.
    ca_pem: String,
    reader_token: String,
    log: PathBuf,
}

impl Replica {
    fn start(env: &Env, identity: &str, kubeconfig: &Path) -> Replica {
        let metrics_port = jobwarden_envtest::free_port().expect("a free port");
        let stamp = Instant::now().duration_since(env.started).as_millis();
        let log = env.dir.join(format!("{identity}-{stamp}.log"));
        let file = std::fs::File::create(&log).expect("the log file");
        let child = Command::new(env!("CARGO_BIN_EXE_jobwarden"))
            .args(["serve", "--no-webhook", "--audit-interval-seconds", "0"])
            .arg("--metrics-listen")
            .arg(format!("127.0.0.1:{metrics_port}"))
            .arg("--tls-cert")
            .arg(&env.certificate.cert)
            .arg("--tls-key")
            .arg(&env.certificate.key)
            .arg("--controller-name")
            .arg(&env.controller)
            .env("KUBECONFIG", kubeconfig)
            .env("HOSTNAME", identity)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("jobwarden starts");
        Replica {
            child,
            identity: identity.to_owned(),
            metrics_port,
            ca_pem: env.certificate.ca_pem.clone(),
            reader_token: env.reader_token.clone(),
            log,
        }
    }

    /// `jobwarden_controller_leader`, `None` while /metrics cannot be read.
    async fn leader_gauge(&self) -> Option<i64> {
        let (port, ca, token) = (
            self.metrics_port,
            self.ca_pem.clone(),
            self.reader_token.clone(),
        );
        let text = tokio::task::spawn_blocking(move || {
            jobwarden_envtest::https_get(port, "/metrics", &ca, Some(&token))
        })
        .await
        .ok()??;
        text.lines()
            .find_map(|l| l.strip_prefix("jobwarden_controller_leader "))
            .and_then(|v| v.trim().parse().ok())
    }

    /// Waits until the gauge reads `leading`; returns when it was first seen so.
    async fn wait_gauge(&self, leading: i64, within: Duration) -> Instant {
        let deadline = Instant::now() + within;
        loop {
            if self.leader_gauge().await == Some(leading) {
                return Instant::now();
            }
            assert!(
                Instant::now() < deadline,
                "{}: the leader gauge never read {leading} within {within:?}; its log:\n{}",
                self.identity,
                self.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("a pid");
        // SAFETY: kill(2) on our own child's pid, which has not been waited for yet.
        let sent = unsafe { libc::kill(pid, signal) };
        assert_eq!(sent, 0, "signal {signal} sent to {}", self.identity);
    }

    /// Waits for the process to exit, and says whether it exited 0.
    async fn exited(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("the child's status") {
                return status.success();
            }
            assert!(
                Instant::now() < deadline,
                "{} did not exit within {within:?}",
                self.identity
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP proxy between a replica and the API server that can be cut (open connections are
/// dropped, new ones are accepted and hang: requests get no answer, as on a dead network) and
/// restored (the hanging connections are dropped, new ones go through).
struct Proxy {
    port: u16,
    cut: Arc<AtomicBool>,
    /// Bumped on every cut and restore: connections opened before it are dropped.
    epoch: watch::Sender<u64>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(target: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a proxy port");
        let port = listener.local_addr().expect("bound").port();
        let cut = Arc::new(AtomicBool::new(false));
        let epoch = watch::Sender::new(0u64);
        let accept = tokio::spawn({
            let (cut, epoch) = (cut.clone(), epoch.clone());
            async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    let mut changed = epoch.subscribe();
                    let (cut, target) = (cut.clone(), target.clone());
                    tokio::spawn(async move {
                        if cut.load(Ordering::SeqCst) {
                            // Held without an answer until the next cut or restore.
                            let _ = changed.changed().await;
                            return;
                        }
                        let Ok(mut outbound) = TcpStream::connect(&target).await else {
                            return;
                        };
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                            _ = changed.changed() => {}
                        }
                    });
                }
            }
        });
        Proxy {
            port,
            cut,
            epoch,
            accept,
        }
    }

    fn set_cut(&self, cut: bool) {
        self.cut.store(cut, Ordering::SeqCst);
        self.epoch.send_modify(|e| *e += 1);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.epoch.send_modify(|e| *e += 1);
    }
}

struct Env {
    plane: &'static ControlPlane,
    /// The admin's client, for the test's own reads and writes.
    client: Client,
    /// What jobwarden runs as.
    identity: Installed,
    certificate: ServingCertificate,
    reader_token: String,
    ns: String,
    controller: String,
    dir: PathBuf,
    started: Instant,
}

impl Env {
    async fn new(scenario: &str) -> Option<Env> {
        let plane = ControlPlane::shared()?;
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
    fn kubeconfig(&self, proxy_port: Option<u16>) -> PathBuf {
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
    fn api_server(&self) -> String {
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

    fn jobs(&self) -> Api<Job> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    async fn create_job(&self) {
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

    async fn wait_job(&self, what: &str, f: impl Fn(&Job) -> bool) -> Job {
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

    async fn lease(&self) -> Lease {
        Api::<Lease>::namespaced(self.client.clone(), &self.ns)
            .get(LEASE)
            .await
            .expect("the Lease")
    }

    /// The kubelet's part for every pod of the namespace: running as soon as it is seen,
    /// succeeded a second later; a deleted pod is killed (exit 143).
    fn kubelet(&self) -> tokio::task::JoinHandle<()> {
        let pods = self.pods();
        tokio::spawn(async move {
            let mut running: HashMap<String, Instant> = HashMap::new();
            loop {
                if let Ok(list) = pods.list(&ListParams::default()).await {
                    for pod in list.items {
                        step(&pods, &pod, &mut running).await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    }

    async fn teardown(self, replicas: Vec<Replica>) {
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

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

async fn step(pods: &Api<Pod>, pod: &Pod, running: &mut HashMap<String, Instant>) {
    let (name, uid) = (pod.name_any(), pod.uid().unwrap_or_default());
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let end = |code: i32| {
        json!({"status": {
            "phase": if code == 0 { "Succeeded" } else { "Failed" },
            "containerStatuses": [{
                "name": "main", "image": "busybox", "imageID": "", "ready": false,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": code, "startedAt": now, "finishedAt": now}},
            }],
        }})
    };
    let patch = match phase(pod) {
        "Succeeded" | "Failed" => return,
        _ if pod.metadata.deletion_timestamp.is_some() => end(143),
        "Running"
            if running
                .get(&uid)
                .is_some_and(|t| t.elapsed() >= Duration::from_secs(1)) =>
        {
            end(0)
        }
        "Running" => {
            running.entry(uid).or_insert_with(Instant::now);
            return;
        }
        _ => {
            running.insert(uid, Instant::now());
            json!({"status": {"phase": "Running", "startTime": now}})
        }
    };
    // A pod deleted meanwhile is no longer the kubelet's business.
    let _ = pods
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await;
}

fn succeeded(job: &Job) -> i32 {
    job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0)
}

fn complete(job: &Job) -> bool {
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
struct Ending {
    pods: usize,
    succeeded_per_index: Vec<usize>,
    succeeded: i32,
    completed_indexes: String,
    conditions: Vec<(String, String)>,
}

async fn ending(env: &Env) -> Ending {
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
            && phase(p) == "Succeeded"
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
fn undisturbed() -> Ending {
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

fn unrecorded_succeeded(pods: &[Pod]) -> usize {
    pods.iter()
        .filter(|p| phase(p) == "Succeeded")
        .filter(|p| p.finalizers().iter().any(|f| f == FINALIZER))
        .count()
}

/// A run under way: the replicas (the first leading, the others standing by), the Job created
/// and the kubelet playing.
struct Run {
    env: Env,
    replicas: Vec<Replica>,
    kubelet: tokio::task::JoinHandle<()>,
}

impl Run {
    /// Starts `identities` through `kubeconfig`, the first as the leader, and the Job.
    async fn start(env: Env, identities: &[&str], kubeconfig: &Path) -> Run {
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
    async fn finish(self) {
        assert_eq!(ending(&self.env).await, undisturbed());
        self.kubelet.abort();
        self.env.teardown(self.replicas).await;
    }
}

#[tokio::test]
async fn an_undisturbed_run_makes_one_pod_per_index() {
    let Some(env) = Env::new("calm").await else {
        return;
    };
    let kubeconfig = env.kubeconfig(None);
    Run::start(env, &["calm-a"], &kubeconfig)
        .await
        .finish()
        .await;
}

#[tokio::test]
async fn sigkill_and_restart_runs_no_index_twice() {
    let Some(env) = Env::new("kill-restart").await else {
        return;
    };
    let kubeconfig = env.kubeconfig(None);
    let mut run = Run::start(env, &["restarting"], &kubeconfig).await;
    wait_disruption_point(&run.env).await;
    run.replicas.clear(); // SIGKILL
    // Restarted 5 s later, as a container is; the kubelet goes on meanwhile. The pause is
    // the scenario, not a wait for something.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let pods = run
        .env
        .pods()
        .list(&ListParams::default())
        .await
        .expect("pods");
    assert!(
        unrecorded_succeeded(&pods.items) > 0,
        "pods finished while no controller ran"
    );
    // The same pod, so the same HOSTNAME: it renews its own Lease at once.
    let restarted = Instant::now();
    let a = Replica::start(&run.env, "restarting", &kubeconfig);
    let took = a.wait_gauge(1, Duration::from_secs(10)).await - restarted;
    eprintln!("SIGKILLed and restarted: leading {took:?} after the restart");
    run.replicas.push(a);
    run.finish().await;
}

#[tokio::test]
async fn a_sigkilled_leader_s_standby_runs_no_index_twice() {
    let Some(env) = Env::new("kill-leader").await else {
        return;
    };
    let kubeconfig = env.kubeconfig(None);
    let mut run = Run::start(env, &["killed-a", "killed-b"], &kubeconfig).await;
    wait_disruption_point(&run.env).await;
    let killed = Instant::now();
    run.replicas.remove(0); // SIGKILL: no release; the standby waits out the 15 s Lease.
    let took = run.replicas[0].wait_gauge(1, Duration::from_secs(30)).await - killed;
    eprintln!("SIGKILLed leader: the standby led {took:?} after the kill");
    assert!(took <= Duration::from_secs(20), "{took:?}");
    run.finish().await;
}

#[tokio::test]
async fn a_sigtermed_leader_hands_over_within_3_s_and_no_index_runs_twice() {
    let Some(env) = Env::new("term-leader").await else {
        return;
    };
    let kubeconfig = env.kubeconfig(None);
    let mut run = Run::start(env, &["termed-a", "termed-b"], &kubeconfig).await;
    wait_disruption_point(&run.env).await;
    let termed = Instant::now();
    run.replicas[0].signal(libc::SIGTERM);
    let took = run.replicas[1].wait_gauge(1, Duration::from_secs(10)).await - termed;
    eprintln!("SIGTERMed leader: the standby led {took:?} after the signal");
    assert!(took <= Duration::from_secs(3), "hand-over took {took:?}");
    assert!(
        run.replicas[0].exited(Duration::from_secs(20)).await,
        "a exits 0 on SIGTERM"
    );
    let spec = run.env.lease().await.spec.unwrap_or_default();
    assert_eq!(spec.holder_identity.as_deref(), Some("termed-b"));
    run.finish().await;
}

#[tokio::test]
async fn a_leader_cut_off_steps_down_before_its_lease_expires_and_leads_again() {
    let Some(env) = Env::new("cut-off").await else {
        return;
    };
    if std::env::var_os("JOBWARDEN_E2E_KUBECONFIG").is_some() {
        eprintln!("skipped: the proxy needs the API server on this machine");
        return;
    }
    let proxy = Proxy::start(env.api_server()).await;
    let kubeconfig = env.kubeconfig(Some(proxy.port));
    let run = Run::start(env, &["cut-a"], &kubeconfig).await;
    let a = &run.replicas[0];
    wait_disruption_point(&run.env).await;

    proxy.set_cut(true);
    let cut = Instant::now();
    let stepped_down = a.wait_gauge(0, Duration::from_secs(15)).await;
    // The Lease as the API server holds it: the last renewal before the cut.
    let spec = run.env.lease().await.spec.unwrap_or_default();
    assert_eq!(spec.holder_identity.as_deref(), Some("cut-a"));
    let renewed = spec.renew_time.expect("renewed").0;
    let expires = renewed
        .checked_add(Duration::from_secs(
            spec.lease_duration_seconds.unwrap_or(0).max(0) as u64,
        ))
        .expect("a time");
    let margin = expires.duration_since(k8s_openapi::jiff::Timestamp::now());
    eprintln!(
        "cut off: the leader stepped down {:?} after the cut, {margin:#} before its Lease expired",
        stepped_down - cut
    );
    assert!(
        margin.is_positive(),
        "stepped down before the Lease expired"
    );

    // Out for longer than the Lease; pods finish meanwhile, unrecorded.
    tokio::time::sleep(Duration::from_secs(20).saturating_sub(cut.elapsed())).await;
    assert_eq!(
        a.leader_gauge().await,
        Some(0),
        "still not leading while cut off"
    );
    proxy.set_cut(false);
    let back = Instant::now();
    let leads = a.wait_gauge(1, Duration::from_secs(15)).await - back;
    eprintln!("cut off: led again {leads:?} after the API server came back");
    assert!(leads <= Duration::from_secs(5), "{leads:?}");
    run.finish().await;
}
