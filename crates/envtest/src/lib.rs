//! A real Kubernetes control plane for jobwarden's end-to-end tests, the way
//! controller-runtime's *envtest* gives one to Go controllers: etcd and kube-apiserver (and, for
//! the differential tests, kube-controller-manager with upstream's Job controller; for the
//! placement tests, kube-scheduler over Node objects the test lays out) started
//! from a folder of binaries on free loopback ports, with a certificate authority and an admin
//! kubeconfig made fresh for the run.
//!
//! ```no_run
//! # async fn t() {
//! let Some(plane) = jobwarden_envtest::ControlPlane::shared() else {
//!     return; // no binaries and no JOBWARDEN_E2E_KUBECONFIG: one line said how to get them
//! };
//! let client = plane.client().await;
//! let ns = plane.create_namespace(&client, "my-test").await;
//! # }
//! ```
//!
//! * [`ControlPlane::shared`] starts one control plane per test binary, the first time a test
//!   asks, and stops it when the binary exits, however it exits (`process`); a suite whose
//!   tests change what the whole cluster sees keeps a [`SharedPlane`] of its own instead.
//! * [`ControlPlane::shared_with_upstream`] also starts kube-controller-manager.
//! * [`ControlPlane::start`] gives a control plane of one's own (the scale benchmark), stopped
//!   when dropped; [`ControlPlane::start_all`] several at once, each on a thread of its own
//!   (on a busy two-core machine, three with kube-controller-manager in 7 s where one takes
//!   4 s and three in turn 11 s).
//! * [`Fleet`]: a dispatcher's clusters, a management plane ([`Options::management`]: upstream's
//!   Job controller and its TTL-after-finished controller) and workers ([`Options::worker`]);
//!   [`Fleet::shared`] one per test binary (a management plane and two workers),
//!   [`Fleet::start`] one of one's own, [`Fleet::start_scheduled`] one whose workers also run
//!   kube-scheduler ([`Options::scheduler`]).
//! * [`Nodes`] lays out a plane's Node objects per scenario ([`NodeLayout`]: labels, taints,
//!   cordoned, capacity and allocatable, extended resources), ready to take pods (status
//!   written, `Ready`, the not-ready taint kube-apiserver adds taken off), and cordons,
//!   taints, retaints and deletes them; [`kubelet_of_bound_pods`] plays the kubelet for the
//!   pods kube-scheduler bound, and [`scheduled_job`] is a Job whose pods it places.
//! * [`ControlPlane::stop_apiserver`] and [`ControlPlane::start_apiserver`]: kube-apiserver
//!   goes away (its watches cut, as when an API server is lost) and comes back on the same
//!   port with the same flags and etcd, while etcd and kube-controller-manager run on (and
//!   reconnect by themselves: a Job under way goes on).
//! * [`ControlPlane::dispatcher_kubeconfig`] installs deploy/worker/ (or, for given namespaces,
//!   deploy/worker/namespaced/) as a worker's admin would and gives the kubeconfig the
//!   dispatcher is given: server, CA and an expiring token inline. Its user is
//!   [`WORKER_DISPATCHER_USER`]; [`ControlPlane::refusals_of`] reads what kube-apiserver refused
//!   it. [`Fleet::install_workers`] does it on every worker and puts each kubeconfig in the
//!   Secret ([`worker_secret`]) the policy's entry names;
//!   [`Fleet::install_dispatcher`] installs jobwarden dispatching over the fleet as deploy/
//!   runs it, given [`DispatcherSettings`] (workers, the rest of its policy as YAML, replicas,
//!   flags): one place writes its policy and command line, whose replicas a test starts,
//!   kills and starts again ([`Dispatcher::start_replica`]); [`Fleet::run_dispatcher`] starts
//!   them all and waits for a leader, and [`Fleet::dispatched_namespace`] makes a namespace on every plane with a kubelet on
//!   each worker and watches of the user's Jobs and their copies.
//! * [`ControlPlane::installed_identity`] gives jobwarden the ServiceAccount and RBAC that
//!   `kubectl kustomize deploy/` installs, and a kubeconfig with its token (`identity`); the
//!   API server's audit log names whatever it refuses that identity.
//! * [`delegated_job`]: the Job the e2e tests start from, delegated through `spec.managedBy`;
//!   [`kubelet`] plays the kubelet for its pods, and
//!   [`kubelet::finish_pods_after_a_second`] for load (the scale tests and benchmarks).
//! * For the scale tests and benchmarks: [`job_versions`] records every version of a
//!   namespace's Jobs as a watch delivers it, [`mirror_lag`] matches a dispatched Job's copy's
//!   statuses to its own, and [`measure`] reads a process's CPU and memory, the requests each
//!   client sent (from the audit log) and a `/metrics` page.
//!
//! Where the binaries come from: `JOBWARDEN_ENVTEST_BIN`, else
//! `${JOBWARDEN_ENVTEST_DIR:-~/.cache/jobwarden-envtest}/bin`, holding etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler and kubectl v1.36, built from public Kubernetes
//! source outside the checkout (docs/development.md); no registry ships them. With `JOBWARDEN_E2E_KUBECONFIG`
//! set, the tests use that cluster instead and start nothing.

