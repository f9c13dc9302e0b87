//! Leadership: runs a task only while this replica holds a `coordination.k8s.io` Lease, with
//! client-go's leader election semantics (`tools/leaderelection`): a Lease not renewed for
//! `lease_duration` is free, the holder renews every `retry_period` and steps down when it
//! could not renew within `renew_deadline` (shorter than the Lease, so it has stopped acting
//! before anyone else may take over), and it releases the Lease on shutdown, as client-go's
//! `ReleaseOnCancel` does. A standby tries every `retry_period`, so a released Lease is taken
//! within one. It never runs two copies of the task at a time, and knows nothing of Jobs.
//!
//! Expiry is judged as client-go judges it: from when this replica last saw the Lease record
//! change (its own monotonic clock), never from the `renewTime` written by another machine's
//! clock. Every write carries the resourceVersion read as a precondition, so of two replicas
//! racing for a free Lease one wins and the other gets a conflict.

pub mod events;
pub mod metrics;

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::FutureExt as _;
use futures::future::Shared;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

/// Which Lease, who this replica is in it, and client-go's three durations.
#[derive(Debug, Clone)]
pub struct LeaseSettings {
    pub namespace: String,
    pub name: String,
    /// This replica's name in the Lease.
    pub identity: String,
    /// How long a Lease holds without renewal (client-go's `LeaseDuration`, 15 s).
    pub lease_duration: Duration,
    /// How long the holder keeps acting without a successful renewal (`RenewDeadline`, 10 s).
    pub renew_deadline: Duration,
    /// Between two attempts to acquire or renew (`RetryPeriod`, 2 s).
    pub retry_period: Duration,
    /// Written on the Lease with each acquisition and renewal, in the same request: what the
    /// holder says of itself (jobwarden: its revision, for `doctor`).
    pub annotations: BTreeMap<String, String>,
    /// Written beside them, as they are at each write: what the holder says of its work now
    /// (jobwarden: each worker's view, for `doctor`). Still one write per renewal.
    pub published: Option<watch::Receiver<BTreeMap<String, String>>>,
}

impl LeaseSettings {
    /// client-go's rule: the holder must have stopped before its Lease can expire, with room
    /// for a retry period of clock jitter.
    pub fn check(&self) -> Result<(), SettingsError> {
        if self.retry_period.is_zero() {
            return Err(SettingsError::RetryPeriodZero);
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(SettingsError::LeaseNotLongerThanDeadline {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
            });
        }
        if self.renew_deadline <= self.retry_period.mul_f64(1.2) {
            return Err(SettingsError::DeadlineTooShort {
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
            });
        }
        Ok(())
    }
}

/// Leader-election settings that break client-go's rule: leading could not be given up
/// before the Lease expires.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error("the leader-election retry period must be positive")]
    RetryPeriodZero,
    #[error(
        "the Lease duration ({lease_duration:?}) must be longer than the renew deadline ({renew_deadline:?})"
    )]
    LeaseNotLongerThanDeadline {
        lease_duration: Duration,
        renew_deadline: Duration,
    },
    #[error(
        "the renew deadline ({renew_deadline:?}) must be longer than 1.2 retry periods ({retry_period:?})"
    )]
    DeadlineTooShort {
        renew_deadline: Duration,
        retry_period: Duration,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// The resourceVersion precondition failed, or the Lease was created meanwhile.
    #[error("conflict: the Lease changed since it was read")]
    Conflict,
    /// Any other failure of a Lease request: kube's error, with its causes.
    #[error("the Lease request failed")]
    Request(#[source] kube::Error),
}

/// The three calls leader election makes on its Lease (client-go's `resourcelock.Interface`).
pub trait LeaseStore: Send + Sync {
    /// The Lease's spec and resourceVersion, `None` when there is no Lease.
    fn get(&self) -> impl Future<Output = Result<Option<(LeaseSpec, String)>, LeaseError>> + Send;
    /// Creates the Lease; fails with a conflict when it exists.
    fn create(&self, spec: &LeaseSpec) -> impl Future<Output = Result<(), LeaseError>> + Send;
    /// Replaces the Lease's spec if its resourceVersion is still `version`.
    fn update(
        &self,
        spec: &LeaseSpec,
        version: &str,
    ) -> impl Future<Output = Result<(), LeaseError>> + Send;
}

/// The Lease in the cluster.
pub struct KubeLeaseStore {
    api: Api<Lease>,
    name: String,
    annotations: BTreeMap<String, String>,
    published: Option<watch::Receiver<BTreeMap<String, String>>>,
}

impl KubeLeaseStore {
    pub fn new(client: Client, namespace: &str, name: &str) -> Self {
        KubeLeaseStore {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            annotations: BTreeMap::new(),
            published: None,
        }
    }

    /// Writes `annotations` with every create and update (a release too: the last holder's
    /// word stays until the next one writes its own).
    pub fn annotated(mut self, annotations: BTreeMap<String, String>) -> Self {
        self.annotations = annotations;
        self
    }

    /// Writes what `published` holds at each write too.
    pub fn publishing(
        mut self,
        published: Option<watch::Receiver<BTreeMap<String, String>>>,
    ) -> Self {
        self.published = published;
        self
    }

    /// The annotations of the next write: the fixed ones and what is published now.
    fn annotations(&self) -> BTreeMap<String, String> {
        let mut all = self.annotations.clone();
        if let Some(published) = &self.published {
            all.extend(
                published
                    .borrow()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
        }
        all
    }

    fn lease(&self, spec: &LeaseSpec) -> Lease {
        let annotations = self.annotations();
        Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                annotations: (!annotations.is_empty()).then_some(annotations),
                ..ObjectMeta::default()
            },
            spec: Some(spec.clone()),
        }
    }
}

