//! Putting the server together: load the certificate, bind both listeners, start the certificate
//! reloader, the namespace reflector and the operations endpoints (over TLS with the same
//! certificate, `/metrics` gated, when there is a cluster), and run the drain sequence
//! when asked to stop. `start` fails fast on anything wrong at start; after that, nothing a
//! client does stops the server.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use jobwarden_admission::{Policy, Reviewer};
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::BoxFuture;
use crate::body_budget::BodyBudget;
use crate::health::{self, Health};
use crate::https;
use crate::limits::Limits;
use crate::listen::{self, ListenAddr};
use crate::metrics::Metrics;
use crate::namespaces::NamespaceLabels;
use crate::ops::{self, MetricsMode};
use crate::routes::{self, AdmissionState};
use crate::serve_error::ServeError;
use crate::tls_reload::{self, CertFiles, CertStore, LoadedCert, ReloadCounts};

/// Where the serving certificate comes from.
#[derive(Debug, Clone)]
pub enum TlsSource {
    /// PEM files, re-read every `poll_interval` and swapped in when they change.
    Files {
        files: CertFiles,
        poll_interval: Duration,
    },
    /// PEM held in memory (the `--dev` certificate); never reloaded.
    Pem { cert_pem: Vec<u8>, key_pem: Vec<u8> },
}

/// Everything the server needs, already validated.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: ListenAddr,
    pub metrics_listen: ListenAddr,
    pub tls: TlsSource,
    pub policy: Policy,
    /// The running policy as it changes: when given, each review is answered under the
    /// policy it holds then (`policy` is only the first).
    pub policies: Option<watch::Receiver<Arc<Policy>>>,
    pub limits: Limits,
    /// Time between the shutdown signal (readiness turns false) and closing the listener.
    pub shutdown_delay: Duration,
    /// Time open requests get to finish once the listener is closed.
    pub shutdown_timeout: Duration,
    /// `--metrics-secure`: with a cluster, the operations listener speaks TLS and `/metrics`
    /// answers only tokens allowed to `get` it.
    pub metrics_secure: bool,
}

/// A server that is accepting connections.
pub struct RunningServer {
    https_addr: SocketAddr,
    metrics_addr: SocketAddr,
    shutdown: CancellationToken,
    reloads: watch::Receiver<ReloadCounts>,
    task: JoinHandle<Result<(), ServeError>>,
}

impl RunningServer {
    /// The bound HTTPS address (useful with port 0).
    pub fn https_addr(&self) -> SocketAddr {
        self.https_addr
    }

    /// The bound address of /healthz, /readyz and /metrics.
    pub fn metrics_addr(&self) -> SocketAddr {
        self.metrics_addr
    }

    /// A token whose cancellation starts the drain sequence (what SIGTERM does).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Certificate reloads and failures so far; changes whenever the reloader acts.
    pub fn certificate_reloads(&self) -> watch::Receiver<ReloadCounts> {
        self.reloads.clone()
    }

    /// Waits until the server has drained and stopped.
    pub async fn wait(self) -> Result<(), ServeError> {
        self.task.await.map_err(ServeError::ServerPanicked)?
    }
}

