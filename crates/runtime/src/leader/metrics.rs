//! Who leads, counted: whether this replica holds the Lease, the times it stopped and why, and
//! how long its last renewal took. The process has one Lease whatever controllers lead under
//! it, so one set of these; the caller's (sub-)registry gives them their prefix.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Leadership;
use crate::client::Answers;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeaderLossLabels {
    /// `renew_deadline` (no renewal within the renew deadline), `conflict` (another replica
    /// holds the Lease) or `released` (given up on shutdown, or when the loop ended).
    pub reason: String,
    /// `answering` when the API server answered another of the controller's requests after
    /// the last renewal (the Lease was lost while the API server worked: jobwarden's own
    /// fault), `silent` otherwise (an outage, or a network cut).
    pub api_server: String,
}

/// Handles to the leadership metrics; cheap to clone (each is an `Arc` inside). `Default`
/// gives metrics registered nowhere.
#[derive(Clone, Debug, Default)]
pub struct LeaderMetrics {
    pub leader: Gauge,
    pub leader_losses: Family<LeaderLossLabels, Counter>,
    pub leader_last_renewal_seconds: Gauge<f64, AtomicU64>,
}

impl LeaderMetrics {
    /// Registers the metrics in `registry` (`leader`, `leader_losses`,
    /// `leader_last_renewal_seconds`, under the prefix the registry has) and returns their
    /// handles.
    pub fn register(registry: &mut Registry) -> LeaderMetrics {
        let m = LeaderMetrics::default();
        registry.register(
            "leader",
            "1 while this replica holds the Lease",
            m.leader.clone(),
        );
        registry.register(
            "leader_losses",
            "Times this replica stopped leading, by reason (renew_deadline, conflict, released) and \
             whether the API server answered the controller's other requests since the last renewal \
             (api_server: answering or silent)",
            m.leader_losses.clone(),
        );
        // Served at 0 from the start, so that an alert's increase() sees the first loss.
        for reason in ["renew_deadline", "conflict", "released"] {
            for api_server in ["answering", "silent"] {
                let _series = m.leader_losses.get_or_create(&LeaderLossLabels {
                    reason: reason.to_owned(),
                    api_server: api_server.to_owned(),
                });
            }
        }
        registry.register(
            "leader_last_renewal_seconds",
            "How long the last successful acquisition or renewal of the Lease took (its read and \
             its write); the leader steps down when none succeeds within the renew deadline",
            m.leader_last_renewal_seconds.clone(),
        );
        m
    }

    /// What a leadership change does to the metrics. `answers` tells whether the API server
    /// answered the work's requests since the last renewal.
    pub fn observe(&self, answers: &Answers, change: Leadership) {
        match change {
            Leadership::Started => {
                self.leader.set(1);
            }
            Leadership::Renewed { took } => {
                self.leader_last_renewal_seconds.set(took.as_secs_f64());
            }
            Leadership::Stopped {
                reason,
                last_renewed,
            } => {
                self.leader.set(0);
                let api_server = if answers.since(last_renewed) {
                    "answering"
                } else {
                    "silent"
                };
                self.leader_losses
                    .get_or_create(&LeaderLossLabels {
                        reason: reason.label().to_owned(),
                        api_server: api_server.to_owned(),
                    })
                    .inc();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn every_loss_series_is_served_at_zero_under_the_registry_s_prefix() {
        let mut registry = Registry::default();
        let m = LeaderMetrics::register(registry.sub_registry_with_prefix("jobwarden_controller"));
        m.observe(&Answers::default(), Leadership::Started);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        assert!(text.contains("jobwarden_controller_leader 1"), "{text}");
        assert!(
            text.contains(
                "jobwarden_controller_leader_losses_total{reason=\"conflict\",api_server=\"silent\"} 0"
            ),
            "{text}"
        );
        assert!(
            text.contains("jobwarden_controller_leader_last_renewal_seconds"),
            "{text}"
        );
    }
}
