//! Upstream's `getPodsForJob`: the pods a sync plans with, after adopting the pods of the Job's
//! namespace that no controller owns and that match its selector, and releasing its pods that
//! no longer match (`adoption::claim` decides; the writes are here).
//!
//! The pod cache holds only pods labelled `batch.kubernetes.io/controller-uid`, which every pod
//! matching a generated selector carries. A Job with `manualSelector: true` may match pods
//! without it, so for those rare Jobs alone the pods are also listed by the Job's own selector
//! (one labelled LIST, never a watch of every pod): at the Job's first sync by this controller
//! (it was just created, or the controller restarted or took over) and again when a sync comes
//! `RELIST_AFTER` after the last list. An adopted pod gets the uid label, so the watch follows
//! it from then on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jobwarden_rules::JobObject;
use k8s_openapi::jiff::Timestamp;

use super::adoption::{Claim, Claimant, claim};
use super::executor::ApplyError;
use crate::cluster::{ApiError, ClusterApi};
use crate::plan::PodRef;
use crate::pods::CachedPod;
use crate::pods::cache::PodCache;
use jobwarden_events::JobRef;
use jobwarden_runtime::job_cache::CachedJob;

/// How long a `manualSelector` Job's listed pods are taken as known: the resync period of
/// upstream's shared informers is of this order.
pub const RELIST_AFTER: Duration = Duration::from_secs(600);

/// When each `manualSelector` Job's pods were last listed, by Job uid.
#[derive(Debug, Default)]
pub struct SelectorLists(Mutex<HashMap<String, Timestamp>>);

impl SelectorLists {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Timestamp>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the Job's pods are to be listed now.
    pub fn due(&self, uid: &str, now: Timestamp) -> bool {
        self.lock().get(uid).is_none_or(|last| {
            now.duration_since(*last)
                .try_into()
                .is_ok_and(|d: Duration| d >= RELIST_AFTER)
        })
    }

    fn listed(&self, uid: &str, now: Timestamp) {
        self.lock().insert(uid.to_owned(), now);
    }

    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }
}

/// What claiming reads and writes through.
pub struct Claiming<'a, A> {
    pub api: &'a A,
    pub cache: &'a PodCache,
    pub lists: &'a SelectorLists,
}

impl<A: ClusterApi> Claiming<'_, A> {
    /// The Job's pods, claimed. Before the first adoption the Job is read afresh from the API
    /// server: it must still be the cached one and not being deleted (upstream's
    /// `RecheckDeletionTimestamp`). An adopted pod counts in this very sync, as upstream's
    /// claimed pods do; its watch event follows.
    pub async fn claim_pods(
        &self,
        job: &CachedJob,
        parsed: &JobObject<'_>,
        job_ref: &JobRef,
        now: Timestamp,
    ) -> Result<Vec<Arc<CachedPod>>, ApplyError> {
        let claimant = Claimant {
            uid: &job_ref.uid,
            deleting: job.metadata.deletion_timestamp.is_some(),
            selector: parsed.spec.selector.as_ref(),
        };
        let mut pods = Vec::new();
        for pod in self.cache.for_job(&job_ref.uid) {
            match claim(&claimant, &pod) {
                Claim::Keep => pods.push(pod),
                Claim::Release => {
                    tracing::info!(job = %job_ref.name, pod = %pod.name, "releasing a pod whose labels no longer match the Job's selector");
                    self.api
                        .release_pod(&job_ref.namespace, &pod_ref(&pod), &job_ref.uid)
                        .await
                        .or_else(not_found_is_released)
                        .map_err(|source| ApplyError::Api {
                            step: "releasing a pod",
                            source,
                        })?;
                }
                Claim::Adopt | Claim::Ignore => {}
            }
        }
        let mut orphans: Vec<Arc<CachedPod>> = self
            .cache
            .unowned_in(&job_ref.namespace)
            .into_iter()
            .filter(|p| claim(&claimant, p) == Claim::Adopt)
            .collect();
        for listed in self.listed_orphans(parsed, &claimant, job_ref, now).await? {
            if !orphans.iter().any(|o| o.uid == listed.uid) {
                orphans.push(Arc::new(listed));
            }
        }
        if orphans.is_empty() {
            return Ok(pods);
        }
        let live = self
            .api
            .live_job(&job_ref.namespace, &job_ref.name)
            .await
            .map_err(|source| ApplyError::Api {
                step: "reading the Job before adopting pods",
                source,
            })?;
        if live.is_none_or(|l| l.uid != job_ref.uid || l.deleting) {
            tracing::info!(job = %job_ref.name, "not adopting pods: the Job is gone, replaced or being deleted");
            return Ok(pods);
        }
        for orphan in orphans {
            match self
                .api
                .adopt_pod(&job_ref.namespace, &pod_ref(&orphan), job_ref)
                .await
            {
                Ok(()) => {
                    tracing::info!(job = %job_ref.name, pod = %orphan.name, "adopted a pod that matches the Job's selector");
                    pods.push(Arc::new(CachedPod {
                        owner_uid: Some(Arc::from(job_ref.uid.as_str())),
                        controlled: true,
                        has_finalizer: true,
                        ..(*orphan).clone()
                    }));
                }
                // Gone, changed, or taken by another controller meanwhile: not ours.
                Err(e) => {
                    tracing::info!(job = %job_ref.name, pod = %orphan.name, error = %e, "could not adopt a pod")
                }
            }
        }
        Ok(pods)
    }

    /// For a `manualSelector` Job whose list is due: the pods its selector matches that it
    /// would adopt. An empty selector (every pod of the namespace) is never listed.
    async fn listed_orphans(
        &self,
        parsed: &JobObject<'_>,
        claimant: &Claimant<'_>,
        job_ref: &JobRef,
        now: Timestamp,
    ) -> Result<Vec<CachedPod>, ApplyError> {
        let Some(selector) = parsed.spec.selector.as_ref() else {
            return Ok(Vec::new());
        };
        let empty = selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
            && selector
                .match_expressions
                .as_ref()
                .is_none_or(|e| e.is_empty());
        if parsed.spec.manual_selector != Some(true)
            || empty
            || claimant.deleting
            || !self.lists.due(&job_ref.uid, now)
        {
            return Ok(Vec::new());
        }
        let listed = self
            .api
            .list_pods(&job_ref.namespace, selector)
            .await
            .map_err(|source| ApplyError::Api {
                step: "listing the pods of a manualSelector Job",
                source,
            })?;
        self.lists.listed(&job_ref.uid, now);
        Ok(listed
            .into_iter()
            .filter(|p| claim(claimant, p) == Claim::Adopt)
            .collect())
    }
}

fn pod_ref(pod: &CachedPod) -> PodRef {
    PodRef {
        name: pod.name.clone(),
        uid: pod.uid.to_string(),
    }
}

/// A pod not found needs no release. A uid conflict is not taken for "gone" here, unlike the
/// executor's writes ([`ApiError::pod_is_gone`]): as upstream's `ReleasePod`, the sync fails
/// and the next one starts from what the caches then hold.
fn not_found_is_released(e: ApiError) -> Result<(), ApiError> {
    match e {
        ApiError::NotFound => Ok(()),
        other => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn a_job_is_listed_first_then_after_the_relist_period() {
        let lists = SelectorLists::default();
        assert!(lists.due("a", at(100)));
        lists.listed("a", at(100));
        assert!(!lists.due("a", at(100)));
        assert!(!lists.due("a", at(699)));
        assert!(lists.due("a", at(700)));
        assert!(lists.due("b", at(100)));
        lists.forget("a");
        assert!(lists.due("a", at(101)));
    }
}
