//! Small fluent builders for tests: a Job in one line, its pods in the next. Test-only; they
//! build the JSON and typed objects the API would return, nothing more.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::pods::CachedPod;
use jobwarden_rules::pod_timing::START_TIMEOUT_CONDITION;
use jobwarden_rules::well_known::*;

pub const JOB_UID: &str = "job-uid";
/// A fixed origin so that times in tables read as small offsets.
pub const T0: i64 = 1_700_000_000;

pub fn at(offset: i64) -> Timestamp {
    Timestamp::from_second(T0 + offset).unwrap_or(Timestamp::UNIX_EPOCH)
}

pub fn rfc3339(offset: i64) -> String {
    at(offset).to_string()
}

pub struct JobBuilder {
    v: Value,
}

impl JobBuilder {
    fn base(mode: &str, completions: Option<i32>, parallelism: i32) -> Self {
        let v = json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "job", "namespace": "ns", "uid": JOB_UID, "resourceVersion": "1"},
            "spec": {
                "completions": completions,
                "parallelism": parallelism,
                "completionMode": mode,
                "backoffLimit": 6,
                "suspend": false,
                "podReplacementPolicy": POLICY_TERMINATING_OR_FAILED,
                "managedBy": JOBWARDEN_CONTROLLER_NAME,
                "template": {
                    "metadata": {"labels": {CONTROLLER_UID_LABEL: JOB_UID, JOB_NAME_LABEL: "job"}},
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
                },
            },
            "status": {},
        });
        JobBuilder { v }
    }

    pub fn non_indexed(completions: i32, parallelism: i32) -> Self {
        Self::base(NON_INDEXED, Some(completions), parallelism)
    }

    pub fn indexed(completions: i32, parallelism: i32) -> Self {
        Self::base(INDEXED, Some(completions), parallelism)
    }

    /// No `completions`: done when any pod succeeds.
    pub fn work_queue(parallelism: i32) -> Self {
        let mut b = Self::base(NON_INDEXED, None, parallelism);
        if let Some(spec) = b.v["spec"].as_object_mut() {
            spec.remove("completions");
        }
        b
    }

    fn spec(mut self, key: &str, value: Value) -> Self {
        self.v["spec"][key] = value;
        self
    }

    fn status(mut self, key: &str, value: Value) -> Self {
        self.v["status"][key] = value;
        self
    }

    pub fn managed_by(self, name: &str) -> Self {
        self.spec("managedBy", json!(name))
    }

    pub fn not_managed(mut self) -> Self {
        if let Some(spec) = self.v["spec"].as_object_mut() {
            spec.remove("managedBy");
        }
        self
    }

    pub fn suspend(self, s: bool) -> Self {
        self.spec("suspend", json!(s))
    }

    pub fn backoff_limit(self, n: i32) -> Self {
        self.spec("backoffLimit", json!(n))
    }

    pub fn deadline(self, secs: i64) -> Self {
        self.spec("activeDeadlineSeconds", json!(secs))
    }

    pub fn replace_only_failed(self) -> Self {
        self.spec("podReplacementPolicy", json!(POLICY_FAILED))
    }

    pub fn restart_on_failure(mut self) -> Self {
        self.v["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure");
        self
    }

    /// `spec.podFailurePolicy.rules`, as JSON; the apiserver's `podReplacementPolicy: Failed`
    /// default comes with it.
    pub fn pod_failure_policy(self, rules: Value) -> Self {
        self.spec("podFailurePolicy", json!({ "rules": rules }))
            .replace_only_failed()
    }

    /// One annotation, beside the others.
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        if !self.v["metadata"]["annotations"].is_object() {
            self.v["metadata"]["annotations"] = json!({});
        }
        self.v["metadata"]["annotations"][key] = json!(value);
        self
    }

    /// KEP-4443 names, in jobwarden's annotation (`None` = unnamed).
    pub fn rule_names(self, names: &[Option<&str>]) -> Self {
        let text = serde_json::to_string(names).unwrap_or_default();
        self.annotation(jobwarden_rules::rule_names::ANNOTATION, &text)
    }

    /// KEP-3998's open questions answered per success rule, in jobwarden's annotations: each
    /// rule's reason, and what its lingering pods do (`None` = the default).
    pub fn success_rule_settings(self, reasons: &[Option<&str>], when: &[Option<&str>]) -> Self {
        use jobwarden_rules::success_rule_settings::{
            REASONS_ANNOTATION, WHEN_ACHIEVED_ANNOTATION,
        };
        let text = |list: &[Option<&str>]| serde_json::to_string(list).unwrap_or_default();
        self.annotation(REASONS_ANNOTATION, &text(reasons))
            .annotation(WHEN_ACHIEVED_ANNOTATION, &text(when))
    }

    pub fn backoff_limit_per_index(self, n: i32) -> Self {
        self.spec("backoffLimitPerIndex", json!(n))
            .spec("backoffLimit", json!(i32::MAX))
    }

    pub fn max_failed_indexes(self, n: i32) -> Self {
        self.spec("maxFailedIndexes", json!(n))
    }

    /// One `spec.successPolicy` rule per `(succeededIndexes, succeededCount)`.
    pub fn success_rules(self, rules: &[(Option<&str>, Option<i32>)]) -> Self {
        let rules: Vec<Value> = rules
            .iter()
            .map(|(i, c)| {
                let mut r = json!({});
                if let Some(i) = i {
                    r["succeededIndexes"] = json!(i);
                }
                if let Some(c) = c {
                    r["succeededCount"] = json!(c);
                }
                r
            })
            .collect();
        self.spec("successPolicy", json!({ "rules": rules }))
    }

    pub fn failed_indexes(self, s: &str) -> Self {
        self.status("failedIndexes", json!(s))
    }

    pub fn completion_mode(self, mode: &str) -> Self {
        self.spec("completionMode", json!(mode))
    }

    pub fn started(self, offset: i64) -> Self {
        self.status("startTime", json!(rfc3339(offset)))
    }

    pub fn active(self, n: i32) -> Self {
        self.status("active", json!(n))
    }

    pub fn ready(self, n: i32) -> Self {
        self.status("ready", json!(n))
    }

    pub fn terminating(self, n: i32) -> Self {
        self.status("terminating", json!(n))
    }

    pub fn succeeded(self, n: i32) -> Self {
        self.status("succeeded", json!(n))
    }

    pub fn failed(self, n: i32) -> Self {
        self.status("failed", json!(n))
    }

    pub fn completed_indexes(self, s: &str) -> Self {
        self.status("completedIndexes", json!(s))
    }

    pub fn uncounted(self, succeeded: &[&str], failed: &[&str]) -> Self {
        let uids =
            |names: &[&str]| -> Vec<String> { names.iter().map(|n| format!("uid-{n}")).collect() };
        self.status(
            "uncountedTerminatedPods",
            json!({"succeeded": uids(succeeded), "failed": uids(failed)}),
        )
    }

    pub fn condition(self, type_: &str, status: &str, reason: &str, offset: i64) -> Self {
        let message = match reason {
            REASON_COMPLETIONS_REACHED => MESSAGE_COMPLETIONS_REACHED,
            REASON_BACKOFF_LIMIT_EXCEEDED => MESSAGE_BACKOFF_LIMIT_EXCEEDED,
            REASON_DEADLINE_EXCEEDED => MESSAGE_DEADLINE_EXCEEDED,
            REASON_JOB_SUSPENDED => MESSAGE_JOB_SUSPENDED,
            REASON_JOB_RESUMED => MESSAGE_JOB_RESUMED,
            _ => "",
        };
        self.condition_with_message(type_, status, reason, message, offset)
    }

    /// A condition with its message (a success rule's names the rule: `Matched rules at index 1`).
    pub fn condition_with_message(
        mut self,
        type_: &str,
        status: &str,
        reason: &str,
        message: &str,
        offset: i64,
    ) -> Self {
        let c = json!({"type": type_, "status": status, "reason": reason, "message": message,
                       "lastProbeTime": rfc3339(offset), "lastTransitionTime": rfc3339(offset)});
        match self.v["status"]["conditions"].as_array_mut() {
            Some(list) => list.push(c),
            None => self.v["status"]["conditions"] = json!([c]),
        }
        self
    }

    pub fn deleting(mut self) -> Self {
        self.v["metadata"]["deletionTimestamp"] = json!(rfc3339(0));
        self
    }

    pub fn build(self) -> Value {
        self.v
    }

    /// The Job as a user would submit it: no uid, resourceVersion, status or generated labels
    /// (the API server makes those).
    pub fn manifest(self) -> Value {
        let mut v = self.v;
        for k in ["uid", "resourceVersion"] {
            if let Some(m) = v["metadata"].as_object_mut() {
                m.remove(k);
            }
        }
        if let Some(o) = v.as_object_mut() {
            o.remove("status");
        }
        if let Some(t) = v["spec"]["template"].as_object_mut() {
            t.remove("metadata");
        }
        v
    }
}

