//! Events about Jobs, as a controller writes them: the per-Job spam filter upstream's recorder
//! applies (`limiter`), the bounded queue they wait in, repeats merged (`queue`), and the
//! outbox a sync leaves them in and their writer (`outbox`), counted (`metrics`). Where they go
//! is the controller's: the [`EventWriter`] this file names. The Event object itself, and its
//! one writer to kube-apiserver, are `jobwarden-events`'.

pub mod limiter;
pub mod metrics;
pub mod outbox;
mod queue;

use std::sync::Arc;

use jobwarden_events::{EventRecord, JobRef, Seen};

/// Writes one Event about one Job: the one call the outbox makes on a controller's cluster.
pub trait EventWriter: Send + Sync {
    /// Best effort: a lost event loses no state. `seen` says how often it happened (identical
    /// events merged while they waited) and when.
    fn write_event(
        &self,
        job: &JobRef,
        event: &EventRecord,
        seen: Seen,
    ) -> impl Future<Output = Result<(), EventWriteError>> + Send;
}

/// A shared writer is a writer: tests and the simulator keep a handle on the cluster they drive.
impl<T: EventWriter> EventWriter for Arc<T> {
    fn write_event(
        &self,
        job: &JobRef,
        event: &EventRecord,
        seen: Seen,
    ) -> impl Future<Output = Result<(), EventWriteError>> + Send {
        (**self).write_event(job, event, seen)
    }
}

/// Why an Event was not written.
#[derive(Debug, thiserror::Error)]
pub enum EventWriteError {
    /// This replica is not the leader any more (its writes are fenced): nothing was sent, and
    /// no Event still queued may be.
    #[error("not the leader any more: the write was not sent")]
    NotLeading,
    /// Any other failure, the writer's own error shown as it is.
    #[error(transparent)]
    Failed(Box<dyn std::error::Error + Send + Sync>),
}
