//! What `explain` tells about a Job, as data: `-o json` prints it as it is (the schema is in
//! docs/cli.md, field for field), the text form is rendered from it. Times are RFC 3339, spans
//! whole seconds.

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::workers::teams::TurnView;

pub use crate::fit::{PodPlace, WorkerFit};

/// The whole story of one Job at one moment.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// When the story was told; every `…Seconds` span is counted to it.
    pub now: Timestamp,
    pub created: Option<Timestamp>,
    /// `Indexed` or `NonIndexed`.
    pub completion_mode: String,
    /// Rules in `spec.podFailurePolicy` (0 without one).
    pub pod_failure_policy_rules: usize,
    pub runner: Runner,
    /// The Job's conditions, as its status lists them.
    pub conditions: Vec<ConditionLine>,
    /// `Complete` or `Failed`, once the Job has finished.
    pub finished: Option<Finished>,
    /// Pods not yet finished (neither succeeded nor failed).
    pub active_pods: Vec<ActivePod>,
    /// Finished pods, oldest end first.
    pub finished_pods: Vec<FinishedPod>,
    /// What the Job waits for now; empty when it is finished or nothing holds it.
    pub waiting: Vec<Wait>,
    /// The per-index view, for an Indexed Job.
    pub indexes: Option<IndexView>,
    /// The Job's events, oldest first (the last [`crate::MAX_EVENTS`]).
    pub events: Vec<EventLine>,
    /// For a Job jobwarden's dispatcher runs: its worker, and its copy's story there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispatch: Option<DispatchView>,
}

/// Who runs the Job and whether it shows signs of doing so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Runner {
    /// `spec.managedBy` as stored; `None` means the built-in controller.
    pub managed_by: Option<String>,
    /// `builtIn`, `jobwarden`, `dispatcher` or `other`.
    pub controller: ControllerKind,
    /// jobwarden's Lease, for a Job jobwarden runs.
    pub lease: Option<LeaseView>,
    /// When the status was last written (the `status` entry of `managedFields`), else the
    /// latest time the status records (`startTime`, `completionTime`, a condition's
    /// transition or probe).
    pub status_changed: Option<Timestamp>,
    /// The field manager of that write (`kube-controller-manager`, jobwarden's controller
    /// name, …), when `managedFields` says.
    pub status_writer: Option<String>,
    /// The latest time a pod of the Job was created, deleted or finished.
    pub pods_changed: Option<Timestamp>,
    /// Set when the controller shows no sign of acting on the Job (`jobwarden audit`'s
    /// `stuck_delegation`).
    pub stuck: Option<Stuck>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ControllerKind {
    BuiltIn,
    Jobwarden,
    /// jobwarden's dispatcher: a copy runs on a worker cluster.
    Dispatcher,
    Other,
}

