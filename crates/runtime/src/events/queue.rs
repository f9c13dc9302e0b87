//! The Events waiting to be written, apart from the syncs that planned them (client-go's event
//! broadcaster queue). Bounded: when full, the oldest is dropped, so a burst keeps its latest
//! news. Repeats are merged as client-go's `EventCorrelator` does for identical events
//! (`eventLogger`): an event equal to one still pending (same Job, type, reason and message)
//! adds to that one's count and last time instead of taking a place and a write of its own.
//!
//! Not mirrored from the correlator: patching the count of an Event already written (that
//! would cost a PATCH, and remembering written Events), and `EventAggregator`'s "(combined
//! from similar events)" for more than 10 events of one reason with different messages in 10
//! minutes: the Job controller already writes a sync's pod creations and deletions as one event
//! naming them, and the per-Job spam filter (`limiter::EventLimiter`) bounds the rest. Pure:
//! the caller passes the time.

use std::collections::VecDeque;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use jobwarden_events::{EventRecord, JobRef, Seen};

/// Events pending at most. client-go's broadcaster queues 1,000 full Event objects per
/// recorder; jobwarden queues small records (a Job reference, a reason and a message), so it
/// keeps as many as the correlator's cache remembers (`maxLruCacheEntries`): a burst of a few
/// thousand Jobs loses none of its two events each, in a few MiB at most.
pub const QUEUE_BOUND: usize = 4096;

/// An event waiting to be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEvent {
    pub job: JobRef,
    pub record: EventRecord,
    pub seen: Seen,
}

/// What [`EventQueue::push`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pushed {
    Queued,
    /// Counted on an identical pending event.
    Merged,
    /// Queued, and the oldest pending event dropped to make room.
    DroppedOldest(Box<PendingEvent>),
}

#[derive(Debug)]
pub struct EventQueue {
    pending: VecDeque<PendingEvent>,
    bound: usize,
}

impl Default for EventQueue {
    fn default() -> Self {
        EventQueue::with_bound(QUEUE_BOUND)
    }
}

impl EventQueue {
    pub fn with_bound(bound: usize) -> Self {
        EventQueue {
            pending: VecDeque::new(),
            bound: bound.max(1),
        }
    }

    pub fn push(&mut self, job: &JobRef, record: EventRecord, now: Timestamp) -> Pushed {
        if let Some(same) = self
            .pending
            .iter_mut()
            .find(|p| p.job.uid == job.uid && p.record == record)
        {
            same.seen.count = same.seen.count.saturating_add(1);
            same.seen.last = now;
            return Pushed::Merged;
        }
        let dropped = if self.pending.len() >= self.bound {
            self.pending.pop_front()
        } else {
            None
        };
        self.pending.push_back(PendingEvent {
            job: job.clone(),
            record,
            seen: Seen::once(now),
        });
        match dropped {
            Some(oldest) => Pushed::DroppedOldest(Box::new(oldest)),
            None => Pushed::Queued,
        }
    }

    /// The oldest pending event.
    pub fn pop(&mut self) -> Option<PendingEvent> {
        self.pending.pop_front()
    }

    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Empties the queue; returns how many events it held.
    pub fn clear(&mut self) -> usize {
        let n = self.pending.len();
        self.pending.clear();
        n
    }
}

/// Between two log lines about dropped events.
pub const DROP_LOG_EVERY: Duration = Duration::from_secs(10);

/// Drops are logged as one line per [`DROP_LOG_EVERY`] with how many there were, not one line
/// per drop: the first drop is reported at once, the next ones with the first drop after the
/// interval.
#[derive(Debug, Default)]
pub struct DropLog {
    unreported: u64,
    last_report: Option<Duration>,
}

impl DropLog {
    /// Notes `n` drops at `now` (time since any fixed origin); returns how many to report now.
    pub fn note(&mut self, n: u64, now: Duration) -> Option<u64> {
        self.unreported = self.unreported.saturating_add(n);
        let due = self
            .last_report
            .is_none_or(|last| now.saturating_sub(last) >= DROP_LOG_EVERY);
        if !due || self.unreported == 0 {
            return None;
        }
        self.last_report = Some(now);
        Some(std::mem::take(&mut self.unreported))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn job(uid: &str) -> JobRef {
        JobRef {
            namespace: "ns".to_owned(),
            name: format!("job-{uid}"),
            uid: uid.to_owned(),
        }
    }

    fn record(reason: &str, message: &str) -> EventRecord {
        EventRecord {
            warning: false,
            reason: reason.to_owned(),
            message: message.to_owned(),
        }
    }

    #[test]
    fn identical_pending_events_are_one_write_with_a_count() {
        let mut q = EventQueue::default();
        assert_eq!(q.push(&job("a"), record("R", "m"), at(0)), Pushed::Queued);
        assert_eq!(q.push(&job("a"), record("R", "m"), at(5)), Pushed::Merged);
        assert_eq!(q.push(&job("a"), record("R", "m"), at(7)), Pushed::Merged);
        // Any difference keeps them apart: the Job, the message, the reason, the type.
        assert_eq!(q.push(&job("b"), record("R", "m"), at(8)), Pushed::Queued);
        assert_eq!(
            q.push(&job("a"), record("R", "other"), at(8)),
            Pushed::Queued
        );
        assert_eq!(q.push(&job("a"), record("S", "m"), at(8)), Pushed::Queued);
        let warning = EventRecord {
            warning: true,
            ..record("R", "m")
        };
        assert_eq!(q.push(&job("a"), warning, at(8)), Pushed::Queued);
        assert_eq!(q.len(), 5);
        let first = q.pop().expect("pending");
        assert_eq!(
            first.seen,
            Seen {
                count: 3,
                first: at(0),
                last: at(7)
            }
        );
        // Once written, the same event again is a new one.
        for _ in 0..4 {
            q.pop();
        }
        assert_eq!(q.push(&job("a"), record("R", "m"), at(9)), Pushed::Queued);
    }

    #[test]
    fn a_full_queue_drops_its_oldest() {
        let mut q = EventQueue::with_bound(2);
        q.push(&job("a"), record("R", "1"), at(0));
        q.push(&job("a"), record("R", "2"), at(1));
        let Pushed::DroppedOldest(oldest) = q.push(&job("a"), record("R", "3"), at(2)) else {
            panic!("the queue is full");
        };
        assert_eq!(oldest.record.message, "1");
        // A repeat of a pending event takes no room.
        assert_eq!(q.push(&job("a"), record("R", "3"), at(3)), Pushed::Merged);
        let left: Vec<String> = std::iter::from_fn(|| q.pop())
            .map(|p| p.record.message)
            .collect();
        assert_eq!(left, ["2", "3"]);
        assert_eq!(q.clear(), 0);
    }

    #[test]
    fn drops_are_reported_at_most_once_per_interval() {
        let s = Duration::from_secs;
        let mut log = DropLog::default();
        assert_eq!(log.note(1, s(0)), Some(1));
        assert_eq!(log.note(1, s(1)), None);
        assert_eq!(log.note(5, s(9)), None);
        assert_eq!(log.note(1, s(10)), Some(7));
        assert_eq!(log.note(0, s(30)), None);
        assert_eq!(log.note(2, s(31)), Some(2));
    }
}
