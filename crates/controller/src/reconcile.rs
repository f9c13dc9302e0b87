//! The reconcile loop: Job and pod watch events feed the caches, and each event names the Job to
//! sync; kube-runtime's `applier` schedules the syncs (never two of one Job at once, at most
//! `concurrency` at a time, requeues merged). Pod-triggered syncs are batched for a second, as
//! upstream's `enqueueSyncJobBatched` does, so a Job whose pods finish one by one is written
//! once per batch, not once per pod. Orphaned pods still holding our finalizer are released.
//! The event sources are parameters: kube watchers in a cluster, the in-memory cluster in the
//! scale benchmark and the tests.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt as _, Stream, StreamExt as _};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use tokio::sync::mpsc;

use crate::cluster::ClusterApi;
use crate::pods::CachedPod;
use crate::pods::cache::PodObservation;
use crate::sync::adoption;
use crate::sync::orphans::{self, Orphan, OrphanCandidate};
use crate::sync::{JobController, SyncError};
use jobwarden_runtime::error_chain;
use jobwarden_runtime::job_cache::CachedJob;
use jobwarden_runtime::wakes::{self, batched, until};

/// A safety net: look at every managed Job at least this often even if no event arrives.
const RESYNC: Duration = Duration::from_secs(300);
/// After a failed sync (the API refused a write or could not be reached).
const RETRY: Duration = Duration::from_secs(5);
/// After a conflict: the newer Job is on its way through the watch.
const RETRY_CONFLICT: Duration = Duration::from_millis(500);

/// How the loop runs.
#[derive(Debug, Clone)]
pub struct LoopConfig {
    /// Jobs synced at once (upstream's `--concurrent-job-syncs`, default 5).
    pub concurrency: u16,
    /// How long a pod event waits before its Job is synced, so that the events of one burst
    /// are handled by one sync (upstream's `syncJobBatchPeriod`, 1 s).
    pub batch_period: Duration,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig {
            concurrency: 5,
            batch_period: Duration::from_secs(1),
        }
    }
}

pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

type EventStream<K> = Pin<Box<dyn Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send>>;

/// The event sources and what to do with the Job cache once it exists.
pub struct Sources {
    pub jobs: EventStream<CachedJob>,
    pub pods: EventStream<Pod>,
}

struct Ctx<A> {
    controller: Arc<JobController<A>>,
    clock: Clock,
}

/// A Job to sync, now or after the batch period.
type Wake = wakes::Wake<ObjectRef<CachedJob>>;

/// Runs the loop until `stop` resolves, then lets the syncs in flight finish and (with the
/// controller's background event delivery) writes the Events left. `on_synced` is
/// handed the Job cache once it holds every Job (the in-process audit reads it).
pub async fn run_loop<A: ClusterApi + 'static>(
    controller: Arc<JobController<A>>,
    sources: Sources,
    clock: Clock,
    config: LoopConfig,
    stop: impl Future<Output = ()> + Send + 'static,
    on_synced: impl FnOnce(Store<CachedJob>) + Send + 'static,
) {
    let (store, writer) = reflector::store::<CachedJob>();
    let (orphan_tx, orphan_rx) = mpsc::unbounded_channel::<OrphanCandidate>();
    let job_wakes = job_watch_wakes(
        controller.clone(),
        (store.clone(), writer),
        sources.jobs,
        orphan_tx.clone(),
        on_synced,
    );
    let pod_wakes = pod_watch_wakes(controller.clone(), store.clone(), sources.pods, orphan_tx);
    let wakes = futures::stream::select(job_wakes, pod_wakes);
    let wakes = hold_until(wakes, controller.pods().wait_synced());
    let queue = until(batched(wakes, config.batch_period), stop).map(Ok::<_, Infallible>);
    let orphans = spawn_orphan_releases(controller.clone(), store.clone(), orphan_rx);

    // The event writer (with background delivery) runs beside the syncs, and writes what is
    // left once they have stopped, within the caller's bounded drain.
    let (applied, stopped_applying) = tokio::sync::oneshot::channel::<()>();
    let events = {
        let controller = controller.clone();
        async move {
            controller
                .write_events(async {
                    let _ = stopped_applying.await;
                })
                .await;
        }
    };
    let ctx = Arc::new(Ctx { controller, clock });
    let applying = controller::applier(
        |job: Arc<CachedJob>, ctx: Arc<Ctx<A>>| {
            Box::pin(async move {
                let report = ctx.controller.sync(&job, (ctx.clock)()).await?;
                Ok::<_, SyncError>(Action::requeue(
                    report.requeue_after.unwrap_or(RESYNC).min(RESYNC),
                ))
            })
        },
        |job: Arc<CachedJob>, error: &SyncError, _ctx: Arc<Ctx<A>>| retry_after(&job, error),
        ctx,
        store,
        queue,
        controller::Config::default().concurrency(config.concurrency),
    )
    .for_each(|result| async move {
        if let Err(e) = result {
            tracing::trace!(error = %e, "reconcile request");
        }
    })
    .map(|()| {
        let _ = applied.send(());
    });
    futures::join!(applying, events);
    orphans.abort();
}

