//! The story as text, in `simulate`'s voice: who runs the Job, each pod and the rule it
//! matched, what the Job waits for. Spans are counted back from the moment the story was told
//! (`12s ago`) and printed as Go prints durations. Pure formatting; it decides nothing.

use std::fmt::Write as _;
use std::time::Duration;

use jobwarden_rules::seconds;
use k8s_openapi::jiff::Timestamp;

use crate::explanation::*;

/// The text `explain` prints, every line ending in a newline.
pub fn render(e: &Explanation) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", who_runs_it(e));
    for line in acting(e) {
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

    let _ = writeln!(out);
    if e.active_pods.is_empty() && e.finished_pods.is_empty() {
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
        let _ = writeln!(out);
        if e.waiting.is_empty() {
            let what = if e.active_pods.is_empty() {
                "its controller to create pods"
            } else {
                "its pods to finish"
            };
            let _ = writeln!(out, "Waiting for: {what}.");
        } else {
            let _ = writeln!(out, "Waiting for:");
            for w in &e.waiting {
                let _ = writeln!(out, "  {}", wait(e.now, w));
            }
        }
    }

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

    let _ = writeln!(out);
    if e.events.is_empty() {
        let _ = writeln!(out, "Events: none.");
    } else {
        let _ = writeln!(out, "Events:");
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
        (ControllerKind::Other, m) => format!(
            "{job}, run by {} (spec.managedBy), not by the built-in Job controller.",
            m.unwrap_or("")
        ),
    }
}

/// Whether the controller shows signs of acting: jobwarden's Lease, the status beside the
/// pods, and the plain statement when nothing at all shows.
fn acting(e: &Explanation) -> Vec<String> {
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
        Some(t) => format!("its pods {}", ago(e.now, Some(t))),
        None => "it has no pods".to_owned(),
    };
    lines.push(format!("{status}; {pods}."));
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
