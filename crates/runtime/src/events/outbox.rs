//! Where a sync leaves its Events: the bounded queue (`queue`) and its writer. A sync pushes
//! without waiting; the writer drains the queue through the controller's [`EventWriter`], one
//! Event at a time. Against kube-apiserver each write waits for a spare token of the client's
//! budget (`client::request_budget`), so Events never delay a sync's request. Two deliveries:
//!
//! * `Background`: a writer task ([`EventOutbox::run_writer`], run beside the syncs by the
//!   controller's loop) writes as Events come, and on stop writes what is left within the
//!   loop's drain.
//! * `Inline`: the sync that pushed writes the queue out before it returns. The in-memory
//!   cluster has no rate limit to share, and its tests and `jobwarden simulate` read each
//!   sync's Events right after it, in a deterministic order.
//!
//! Writes are fenced like every other: once the replica stops leading, the first refused write
//! empties the queue (counted as dropped, `not_leading`). Events still queued when the
//! controller is dropped (its drain ran out of time) are counted as dropped, `stopped`.

use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use k8s_openapi::jiff::Timestamp;
use tokio::sync::Notify;

use super::metrics::{DroppedLabels, EventMetrics};
use super::queue::{DropLog, EventQueue, Pushed};
use super::{EventWriteError, EventWriter};
use jobwarden_events::{EventRecord, JobRef};

/// Who writes the queued Events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The sync that queued them, before it returns.
    Inline,
    /// The writer task, apart from the syncs.
    Background,
}

pub struct EventOutbox {
    delivery: Delivery,
    queue: Mutex<EventQueue>,
    wake: Notify,
    drops: Mutex<DropLog>,
    origin: Instant,
    metrics: EventMetrics,
}

impl EventOutbox {
    pub fn new(delivery: Delivery, metrics: EventMetrics) -> Self {
        EventOutbox {
            delivery,
            queue: Mutex::default(),
            wake: Notify::new(),
            drops: Mutex::default(),
            origin: Instant::now(),
            metrics,
        }
    }

    pub fn delivery(&self) -> Delivery {
        self.delivery
    }

    fn queue(&self) -> MutexGuard<'_, EventQueue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_queued(&self, queue: &EventQueue) {
        self.metrics
            .events_queued
            .set(i64::try_from(queue.len()).unwrap_or(i64::MAX));
    }

    /// Counts `n` Events not written, and logs them (one line per interval, not per drop).
    pub fn dropped(&self, reason: &'static str, n: u64) {
        if n == 0 {
            return;
        }
        self.metrics
            .events_dropped
            .get_or_create(&DroppedLabels {
                reason: reason.to_owned(),
            })
            .inc_by(n);
        let report = self
            .drops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .note(n, self.origin.elapsed());
        if let Some(n) = report {
            tracing::warn!(
                dropped = n,
                reason,
                "Events not written (one line per 10 s; events_dropped_total counts each)"
            );
        }
    }

    /// Queues a sync's Events without waiting.
    pub fn push(&self, job: &JobRef, records: Vec<EventRecord>, now: Timestamp) {
        if records.is_empty() {
            return;
        }
        let mut dropped = 0;
        {
            let mut queue = self.queue();
            for record in records {
                if let Pushed::DroppedOldest(_) = queue.push(job, record, now) {
                    dropped += 1;
                }
            }
            self.set_queued(&queue);
        }
        self.dropped("queue_full", dropped);
        self.wake.notify_one();
    }

    /// Writes the next pending Event; `None` when there was none. A refusal because this
    /// replica no longer leads empties the queue: nothing more may be written.
    async fn write_next<W: EventWriter>(&self, writer: &W) -> Option<bool> {
        let next = {
            let mut queue = self.queue();
            let next = queue.pop();
            self.set_queued(&queue);
            next
        }?;
        match writer.write_event(&next.job, &next.record, next.seen).await {
            Ok(()) => Some(true),
            Err(EventWriteError::NotLeading) => {
                let left = {
                    let mut queue = self.queue();
                    let left = queue.clear();
                    self.set_queued(&queue);
                    left
                };
                self.dropped("not_leading", 1 + left as u64);
                Some(false)
            }
            Err(e) => {
                tracing::warn!(job = %next.job.name, reason = %next.record.reason, error = %e, "could not record an event");
                Some(false)
            }
        }
    }

    /// Writes every pending Event; returns how many were written.
    pub async fn write_pending<W: EventWriter>(&self, writer: &W) -> usize {
        let mut written = 0;
        while let Some(ok) = self.write_next(writer).await {
            written += usize::from(ok);
        }
        written
    }

    /// The writer task: writes Events as they are queued until `stop` resolves, then what is
    /// left (the caller bounds how long that may take). With inline delivery the syncs write
    /// their own: nothing to do.
    pub async fn run_writer<W: EventWriter>(&self, writer: &W, stop: impl Future<Output = ()>) {
        if self.delivery == Delivery::Inline {
            return;
        }
        let mut stop = std::pin::pin!(stop);
        loop {
            tokio::select! {
                biased;
                () = &mut stop => break,
                () = self.wake.notified() => {
                    self.write_pending(writer).await;
                }
            }
        }
        self.write_pending(writer).await;
    }
}

