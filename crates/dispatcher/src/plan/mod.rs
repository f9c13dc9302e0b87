//! The dispatcher's decision for one user's Job, as the Job controller's `plan` is for a Job:
//! `plan(settings, job, workers, now) -> Plan`, a pure function of what the caches show; the
//! executor carries the steps out in order and stops at the first that fails.
//!
//! The rules it keeps:
//! * **The record comes first.** A Job's worker is written on it (`jobwarden.io/worker`)
//!   before its copy is made there, and a copy found by its origin UID is adopted, so a
//!   restart or a change of leader never makes a second copy.
//! * **Only the recorded worker's copy** is mirrored onto the Job, is patched and may be
//!   deleted by this plan; copies elsewhere are the fence's (`fence`).
//! * **A Job whose copy exists on a worker that answers never moves.** A lost worker's Jobs
//!   keep their place for `workerLostSeconds`, counted from the time written on each Job
//!   (`jobwarden.io/worker-lost-since`), then follow their `jobwarden.io/on-worker-lost`.
//! * **The copy is deleted only once the Job shows how it ended**, and never before a
//!   TTL could take the Job: the copy carries none.
//! * **A Job goes only where its pods fit** (`room::fits`, judged by the caller into each
//!   worker's [`RoomFit`]), and **a copy that cannot be scheduled moves** (`moving`): the
//!   record is written first (with the worker it leaves in `jobwarden.io/moved-from`), then
//!   the old copy is deleted with its pods, then the new one made: never two copies at once.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use jobwarden_events::EventRecord;
use jobwarden_rules::well_known::{
    MAX_MOVES_ANNOTATION, ON_WORKER_DRAIN_ANNOTATION, ON_WORKER_LOST_ANNOTATION,
    REASON_DEADLINE_EXCEEDED, WORKER_LOST_SINCE_ANNOTATION,
};

use crate::copy;
use crate::copy::record::{self, OnWorkerDrain, OnWorkerLost};
use crate::copy::status::{self, Refused};
use crate::placement::moving::{self, CopyPods};
use crate::placement::{self, Placement, Reach, RoomFit, Unfit, WorkerFacts};

/// The reason of a Job the dispatcher fails because its worker was lost.
pub const REASON_WORKER_LOST: &str = "WorkerLost";

/// What the dispatcher runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The `jobwarden.io/origin` value of this cluster's copies.
    pub origin: String,
    /// How long a lost worker's Jobs keep their place.
    pub worker_lost: Duration,
    /// How long a copy may stay unschedulable before its Job moves (a Job's annotation
    /// overrides it).
    pub unschedulable: Duration,
}

/// One configured worker, as the dispatcher sees it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerState<'a> {
    pub name: &'a str,
    pub local: bool,
    pub reach: Reach,
    /// Its copies are listed since it last answered, and its stale copies deleted: it may be
    /// acted on. A worker that answers but is not ready is waited for.
    pub ready: bool,
    /// The policy lets it take Jobs of this Job's namespace.
    pub takes_namespace: bool,
    /// This Job's namespace exists there; `None` while not known.
    pub has_namespace: Option<bool>,
    /// The dispatcher's unfinished Jobs placed there.
    pub load: usize,
    /// Whether this Job's pods fit there now (judged only when the Job is being placed).
    pub room: RoomFit,
    /// The policy drains it: it takes no new Jobs.
    pub draining: bool,
}

/// One user's Job and what the caches hold of it.
#[derive(Debug, Clone, Copy)]
pub struct JobView<'a> {
    pub user: &'a Value,
    /// Its copy on the recorded worker, by origin UID.
    pub copy: Option<&'a Value>,
    /// Workers holding a copy of it (by origin UID), for a Job whose record is missing.
    pub copies_on: &'a [&'a str],
    /// Workers found unfit for it by trying (a Job of its name there that is not its copy).
    pub avoid: &'a [(&'a str, Unfit)],
    /// Its copy's pods, as the recorded worker's view shows them (`None`: not watched).
    pub copy_pods: Option<&'a CopyPods>,
}

