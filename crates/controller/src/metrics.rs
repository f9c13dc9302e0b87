//! The controller's Prometheus metrics, registered into a Registry the server owns (it serves
//! `/metrics`). Counters and gauges only; recording a metric never fails and never blocks.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use jobwarden_runtime::events::metrics::EventMetrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SyncLabels {
    /// `success`, `conflict` (lost an optimistic-concurrency race) or `error`.
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FinishedLabels {
    pub completion_mode: String,
    /// `succeeded` or `failed`.
    pub result: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CreatedLabels {
    /// `new`, `recreate_terminating_or_failed` or `recreate_failed`, as upstream.
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StartTimeoutLabels {
    /// The container's waiting reason: one of the five `NOT_STARTED_REASONS`.
    pub reason: String,
}

/// Handles to every metric; cheap to clone (each is an `Arc` inside).
#[derive(Clone, Debug)]
pub struct ControllerMetrics {
    pub syncs: Family<SyncLabels, Counter>,
    pub sync_duration: Histogram,
    pub jobs_finished: Family<FinishedLabels, Counter>,
    pub pods_created: Family<CreatedLabels, Counter>,
    pub pod_start_timeouts: Family<StartTimeoutLabels, Counter>,
    pub jobs_managed: Gauge,
    pub foreign_jobs_seen: Counter,
    pub rejected_status_writes: Counter,
    pub cached_pods: Gauge,
    /// `events_dropped` and `events_queued`, the runtime's Event outbox's.
    pub events: EventMetrics,
}

impl Default for ControllerMetrics {
    /// Metrics registered nowhere: for tests, or a binary that does not serve them.
    fn default() -> Self {
        ControllerMetrics {
            syncs: Family::default(),
            sync_duration: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            jobs_finished: Family::default(),
            pods_created: Family::default(),
            pod_start_timeouts: Family::default(),
            jobs_managed: Gauge::default(),
            foreign_jobs_seen: Counter::default(),
            rejected_status_writes: Counter::default(),
            cached_pods: Gauge::default(),
            events: EventMetrics::default(),
        }
    }
}

/// The prefix of the controller's metrics. The leadership metrics (`jobwarden_runtime`'s
/// `LeaderMetrics`) are served under it too: they were the controller's before the runtime
/// held them, and dashboards and alerts read them by these names.
pub const METRICS_PREFIX: &str = "jobwarden_controller";

/// Registers the controller's metrics under `jobwarden_controller_` and returns their handles.
pub fn register_metrics(registry: &mut Registry) -> ControllerMetrics {
    let m = ControllerMetrics::default();
    let r = registry.sub_registry_with_prefix(METRICS_PREFIX);
    r.register("syncs", "Job syncs, by result", m.syncs.clone());
    r.register(
        "sync_duration_seconds",
        "Time to sync one Job: read, plan and apply",
        m.sync_duration.clone(),
    );
    r.register(
        "jobs_finished",
        "Jobs that reached Complete or Failed, by completion mode, result and reason",
        m.jobs_finished.clone(),
    );
    r.register(
        "pods_created",
        "Pods created, by reason",
        m.pods_created.clone(),
    );
    r.register(
        "pod_start_timeouts",
        "Pods failed for not starting within jobwarden.io/pod-start-timeout, by the container's waiting reason",
        m.pod_start_timeouts.clone(),
    );
    r.register(
        "jobs_managed",
        "Unfinished Jobs whose spec.managedBy names this controller",
        m.jobs_managed.clone(),
    );
    r.register(
        "foreign_jobs_seen",
        "Jobs seen whose spec.managedBy names another controller (each counted once)",
        m.foreign_jobs_seen.clone(),
    );
    r.register(
        "rejected_status_writes",
        "Planned status writes refused because they break the status rules (a bug)",
        m.rejected_status_writes.clone(),
    );
    r.register(
        "cached_pods",
        "Pods in the watch cache (every pod with a Job uid label)",
        m.cached_pods.clone(),
    );
    ControllerMetrics {
        events: EventMetrics::register(r),
        ..m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn metrics_are_exposed_under_the_controller_prefix() {
        let mut registry = Registry::default();
        let m = register_metrics(&mut registry);
        m.syncs
            .get_or_create(&SyncLabels {
                result: "success".to_owned(),
            })
            .inc();
        m.jobs_managed.set(3);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        assert!(
            text.contains("jobwarden_controller_syncs_total{result=\"success\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("jobwarden_controller_jobs_managed 3"),
            "{text}"
        );
        assert!(
            text.contains("jobwarden_controller_events_dropped_total{reason=\"queue_full\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("jobwarden_controller_sync_duration_seconds_bucket"),
            "{text}"
        );
    }
}
