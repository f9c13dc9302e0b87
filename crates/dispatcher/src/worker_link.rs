//! One worker cluster as the dispatcher holds it: its credentials, read and judged (a refused
//! kubeconfig is never used), a client with a request budget of its own, the watch of its
//! copies (by the origin label; per namespace when the worker takes named namespaces only,
//! whose roles may be granted there alone), the view of its room (`room_watch`, also for the
//! local worker, through this cluster's client), and its reach, probed every few seconds.
//!
//! A worker is **lost** the moment a probe gets no answer, or is refused as unauthorized, and
//! **ready** only once it answers, its copies are listed, and the copies there whose Job moved
//! to another worker or is gone have been deleted (the fence): nothing else is done on a worker
//! that answers again before that.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::{StreamExt as _, stream::BoxStream};
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use jobwarden_admission::policy::{Capacity, NamespaceMatch, Worker as WorkerSpec, WorkerSource};
use jobwarden_runtime::client::{Answers, RateLimit, work_client};

use crate::api::{self, ApiError};
use crate::credential_source::{self, Credentials};
use crate::credentials::{self, RefusalReason};
use crate::fence::{self, Verdict};
use crate::metrics::DispatchMetrics;
use crate::placement::Reach;
use crate::worker_view::WorkerView;
use jobwarden_runtime::job_cache::CachedJob;

/// Between two probes of a worker.
pub const PROBE_EVERY: Duration = Duration::from_secs(2);
/// A probe not answered within this counts as no answer.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a worker's word on a namespace is trusted: that it has it, and that it has not.
const NAMESPACE_KNOWN_FOR: Duration = Duration::from_secs(300);
const NAMESPACE_MISSING_FOR: Duration = Duration::from_secs(15);

/// What a probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probed {
    Answers,
    /// It answers, and did not at the last probe.
    AnswersAgain,
    Lost,
}

/// How soon a watch of a worker tries again after its API server went away: client-go's
/// back-off (kube's default) waits up to 30 s, kind to a struggling API server; a copy watch
/// is one request a worker, and the mirror's lag is what it costs, so it waits 2 s at most.
pub(crate) fn quick_backoff() -> watcher::ExponentialBackoff {
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(PROBE_EVERY)
        .with_jitter()
        .without_max_times()
        .into()
}

/// What a worker's link tells the loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed {
    /// A Job's copy changed.
    Copy { namespace: String, name: String },
    /// A worker's reach or readiness changed: its Jobs, and the Jobs waiting for any worker.
    Worker(String),
    /// A worker's room changed: the Jobs waiting for room.
    Room(String),
}

/// What every worker's task shares.
pub struct LinkContext {
    pub management: api::Management,
    /// jobwarden's namespace, where the kubeconfig Secrets are.
    pub namespace: String,
    pub origin: String,
    /// The dispatcher's name: its clients name it, and the worker, in their User-Agent.
    pub component: String,
    /// Each worker's own request budget (its client's, shared with no other worker).
    pub worker_limit: Option<RateLimit>,
    pub changes: mpsc::UnboundedSender<Changed>,
    pub metrics: DispatchMetrics,
    /// The management cluster's dispatched Jobs, for the fence.
    pub jobs: Store<CachedJob>,
    /// When a copy's change reached the dispatcher and is not yet mirrored, by `ns/name`.
    pub pending: Arc<Mutex<HashMap<String, Instant>>>,
    pub leading: Arc<std::sync::atomic::AtomicBool>,
}

#[derive(Default)]
struct State {
    reach: Option<Reach>,
    ready: bool,
    api: Option<api::Worker>,
    /// One store per watched scope: `None` for the whole cluster, else a namespace.
    copies: Vec<(Option<String>, Store<CachedJob>)>,
    listed: Vec<bool>,
    last_answer: Option<Instant>,
    /// When the worker last answered any of the dispatcher's requests.
    answers: Option<Answers>,
    namespaces: HashMap<String, (bool, Instant)>,
}

