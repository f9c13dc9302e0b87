//! Watches the in-memory cluster the way `kubectl get --watch` would and writes down what it
//! sees as story steps: pods created, deleted and ended (with the pod failure policy rule that
//! matches them), the Job's counters and conditions as each status write changes them, the
//! failed pods a back-off holds the replacements of. It keeps the book of pods the scenario
//! decides (`book`) as it goes. It only reads the cluster; the kubelet and the controller do
//! the writing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::PodFailurePolicy;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::book::PodBook;
use super::story::*;
use jobwarden_controller::plan::backoff::{DEFAULT_BACKOFF, MAX_BACKOFF};
use jobwarden_controller::plan::per_index;
use jobwarden_controller::pods::failure_policy::{Action, match_pod};
use jobwarden_controller::pods::view::PodView;
use jobwarden_controller::pods::{CachedPod, parse_index};
use jobwarden_fake_cluster::{Change, InMemoryCluster, Resource};
use jobwarden_rules::condition::{COMPLETE, FAILED, FAILURE_TARGET, SUCCESS_CRITERIA_MET};
use jobwarden_rules::indexes::IndexSet;
use jobwarden_rules::pod_timing::{NOT_STARTED_REASONS, START_TIMEOUT_CONDITION};
use jobwarden_rules::success_rule_settings::WhenAchieved;
use jobwarden_rules::well_known::COMPLETION_INDEX_KEY;

/// What the Job's policies need to be told apart: its pod failure policy with the rules'
/// names, and what each success rule does with the pods still running (empty when the
/// built-in controller runs the Job, which always terminates them).
pub(super) struct PolicyView {
    pub policy: Option<PodFailurePolicy>,
    pub rule_names: Vec<Option<String>>,
    pub when_achieved: Vec<WhenAchieved>,
}

pub(super) struct Observer {
    cluster: Arc<InMemoryCluster>,
    job_watch: u64,
    pod_watch: u64,
    namespace: String,
    indexed: bool,
    policy: PolicyView,
    pub book: PodBook,
    counters: Option<Counters>,
    conditions: BTreeMap<String, JobCondition>,
    /// The Job as last seen.
    pub job: Value,
    pub steps: Vec<Step>,
    /// Watch events read so far: unchanged between two looks means nothing was written.
    pub events_seen: u64,
}

fn true_condition(job: &Value, type_: &str) -> bool {
    job["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == type_ && c["status"] == "True")
    })
}

