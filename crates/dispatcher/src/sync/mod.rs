//! One sync of one user's Job: what the caches show gathered into the plan's view, the plan
//! made, and its steps carried out in order (the executor), stopping at the first that fails.
//! Short on purpose: every decision is `plan`'s.

mod carry_out;
mod decide;
pub mod fair;
mod hold_back;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use jobwarden_events::{EventRecord, JobRef};
use jobwarden_runtime::events::limiter::EventLimiter;
use jobwarden_runtime::events::outbox::EventOutbox;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::api::{self, ApiError};
use crate::copy;
use crate::metrics::DispatchMetrics;
use crate::placement::loads::Loads;
use crate::placement::moving::{self, CopyPods};
use crate::placement::reservations::Reservations;
use crate::placement::{Reach, RoomFit, Unfit};
use crate::plan::{JobView, Settings, Step, Waiting, WorkerState};
use crate::worker::link::Link;
use crate::worker::namespace_labels::{Labels, NamespaceLabels};
use jobwarden_runtime::job_cache::CachedJob;

/// Look at every dispatched Job at least this often.
pub const RESYNC: Duration = Duration::from_secs(300);

/// Why a sync stopped.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("writing to the API server")]
    Api(#[from] ApiError),
    #[error("worker {0} is not connected")]
    NotConnected(String),
}

impl SyncError {
    pub fn is_conflict(&self) -> bool {
        matches!(self, SyncError::Api(ApiError::Conflict))
    }
}

/// What a sync leads to: when to look again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub requeue_after: Duration,
}

/// Everything a sync reads and writes through.
pub struct Dispatcher {
    pub settings: Settings,
    pub links: Vec<Arc<Link>>,
    pub management: api::Management,
    pub metrics: DispatchMetrics,
    pub namespace_labels: NamespaceLabels,
    pub loads: Mutex<Loads>,
    /// The room each placed Job holds until its pods are seen; its lock is held while a Job is
    /// judged and its choice taken, so two placements never take the same room.
    pub reservations: Mutex<Reservations>,
    /// The fair order between teams (`dispatch.shares`); locked after `reservations`, never
    /// before.
    pub fair: Mutex<fair::Fair>,
    /// Workers found unfit for a Job by trying, by the Job's UID.
    pub avoid: Mutex<HashMap<String, Vec<(String, Unfit)>>>,
    /// What each waiting Job was last said to wait for (one Event per change), and since
    /// when it waits for that reason.
    pub waiting: Mutex<HashMap<String, (Waiting, Instant)>>,
    /// When a copy's change arrived and is not yet mirrored, by `ns/name`.
    pub pending: Arc<Mutex<HashMap<String, Instant>>>,
    /// Where syncs leave their Events; a writer task sends them within the budget.
    pub events: EventOutbox,
    /// What the workers' links share: the fence's reads and deletions go through it.
    pub link_ctx: Arc<crate::worker::link::LinkContext>,
    /// Upstream's per-object spam filter.
    pub limiter: Mutex<EventLimiter>,
    /// The placements under way, at most half the syncs.
    pub placing: Arc<
        crate::placement::placing_lane::PlacingLane<kube::runtime::reflector::ObjectRef<CachedJob>>,
    >,
    /// The management client's budget, seen (published on the Lease for doctor).
    pub management_budget: Option<jobwarden_runtime::client::BudgetSeen>,
}

/// What [`Dispatcher::gather`] found of a Job on the workers.
struct Gathered {
    recorded: Option<String>,
    copy: Option<Value>,
    copies_on: Vec<String>,
    avoid_owned: Vec<(String, Unfit)>,
    copy_pods: Option<CopyPods>,
    placing: bool,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn resource_version(job: &Value) -> &str {
    job.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
}

impl Dispatcher {
    pub fn link(&self, name: &str) -> Option<&Arc<Link>> {
        self.links.iter().find(|l| l.name() == name)
    }

    pub(crate) fn say(&self, job: &JobRef, warning: bool, reason: &str, message: String) {
        let record = EventRecord {
            warning,
            reason: reason.to_owned(),
            message,
        };
        let now = Timestamp::now();
        match lock(&self.limiter).admit(&job.uid, record, now) {
            Some(record) => self.events.push(job, vec![record], now),
            None => self.events.dropped("rate_limited", 1),
        }
    }

    /// Syncs the user's Job `job` at `now`.
    pub async fn sync(&self, job: &CachedJob, now: Timestamp) -> Result<Outcome, SyncError> {
        let started = Instant::now();
        let result = self.sync_inner(job, now).await;
        self.metrics
            .sync_duration
            .observe(started.elapsed().as_secs_f64());
        self.metrics.synced(match &result {
            Ok(_) => "success",
            Err(e) if e.is_conflict() => "conflict",
            Err(_) => "error",
        });
        result
    }

