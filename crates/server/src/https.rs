//! The HTTPS admission listener: accept within the connection limit, TLS handshake within its
//! timeout, then HTTP/1.1 or HTTP/2 (chosen by ALPN) on each connection. A connection with no
//! request in flight for the idle timeout is closed, so connections that say nothing cannot
//! hold every slot. Stopping the listener lets in-flight requests finish before it returns.
//! A client that speaks plain HTTP to this port is told so in plain HTTP.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::limits::Limits;

/// Serves until `stop_accepting` is cancelled, then waits up to `drain_timeout` for open
/// connections to finish their requests (HTTP/1.1 closes after the current response; HTTP/2
/// sends GOAWAY and completes the open streams).
pub(crate) async fn serve(
    listener: TcpListener,
    tls: TlsAcceptor,
    app: Router,
    limits: Limits,
    stop_accepting: CancellationToken,
    drain_timeout: Duration,
) {
    let connections = TaskTracker::new();
    let drain = CancellationToken::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections as usize));
    let connection = Connection {
        tls,
        builder: Arc::new(limits.connection_builder()),
        service: TowerToHyperService::new(app),
        drain: drain.clone(),
        handshake_timeout: limits.tls_handshake_timeout,
        idle_timeout: limits.header_timeout,
    };
    while let Some((slot, stream, peer)) = next_connection(&listener, &slots, &stop_accepting).await
    {
        // Admission answers are small; do not let Nagle hold them back.
        let _ = stream.set_nodelay(true);
        let connection = connection.clone();
        connections.spawn(async move {
            let _slot = slot;
            connection.serve(stream, peer).await;
        });
    }
    drop(listener);
    connections.close();
    drain.cancel();
    tokio::select! {
        _ = connections.wait() => tracing::info!("all admission connections closed"),
        _ = tokio::time::sleep(drain_timeout) => {
            tracing::warn!(?drain_timeout, "shutdown timeout reached with requests still open");
        }
    }
}

