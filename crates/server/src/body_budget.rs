//! The memory request bodies may take, all requests together. A request reserves bytes from
//! this budget before it buffers them, waits (until its deadline) while the budget is full,
//! and gives them back when it is answered. Without it, 64 requests in flight of 7 MiB each
//! could hold 448 MiB of buffers. It must never hand out more than the budget, and never hold
//! bytes for a request that has ended (a reservation is released when dropped).
//!
//! Waiting is first fit, not first come: a small review passes a large body that does not fit
//! yet, so ordinary Job reviews keep flowing while a few large ones wait for room.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Shared by every request of the listener.
#[derive(Debug, Clone)]
pub(crate) struct BodyBudget(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    total: usize,
    used: AtomicUsize,
    /// Requests waiting for bytes: a release wakes them only when there are any.
    waiting: AtomicUsize,
    released: Notify,
    /// `used`, for /metrics.
    gauge: Gauge,
}

/// The budget stayed too full for this request until its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OverBudget {
    pub total: usize,
}

/// Bytes held for one request; given back when dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    budget: Arc<Shared>,
    bytes: usize,
}

impl BodyBudget {
    pub(crate) fn new(total: usize, gauge: Gauge) -> Self {
        BodyBudget(Arc::new(Shared {
            total,
            used: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            released: Notify::new(),
            gauge,
        }))
    }

    /// Reserves `bytes`, waiting until `deadline` for them to be free.
    pub(crate) async fn reserve(
        &self,
        bytes: usize,
        deadline: Instant,
    ) -> Result<Reservation, OverBudget> {
        let mut reservation = Reservation {
            budget: self.0.clone(),
            bytes: 0,
        };
        reservation.grow(bytes, deadline).await?;
        Ok(reservation)
    }
}

impl Reservation {
    /// Adds `more` bytes to the reservation, waiting until `deadline` for them to be free.
    pub(crate) async fn grow(&mut self, more: usize, deadline: Instant) -> Result<(), OverBudget> {
        let budget = &self.budget;
        let over = OverBudget {
            total: budget.total,
        };
        if more == 0 {
            return Ok(());
        }
        if self.bytes.saturating_add(more) > budget.total {
            // More than the whole budget can never be had: say so now rather than at the deadline.
            return Err(over);
        }
        // Most requests find room at once and never touch the waiters' list.
        if budget.try_take(more) {
            self.bytes += more;
            return Ok(());
        }
        budget.waiting.fetch_add(1, Ordering::SeqCst);
        let taken = async {
            loop {
                // Registered before the attempt, so a release between the attempt and the
                // wait still wakes this request.
                let released = budget.released.notified();
                tokio::pin!(released);
                released.as_mut().enable();
                if budget.try_take(more) {
                    return;
                }
                released.await;
            }
        };
        let result = tokio::time::timeout_at(deadline, taken).await;
        budget.waiting.fetch_sub(1, Ordering::SeqCst);
        match result {
            Ok(()) => {
                self.bytes += more;
                Ok(())
            }
            Err(_) => Err(over),
        }
    }

    /// The bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Shared {
    fn try_take(&self, bytes: usize) -> bool {
        let taken = self
            .used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                used.checked_add(bytes).filter(|&after| after <= self.total)
            })
            .is_ok();
        if taken {
            self.gauge.inc_by(gauge_value(bytes));
        }
        taken
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.bytes == 0 {
            return;
        }
        self.budget.used.fetch_sub(self.bytes, Ordering::SeqCst);
        self.budget.gauge.dec_by(gauge_value(self.bytes));
        // A waiter counts itself, registers, then tries again; all four steps are SeqCst, so
        // either its try sees these bytes free or this sees it counted after it registered.
        if self.budget.waiting.load(Ordering::SeqCst) > 0 {
            self.budget.released.notify_waiters();
        }
    }
}

fn gauge_value(bytes: usize) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn budget(total: usize) -> (BodyBudget, Gauge) {
        let gauge = Gauge::default();
        (BodyBudget::new(total, gauge.clone()), gauge)
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    #[tokio::test]
    async fn reservations_add_up_to_the_budget_and_no_more() {
        let (budget, gauge) = budget(100);
        let a = budget.reserve(60, soon()).await.unwrap();
        let mut b = budget.reserve(30, soon()).await.unwrap();
        assert_eq!(gauge.get(), 90);
        // 20 more do not fit before an immediate deadline.
        assert_eq!(
            b.grow(20, Instant::now()).await,
            Err(OverBudget { total: 100 })
        );
        assert_eq!((b.bytes(), gauge.get()), (30, 90));
        b.grow(10, Instant::now()).await.unwrap();
        assert_eq!(gauge.get(), 100);
        drop(a);
        assert_eq!(gauge.get(), 40);
        drop(b);
        assert_eq!(gauge.get(), 0);
    }

    #[tokio::test]
    async fn more_than_the_whole_budget_is_refused_at_once() {
        let (budget, _) = budget(100);
        let far = Instant::now() + Duration::from_secs(3600);
        assert!(budget.reserve(101, far).await.is_err());
        let mut r = budget.reserve(100, far).await.unwrap();
        assert!(r.grow(1, far).await.is_err());
    }

    #[tokio::test]
    async fn a_waiting_request_gets_the_bytes_once_they_are_released() {
        let (budget, gauge) = budget(100);
        let held = budget.reserve(80, soon()).await.unwrap();
        let waiting = tokio::spawn({
            let budget = budget.clone();
            async move { budget.reserve(50, soon()).await.map(|r| r.bytes()) }
        });
        // A small one fits beside the held bytes while the large one waits.
        let small = budget.reserve(20, soon()).await.unwrap();
        assert_eq!(gauge.get(), 100);
        drop(held);
        assert_eq!(waiting.await.unwrap(), Ok(50));
        drop(small);
        assert_eq!(gauge.get(), 0);
    }
}
