//! The simulation's clock and loop. At each moment the kubelet acts (pods start, end as the
//! scenario says, deleted pods are killed) and the controller syncs until it has nothing left
//! to write, as often as that takes; then the clock jumps to the next moment anything can
//! happen: a pod's scripted end, or the end of a wait the controller asked for (a back-off, a
//! deadline). Nothing sleeps, and every loop is bounded.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::book::PodBook;
use super::observer::{Observer, PolicyView, deadline_at, wait_until};
use super::scenario::{JobShape, Scenario};
use super::story::*;
use super::{Limits, SimulationError};
use jobwarden_controller::cluster::ApiError;
use jobwarden_controller::plan::PlanConfig;
use jobwarden_fake_cluster::{InMemoryCluster, Kubelet, Outcome, Replica, meta_key};
use jobwarden_rules::JobObject;
use jobwarden_rules::pod_timing::START_TIMEOUT_ANNOTATION;
use jobwarden_rules::rule_names::effective_names;
use jobwarden_rules::seconds;
use jobwarden_rules::success_rule_settings;
use jobwarden_rules::well_known::{
    BUILT_IN_CONTROLLER_NAME, JOBWARDEN_CONTROLLER_NAME, TRACKING_FINALIZER,
};

/// Kubelet-and-controller rounds at one moment before the moment is declared unsettled, and
/// how many more each pod created in it allows (pods that end as they start take a few rounds
/// each: start, end, count, replace); the pod limit bounds the whole.
const MAX_ROUNDS_PER_MOMENT: u64 = 100;
const MORE_ROUNDS_PER_POD: u64 = 10;
/// Syncs in one round: each writes, or the round is over.
const MAX_SYNCS_PER_ROUND: usize = 1000;

/// The simulation's clock starts here: the Job is created at this instant.
pub const CLOCK_START: Timestamp = Timestamp::UNIX_EPOCH;

/// Who would run the Job; an error for another controller's Job.
fn runner(job: &Value) -> Result<Runner, SimulationError> {
    let managed_by = match job.pointer("/spec/managedBy") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(SimulationError::Invalid(format!(
                "spec.managedBy must be a string, not {other}"
            )));
        }
    };
    let controller = match managed_by.as_deref() {
        None | Some(BUILT_IN_CONTROLLER_NAME) => Controller::BuiltIn,
        Some(JOBWARDEN_CONTROLLER_NAME) => Controller::Jobwarden,
        Some(other) => return Err(SimulationError::ForeignController(other.to_owned())),
    };
    Ok(Runner {
        controller,
        managed_by,
    })
}

/// The Job as the in-memory API server is to receive it: delegated to jobwarden's controller
/// (which then plays the built-in one, when that is who would run it), without a status, and
/// with a name when the manifest only gives `generateName`.
fn as_created(job: &Value) -> Value {
    let mut job = job.clone();
    if let Some(root) = job.as_object_mut() {
        root.remove("status");
    }
    if let Some(meta) = job.get_mut("metadata").and_then(Value::as_object_mut) {
        let unnamed = meta
            .get("name")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        if unnamed && let Some(prefix) = meta.get("generateName").and_then(Value::as_str) {
            let name = format!("{prefix}abcde");
            meta.insert("name".into(), json!(name));
        }
    }
    if let Some(spec) = job.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("managedBy".into(), json!(JOBWARDEN_CONTROLLER_NAME));
    }
    job
}

fn shape(job: &JobObject<'_>) -> JobShape {
    JobShape {
        indexed: job.is_indexed().then(|| job.spec.completions.unwrap_or(0)),
        containers: job
            .template
            .spec
            .containers
            .iter()
            .map(|c| c.name.clone())
            .collect(),
        init_containers: job
            .template
            .spec
            .init_containers
            .iter()
            .map(|c| c.name.clone())
            .collect(),
        restarts_on_failure: job.template.spec.restart_policy.as_deref() == Some("OnFailure"),
    }
}

