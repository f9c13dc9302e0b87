//! A request budget seen from outside: how long requests waited for it, and how many wait now,
//! by priority. Each owner registers its own under its own prefix (the dispatcher's are
//! `jobwarden_dispatch_management_budget_*`); the budget itself answers how many wait, with
//! metrics registered or not (the dispatcher publishes it on its Lease, for doctor).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

pub use super::request_budget::Priority;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PriorityLabels {
    /// `sync`, `placement` or `event`.
    pub priority: String,
}

/// 5 ms … 41 s.
fn wait_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

/// Handles to a budget's metrics; cheap to clone. `Default` gives metrics registered nowhere.
#[derive(Clone, Debug)]
pub struct BudgetMetrics {
    pub waited: Family<PriorityLabels, Histogram, fn() -> Histogram>,
    pub waiting: Family<PriorityLabels, Gauge>,
}

impl Default for BudgetMetrics {
    fn default() -> Self {
        BudgetMetrics {
            waited: Family::new_with_constructor(wait_histogram),
            waiting: Family::default(),
        }
    }
}

impl BudgetMetrics {
    /// Registers `budget_wait_seconds` and `budget_waiting` in `registry`, under the prefix it
    /// has (`what` names the budget in their help), every priority served from the start.
    pub fn register(registry: &mut Registry, what: &str) -> BudgetMetrics {
        let m = BudgetMetrics::default();
        registry.register(
            "budget_wait_seconds",
            format!(
                "How long requests waited for {what}'s request budget before they were sent, by \
                 priority: sync (status writes and every other request), placement (a Job's own \
                 writes: the record), event (Event writes, after the others)"
            ),
            m.waited.clone(),
        );
        registry.register(
            "budget_waiting",
            format!("Requests waiting now for {what}'s request budget, by priority"),
            m.waiting.clone(),
        );
        for priority in Priority::ALL {
            let labels = PriorityLabels {
                priority: priority.label().to_owned(),
            };
            let _ = m.waited.get_or_create(&labels);
            let _ = m.waiting.get_or_create(&labels);
        }
        m
    }
}

/// How long a window of [`Longest`] lasts.
const WINDOW: Duration = Duration::from_secs(60);

/// The longest wait of the sync requests that went in this window and the one before: the last
/// one to two minutes, without keeping every wait.
#[derive(Debug, Default)]
struct Longest {
    since: Option<Instant>,
    current: Duration,
    previous: Duration,
}

impl Longest {
    fn roll(&mut self, now: Instant) {
        let age = self.since.map(|s| now.saturating_duration_since(s));
        if age.is_none_or(|age| age >= WINDOW) {
            self.previous = match age {
                Some(age) if age < 2 * WINDOW => self.current,
                _ => Duration::ZERO,
            };
            self.current = Duration::ZERO;
            self.since = Some(now);
        }
    }

    fn went(&mut self, waited: Duration, now: Instant) {
        self.roll(now);
        self.current = self.current.max(waited);
    }

    fn longest(&mut self, now: Instant) -> Duration {
        self.roll(now);
        self.current.max(self.previous)
    }
}

/// What a budget's callers see of it: the requests waiting, by priority, the longest recent
/// wait of a sync's request, and the metrics fed.
#[derive(Clone, Debug, Default)]
pub struct BudgetSeen {
    waiting: Arc<[AtomicUsize; 3]>,
    longest: Arc<Mutex<Longest>>,
    metrics: Option<BudgetMetrics>,
}

impl BudgetSeen {
    pub fn new(metrics: Option<BudgetMetrics>) -> BudgetSeen {
        BudgetSeen {
            metrics,
            ..BudgetSeen::default()
        }
    }

    /// The longest a sync's request waited for the budget, of those that went in the last
    /// minute or two.
    pub fn longest_sync_wait(&self) -> Duration {
        self.longest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .longest(Instant::now())
    }

    /// How many requests of `priority` wait for the budget now.
    pub fn waiting(&self, priority: Priority) -> usize {
        self.counter(priority).load(Ordering::Relaxed)
    }

    fn counter(&self, priority: Priority) -> &AtomicUsize {
        let [sync, placement, event] = &*self.waiting;
        match priority {
            Priority::Sync => sync,
            Priority::Placement => placement,
            Priority::Event => event,
        }
    }

    fn labels(priority: Priority) -> PriorityLabels {
        PriorityLabels {
            priority: priority.label().to_owned(),
        }
    }

    /// A request of `priority` went without waiting.
    pub(super) fn went_at_once(&self, priority: Priority) {
        if let Some(m) = &self.metrics {
            m.waited.get_or_create(&Self::labels(priority)).observe(0.0);
        }
    }

    /// A request of `priority` starts waiting: it counts as waiting until the guard is
    /// dropped (it goes, or its caller gave up on it), and its wait is observed then.
    pub(super) fn waits(&self, priority: Priority) -> Waiting {
        self.counter(priority).fetch_add(1, Ordering::Relaxed);
        if let Some(m) = &self.metrics {
            m.waiting.get_or_create(&Self::labels(priority)).inc();
        }
        Waiting {
            seen: self.clone(),
            priority,
            since: Instant::now(),
        }
    }
}

/// A request waiting for the budget ([`BudgetSeen::waits`]).
pub(super) struct Waiting {
    seen: BudgetSeen,
    priority: Priority,
    since: Instant,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let waited = self.since.elapsed();
        if self.priority == Priority::Sync {
            self.seen
                .longest
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .went(waited, Instant::now());
        }
        let labels = BudgetSeen::labels(self.priority);
        self.seen
            .counter(self.priority)
            .fetch_sub(1, Ordering::Relaxed);
        if let Some(m) = &self.seen.metrics {
            m.waiting.get_or_create(&labels).dec();
            m.waited
                .get_or_create(&labels)
                .observe(waited.as_secs_f64());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_wait_is_of_the_last_minute_or_two() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let mut l = Longest::default();
        assert_eq!(l.longest(at(0)), Duration::ZERO);
        l.went(Duration::from_millis(1500), at(1));
        l.went(Duration::from_millis(200), at(30));
        assert_eq!(l.longest(at(59)), Duration::from_millis(1500));
        // The next window (from 70 s) still says it; the one after does not.
        l.went(Duration::from_millis(100), at(70));
        assert_eq!(l.longest(at(100)), Duration::from_millis(1500));
        assert_eq!(l.longest(at(135)), Duration::from_millis(100));
        assert_eq!(l.longest(at(400)), Duration::ZERO);
    }
}
