//! A story told for people: a header (which controller, which scenario), one line per step
//! with its time since the Job was created, how it ended, and the final status in the YAML
//! `kubectl get job -o yaml` shows. Pure formatting of a `Story`; it decides nothing.

use std::fmt::Write as _;

use serde_json::Value;

use super::story::*;
use jobwarden_rules::seconds;

/// The whole story as text, ending with a newline.
pub fn render(story: &Story) -> String {
    let mut out = String::new();
    header(story, &mut out);
    let width = story
        .steps
        .iter()
        .map(|s| seconds::format(s.at).len())
        .max()
        .unwrap_or(2);
    for step in &story.steps {
        let _ = writeln!(
            out,
            "{:>width$}  {}",
            seconds::format(step.at),
            line(&step.what)
        );
    }
    out.push('\n');
    ending(&story.end, &mut out);
    for entry in &story.unused_entries {
        let _ = writeln!(out, "Note: the scenario entry {entry:?} named no pod.");
    }
    out.push_str("Final status:\n");
    yaml(&story.final_status, 1, &mut out);
    out
}

fn header(story: &Story, out: &mut String) {
    let _ = writeln!(out, "{}", who_runs_it(story));
    let _ = writeln!(out, "{}", scenario_line(story));
    for e in &story.scenario.entries {
        let _ = writeln!(out, "  {e}");
    }
    let _ = writeln!(out, "  {}", scenario_default(story));
    let _ = writeln!(out, "{TIMES}\n");
}

pub(crate) const TIMES: &str = "Times are since the Job was created.";

/// Which controller runs the Job, and so whose reasons the story uses (lines end in `\n`
/// but the last).
pub(crate) fn who_runs_it(story: &Story) -> String {
    let job = format!("{}/{}", story.job.namespace, story.job.name);
    match (story.runner.controller, &story.runner.managed_by) {
        (Controller::Jobwarden, Some(by)) => {
            format!("Job {job}, run by jobwarden's controller (spec.managedBy: {by}).")
        }
        (Controller::BuiltIn, by) => {
            let why = match by {
                Some(by) => format!("spec.managedBy is {by}"),
                None => "no spec.managedBy".to_owned(),
            };
            format!(
                "Job {job}: {why}, so the built-in Job controller would run it. The story is\n\
                 jobwarden's plan, which follows upstream's syncJob, with upstream's reasons\n\
                 (PodFailurePolicy, not PodFailurePolicy_<rule name>)."
            )
        }
        (Controller::Jobwarden, None) => format!("Job {job}, run by jobwarden's controller."),
    }
}

/// `Scenario: ` and its description.
pub(crate) fn scenario_line(story: &Story) -> String {
    match &story.scenario.description {
        Some(d) => format!("Scenario: {}", d.trim()),
        None => "Scenario:".to_owned(),
    }
}

/// What becomes of the pods no entry names.
pub(crate) fn scenario_default(story: &Story) -> String {
    let other = if story.scenario.entries.is_empty() {
        "every pod"
    } else {
        "any other pod"
    };
    format!("{other}: {}", story.scenario.default)
}

pub(crate) fn pod(p: &PodLabel) -> String {
    match (p.index, p.attempt) {
        (Some(i), Some(a)) if a > 1 => format!("pod {} (index {i}, attempt {a})", p.name),
        (Some(i), _) => format!("pod {} (index {i})", p.name),
        (None, _) => format!("pod {} (#{})", p.name, p.number),
    }
}

/// One step, as the story tells it.
pub(crate) fn line(what: &Happening) -> String {
    match what {
        Happening::PodCreated(c) => match &c.scenario_entry {
            Some(e) => format!("created {}, scenario {e:?}", pod(&c.pod)),
            None => format!("created {}, scenario default {:?}", pod(&c.pod), c.fate),
        },
        Happening::PodWaiting(w) => format!(
            "{} cannot start: container {} waiting with {}",
            pod(&w.pod),
            w.container,
            w.reason
        ),
        Happening::PodEnded(e) => ended(e),
        Happening::PodDeleted(d) => format!("{} {}", pod(&d.pod), deleted_by(d.by)),
        Happening::Status(c) => counters(c),
        Happening::Condition(c) => condition(c),
        Happening::Waiting(w) => waiting(w),
        Happening::ControllerError(e) => {
            format!(
                "the controller's sync failed, it tries again: {}",
                e.message
            )
        }
    }
}