/// One configured worker.
pub struct Link {
    pub spec: WorkerSpec,
    state: Mutex<State>,
    /// Its nodes and unfinished pods, as its watches leave them.
    pub view: WorkerView,
}

impl Link {
    pub fn new(spec: WorkerSpec) -> Link {
        let state = State {
            reach: spec.local.then_some(Reach::Answers),
            ready: spec.local,
            ..State::default()
        };
        Link {
            view: WorkerView::new(spec.capacity == Capacity::Unbounded),
            spec,
            state: Mutex::new(state),
        }
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    pub fn is_local(&self) -> bool {
        self.spec.local
    }

    pub fn namespaces(&self) -> &NamespaceMatch {
        &self.spec.namespaces
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn reach(&self) -> Reach {
        self.state().reach.clone().unwrap_or(Reach::Connecting)
    }

    pub fn is_ready(&self) -> bool {
        let s = self.state();
        s.ready && s.reach == Some(Reach::Answers)
    }

    pub fn api(&self) -> Option<api::Worker> {
        self.state().api.clone()
    }

    /// Seconds since the worker last answered; `None` if it never has.
    pub fn since_last_answer(&self) -> Option<Duration> {
        self.state().last_answer.map(|t| t.elapsed())
    }

    /// The Job `ns/name` in the copy cache (whoever's copy it is: the caller checks the origin).
    pub fn cached(&self, ns: &str, name: &str) -> Option<Arc<CachedJob>> {
        let s = self.state();
        let key = ObjectRef::new(name).within(ns);
        s.copies
            .iter()
            .filter(|(scope, _)| scope.as_deref().is_none_or(|s| s == ns))
            .find_map(|(_, store)| store.get(&key))
    }

    /// Every cached copy.
    pub fn all_cached(&self) -> Vec<Arc<CachedJob>> {
        let s = self.state();
        s.copies
            .iter()
            .flat_map(|(_, store)| store.state())
            .collect()
    }

    /// Whether the namespace exists there; asks the worker when not known, `None` when it
    /// cannot be told now.
    pub async fn has_namespace(&self, ns: &str) -> Option<bool> {
        if self.is_local() {
            return Some(true);
        }
        let api = {
            let s = self.state();
            if let Some((has, at)) = s.namespaces.get(ns) {
                let trusted = if *has {
                    NAMESPACE_KNOWN_FOR
                } else {
                    NAMESPACE_MISSING_FOR
                };
                if at.elapsed() < trusted {
                    return Some(*has);
                }
            }
            s.api.clone()?
        };
        let has = api.has_namespace(ns).await.ok()?;
        self.state()
            .namespaces
            .insert(ns.to_owned(), (has, Instant::now()));
        Some(has)
    }

    /// A create found no namespace of the name there.
    pub fn namespace_missing(&self, ns: &str) {
        self.state()
            .namespaces
            .insert(ns.to_owned(), (false, Instant::now()));
    }

    /// The scopes whose copies are watched: the worker's named namespaces when it takes
    /// those only (its roles may exist nowhere else), else the whole cluster.
    fn scopes(&self) -> Vec<Option<String>> {
        let ns = &self.spec.namespaces;
        if ns.selector.is_none() && !ns.names.is_empty() {
            ns.names.iter().cloned().map(Some).collect()
        } else {
            vec![None]
        }
    }

    fn set_reach(&self, ctx: &LinkContext, reach: Reach, refused: Option<RefusalReason>) {
        let changed = {
            let mut s = self.state();
            let changed = s.reach.as_ref() != Some(&reach);
            if reach != Reach::Answers {
                s.ready = false;
            }
            s.reach = Some(reach.clone());
            changed
        };
        ctx.metrics
            .worker_reach(self.name(), reach == Reach::Answers, refused);
        if changed {
            let _ = ctx.changes.send(Changed::Worker(self.name().to_owned()));
        }
    }

    /// Runs until `stop`: reads the credentials as they change and keeps a connection made
    /// from each accepted one.
    pub async fn supervise(self: Arc<Self>, ctx: Arc<LinkContext>) {
        if self.is_local() {
            // This cluster answers whenever the dispatcher runs at all; registered at 0 like
            // every worker, it would read as lost (and page) for as long as the leader runs.
            ctx.metrics.worker_reach(self.name(), true, None);
            // Judged by this cluster's own nodes, as any worker by its.
            let client = ctx.management.client().clone();
            return crate::room_watch::run(self.clone(), ctx.clone(), client).await;
        }
        let mut credentials: BoxStream<'static, Credentials> = match self.spec.source() {
            Some(WorkerSource::Secret(secret)) => credential_source::from_secret(
                ctx.management.client().clone(),
                ctx.namespace.clone(),
                secret.to_owned(),
            )
            .boxed(),
            Some(WorkerSource::File(path)) => {
                credential_source::from_file(path.into(), credential_source::FILE_POLL).boxed()
            }
            // The policy's problems refuse these before the dispatcher starts.
            Some(WorkerSource::Local) | None => return,
        };
        // A set, not a bare handle: when this task is aborted (the term ends, or the policy's
        // workers change) the connection goes with it, rather than probing a worker nobody
        // holds any more (and bringing its metrics back).
        let mut connection: JoinSet<()> = JoinSet::new();
        while let Some(next) = credentials.next().await {
            connection.abort_all();
            {
                let mut s = self.state();
                *s = State::default();
            }
            match self.accept(&ctx, next).await {
                Ok(api) => {
                    self.set_reach(&ctx, Reach::Connecting, None);
                    connection.spawn(self.clone().connected(ctx.clone(), api));
                }
                Err((reason, message)) => {
                    tracing::warn!(
                        worker = self.name(),
                        reason = reason.label(),
                        "{message}; the worker is not used"
                    );
                    self.set_reach(&ctx, Reach::Refused(message), Some(reason));
                }
            }
        }
        connection.abort_all();
    }

    /// A client from the credentials, or why not.
    async fn accept(
        &self,
        ctx: &LinkContext,
        credentials: Credentials,
    ) -> Result<api::Worker, (RefusalReason, String)> {
        let text = match credentials {
            Credentials::Kubeconfig(text) => text,
            Credentials::Missing(why) => return Err((RefusalReason::Missing, why)),
        };
        let kubeconfig: Kubeconfig = credentials::check(&text).map_err(|r| {
            (
                r.reason,
                format!("its kubeconfig is refused: {}", r.message),
            )
        })?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| {
                    (
                        RefusalReason::Unreadable,
                        format!("its kubeconfig cannot be used: {e}"),
                    )
                })?;
        let component = format!("{}/{}", ctx.component, self.name());
        let work = work_client(config, &component, ctx.worker_limit).map_err(|e| {
            (
                RefusalReason::Unreadable,
                format!("no client can be made from its kubeconfig: {e}"),
            )
        })?;
        self.state().answers = Some(work.answers.clone());
        Ok(api::Worker::new(work.client, ctx.leading.clone()))
    }

