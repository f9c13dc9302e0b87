//! `jobwarden serve`: the webhook server, with the reconcile loop (and the in-process audit over
//! its Job cache) handed to it as a hook, so the server crate never depends on the controller
//! crate. Here the process connects to the cluster: each face gets a client of its own, named in
//! its User-Agent, the controller's with a client-side request rate limit (and its Lease one
//! apart from it: `ControllerClients`). Here too the controllers are composed: one Lease (the
//! runtime's `Election`), and in each term of leadership every controller's task.

use std::sync::Arc;
use std::time::Duration;

use jobwarden_audit::{AuditConfig, AuditMetrics, KubeEventSink, PeriodicAudit};
use jobwarden_controller::{ControllerConfig, ControllerMetrics};
use jobwarden_events::EventReporter;
use jobwarden_runtime::Election;
use jobwarden_runtime::client::{self, ControllerClients, RateLimit};
use jobwarden_runtime::job_cache::CachedJob;
use jobwarden_runtime::leader::Term;
use jobwarden_runtime::leader::metrics::LeaderMetrics;
use jobwarden_server::{BoxFuture, ControllerError, ControllerHook, ControllerStart, ServeArgs};
use kube::runtime::reflector::Store;
use serde_json::Value;
use tokio::sync::watch;

use super::Outcome;
use super::registered_webhooks::{self, RegistrationArgs};

/// `serve`'s flags: the server's, and the controller's below.
#[derive(Debug, clap::Args)]
pub struct ServeCommand {
    #[command(flatten)]
    pub server: ServeArgs,
    #[command(flatten)]
    pub controller: ControllerArgs,
    #[command(flatten)]
    pub registration: RegistrationArgs,
}

/// The reconcile loop's flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ControllerArgs {
    /// Jobs the reconcile loop syncs at once (kube-controller-manager's
    /// --concurrent-job-syncs).
    #[arg(long, env = "JOBWARDEN_CONCURRENT_JOB_SYNCS", default_value_t = 5,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub concurrent_job_syncs: u16,

    /// Requests per second the reconcile loop sends the API server on average (its
    /// client-side limit, as --kube-api-qps is kube-controller-manager's); 0 for none.
    #[arg(long, env = "JOBWARDEN_KUBE_API_QPS", default_value_t = 50.0)]
    pub kube_api_qps: f64,

    /// Requests the reconcile loop may send at once above the average rate.
    #[arg(long, env = "JOBWARDEN_KUBE_API_BURST", default_value_t = 100)]
    pub kube_api_burst: u32,

    /// Seconds between two passes of the in-process audit over the controller's Job cache
    /// (on the leader only); 0 turns it off.
    #[arg(long, env = "JOBWARDEN_AUDIT_INTERVAL_SECONDS", default_value_t = 600)]
    pub audit_interval_seconds: u64,

    /// Seconds a Job delegated to another controller (`spec.managedBy`) may show no sign of
    /// it (not suspended, no status.startTime, no pod counted) before the in-process audit
    /// reports it; 0: never.
    #[arg(
        long,
        env = "JOBWARDEN_AUDIT_STUCK_AFTER_SECONDS",
        default_value_t = 120
    )]
    pub audit_stuck_after_seconds: u64,

    /// Seconds a Lease holds without renewal (as kube-controller-manager's
    /// leader-elect-lease-duration).
    #[arg(
        long,
        env = "JOBWARDEN_LEADER_ELECT_LEASE_DURATION_SECONDS",
        default_value_t = 15
    )]
    pub leader_elect_lease_duration_seconds: u64,

    /// Seconds the leader keeps acting without renewing its Lease; shorter than the Lease
    /// (as kube-controller-manager's leader-elect-renew-deadline).
    #[arg(
        long,
        env = "JOBWARDEN_LEADER_ELECT_RENEW_DEADLINE_SECONDS",
        default_value_t = 10
    )]
    pub leader_elect_renew_deadline_seconds: u64,

    /// Seconds between two tries to acquire or renew the Lease (as kube-controller-manager's
    /// leader-elect-retry-period).
    #[arg(
        long,
        env = "JOBWARDEN_LEADER_ELECT_RETRY_PERIOD_SECONDS",
        default_value_t = 2
    )]
    pub leader_elect_retry_period_seconds: u64,

    /// Dispatched Jobs the dispatcher syncs at once (when the policy's dispatch.workers names
    /// any worker), at most half of them placing new Jobs.
    #[arg(long, env = "JOBWARDEN_DISPATCH_CONCURRENT_SYNCS", default_value_t = 10,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub dispatch_concurrent_syncs: u16,

    /// Requests per second the dispatcher sends the management cluster on average (a budget
    /// of its own, apart from the Job controller's); 0 for none.
    #[arg(long, env = "JOBWARDEN_DISPATCH_KUBE_API_QPS", default_value_t = 50.0)]
    pub dispatch_kube_api_qps: f64,

    /// Requests the dispatcher may send the management cluster at once above its average.
    #[arg(long, env = "JOBWARDEN_DISPATCH_KUBE_API_BURST", default_value_t = 100)]
    pub dispatch_kube_api_burst: u32,

    /// Requests per second the dispatcher sends each worker cluster on average (each worker a
    /// budget of its own: a slow worker never takes another's); 0 for none.
    #[arg(
        long,
        env = "JOBWARDEN_DISPATCH_WORKER_KUBE_API_QPS",
        default_value_t = 50.0
    )]
    pub dispatch_worker_kube_api_qps: f64,

    /// Requests the dispatcher may send a worker at once above its average.
    #[arg(
        long,
        env = "JOBWARDEN_DISPATCH_WORKER_KUBE_API_BURST",
        default_value_t = 100
    )]
    pub dispatch_worker_kube_api_burst: u32,
}

