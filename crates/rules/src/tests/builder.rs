//! `JobBuilder`: a valid, defaulted Job as kube-apiserver hands it to a webhook (generated
//! selector and labels, one container `abc`), changed one field at a time.

use serde_json::{Value, json};

pub const UID: &str = "11111111-2222-3333-4444-555555555555";

#[derive(Clone)]
pub struct JobBuilder(Value);

impl JobBuilder {
    pub fn new() -> Self {
        JobBuilder(json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "myjob", "namespace": "ns", "uid": UID},
            "spec": {
                "parallelism": 1,
                "completions": 1,
                "backoffLimit": 6,
                "completionMode": "NonIndexed",
                "suspend": false,
                "manualSelector": false,
                "podReplacementPolicy": "TerminatingOrFailed",
                "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": UID}},
                "template": {
                    "metadata": {"labels": {
                        "batch.kubernetes.io/controller-uid": UID,
                        "batch.kubernetes.io/job-name": "myjob",
                        "controller-uid": UID,
                        "job-name": "myjob"
                    }},
                    "spec": {
                        "containers": [{"name": "abc", "image": "busybox"}],
                        "initContainers": [{"name": "def", "image": "busybox"}],
                        "restartPolicy": "OnFailure"
                    }
                }
            },
            "status": {}
        }))
    }

    /// Sets (or with `null`, removes) the value at a JSON pointer, creating objects on the way.
    pub fn set(mut self, pointer: &str, value: Value) -> Self {
        let mut parts: Vec<String> = pointer
            .split('/')
            .skip(1)
            .map(|p| p.replace("~1", "/").replace("~0", "~"))
            .collect();
        let last = parts.pop().expect("a pointer with at least one part");
        let mut cur = &mut self.0;
        for p in parts {
            match p.parse::<usize>() {
                Ok(i) if cur.as_array().is_some_and(|a| i < a.len()) => cur = &mut cur[i],
                _ => {
                    if !cur.is_object() {
                        *cur = json!({});
                    }
                    cur = &mut cur[p.as_str()];
                }
            }
        }
        let index = last.parse::<usize>().ok();
        match cur {
            Value::Object(m) if value.is_null() => {
                m.remove(&last);
            }
            Value::Object(m) => {
                m.insert(last, value);
            }
            Value::Array(a) if index.is_some_and(|i| i < a.len()) => {
                a[index.unwrap_or_default()] = value;
            }
            other => *other = json!({ last: value }),
        }
        self
    }

    pub fn spec(self, field: &str, value: Value) -> Self {
        self.set(&format!("/spec/{field}"), value)
    }

    pub fn status(self, field: &str, value: Value) -> Self {
        self.set(&format!("/status/{field}"), value)
    }

    pub fn indexed(self, completions: i32) -> Self {
        self.spec("completionMode", json!("Indexed"))
            .spec("completions", json!(completions))
    }

    pub fn restart_never(self) -> Self {
        self.set("/spec/template/spec/restartPolicy", json!("Never"))
    }

    pub fn success_rules(self, rules: Value) -> Self {
        self.spec("successPolicy", json!({ "rules": rules }))
    }

    /// A pod failure policy (restartPolicy Never and podReplacementPolicy Failed, as it needs).
    pub fn pfp_rules(self, rules: Value) -> Self {
        self.restart_never()
            .spec("podReplacementPolicy", json!("Failed"))
            .spec("podFailurePolicy", json!({ "rules": rules }))
    }

    pub fn conditions(self, types: &[&str]) -> Self {
        let conditions: Vec<Value> = types
            .iter()
            .map(|t| json!({"type": t, "status": "True"}))
            .collect();
        self.status("conditions", json!(conditions))
    }

    pub fn build(self) -> Value {
        self.0
    }
}

/// A pod failure policy rule matching an exit code.
pub fn exit_rule(action: &str, operator: &str, values: Value) -> Value {
    json!({"action": action, "onExitCodes": {"operator": operator, "values": values}})
}