fn lease_error(e: kube::Error) -> LeaseError {
    match e {
        kube::Error::Api(s) if s.is_conflict() || s.code == 409 => LeaseError::Conflict,
        other => LeaseError::Request(other),
    }
}

impl LeaseStore for KubeLeaseStore {
    async fn get(&self) -> Result<Option<(LeaseSpec, String)>, LeaseError> {
        let lease = self.api.get_opt(&self.name).await.map_err(lease_error)?;
        Ok(lease.map(|l| {
            (
                l.spec.unwrap_or_default(),
                l.metadata.resource_version.unwrap_or_default(),
            )
        }))
    }

    async fn create(&self, spec: &LeaseSpec) -> Result<(), LeaseError> {
        self.api
            .create(&PostParams::default(), &self.lease(spec))
            .await
            .map(drop)
            .map_err(lease_error)
    }

    async fn update(&self, spec: &LeaseSpec, version: &str) -> Result<(), LeaseError> {
        // A merge patch of the spec with the resourceVersion read as its precondition: as
        // client-go's update, it fails with a conflict when someone wrote first, and it
        // leaves the Lease's labels and annotations alone, but for its own (a merge patch
        // replaces only the keys it names).
        let mut patch = serde_json::json!({
            "metadata": {"resourceVersion": version},
            "spec": spec,
        });
        let annotations = self.annotations();
        if !annotations.is_empty() {
            patch["metadata"]["annotations"] = serde_json::json!(annotations);
        }
        self.api
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
            .map_err(lease_error)
    }
}

/// What a term of leadership is handed: when to stop, and a flag that is `true` only while
/// this replica may act. Every write the task makes checks the flag first, so a leader that
/// lost its Lease stops writing at once, syncs in flight included. A clone is the same term:
/// the tasks of several controllers that lead together each take one.
#[derive(Clone)]
pub struct Term {
    pub stop: Stop,
    pub leading: Arc<AtomicBool>,
}

/// Resolves on shutdown or when leadership is lost, in every clone at once.
pub type Stop = Shared<std::pin::Pin<Box<dyn Future<Output = ()> + Send + Sync>>>;

/// The election's memory of the Lease: the record as last seen and when it was seen to change.
struct Elector<'a, S> {
    store: &'a S,
    settings: &'a LeaseSettings,
    observed: Option<(LeaseSpec, Instant)>,
}

fn holder(spec: &LeaseSpec) -> &str {
    spec.holder_identity.as_deref().unwrap_or("")
}

fn seconds(d: Duration) -> i32 {
    i32::try_from(d.as_secs()).unwrap_or(i32::MAX).max(1)
}

/// What one try to acquire or renew found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tried {
    /// This replica holds the Lease: it was free, expired or ours, and the write went through.
    Holds,
    /// Another replica holds the Lease (and, for a standby, it has not expired).
    HeldByAnother,
    /// The read or the write failed (a conflict included): the next try will tell.
    Failed,
}

