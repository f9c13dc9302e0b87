//! jobwarden's companion Job controller: it runs every Job whose `spec.managedBy` equals its
//! controller name (KEP-4368), doing the whole lifecycle the built-in Job controller skips for
//! such Jobs: creating pods, counting their outcomes exactly once through a tracking finalizer,
//! and writing a status that keeps upstream's status-transition rules. What it shares with
//! jobwarden's other controllers (leader election, the clients and their request budgets, the
//! Job cache's view of a Job, Event writing) is `jobwarden-runtime`'s.
//!
//! # Public API
//!
//! ```no_run
//! # async fn serve(kube_config: kube::Config) -> Result<(), Box<dyn std::error::Error>> {
//! use jobwarden_runtime::client::{ControllerClients, RateLimit};
//! let mut registry = prometheus_client::registry::Registry::default();
//! let metrics = jobwarden_controller::register_metrics(&mut registry);
//! let config = jobwarden_controller::ControllerConfig {
//!     identity: "jobwarden-7d9f-abcde".to_owned(),
//!     ..Default::default()
//! };
//! let limit = RateLimit { qps: 50.0, burst: 100 };
//! let clients = ControllerClients::new(kube_config, &config.controller_name, Some(limit), config.renew_deadline)?;
//! let shutdown = async { let _ = tokio::signal::ctrl_c().await; };
//! jobwarden_controller::run(clients, config, metrics, shutdown).await?;
//! # Ok(())
//! # }
//! ```
//!
//! * [`run_term`]: the controller's task for one term of leadership (a
//!   `jobwarden_runtime::leader::Term`): the reconcile loop from fresh caches, every write
//!   fenced by the term's flag, stopped (its syncs drained, its Events written) when the term
//!   ends. `serve` runs it under the runtime's `Election`, beside any other controller's task.
//! * [`run`]: the same under a Lease of its own, acquired and released here: the controller
//!   alone, as its end-to-end tests run it.
//! * [`plan::plan`]: the pure heart, `plan(job, pods, now, config, in_flight) -> Plan`.
//!
//! # Layout
//!
//! A folder per concern, from the ground up; a module imports only those below it, and inside
//! a folder the same holds file by file.
//!
//! 1. `pods/`: a pod, pure. The cached pod (`mod.rs`), which rule of the pod failure policy a
//!    failed pod matches (`failure_policy`), one sync's view of a pod with that rule (`view`),
//!    the pod a Job's template becomes (`template`), the pod watch cache (`cache`). Beside
//!    it on the ground, `metrics`.
//! 2. `plan/`: deciding, pure. `plan` and its steps, over the rules they apply: the back-off
//!    (`backoff`), `backoffLimitPerIndex` (`per_index`), the success policy
//!    (`success_policy`), reading and setting conditions (`conditions`).
//! 3. `cluster/`: the writes, as a trait that is also the runtime's `EventWriter`
//!    (`mod.rs`), and `kube_api`, the real one.
//! 4. `sync/`: one Job's sync (`JobController`, `mod.rs`): `adoption` (which pods a Job
//!    claims) under `claiming` (the claims made: adoption and release, and the labelled list of
//!    a `manualSelector` Job's pods), `status_patch` (the write a status becomes) under
//!    `executor` (applies a plan, each status write checked against the rules first),
//!    `expectations`, `pod_events` (the words of a sync's pod Events, which go out through the
//!    runtime's outbox), and `orphans` (a pure decision, and the release it leads to).
//! 5. `reconcile`: the loop (no sync before both caches have listed), and this file, which
//!    runs it for one term of leadership.
//!
//! The fake cluster (`jobwarden-fake-cluster`) and the simulator (`jobwarden-simulator`) stand
//! above this crate and are never imported by it: the public modules are what the binary, they
//! and `jobwarden explain` (the pod failure policy matcher, the back-off per Job and per index,
//! the pod view they read) need. The `testing` feature adds `testing`: builders of Jobs and
//! pods, and the table runner over `plan`.
//!
//! # End-to-end tests
//!
//! `tests/e2e/` runs against a real kube-apiserver (the `jobwarden-envtest` harness, or the
//! cluster `JOBWARDEN_E2E_KUBECONFIG` names) and compares jobwarden with upstream's Job
//! controller side by side; see `tests/e2e/main.rs`.

pub mod cluster;
pub mod metrics;
pub mod plan;
pub mod pods;
pub mod reconcile;
pub mod sync;

#[cfg(any(test, feature = "testing"))]
pub mod testing;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::Store;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client};

pub use metrics::{ControllerMetrics, METRICS_PREFIX, register_metrics};

