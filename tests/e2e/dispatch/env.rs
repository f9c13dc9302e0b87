//! The dispatcher's world for this test binary: the shared fleet (a management cluster and two
//! workers, each running upstream's Job controller), the worker side installed on each worker
//! as docs/dispatch.md says (deploy/worker/, a kubeconfig with an expiring token), the
//! kubeconfigs in Secrets of jobwarden's namespace, and two replicas of `jobwarden serve
//! --no-webhook` run as deploy/ installs it, configured only through the policy file, all
//! made by envtest's dispatcher harness (`Fleet::install_dispatcher`, the scale runs' too):
//!
//! ```yaml
//! dispatch:
//!   workerLostSeconds: 20
//!   workers:
//!     - {name: east, kubeconfigSecret: jobwarden-worker-east}
//!     - {name: west, kubeconfigSecret: jobwarden-worker-west}
//!     - {name: plugin, kubeconfigSecret: jobwarden-worker-plugin}   # an exec plugin: refused
//!     - {name: here, local: true, namespaces: {names: [dispatch-local]}}
//! ```
//!
//! Each test has a namespace of its own, of the same name on the three clusters, and plays
//! the kubelet on both workers there. A test that stops a process the others use (jobwarden,
//! a worker's API server) holds [`DISRUPTION`] for writing; the others for reading.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use jobwarden_envtest::{
    Dispatcher, DispatcherSettings, Fleet, NodeLayout, OwnedProcess, ROOMY, create_named_namespace,
    kubelet, kubelet_of_bound_pods, worker_secret,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube::{Client, ResourceExt as _};
use serde_json::Value;

/// The workers' names in the policy, in the fleet's order.
pub const WORKERS: [&str; 2] = ["east", "west"];
/// A worker whose kubeconfig runs an exec plugin: refused, never used.
pub const PLUGIN_WORKER: &str = "plugin";
/// The local worker: this (the management) cluster, for the Jobs of [`LOCAL_NAMESPACE`] only.
pub const LOCAL_WORKER: &str = "here";
pub const LOCAL_NAMESPACE: &str = "dispatch-local";
pub const DISPATCHER: &str = "jobwarden.io/dispatcher";
pub const WORKER_LOST_SECONDS: u64 = 20;

/// How long a condition may take on a busy two-core machine.
pub const PATIENCE: Duration = Duration::from_secs(180);

