//! The story drawn (`explain -o svg`): the `Explanation` the text is printed from, turned into a
//! `jobwarden_timeline::Timeline`. A bar per pod that is left, from its creation to its end (or
//! to when the story was told), the rule its failure matched, the back-off its failure held
//! its replacement for, the Job's conditions as lines across the lanes, the active deadline,
//! and the moment the story was told. Times count from the Job's creation; each bar's hover
//! text is the story's own line about the pod. A dispatched Job is drawn as its copy, whose
//! pods are on the worker, when the copy was read.

use jobwarden_rules::seconds;
use jobwarden_timeline::{Bar, Builder, Moment, MomentKind, Outcome, RuleMark, Timeline};
use k8s_openapi::jiff::Timestamp;

use crate::explanation::*;
use crate::text;

/// The story as one SVG document.
pub fn svg(e: &Explanation) -> String {
    jobwarden_timeline::svg(&timeline(e))
}

/// The story drawn; a dispatched Job's is its copy's, read from the worker, when there is one.
pub fn timeline(e: &Explanation) -> Timeline {
    if let Some(DispatchView {
        worker: Some(worker),
        copy: CopyView::Read { story, .. },
        ..
    }) = &e.dispatch
    {
        let note = format!(
            "The copy of Job {}/{} (UID {}) on worker {worker}, read there: its pods are run by that cluster's built-in Job controller.",
            e.namespace, e.name, e.uid
        );
        return drawn(story, Some(note));
    }
    drawn(e, None)
}

fn drawn(e: &Explanation, note: Option<String>) -> Timeline {
    let clock = Clock { origin: origin(e) };
    let now = clock.at(e.now);
    let mut b = match &e.indexes {
        Some(ix) => Builder::indexed(ix.completions),
        None => Builder::non_indexed(),
    };
    finished_bars(&mut b, e, clock, now);
    active_bars(&mut b, e, clock, now);
    let suspended_seen = condition_moments(&mut b, e, clock);
    wait_moments(&mut b, e, clock, suspended_seen);
    let ending = ending(&mut b, e, clock, now);
    let notes = notes(e, note, clock.origin);
    let end = e
        .finished
        .as_ref()
        .and_then(|f| f.at)
        .map_or(now, |t| clock.at(t));
    b.build(
        format!("Job {}/{}", e.namespace, e.name),
        ending,
        notes,
        end,
    )
}

/// Times count from the Job's creation, else from the first pod's, else from now.
fn origin(e: &Explanation) -> Timestamp {
    e.created
        .or_else(|| {
            let created = e.active_pods.iter().filter_map(|p| p.created);
            created
                .chain(e.finished_pods.iter().filter_map(|p| p.created))
                .min()
        })
        .unwrap_or(e.now)
}

/// The drawing's clock: whole seconds since `origin` (0 before it).
#[derive(Clone, Copy)]
struct Clock {
    origin: Timestamp,
}

impl Clock {
    fn at(self, t: Timestamp) -> u64 {
        u64::try_from(t.duration_since(self.origin).as_secs()).unwrap_or(0)
    }
}

/// A bar per finished pod, from its creation to its end, and the back-off its failure held its
/// replacement for.
fn finished_bars(b: &mut Builder, e: &Explanation, clock: Clock, now: u64) {
    let at = |t: Timestamp| clock.at(t);
    for p in &e.finished_pods {
        let end = p.finished_at.or(p.created).map_or(now, at);
        b.bar(Bar {
            pod: p.name.clone(),
            index: p.index,
            attempt: p.attempt,
            number: None,
            start: p.created.map_or(end, at).min(end),
            end: Some(end),
            outcome: outcome(p),
            rule: p
                .rule
                .as_ref()
                .map(|r| RuleMark::new(r.index, r.name.as_deref(), &r.action)),
            story: vec![text::finished_pod(e, p)],
        });
        if let Some(until) = p.backoff_until {
            let story = format!(
                "back-off after pod {} failed: its replacement may be created from {}",
                p.name,
                seconds::format(at(until))
            );
            b.backoff(&p.name, end, at(until), story);
        }
    }
}

/// A bar per active pod, from its creation to when the story was told.
fn active_bars(b: &mut Builder, e: &Explanation, clock: Clock, now: u64) {
    for p in &e.active_pods {
        b.bar(Bar {
            pod: p.name.clone(),
            index: p.index,
            attempt: p.attempt,
            number: None,
            start: p.created.map_or(now, |t| clock.at(t)).min(now),
            end: None,
            outcome: if p.terminating {
                Outcome::Deleted
            } else {
                Outcome::Running
            },
            rule: None,
            story: vec![text::active_pod(p)],
        });
    }
}

