//! `Stored`: a Job as kube-apiserver stores it (upstream's defaults, the generated selector and
//! labels, a uid, a namespace), described in one line and changed one field at a time; and the
//! conditions v1.36's controller writes.

use jobwarden_rules::defaults;
use serde_json::{Value, json};

pub const NAMESPACE: &str = "team-a";

#[derive(Clone)]
pub struct Stored {
    manifest: Value,
    status: Value,
}

/// A NonIndexed Job named `name`, one completion, one container `main`, `restartPolicy: Never`.
pub fn job(name: &str) -> Stored {
    Stored {
        manifest: json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid_of(name)},
            "spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox:1.36"}]
            }}}
        }),
        status: json!({}),
    }
}

/// A stable uid per name, so tests can name the Job an Event is about.
pub fn uid_of(name: &str) -> String {
    let mut hex: String = name
        .bytes()
        .map(|b| format!("{:x}", b % 16))
        .chain(std::iter::repeat("0".to_owned()))
        .take(32)
        .collect();
    hex.insert(20, '-');
    hex.insert(16, '-');
    hex.insert(12, '-');
    hex.insert(8, '-');
    hex
}

impl Stored {
    /// Sets the value at a JSON pointer of the manifest, creating objects on the way.
    pub fn set(mut self, pointer: &str, value: Value) -> Self {
        set_pointer(&mut self.manifest, pointer, value);
        self
    }

    pub fn spec(self, field: &str, value: Value) -> Self {
        self.set(&format!("/spec/{field}"), value)
    }

    pub fn namespace(self, namespace: &str) -> Self {
        self.set("/metadata/namespace", json!(namespace))
    }

    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        let meta = &mut self.manifest["metadata"];
        if !meta["annotations"].is_object() {
            meta["annotations"] = json!({});
        }
        meta["annotations"][key] = json!(value);
        self
    }

    pub fn rule_names(self, names: &str) -> Self {
        self.annotation("jobwarden.io/pod-failure-policy-rule-names", names)
    }

    pub fn indexed(self, completions: i32) -> Self {
        self.spec("completionMode", json!("Indexed"))
            .spec("completions", json!(completions))
    }

    /// A pod failure policy of `count` FailJob rules on exit codes 1, 2, …
    pub fn pfp_rules(self, count: usize) -> Self {
        let rules: Vec<Value> = (1..=count)
            .map(|code| json!({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [code]}}))
            .collect();
        self.spec("podFailurePolicy", json!({ "rules": rules }))
    }

    pub fn status(mut self, field: &str, value: Value) -> Self {
        self.status[field] = value;
        self
    }

    pub fn conditions(self, conditions: &[Value]) -> Self {
        self.status("conditions", json!(conditions))
    }

    /// Started at 10:00, as the controller records it.
    pub fn started(self) -> Self {
        self.status("startTime", json!("2026-01-01T10:00:00Z"))
    }

    /// `SuccessCriteriaMet` then `Complete` with the same reason, `completionTime` at 10:10, no
    /// pod left: how v1.36's controller finishes a successful Job.
    pub fn completed(self, reason: &str, message: &str) -> Self {
        self.started()
            .conditions(&[
                condition("SuccessCriteriaMet", "True", reason, message, "10:05"),
                condition("Complete", "True", reason, message, "10:10"),
            ])
            .status("completionTime", json!("2026-01-01T10:10:00Z"))
            .status("ready", json!(0))
            .status("terminating", json!(0))
            .status("uncountedTerminatedPods", json!({}))
    }

    /// `FailureTarget` then `Failed` with the same reason: how v1.36's controller fails a Job.
    pub fn failed(self, reason: &str, message: &str) -> Self {
        self.started()
            .conditions(&[
                condition("FailureTarget", "True", reason, message, "10:05"),
                condition("Failed", "True", reason, message, "10:10"),
            ])
            .status("ready", json!(0))
            .status("terminating", json!(0))
            .status("uncountedTerminatedPods", json!({}))
    }

    /// The Job as stored: upstream's defaults and create-time preparation, then the status.
    pub fn build(self) -> Value {
        let mut job = self.manifest;
        defaults::upstream_defaults(&mut job);
        defaults::prepare_for_create(&mut job);
        job["status"] = self.status;
        job
    }
}

/// A condition as the controller writes it, at `hh:mm` on the test day.
pub fn condition(type_: &str, status: &str, reason: &str, message: &str, at: &str) -> Value {
    let time = format!("2026-01-01T{at}:00Z");
    json!({
        "type": type_, "status": status, "reason": reason, "message": message,
        "lastProbeTime": time, "lastTransitionTime": time
    })
}

fn set_pointer(root: &mut Value, pointer: &str, value: Value) {
    let mut cur = root;
    let parts: Vec<&str> = pointer.split('/').skip(1).collect();
    let Some((last, path)) = parts.split_last() else {
        return;
    };
    for part in path {
        if !cur.is_object() {
            *cur = json!({});
        }
        cur = &mut cur[*part];
    }
    if !cur.is_object() {
        *cur = json!({});
    }
    cur[*last] = value;
}
