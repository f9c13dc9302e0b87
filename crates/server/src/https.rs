//! The HTTPS admission listener: accept within the connection limit, TLS handshake within its
//! timeout, then HTTP/1.1 or HTTP/2 (chosen by ALPN) on each connection, every connection
//! watched so that stopping the listener lets in-flight requests finish before it returns.
//! A client that speaks plain HTTP to this port is told so in plain HTTP.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

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
    let builder = Arc::new(limits.connection_builder());
    let service = TowerToHyperService::new(app);
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections as usize));
    loop {
        // Take a connection slot before accepting, so that at the limit new connections wait
        // in the kernel's backlog instead of costing a task and a handshake each.
        let slot = tokio::select! {
            _ = stop_accepting.cancelled() => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            _ = stop_accepting.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Usually out of file descriptors: pause rather than spin on the error.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        // Admission answers are small; do not let Nagle hold them back.
        let _ = stream.set_nodelay(true);
        let tls = tls.clone();
        let builder = builder.clone();
        let service = service.clone();
        let watcher = graceful.watcher();
        let handshake_timeout = limits.tls_handshake_timeout;
        tokio::spawn(async move {
            let _slot = slot;
            let stream = match tokio::time::timeout(handshake_timeout, accept(&tls, stream)).await {
                Ok(Ok(Some(stream))) => stream,
                Ok(Ok(None)) => {
                    tracing::debug!(%peer, "plain HTTP on the TLS port; told to use HTTPS");
                    return;
                }
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            if let Err(error) = watcher.watch(connection).await {
                // Clients dropping connections is routine; nothing for an operator to do.
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => tracing::info!("all admission connections closed"),
        _ = tokio::time::sleep(drain_timeout) => {
            tracing::warn!(?drain_timeout, "shutdown timeout reached with requests still open");
        }
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