impl<S: LeaseStore> Elector<'_, S> {
    /// client-go's `tryAcquireOrRenew`: takes the Lease if it is free, expired or ours, and
    /// says what it found.
    /// A leader (`leading`) never takes its Lease back from another replica: finding one
    /// there means someone took it, and it has lost it.
    async fn try_acquire_or_renew(&mut self, leading: bool) -> Tried {
        let me = self.settings.identity.as_str();
        let now = MicroTime(Timestamp::now());
        let mine = LeaseSpec {
            holder_identity: Some(me.to_owned()),
            lease_duration_seconds: Some(seconds(self.settings.lease_duration)),
            acquire_time: Some(now.clone()),
            renew_time: Some(now.clone()),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        };
        let (current, version) = match self.store.get().await {
            Ok(Some(found)) => found,
            Ok(None) => {
                let written = self.store.create(&mine).await;
                return self.wrote(mine, written, "creating the Lease");
            }
            Err(e) => {
                tracing::debug!(error = %e, "reading the Lease");
                return Tried::Failed;
            }
        };
        if self.observed.as_ref().map(|(spec, _)| spec) != Some(&current) {
            self.observed = Some((current.clone(), Instant::now()));
        }
        let held_by = holder(&current);
        if !held_by.is_empty() && held_by != me {
            if leading {
                return Tried::HeldByAnother;
            }
            let duration =
                Duration::from_secs(current.lease_duration_seconds.unwrap_or(0).max(0) as u64);
            let seen = self
                .observed
                .as_ref()
                .map_or_else(Instant::now, |(_, at)| *at);
            if seen + duration > Instant::now() {
                return Tried::HeldByAnother;
            }
        }
        let next = if held_by == me {
            LeaseSpec {
                acquire_time: current.acquire_time.clone(),
                lease_transitions: current.lease_transitions,
                ..mine
            }
        } else {
            LeaseSpec {
                lease_transitions: Some(current.lease_transitions.unwrap_or(0).saturating_add(1)),
                ..mine
            }
        };
        let written = self.store.update(&next, &version).await;
        self.wrote(next, written, "writing the Lease")
    }

    /// After a write of `spec`: whether it went through, remembered as the record last seen.
    fn wrote(&mut self, spec: LeaseSpec, written: Result<(), LeaseError>, what: &str) -> Tried {
        match written {
            Ok(()) => {
                self.observed = Some((spec, Instant::now()));
                Tried::Holds
            }
            Err(e) => {
                tracing::debug!(error = %e, "{what}");
                Tried::Failed
            }
        }
    }

    /// client-go's `release`: clears the holder and shortens the Lease to a second, so a
    /// standby takes it at its next try. Only a Lease still ours is touched.
    async fn release(&mut self) -> Result<(), LeaseError> {
        let (current, version) = match self.store.get().await? {
            Some(found) => found,
            None => return Ok(()),
        };
        if holder(&current) != self.settings.identity {
            return Ok(());
        }
        let now = MicroTime(Timestamp::now());
        let released = LeaseSpec {
            holder_identity: Some(String::new()),
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: current.lease_transitions,
            ..LeaseSpec::default()
        };
        self.store.update(&released, &version).await
    }
}

/// `period` shortened by up to a tenth, from the clock's low bits: replicas started together
/// drift apart, and no attempt comes later than `period` after the last.
fn jittered(period: Duration) -> Duration {
    let nanos = u64::from(Timestamp::now().subsec_nanosecond().unsigned_abs());
    period.mul_f64(1.0 - (nanos % 1000) as f64 / 10_000.0)
}

/// What changes in this replica's leadership, as [`lead`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leadership {
    /// It acquired the Lease and starts acting.
    Started,
    /// A renewal went through; the read and the write took `took`.
    Renewed { took: Duration },
    /// It stopped acting, for `reason`. The Lease was last renewed at `last_renewed`.
    Stopped {
        reason: StopReason,
        last_renewed: Instant,
    },
}

/// Why a leader stopped leading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// No renewal went through within the renew deadline: it stopped before its Lease could
    /// expire.
    RenewDeadline,
    /// Another replica holds the Lease: someone took it (an edit, a deletion and a faster
    /// replica). It stops at once rather than acting beside the new holder until its deadline.
    Conflict,
    /// It gave the Lease up: on shutdown, or because its task ended.
    Released,
}

impl StopReason {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            StopReason::RenewDeadline => "renew_deadline",
            StopReason::Conflict => "conflict",
            StopReason::Released => "released",
        }
    }
}

