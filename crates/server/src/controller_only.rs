//! `serve --no-webhook`: the reconcile loop alone, with `/healthz`, `/readyz` and `/metrics` on
//! the plain-HTTP listener and nothing else: no certificate, no HTTPS listener, no namespace
//! watch. The controller Deployment of a two-Deployment install runs this, so that the
//! webhook's replicas never share a process (or a memory limit) with the controller's caches.

use std::sync::Arc;

use anyhow::Context as _;
use jobwarden_admission::Policy;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::health::{self, Health};
use crate::{
    CONTROLLER_STOP_TIMEOUT, ControllerHook, ControllerStart, ServeArgs, listen, shutdown,
};

pub(crate) async fn run(
    args: &ServeArgs,
    policy: Policy,
    hook: ControllerHook,
) -> anyhow::Result<()> {
    let mut registry = Registry::default();
    let stop = CancellationToken::new();
    let controller = hook(ControllerStart {
        policy,
        registry: &mut registry,
        shutdown: Box::pin(stop.clone().cancelled_owned()),
    });
    let health = Arc::new(Health::without_webhook());
    let listener = listen::bind(args.metrics_listen).with_context(|| {
        format!(
            "cannot listen on {} (--metrics-listen)",
            args.metrics_listen
        )
    })?;
    let addr = listener.local_addr()?;
    let ops_stop = CancellationToken::new();
    let ops = tokio::spawn(
        axum::serve(listener, health::router(health.clone(), Arc::new(registry)))
            .with_graceful_shutdown(ops_stop.clone().cancelled_owned())
            .into_future(),
    );
    tracing::info!(%addr, "jobwarden controller serving /healthz, /readyz, /metrics (--no-webhook)");

    let mut controller = tokio::spawn(controller);
    let result = tokio::select! {
        signal = shutdown::signal() => {
            tracing::info!(signal, "stopping");
            health.set_draining();
            stop.cancel();
            match tokio::time::timeout(CONTROLLER_STOP_TIMEOUT, &mut controller).await {
                Ok(Ok(result)) => result,
                Ok(Err(join)) => Err(anyhow::anyhow!("the reconcile loop panicked: {join}")),
                Err(_) => {
                    tracing::warn!("the reconcile loop did not stop in time");
                    Ok(())
                }
            }
        }
        ended = &mut controller => match ended {
            Ok(Ok(())) => Err(anyhow::anyhow!("the reconcile loop stopped unexpectedly")),
            Ok(Err(error)) => Err(error.context("the reconcile loop failed")),
            Err(join) => Err(anyhow::anyhow!("the reconcile loop panicked: {join}")),
        },
    };
    ops_stop.cancel();
    match ops.await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::warn!(%error, "the metrics listener failed"),
        Err(error) => tracing::warn!(%error, "the metrics listener panicked"),
    }
    result
}
