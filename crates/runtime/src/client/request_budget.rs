//! The controller's request budget: one token bucket (`--kube-api-qps` refill, `--kube-api-burst`
//! deep) shared by every request the controller sends, with two priorities (three on the
//! dispatcher's management client). A sync's request (pod creates, status writes, finalizer
//! removals, watches) reserves the next token at once and waits its turn, as client-go's
//! `rate.Limiter.Reserve` does, so the bucket runs negative by the syncs waiting. A placement
//! (the dispatcher's write of a Job itself: its record) takes a token only when no sync waits
//! for one. An Event write takes a token only when one is spare: every waiting sync served and
//! `reserve` tokens left for the next syncs; otherwise it asks again later. So the total stays
//! within the bucket, and neither takes a token a sync is waiting for.
//!
//! No well-kept crate schedules by priority (governor and tower's limit have one class), so
//! this is jobwarden's own policy. Pure: the caller passes the time, as the time since any
//! fixed origin.
//!
//! What is not in this budget: the Lease. A renewal queued here would wait behind a sync's
//! 500 pod creates (10 s at 50 qps, the renew deadline), so leader election has a client of
//! its own with a budget of its own (`client::ControllerClients`), as kube-controller-manager's
//! does; so have the webhook's TokenReviews and SubjectAccessReviews of `/metrics` scrapes (the
//! server's client, unlimited), and `/readyz` asks the API server nothing. Nothing a deadline
//! depends on waits for the syncs. On the API server's side, deploy/'s FlowSchema
//! (deploy/base/flowschema.yaml) keeps the Lease out of the queue of jobwarden's other requests
//! too, in kube-apiserver's `leader-election` priority level.

use std::time::Duration;

/// Which requests wait for which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// A sync's request, or any request that is not an Event write (nor a placement, on a
    /// client that tells them apart).
    Sync,
    /// A write of a Job itself, not its status, on a client that places Jobs (the
    /// dispatcher's, on the management cluster: the record that places a Job, the lost mark):
    /// after the syncs' status writes, so that a Job's end reaches its user before new Jobs
    /// are placed; before Events.
    Placement,
    /// An Event write: best effort, after the syncs.
    Event,
}

impl Priority {
    pub const ALL: [Priority; 3] = [Priority::Sync, Priority::Placement, Priority::Event];

    /// Its label in the budget's metrics.
    pub fn label(self) -> &'static str {
        match self {
            Priority::Sync => "sync",
            Priority::Placement => "placement",
            Priority::Event => "event",
        }
    }
}

/// The bucket. `tokens` below zero are tokens reserved by syncs still waiting.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    qps: f64,
    burst: f64,
    reserve: f64,
    tokens: f64,
    at: Duration,
}

impl Budget {
    /// A full bucket at `now`. Events leave half the burst (rounded down) to the syncs: a sync
    /// that starts after a quiet spell finds it there, however many Events were pending.
    pub fn new(qps: f64, burst: u32, now: Duration) -> Budget {
        let burst = f64::from(burst.max(1));
        Budget {
            qps: if qps > 0.0 { qps } else { f64::MIN_POSITIVE },
            burst,
            reserve: (burst / 2.0).floor(),
            tokens: burst,
            at: now,
        }
    }

    fn refill(&mut self, now: Duration) {
        if now > self.at {
            let earned = (now - self.at).as_secs_f64() * self.qps;
            self.tokens = (self.tokens + earned).min(self.burst);
            self.at = now;
        }
    }

    /// How long to wait from `now` until `tokens` reach `level`.
    fn until(&self, level: f64) -> Duration {
        let missing = (level - self.tokens).max(0.0);
        Duration::try_from_secs_f64(missing / self.qps).unwrap_or(Duration::MAX)
    }

    /// A sync's request: takes the next token and says how long to wait for it (zero when
    /// one is there). Syncs are served in the order they ask.
    pub fn reserve_sync(&mut self, now: Duration) -> Duration {
        self.refill(now);
        self.tokens -= 1.0;
        self.until(0.0)
    }

    /// A placement: `Ok` when a token is there that no sync waits for (taken), or how long to
    /// wait before asking again. It keeps no reserve: Events wait for it.
    pub fn try_take_placement(&mut self, now: Duration) -> Result<(), Duration> {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(self.until(1.0))
        }
    }

    /// An Event write: `Ok` when a token is spare (taken), or how long to wait before asking
    /// again.
    pub fn try_take_event(&mut self, now: Duration) -> Result<(), Duration> {
        self.refill(now);
        let needed = 1.0 + self.reserve;
        if self.tokens >= needed {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(self.until(needed))
        }
    }
}

