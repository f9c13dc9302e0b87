//! Leadership: the reconcile loop runs only while this replica holds the `coordination.k8s.io`
//! Lease, stops when the Lease is lost, and the Lease is released on shutdown so the next
//! replica takes over at once. It never runs two reconcile loops at a time.

use std::sync::Arc;

use anyhow::Context as _;
use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::{oneshot, watch};

use crate::ControllerConfig;
use crate::metrics::ControllerMetrics;
use crate::plan::PlanConfig;
use crate::reconcile::{Context, run_controller};

pub async fn run(
    client: Client,
    config: ControllerConfig,
    metrics: ControllerMetrics,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });

    let manager = LeaseManagerBuilder::new(client.clone(), &config.lease_name)
        .with_namespace(&config.lease_namespace)
        .with_identity(&config.identity)
        .with_duration(config.lease_duration_secs)
        .with_grace(config.lease_grace_secs)
        .build()
        .await
        .context("preparing the leader Lease")?;
    let (leading, lease_task) = manager.watch().await;

    let plan_config = PlanConfig {
        controller_name: config.controller_name.clone(),
        ..PlanConfig::default()
    };
    let ctx = Arc::new(Context::new(
        client,
        plan_config,
        metrics.clone(),
        &config.identity,
    ));

    loop {
        let mut wait_lead = leading.clone();
        let mut wait_stop = stop_rx.clone();
        tokio::select! {
            r = wait_lead.wait_for(|l| *l) => {
                if r.is_err() {
                    anyhow::bail!("the Lease manager stopped");
                }
            }
            _ = wait_stop.wait_for(|s| *s) => break,
        }
        tracing::info!(identity = %config.identity, "leading: starting the reconcile loop");
        metrics.leader.set(1);
        run_controller(ctx.clone(), stop_or_lost(stop_rx.clone(), leading.clone())).await;
        metrics.leader.set(0);
        if *stop_rx.borrow() {
            break;
        }
        tracing::warn!(identity = %config.identity, "lost the Lease: reconcile loop stopped");
    }
    // Closing the channel makes the manager release the Lease before its task ends.
    drop(leading);
    lease_task
        .await
        .context("the Lease task")?
        .context("releasing the Lease")?;
    tracing::info!(identity = %config.identity, "Lease released");
    Ok(())
}

/// Resolves on shutdown or when leadership is lost. kube-runtime wants a `Sync` future, so the
/// waiting happens in a task and only a oneshot receiver is handed over.
fn stop_or_lost(
    mut stop: watch::Receiver<bool>,
    mut leading: watch::Receiver<bool>,
) -> impl Future<Output = ()> + Send + Sync + 'static {
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => {}
            _ = leading.wait_for(|l| !*l) => {}
        }
        let _ = tx.send(());
    });
    async move {
        let _ = rx.await;
    }
}
