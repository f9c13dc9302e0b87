//! Leadership: runs a task only while this replica holds a `coordination.k8s.io` Lease, stops
//! it when the Lease is lost, and releases the Lease on shutdown so the next replica takes over
//! at once. It never runs two copies of the task at a time, and knows nothing of Jobs.

use anyhow::Context as _;
use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::{oneshot, watch};

/// Which Lease, and who this replica is in it.
#[derive(Debug, Clone)]
pub struct LeaseSettings {
    pub namespace: String,
    pub name: String,
    /// This replica's name in the Lease.
    pub identity: String,
    /// How long a Lease holds without renewal.
    pub duration_secs: u64,
    /// How long before expiry the holder renews it.
    pub grace_secs: u64,
}

/// Runs `task` each time this replica becomes the leader, handing it a future that resolves
/// when it must stop (shutdown, or the Lease lost); returns once `shutdown` has resolved, the
/// task has stopped and the Lease is released. `on_lead` is told when leading starts and stops.
pub async fn lead<T, F>(
    client: Client,
    lease: LeaseSettings,
    shutdown: impl Future<Output = ()> + Send + 'static,
    on_lead: impl Fn(bool),
    mut task: T,
) -> anyhow::Result<()>
where
    T: FnMut(Stop) -> F,
    F: Future<Output = ()>,
{
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });

    let manager = LeaseManagerBuilder::new(client, &lease.name)
        .with_namespace(&lease.namespace)
        .with_identity(&lease.identity)
        .with_duration(lease.duration_secs)
        .with_grace(lease.grace_secs)
        .build()
        .await
        .context("preparing the leader Lease")?;
    let (leading, lease_task) = manager.watch().await;

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
        tracing::info!(identity = %lease.identity, "leading: starting the reconcile loop");
        on_lead(true);
        task(stop_or_lost(stop_rx.clone(), leading.clone())).await;
        on_lead(false);
        if *stop_rx.borrow() {
            break;
        }
        tracing::warn!(identity = %lease.identity, "lost the Lease: reconcile loop stopped");
    }
    // Closing the channel makes the manager release the Lease before its task ends.
    drop(leading);
    lease_task
        .await
        .context("the Lease task")?
        .context("releasing the Lease")?;
    tracing::info!(identity = %lease.identity, "Lease released");
    Ok(())
}

/// Resolves on shutdown or when leadership is lost.
pub type Stop = std::pin::Pin<Box<dyn Future<Output = ()> + Send + Sync>>;

/// kube-runtime wants a `Sync` future, so the waiting happens in a task and only a oneshot
/// receiver is handed over.
fn stop_or_lost(mut stop: watch::Receiver<bool>, mut leading: watch::Receiver<bool>) -> Stop {
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => {}
            _ = leading.wait_for(|l| !*l) => {}
        }
        let _ = tx.send(());
    });
    Box::pin(async move {
        let _ = rx.await;
    })
}
