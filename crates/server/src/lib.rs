//! `jobwarden serve`: the admission webhook over HTTPS. axum routes on hyper connections over
//! rustls, a certificate that is reloaded from disk without a restart, limits on everything a
//! client controls, health probes and metrics (over TLS, `/metrics` only for who may read it,
//! where there is a cluster), and a drain on SIGTERM. The review itself is
//! `jobwarden_admission`'s; this crate only carries bytes to it and back.
//!
//! The binary calls [`init_logging`] and then [`run`] with the parsed [`ServeArgs`] and,
//! optionally, a [`ControllerHook`] that starts the reconcile loop. Tests and embedders use
//! [`start`] with [`Settings`] directly.

mod body_budget;
mod config;
mod controller_only;
pub mod dev_cert;
mod error_chain;
mod health;
mod https;
mod limits;
mod listen;
mod logging;
mod metrics;
mod metrics_access;
mod namespaces;
mod ops;
pub mod policy_reload;
mod rejection;
mod request_body;
mod routes;
mod serve_error;
mod server;
mod shutdown;
pub mod tls_reload;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error_chain::error_chain;

pub use config::{
    LimitArgs, LogFormat, PolicyError, PolicyProblems, SelectorError, ServeArgs, load_policy_file,
    parse_policy, parse_policy_bytes,
};
pub use health::Health;
pub use limits::Limits;
pub use listen::{ListenAddr, ListenError};
pub use logging::{LoggingGuard, init_logging};
pub use metrics::Metrics;
pub use namespaces::NamespaceLabels;
pub use policy_reload::PolicyFeed;
pub use serve_error::{ControllerError, ServeError};
pub use server::{RunningServer, Settings, TlsSource, start};
pub use tls_reload::{CertFiles, ReloadCounts};

/// A boxed, sendable future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What the reconcile loop is started with.
pub struct ControllerStart<'a> {
    /// The policy the webhook enforces at start (the in-process audit holds stored Jobs to
    /// it); its `controller_name` is the `spec.managedBy` value the loop answers to.
    pub policy: jobwarden_admission::Policy,
    /// The running policy as it changes (the `--config` file followed), and the vetoes a new
    /// one must pass: a consumer that takes changes up subscribes here and may register a veto.
    pub policies: PolicyFeed,
    /// The registry served at /metrics: register the controller's metrics here, before the
    /// returned future first runs.
    pub registry: &'a mut Registry,
    /// Completes when the process is stopping (SIGTERM): finish up and return.
    pub shutdown: BoxFuture<()>,
}

/// Starts the reconcile loop: called once, only when a cluster is reachable and
/// `--no-controller` is not set. The returned future runs beside the webhook (or alone, with
/// `--no-webhook`); if it fails, the process stops and [`run`] returns that error (so the pod
/// restarts).
pub type ControllerHook =
    Box<dyn for<'a> FnOnce(ControllerStart<'a>) -> BoxFuture<Result<(), ControllerError>> + Send>;

