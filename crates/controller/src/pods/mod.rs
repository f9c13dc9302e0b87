//! What the controller keeps of a pod, and reads from it: `CachedPod` is the compact record the
//! watch cache holds (a few hundred bytes instead of the whole `Pod`), built once per watch event;
//! `PodView` is one sync's view of it, with the pod failure policy rule it matches. Pure reads;
//! a malformed field reads as "unknown", never as a panic.
//!
//! Beside it, everything of a pod's own: `failure_policy` (which rule of the Job's
//! `podFailurePolicy` a failed pod matches), `view` (above both), `cache` (the pod watch
//! cache, indexed by Job) and `template` (the pod a Job's template becomes). This file imports
//! none of them; they stand on it.

pub(crate) mod cache;
pub mod failure_policy;
pub(crate) mod template;
pub mod view;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use jobwarden_rules::pod_timing::{NOT_STARTED_REASONS, START_TIMEOUT_CONDITION};
use jobwarden_rules::well_known::{
    COMPLETION_INDEX_KEY, CREATED_BY_ANNOTATION, INDEX_FAILURE_COUNT_KEY,
    INDEX_IGNORED_FAILURE_COUNT_KEY, TRACKING_FINALIZER,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

/// A container that terminated with a non-zero exit code: all the pod failure policy's
/// `onExitCodes` ever looks at (upstream skips exit code 0 and containers still running).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitedContainer {
    pub name: Box<str>,
    pub exit_code: i32,
    pub init: bool,
}

/// A pod's labels, kept so that the pods of one Job share them: the completion index apart,
/// every pod of a Job carries the same labels, so the rest is one list the pod cache shares
/// among them (`Arc::ptr_eq` when it has), and the index is one of a few shared strings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Labels {
    /// Every label but the completion index, sorted by key.
    pub common: Arc<[(Arc<str>, Arc<str>)]>,
    /// The `batch.kubernetes.io/job-completion-index` label.
    pub index: Option<Arc<str>>,
}

impl Labels {
    /// From the labels in key order (a `BTreeMap`'s).
    pub fn new<'a>(labels: impl Iterator<Item = (&'a String, &'a String)>) -> Labels {
        let mut index = None;
        let common = labels
            .filter_map(|(k, v)| {
                if k == COMPLETION_INDEX_KEY {
                    index = Some(Arc::from(v.as_str()));
                    return None;
                }
                Some((Arc::from(k.as_str()), Arc::from(v.as_str())))
            })
            .collect();
        Labels { common, index }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        if key == COMPLETION_INDEX_KEY {
            return self.index.as_deref();
        }
        self.common
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*self.common[i].1)
    }
}

/// One pod as the cache keeps it: only what `plan` and the expectations read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedPod {
    pub name: String,
    /// Shared with the cache's index keys.
    pub uid: Arc<str>,
    /// The uid in the pod's controller owner reference, when that is a `batch/v1` Job; shared
    /// by all the Job's pods in the cache.
    pub owner_uid: Option<Arc<str>>,
    /// Some owner reference, of any kind, is its controller: such a pod is never adopted.
    pub controlled: bool,
    /// Its labels, for the Job's selector (adoption and release).
    pub labels: Labels,
    /// The controller name in `jobwarden.io/created-by`: which jobwarden controller made it.
    pub created_by: Option<Box<str>>,
    pub phase: Phase,
    pub deleting: bool,
    pub ready: bool,
    pub has_finalizer: bool,
    /// The completion index annotation, when it is a non-negative integer.
    pub index: Option<i32>,
    pub created: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    /// Container restarts, for the `OnFailure` back-off limit.
    pub restarts: i64,
    /// The index's earlier counted and ignored failures, from the per-index annotations.
    pub index_failures: i32,
    pub index_ignored_failures: i32,
    /// Regular containers first, then init containers, each in the pod's order.
    pub exited: Box<[ExitedContainer]>,
    /// `(type, status)` of each pod condition, for `onPodConditions`: kept only for a failed
    /// or deleted pod, the only ones a pod failure policy is matched against.
    pub conditions: Box<[(Box<str>, Box<str>)]>,
    /// A pending pod whose kubelet cannot start one of its containers, for the start timeout.
    pub not_started: Option<NotStarted>,
}

