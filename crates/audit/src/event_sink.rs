//! Where audit warnings go: a small trait, so the periodic audit can be tested with a fake, and
//! its Kubernetes implementation, a Warning Event (events.k8s.io/v1) on the Job through
//! kube-runtime's `Recorder`. Publishing only; what to publish is decided elsewhere.

use std::future::Future;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::event_memory::AuditWarning;

pub type SinkError = Box<dyn std::error::Error + Send + Sync>;

/// Publishes one warning about one Job. An error leaves the warning owed: the next pass tries
/// again.
pub trait EventSink: Send + Sync {
    fn publish(&self, warning: &AuditWarning)
    -> impl Future<Output = Result<(), SinkError>> + Send;
}

/// The Event's `action`: what jobwarden was doing when it noticed.
pub const ACTION: &str = "Audit";

/// Warning Events on the offending Jobs, reported as `reporter` (RBAC: `create` on
/// `events.k8s.io` `events` in the Jobs' namespaces).
#[derive(Clone)]
pub struct KubeEventSink {
    client: Client,
    reporter: Reporter,
}

impl KubeEventSink {
    pub fn new(client: Client, reporter: Reporter) -> Self {
        KubeEventSink { client, reporter }
    }
}

impl EventSink for KubeEventSink {
    async fn publish(&self, warning: &AuditWarning) -> Result<(), SinkError> {
        // A fresh Recorder each time: a shared one folds Events with the same Job and reason
        // into a series for six minutes and keeps the first note, so a changed violation would
        // be published with the old text. Repeats are already kept out by the event memory.
        let recorder = Recorder::new(self.client.clone(), self.reporter.clone());
        let event = Event {
            type_: EventType::Warning,
            reason: warning.reason.to_owned(),
            note: Some(warning.note.clone()),
            action: ACTION.to_owned(),
            secondary: None,
        };
        recorder
            .publish(&event, &job_reference(warning))
            .await
            .map_err(SinkError::from)
    }
}

/// The Event's `regarding`: the Job, by uid, so an Event never attaches to a later Job that
/// reuses the name.
pub fn job_reference(warning: &AuditWarning) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".to_owned()),
        kind: Some("Job".to_owned()),
        namespace: Some(warning.namespace.clone()),
        name: Some(warning.name.clone()),
        uid: Some(warning.uid.clone()),
        ..ObjectReference::default()
    }
}