/// Starts the server. `registry` may already hold other components' metrics (the
/// controller's); the server adds its own and serves them all at /metrics. With a `client`,
/// namespace labels are watched when the policy's suspend-on-create selector needs them.
pub async fn start(
    settings: Settings,
    mut registry: Registry,
    client: Option<kube::Client>,
) -> Result<RunningServer, ServeError> {
    check_body_budget(&settings.limits)?;
    let metrics = Arc::new(Metrics::register(&mut registry));
    let metrics_mode = MetricsMode::choose(settings.metrics_secure, client.is_some());
    let access = ops::gate(metrics_mode, client.as_ref(), &mut registry);
    let registry = Arc::new(registry);
    let needs_namespaces = settings.policy.needs_namespace_labels();
    if needs_namespaces && client.is_none() {
        tracing::warn!(
            "the policy has a namespace selector but no cluster is reachable: only namespace names will match"
        );
    }
    let health = Arc::new(Health::new(needs_namespaces && client.is_some()));
    let background = CancellationToken::new();

    let (store, reloader) = load_certificate(&settings.tls, &metrics, background.clone()).await?;
    health.set_certificate_loaded();
    let acceptor = tls_acceptor(&store)?;

    let (listener, https_addr) = listen::bind_flag(settings.listen, "--listen")?;
    let (metrics_listener, metrics_addr) =
        listen::bind_flag(settings.metrics_listen, "--metrics-listen")?;

    let reloads = reloader.counts.subscribe();
    tokio::spawn(reloader.run());

    // Namespace labels are watched only when a selector reads them.
    let namespaces = client
        .as_ref()
        .filter(|_| needs_namespaces)
        .map(|client| NamespaceLabels::start(client.clone(), health.clone(), background.clone()));
    let app = admission_app(&settings, metrics, namespaces, background.clone());

    let ops = health::router(health.clone(), registry, access);
    let ops_certificate = (metrics_mode == MetricsMode::Secure).then(|| store.clone());
    let ops_task = ops::serve(
        metrics_listener,
        ops,
        ops_certificate,
        &settings.limits,
        background.clone(),
    )?;
    metrics_mode.log();

    let stop_accepting = CancellationToken::new();
    let https_task = tokio::spawn(https::serve(
        listener,
        acceptor,
        app,
        settings.limits.clone(),
        stop_accepting.clone(),
        settings.shutdown_timeout,
    ));
    health.set_accepting(true);
    tracing::info!(%https_addr, %metrics_addr, "jobwarden webhook serving");

    let shutdown = CancellationToken::new();
    let drain = Drain {
        health,
        background,
        stop_accepting,
        delay: settings.shutdown_delay,
    };
    let task = tokio::spawn(drain.after(shutdown.clone(), https_task, ops_task));

    Ok(RunningServer {
        https_addr,
        metrics_addr,
        shutdown,
        reloads,
        task,
    })
}

/// The handshakes of the HTTPS listener, reading the certificate `store` holds at the time.
fn tls_acceptor(store: &Arc<CertStore>) -> Result<TlsAcceptor, ServeError> {
    let tls_config =
        tls_reload::server_config(store.clone()).map_err(|source| ServeError::Tls {
            flag: "--listen",
            source,
        })?;
    Ok(TlsAcceptor::from(Arc::new(tls_config)))
}

/// Every request's body must fit in the budget shared by the requests being read.
fn check_body_budget(limits: &Limits) -> Result<(), ServeError> {
    if limits.max_buffered_body_bytes < limits.max_body_bytes {
        return Err(ServeError::BudgetBelowBodyLimit {
            buffered: limits.max_buffered_body_bytes,
            body: limits.max_body_bytes,
        });
    }
    Ok(())
}

/// The admission routes, answering under the running policy within the body limits.
fn admission_app(
    settings: &Settings,
    metrics: Arc<Metrics>,
    namespaces: Option<NamespaceLabels>,
    background: CancellationToken,
) -> Router {
    let body_budget = BodyBudget::new(
        settings.limits.max_buffered_body_bytes,
        metrics.body_bytes(),
    );
    let reviewers = follow_policy(settings, background);
    routes::router(
        AdmissionState {
            reviewers,
            metrics,
            namespaces,
            max_body_bytes: settings.limits.max_body_bytes,
            body_budget,
            request_timeout: settings.limits.request_timeout,
        },
        &settings.limits,
    )
}

/// What the drain sequence stops, and the delay before it closes the HTTPS listener.
struct Drain {
    health: Arc<Health>,
    background: CancellationToken,
    stop_accepting: CancellationToken,
    delay: Duration,
}