/// The Job watch, feeding the Job cache (`writer`'s store), as the Jobs it wakes. `on_synced`
/// is handed the store when the reflector passes on the first `InitDone` (it has applied it to
/// the store by then), not from a task awaiting `Store::wait_until_ready`: in kube-runtime 5
/// that future wakes only the last of the tasks awaiting it at once (one futures oneshot
/// receiver, one waker slot), and the applier awaits it too, so such a task slept forever
/// and the in-process audit never had a cache to read.
fn job_watch_wakes<A: ClusterApi + 'static>(
    ctl: Arc<JobController<A>>,
    (store, writer): (Store<CachedJob>, reflector::store::Writer<CachedJob>),
    jobs: EventStream<CachedJob>,
    orphans: mpsc::UnboundedSender<OrphanCandidate>,
    on_synced: impl FnOnce(Store<CachedJob>) + Send + 'static,
) -> impl Stream<Item = Wake> + Send + 'static {
    let mut on_synced = Some(on_synced);
    let mut generations: HashMap<String, i64> = HashMap::new();
    reflector::reflector(writer, jobs)
        .map(move |event| {
            let wakes = match event {
                Ok(e) => {
                    if matches!(e, watcher::Event::InitDone)
                        && let Some(hand_over) = on_synced.take()
                    {
                        hand_over(store.clone());
                    }
                    job_event(&ctl, &store, &mut generations, &orphans, &e)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "Job watch");
                    Vec::new()
                }
            };
            futures::stream::iter(wakes)
        })
        .flatten()
}

/// The pod watch, feeding the pod cache, as the Jobs it wakes.
fn pod_watch_wakes<A: ClusterApi + 'static>(
    ctl: Arc<JobController<A>>,
    store: Store<CachedJob>,
    pods: EventStream<Pod>,
    orphans: mpsc::UnboundedSender<OrphanCandidate>,
) -> impl Stream<Item = Wake> + Send + 'static {
    pods.map(move |event| {
        let wakes = match event {
            Ok(e) => {
                let observations = ctl.observe_pods(&e);
                pod_wakes(&ctl, &store, &orphans, observations)
            }
            Err(e) => {
                tracing::warn!(error = %e, "pod watch");
                Vec::new()
            }
        };
        futures::stream::iter(wakes)
    })
    .flatten()
}

/// The release worker: orphans found by the watches are released one at a time, apart from
/// the syncs.
fn spawn_orphan_releases<A: ClusterApi + 'static>(
    ctl: Arc<JobController<A>>,
    store: Store<CachedJob>,
    mut candidates: mpsc::UnboundedReceiver<OrphanCandidate>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(candidate) = candidates.recv().await {
            release_orphan(&ctl, &store, candidate).await;
        }
    })
}

/// When a failed sync is tried again: soon after a conflict, as the newer Job is on its way.
fn retry_after(job: &CachedJob, error: &SyncError) -> Action {
    if error.is_conflict() {
        tracing::debug!(
            job = job.name(),
            namespace = job.namespace(),
            "conflict; the newer Job is on its way"
        );
        Action::requeue(RETRY_CONFLICT)
    } else {
        tracing::warn!(
            job = job.name(),
            namespace = job.namespace(),
            error = error_chain(error),
            "sync failed; retrying"
        );
        Action::requeue(RETRY)
    }
}

fn job_ref(job: &CachedJob) -> ObjectRef<CachedJob> {
    ObjectRef::new(job.name()).within(job.namespace())
}

/// What a Job watch event wakes: the Job itself when it is ours; at once when it is new or
/// its spec changed (its generation moved), batched when only its status did.
fn job_event<A: ClusterApi>(
    ctl: &JobController<A>,
    store: &Store<CachedJob>,
    generations: &mut HashMap<String, i64>,
    orphans: &mpsc::UnboundedSender<OrphanCandidate>,
    event: &watcher::Event<CachedJob>,
) -> Vec<Wake> {
    match event {
        watcher::Event::Apply(job) | watcher::Event::InitApply(job) => {
            if !ctl
                .config()
                .runs(job.managed_by.as_deref(), job.worker.as_deref())
            {
                ctl.saw_foreign(job);
                return Vec::new();
            }
            let generation = job.metadata.generation.unwrap_or(0);
            match generations.insert(job.uid().to_owned(), generation) {
                Some(g) if g == generation => vec![Wake::Batched(job_ref(job))],
                _ => vec![Wake::Now(job_ref(job))],
            }
        }
        watcher::Event::Delete(job) => {
            generations.remove(job.uid());
            ctl.job_gone(job.uid());
            // Upstream's `cleanupPodFinalizers`: its pods that still hold our finalizer are
            // orphans now.
            for pod in ctl.pods().for_job(job.uid()) {
                let candidate = OrphanCandidate {
                    namespace: job.namespace().to_owned(),
                    job_name: Some(job.name().to_owned()),
                    pod,
                };
                if judge_orphan(ctl, store, &candidate) != Orphan::Keep {
                    let _ = orphans.send(candidate);
                }
            }
            Vec::new()
        }
        watcher::Event::Init => Vec::new(),
        watcher::Event::InitDone => {
            // Jobs deleted while the watch was down never got a Delete event.
            let present: HashSet<String> =
                store.state().iter().map(|j| j.uid().to_owned()).collect();
            generations.retain(|uid, _| {
                let keep = present.contains(uid);
                if !keep {
                    ctl.job_gone(uid);
                }
                keep
            });
            Vec::new()
        }
    }
}