mod apiserver;
mod delegated_job;
mod dispatched_namespace;
mod dispatcher_install;
mod dispatcher_policy;
mod dispatcher_run;
mod fleet;
mod identity;
pub mod job_versions;
pub mod kubelet;
pub mod measure;
pub mod mirror_lag;
mod nodes;
mod owned_process;
mod pki;
mod process;
mod scheduler;
mod serving;
mod stand_in;
mod worker_identity;

pub use delegated_job::{delegated_job, load_job, scheduled_job};
pub use dispatched_namespace::{DispatchedNamespace, ORIGIN_UID_LABEL, Record};
pub use dispatcher_install::{put_kubeconfig_secret, worker_secret};
pub use dispatcher_policy::DispatcherSettings;
pub use dispatcher_run::{Dispatcher, DispatcherRun};
pub use fleet::Fleet;
pub use identity::{Installed, Refusal};
pub use kubelet::{kubelet, kubelet_of_bound_pods, pod_phase};
pub use nodes::{NOT_READY_TAINT, NodeLayout, Nodes, ROOMY, taint};
pub use owned_process::OwnedProcess;
pub use process::free_port;
pub use serving::{ServingCertificate, http_get, https_get, https_post, serving_certificate};
pub use stand_in::stand_in_crd;
pub use worker_identity::WORKER_DISPATCHER_USER;

use apiserver::{
    AUDIT_LOG, AUDIT_POLICY, ApiServer, ApiServerProcess, SERVICE_ACCOUNTS_AUDIT_POLICY,
    apiserver_args,
};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// How long a component may take to become ready on a busy two-core machine.
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// [`UPSTREAM_CONTROLLERS`], as a literal that [`MANAGEMENT_CONTROLLERS`] extends.
macro_rules! upstream_controllers {
    () => {
        "job,namespace-controller,garbage-collector-controller,serviceaccount-controller,\
         serviceaccount-token-controller,clusterrole-aggregation-controller"
    };
}

/// The controllers kube-controller-manager runs: upstream's Job controller, what a namespace
/// of Jobs needs around it (deletion, owner references, service accounts), and the
/// aggregation that gives the built-in `view` and `edit` roles their rules.
pub const UPSTREAM_CONTROLLERS: &str = upstream_controllers!();

/// [`UPSTREAM_CONTROLLERS`] and upstream's TTL-after-finished controller, which deletes a
/// finished Job once its `ttlSecondsAfterFinished` has passed: a management cluster's, where
/// the dispatcher's tests check that a user's Job is deleted only once its status is final.
pub const MANAGEMENT_CONTROLLERS: &str =
    concat!(upstream_controllers!(), ",ttl-after-finished-controller");

/// What a control plane of one's own runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// kube-apiserver writes an audit log (JSON, metadata level, leases left out), as
    /// kube-envtest's `AUDIT=1` does, for counting requests per client.
    pub audit_log: bool,
    /// Also start kube-controller-manager.
    pub upstream_controller: bool,
    /// Its `--controllers` ([`UPSTREAM_CONTROLLERS`] when `None`): the scale benchmark runs the
    /// Job controller alone, so that the process's CPU is the Job controller's; a management
    /// cluster adds the TTL-after-finished controller ([`MANAGEMENT_CONTROLLERS`]).
    pub controllers: Option<&'static str>,
    /// Also start kube-scheduler, which binds the pods naming `default-scheduler` to the Node
    /// objects a test lays out ([`Nodes`]); nothing runs them but a test kubelet
    /// ([`kubelet_of_bound_pods`]).
    pub scheduler: bool,
}

