//! The server's Prometheus metrics: reviews by endpoint, operation and verdict, their latency,
//! requests in progress, and the serving certificate's reloads and expiry. Label values come
//! from small closed sets, never from request data as sent, so a client cannot grow the series.

use std::sync::atomic::AtomicU64;

use jobwarden_admission::{Verdict, Webhook};
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

fn known_operation(operation: &str) -> &'static str {
    match operation {
        "CREATE" => "CREATE",
        "UPDATE" => "UPDATE",
        "DELETE" => "DELETE",
        "CONNECT" => "CONNECT",
        _ => "unknown",
    }
}