pub fn run(command: ServeCommand) -> Outcome {
    let ServeCommand {
        server,
        controller,
        registration,
    } = command;
    // Held until `run` returns, so the last lines (the drain) are flushed before exit.
    let _logging = jobwarden_server::init_logging(server.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("jobwarden serve: cannot start the runtime: {e}");
            return Outcome::Rejected;
        }
    };
    let served = runtime.block_on(async move {
        let config = cluster_config(&server).await;
        let webhook_client = match &config {
            Some(c) => Some(client::client(c.clone(), "webhook", None)?),
            None => None,
        };
        if let (Some(client), Ok(policy), false) =
            (&webhook_client, server.policy(), server.no_webhook)
        {
            tokio::spawn(registered_webhooks::check(
                client.clone(),
                registration.webhook_configurations,
                policy,
            ));
        }
        let hook = config.map(|c| controller_hook(c, controller));
        jobwarden_server::run(server, webhook_client, hook)
            .await
            .map_err(anyhow::Error::from)
    });
    match served {
        Ok(()) => Outcome::Ok,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "jobwarden serve stopped");
            eprintln!("jobwarden serve: {e:#}");
            Outcome::Rejected
        }
    }
}

/// The cluster's configuration, in-cluster or from the kubeconfig, as kubectl finds it; none
/// with `--dev`, which promises no cluster (a developer's current context must not get a
/// controller writing to it by surprise).
async fn cluster_config(server: &ServeArgs) -> Option<kube::Config> {
    if server.dev {
        return None;
    }
    match kube::Config::infer().await {
        Ok(config) => Some(config),
        Err(error) => {
            tracing::info!(%error, "no cluster configuration found: serving without the reconcile loop or namespace labels");
            None
        }
    }
}

fn controller_hook(config: kube::Config, args: ControllerArgs) -> ControllerHook {
    Box::new(move |mut start: ControllerStart<'_>| {
        let metrics = HookMetrics::register(&mut start);
        let policy = start.policy;
        let policies = start.policies;
        let shutdown = start.shutdown;
        Box::pin(run_controllers(
            config, args, policy, policies, shutdown, metrics,
        ))
    })
}

/// The metrics of every controller the hook runs, registered on the server's registry before
/// the hook's future first runs, as the server asks.
struct HookMetrics {
    controller: ControllerMetrics,
    leader: LeaderMetrics,
    audit: AuditMetrics,
    /// When the policy names workers.
    dispatch: Option<jobwarden_dispatcher::DispatchMetrics>,
}