    /// The copy watches and the prober, until aborted (the credentials changed) or the term
    /// ends.
    async fn connected(self: Arc<Self>, ctx: Arc<LinkContext>, api: api::Worker) {
        self.state().api = Some(api.clone());
        let mut watches = self.watch_copies(&ctx, &api);
        watches.spawn(crate::room_watch::run(
            self.clone(),
            ctx.clone(),
            api.client().clone(),
        ));
        let mut ticks = tokio::time::interval(PROBE_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if self.probe(&ctx, &api).await == Probed::AnswersAgain {
                // A watch that lost its API server resumes from where it was, at its own
                // back-off's pace and with nothing to say that it did: list afresh instead,
                // and be ready only once that list is in.
                watches.abort_all();
                watches = self.watch_copies(&ctx, &api);
                watches.spawn(crate::room_watch::run(
                    self.clone(),
                    ctx.clone(),
                    api.client().clone(),
                ));
            }
        }
    }

    /// The copy watches, one per scope, each with a store of its own, listed afresh.
    fn watch_copies(self: &Arc<Self>, ctx: &Arc<LinkContext>, api: &api::Worker) -> JoinSet<()> {
        let scopes = self.scopes();
        {
            let mut s = self.state();
            s.ready = false;
            s.listed = vec![false; scopes.len()];
            s.copies.clear();
        }
        let mut watches = JoinSet::new();
        for (i, scope) in scopes.iter().enumerate() {
            let jobs: Api<CachedJob> = match scope {
                Some(ns) => Api::namespaced(api.client().clone(), ns),
                None => Api::all(api.client().clone()),
            };
            let (store, writer) = reflector::store::<CachedJob>();
            self.state().copies.push((scope.clone(), store));
            let config = watcher::Config::default()
                .labels(&crate::copy::copies_selector(&ctx.origin, self.name()));
            let events =
                reflector::reflector(writer, watcher(jobs, config).backoff(quick_backoff()));
            let (link, ctx) = (self.clone(), ctx.clone());
            watches.spawn(async move {
                let mut events = std::pin::pin!(events);
                while let Some(event) = events.next().await {
                    link.copy_event(&ctx, i, event);
                }
            });
        }
        watches
    }

