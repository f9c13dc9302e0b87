//! The pod half of the in-memory API server: create with `generateName`, graceful deletion held
//! by finalizers, the strategic-merge removal of jobwarden's finalizer, and the kubelet's
//! status writes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::jiff::SignedDuration;
use serde_json::{Value, json};

use super::stored::{metadata_mut, normalize, well_formed};
use super::{Change, State, key, set, str_at};
use jobwarden_controller::cluster::ApiError;
use jobwarden_controller::plan::{PodRef, PodStartFailure};
use jobwarden_events::JobRef;
use jobwarden_rules::well_known::{CONTROLLER_UID_LABEL, TRACKING_FINALIZER};

impl State {
    /// `POST .../pods` with `generateName`: a name, a uid, a creation time, `phase: Pending`.
    pub fn create_pod(&mut self, namespace: &str, pod: &Value) -> Result<String, ApiError> {
        if let Some(reason) = &self.reject_pod_creates {
            return Err(ApiError::refused(403, "Forbidden", reason.clone()));
        }
        well_formed(pod)?;
        let mut pod = pod.clone();
        let uid = self.next_uid("pod");
        let prefix = str_at(&pod, &["metadata", "generateName"]).unwrap_or("pod-");
        let name = match str_at(&pod, &["metadata", "name"]) {
            Some(n) => n.to_owned(),
            None => format!("{prefix}{}", random_suffix(self.uids)),
        };
        if self.pods.contains_key(&key(namespace, &name)) {
            return Err(ApiError::Conflict);
        }
        let rv = self.next_revision();
        let now = self.now_text();
        let meta = metadata_mut(&mut pod).ok_or(ApiError::Conflict)?;
        meta.insert("name".into(), json!(name));
        meta.insert("namespace".into(), json!(namespace));
        meta.insert("uid".into(), json!(uid));
        meta.insert("resourceVersion".into(), json!(rv));
        meta.insert("creationTimestamp".into(), json!(now));
        set(&mut pod, "status", json!({"phase": "Pending"}));
        normalize(&mut pod);
        self.store_pod(Change::Added, &pod);
        Ok(name)
    }

