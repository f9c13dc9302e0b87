//! Node objects laid out per scenario, for kube-scheduler to place pods on (the plane runs no
//! kubelet: a Node here is an object, what a kubelet would have registered and reported).
//!
//! A Node is made ready as a kubelet and the node lifecycle controller would leave it: its
//! capacity and allocatable written through the `status` subresource (they are status, which a
//! create drops), its `Ready` condition `True`, and the `node.kubernetes.io/not-ready:NoSchedule`
//! taint removed, which kube-apiserver's `TaintNodesByCondition` admission plugin adds to every
//! Node created (v1.36: on create only, whatever the Node says) and which only the node
//! lifecycle controller takes off. The planes run no node lifecycle controller, so nothing
//! marks a Node `NotReady` for want of heartbeats (no Lease is needed) and nothing taints it
//! again; a scenario changes a Node only through [`Nodes`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};

use crate::ControlPlane;

/// The taint kube-apiserver puts on every new Node, and only the node lifecycle controller
/// removes once the Node is `Ready`.
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// The name of [`NodeLayout::roomy`]'s Node.
pub const ROOMY: &str = "roomy";

/// How often a read-modify-write of a Node is tried when another writer came between.
const CONFLICT_RETRIES: usize = 5;

/// A Node as a scenario lays it out: built in one line,
/// `NodeLayout::new("gpu-1").resource("nvidia.com/gpu", "2").taint("dedicated", "ml", "NoSchedule")`.
#[derive(Debug, Clone)]
pub struct NodeLayout {
    name: String,
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
    unschedulable: bool,
    capacity: BTreeMap<String, String>,
    /// Where allocatable differs from capacity (what a kubelet reserves).
    allocatable: BTreeMap<String, String>,
}

impl NodeLayout {
    /// A Node of 4 cpu, 16Gi of memory and room for 110 pods (a kubelet's default), with the
    /// labels a kubelet gives it (`kubernetes.io/hostname`, `os`, `arch`).
    pub fn new(name: &str) -> NodeLayout {
        let labels = [
            ("kubernetes.io/hostname", name),
            ("kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", "amd64"),
        ];
        NodeLayout {
            name: name.to_owned(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            taints: Vec::new(),
            unschedulable: false,
            capacity: [("cpu", "4"), ("memory", "16Gi"), ("pods", "110")]
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            allocatable: BTreeMap::new(),
        }
    }

    /// A Node of room enough for any suite that does not count room itself: 1,000 cpu,
    /// 4Ti of memory, 10,000 pods (the scale suites run a thousand Jobs at once).
    pub fn roomy() -> NodeLayout {
        NodeLayout::new(ROOMY)
            .resource("cpu", "1000")
            .resource("memory", "4Ti")
            .resource("pods", "10000")
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn label(mut self, key: &str, value: &str) -> NodeLayout {
        self.labels.insert(key.to_owned(), value.to_owned());
        self
    }

    /// A taint (`effect`: `NoSchedule`, `PreferNoSchedule` or `NoExecute`).
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> NodeLayout {
        self.taints.push(taint(key, value, effect));
        self
    }

    /// Cordoned from the start (`spec.unschedulable`).
    pub fn unschedulable(mut self) -> NodeLayout {
        self.unschedulable = true;
        self
    }

    /// A resource's capacity, and its allocatable unless [`allocatable`](Self::allocatable)
    /// says otherwise: `cpu`, `memory`, `pods`, or an extended one (`nvidia.com/gpu`).
    pub fn resource(mut self, name: &str, quantity: &str) -> NodeLayout {
        self.capacity.insert(name.to_owned(), quantity.to_owned());
        self
    }

    /// A resource's allocatable, below its capacity (what the kubelet reserves for the system).
    pub fn allocatable(mut self, name: &str, quantity: &str) -> NodeLayout {
        self.allocatable
            .insert(name.to_owned(), quantity.to_owned());
        self
    }

    fn object(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": self.labels},
            "spec": {"taints": self.taints, "unschedulable": self.unschedulable},
        })
    }

    /// What a kubelet reports of it: its resources, and `Ready` with no pressure.
    fn status(&self) -> Value {
        let mut allocatable = self.capacity.clone();
        allocatable.extend(self.allocatable.clone());
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let condition = |kind: &str, status: &str, reason: &str| {
            json!({"type": kind, "status": status, "reason": reason, "message": "envtest",
                   "lastHeartbeatTime": now, "lastTransitionTime": now})
        };
        json!({"status": {
            "capacity": self.capacity,
            "allocatable": allocatable,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID"),
                condition("Ready", "True", "KubeletReady"),
            ],
            "addresses": [{"type": "Hostname", "address": self.name}],
        }})
    }
}

/// A taint, as a Node's `spec.taints` holds it.
pub fn taint(key: &str, value: &str, effect: &str) -> Taint {
    Taint {
        key: key.to_owned(),
        value: (!value.is_empty()).then(|| value.to_owned()),
        effect: effect.to_owned(),
        time_added: None,
    }
}

/// The Nodes of one plane, through an admin's client.
#[derive(Clone)]
pub struct Nodes {
    api: Api<Node>,
}

