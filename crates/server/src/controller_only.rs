//! `serve --no-webhook`: the reconcile loop alone, with `/healthz`, `/readyz` and `/metrics` on
//! the operations listener (HTTPS with `--tls-cert`, `/metrics` gated, unless
//! `--metrics-secure=false`) and nothing else: no admission listener, no namespace watch. The
//! controller Deployment of a two-Deployment install runs this, so that the webhook's replicas
//! never share a process (or a memory limit) with the controller's caches.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::health::{self, Health};
use crate::metrics::Metrics;
use crate::ops::{self, MetricsMode};
use crate::serve_error::ServeError;
use crate::server::load_certificate;
use crate::{
    CONTROLLER_STOP_TIMEOUT, CertFiles, ControllerHook, ControllerStart, PolicyFeed, ServeArgs,
    TlsSource, listen, shutdown,
};

pub(crate) async fn run(
    args: &ServeArgs,
    policies: PolicyFeed,
    mut registry: Registry,
    client: &kube::Client,
    hook: ControllerHook,
) -> Result<(), ServeError> {
    let mode = MetricsMode::choose(args.metrics_secure, true);
    let files = match (mode, &args.tls_cert, &args.tls_key) {
        (MetricsMode::Secure, Some(cert), Some(key)) => Some(CertFiles {
            cert: cert.clone(),
            key: key.clone(),
        }),
        (MetricsMode::Secure, _, _) => return Err(ServeError::NoWebhookWithoutCertificate),
        _ => None,
    };
    let stop = CancellationToken::new();
    let controller = hook(ControllerStart {
        policy: (*policies.current()).clone(),
        policies,
        registry: &mut registry,
        shutdown: Box::pin(stop.clone().cancelled_owned()),
    });
    let health = Arc::new(Health::without_webhook());
    let ops_stop = CancellationToken::new();
    let certificate = match files {
        Some(files) => {
            let metrics = Arc::new(Metrics::register(&mut registry));
            let tls = TlsSource::Files {
                files,
                poll_interval: Duration::from_secs(args.tls_reload_seconds),
            };
            let (store, reloader) = load_certificate(&tls, &metrics, ops_stop.clone()).await?;
            tokio::spawn(reloader.run());
            Some(store)
        }
        None => None,
    };
    let access = ops::gate(mode, Some(client), &mut registry);
    let (listener, addr) = listen::bind_flag(args.metrics_listen, "--metrics-listen")?;
    let router = health::router(health.clone(), Arc::new(registry), access);
    let ops = ops::serve(
        listener,
        router,
        certificate,
        &args.limits.limits(),
        ops_stop.clone(),
    )?;
    mode.log();
    tracing::info!(%addr, "jobwarden controller serving /healthz, /readyz, /metrics (--no-webhook)");

    let mut controller = tokio::spawn(controller);
    let result = tokio::select! {
        signal = shutdown::signal() => {
            tracing::info!(signal, "stopping");
            health.set_draining();
            stop.cancel();
            match tokio::time::timeout(CONTROLLER_STOP_TIMEOUT, &mut controller).await {
                Ok(Ok(result)) => result.map_err(ServeError::ControllerFailed),
                Ok(Err(join)) => Err(ServeError::ControllerPanicked(join)),
                Err(_) => {
                    tracing::warn!("the reconcile loop did not stop in time");
                    Ok(())
                }
            }
        }
        ended = &mut controller => match ended {
            Ok(Ok(())) => Err(ServeError::ControllerStopped),
            Ok(Err(error)) => Err(ServeError::ControllerFailed(error)),
            Err(join) => Err(ServeError::ControllerPanicked(join)),
        },
    };
    ops_stop.cancel();
    if let Err(error) = ops.await {
        tracing::warn!(%error, "the metrics listener panicked");
    }
    result
}