/// What pod events wake: the Jobs they belong to, batched; orphans go to the release worker.
fn pod_wakes<A: ClusterApi>(
    ctl: &JobController<A>,
    store: &Store<CachedJob>,
    orphans: &mpsc::UnboundedSender<OrphanCandidate>,
    observations: Vec<PodObservation>,
) -> Vec<Wake> {
    let mut wakes = Vec::new();
    for o in observations {
        if let (None, Some(pod)) = (&o.job, &o.pod) {
            wakes.extend(adopter_wakes(ctl, store, &o.namespace, pod));
        }
        if let Some(pod) = o.pod {
            let candidate = OrphanCandidate {
                namespace: o.namespace.clone(),
                job_name: o.job.as_ref().map(|j| j.name.clone()),
                pod,
            };
            if judge_orphan(ctl, store, &candidate) != Orphan::Keep {
                let _ = orphans.send(candidate);
            }
        }
        if let Some(job) = o.job {
            wakes.push(Wake::Batched(
                ObjectRef::new(&job.name).within(&job.namespace),
            ));
        }
    }
    wakes
}

/// A pod no Job controls wakes the Jobs that would adopt it (upstream's `addPod` and
/// `updatePod` for an orphan): otherwise it waits for their next sync, which may never come.
fn adopter_wakes<A: ClusterApi>(
    ctl: &JobController<A>,
    store: &Store<CachedJob>,
    namespace: &str,
    pod: &CachedPod,
) -> Vec<Wake> {
    if pod.owner_uid.is_some() || pod.controlled || pod.deleting {
        return Vec::new();
    }
    let jobs = store.state();
    let ours = jobs.iter().map(Arc::as_ref).filter(|j| {
        ctl.config()
            .runs(j.managed_by.as_deref(), j.worker.as_deref())
    });
    adoption::adopters(ours, namespace, pod)
        .into_iter()
        .map(|job| Wake::Batched(job_ref(job)))
        .collect()
}

async fn release_orphan<A: ClusterApi>(
    ctl: &JobController<A>,
    store: &Store<CachedJob>,
    candidate: OrphanCandidate,
) {
    let release = match judge_orphan(ctl, store, &candidate) {
        Orphan::Keep => false,
        Orphan::Release => true,
        Orphan::Confirm => orphans::confirm(ctl.api(), &candidate).await,
    };
    if release {
        orphans::release(ctl.api(), &candidate).await;
    }
}

/// Upstream's `WaitForNamedCacheSync`: no Job is synced before the pod cache has loaded its
/// first list (kube's applier already waits for the Job cache). Until then the wakes are held,
/// one per Job, and they all go out at once when it has: a Job planned from a pod cache still
/// empty would be given again every pod it has.
fn hold_until(
    wakes: impl Stream<Item = Wake> + Send + 'static,
    synced: impl Future<Output = ()> + Send + 'static,
) -> impl Stream<Item = Wake> + Send {
    struct State<S, F> {
        wakes: Pin<Box<S>>,
        synced: Option<Pin<Box<F>>>,
        held: Vec<ObjectRef<CachedJob>>,
        seen: HashSet<ObjectRef<CachedJob>>,
    }
    let state = State {
        wakes: Box::pin(wakes),
        synced: Some(Box::pin(synced)),
        held: Vec::new(),
        seen: HashSet::new(),
    };
    futures::stream::unfold(state, |mut s| async move {
        loop {
            let Some(synced) = s.synced.as_mut() else {
                if let Some(r) = s.held.pop() {
                    return Some((Wake::Now(r), s));
                }
                let wake = s.wakes.next().await?;
                return Some((wake, s));
            };
            tokio::select! {
                () = synced => {
                    s.synced = None;
                    s.seen = HashSet::new();
                }
                wake = s.wakes.next() => match wake? {
                    Wake::Now(r) | Wake::Batched(r) => {
                        if s.seen.insert(r.clone()) {
                            s.held.push(r);
                        }
                    }
                },
            }
        }
    })
}

/// Whether a pod is an orphan to release, as far as this controller's caches tell.
fn judge_orphan<A: ClusterApi>(
    ctl: &JobController<A>,
    store: &Store<CachedJob>,
    candidate: &OrphanCandidate,
) -> Orphan {
    orphans::judge(candidate, store, &ctl.config().controller_name, |uid| {
        ctl.is_gone(uid)
    })
}
