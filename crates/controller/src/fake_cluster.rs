//! An in-memory stand-in for the API server, for tests: Jobs' status patches with the
//! resourceVersion precondition, pods with generated names, finalizers that hold deletion, and
//! a call budget after which every call fails, to simulate the controller dying mid-plan.

use std::future::ready;
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::executor::{ApiError, ClusterApi};
use crate::plan::{JobEvent, PodRef};
use crate::testing::rfc3339;
use jobwarden_rules::well_known::TRACKING_FINALIZER;

#[derive(Default)]
pub struct State {
    pub job: Value,
    pub pods: Vec<Value>,
    /// Pods the API removed, with their last state, for accounting.
    pub gone: Vec<Value>,
    pub now: i64,
    pub calls: usize,
    /// Calls left before the "controller" dies; `None` = unlimited.
    pub budget: Option<usize>,
    pub events: Vec<JobEvent>,
    /// Every status write: (Job before, Job after).
    pub status_writes: Vec<(Value, Value)>,
    next_pod: u64,
    resource_version: u64,
}

pub struct FakeCluster {
    pub state: Mutex<State>,
}

fn finalizers(pod: &Value) -> Vec<String> {
    pod["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

impl FakeCluster {
    pub fn new(mut job: Value) -> Self {
        job["metadata"]["resourceVersion"] = json!("1");
        FakeCluster {
            state: Mutex::new(State {
                job,
                resource_version: 1,
                ..Default::default()
            }),
        }
    }

    pub fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut guard)
    }

    /// Counts the call, or fails it once the budget is spent.
    fn call<R>(&self, f: impl FnOnce(&mut State) -> Result<R, ApiError>) -> Result<R, ApiError> {
        self.with(|s| {
            if s.budget == Some(0) {
                return Err(ApiError::Other("the controller died".to_owned()));
            }
            if let Some(b) = s.budget.as_mut() {
                *b -= 1;
            }
            s.calls += 1;
            f(s)
        })
    }
}

impl State {
    fn bump(&mut self) -> String {
        self.resource_version += 1;
        self.resource_version.to_string()
    }

    fn position(&self, pod: &PodRef) -> Option<usize> {
        self.pods.iter().position(|p| {
            p["metadata"]["name"] == json!(pod.name) && p["metadata"]["uid"] == json!(pod.uid)
        })
    }

    /// Removes a pod whose deletion was requested once nothing holds it.
    fn collect(&mut self, at: usize) {
        let held = self.pods.get(at).is_some_and(|p| {
            p["metadata"]["deletionTimestamp"].is_null() || !finalizers(p).is_empty()
        });
        if !held {
            let pod = self.pods.remove(at);
            self.gone.push(pod);
        }
    }

    /// The kubelet's part: a deleted pod that is not terminal ends `Failed`.
    pub fn kill_deleted_pods(&mut self) {
        let now = self.now;
        for p in self.pods.iter_mut() {
            let terminal = matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"));
            if !p["metadata"]["deletionTimestamp"].is_null() && !terminal {
                set_terminated(p, "Failed", 143, now);
            }
        }
        for at in (0..self.pods.len()).rev() {
            self.collect(at);
        }
    }
}

pub fn set_terminated(pod: &mut Value, phase: &str, code: i32, now: i64) {
    pod["status"]["phase"] = json!(phase);
    pod["status"]["containerStatuses"] = json!([{
        "name": "c", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": code, "finishedAt": rfc3339(now)}},
    }]);
}

impl ClusterApi for FakeCluster {
    fn patch_job_status(
        &self,
        _namespace: &str,
        _name: &str,
        patch: &Value,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        ready(self.call(|s| {
            if patch["metadata"]["resourceVersion"] != s.job["metadata"]["resourceVersion"] {
                return Err(ApiError::Conflict);
            }
            let before = s.job.clone();
            json_patch::merge(&mut s.job, &json!({"status": patch["status"]}));
            s.job["metadata"]["resourceVersion"] = json!(s.bump());
            s.status_writes.push((before, s.job.clone()));
            Ok(())
        }))
    }

    fn remove_pod_finalizer(
        &self,
        _namespace: &str,
        pod: &PodRef,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        ready(self.call(|s| {
            let Some(at) = s.position(pod) else {
                return Ok(());
            };
            if let Some(list) = s.pods[at]["metadata"]["finalizers"].as_array_mut() {
                list.retain(|f| f != TRACKING_FINALIZER);
            }
            s.collect(at);
            Ok(())
        }))
    }

    fn delete_pod(
        &self,
        _namespace: &str,
        pod: &PodRef,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        ready(self.call(|s| {
            let Some(at) = s.position(pod) else {
                return Ok(());
            };
            let now = rfc3339(s.now);
            let p = &mut s.pods[at];
            if p["metadata"]["deletionTimestamp"].is_null() {
                p["metadata"]["deletionTimestamp"] = json!(now);
                p["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            }
            s.collect(at);
            Ok(())
        }))
    }

    fn create_pod(
        &self,
        _namespace: &str,
        pod: &Value,
    ) -> impl Future<Output = Result<String, ApiError>> + Send {
        ready(self.call(|s| {
            s.next_pod += 1;
            let mut pod = pod.clone();
            let prefix = pod["metadata"]["generateName"]
                .as_str()
                .unwrap_or("pod-")
                .to_owned();
            let name = format!("{prefix}{}", s.next_pod);
            pod["metadata"]["name"] = json!(name);
            pod["metadata"]["uid"] = json!(format!("pod-uid-{}", s.next_pod));
            pod["metadata"]["creationTimestamp"] = json!(rfc3339(s.now));
            pod["metadata"]["annotations"]["test/ordinal"] = json!(s.next_pod.to_string());
            pod["status"] = json!({"phase": "Pending"});
            s.pods.push(pod);
            Ok(name)
        }))
    }

    fn emit_event(
        &self,
        _job: &Value,
        event: &JobEvent,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        ready(self.call(|s| {
            s.events.push(event.clone());
            Ok(())
        }))
    }
}