/// Runs `task` each time this replica becomes the leader, handing it a [`Term`]; returns once
/// `shutdown` has resolved, the task has stopped and the Lease is released. `observe` is told
/// every [`Leadership`] change: `Stopped` the moment the renew deadline passes or another
/// holder is seen, before the task has wound down.
pub async fn lead<S, T, F>(
    store: S,
    settings: LeaseSettings,
    shutdown: impl Future<Output = ()> + Send + 'static,
    observe: impl Fn(Leadership),
    mut task: T,
) -> Result<(), SettingsError>
where
    S: LeaseStore,
    T: FnMut(Term) -> F,
    F: Future<Output = ()>,
{
    settings.check()?;
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let stopping = || *stop_rx.borrow();
    let mut elector = Elector {
        store: &store,
        settings: &settings,
        observed: None,
    };
    let identity = settings.identity.as_str();
    loop {
        if !elector.stand_by(&stop_rx).await {
            return Ok(());
        }
        tracing::info!(identity, "acquired the Lease: leading");
        let leading = Arc::new(AtomicBool::new(true));
        observe(Leadership::Started);
        let (lost_tx, lost_rx) = watch::channel(false);
        let run = task(Term {
            stop: stop_or_lost(stop_rx.clone(), lost_rx),
            leading: leading.clone(),
        });
        tokio::pin!(run);
        let mut term = TermState {
            renewed: Instant::now(),
            task_done: false,
        };
        // Leading: renew every retry period until shutdown, the task's end, the deadline or
        // another holder. `lost` is why the Lease was lost, `None` when it is given up.
        let lost = loop {
            let deadline = term.renewed + settings.renew_deadline;
            match elector
                .renewal_round(&stop_rx, run.as_mut(), &mut term, deadline)
                .await
            {
                ControlFlow::Break(lost) => break lost,
                ControlFlow::Continue(Some(took)) => observe(Leadership::Renewed { took }),
                ControlFlow::Continue(None) => {}
            }
            if Instant::now() >= deadline {
                break Some(StopReason::RenewDeadline);
            }
        };
        if let Some(reason) = lost {
            lost_the_lease(&settings, &leading, &observe, reason, term.renewed);
        }
        let _ = lost_tx.send(true);
        if !term.task_done {
            drain(&settings, run.as_mut(), lost.is_some()).await;
        }
        leading.store(false, Ordering::SeqCst);
        if lost.is_none() {
            observe(Leadership::Stopped {
                reason: StopReason::Released,
                last_renewed: term.renewed,
            });
            elector.release_in_time().await;
        }
        if stopping() {
            return Ok(());
        }
    }
}

/// A term of leadership as it goes: when the Lease was last renewed, and whether the task has
/// returned (it is not polled again).
struct TermState {
    renewed: Instant,
    task_done: bool,
}

impl<S: LeaseStore> Elector<'_, S> {
    /// Standing by: a try every retry period, each given at most that long (a request hung on
    /// a dead connection must not hold back the next try). Whether the Lease was acquired;
    /// `false` on shutdown.
    async fn stand_by(&mut self, stop_rx: &watch::Receiver<bool>) -> bool {
        loop {
            let next_try = Instant::now() + jittered(self.settings.retry_period);
            let attempt = tokio::time::timeout_at(next_try, self.try_acquire_or_renew(false));
            let mut wait_stop = stop_rx.clone();
            tokio::select! {
                acquired = attempt => {
                    if acquired == Ok(Tried::Holds) {
                        return true;
                    }
                }
                _ = wait_stop.wait_for(|s| *s) => return false,
            }
            let mut wait_stop = stop_rx.clone();
            tokio::select! {
                () = tokio::time::sleep_until(next_try) => {}
                _ = wait_stop.wait_for(|s| *s) => return false,
            }
        }
    }

    /// One round of a leader's renewal: wait for the next try (at the latest the `deadline`),
    /// then renew, each watched beside shutdown and the task's end. `Break` ends the term
    /// (with why the Lease was lost, `None` when it is given up); `Continue` carries how long
    /// a renewal that went through took.
    async fn renewal_round<F: Future<Output = ()>>(
        &mut self,
        stop_rx: &watch::Receiver<bool>,
        mut run: Pin<&mut F>,
        term: &mut TermState,
        deadline: Instant,
    ) -> ControlFlow<Option<StopReason>, Option<Duration>> {
        let settings = self.settings;
        let identity = settings.identity.as_str();
        if *stop_rx.borrow() {
            return ControlFlow::Break(None);
        }
        let next_try = (Instant::now() + jittered(settings.retry_period)).min(deadline);
        let mut wait_stop = stop_rx.clone();
        tokio::select! {
            () = run.as_mut(), if !term.task_done => {
                term.task_done = true;
                tracing::warn!(identity, "the reconcile loop ended while leading");
                return ControlFlow::Break(None);
            }
            _ = wait_stop.wait_for(|s| *s) => return ControlFlow::Break(None),
            () = tokio::time::sleep_until(next_try) => {}
        }
        let give_up = (Instant::now() + settings.retry_period).min(deadline);
        let began = Instant::now();
        let renewal = tokio::time::timeout_at(give_up, self.try_acquire_or_renew(true));
        let mut wait_stop = stop_rx.clone();
        tokio::select! {
            _ = wait_stop.wait_for(|s| *s) => ControlFlow::Break(None),
            () = run.as_mut(), if !term.task_done => {
                term.task_done = true;
                tracing::warn!(identity, "the reconcile loop ended while leading");
                ControlFlow::Break(None)
            }
            r = renewal => match r {
                Ok(Tried::Holds) => {
                    term.renewed = Instant::now();
                    ControlFlow::Continue(Some(term.renewed - began))
                }
                Ok(Tried::HeldByAnother) => ControlFlow::Break(Some(StopReason::Conflict)),
                Ok(Tried::Failed) | Err(_) => ControlFlow::Continue(None),
            },
        }
    }

    /// Releases the Lease on giving it up, within the renew deadline.
    async fn release_in_time(&mut self) {
        let settings = self.settings;
        let identity = settings.identity.as_str();
        match tokio::time::timeout(settings.renew_deadline, self.release()).await {
            Ok(Ok(())) => tracing::info!(identity, "Lease released"),
            Ok(Err(e)) => tracing::warn!(identity, error = %e, "could not release the Lease"),
            Err(_) => tracing::warn!(identity, "releasing the Lease timed out"),
        }
    }
}