/// A pending pod the kubelet reports it cannot start (`jobwarden.io/pod-start-timeout`): the
/// first container, init containers first, waiting with one of `NOT_STARTED_REASONS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotStarted {
    pub container: Box<str>,
    /// One of `jobwarden_rules::pod_timing::NOT_STARTED_REASONS`.
    pub reason: &'static str,
    /// When the timeout starts counting: the pod's `PodScheduled=True` transition (the kubelet
    /// has had it since), else its creation.
    pub since: Option<Timestamp>,
}

impl CachedPod {
    pub fn from_pod(pod: &Pod) -> CachedPod {
        let meta = &pod.metadata;
        let status = pod.status.as_ref();
        let phase = match status.and_then(|s| s.phase.as_deref()) {
            Some("Pending") | None => Phase::Pending,
            Some("Running") => Phase::Running,
            Some("Succeeded") => Phase::Succeeded,
            Some("Failed") => Phase::Failed,
            Some(_) => Phase::Unknown,
        };
        let pod_conditions = status.and_then(|s| s.conditions.as_deref()).unwrap_or(&[]);
        let ready = pod_conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let deleting = meta.deletion_timestamp.is_some();
        let conditions: Box<[(Box<str>, Box<str>)]> = if phase == Phase::Failed || deleting {
            pod_conditions
                .iter()
                .map(|c| (Box::from(c.type_.as_str()), Box::from(c.status.as_str())))
                .collect()
        } else {
            Box::default()
        };
        let has_finalizer = meta
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == TRACKING_FINALIZER);
        let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key));
        let failure_count = |key: &str| annotation(key).map_or(0, |v| parse_failure_count(v));
        let containers = status
            .and_then(|s| s.container_statuses.as_deref())
            .unwrap_or(&[]);
        let inits = status
            .and_then(|s| s.init_container_statuses.as_deref())
            .unwrap_or(&[]);
        let restarts = inits
            .iter()
            .chain(containers)
            .map(|c| i64::from(c.restart_count))
            .sum();
        let exited = exited(containers, false)
            .chain(exited(inits, true))
            .collect();
        let owner_uid = meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true) && o.kind == "Job" && o.api_version == "batch/v1")
            .map(|o| Arc::from(o.uid.as_str()));
        let controlled = meta
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true));
        let labels = Labels::new(meta.labels.iter().flatten());
        CachedPod {
            name: meta.name.clone().unwrap_or_default(),
            uid: Arc::from(meta.uid.as_deref().unwrap_or_default()),
            owner_uid,
            controlled,
            labels,
            created_by: annotation(CREATED_BY_ANNOTATION).map(|v| Box::from(v.as_str())),
            phase,
            deleting,
            ready,
            has_finalizer,
            index: annotation(COMPLETION_INDEX_KEY).and_then(|v| parse_index(v)),
            created: meta.creation_timestamp.as_ref().map(|t| t.0),
            finished_at: finish_time(pod),
            restarts,
            index_failures: failure_count(INDEX_FAILURE_COUNT_KEY),
            index_ignored_failures: failure_count(INDEX_IGNORED_FAILURE_COUNT_KEY),
            exited,
            conditions,
            not_started: not_started(pod, phase, deleting, inits, containers),
        }
    }

    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key)
    }

    /// Upstream's `FilterActivePods`: not terminal and not being deleted.
    pub fn is_active(&self) -> bool {
        !self.is_terminal() && !self.deleting
    }

    pub fn is_terminal(&self) -> bool {
        matches!(self.phase, Phase::Succeeded | Phase::Failed)
    }

    /// Upstream's `IsPodTerminating`: deleted but not yet in a terminal phase.
    pub fn is_terminating(&self) -> bool {
        self.deleting && !self.is_terminal()
    }

    /// Upstream's `isPodFailed`. With `podReplacementPolicy: Failed` only a terminal failure
    /// counts; otherwise a deleted pod that did not succeed counts as failed at once, because it
    /// may never reach a terminal phase.
    pub fn is_failed(&self, only_replace_failed: bool) -> bool {
        if self.phase == Phase::Failed {
            return true;
        }
        !only_replace_failed && self.deleting && self.phase != Phase::Succeeded
    }
}

