//! The policy follower's metrics: reloads by result, the running policy's hash, and when a
//! policy was last refused. Every series is served from the start (the counters at 0, the
//! hash of the policy read at start), so an alert on `increase(...)` has a sample to grow from
//! and `doctor` can compare the running hash with the mounted file's.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // label values are written as Prometheus users expect them
pub(crate) enum ReloadResult {
    applied,
    refused,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: ReloadResult,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HashLabels {
    hash: String,
}

#[derive(Debug, Clone)]
pub(crate) struct PolicyMetrics {
    reloads: Family<ResultLabels, Counter>,
    info: Family<HashLabels, Gauge>,
    last_refused: Gauge<f64, AtomicU64>,
}

impl PolicyMetrics {
    /// Registers under `jobwarden_policy_`, the running policy's hash being `hash`.
    pub(crate) fn register(registry: &mut Registry, hash: &str) -> PolicyMetrics {
        let metrics = PolicyMetrics {
            reloads: Family::default(),
            info: Family::default(),
            last_refused: Gauge::default(),
        };
        let r = registry.sub_registry_with_prefix("jobwarden_policy");
        r.register(
            "reloads",
            "New policy files read while running, by result: applied, or refused whole (invalid, or vetoed) with the running policy kept",
            metrics.reloads.clone(),
        );
        r.register(
            "info",
            "1 for the running policy, labelled with the hash of its file's text (FNV-1a 64, as doctor computes it)",
            metrics.info.clone(),
        );
        r.register(
            "last_refused_timestamp_seconds",
            "When a new policy file was last refused, as Unix time; 0: never since start",
            metrics.last_refused.clone(),
        );
        for result in [ReloadResult::applied, ReloadResult::refused] {
            let _series = metrics.reloads.get_or_create(&ResultLabels { result });
        }
        metrics.running(hash);
        metrics
    }

    /// The running policy is now the one named `hash`.
    pub(crate) fn running(&self, hash: &str) {
        self.info.clear();
        self.info
            .get_or_create(&HashLabels {
                hash: hash.to_owned(),
            })
            .set(1);
    }

    pub(crate) fn applied(&self, hash: &str) {
        self.reloads
            .get_or_create(&ResultLabels {
                result: ReloadResult::applied,
            })
            .inc();
        self.running(hash);
    }

    pub(crate) fn refused(&self, unix_seconds: f64) {
        self.reloads
            .get_or_create(&ResultLabels {
                result: ReloadResult::refused,
            })
            .inc();
        self.last_refused.set(unix_seconds);
    }
}