/// Plays `scenario` against `job` (a manifest, as `check` reads it) and tells the story.
pub fn simulate(
    job: &Value,
    scenario: &Scenario,
    limits: &Limits,
) -> Result<Story, SimulationError> {
    let runner = runner(job)?;
    let cluster = Arc::new(InMemoryCluster::new(CLOCK_START));
    cluster.with(|s| s.keep_history = false);
    let created = create(&cluster, job)?;
    let parsed = JobObject::parse(&created).map_err(|e| SimulationError::Invalid(e.to_string()))?;
    scenario
        .check_against(&shape(&parsed))
        .map_err(SimulationError::Scenario)?;
    let (namespace, name) = meta_key(&created);
    let policy = policy_view(&parsed, runner.controller);
    let indexed = parsed.is_indexed();
    let suspended = parsed.is_suspended();
    let completions = parsed.spec.completions;

    let config = PlanConfig {
        jobwarden_extensions: runner.controller == Controller::Jobwarden,
        ..PlanConfig::default()
    };
    let replica = Replica::start(cluster.clone(), config);
    let mut kubelet = Kubelet::new(&cluster);
    let mut observer = Observer::new(
        &cluster,
        created,
        indexed,
        policy,
        PodBook::new(scenario.clone()),
    );
    let mut run = Run {
        cluster: &cluster,
        replica,
        max_pods: limits.max_pods,
        namespace: namespace.clone(),
        name: name.clone(),
        last_error: None,
    };
    let (stopped, now) = run.play(&mut kubelet, &mut observer, limits, suspended);

    let final_status = cluster
        .with(|s| s.job(&namespace, &name))
        .and_then(|j| j.get("status").cloned())
        .unwrap_or(json!({}));
    let end = ending(&final_status, stopped, now);
    Ok(Story {
        job: JobName { namespace, name },
        completion_mode: if indexed { "Indexed" } else { "NonIndexed" }.to_owned(),
        completions,
        runner,
        scenario: ScenarioSummary {
            description: scenario.description.clone(),
            entries: scenario.entries.iter().map(|e| e.text.clone()).collect(),
            default: scenario.default.to_string(),
        },
        unused_entries: observer.book.unused_entries(),
        steps: std::mem::take(&mut observer.steps),
        end,
        final_status,
    })
}

/// The Job created in the in-memory API server, as it stored it.
fn create(cluster: &InMemoryCluster, job: &Value) -> Result<Value, SimulationError> {
    cluster
        .write(|s| s.create_job(as_created(job)))
        .map_err(|e| match e {
            ApiError::Conflict => SimulationError::Invalid(
                "metadata.name: Required value: name or generateName is required".to_owned(),
            ),
            other => SimulationError::Invalid(other.to_string()),
        })
}

/// What the observer must know of the Job's policies to tell which rule a pod matched and
/// when a success policy is achieved.
fn policy_view(parsed: &JobObject<'_>, controller: Controller) -> PolicyView {
    PolicyView {
        policy: parsed.spec.pod_failure_policy.clone(),
        rule_names: effective_names(parsed),
        when_achieved: match (&parsed.spec.success_policy, controller) {
            (Some(policy), Controller::Jobwarden) => (0..policy.rules.len())
                .map(|rule| success_rule_settings::when_achieved(parsed, rule))
                .collect(),
            _ => Vec::new(),
        },
    }
}

/// The instant `now` seconds after the clock started.
fn at_second(now: u64) -> Timestamp {
    CLOCK_START
        .checked_add(SignedDuration::from_secs(
            i64::try_from(now).unwrap_or(i64::MAX),
        ))
        .unwrap_or(CLOCK_START)
}

