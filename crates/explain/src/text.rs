//! The story as text, in `simulate`'s voice: who runs the Job, each pod and the rule it
//! matched, what the Job waits for; for a dispatched Job, its worker and its copy's story there,
//! told the same way and set in. Spans are counted back from the moment the story was told
//! (`12s ago`) and printed as Go prints durations. Pure formatting; it decides nothing.

use std::fmt::Write as _;
use std::time::Duration;

use jobwarden_rules::seconds;
use jobwarden_rules::well_known::{
    ON_WORKER_LOST_ANNOTATION as ON_WORKER_LOST, ORIGIN_UID_LABEL as ORIGIN_UID,
    WORKER_ANNOTATION as WORKER, WORKER_LOST_SINCE_ANNOTATION as LOST_SINCE,
    WORKERS_ANNOTATION as WORKERS,
};
use k8s_openapi::jiff::Timestamp;

use crate::explanation::*;
use crate::fit::MOVED_FROM;
use crate::workers::text::{number, percent};

/// The text `explain` prints, every line ending in a newline.
pub fn render(e: &Explanation) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", who_runs_it(e));
    out.push_str(&body(e, &Parts::default()));
    out
}

/// What a story leaves out or says otherwise: the copy's told from a worker, where its pods or
/// events may be unreadable, under headings that name the worker.
#[derive(Default)]
struct Parts<'a> {
    pods_unread: Option<&'a str>,
    events_unread: Option<&'a str>,
    /// `Events on worker east`; `Events` when `None`.
    events_heading: Option<String>,
}

/// Everything after the first line.
fn body(e: &Explanation, parts: &Parts<'_>) -> String {
    let mut out = String::new();
    for line in acting(e, parts.pods_unread.is_some()) {
        let _ = writeln!(out, "{line}");
    }
    // The conditions on the way to the end: the success criteria met, a failure on its way.
    for c in e.conditions.iter().filter(|c| {
        c.status == "True" && matches!(c.type_.as_str(), "SuccessCriteriaMet" | "FailureTarget")
    }) {
        let mut line = format!("{} {}", c.type_, ago(e.now, c.at));
        if let Some(reason) = &c.reason {
            let _ = write!(line, ", reason {reason}");
        }
        if let Some(message) = c.message.as_deref().filter(|m| !m.is_empty()) {
            let _ = write!(line, ": {message}");
        }
        let _ = writeln!(out, "{line}.");
    }
    if let Some(f) = &e.finished {
        let mut line = format!("{} {}", f.type_, ago(e.now, f.at));
        if let Some(reason) = &f.reason {
            let _ = write!(line, ", reason {reason}");
        }
        if let Some(message) = f.message.as_deref().filter(|m| !m.is_empty()) {
            let _ = write!(line, ": {message}");
        }
        let _ = writeln!(out, "{line}.");
    }

    match &e.dispatch {
        // A copy runs elsewhere: its pods, what it waits for and its indexes are its story's.
        Some(d) if d.copy != CopyView::Local => out.push_str(&dispatch(e, d)),
        local => {
            if let Some(d) = local {
                let _ = writeln!(out);
                let _ = writeln!(out, "{}", placed(e, d));
            }
            pods_and_waiting(e, parts, &mut out);
            indexes(e, &mut out);
        }
    }

    let _ = writeln!(out);
    let heading = parts.events_heading.as_deref().unwrap_or("Events");
    if let Some(why) = parts.events_unread {
        let _ = writeln!(out, "{heading}: not read: {why}.");
    } else if e.events.is_empty() {
        let _ = writeln!(out, "{heading}: none.");
    } else {
        let _ = writeln!(out, "{heading}:");
        for ev in &e.events {
            let count = if ev.count > 1 {
                format!(" (x{})", ev.count)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "  {}  {} {} from {}{count}: {}",
                ago(e.now, ev.at),
                ev.type_,
                ev.reason,
                if ev.from.is_empty() { "?" } else { &ev.from },
                ev.message
            );
        }
    }
    out
}

