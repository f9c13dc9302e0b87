//! The story of a simulated Job as data: what happened, at which second, in the order it
//! happened. `-o json` prints it as it is; `text` renders it for people. Plain values only: a
//! story never refers back to the cluster it was recorded from.

use serde::Serialize;
use serde_json::Value;

/// Everything `jobwarden simulate` has to say about one Job.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Story {
    pub job: JobName,
    /// `Indexed` or `NonIndexed`.
    pub completion_mode: String,
    /// `spec.completions` as stored (`None`: a work queue).
    pub completions: Option<i32>,
    pub runner: Runner,
    pub scenario: ScenarioSummary,
    pub steps: Vec<Step>,
    pub end: End,
    /// The Job's status as the API server stores it when the story ends.
    pub final_status: Value,
    /// Scenario entries that named no pod the controller created (a typo, or a pod that was
    /// never needed).
    pub unused_entries: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobName {
    pub namespace: String,
    pub name: String,
}

/// Which controller would run the Job, and so whose reasons the story uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Runner {
    pub controller: Controller,
    /// `spec.managedBy` as the manifest gives it.
    pub managed_by: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Controller {
    /// jobwarden's own controller: failure reasons name the pod failure policy rule.
    #[serde(rename = "jobwarden")]
    Jobwarden,
    /// The built-in Job controller: upstream's plain `PodFailurePolicy` reason.
    #[serde(rename = "built-in")]
    BuiltIn,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScenarioSummary {
    pub description: Option<String>,
    /// The entries in the order they are tried, as written.
    pub entries: Vec<String>,
    /// What becomes of a pod no entry names, in canonical form.
    pub default: String,
}

/// One thing that happened, `at` seconds after the Job was created.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub at: u64,
    #[serde(flatten)]
    pub what: Happening,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Happening {
    /// The controller created a pod.
    PodCreated(PodCreated),
    /// The kubelet cannot start one of a pod's containers (the scenario's `pull-error` or
    /// `waiting:REASON`): the pod stays `Pending`.
    PodWaiting(PodWaiting),
    /// A pod reached `Succeeded` or `Failed`.
    PodEnded(PodEnded),
    /// A pod was deleted (it then terminates, and goes once its finalizers are removed).
    PodDeleted(PodDeleted),
    /// The Job's counters changed in a status write.
    Status(Counters),
    /// A Job condition appeared or changed.
    Condition(JobCondition),
    /// The controller has nothing to do until a back-off or a deadline is over.
    Waiting(Waiting),
    /// A sync failed; the controller tries again.
    ControllerError(ControllerError),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodLabel {
    pub name: String,
    /// Position in creation order, from 0: how a NonIndexed Job's scenario names its pods.
    pub number: u64,
    /// The completion index (Indexed Jobs).
    pub index: Option<i32>,
    /// Which pod of its index this is, from 1 (Indexed Jobs).
    pub attempt: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodCreated {
    pub pod: PodLabel,
    /// The scenario entry that decides its fate; `None`: the default.
    pub scenario_entry: Option<String>,
    /// That fate, in canonical form.
    pub fate: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodWaiting {
    pub pod: PodLabel,
    pub container: String,
    /// The container's `state.waiting.reason`, such as `ImagePullBackOff`.
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodEnded {
    pub pod: PodLabel,
    /// `Succeeded` or `Failed`.
    pub phase: String,
    /// Every terminated container, regular ones first.
    pub exit_codes: Vec<ExitCode>,
    /// The pod's conditions other than `Ready`.
    pub conditions: Vec<PodCondition>,
    /// It was deleted before it ended: the kubelet killed it.
    pub killed: bool,
    /// What the Job's pod failure policy makes of it; `None` when the Job has no policy, the
    /// pod succeeded, or the Job was already finishing (unless its success rule said
    /// `ContinueWithRecreations`).
    pub pod_failure_policy: Option<PolicyResult>,
    /// It ran on after the Job met its success criteria, under this `whenCriterionAchieved`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_success_criteria: Option<String>,
    /// The controller failed it for not starting in time: its condition's message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_timed_out: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExitCode {
    pub container: String,
    pub init: bool,
    pub code: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "camelCase")]
pub enum PolicyResult {
    Matched(RuleMatch),
    NoRuleMatched,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleMatch {
    /// The rule's position in `spec.podFailurePolicy.rules`.
    pub rule: usize,
    /// Its KEP-4443 name, when it has one.
    pub name: Option<String>,
    pub action: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodDeleted {
    pub pod: PodLabel,
    pub by: Deleter,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Deleter {
    /// The scenario (`deleted`), as `kubectl delete pod` would.
    Scenario,
    /// The controller, because the Job met its success criteria or is failing.
    ControllerJobFinishing,
    /// The controller, because more pods run than the Job wants.
    ControllerExcess,
    /// The controller: the pods a met success rule let run on, ended by what would have ended
    /// a running Job (its deadline, a suspension, a failure policy).
    ControllerLingeringEnded,
    /// The controller: it did not start within `jobwarden.io/pod-start-timeout`.
    ControllerStartTimedOut,
}

/// The counters of `status`, as stored (`None`: absent).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counters {
    pub active: i64,
    pub ready: Option<i64>,
    pub terminating: Option<i64>,
    pub succeeded: i64,
    pub failed: i64,
    pub completed_indexes: Option<String>,
    pub failed_indexes: Option<String>,
    /// Pods whose outcome is recorded in `uncountedTerminatedPods`, not yet in the counters.
    pub uncounted_succeeded: usize,
    pub uncounted_failed: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
    /// For `SuccessCriteriaMet`: the met rule's `whenCriterionAchieved` when the pods still
    /// running carry on (`Continue`, `ContinueWithRecreations`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pods_carry_on: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Waiting {
    pub seconds: u64,
    /// When the controller looks again, in seconds since the Job was created.
    pub until: u64,
    pub cause: WaitCause,
    /// For a back-off: the failed pods whose replacements it holds until then.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<PodLabel>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum WaitCause {
    /// A failed pod's replacement waits for the back-off (10 s, doubling, capped).
    BackOff,
    /// `spec.activeDeadlineSeconds` falls then.
    ActiveDeadline,
    /// A pod that cannot start runs out of `jobwarden.io/pod-start-timeout` then.
    StartTimeout,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ControllerError {
    pub message: String,
}

/// How the story ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct End {
    /// `Complete=True` or `Failed=True` was written, and every pod's outcome was recorded.
    pub finished: bool,
    /// `Complete` or `Failed`, when finished.
    pub condition: Option<String>,
    pub reason: Option<String>,
    /// Why the story stopped before the Job finished.
    pub stopped: Option<String>,
    /// Seconds since the Job was created.
    pub at: u64,
}
