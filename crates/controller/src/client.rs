//! The kube client a jobwarden component talks to the API server with: it names itself in
//! `User-Agent` as every kube component does (`jobwarden/0.1.0 (linux/amd64) <component>`, so
//! its requests can be told apart in the audit log and the API server's metrics), and, when
//! asked, keeps to a client-side request rate like kube-controller-manager's `--kube-api-qps`
//! and `--kube-api-burst`: one budget for all its requests, Event writes after the syncs'
//! (`request_budget`).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http::header::USER_AGENT;
use http::{HeaderValue, Request};
use kube::Client;
use kube::client::{Body, ClientBuilder};
use tokio::time::Instant;
use tower::buffer::Buffer;
use tower::{BoxError, Layer, Service, ServiceExt as _};

use crate::request_budget::{Budget, Priority, priority_of};

/// A client-side request limit: at most `burst` requests at once, and `qps` per second on
/// average.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub qps: f64,
    pub burst: u32,
}

/// Why there is no client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("the component name is not a valid header value")]
    Component(#[source] http::header::InvalidHeaderValue),
    #[error("building the kube client")]
    Build(#[source] kube::Error),
}

/// `jobwarden/<version> (<os>/<arch>) <component>`, with Go's names for the platform, as
/// client-go's default User-Agent has them.
pub fn user_agent(component: &str) -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    format!(
        "jobwarden/{} ({}/{arch}) {component}",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS
    )
}

/// A client for `config` that names `component` and keeps to `limit` (none when `None`).
pub fn client(
    mut config: kube::Config,
    component: &str,
    limit: Option<RateLimit>,
) -> Result<Client, ClientError> {
    let agent = HeaderValue::from_str(&user_agent(component)).map_err(ClientError::Component)?;
    config.headers.push((USER_AGENT, agent));
    let builder = ClientBuilder::try_from(config).map_err(ClientError::Build)?;
    let Some(limit) = limit.filter(|l| l.qps > 0.0 && l.burst > 0) else {
        return Ok(builder.build());
    };
    Ok(builder.with_layer(&PriorityLimitLayer::new(limit)).build())
}

/// The budget every request of one client draws from, with the clock it reads.
#[derive(Debug)]
struct SharedBudget {
    budget: Mutex<Budget>,
    origin: Instant,
}

impl SharedBudget {
    fn with<T>(&self, f: impl FnOnce(&mut Budget, std::time::Duration) -> T) -> T {
        let mut budget = self.budget.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut budget, self.origin.elapsed())
    }

    /// Returns once the request may go.
    async fn acquire(&self, priority: Priority) {
        match priority {
            Priority::Sync => {
                let wait = self.with(|b, now| b.reserve_sync(now));
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
            }
            Priority::Event => {
                while let Err(wait) = self.with(|b, now| b.try_take_event(now)) {
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }
}

/// A tower layer keeping a client within `RateLimit`, Event writes after every sync request
/// (`request_budget`). Unlike tower's `RateLimitLayer`, which holds every request behind the
/// one in front, it lets a sync's request overtake a waiting Event write.
#[derive(Debug, Clone)]
pub struct PriorityLimitLayer {
    budget: Arc<SharedBudget>,
}

impl PriorityLimitLayer {
    /// A full bucket. Must be made inside a tokio runtime (the layer's buffer runs on it).
    pub fn new(limit: RateLimit) -> Self {
        let origin = Instant::now();
        PriorityLimitLayer {
            budget: Arc::new(SharedBudget {
                budget: Mutex::new(Budget::new(limit.qps, limit.burst, origin.elapsed())),
                origin,
            }),
        }
    }
}

/// Requests a layered service may have queued before its callers wait (kube's own buffer
/// holds as many).
const BUFFERED: usize = 1024;

impl<S> Layer<S> for PriorityLimitLayer
where
    S: Service<Request<Body>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError> + Send + Sync,
{
    type Service = PriorityLimit<S::Future>;

    fn layer(&self, inner: S) -> Self::Service {
        PriorityLimit {
            // The buffer lets each request wait for its token apart: the inner service is
            // called once the token is there, whatever waits beside it.
            inner: Buffer::new(inner, BUFFERED),
            budget: self.budget.clone(),
        }
    }
}

/// The service [`PriorityLimitLayer`] makes.
pub struct PriorityLimit<F> {
    inner: Buffer<Request<Body>, F>,
    budget: Arc<SharedBudget>,
}

impl<F, R, E> Service<Request<Body>> for PriorityLimit<F>
where
    F: Future<Output = Result<R, E>> + Send + 'static,
    E: Into<BoxError>,
    R: Send + 'static,
{
    type Response = R;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<R, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // Readiness is awaited per request, once its token is there.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let priority = priority_of(request.method(), request.uri().path());
        let budget = self.budget.clone();
        let mut inner = self.inner.clone();
        Box::pin(async move {
            budget.acquire(priority).await;
            inner.ready().await?.call(request).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layer over a service that notes the order requests reach it: a sync's request
    /// that comes after an Event write waiting for budget still goes first.
    #[tokio::test(start_paused = true)]
    async fn waiting_syncs_go_before_a_waiting_event_write() {
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let inner = {
            let seen = seen.clone();
            tower::service_fn(move |request: Request<Body>| {
                let seen = seen.clone();
                async move {
                    let line = format!("{} {}", request.method(), request.uri().path());
                    seen.lock().unwrap_or_else(|e| e.into_inner()).push(line);
                    Ok::<_, BoxError>(http::Response::new(()))
                }
            })
        };
        let layer = PriorityLimitLayer::new(RateLimit { qps: 1.0, burst: 2 });
        let mut service = layer.layer(inner);
        let request = |method: http::Method, path: &str| {
            let mut request = Request::new(Body::empty());
            *request.method_mut() = method;
            *request.uri_mut() = path.parse().unwrap_or_default();
            request
        };
        let mut calls = Vec::new();
        for (method, path) in [
            (http::Method::POST, "/api/v1/namespaces/ns/pods"),
            (
                http::Method::PATCH,
                "/apis/batch/v1/namespaces/ns/jobs/a/status",
            ),
            (http::Method::POST, "/api/v1/namespaces/ns/pods"),
            (http::Method::POST, "/api/v1/namespaces/ns/events"),
            (http::Method::PATCH, "/api/v1/namespaces/ns/pods/p"),
        ] {
            let call = tokio::spawn(service.call(request(method, path)));
            // Each request asks for its token before the next is made.
            tokio::task::yield_now().await;
            calls.push(call);
        }
        for call in calls {
            assert!(matches!(call.await, Ok(Ok(_))));
        }
        let seen = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(
            seen,
            [
                "POST /api/v1/namespaces/ns/pods",
                "PATCH /apis/batch/v1/namespaces/ns/jobs/a/status",
                "POST /api/v1/namespaces/ns/pods",
                "PATCH /api/v1/namespaces/ns/pods/p",
                "POST /api/v1/namespaces/ns/events",
            ]
        );
    }

    #[test]
    fn user_agent_names_version_platform_and_component() {
        let ua = user_agent("jobwarden.io/job-controller");
        assert!(
            ua.starts_with(&format!("jobwarden/{} (", env!("CARGO_PKG_VERSION"))),
            "{ua}"
        );
        assert!(ua.ends_with(") jobwarden.io/job-controller"), "{ua}");
        assert!(!ua.contains("x86_64"), "Go's arch names: {ua}");
    }
}