impl HookMetrics {
    fn register(start: &mut ControllerStart<'_>) -> Self {
        let controller = jobwarden_controller::register_metrics(start.registry);
        let leader = LeaderMetrics::register(
            start
                .registry
                .sub_registry_with_prefix(jobwarden_controller::METRICS_PREFIX),
        );
        let audit = jobwarden_audit::register_metrics(start.registry);
        let dispatch = start.policy.dispatch.is_enabled().then(|| {
            let workers: Vec<&str> = start
                .policy
                .dispatch
                .workers
                .iter()
                .map(|w| w.name.as_str())
                .collect();
            jobwarden_dispatcher::register_metrics(start.registry, &workers)
        });
        HookMetrics {
            controller,
            leader,
            audit,
            dispatch,
        }
    }
}

/// The hook's task: the clients, the in-process audit, and the election whose terms every
/// controller of this process leads in, until `shutdown`.
async fn run_controllers(
    config: kube::Config,
    args: ControllerArgs,
    policy: jobwarden_admission::Policy,
    policies: jobwarden_server::PolicyFeed,
    shutdown: BoxFuture<()>,
    metrics: HookMetrics,
) -> Result<(), ControllerError> {
    let name = policy.controller_name.clone();
    let limit = RateLimit {
        qps: args.kube_api_qps,
        burst: args.kube_api_burst,
    };
    let renew_deadline = Duration::from_secs(args.leader_elect_renew_deadline_seconds);
    // While it dispatches, the leader says on its Lease how it knows each worker's room.
    let (published, lease_views) = watch::channel(jobwarden_dispatcher::run::published::nothing());
    let dispatcher = match metrics.dispatch {
        Some(dispatch_metrics) => Some(Dispatcher::new(
            config.clone(),
            &args,
            &policy,
            policies,
            dispatch_metrics,
            published,
        )?),
        None => None,
    };
    let clients = ControllerClients::new(config, &name, Some(limit), renew_deadline)?;
    let client = clients.work.clone();
    let controller_config = controller_config(&args, &policy, &client, &name, renew_deadline);
    let (jobs_tx, jobs) = watch::channel(None);
    let (stop_audit, audit_stopped) = watch::channel(false);
    if args.audit_interval_seconds > 0 {
        spawn_audit(
            &args,
            policy,
            &controller_config,
            &client,
            metrics.audit,
            jobs,
            audit_stopped,
        );
    }
    let mut lease = controller_config.lease();
    lease.annotations.insert(
        jobwarden_rules::well_known::LEASE_REVISION_ANNOTATION.to_owned(),
        super::REVISION.to_owned(),
    );
    lease.published = dispatcher.is_some().then_some(lease_views);
    let election = Election {
        client: clients.leader_election,
        lease,
        component: name,
        answers: clients.answers,
        metrics: metrics.leader,
    };
    let result = election
        .run(shutdown, |term: Term| {
            lead_term(
                term,
                &client,
                &controller_config,
                &metrics.controller,
                dispatcher.as_ref(),
                &jobs_tx,
            )
        })
        .await;
    let _ = stop_audit.send(true);
    result.map_err(ControllerError::from)
}

/// The Job controller's settings, from the flags and the policy.
fn controller_config(
    args: &ControllerArgs,
    policy: &jobwarden_admission::Policy,
    client: &kube::Client,
    name: &str,
    renew_deadline: Duration,
) -> ControllerConfig {
    ControllerConfig {
        controller_name: name.to_owned(),
        // In a cluster this is the pod's own namespace, where the RBAC grants Leases.
        lease_namespace: client.default_namespace().to_owned(),
        concurrent_syncs: args.concurrent_job_syncs,
        lease_duration: Duration::from_secs(args.leader_elect_lease_duration_seconds),
        renew_deadline,
        retry_period: Duration::from_secs(args.leader_elect_retry_period_seconds),
        // The dispatcher's Jobs placed on its local worker run here, by this controller.
        local_dispatch: policy
            .dispatch
            .local_worker()
            .filter(|_| policy.dispatch.is_enabled())
            .map(|worker| jobwarden_controller::plan::LocalDispatch {
                dispatcher: policy.dispatch.controller_name.clone(),
                worker: worker.to_owned(),
            }),
        ..Default::default()
    }
}