fn pods_and_waiting(e: &Explanation, parts: &Parts<'_>, out: &mut String) {
    let _ = writeln!(out);
    if let Some(why) = parts.pods_unread {
        let _ = writeln!(out, "Pods: not read: {why}.");
    } else if e.active_pods.is_empty() && e.finished_pods.is_empty() {
        let _ = writeln!(out, "Pods: none.");
    } else {
        let _ = writeln!(out, "Pods:");
        for p in &e.finished_pods {
            let _ = writeln!(out, "  {}", finished_pod(e, p));
        }
        for p in &e.active_pods {
            let _ = writeln!(out, "  {}", active_pod(p));
        }
    }

    if e.finished.is_none() {
        if e.waiting.is_empty() {
            // Without its pods, what it waits for among them is not known.
            if parts.pods_unread.is_none() {
                let what = if e.active_pods.is_empty() {
                    "its controller to create pods"
                } else {
                    "its pods to finish"
                };
                let _ = writeln!(out);
                let _ = writeln!(out, "Waiting for: {what}.");
            }
        } else {
            let _ = writeln!(out);
            let _ = writeln!(out, "Waiting for:");
            for w in &e.waiting {
                let _ = writeln!(out, "  {}", wait(e.now, w));
            }
        }
    }
}

fn indexes(e: &Explanation, out: &mut String) {
    if let Some(ix) = &e.indexes {
        let parts: Vec<String> = [
            ("succeeded", &ix.succeeded),
            ("failed", &ix.failed),
            ("running", &ix.running),
            ("back-off", &ix.backoff),
            ("waiting", &ix.waiting),
        ]
        .into_iter()
        .filter(|(_, set)| !set.is_empty())
        .map(|(what, set)| format!("{what} {set}"))
        .collect();
        let _ = writeln!(out);
        let _ = writeln!(out, "Indexes ({}): {}.", ix.completions, parts.join("; "));
    }
}

/// A dispatched Job's placement, its lost worker, what the dispatcher said, and its copy.
fn dispatch(e: &Explanation, d: &DispatchView) -> String {
    let mut out = String::new();
    let _ = writeln!(out);
    let Some(worker) = &d.worker else {
        out.push_str(&not_placed(e, d));
        return out;
    };
    out.push_str(&placed_on(e, d));
    let _ = writeln!(out);
    out.push_str(&copy(e, d, worker));
    out
}

/// A Job on no worker yet: the workers it names, and, while it is not finished, what it waits
/// for and where it would fit now.
fn not_placed(e: &Explanation, d: &DispatchView) -> String {
    let mut out = String::new();
    let named = if d.named_workers.is_empty() {
        String::new()
    } else {
        format!(" ({WORKERS}: {})", d.named_workers.join(", "))
    };
    let _ = writeln!(out, "Not placed on a worker yet{named}.");
    if e.finished.is_none() {
        match &d.dispatcher_said {
            Some(ev) => {
                let _ = writeln!(
                    out,
                    "Waiting for: a worker to take it; the dispatcher said {} ({}): {}",
                    ago(e.now, ev.at),
                    ev.reason,
                    ev.message
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "Waiting for: the dispatcher to place it on a worker (it has said nothing about the Job yet)."
                );
            }
        }
        out.push_str(&turn(d));
        out.push_str(&fit_now(d));
    }
    out
}

/// Its turn in the fair order (`dispatch.shares`): its team, its place, the team's dominant
/// share against its fair share, and the room held.
fn turn(d: &DispatchView) -> String {
    let mut out = String::new();
    if let Some(why) = &d.turn_unread {
        let _ = writeln!(out, "Its turn among the teams is unknown: {why}.");
    }
    let Some(t) = &d.turn else {
        return out;
    };
    let place = if t.place == 1 {
        format!(
            "first of {} waiting Jobs: the next to go as room frees",
            t.waiting
        )
    } else {
        format!("{} of {} waiting Jobs", t.place, t.waiting)
    };
    let dominant = match &t.team.dominant_resource {
        Some(r) => format!("{} ({r})", percent(t.team.dominant_share)),
        None => "0%".to_owned(),
    };
    let _ = writeln!(
        out,
        "Its turn: team {} (weight {}), {place}. The team uses {dominant} of the fleet, against a fair share of {}.",
        t.team.name,
        number(t.team.weight),
        percent(t.team.fair_share),
    );
    if let Some(worker) = &t.held_for_it {
        let _ = writeln!(
            out,
            "Room is held for it on worker {worker} until it is placed."
        );
    }
    for h in &t.held_for_others {
        let _ = writeln!(out, "Room is held for {} on worker {}.", h.job, h.worker);
    }
    out
}

