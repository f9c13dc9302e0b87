//! The dispatcher's loop for one term of leadership: the management cluster's dispatched Jobs
//! watched (every Job, kept only when `spec.managedBy` names the dispatcher: the field cannot
//! be selected on, and it never changes), a link to each worker (credentials, copies, reach),
//! and kube-runtime's applier scheduling the syncs: never two of one Job at once, at most
//! `concurrency` at a time, wakes merged, at most half of them placing a Job (`placing_lane`:
//! a burst of new Jobs never queues ahead of the mirror). A copy's change wakes its Job after
//! [`MIRROR_BATCH`]. Beside them:
//! the collector, which deletes copies whose Job is gone (also when jobwarden was down at the
//! delete), and the Event writer.

pub mod fleet_change;
pub mod placed_jobs;
pub mod published;

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::Api;
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use jobwarden_admission::Policy;
use jobwarden_admission::policy::{Dispatch, PolicyVetoes, VetoRegistration};
use jobwarden_events::EventReporter;
use jobwarden_rules::well_known::{
    LEASE_MANAGEMENT_BUDGET_ANNOTATION, LEASE_WORKER_VIEWS_ANNOTATION,
};
use jobwarden_runtime::client::{BudgetSeen, RateLimit};
use jobwarden_runtime::events::outbox::{Delivery, EventOutbox};
use jobwarden_runtime::wakes::{Wake, batched, until};

use crate::api;
use crate::metrics::DispatchMetrics;
use crate::placement::Reach;
use crate::placement::loads::Loads;
use crate::placement::placing_lane::{PlacingLane, Routed};
use crate::plan::Settings;
use crate::plan::Waiting;
use crate::room::Resources;
use crate::sync::fair::Fair;
use crate::sync::{Dispatcher, SyncError, lock};
use crate::worker::link::{self as worker_link, Changed, Link, LinkContext};
use crate::worker::namespace_labels::NamespaceLabels;
use jobwarden_runtime::job_cache::CachedJob;

/// How often the collector looks at every copy of every ready worker.
pub const COLLECT_EVERY: Duration = Duration::from_secs(30);
const RETRY: Duration = Duration::from_secs(5);
const RETRY_CONFLICT: Duration = Duration::from_millis(500);
/// How long a copy's change (or the dispatcher's own write on a Job) waits before its Job is
/// synced, so that a burst of them is one sync and one write: the mirror's lag is this and a
/// write.
pub const MIRROR_BATCH: Duration = Duration::from_millis(300);
/// How long the Events left at the end of a term may take to be written.
const EVENT_DRAIN: Duration = Duration::from_secs(5);

/// How the dispatcher runs.
#[derive(Debug, Clone)]
pub struct DispatchConfig {
    pub dispatch: Dispatch,
    /// jobwarden's namespace: the kubeconfig Secrets are there.
    pub namespace: String,
    /// This replica, as Events name it.
    pub identity: String,
    /// Jobs synced at once.
    pub concurrency: u16,
    /// Each worker's request budget (its own client's).
    pub worker_limit: Option<RateLimit>,
    /// Where a new policy is asked first, when the policy file is followed: while the term
    /// lasts, one that removes a worker with Jobs still placed on it is refused.
    pub vetoes: Option<PolicyVetoes>,
    /// Where each worker's view is published for the Lease (`published`), while the term lasts.
    pub published: Option<published::Published>,
    /// The management client's request budget, seen: published on the Lease for doctor.
    pub management_budget: Option<BudgetSeen>,
}

