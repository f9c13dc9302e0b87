//! Jobs as kube-apiserver stores them (upstream's defaults, generated selector and labels, a
//! uid), with the statuses v1.36's controller writes, to plant in a fake or real cluster.

use jobwarden_rules::defaults;
use serde_json::{Value, json};

/// A NonIndexed Job, one container, `restartPolicy: Never`, with `spec` merged in.
pub fn manifest(namespace: &str, name: &str, spec: Value) -> Value {
    let mut job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1.36"}]
        }}}
    });
    if let (Some(target), Some(extra)) = (job["spec"].as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            target.insert(k.clone(), v.clone());
        }
    }
    job
}

/// The manifest as stored: defaults, a uid derived from the name, generated selector and
/// labels, and `status`.
pub fn stored(mut job: Value, status: Value) -> Value {
    let name = job["metadata"]["name"].as_str().unwrap_or("").to_owned();
    let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
    let digits = format!("{hex:0<12}");
    let digits = &digits[digits.len() - 12..];
    job["metadata"]["uid"] = json!(format!("00000000-0000-4000-8000-{digits}"));
    defaults::upstream_defaults(&mut job);
    defaults::prepare_for_create(&mut job);
    job["status"] = status;
    job
}

pub fn with_labels(mut job: Value, labels: Value) -> Value {
    job["metadata"]["labels"] = labels;
    job
}

pub fn with_annotation(mut job: Value, key: &str, value: &str) -> Value {
    job["metadata"]["annotations"] = json!({ key: value });
    job
}

pub fn condition(type_: &str, reason: &str, at: &str) -> Value {
    let time = format!("2026-01-01T{at}:00Z");
    json!({"type": type_, "status": "True", "reason": reason, "message": reason,
           "lastProbeTime": time, "lastTransitionTime": time})
}

/// How v1.36's controller leaves a Job that succeeded.
pub fn completed() -> Value {
    json!({
        "conditions": [
            condition("SuccessCriteriaMet", "CompletionsReached", "10:05"),
            condition("Complete", "CompletionsReached", "10:10")
        ],
        "startTime": "2026-01-01T10:00:00Z",
        "completionTime": "2026-01-01T10:10:00Z",
        "succeeded": 1, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}
    })
}

/// Two FailJob rules on exit codes 1 and 2.
pub fn two_rules() -> Value {
    json!({"rules": [
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}},
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [2]}}
    ]})
}