/// The Job's conditions as lines across the lanes; whether one was a Suspended=True.
fn condition_moments(b: &mut Builder, e: &Explanation, clock: Clock) -> bool {
    let mut suspended_seen = false;
    for c in &e.conditions {
        let Some(moment) = condition_moment(c, clock) else {
            continue;
        };
        suspended_seen |= moment.kind == MomentKind::Suspended;
        b.moment(moment);
    }
    suspended_seen
}

/// A condition drawn, if it is one of those drawn and has a transition time.
fn condition_moment(c: &ConditionLine, clock: Clock) -> Option<Moment> {
    let kind = match (c.type_.as_str(), c.status.as_str()) {
        ("SuccessCriteriaMet", "True") => MomentKind::SuccessCriteriaMet,
        ("FailureTarget", "True") => MomentKind::FailureTarget,
        ("Complete", "True") => MomentKind::Complete,
        ("Failed", "True") => MomentKind::Failed,
        ("Suspended", "True") => MomentKind::Suspended,
        // A Suspended condition gone False: the Job was resumed then.
        ("Suspended", "False") => MomentKind::Resumed,
        _ => return None,
    };
    let when = c.at?;
    let reason = c.reason.as_deref().unwrap_or("");
    let label = match kind {
        MomentKind::Resumed => "Resumed".to_owned(),
        _ if reason.is_empty() => c.type_.clone(),
        _ => format!("{}: {reason}", c.type_),
    };
    let mut story = format!("condition {}={}", c.type_, c.status);
    if !reason.is_empty() {
        story += &format!(", reason {reason}");
    }
    if let Some(m) = c.message.as_deref().filter(|m| !m.is_empty()) {
        story += &format!(": {m}");
    }
    Some(Moment {
        at: clock.at(when),
        kind,
        label,
        story,
    })
}

/// The active deadline, and the suspension when no Suspended condition drew it already.
fn wait_moments(b: &mut Builder, e: &Explanation, clock: Clock, suspended_seen: bool) {
    for w in &e.waiting {
        match w {
            Wait::ActiveDeadline { deadline, .. } => b.moment(Moment {
                at: clock.at(*deadline),
                kind: MomentKind::ActiveDeadline,
                label: "activeDeadlineSeconds".to_owned(),
                story: format!(
                    "activeDeadlineSeconds falls at {}",
                    seconds::format(clock.at(*deadline))
                ),
            }),
            Wait::Suspended {
                since: Some(since), ..
            } if !suspended_seen => b.moment(Moment {
                at: clock.at(*since),
                kind: MomentKind::Suspended,
                label: "Suspended".to_owned(),
                story: "suspended (spec.suspend: true)".to_owned(),
            }),
            _ => {}
        }
    }
}

/// How the Job ended; for one not finished, the moment the story was told is drawn too.
fn ending(b: &mut Builder, e: &Explanation, clock: Clock, now: u64) -> String {
    match &e.finished {
        Some(f) => {
            let mut s = format!(
                "{} after {}",
                f.type_,
                seconds::format(f.at.map_or(now, |t| clock.at(t)))
            );
            if let Some(r) = &f.reason {
                s += &format!(", reason {r}");
            }
            s + "."
        }
        None => {
            b.moment(Moment {
                at: now,
                kind: MomentKind::Now,
                label: "now".to_owned(),
                story: format!("the story was told at {}", e.now),
            });
            format!(
                "Not finished when the story was told, {} after its creation.",
                seconds::format(now)
            )
        }
    }
}

/// The notes under the drawing: the copy's (when drawn), who runs the Job, the clock.
fn notes(e: &Explanation, note: Option<String>, origin: Timestamp) -> Vec<String> {
    note.into_iter()
        .chain([
            text::who_runs_it(e),
            format!(
                "Times are since the Job was created ({origin:.0}); told at {:.0}.",
                e.now
            ),
            "Pods deleted and gone from the API are not drawn.".to_owned(),
        ])
        .collect()
}

fn outcome(p: &FinishedPod) -> Outcome {
    let condition = |t: &str| {
        p.conditions
            .iter()
            .any(|c| c.type_ == t && c.status == "True")
    };
    if p.phase == "Succeeded" {
        Outcome::Succeeded
    } else if condition(jobwarden_rules::pod_timing::START_TIMEOUT_CONDITION) {
        Outcome::StartTimeout
    } else if condition("DisruptionTarget") {
        Outcome::Disrupted
    } else if p.deleted {
        Outcome::Deleted
    } else {
        Outcome::Failed
    }
}
