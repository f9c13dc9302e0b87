//! jobwarden's audit: the Jobs already stored in a cluster that the rules would deny today. A
//! webhook only sees writes made after it was installed, and `jobs/status` fails open; the
//! audit re-checks what is stored, with the webhook's own rules and words.
//!
//! * [`stuck`] (pure): a Job delegated to a controller that shows no sign of running it,
//!   reported beside the violations (family `stuck_delegation`).
//! * [`violations`] (pure): one stored Job in, its violations out, each with a fixed `rule`
//!   family, the field path and the message as a denial prints them. Its module docs say what
//!   "would deny today" means for a stored object.
//! * [`finding`] (pure): the JSON object and text line a violation is printed as
//!   (`jobwarden audit`, `jobwarden check -o json`).
//! * [`connect`] and [`listing`]: the command line's I/O, a client found like kubectl's and a
//!   paged LIST of Jobs as raw JSON.
//! * [`periodic`]: the in-process audit for `serve`, over a snapshot it is handed (the
//!   controller's Job cache), with [`snapshot`] and [`event_memory`] its pure parts, the gauge in
//!   [`metrics`] and Warning Events through an [`event_sink::EventSink`].
//!
//! # Wiring the periodic audit
//!
//! `serve` hands it a function returning the Jobs its controller caches, `None` while there is
//! no such view (not leading, cache not synced), a Registry, and an Event sink:
//!
//! ```no_run
//! # async fn wire(client: kube::Client, store: kube::runtime::reflector::Store<k8s_openapi::api::batch::v1::Job>, synced: std::sync::Arc<std::sync::atomic::AtomicBool>) {
//! use std::sync::Arc;
//! use std::sync::atomic::Ordering;
//! use jobwarden_audit::{AuditConfig, KubeEventSink, PeriodicAudit, register_metrics};
//! use jobwarden_events::EventReporter;
//!
//! let mut registry = prometheus_client::registry::Registry::default();
//! let reporter = EventReporter {
//!     component: "jobwarden.io/audit".into(),
//!     instance: "jobwarden-7d9f-abcde".into(),
//! };
//! let audit = PeriodicAudit::new(
//!     Arc::new(jobwarden_admission::Policy::default()), // the webhook's policy
//!     move || synced.load(Ordering::Acquire).then(|| store.state()),
//!     KubeEventSink::new(client, reporter),
//!     register_metrics(&mut registry),
//!     AuditConfig::default(),
//! );
//! audit.run(async { let _ = tokio::signal::ctrl_c().await; }).await;
//! # }
//! ```

pub mod connect;
pub mod event_memory;
pub mod event_sink;
pub mod finding;
pub mod listing;
pub mod metrics;
pub mod periodic;
pub mod snapshot;
pub mod stuck;
pub mod violations;

pub use event_memory::{AuditWarning, EventMemory};
pub use event_sink::{EventSink, KubeEventSink, SinkError};
pub use finding::{Finding, JobRef};
pub use listing::{JobLister, ListError, ListScope, Page};
pub use metrics::{AuditMetrics, register_metrics};
pub use periodic::{AuditConfig, PassReport, PeriodicAudit};
pub use snapshot::{JobFindings, SnapshotFindings, StoredJob, audit_snapshot};
pub use stuck::{DEFAULT_STUCK_AFTER, PodEvidence, StuckDelegation, stuck_delegation};
pub use violations::{Rule, Violation, audit_job};

#[cfg(test)]
mod tests;
