//! What one sync knows and does not change: the Job, its pods as this sync sees them, the time,
//! the settings, what is in flight, and the facts every step reads (upstream's `syncJobCtx`,
//! less the parts later steps compute).

use std::sync::Arc;
use std::time::Duration;

use jobwarden_rules::JobObject;
use jobwarden_rules::pod_timing::{self, FailureBackoff};
use k8s_openapi::api::batch::v1::JobStatus;
use k8s_openapi::jiff::Timestamp;

use super::types::{InFlight, PlanConfig};
use crate::pods::failure_policy;
use crate::pods::template::JobIdentity;
use crate::pods::view::PodView;
use crate::pods::{CachedPod, Phase};
use jobwarden_rules::well_known::{INDEXED, NON_INDEXED, POLICY_FAILED};

pub(super) struct JobFacts<'a> {
    pub job: &'a JobObject<'a>,
    /// The pods the Job controls.
    pub pods: &'a [PodView<'a>],
    /// Whole seconds, as the API stores times.
    pub now: Timestamp,
    pub config: &'a PlanConfig,
    pub in_flight: &'a InFlight,
    pub indexed: bool,
    pub completions: Option<i32>,
    /// Upstream's `onlyReplaceFailedPods`: a terminating pod is not replaced, nor counted
    /// failed, until it is terminal.
    pub only_replace_failed: bool,
    pub suspended: bool,
    /// The Job itself is being deleted.
    pub deleting: bool,
    /// `backoffLimitPerIndex`, for Indexed Jobs that set it.
    pub per_index_limit: Option<i32>,
    /// The failure back-off: the Job's `jobwarden.io/pod-failure-backoff`, else the config's.
    pub backoff: FailureBackoff,
    /// `jobwarden.io/pod-start-timeout`.
    pub start_timeout: Option<Duration>,
}

impl<'a> JobFacts<'a> {
    /// `None` for a completion mode this controller does not know (or an Indexed Job without
    /// `completions`, which the API server never admits).
    pub fn new(
        job: &'a JobObject<'a>,
        pods: &'a [PodView<'a>],
        now: Timestamp,
        config: &'a PlanConfig,
        in_flight: &'a InFlight,
    ) -> Option<Self> {
        let mode = job.spec.completion_mode.as_deref().unwrap_or(NON_INDEXED);
        let indexed = mode == INDEXED;
        if (mode != NON_INDEXED && !indexed) || (indexed && job.spec.completions.is_none()) {
            return None;
        }
        // The apiserver defaults the policy; read it the same way when it is absent (a Job
        // stored before the field existed).
        let only_replace_failed = match job.spec.pod_replacement_policy.as_deref() {
            Some(p) => p == POLICY_FAILED,
            None => job.spec.pod_failure_policy.is_some(),
        };
        Some(JobFacts {
            job,
            pods,
            now: whole_seconds(now),
            config,
            in_flight,
            indexed,
            completions: job.spec.completions,
            only_replace_failed,
            suspended: job.is_suspended(),
            deleting: job.metadata.deletion_timestamp.is_some(),
            per_index_limit: job.spec.backoff_limit_per_index.filter(|_| indexed),
            backoff: pod_timing::failure_backoff(job)
                .filter(|_| config.jobwarden_extensions)
                .unwrap_or(FailureBackoff {
                    initial: config.backoff_base,
                    max: config.backoff_max,
                }),
            start_timeout: pod_timing::start_timeout(job).filter(|_| config.jobwarden_extensions),
        })
    }

    /// The status as stored.
    pub fn stored(&self) -> &'a JobStatus {
        &self.job.status
    }

    /// An Indexed pod counts only with an index below `completions`.
    pub fn valid_index(&self, p: &PodView<'_>) -> bool {
        !self.indexed || p.index.is_some_and(|i| i < self.completions.unwrap_or(0))
    }

    pub fn backoff_limit(&self) -> i64 {
        match self.job.spec.backoff_limit {
            Some(b) => i64::from(b),
            None if self.job.spec.backoff_limit_per_index.is_some() => i64::from(i32::MAX),
            None => 6,
        }
    }

    pub fn identity(&self) -> JobIdentity<'a> {
        JobIdentity {
            name: self.job.name(),
            namespace: self.job.metadata.namespace.as_deref().unwrap_or(""),
            uid: self.job.metadata.uid.as_deref().unwrap_or(""),
            controller_name: &self.config.controller_name,
        }
    }
}

/// The pods the Job controls, as this sync sees them: with the pod failure policy rule each
/// failed one matches, and whether its outcome is still the controller's to record.
pub(super) fn pod_views<'p>(
    job: &JobObject<'_>,
    pods: &'p [Arc<CachedPod>],
    in_flight: &InFlight,
) -> Vec<PodView<'p>> {
    let job_uid = job.metadata.uid.as_deref().unwrap_or("");
    let namespace = job.metadata.namespace.as_deref().unwrap_or("");
    let policy = job.spec.pod_failure_policy.as_ref();
    pods.iter()
        .filter(|p| p.owner_uid.as_deref() == Some(job_uid))
        .map(|p| PodView {
            pod: p,
            // Upstream matches only failed pods; those are terminal or being deleted.
            policy: policy
                .filter(|_| p.phase == Phase::Failed || p.deleting)
                .and_then(|policy| failure_policy::match_pod(policy, p, namespace)),
            tracked: p.has_finalizer && !in_flight.removing_finalizers.contains(&*p.uid),
        })
        .collect()
}

/// Timestamps are stored with whole seconds; planning with the stored precision keeps
/// `completionTime >= startTime` comparisons the same before and after a round trip.
fn whole_seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

pub(super) fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

pub(super) fn clamp(n: i64) -> i32 {
    i32::try_from(n.max(0)).unwrap_or(i32::MAX)
}