    /// `DELETE .../pods/NAME` with a uid precondition. A pod that is not scheduled or already
    /// terminal goes at once (grace 0); a running one gets its grace period and the kubelet
    /// finishes it. Finalizers hold the object until they are removed.
    pub fn delete_pod(&mut self, namespace: &str, pod: &PodRef) -> Result<(), ApiError> {
        let mut p = self.pod(namespace, &pod.name).ok_or(ApiError::NotFound)?;
        if str_at(&p, &["metadata", "uid"]) != Some(pod.uid.as_str()) {
            return Err(ApiError::Conflict);
        }
        if p["metadata"].get("deletionTimestamp").is_some() {
            return Ok(());
        }
        let terminal = matches!(
            str_at(&p, &["status", "phase"]),
            Some("Succeeded" | "Failed")
        );
        let scheduled = str_at(&p, &["spec", "nodeName"]).is_some();
        let grace = if terminal || !scheduled {
            0
        } else {
            p["spec"]["terminationGracePeriodSeconds"]
                .as_i64()
                .unwrap_or(30)
        };
        if grace == 0 && finalizers(&p).is_empty() {
            self.next_revision();
            self.remove_pod(namespace, &pod.name, p);
            return Ok(());
        }
        let at = self
            .now
            .checked_add(SignedDuration::from_secs(grace))
            .unwrap_or(self.now);
        p["metadata"]["deletionTimestamp"] = json!(at.to_string());
        p["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
        p["metadata"]["resourceVersion"] = json!(self.next_revision());
        self.store_pod(Change::Modified, &p);
        Ok(())
    }

    /// The strategic merge patch `$deleteFromPrimitiveList/finalizers` with the pod's uid: only
    /// our finalizer goes. A deleted pod with no finalizer left and its grace over is removed.
    pub fn remove_pod_finalizer(&mut self, namespace: &str, pod: &PodRef) -> Result<(), ApiError> {
        self.patch_pod(namespace, pod, |p| Ok(drop_tracking_finalizer(p)))
    }

    /// A labelled LIST of the namespace's pods: those `selector` matches.
    pub fn pods_matching(&self, namespace: &str, selector: &LabelSelector) -> Vec<Value> {
        self.pods()
            .into_iter()
            .filter(|p| str_at(p, &["metadata", "namespace"]) == Some(namespace))
            .filter(|p| {
                jobwarden_rules::selector::matches(Some(selector), |k| {
                    p["metadata"]["labels"][k].as_str()
                }) == Some(true)
            })
            .collect()
    }

    /// Upstream's adoption patch: the Job's controller reference (merged by uid) and the
    /// tracking finalizer, the pod's uid as a precondition, and the uid label. As
    /// kube-apiserver's validation does, a second controller reference is refused.
    pub fn adopt_pod(
        &mut self,
        namespace: &str,
        pod: &PodRef,
        job: &JobRef,
    ) -> Result<(), ApiError> {
        self.patch_pod(namespace, pod, |p| {
            let refs = owner_references(p);
            if refs
                .iter()
                .any(|r| r["controller"] == true && r["uid"] != job.uid.as_str())
            {
                return Err(ApiError::refused(
                    422,
                    "Invalid",
                    "metadata.ownerReferences: Only one reference can have Controller set to true",
                ));
            }
            let ours = json!({"apiVersion": "batch/v1", "kind": "Job", "name": job.name,
                              "uid": job.uid, "controller": true, "blockOwnerDeletion": true});
            let mut changed = false;
            if !refs.contains(&ours) {
                let mut refs: Vec<Value> = refs
                    .into_iter()
                    .filter(|r| r["uid"] != job.uid.as_str())
                    .collect();
                refs.push(ours);
                p["metadata"]["ownerReferences"] = json!(refs);
                changed = true;
            }
            let mut held = finalizers(p);
            if !held.iter().any(|f| f == TRACKING_FINALIZER) {
                held.push(TRACKING_FINALIZER.to_owned());
                p["metadata"]["finalizers"] = json!(held);
                changed = true;
            }
            if p["metadata"]["labels"][CONTROLLER_UID_LABEL] != job.uid.as_str() {
                p["metadata"]["labels"][CONTROLLER_UID_LABEL] = json!(job.uid);
                changed = true;
            }
            Ok(changed)
        })
    }

    /// Upstream's release patch (`$patch: delete` of the owner reference with the Job's
    /// uid), with the tracking finalizer removed in the same write.
    pub fn release_pod(
        &mut self,
        namespace: &str,
        pod: &PodRef,
        job_uid: &str,
    ) -> Result<(), ApiError> {
        self.patch_pod(namespace, pod, |p| {
            let refs = owner_references(p);
            let kept: Vec<Value> = refs
                .iter()
                .filter(|r| r["uid"] != job_uid)
                .cloned()
                .collect();
            let released = kept.len() != refs.len();
            if released {
                p["metadata"]["ownerReferences"] = json!(kept);
            }
            Ok(drop_tracking_finalizer(p) || released)
        })
    }

    /// The controller's strategic merge patch of `pods/status` failing a pod that did not start
    /// in time: the phase becomes `Failed` and the condition is merged by type, the pod's uid a
    /// precondition. As kube-apiserver's status validation does, a pod that succeeded cannot
    /// be made `Failed`.
    pub fn fail_pod(&mut self, namespace: &str, failure: &PodStartFailure) -> Result<(), ApiError> {
        let patch = failure.status_patch();
        self.patch_pod(namespace, &failure.pod, |p| {
            if p["status"]["phase"] == "Succeeded" {
                return Err(ApiError::refused(
                    422,
                    "Invalid",
                    "status.phase: Forbidden: cannot transition from a terminal phase",
                ));
            }
            let before = p.clone();
            p["status"]["phase"] = patch["status"]["phase"].clone();
            let mut conditions: Vec<Value> = p["status"]["conditions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for c in patch["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
            {
                conditions.retain(|old| old["type"] != c["type"]);
                conditions.push(c.clone());
            }
            p["status"]["conditions"] = json!(conditions);
            Ok(*p != before)
        })
    }

    /// A strategic merge patch of a pod with its uid as a precondition: `edit` makes the
    /// change and says whether there was one. A deleted pod with no finalizer left and its
    /// grace over is removed.
    fn patch_pod(
        &mut self,
        namespace: &str,
        pod: &PodRef,
        edit: impl FnOnce(&mut Value) -> Result<bool, ApiError>,
    ) -> Result<(), ApiError> {
        let mut p = self.pod(namespace, &pod.name).ok_or(ApiError::NotFound)?;
        if str_at(&p, &["metadata", "uid"]) != Some(pod.uid.as_str()) {
            return Err(ApiError::Conflict);
        }
        if !edit(&mut p)? {
            return Ok(());
        }
        normalize(&mut p);
        self.next_revision();
        if self.collectable(&p) {
            self.remove_pod(namespace, &pod.name, p);
            return Ok(());
        }
        p["metadata"]["resourceVersion"] = json!(self.revision.to_string());
        self.store_pod(Change::Modified, &p);
        Ok(())
    }

    fn collectable(&self, p: &Value) -> bool {
        p["metadata"].get("deletionTimestamp").is_some()
            && p["metadata"]["deletionGracePeriodSeconds"].as_i64() == Some(0)
            && finalizers(p).is_empty()
    }

    /// The kubelet's (or a test's) write to a pod: `edit` changes it as the kubelet would
    /// (phase, container statuses, conditions). A deleted pod whose grace is over and which
    /// holds no finalizer is then removed.
    pub fn kubelet_update(
        &mut self,
        namespace: &str,
        name: &str,
        edit: impl FnOnce(&mut Value),
    ) -> Result<(), ApiError> {
        let old = self.pod(namespace, name).ok_or(ApiError::NotFound)?;
        let mut p = old.clone();
        edit(&mut p);
        well_formed(&p)?;
        normalize(&mut p);
        if p == old {
            return Ok(());
        }
        self.next_revision();
        if self.collectable(&p) {
            self.remove_pod(namespace, name, p);
            return Ok(());
        }
        p["metadata"]["resourceVersion"] = json!(self.revision.to_string());
        self.store_pod(Change::Modified, &p);
        Ok(())
    }

    /// The kubelet finishing a deleted pod: a pod that did not end on its own ends `Failed`
    /// (its container killed, exit code 143), and the final delete (grace 0) follows.
    pub fn finish_deleted_pod(&mut self, namespace: &str, name: &str) -> Result<(), ApiError> {
        let now = self.now_text();
        self.kubelet_update(namespace, name, |p| {
            let terminal = matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"));
            if !terminal {
                terminate(p, "Failed", 143, &now);
            }
            p["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        })
    }
}

/// The kubelet's record of a container that ran and exited with `code`.
pub fn terminate(pod: &mut Value, phase: &str, code: i32, finished_at: &str) {
    let names: Vec<String> = pod["spec"]["containers"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let names = if names.is_empty() {
        vec!["main".to_owned()]
    } else {
        names
    };
    let statuses: Vec<Value> = names
        .iter()
        .map(|n| {
            json!({"name": n, "image": "", "imageID": "", "ready": false, "restartCount": 0,
                   "state": {"terminated": {"exitCode": code, "finishedAt": finished_at}}})
        })
        .collect();
    pod["status"]["phase"] = json!(phase);
    pod["status"]["containerStatuses"] = json!(statuses);
}

fn owner_references(pod: &Value) -> Vec<Value> {
    pod["metadata"]["ownerReferences"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Takes jobwarden's finalizer off the pod; whether it held it.
fn drop_tracking_finalizer(pod: &mut Value) -> bool {
    let before = finalizers(pod);
    let after: Vec<String> = before
        .iter()
        .filter(|f| *f != TRACKING_FINALIZER)
        .cloned()
        .collect();
    if after.len() == before.len() {
        return false;
    }
    pod["metadata"]["finalizers"] = json!(after);
    true
}

pub fn finalizers(pod: &Value) -> Vec<String> {
    pod["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn controller_uid(pod: &Value) -> Option<&str> {
    pod["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|o| o["controller"] == true)
        .and_then(|o| o["uid"].as_str())
        .or_else(|| str_at(pod, &["metadata", "labels", CONTROLLER_UID_LABEL]))
}

pub fn pod_ref(pod: &Value) -> PodRef {
    PodRef {
        name: str_at(pod, &["metadata", "name"]).unwrap_or("").to_owned(),
        uid: str_at(pod, &["metadata", "uid"]).unwrap_or("").to_owned(),
    }
}

/// Five characters as the apiserver's name generator makes them, deterministic here.
fn random_suffix(n: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (0..5)
        .map(|_| {
            let c = ALPHABET[(x % ALPHABET.len() as u64) as usize];
            x /= ALPHABET.len() as u64;
            c as char
        })
        .collect()
}