impl Options {
    /// A dispatcher's management cluster: kube-controller-manager with
    /// [`MANAGEMENT_CONTROLLERS`].
    pub const fn management() -> Options {
        Options {
            audit_log: false,
            upstream_controller: true,
            controllers: Some(MANAGEMENT_CONTROLLERS),
            scheduler: false,
        }
    }

    /// A worker cluster: kube-controller-manager with upstream's Job controller
    /// ([`UPSTREAM_CONTROLLERS`]), which runs the dispatcher's copies.
    pub const fn worker() -> Options {
        Options {
            audit_log: false,
            upstream_controller: true,
            controllers: None,
            scheduler: false,
        }
    }

    /// A worker cluster with room: [`worker`](Self::worker) and kube-scheduler, which places
    /// the copies' pods on the Nodes a test lays out ([`Nodes`]).
    pub const fn scheduled_worker() -> Options {
        Options {
            scheduler: true,
            ..Options::worker()
        }
    }
}

pub struct ControlPlane {
    kubeconfig: PathBuf,
    /// `None` for a cluster named by `JOBWARDEN_E2E_KUBECONFIG`.
    owned: Option<Owned>,
}

struct Owned {
    dir: PathBuf,
    bin: PathBuf,
    pki: pki::Pki,
    pids: Mutex<Vec<u32>>,
    controller_manager: OnceLock<Result<(), String>>,
    scheduler: OnceLock<Result<(), String>>,
    controllers: &'static str,
    audit_log: bool,
    /// A shared control plane is cleaned up at exit, not on drop.
    shared: bool,
    /// How kube-apiserver was started, to start it again the same way.
    apiserver: Option<ApiServer>,
    apiserver_process: Mutex<Option<ApiServerProcess>>,
}

/// A control plane shared by the tests that name it, started the first time one asks and
/// stopped when the test binary exits, however it exits (`process`); or why it did not start
/// (every test that asks is told). A test binary holds one per suite whose tests change what
/// the whole cluster sees (webhooks registered, kube-apiserver stopped), as a `static`:
///
/// ```no_run
/// static PLANE: jobwarden_envtest::SharedPlane = jobwarden_envtest::SharedPlane::new();
/// # fn t() {
/// let Some(plane) = PLANE.get() else { return };
/// # }
/// ```
pub struct SharedPlane(OnceLock<Result<Option<ControlPlane>, String>>);

impl SharedPlane {
    pub const fn new() -> SharedPlane {
        SharedPlane(OnceLock::new())
    }

    /// The plane: `JOBWARDEN_E2E_KUBECONFIG`'s cluster, else etcd and kube-apiserver started
    /// on first use. `None` (after one line on stderr saying how to get the binaries) when
    /// neither is there. Panics, with the component's log, when the binaries are there but do
    /// not start: that is a failure, not a skip.
    pub fn get(&'static self) -> Option<&'static ControlPlane> {
        self.0
            .get_or_init(|| {
                if let Some(path) = std::env::var_os("JOBWARDEN_E2E_KUBECONFIG") {
                    return Ok(Some(ControlPlane {
                        kubeconfig: PathBuf::from(path),
                        owned: None,
                    }));
                }
                if !binaries_present() {
                    say_skipped();
                    return Ok(None);
                }
                launch(Options::default(), true).map(Some)
            })
            .as_ref()
            .unwrap_or_else(|e| panic!("the envtest control plane did not start: {e}"))
            .as_ref()
    }

    /// [`get`](Self::get), with kube-controller-manager running upstream's Job controller
    /// beside it (a cluster named by `JOBWARDEN_E2E_KUBECONFIG` is taken to run its own).
    pub fn with_upstream(&'static self) -> Option<&'static ControlPlane> {
        let plane = self.get()?;
        if plane.owned.is_some() && !bin_dir().join("kube-controller-manager").is_file() {
            say_skipped();
            return None;
        }
        if let Err(e) = plane.start_upstream_controller() {
            panic!("kube-controller-manager did not start: {e}");
        }
        Some(plane)
    }
}

impl Default for SharedPlane {
    fn default() -> SharedPlane {
        SharedPlane::new()
    }
}

/// The test binary's own plane, for the suites that share one, each test in its namespace.
static SHARED: SharedPlane = SharedPlane::new();

impl ControlPlane {
    /// This test binary's control plane, shared by every test that asks for it (each in a
    /// namespace of its own): [`SharedPlane::get`] of the binary's one.
    pub fn shared() -> Option<&'static ControlPlane> {
        SHARED.get()
    }

    /// [`shared`](Self::shared), with kube-controller-manager running upstream's Job
    /// controller beside it ([`SharedPlane::with_upstream`]).
    pub fn shared_with_upstream() -> Option<&'static ControlPlane> {
        SHARED.with_upstream()
    }

