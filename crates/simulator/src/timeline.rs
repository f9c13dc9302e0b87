//! The story drawn (`-o svg`): its steps turned into a `jobwarden_timeline::Timeline`, read
//! off the same `Story` the text is printed from, so the picture shows exactly what the story
//! tells: a bar per pod created, ended where its end or deletion is told, the rule its failure
//! matched, each back-off after the pods it holds, each condition as a line across the lanes.
//! Every bar's hover text is the story's own lines about that pod.

use jobwarden_rules::condition::{
    COMPLETE, FAILED, FAILURE_TARGET, SUCCESS_CRITERIA_MET, SUSPENDED,
};
use jobwarden_timeline::{Bar, Builder, Moment, MomentKind, Outcome, RuleMark, Timeline};

use super::story::*;
use super::text;

/// The story as one SVG document.
pub fn svg(story: &Story) -> String {
    jobwarden_timeline::svg(&timeline(story))
}

/// The story as a timeline.
pub fn timeline(story: &Story) -> Timeline {
    let mut b = match (story.completion_mode.as_str(), story.completions) {
        ("Indexed", Some(n)) => Builder::indexed(n),
        _ => Builder::non_indexed(),
    };
    let mut suspended = false;
    for step in &story.steps {
        let told = || {
            format!(
                "{}  {}",
                jobwarden_rules::seconds::format(step.at),
                text::line(&step.what)
            )
        };
        match &step.what {
            Happening::Waiting(w) => waited(&mut b, w, step.at, story.end.at, told),
            Happening::Condition(c) => {
                condition(&mut b, c, step.at, &mut suspended, told);
            }
            Happening::Status(_) | Happening::ControllerError(_) => {}
            pod => pod_step(&mut b, pod, step.at, told),
        }
    }
    if let Some(why) = &story.end.stopped {
        b.moment(Moment {
            at: story.end.at,
            kind: MomentKind::Now,
            label: "story stops".to_owned(),
            story: format!("the story stops before the Job finished: {why}"),
        });
    }
    b.build(
        format!("Job {}/{}", story.job.namespace, story.job.name),
        text::ending_line(&story.end),
        notes(story),
        story.end.at,
    )
}

/// A step of a pod's life at second `at`: a bar begun, or its story and end told.
fn pod_step(b: &mut Builder, what: &Happening, at: u64, told: impl Fn() -> String) {
    match what {
        Happening::PodCreated(c) => b.bar(Bar {
            pod: c.pod.name.clone(),
            index: c.pod.index,
            attempt: c.pod.attempt,
            number: Some(c.pod.number),
            start: at,
            end: None,
            outcome: Outcome::Running,
            rule: None,
            story: vec![told()],
        }),
        Happening::PodWaiting(w) => {
            if let Some(bar) = b.bar_of(&w.pod.name) {
                bar.story.push(told());
            }
        }
        Happening::PodDeleted(d) => {
            if let Some(bar) = b.bar_of(&d.pod.name) {
                bar.story.push(told());
                // Ended here unless its end is told later (then that end counts).
                if bar.end.is_none() {
                    bar.end = Some(at);
                    bar.outcome = Outcome::Deleted;
                }
            }
        }
        Happening::PodEnded(e) => {
            if let Some(bar) = b.bar_of(&e.pod.name) {
                bar.story.push(told());
                bar.end = Some(at);
                bar.outcome = outcome(e);
                if let Some(PolicyResult::Matched(m)) = &e.pod_failure_policy {
                    bar.rule = Some(RuleMark::new(m.rule, m.name.as_deref(), &m.action));
                }
            }
        }
        _ => {}
    }
}

/// A wait told at second `at`: back-offs after the pods they hold, and a deadline where it
/// fell, if it fell within the story (which ended at `end`).
fn waited(b: &mut Builder, w: &Waiting, at: u64, end: u64, told: impl Fn() -> String) {
    match w.cause {
        WaitCause::BackOff => {
            for pod in &w.pods {
                b.backoff(&pod.name, at, w.until, told());
            }
        }
        WaitCause::ActiveDeadline if w.until <= end => b.moment(Moment {
            at: w.until,
            kind: MomentKind::ActiveDeadline,
            label: "activeDeadlineSeconds".to_owned(),
            story: told(),
        }),
        WaitCause::ActiveDeadline | WaitCause::StartTimeout => {}
    }
}

/// A condition told at second `at`, a line across the lanes when it is one the picture
/// shows; `suspended` follows the Job's suspension, so that its end is drawn as a resumption.
fn condition(
    b: &mut Builder,
    c: &JobCondition,
    at: u64,
    suspended: &mut bool,
    told: impl Fn() -> String,
) {
    let kind = match (c.type_.as_str(), c.status.as_str()) {
        (SUCCESS_CRITERIA_MET, "True") => Some(MomentKind::SuccessCriteriaMet),
        (FAILURE_TARGET, "True") => Some(MomentKind::FailureTarget),
        (COMPLETE, "True") => Some(MomentKind::Complete),
        (FAILED, "True") => Some(MomentKind::Failed),
        (SUSPENDED, "True") => {
            *suspended = true;
            Some(MomentKind::Suspended)
        }
        (SUSPENDED, _) if *suspended => {
            *suspended = false;
            Some(MomentKind::Resumed)
        }
        _ => None,
    };
    if let Some(kind) = kind {
        let label = match kind {
            MomentKind::Resumed => "Resumed".to_owned(),
            _ => format!("{}: {}", c.type_, c.reason),
        };
        b.moment(Moment {
            at,
            kind,
            label,
            story: told(),
        });
    }
}

/// The notes under the title: who runs the Job, the scenario, how times are counted.
fn notes(story: &Story) -> Vec<String> {
    let mut notes: Vec<String> = text::who_runs_it(story)
        .lines()
        .map(str::to_owned)
        .collect();
    // The scenario's description says it for people; without one, its entries do.
    let mut scenario = text::scenario_line(story);
    if story.scenario.description.is_none() {
        for e in &story.scenario.entries {
            scenario.push_str(&format!(" {e};"));
        }
        scenario.push_str(&format!(" {}", text::scenario_default(story)));
    }
    notes.push(scenario);
    notes.push(text::TIMES.to_owned());
    notes
}

/// How an ended pod is drawn, from what its end step says.
fn outcome(e: &PodEnded) -> Outcome {
    if e.start_timed_out.is_some() {
        Outcome::StartTimeout
    } else if e.killed {
        Outcome::Deleted
    } else if e.phase == "Succeeded" {
        Outcome::Succeeded
    } else if e
        .conditions
        .iter()
        .any(|c| c.type_ == "DisruptionTarget" && c.status == "True")
    {
        Outcome::Disrupted
    } else {
        Outcome::Failed
    }
}
