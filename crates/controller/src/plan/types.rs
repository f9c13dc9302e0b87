//! What `plan` is given besides the Job and its pods (`PlanConfig`, `InFlight`) and what it
//! returns (`Plan` and its parts). Plain data.

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::api::batch::v1::JobStatus;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::backoff::{self, BackoffRecord};
use crate::pods::view::PodView;
use jobwarden_events::EventRecord;
use jobwarden_rules::pod_timing::START_TIMEOUT_CONDITION;
use jobwarden_rules::well_known::JOBWARDEN_CONTROLLER_NAME;

/// The dispatcher's local worker (the policy's `dispatch.workers[].local`): its Jobs run in
/// this cluster, by this controller, no copy made (the role MultiKueue's manager cannot take).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalDispatch {
    /// The dispatcher's `spec.managedBy` value.
    pub dispatcher: String,
    /// The local worker's name, as `jobwarden.io/worker` records it.
    pub worker: String,
}

/// Tunables of `plan`; the defaults are upstream's.
#[derive(Debug, Clone)]
pub struct PlanConfig {
    /// The `spec.managedBy` value of the Jobs this controller runs.
    pub controller_name: String,
    /// The dispatcher's Jobs this controller runs too: those placed on its local worker.
    pub local_dispatch: Option<LocalDispatch>,
    /// Upstream's `MaxPodCreateDeletePerSync`.
    pub max_pod_changes_per_sync: usize,
    /// Upstream's `MaxUncountedPods`: keeps `uncountedTerminatedPods` small.
    pub max_uncounted_pods: usize,
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// What jobwarden adds to upstream's controller, read from the Job's annotations: a
    /// `FailJob` rule fails the Job with reason `PodFailurePolicy_{name}` (KEP-4443), and each
    /// success rule has its own reason and `whenCriterionAchieved` (KEP-3998's open questions).
    /// Off, the controller is upstream's: `PodFailurePolicy`, `SuccessPolicy`, lingering pods
    /// terminated (what `simulate` shows for a Job the built-in controller runs).
    pub jobwarden_extensions: bool,
}

impl PlanConfig {
    /// Whether this controller runs the Job that names `managed_by` and is recorded on
    /// `worker`: its own, and the dispatcher's placed on the local worker.
    pub fn runs(&self, managed_by: Option<&str>, worker: Option<&str>) -> bool {
        match managed_by {
            Some(m) if m == self.controller_name => true,
            Some(m) => self
                .local_dispatch
                .as_ref()
                .is_some_and(|l| l.dispatcher == m && worker == Some(l.worker.as_str())),
            None => false,
        }
    }
}

impl Default for PlanConfig {
    fn default() -> Self {
        PlanConfig {
            controller_name: JOBWARDEN_CONTROLLER_NAME.to_owned(),
            local_dispatch: None,
            max_pod_changes_per_sync: 500,
            max_uncounted_pods: 500,
            backoff_base: backoff::DEFAULT_BACKOFF,
            backoff_max: backoff::MAX_BACKOFF,
            jobwarden_extensions: true,
        }
    }
}

/// What the controller has asked the API server for and not yet seen in its caches
/// (`expectations`), and what it remembers between syncs: `plan` must not act on a picture it
/// knows to be incomplete.
#[derive(Debug, Clone)]
pub struct InFlight {
    /// Every pod creation and deletion asked for has shown up in the pod cache (upstream's
    /// `satisfiedExpectations`). Until then no pod is created or deleted, and no new outcome
    /// or terminal condition is recorded.
    pub pods_settled: bool,
    /// Pods whose tracking finalizer is being removed: their outcome is recorded, they count
    /// as released.
    pub removing_finalizers: HashSet<String>,
    /// Pods whose deletion is under way: never asked for twice.
    pub deleting: HashSet<String>,
    /// The Job's back-off as of the last status write, as upstream's `backoffStore` keeps
    /// it; `None` when this controller has none yet (a restart, a new leader).
    pub backoff: Option<BackoffRecord>,
}