impl Observer {
    /// Starts watching after the Job was created.
    pub(super) fn new(
        cluster: &Arc<InMemoryCluster>,
        job: Value,
        indexed: bool,
        policy: PolicyView,
        book: PodBook,
    ) -> Observer {
        let namespace = job["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_owned();
        Observer {
            job_watch: cluster.subscribe(Resource::Jobs),
            pod_watch: cluster.subscribe(Resource::Pods),
            cluster: cluster.clone(),
            namespace,
            indexed,
            policy,
            book,
            counters: None,
            conditions: BTreeMap::new(),
            job,
            steps: Vec::new(),
            events_seen: 0,
        }
    }

    /// The Job met its success criteria or is failing (or has finished): what happens to its
    /// pods now no longer decides anything.
    pub(super) fn finishing(&self) -> bool {
        [SUCCESS_CRITERIA_MET, FAILURE_TARGET, COMPLETE, FAILED]
            .iter()
            .any(|t| true_condition(&self.job, t))
    }

    /// What the pods still running do under the success rule a `SuccessCriteriaMet` message
    /// names, when they carry on (`Continue`, `ContinueWithRecreations`).
    fn carrying_on(&self, message: &str) -> Option<WhenAchieved> {
        jobwarden_controller::plan::success_policy::rule_of_message(message)
            .and_then(|rule| self.policy.when_achieved.get(rule).copied())
            .filter(|w| *w != WhenAchieved::Terminate)
    }

    /// The pods a met success rule lets carry on, while the Job has not finished.
    fn lingering(&self) -> Option<WhenAchieved> {
        if self.finished() {
            return None;
        }
        let message = self.conditions.get(SUCCESS_CRITERIA_MET)?.message.clone();
        self.carrying_on(&message)
    }

    pub(super) fn finished(&self) -> bool {
        true_condition(&self.job, COMPLETE) || true_condition(&self.job, FAILED)
    }

    /// Reads every change since the last look, writing the steps at second `at`.
    pub(super) fn look(&mut self, at: u64) {
        let first_new = self.steps.len();
        let mut changes = Vec::new();
        for resource in [Resource::Jobs, Resource::Pods] {
            let id = match resource {
                Resource::Jobs => self.job_watch,
                Resource::Pods => self.pod_watch,
            };
            loop {
                let events = self.cluster.next_events(resource, id, 4096);
                if events.is_empty() {
                    break;
                }
                self.events_seen += events.len() as u64;
                for e in events {
                    let v: Value = serde_json::from_str(&e.object).unwrap_or(Value::Null);
                    changes.push((resource, e.change, v));
                }
            }
        }
        // Two watches, one history: the cluster's resourceVersion orders every write across
        // both (as etcd's revision does), so a pod's creation is told before the status write
        // that counts it.
        let revision = |v: &Value| {
            v["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|rv| rv.parse::<u64>().ok())
                .unwrap_or(u64::MAX)
        };
        changes.sort_by_key(|(_, _, v)| revision(v));
        for (resource, change, v) in changes {
            match resource {
                Resource::Jobs => self.job_changed(v, at),
                Resource::Pods => self.pod_changed(&v, change, at),
            }
        }
        // The controller's pod cache is a hash map, so the order it deletes several pods in
        // changes from run to run; a run of deletions is told in creation order, so that the
        // same Job and scenario always tell the same story.
        let deleted_number = |s: &Step| match &s.what {
            Happening::PodDeleted(d) => Some(d.pod.number),
            _ => None,
        };
        for run in self.steps[first_new..]
            .chunk_by_mut(|a, b| deleted_number(a).is_some() && deleted_number(b).is_some())
        {
            run.sort_by_key(|s| deleted_number(s));
        }
    }

    fn step(&mut self, at: u64, what: Happening) {
        self.steps.push(Step { at, what });
    }

    fn job_changed(&mut self, job: Value, at: u64) {
        let status = &job["status"];
        for c in status["conditions"].as_array().into_iter().flatten() {
            let text = |k: &str| c[k].as_str().unwrap_or("").to_owned();
            let now = JobCondition {
                type_: text("type"),
                status: text("status"),
                reason: text("reason"),
                message: text("message"),
                pods_carry_on: None,
            };
            if self.conditions.get(&now.type_) != Some(&now) {
                self.conditions.insert(now.type_.clone(), now.clone());
                let mut told = now;
                if told.type_ == SUCCESS_CRITERIA_MET && told.status == "True" {
                    told.pods_carry_on = self
                        .carrying_on(&told.message)
                        .map(|w| w.as_str().to_owned());
                }
                self.step(at, Happening::Condition(told));
            }
        }
        let number = |k: &str| status[k].as_i64();
        let uncounted = |k: &str| {
            status["uncountedTerminatedPods"][k]
                .as_array()
                .map_or(0, Vec::len)
        };
        let counters = Counters {
            active: number("active").unwrap_or(0),
            ready: number("ready"),
            terminating: number("terminating"),
            succeeded: number("succeeded").unwrap_or(0),
            failed: number("failed").unwrap_or(0),
            completed_indexes: self
                .indexed
                .then(|| status["completedIndexes"].as_str().unwrap_or("").to_owned()),
            failed_indexes: status["failedIndexes"].as_str().map(str::to_owned),
            uncounted_succeeded: uncounted("succeeded"),
            uncounted_failed: uncounted("failed"),
        };
        if self.counters.as_ref() != Some(&counters) {
            self.counters = Some(counters.clone());
            self.step(at, Happening::Status(counters));
        }
        self.job = job;
    }

    fn pod_changed(&mut self, pod: &Value, change: Change, at: u64) {
        let meta = &pod["metadata"];
        let uid = meta["uid"].as_str().unwrap_or("").to_owned();
        self.book_if_new(meta, &uid, at);
        let finishing = self.finishing();
        let lingering = self.lingering();
        let phase = pod["status"]["phase"].as_str().unwrap_or("Pending");
        let deleting = meta.get("deletionTimestamp").is_some();
        let by_scenario = self.book.deleted_by_scenario.contains(&uid);
        let Some(booked) = self.book.pods.get_mut(&uid) else {
            return;
        };
        let label = booked.label.clone();
        let newly_deleted = deleting && !booked.deleted;
        let newly_ended = matches!(phase, "Succeeded" | "Failed") && booked.ended_at.is_none();
        booked.deleted |= deleting;
        if newly_ended {
            booked.ended_at = Some(at);
            booked.failed = phase == "Failed";
        }
        booked.gone |= change == Change::Deleted;
        if phase == "Running" && booked.started.is_none() {
            booked.started = Some(at);
        }
        let timed_out = start_timed_out(pod);
        if phase == "Pending"
            && booked.waiting_since.is_none()
            && let Some((container, reason)) = waiting(pod)
        {
            booked.waiting_since = Some(at);
            self.step(
                at,
                Happening::PodWaiting(PodWaiting {
                    pod: label.clone(),
                    container,
                    reason,
                }),
            );
        }
        if newly_deleted {
            let by = deleter(
                by_scenario,
                timed_out.is_some(),
                lingering.is_some(),
                finishing,
            );
            self.step(
                at,
                Happening::PodDeleted(PodDeleted {
                    pod: label.clone(),
                    by,
                }),
            );
        }
        if newly_ended {
            self.tell_ended(pod, label, at, finishing, lingering);
        }
    }

    /// A pod seen for the first time is booked (its scripted fate chosen) and told created.
    fn book_if_new(&mut self, meta: &Value, uid: &str, at: u64) {
        if self.book.pods.contains_key(uid) {
            return;
        }
        let name = meta["name"].as_str().unwrap_or("");
        let index = meta["annotations"][COMPLETION_INDEX_KEY]
            .as_str()
            .and_then(parse_index);
        let created = self.book.book(uid, name, index, at);
        self.step(at, Happening::PodCreated(created));
    }

    /// A pod that has just ended: how, and the pod failure policy rule its failure matched.
    fn tell_ended(
        &mut self,
        pod: &Value,
        label: PodLabel,
        at: u64,
        finishing: bool,
        lingering: Option<WhenAchieved>,
    ) {
        let phase = pod["status"]["phase"].as_str().unwrap_or("Pending");
        let deleting = pod["metadata"].get("deletionTimestamp").is_some();
        // With `ContinueWithRecreations` the failure policies still judge the lingering pods.
        let judged = !finishing || lingering == Some(WhenAchieved::ContinueWithRecreations);
        let policy = if phase == "Failed" && judged {
            self.policy_result(pod)
        } else {
            None
        };
        self.step(
            at,
            Happening::PodEnded(PodEnded {
                pod: label,
                phase: phase.to_owned(),
                exit_codes: exit_codes(pod),
                conditions: pod_conditions(pod),
                killed: deleting,
                pod_failure_policy: policy,
                after_success_criteria: lingering
                    .filter(|_| !deleting)
                    .map(|w| w.as_str().to_owned()),
                start_timed_out: start_timed_out(pod),
            }),
        );
    }

    /// The failed pods whose replacements a back-off told now, ending at `until` (the
    /// controller's wait from `now`, at instant `at`), holds back. Under
    /// `backoffLimitPerIndex` each index backs off on its own, by the controller's own
    /// arithmetic over the pod's failure counts: only the pods whose back-off ends then.
    pub(super) fn held_back(&self, now: u64, until: u64, at: Timestamp) -> Vec<PodLabel> {
        let status = &self.job["status"];
        let completions = self.job["spec"]["completions"]
            .as_i64()
            .and_then(|c| i32::try_from(c).ok())
            .unwrap_or(0);
        let indexes =
            |k: &str| IndexSet::parse_lenient(status[k].as_str().unwrap_or(""), completions);
        let (completed, failed) = (indexes("completedIndexes"), indexes("failedIndexes"));
        let held = self
            .book
            .awaiting_replacement(|i| completed.contains(i) || failed.contains(i));
        let per_index = self.indexed && self.job["spec"]["backoffLimitPerIndex"].is_i64();
        if !per_index {
            return held.into_iter().map(|(_, label)| label.clone()).collect();
        }
        let pods = self.cluster.with(|s| s.pods());
        held.into_iter()
            .filter(|(uid, _)| {
                let Some(pod) = pods.iter().find(|p| p["metadata"]["uid"] == *uid) else {
                    return false;
                };
                let Ok(typed) = serde_json::from_value::<Pod>(pod.clone()) else {
                    return false;
                };
                let cached = CachedPod::from_pod(&typed);
                let view = PodView {
                    pod: &cached,
                    policy: self
                        .policy
                        .policy
                        .as_ref()
                        .and_then(|p| match_pod(p, &cached, &self.namespace)),
                    tracked: true,
                };
                let left = per_index::remaining(Some(&view), at, DEFAULT_BACKOFF, MAX_BACKOFF);
                wait_until(now, left) == until
            })
            .map(|(_, label)| label.clone())
            .collect()
    }

    /// The rule `plan` matches this failed pod against, with the same function.
    fn policy_result(&self, pod: &Value) -> Option<PolicyResult> {
        let policy = self.policy.policy.as_ref()?;
        let typed: Pod = serde_json::from_value(pod.clone()).ok()?;
        let cached = CachedPod::from_pod(&typed);
        Some(match match_pod(policy, &cached, &self.namespace) {
            Some(m) => PolicyResult::Matched(RuleMatch {
                rule: m.rule,
                name: self.policy.rule_names.get(m.rule).cloned().flatten(),
                action: action_name(m.action).to_owned(),
            }),
            None => PolicyResult::NoRuleMatched,
        })
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.cluster.unsubscribe(Resource::Jobs, self.job_watch);
        self.cluster.unsubscribe(Resource::Pods, self.pod_watch);
    }
}

fn action_name(a: Action) -> &'static str {
    match a {
        Action::FailJob => "FailJob",
        Action::FailIndex => "FailIndex",
        Action::Ignore => "Ignore",
        Action::Count => "Count",
    }
}

fn exit_codes(pod: &Value) -> Vec<ExitCode> {
    let read = |list: &str, init: bool| -> Vec<ExitCode> {
        pod["status"][list]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| {
                let code = c["state"]["terminated"]["exitCode"].as_i64()?;
                Some(ExitCode {
                    container: c["name"].as_str().unwrap_or("").to_owned(),
                    init,
                    code: i32::try_from(code).ok()?,
                })
            })
            .collect()
    };
    let mut codes = read("containerStatuses", false);
    codes.extend(read("initContainerStatuses", true));
    codes
}