pub struct PodBuilder {
    v: Value,
}

/// A pod of the test Job, created at `T0`, with the tracking finalizer.
pub fn pod(name: &str) -> PodBuilder {
    PodBuilder {
        v: json!({
            "metadata": {
                "name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                "creationTimestamp": rfc3339(0),
                "finalizers": [TRACKING_FINALIZER],
                "labels": {CONTROLLER_UID_LABEL: JOB_UID},
                "annotations": {},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "job",
                                     "uid": JOB_UID, "controller": true}],
            },
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Pending"},
        }),
    }
}

impl PodBuilder {
    pub fn index(mut self, i: i32) -> Self {
        self.v["metadata"]["annotations"][COMPLETION_INDEX_KEY] = json!(i.to_string());
        self
    }

    pub fn running(mut self) -> Self {
        self.v["status"]["phase"] = json!("Running");
        self
    }

    pub fn ready(mut self) -> Self {
        self.v["status"]["phase"] = json!("Running");
        self.v["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
        self
    }

    fn terminated(mut self, phase: &str, code: i32, offset: i64) -> Self {
        self.v["status"]["phase"] = json!(phase);
        self.v["status"]["containerStatuses"] = json!([{
            "name": "c", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": code, "finishedAt": rfc3339(offset)}},
        }]);
        self
    }

    pub fn succeeded_at(self, offset: i64) -> Self {
        self.terminated("Succeeded", 0, offset)
    }

    pub fn failed_at(self, offset: i64) -> Self {
        self.terminated("Failed", 1, offset)
    }

    /// Failed, its container `c` exiting with `code`.
    pub fn exit_code(self, code: i32, offset: i64) -> Self {
        self.terminated("Failed", code, offset)
    }

    /// Failed in its init container `init` with `code`; the regular container never ran.
    pub fn init_exit_code(mut self, code: i32, offset: i64) -> Self {
        self.v["status"]["phase"] = json!("Failed");
        self.v["status"]["initContainerStatuses"] = json!([{
            "name": "init", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": code, "finishedAt": rfc3339(offset)}},
        }]);
        self.v["status"]["containerStatuses"] = json!([{
            "name": "c", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {}},
        }]);
        self
    }