/// A placed Job: where, the workers it moved from, and what the dispatcher last warned of.
fn placed_on(e: &Explanation, d: &DispatchView) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", placed(e, d));
    if !d.moved_from.is_empty() {
        let _ = writeln!(
            out,
            "Moved from {} ({MOVED_FROM}): its pods could not be scheduled there.",
            d.moved_from.join(", then ")
        );
    }
    if let Some(ev) = &d.dispatcher_said {
        let _ = writeln!(
            out,
            "The dispatcher said {} ({}): {}",
            ago(e.now, ev.at),
            ev.reason,
            ev.message
        );
    }
    out
}

/// The copy on `worker`: its story when it was read, else why it was not.
fn copy(e: &Explanation, d: &DispatchView, worker: &str) -> String {
    let mut out = String::new();
    let name = format!("{}/{}", e.namespace, e.name);
    match &d.copy {
        CopyView::Read {
            via,
            story,
            pods_unread,
            events_unread,
        } => {
            let parts = Parts {
                pods_unread: pods_unread.as_deref(),
                events_unread: events_unread.as_deref(),
                events_heading: Some(format!("Events on worker {worker}")),
            };
            out.push_str(&copy_story(worker, via, &name, story, &parts));
            out.push_str(&pod_places(worker, &d.copy_pods));
        }
        CopyView::Missing {
            deleted: Some(ev), ..
        } => {
            let _ = writeln!(
                out,
                "Its copy on worker {worker} is gone: the dispatcher deleted it {} ({}: {}).",
                ago(e.now, ev.at),
                ev.reason,
                ev.message
            );
        }
        // The dispatcher says nothing when it deletes a finished Job's copy: it always does.
        CopyView::Missing { via, deleted: None } if e.finished.is_some() => {
            let _ = writeln!(
                out,
                "Its copy on worker {worker} is gone: the dispatcher deletes a copy once the Job shows how it ended (no Job {name} there, read with {via})."
            );
        }
        CopyView::Missing { via, deleted: None } => {
            let _ = writeln!(
                out,
                "No copy of it on worker {worker}: no Job {name} there (read with {via})."
            );
        }
        CopyView::NotTheCopy { via, origin_uid } => {
            let whose = match origin_uid {
                Some(uid) => format!("its {ORIGIN_UID} is {uid}, not {}", e.uid),
                None => format!("it has no {ORIGIN_UID}"),
            };
            let _ = writeln!(
                out,
                "Worker {worker} holds a Job {name} that is not this Job's copy ({whose}; read with {via}): someone else's, which the dispatcher never touches."
            );
        }
        CopyView::Unreachable { via, reason } => {
            let _ = writeln!(
                out,
                "Its copy on worker {worker} could not be read with {via}: {reason}. What this cluster shows is above: the status as the dispatcher last mirrored it, and its Events below."
            );
        }
        CopyView::Refused {
            via,
            reason,
            message,
        } => {
            let _ = writeln!(
                out,
                "Its copy on worker {worker} is not read: the kubeconfig in {via} is refused, as the dispatcher refuses it ({reason}): {message}. `--worker-kubeconfig {worker}=FILE` reads it with yours."
            );
        }
        CopyView::NoKubeconfig { reason } => {
            let _ = writeln!(
                out,
                "Its copy on worker {worker} is not read: {reason}. `--worker-kubeconfig {worker}=FILE` reads it with yours."
            );
        }
        CopyView::NotRead => {
            let _ = writeln!(out, "Its copy on worker {worker} was not read.");
        }
        CopyView::NotPlaced | CopyView::Local => {}
    }
    out
}