/// How long the reconcile loop gets to stop after the webhook has drained.
const CONTROLLER_STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `jobwarden serve` until SIGTERM or SIGINT, then drains and returns. `cluster` is the
/// client for the cluster, `None` without one (and with `--dev`, which promises none): the
/// namespace watch uses it, and whether there is one decides whether the controller starts.
pub async fn run(
    args: ServeArgs,
    cluster: Option<kube::Client>,
    controller: Option<ControllerHook>,
) -> Result<(), ServeError> {
    // kube's client builds its TLS config from the process-wide provider; the server names its
    // own. An error here only means a provider is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();

    let client = cluster.filter(|_| !args.dev);
    let mut registry = Registry::default();
    // Followed until `run` returns.
    let following = CancellationToken::new();
    let _following = following.clone().drop_guard();
    let policies = policy_reload::start(&args, &mut registry, client.as_ref(), following)?;
    let policy = (*policies.current()).clone();
    if args.no_webhook {
        let (Some(client), Some(hook)) = (&client, controller) else {
            return Err(ServeError::NoWebhookWithoutCluster);
        };
        return controller_only::run(&args, policies, registry, client, hook).await;
    }
    let (mut settings, dev) = settings_from_args(&args, policy.clone())?;
    settings.policies = Some(policies.subscribe());

    let controller_stop = CancellationToken::new();
    let controller_future = match (&client, controller) {
        (Some(_), Some(hook)) if !args.no_controller => Some(hook(ControllerStart {
            policy: policy.clone(),
            policies: policies.clone(),
            registry: &mut registry,
            shutdown: Box::pin(controller_stop.clone().cancelled_owned()),
        })),
        (Some(_), _) if args.no_controller => {
            tracing::info!("--no-controller: the reconcile loop does not run");
            None
        }
        _ => None,
    };

    let server = start(settings, registry, client).await?;
    if let Some(dev) = dev {
        eprintln!("{}", dev.instructions(server.https_addr().port()));
    }

    let shutdown = server.shutdown_token();
    stop_on_signal(shutdown.clone(), controller_stop.clone());
    let controller_task = controller_future.map(|future| spawn_controller(future, shutdown));

    let served = server.wait().await;
    controller_stop.cancel();
    let controlled = match controller_task {
        None => Ok(()),
        Some(task) => wait_for_controller(task).await,
    };
    served.and(controlled)
}

/// On SIGTERM or SIGINT: the reconcile loop stops at once so its Lease passes to another
/// replica while this one drains its webhook requests.
fn stop_on_signal(shutdown: CancellationToken, controller_stop: CancellationToken) {
    tokio::spawn(async move {
        let signal = shutdown::signal().await;
        tracing::info!(signal, "stopping");
        controller_stop.cancel();
        shutdown.cancel();
    });
}

/// Runs the reconcile loop beside the webhook; if it fails, the server is stopped too.
fn spawn_controller(
    future: BoxFuture<Result<(), ControllerError>>,
    shutdown: CancellationToken,
) -> JoinHandle<Result<(), ServeError>> {
    tokio::spawn(async move {
        let result = future.await;
        if let Err(error) = &result {
            tracing::error!(
                error = error_chain(&**error),
                "the reconcile loop failed; stopping"
            );
            shutdown.cancel();
        }
        result.map_err(ServeError::ControllerFailed)
    })
}

/// The reconcile loop's result, once it has stopped (or after [`CONTROLLER_STOP_TIMEOUT`],
/// when it is left behind).
async fn wait_for_controller(task: JoinHandle<Result<(), ServeError>>) -> Result<(), ServeError> {
    match tokio::time::timeout(CONTROLLER_STOP_TIMEOUT, task).await {
        Ok(Ok(result)) => result,
        Ok(Err(join)) => Err(ServeError::ControllerPanicked(join)),
        Err(_) => {
            tracing::warn!("the reconcile loop did not stop in time");
            Ok(())
        }
    }
}

/// Settings from the command line; with `--dev`, also the certificate made for it.
fn settings_from_args(
    args: &ServeArgs,
    policy: jobwarden_admission::Policy,
) -> Result<(Settings, Option<dev_cert::DevCert>), ServeError> {
    let (tls, dev) = match (&args.tls_cert, &args.tls_key, args.dev) {
        (_, _, true) => {
            let dev = dev_cert::make().map_err(ServeError::DevCertificate)?;
            let tls = TlsSource::Pem {
                cert_pem: dev.cert_pem.clone().into_bytes(),
                key_pem: dev.key_pem.clone().into_bytes(),
            };
            (tls, Some(dev))
        }
        (Some(cert), Some(key), false) => (
            TlsSource::Files {
                files: CertFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                },
                poll_interval: Duration::from_secs(args.tls_reload_seconds),
            },
            None,
        ),
        _ => return Err(ServeError::NoCertificate),
    };
    let settings = Settings {
        listen: args.listen,
        metrics_listen: args.metrics_listen,
        tls,
        policy,
        policies: None,
        limits: args.limits.limits(),
        shutdown_delay: Duration::from_secs(args.limits.shutdown_delay_seconds),
        shutdown_timeout: Duration::from_secs(args.limits.shutdown_timeout_seconds),
        metrics_secure: args.metrics_secure,
    };
    Ok((settings, dev))
}
