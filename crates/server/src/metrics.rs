//! The server's Prometheus metrics: reviews by endpoint, operation and verdict, their latency,
//! requests in progress, and the serving certificate's reloads and expiry. Label values come
//! from small closed sets, never from request data as sent, so a client cannot grow the series.
//! The label sets a review of a Job can get are served from the start, at 0: a series that
//! first appears at 1 has no earlier sample for `rate()` to grow from.

use std::sync::atomic::AtomicU64;

use jobwarden_admission::{Verdict, Webhook};

use crate::rejection;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // label values are written as Prometheus users expect them
pub enum Endpoint {
    mutate,
    validate,
}

impl From<Webhook> for Endpoint {
    fn from(webhook: Webhook) -> Self {
        match webhook {
            Webhook::Mutate => Endpoint::mutate,
            Webhook::Validate => Endpoint::validate,
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub endpoint: Endpoint,
    /// CREATE, UPDATE, DELETE, CONNECT, or `unknown` when the body was not readable.
    pub operation: &'static str,
    /// allowed, patched, ignored, denied_<code>, or why no review happened
    /// (unreadable, too_large, over_budget, bad_content_type).
    pub verdict: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabels {
    pub endpoint: Endpoint,
}

/// Every metric the server writes.
#[derive(Debug)]
pub struct Metrics {
    requests: Family<RequestLabels, Counter>,
    duration: Family<EndpointLabels, Histogram>,
    in_flight: Gauge,
    body_bytes: Gauge,
    certificate_reloads: Counter,
    certificate_reload_failures: Counter,
    certificate_expiry: Gauge<f64, AtomicU64>,
}

impl Metrics {
    /// Registers the server's metrics under `jobwarden_`.
    pub fn register(registry: &mut Registry) -> Metrics {
        let metrics = Metrics {
            requests: Family::default(),
            // 100 µs to ~1.6 s: a review takes well under a millisecond; the tail shows queueing.
            duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.0001, 2.0, 15))
            }),
            in_flight: Gauge::default(),
            body_bytes: Gauge::default(),
            certificate_reloads: Counter::default(),
            certificate_reload_failures: Counter::default(),
            certificate_expiry: Gauge::default(),
        };
        let r = registry.sub_registry_with_prefix("jobwarden");
        r.register(
            "admission_requests",
            "Admission requests answered, by endpoint, operation and verdict",
            metrics.requests.clone(),
        );
        r.register_with_unit(
            "admission_request_duration",
            "Time from request headers to response, by endpoint",
            Unit::Seconds,
            metrics.duration.clone(),
        );
        r.register(
            "admission_requests_in_flight",
            "Admission requests being read or reviewed",
            metrics.in_flight.clone(),
        );
        r.register_with_unit(
            "admission_request_body",
            "Bytes of request bodies being read or reviewed, held in the body budget (--max-buffered-body-bytes)",
            Unit::Bytes,
            metrics.body_bytes.clone(),
        );
        r.register(
            "tls_certificate_reloads",
            "Serving certificates loaded from disk after the first",
            metrics.certificate_reloads.clone(),
        );
        r.register(
            "tls_certificate_reload_failures",
            "New certificate files that could not be loaded (the previous certificate kept serving)",
            metrics.certificate_reload_failures.clone(),
        );
        r.register(
            "tls_certificate_expiry_timestamp_seconds",
            "notAfter of the certificate being served, as Unix time",
            metrics.certificate_expiry.clone(),
        );
        for labels in known_requests() {
            let _series = metrics.requests.get_or_create(&labels);
        }
        for endpoint in [Endpoint::mutate, Endpoint::validate] {
            let _series = metrics.duration.get_or_create(&EndpointLabels { endpoint });
        }
        metrics
    }

    pub(crate) fn observe(&self, webhook: Webhook, operation: &str, verdict: &str, seconds: f64) {
        let endpoint = Endpoint::from(webhook);
        self.requests
            .get_or_create(&RequestLabels {
                endpoint,
                operation: known_operation(operation),
                verdict: verdict.to_owned(),
            })
            .inc();
        self.duration
            .get_or_create(&EndpointLabels { endpoint })
            .observe(seconds);
    }

    /// Counts a request in progress until the guard is dropped.
    pub(crate) fn in_flight(&self) -> InFlight {
        self.in_flight.inc();
        InFlight(self.in_flight.clone())
    }

    /// The gauge the body budget keeps up to date.
    pub(crate) fn body_bytes(&self) -> Gauge {
        self.body_bytes.clone()
    }

    pub(crate) fn certificate_loaded(&self, first: bool, not_after: i64) {
        if !first {
            self.certificate_reloads.inc();
        }
        self.certificate_expiry.set(not_after as f64);
    }

    pub(crate) fn certificate_reload_failed(&self) {
        self.certificate_reload_failures.inc();
    }
}

