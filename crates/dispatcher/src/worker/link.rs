//! One worker cluster as the dispatcher holds it: its credentials, read and judged (a refused
//! kubeconfig is never used), a client with a request budget of its own, the watch of its
//! copies (by the origin label; per namespace when the worker takes named namespaces only,
//! whose roles may be granted there alone), the view of its room (`room_watch`, also for the
//! local worker, through this cluster's client), and its reach, probed every few seconds
//! (`supervise`, which keeps the connection).
//!
//! A worker is **lost** the moment a probe gets no answer, or is refused as unauthorized, and
//! **ready** only once it answers, its copies are listed, and the copies there whose Job moved
//! to another worker or is gone have been deleted (the fence): nothing else is done on a worker
//! that answers again before that.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use tokio::sync::mpsc;

use jobwarden_admission::policy::{Capacity, NamespaceMatch, Worker as WorkerSpec};
use jobwarden_runtime::client::{Answers, RateLimit};

use crate::api::{self, ApiError};
use crate::metrics::DispatchMetrics;
use crate::placement::Reach;
use crate::worker::credentials::RefusalReason;
use crate::worker::fence::{self, Verdict};
use crate::worker::view::WorkerView;
use jobwarden_runtime::job_cache::CachedJob;

/// Between two probes of a worker.
pub const PROBE_EVERY: Duration = Duration::from_secs(2);
/// A probe not answered within this counts as no answer.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a worker's word on a namespace is trusted: that it has it, and that it has not.
const NAMESPACE_KNOWN_FOR: Duration = Duration::from_secs(300);
const NAMESPACE_MISSING_FOR: Duration = Duration::from_secs(15);

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
    /// A waiting Job's turn in the fair order came: a later one found it fits where that one
    /// would have gone.
    Turn { namespace: String, name: String },
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
pub(super) struct State {
    pub(super) reach: Option<Reach>,
    pub(super) ready: bool,
    pub(super) api: Option<api::Worker>,
    /// One store per watched scope: `None` for the whole cluster, else a namespace.
    pub(super) copies: Vec<(Option<String>, Store<CachedJob>)>,
    pub(super) listed: Vec<bool>,
    pub(super) last_answer: Option<Instant>,
    /// When the worker last answered any of the dispatcher's requests.
    pub(super) answers: Option<Answers>,
    pub(super) namespaces: HashMap<String, (bool, Instant)>,
}

impl State {
    /// Every copy watch has listed (and there is one).
    pub(super) fn all_listed(&self) -> bool {
        !self.listed.is_empty() && self.listed.iter().all(|l| *l)
    }
}

/// One configured worker.
pub struct Link {
    pub spec: WorkerSpec,
    state: Mutex<State>,
    /// Its nodes and unfinished pods, as its watches leave them.
    pub view: WorkerView,
    /// Told when a copy watch has listed: the prober fences and readies the worker then,
    /// not at its next tick (a worker just added or back is placed on up to 2 s sooner).
    pub(super) listed_now: tokio::sync::Notify,
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
            listed_now: tokio::sync::Notify::new(),
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

    pub(super) fn state(&self) -> MutexGuard<'_, State> {
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
    pub(super) fn scopes(&self) -> Vec<Option<String>> {
        let ns = &self.spec.namespaces;
        if ns.selector.is_none() && !ns.names.is_empty() {
            ns.names.iter().cloned().map(Some).collect()
        } else {
            vec![None]
        }
    }

    pub(super) fn set_reach(
        &self,
        ctx: &LinkContext,
        reach: Reach,
        refused: Option<RefusalReason>,
    ) {
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