/// Why a copy is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// The Job shows how its copy ended.
    Finished,
    /// The dispatcher failed the Job (its worker was lost, or its deadline passed).
    JobFailed,
    /// The user's Job is being deleted.
    JobDeleted,
    /// The copy could not be scheduled, and the Job moved.
    Moved,
    /// Its worker is draining, and the Job moved.
    Drained,
}

impl DeleteReason {
    pub const fn label(self) -> &'static str {
        match self {
            DeleteReason::Finished => "finished",
            DeleteReason::JobFailed => "job_failed",
            DeleteReason::JobDeleted => "job_deleted",
            DeleteReason::Moved => "unschedulable",
            DeleteReason::Drained => "drained",
        }
    }
}

/// One thing to do, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Write `jobwarden.io/worker: to` on the user's Job, replacing `replacing` (a test of the
    /// value it replaces keeps two writers from both winning), and remove the lost-since mark;
    /// with `moved_from`, write that as `jobwarden.io/moved-from` too.
    Record {
        to: String,
        replacing: Option<String>,
        moved_from: Option<String>,
    },
    /// Create `copy` on `worker`.
    Create {
        worker: String,
        copy: Value,
    },
    /// Patch the copy's spec.
    PatchCopy {
        worker: String,
        patch: json_patch::Patch,
    },
    /// Write the copy's status on the user's Job (a `jobs/status` merge patch).
    Mirror {
        worker: String,
        patch: Value,
    },
    DeleteCopy {
        worker: String,
        uid: String,
        reason: DeleteReason,
    },
    /// Write when the Job's worker was first seen lost.
    MarkLost {
        since: Timestamp,
    },
    /// The worker answers again: remove the mark.
    ClearLost,
    /// Fail the user's Job (a `jobs/status` merge patch).
    Fail {
        reason: &'static str,
        patch: Value,
    },
    Event(EventRecord),
}

/// Why a Job waits, for `explain`, the metrics and the one Event said per change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waiting {
    /// No worker can take it.
    NoWorker(String),
    /// Its worker is lost; it keeps its place until `until`.
    WorkerLost { worker: String, until: Timestamp },
    /// Its worker is lost and it waits for it (`Wait`).
    ForWorker { worker: String },
    /// Its worker is not in the policy: a replica that started with a file the worker had
    /// already left. Its copy may still run there, so nothing is done until it is back.
    NotInPolicy { worker: String },
    /// Its worker is being connected to, or its copies listed.
    Connecting { worker: String },
    /// No worker it may go to has room for its pods now; `key` is the workers and what they
    /// lack, without the figures (a new Event when it changes, not when a figure does).
    NoRoom { message: String, key: String },
    /// Its copy's pods cannot be scheduled on its worker.
    Unschedulable { worker: String, message: String },
    /// Its worker is draining and it would move, but no other worker can take it now.
    Draining { worker: String, message: String },
}

impl Waiting {
    /// The sentence an Event and `explain` say.
    pub fn message(&self) -> String {
        match self {
            Waiting::NoWorker(why) => why.clone(),
            Waiting::WorkerLost { worker, until } => format!(
                "worker {worker} does not answer; the Job keeps its place there until {until} (dispatch.workerLostSeconds), then follows {ON_WORKER_LOST_ANNOTATION}"
            ),
            Waiting::ForWorker { worker } => format!(
                "worker {worker} does not answer; the Job waits for it ({ON_WORKER_LOST_ANNOTATION}: Wait)"
            ),
            Waiting::NotInPolicy { worker } => format!(
                "worker {worker} is not in the policy: the Job keeps its place there, untouched (its copy may still run there), until the worker is back in dispatch.workers"
            ),
            Waiting::Connecting { worker } => {
                format!("waiting for worker {worker}'s copies to be listed")
            }
            Waiting::NoRoom { message, .. }
            | Waiting::Unschedulable { message, .. }
            | Waiting::Draining { message, .. } => message.clone(),
        }
    }