    /// A control plane of one's own, stopped and removed when dropped.
    pub fn start(options: Options) -> Result<ControlPlane, String> {
        let present = |name: &str| bin_dir().join(name).is_file();
        if !binaries_present()
            || (options.upstream_controller && !present("kube-controller-manager"))
            || (options.scheduler && !present("kube-scheduler"))
        {
            return Err(skip_message());
        }
        let plane = launch(options, false)?;
        if options.upstream_controller {
            plane.start_upstream_controller()?;
        }
        if options.scheduler {
            plane.start_scheduler()?;
        }
        Ok(plane)
    }

    /// Control planes of one's own, started at once (each on a thread of its own: the CPU
    /// they wait on is the machine's, not a queue's), stopped when dropped. Either all start
    /// or none is left running: the first failure is returned, naming which plane it was.
    pub fn start_all(options: &[Options]) -> Result<Vec<ControlPlane>, String> {
        let started: Vec<Result<ControlPlane, String>> = std::thread::scope(|s| {
            let starting: Vec<_> = options
                .iter()
                .map(|&o| s.spawn(move || ControlPlane::start(o)))
                .collect();
            starting
                .into_iter()
                .map(|t| {
                    t.join()
                        .unwrap_or_else(|_| Err("starting it panicked".to_owned()))
                })
                .collect()
        });
        let mut planes = Vec::with_capacity(started.len());
        let mut failure = None;
        for (i, plane) in started.into_iter().enumerate() {
            match plane {
                Ok(plane) => planes.push(plane),
                Err(e) if failure.is_none() => {
                    failure = Some(format!("control plane {i} of {}: {e}", options.len()));
                }
                Err(_) => {}
            }
        }
        match failure {
            // The planes that did start are dropped, and so stopped.
            Some(e) => Err(e),
            None => Ok(planes),
        }
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The admin's client configuration, for a client of one's own (another User-Agent, say).
    pub async fn config(&self) -> Config {
        let _ = rustls::crypto::ring::default_provider().install_default();
        admin_config(&self.kubeconfig)
            .await
            .unwrap_or_else(|e| panic!("the kubeconfig is usable: {e}"))
    }

    /// A client for the admin, made in the caller's runtime.
    pub async fn client(&self) -> Client {
        Client::try_from(self.config().await).expect("a client")
    }

    /// A client for the admin that names itself `agent` (User-Agent), so that its requests
    /// are told apart in the audit log.
    pub async fn client_named(&self, agent: &str) -> Client {
        let mut config = self.config().await;
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_str(agent).expect("a header value"),
        ));
        Client::try_from(config).expect("a client")
    }

    /// `kubectl --kubeconfig …`: the v1.36.2 kubectl built beside the server when there is
    /// one, else the one on the PATH.
    pub fn kubectl(&self) -> Command {
        let mut command = Command::new(kubectl_program());
        command.arg("--kubeconfig").arg(&self.kubeconfig);
        command
    }

    /// The folder of a started control plane (logs, PKI, etcd data); `None` for an outside
    /// cluster.
    pub fn dir(&self) -> Option<&Path> {
        self.owned.as_ref().map(|o| o.dir.as_path())
    }

    /// The process ids of the components started, in start order (etcd, kube-apiserver,
    /// kube-controller-manager, kube-scheduler); empty for an outside cluster.
    pub fn pids(&self) -> Vec<u32> {
        self.owned.as_ref().map_or_else(Vec::new, |o| {
            o.pids.lock().unwrap_or_else(|e| e.into_inner()).clone()
        })
    }

    /// kube-apiserver's audit log, when [`Options::audit_log`] asked for one.
    pub fn audit_log(&self) -> Option<PathBuf> {
        let owned = self.owned.as_ref().filter(|o| o.audit_log)?;
        Some(owned.dir.join(AUDIT_LOG))
    }

    /// Starts kube-controller-manager (once; later calls return the first result) and waits
    /// until its controllers act: a namespace gets its `default` ServiceAccount.
    pub fn start_upstream_controller(&self) -> Result<(), String> {
        let Some(owned) = &self.owned else {
            return Ok(());
        };
        owned
            .controller_manager
            .get_or_init(|| {
                let kubeconfig = self.kubeconfig.clone();
                let (bin, dir, controllers) =
                    (owned.bin.clone(), owned.dir.clone(), owned.controllers);
                let (kcm_kubeconfig, sa_key, ca) = (
                    owned.pki.kcm_kubeconfig.clone(),
                    owned.pki.service_account_key.clone(),
                    owned.pki.ca_cert.clone(),
                );
                let pid = process::on_keeper(move || {
                    let port = process::free_port()?;
                    let kubeconfig_arg = format!("--kubeconfig={}", kcm_kubeconfig.display());
                    let args = vec![
                        kubeconfig_arg.clone(),
                        format!("--authentication-kubeconfig={}", kcm_kubeconfig.display()),
                        format!("--authorization-kubeconfig={}", kcm_kubeconfig.display()),
                        "--bind-address=127.0.0.1".to_owned(),
                        format!("--secure-port={port}"),
                        format!("--cert-dir={}", dir.join("kcm-certs").display()),
                        format!("--controllers={controllers}"),
                        "--leader-elect=false".to_owned(),
                        "--use-service-account-credentials=false".to_owned(),
                        format!("--service-account-private-key-file={}", sa_key.display()),
                        format!("--root-ca-file={}", ca.display()),
                        "--service-cluster-ip-range=10.96.0.0/16".to_owned(),
                        "--v=2".to_owned(),
                    ];
                    let log = dir.join("logs/kube-controller-manager.log");
                    let pid = process::spawn(&bin.join("kube-controller-manager"), &args, &log)?;
                    Ok::<_, String>((pid, port, log))
                })?;
                let (pid, port, log) = pid;
                owned
                    .pids
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(pid);
                let ready = if controllers.contains("serviceaccount-controller") {
                    wait_for_service_accounts(&kubeconfig, pid)
                } else {
                    wait_for_healthz(port, pid)
                };
                ready.map_err(|e| {
                    format!(
                        "{e}; the end of {}:\n{}",
                        log.display(),
                        process::tail(&log, 40)
                    )
                })
            })
            .clone()
    }

    /// A new namespace named after `prefix`, with the `default` ServiceAccount that pods use
    /// (created here so the test need not wait for kube-controller-manager, or run without it).
    pub async fn create_namespace(&self, client: &Client, prefix: &str) -> String {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() % 1_000_000_000)
            .unwrap_or(0);
        let name = format!("{prefix}-{stamp}");
        create_named_namespace(client, &name).await;
        name
    }
}