use crate::cluster::kube_api::KubeApi;
use crate::plan::PlanConfig;
use crate::reconcile::{LoopConfig, Sources};
use crate::sync::JobController;
use jobwarden_rules::well_known::CONTROLLER_UID_LABEL;
use jobwarden_runtime::Election;
use jobwarden_runtime::client::ControllerClients;
use jobwarden_runtime::job_cache::CachedJob;
use jobwarden_runtime::leader::metrics::LeaderMetrics;
use jobwarden_runtime::leader::{LeaseSettings, SettingsError, Term};

/// How the controller runs. `Default` gives upstream-like values and the controller name
/// `jobwarden.io/job-controller`; set `identity` to something unique per replica (the pod name).
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// The `spec.managedBy` value of the Jobs this controller runs.
    pub controller_name: String,
    pub lease_namespace: String,
    pub lease_name: String,
    /// This replica's name in the Lease.
    pub identity: String,
    /// How long a Lease holds without renewal (client-go's `LeaseDuration`).
    pub lease_duration: Duration,
    /// How long the leader keeps acting without renewing (client-go's `RenewDeadline`).
    pub renew_deadline: Duration,
    /// Between two tries to acquire or renew the Lease (client-go's `RetryPeriod`).
    pub retry_period: Duration,
    /// Jobs synced at once (upstream's `--concurrent-job-syncs`).
    pub concurrent_syncs: u16,
    /// How long pod events wait to be handled together (upstream's 1 s batch period).
    pub batch_period: Duration,
    /// The dispatcher's local worker, whose Jobs this controller runs in place.
    pub local_dispatch: Option<plan::LocalDispatch>,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            controller_name: jobwarden_rules::well_known::JOBWARDEN_CONTROLLER_NAME.to_owned(),
            lease_namespace: "default".to_owned(),
            lease_name: jobwarden_rules::well_known::LEASE_NAME.to_owned(),
            identity: std::env::var("HOSTNAME").unwrap_or_else(|_| "jobwarden".to_owned()),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            concurrent_syncs: 5,
            local_dispatch: None,
            batch_period: Duration::from_secs(1),
        }
    }
}

impl ControllerConfig {
    /// The Lease this configuration names, and this replica in it.
    pub fn lease(&self) -> LeaseSettings {
        LeaseSettings {
            namespace: self.lease_namespace.clone(),
            name: self.lease_name.clone(),
            identity: self.identity.clone(),
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
            annotations: Default::default(),
            published: None,
        }
    }
}

/// The Job controller alone under its own Lease: acquires it, runs the reconcile loop in each
/// term ([`run_term`]), and releases it once `shutdown` resolves and in-flight syncs are done.
/// Its leadership is counted nowhere; `serve` composes the same election itself, with the
/// leadership metrics registered.
pub async fn run(
    clients: ControllerClients,
    config: ControllerConfig,
    metrics: ControllerMetrics,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), SettingsError> {
    let election = Election {
        client: clients.leader_election,
        lease: config.lease(),
        component: config.controller_name.clone(),
        answers: clients.answers,
        metrics: LeaderMetrics::default(),
    };
    let client = clients.work;
    election
        .run(shutdown, |term| {
            run_term(&client, &config, &metrics, term, |_| {})
        })
        .await
}

/// The Job controller's task for one term of leadership: its reconcile loop over `client`
/// until the term's stop, then the drain of its syncs and Events. Each term starts from fresh
/// caches (a new leader lists what the old one watched), and its writes are fenced by the
/// term's flag: once the Lease is lost, none goes out. `on_synced` is handed the Job cache once
/// it holds every Job (the in-process audit reads it).
pub fn run_term(
    client: &Client,
    config: &ControllerConfig,
    metrics: &ControllerMetrics,
    term: Term,
    on_synced: impl FnOnce(Store<CachedJob>) + Send + 'static,
) -> impl Future<Output = ()> + Send + 'static {
    let controller = Arc::new(
        JobController::new(
            KubeApi::new(client.clone(), &config.controller_name, &config.identity)
                .fenced(term.leading),
            PlanConfig {
                controller_name: config.controller_name.clone(),
                local_dispatch: config.local_dispatch.clone(),
                ..PlanConfig::default()
            },
            metrics.clone(),
        )
        .with_event_writer(),
    );
    let loop_config = LoopConfig {
        concurrency: config.concurrent_syncs,
        batch_period: config.batch_period,
    };
    reconcile::run_loop(
        controller,
        kube_sources(client),
        Arc::new(k8s_openapi::jiff::Timestamp::now),
        loop_config,
        term.stop,
        on_synced,
    )
}

/// The watches: every Job (the cache keeps each as its JSON text without `managedFields`), and
/// every pod that carries a Job uid label, as upstream's informers do.
fn kube_sources(client: &Client) -> Sources {
    let jobs = watcher(
        Api::<CachedJob>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .boxed();
    let pods = watcher(
        Api::<Pod>::all(client.clone()),
        watcher::Config::default().labels(CONTROLLER_UID_LABEL),
    )
    .default_backoff()
    .boxed();
    Sources { jobs, pods }
}