/// The in-process audit over the leader's Job cache (`jobs`), its Events reported as
/// `jobwarden.io/audit`, until `stopped` turns true.
fn spawn_audit(
    args: &ControllerArgs,
    policy: jobwarden_admission::Policy,
    controller_config: &ControllerConfig,
    client: &kube::Client,
    metrics: AuditMetrics,
    jobs: watch::Receiver<Option<Store<CachedJob>>>,
    mut stopped: watch::Receiver<bool>,
) {
    let reporter = EventReporter {
        component: "jobwarden.io/audit".to_owned(),
        instance: controller_config.identity.clone(),
    };
    // The leader's Job cache, once synced; `None` on a replica that is not leading.
    let snapshot = move || {
        jobs.borrow().as_ref().map(|store: &Store<CachedJob>| {
            store
                .state()
                .iter()
                .map(|j| j.value())
                .collect::<Vec<Value>>()
        })
    };
    let audit = PeriodicAudit::new(
        Arc::new(policy),
        snapshot,
        KubeEventSink::new(client.clone(), reporter),
        metrics,
        AuditConfig {
            interval: Duration::from_secs(args.audit_interval_seconds),
            stuck_after: (args.audit_stuck_after_seconds > 0)
                .then(|| Duration::from_secs(args.audit_stuck_after_seconds)),
            ..AuditConfig::default()
        },
    );
    tokio::spawn(audit.run(async move {
        let _ = stopped.wait_for(|s| *s).await;
    }));
}

/// One term of leadership: the Job controller and, when the policy names workers, the
/// dispatcher; the leader's Job cache is the audit's while the term lasts.
fn lead_term(
    term: Term,
    client: &kube::Client,
    controller_config: &ControllerConfig,
    metrics: &ControllerMetrics,
    dispatcher: Option<&Dispatcher>,
    jobs_tx: &watch::Sender<Option<Store<CachedJob>>>,
) -> impl Future<Output = ()> + 'static {
    let withdrawn = {
        let (stop, jobs) = (term.stop.clone(), jobs_tx.clone());
        async move {
            stop.await;
            jobs.send_replace(None);
        }
    };
    let dispatching = dispatcher.map(|d| {
        let namespace = client.default_namespace().to_owned();
        d.run_term(namespace, &controller_config.identity, &term)
    });
    let job_controller =
        jobwarden_controller::run_term(client, controller_config, metrics, term, {
            let jobs = jobs_tx.clone();
            move |store| {
                jobs.send_replace(Some(store));
            }
        });
    // Every controller of this process leads in the same term: another's task joins here, and
    // the term ends once all have stopped.
    async move {
        let dispatching = async {
            if let Some(d) = dispatching {
                d.await;
            }
        };
        tokio::join!(job_controller, dispatching, withdrawn);
    }
}

/// The dispatcher, when the policy names workers: its own client for the management cluster
/// (a budget apart from the Job controller's), and what each term runs it with.
struct Dispatcher {
    client: kube::Client,
    config: jobwarden_dispatcher::DispatchConfig,
    metrics: jobwarden_dispatcher::DispatchMetrics,
    /// The running policy as the file changes: a new `dispatch:` section is taken up in the
    /// same term (the Lease stays), and a removal it vetoes is refused.
    policies: jobwarden_server::PolicyFeed,
    /// Where the dispatcher's Jobs are placed, watched on every replica for the veto of a
    /// removal (registered for the process's life, leading or not).
    placed: tokio::task::JoinHandle<()>,
    _placed_veto: jobwarden_admission::policy::VetoRegistration,
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        self.placed.abort();
    }
}

