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
//!
//! Around it: the watches the controller's caches read ([`watch_jobs`], [`watch_pods`]), a
//! [`Kubelet`] that ends pods as a test or a scenario says, controller [`Replica`]s, and the
//! reconcile loop run on a virtual clock ([`run_until_finished`]). Its tests are the controller's
//! crash tests (`tests/it/crash/`: stop after every API call, start again, nothing counted twice
//! or lost), the reconcile loop's (`tests/it/reconcile_loop.rs`), and the scale benchmark
//! (`benches/scale.rs`).
//!
//! # The one fake cluster
//!
//! This is the project's fake of kube-apiserver for the controller: it stands behind the
//! controller's `ClusterApi` trait and its watch streams, in process. Two other test helpers
//! serve a different purpose and stay apart:
//!
//! * `tests/support/fake_apiserver.rs` (the binary's tests) answers HTTP on a loopback port: the
//!   `jobwarden audit` command under test is a separate process that reads a kubeconfig, pages
//!   Job LISTs with continue tokens and meets 410 Gone and 403 Forbidden, all on the wire, where
//!   no in-process `ClusterApi` can reach.
//! * `crates/server/tests/support/` is no API server at all: it makes certificates and starts
//!   jobwarden's own HTTPS server with a real TLS client.
//!
//! It stands above `jobwarden-controller`, which never imports it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use jobwarden_controller::cluster::ApiError;
use jobwarden_events::{EventRecord, JobRef};

mod api;
mod jobs;
mod kubelet;
mod loop_run;
mod pods;
mod replica;
mod stored;
#[cfg(test)]
mod tests;
mod watch;
mod watch_log;

pub use kubelet::{Kubelet, Outcome, SeenPod};
pub use loop_run::{
    LoopRunConfig, LoopRunReport, RunningLoop, World, run_until_finished, virtual_clock,
};
pub use pods::{finalizers, pod_ref, terminate};
pub use replica::Replica;
pub use stored::normalize;
pub use watch::{Lags, watch_jobs, watch_pods};
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
    /// How many identical events this one stands for (merged while they waited).
    pub count: u32,
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
                // The controller died: to it, as to any process whose connection is gone, no
                // request gets an answer any more.
                return Err(ApiError::Request(Arc::new(kube::Error::Service(Box::new(
                    std::io::Error::new(
                        std::io::ErrorKind::ConnectionAborted,
                        "the controller died",
                    ),
                )))));
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

    /// Removes a pod whose removal was given the current revision: like kube-apiserver, the
    /// DELETED event carries the deletion's resourceVersion, not the pod's last one.
    fn remove_pod(&mut self, namespace: &str, name: &str, mut last: Value) {
        self.pods.remove(&key(namespace, name));
        last["metadata"]["resourceVersion"] = json!(self.revision.to_string());
        let last = text(&last);
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

    pub fn create_event(&mut self, job: &JobRef, record: &EventRecord, count: u32) {
        let at = self.now;
        self.events.push(StoredEvent {
            job: job.clone(),
            record: record.clone(),
            at,
            count,
        });
    }
}

/// The namespace (`default` when unset) and name of an object, as the store keys it.
pub fn meta_key(v: &Value) -> (String, String) {
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
