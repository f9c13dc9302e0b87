//! An in-memory kube-apiserver for Jobs and pods, faithful where the controller could notice:
//! Go's `omitempty` (a zero `status.active` is not stored, a zero `status.ready` is), one
//! resourceVersion counter for every write, `metadata.generation` bumped on spec changes only,
//! status ignored on a main-resource write and everything but status ignored on a status write,
//! uid and resourceVersion preconditions, graceful pod deletion held by finalizers, and a watch
//! log per resource that consumers read at their own pace, so a cache can lag behind the writes.
//! It serves the tests, the scale benchmark and `jobwarden simulate`; it never sleeps.
//!
//! Objects are kept as JSON text, as etcd keeps them, so 100,000 pods cost what their text costs
//! and every read decodes like a real watch does.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use jobwarden_rules::{JobObject, defaults};

use crate::cluster_api::{ApiError, ClusterApi, EventRecord, JobRef};

mod kubelet;
mod loop_run;
mod replica;
mod stored;
mod watch;
mod watch_log;

use crate::plan::PodRef;
use jobwarden_rules::well_known::{CONTROLLER_UID_LABEL, TRACKING_FINALIZER};
pub use kubelet::{Kubelet, Outcome, SeenPod};
pub use loop_run::{LoopRunConfig, LoopRunReport, run_until_finished, virtual_clock};
pub use replica::Replica;
pub use stored::normalize;
use stored::{metadata_mut, well_formed};
pub use watch::{watch_jobs, watch_pods};
use watch_log::WatchLog;

/// A request, as the API server's audit log would count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Request {
    pub verb: &'static str,
    pub resource: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Jobs,
    Pods,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Added,
    Modified,
    Deleted,
}

/// One entry of a watch: the object as it was right after the change.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    pub change: Change,
    pub object: Arc<str>,
}

/// A core/v1 Event as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    pub job: JobRef,
    pub record: EventRecord,
    pub at: Timestamp,
}

/// Everything the in-memory API server holds. Reach it through [`InMemoryCluster::with`].
pub struct State {
    /// The cluster's clock: creation, deletion and event times are taken from it.
    pub now: Timestamp,
    jobs: BTreeMap<(String, String), Arc<str>>,
    pods: BTreeMap<(String, String), Arc<str>>,
    revision: u64,
    uids: u64,
    job_log: WatchLog,
    pod_log: WatchLog,
    /// Requests made through the `ClusterApi` and the list/watch calls, by verb and resource.
    pub requests: BTreeMap<Request, u64>,
    /// Calls left before every `ClusterApi` call fails, to simulate the controller dying
    /// mid-plan; `None` = unlimited.
    pub budget: Option<usize>,
    /// Fails every pod creation with this error, as a quota or an admission webhook would.
    pub reject_pod_creates: Option<String>,
    pub events: Vec<StoredEvent>,
    /// Every status write that changed the Job: (before, after). Kept with `keep_history`.
    pub status_writes: Vec<(Value, Value)>,
    /// The last state of every pod removed. Kept with `keep_history`.
    removed_pods: Vec<Arc<str>>,
    /// Keep `status_writes` and removed pods (tests, `simulate`); off for the scale benchmark.
    pub keep_history: bool,
}

pub struct InMemoryCluster {
    state: Mutex<State>,
    changed: tokio::sync::Notify,
}

impl Default for InMemoryCluster {
    fn default() -> Self {
        Self::new(Timestamp::UNIX_EPOCH)
    }
}