    fn copy_event(
        &self,
        ctx: &LinkContext,
        scope: usize,
        event: Result<watcher::Event<CachedJob>, watcher::Error>,
    ) {
        match event {
            Ok(watcher::Event::Apply(copy) | watcher::Event::Delete(copy)) => {
                let key = format!("{}/{}", copy.namespace(), copy.name());
                ctx.pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .entry(key)
                    .or_insert_with(Instant::now);
                let _ = ctx.changes.send(Changed::Copy {
                    namespace: copy.namespace().to_owned(),
                    name: copy.name().to_owned(),
                });
            }
            Ok(watcher::Event::InitDone) => {
                let mut s = self.state();
                if let Some(listed) = s.listed.get_mut(scope) {
                    *listed = true;
                }
            }
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
            Err(error) => {
                tracing::debug!(worker = self.name(), %error, "watching copies");
            }
        }
    }

    /// One probe: does the worker answer with our credentials?
    async fn probe(&self, ctx: &LinkContext, api: &api::Worker) -> Probed {
        let asked = tokio::time::Instant::now();
        let answered =
            match tokio::time::timeout(PROBE_TIMEOUT, api.client().apiserver_version()).await {
                Ok(Ok(_)) => true,
                // Every request would be refused alike: as good as no answer.
                Ok(Err(kube::Error::Api(status))) => status.code != 401,
                // A probe stuck behind a busy worker's queue while its other requests are answered
                // is a busy worker, not a lost one.
                Ok(Err(_)) | Err(_) => {
                    let answers = self.state().answers.clone();
                    answers.is_some_and(|a| a.since(asked))
                }
            };
        let since = {
            let mut s = self.state();
            if answered {
                s.last_answer = Some(Instant::now());
            }
            s.last_answer.map(|t| t.elapsed().as_secs_f64())
        };
        ctx.metrics.last_answer(self.name(), since.unwrap_or(0.0));
        if !answered {
            if self.reach() != Reach::Lost {
                tracing::warn!(worker = self.name(), "the worker does not answer");
            }
            self.set_reach(ctx, Reach::Lost, None);
            return Probed::Lost;
        }
        if self.reach() == Reach::Lost {
            tracing::info!(
                worker = self.name(),
                "the worker answers again; listing and fencing its copies"
            );
            self.set_reach(ctx, Reach::Answers, None);
            return Probed::AnswersAgain;
        }
        self.set_reach(ctx, Reach::Answers, None);
        let (ready, listed) = {
            let s = self.state();
            (s.ready, !s.listed.is_empty() && s.listed.iter().all(|l| *l))
        };
        if ready || !listed {
            return Probed::Answers;
        }
        match self.fence(ctx, api).await {
            Ok(()) => {
                self.state().ready = true;
                let _ = ctx.changes.send(Changed::Worker(self.name().to_owned()));
            }
            Err(error) => {
                tracing::warn!(worker = self.name(), %error, "fencing the worker's copies; trying again");
            }
        }
        Probed::Answers
    }