    /// Whether `other` waits for the same thing, for all that a figure in it may differ.
    pub fn same_reason(&self, other: &Waiting) -> bool {
        match (self, other) {
            (Waiting::NoRoom { key: a, .. }, Waiting::NoRoom { key: b, .. }) => a == b,
            (
                Waiting::Unschedulable { worker: a, .. },
                Waiting::Unschedulable { worker: b, .. },
            )
            | (Waiting::Draining { worker: a, .. }, Waiting::Draining { worker: b, .. }) => a == b,
            _ => self == other,
        }
    }

    pub fn reason(&self) -> &'static str {
        match self {
            Waiting::NoWorker(_) => "NoWorker",
            Waiting::WorkerLost { .. }
            | Waiting::ForWorker { .. }
            | Waiting::NotInPolicy { .. } => "WorkerLost",
            Waiting::Connecting { .. } => "Connecting",
            Waiting::NoRoom { .. } => "NoWorkerFits",
            Waiting::Unschedulable { .. } => "Unschedulable",
            Waiting::Draining { .. } => "WorkerDraining",
        }
    }
}

/// The decision for one Job.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub steps: Vec<Step>,
    pub waiting: Option<Waiting>,
    /// Look again at this time even if nothing changes (a lost worker's grace, a deadline).
    pub recheck_at: Option<Timestamp>,
    /// A mirror write the status rules refuse (a bug, or a worker at another version).
    pub refused: Option<Refused>,
}

impl Plan {
    fn step(mut self, step: Step) -> Plan {
        self.steps.push(step);
        self
    }

    fn waiting(mut self, waiting: Waiting) -> Plan {
        self.waiting = Some(waiting);
        self
    }
}

fn event(warning: bool, reason: &str, message: String) -> Step {
    Step::Event(EventRecord {
        warning,
        reason: reason.to_owned(),
        message,
    })
}

/// The decision for `job` among `workers` at `now`.
pub fn plan(
    settings: &Settings,
    job: JobView<'_>,
    workers: &[WorkerState<'_>],
    now: Timestamp,
) -> Plan {
    let user = job.user;
    let recorded = record::recorded(user);
    let worker = recorded.and_then(|r| workers.iter().find(|w| w.name == r));

    if user.pointer("/metadata/deletionTimestamp").is_some() {
        return match ready_copy(worker, job.copy) {
            Some((w, uid)) => Plan::default().step(delete(w, uid, DeleteReason::JobDeleted)),
            None => Plan::default(),
        };
    }
    if worker.is_some_and(|w| w.local) {
        // jobwarden's own Job controller runs it here.
        return Plan::default();
    }
    if let Some(ended) = status::terminal_condition(user) {
        return match ready_copy(worker, job.copy) {
            Some((w, uid)) => {
                let reason = match job.copy.and_then(status::terminal_condition) {
                    Some(copy_ended) if copy_ended == ended => DeleteReason::Finished,
                    // Still running, or ended otherwise: the Job was failed here.
                    _ => DeleteReason::JobFailed,
                };
                Plan::default().step(delete(w, uid, reason))
            }
            None => Plan::default(),
        };
    }
    let Some(recorded) = recorded else {
        return unrecorded(settings, job, workers, now);
    };
    if job.copy.is_none() && job.avoid.iter().any(|(w, _)| *w == recorded) {
        // Creating the copy there failed for good (a Job of its name that is not its copy, no
        // such namespace): no copy of it is there, so it may move.
        return place_and_create(settings, job, workers, &[], Some(recorded), None, now);
    }
    match worker {
        Some(w) if w.reach == Reach::Answers && w.ready => {
            on_answering(settings, job, w, workers, now)
        }
        Some(w) if w.reach == Reach::Answers || w.reach == Reach::Connecting => deadline_or(
            user,
            now,
            Plan::default().waiting(Waiting::Connecting {
                worker: recorded.to_owned(),
            }),
        ),
        // Lost or refused: the Job follows its choice once the grace ends.
        Some(_) => on_lost(settings, job, recorded, workers, now),
        // Not in the policy at all: a copy this replica knows nothing of may still run there,
        // and a second one is never made (every replica refuses a removal while a Job is
        // placed on the worker; one that started with the worker already gone did not know).
        None => deadline_or(
            user,
            now,
            Plan::default().waiting(Waiting::NotInPolicy {
                worker: recorded.to_owned(),
            }),
        ),
    }
}

/// The recorded worker's name and its copy's UID, when the worker may be acted on.
fn ready_copy<'a>(
    worker: Option<&WorkerState<'a>>,
    copy: Option<&'a Value>,
) -> Option<(&'a str, &'a str)> {
    let worker = worker.filter(|w| w.ready && w.reach == Reach::Answers)?;
    let uid = copy?.pointer("/metadata/uid")?.as_str()?;
    Some((worker.name, uid))
}