/// Runs the dispatcher until `stop` resolves, on the management cluster through `management`
/// (a work client with a budget of its own). Every write checks `leading` first.
pub async fn run_term(
    management: Client,
    config: DispatchConfig,
    metrics: DispatchMetrics,
    leading: Arc<AtomicBool>,
    stop: impl Future<Output = ()> + Send + 'static,
) {
    let stop = futures::future::FutureExt::shared(Box::pin(stop));
    let origin = tokio::select! {
        origin = origin(&management, &config.dispatch) => origin,
        () = stop.clone() => return,
    };
    tracing::info!(%origin, workers = config.dispatch.workers.len(), "dispatching");
    let (store, writer) = reflector::store::<CachedJob>();
    let (changes_tx, changes_rx) = mpsc::unbounded_channel::<Changed>();
    let term = Term::new(
        &management,
        &config,
        metrics,
        leading,
        origin,
        &store,
        changes_tx,
    );
    let listed = Arc::new(AtomicBool::new(false));
    let _veto = config
        .vetoes
        .as_ref()
        .map(|vetoes| removal_veto(vetoes, store.clone(), term.links.clone(), listed.clone()));
    let mut beside = term.spawn_beside();
    let (applied, stopped_applying) = tokio::sync::oneshot::channel::<()>();
    let writing = term.spawn_event_writer(stopped_applying);
    let wakes = futures::stream::select(
        term.job_wakes(&management, &config.dispatch, writer, listed),
        term.worker_wakes(&store, changes_rx),
    );
    let queue = until(
        term.dispatcher
            .placing
            .clone()
            .gate(batched(wakes, MIRROR_BATCH)),
        stop.clone(),
    );
    apply(term.dispatcher.clone(), store, queue, config.concurrency).await;
    beside.abort_all();
    if let Some(published) = &term.published {
        published.send_replace(published::nothing());
    }
    // The writer writes what is left, for a bounded time (fenced writes fail at once).
    let _ = applied.send(());
    if tokio::time::timeout(EVENT_DRAIN, writing).await.is_err() {
        tracing::warn!("Events left unwritten at the end of the term");
    }
}

/// What one term of leadership runs on: the dispatcher, its links to the workers, and what
/// they share.
struct Term {
    dispatcher: Arc<Dispatcher>,
    links: Vec<Arc<Link>>,
    link_ctx: Arc<LinkContext>,
    published: Option<published::Published>,
}

impl Term {
    fn new(
        management: &Client,
        config: &DispatchConfig,
        metrics: DispatchMetrics,
        leading: Arc<AtomicBool>,
        origin: String,
        store: &Store<CachedJob>,
        changes: mpsc::UnboundedSender<Changed>,
    ) -> Term {
        let dispatch = &config.dispatch;
        let pending = Arc::new(Mutex::new(HashMap::new()));
        let reporter = EventReporter {
            component: dispatch.controller_name.clone(),
            instance: config.identity.clone(),
        };
        let api = api::Management::new(management.clone(), leading.clone(), reporter);
        let links: Vec<Arc<Link>> = dispatch
            .workers
            .iter()
            .cloned()
            .map(|w| Arc::new(Link::new(w)))
            .collect();
        let link_ctx = Arc::new(LinkContext {
            management: api.clone(),
            namespace: config.namespace.clone(),
            origin: origin.clone(),
            component: dispatch.controller_name.clone(),
            worker_limit: config.worker_limit,
            changes,
            metrics: metrics.clone(),
            jobs: store.clone(),
            pending: pending.clone(),
            leading,
        });
        let selector_needed = links.iter().any(|l| l.namespaces().selector.is_some())
            || dispatch
                .shares
                .iter()
                .any(|s| s.namespaces.selector.is_some());
        let dispatcher = Arc::new(Dispatcher {
            settings: Settings {
                origin,
                worker_lost: Duration::from_secs(dispatch.worker_lost_seconds),
                unschedulable: Duration::from_secs(dispatch.unschedulable_seconds),
            },
            links: links.clone(),
            management: api,
            metrics,
            namespace_labels: NamespaceLabels::new(management.clone(), selector_needed),
            loads: Mutex::new(Loads::default()),
            reservations: Mutex::default(),
            fair: Mutex::new(Fair::new(&dispatch.shares)),
            avoid: Mutex::default(),
            waiting: Mutex::default(),
            pending,
            events: EventOutbox::new(Delivery::Background, link_ctx.metrics.events.clone()),
            link_ctx: link_ctx.clone(),
            limiter: Mutex::default(),
            // Half the syncs may place; the others are the mirror's.
            placing: PlacingLane::new(usize::from(config.concurrency).div_ceil(2)),
            management_budget: config.management_budget.clone(),
        });
        Term {
            dispatcher,
            links,
            link_ctx,
            published: config.published.clone(),
        }
    }

    /// What runs beside the syncs for the term: each worker's link, the collector of copies
    /// and the gauges.
    fn spawn_beside(&self) -> JoinSet<()> {
        let metrics = &self.dispatcher.metrics;
        for link in &self.links {
            metrics.set_draining(link.name(), link.spec.draining);
        }
        let mut beside = JoinSet::new();
        for link in &self.links {
            beside.spawn(link.clone().supervise(self.link_ctx.clone()));
        }
        beside.spawn(collector(self.links.clone(), self.link_ctx.clone()));
        beside.spawn(gauges(self.dispatcher.clone(), self.published.clone()));
        beside
    }

