//! jobwarden's companion Job controller: it runs every Job whose `spec.managedBy` equals its
//! controller name (KEP-4368), doing the whole lifecycle the built-in Job controller skips for
//! such Jobs: creating pods, counting their outcomes exactly once through a tracking finalizer,
//! and writing a status that keeps upstream's status-transition rules.
//!
//! # Public API
//!
//! ```no_run
//! # async fn serve(client: kube::Client) -> anyhow::Result<()> {
//! let mut registry = prometheus_client::registry::Registry::default();
//! let metrics = jobwarden_controller::register_metrics(&mut registry);
//! let config = jobwarden_controller::ControllerConfig {
//!     identity: "jobwarden-7d9f-abcde".to_owned(),
//!     ..Default::default()
//! };
//! let shutdown = async { let _ = tokio::signal::ctrl_c().await; };
//! jobwarden_controller::run(client, config, metrics, shutdown).await
//! # }
//! ```
//!
//! * [`ControllerConfig`]: controller name (`--controller-name`, default
//!   `jobwarden.io/job-controller`), the Lease's namespace, name and holder identity, and its
//!   timing.
//! * [`run`]: acquires the Lease, runs the reconcile loop while leading, stops it when the Lease
//!   is lost, and on `shutdown` drains in-flight syncs and releases the Lease.
//! * [`register_metrics`]: registers the metrics into the server's Registry (served on
//!   `/metrics`) and returns the [`ControllerMetrics`] handles `run` records into.
//! * [`plan::plan`]: the pure heart, `plan(job, pods, now, config) -> Plan`.
//!
//! # Policies
//!
//! Beyond the core lifecycle, `plan` runs the Job API's policies the way upstream's `syncJob`
//! orders them: an outcome already stored (`SuccessCriteriaMet` or `FailureTarget`) stands; else
//! a `FailJob` pod failure policy rule (reason `PodFailurePolicy_{name}`, KEP-4443), the back-off
//! limit, the active deadline, `maxFailedIndexes` and failed indexes; and only then the success
//! policy (KEP-3998). So a sync that meets both fails the Job, and a Job that has met its
//! success criteria ends `Complete` whatever its lingering pods do.
//!
//! # Layout
//!
//! `plan` decides (pure, table-tested in `plan_tests.rs` and, for the policies,
//! `plan_policy_tests.rs`); `pods`, `backoff`, `conditions`, `pod_template`,
//! `pod_failure_policy`, `success_policy` and `per_index` are its pure parts; `status_patch` turns a planned status into the owned-fields
//! merge patch; `executor` applies a plan through the `ClusterApi` trait (`kube_api` is the real
//! one; tests use an in-memory cluster and a crash test stops it after every call);
//! `reconcile` is the kube-runtime wiring; `leader` the Lease.
//!
//! # End-to-end tests
//!
//! `tests/e2e.rs` runs against a real cluster when `JOBWARDEN_E2E_KUBECONFIG` names a kubeconfig
//! (and is skipped otherwise); see that file for what the cluster needs.

pub mod backoff;
pub mod conditions;
pub mod executor;
pub mod kube_api;
pub mod leader;
pub mod metrics;
pub mod per_index;
pub mod plan;
pub mod pod_failure_policy;
pub mod pod_template;
pub mod pods;
pub mod reconcile;
pub mod status_patch;
pub mod success_policy;

#[cfg(test)]
mod crash_tests;
#[cfg(test)]
mod fake_cluster;
#[cfg(test)]
mod testing;

pub use metrics::{ControllerMetrics, register_metrics};

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
    /// How long a Lease holds without renewal.
    pub lease_duration_secs: u64,
    /// How long before expiry the holder renews it.
    pub lease_grace_secs: u64,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            controller_name: jobwarden_rules::well_known::JOBWARDEN_CONTROLLER_NAME.to_owned(),
            lease_namespace: "default".to_owned(),
            lease_name: "jobwarden-job-controller".to_owned(),
            identity: std::env::var("HOSTNAME").unwrap_or_else(|_| "jobwarden".to_owned()),
            lease_duration_secs: 15,
            lease_grace_secs: 5,
        }
    }
}

/// Acquires the Lease, runs the reconcile loop while leading, and releases the Lease once
/// `shutdown` resolves and in-flight syncs are done.
pub async fn run(
    client: kube::Client,
    config: ControllerConfig,
    metrics: ControllerMetrics,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    leader::run(client, config, metrics, shutdown).await
}
