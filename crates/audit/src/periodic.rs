//! The audit inside `serve`: every interval, a snapshot of the Jobs the process already keeps
//! (it never lists Jobs itself), the gauge set from it, and the Warning Events it owes
//! published. A thin shell over `snapshot` and `event_memory`; tests drive [`PeriodicAudit::pass`]
//! directly and never wait for the timer.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jobwarden_admission::Policy;
use k8s_openapi::jiff::Timestamp;

use crate::event_memory::EventMemory;
use crate::event_sink::EventSink;
use crate::metrics::{AuditMetrics, EventLabels, ViolationLabels};
use crate::snapshot::{SnapshotFindings, StoredJob, audit_snapshot};
use crate::stuck::{DEFAULT_STUCK_AFTER, add_stuck};

#[derive(Debug, Clone)]
pub struct AuditConfig {
    /// Time between two passes.
    pub interval: Duration,
    /// Time before trying again when no snapshot is available yet.
    pub retry_when_unavailable: Duration,
    /// How long a delegated Job may show no sign of its controller before it is reported
    /// ([`crate::stuck`]); `None`: never.
    pub stuck_after: Option<Duration>,
    /// Events published per pass at most; the rest stay owed to the next passes, so a first
    /// pass over a cluster full of old violations does not flood the API server.
    pub max_events_per_pass: usize,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            interval: Duration::from_secs(600),
            retry_when_unavailable: Duration::from_secs(30),
            stuck_after: Some(DEFAULT_STUCK_AFTER),
            max_events_per_pass: 100,
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassReport {
    /// False when the snapshot function had nothing to give (not leading, cache not synced).
    pub ran: bool,
    pub jobs: usize,
    pub unreadable: usize,
    pub offending_jobs: usize,
    pub violations: usize,
    pub events_published: usize,
    pub events_failed: usize,
    /// Owed but left for a later pass by `max_events_per_pass`.
    pub events_deferred: usize,
}

/// The periodic audit. `snapshot` returns the Jobs to audit, or `None` when this process has
/// no view of them (not the leader, or its cache not yet synced).
pub struct PeriodicAudit<F, S> {
    policy: Arc<Policy>,
    snapshot: F,
    sink: S,
    metrics: AuditMetrics,
    config: AuditConfig,
    memory: EventMemory,
    /// The gauge's series set by the last pass, to remove those that drop to zero.
    series: BTreeSet<ViolationLabels>,
}

impl<F, J, S> PeriodicAudit<F, S>
where
    F: FnMut() -> Option<Vec<J>> + Send,
    J: StoredJob + Send + 'static,
    S: EventSink,
{
    pub fn new(
        policy: Arc<Policy>,
        snapshot: F,
        sink: S,
        metrics: AuditMetrics,
        config: AuditConfig,
    ) -> Self {
        PeriodicAudit {
            policy,
            snapshot,
            sink,
            metrics,
            config,
            memory: EventMemory::default(),
            series: BTreeSet::new(),
        }
    }

    /// Runs a pass now, then one every `interval`, until `shutdown` completes.
    pub async fn run(mut self, shutdown: impl Future<Output = ()> + Send) {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let report = self.pass().await;
            let wait = if report.ran {
                tracing::info!(
                    jobs = report.jobs,
                    offending_jobs = report.offending_jobs,
                    violations = report.violations,
                    unreadable = report.unreadable,
                    events_published = report.events_published,
                    events_failed = report.events_failed,
                    events_deferred = report.events_deferred,
                    "audit pass"
                );
                self.config.interval
            } else {
                // A view that appears (leadership, a synced cache) is audited within an
                // interval, however long the retry.
                self.config.retry_when_unavailable.min(self.config.interval)
            };
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// One pass: snapshot, audit, gauge, events.
    pub async fn pass(&mut self) -> PassReport {
        let Some(jobs) = (self.snapshot)() else {
            // Numbers from a view this process no longer has would be stale, and summed with
            // the new leader's they would count twice.
            self.set_gauge(&SnapshotFindings::default());
            return PassReport::default();
        };
        let policy = self.policy.clone();
        let stuck_after = self.config.stuck_after;
        let now = Timestamp::now();
        // The rules are CPU work over the whole snapshot: keep it off the async workers.
        let audit = move || {
            let mut findings = audit_snapshot(&policy, &jobs);
            if let Some(after) = stuck_after {
                add_stuck(&mut findings, &jobs, now, after);
            }
            findings
        };
        let findings = match tokio::task::spawn_blocking(audit).await {
            Ok(findings) => findings,
            Err(e) => {
                tracing::error!(error = %e, "audit pass failed");
                return PassReport::default();
            }
        };
        for what in &findings.unreadable {
            tracing::warn!(job = %what, "audit: cannot read a Job");
        }
        self.set_gauge(&findings);
        let mut report = PassReport {
            ran: true,
            jobs: findings.jobs,
            unreadable: findings.unreadable.len(),
            offending_jobs: findings.offending.len(),
            violations: findings.offending.iter().map(|j| j.violations.len()).sum(),
            ..PassReport::default()
        };
        let due = self.memory.due(&findings.offending);
        report.events_deferred = due.len().saturating_sub(self.config.max_events_per_pass);
        for warning in due.iter().take(self.config.max_events_per_pass) {
            let result = match self.sink.publish(warning).await {
                Ok(()) => {
                    self.memory.sent(warning);
                    report.events_published += 1;
                    "published"
                }
                Err(e) => {
                    tracing::warn!(namespace = %warning.namespace, job = %warning.name, rule = %warning.rule, error = %e, "audit: cannot publish an Event");
                    report.events_failed += 1;
                    "failed"
                }
            };
            self.metrics
                .events
                .get_or_create(&EventLabels {
                    result: result.to_owned(),
                })
                .inc();
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        self.metrics.last_pass_timestamp_seconds.set(now);
        report
    }

    /// Sets the gauge to this pass's counts and removes the series that dropped to zero:
    /// a zeroed series would stay forever for every namespace that ever had a violation (deleted
    /// namespaces included), while an absent one costs nothing and `> 0` alerts resolve the same.
    fn set_gauge(&mut self, findings: &SnapshotFindings) {
        let mut now = BTreeSet::new();
        for ((namespace, rule), count) in findings.counts() {
            let labels = ViolationLabels {
                namespace,
                rule: rule.as_str().to_owned(),
            };
            self.metrics.violations.get_or_create(&labels).set(count);
            now.insert(labels);
        }
        for gone in self.series.difference(&now) {
            self.metrics.violations.remove(gone);
        }
        self.series = now;
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.metrics.jobs.set(count(findings.jobs));
        self.metrics
            .unreadable_jobs
            .set(count(findings.unreadable.len()));
    }
}
