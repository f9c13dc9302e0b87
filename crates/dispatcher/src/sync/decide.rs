//! The plan for one Job, made under the reservations' lock: the room of each worker judged
//! for the Job when it is being placed, its turn in the fair order, and the worker chosen,
//! which takes its room (and counts against its team) at once.

use jobwarden_events::JobRef;
use serde_json::Value;

use crate::placement::RoomFit;
use crate::placement::reservations::Reservations;
use crate::plan::{self, JobView, Plan, Step, Waiting, WorkerState};
use crate::room::{Fit, PodShape, Reservation, pods_at_once};
use crate::shares::TeamId;
use crate::sync::fair::{Fair, Waiter};
use crate::sync::{Dispatcher, lock};
use crate::worker::link::{Changed, Link};

impl Dispatcher {
    /// The plan for the Job of team `team`; when `placing`, the room it would take judged,
    /// and its turn.
    pub(super) fn decide(
        &self,
        job: JobView<'_>,
        (job_ref, team): (&JobRef, TeamId),
        workers: &mut [WorkerState<'_>],
        placing: bool,
        now: k8s_openapi::jiff::Timestamp,
    ) -> Plan {
        let uid = job_ref.uid.as_str();
        let mut reservations = lock(&self.reservations);
        let mut fair = lock(&self.fair);
        let recorded = crate::copy::record::recorded(job.user);
        let finished = crate::copy::status::terminal_condition(job.user).is_some();
        if let Some(worker) = reservations.observe(uid, job.user, recorded, finished) {
            let _ = self.link_ctx.changes.send(Changed::Room(worker));
        }
        fair.observe(uid, team, job.user, recorded.is_some(), finished);
        // Only a Job not placed yet waits its turn; a Job that moves goes where it fits.
        let in_turn = placing && recorded.is_none() && !finished;
        if placing {
            self.judge_room(job.user, uid, workers, &reservations);
        }
        if in_turn {
            let eligible = eligible(workers, job.user)
                .map(|w| w.name.to_owned())
                .collect();
            fair.waiting(uid, team, job.user, eligible);
            let woken = fair.gate(uid, workers, |worker, ahead, waiter| {
                self.fits_now(worker, ahead, waiter, &reservations)
            });
            for (namespace, name) in woken {
                let _ = self
                    .link_ctx
                    .changes
                    .send(Changed::Turn { namespace, name });
            }
        }
        let plan = plan::plan(&self.settings, job, workers, now);
        if let Some(to) = chosen(&plan) {
            reservations.chose(uid, job.user, to);
            fair.chose(uid, team, job.user);
        } else if in_turn && matches!(plan.waiting, Some(Waiting::NoRoom { .. })) {
            self.hold_if_head(&mut fair, job.user, job_ref, workers, &reservations);
        }
        plan
    }

    /// Whether the Job's pods fit on each worker now, beside what the Jobs placed there hold.
    fn judge_room(
        &self,
        user: &Value,
        uid: &str,
        workers: &mut [WorkerState<'_>],
        reservations: &Reservations,
    ) {
        let shape = PodShape::of_job(user);
        let pods = pods_at_once(user);
        for worker in workers.iter_mut() {
            let Some(link) = self.link(worker.name) else {
                continue;
            };
            worker.room = match &shape {
                Err(e) => RoomFit::Short {
                    why: format!("its pod template cannot be judged: {e}"),
                    label: "unreadable",
                    never: true,
                },
                Ok(shape) => link
                    .view
                    .fit(shape, pods, reserved(link, uid, reservations)),
            };
        }
    }

    /// Whether a Job ahead in the order (`uid`, its pods `waiter`) fits on `worker` now.
    fn fits_now(
        &self,
        worker: &str,
        uid: &str,
        waiter: &Waiter,
        reservations: &Reservations,
    ) -> bool {
        self.link(worker).is_some_and(|link| {
            let reserved = reserved(link, uid, reservations);
            link.view.fit(&waiter.shape, waiter.pods, reserved) == RoomFit::Fits
        })
    }

    /// The head of the order fits nowhere now: room is held for it on the worker where it
    /// would fit soonest, among those that would take it but for room; said once per hold.
    fn hold_if_head(
        &self,
        fair: &mut Fair,
        user: &Value,
        job: &JobRef,
        workers: &[WorkerState<'_>],
        reservations: &Reservations,
    ) {
        let uid = job.uid.as_str();
        let Ok(shape) = PodShape::of_job(user) else {
            return;
        };
        let pods = pods_at_once(user);
        let candidates: Vec<(&str, Fit)> = eligible(workers, user)
            .filter_map(|w| {
                let link = self.link(w.name)?;
                let fit = link
                    .view
                    .fit_of(&shape, pods, reserved(link, uid, reservations))?;
                Some((w.name, fit))
            })
            .collect();
        if let Some((worker, short_of)) = fair.hold_if_head(uid, &candidates) {
            self.say(
                job,
                false,
                "RoomHeld",
                format!(
                    "room is held for the Job on worker {worker} ({}): it is the first in the fair order, and no later Job that asks for that takes it there until the Job is placed",
                    short_of.join(", ")
                ),
            );
        }
    }
}

/// The worker the plan chose, if it placed the Job.
fn chosen(plan: &Plan) -> Option<&str> {
    plan.steps.iter().find_map(|s| match s {
        Step::Record { to, .. } => Some(to.as_str()),
        _ => None,
    })
}

/// The workers the Job `user` may go to that would take it but for room.
fn eligible<'a, 'w>(
    workers: &'a [WorkerState<'w>],
    user: &Value,
) -> impl Iterator<Item = &'a WorkerState<'w>> {
    let named = crate::copy::record::named(user);
    workers
        .iter()
        .filter(move |w| waits_for_room_on(w) && named.names(w.name))
}

/// The worker would take the Job but for room (its room judged short, or kept by the order).
fn waits_for_room_on(w: &WorkerState<'_>) -> bool {
    w.ready
        && w.takes_namespace
        && !w.draining
        && (w.local || w.has_namespace == Some(true))
        && matches!(w.room, RoomFit::Short { never: false, .. } | RoomFit::Fits)
}

/// What the Jobs placed on the link's worker hold there, but the Job `uid`, with each one's
/// copy (whose pods seen there no longer need holding).
fn reserved(
    link: &Link,
    uid: &str,
    reservations: &Reservations,
) -> Vec<(Option<String>, Reservation)> {
    reservations
        .on(link.name(), uid)
        .map(|(held_uid, ns, name, r)| {
            // Its copy's pods (the Job's own, on this cluster).
            let copy = if link.is_local() {
                Some(held_uid.to_owned())
            } else {
                link.cached(ns, name).map(|c| c.uid().to_owned())
            };
            (copy, r)
        })
        .collect()
}
