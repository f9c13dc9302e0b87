//! Events not written, and Events waiting, counted. Each controller registers its own under its
//! own prefix (the Job controller's are `jobwarden_controller_events_*`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DroppedLabels {
    /// `rate_limited` (the Job's event spam filter), `queue_full` (the oldest pending Event
    /// made room for a newer one), `not_leading` (pending when the Lease was lost) or
    /// `stopped` (pending when the controller stopped and its drain ran out of time).
    pub reason: String,
}

/// Handles to the Event metrics; cheap to clone (each is an `Arc` inside). `Default` gives
/// metrics registered nowhere.
#[derive(Clone, Debug, Default)]
pub struct EventMetrics {
    pub events_dropped: Family<DroppedLabels, Counter>,
    pub events_queued: Gauge,
}

impl EventMetrics {
    /// Registers `events_dropped` and `events_queued` in `registry`, under the prefix it has,
    /// and returns their handles.
    pub fn register(registry: &mut Registry) -> EventMetrics {
        let m = EventMetrics::default();
        registry.register(
            "events_dropped",
            "Events not written, by reason: the Job's event rate limit spent (rate_limited), the \
             oldest pending Event dropped for a newer one (queue_full), the Lease lost \
             (not_leading), or the controller stopped before writing them (stopped)",
            m.events_dropped.clone(),
        );
        // Each reason served from the start at 0: an alert on its increase sees the first drops.
        for reason in ["rate_limited", "queue_full", "not_leading", "stopped"] {
            let _series = m.events_dropped.get_or_create(&DroppedLabels {
                reason: reason.to_owned(),
            });
        }
        registry.register(
            "events_queued",
            "Events waiting to be written (they wait for request budget the syncs leave)",
            m.events_queued.clone(),
        );
        m
    }
}
