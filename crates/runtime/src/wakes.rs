//! What wakes a controller's syncs, scheduled: a wake at once or batched for a period (so the
//! events of one burst are handled by one sync, as upstream's `enqueueSyncJobBatched` does),
//! and the stream of them ended when a term of leadership stops. The Job controller and the
//! dispatcher schedule their syncs with these, feeding kube-runtime's applier.

use std::collections::HashSet;
use std::hash::Hash;
use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use tokio_util::time::DelayQueue;

/// One wake of one object's sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake<T> {
    /// Sync it now.
    Now(T),
    /// Sync it after the batch period.
    Batched(T),
}

/// `Wake::Batched` requests wait `period` (the first one counts: more events for the same
/// object in the meantime ride along); `Wake::Now` requests go at once.
pub fn batched<T>(
    wakes: impl Stream<Item = Wake<T>> + Send + 'static,
    period: Duration,
) -> impl Stream<Item = T> + Send
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    struct State<S, T> {
        wakes: Option<Pin<Box<S>>>,
        delayed: DelayQueue<T>,
        waiting: HashSet<T>,
    }
    let state = State {
        wakes: Some(Box::pin(wakes)),
        delayed: DelayQueue::new(),
        waiting: HashSet::new(),
    };
    futures::stream::unfold(state, move |mut s| async move {
        enum Next<T> {
            Wake(Option<Wake<T>>),
            Due(T),
        }
        loop {
            let Some(wakes) = s.wakes.as_mut() else {
                // The input ended: what is waiting goes at once.
                let next = s.waiting.iter().next().cloned()?;
                s.waiting.remove(&next);
                return Some((next, s));
            };
            let delayed = &mut s.delayed;
            let next = tokio::select! {
                wake = wakes.next() => Next::Wake(wake),
                Some(expired) = futures::future::poll_fn(|cx| delayed.poll_expired(cx)), if !delayed.is_empty() => {
                    Next::Due(expired.into_inner())
                }
            };
            match next {
                Next::Wake(Some(Wake::Now(r))) => return Some((r, s)),
                Next::Wake(Some(Wake::Batched(r))) => {
                    if period.is_zero() {
                        return Some((r, s));
                    }
                    if s.waiting.insert(r.clone()) {
                        s.delayed.insert(r, period);
                    }
                }
                Next::Wake(None) => s.wakes = None,
                Next::Due(r) => {
                    s.waiting.remove(&r);
                    return Some((r, s));
                }
            }
        }
    })
}

/// The stream, ended and dropped as soon as `stop` resolves. Dropping matters: a controller's
/// queue owns its Job cache's writer, and kube's applier holds its syncs until that cache is
/// ready (or its writer gone), so a stop during start-up must let go of it.
pub fn until<S: Stream + Send + 'static>(
    stream: S,
    stop: impl Future<Output = ()> + Send + 'static,
) -> impl Stream<Item = S::Item> + Send {
    let state = (Some(Box::pin(stream)), Box::pin(stop));
    futures::stream::unfold(state, |(stream, mut stop)| async move {
        let mut stream = stream?;
        tokio::select! {
            _ = &mut stop => None,
            item = stream.next() => item.map(|i| (i, (Some(stream), stop))),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_batched_wakes_is_one_and_a_wake_now_goes_at_once() {
        let wakes = futures::stream::iter([
            Wake::Batched("a"),
            Wake::Batched("a"),
            Wake::Now("b"),
            Wake::Batched("a"),
        ]);
        let out: Vec<&str> = batched(wakes, Duration::from_secs(1)).collect().await;
        assert_eq!(out, ["b", "a"]);
    }

    #[tokio::test]
    async fn the_stream_ends_when_stop_resolves() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let forever = futures::stream::pending::<u8>();
        let mut ended = Box::pin(until(forever, async {
            let _ = rx.await;
        }));
        let _ = tx.send(());
        assert_eq!(ended.next().await, None);
    }
}