/// Who deleted a pod, and why.
fn deleted_by(by: Deleter) -> &'static str {
    match by {
        Deleter::Scenario => "deleted (the scenario)",
        Deleter::ControllerJobFinishing => "deleted by the controller: the Job is finishing",
        Deleter::ControllerExcess => "deleted by the controller: more pods run than the Job wants",
        Deleter::ControllerStartTimedOut => "deleted by the controller: it did not start in time",
        Deleter::ControllerLingeringEnded => {
            "deleted by the controller: the success criteria were met, and a deadline, a suspension or a failure policy ends the pods left running"
        }
    }
}

fn condition(c: &JobCondition) -> String {
    let mut s = format!(
        "condition {}={}, reason {}: {}",
        c.type_, c.status, c.reason, c.message
    );
    if let Some(w) = &c.pods_carry_on {
        let _ = write!(
            s,
            " (whenCriterionAchieved {w}: the pods still running carry on)"
        );
    }
    s
}

/// A wait the controller asked for: a back-off, a start timeout, an active deadline.
fn waiting(w: &Waiting) -> String {
    match w.cause {
        WaitCause::BackOff => {
            let whose = match w.pods.as_slice() {
                [] => "a failed pod's replacement waits".to_owned(),
                [one] => format!("the replacement of {} waits", pod(one)),
                several => {
                    // A thousand indexes failing at once make one line, not a page.
                    let mut named: Vec<String> = several.iter().take(3).map(pod).collect();
                    if several.len() > 3 {
                        named.push(format!("and {} more", several.len() - 3));
                    }
                    format!("the replacements of {} wait", named.join(", "))
                }
            };
            format!(
                "back-off: {whose} until {} ({})",
                seconds::format(w.until),
                seconds::format(w.seconds)
            )
        }
        WaitCause::StartTimeout => format!(
            "start timeout: a pod that cannot start is failed at {} (in {})",
            seconds::format(w.until),
            seconds::format(w.seconds)
        ),
        WaitCause::ActiveDeadline => format!(
            "activeDeadlineSeconds falls at {} (in {})",
            seconds::format(w.until),
            seconds::format(w.seconds)
        ),
    }
}

fn ended(e: &PodEnded) -> String {
    let mut s = pod(&e.pod);
    if e.phase == "Succeeded" {
        s.push_str(" succeeded");
        if e.after_success_criteria.is_some() {
            s.push_str(", after the success criteria were met: counted");
        }
        return s;
    }
    if let Some(why) = &e.start_timed_out {
        let _ = write!(s, " failed by the controller: {why}:");
    } else {
        s.push_str(if e.killed {
            " failed, killed after its deletion:"
        } else {
            " failed:"
        });
    }
    let mut parts: Vec<String> = e
        .exit_codes
        .iter()
        .map(|c| {
            let kind = if c.init { "init container " } else { "" };
            format!("{kind}{} exited {}", c.container, c.code)
        })
        .collect();
    parts.extend(
        e.conditions
            .iter()
            .map(|c| format!("condition {}={}", c.type_, c.status)),
    );
    if parts.is_empty() {
        parts.push("no container terminated".to_owned());
    }
    let _ = write!(s, " {}", parts.join(", "));
    match &e.pod_failure_policy {
        Some(PolicyResult::Matched(m)) => {
            let name = match &m.name {
                Some(n) => format!("{n:?}"),
                None => "(unnamed)".to_owned(),
            };
            let _ = write!(s, "; rule {} {name} matched: {}", m.rule, m.action);
        }
        Some(PolicyResult::NoRuleMatched) => {
            s.push_str("; no pod failure policy rule matched: it counts as a failure");
        }
        None => {}
    }
    match e.after_success_criteria.as_deref() {
        Some("Continue") => s.push_str(
            "; after the success criteria were met (Continue): counted, not replaced, no policy applies",
        ),
        Some(_) => s.push_str(
            "; after the success criteria were met (ContinueWithRecreations): the failure policies apply",
        ),
        None => {}
    }
    s
}

fn counters(c: &Counters) -> String {
    let mut s = format!("status: active={}", c.active);
    if let Some(r) = c.ready {
        let _ = write!(s, " ready={r}");
    }
    if let Some(t) = c.terminating {
        let _ = write!(s, " terminating={t}");
    }
    let _ = write!(s, " succeeded={} failed={}", c.succeeded, c.failed);
    if let Some(i) = &c.completed_indexes {
        let _ = write!(s, " completedIndexes={i:?}");
    }
    if let Some(i) = &c.failed_indexes {
        let _ = write!(s, " failedIndexes={i:?}");
    }
    if c.uncounted_succeeded > 0 || c.uncounted_failed > 0 {
        let _ = write!(
            s,
            " uncountedTerminatedPods: succeeded={} failed={}",
            c.uncounted_succeeded, c.uncounted_failed
        );
    }
    s
}