/// Which priority a request has: a create, update or patch of core/v1 or events.k8s.io Events
/// is an Event write; with `placements`, a write of a `batch/v1` Job itself (not a
/// subresource) is a placement; everything else is a sync's.
pub fn priority_of(method: &http::Method, path: &str, placements: bool) -> Priority {
    if *method == http::Method::GET {
        return Priority::Sync;
    }
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if placements
        && matches!(
            segments.as_slice(),
            ["apis", "batch", _, "namespaces", _, "jobs", _]
        )
    {
        return Priority::Placement;
    }
    // `/api/v1/...` is the core group; `/apis/<group>/<version>/...` the others.
    let rest = match segments.as_slice() {
        ["api", _version, rest @ ..] => rest,
        ["apis", "events.k8s.io", _version, rest @ ..] => rest,
        _ => return Priority::Sync,
    };
    let resource = match rest {
        ["namespaces", _namespace, resource, ..] => resource,
        [resource, ..] => resource,
        [] => return Priority::Sync,
    };
    if *resource == "events" {
        Priority::Event
    } else {
        Priority::Sync
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Equal within a microsecond: the bucket counts in floating point.
    fn about(got: Duration, want: Duration) -> bool {
        got.abs_diff(want) < Duration::from_micros(1)
    }

    fn waits_about(got: Result<(), Duration>, want: Duration) -> bool {
        got.is_err_and(|wait| about(wait, want))
    }

    #[test]
    fn syncs_take_the_burst_then_wait_their_turn() {
        // 10 qps, burst 3: three at once, then one every 100 ms, in order.
        let mut b = Budget::new(10.0, 3, ms(0));
        let waits: Vec<Duration> = (0..6).map(|_| b.reserve_sync(ms(0))).collect();
        let want = [ms(0), ms(0), ms(0), ms(100), ms(200), ms(300)];
        assert!(
            waits.iter().zip(want).all(|(&g, w)| about(g, w)),
            "{waits:?}"
        );
        // At 300 ms the third waiter is served: the bucket is empty, not full.
        assert!(about(b.reserve_sync(ms(300)), ms(100)));
    }

    #[test]
    fn an_event_never_takes_a_token_a_sync_waits_for() {
        let mut b = Budget::new(10.0, 4, ms(0));
        for _ in 0..5 {
            b.reserve_sync(ms(0));
        }
        // One sync waits for the token due at 100 ms: at 100 ms it is that sync's.
        assert!(b.try_take_event(ms(0)).is_err());
        assert!(b.try_take_event(ms(100)).is_err());
        // The event waits until the bucket holds one token over the syncs' reserve of 2.
        assert!(waits_about(b.try_take_event(ms(100)), ms(300)));
        assert!(b.try_take_event(ms(399)).is_err());
        assert_eq!(b.try_take_event(ms(401)), Ok(()));
        // The next sync still finds the reserve.
        assert!(about(b.reserve_sync(ms(401)), ms(0)));
        assert!(about(b.reserve_sync(ms(401)), ms(0)));
        assert!(about(b.reserve_sync(ms(401)), ms(99)));
    }

    #[test]
    fn with_no_sync_events_use_the_whole_rate() {
        let mut b = Budget::new(20.0, 30, ms(0));
        let mut written = 0;
        let mut now = ms(0);
        while now <= Duration::from_secs(10) {
            match b.try_take_event(now) {
                Ok(()) => written += 1,
                Err(wait) => now += wait.max(ms(1)),
            }
        }
        // The 15 tokens over the reserve at once, then 20 a second: never more than the
        // bucket allows.
        assert!((210..=216).contains(&written), "{written}");
    }

    #[test]
    fn a_burst_of_one_still_writes_events() {
        let mut b = Budget::new(1.0, 1, ms(0));
        assert_eq!(b.try_take_event(ms(0)), Ok(()));
        assert!(waits_about(b.try_take_event(ms(0)), ms(1000)));
    }

    #[test]
    fn event_writes_are_told_by_method_and_path() {
        use http::Method;
        for (method, path, want) in [
            (
                Method::POST,
                "/api/v1/namespaces/ns/events",
                Priority::Event,
            ),
            (
                Method::PATCH,
                "/api/v1/namespaces/ns/events/a.1",
                Priority::Event,
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/ns/events/a.1",
                Priority::Event,
            ),
            (
                Method::POST,
                "/apis/events.k8s.io/v1/namespaces/ns/events",
                Priority::Event,
            ),
            (Method::GET, "/api/v1/namespaces/ns/events", Priority::Sync),
            (Method::POST, "/api/v1/namespaces/ns/pods", Priority::Sync),
            (
                Method::POST,
                "/api/v1/namespaces/events/pods",
                Priority::Sync,
            ),
            (
                Method::PATCH,
                "/apis/batch/v1/namespaces/ns/jobs/events/status",
                Priority::Sync,
            ),
            (Method::POST, "/apis/example.com/v1/events", Priority::Sync),
            (Method::POST, "/api/v1/events", Priority::Event),
            (Method::POST, "/", Priority::Sync),
            (Method::POST, "", Priority::Sync),
        ] {
            assert_eq!(priority_of(&method, path, false), want, "{method} {path}");
        }
    }

    #[test]
    fn a_placing_client_tells_a_jobs_own_writes_from_its_status() {
        use http::Method;
        let job = "/apis/batch/v1/namespaces/ns/jobs/train";
        for (method, path, placements, want) in [
            (Method::PATCH, job, true, Priority::Placement),
            (Method::PATCH, job, false, Priority::Sync),
            (Method::GET, job, true, Priority::Sync),
            (
                Method::PATCH,
                "/apis/batch/v1/namespaces/ns/jobs/train/status",
                true,
                Priority::Sync,
            ),
            (
                Method::POST,
                "/apis/batch/v1/namespaces/ns/jobs",
                true,
                Priority::Sync,
            ),
            (
                Method::POST,
                "/api/v1/namespaces/ns/events",
                true,
                Priority::Event,
            ),
        ] {
            assert_eq!(
                priority_of(&method, path, placements),
                want,
                "{method} {path} {placements}"
            );
        }
    }

    #[test]
    fn a_placement_waits_for_the_syncs_and_events_wait_for_it() {
        let mut b = Budget::new(10.0, 4, ms(0));
        for _ in 0..5 {
            b.reserve_sync(ms(0));
        }
        // A sync waits for the token due at 100 ms: the placement's is the one after.
        assert!(waits_about(b.try_take_placement(ms(0)), ms(200)));
        assert_eq!(b.try_take_placement(ms(200)), Ok(()));
        // An Event needs the syncs' reserve of 2 over that.
        assert!(waits_about(b.try_take_event(ms(200)), ms(300)));
        assert_eq!(b.try_take_placement(ms(300)), Ok(()));
    }
}
