//! The operations endpoints: `/healthz` (the process answers), `/readyz` (a certificate is
//! loaded, the HTTPS listener is accepting, namespace labels are synced when they are needed,
//! and the server is not draining) and `/metrics` (Prometheus text). The probes are open to
//! anyone, as the kubelet calls them without credentials; `/metrics` goes through the
//! [`MetricsAccess`] gate when there is one (`ops.rs` decides).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::registry::Registry;

use crate::metrics_access::MetricsAccess;

/// What readiness is made of. Every flag starts false except where noted.
#[derive(Debug)]
pub struct Health {
    certificate_loaded: AtomicBool,
    accepting: AtomicBool,
    /// True from the start when no namespace reflector is needed.
    namespaces_synced: AtomicBool,
    draining: AtomicBool,
}

impl Health {
    pub(crate) fn new(needs_namespaces: bool) -> Self {
        Health {
            certificate_loaded: AtomicBool::new(false),
            accepting: AtomicBool::new(false),
            namespaces_synced: AtomicBool::new(!needs_namespaces),
            draining: AtomicBool::new(false),
        }
    }

    /// Readiness for `--no-webhook`: no certificate, listener or namespace watch to wait for.
    pub(crate) fn without_webhook() -> Self {
        Health {
            certificate_loaded: AtomicBool::new(true),
            accepting: AtomicBool::new(true),
            namespaces_synced: AtomicBool::new(true),
            draining: AtomicBool::new(false),
        }
    }

    pub(crate) fn set_certificate_loaded(&self) {
        self.certificate_loaded.store(true, Ordering::SeqCst);
    }
    pub(crate) fn set_accepting(&self, accepting: bool) {
        self.accepting.store(accepting, Ordering::SeqCst);
    }
    pub(crate) fn set_namespaces_synced(&self) {
        self.namespaces_synced.store(true, Ordering::SeqCst);
    }
    pub(crate) fn set_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Why the server is not ready, or None when it is.
    pub fn not_ready_reason(&self) -> Option<&'static str> {
        if self.draining.load(Ordering::SeqCst) {
            Some("shutting down")
        } else if !self.certificate_loaded.load(Ordering::SeqCst) {
            Some("no TLS certificate loaded")
        } else if !self.accepting.load(Ordering::SeqCst) {
            Some("HTTPS listener not accepting")
        } else if !self.namespaces_synced.load(Ordering::SeqCst) {
            Some("namespace labels not synced yet")
        } else {
            None
        }
    }
}

#[derive(Clone)]
struct OpsState {
    health: Arc<Health>,
    registry: Arc<Registry>,
    access: Option<Arc<MetricsAccess>>,
}

/// The three endpoints; `/metrics` behind `access` when given.
pub(crate) fn router(
    health: Arc<Health>,
    registry: Arc<Registry>,
    access: Option<Arc<MetricsAccess>>,
) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(OpsState {
            health,
            registry,
            access,
        })
}

async fn readyz(State(state): State<OpsState>) -> Response {
    match state.health.not_ready_reason() {
        None => (StatusCode::OK, "ok\n").into_response(),
        Some(reason) => (StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n")).into_response(),
    }
}

async fn metrics(State(state): State<OpsState>, headers: HeaderMap) -> Response {
    if let Some(access) = &state.access
        && let Some(refusal) = access.refusal(&headers).await
    {
        return refusal.into_response();
    }
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, &state.registry) {
        Ok(()) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot encode metrics: {e}\n"),
        )
            .into_response(),
    }
}