/// Tells a wait the controller asked for, once per cause and end.
fn tell_wait(observer: &mut Observer, told: &mut Vec<(WaitCause, u64)>, now: u64, until: u64) {
    let start_timeout = observer.job["metadata"]["annotations"][START_TIMEOUT_ANNOTATION]
        .as_str()
        .and_then(|t| seconds::parse(t).ok())
        .map(|t| t.as_secs());
    let cause = if deadline_at(&observer.job, CLOCK_START) == Some(until) {
        WaitCause::ActiveDeadline
    } else if observer.book.start_deadline_at(start_timeout, until) {
        WaitCause::StartTimeout
    } else {
        WaitCause::BackOff
    };
    if told.contains(&(cause, until)) {
        return;
    }
    told.push((cause, until));
    let pods = match cause {
        WaitCause::BackOff => observer.held_back(now, until, at_second(now)),
        WaitCause::ActiveDeadline | WaitCause::StartTimeout => Vec::new(),
    };
    observer.steps.push(Step {
        at: now,
        what: Happening::Waiting(Waiting {
            seconds: until - now,
            until,
            cause,
            pods,
        }),
    });
}

/// How the story ended, from the status it ended with.
fn ending(final_status: &Value, stopped: Option<String>, at: u64) -> End {
    let terminal = |t: &str| {
        final_status["conditions"].as_array().and_then(|cs| {
            cs.iter()
                .find(|c| c["type"] == t && c["status"] == "True")
                .map(|c| c["reason"].as_str().unwrap_or("").to_owned())
        })
    };
    let (condition, reason) = match (terminal("Complete"), terminal("Failed")) {
        (Some(r), _) => (Some("Complete".to_owned()), Some(r)),
        (None, Some(r)) => (Some("Failed".to_owned()), Some(r)),
        (None, None) => (None, None),
    };
    End {
        finished: stopped.is_none(),
        condition,
        reason,
        stopped,
        at,
    }
}

fn nothing_more(suspended: bool, running_for_ever: usize, never_starting: usize) -> String {
    if suspended {
        return "the Job is suspended (spec.suspend: true), and a scenario cannot resume it"
            .to_owned();
    }
    if never_starting > 0 {
        return format!(
            "nothing more can happen: {never_starting} pod(s) never start (the scenario says pull-error or waiting:) and the Job has no jobwarden.io/pod-start-timeout to fail them"
        );
    }
    match running_for_ever {
        0 => "nothing more can happen: no pod is left to end, and the controller waits for nothing"
            .to_owned(),
        1 => "nothing more can happen: 1 pod runs for ever (the scenario says running) and the Job waits for it".to_owned(),
        n => format!(
            "nothing more can happen: {n} pods run for ever (the scenario says running) and the Job waits for them"
        ),
    }
}

/// The controller's side of the loop.
struct Run<'c> {
    cluster: &'c Arc<InMemoryCluster>,
    replica: Replica,
    max_pods: u64,
    namespace: String,
    name: String,
    /// The last sync error told, so a repeated one is told once.
    last_error: Option<String>,
}