fn delete(worker: &str, uid: &str, reason: DeleteReason) -> Step {
    Step::DeleteCopy {
        worker: worker.to_owned(),
        uid: uid.to_owned(),
        reason,
    }
}

/// A Job without a record: adopt a copy found by its origin UID, or place it.
fn unrecorded(
    settings: &Settings,
    job: JobView<'_>,
    workers: &[WorkerState<'_>],
    now: Timestamp,
) -> Plan {
    // The record was lost (written over by someone) while a copy runs: adopt that copy.
    if let Some(found) = job.copies_on.iter().min() {
        return Plan::default().step(Step::Record {
            to: (*found).to_owned(),
            replacing: None,
            moved_from: None,
        });
    }
    place_and_create(settings, job, workers, &[], None, None, now)
}

/// Chooses a worker for the Job (leaving out `avoid`), records it (and `moved_from`), and
/// creates the copy.
fn place_and_create(
    settings: &Settings,
    job: JobView<'_>,
    workers: &[WorkerState<'_>],
    avoid: &[(&str, Unfit)],
    replacing: Option<&str>,
    moved_from: Option<String>,
    now: Timestamp,
) -> Plan {
    let user = job.user;
    let named = record::named(user);
    let facts: Vec<WorkerFacts<'_>> = workers
        .iter()
        .map(|w| WorkerFacts {
            name: w.name,
            // A worker whose copies are not listed yet cannot be told to hold no copy.
            reach: match &w.reach {
                Reach::Answers if !w.ready => Reach::Connecting,
                reach => reach.clone(),
            },
            takes_namespace: w.takes_namespace,
            has_namespace: if w.local { Some(true) } else { w.has_namespace },
            load: w.load,
            room: w.room.clone(),
            draining: w.draining,
        })
        .collect();
    let mut all_avoid: Vec<(&str, Unfit)> = job.avoid.to_vec();
    all_avoid.extend(avoid.iter().cloned());
    // The workers it left because it could not be scheduled there are not tried again.
    all_avoid.extend(
        record::moved_from(user)
            .into_iter()
            .map(|w| (w, Unfit::UnschedulableBefore)),
    );
    match placement::place(&named, &facts, &all_avoid) {
        Placement::To(to) => {
            let mut plan = Plan::default().step(Step::Record {
                to: to.to_owned(),
                replacing: replacing.map(str::to_owned),
                moved_from,
            });
            let local = workers.iter().any(|w| w.name == to && w.local);
            if !local {
                match copy::copy_of(user, &settings.origin, to) {
                    Ok(copy) => plan.steps.push(Step::Create {
                        worker: to.to_owned(),
                        copy,
                    }),
                    Err(e) => {
                        return Plan::default()
                            .waiting(Waiting::NoWorker(format!("the Job cannot be copied: {e}")));
                    }
                }
            }
            plan
        }
        Placement::Nowhere(reasons) => {
            let message = placement::nowhere_message(&named, &reasons);
            let waiting = if placement::waits_for_room(&reasons) {
                let key = reasons
                    .iter()
                    .filter(|(_, why)| *why != Unfit::NotNamed)
                    .map(|(w, why)| match why {
                        Unfit::NoRoom { label, .. } => format!("{w}={label}"),
                        other => format!("{w}={other}"),
                    })
                    .collect::<Vec<_>>()
                    .join(",");
                Waiting::NoRoom { message, key }
            } else {
                Waiting::NoWorker(message)
            };
            deadline_or(user, now, Plan::default().waiting(waiting))
        }
    }
}

/// The recorded worker answers and its copies are listed.
fn on_answering(
    settings: &Settings,
    job: JobView<'_>,
    worker: &WorkerState<'_>,
    workers: &[WorkerState<'_>],
    now: Timestamp,
) -> Plan {
    let user = job.user;
    let mut plan = Plan::default();
    if record::annotation(user, WORKER_LOST_SINCE_ANNOTATION).is_some() {
        plan.steps.push(Step::ClearLost);
        plan.steps.push(event(
            false,
            "WorkerAnswers",
            format!("worker {} answers again; the Job stays there", worker.name),
        ));
    }
    let Some(copy) = job.copy else {
        return remake_copy(settings, user, worker, now, plan);
    };
    if let Some(patch) = copy::spec_patch(user, copy) {
        plan.steps.push(Step::PatchCopy {
            worker: worker.name.to_owned(),
            patch,
        });
    }
    match status::mirror(user, copy) {
        Ok(Some(patch)) => plan.steps.push(Step::Mirror {
            worker: worker.name.to_owned(),
            patch,
        }),
        Ok(None) => {}
        Err(refused) => plan.refused = Some(refused),
    }
    if worker.draining && record::on_worker_drain(user) == OnWorkerDrain::Redispatch {
        return move_copy(
            settings,
            job,
            (copy, worker),
            workers,
            Move::Draining,
            now,
            plan,
        );
    }
    judge_move(settings, job, (copy, worker), workers, now, plan)
}

/// No copy yet where the Job is recorded: the record was written and the copy not made (a
/// restart between the two), or the copy was deleted on the worker by someone else: make it.
fn remake_copy(
    settings: &Settings,
    user: &Value,
    worker: &WorkerState<'_>,
    now: Timestamp,
    mut plan: Plan,
) -> Plan {
    let Ok(copy) = copy::copy_of(user, &settings.origin, worker.name) else {
        return plan;
    };
    if has_run(user) {
        plan.steps.push(event(
            true,
            "CopyMissing",
            format!(
                "the Job's copy on worker {} is gone; making it again",
                worker.name
            ),
        ));
    }
    plan.steps.push(Step::Create {
        worker: worker.name.to_owned(),
        copy,
    });
    deadline_or(user, now, plan)
}

/// Whether the copy's pods that cannot be scheduled make the Job move now, later, or never.
fn judge_move(
    settings: &Settings,
    job: JobView<'_>,
    (copy, worker): (&Value, &WorkerState<'_>),
    workers: &[WorkerState<'_>],
    now: Timestamp,
    mut plan: Plan,
) -> Plan {
    let user = job.user;
    match moving::judge(user, copy, job.copy_pods, settings.unschedulable, now) {
        moving::Verdict::Stays => plan,
        moving::Verdict::Unschedulable { at, message } => {
            plan.recheck_at = Some(at);
            plan.waiting(Waiting::Unschedulable {
                worker: worker.name.to_owned(),
                message: format!(
                    "the Job's copy on worker {} cannot be scheduled ({message}); the Job moves at {at} unless one of its pods is bound by then",
                    worker.name
                ),
            })
        }
        moving::Verdict::StaysMovedEnough { moves, message } => {
            plan.waiting(Waiting::Unschedulable {
                worker: worker.name.to_owned(),
                message: format!(
                    "the Job's copy on worker {} cannot be scheduled ({message}); the Job has moved {moves} times ({MAX_MOVES_ANNOTATION}) and stays",
                    worker.name
                ),
            })
        }
        moving::Verdict::Moves { for_, message } => move_copy(
            settings,
            job,
            (copy, worker),
            workers,
            Move::Unschedulable {
                for_,
                message: &message,
            },
            now,
            plan,
        ),
    }
}

/// Why a copy moves off a worker that answers.
#[derive(Debug, Clone, Copy)]
enum Move<'m> {
    /// Its pods could not be scheduled there for `for_` (the scheduler's `message`).
    Unschedulable { for_: Duration, message: &'m str },
    /// The worker is draining, and the Job says `jobwarden.io/on-worker-drain: Redispatch`.
    Draining,
}

impl Move<'_> {
    /// Why the Job waits on `from` when no other worker can take it (`nowhere` says why not).
    fn waiting(self, from: &str, nowhere: &str) -> Waiting {
        match self {
            Move::Unschedulable { for_, message } => Waiting::Unschedulable {
                worker: from.to_owned(),
                message: format!(
                    "the Job's copy on worker {from} could not be scheduled for {}s ({message}), and no other worker can take the Job now: {nowhere}",
                    for_.as_secs()
                ),
            },
            Move::Draining => Waiting::Draining {
                worker: from.to_owned(),
                message: format!(
                    "worker {from} is draining and the Job would move ({ON_WORKER_DRAIN_ANNOTATION}: Redispatch), but no other worker can take it now: {nowhere}"
                ),
            },
        }
    }

    /// The Event's reason and text once the Job moved from `from` to `to`.
    fn moved(self, from: &str, to: &str) -> (&'static str, String) {
        match self {
            Move::Unschedulable { for_, message } => (
                "Moved",
                format!(
                    "the Job's copy on worker {from} could not be scheduled for {}s ({message}); the Job moved to worker {to}",
                    for_.as_secs()
                ),
            ),
            Move::Draining => (
                "Redispatched",
                format!(
                    "worker {from} is draining; the Job moved to worker {to} ({ON_WORKER_DRAIN_ANNOTATION}: Redispatch)"
                ),
            ),
        }
    }
}

/// The copy on `worker` goes: the Job goes elsewhere if another worker can take it (the
/// record first, then the old copy deleted with its pods, then the new one made: one copy at
/// a time), else it stays there and says why.
fn move_copy(
    settings: &Settings,
    job: JobView<'_>,
    (copy, worker): (&Value, &WorkerState<'_>),
    workers: &[WorkerState<'_>],
    why: Move<'_>,
    now: Timestamp,
    mirrored: Plan,
) -> Plan {
    let from = worker.name;
    let (avoid, moved_from, deleted) = match why {
        Move::Unschedulable { .. } => {
            let mut left: Vec<&str> = record::moved_from(job.user);
            left.push(from);
            (
                Unfit::UnschedulableBefore,
                Some(left.join(",")),
                DeleteReason::Moved,
            )
        }
        Move::Draining => (Unfit::Draining, None, DeleteReason::Drained),
    };
    let moved = place_and_create(
        settings,
        job,
        workers,
        &[(from, avoid)],
        Some(from),
        moved_from,
        now,
    );
    let Some(Step::Record { to, .. }) = moved.steps.first() else {
        let nowhere = moved
            .waiting
            .as_ref()
            .map(Waiting::message)
            .unwrap_or_default();
        return mirrored.waiting(why.waiting(from, &nowhere));
    };
    let (reason, event_text) = why.moved(from, to);
    let mut plan = Plan {
        refused: mirrored.refused,
        ..Plan::default()
    };
    // The old copy's last status first: the Job keeps its first startTime.
    plan.steps.extend(
        mirrored
            .steps
            .into_iter()
            .filter(|s| matches!(s, Step::Mirror { .. })),
    );
    let mut steps = moved.steps.into_iter();
    plan.steps.extend(steps.next());
    if let Some(uid) = copy.pointer("/metadata/uid").and_then(Value::as_str) {
        plan.steps.push(delete(from, uid, deleted));
    }
    plan.steps.extend(steps);
    plan.steps.push(event(true, reason, event_text));
    plan
}

/// Whether the user's Job shows a copy ran (a start, a counted pod, a condition).
fn has_run(user: &Value) -> bool {
    let status = user.get("status");
    let set = |k: &str| status.and_then(|s| s.get(k)).is_some_and(|v| !v.is_null());
    ["startTime", "succeeded", "failed", "conditions"]
        .iter()
        .any(|k| set(k))
}

/// The recorded worker is lost (or refused).
fn on_lost(
    settings: &Settings,
    job: JobView<'_>,
    worker: &str,
    workers: &[WorkerState<'_>],
    now: Timestamp,
) -> Plan {
    let user = job.user;
    let written = record::lost_since(user);
    let since = written.unwrap_or(now);
    let until = since
        .checked_add(settings.worker_lost)
        .unwrap_or(Timestamp::MAX);
    let mut plan = Plan::default();
    if written.is_none() {
        plan.steps.push(Step::MarkLost { since });
        plan.steps.push(event(
            true,
            "WorkerLost",
            format!(
                "worker {worker} does not answer; the Job keeps its place there until {until} (dispatch.workerLostSeconds)"
            ),
        ));
    }
    if now < until {
        plan.recheck_at = Some(until);
        return deadline_or(
            user,
            now,
            plan.waiting(Waiting::WorkerLost {
                worker: worker.to_owned(),
                until,
            }),
        );
    }
    match record::on_worker_lost(user) {
        OnWorkerLost::Wait => deadline_or(
            user,
            now,
            plan.waiting(Waiting::ForWorker {
                worker: worker.to_owned(),
            }),
        ),
        OnWorkerLost::Fail => {
            let message = format!(
                "worker {worker} did not answer for {}s (dispatch.workerLostSeconds); {ON_WORKER_LOST_ANNOTATION} is Fail",
                settings.worker_lost.as_secs()
            );
            fail(user, REASON_WORKER_LOST, &message, now, plan)
        }
        OnWorkerLost::Redispatch => {
            // Past the grace the mark is written: `plan` holds no step, only what it waits for.
            let mut moved = place_and_create(
                settings,
                job,
                workers,
                &[(worker, Unfit::LostBefore)],
                Some(worker),
                None,
                now,
            );
            if let Some(Step::Record { to, .. }) = moved.steps.first() {
                let message = format!(
                    "worker {worker} did not answer since {since}; the Job moved to worker {to}"
                );
                moved.steps.push(event(true, "Redispatched", message));
            }
            moved
        }
    }
}

/// `plan`, unless the Job's `activeDeadlineSeconds` passed before any copy of it started: then
/// it fails with `DeadlineExceeded`, as upstream's controller fails a Job that never ran in
/// time. The deadline counts from the Job's creation, as no copy ever started it (a suspended
/// Job's deadline does not run).
fn deadline_or(user: &Value, now: Timestamp, plan: Plan) -> Plan {
    let started = user
        .pointer("/status/startTime")
        .is_some_and(|v| !v.is_null());
    let suspended = user.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
    let deadline = user
        .pointer("/spec/activeDeadlineSeconds")
        .and_then(Value::as_i64)
        .and_then(|s| u64::try_from(s).ok());
    let created = user
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<Timestamp>().ok());
    let (false, false, Some(seconds), Some(created)) = (started, suspended, deadline, created)
    else {
        return plan;
    };
    let Some(ends) = created.checked_add(Duration::from_secs(seconds)).ok() else {
        return plan;
    };
    if now < ends {
        let mut plan = plan;
        plan.recheck_at = Some(plan.recheck_at.map_or(ends, |at| at.min(ends)));
        return plan;
    }
    fail(
        user,
        REASON_DEADLINE_EXCEEDED,
        "Job was active longer than specified deadline",
        now,
        plan,
    )
}

/// Fails the Job with `reason`; what `plan` said before stays (the marks), its waiting goes.
fn fail(user: &Value, reason: &'static str, message: &str, now: Timestamp, plan: Plan) -> Plan {
    let mut plan = plan;
    plan.waiting = None;
    plan.recheck_at = None;
    match status::failed(user, reason, message, now) {
        Ok(Some(patch)) => {
            plan.steps.push(Step::Fail { reason, patch });
            plan.steps.push(event(true, reason, message.to_owned()));
        }
        Ok(None) => {}
        Err(refused) => plan.refused = Some(refused),
    }
    plan
}

#[cfg(test)]
mod tests;
