//! Lost workers from the dispatcher's point of view: the marks `jobwarden.io/worker-lost-since`
//! it writes on each Job placed on a worker that stopped answering. For each such worker: since
//! when, until when its Jobs keep their place (`dispatch.workerLostSeconds` from each mark),
//! and what each will then do (its `jobwarden.io/on-worker-lost`). Pure.

use std::collections::BTreeMap;
use std::time::Duration;

use jobwarden_dispatcher::copy::record::OnWorkerLost;
use jobwarden_rules::seconds;
use k8s_openapi::jiff::Timestamp;

use super::jobs::DispatchedJob;
use crate::catalogue::LOST_WORKERS;
use crate::check::Check;

fn plus(t: Timestamp, grace: Duration) -> Timestamp {
    t.checked_add(grace).unwrap_or(Timestamp::MAX)
}

fn ago(now: Timestamp, t: Timestamp) -> String {
    let secs = Duration::try_from(now.duration_since(t)).map_or(0, |d| d.as_secs());
    format!("{} ago", seconds::format(secs))
}

fn choice(c: OnWorkerLost) -> &'static str {
    match c {
        OnWorkerLost::Redispatch => "Redispatch",
        OnWorkerLost::Wait => "Wait",
        OnWorkerLost::Fail => "Fail",
    }
}

/// `2 Redispatch, 1 Wait`, in the order of [`OnWorkerLost::VALUES`].
fn choices(jobs: &[&DispatchedJob]) -> String {
    let mut parts = Vec::new();
    for c in [
        OnWorkerLost::Redispatch,
        OnWorkerLost::Wait,
        OnWorkerLost::Fail,
    ] {
        let n = jobs.iter().filter(|j| j.on_worker_lost == c).count();
        if n > 0 {
            parts.push(format!("{n} {}", choice(c)));
        }
    }
    parts.join(", ")
}

fn jobs_word(n: usize) -> String {
    format!("{n} Job{}", if n == 1 { "" } else { "s" })
}

/// One check per worker some Job is marked lost on; one passing check when none is.
pub fn lost_workers(
    jobs: &Result<Vec<DispatchedJob>, String>,
    grace: Duration,
    configured: &[&str],
    now: Timestamp,
) -> Vec<Check> {
    let jobs = match jobs {
        Ok(jobs) => jobs,
        Err(e) => {
            return vec![LOST_WORKERS.cannot_tell(
                format!("cannot list the dispatched Jobs for their lost-worker marks: {e}"),
                "doctor reads the marks on the Jobs, which needs list on jobs (batch) in every namespace",
            )];
        }
    };
    let mut by_worker: BTreeMap<&str, Vec<&DispatchedJob>> = BTreeMap::new();
    for job in jobs.iter().filter(|j| j.lost_since.is_some()) {
        if let Some(worker) = job.worker.as_deref() {
            by_worker.entry(worker).or_default().push(job);
        }
    }
    if by_worker.is_empty() {
        return vec![LOST_WORKERS.ok(format!(
            "no dispatched Job is marked as placed on a lost worker ({} not finished)",
            jobs_word(jobs.len())
        ))];
    }
    by_worker
        .into_iter()
        .map(|(worker, marked)| lost_worker(worker, &marked, grace, configured, now))
        .collect()
}

/// The check of one worker the Jobs `marked` are marked lost on.
fn lost_worker(
    worker: &str,
    marked: &[&DispatchedJob],
    grace: Duration,
    configured: &[&str],
    now: Timestamp,
) -> Check {
    let since: Vec<Timestamp> = marked.iter().filter_map(|j| j.lost_since).collect();
    let first = since.iter().min().copied().unwrap_or(now);
    let until = |j: &DispatchedJob| plus(j.lost_since.unwrap_or(now), grace);
    let (keeping, past): (Vec<&DispatchedJob>, Vec<&DispatchedJob>) =
        marked.iter().partition(|j| now < until(j));
    let mut said = format!(
        "worker {worker} lost since {first:.0} ({}){}",
        ago(now, first),
        if configured.contains(&worker) {
            ""
        } else {
            ", and no longer in the policy"
        }
    );
    if !keeping.is_empty() {
        said += &keeping_place(&keeping, until, now);
    }
    if !past.is_empty() {
        said += &format!(
            "{} {}",
            if keeping.is_empty() { ":" } else { ";" },
            past_grace(&past)
        );
    }
    LOST_WORKERS.warning(
        said,
        format!(
            "the dispatcher gets no answer from worker {worker} with its credentials (the worker's checks above say what doctor gets); `jobwarden explain -n NAMESPACE JOB` tells one of its Jobs' story"
        ),
    )
}

/// The Jobs still in their grace: until when they keep their place, and what they do then.
fn keeping_place(
    keeping: &[&DispatchedJob],
    until: impl Fn(&DispatchedJob) -> Timestamp,
    now: Timestamp,
) -> String {
    let last = keeping.iter().map(|j| until(j)).max().unwrap_or(now);
    let first_end = keeping.iter().map(|j| until(j)).min().unwrap_or(now);
    let when = if first_end == last {
        format!("{last:.0}")
    } else {
        format!("{first_end:.0} to {last:.0}")
    };
    format!(
        ": {} keep{} their place until {when}, then {}",
        jobs_word(keeping.len()),
        if keeping.len() == 1 { "s" } else { "" },
        choices(keeping)
    )
}

/// The Jobs past their grace: those that wait for the worker (Wait), and those no other
/// worker can take.
fn past_grace(past: &[&DispatchedJob]) -> String {
    let waits = past
        .iter()
        .filter(|j| j.on_worker_lost == OnWorkerLost::Wait)
        .count();
    let stuck = past.len() - waits;
    let mut parts = Vec::new();
    if waits > 0 {
        parts.push(format!(
            "{} wait{} for it (Wait)",
            jobs_word(waits),
            if waits == 1 { "s" } else { "" }
        ));
    }
    if stuck > 0 {
        let moving: Vec<&DispatchedJob> = past
            .iter()
            .filter(|j| j.on_worker_lost != OnWorkerLost::Wait)
            .copied()
            .collect();
        parts.push(format!(
            "{} past {} grace still on it: no other worker can take {} ({})",
            jobs_word(stuck),
            if stuck == 1 { "its" } else { "their" },
            if stuck == 1 { "it" } else { "them" },
            choices(&moving)
        ));
    }
    parts.join("; ")
}
