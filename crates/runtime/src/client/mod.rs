//! The kube clients a jobwarden component talks to the API server with: each names itself in
//! `User-Agent` as every kube component does (`jobwarden/0.1.0 (linux/amd64) <component>`, so
//! its requests can be told apart in the audit log and the API server's metrics), and, when
//! asked, keeps to a client-side request rate like kube-controller-manager's `--kube-api-qps`
//! and `--kube-api-burst`: one budget for all its requests, Event writes after the syncs'
//! (`request_budget`).
//!
//! A controller has two ([`ControllerClients`]), as kube-controller-manager has: one for its
//! work and one for its Lease alone, so that a renewal never waits behind the syncs' queue. A
//! work client alone ([`work_client`]) serves any other API server a controller works on.

mod budget_seen;
mod request_budget;

pub use budget_seen::{BudgetMetrics, BudgetSeen, Priority, PriorityLabels};

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http::header::USER_AGENT;
use http::{HeaderValue, Request};
use kube::Client;
use kube::client::{Body, ClientBuilder};
use tokio::time::Instant;
use tower::buffer::Buffer;
use tower::limit::ConcurrencyLimitLayer;
use tower::{BoxError, Layer, Service, ServiceExt as _};

use request_budget::{Budget, priority_of};

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
    config: kube::Config,
    component: &str,
    limit: Option<RateLimit>,
) -> Result<Client, ClientError> {
    let builder = ClientBuilder::try_from(named(config, component)?).map_err(ClientError::Build)?;
    match limit.filter(|l| l.qps > 0.0 && l.burst > 0) {
        Some(limit) => Ok(builder
            .with_layer(&PriorityLimitLayer::new(
                limit,
                false,
                BudgetSeen::default(),
            ))
            .build()),
        None => Ok(builder.build()),
    }
}

/// `config`, its requests naming `component`.
fn named(mut config: kube::Config, component: &str) -> Result<kube::Config, ClientError> {
    let agent = HeaderValue::from_str(&user_agent(component)).map_err(ClientError::Component)?;
    config.headers.push((USER_AGENT, agent));
    Ok(config)
}

/// Requests of the work client in flight at once (until their response headers), however many
/// tokens the budget holds. kube's client speaks HTTP/1.1, one connection per request in
/// flight (client-go multiplexes HTTP/2 streams over one): a burst of 100 pod creates opened
/// 60 TLS connections, each a handshake for the API server and buffers kept for the pool's 90 s
/// of idleness. 32 at once carry 50 requests a second until the API server takes over 600 ms
/// an answer; a watch holds its slot only until its headers come.
pub const MAX_IN_FLIGHT: usize = 32;

/// The Lease client's budget. A renewal is a read and a write every retry period (at least a
/// second), and each change of leader one Event: client-go gives its Lease client the
/// controller's own `--kube-api-qps`, but a budget independent of those flags cannot be set so
/// low that the leader starves itself, and still bounds a loop gone wrong.
pub const LEADER_ELECTION_LIMIT: RateLimit = RateLimit {
    qps: 5.0,
    burst: 10,
};

/// The controller's clients, apart as kube-controller-manager keeps them.
///
/// `work` carries everything the reconcile loop sends (watches, pod and status writes,
/// Events) within one request budget, where a sync's 500 pod creates queue at `--kube-api-qps`
/// for 10 s and more. A Lease renewal in that queue would wait as long, and the renew deadline
/// is 10 s: the leader would step down because it is busy, which the deadline is not for (it
/// stops a leader that cannot reach the API server). So the Lease has `leader_election`, as
/// client-go's `resourcelock.NewFromKubeconfig` builds it: its own connections, a budget of
/// its own ([`LEADER_ELECTION_LIMIT`]) and a request timeout of half the renew deadline, named
/// `<component>/leader-election` in the audit log.
#[derive(Clone)]
pub struct ControllerClients {
    pub work: Client,
    pub leader_election: Client,
    /// When the API server last answered one of `work`'s requests: a Lease lost while it
    /// answers was lost to jobwarden itself, not to an outage.
    pub answers: Answers,
}