/// The next connection with the slot it holds; `None` once the listener is to stop. The slot
/// is taken before accepting, so that at the limit new connections wait in the kernel's
/// backlog instead of costing a task and a handshake each.
async fn next_connection(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
    stop_accepting: &CancellationToken,
) -> Option<(OwnedSemaphorePermit, TcpStream, SocketAddr)> {
    loop {
        let slot = tokio::select! {
            _ = stop_accepting.cancelled() => return None,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => return None,
            },
        };
        tokio::select! {
            _ = stop_accepting.cancelled() => return None,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => return Some((slot, stream, peer)),
                Err(error) => {
                    // Usually out of file descriptors: pause rather than spin on the error.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
}

/// What every connection is served with.
#[derive(Clone)]
struct Connection {
    tls: TlsAcceptor,
    builder: Arc<auto::Builder<TokioExecutor>>,
    service: TowerToHyperService<Router>,
    /// Cancelled when the listener stops: open connections close gracefully.
    drain: CancellationToken,
    handshake_timeout: Duration,
    idle_timeout: Duration,
}

impl Connection {
    /// One connection: the TLS handshake, then HTTP until the client closes it, it idles for
    /// the idle timeout, or the drain closes it gracefully.
    async fn serve(self, stream: TcpStream, peer: SocketAddr) {
        let Some(stream) = self.handshake(stream, peer).await else {
            return;
        };
        let idle_timeout = self.idle_timeout;
        let activity = Arc::new(Activity::new());
        let service = Tracked {
            inner: self.service,
            activity: activity.clone(),
        };
        let connection = self.builder.serve_connection(TokioIo::new(stream), service);
        let mut connection = std::pin::pin!(connection);
        let mut closing = false;
        let result = loop {
            tokio::select! {
                result = connection.as_mut() => break result,
                _ = self.drain.cancelled(), if !closing => {
                    closing = true;
                    connection.as_mut().graceful_shutdown();
                }
                _ = activity.idle_for(idle_timeout), if !closing => {
                    tracing::debug!(%peer, "closing a connection idle for {idle_timeout:?}");
                    closing = true;
                    connection.as_mut().graceful_shutdown();
                }
            }
        };
        if let Err(error) = result {
            // Clients dropping connections is routine; nothing for an operator to do.
            tracing::debug!(%peer, %error, "connection ended with an error");
        }
    }

    /// The TLS handshake within its timeout; `None` (logged) when there is no TLS stream.
    async fn handshake(&self, stream: TcpStream, peer: SocketAddr) -> Option<TlsStream<TcpStream>> {
        match tokio::time::timeout(self.handshake_timeout, accept(&self.tls, stream)).await {
            Ok(Ok(Some(stream))) => Some(stream),
            Ok(Ok(None)) => {
                tracing::debug!(%peer, "plain HTTP on the TLS port; told to use HTTPS");
                None
            }
            Ok(Err(error)) => {
                tracing::debug!(%peer, %error, "TLS handshake failed");
                None
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                None
            }
        }
    }
}

/// When a connection last started or finished a request, and how many it has in flight.
/// Counted in requests rather than bytes, so HTTP/2 pings do not keep an unused connection.
struct Activity {
    opened: Instant,
    last_millis: AtomicU64,
    in_flight: AtomicUsize,
}

impl Activity {
    fn new() -> Self {
        Activity {
            opened: Instant::now(),
            last_millis: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
        }
    }

    fn touch(&self) {
        let now = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_millis.store(now, Ordering::Relaxed);
    }

    /// Completes once the connection has had no request in flight for `timeout`.
    async fn idle_for(&self, timeout: Duration) {
        loop {
            let last =
                self.opened + Duration::from_millis(self.last_millis.load(Ordering::Relaxed));
            let idle = last.elapsed();
            if self.in_flight.load(Ordering::Relaxed) == 0 && idle >= timeout {
                return;
            }
            tokio::time::sleep(timeout.saturating_sub(idle).max(Duration::from_millis(100))).await;
        }
    }
}

/// Counts a request in flight for as long as its future lives (dropped included).
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        activity.touch();
        InFlight(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The connection's service, recording its requests in `Activity`.
#[derive(Clone)]
struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> hyper::service::Service<hyper::Request<Incoming>> for Tracked<S>
where
    S: hyper::service::Service<hyper::Request<Incoming>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn call(&self, request: hyper::Request<Incoming>) -> Self::Future {
        let in_flight = InFlight::start(self.activity.clone());
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await;
            drop(in_flight);
            response
        })
    }
}

/// What a plain-HTTP client gets: the same advice Go's servers give, readable in any client,
/// rather than a TLS alert it cannot decode.
const PLAIN_HTTP_ANSWER: &[u8] = b"HTTP/1.0 400 Bad Request\r\n\
Content-Type: text/plain; charset=utf-8\r\n\
Connection: close\r\n\
\r\n\
Client sent an HTTP request to an HTTPS server: use https://\n";

/// The most a plain-HTTP client may send before its answer is cut short.
const PLAIN_HTTP_DISCARD: u64 = 64 * 1024;

/// The TLS handshake, or `None` when the client spoke plain HTTP and has been answered. Every
/// TLS connection starts with a handshake record (byte 22); an HTTP request starts with a
/// method name in capitals.
async fn accept(
    tls: &TlsAcceptor,
    mut stream: TcpStream,
) -> std::io::Result<Option<TlsStream<TcpStream>>> {
    let mut first = [0u8; 1];
    if stream.peek(&mut first).await? == 1 && first[0].is_ascii_uppercase() {
        stream.write_all(PLAIN_HTTP_ANSWER).await?;
        stream.shutdown().await?;
        // Closing with the request still unread would make the kernel reset the connection,
        // and the client could lose the answer: read what it sent (bounded) until it closes.
        let mut rest = (&mut stream).take(PLAIN_HTTP_DISCARD);
        tokio::io::copy(&mut rest, &mut tokio::io::sink()).await?;
        return Ok(None);
    }
    tls.accept(stream).await.map(Some)
}