impl Run<'_> {
    /// The moments one after another, the clock jumping to the next at which anything can
    /// happen, until the Job is finished or nothing more can; why it stopped (`None`: it
    /// finished) and the second it stopped at.
    fn play(
        &mut self,
        kubelet: &mut Kubelet,
        observer: &mut Observer,
        limits: &Limits,
        suspended: bool,
    ) -> (Option<String>, u64) {
        let mut now: u64 = 0;
        let mut moments: usize = 0;
        let mut waits_told: Vec<(WaitCause, u64)> = Vec::new();
        let stopped: Option<String> = loop {
            let requeue = match self.moment(now, kubelet, observer) {
                Ok(r) => r,
                Err(why) => break Some(why),
            };
            if observer.finished() && !self.pods_hold_finalizers() {
                break None;
            }
            let never_starting = observer.book.never_starting();
            let wake = requeue.map(|w| wait_until(now, w)).filter(|w| *w > now);
            if let Some(until) = wake {
                tell_wait(observer, &mut waits_told, now, until);
            }
            let next = [observer.book.next_end(now), wake]
                .into_iter()
                .flatten()
                .min();
            let Some(next) = next else {
                break Some(nothing_more(
                    suspended,
                    observer.book.running_for_ever(),
                    never_starting,
                ));
            };
            if next > limits.max_time.as_secs() {
                break Some(format!(
                    "the next thing that could happen is at {}, after the limit of {} (--max-time)",
                    seconds::format(next),
                    seconds::format(limits.max_time.as_secs())
                ));
            }
            moments += 1;
            if moments > limits.max_steps {
                break Some(format!(
                    "the clock moved {} times (the limit, --max-steps)",
                    limits.max_steps
                ));
            }
            now = next;
        };
        (stopped, now)
    }

    /// Everything that happens at second `now`: kubelet and controller take turns until
    /// neither writes. Returns the wait the controller asked for last, or why the moment
    /// would not settle.
    fn moment(
        &mut self,
        now: u64,
        kubelet: &mut Kubelet,
        observer: &mut Observer,
    ) -> Result<Option<Duration>, String> {
        let at = at_second(now);
        self.cluster.write(|s| s.now = at);
        let created_before = observer.book.created();
        let mut rounds: u64 = 0;
        loop {
            let created = observer.book.created().saturating_sub(created_before);
            if rounds
                >= MAX_ROUNDS_PER_MOMENT.saturating_add(created.saturating_mul(MORE_ROUNDS_PER_POD))
            {
                return Err(format!(
                    "the pods and the controller were still changing things at {} after {rounds} rounds",
                    seconds::format(now)
                ));
            }
            rounds += 1;
            let before = observer.events_seen;
            let book = &observer.book;
            let decided = kubelet.step(|p| book.decide(p));
            for (pod, outcome) in decided {
                if outcome == Outcome::Delete {
                    observer.book.deleted_by_scenario(&pod.uid);
                }
            }
            observer.look(now);
            let requeue = self.sync_until_quiet(at, now, observer)?;
            if observer.events_seen == before {
                return Ok(requeue);
            }
        }
    }

    /// Syncs until a sync writes nothing; returns that sync's wait.
    fn sync_until_quiet(
        &mut self,
        at: Timestamp,
        now: u64,
        observer: &mut Observer,
    ) -> Result<Option<Duration>, String> {
        for _ in 0..MAX_SYNCS_PER_ROUND {
            self.replica.catch_up(0, 0);
            let Some(result) = self.replica.sync(&self.namespace, &self.name, at) else {
                return Err("the Job is gone from the controller's cache".to_owned());
            };
            let report = match result {
                Ok(report) => report,
                Err(e) if e.is_conflict() => continue,
                Err(e) => {
                    let message = jobwarden_runtime::error_chain(&e);
                    if self.last_error.as_ref() != Some(&message) {
                        self.last_error = Some(message.clone());
                        observer.steps.push(Step {
                            at: now,
                            what: Happening::ControllerError(ControllerError { message }),
                        });
                    }
                    observer.look(now);
                    return Ok(None);
                }
            };
            observer.look(now);
            if observer.book.created() > self.max_pods {
                // Checked after every sync: one moment may ask for a hundred thousand pods.
                return Err(format!(
                    "the controller created more than {} pods (the limit, --max-pods)",
                    self.max_pods
                ));
            }
            let wrote = report.status_written
                || report.created > 0
                || report.deleted > 0
                || report.finalizers_removed > 0;
            if !wrote {
                let wait = report
                    .requeue_after
                    .filter(|w| !w.is_zero() && report.skipped.is_none());
                return Ok(wait);
            }
        }
        Err(format!(
            "the controller was still writing at {} after {MAX_SYNCS_PER_ROUND} syncs",
            seconds::format(now)
        ))
    }

    fn pods_hold_finalizers(&self) -> bool {
        self.cluster.with(|s| {
            s.pods().iter().any(|p| {
                p["metadata"]["finalizers"]
                    .as_array()
                    .is_some_and(|f| f.iter().any(|f| f == TRACKING_FINALIZER))
            })
        })
    }
}