/// The namespace `name` and its `default` ServiceAccount, through `client`, unless they are
/// there: a dispatched Job's namespace is made under the same name on every cluster.
pub async fn create_named_namespace(client: &Client, name: &str) {
    let named = |name: &str| serde_json::json!({"metadata": {"name": name}});
    let namespaces = Api::<Namespace>::all(client.clone());
    if let Err(e) = create_if_absent(&namespaces, named(name)).await {
        panic!("the namespace {name} is created: {e}");
    }
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), name);
    if let Err(e) = create_if_absent(&accounts, named("default")).await {
        panic!("the default ServiceAccount of {name} is created: {e}");
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if let Some(owned) = self.owned.as_ref().filter(|o| !o.shared) {
            let pids = owned.pids.lock().unwrap_or_else(|e| e.into_inner()).clone();
            process::stop(&pids, &owned.dir);
        }
    }
}

/// The folder of binaries: `JOBWARDEN_ENVTEST_BIN`, else the cache folder.
fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("JOBWARDEN_ENVTEST_BIN") {
        return PathBuf::from(dir);
    }
    let root = std::env::var_os("JOBWARDEN_ENVTEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            PathBuf::from(home).join(".cache/jobwarden-envtest")
        });
    root.join("bin")
}

/// The v1.36 kubectl built beside the server when there is one, else the one on the PATH.
pub fn kubectl_program() -> PathBuf {
    let built = bin_dir().join("kubectl");
    if built.is_file() {
        built
    } else {
        PathBuf::from("kubectl")
    }
}

