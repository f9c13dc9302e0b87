//! The per-Job spam filter upstream's event recorder applies: each Job has a token bucket of 25
//! events refilled at one per five minutes (client-go's spam filter, keyed like its
//! `getSpamKey` by the involved object). An event over the limit is dropped and counted, and
//! the next event of the same reason says how many were. Pure bookkeeping: the caller passes
//! the time in and writes what is admitted.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use jobwarden_events::EventRecord;

/// client-go's `defaultSpamBurst`.
pub const BURST: f64 = 25.0;
/// client-go's `defaultSpamQPS`: one event per five minutes once the burst is spent.
pub const REFILL_EVERY: Duration = Duration::from_secs(300);

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    updated: Timestamp,
    /// Events dropped since the last one admitted, by reason.
    dropped: HashMap<String, u32>,
}

#[derive(Debug, Default)]
pub struct EventLimiter {
    jobs: HashMap<String, Bucket>,
}

impl EventLimiter {
    /// The event to write now, or `None` when the Job's bucket is empty.
    pub fn admit(
        &mut self,
        job_uid: &str,
        mut event: EventRecord,
        now: Timestamp,
    ) -> Option<EventRecord> {
        let bucket = self
            .jobs
            .entry(job_uid.to_owned())
            .or_insert_with(|| Bucket {
                tokens: BURST,
                updated: now,
                dropped: HashMap::new(),
            });
        let elapsed = now.duration_since(bucket.updated).as_secs_f64().max(0.0);
        bucket.tokens = (bucket.tokens + elapsed / REFILL_EVERY.as_secs_f64()).min(BURST);
        bucket.updated = now;
        if bucket.tokens < 1.0 {
            *bucket.dropped.entry(event.reason).or_default() += 1;
            return None;
        }
        bucket.tokens -= 1.0;
        if let Some(n) = bucket.dropped.remove(&event.reason) {
            let _ = write!(
                event.message,
                " ({n} earlier {} event{} not recorded: rate limited)",
                event.reason,
                if n == 1 { "" } else { "s" }
            );
        }
        Some(event)
    }

    /// The Job is finished or gone.
    pub fn forget(&mut self, job_uid: &str) {
        self.jobs.remove(job_uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn event(reason: &str) -> EventRecord {
        EventRecord {
            warning: false,
            reason: reason.to_owned(),
            message: "m".to_owned(),
        }
    }

    #[test]
    fn a_burst_of_25_then_one_every_five_minutes() {
        let mut l = EventLimiter::default();
        let admitted = (0..40)
            .filter(|_| l.admit("j", event("SuccessfulCreate"), at(0)).is_some())
            .count();
        assert_eq!(admitted, 25);
        assert!(l.admit("j", event("SuccessfulCreate"), at(299)).is_none());
        let next = l
            .admit("j", event("SuccessfulCreate"), at(300))
            .expect("refilled");
        assert_eq!(
            next.message,
            "m (16 earlier SuccessfulCreate events not recorded: rate limited)"
        );
        assert!(l.admit("j", event("Completed"), at(301)).is_none());
        assert!(
            l.admit("other", event("Completed"), at(301)).is_some(),
            "per Job"
        );
    }
}