    async fn sync_inner(&self, job: &CachedJob, now: Timestamp) -> Result<Outcome, SyncError> {
        let user = job.value();
        let (ns, name, uid) = (job.namespace(), job.name(), job.uid());
        let Gathered {
            recorded,
            copy,
            copies_on,
            avoid_owned,
            copy_pods,
            placing,
        } = self.gather(&user, ns, name, uid, now);
        let avoid: Vec<(&str, Unfit)> = avoid_owned
            .iter()
            .map(|(w, why)| (w.as_str(), why.clone()))
            .collect();
        let copies_on: Vec<&str> = copies_on.iter().map(String::as_str).collect();
        let labels = self.namespace_labels.get(ns).await;
        let team = lock(&self.fair).shares.teams().team_of(ns, labels.as_ref());
        let mut workers = self.worker_states(ns, labels.as_ref(), placing).await;
        let view = JobView {
            user: &user,
            copy: copy.as_ref(),
            copies_on: &copies_on,
            avoid: &avoid,
            copy_pods: copy_pods.as_ref(),
        };
        let job_ref = JobRef {
            namespace: ns.to_owned(),
            name: name.to_owned(),
            uid: uid.to_owned(),
        };
        let plan = self.decide(view, (&job_ref, team), &mut workers, placing, now);
        self.note_waiting(&job_ref, plan.waiting.as_ref());
        if let Some(refused) = &plan.refused {
            self.metrics.mirrored("refused");
            tracing::error!(namespace = ns, job = name, error = %refused, "the copy's status breaks the Job status rules; not written");
        }
        if let Some(wait) = self.held_back(ns, name, copy.as_ref(), &plan.steps) {
            self.metrics.mirrored("held");
            return Ok(Outcome {
                requeue_after: wait,
            });
        }
        let mirrors = plan.steps.iter().any(|s| matches!(s, Step::Mirror { .. }));
        // The record as this sync leaves it.
        let recorded = plan
            .steps
            .iter()
            .rev()
            .find_map(|s| match s {
                Step::Record { to, .. } => Some(to.clone()),
                _ => None,
            })
            .or(recorded);
        let requeue_after = plan
            .recheck_at
            .and_then(|at| at.duration_since(now).try_into().ok())
            .map_or(RESYNC, |d: Duration| d.min(RESYNC));
        let outcome = self.carry_out(&job_ref, user, plan).await?;
        if let Some(recorded) = recorded.as_deref() {
            self.fence_elsewhere(&job_ref, recorded).await;
        }
        if !mirrors {
            // The change that woke this sync needed no mirror: nothing is pending.
            lock(&self.pending).remove(&format!("{ns}/{name}"));
        }
        Ok(outcome.unwrap_or(Outcome { requeue_after }))
    }

    /// How long the plan's mirror of the copy's passing state waits for the next one
    /// (`hold_back`).
    fn held_back(
        &self,
        ns: &str,
        name: &str,
        copy: Option<&Value>,
        steps: &[Step],
    ) -> Option<Duration> {
        let arrived = lock(&self.pending)
            .get(&format!("{ns}/{name}"))
            .map(Instant::elapsed);
        hold_back::held_back(
            steps,
            copy.is_some_and(|c| copy::status::terminal_condition(c).is_some()),
            arrived,
        )
    }

    /// What the workers hold of the Job: its copy where it is recorded (or, not recorded,
    /// the workers with a copy), the workers to avoid, the copy's pods, and whether it is
    /// being placed (not yet, or again: its copy moves or leaves a draining worker).
    fn gather(&self, user: &Value, ns: &str, name: &str, uid: &str, now: Timestamp) -> Gathered {
        let origin = &self.settings.origin;
        let recorded = crate::copy::record::recorded(user).map(str::to_owned);
        let copy_on = |link: &Link| {
            link.cached(ns, name)
                .map(|c| c.value())
                .filter(|c| copy::is_copy_of(c, uid, origin))
        };
        let copy = recorded
            .as_deref()
            .and_then(|r| self.link(r))
            .filter(|l| !l.is_local())
            .and_then(|l| copy_on(l));
        let copies_on: Vec<String> = if recorded.is_none() {
            self.links
                .iter()
                .filter(|l| !l.is_local() && l.is_ready() && copy_on(l).is_some())
                .map(|l| l.name().to_owned())
                .collect()
        } else {
            Vec::new()
        };
        let avoid_owned: Vec<(String, Unfit)> =
            lock(&self.avoid).get(uid).cloned().unwrap_or_default();
        let copy_pods: Option<CopyPods> = copy.as_ref().and_then(|c| {
            let link = self.link(recorded.as_deref()?)?;
            link.view
                .copy_pods(c.pointer("/metadata/uid").and_then(Value::as_str)?)
        });
        let move_due = copy.as_ref().is_some_and(|c| {
            matches!(
                moving::judge(
                    user,
                    c,
                    copy_pods.as_ref(),
                    self.settings.unschedulable,
                    now
                ),
                moving::Verdict::Moves { .. }
            )
        });
        // Leaving a draining worker is placing too: the others' namespaces and room are judged.
        let drain_move = recorded
            .as_deref()
            .and_then(|r| self.link(r))
            .is_some_and(|l| l.spec.draining)
            && crate::copy::record::on_worker_drain(user)
                == crate::copy::record::OnWorkerDrain::Redispatch;
        let placing = move_due
            || drain_move
            || match recorded.as_deref().and_then(|r| self.link(r)) {
                None => true,
                Some(l) => !l.is_ready() || avoid_owned.iter().any(|(w, _)| w == l.name()),
            };
        Gathered {
            recorded,
            copy,
            copies_on,
            avoid_owned,
            copy_pods,
            placing,
        }
    }