/// Whether etcd and kube-apiserver are in [`bin_dir`] (kube-controller-manager is looked for
/// when it is asked for).
fn binaries_present() -> bool {
    ["etcd", "kube-apiserver"]
        .iter()
        .all(|b| bin_dir().join(b).is_file())
}

/// Prints the skip line once per test binary, straight to stderr: libtest captures what a
/// passing test prints with `eprintln!`, and a skip nobody sees is a skip nobody fixes.
fn say_skipped() {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "{}", skip_message());
    });
}

/// The line a test binary prints when its e2e tests skip.
fn skip_message() -> String {
    format!(
        "skipped: no control-plane binaries in {} (JOBWARDEN_ENVTEST_BIN, default ~/.cache/\
         jobwarden-envtest/bin) and JOBWARDEN_E2E_KUBECONFIG is not set; the tests need etcd, \
         kube-apiserver, kube-controller-manager, kube-scheduler and kubectl v1.36 there, built \
         from public Kubernetes source outside the checkout (docs/development.md)",
        bin_dir().display()
    )
}

/// Starts etcd and kube-apiserver and waits until they answer. Runs on the caller's thread,
/// which waits; only the spawning is done on the keeper (see `process`), so several planes
/// start at once from threads of their own.
fn launch(options: Options, shared: bool) -> Result<ControlPlane, String> {
    let dir = plane_dir()?;
    let (etcd_port, peer_port, api_port) = (
        process::free_port()?,
        process::free_port()?,
        process::free_port()?,
    );
    let server = format!("https://127.0.0.1:{api_port}");
    let pki = pki::write(&dir, &server)?;
    let mut owned = Owned {
        dir,
        bin: bin_dir(),
        pki,
        pids: Mutex::new(Vec::new()),
        controller_manager: OnceLock::new(),
        scheduler: OnceLock::new(),
        controllers: options.controllers.unwrap_or(UPSTREAM_CONTROLLERS),
        audit_log: options.audit_log,
        shared,
        apiserver: None,
        apiserver_process: Mutex::new(None),
    };
    owned.start_etcd(etcd_port, peer_port)?;
    owned.start_apiserver(etcd_port, api_port)?;
    Ok(ControlPlane {
        kubeconfig: owned.pki.admin_kubeconfig.clone(),
        owned: Some(owned),
    })
}