pub(crate) struct InFlight(Gauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Verdict as a label value.
pub(crate) fn verdict_label(verdict: Verdict) -> String {
    verdict.to_string()
}

/// The label sets of the requests kube-apiserver sends through the registrations jobwarden
/// generates: the mutating webhooks are sent creates, which they allow or patch (they never
/// deny); the validating ones creates and updates, which they allow, or deny as invalid (422)
/// or forbidden by the policy (403); and either may refuse a request it cannot review, whose
/// operation is then unknown. Others (`ignored`, a 400 for a malformed review) come only from
/// a caller other than kube-apiserver, or a registration wider than jobwarden's, and appear
/// when they happen.
fn known_requests() -> Vec<RequestLabels> {
    let reviews = [
        (Endpoint::mutate, "CREATE", Verdict::Allowed),
        (Endpoint::mutate, "CREATE", Verdict::Patched),
    ]
    .into_iter()
    .chain(["CREATE", "UPDATE"].into_iter().flat_map(|operation| {
        [
            Verdict::Allowed,
            Verdict::Denied { code: 403 },
            Verdict::Denied { code: 422 },
        ]
        .map(|verdict| (Endpoint::validate, operation, verdict))
    }))
    .map(|(endpoint, operation, verdict)| RequestLabels {
        endpoint,
        operation,
        verdict: verdict_label(verdict),
    });
    let refusals = [Endpoint::mutate, Endpoint::validate]
        .into_iter()
        .flat_map(|endpoint| {
            rejection::VERDICTS.map(|verdict| RequestLabels {
                endpoint,
                operation: known_operation(""),
                verdict: verdict.to_owned(),
            })
        });
    reviews.chain(refusals).collect()
}

fn known_operation(operation: &str) -> &'static str {
    match operation {
        "CREATE" => "CREATE",
        "UPDATE" => "UPDATE",
        "DELETE" => "DELETE",
        "CONNECT" => "CONNECT",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    /// A server that has answered nothing serves every family the dashboard and the alerts
    /// read: the review label sets and the refusals (the alert's) at 0, a histogram per
    /// endpoint.
    #[test]
    fn a_fresh_server_serves_its_known_series_at_zero() {
        let mut registry = Registry::default();
        let _metrics = Metrics::register(&mut registry);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        for line in [
            "jobwarden_admission_requests_total{endpoint=\"mutate\",operation=\"CREATE\",verdict=\"patched\"} 0",
            "jobwarden_admission_requests_total{endpoint=\"validate\",operation=\"UPDATE\",verdict=\"denied_422\"} 0",
            "jobwarden_admission_requests_total{endpoint=\"validate\",operation=\"CREATE\",verdict=\"denied_403\"} 0",
            "jobwarden_admission_requests_total{endpoint=\"validate\",operation=\"unknown\",verdict=\"over_budget\"} 0",
            "jobwarden_admission_requests_total{endpoint=\"mutate\",operation=\"unknown\",verdict=\"error\"} 0",
            "jobwarden_admission_request_duration_seconds_count{endpoint=\"mutate\"} 0",
            "jobwarden_admission_request_duration_seconds_count{endpoint=\"validate\"} 0",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        let requests = text
            .lines()
            .filter(|l| l.starts_with("jobwarden_admission_requests_total{"))
            .count();
        assert_eq!(requests, 2 + 6 + 10, "{text}");
    }
}