    /// The Events' writer, until `stopped` (the syncs are done), then what is left.
    fn spawn_event_writer(
        &self,
        stopped: tokio::sync::oneshot::Receiver<()>,
    ) -> tokio::task::JoinHandle<()> {
        let dispatcher = self.dispatcher.clone();
        tokio::spawn(async move {
            let stopped = async {
                let _ = stopped.await;
            };
            dispatcher
                .events
                .run_writer(&dispatcher.management, stopped)
                .await;
        })
    }

    /// The wakes from the dispatched Jobs' watch (which fills `writer`'s store; `listed` once
    /// the first list is in).
    fn job_wakes(
        &self,
        management: &Client,
        dispatch: &Dispatch,
        writer: reflector::store::Writer<CachedJob>,
        listed: Arc<AtomicBool>,
    ) -> impl futures::Stream<Item = Wake<Routed<ObjectRef<CachedJob>>>> + Send + 'static {
        let name = dispatch.controller_name.clone();
        let dispatcher = self.dispatcher.clone();
        let links = self.links.clone();
        let link_ctx = self.link_ctx.clone();
        let jobs = watcher(
            Api::<CachedJob>::all(management.clone()),
            watcher::Config::default(),
        )
        // Short outages of the management cluster (a longer one ends the term) are caught up
        // with as the workers' are.
        .backoff(worker_link::quick_backoff())
        .filter_map(move |event| futures::future::ready(ours(event, &name)));
        let mut generations = HashMap::new();
        reflector::reflector(writer, jobs).flat_map(move |event| {
            if matches!(event, Ok(watcher::Event::InitDone)) {
                listed.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            let wakes = match event {
                Ok(e) => job_event(&dispatcher, &links, &link_ctx, &mut generations, e),
                Err(error) => {
                    tracing::warn!(%error, "watching the dispatched Jobs");
                    Vec::new()
                }
            };
            futures::stream::iter(wakes)
        })
    }

    /// The wakes from the workers' links: a copy changed, a worker's reach or room.
    fn worker_wakes(
        &self,
        store: &Store<CachedJob>,
        mut changes: mpsc::UnboundedReceiver<Changed>,
    ) -> impl futures::Stream<Item = Wake<Routed<ObjectRef<CachedJob>>>> + Send + 'static {
        let (store, dispatcher) = (store.clone(), self.dispatcher.clone());
        futures::stream::poll_fn(move |cx| changes.poll_recv(cx))
            .flat_map(move |change| futures::stream::iter(wakes_of(&store, &dispatcher, change)))
    }
}

/// Syncs the Jobs as `queue` wakes them, `concurrency` at once, until it ends.
async fn apply(
    dispatcher: Arc<Dispatcher>,
    store: Store<CachedJob>,
    queue: impl futures::Stream<Item = ObjectRef<CachedJob>> + Send + 'static,
    concurrency: u16,
) {
    controller::applier(
        |job: Arc<CachedJob>, ctx: Arc<Dispatcher>| {
            Box::pin(async move {
                let outcome = ctx.sync(&job, Timestamp::now()).await;
                ctx.placing.done(&job_ref(&job));
                Ok::<_, SyncError>(Action::requeue(outcome?.requeue_after))
            })
        },
        |job: Arc<CachedJob>, error: &SyncError, _ctx: Arc<Dispatcher>| {
            if error.is_conflict() {
                Action::requeue(RETRY_CONFLICT)
            } else {
                tracing::warn!(
                    namespace = job.namespace(),
                    job = job.name(),
                    error = jobwarden_runtime::error_chain(error),
                    "dispatch sync failed; retrying"
                );
                Action::requeue(RETRY)
            }
        },
        dispatcher.clone(),
        store,
        queue.map(Ok::<_, Infallible>),
        controller::Config::default().concurrency(concurrency),
    )
    .for_each(|result| {
        // A wake of a Job gone from the store (deleted while its wake was batched) runs no
        // sync: the place it took in the lane is freed here, or placing would stop for good
        // once every place leaked.
        if let Err(controller::Error::ObjectNotFound(job)) = &result {
            let mut gone = ObjectRef::new(&job.name);
            gone.namespace = job.namespace.clone();
            dispatcher.placing.done(&gone);
        }
        if let Err(e) = result {
            tracing::trace!(error = %e, "dispatch request");
        }
        futures::future::ready(())
    })
    .await;
}

