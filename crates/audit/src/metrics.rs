//! The in-process audit's Prometheus metrics, registered into the Registry the server serves on
//! `/metrics`. Setting a metric never fails and never blocks. Every label value known in
//! advance has its series from registration, at 0, so that dashboards show 0 rather than "No
//! data" and `increase()` sees the first change.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::violations::Rule;

/// The `namespace` of each rule's series at 0: no Job lives outside a namespace, so it never
/// counts a violation, and Prometheus drops an empty label when it scrapes, leaving the rule's
/// baseline beside the namespaces that have violations.
pub const NO_NAMESPACE: &str = "";

/// The `result`s of `events`.
pub const EVENT_RESULTS: [&str; 2] = ["published", "failed"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct ViolationLabels {
    pub namespace: String,
    /// `spec`, `rule_names`, `policy` or `status`.
    pub rule: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    /// `published` or `failed`.
    pub result: String,
}

/// Handles to every metric; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct AuditMetrics {
    /// Violations found by the last pass, per namespace and rule. A pair with none has no
    /// series at all (it is removed, not zeroed), but for each rule's baseline at 0 in
    /// [`NO_NAMESPACE`].
    pub violations: Family<ViolationLabels, Gauge>,
    /// Jobs in the last pass's snapshot.
    pub jobs: Gauge,
    /// Jobs of the last pass that could not be read as Jobs.
    pub unreadable_jobs: Gauge,
    /// When the last pass finished, Unix seconds; 0 before the first.
    pub last_pass_timestamp_seconds: Gauge,
    pub events: Family<EventLabels, Counter>,
}

/// Registers the metrics under `jobwarden_audit_` and returns their handles.
pub fn register_metrics(registry: &mut Registry) -> AuditMetrics {
    let m = AuditMetrics::default();
    let r = registry.sub_registry_with_prefix("jobwarden_audit");
    r.register(
        "violations",
        "Violations of the Job rules found by the last audit pass, by namespace and rule",
        m.violations.clone(),
    );
    for rule in Rule::ALL {
        let _series = m.violations.get_or_create(&ViolationLabels {
            namespace: NO_NAMESPACE.to_owned(),
            rule: rule.as_str().to_owned(),
        });
    }
    r.register("jobs", "Jobs audited by the last pass", m.jobs.clone());
    r.register(
        "unreadable_jobs",
        "Jobs of the last audit pass that could not be read as Jobs",
        m.unreadable_jobs.clone(),
    );
    r.register(
        "last_pass_timestamp_seconds",
        "When the last audit pass finished, Unix time",
        m.last_pass_timestamp_seconds.clone(),
    );
    r.register(
        "events",
        "Warning Events the audit tried to publish, by result",
        m.events.clone(),
    );
    for result in EVENT_RESULTS {
        let _series = m.events.get_or_create(&EventLabels {
            result: result.to_owned(),
        });
    }
    m
}
