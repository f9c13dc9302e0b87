//! The compact views a worker's Node and Pod watches keep: only what the filter reads.
//! A pod's requests are computed here as kube-scheduler computes them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::Timestamp;

use super::resources::{CPU, MAX_AMOUNT, MEMORY, ResourceError, Resources};

/// The taint effects the filter reads (tainttoleration filters on these two only;
/// `PreferNoSchedule` is a score).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Effect {
    NoSchedule,
    NoExecute,
}

impl Effect {
    pub fn parse(effect: &str) -> Option<Effect> {
        match effect {
            "NoSchedule" => Some(Effect::NoSchedule),
            "NoExecute" => Some(Effect::NoExecute),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Effect::NoSchedule => "NoSchedule",
            Effect::NoExecute => "NoExecute",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaintView {
    pub key: Box<str>,
    /// `""` when the taint has none (as upstream compares it).
    pub value: Box<str>,
    pub effect: Effect,
}

impl std::fmt::Display for TaintView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect.as_str())
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect.as_str())
        }
    }
}

/// One Node as placement sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    pub name: Box<str>,
    /// Sorted by key.
    pub labels: Box<[(Box<str>, Box<str>)]>,
    /// `NoSchedule` and `NoExecute` taints only.
    pub taints: Box<[TaintView]>,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// `status.allocatable`, including `pods` and extended resources.
    pub allocatable: Resources,
}

impl NodeView {
    pub fn from_node(node: &Node) -> NodeView {
        let mut labels: Vec<(Box<str>, Box<str>)> = node
            .metadata
            .labels
            .iter()
            .flatten()
            .map(|(k, v)| (k.as_str().into(), v.as_str().into()))
            .collect();
        labels.sort();
        let spec = node.spec.as_ref();
        let taints = spec
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|t| {
                Some(TaintView {
                    key: t.key.as_str().into(),
                    value: t.value.as_deref().unwrap_or("").into(),
                    effect: Effect::parse(&t.effect)?,
                })
            })
            .collect();
        // The API server validated the quantities; one this parser cannot read gives
        // nothing rather than room that may not be there.
        let allocatable = node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .map(|a| Resources::from_list_lenient(a, 0))
            .unwrap_or_default();
        NodeView {
            name: node.metadata.name.as_deref().unwrap_or("").into(),
            labels: labels.into_boxed_slice(),
            taints,
            unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
            allocatable,
        }
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .and_then(|i| self.labels.get(i))
            .map(|(_, v)| &**v)
    }
}

/// A pod the scheduler could not place: `PodScheduled=False`, reason `Unschedulable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unschedulable {
    pub since: Timestamp,
    pub message: Box<str>,
}

/// One unfinished pod as placement sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodView {
    pub namespace: Box<str>,
    /// `spec.nodeName`; `None` while not bound.
    pub node: Option<Box<str>>,
    /// As the scheduler counts them, with `pods: 1`.
    pub requests: Resources,
    /// The uid of its controller (`ownerReferences[].controller: true`).
    pub owner: Option<Box<str>>,
    /// Boxed: rare, and the common pod stays small.
    pub unschedulable: Option<Box<Unschedulable>>,
}

impl PodView {
    /// `None` for a pod that has finished (`Succeeded` or `Failed`): it holds no room.
    pub fn from_pod(pod: &Pod) -> Option<PodView> {
        let status = pod.status.as_ref();
        if let Some("Succeeded" | "Failed") = status.and_then(|s| s.phase.as_deref()) {
            return None;
        }
        // Stored pods were validated by the API server: a quantity this parser still cannot
        // read counts as the most a pod could ask, never as room.
        let requests = pod
            .spec
            .as_ref()
            .map(|s| pod_requests(s, |list| Ok(Resources::from_list_lenient(list, MAX_AMOUNT))))
            .and_then(Result::ok)
            .unwrap_or_else(Resources::one_pod);
        let owner = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|r| r.controller == Some(true))
            .map(|r| r.uid.as_str().into());
        // The scheduler always writes lastTransitionTime with the condition; one without
        // it is not counted as unschedulable (there is no "since" to wait from).
        let unschedulable = status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .find(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
            })
            .and_then(|c| {
                Some(Box::new(Unschedulable {
                    since: c.last_transition_time.as_ref()?.0,
                    message: c.message.as_deref().unwrap_or("").into(),
                }))
            });
        Some(PodView {
            namespace: pod.metadata.namespace.as_deref().unwrap_or("").into(),
            node: pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .filter(|n| !n.is_empty())
                .map(Into::into),
            requests,
            owner,
            unschedulable,
        })
    }
}

/// The resources pod-level `spec.resources` may set (upstream's
/// `IsSupportedPodLevelResource`: cpu, memory and hugepages of any size).
fn pod_level(name: &str) -> bool {
    name == CPU || name == MEMORY || name.starts_with("hugepages-")
}

/// A container's (or the pod's) requests, defaulted from its limits where a request is
/// missing, as the API server's SetDefaults_Pod does when it stores a pod (a Job's template
/// is not defaulted so, so its shape must do it here).
fn requests_of(
    resources: Option<&ResourceRequirements>,
    read: &impl Fn(&BTreeMap<String, Quantity>) -> Result<Resources, ResourceError>,
) -> Result<Resources, ResourceError> {
    read(&request_list(resources))
}

fn request_list(resources: Option<&ResourceRequirements>) -> BTreeMap<String, Quantity> {
    let Some(r) = resources else {
        return BTreeMap::new();
    };
    let mut list = r.limits.clone().unwrap_or_default();
    list.extend(r.requests.clone().unwrap_or_default());
    list
}

fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// kube-scheduler's view of a pod's requests (component-helpers `resource.PodRequests`):
/// app containers summed; each restartable init container (a sidecar) added to the sum and
/// to every later init container; the pod asks for the largest of that sum and each init
/// container's step; pod-level `spec.resources` replaces the cpu, memory and hugepages it
/// sets; overhead added; one pod slot. Resized pods' status resources are not read (see
/// `ROOM_LIMITS`).
pub fn pod_requests(
    spec: &PodSpec,
    read: impl Fn(&BTreeMap<String, Quantity>) -> Result<Resources, ResourceError>,
) -> Result<Resources, ResourceError> {
    let mut sum = Resources::default();
    for c in &spec.containers {
        sum.add(&requests_of(c.resources.as_ref(), &read)?);
    }
    let mut sidecars = Resources::default();
    let mut init_max = Resources::default();
    for c in spec.init_containers.iter().flatten() {
        let own = requests_of(c.resources.as_ref(), &read)?;
        let step = if is_sidecar(c) {
            sum.add(&own);
            sidecars.add(&own);
            sidecars.clone()
        } else {
            let mut step = own;
            step.add(&sidecars);
            step
        };
        init_max.max_with(&step);
    }
    sum.max_with(&init_max);
    // Pod-level requests replace the containers' for each resource they name (an explicit
    // 0 included), as upstream's applyPodLevelResources does.
    let mut level = request_list(spec.resources.as_ref());
    level.retain(|name, _| pod_level(name));
    let amounts = read(&level)?;
    for name in level.keys() {
        sum.set(name, amounts.get(name));
    }
    if let Some(overhead) = &spec.overhead {
        sum.add(&read(overhead)?);
    }
    sum.pods = sum.pods.saturating_add(1);
    Ok(sum)
}
