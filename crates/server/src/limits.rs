//! Resource limits of the admission listener and where each is enforced: TLS handshake and
//! header timeouts and HTTP/2 hardening on the connection (hyper), the request deadline and the
//! concurrency limit around each request (tower-http, tokio), the body cap and the body memory
//! budget in `request_body.rs`. Nothing a client sends may hold a connection, a task or memory
//! without bound.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::sync::Semaphore;

/// The default body budget: two maximum-size UPDATE reviews (7 MiB) at once, one per core of
/// the 2-core pod (a review is CPU-bound: more large ones at once would only wait for a core
/// while holding their memory), while ordinary Jobs (2–5 KiB; 64 in flight take under 1 MiB)
/// never wait for it. A review's working memory comes on top, measured at 4–5 times the body
/// for a large create and up to 25 times for a spec update whose pod template is tens of
/// thousands of tiny JSON values (BENCHMARKS.md, "Memory of large reviews").
pub const DEFAULT_MAX_BUFFERED_BODY_BYTES: usize = 16 * 1024 * 1024;

/// Limits of the admission listener.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request body, in bytes (413 beyond). kube-apiserver refuses requests over 3 MiB,
    /// and an UPDATE review carries both the object and the old object, plus the envelope.
    pub max_body_bytes: usize,
    /// Bytes of request bodies buffered at once, all requests together: what each request
    /// reserves before buffering its body (503 when none is freed before its deadline). At
    /// least `max_body_bytes`, so that any acceptable body can be read.
    pub max_buffered_body_bytes: usize,
    /// From request headers to response, including reading the body (408 beyond).
    pub request_timeout: Duration,
    /// Time to send request headers; also how long a connection may go without a request in
    /// flight (before its first request, between requests, and on HTTP/2) before it is closed.
    pub header_timeout: Duration,
    pub tls_handshake_timeout: Duration,
    pub max_connections: u32,
    pub max_concurrent_requests: u32,
    pub http2_max_concurrent_streams: u32,
    /// HTTP/2 header block limit. hyper's default is 16 MiB; kube-apiserver sends a handful of
    /// short headers.
    pub http2_max_header_list_size: u32,
    /// HTTP/2 PING interval and how long to wait for the answer, to drop dead peers.
    pub http2_keep_alive_interval: Duration,
    pub http2_keep_alive_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 7 * 1024 * 1024,
            max_buffered_body_bytes: DEFAULT_MAX_BUFFERED_BODY_BYTES,
            request_timeout: Duration::from_secs(10),
            header_timeout: Duration::from_secs(30),
            tls_handshake_timeout: Duration::from_secs(10),
            max_connections: 1024,
            // Reviews are CPU-bound and take well under a millisecond; more than a few dozen
            // in progress at once on a 2-core pod only means queueing inside the process.
            max_concurrent_requests: 64,
            http2_max_concurrent_streams: 100,
            http2_max_header_list_size: 16 * 1024,
            http2_keep_alive_interval: Duration::from_secs(20),
            http2_keep_alive_timeout: Duration::from_secs(10),
        }
    }
}

impl Limits {
    /// The HTTP/1.1 + HTTP/2 connection builder with these limits.
    pub(crate) fn connection_builder(&self) -> auto::Builder<TokioExecutor> {
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_timeout)
            .keep_alive(true)
            // Also the cap on a request's head (line and headers), which hyper reads into
            // this buffer: far above kube-apiserver's few headers, far below hyper's ~400 KiB.
            .max_buf_size(64 * 1024);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(self.http2_max_concurrent_streams)
            .max_header_list_size(self.http2_max_header_list_size)
            // Rapid reset (CVE-2023-44487): a client that opens and cancels streams faster than
            // they are served is disconnected instead of making us queue work for it.
            .max_pending_accept_reset_streams(20)
            // A client that keeps provoking stream errors is disconnected too.
            .max_local_error_reset_streams(256)
            .max_send_buf_size(1024 * 1024)
            .keep_alive_interval(self.http2_keep_alive_interval)
            .keep_alive_timeout(self.http2_keep_alive_timeout);
        builder
    }
}

/// Slots for reviews in progress, shared by every route and connection.
#[derive(Debug, Clone)]
pub(crate) struct ConcurrencyLimit(Arc<Semaphore>);

impl ConcurrencyLimit {
    pub(crate) fn new(max: u32) -> Self {
        ConcurrencyLimit(Arc::new(Semaphore::new(max as usize)))
    }
}

/// Waits for a free slot, then runs the request. Written as a middleware rather than tower's
/// `ConcurrencyLimit` because that one waits in `poll_ready`, outside the request timeout, and
/// axum applies a layer per route (one limit each); here the wait is part of the request and
/// so bounded by the timeout layer around it, and the slots are shared.
pub(crate) async fn limit_concurrency(
    State(limit): State<ConcurrencyLimit>,
    request: Request,
    next: Next,
) -> Response {
    match limit.0.acquire().await {
        Ok(_slot) => next.run(request).await,
        // The semaphore is never closed; if it were, refuse rather than run unlimited.
        Err(_) => (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "server is shutting down\n",
        )
            .into_response(),
    }
}

/// When the request must be answered by.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline(pub tokio::time::Instant);

impl Deadline {
    pub(crate) fn after(timeout: Duration) -> Deadline {
        Deadline(tokio::time::Instant::now() + timeout)
    }
}

/// Stamps the request with its deadline. Runs before the timeout layer starts its clock, so
/// whatever waits inside against this deadline (the body budget) gives up no later than the
/// timeout layer would, and answers with its own reason.
pub(crate) async fn stamp_deadline(
    State(timeout): State<Duration>,
    mut request: Request,
    next: Next,
) -> Response {
    request.extensions_mut().insert(Deadline::after(timeout));
    next.run(request).await
}