/// Registers, for the term, the veto only the leader can make of a policy that removes a
/// worker (`fleet_change`): a finished Job recorded there whose copy is not deleted yet (the
/// copies are the leader's to know). Every replica refuses a removal for an unfinished Job
/// (`placed_jobs`), before this is asked. Until the Jobs are listed, any removal is refused:
/// they cannot be told.
fn removal_veto(
    vetoes: &PolicyVetoes,
    jobs: Store<CachedJob>,
    links: Vec<Arc<Link>>,
    listed: Arc<AtomicBool>,
) -> VetoRegistration {
    vetoes.register("dispatcher", move |running: &Policy, new: &Policy| {
        let removes = running
            .dispatch
            .workers
            .iter()
            .any(|w| new.dispatch.worker(&w.name).is_none());
        if removes && !listed.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(placed_jobs::NOT_LISTED.to_owned());
        }
        let all = jobs.state();
        let placed = all.iter().filter(|j| j.finished).filter_map(|j| {
            let worker = j.worker.as_deref();
            let copy_left = worker
                .and_then(|w| links.iter().find(|l| l.name() == w))
                .is_some_and(|l| l.cached(j.namespace(), j.name()).is_some());
            copy_left.then_some(crate::run::fleet_change::PlacedJob {
                namespace: j.namespace(),
                name: j.name(),
                worker,
                finished: false,
            })
        });
        crate::run::fleet_change::removal_refused(&running.dispatch, &new.dispatch, placed)
    })
}

