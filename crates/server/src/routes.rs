//! The admission routes, `POST /mutate` and `POST /validate`: read the body within its cap and
//! the shared body budget (`request_body.rs`), hand it to `jobwarden_admission::Reviewer`,
//! send back the exact bytes it returns, and write one log line and the metrics for each
//! request. No Job rule lives here.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::from_fn_with_state;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use jobwarden_admission::{Context, Reviewed, Reviewer, Verdict, Webhook};
use tokio::sync::watch;
use tower_http::timeout::TimeoutLayer;

use crate::body_budget::BodyBudget;
use crate::limits::{ConcurrencyLimit, Deadline, Limits, limit_concurrency, stamp_deadline};
use crate::metrics::{Metrics, verdict_label};
use crate::namespaces::NamespaceLabels;
use crate::rejection::Rejection;
use crate::request_body::{self, ReadBody};

/// Bodies above this size are reviewed on the blocking pool, so one large object does not
/// stall the other requests sharing the worker thread.
const INLINE_REVIEW_BYTES: usize = 256 * 1024;

#[derive(Clone)]
pub(crate) struct AdmissionState {
    /// The reviewer of the running policy (`server::follow_policy`).
    pub reviewers: watch::Receiver<Arc<Reviewer>>,
    pub metrics: Arc<Metrics>,
    pub namespaces: Option<NamespaceLabels>,
    pub max_body_bytes: usize,
    pub body_budget: BodyBudget,
    pub request_timeout: Duration,
}

pub(crate) fn router(state: AdmissionState, limits: &Limits) -> Router {
    Router::new()
        .route("/mutate", post(mutate))
        .route("/validate", post(validate))
        .with_state(state)
        .layer(from_fn_with_state(
            ConcurrencyLimit::new(limits.max_concurrent_requests),
            limit_concurrency,
        ))
        // Outside the concurrency limit, so the wait for a slot counts against the deadline too.
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            limits.request_timeout,
        ))
        // Outermost: the deadline the handler sees is never later than the timeout layer's, so
        // a request waiting for body budget gets its own answer rather than a bare 408.
        .layer(from_fn_with_state(limits.request_timeout, stamp_deadline))
}

async fn mutate(State(state): State<AdmissionState>, request: Request) -> Response {
    answer(state, Webhook::Mutate, request).await
}

async fn validate(State(state): State<AdmissionState>, request: Request) -> Response {
    answer(state, Webhook::Validate, request).await
}

async fn answer(state: AdmissionState, webhook: Webhook, request: Request) -> Response {
    let started = Instant::now();
    let _in_flight = state.metrics.in_flight();
    let (parts, body) = request.into_parts();
    let deadline = parts
        .extensions
        .get::<Deadline>()
        .map_or_else(|| Deadline::after(state.request_timeout).0, |d| d.0);
    let read = request_body::read(
        &parts.headers,
        body,
        state.max_body_bytes,
        &state.body_budget,
        deadline,
    )
    .await;
    let outcome = match read {
        Ok(ReadBody { bytes, reservation }) => {
            let reviewed = review(&state, webhook, bytes).await;
            // Held until the review is done with the body.
            drop(reservation);
            reviewed
        }
        Err(rejection) => Err(rejection),
    };
    let seconds = started.elapsed().as_secs_f64();
    match outcome {
        Ok(reviewed) => {
            let s = &reviewed.summary;
            let verdict = verdict_label(s.verdict);
            state
                .metrics
                .observe(webhook, &s.operation, &verdict, seconds);
            log_review(webhook, &reviewed, seconds);
            ([(header::CONTENT_TYPE, "application/json")], reviewed.body).into_response()
        }
        Err(rejection) => {
            state
                .metrics
                .observe(webhook, "", rejection.verdict(), seconds);
            let message = rejection.message();
            tracing::warn!(
                %webhook,
                status = rejection.status().as_u16(),
                error = %message,
                duration_ms = millis(seconds),
                "admission request refused"
            );
            (
                rejection.status(),
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                format!("{message}\n"),
            )
                .into_response()
        }
    }
}

async fn review(
    state: &AdmissionState,
    webhook: Webhook,
    body: Bytes,
) -> Result<Reviewed, Rejection> {
    let namespaces = state.namespaces.clone();
    let large = body.len() > INLINE_REVIEW_BYTES;
    // One borrow per review: the policy in force when the review starts is the one it answers
    // under, even if a new one is applied meanwhile.
    let reviewer = state.reviewers.borrow().clone();
    let run = move || {
        let lookup = |ns: &str| namespaces.as_ref().and_then(|n| n.labels(ns));
        let ctx = Context {
            namespace_labels: Some(&lookup),
        };
        reviewer
            .review(webhook, &body, &ctx)
            .map_err(Rejection::Unreadable)
    };
    if large {
        on_blocking_pool(run).await
    } else {
        run()
    }
}

async fn on_blocking_pool(
    run: impl FnOnce() -> Result<Reviewed, Rejection> + Send + 'static,
) -> Result<Reviewed, Rejection> {
    tokio::task::spawn_blocking(run)
        .await
        .unwrap_or_else(|error| {
            tracing::error!(%error, "review task failed");
            Err(Rejection::ReviewFailed)
        })
}

/// Milliseconds to the microsecond, so log lines do not carry float noise.
fn millis(seconds: f64) -> f64 {
    (seconds * 1e6).round() / 1e3
}

fn log_review(webhook: Webhook, reviewed: &Reviewed, seconds: f64) {
    let s = &reviewed.summary;
    macro_rules! line {
        ($level:ident, $message:literal) => {
            tracing::$level!(
                %webhook,
                uid = %s.uid,
                kind = %s.kind,
                namespace = %s.namespace,
                name = %s.name,
                operation = %s.operation,
                sub_resource = %s.sub_resource,
                dry_run = s.dry_run,
                verdict = %s.verdict,
                duration_ms = millis(seconds),
                $message
            )
        };
    }
    match s.verdict {
        // The webhook configuration should never send these: say so, but let them through.
        Verdict::Ignored => line!(
            warn,
            "not a request jobwarden reviews; allowed untouched (check the webhook rules)"
        ),
        _ => line!(info, "review"),
    }
}