/// jobwarden's Lease as read, or why it could not be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseView {
    pub namespace: String,
    pub name: String,
    pub holder: Option<String>,
    pub renew_time: Option<Timestamp>,
    pub since_renewal_seconds: Option<u64>,
    /// The holder's renewal is older than `leaseDurationSeconds`: no replica leads.
    pub expired: bool,
    /// Why it could not be read (`forbidden`, `not found`, …); the other fields are then empty.
    pub unreadable: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stuck {
    pub managed_by: String,
    pub age_seconds: u64,
    pub after_seconds: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finished {
    /// `Complete` or `Failed`.
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub at: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActivePod {
    pub name: String,
    pub index: Option<i32>,
    /// Which pod of its index it is, from 1, among the pods left (Indexed Jobs).
    pub attempt: Option<u32>,
    pub created: Option<Timestamp>,
    /// `Pending`, `Running` or `Unknown`.
    pub phase: String,
    /// Deleted, still running its containers down.
    pub terminating: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FinishedPod {
    pub name: String,
    pub index: Option<i32>,
    /// Which pod of its index it is, from 1, among the pods left (Indexed Jobs).
    pub attempt: Option<u32>,
    pub created: Option<Timestamp>,
    /// `Succeeded` or `Failed`.
    pub phase: String,
    pub finished_at: Option<Timestamp>,
    /// It was deleted before it finished (killed).
    pub deleted: bool,
    /// Containers that exited non-zero, regular containers first.
    pub exit_codes: Vec<ExitCode>,
    /// The pod's conditions, for a failed pod (what `onPodConditions` rules match).
    pub conditions: Vec<PodCondition>,
    /// For a failed pod of a Job with a pod failure policy: the rule the controller's matcher
    /// picks; `None` when no rule matches (the failure counts) or there is no policy.
    pub rule: Option<MatchedRule>,
    /// For a failed pod: when the controller's back-off after this failure lets its
    /// replacement be created; `None` when nothing replaces it (a `FailJob` or `FailIndex`
    /// match, an index out of retries, the Job over before the back-off).
    pub backoff_until: Option<Timestamp>,
}

/// One of the Job's conditions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionLine {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: Option<String>,
    pub message: Option<String>,
    /// `lastTransitionTime`.
    pub at: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExitCode {
    pub container: String,
    pub code: i32,
    pub init: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MatchedRule {
    /// Its position in `spec.podFailurePolicy.rules`.
    pub index: usize,
    /// From `jobwarden.io/pod-failure-policy-rule-names` (or the rule's own `name`).
    pub name: Option<String>,
    /// `FailJob`, `FailIndex`, `Ignore` or `Count`.
    pub action: String,
}

/// One thing the Job waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Wait {
    /// The next pod (of `index`, under `backoffLimitPerIndex`) is held back after failures.
    #[serde(rename_all = "camelCase")]
    Backoff {
        index: Option<i32>,
        failures: u32,
        remaining_seconds: u64,
        until: Timestamp,
    },
    /// A failed pod matched a `FailJob` rule: the controller is to fail the Job, and no pod
    /// is made meanwhile.
    #[serde(rename_all = "camelCase")]
    FailJob { pod: String, rule: MatchedRule },
    /// `podReplacementPolicy: Failed`: these deleted pods are replaced only once they are
    /// terminal.
    #[serde(rename_all = "camelCase")]
    Terminating { pods: Vec<String> },
    /// A success policy rule and what it still needs.
    #[serde(rename_all = "camelCase")]
    SuccessRule {
        rule: usize,
        succeeded_indexes: Option<String>,
        succeeded_count: Option<i32>,
        /// Indexes of `succeededIndexes` (or of all) not yet succeeded.
        missing_indexes: String,
        /// How many more must succeed.
        needs: u64,
    },
    /// `activeDeadlineSeconds` counted from `startTime`.
    #[serde(rename_all = "camelCase")]
    ActiveDeadline {
        remaining_seconds: u64,
        deadline: Timestamp,
    },
    /// `spec.suspend: true`, with the `Suspended` condition's word on it.
    #[serde(rename_all = "camelCase")]
    Suspended {
        since: Option<Timestamp>,
        reason: Option<String>,
        message: Option<String>,
    },
}

/// The per-index view, each as an index list (`"0-2,7"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexView {
    pub completions: i32,
    pub succeeded: String,
    pub failed: String,
    pub running: String,
    pub backoff: String,
    /// Neither of the above: not started yet, or waiting for a pod.
    pub waiting: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventLine {
    pub at: Option<Timestamp>,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub message: String,
    pub count: i32,
    /// `reportingComponent`, else `source.component`.
    pub from: String,
}

/// A dispatched Job: where it is recorded, what happens if its worker is lost, why it waits
/// for a worker, and its copy as read from the worker.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DispatchView {
    /// The dispatcher's name (`spec.managedBy`).
    pub dispatcher: String,
    /// `jobwarden.io/worker`: the worker the Job is recorded on; `None` while it is not placed.
    pub worker: Option<String>,
    /// `jobwarden.io/workers`: the workers it may go to; empty: any.
    pub named_workers: Vec<String>,
    /// `jobwarden.io/on-worker-lost` (`Redispatch`, the default, `Wait` or `Fail`).
    pub on_worker_lost: String,
    /// The policy's `dispatch.workerLostSeconds`, when the policy could be read.
    pub worker_lost_seconds: Option<u64>,
    /// Why the policy could not be read.
    pub policy_unreadable: Option<String>,
    /// The mark `jobwarden.io/worker-lost-since`: the recorded worker does not answer.
    pub lost: Option<LostView>,
    /// The dispatcher's latest Warning Event about the Job, verbatim, while it is not placed,
    /// or its latest Event when that is a Warning, while it runs.
    pub dispatcher_said: Option<EventLine>,
    pub copy: CopyView,
    /// Not placed: each candidate worker judged now by the dispatcher's room core.
    pub fit: Vec<WorkerFit>,
    /// No Node of any candidate could ever hold one of its pods.
    pub fits_nowhere_today: bool,
    /// Placed: where its copy's unfinished pods are bound, or why the scheduler cannot bind
    /// them.
    pub copy_pods: Vec<PodPlace>,
    /// `jobwarden.io/moved-from`: the workers it left, its pods unschedulable there.
    pub moved_from: Vec<String>,
    /// Not placed, where the policy names teams: its team, its place in the fair order, and
    /// the room held.
    pub turn: Option<TurnView>,
    /// Why its turn could not be judged (the dispatcher's Jobs could not be read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_unread: Option<String>,
}

/// The recorded worker does not answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LostView {
    /// The mark, as written.
    pub mark: String,
    /// The mark read as a time (`None` when it does not read as one).
    pub since: Option<Timestamp>,
    /// Until when the Job keeps its place: the mark plus `dispatch.workerLostSeconds`.
    pub keeps_place_until: Option<Timestamp>,
    /// Seconds of that left (0 once past).
    pub remaining_seconds: Option<u64>,
}

/// The copy of a dispatched Job on its worker, as read there.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum CopyView {
    /// No worker is recorded: no copy is made before one is.
    NotPlaced,
    /// The recorded worker is this cluster (`local: true`): jobwarden's own Job controller runs
    /// the Job itself, no copy is made.
    Local,
    /// The worker was not read (the caller did not ask).
    NotRead,
    /// No kubeconfig reaches the worker: why.
    #[serde(rename_all = "camelCase")]
    NoKubeconfig { reason: String },
    /// The worker's kubeconfig is refused, as the dispatcher refuses it, and never used.
    #[serde(rename_all = "camelCase")]
    Refused {
        via: String,
        /// The refusal's label (`exec_plugin`, …), as the dispatcher's metric names it.
        reason: String,
        message: String,
    },
    /// The worker gave no answer, or refused the read.
    #[serde(rename_all = "camelCase")]
    Unreachable { via: String, reason: String },
    /// No Job of the name on the worker.
    #[serde(rename_all = "camelCase")]
    Missing {
        via: String,
        /// The dispatcher's `CopyDeleted` Event naming the worker, if any.
        deleted: Option<EventLine>,
    },
    /// A Job of the name on the worker that is not this Job's copy (someone else's).
    #[serde(rename_all = "camelCase")]
    NotTheCopy {
        via: String,
        /// Its `jobwarden.io/origin-uid`, if it has one.
        origin_uid: Option<String>,
    },
    /// The copy, its story told from its pods and events on the worker.
    #[serde(rename_all = "camelCase")]
    Read {
        via: String,
        story: Box<Explanation>,
        /// Why its pods could not be read (the story then has none).
        pods_unread: Option<String>,
        /// Why its events could not be read.
        events_unread: Option<String>,
    },
}