/// Events still queued when the controller goes (its drain ran out of time) are lost: counted.
impl Drop for EventOutbox {
    fn drop(&mut self) {
        let left = self.queue().clear();
        self.dropped("stopped", left as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dropped(metrics: &EventMetrics, reason: &str) -> u64 {
        metrics
            .events_dropped
            .get_or_create(&DroppedLabels {
                reason: reason.to_owned(),
            })
            .get()
    }

    fn job() -> JobRef {
        JobRef {
            namespace: "ns".to_owned(),
            name: "j".to_owned(),
            uid: "u".to_owned(),
        }
    }

    fn record(reason: &str) -> EventRecord {
        EventRecord {
            warning: false,
            reason: reason.to_owned(),
            message: "m".to_owned(),
        }
    }

    /// A writer that writes until it is told this replica no longer leads, and notes what it
    /// was asked to write.
    #[derive(Default)]
    struct Fenced {
        leading_for: Mutex<usize>,
        asked: Mutex<Vec<String>>,
    }

    impl EventWriter for Fenced {
        async fn write_event(
            &self,
            _job: &JobRef,
            event: &EventRecord,
            _seen: jobwarden_events::Seen,
        ) -> Result<(), EventWriteError> {
            self.asked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(event.reason.clone());
            let mut left = self.leading_for.lock().unwrap_or_else(|e| e.into_inner());
            if *left == 0 {
                return Err(EventWriteError::NotLeading);
            }
            *left -= 1;
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_write_refused_for_not_leading_drops_every_queued_event() {
        let metrics = EventMetrics::default();
        let outbox = EventOutbox::new(Delivery::Inline, metrics.clone());
        let writer = Fenced {
            leading_for: Mutex::new(1),
            ..Fenced::default()
        };
        let now = Timestamp::UNIX_EPOCH;
        outbox.push(&job(), vec![record("A"), record("B"), record("C")], now);
        assert_eq!(outbox.write_pending(&writer).await, 1);
        let asked = writer
            .asked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        assert_eq!(asked, ["A", "B"], "nothing is tried once refused");
        assert_eq!(dropped(&metrics, "not_leading"), 2);
        assert_eq!(metrics.events_queued.get(), 0);
    }

    #[test]
    fn events_left_when_the_controller_goes_are_counted() {
        let metrics = EventMetrics::default();
        let outbox = EventOutbox::new(Delivery::Background, metrics.clone());
        let (job, now) = (job(), Timestamp::UNIX_EPOCH);
        outbox.push(&job, vec![record("A"), record("B"), record("A")], now);
        assert_eq!(metrics.events_queued.get(), 2, "the repeat merged");
        drop(outbox);
        assert_eq!(dropped(&metrics, "stopped"), 2);
        assert_eq!(dropped(&metrics, "queue_full"), 0);
    }
}