fn key(namespace: &str, name: &str) -> (String, String) {
    (namespace.to_owned(), name.to_owned())
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

fn text(v: &Value) -> Arc<str> {
    Arc::from(serde_json::to_string(v).unwrap_or_default())
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_str()
}

impl InMemoryCluster {
    pub fn new(now: Timestamp) -> Self {
        InMemoryCluster {
            state: Mutex::new(State {
                now,
                jobs: BTreeMap::new(),
                pods: BTreeMap::new(),
                revision: 0,
                uids: 0,
                job_log: WatchLog::default(),
                pod_log: WatchLog::default(),
                requests: BTreeMap::new(),
                budget: None,
                reject_pod_creates: None,
                events: Vec::new(),
                status_writes: Vec::new(),
                removed_pods: Vec::new(),
                keep_history: true,
            }),
            changed: tokio::sync::Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the cluster's state under its lock.
    pub fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.lock())
    }

    /// Resolves after the next write: enable it, look, then wait (watch streams do).
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// A `ClusterApi` call: counted, or failed once the budget is spent.
    fn call<R>(
        &self,
        request: Request,
        f: impl FnOnce(&mut State) -> Result<R, ApiError>,
    ) -> Result<R, ApiError> {
        let result = self.with(|s| {
            if s.budget == Some(0) {
                return Err(ApiError::Other("the controller died".to_owned()));
            }
            if let Some(b) = s.budget.as_mut() {
                *b -= 1;
            }
            *s.requests.entry(request).or_default() += 1;
            f(s)
        });
        self.changed.notify_waiters();
        result
    }

    /// A write that is not the controller's (a user, the kubelet, the garbage collector): not
    /// counted, never failed by the budget.
    pub fn write<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let r = self.with(f);
        self.changed.notify_waiters();
        r
    }

    /// Starts watching `resource` from now on (after a list, as an informer does).
    pub fn subscribe(&self, resource: Resource) -> u64 {
        self.with(|s| {
            let log = s.log_mut(resource);
            let id = log.next_cursor;
            log.next_cursor += 1;
            let end = log.end();
            log.cursors.insert(id, end);
            id
        })
    }

    pub fn unsubscribe(&self, resource: Resource, id: u64) {
        self.with(|s| {
            let log = s.log_mut(resource);
            log.cursors.remove(&id);
            log.compact();
        });
    }

    /// Up to `max` events the watcher `id` has not seen yet, oldest first.
    pub fn next_events(&self, resource: Resource, id: u64, max: usize) -> Vec<WatchEvent> {
        self.with(|s| {
            let log = s.log_mut(resource);
            let Some(cursor) = log.cursors.get(&id).copied() else {
                return Vec::new();
            };
            let from = usize::try_from(cursor.saturating_sub(log.offset)).unwrap_or(usize::MAX);
            let out: Vec<WatchEvent> = log.events.iter().skip(from).take(max).cloned().collect();
            log.cursors.insert(id, cursor + out.len() as u64);
            log.compact();
            out
        })
    }

    /// How many events the watcher `id` has yet to see.
    pub fn pending_events(&self, resource: Resource, id: u64) -> u64 {
        self.with(|s| {
            let log = s.log_mut(resource);
            log.cursors
                .get(&id)
                .map_or(0, |c| log.end().saturating_sub(*c))
        })
    }
}

impl State {
    fn log_mut(&mut self, resource: Resource) -> &mut WatchLog {
        match resource {
            Resource::Jobs => &mut self.job_log,
            Resource::Pods => &mut self.pod_log,
        }
    }

    fn next_revision(&mut self) -> String {
        self.revision += 1;
        self.revision.to_string()
    }

    fn next_uid(&mut self, kind: &str) -> String {
        self.uids += 1;
        format!("{kind}-{:08x}-0000-4000-8000-{:012x}", self.uids, self.uids)
    }

    fn now_text(&self) -> String {
        self.now.to_string()
    }

    fn count(&mut self, verb: &'static str, resource: &'static str) {
        *self.requests.entry(Request { verb, resource }).or_default() += 1;
    }

    /// Every Job, as one of the cluster's own components (the kubelet, a test) reads them:
    /// not counted.
    pub fn list_jobs_uncounted(&self) -> Vec<Arc<str>> {
        self.jobs.values().cloned().collect()
    }

    pub fn list_pods_uncounted(&self) -> Vec<Arc<str>> {
        self.pods.values().cloned().collect()
    }

    /// Every Job, as a list call returns them; counted as one `list jobs`.
    pub fn list_jobs(&mut self) -> Vec<Arc<str>> {
        self.count("list", "jobs");
        self.count("watch", "jobs");
        self.jobs.values().cloned().collect()
    }

    /// Every pod carrying the Job uid label, as the controller's list call returns them.
    pub fn list_pods(&mut self) -> Vec<Arc<str>> {
        self.count("list", "pods");
        self.count("watch", "pods");
        self.pods.values().cloned().collect()
    }

    pub fn job(&self, namespace: &str, name: &str) -> Option<Value> {
        self.jobs.get(&key(namespace, name)).map(|t| parse(t))
    }

    pub fn pod(&self, namespace: &str, name: &str) -> Option<Value> {
        self.pods.get(&key(namespace, name)).map(|t| parse(t))
    }

