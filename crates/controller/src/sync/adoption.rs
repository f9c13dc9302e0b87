//! Which pods a Job claims, as upstream's `ClaimPods` (`ControllerRefManager.ClaimObject`)
//! decides: a pod no controller owns whose labels match the Job's selector is adopted (owner
//! reference and tracking finalizer added), unless the Job or the pod is being deleted; a pod
//! the Job owns whose labels no longer match is released (our owner reference and finalizer
//! removed), unless the Job is being deleted. Pure: the writes are the caller's.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::pods::CachedPod;
use jobwarden_rules::selector;
use jobwarden_runtime::job_cache::CachedJob;

/// The Job, as far as claiming goes.
#[derive(Debug, Clone, Copy)]
pub struct Claimant<'a> {
    pub uid: &'a str,
    pub deleting: bool,
    pub selector: Option<&'a LabelSelector>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Ours, and its labels match: one of the Job's pods.
    Keep,
    /// No controller owns it and it matches: take it.
    Adopt,
    /// Ours, but its labels no longer match: let it go.
    Release,
    /// Not the Job's business (another controller's, not matching, or being deleted).
    Ignore,
}

/// The decision for one pod of the Job's namespace.
pub fn claim(job: &Claimant<'_>, pod: &CachedPod) -> Claim {
    // A selector upstream cannot convert (or none at all, which the API server never leaves)
    // decides nothing: nothing is adopted through it and nothing released because of it.
    let matches = job
        .selector
        .and_then(|s| selector::matches(Some(s), |k| pod.label(k)));
    match pod.owner_uid.as_deref() {
        Some(owner) if owner == job.uid => match matches {
            Some(false) if job.deleting => Claim::Ignore,
            Some(false) => Claim::Release,
            _ => Claim::Keep,
        },
        Some(_) => Claim::Ignore,
        None if pod.controlled || job.deleting || pod.deleting => Claim::Ignore,
        None if matches == Some(true) => Claim::Adopt,
        None => Claim::Ignore,
    }
}

/// Upstream's `getPodJobs` for a pod no controller owns: of `jobs` (the Jobs this controller
/// runs), those of the pod's namespace that would adopt it, so that its arrival wakes them as
/// upstream's `addPod` and `updatePod` do. Orphans are rare (a pod the controller made is
/// owned from its creation), so the Jobs' selectors are read only when one is seen.
pub fn adopters<'a>(
    jobs: impl IntoIterator<Item = &'a CachedJob>,
    namespace: &str,
    pod: &CachedPod,
) -> Vec<&'a CachedJob> {
    jobs.into_iter()
        .filter(|job| {
            job.namespace() == namespace
                && !job.finished
                && job.metadata.deletion_timestamp.is_none()
        })
        .filter(|job| {
            let selector = job_selector(job);
            let claimant = Claimant {
                uid: job.uid(),
                deleting: false,
                selector: selector.as_ref(),
            };
            claim(&claimant, pod) == Claim::Adopt
        })
        .collect()
}