/// The copy's own story, told as any Job's is, indented under a line saying where it was read.
fn copy_story(
    worker: &str,
    via: &str,
    name: &str,
    story: &Explanation,
    parts: &Parts<'_>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Its copy on worker {worker}, read with {via}: Job {name} (UID {}), run there by the built-in Job controller.",
        story.uid
    );
    for line in body(story, parts).lines() {
        if line.is_empty() {
            let _ = writeln!(out);
        } else {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

/// Each candidate worker judged now, for a Job not placed.
fn fit_now(d: &DispatchView) -> String {
    let mut out = String::new();
    if d.fit.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "Where it would fit now (each worker's Nodes and pods, read now):"
    );
    for f in &d.fit {
        let said = match (f.verdict.as_str(), &f.reason) {
            ("fits", _) => "its pods fit".to_owned(),
            ("unbounded", _) => "capacity: Unbounded: placed by count".to_owned(),
            ("unread", Some(why)) => format!("not read: {why}"),
            (_, Some(why)) => why.clone(),
            (verdict, None) => verdict.to_owned(),
        };
        let _ = writeln!(out, "  {}: {said}", f.worker);
    }
    if d.fits_nowhere_today {
        let _ = writeln!(
            out,
            "It does not fit on any node today: no Node of any worker could hold one of its pods, however much room frees."
        );
    }
    out
}

/// Where the copy's unfinished pods are bound, or the scheduler's word on those it cannot
/// bind.
fn pod_places(worker: &str, places: &[PodPlace]) -> String {
    let mut out = String::new();
    if places.is_empty() {
        return out;
    }
    let _ = writeln!(out, "  Its pods on worker {worker}:");
    for p in places {
        let at = match (&p.node, &p.unschedulable) {
            (Some(node), _) => format!("on node {node}"),
            (None, Some(message)) => format!("unschedulable: {message}"),
            (None, None) => "not bound to a node yet".to_owned(),
        };
        let _ = writeln!(out, "    pod {} {at}", p.pod);
    }
    out
}

/// Where the Job is placed, and what follows if (or since) its worker is lost.
fn placed(e: &Explanation, d: &DispatchView) -> String {
    let worker = d.worker.as_deref().unwrap_or("?");
    let then = match d.on_worker_lost.as_str() {
        "Wait" => format!("it waits for {worker} to answer again"),
        "Fail" => "it fails with reason WorkerLost".to_owned(),
        _ => "another worker runs it".to_owned(),
    };
    let choice = format!("{ON_WORKER_LOST}: {}", d.on_worker_lost);
    let grace = match (d.worker_lost_seconds, &d.policy_unreadable) {
        (Some(s), _) => seconds::format(s),
        (None, Some(why)) => {
            format!("dispatch.workerLostSeconds (the policy could not be read: {why})")
        }
        (None, None) => "dispatch.workerLostSeconds".to_owned(),
    };
    if d.copy == CopyView::Local {
        return format!(
            "Placed on worker {worker} ({WORKER}): this cluster, where jobwarden's own Job controller runs it."
        );
    }
    if e.finished.is_some() {
        return format!("Placed on worker {worker} ({WORKER}).");
    }
    let Some(lost) = &d.lost else {
        return format!(
            "Placed on worker {worker} ({WORKER}); should it stop answering, the Job keeps its place there for {grace}, then {then} ({choice})."
        );
    };
    let since = match lost.since {
        Some(t) => format!("{t:.0} ({}", ago(e.now, Some(t))),
        None => format!("{:?} (not a time", lost.mark),
    };
    let mut s = format!(
        "Placed on worker {worker} ({WORKER}), which does not answer: lost since {since}, {LOST_SINCE})."
    );
    match (lost.keeps_place_until, lost.remaining_seconds) {
        (Some(until), Some(left)) if left > 0 => {
            let _ = write!(
                s,
                " The Job keeps its place there until {until:.0} (in {}; dispatch.workerLostSeconds: {}), then {then} ({choice}).",
                seconds::format(left),
                d.worker_lost_seconds.unwrap_or(0)
            );
        }
        (Some(until), _) => {
            let now = match d.on_worker_lost.as_str() {
                "Wait" => format!("it waits for {worker} to answer again"),
                "Fail" => "it is to fail with reason WorkerLost".to_owned(),
                _ => "it is to move to another worker".to_owned(),
            };
            let _ = write!(
                s,
                " Its place was kept until {until:.0} ({}): now {now} ({choice}).",
                ago(e.now, Some(until))
            );
        }
        (None, _) => {
            let _ = write!(
                s,
                " The Job keeps its place there for {grace} from that mark, then {then} ({choice})."
            );
        }
    }
    s
}

pub(crate) fn who_runs_it(e: &Explanation) -> String {
    let job = format!("Job {}/{}", e.namespace, e.name);
    match (e.runner.controller, e.runner.managed_by.as_deref()) {
        (ControllerKind::BuiltIn, None) => {
            format!("{job}, run by the built-in Job controller (no spec.managedBy).")
        }
        (ControllerKind::BuiltIn, Some(m)) => {
            format!("{job}, run by the built-in Job controller (spec.managedBy: {m}).")
        }
        (ControllerKind::Jobwarden, m) => format!(
            "{job}, run by jobwarden's controller (spec.managedBy: {}).",
            m.unwrap_or("")
        ),
        (ControllerKind::Dispatcher, m) => {
            let by = format!(
                "{job}, run by jobwarden's dispatcher (spec.managedBy: {})",
                m.unwrap_or("")
            );
            match e.dispatch.as_ref().and_then(|d| d.worker.as_deref()) {
                Some(worker) => format!("{by} on worker {worker}."),
                None => format!("{by}, not placed on a worker yet."),
            }
        }
        (ControllerKind::Other, m) => format!(
            "{job}, run by {} (spec.managedBy), not by the built-in Job controller.",
            m.unwrap_or("")
        ),
    }
}

/// Whether the controller shows signs of acting: jobwarden's Lease, the status beside the
/// pods (unless they could not be read), and the plain statement when nothing at all shows.
fn acting(e: &Explanation, pods_unread: bool) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(l) = &e.runner.lease {
        let lease = format!("jobwarden's Lease {}/{}", l.namespace, l.name);
        lines.push(match (&l.unreadable, &l.holder) {
            (Some(reason), _) => {
                format!(
                    "{lease} could not be read ({reason}): whether a replica leads is not known."
                )
            }
            (None, None) => format!("{lease} is held by nobody: no replica of jobwarden leads."),
            (None, Some(holder)) if l.expired => format!(
                "{lease} expired: {holder} last renewed it {}; no replica of jobwarden leads.",
                ago(e.now, l.renew_time)
            ),
            (None, Some(holder)) => format!(
                "{lease} is held by {holder}, renewed {}.",
                ago(e.now, l.renew_time)
            ),
        });
    }
    let status = match (e.runner.status_changed, &e.runner.status_writer) {
        (Some(t), Some(writer)) => {
            format!(
                "Its status was last written {} by {writer}",
                ago(e.now, Some(t))
            )
        }
        (Some(t), None) => format!("Its status last changed {}", ago(e.now, Some(t))),
        (None, _) => "Its status was never written".to_owned(),
    };
    let pods = match e.runner.pods_changed {
        Some(t) => format!("; its pods {}", ago(e.now, Some(t))),
        None => "; it has no pods".to_owned(),
    };
    // A dispatched Job's pods are its copy's, on the worker, told below.
    let copy_elsewhere = e
        .dispatch
        .as_ref()
        .is_some_and(|d| d.copy != CopyView::Local);
    let pods = if copy_elsewhere || pods_unread {
        String::new()
    } else {
        pods
    };
    lines.push(format!("{status}{pods}."));
    if let Some(s) = &e.runner.stuck {
        lines.push(format!(
            "No controller is running it: {:?} shows no sign of acting on it {} after its creation (it is {} old, not suspended, with no status.startTime and no pods). Is that controller installed, running, and spelled so?",
            s.managed_by,
            seconds::format(s.after_seconds),
            seconds::format(s.age_seconds)
        ));
    }
    lines
}