/// `dispatch.origin`, else the UID of this cluster's `kube-system` namespace (retried until
/// the API server answers).
async fn origin(client: &Client, dispatch: &Dispatch) -> String {
    if !dispatch.origin.is_empty() {
        return dispatch.origin.clone();
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    loop {
        match namespaces.get_metadata("kube-system").await {
            Ok(ns) => {
                if let Some(uid) = ns.metadata.uid {
                    return uid;
                }
            }
            Err(error) => tracing::warn!(%error, "reading kube-system's UID, the dispatch origin"),
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// The watch event, if it is about a dispatched Job (or the list's bounds).
fn ours(
    event: Result<watcher::Event<CachedJob>, watcher::Error>,
    name: &str,
) -> Option<Result<watcher::Event<CachedJob>, watcher::Error>> {
    match &event {
        Ok(watcher::Event::Apply(j) | watcher::Event::InitApply(j) | watcher::Event::Delete(j))
            if !j.is_managed_by(name) =>
        {
            None
        }
        _ => Some(event),
    }
}

fn job_ref(job: &CachedJob) -> ObjectRef<CachedJob> {
    ObjectRef::new(job.name()).within(job.namespace())
}

fn recorded(job: &CachedJob) -> Option<&str> {
    job.worker.as_deref()
}

/// A wake of `job`'s sync: placing when the Job waits for a worker (no record, not ended,
/// not being deleted), which goes through the placing lane.
fn routed(job: &CachedJob) -> Routed<ObjectRef<CachedJob>> {
    Routed {
        job: job_ref(job),
        placing: recorded(job).is_none()
            && !job.finished
            && job.metadata.deletion_timestamp.is_none(),
    }
}

/// What a watch event of the management cluster wakes, and what it changes in the counts: a
/// Job new to the dispatcher, or whose spec changed (its generation moved), at once; a change
/// of its metadata or status (the dispatcher's own writes, mostly) batched.
fn job_event(
    dispatcher: &Dispatcher,
    links: &[Arc<Link>],
    ctx: &Arc<LinkContext>,
    generations: &mut HashMap<String, i64>,
    event: watcher::Event<CachedJob>,
) -> Vec<Wake<Routed<ObjectRef<CachedJob>>>> {
    match event {
        watcher::Event::Apply(job) | watcher::Event::InitApply(job) => {
            if let Ok(mut loads) = dispatcher.loads.lock() {
                loads.observe(job.uid(), recorded(&job), job.finished);
            }
            let released = dispatcher.reservations.lock().ok().and_then(|mut held| {
                // Only a placed Job holds room: the others are not read.
                match recorded(&job).filter(|_| !job.finished) {
                    Some(worker) => held.observe(job.uid(), &job.value(), Some(worker), false),
                    None => held.forget(job.uid()),
                }
            });
            if let Some(worker) = released {
                // The room it held is free (its pods gone before its end showed here): the
                // Jobs waiting for room there are looked at again.
                let _ = ctx.changes.send(Changed::Room(worker));
            }
            let generation = job.metadata.generation.unwrap_or(0);
            match generations.insert(job.uid().to_owned(), generation) {
                Some(g) if g == generation => vec![Wake::Batched(routed(&job))],
                _ => vec![Wake::Now(routed(&job))],
            }
        }
        watcher::Event::Delete(job) => {
            generations.remove(job.uid());
            dispatcher.forget(job.uid());
            // A placement of it that waits, or is under way, no longer holds a place.
            dispatcher.placing.done(&job_ref(&job));
            // Its copies go now, not at the collector's next pass.
            for link in links {
                if let (Some(api), Some(copy)) =
                    (link.api(), link.cached(job.namespace(), job.name()))
                {
                    let (ctx, name) = (ctx.clone(), link.name().to_owned());
                    tokio::spawn(async move {
                        if let Err(error) =
                            crate::worker::link::collect(&ctx, &name, &api, &copy.value()).await
                        {
                            tracing::warn!(worker = name, %error, "deleting the copy of a deleted Job");
                        }
                    });
                }
            }
            Vec::new()
        }
        watcher::Event::InitDone => {
            // Jobs deleted while the watch was down sent no Delete.
            let present: std::collections::HashSet<String> = ctx
                .jobs
                .state()
                .iter()
                .map(|j| j.uid().to_owned())
                .collect();
            if let Ok(mut loads) = dispatcher.loads.lock() {
                loads.retain(&|uid| present.contains(uid));
            }
            if let Ok(mut reservations) = dispatcher.reservations.lock() {
                reservations.retain(&|uid| present.contains(uid));
            }
            generations.retain(|uid, _| present.contains(uid));
            Vec::new()
        }
        watcher::Event::Init => Vec::new(),
    }
}

/// The Jobs a wake concerns: a copy's Job; a worker's Jobs, and those not placed or
/// waiting; for a change of a worker's room, the Jobs waiting for room, oldest first (a Job
/// that does not fit never holds back a later one that does: each is judged on its own).
fn wakes_of(
    store: &Store<CachedJob>,
    dispatcher: &Dispatcher,
    change: Changed,
) -> Vec<Wake<Routed<ObjectRef<CachedJob>>>> {
    match change {
        // A burst of a copy's changes (its controller writes a few in a second) is one write
        // on the user's Job.
        Changed::Copy { namespace, name } => vec![Wake::Batched(Routed {
            job: ObjectRef::new(&name).within(&namespace),
            placing: false,
        })],
        Changed::Turn { namespace, name } => vec![Wake::Now(Routed {
            job: ObjectRef::new(&name).within(&namespace),
            placing: true,
        })],
        Changed::Room(_) => room_wakes(store, dispatcher),
        Changed::Worker(worker) => {
            let waiting: std::collections::HashSet<String> = dispatcher
                .waiting
                .lock()
                .map(|w| w.keys().cloned().collect())
                .unwrap_or_default();
            store
                .state()
                .iter()
                .filter(|j| !j.finished || recorded(j) == Some(worker.as_str()))
                .filter(|j| match recorded(j) {
                    Some(w) => w == worker || waiting.contains(j.uid()),
                    None => true,
                })
                .map(|j| Wake::Now(routed(j)))
                .collect()
        }
    }
}

/// The Jobs waiting for room, in their turn: the fair order where the policy names teams,
/// else oldest first (a Job that does not fit never holds back a later one that does: each is
/// judged on its own, and the fair order's gate keeps the turns).
fn room_wakes(
    store: &Store<CachedJob>,
    dispatcher: &Dispatcher,
) -> Vec<Wake<Routed<ObjectRef<CachedJob>>>> {
    let for_room: std::collections::HashSet<String> = dispatcher
        .waiting
        .lock()
        .map(|w| {
            w.iter()
                .filter(|(_, (why, _))| {
                    matches!(why, Waiting::NoRoom { .. } | Waiting::Unschedulable { .. })
                })
                .map(|(uid, _)| uid.clone())
                .collect()
        })
        .unwrap_or_default();
    if for_room.is_empty() {
        return Vec::new();
    }
    let mut jobs: Vec<Arc<CachedJob>> = store
        .state()
        .into_iter()
        .filter(|j| for_room.contains(j.uid()))
        .collect();
    jobs.sort_by(|a, b| {
        (&a.metadata.creation_timestamp, a.uid()).cmp(&(&b.metadata.creation_timestamp, b.uid()))
    });
    let turns: HashMap<String, usize> = {
        let fair = lock(&dispatcher.fair);
        fair.shares
            .iter_in_order()
            .enumerate()
            .map(|(i, k)| (k.uid.to_string(), i))
            .collect()
    };
    // Stable: the Jobs not in the order (not judged yet) keep their age's place, last.
    jobs.sort_by_key(|j| turns.get(j.uid()).copied().unwrap_or(usize::MAX));
    jobs.iter().map(|j| Wake::Now(routed(j))).collect()
}

/// Every [`COLLECT_EVERY`], each ready worker's copies judged: those whose Job is gone or moved
/// are deleted.
async fn collector(links: Vec<Arc<Link>>, ctx: Arc<LinkContext>) {
    let mut ticks = tokio::time::interval(COLLECT_EVERY);
    loop {
        ticks.tick().await;
        for link in &links {
            let Some(api) = link.api().filter(|_| link.is_ready()) else {
                continue;
            };
            for copy in link.all_cached() {
                if let Err(error) =
                    crate::worker::link::collect(&ctx, link.name(), &api, &copy.value()).await
                {
                    tracing::warn!(worker = link.name(), %error, "collecting copies");
                    break;
                }
            }
        }
    }
}

/// The gauges that count: workers by state, Jobs by worker, each worker's view and room, and
/// how long the waiting Jobs have waited.
async fn gauges(dispatcher: Arc<Dispatcher>, published: Option<published::Published>) {
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    loop {
        ticks.tick().await;
        let mut states: HashMap<&str, i64> = HashMap::new();
        for link in &dispatcher.links {
            let state = match link.reach() {
                Reach::Answers if link.is_ready() => "answering",
                Reach::Answers | Reach::Connecting => "connecting",
                Reach::Lost => "lost",
                Reach::Refused(_) => "refused",
            };
            *states.entry(state).or_default() += 1;
        }
        let states: Vec<(&str, i64)> = states.into_iter().collect();
        dispatcher.metrics.worker_states(&states);
        for link in &dispatcher.links {
            room_gauges(&dispatcher.metrics, link);
        }
        if let Some(published) = &published {
            published::publish(
                published,
                LEASE_WORKER_VIEWS_ANNOTATION,
                published::views(&dispatcher.links, Timestamp::now()),
            );
            if let Some(budget) = &dispatcher.management_budget {
                published::publish(
                    published,
                    LEASE_MANAGEMENT_BUDGET_ANNOTATION,
                    published::budget(budget),
                );
            }
        }
        share_gauges(&dispatcher);
        if let Ok(waiting) = dispatcher.waiting.lock() {
            crate::sync::count_waiting(&dispatcher.metrics, &waiting);
        }
        if let Ok(loads) = dispatcher.loads.lock() {
            for link in &dispatcher.links {
                dispatcher
                    .metrics
                    .set_jobs(link.name(), loads.load(link.name()));
            }
            dispatcher.metrics.set_jobs("", loads.unplaced());
        }
    }
}

/// The fleet's allocatable (each worker's, judged by its Nodes) given to the fair order, and
/// each team's series.
fn share_gauges(dispatcher: &Dispatcher) {
    let mut fleet = Resources::default();
    for link in &dispatcher.links {
        if let Some(summary) = link.view.summary() {
            fleet.add(&summary.allocatable);
        }
    }
    let teams = {
        let mut fair = lock(&dispatcher.fair);
        fair.shares.set_fleet_allocatable(fleet);
        fair.shares.team_summary()
    };
    dispatcher.metrics.teams.set(&teams);
}

/// A worker's view and free room, as `jobwarden_dispatch_worker_*` show them.
fn room_gauges(metrics: &DispatchMetrics, link: &Link) {
    let state = link.view.state();
    let summary = link.view.summary().unwrap_or_default();
    let mut room: Vec<(String, f64, f64)> = Vec::new();
    let mut add = |name: &str, free: u64, allocatable: u64, unit: f64| {
        // Amounts are far below 2^53: exact as f64.
        #[allow(clippy::cast_precision_loss)]
        room.push((
            name.to_owned(),
            free as f64 / unit,
            allocatable as f64 / unit,
        ));
    };
    let (free, all) = (&summary.free, &summary.allocatable);
    add("cpu", free.cpu_millis, all.cpu_millis, 1000.0);
    add("memory", free.memory, all.memory, 1.0);
    add("pods", free.pods, all.pods, 1.0);
    for (name, amount) in all.iter() {
        if !["cpu", "memory", "pods", "ephemeral-storage"].contains(&name) {
            add(name, free.get(name), amount, 1.0);
        }
    }
    metrics.worker_room(link.name(), state.label(), summary.schedulable_nodes, &room);
}