impl ControlPlane {
    /// This plane's Nodes, through a client of the admin's made in the caller's runtime.
    pub async fn nodes(&self) -> Nodes {
        Nodes::new(self.client().await)
    }
}

impl Nodes {
    pub fn new(client: Client) -> Nodes {
        Nodes {
            api: Api::all(client),
        }
    }

    /// Creates the Node and makes it ready to take pods: status written, `Ready`, the
    /// not-ready taint the API server added removed (see the module). Returns it as stored.
    pub async fn create(&self, layout: &NodeLayout) -> Result<Node, String> {
        let name = layout.name();
        let node: Node = serde_json::from_value(layout.object()).map_err(|e| e.to_string())?;
        self.api
            .create(&PostParams::default(), &node)
            .await
            .map_err(|e| format!("the Node {name} is created: {e}"))?;
        self.api
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(&layout.status()),
            )
            .await
            .map_err(|e| format!("the status of Node {name} is written: {e}"))?;
        self.untaint(name, NOT_READY_TAINT).await
    }

    /// [`create`](Self::create), unless a Node of its name is there already.
    pub async fn ensure(&self, layout: &NodeLayout) -> Result<(), String> {
        match self.api.get_opt(layout.name()).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => self.create(layout).await.map(drop),
            Err(e) => Err(format!("the Node {} is read: {e}", layout.name())),
        }
    }

    /// The names of the Nodes there.
    pub async fn names(&self) -> Result<Vec<String>, String> {
        self.api
            .list_metadata(&kube::api::ListParams::default())
            .await
            .map(|l| l.items.iter().map(|n| n.name_any()).collect())
            .map_err(|e| format!("the Nodes are listed: {e}"))
    }

    /// [`create`](Self::create) for each, in order.
    pub async fn lay_out(&self, layouts: &[NodeLayout]) -> Result<Vec<Node>, String> {
        let mut nodes = Vec::with_capacity(layouts.len());
        for layout in layouts {
            nodes.push(self.create(layout).await?);
        }
        Ok(nodes)
    }

    pub async fn get(&self, name: &str) -> Result<Node, String> {
        self.api
            .get(name)
            .await
            .map_err(|e| format!("the Node {name} is read: {e}"))
    }

    /// Deletes the Node (at once: a Node has no finalizers here). Its pods stay bound to it,
    /// as they do until the pod garbage collector, which the planes do not run, removes them.
    pub async fn delete(&self, name: &str) -> Result<(), String> {
        match self.api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(format!("the Node {name} is deleted: {e}")),
        }
    }

    /// `kubectl cordon`: no new pod is placed there; its pods stay.
    pub async fn cordon(&self, name: &str) -> Result<Node, String> {
        self.set_unschedulable(name, true).await
    }

    /// `kubectl uncordon`.
    pub async fn uncordon(&self, name: &str) -> Result<Node, String> {
        self.set_unschedulable(name, false).await
    }

    async fn set_unschedulable(&self, name: &str, cordoned: bool) -> Result<Node, String> {
        // `false` is written as absent, as kubectl uncordon leaves it.
        let patch = json!({"spec": {"unschedulable": cordoned.then_some(true)}});
        self.api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| format!("the Node {name} is (un)cordoned: {e}"))
    }

    /// Adds a taint (`kubectl taint nodes NAME key=value:effect`), replacing one of the same
    /// key and effect.
    pub async fn taint(
        &self,
        name: &str,
        key: &str,
        value: &str,
        effect: &str,
    ) -> Result<Node, String> {
        let added = taint(key, value, effect);
        self.update_taints(name, |taints| {
            taints.retain(|t| !(t.key == added.key && t.effect == added.effect));
            taints.push(added.clone());
        })
        .await
    }

    /// Removes every taint of this key (`kubectl taint nodes NAME key-`).
    pub async fn untaint(&self, name: &str, key: &str) -> Result<Node, String> {
        self.update_taints(name, |taints| taints.retain(|t| t.key != key))
            .await
    }

    /// Replaces the Node's taints with these.
    pub async fn retaint(&self, name: &str, taints: &[Taint]) -> Result<Node, String> {
        self.update_taints(name, |t| *t = taints.to_vec()).await
    }

    /// Reads the Node's taints, changes them with `change` and writes them back fenced by the
    /// version read (a merge patch replaces the whole list), again on a conflict.
    async fn update_taints(
        &self,
        name: &str,
        change: impl Fn(&mut Vec<Taint>),
    ) -> Result<Node, String> {
        let mut last = String::new();
        for _ in 0..CONFLICT_RETRIES {
            let node = self.get(name).await?;
            let mut taints = node
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default();
            change(&mut taints);
            let patch = json!({
                "metadata": {"resourceVersion": node.resource_version()},
                "spec": {"taints": taints},
            });
            match self
                .api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(node) => return Ok(node),
                Err(kube::Error::Api(e)) if e.code == 409 => last = e.message,
                Err(e) => return Err(format!("the taints of Node {name} are written: {e}")),
            }
        }
        Err(format!(
            "the taints of Node {name} are written: a conflict {CONFLICT_RETRIES} times, the last: {last}"
        ))
    }
}