impl ControllerClients {
    /// Both clients for `config`, named after `component`, the work within a budget of `limit`
    /// (none when `None`).
    pub fn new(
        config: kube::Config,
        component: &str,
        limit: Option<RateLimit>,
        renew_deadline: Duration,
    ) -> Result<ControllerClients, ClientError> {
        let WorkClient {
            client: work,
            answers,
            ..
        } = work_client(config.clone(), component, limit)?;
        let mut lease_config = config;
        // client-go: `config.Timeout = renewDeadline / 2`, at least a second; counted from
        // when the request is sent, not from when its pooled connection went idle.
        lease_config.read_timeout = Some((renew_deadline / 2).max(Duration::from_secs(1)));
        lease_config.reset_reader_on_write = true;
        let leader_election = client(
            lease_config,
            &format!("{component}/leader-election"),
            Some(LEADER_ELECTION_LIMIT),
        )?;
        Ok(ControllerClients {
            work,
            leader_election,
            answers,
        })
    }
}

/// A client for a controller's work on one API server, and when that server last answered it.
#[derive(Clone)]
pub struct WorkClient {
    pub client: Client,
    pub answers: Answers,
    /// Its budget seen from outside (requests waiting), when it keeps to one.
    pub budget: Option<BudgetSeen>,
}

/// How a work client's budget is kept: whether it tells a Job's own writes (placements) from
/// the syncs', and where its waits are counted.
#[derive(Clone, Debug, Default)]
pub struct BudgetOptions {
    pub placements: bool,
    pub metrics: Option<BudgetMetrics>,
}

/// A work client for `config`: its requests name `component`, at most [`MAX_IN_FLIGHT`] of them
/// wait for their answers at once, and they keep to a budget of their own, `limit` (none when
/// `None`), Event writes after the others. Each call makes a new budget: one per API server
/// (a controller's own cluster, or each cluster it works on), never shared with another's.
pub fn work_client(
    config: kube::Config,
    component: &str,
    limit: Option<RateLimit>,
) -> Result<WorkClient, ClientError> {
    work_client_with(config, component, limit, BudgetOptions::default())
}

/// [`work_client`], its budget kept as `options` say.
pub fn work_client_with(
    config: kube::Config,
    component: &str,
    limit: Option<RateLimit>,
    options: BudgetOptions,
) -> Result<WorkClient, ClientError> {
    let answers = Answers::default();
    let limit = limit.filter(|l| l.qps > 0.0 && l.burst > 0);
    let client = ClientBuilder::try_from(named(config, component)?)
        .map_err(ClientError::Build)?
        .with_layer(&answers.layer())
        .with_layer(&ConcurrencyLimitLayer::new(MAX_IN_FLIGHT));
    let (client, budget) = match limit {
        Some(limit) => {
            let seen = BudgetSeen::new(options.metrics);
            let layer = PriorityLimitLayer::new(limit, options.placements, seen.clone());
            (client.with_layer(&layer).build(), Some(seen))
        }
        None => (client.build(), None),
    };
    Ok(WorkClient {
        client,
        answers,
        budget,
    })
}

/// When the API server last answered a request (with any status: an answer is an answer), on
/// a monotonic clock.
#[derive(Debug, Clone)]
pub struct Answers {
    origin: Instant,
    /// Milliseconds after `origin` of the last answer, plus one; 0 for none yet.
    last: Arc<AtomicU64>,
}

