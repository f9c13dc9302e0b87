//! The Job half of the in-memory API server: create (defaults, PrepareForCreate, validation),
//! main-resource writes (status kept, generation moved by spec changes), status writes (only the
//! status taken, the resourceVersion precondition) and deletion with background propagation.

use serde_json::{Value, json};

use jobwarden_rules::{JobObject, defaults};

use super::pods::{controller_uid, pod_ref};
use super::stored::{metadata_mut, normalize, well_formed};
use super::{Change, State, key, meta_key, parse, restore_metadata, set, str_at, text};
use jobwarden_controller::cluster::ApiError;
use jobwarden_controller::plan::PodRef;

impl State {
    /// `POST .../jobs`, as kube-apiserver does it: upstream's defaults, a fresh uid (whatever the
    /// request said), PrepareForCreate (the generated selector and labels, an empty status),
    /// validation (an invalid Job is refused with the rules' messages), generation 1, a
    /// creation time and a resourceVersion.
    pub fn create_job(&mut self, mut job: Value) -> Result<Value, ApiError> {
        well_formed(&job)?;
        let (ns, name) = meta_key(&job);
        if name.is_empty() || self.jobs.contains_key(&key(&ns, &name)) {
            return Err(ApiError::Conflict);
        }
        let uid = self.next_uid("job");
        let meta = metadata_mut(&mut job).ok_or(ApiError::Conflict)?;
        meta.insert("namespace".into(), json!(ns));
        meta.insert("uid".into(), json!(uid));
        defaults::upstream_defaults(&mut job);
        defaults::prepare_for_create(&mut job);
        let errors = match JobObject::parse(&job) {
            Ok(parsed) => jobwarden_rules::validate_create(&parsed),
            Err(e) => {
                return Err(ApiError::refused(
                    400,
                    "BadRequest",
                    format!("the Job does not decode: {e}"),
                ));
            }
        };
        if !errors.is_empty() {
            let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
            return Err(ApiError::refused(
                422,
                "Invalid",
                format!("Job.batch \"{name}\" is invalid: {}", text.join(", ")),
            ));
        }
        let rv = self.next_revision();
        let now = self.now_text();
        let meta = metadata_mut(&mut job).ok_or(ApiError::Conflict)?;
        meta.insert("resourceVersion".into(), json!(rv));
        meta.insert("generation".into(), json!(1));
        meta.insert("creationTimestamp".into(), json!(now));
        normalize(&mut job);
        self.store_job(Change::Added, &job);
        Ok(job)
    }

    /// A write to the main Job resource (`PUT`/`PATCH .../jobs/NAME`), as a user makes it:
    /// `edit` may change anything, but the status stays as stored (PrepareForUpdate) and the
    /// generation moves only when the spec did.
    pub fn update_job(
        &mut self,
        namespace: &str,
        name: &str,
        edit: impl FnOnce(&mut Value),
    ) -> Result<Value, ApiError> {
        let old = self.job(namespace, name).ok_or(ApiError::NotFound)?;
        let mut new = old.clone();
        edit(&mut new);
        well_formed(&new)?;
        match old.get("status") {
            Some(status) => set(&mut new, "status", status.clone()),
            None => {
                if let Some(o) = new.as_object_mut() {
                    o.remove("status");
                }
            }
        }
        restore_metadata(
            &mut new,
            &old,
            &["uid", "namespace", "name", "creationTimestamp"],
        );
        normalize(&mut new);
        if new == old {
            return Ok(new);
        }
        if new.get("spec") != old.get("spec") {
            let generation = old["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
            new["metadata"]["generation"] = json!(generation);
        }
        new["metadata"]["resourceVersion"] = json!(self.next_revision());
        self.store_job(Change::Modified, &new);
        Ok(new)
    }

    /// `PATCH .../jobs/NAME/status` (a JSON merge patch): only the status is taken from the
    /// patched object; a `metadata.resourceVersion` in the patch is a precondition.
    pub fn patch_job_status(
        &mut self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Value, ApiError> {
        let old = self.job(namespace, name).ok_or(ApiError::NotFound)?;
        if let Some(rv) = str_at(patch, &["metadata", "resourceVersion"])
            && Some(rv) != str_at(&old, &["metadata", "resourceVersion"])
        {
            return Err(ApiError::Conflict);
        }
        let mut patched = old.clone();
        json_patch::merge(&mut patched, patch);
        well_formed(&patched)?;
        let mut new = old.clone();
        match patched.get("status") {
            Some(status) => set(&mut new, "status", status.clone()),
            None => {
                if let Some(o) = new.as_object_mut() {
                    o.remove("status");
                }
            }
        }
        normalize(&mut new);
        if new == old {
            // kube-apiserver does not write an unchanged object: no new resourceVersion.
            return Ok(new);
        }
        new["metadata"]["resourceVersion"] = json!(self.next_revision());
        if self.keep_history {
            self.status_writes.push((old, new.clone()));
        }
        self.store_job(Change::Modified, &new);
        Ok(new)
    }

    /// `DELETE .../jobs/NAME` with background propagation: the Job goes at once and the garbage
    /// collector then deletes its pods.
    pub fn delete_job(&mut self, namespace: &str, name: &str) -> Result<(), ApiError> {
        let job = self
            .jobs
            .remove(&key(namespace, name))
            .ok_or(ApiError::NotFound)?;
        let mut last = parse(&job);
        last["metadata"]["resourceVersion"] = json!(self.next_revision());
        self.job_log.push(Change::Deleted, text(&last));
        let uid = str_at(&last, &["metadata", "uid"]).unwrap_or("").to_owned();
        let owned: Vec<PodRef> = self
            .pods()
            .iter()
            .filter(|p| controller_uid(p) == Some(uid.as_str()))
            .map(pod_ref)
            .collect();
        for p in owned {
            let _ = self.delete_pod(namespace, &p);
        }
        Ok(())
    }
}
