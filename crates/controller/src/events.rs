//! The Events a sync records on its Job, written the way upstream's event recorder limits them:
//! a sync's pod creations are one event naming the pods (not one event per pod), and each Job
//! has a token bucket of 25 events refilled at one per five minutes (client-go's spam filter,
//! keyed like its `getSpamKey` by the involved object). An event over the limit is dropped and
//! counted, and the next event of the same reason says how many were. Pure bookkeeping: the
//! caller passes the time in and writes what is admitted.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use jobwarden_events::EventRecord;

/// client-go's `defaultSpamBurst`.
pub const BURST: f64 = 25.0;
/// client-go's `defaultSpamQPS`: one event per five minutes once the burst is spent.
pub const REFILL_EVERY: Duration = Duration::from_secs(300);
/// Pod names listed in one event's message before "and N more": kube-apiserver caps an
/// events.k8s.io note at 1 KiB, and a message longer than a screen helps nobody.
const MAX_LISTED_BYTES: usize = 600;

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

/// Upstream's per-pod messages (`Created pod: NAME`), for all the pods of one sync at once:
/// `Created pod: a`, or `Created 3 pods: a, b, c`, listing names up to a length and then
/// `and N more`.
pub fn pods_message(verb: &str, names: &[String]) -> String {
    match names {
        [] => String::new(),
        [one] => format!("{verb} pod: {one}"),
        _ => {
            let mut message = format!("{verb} {} pods: ", names.len());
            let mut listed = 0;
            for name in names {
                if listed > 0 && message.len() + name.len() > MAX_LISTED_BYTES {
                    break;
                }
                if listed > 0 {
                    message.push_str(", ");
                }
                message.push_str(name);
                listed += 1;
            }
            if listed < names.len() {
                let _ = write!(message, " and {} more", names.len() - listed);
            }
            message
        }
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

    #[test]
    fn messages_name_the_pods() {
        let names: Vec<String> = (0..3).map(|i| format!("p-{i}")).collect();
        assert_eq!(pods_message("Created", &names[..1]), "Created pod: p-0");
        assert_eq!(
            pods_message("Deleted", &names),
            "Deleted 3 pods: p-0, p-1, p-2"
        );
        let many: Vec<String> = (0..500).map(|i| format!("job-{i}-abcde")).collect();
        let m = pods_message("Created", &many);
        assert!(m.starts_with("Created 500 pods: job-0-abcde, job-1-abcde"));
        assert!(m.len() < 700, "{}", m.len());
        let listed = m.matches("-abcde").count();
        assert!(m.ends_with(&format!(" and {} more", 500 - listed)), "{m}");
    }
}