/// Held for writing by a test that stops what the others use, for reading by the others, from
/// before a test touches a cluster until it has finished.
static DISRUPTION: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// A test's hold on [`DISRUPTION`].
enum Hold {
    Shared(#[allow(dead_code)] tokio::sync::RwLockReadGuard<'static, ()>),
    Alone(#[allow(dead_code)] tokio::sync::RwLockWriteGuard<'static, ()>),
    /// A second namespace of a test that holds the lock (`Test::beside`).
    Beside,
}

/// jobwarden's replicas, as deploy/ runs two: one leads, the other stands by.
pub const REPLICAS: usize = 2;

/// What the tests share: paths and processes, never clients (each test has its runtime).
pub struct World {
    pub fleet: &'static Fleet,
    /// jobwarden installed as the dispatcher (its identity, policy and command line).
    pub dispatcher: Dispatcher,
    /// The policy file as installed, which every test finds (and leaves) mounted.
    pub policy: String,
    replicas: Mutex<Vec<Option<OwnedProcess>>>,
}

static WORLD: OnceLock<Option<World>> = OnceLock::new();

impl World {
    /// The world, set up on first use; `None` (after one line) without the binaries.
    pub fn get() -> Option<&'static World> {
        WORLD
            .get_or_init(|| {
                // kube-scheduler on each worker: the placement tests' pods are bound to the Nodes
                // they lay out; the others' pods name no scheduler and stay unbound, counted
                // against the roomy Node each worker has between placement tests.
                let fleet = Fleet::shared_scheduled()?;
                Some(off_runtime(move || World::set_up(fleet)))
            })
            .as_ref()
    }

    async fn set_up(fleet: &'static Fleet) -> World {
        let mut settings = DispatcherSettings::new(&WORKERS);
        settings.dispatch = format!("workerLostSeconds: {WORKER_LOST_SECONDS}");
        settings.more_workers = vec![
            format!(
                "{{name: {PLUGIN_WORKER}, kubeconfigSecret: {}}}",
                worker_secret(PLUGIN_WORKER)
            ),
            format!(
                "{{name: {LOCAL_WORKER}, local: true, namespaces: {{names: [{LOCAL_NAMESPACE}]}}}}"
            ),
        ];
        // The plugin worker's Secret, and the one doctor's test adds to the policy (seen.rs):
        // the dispatcher's Role names them as deploy/dispatch/secrets.yaml would.
        settings.more_secrets = vec![worker_secret(PLUGIN_WORKER), worker_secret("stale")];
        settings.replicas = REPLICAS;
        let dispatcher = fleet
            .install_dispatcher(
                std::path::Path::new(env!("CARGO_BIN_EXE_jobwarden")),
                &settings,
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        jobwarden_envtest::put_kubeconfig_secret(
            &fleet.management.client().await,
            &dispatcher.identity.namespace,
            &worker_secret(PLUGIN_WORKER),
            &plugin_kubeconfig(),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        let policy = std::fs::read_to_string(dispatcher.policy()).expect("the policy");
        let world = World {
            fleet,
            dispatcher,
            policy,
            replicas: Mutex::new((0..REPLICAS).map(|_| None).collect()),
        };
        for i in 0..REPLICAS {
            world.start_replica(i);
        }
        world
    }

    /// Starts replica `i` (again), a new log each time.
    pub fn start_replica(&self, i: usize) {
        if let Err(e) = self.try_start_replica(i) {
            panic!("jobwarden starts: {e}");
        }
    }

    /// [`Self::start_replica`], saying why it could not instead of failing the test (for a
    /// guard that runs while a failed test unwinds).
    pub fn try_start_replica(&self, i: usize) -> Result<(), String> {
        let process = self
            .dispatcher
            .start_replica(i)
            .map_err(|e| e.to_string())?;
        self.replicas.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(process);
        Ok(())
    }

    /// Writes the policy file as the kubelet updates a mounted ConfigMap: a new file, renamed
    /// over the old one (never written in place).
    pub fn swap_policy(&self, text: &str) {
        let path = self.dispatcher.policy();
        let next = path.with_extension("next");
        std::fs::write(&next, text).expect("the new policy written");
        std::fs::rename(&next, &path).expect("the new policy swapped in");
    }

    /// Puts back what a test that failed half-way may have left changed (the policy file, a
    /// replica not started again, the Nodes of a placement test when `roomy`), then waits
    /// until the leader has every worker ready ([`Self::every_worker_ready`]). A test starts
    /// from the world as installed, so one failure is one failed test, not a cascade through
    /// the tests after it.
    async fn make_whole(&self, roomy: bool) {
        // Tests beside each other start together: one puts back what needs it.
        static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        let _one = ONE_AT_A_TIME.lock().await;
        if std::fs::read_to_string(self.dispatcher.policy())
            .ok()
            .as_deref()
            != Some(&self.policy)
        {
            eprintln!("the policy file was left changed by an earlier test: put back");
            self.swap_policy(&self.policy);
        }
        for i in 0..REPLICAS {
            let down = self.replicas.lock().unwrap_or_else(|e| e.into_inner())[i].is_none();
            if down {
                eprintln!("replica {i} was left stopped by an earlier test: started");
                self.start_replica(i);
            }
        }
        if roomy {
            self.roomy_nodes_only().await;
        }
        self.every_worker_ready().await;
    }

    /// Waits until the leader shows every worker answering, its view fresh and not
    /// draining, and no worker still connecting. A worker added or back has its copies listed
    /// and fenced and its room read first, and until then Jobs rightly go to the others, which
    /// a test counting on an even fleet would not expect. Read from one scrape: the gauges'
    /// tick counts the workers by state before it shows each view, so a view shown fresh means
    /// the count of workers still connecting already counted that worker.
    pub async fn every_worker_ready(&self) {
        let started = Instant::now();
        loop {
            let metrics = self.metrics().await.unwrap_or_default();
            let has = |line: String| metrics.lines().any(|l| l == line);
            let ready = |w: &str| {
                has(format!("jobwarden_dispatch_worker_up{{worker=\"{w}\"}} 1"))
                    && has(format!(
                        "jobwarden_dispatch_worker_view{{worker=\"{w}\",state=\"fresh\"}} 1"
                    ))
                    && has(format!(
                        "jobwarden_dispatch_worker_draining{{worker=\"{w}\"}} 0"
                    ))
            };
            if WORKERS.iter().all(|w| ready(w))
                && has("jobwarden_dispatch_workers{state=\"connecting\"} 0".to_owned())
            {
                return;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "not every worker ready within {PATIENCE:?}: the leader's worker gauges:\n{}\njobwarden's log:\n{}",
                metrics
                    .lines()
                    .filter(|l| l.starts_with("jobwarden_dispatch_worker"))
                    .collect::<Vec<_>>()
                    .join("\n"),
                self.jobwarden_log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Each worker's Nodes as the tests other than placement's share them: the roomy one
    /// alone.
    async fn roomy_nodes_only(&self) {
        for plane in &self.fleet.workers {
            let nodes = plane.nodes().await;
            for node in nodes.names().await.unwrap_or_else(|e| panic!("{e}")) {
                if node != ROOMY {
                    nodes.delete(&node).await.unwrap_or_else(|e| panic!("{e}"));
                }
            }
            nodes
                .ensure(&NodeLayout::roomy())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }

    /// The replica the Lease names, once one leads.
    pub async fn leader(&self, mgmt: &Client) -> Option<usize> {
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(mgmt.clone(), &self.dispatcher.identity.namespace);
        let lease = leases.get_opt("jobwarden-job-controller").await.ok()??;
        let holder = lease.spec?.holder_identity?;
        (0..REPLICAS).find(|i| Dispatcher::replica_name(*i) == holder)
    }

    /// SIGKILL of the leading replica, as a node lost under it; it is started again at once,
    /// under the same name (as a container restarted in its pod: it may lead again at once,
    /// the Lease being its own). Returns which it was.
    pub async fn kill_leader(&self, mgmt: &Client) -> usize {
        let leader = self.kill_leader_for_good(mgmt).await;
        self.start_replica(leader);
        leader
    }

    /// SIGKILL of the leading replica, not started again (a pod gone with its node): the
    /// standby takes the Lease once it expires. Returns which it was.
    pub async fn kill_leader_for_good(&self, mgmt: &Client) -> usize {
        let leader = self.wait_leader(mgmt).await;
        let process = self.replicas.lock().unwrap_or_else(|e| e.into_inner())[leader].take();
        if let Some(p) = process {
            p.kill();
        }
        leader
    }

    /// SIGTERM of the leading replica (it hands its Lease over); started again once it has
    /// exited.
    pub async fn terminate_leader(&self, mgmt: &Client) -> usize {
        let leader = self.wait_leader(mgmt).await;
        let process = self.replicas.lock().unwrap_or_else(|e| e.into_inner())[leader].take();
        if let Some(p) = process {
            let stopped = tokio::task::spawn_blocking(move || p.terminate(Duration::from_secs(60)))
                .await
                .expect("the stop does not panic");
            assert!(stopped.is_ok(), "the leader stops on SIGTERM: {stopped:?}");
        }
        self.start_replica(leader);
        leader
    }

    pub async fn wait_leader(&self, mgmt: &Client) -> usize {
        let started = Instant::now();
        loop {
            if let Some(i) = self.leader(mgmt).await {
                return i;
            }
            assert!(started.elapsed() < PATIENCE, "no replica leads");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The end of each replica's log, for a failure's message.
    pub fn jobwarden_log(&self) -> String {
        self.replicas
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .flatten()
            .map(|p| format!("== {}\n{}", p.log().display(), p.tail(40)))
            .collect()
    }

    /// Each running replica's whole log.
    pub fn replica_logs(&self) -> Vec<String> {
        self.replicas
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .flatten()
            .map(|p| std::fs::read_to_string(p.log()).unwrap_or_default())
            .collect()
    }

    /// The leading replica's /metrics, `None` while none answers as the leader.
    pub async fn metrics(&self) -> Option<String> {
        for port in self.dispatcher.metrics_ports.clone() {
            if let Some(text) = scrape(port).await
                && text.lines().any(|l| l == "jobwarden_controller_leader 1")
            {
                return Some(text);
            }
        }
        None
    }

    /// One sample's value from the leader's /metrics (`name{labels}` exactly as served).
    pub async fn sample(&self, series: &str) -> Option<f64> {
        value_of(&self.metrics().await?, series)
    }

    /// A counter's value on each running replica now, to tell later whether it grew on any
    /// ([`Self::grew`]). Counters live in a process: the replica that counts may not be the one
    /// that led when this was read, and a restarted one counts from nothing.
    pub async fn counted(&self, series: &str) -> Counted {
        let mut before = Vec::new();
        for i in 0..REPLICAS {
            before.push(self.replica_sample(i, series).await);
        }
        Counted {
            series: series.to_owned(),
            before,
        }
    }

    /// Whether the counter read by `counted` grew on some replica since: past its value then
    /// on the same process, past nothing on one started since.
    pub async fn grew(&self, counted: &Counted) -> bool {
        for (i, before) in counted.before.iter().enumerate() {
            let Some((process, now)) = self.replica_sample(i, &counted.series).await else {
                continue;
            };
            let from = match before {
                Some((was, value)) if *was == process => *value,
                _ => 0.0,
            };
            if now > from {
                return true;
            }
        }
        false
    }

    /// Replica `i`'s process (its log, new at each start) and its value of `series`, read from
    /// its /metrics whether it leads or not.
    async fn replica_sample(&self, i: usize, series: &str) -> Option<(PathBuf, f64)> {
        let process = self
            .replicas
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(i)?
            .as_ref()?
            .log()
            .to_path_buf();
        let text = scrape(*self.dispatcher.metrics_ports.get(i)?).await?;
        Some((process, value_of(&text, series).unwrap_or(0.0)))
    }
}

/// A replica's /metrics on `port`, `None` when it does not answer.
async fn scrape(port: u16) -> Option<String> {
    tokio::task::spawn_blocking(move || jobwarden_envtest::http_get(port, "/metrics"))
        .await
        .ok()
        .flatten()
}

/// The value of `series` (`name{labels}` exactly as served) in a /metrics text.
fn value_of(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// A counter's value on each replica's process, as [`World::counted`] read it.
pub struct Counted {
    series: String,
    before: Vec<Option<(PathBuf, f64)>>,
}

/// A kubeconfig as cloud providers hand them out: its user runs a program for a token.
pub fn plugin_kubeconfig() -> String {
    "apiVersion: v1
kind: Config
current-context: plugin
contexts: [{name: plugin, context: {cluster: plugin, user: plugin}}]
clusters: [{name: plugin, cluster: {server: 'https://127.0.0.1:1', certificate-authority-data: Q0E=}}]
users:
- name: plugin
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, 'echo pwned > /tmp/jobwarden-exec-plugin-ran']}
"
    .to_owned()
}

/// Runs `f` to its end on a runtime of its own, off the caller's.
fn off_runtime<T: Send, Fut: Future<Output = T>>(f: impl FnOnce() -> Fut + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            let _ = rustls::crypto::ring::default_provider().install_default();
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime")
                .block_on(f())
        })
        .join()
        .expect("the set-up does not panic")
    })
}

/// One test: its namespace on the three clusters, admin clients, and kubelets on the workers.
pub struct Test {
    pub world: &'static World,
    pub ns: String,
    pub mgmt: Client,
    /// Each worker's admin client, in [`WORKERS`]' order.
    pub workers: Vec<Client>,
    kubelets: Vec<tokio::task::JoinHandle<()>>,
    pub census: Census,
    /// The pods seen unschedulable on the workers (`ns/name`), when the test watches them.
    unschedulable: Option<Unschedulable>,
    /// The Jobs the test moved off a lost worker.
    moved: Mutex<BTreeSet<String>>,
    /// Released last, when the test is done with the clusters.
    _hold: Hold,
}

impl Test {
    /// A test that runs beside the others.
    pub async fn new(prefix: &str) -> Option<Test> {
        let world = World::get()?;
        let hold = Hold::Shared(DISRUPTION.read().await);
        world.make_whole(true).await;
        Test::named(world, hold, prefix).await
    }

    /// A test that stops what the others use (jobwarden, an API server), run alone.
    pub async fn alone(prefix: &str) -> Option<Test> {
        let world = World::get()?;
        let hold = Hold::Alone(DISRUPTION.write().await);
        world.make_whole(true).await;
        Test::named(world, hold, prefix).await
    }

    /// A placement test, alone (it lays out the workers' Nodes): each worker's Nodes are
    /// `east` and `west` (the roomy Node the others share is taken away until it finishes),
    /// its Jobs' pods are bound by the worker's kube-scheduler and played by a kubelet of
    /// bound pods only, and every pod found unschedulable is noted.
    pub async fn placing(prefix: &str, east: &[NodeLayout], west: &[NodeLayout]) -> Option<Test> {
        let world = World::get()?;
        let hold = Hold::Alone(DISRUPTION.write().await);
        world.make_whole(false).await;
        for (plane, layouts) in world.fleet.workers.iter().zip([east, west]) {
            // Every Node goes: the roomy one, and any a failed placement test left behind.
            let nodes = plane.nodes().await;
            for node in nodes.names().await.unwrap_or_else(|e| panic!("{e}")) {
                nodes.delete(&node).await.unwrap_or_else(|e| panic!("{e}"));
            }
            nodes
                .lay_out(layouts)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let mut test = Test::named(world, hold, prefix).await?;
        for k in &test.kubelets {
            k.abort();
        }
        test.kubelets = test
            .workers
            .iter()
            .map(|c| kubelet_of_bound_pods(Api::<Pod>::namespaced(c.clone(), &test.ns)))
            .collect();
        test.unschedulable = Some(Unschedulable::watch(&test.workers, &test.ns));
        Some(test)
    }

    /// A second namespace beside a placing test's, under its hold, with its own kubelet of
    /// bound pods and census: another team's Jobs.
    pub async fn beside(&self, prefix: &str) -> Test {
        let ns = self
            .world
            .fleet
            .management
            .create_namespace(&self.mgmt, prefix)
            .await;
        let mut other = Test::in_namespace(self.world, Hold::Beside, self.mgmt.clone(), ns)
            .await
            .expect("a second namespace");
        for k in &other.kubelets {
            k.abort();
        }
        other.kubelets = other
            .workers
            .iter()
            .map(|c| kubelet_of_bound_pods(Api::<Pod>::namespaced(c.clone(), &other.ns)))
            .collect();
        other.unschedulable = Some(Unschedulable::watch(&other.workers, &other.ns));
        other
    }

    /// The pods seen unschedulable so far (`worker/name`).
    pub fn unschedulable_pods(&self) -> BTreeSet<String> {
        self.unschedulable
            .as_ref()
            .map(Unschedulable::seen)
            .unwrap_or_default()
    }

    async fn named(world: &'static World, hold: Hold, prefix: &str) -> Option<Test> {
        let mgmt = world.fleet.management.client().await;
        let ns = world.fleet.management.create_namespace(&mgmt, prefix).await;
        Test::in_namespace(world, hold, mgmt, ns).await
    }

    /// The test of the local worker, in the one namespace it takes (on the management cluster
    /// only: no copy is made), its pods played on the management cluster.
    pub async fn local() -> Option<Test> {
        let world = World::get()?;
        let hold = Hold::Shared(DISRUPTION.read().await);
        world.make_whole(true).await;
        let mgmt = world.fleet.management.client().await;
        create_named_namespace(&mgmt, LOCAL_NAMESPACE).await;
        let mut test =
            Test::in_namespace(world, hold, mgmt.clone(), LOCAL_NAMESPACE.to_owned()).await?;
        test.kubelets
            .push(kubelet(Api::<Pod>::namespaced(mgmt, LOCAL_NAMESPACE)));
        Some(test)
    }

    async fn in_namespace(
        world: &'static World,
        hold: Hold,
        mgmt: Client,
        ns: String,
    ) -> Option<Test> {
        let mut workers = Vec::new();
        for plane in &world.fleet.workers {
            let client = plane.client().await;
            create_named_namespace(&client, &ns).await;
            workers.push(client);
        }
        let kubelets = workers
            .iter()
            .map(|c| kubelet(Api::<Pod>::namespaced(c.clone(), &ns)))
            .collect();
        let census = Census::start(&workers, &ns);
        Some(Test {
            world,
            ns,
            mgmt,
            workers,
            kubelets,
            census,
            unschedulable: None,
            moved: Mutex::default(),
            _hold: hold,
        })
    }

    /// The Job with this UID is expected to leave a lost worker: its old copy stays there
    /// until the worker answers again.
    pub fn expect_move(&self, uid: &str) {
        self.moved
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(uid.to_owned());
    }

    pub fn jobs(&self) -> Api<Job> {
        Api::namespaced(self.mgmt.clone(), &self.ns)
    }

    pub fn worker(&self, name: &str) -> &Client {
        let i = WORKERS
            .iter()
            .position(|w| *w == name)
            .unwrap_or_else(|| panic!("no worker {name}"));
        &self.workers[i]
    }

    pub fn worker_jobs(&self, name: &str) -> Api<Job> {
        Api::namespaced(self.worker(name).clone(), &self.ns)
    }

    /// The copy of the Job with UID `uid` on `worker`, read from the worker: the Job of that
    /// name there, if its origin UID is `uid`.
    pub async fn copy_on(&self, worker: &str, name: &str, uid: &str) -> Option<Job> {
        let copy = self.worker_jobs(worker).get_opt(name).await.ok()??;
        (copy
            .labels()
            .get("jobwarden.io/origin-uid")
            .map(String::as_str)
            == Some(uid))
        .then_some(copy)
    }

    /// Whether every pod of the test's namespace on `worker` is gone or going.
    pub async fn pods_gone_on(&self, worker: &str) -> bool {
        self.worker_pods(worker)
            .list(&ListParams::default())
            .await
            .is_ok_and(|l| {
                l.items
                    .iter()
                    .all(|p| p.metadata.deletion_timestamp.is_some())
            })
    }

    pub fn worker_pods(&self, name: &str) -> Api<Pod> {
        Api::namespaced(self.worker(name).clone(), &self.ns)
    }

    /// Creates a dispatched Job from `spec` (merged over a one-pod Job's) and `annotations`.
    pub async fn create(&self, name: &str, spec: Value, annotations: Value) -> Job {
        let mut job = jobwarden_envtest::delegated_job(name, DISPATCHER, spec);
        job["metadata"]["annotations"] = annotations;
        let job: Job = serde_json::from_value(job).expect("a Job");
        self.jobs()
            .create(&PostParams::default(), &job)
            .await
            .unwrap_or_else(|e| panic!("the Job {name} is created: {e}"))
    }

    /// Lets the held pods of the Job `name` on `worker` end, succeeded (the test kubelet reads
    /// their runs-seconds annotation each round).
    pub async fn release(&self, worker: &str, name: &str) {
        let pods = self.worker_pods(worker);
        let list = pods
            .list(&ListParams::default().labels(&format!("job-name={name}")))
            .await
            .unwrap_or_else(|e| panic!("pods listed: {e}"));
        let patch = serde_json::json!({"metadata": {"annotations": {
            jobwarden_envtest::kubelet::RUNS_SECONDS_ANNOTATION: "0"}}});
        for pod in list.items {
            let _ = pods
                .patch(
                    &pod.name_any(),
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                )
                .await;
        }
    }

    /// Waits until the user's Job `name` satisfies `f`; returns it.
    pub async fn wait_job(&self, name: &str, what: &str, f: impl Fn(&Job) -> bool) -> Job {
        let jobs = self.jobs();
        let started = Instant::now();
        loop {
            if let Ok(job) = jobs.get(name).await
                && f(&job)
            {
                return job;
            }
            if started.elapsed() > PATIENCE {
                let last = jobs.get(name).await.ok();
                panic!(
                    "{name}: {what} not within {PATIENCE:?}; recorded on {:?}, last seen {:#?}\nits events: {:#?}\n{}jobwarden's log:\n{}",
                    last.as_ref().and_then(recorded),
                    last.and_then(|j| j.status),
                    self.events(name).await,
                    self.weighed().await,
                    self.world.jobwarden_log()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// What the leader weighs placing (its loads, holds, workers' views and the Jobs waiting),
    /// and each replica's last lines about this test's namespace: for a failure's message.
    async fn weighed(&self) -> String {
        const GAUGES: [&str; 5] = [
            "jobs{",
            "room_held",
            "worker_view{",
            "worker_up{",
            "jobs_waiting{",
        ];
        let mut said = String::from("the leader's placement gauges:\n");
        for line in self.world.metrics().await.unwrap_or_default().lines() {
            if line.starts_with("jobwarden_dispatch_") && GAUGES.iter().any(|g| line.contains(g)) {
                said.push_str(line);
                said.push('\n');
            }
        }
        for (i, log) in self.world.replica_logs().iter().enumerate() {
            let lines: Vec<&str> = log.lines().filter(|l| l.contains(&self.ns)).collect();
            said.push_str(&format!("replica {i}'s last lines about {}:\n", self.ns));
            for line in &lines[lines.len().saturating_sub(60)..] {
                said.push_str(line);
                said.push('\n');
            }
        }
        said
    }

    /// Waits until `look` says yes.
    pub async fn wait_for<F, Fut>(&self, what: &str, mut look: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        let started = Instant::now();
        while !look().await {
            assert!(
                started.elapsed() < PATIENCE,
                "{what} not within {PATIENCE:?}; jobwarden's log:\n{}",
                self.world.jobwarden_log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The Events about the Job `name`, as `reason: message`, oldest first.
    pub async fn events(&self, name: &str) -> Vec<String> {
        let events: Api<Event> = Api::namespaced(self.mgmt.clone(), &self.ns);
        let mut list: Vec<Event> = events
            .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        list.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
        list.iter()
            .map(|e| {
                format!(
                    "{}: {}",
                    e.reason.as_deref().unwrap_or_default(),
                    e.message.as_deref().unwrap_or_default()
                )
            })
            .collect()
    }

    /// Ends the test: the kubelets stop, the census says no Job ever had two copies at once,
    /// and neither jobwarden (on the management cluster) nor its identity on a worker was
    /// refused anything. Returns the census's record.
    pub async fn finish(self) -> BTreeMap<String, CopyHistory> {
        for k in &self.kubelets {
            k.abort();
        }
        if let Some(watch) = &self.unschedulable {
            watch.stop();
            // The Nodes the placement test laid out go; the roomy one comes back.
            self.world.roomy_nodes_only().await;
        }
        self.world.dispatcher.identity.assert_nothing_refused();
        for (name, plane) in WORKERS.iter().zip(&self.world.fleet.workers) {
            let refused = plane
                .refusals_of(jobwarden_envtest::WORKER_DISPATCHER_USER)
                .unwrap_or_default();
            assert!(
                refused.is_empty(),
                "worker {name} refused the dispatcher: {refused:#?}"
            );
        }
        let moved = self.moved.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let seen = self.census.stop().await;
        for (origin, history) in &seen {
            // A Job that left a lost worker has its old copy there until the worker answers
            // again (nothing can reach it); one copy per worker, and none left, all the same.
            let most = if moved.contains(origin) {
                history.most_on_one_worker
            } else {
                history.most_at_once
            };
            assert!(
                most <= 1,
                "the Job with UID {origin} had {most} copies at once: {history:#?}"
            );
        }
        seen
    }
}

/// Every copy seen on the workers in a test's namespace, by the origin UID it names: which
/// workers held one, every copy's UID, and the most that existed at once.
#[derive(Debug, Clone, Default)]
pub struct CopyHistory {
    pub workers: BTreeSet<String>,
    pub copies: BTreeSet<String>,
    pub most_at_once: usize,
    /// The most that existed at once on one worker.
    pub most_on_one_worker: usize,
    /// The copies that exist now, by worker.
    pub live: BTreeMap<String, BTreeSet<String>>,
}

/// Watches the workers' copies for the whole test.
pub struct Census {
    seen: Arc<Mutex<BTreeMap<String, CopyHistory>>>,
    watches: Vec<tokio::task::JoinHandle<()>>,
}

type Seen = Arc<Mutex<BTreeMap<String, CopyHistory>>>;

/// One copy seen added (or changed) or deleted on `worker`.
fn note(seen: &Seen, worker: &str, origin: &str, uid: &str, present: bool) {
    let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    let h = seen.entry(origin.to_owned()).or_default();
    h.workers.insert(worker.to_owned());
    h.copies.insert(uid.to_owned());
    let here = h.live.entry(worker.to_owned()).or_default();
    if present {
        here.insert(uid.to_owned());
    } else {
        here.remove(uid);
    }
    let on_one = here.len();
    let at_once = h.live.values().map(BTreeSet::len).sum();
    h.most_on_one_worker = h.most_on_one_worker.max(on_one);
    h.most_at_once = h.most_at_once.max(at_once);
}

/// The copies a fresh list of `worker` shows, `(origin, uid)`: the others are gone.
fn note_list(seen: &Seen, worker: &str, present: &[(String, String)]) {
    let gone: Vec<(String, String)> = {
        let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.iter()
            .flat_map(|(origin, h)| {
                h.live
                    .get(worker)
                    .into_iter()
                    .flatten()
                    .map(move |uid| (origin.clone(), uid.clone()))
            })
            .filter(|copy| !present.contains(copy))
            .collect()
    };
    for (origin, uid) in gone {
        note(seen, worker, &origin, &uid, false);
    }
    for (origin, uid) in present {
        note(seen, worker, origin, uid, true);
    }
}

impl Census {
    fn start(workers: &[Client], ns: &str) -> Census {
        let seen: Arc<Mutex<BTreeMap<String, CopyHistory>>> = Arc::default();
        let watches = WORKERS
            .iter()
            .zip(workers)
            .map(|(name, client)| {
                let (seen, jobs) = (seen.clone(), Api::<Job>::namespaced(client.clone(), ns));
                let name = (*name).to_owned();
                tokio::spawn(async move {
                    loop {
                        // A list first (after a worker's API server came back too): the
                        // copies deleted meanwhile are gone from it.
                        let Ok(list) = jobs
                            .list(&ListParams::default().labels("jobwarden.io/origin-uid"))
                            .await
                        else {
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            continue;
                        };
                        let present: Vec<(String, String)> = list
                            .items
                            .iter()
                            .filter_map(|j| {
                                Some((j.labels().get("jobwarden.io/origin-uid")?.clone(), j.uid()?))
                            })
                            .collect();
                        note_list(&seen, &name, &present);
                        let version = list.metadata.resource_version.unwrap_or_default();
                        let params = WatchParams::default().labels("jobwarden.io/origin-uid");
                        let Ok(stream) = jobs.watch(&params, &version).await else {
                            continue;
                        };
                        let mut stream = std::pin::pin!(stream);
                        while let Some(Ok(event)) = stream.next().await {
                            let (job, added) = match event {
                                WatchEvent::Added(j) | WatchEvent::Modified(j) => (j, true),
                                WatchEvent::Deleted(j) => (j, false),
                                _ => continue,
                            };
                            let Some(origin) = job.labels().get("jobwarden.io/origin-uid").cloned()
                            else {
                                continue;
                            };
                            note(&seen, &name, &origin, &job.uid().unwrap_or_default(), added);
                        }
                    }
                })
            })
            .collect();
        Census { seen, watches }
    }

    /// What was seen of the copies of the Job with this UID so far.
    pub fn of(&self, uid: &str) -> CopyHistory {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(uid)
            .cloned()
            .unwrap_or_default()
    }

    async fn stop(self) -> BTreeMap<String, CopyHistory> {
        for w in &self.watches {
            w.abort();
        }
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The pods of a test's namespace found `PodScheduled=False` (`Unschedulable`) on the workers,
/// polled as the test kubelet polls.
pub struct Unschedulable {
    seen: Arc<Mutex<BTreeSet<String>>>,
    watches: Vec<tokio::task::JoinHandle<()>>,
}

impl Unschedulable {
    fn watch(workers: &[Client], ns: &str) -> Unschedulable {
        let seen: Arc<Mutex<BTreeSet<String>>> = Arc::default();
        let watches = WORKERS
            .iter()
            .zip(workers)
            .map(|(name, client)| {
                let (seen, pods) = (seen.clone(), Api::<Pod>::namespaced(client.clone(), ns));
                let name = (*name).to_owned();
                tokio::spawn(async move {
                    loop {
                        if let Ok(list) = pods.list(&ListParams::default()).await {
                            for pod in list.items.iter().filter(|p| is_unschedulable(p)) {
                                seen.lock()
                                    .unwrap_or_else(|e| e.into_inner())
                                    .insert(format!("{name}/{}", pod.name_any()));
                            }
                        }
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                })
            })
            .collect();
        Unschedulable { seen, watches }
    }

    fn seen(&self) -> BTreeSet<String> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn stop(&self) {
        for w in &self.watches {
            w.abort();
        }
    }
}

/// Whether kube-scheduler found no node for the pod.
pub fn is_unschedulable(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        })
}

pub fn condition(job: &Job, type_: &str) -> Option<String> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
        .map(|c| c.reason.clone().unwrap_or_default())
}

pub fn recorded(job: &Job) -> Option<String> {
    job.annotations().get("jobwarden.io/worker").cloned()
}

pub fn uid(job: &Job) -> String {
    job.uid().unwrap_or_default()
}