impl Drain {
    /// Waits for `shutdown`, then drains: readiness turns false, the delay passes, the HTTPS
    /// listener closes and finishes its open requests, then the background tasks and the
    /// operations listener stop. The HTTPS listener ending first is an error.
    async fn after(
        self,
        shutdown: CancellationToken,
        mut https_task: JoinHandle<()>,
        ops_task: JoinHandle<()>,
    ) -> Result<(), ServeError> {
        let Drain {
            health,
            background,
            stop_accepting,
            delay,
        } = self;
        let early_end = tokio::select! {
            _ = shutdown.cancelled() => None,
            ended = &mut https_task => Some(ended),
        };
        if let Some(ended) = early_end {
            health.set_draining();
            background.cancel();
            ended.map_err(ServeError::ListenerPanicked)?;
            return Err(ServeError::ListenerStopped);
        }
        // Readiness first, so Service endpoints drop this pod while it still answers whatever
        // kube-apiserver sends in the meantime.
        health.set_draining();
        tracing::info!(?delay, "shutting down: readiness is now false");
        tokio::time::sleep(delay).await;
        tracing::info!("closing the HTTPS listener; finishing open requests");
        stop_accepting.cancel();
        let drained = https_task.await;
        health.set_accepting(false);
        background.cancel();
        if let Err(error) = ops_task.await {
            tracing::warn!(%error, "the metrics listener panicked");
        }
        drained.map_err(ServeError::ListenerPanicked)?;
        tracing::info!("jobwarden webhook stopped");
        Ok(())
    }
}

/// The reviewer of the running policy: a new one each time the policy changes, so a review
/// reads the policy in force with one borrow of a watch (no lock held while it reviews).
fn follow_policy(settings: &Settings, stop: CancellationToken) -> watch::Receiver<Arc<Reviewer>> {
    let Some(mut policies) = settings.policies.clone() else {
        let (_, reviewers) = watch::channel(Arc::new(Reviewer::new(settings.policy.clone())));
        return reviewers;
    };
    let first = Reviewer::new((**policies.borrow_and_update()).clone());
    let (sender, reviewers) = watch::channel(Arc::new(first));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                changed = policies.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let policy = (**policies.borrow_and_update()).clone();
                    sender.send_replace(Arc::new(Reviewer::new(policy)));
                }
            }
        }
    });
    reviewers
}

/// What keeps the serving certificate current: polls its files (nothing for an in-memory
/// one) until cancelled, counting reloads in `counts`.
pub(crate) struct Reloader {
    pub counts: watch::Sender<ReloadCounts>,
    poll: BoxFuture<()>,
}

impl Reloader {
    pub(crate) async fn run(self) {
        self.poll.await
    }
}

/// Loads the serving certificate (failing here stops the server), counts it in `metrics`, and
/// returns where handshakes find it with the reloader to start once the listeners are bound.
pub(crate) async fn load_certificate(
    tls: &TlsSource,
    metrics: &Arc<Metrics>,
    stop: CancellationToken,
) -> Result<(Arc<CertStore>, Reloader), ServeError> {
    let (counts, _) = watch::channel(ReloadCounts::default());
    let (loaded, store, poll): (LoadedCert, _, BoxFuture<()>) = match tls {
        TlsSource::Files {
            files,
            poll_interval,
        } => {
            let (loaded, cert, key) =
                files
                    .load()
                    .await
                    .map_err(|source| ServeError::CertificateFiles {
                        files: files.clone(),
                        source,
                    })?;
            let store = Arc::new(CertStore::new(&loaded));
            let poll = tls_reload::watch_files(
                files.clone(),
                (cert, key),
                *poll_interval,
                store.clone(),
                metrics.clone(),
                counts.clone(),
                stop,
            );
            (loaded, store, Box::pin(poll))
        }
        TlsSource::Pem { cert_pem, key_pem } => {
            let loaded =
                tls_reload::load_pem(cert_pem, key_pem).map_err(ServeError::CertificatePem)?;
            let store = Arc::new(CertStore::new(&loaded));
            (loaded, store, Box::pin(std::future::ready(())))
        }
    };
    log_certificate(&loaded);
    metrics.certificate_loaded(true, loaded.not_after);
    Ok((store, Reloader { counts, poll }))
}

fn log_certificate(loaded: &LoadedCert) {
    tracing::info!(
        subject = %loaded.subject,
        dns_names = ?loaded.dns_names,
        not_after = loaded.not_after,
        "TLS certificate loaded"
    );
}