impl Dispatcher {
    fn new(
        config: kube::Config,
        args: &ControllerArgs,
        policy: &jobwarden_admission::Policy,
        policies: jobwarden_server::PolicyFeed,
        metrics: jobwarden_dispatcher::DispatchMetrics,
        published: jobwarden_dispatcher::run::published::Published,
    ) -> Result<Dispatcher, client::ClientError> {
        let dispatch = policy.dispatch.clone();
        let work = client::work_client_with(
            config,
            &dispatch.controller_name,
            Some(RateLimit {
                qps: args.dispatch_kube_api_qps,
                burst: args.dispatch_kube_api_burst,
            }),
            client::BudgetOptions {
                placements: true,
                metrics: Some(metrics.management_budget.clone()),
            },
        )?;
        let placed = jobwarden_dispatcher::run::placed_jobs::PlacedJobs::default();
        let placed_veto = placed.register(policies.vetoes());
        let placed = tokio::spawn(
            placed
                .clone()
                .watch(work.client.clone(), dispatch.controller_name.clone()),
        );
        Ok(Dispatcher {
            placed,
            _placed_veto: placed_veto,
            client: work.client,
            config: jobwarden_dispatcher::DispatchConfig {
                dispatch,
                namespace: String::new(),
                identity: String::new(),
                concurrency: args.dispatch_concurrent_syncs,
                worker_limit: Some(RateLimit {
                    qps: args.dispatch_worker_kube_api_qps,
                    burst: args.dispatch_worker_kube_api_burst,
                }),
                vetoes: Some(policies.vetoes().clone()),
                published: Some(published),
                management_budget: work.budget,
            },
            metrics,
            policies,
        })
    }

    /// The dispatcher's task for one term, its Secrets read in `namespace`: run under the
    /// running policy's `dispatch:` section, and run again under a new one when the policy
    /// file changes it, in the same term: the Lease stays, and the Jobs are never synced by two
    /// runs at once (one ends before the next starts).
    fn run_term(
        &self,
        namespace: String,
        identity: &str,
        term: &Term,
    ) -> impl Future<Output = ()> + Send + use<> {
        let base = jobwarden_dispatcher::DispatchConfig {
            namespace,
            identity: identity.to_owned(),
            ..self.config.clone()
        };
        let (client, metrics) = (self.client.clone(), self.metrics.clone());
        let (leading, stop) = (term.leading.clone(), term.stop.clone());
        let mut policies = self.policies.subscribe();
        async move {
            let mut dispatch = policies.borrow_and_update().dispatch.clone();
            loop {
                let changed = dispatch_changed(policies.clone(), dispatch.clone());
                let (restart, restarting) = tokio::sync::oneshot::channel::<()>();
                let run_stop = {
                    let stop = stop.clone();
                    async move {
                        tokio::select! {
                            () = stop => {}
                            () = changed => {
                                let _ = restart.send(());
                            }
                        }
                    }
                };
                let config = jobwarden_dispatcher::DispatchConfig {
                    dispatch: dispatch.clone(),
                    ..base.clone()
                };
                jobwarden_dispatcher::run_term(
                    client.clone(),
                    config,
                    metrics.clone(),
                    leading.clone(),
                    run_stop,
                )
                .await;
                if restarting.await.is_err() {
                    // The term ended (or the process is stopping), not the policy changed.
                    return;
                }
                let next = policies.borrow_and_update().dispatch.clone();
                for gone in dispatch
                    .workers
                    .iter()
                    .filter(|w| next.worker(&w.name).is_none())
                {
                    metrics.remove_worker(&gone.name);
                }
                for new in next
                    .workers
                    .iter()
                    .filter(|w| dispatch.worker(&w.name).is_none())
                {
                    metrics.add_worker(&new.name, new.draining);
                }
                tracing::info!(
                    workers = next.workers.len(),
                    "the policy's dispatch section changed: dispatching under it, in the same term"
                );
                dispatch = next;
            }
        }
    }
}

/// Resolves once the running policy's `dispatch:` section is no longer `running`.
async fn dispatch_changed(
    mut policies: watch::Receiver<Arc<jobwarden_admission::Policy>>,
    running: jobwarden_admission::policy::Dispatch,
) {
    loop {
        if policies.changed().await.is_err() {
            // The follower is gone (the process is stopping): the term's end stops the run.
            return std::future::pending().await;
        }
        if policies.borrow_and_update().dispatch != running {
            return;
        }
    }
}