    /// Deletes the copies there whose Job moved elsewhere or is gone, from a fresh list.
    async fn fence(&self, ctx: &LinkContext, api: &api::Worker) -> Result<(), ApiError> {
        for scope in self.scopes() {
            let selector = crate::copy::copies_selector(&ctx.origin, self.name());
            for copy in api.list_copies(scope.as_deref(), &selector).await? {
                collect(ctx, self.name(), api, &copy).await?;
            }
        }
        Ok(())
    }
}

/// Judges one copy found on `worker` and deletes it when the fence says so, confirmed by a
/// fresh read of its Job; returns why it was deleted, if it was.
pub async fn collect(
    ctx: &LinkContext,
    worker: &str,
    api: &api::Worker,
    copy: &serde_json::Value,
) -> Result<Option<Verdict>, ApiError> {
    let (Some(ns), Some(name), Some(uid)) = (
        copy.pointer("/metadata/namespace").and_then(|v| v.as_str()),
        copy.pointer("/metadata/name").and_then(|v| v.as_str()),
        copy.pointer("/metadata/uid").and_then(|v| v.as_str()),
    ) else {
        return Ok(None);
    };
    let cached = ctx
        .jobs
        .get(&ObjectRef::new(name).within(ns))
        .filter(|j| Some(j.uid()) == crate::copy::origin_uid(copy));
    let user = cached.map(|j| j.value());
    if fence::judge(copy, worker, &ctx.origin, user.as_ref()) == Verdict::Keep {
        return Ok(None);
    }
    let live = ctx.management.live(ns, name).await?;
    let verdict = fence::confirmed(copy, worker, live.as_ref());
    if let Some(verdict) = verdict {
        api.delete(ns, name, uid).await?;
        api.delete_pods_of(ns, uid).await?;
        ctx.metrics.deleted(worker, verdict.label());
        tracing::info!(
            worker,
            namespace = ns,
            job = name,
            reason = verdict.label(),
            "deleted a copy"
        );
    }
    Ok(verdict)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(names: &[&str], selector: bool) -> WorkerSpec {
        WorkerSpec {
            name: "east".to_owned(),
            kubeconfig_secret: Some("s".to_owned()),
            namespaces: NamespaceMatch {
                names: names.iter().map(|n| (*n).to_owned()).collect(),
                selector: selector.then(Default::default),
            },
            ..WorkerSpec::default()
        }
    }

    #[test]
    fn a_worker_taking_named_namespaces_is_watched_in_those_only() {
        assert_eq!(Link::new(spec(&[], false)).scopes(), vec![None]);
        assert_eq!(
            Link::new(spec(&["a", "b"], false)).scopes(),
            vec![Some("a".to_owned()), Some("b".to_owned())]
        );
        // A selector may choose any namespace: the whole cluster is watched.
        assert_eq!(Link::new(spec(&["a"], true)).scopes(), vec![None]);
    }

    #[test]
    fn the_local_worker_answers_and_is_ready_from_the_start() {
        let local = Link::new(WorkerSpec {
            name: "here".to_owned(),
            local: true,
            ..WorkerSpec::default()
        });
        assert_eq!(local.reach(), Reach::Answers);
        assert!(local.is_ready());
        let remote = Link::new(spec(&[], false));
        assert_eq!(remote.reach(), Reach::Connecting);
        assert!(!remote.is_ready());
    }
}