fn ending(end: &End, out: &mut String) {
    let _ = writeln!(out, "{}", ending_line(end));
}

/// How the story ended: `Failed after 20s, reason FailedIndexes.`
pub(crate) fn ending_line(end: &End) -> String {
    let at = seconds::format(end.at);
    match (&end.condition, &end.reason, &end.stopped) {
        (Some(c), Some(r), _) if end.finished => format!("{c} after {at}, reason {r}."),
        (_, _, Some(why)) => format!("Stopped at {at} before the Job finished: {why}."),
        _ => format!("Stopped at {at}."),
    }
}

/// A JSON value as YAML, the way `kubectl get -o yaml` prints a status: keys in order, strings
/// plain where YAML reads them back as the same string, double-quoted otherwise.
fn yaml(v: &Value, depth: usize, out: &mut String) {
    let indent = "  ".repeat(depth);
    match v {
        Value::Object(map) if map.is_empty() => {
            let _ = writeln!(out, "{indent}{{}}");
        }
        Value::Object(map) => {
            for (k, v) in map {
                match v {
                    Value::Object(m) if !m.is_empty() => {
                        let _ = writeln!(out, "{indent}{}:", scalar_str(k));
                        yaml(v, depth + 1, out);
                    }
                    Value::Array(a) if !a.is_empty() => {
                        let _ = writeln!(out, "{indent}{}:", scalar_str(k));
                        list(a, depth, out);
                    }
                    _ => {
                        let _ = writeln!(out, "{indent}{}: {}", scalar_str(k), scalar(v));
                    }
                }
            }
        }
        Value::Array(a) if !a.is_empty() => list(a, depth, out),
        _ => {
            let _ = writeln!(out, "{indent}{}", scalar(v));
        }
    }
}

/// A list at the indentation of its key, as kubectl prints one.
fn list(items: &[Value], depth: usize, out: &mut String) {
    let indent = "  ".repeat(depth);
    for item in items {
        match item {
            Value::Object(map) if !map.is_empty() => {
                let mut inner = String::new();
                yaml(item, depth + 1, &mut inner);
                // The first key goes on the dash's line.
                let body = inner
                    .strip_prefix(&"  ".repeat(depth + 1))
                    .unwrap_or(&inner);
                let _ = write!(out, "{indent}- {body}");
            }
            _ => {
                let _ = writeln!(out, "{indent}- {}", scalar(item));
            }
        }
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => scalar_str(s),
        Value::Object(_) => "{}".to_owned(),
        Value::Array(_) => "[]".to_owned(),
        other => other.to_string(),
    }
}

fn scalar_str(s: &str) -> String {
    const WORDS: [&str; 12] = [
        "true", "false", "null", "yes", "no", "on", "off", "y", "n", "True", "False", "Null",
    ];
    let plain = s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | '_' | '.' | '/' | '-'))
        && !s.ends_with(' ')
        && !WORDS.contains(&s);
    if plain {
        s.to_owned()
    } else {
        serde_json::to_string(s).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_status_reads_as_kubectl_prints_it() {
        let status = json!({
            "active": 0,
            "completedIndexes": "0",
            "conditions": [
                {"type": "Complete", "status": "True", "reason": "SuccessPolicy",
                 "message": "Matched rules at index 0", "lastTransitionTime": "1970-01-01T00:00:20Z"},
            ],
            "ready": 0,
            "uncountedTerminatedPods": {},
        });
        let mut out = String::new();
        yaml(&status, 1, &mut out);
        assert_eq!(
            out,
            "  active: 0\n  completedIndexes: \"0\"\n  conditions:\n  - lastTransitionTime: \"1970-01-01T00:00:20Z\"\n    message: Matched rules at index 0\n    reason: SuccessPolicy\n    status: \"True\"\n    type: Complete\n  ready: 0\n  uncountedTerminatedPods: {}\n"
        );
    }

    #[test]
    fn strings_yaml_would_misread_are_quoted() {
        for (s, want) in [
            ("SuccessPolicy", "SuccessPolicy"),
            ("True", "\"True\""),
            ("no", "\"no\""),
            ("1-5", "\"1-5\""),
            ("", "\"\""),
            ("a: b", "\"a: b\""),
            ("x #y", "\"x #y\""),
            ("tab\there", "\"tab\\there\""),
        ] {
            assert_eq!(scalar_str(s), want, "{s}");
        }
    }
}