fn not_started(
    pod: &Pod,
    phase: Phase,
    deleting: bool,
    inits: &[ContainerStatus],
    containers: &[ContainerStatus],
) -> Option<NotStarted> {
    if phase != Phase::Pending || deleting {
        return None;
    }
    let (container, reason) = inits.iter().chain(containers).find_map(|c| {
        let waiting = c.state.as_ref()?.waiting.as_ref()?.reason.as_deref()?;
        let reason = NOT_STARTED_REASONS.iter().find(|r| **r == waiting)?;
        Some((Box::from(c.name.as_str()), *reason))
    })?;
    let scheduled = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or(&[])
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0);
    Some(NotStarted {
        container,
        reason,
        since: scheduled.or(pod.metadata.creation_timestamp.as_ref().map(|t| t.0)),
    })
}

fn exited(statuses: &[ContainerStatus], init: bool) -> impl Iterator<Item = ExitedContainer> {
    statuses.iter().filter_map(move |c| {
        let code = c.state.as_ref()?.terminated.as_ref()?.exit_code;
        (code != 0).then(|| ExitedContainer {
            name: Box::from(c.name.as_str()),
            exit_code: code,
            init,
        })
    })
}

/// Upstream's `getCompletionIndex`: Go's `strconv.Atoi` then a non-negative check. `+3` and `007`
/// are accepted, as there.
pub fn parse_index(s: &str) -> Option<i32> {
    let digits = s.strip_prefix('+').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<i32>().ok()
}

/// Upstream's `parseInt32` for the failure-count annotations: Go's `strconv.Atoi`, and anything
/// unreadable, negative or beyond int32 reads as 0 (a user may have edited it).
pub fn parse_failure_count(s: &str) -> i32 {
    // A negative value is 0 either way, so only the `+` sign needs reading.
    parse_index(s).unwrap_or(0)
}

/// Upstream's `getFinishedTime`, in its order: the last container to terminate; else the time the
/// pod turned not-ready; else the deletion time less the grace period; else creation.
fn finish_time(pod: &Pod) -> Option<Timestamp> {
    let status = pod.status.as_ref();
    let containers: Vec<_> = status
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .collect();
    if !containers.is_empty() {
        let ends: Option<Vec<Timestamp>> = containers
            .iter()
            .map(|c| {
                c.state
                    .as_ref()
                    .and_then(|s| s.terminated.as_ref())
                    .and_then(|t| t.finished_at.as_ref())
                    .map(|t| t.0)
            })
            .collect();
        if let Some(latest) = ends.and_then(|e| e.into_iter().max()) {
            return Some(latest);
        }
    }
    // A pod this controller failed for not starting ended when it said so (its containers
    // never terminated, and it was not ready from the start).
    let mut conditions = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten();
    let timed_out = conditions
        .clone()
        .find(|c| c.type_ == START_TIMEOUT_CONDITION && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0);
    if timed_out.is_some() {
        return timed_out;
    }
    let not_ready_since = conditions
        .find(|c| c.type_ == "Ready" && c.status == "False")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0);
    if not_ready_since.is_some() {
        return not_ready_since;
    }
    if let Some(deleted) = &pod.metadata.deletion_timestamp {
        let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
        return deleted
            .0
            .checked_sub(SignedDuration::from_secs(grace))
            .ok()
            .or(Some(deleted.0));
    }
    pod.metadata.creation_timestamp.as_ref().map(|t| t.0)
}