    /// Pending on a node since `scheduled` (its `PodScheduled=True` transition; `None`: not
    /// written), its container `c` (or, with `init`, its init container `init`) waiting with
    /// `reason`, as the kubelet reports an image it cannot pull.
    pub fn waiting(mut self, reason: &str, init: bool, scheduled: Option<i64>) -> Self {
        let status = |name: &str, waiting: Value| {
            json!([{"name": name, "image": "busybox", "imageID": "", "ready": false,
                    "restartCount": 0, "state": {"waiting": waiting}}])
        };
        self.v["status"]["phase"] = json!("Pending");
        if init {
            self.v["status"]["initContainerStatuses"] = status("init", json!({"reason": reason}));
            self.v["status"]["containerStatuses"] =
                status("c", json!({"reason": "PodInitializing"}));
        } else {
            self.v["status"]["containerStatuses"] = status("c", json!({"reason": reason}));
        }
        if let Some(at) = scheduled {
            self.v["status"]["conditions"] = json!([
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": rfc3339(at)},
                {"type": "Ready", "status": "False", "lastTransitionTime": rfc3339(at)},
            ]);
        }
        self
    }

    /// Failed by the controller at `offset` for not starting in time (after `waiting`).
    pub fn start_timed_out(mut self, reason: &str, offset: i64) -> Self {
        self.v["status"]["phase"] = json!("Failed");
        let c = json!({"type": START_TIMEOUT_CONDITION, "status": "True", "reason": reason,
                       "lastTransitionTime": rfc3339(offset)});
        match self.v["status"]["conditions"].as_array_mut() {
            Some(list) => list.push(c),
            None => self.v["status"]["conditions"] = json!([c]),
        }
        self
    }

    /// Adds a pod condition, e.g. `DisruptionTarget=True`.
    pub fn pod_condition(mut self, type_: &str, status: &str) -> Self {
        let c = json!({"type": type_, "status": status});
        match self.v["status"]["conditions"].as_array_mut() {
            Some(list) => list.push(c),
            None => self.v["status"]["conditions"] = json!([c]),
        }
        self
    }

    pub fn index_failures(mut self, n: i32) -> Self {
        self.v["metadata"]["annotations"][INDEX_FAILURE_COUNT_KEY] = json!(n.to_string());
        self
    }

    pub fn ignored_failures(mut self, n: i32) -> Self {
        self.v["metadata"]["annotations"][INDEX_IGNORED_FAILURE_COUNT_KEY] = json!(n.to_string());
        self
    }

    pub fn deleting_at(mut self, offset: i64) -> Self {
        self.v["metadata"]["deletionTimestamp"] = json!(rfc3339(offset));
        self.v["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        self
    }

    pub fn restarts(mut self, n: i32) -> Self {
        self.v["status"]["containerStatuses"] = json!([{
            "name": "c", "image": "busybox", "imageID": "", "ready": true, "restartCount": n,
            "state": {"running": {}},
        }]);
        self
    }

    pub fn no_finalizer(mut self) -> Self {
        self.v["metadata"]["finalizers"] = json!([]);
        self
    }

    pub fn owned_by(mut self, uid: &str) -> Self {
        self.v["metadata"]["ownerReferences"][0]["uid"] = json!(uid);
        self
    }

    pub fn build(self) -> Pod {
        serde_json::from_value(self.v).expect("test pods are well-formed")
    }

    /// The pod as the controller's cache holds it.
    pub fn cached(self) -> Arc<CachedPod> {
        Arc::new(CachedPod::from_pod(&self.build()))
    }
}