    /// What each worker is for this Job. Whether it has the Job's namespace is asked only when
    /// the Job is being placed.
    async fn worker_states(
        &self,
        ns: &str,
        labels: Option<&Labels>,
        placing: bool,
    ) -> Vec<WorkerState<'_>> {
        let loads: Vec<usize> = {
            let loads = lock(&self.loads);
            self.links.iter().map(|l| loads.load(l.name())).collect()
        };
        let mut states = Vec::with_capacity(self.links.len());
        for (link, load) in self.links.iter().zip(loads) {
            let reach = link.reach();
            let takes_namespace =
                link.namespaces().is_empty() || link.namespaces().matches(ns, labels);
            let has_namespace = if placing && takes_namespace && reach == Reach::Answers {
                link.has_namespace(ns).await
            } else {
                None
            };
            states.push(WorkerState {
                name: link.name(),
                local: link.is_local(),
                ready: link.is_ready(),
                reach,
                takes_namespace,
                has_namespace,
                load,
                room: RoomFit::Fits,
                draining: link.spec.draining,
            });
        }
        states
    }

    /// Says the Job waits, once per change of what it waits for, and counts it.
    fn note_waiting(&self, job: &JobRef, waiting: Option<&Waiting>) {
        let mut all = lock(&self.waiting);
        let before = all.get(&job.uid);
        let changed = match (before, waiting) {
            (Some((b, _)), Some(w)) => !b.same_reason(w),
            (None, None) => false,
            _ => true,
        };
        match waiting {
            Some(w) => {
                let since = before
                    .filter(|(b, _)| b.reason() == w.reason())
                    .map_or_else(Instant::now, |(_, since)| *since);
                all.insert(job.uid.clone(), (w.clone(), since));
            }
            None => {
                all.remove(&job.uid);
            }
        }
        if changed && let Some(w) = waiting {
            // The lost worker's own Event is the plan's (it carries its clock); a worker being
            // connected to is a moment's wait at start, not news.
            if !matches!(w, Waiting::WorkerLost { .. } | Waiting::Connecting { .. }) {
                self.say(job, true, w.reason(), w.message());
            }
        }
        count_waiting(&self.metrics, &all);
    }

    /// A copy of the Job on another worker than the recorded one (its record was changed by
    /// hand, or it moved while that worker seemed lost) goes now, not at the collector's next
    /// pass, once a fresh read of the Job confirms it moved: never two copies that both run.
    async fn fence_elsewhere(&self, job: &JobRef, recorded: &str) {
        for link in &self.links {
            if link.name() == recorded || link.is_local() || !link.is_ready() {
                continue;
            }
            let (Some(api), Some(copy)) = (
                link.api(),
                link.cached(&job.namespace, &job.name)
                    .map(|c| c.value())
                    .filter(|c| copy::is_copy_of(c, &job.uid, &self.settings.origin)),
            ) else {
                continue;
            };
            match crate::worker::link::collect(&self.link_ctx, link.name(), &api, &copy).await {
                Ok(Some(verdict)) => self.say(
                    job,
                    false,
                    "CopyDeleted",
                    format!(
                        "Deleted the Job's copy on worker {} ({})",
                        link.name(),
                        verdict.label()
                    ),
                ),
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(worker = link.name(), %error, "deleting a copy of a Job that moved");
                }
            }
        }
    }

    pub(crate) fn unfit(&self, job: &JobRef, worker: &str, why: Unfit) {
        let mut avoid = lock(&self.avoid);
        let list = avoid.entry(job.uid.clone()).or_default();
        list.retain(|(w, _)| w != worker);
        list.push((worker.to_owned(), why));
    }

    /// The Job is gone: forget what was kept of it.
    pub fn forget(&self, uid: &str) {
        lock(&self.avoid).remove(uid);
        lock(&self.limiter).forget(uid);
        lock(&self.loads).forget(uid);
        let _ = lock(&self.reservations).forget(uid);
        lock(&self.fair).forget(uid);
        let mut waiting = lock(&self.waiting);
        if waiting.remove(uid).is_some() {
            count_waiting(&self.metrics, &waiting);
        }
    }
}

/// The waiting Jobs counted by reason, and the oldest one's wait per reason.
pub fn count_waiting(metrics: &DispatchMetrics, all: &HashMap<String, (Waiting, Instant)>) {
    for reason in crate::metrics::WAITING_REASONS {
        let of_reason = all.values().filter(|(w, _)| w.reason() == reason);
        metrics.set_waiting(reason, of_reason.clone().count());
        let oldest = of_reason
            .map(|(_, since)| since.elapsed().as_secs_f64())
            .fold(0.0, f64::max);
        metrics.set_oldest_waiting(reason, oldest);
    }
}