/// A pod not yet finished: `pod job-2 (index 2) running`.
pub(crate) fn active_pod(p: &ActivePod) -> String {
    let state = if p.terminating {
        "terminating".to_owned()
    } else {
        p.phase.to_lowercase()
    };
    format!("pod {}{} {state}", p.name, index(p.index, p.attempt))
}

/// A finished pod: how it ended, the rule it matched, its replacement's back-off.
pub(crate) fn finished_pod(e: &Explanation, p: &FinishedPod) -> String {
    let now = e.now;
    let mut s = format!("pod {}{}", p.name, index(p.index, p.attempt));
    if p.phase == "Succeeded" {
        let _ = write!(s, " succeeded {}", ago(now, p.finished_at));
        return s;
    }
    let _ = write!(s, " failed {}:", ago(now, p.finished_at));
    let mut parts: Vec<String> = p
        .exit_codes
        .iter()
        .map(|c| {
            let kind = if c.init { "init container " } else { "" };
            format!("{kind}{} exited {}", c.container, c.code)
        })
        .collect();
    parts.extend(
        p.conditions
            .iter()
            .filter(|c| c.status == "True")
            .map(|c| format!("condition {}={}", c.type_, c.status)),
    );
    if parts.is_empty() {
        parts.push("no container terminated".to_owned());
    }
    let _ = write!(s, " {}", parts.join(", "));
    match &p.rule {
        Some(m) => {
            let _ = write!(
                s,
                "; rule {} {} matched: {}",
                m.index,
                rule_name(m),
                m.action
            );
        }
        None if e.pod_failure_policy_rules > 0 => {
            s.push_str("; no pod failure policy rule matched: it counts as a failure");
        }
        None => {}
    }
    if let (Some(until), Some(at)) = (p.backoff_until, p.finished_at) {
        let held = Duration::try_from(until.duration_since(at)).map_or(0, |d| d.as_secs());
        let _ = write!(s, "; its replacement backs off {}", seconds::format(held));
    }
    s
}

