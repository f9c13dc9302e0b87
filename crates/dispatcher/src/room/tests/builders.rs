//! Fluent builders: a node, a Job or a pod in one line.

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use crate::room::{NodeView, PodShape, PodView, Room, pods_at_once};

pub const GPU: &str = "nvidia.com/gpu";

pub struct NodeB(Value);

pub fn node(name: &str) -> NodeB {
    NodeB(json!({
        "metadata": {"name": name, "labels": {}},
        "spec": {"taints": []},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    }))
}

impl NodeB {
    pub fn alloc(mut self, resource: &str, q: &str) -> Self {
        self.0["status"]["allocatable"][resource] = json!(q);
        self
    }
    pub fn cpu(self, q: &str) -> Self {
        self.alloc("cpu", q)
    }
    pub fn gpu(self, n: u32) -> Self {
        self.alloc(GPU, &n.to_string())
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0["metadata"]["labels"][k] = json!(v);
        self
    }
    /// `key=value:Effect` or `key:Effect`.
    pub fn taint(mut self, t: &str) -> Self {
        let (kv, effect) = t.split_once(':').unwrap();
        let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
        let mut taint = json!({"key": key, "effect": effect});
        if !value.is_empty() {
            taint["value"] = json!(value);
        }
        self.0["spec"]["taints"].as_array_mut().unwrap().push(taint);
        self
    }
    pub fn cordoned(mut self) -> Self {
        self.0["spec"]["unschedulable"] = json!(true);
        self
    }
    pub fn k8s(&self) -> Node {
        serde_json::from_value(self.0.clone()).unwrap()
    }
    pub fn view(&self) -> NodeView {
        NodeView::from_node(&self.k8s())
    }
}

pub struct JobB(Value);

/// A Job of one pod asking for nothing but its slot.
pub fn job() -> JobB {
    JobB(json!({
        "spec": {
            "parallelism": 1,
            "template": {"spec": {"containers": [{"name": "main", "resources": {"requests": {}}}]}},
        },
    }))
}

impl JobB {
    fn spec(&mut self) -> &mut Value {
        &mut self.0["spec"]["template"]["spec"]
    }
    pub fn pods(mut self, n: i64) -> Self {
        self.0["spec"]["parallelism"] = json!(n);
        self
    }
    pub fn completions(mut self, n: i64) -> Self {
        self.0["spec"]["completions"] = json!(n);
        self
    }
    pub fn succeeded(mut self, n: i64) -> Self {
        self.0["status"]["succeeded"] = json!(n);
        self
    }
    pub fn indexed(self, n: i64) -> Self {
        let mut j = self.pods(n).completions(n);
        j.0["spec"]["completionMode"] = json!("Indexed");
        j
    }
    pub fn requests(mut self, resource: &str, q: &str) -> Self {
        self.spec()["containers"][0]["resources"]["requests"][resource] = json!(q);
        self
    }
    pub fn gpu(self, n: u32) -> Self {
        self.requests(GPU, &n.to_string())
    }
    pub fn selector(mut self, k: &str, v: &str) -> Self {
        self.spec()["nodeSelector"][k] = json!(v);
        self
    }
    /// Required node affinity: each term a list of `(key, operator, values)`.
    pub fn affinity(mut self, terms: &[&[(&str, &str, &[&str])]]) -> Self {
        let terms: Vec<Value> = terms
            .iter()
            .map(|t| {
                let exprs: Vec<Value> = t
                    .iter()
                    .map(|(k, op, vs)| json!({"key": k, "operator": op, "values": vs}))
                    .collect();
                json!({"matchExpressions": exprs})
            })
            .collect();
        self.spec()["affinity"] = json!({"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}});
        self
    }
    pub fn name_in(mut self, names: &[&str]) -> Self {
        self.spec()["affinity"] = json!({"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": names}]}]}}});
        self
    }
    /// `key=value:Effect` (Equal), `key:Effect` (Exists), `:` (everything).
    pub fn tolerate(mut self, t: &str) -> Self {
        let (kv, effect) = t.split_once(':').unwrap_or((t, ""));
        let toleration = match kv.split_once('=') {
            Some((k, v)) => json!({"key": k, "operator": "Equal", "value": v, "effect": effect}),
            None => json!({"key": kv, "operator": "Exists", "effect": effect}),
        };
        let spec = self.spec();
        if spec["tolerations"].is_null() {
            spec["tolerations"] = json!([]);
        }
        spec["tolerations"].as_array_mut().unwrap().push(toleration);
        self
    }
    pub fn json(&self) -> &Value {
        &self.0
    }
    pub fn shape(&self) -> PodShape {
        PodShape::of_job(&self.0).unwrap()
    }
    pub fn at_once(&self) -> u32 {
        pods_at_once(&self.0)
    }
}

pub struct PodB(Value);

pub fn pod() -> PodB {
    PodB(json!({
        "metadata": {"namespace": "ns", "ownerReferences": []},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {}}}]},
        "status": {"phase": "Pending"},
    }))
}

impl PodB {
    pub fn on(mut self, node: &str) -> Self {
        self.0["spec"]["nodeName"] = json!(node);
        self
    }
    pub fn requests(mut self, resource: &str, q: &str) -> Self {
        self.0["spec"]["containers"][0]["resources"]["requests"][resource] = json!(q);
        self
    }
    pub fn owner(mut self, uid: &str) -> Self {
        self.0["metadata"]["ownerReferences"] = json!([
            {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": uid, "controller": true}]);
        self
    }
    pub fn phase(mut self, p: &str) -> Self {
        self.0["status"]["phase"] = json!(p);
        self
    }
    pub fn unschedulable(mut self, since: &str, message: &str) -> Self {
        self.0["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "message": message, "lastTransitionTime": since}]);
        self
    }
    pub fn set(mut self, pointer: &str, v: Value) -> Self {
        *self.0.pointer_mut(pointer).unwrap() = v;
        self
    }
    pub fn k8s(&self) -> Pod {
        serde_json::from_value(self.0.clone()).unwrap()
    }
    pub fn view(&self) -> PodView {
        PodView::from_pod(&self.k8s()).unwrap()
    }
}

pub fn room(nodes: &[NodeB]) -> Room {
    let mut room = Room::new();
    for n in nodes {
        room.apply_node(n.view());
    }
    room
}