impl Default for InFlight {
    fn default() -> Self {
        InFlight {
            pods_settled: true,
            removing_finalizers: HashSet::new(),
            deleting: HashSet::new(),
            backoff: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub name: String,
    pub uid: String,
}

impl PodRef {
    pub fn of(p: &PodView<'_>) -> PodRef {
        PodRef {
            name: p.name.clone(),
            uid: p.uid.to_string(),
        }
    }
}

/// Why a pod is created, as upstream's `job_pods_creation_total` labels it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateReason {
    New,
    RecreateTerminatingOrFailed,
    RecreateFailed,
}

impl CreateReason {
    pub fn label(self) -> &'static str {
        match self {
            CreateReason::New => "new",
            CreateReason::RecreateTerminatingOrFailed => "recreate_terminating_or_failed",
            CreateReason::RecreateFailed => "recreate_failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PodCreation {
    pub index: Option<i32>,
    pub reason: CreateReason,
    /// The pod manifest to POST (built from the raw template).
    pub pod: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// `spec.suspend` became true.
    Suspended,
    /// More pods are active than wanted, or an Indexed pod has a duplicate or invalid index.
    Excess,
    /// The Job met its success criteria or is failing; what is left is terminated.
    JobFinishing,
    /// The Job had met its success criteria and let its pods run on (`Continue`,
    /// `ContinueWithRecreations`); then what would have ended a running Job (its deadline, a
    /// suspension, a failure policy) ended them instead.
    LingeringEnded,
    /// It did not start within `jobwarden.io/pod-start-timeout` and was failed first.
    StartTimedOut,
}

/// A pending pod failed for not starting in time (`jobwarden.io/pod-start-timeout`): its status
/// becomes `Failed` with the condition `jobwarden.io/PodStartTimeout`, as the pod GC controller
/// fails a pod with `DisruptionTarget`, before it is deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodStartFailure {
    pub pod: PodRef,
    /// The container's waiting reason, one of `NOT_STARTED_REASONS`: the condition's reason
    /// and the metric's label.
    pub reason: &'static str,
    pub message: String,
    pub at: Timestamp,
}

impl PodStartFailure {
    /// The pod status the failure writes: a strategic merge patch of `pods/status` (the
    /// condition merged by type), with the pod's uid as a precondition.
    pub fn status_patch(&self) -> Value {
        json!({
            "metadata": {"uid": self.pod.uid},
            "status": {
                "phase": "Failed",
                "conditions": [{
                    "type": START_TIMEOUT_CONDITION,
                    "status": "True",
                    "reason": self.reason,
                    "message": self.message,
                    "lastTransitionTime": self.at.to_string(),
                }],
            },
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodDeletion {
    pub pod: PodRef,
    pub reason: DeleteReason,
}

/// The Job reached a terminal condition in this plan's status write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finish {
    pub succeeded: bool,
    pub reason: String,
}

/// Why a plan does nothing at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// `spec.managedBy` names another controller (or none): never touch it.
    ForeignManager(Option<String>),
    UnknownCompletionMode(String),
}

/// What to do; the executor's order is in `executor.rs`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// The whole new status, when it differs from the stored one.
    pub status: Option<JobStatus>,
    /// Only pods whose outcome is already in the stored status or in `status` above (or whose
    /// outcome is not counted at all).
    pub remove_finalizers: Vec<PodRef>,
    /// Pods to fail before they are deleted (each is in `delete` too).
    pub fail: Vec<PodStartFailure>,
    pub delete: Vec<PodDeletion>,
    pub create: Vec<PodCreation>,
    pub events: Vec<EventRecord>,
    /// Look again after this long even if nothing changes (back-off, deadline, next step).
    pub requeue_after: Option<Duration>,
    pub finished: Option<Finish>,
    pub skipped: Option<Skip>,
    /// The back-off to remember once this plan's status is written.
    pub backoff: Option<BackoffRecord>,
}

impl Plan {
    /// Whether applying the plan would change nothing.
    pub fn is_noop(&self) -> bool {
        self.status.is_none()
            && self.remove_finalizers.is_empty()
            && self.delete.is_empty()
            && self.create.is_empty()
            && self.events.is_empty()
    }

    /// Look again after `after` at the latest.
    pub(super) fn requeue(&mut self, after: Option<Duration>) {
        if let Some(after) = after {
            self.requeue_after = Some(self.requeue_after.map_or(after, |d| d.min(after)));
        }
    }

    /// Adds the pods' finalizer removals, each pod once.
    pub(super) fn release(&mut self, pods: impl IntoIterator<Item = PodRef>) {
        for pod in pods {
            if !self.remove_finalizers.iter().any(|p| p.uid == pod.uid) {
                self.remove_finalizers.push(pod);
            }
        }
    }
}

pub(super) fn event(warning: bool, reason: &str, message: &str) -> EventRecord {
    EventRecord {
        warning,
        reason: reason.to_owned(),
        message: message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dispatchers_jobs_placed_on_the_local_worker_are_run_here() {
        let config = PlanConfig {
            local_dispatch: Some(LocalDispatch {
                dispatcher: "jobwarden.io/dispatcher".to_owned(),
                worker: "here".to_owned(),
            }),
            ..PlanConfig::default()
        };
        let ours = Some("jobwarden.io/job-controller");
        let dispatched = Some("jobwarden.io/dispatcher");
        for (managed_by, worker, runs) in [
            (ours, None, true),
            (ours, Some("east"), true),
            (dispatched, Some("here"), true),
            (dispatched, Some("east"), false),
            (dispatched, None, false),
            (Some("kubernetes.io/job-controller"), Some("here"), false),
            (None, Some("here"), false),
        ] {
            assert_eq!(
                config.runs(managed_by, worker),
                runs,
                "{managed_by:?} {worker:?}"
            );
        }
        // Without a local worker, only its own.
        assert!(!PlanConfig::default().runs(dispatched, Some("here")));
    }
}