/// Who deleted a pod: the scenario, or the controller and why.
fn deleter(by_scenario: bool, timed_out: bool, lingering: bool, finishing: bool) -> Deleter {
    if by_scenario {
        Deleter::Scenario
    } else if timed_out {
        Deleter::ControllerStartTimedOut
    } else if lingering {
        Deleter::ControllerLingeringEnded
    } else if finishing {
        Deleter::ControllerJobFinishing
    } else {
        Deleter::ControllerExcess
    }
}

/// The first container the kubelet reports waiting with a reason the start timeout counts.
fn waiting(pod: &Value) -> Option<(String, String)> {
    let statuses = |k: &str| pod["status"][k].as_array().cloned().unwrap_or_default();
    statuses("initContainerStatuses")
        .into_iter()
        .chain(statuses("containerStatuses"))
        .find_map(|c| {
            let reason = c["state"]["waiting"]["reason"].as_str()?;
            NOT_STARTED_REASONS.contains(&reason).then(|| {
                (
                    c["name"].as_str().unwrap_or("").to_owned(),
                    reason.to_owned(),
                )
            })
        })
}

/// The message of the condition the controller fails a pod with when it did not start.
fn start_timed_out(pod: &Value) -> Option<String> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == START_TIMEOUT_CONDITION && c["status"] == "True")
        .map(|c| c["message"].as_str().unwrap_or("").to_owned())
}

fn pod_conditions(pod: &Value) -> Vec<PodCondition> {
    pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        // The kubelet's own; the scheduler's only for a pod that never started.
        .filter(|c| c["type"] != "Ready" && c["type"] != "PodScheduled")
        .map(|c| PodCondition {
            type_: c["type"].as_str().unwrap_or("").to_owned(),
            status: c["status"].as_str().unwrap_or("").to_owned(),
        })
        .collect()
}

/// When the Job's `activeDeadlineSeconds` falls, in seconds since it was created.
pub(super) fn deadline_at(job: &Value, base: k8s_openapi::jiff::Timestamp) -> Option<u64> {
    let deadline = job["spec"]["activeDeadlineSeconds"].as_u64()?;
    let start: k8s_openapi::jiff::Timestamp = job["status"]["startTime"].as_str()?.parse().ok()?;
    let since = start.duration_since(base).as_secs();
    u64::try_from(since).ok()?.checked_add(deadline)
}

/// A wait the controller asked for, from the second `now`.
pub(super) fn wait_until(now: u64, wait: Duration) -> u64 {
    now.saturating_add(jobwarden_rules::seconds::ceil_secs(wait))
}
