//! The placements under way at once, at most a limit: a wake to place a Job waits here, in the
//! order it came, until a place is free; every other wake (a copy's change to mirror, a Job
//! ending, a worker lost) goes on at once.
//!
//! Why: the syncs' queue (kube-runtime's applier) runs wakes in the order they are due, a few
//! at a time. A burst of 1,000 new Jobs queued 1,000 placements at once, each a write on the
//! management cluster within its request budget (20 s of it at 50 qps), and a copy's change
//! that came a second later waited behind all of them: the mirror lagged 14 s at the 99th
//! percentile. With at most half the syncs placing, a mirror waits for a few placements, not
//! for the burst; and placing stays as fast as the budget lets it, while the workers, which
//! run the Jobs far slower than they are placed, never run short.

use std::collections::{HashSet, VecDeque};
use std::hash::Hash;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::{Stream, StreamExt as _};
use tokio::sync::Notify;

/// One wake, and whether it is for placing its Job.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Routed<T> {
    pub job: T,
    pub placing: bool,
}

struct State<T> {
    under_way: HashSet<T>,
    waiting: VecDeque<T>,
}

/// The lane, shared by the stream of wakes and the syncs that end.
pub struct PlacingLane<T> {
    limit: usize,
    state: Mutex<State<T>>,
    freed: Notify,
}

impl<T: Clone + Eq + Hash + Send + 'static> PlacingLane<T> {
    /// A lane for at most `limit` placements at once (at least one).
    pub fn new(limit: usize) -> Arc<PlacingLane<T>> {
        Arc::new(PlacingLane {
            limit: limit.max(1),
            state: Mutex::new(State {
                under_way: HashSet::new(),
                waiting: VecDeque::new(),
            }),
            freed: Notify::new(),
        })
    }

    fn state(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A sync of `job` ended, or the Job is gone: its place is free, and a wake of it that
    /// still waits is dropped (that sync has seen what it would see).
    pub fn done(&self, job: &T) {
        let freed = {
            let mut s = self.state();
            s.waiting.retain(|w| w != job);
            s.under_way.remove(job)
        };
        if freed {
            self.freed.notify_one();
        }
    }

    /// How many placements are under way and how many wait, for a test or a gauge.
    pub fn counts(&self) -> (usize, usize) {
        let s = self.state();
        (s.under_way.len(), s.waiting.len())
    }

    /// A placing wake of `job`: through at once when it is under way already or a place is
    /// free (it takes the place), else queued once.
    fn offer(&self, job: T) -> Option<T> {
        let mut s = self.state();
        if s.under_way.contains(&job) {
            return Some(job);
        }
        if s.under_way.len() < self.limit {
            s.under_way.insert(job.clone());
            return Some(job);
        }
        if !s.waiting.contains(&job) {
            s.waiting.push_back(job);
        }
        None
    }

    /// The first waiting wake, when a place is free (it takes the place).
    fn next_waiting(&self) -> Option<T> {
        let mut s = self.state();
        if s.under_way.len() >= self.limit {
            return None;
        }
        let job = s.waiting.pop_front()?;
        s.under_way.insert(job.clone());
        Some(job)
    }

    /// `wakes`, placing ones held to the lane's limit. Ends when `wakes` ends.
    pub fn gate(
        self: Arc<Self>,
        wakes: impl Stream<Item = Routed<T>> + Send + 'static,
    ) -> impl Stream<Item = T> + Send {
        let wakes: Pin<Box<dyn Stream<Item = Routed<T>> + Send>> = Box::pin(wakes);
        futures::stream::unfold((self, wakes), |(lane, mut wakes)| async move {
            loop {
                if let Some(job) = lane.next_waiting() {
                    return Some((job, (lane, wakes)));
                }
                let freed = lane.freed.notified();
                tokio::select! {
                    wake = wakes.next() => match wake {
                        None => return None,
                        Some(Routed { job, placing: false }) => return Some((job, (lane, wakes))),
                        Some(Routed { job, placing: true }) => {
                            if let Some(job) = lane.offer(job) {
                                return Some((job, (lane, wakes)));
                            }
                        }
                    },
                    () = freed => {}
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placing(job: &'static str) -> Routed<&'static str> {
        Routed { job, placing: true }
    }

    fn other(job: &'static str) -> Routed<&'static str> {
        Routed {
            job,
            placing: false,
        }
    }

    /// The next wake the gate lets through, if one is ready now.
    async fn next_now(
        gate: &mut (impl Stream<Item = &'static str> + Unpin),
    ) -> Option<&'static str> {
        tokio::time::timeout(std::time::Duration::ZERO, gate.next())
            .await
            .ok()
            .flatten()
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_placements_lets_the_mirror_through_and_goes_on_as_each_ends() {
        let lane = PlacingLane::new(2);
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let mut gate = Box::pin(lane.clone().gate(rx));
        for job in ["a", "b", "c", "d"] {
            tx.unbounded_send(placing(job)).ok();
        }
        // The same Job's wake again, while it waits: queued once.
        tx.unbounded_send(placing("c")).ok();
        tx.unbounded_send(other("mirror")).ok();
        let mut seen = Vec::new();
        while let Some(job) = next_now(&mut gate).await {
            seen.push(job);
        }
        assert_eq!(seen, ["a", "b", "mirror"]);
        assert_eq!(lane.counts(), (2, 2));
        // A placing wake of a Job under way goes through on its place.
        tx.unbounded_send(placing("a")).ok();
        assert_eq!(next_now(&mut gate).await, Some("a"));

        lane.done(&"a");
        assert_eq!(next_now(&mut gate).await, Some("c"));
        assert_eq!(next_now(&mut gate).await, None);
        // A Job gone while it waits frees nothing and is not let through.
        lane.done(&"d");
        assert_eq!(lane.counts(), (2, 0));
        lane.done(&"b");
        lane.done(&"c");
        assert_eq!(next_now(&mut gate).await, None);
        assert_eq!(lane.counts(), (0, 0));
        drop(tx);
        assert_eq!(gate.next().await, None);
    }
}