/// The Job's `spec.selector`, read from its text.
fn job_selector(job: &CachedJob) -> Option<LabelSelector> {
    let mut value: serde_json::Value = serde_json::from_str(&job.json).ok()?;
    serde_json::from_value(value.pointer_mut("/spec/selector")?.take()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const UID: &str = "job-uid";

    fn pod(owner: Value, labels: Value, deleting: bool) -> CachedPod {
        let mut meta = json!({"name": "p", "uid": "pod-uid", "labels": labels,
                              "ownerReferences": owner});
        if deleting {
            meta["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        let pod = serde_json::from_value(json!({"metadata": meta})).expect("a pod");
        CachedPod::from_pod(&pod)
    }

    fn job_owner(uid: &str) -> Value {
        json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": uid,
                "controller": true}])
    }

    fn matching() -> Value {
        json!({"batch.kubernetes.io/controller-uid": UID, "app": "x"})
    }

    #[test]
    fn claims_as_upstream_s_controller_ref_manager() {
        let selector: LabelSelector = serde_json::from_value(
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": UID}}),
        )
        .expect("a selector");
        let replica_set = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                  "uid": "rs-uid", "controller": true}]);
        let not_controller = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "c",
                                     "uid": "c-uid"}]);
        let other_labels = json!({"batch.kubernetes.io/controller-uid": "another"});
        // (case, pod's owner references, labels, pod deleting, Job deleting, expected)
        let cases = [
            (
                "bare, matching",
                json!([]),
                matching(),
                false,
                false,
                Claim::Adopt,
            ),
            (
                "bare, owned by nothing that controls it",
                not_controller,
                matching(),
                false,
                false,
                Claim::Adopt,
            ),
            (
                "bare, not matching",
                json!([]),
                other_labels.clone(),
                false,
                false,
                Claim::Ignore,
            ),
            (
                "bare, no labels",
                json!([]),
                json!({}),
                false,
                false,
                Claim::Ignore,
            ),
            (
                "bare, being deleted",
                json!([]),
                matching(),
                true,
                false,
                Claim::Ignore,
            ),
            (
                "bare, the Job being deleted",
                json!([]),
                matching(),
                false,
                true,
                Claim::Ignore,
            ),
            (
                "another controller's",
                replica_set,
                matching(),
                false,
                false,
                Claim::Ignore,
            ),
            (
                "another Job's",
                job_owner("other"),
                matching(),
                false,
                false,
                Claim::Ignore,
            ),
            (
                "ours, matching",
                job_owner(UID),
                matching(),
                false,
                false,
                Claim::Keep,
            ),
            (
                "ours, matching, being deleted",
                job_owner(UID),
                matching(),
                true,
                false,
                Claim::Keep,
            ),
            (
                "ours, labels changed",
                job_owner(UID),
                other_labels.clone(),
                false,
                false,
                Claim::Release,
            ),
            (
                "ours, labels changed, being deleted",
                job_owner(UID),
                other_labels.clone(),
                true,
                false,
                Claim::Release,
            ),
            (
                "ours, labels changed, the Job being deleted",
                job_owner(UID),
                other_labels,
                false,
                true,
                Claim::Ignore,
            ),
        ];
        let mut wrong = Vec::new();
        for (case, owner, labels, pod_deleting, job_deleting, expected) in cases {
            let job = Claimant {
                uid: UID,
                deleting: job_deleting,
                selector: Some(&selector),
            };
            let got = claim(&job, &pod(owner, labels, pod_deleting));
            if got != expected {
                wrong.push(format!("{case}: {got:?}, expected {expected:?}"));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn a_selector_that_cannot_be_read_claims_and_releases_nothing() {
        let odd: LabelSelector = serde_json::from_value(json!({"matchExpressions": [
            {"key": "app", "operator": "Sometimes", "values": []}]}))
        .expect("a selector");
        let job = Claimant {
            uid: UID,
            deleting: false,
            selector: Some(&odd),
        };
        assert_eq!(
            claim(&job, &pod(json!([]), matching(), false)),
            Claim::Ignore
        );
        assert_eq!(
            claim(&job, &pod(job_owner(UID), json!({}), false)),
            Claim::Keep
        );
        let none = Claimant {
            selector: None,
            ..job
        };
        assert_eq!(
            claim(&none, &pod(json!([]), matching(), false)),
            Claim::Ignore
        );
    }

    #[test]
    fn an_orphan_wakes_the_jobs_of_its_namespace_that_would_adopt_it() {
        let job = |name: &str, namespace: &str, uid: &str, extra: Value| {
            let mut j = json!({"metadata": {"name": name, "namespace": namespace, "uid": uid},
                "spec": {"selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}}});
            if let (Some(j), Some(extra)) = (j.as_object_mut(), extra.as_object()) {
                j.extend(extra.clone());
            }
            CachedJob::from_value(j)
        };
        let finished = json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}});
        let jobs = [
            job("matches", "ns", UID, json!({})),
            job("elsewhere", "other", UID, json!({})),
            job("another-selector", "ns", "another", json!({})),
            job("finished", "ns", UID, finished),
            job("no-selector", "ns", UID, json!({"spec": {}})),
        ];
        let names = |pod: &CachedPod| -> Vec<String> {
            adopters(&jobs, "ns", pod)
                .iter()
                .map(|j| j.name().to_owned())
                .collect()
        };
        assert_eq!(names(&pod(json!([]), matching(), false)), ["matches"]);
        assert!(names(&pod(json!([]), json!({}), false)).is_empty());
    }
}
