//! The controller's Prometheus metrics, registered into a Registry the server owns (it serves
//! `/metrics`). Counters and gauges only; recording a metric never fails and never blocks.
//! Every label set known in advance is created at registration, at 0 (Prometheus's
//! instrumentation guidance): a series that first appears at 1 has no earlier sample for
//! `increase()` to grow from, and a dashboard panel over a family without series shows "No
//! data" instead of 0.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use jobwarden_runtime::events::metrics::EventMetrics;

use jobwarden_rules::pod_timing::NOT_STARTED_REASONS;
use jobwarden_rules::well_known::{
    INDEXED, NON_INDEXED, REASON_BACKOFF_LIMIT_EXCEEDED, REASON_COMPLETIONS_REACHED,
    REASON_DEADLINE_EXCEEDED, REASON_FAILED_INDEXES, REASON_MAX_FAILED_INDEXES_EXCEEDED,
    REASON_POD_FAILURE_POLICY, REASON_SUCCESS_POLICY,
};

use crate::plan::CreateReason;

/// The `result` of a sync, as the Job controller labels it.
pub const SYNC_RESULTS: [&str; 3] = ["success", "conflict", "error"];

/// Every `jobs_finished` label set a Job can end with: each reason `metric_reason` folds a
/// finish into, with the completion modes it can happen in (a success policy and per-index
/// back-off are for Indexed Jobs only, so their reasons never come with `NonIndexed`).
pub fn finished_label_sets() -> Vec<FinishedLabels> {
    const BOTH: &[&str] = &[NON_INDEXED, INDEXED];
    let reasons: [(bool, &str, &[&str]); 7] = [
        (true, REASON_COMPLETIONS_REACHED, BOTH),
        (true, REASON_SUCCESS_POLICY, &[INDEXED]),
        (false, REASON_BACKOFF_LIMIT_EXCEEDED, BOTH),
        (false, REASON_DEADLINE_EXCEEDED, BOTH),
        (false, REASON_POD_FAILURE_POLICY, BOTH),
        (false, REASON_FAILED_INDEXES, &[INDEXED]),
        (false, REASON_MAX_FAILED_INDEXES_EXCEEDED, &[INDEXED]),
    ];
    reasons
        .into_iter()
        .flat_map(|(succeeded, reason, modes)| {
            modes.iter().map(move |mode| FinishedLabels {
                completion_mode: (*mode).to_owned(),
                result: if succeeded { "succeeded" } else { "failed" }.to_owned(),
                reason: reason.to_owned(),
            })
        })
        .collect()
}

/// Every reason a pod is created for.
pub const CREATE_REASONS: [CreateReason; 3] = [
    CreateReason::New,
    CreateReason::RecreateTerminatingOrFailed,
    CreateReason::RecreateFailed,
];

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
    for result in SYNC_RESULTS {
        let _series = m.syncs.get_or_create(&SyncLabels {
            result: result.to_owned(),
        });
    }
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
    for labels in finished_label_sets() {
        let _series = m.jobs_finished.get_or_create(&labels);
    }
    r.register(
        "pods_created",
        "Pods created, by reason",
        m.pods_created.clone(),
    );
    for reason in CREATE_REASONS {
        let _series = m.pods_created.get_or_create(&CreatedLabels {
            reason: reason.label().to_owned(),
        });
    }
    r.register(
        "pod_start_timeouts",
        "Pods failed for not starting within jobwarden.io/pod-start-timeout, by the container's waiting reason",
        m.pod_start_timeouts.clone(),
    );
    for reason in NOT_STARTED_REASONS {
        let _series = m.pod_start_timeouts.get_or_create(&StartTimeoutLabels {
            reason: reason.to_owned(),
        });
    }
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

    /// Nothing recorded yet: every label value known in advance is served at 0.
    #[test]
    fn known_label_values_are_served_at_zero_before_anything_happens() {
        let mut registry = Registry::default();
        let _m = register_metrics(&mut registry);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        // Each family's series at 0, sorted (a family keeps them in no order).
        let zero = |family: &str| -> Vec<&str> {
            let mut series: Vec<&str> = text
                .lines()
                .filter_map(|l| l.strip_prefix(family)?.strip_suffix(" 0"))
                .collect();
            series.sort_unstable();
            series
        };
        assert_eq!(
            zero("jobwarden_controller_pod_start_timeouts_total"),
            [
                "{reason=\"CreateContainerConfigError\"}",
                "{reason=\"CreateContainerError\"}",
                "{reason=\"ErrImagePull\"}",
                "{reason=\"ImagePullBackOff\"}",
                "{reason=\"InvalidImageName\"}",
            ],
            "{text}"
        );
        for (family, series) in [
            ("jobwarden_controller_syncs_total", 3),
            ("jobwarden_controller_jobs_finished_total", 11),
            ("jobwarden_controller_pods_created_total", 3),
            ("jobwarden_controller_events_dropped_total", 4),
        ] {
            assert_eq!(zero(family).len(), series, "{family}: {text}");
        }
        assert!(
            text.contains(
                "jobwarden_controller_jobs_finished_total{completion_mode=\"Indexed\",result=\"failed\",reason=\"FailedIndexes\"} 0"
            ),
            "{text}"
        );
    }

    /// Whatever reason a Job ends with, its label set is one of those served from the start.
    #[test]
    fn every_finish_lands_on_a_label_set_served_from_the_start() {
        use crate::plan::Finish;
        use crate::sync::metric_reason;
        let known = finished_label_sets();
        for (succeeded, reason, indexed) in [
            (true, REASON_COMPLETIONS_REACHED, false),
            (true, REASON_COMPLETIONS_REACHED, true),
            (true, "LeaderSucceeded", true),
            (true, REASON_SUCCESS_POLICY, true),
            (false, REASON_BACKOFF_LIMIT_EXCEEDED, false),
            (false, REASON_DEADLINE_EXCEEDED, true),
            (false, "PodFailurePolicy_ExitCode42", false),
            (false, "PodFailurePolicy_0", true),
            (false, REASON_FAILED_INDEXES, true),
            (false, REASON_MAX_FAILED_INDEXES_EXCEEDED, true),
        ] {
            let finish = Finish {
                succeeded,
                reason: reason.to_owned(),
            };
            let labels = FinishedLabels {
                completion_mode: if indexed { INDEXED } else { NON_INDEXED }.to_owned(),
                result: if succeeded { "succeeded" } else { "failed" }.to_owned(),
                reason: metric_reason(&finish).to_owned(),
            };
            assert!(known.contains(&labels), "{labels:?} not in {known:#?}");
        }
    }
}