fn wait(now: Timestamp, w: &Wait) -> String {
    match w {
        Wait::Backoff {
            index: None,
            failures,
            remaining_seconds,
            ..
        } => format!(
            "back-off: the next pod waits {} more ({failures} failure{} since the last success)",
            seconds::format(*remaining_seconds),
            plural(u64::from(*failures))
        ),
        Wait::Backoff {
            index: Some(i),
            failures,
            remaining_seconds,
            ..
        } => format!(
            "back-off of index {i}: its next pod waits {} more ({failures} failure{} of the index)",
            seconds::format(*remaining_seconds),
            plural(u64::from(*failures))
        ),
        Wait::FailJob { pod, rule } => format!(
            "its controller to fail it: pod {pod} matched rule {} {}: FailJob",
            rule.index,
            rule_name(rule)
        ),
        Wait::Terminating { pods } => format!(
            "pods terminating before they are replaced (podReplacementPolicy: Failed): {}",
            pods.join(", ")
        ),
        Wait::SuccessRule {
            rule,
            succeeded_indexes,
            succeeded_count,
            missing_indexes,
            needs,
        } => {
            let mut what: Vec<String> = Vec::new();
            if let Some(ix) = succeeded_indexes {
                what.push(format!("succeededIndexes {ix:?}"));
            }
            if let Some(n) = succeeded_count {
                what.push(format!("succeededCount {n}"));
            }
            format!(
                "success rule {rule} ({}): {needs} more of indexes {missing_indexes}",
                what.join(", ")
            )
        }
        Wait::ActiveDeadline {
            remaining_seconds, ..
        } => format!(
            "activeDeadlineSeconds: {} left before the Job fails",
            seconds::format(*remaining_seconds)
        ),
        Wait::Suspended {
            since,
            reason,
            message,
        } => {
            let mut s = "resume: it is suspended (spec.suspend: true)".to_owned();
            if since.is_some() {
                let _ = write!(s, " since {}", ago(now, *since));
            }
            if let Some(r) = reason {
                let _ = write!(s, ", reason {r}");
            }
            if let Some(m) = message.as_deref().filter(|m| !m.is_empty()) {
                let _ = write!(s, ": {m}");
            }
            s
        }
    }
}

/// As `simulate` names a rule: `"ExitCode2"`, or `(unnamed)`.
fn rule_name(rule: &MatchedRule) -> String {
    match &rule.name {
        Some(n) => format!("{n:?}"),
        None => "(unnamed)".to_owned(),
    }
}

/// ` (index 3)`, ` (index 3, attempt 2)`, as `simulate` names a pod.
fn index(index: Option<i32>, attempt: Option<u32>) -> String {
    match (index, attempt) {
        (Some(i), Some(a)) if a > 1 => format!(" (index {i}, attempt {a})"),
        (Some(i), _) => format!(" (index {i})"),
        (None, _) => String::new(),
    }
}

/// `12s ago`, `in 5s` for a time after `now` (clocks apart), `at an unknown time`.
pub(crate) fn ago(now: Timestamp, at: Option<Timestamp>) -> String {
    let Some(at) = at else {
        return "at an unknown time".to_owned();
    };
    match Duration::try_from(now.duration_since(at)) {
        Ok(d) => format!("{} ago", seconds::format(d.as_secs())),
        Err(_) => format!(
            "in {}",
            seconds::format(Duration::try_from(at.duration_since(now)).map_or(0, |d| d.as_secs()))
        ),
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}
