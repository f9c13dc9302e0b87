//! Where audit warnings go: a small trait, so the periodic audit can be tested with a fake, and
//! its Kubernetes implementation, a Warning Event on the Job. Publishing only; what to publish
//! is decided elsewhere.

use std::future::Future;

use jobwarden_events::{EventRecord, EventReporter, JobRef, record_job_event};
use kube::Client;

use crate::event_memory::AuditWarning;

pub type SinkError = Box<dyn std::error::Error + Send + Sync>;

/// Publishes one warning about one Job. An error leaves the warning owed: the next pass tries
/// again.
pub trait EventSink: Send + Sync {
    fn publish(&self, warning: &AuditWarning)
    -> impl Future<Output = Result<(), SinkError>> + Send;
}

/// Warning Events on the offending Jobs: core/v1 Events written by the same writer as the
/// controller's (RBAC: `create` on `events` in the Jobs' namespaces).
#[derive(Clone)]
pub struct KubeEventSink {
    client: Client,
    reporter: EventReporter,
}

impl KubeEventSink {
    pub fn new(client: Client, reporter: EventReporter) -> Self {
        KubeEventSink { client, reporter }
    }
}

impl EventSink for KubeEventSink {
    async fn publish(&self, warning: &AuditWarning) -> Result<(), SinkError> {
        let job = JobRef {
            namespace: warning.namespace.clone(),
            name: warning.name.clone(),
            uid: warning.uid.clone(),
        };
        let record = EventRecord {
            warning: true,
            reason: warning.reason.to_owned(),
            message: warning.note.clone(),
        };
        record_job_event(&self.client, &job, &record, &self.reporter)
            .await
            .map_err(SinkError::from)
    }
}
