//! Pods that hold jobwarden's tracking finalizer but whose Job can no longer record them: no Job
//! controls them any more, or their Job is gone. Upstream's `syncOrphanPod` releases them (the
//! finalizer goes, nothing is counted); so does this, with two limits: only pods this very
//! controller created (`jobwarden.io/created-by`), so one jobwarden never strips another's; and
//! a Job missing from the cache is confirmed gone with the API before anything is released, as a
//! cache may not have seen a Job its pods already show.
//!
//! [`decide`] is pure; [`judge`] reads the Job cache; [`confirm`] and [`release`] are the API
//! calls the decision leads to.

use std::sync::Arc;

use kube::runtime::reflector::{ObjectRef, Store};

use crate::cluster::ClusterApi;
use crate::plan::PodRef;
use crate::pods::CachedPod;
use jobwarden_runtime::job_cache::CachedJob;

#[derive(Debug, Clone)]
pub struct OrphanCandidate {
    pub namespace: String,
    /// The name in the pod's controller owner reference, if it has one.
    pub job_name: Option<String>,
    pub pod: Arc<CachedPod>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Orphan {
    /// Not an orphan, or not ours to release.
    Keep,
    Release,
    /// Its Job is not in the cache: ask the API server whether it exists.
    Confirm,
}

/// The decision, from what the caches know. `owner` is the cached Job of the owner reference's
/// name (whatever its uid); `owner_gone` says the controller saw that uid deleted.
pub fn decide(
    pod: &CachedPod,
    controller_name: &str,
    owner: Option<&CachedJob>,
    owner_gone: bool,
) -> Orphan {
    if !pod.has_finalizer {
        return Orphan::Keep;
    }
    // Pods made before the annotation existed are released by whichever jobwarden controller
    // finds them orphaned, as before; every newer pod only by the controller that made it.
    if pod
        .created_by
        .as_deref()
        .is_some_and(|c| c != controller_name)
    {
        return Orphan::Keep;
    }
    let Some(owner_uid) = pod.owner_uid.as_deref() else {
        return Orphan::Release;
    };
    match owner {
        // Its Job's own sync records it (or, for a finished Job, releases it).
        Some(job) if job.uid() == owner_uid => Orphan::Keep,
        _ if owner_gone => Orphan::Release,
        _ => Orphan::Confirm,
    }
}

/// [`decide`] from the Job cache: `is_gone` says whether the controller saw a Job uid deleted.
pub fn judge(
    candidate: &OrphanCandidate,
    store: &Store<CachedJob>,
    controller_name: &str,
    is_gone: impl Fn(&str) -> bool,
) -> Orphan {
    let pod = &candidate.pod;
    let owner = candidate
        .job_name
        .as_ref()
        .and_then(|name| store.get(&ObjectRef::new(name).within(&candidate.namespace)));
    let gone = pod.owner_uid.as_deref().is_some_and(is_gone);
    decide(pod, controller_name, owner.as_deref(), gone)
}

/// Whether the API server confirms that the pod's Job is gone (or is another Job now).
pub async fn confirm<A: ClusterApi>(api: &A, candidate: &OrphanCandidate) -> bool {
    let Some(name) = &candidate.job_name else {
        return true;
    };
    match api.live_job(&candidate.namespace, name).await {
        Ok(job) => job.map(|j| j.uid).as_deref() != candidate.pod.owner_uid.as_deref(),
        Err(e) => {
            tracing::warn!(pod = %candidate.pod.name, error = %e, "cannot tell whether a pod's Job is gone; keeping it");
            false
        }
    }
}

pub async fn release<A: ClusterApi>(api: &A, candidate: &OrphanCandidate) {
    let pod = PodRef {
        name: candidate.pod.name.clone(),
        uid: candidate.pod.uid.to_string(),
    };
    tracing::info!(pod = %pod.name, namespace = %candidate.namespace, "releasing a pod whose Job is gone");
    if let Err(e) = api.remove_pod_finalizer(&candidate.namespace, &pod).await {
        tracing::warn!(pod = %pod.name, error = %e, "could not release an orphaned pod");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(owner: Option<&str>, created_by: Option<&str>, finalizer: bool) -> CachedPod {
        let mut p: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "uid": "pod-uid",
                         "finalizers": if finalizer { json!(["jobwarden.io/job-tracking"]) } else { json!([]) },
                         "annotations": {}}
        }))
        .expect("pod");
        if let Some(uid) = owner {
            p.metadata.owner_references = Some(vec![serde_json::from_value(json!({
                "apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": uid, "controller": true
            })).expect("owner")]);
        }
        if let Some(c) = created_by {
            p.metadata.annotations =
                Some([("jobwarden.io/created-by".to_owned(), c.to_owned())].into());
        }
        CachedPod::from_pod(&p)
    }

    fn job(uid: &str) -> CachedJob {
        CachedJob::from_value(json!({"metadata": {"name": "j", "namespace": "ns", "uid": uid}}))
    }

    const ME: &str = "jobwarden.io/job-controller";

    #[test]
    fn decisions() {
        let j1 = job("j1");
        let cases = [
            (
                "no finalizer",
                pod(Some("j1"), Some(ME), false),
                None,
                false,
                Orphan::Keep,
            ),
            (
                "another controller's pod",
                pod(None, Some("example.com/other"), true),
                None,
                false,
                Orphan::Keep,
            ),
            (
                "no controller any more",
                pod(None, Some(ME), true),
                None,
                false,
                Orphan::Release,
            ),
            (
                "its Job is cached",
                pod(Some("j1"), Some(ME), true),
                Some(&j1),
                false,
                Orphan::Keep,
            ),
            (
                "its Job was deleted",
                pod(Some("j1"), Some(ME), true),
                None,
                true,
                Orphan::Release,
            ),
            (
                "its Job is not cached",
                pod(Some("j1"), Some(ME), true),
                None,
                false,
                Orphan::Confirm,
            ),
            (
                "another Job has the name",
                pod(Some("j0"), Some(ME), true),
                Some(&j1),
                false,
                Orphan::Confirm,
            ),
            (
                "made before the annotation",
                pod(Some("j1"), None, true),
                None,
                true,
                Orphan::Release,
            ),
        ];
        for (name, p, owner, gone, want) in cases {
            assert_eq!(decide(&p, ME, owner, gone), want, "{name}");
        }
    }
}