impl Default for Answers {
    fn default() -> Self {
        Answers {
            origin: Instant::now(),
            last: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl Answers {
    /// Whether an answer came after `at`.
    pub fn since(&self, at: Instant) -> bool {
        let last = self.last.load(Ordering::Relaxed);
        last > 0 && self.origin + Duration::from_millis(last - 1) > at
    }

    fn answered(&self) {
        let ms = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        self.last.fetch_max(ms + 1, Ordering::Relaxed);
    }

    /// A layer noting every response that comes back.
    fn layer<T>(&self) -> tower::util::MapResponseLayer<impl Fn(T) -> T + Clone + use<T>> {
        let answers = self.clone();
        tower::util::MapResponseLayer::new(move |response| {
            answers.answered();
            response
        })
    }
}

/// The budget every request of one client draws from, with the clock it reads.
#[derive(Debug)]
struct SharedBudget {
    budget: Mutex<Budget>,
    origin: Instant,
    /// A Job's own writes are placements, after the syncs'.
    placements: bool,
    seen: BudgetSeen,
}

impl SharedBudget {
    fn with<T>(&self, f: impl FnOnce(&mut Budget, std::time::Duration) -> T) -> T {
        let mut budget = self.budget.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut budget, self.origin.elapsed())
    }

    /// Returns once the request may go.
    async fn acquire(&self, priority: Priority) {
        if priority == Priority::Sync {
            let wait = self.with(|b, now| b.reserve_sync(now));
            if wait.is_zero() {
                self.seen.went_at_once(priority);
            } else {
                let _waiting = self.seen.waits(priority);
                tokio::time::sleep(wait).await;
            }
            return;
        }
        let take = |b: &mut Budget, now| match priority {
            Priority::Placement => b.try_take_placement(now),
            _ => b.try_take_event(now),
        };
        let Err(mut wait) = self.with(take) else {
            self.seen.went_at_once(priority);
            return;
        };
        let _waiting = self.seen.waits(priority);
        loop {
            tokio::time::sleep(wait).await;
            match self.with(take) {
                Ok(()) => return,
                Err(again) => wait = again,
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
    /// A full bucket; with `placements`, a Job's own writes wait for the syncs' (see
    /// [`Priority::Placement`]); `seen` counts the waits. Must be made inside a tokio runtime
    /// (the layer's buffer runs on it).
    pub fn new(limit: RateLimit, placements: bool, seen: BudgetSeen) -> Self {
        let origin = Instant::now();
        PriorityLimitLayer {
            budget: Arc::new(SharedBudget {
                budget: Mutex::new(Budget::new(limit.qps, limit.burst, origin.elapsed())),
                origin,
                placements,
                seen,
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
        let priority = priority_of(
            request.method(),
            request.uri().path(),
            self.budget.placements,
        );
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

    /// Sends `requests` (method, path) one after the other through a layer of 1 qps, burst
    /// 2, each asking for its token before the next is made, to a service that notes the
    /// order they reach it. Returns that order, and what the budget's callers saw waiting
    /// once every request had asked.
    async fn order_through(
        placements: bool,
        requests: &[(http::Method, &str)],
    ) -> (Vec<String>, [usize; 3]) {
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
        let budget = BudgetSeen::new(Some(BudgetMetrics::default()));
        let layer =
            PriorityLimitLayer::new(RateLimit { qps: 1.0, burst: 2 }, placements, budget.clone());
        let mut service = layer.layer(inner);
        let mut calls = Vec::new();
        for (method, path) in requests {
            let mut request = Request::new(Body::empty());
            *request.method_mut() = method.clone();
            *request.uri_mut() = path.parse().unwrap_or_default();
            calls.push(tokio::spawn(service.call(request)));
            tokio::task::yield_now().await;
        }
        let waiting = Priority::ALL.map(|p| budget.waiting(p));
        for call in calls {
            assert!(matches!(call.await, Ok(Ok(_))));
        }
        assert_eq!(Priority::ALL.map(|p| budget.waiting(p)), [0, 0, 0]);
        let order = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
        (order, waiting)
    }

    /// A sync's request that comes after an Event write waiting for budget still goes first.
    #[tokio::test(start_paused = true)]
    async fn waiting_syncs_go_before_a_waiting_event_write() {
        let (order, waiting) = order_through(
            false,
            &[
                (http::Method::POST, "/api/v1/namespaces/ns/pods"),
                (
                    http::Method::PATCH,
                    "/apis/batch/v1/namespaces/ns/jobs/a/status",
                ),
                (http::Method::POST, "/api/v1/namespaces/ns/pods"),
                (http::Method::POST, "/api/v1/namespaces/ns/events"),
                (http::Method::PATCH, "/api/v1/namespaces/ns/pods/p"),
            ],
        )
        .await;
        assert_eq!(
            order,
            [
                "POST /api/v1/namespaces/ns/pods",
                "PATCH /apis/batch/v1/namespaces/ns/jobs/a/status",
                "POST /api/v1/namespaces/ns/pods",
                "PATCH /api/v1/namespaces/ns/pods/p",
                "POST /api/v1/namespaces/ns/events",
            ]
        );
        assert_eq!(waiting, [2, 0, 1], "two syncs and the Event wait");
    }

    /// On a placing client, a Job's status write that comes after its record waiting for
    /// budget goes first; the record goes before an Event.
    #[tokio::test(start_paused = true)]
    async fn a_status_write_goes_before_a_waiting_placement_and_that_before_an_event() {
        let (order, waiting) = order_through(
            true,
            &[
                (http::Method::POST, "/api/v1/namespaces/ns/pods"),
                (http::Method::POST, "/api/v1/namespaces/ns/pods"),
                (http::Method::POST, "/api/v1/namespaces/ns/events"),
                (http::Method::PATCH, "/apis/batch/v1/namespaces/ns/jobs/new"),
                (
                    http::Method::PATCH,
                    "/apis/batch/v1/namespaces/ns/jobs/done/status",
                ),
            ],
        )
        .await;
        assert_eq!(
            order,
            [
                "POST /api/v1/namespaces/ns/pods",
                "POST /api/v1/namespaces/ns/pods",
                "PATCH /apis/batch/v1/namespaces/ns/jobs/done/status",
                "PATCH /apis/batch/v1/namespaces/ns/jobs/new",
                "POST /api/v1/namespaces/ns/events",
            ]
        );
        assert_eq!(waiting, [1, 1, 1]);
    }

    /// A client configuration for `app`, served over plain HTTP on a port of its own.
    async fn serve(app: axum::Router) -> kube::Config {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        kube::Config::new(url.parse().expect("a URL"))
    }

    /// An API server that answers every request with `{}` and notes, in order, each request's
    /// method, path and User-Agent.
    async fn recording_api_server() -> (kube::Config, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let app = {
            let seen = seen.clone();
            axum::Router::new().fallback(move |request: http::Request<axum::body::Body>| {
                let seen = seen.clone();
                async move {
                    let agent = request
                        .headers()
                        .get(USER_AGENT)
                        .and_then(|a| a.to_str().ok())
                        .unwrap_or("")
                        .to_owned();
                    let line = format!("{} {} {agent}", request.method(), request.uri().path());
                    seen.lock().unwrap_or_else(|e| e.into_inner()).push(line);
                    "{}"
                }
            })
        };
        let config = serve(app).await;
        (config, seen)
    }

    fn request(method: http::Method, path: &str) -> Request<Vec<u8>> {
        let mut request = Request::new(b"{}".to_vec());
        *request.method_mut() = method;
        *request.uri_mut() = path.parse().unwrap_or_default();
        request
    }

    /// `count` pod creates through `client`, each in a task of its own.
    fn pod_creates(
        client: &Client,
        count: usize,
    ) -> Vec<tokio::task::JoinHandle<kube::Result<String>>> {
        (0..count)
            .map(|_| {
                let client = client.clone();
                tokio::spawn(async move {
                    client
                        .request_text(request(http::Method::POST, "/api/v1/namespaces/ns/pods"))
                        .await
                })
            })
            .collect()
    }

    /// Issue 34: with one budget for every request, a renewal waited behind a sync's 500 pod
    /// creates (10 s at 50 qps, the renew deadline) and the leader stepped down under its own
    /// load. The Lease's client waits for none of them.
    #[tokio::test]
    async fn a_lease_renewal_never_waits_behind_a_sync_s_500_creates() {
        let (config, seen) = recording_api_server().await;
        let component = "jobwarden.io/job-controller";
        // One request at once, then one every 100 s: the creates queue for 14 hours.
        let limit = RateLimit {
            qps: 0.01,
            burst: 1,
        };
        let clients =
            ControllerClients::new(config, component, Some(limit), Duration::from_secs(10))
                .expect("the clients");
        let creates = pod_creates(&clients.work, 500);
        let before = Instant::now();
        // The renewal: its read and its write, while 499 creates wait for their tokens.
        let lease = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/jobwarden-job-controller";
        for method in [http::Method::GET, http::Method::PATCH] {
            let answer = clients
                .leader_election
                .request_text(request(method, lease))
                .await;
            assert!(answer.is_ok(), "{answer:?}");
        }
        let seen = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let sent = |what: &str| seen.iter().filter(|l| l.starts_with(what)).count();
        assert_eq!(
            sent("POST /api/v1/namespaces/ns/pods "),
            1,
            "only the burst's create went ahead: {seen:?}"
        );
        assert_eq!(sent(&format!("GET {lease} ")), 1, "{seen:?}");
        assert_eq!(sent(&format!("PATCH {lease} ")), 1, "{seen:?}");
        assert!(
            seen.iter()
                .filter(|l| l.contains("/leases/"))
                .all(|l| l.ends_with(&format!(" {component}/leader-election"))),
            "the Lease's requests name their client: {seen:?}"
        );
        // The work client's answer was noted; the Lease's are not the controller's work.
        assert!(clients.answers.since(before));
        for create in creates {
            create.abort();
        }
    }

    /// What [`holding_api_server`] holds: the requests waiting for their answer now, the most
    /// that ever waited at once, all that came, and the answers it may give.
    struct Held {
        now: std::sync::atomic::AtomicUsize,
        most: std::sync::atomic::AtomicUsize,
        came: std::sync::atomic::AtomicUsize,
        answers: tokio::sync::Semaphore,
    }

    /// An API server that answers a request only once given an answer to give
    /// (`Held::answers`), as a worker too busy to answer; a watch gets its headers at once and
    /// then nothing.
    async fn holding_api_server() -> (kube::Config, Arc<Held>) {
        let held = Arc::new(Held {
            now: Default::default(),
            most: Default::default(),
            came: Default::default(),
            answers: tokio::sync::Semaphore::new(0),
        });
        let app = {
            let held = held.clone();
            axum::Router::new().fallback(move |request: http::Request<axum::body::Body>| {
                let held = held.clone();
                async move {
                    if request.uri().query() == Some("watch=true") {
                        let never = futures::stream::pending::<Result<Vec<u8>, BoxError>>();
                        return axum::body::Body::from_stream(never);
                    }
                    held.came.fetch_add(1, Ordering::SeqCst);
                    let now = held.now.fetch_add(1, Ordering::SeqCst) + 1;
                    held.most.fetch_max(now, Ordering::SeqCst);
                    if let Ok(answer) = held.answers.acquire().await {
                        answer.forget();
                    }
                    held.now.fetch_sub(1, Ordering::SeqCst);
                    axum::body::Body::from("{}")
                }
            })
        };
        (serve(app).await, held)
    }

    /// A work client's requests in flight never pass [`MAX_IN_FLIGHT`], and a watch, whose
    /// answer streams on, holds no slot once its headers came.
    #[tokio::test]
    async fn at_most_max_in_flight_requests_wait_for_answers_at_once() {
        let (config, held) = holding_api_server().await;
        let work = work_client(config, "test", None).expect("the client");

        let mut watch = Request::new(Body::empty());
        *watch.uri_mut() = "/api/v1/pods?watch=true".parse().unwrap_or_default();
        let watching = work.client.send(watch).await.expect("the watch answers");
        let requests = pod_creates(&work.client, 100);
        while held.now.load(Ordering::SeqCst) < MAX_IN_FLIGHT {
            tokio::task::yield_now().await;
        }
        // From here every request is answered, and each answer lets a waiting one go.
        held.answers.add_permits(100);
        for r in requests {
            assert!(matches!(r.await, Ok(Ok(_))));
        }
        assert_eq!(held.most.load(Ordering::SeqCst), MAX_IN_FLIGHT);
        drop(watching);
    }

    /// Issue 44: the dispatcher has a work client per worker. One worker that answers nothing
    /// while its budget is spent (its burst sent and held, its slots full, 60 more requests
    /// waiting for tokens due one every 1,000 s) takes none of another worker's tokens or
    /// slots: the other's whole burst goes at once, and its next request waits for a token of
    /// its own budget, not of the busy one's.
    #[tokio::test]
    async fn a_slow_worker_s_budget_never_takes_another_worker_s_tokens() {
        let limit = RateLimit {
            qps: 0.001,
            burst: 40,
        };
        let (slow_config, slow) = holding_api_server().await;
        let (fast_config, fast_seen) = recording_api_server().await;
        let slow_client = work_client(slow_config, "jobwarden.io/dispatcher/slow", Some(limit))
            .expect("the slow worker's client");
        let fast_client = work_client(fast_config, "jobwarden.io/dispatcher/fast", Some(limit))
            .expect("the fast worker's client");

        let waiting = pod_creates(&slow_client.client, 100);
        while slow.now.load(Ordering::SeqCst) < MAX_IN_FLIGHT {
            tokio::task::yield_now().await;
        }
        let bursting = pod_creates(&fast_client.client, 41);
        // 40 answered, the 41st waiting for its token: the burst is the fast worker's own. (A
        // budget shared with the slow worker would hold them for hours: the bound only turns
        // that hang into a failure.)
        let answered = async {
            while bursting.iter().filter(|c| c.is_finished()).count() < 40 {
                tokio::task::yield_now().await;
            }
        };
        assert!(
            tokio::time::timeout(Duration::from_secs(60), answered)
                .await
                .is_ok(),
            "the fast worker's burst waited for the slow worker's budget"
        );
        let seen = fast_seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(
            seen.len(),
            40,
            "the fast worker's burst, and no more: {seen:?}"
        );
        assert!(
            seen.iter()
                .all(|l| l.ends_with(" jobwarden.io/dispatcher/fast")),
            "each request names its worker's client: {seen:?}"
        );
        // The slow worker got no further meanwhile: its slots full, its tokens its own.
        assert_eq!(slow.came.load(Ordering::SeqCst), MAX_IN_FLIGHT);
        for call in bursting {
            if call.is_finished() {
                assert!(matches!(call.await, Ok(Ok(_))));
            } else {
                call.abort();
            }
        }
        for call in waiting {
            call.abort();
        }
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