/// The Lease is lost (for `reason`): stop acting before anything else, as the flag fences
/// every write still to come; then say so.
fn lost_the_lease(
    settings: &LeaseSettings,
    leading: &AtomicBool,
    observe: &impl Fn(Leadership),
    reason: StopReason,
    last_renewed: Instant,
) {
    leading.store(false, Ordering::SeqCst);
    observe(Leadership::Stopped {
        reason,
        last_renewed,
    });
    let identity = settings.identity.as_str();
    match reason {
        StopReason::Conflict => {
            tracing::warn!(identity, "another replica holds the Lease: stopped leading")
        }
        _ => tracing::warn!(
            identity,
            renew_deadline = ?settings.renew_deadline,
            "could not renew the Lease within the renew deadline: stopped leading"
        ),
    }
}

/// The syncs in flight finish (once the Lease is lost their writes are refused); one stuck on
/// a dead connection is dropped rather than waited for, so that the Lease is released in time
/// on shutdown, and competing resumes after an outage.
async fn drain<F: Future<Output = ()>>(settings: &LeaseSettings, run: Pin<&mut F>, lost: bool) {
    let drain = if lost {
        settings.retry_period
    } else {
        settings.renew_deadline / 2
    };
    if tokio::time::timeout(drain, run).await.is_err() {
        tracing::warn!(
            identity = settings.identity.as_str(),
            ?drain,
            "the reconcile loop did not stop in time: dropped"
        );
    }
}

/// The Lease in the cluster, with the settings' namespace and name.
pub async fn lead_in_cluster<T, F>(
    client: Client,
    settings: LeaseSettings,
    shutdown: impl Future<Output = ()> + Send + 'static,
    observe: impl Fn(Leadership),
    task: T,
) -> Result<(), SettingsError>
where
    T: FnMut(Term) -> F,
    F: Future<Output = ()>,
{
    let store = KubeLeaseStore::new(client, &settings.namespace, &settings.name)
        .annotated(settings.annotations.clone())
        .publishing(settings.published.clone());
    lead(store, settings, shutdown, observe, task).await
}

/// kube-runtime wants a `Sync` future, so the waiting happens in a task and only a oneshot
/// receiver is handed over.
fn stop_or_lost(mut stop: watch::Receiver<bool>, mut lost: watch::Receiver<bool>) -> Stop {
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => {}
            _ = lost.wait_for(|l| *l) => {}
        }
        let _ = tx.send(());
    });
    let stop: std::pin::Pin<Box<dyn Future<Output = ()> + Send + Sync>> = Box::pin(async move {
        let _ = rx.await;
    });
    stop.shared()
}

#[cfg(test)]
mod tests;