    /// Every pod, decoded, in name order.
    pub fn pods(&self) -> Vec<Value> {
        self.pods.values().map(|t| parse(t)).collect()
    }

    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// The bytes of JSON the cluster holds: what it costs the process beside the controller.
    pub fn stored_bytes(&self) -> usize {
        self.jobs
            .values()
            .chain(self.pods.values())
            .map(|t| t.len())
            .sum()
    }

    fn store_job(&mut self, change: Change, job: &Value) {
        let (ns, name) = meta_key(job);
        let t = text(job);
        self.jobs.insert(key(&ns, &name), t.clone());
        self.job_log.push(change, t);
    }

    fn store_pod(&mut self, change: Change, pod: &Value) {
        let (ns, name) = meta_key(pod);
        let t = text(pod);
        self.pods.insert(key(&ns, &name), t.clone());
        self.pod_log.push(change, t);
    }

    fn remove_pod(&mut self, namespace: &str, name: &str, last: &Value) {
        self.pods.remove(&key(namespace, name));
        let last = text(last);
        if self.keep_history {
            self.removed_pods.push(last.clone());
        }
        self.pod_log.push(Change::Deleted, last);
    }

    /// The last state of every pod there ever was: those removed (with `keep_history`), then
    /// those left.
    pub fn last_pod_states(&self) -> Vec<Value> {
        self.removed_pods
            .iter()
            .chain(self.pods.values())
            .map(|t| parse(t))
            .collect()
    }

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
            Err(e) => return Err(ApiError::Other(format!("the Job does not decode: {e}"))),
        };
        if !errors.is_empty() {
            let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
            return Err(ApiError::Other(format!(
                "Job.batch \"{name}\" is invalid: {}",
                text.join(", ")
            )));
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
        self.job_log.push(Change::Deleted, job.clone());
        let uid = str_at(&parse(&job), &["metadata", "uid"])
            .unwrap_or("")
            .to_owned();
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

    /// `POST .../pods` with `generateName`: a name, a uid, a creation time, `phase: Pending`.
    pub fn create_pod(&mut self, namespace: &str, pod: &Value) -> Result<String, ApiError> {
        if let Some(reason) = &self.reject_pod_creates {
            return Err(ApiError::Other(reason.clone()));
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
            self.remove_pod(namespace, &pod.name, &p);
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
        let mut p = self.pod(namespace, &pod.name).ok_or(ApiError::NotFound)?;
        if str_at(&p, &["metadata", "uid"]) != Some(pod.uid.as_str()) {
            return Err(ApiError::Conflict);
        }
        let before = finalizers(&p);
        let after: Vec<String> = before
            .iter()
            .filter(|f| *f != TRACKING_FINALIZER)
            .cloned()
            .collect();
        if after.len() == before.len() {
            return Ok(());
        }
        p["metadata"]["finalizers"] = json!(after);
        normalize(&mut p);
        self.next_revision();
        if self.collectable(&p) {
            self.remove_pod(namespace, &pod.name, &p);
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
            self.remove_pod(namespace, name, &p);
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

    pub fn create_event(&mut self, job: &JobRef, record: &EventRecord) {
        let at = self.now;
        self.events.push(StoredEvent {
            job: job.clone(),
            record: record.clone(),
            at,
        });
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

fn meta_key(v: &Value) -> (String, String) {
    (
        str_at(v, &["metadata", "namespace"])
            .unwrap_or("default")
            .to_owned(),
        str_at(v, &["metadata", "name"]).unwrap_or("").to_owned(),
    )
}

fn set(v: &mut Value, k: &str, value: Value) {
    if let Some(o) = v.as_object_mut() {
        o.insert(k.to_owned(), value);
    }
}

fn restore_metadata(new: &mut Value, old: &Value, keys: &[&str]) {
    for k in keys {
        match old["metadata"].get(*k) {
            Some(v) => new["metadata"][*k] = v.clone(),
            None => {
                if let Some(m) = new["metadata"].as_object_mut() {
                    m.remove(*k);
                }
            }
        }
    }
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

fn controller_uid(pod: &Value) -> Option<&str> {
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

impl ClusterApi for InMemoryCluster {
    fn patch_job_status(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        let r = self.call(
            Request {
                verb: "patch",
                resource: "jobs/status",
            },
            |s| s.patch_job_status(namespace, name, patch).map(drop),
        );
        std::future::ready(r)
    }

    fn remove_pod_finalizer(
        &self,
        namespace: &str,
        pod: &PodRef,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        let r = self.call(
            Request {
                verb: "patch",
                resource: "pods",
            },
            |s| s.remove_pod_finalizer(namespace, pod),
        );
        std::future::ready(r)
    }

    fn delete_pod(
        &self,
        namespace: &str,
        pod: &PodRef,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        let r = self.call(
            Request {
                verb: "delete",
                resource: "pods",
            },
            |s| s.delete_pod(namespace, pod),
        );
        std::future::ready(r)
    }

    fn create_pod(
        &self,
        namespace: &str,
        pod: &Value,
    ) -> impl Future<Output = Result<String, ApiError>> + Send {
        let r = self.call(
            Request {
                verb: "create",
                resource: "pods",
            },
            |s| s.create_pod(namespace, pod),
        );
        std::future::ready(r)
    }

    fn job_uid(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<String>, ApiError>> + Send {
        let r = self.call(
            Request {
                verb: "get",
                resource: "jobs",
            },
            |s| {
                Ok(s.job(namespace, name)
                    .and_then(|j| str_at(&j, &["metadata", "uid"]).map(str::to_owned)))
            },
        );
        std::future::ready(r)
    }

    fn create_event(
        &self,
        job: &JobRef,
        event: &EventRecord,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        let r = self.call(
            Request {
                verb: "create",
                resource: "events",
            },
            |s| {
                s.create_event(job, event);
                Ok(())
            },
        );
        std::future::ready(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> Value {
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns"},
            "spec": {"completions": 1, "parallelism": 1,
                     "template": {"spec": {"restartPolicy": "Never",
                                  "containers": [{"name": "main", "image": "busybox"}]}}},
            "status": {"active": 5},
        })
    }

    #[test]
    fn zero_omitempty_status_fields_are_not_stored_but_pointer_zeroes_are() {
        let c = InMemoryCluster::default();
        c.with(|s| {
            s.create_job(job()).expect("created");
            let patch = json!({"status": {
                "active": 0, "succeeded": 0, "failed": 0, "ready": 0, "terminating": 0,
                "completedIndexes": "", "failedIndexes": "", "conditions": [],
                "startTime": null,
                "uncountedTerminatedPods": {"succeeded": [], "failed": []},
            }});
            let stored = s.patch_job_status("ns", "j", &patch).expect("patched");
            assert_eq!(
                stored["status"],
                json!({"ready": 0, "terminating": 0, "failedIndexes": "",
                       "uncountedTerminatedPods": {}})
            );
            assert_eq!(
                s.job("ns", "j").expect("stored")["status"],
                stored["status"]
            );
        });
    }

    #[test]
    fn create_defaults_wipes_status_and_sets_identity() {
        let c = InMemoryCluster::default();
        let stored = c.with(|s| s.create_job(job())).expect("created");
        assert_eq!(stored["status"], json!({}));
        assert_eq!(stored["metadata"]["generation"], 1);
        assert_eq!(stored["metadata"]["resourceVersion"], "1");
        let uid = stored["metadata"]["uid"].as_str().expect("a uid");
        assert_eq!(
            stored["spec"]["selector"]["matchLabels"][CONTROLLER_UID_LABEL],
            uid
        );
        assert_eq!(
            stored["spec"]["template"]["metadata"]["labels"][CONTROLLER_UID_LABEL],
            uid
        );
        assert_eq!(stored["spec"]["backoffLimit"], 6);
        assert_eq!(
            stored["spec"]["podReplacementPolicy"],
            "TerminatingOrFailed"
        );
    }

    #[test]
    fn an_invalid_job_is_refused() {
        let c = InMemoryCluster::default();
        let mut bad = job();
        bad["spec"]["parallelism"] = json!(-1);
        let err = c.with(|s| s.create_job(bad)).expect_err("refused");
        assert!(
            err.to_string()
                .contains("spec.parallelism: Invalid value: -1"),
            "{err}"
        );
    }

    #[test]
    fn generation_moves_with_the_spec_only_and_each_write_gets_a_new_resource_version() {
        let c = InMemoryCluster::default();
        c.with(|s| {
            s.create_job(job()).expect("created");
            let labelled = s
                .update_job("ns", "j", |j| j["metadata"]["labels"] = json!({"a": "b"}))
                .expect("updated");
            assert_eq!(labelled["metadata"]["generation"], 1);
            assert_eq!(labelled["metadata"]["resourceVersion"], "2");
            let suspended = s
                .update_job("ns", "j", |j| j["spec"]["suspend"] = json!(true))
                .expect("updated");
            assert_eq!(suspended["metadata"]["generation"], 2);
            assert_eq!(suspended["metadata"]["resourceVersion"], "3");
            let status = s
                .patch_job_status("ns", "j", &json!({"status": {"active": 1}}))
                .expect("patched");
            assert_eq!(status["metadata"]["generation"], 2);
            assert_eq!(status["metadata"]["resourceVersion"], "4");
            // An unchanged object is not written again.
            let same = s
                .patch_job_status("ns", "j", &json!({"status": {"active": 1}}))
                .expect("patched");
            assert_eq!(same["metadata"]["resourceVersion"], "4");
        });
    }

    #[test]
    fn a_status_write_ignores_the_spec_and_a_spec_write_ignores_the_status() {
        let c = InMemoryCluster::default();
        c.with(|s| {
            s.create_job(job()).expect("created");
            let after = s
                .patch_job_status(
                    "ns",
                    "j",
                    &json!({"spec": {"parallelism": 9}, "status": {"active": 1}}),
                )
                .expect("patched");
            assert_eq!(after["spec"]["parallelism"], 1);
            assert_eq!(after["status"]["active"], 1);
            let after = s
                .update_job("ns", "j", |j| {
                    j["spec"]["parallelism"] = json!(2);
                    j["status"]["active"] = json!(7);
                })
                .expect("updated");
            assert_eq!(after["spec"]["parallelism"], 2);
            assert_eq!(after["status"]["active"], 1);
        });
    }

    #[test]
    fn a_stale_resource_version_is_a_conflict() {
        let c = InMemoryCluster::default();
        c.with(|s| {
            s.create_job(job()).expect("created");
            s.update_job("ns", "j", |j| j["spec"]["suspend"] = json!(true))
                .expect("updated");
            let stale = json!({"metadata": {"resourceVersion": "1"}, "status": {"active": 1}});
            assert_eq!(
                s.patch_job_status("ns", "j", &stale),
                Err(ApiError::Conflict)
            );
        });
    }

    #[test]
    fn finalizers_hold_a_deleted_pod_until_they_are_removed() {
        let c = InMemoryCluster::default();
        c.with(|s| {
            let pod = json!({"metadata": {"generateName": "j-", "finalizers": [TRACKING_FINALIZER, "other/x"]},
                             "spec": {"nodeName": "n1", "containers": [{"name": "main"}]}});
            let name = s.create_pod("ns", &pod).expect("created");
            let p = pod_ref(&s.pod("ns", &name).expect("stored"));
            let wrong = PodRef {
                name: name.clone(),
                uid: "another".into(),
            };
            assert_eq!(s.delete_pod("ns", &wrong), Err(ApiError::Conflict));
            s.delete_pod("ns", &p).expect("deleted");
            let deleting = s.pod("ns", &name).expect("still there");
            assert_eq!(deleting["metadata"]["deletionGracePeriodSeconds"], 30);
            s.finish_deleted_pod("ns", &name).expect("kubelet");
            assert_eq!(s.pod("ns", &name).expect("held")["status"]["phase"], "Failed");
            s.remove_pod_finalizer("ns", &p).expect("patched");
            let held = s.pod("ns", &name).expect("still held by the other finalizer");
            assert_eq!(finalizers(&held), ["other/x"]);
        });
    }

    #[test]
    fn watchers_see_every_change_in_order_at_their_own_pace() {
        let c = InMemoryCluster::default();
        let fast = c.subscribe(Resource::Jobs);
        let slow = c.subscribe(Resource::Jobs);
        c.with(|s| {
            s.create_job(job()).expect("created");
            s.update_job("ns", "j", |j| j["spec"]["suspend"] = json!(true))
                .expect("updated");
        });
        let got = c.next_events(Resource::Jobs, fast, 10);
        assert_eq!(
            got.iter().map(|e| e.change).collect::<Vec<_>>(),
            [Change::Added, Change::Modified]
        );
        assert_eq!(c.pending_events(Resource::Jobs, slow), 2);
        assert_eq!(c.next_events(Resource::Jobs, slow, 1).len(), 1);
        c.with(|s| s.delete_job("ns", "j")).expect("deleted");
        let rest = c.next_events(Resource::Jobs, slow, 10);
        assert_eq!(
            rest.iter().map(|e| e.change).collect::<Vec<_>>(),
            [Change::Modified, Change::Deleted]
        );
    }
}