/// A new folder of the plane's own (its logs below it), removed when the test binary exits;
/// the folders of test binaries that died first are removed now.
fn plane_dir() -> Result<PathBuf, String> {
    process::remove_stale_folders();
    let dir = std::env::temp_dir().join(format!(
        "jobwarden-envtest-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(dir.join("logs"))
        .map_err(|e| format!("creating {}: {e}", dir.display()))?;
    process::remove_at_exit(&dir);
    Ok(dir)
}

impl Owned {
    /// `pid` is the plane's: stopped with it.
    fn own(&mut self, pid: u32) {
        self.pids
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .push(pid);
    }

    /// Starts etcd on `etcd_port` (its peers on `peer_port`) and waits until it listens.
    fn start_etcd(&mut self, etcd_port: u16, peer_port: u16) -> Result<(), String> {
        let etcd_log = self.dir.join("logs/etcd.log");
        let etcd_args = vec![
            format!("--data-dir={}", self.dir.join("etcd").display()),
            format!("--listen-client-urls=http://127.0.0.1:{etcd_port}"),
            // etcd 3.6 refuses explicit listen URLs without the URLs it advertises.
            format!("--advertise-client-urls=http://127.0.0.1:{etcd_port}"),
            format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
            format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
            format!("--initial-cluster=default=http://127.0.0.1:{peer_port}"),
            "--unsafe-no-fsync".to_owned(),
            "--log-level=warn".to_owned(),
        ];
        let etcd = {
            let (program, log) = (self.bin.join("etcd"), etcd_log.clone());
            process::on_keeper(move || process::spawn(&program, &etcd_args, &log))?
        };
        self.own(etcd);
        wait_for_port(etcd_port, etcd).map_err(|e| {
            format!(
                "etcd: {e}; the end of {}:\n{}",
                etcd_log.display(),
                process::tail(&etcd_log, 40)
            )
        })
    }

    /// Starts kube-apiserver on `api_port`, over the etcd on `etcd_port`, and waits until it
    /// is ready; it is kept to be started again the same way.
    fn start_apiserver(&mut self, etcd_port: u16, api_port: u16) -> Result<(), String> {
        let mut args = apiserver_args(&self.pki, etcd_port, api_port);
        args.extend(self.audit_args()?);
        let apiserver = ApiServer {
            program: self.bin.join("kube-apiserver"),
            args,
            port: api_port,
            log: self.dir.join("logs/kube-apiserver.log"),
        };
        let pid = apiserver.spawn()?;
        self.own(pid);
        apiserver.wait_until_ready(&self.pki.admin_kubeconfig, pid)?;
        self.apiserver = Some(apiserver);
        *self
            .apiserver_process
            .get_mut()
            .unwrap_or_else(|e| e.into_inner()) = Some(ApiServerProcess {
            pid,
            stopped: false,
        });
        Ok(())
    }

    /// Every control plane keeps an audit log: of every request for the scale benchmark, else
    /// of the ServiceAccounts' only, where the installed identity's refusals are read. Writes
    /// the audit policy, and returns kube-apiserver's flags for it.
    fn audit_args(&self) -> Result<[String; 4], String> {
        let policy = self.dir.join("audit-policy.yaml");
        let policy_text = if self.audit_log {
            AUDIT_POLICY
        } else {
            SERVICE_ACCOUNTS_AUDIT_POLICY
        };
        std::fs::write(&policy, policy_text)
            .map_err(|e| format!("writing {}: {e}", policy.display()))?;
        Ok([
            format!("--audit-policy-file={}", policy.display()),
            format!("--audit-log-path={}", self.dir.join(AUDIT_LOG).display()),
            "--audit-log-format=json".to_owned(),
            "--audit-log-maxsize=2000".to_owned(),
        ])
    }
}

fn wait_for_port(port: u16, pid: u32) -> Result<(), String> {
    let started = Instant::now();
    loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        if !process::running(pid) {
            return Err("exited".to_owned());
        }
        if started.elapsed() > START_TIMEOUT {
            return Err(format!(
                "not listening on port {port} after {START_TIMEOUT:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Polls `/readyz` with the admin's credentials until it says `ok`.
fn wait_for_readyz(kubeconfig: &Path, pid: u32) -> Result<(), String> {
    with_client(kubeconfig, move |client| async move {
        poll_ok(&client, "/readyz", pid).await
    })
}

/// Polls, with SubjectAccessReviews, until kube-apiserver's RBAC authorizer allows what
/// built-in bindings grant, one of each kind (kube-controller-manager's Lease in kube-system,
/// by a RoleBinding; a SelfSubjectReview for anyone authenticated, by a ClusterRoleBinding):
/// its caches of roles and bindings have filled.
fn wait_for_rbac(kubeconfig: &Path, pid: u32) -> Result<(), String> {
    use k8s_openapi::api::authorization::v1::SubjectAccessReview;
    let reviews = [
        serde_json::json!({"spec": {
            "user": "system:kube-controller-manager",
            "resourceAttributes": {"namespace": "kube-system", "verb": "get",
                                   "group": "coordination.k8s.io", "resource": "leases"},
        }}),
        serde_json::json!({"spec": {
            "user": "jobwarden-envtest-probe", "groups": ["system:authenticated"],
            "resourceAttributes": {"verb": "create", "group": "authentication.k8s.io",
                                   "resource": "selfsubjectreviews"},
        }}),
    ]
    .map(|r| serde_json::from_value::<SubjectAccessReview>(r).map_err(|e| e.to_string()));
    with_client(kubeconfig, move |client| async move {
        let api: Api<SubjectAccessReview> = Api::all(client);
        for review in reviews {
            let review = review?;
            poll_until(pid, "RBAC allowing a built-in grant", || async {
                api.create(&PostParams::default(), &review)
                    .await
                    .is_ok_and(|r| r.status.is_some_and(|s| s.allowed))
            })
            .await?;
        }
        Ok(())
    })
}

/// Polls `path` until it answers `ok`, while the process `pid` runs.
async fn poll_ok(client: &Client, path: &str, pid: u32) -> Result<(), String> {
    poll_until(pid, &format!("{path} ok"), || async {
        let Ok(request) = http::Request::get(path).body(Vec::new()) else {
            return false;
        };
        client.request_text(request).await.is_ok_and(|t| t == "ok")
    })
    .await
}

/// Asks `done` every 250 ms until it says yes, while the process `pid` runs, for at most
/// [`START_TIMEOUT`].
async fn poll_until<F, Fut>(pid: u32, what: &str, mut done: F) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if done().await {
            return Ok(());
        }
        if !process::running(pid) {
            return Err("exited".to_owned());
        }
        if started.elapsed() > START_TIMEOUT {
            return Err(format!("no {what} after {START_TIMEOUT:?}"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Polls kube-controller-manager's `/healthz` (its serving certificate is self-signed, and
/// `/healthz` needs no credentials).
fn wait_for_healthz(port: u16, pid: u32) -> Result<(), String> {
    wait_for_ok(port, "/healthz", pid)
}

/// Polls a component's `path` on its secure `port` until it says `ok`: its serving
/// certificate is self-signed, and the health paths need no credentials.
fn wait_for_ok(port: u16, path: &'static str, pid: u32) -> Result<(), String> {
    off_runtime(move || async move {
        let uri: http::Uri = format!("https://127.0.0.1:{port}")
            .parse()
            .map_err(|e| format!("{e}"))?;
        let mut config = Config::new(uri);
        config.accept_invalid_certs = true;
        let client = Client::try_from(config).map_err(|e| e.to_string())?;
        poll_ok(&client, path, pid).await
    })
}

/// Waits until kube-controller-manager's service-account controller has given a new
/// namespace its `default` ServiceAccount: its controllers are running.
fn wait_for_service_accounts(kubeconfig: &Path, pid: u32) -> Result<(), String> {
    with_client(kubeconfig, move |client| async move {
        let name = "jobwarden-envtest-probe";
        create_if_absent(
            &Api::<Namespace>::all(client.clone()),
            serde_json::json!({"metadata": {"name": name}}),
        )
        .await
        .map_err(|e| format!("creating namespace {name}: {e}"))?;
        let accounts = Api::<ServiceAccount>::namespaced(client, name);
        poll_until(
            pid,
            &format!("a default ServiceAccount in {name}"),
            || async { accounts.get_opt("default").await.is_ok_and(|a| a.is_some()) },
        )
        .await
    })
}

/// Creates `object` unless one of its name is there already.
async fn create_if_absent<K>(api: &Api<K>, object: serde_json::Value) -> Result<(), String>
where
    K: kube::Resource + Clone + std::fmt::Debug,
    K: k8s_openapi::serde::Serialize + k8s_openapi::serde::de::DeserializeOwned,
{
    let object: K = serde_json::from_value(object).map_err(|e| e.to_string())?;
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// Runs `f` with an admin client, off any runtime the caller is in.
fn with_client<F, Fut>(kubeconfig: &Path, f: F) -> Result<(), String>
where
    F: FnOnce(Client) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), String>>,
{
    let kubeconfig = kubeconfig.to_owned();
    off_runtime(move || async move {
        let config = admin_config(&kubeconfig).await?;
        let client = Client::try_from(config).map_err(|e| e.to_string())?;
        f(client).await
    })
}

async fn admin_config(kubeconfig: &Path) -> Result<Config, String> {
    let file = Kubeconfig::read_from(kubeconfig).map_err(|e| e.to_string())?;
    Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())
}

/// Runs `f` to the end on a thread and runtime of its own: the caller may be a test's tokio
/// runtime, which cannot block on another.
fn off_runtime<F, Fut>(f: F) -> Result<(), String>
where
    F: FnOnce() -> Fut + Send,
    Fut: Future<Output = Result<(), String>>,
{
    let run = move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("a runtime: {e}"))?;
        let _ = rustls::crypto::ring::default_provider().install_default();
        runtime.block_on(f())
    };
    std::thread::scope(|s| s.spawn(run).join())
        .unwrap_or_else(|_| Err("the readiness check panicked".to_owned()))
}
