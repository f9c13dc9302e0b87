//! What one pod of a Job needs from a node: its requests and the filters its template sets
//! (nodeSelector, required node affinity, tolerations), read from the Job's raw JSON, and how
//! many of its pods run at once.

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, PodSpec, Toleration};
use serde_json::Value;

use super::resources::{ResourceError, Resources};
use super::views::{Effect, NodeView, TaintView, pod_requests};

/// Why a Job's pod shape could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ShapeError {
    #[error("spec.template.spec is missing")]
    NoTemplate,
    #[error("spec.template.spec cannot be read")]
    Template(#[source] serde_json::Error),
    #[error("spec.template.spec requests cannot be read")]
    Requests(#[source] ResourceError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
    /// An operator this model does not know: the term matches no node (upstream ignores a
    /// term that fails to parse).
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: Box<str>,
    op: Operator,
    values: Box<[Box<str>]>,
}

impl Requirement {
    fn read(r: &NodeSelectorRequirement) -> Requirement {
        let op = match r.operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" => Operator::Gt,
            "Lt" => Operator::Lt,
            _ => Operator::Unknown,
        };
        Requirement {
            key: r.key.as_str().into(),
            op,
            values: r
                .values
                .iter()
                .flatten()
                .map(|v| v.as_str().into())
                .collect(),
        }
    }

    /// Upstream's label selector requirement semantics (apimachinery labels.Requirement):
    /// `Gt`/`Lt` take one integer value and match only a label that is an integer.
    fn matches(&self, value: Option<&str>) -> bool {
        let has = |v: &str| self.values.iter().any(|x| **x == *v);
        let compare = |f: fn(i64, i64) -> bool| {
            let [bound] = &*self.values else { return false };
            match (value.map(str::parse::<i64>), bound.parse::<i64>()) {
                (Some(Ok(label)), Ok(bound)) => f(label, bound),
                _ => false,
            }
        };
        match self.op {
            Operator::In => value.is_some_and(has),
            Operator::NotIn => !value.is_some_and(has),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::Gt => compare(|l, b| l > b),
            Operator::Lt => compare(|l, b| l < b),
            Operator::Unknown => false,
        }
    }
}

/// One nodeSelectorTerm: its expressions and fields ANDed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    expressions: Box<[Requirement]>,
    /// matchFields: only `metadata.name` exists upstream; another key matches no node.
    fields: Box<[Requirement]>,
}

impl Term {
    fn matches(&self, node: &NodeView) -> bool {
        // An empty term matches no node (nodeaffinity: "a null or empty term matches no
        // objects").
        if self.expressions.is_empty() && self.fields.is_empty() {
            return false;
        }
        self.expressions
            .iter()
            .all(|r| r.matches(node.label(&r.key)))
            && self.fields.iter().all(|r| {
                &*r.key == "metadata.name"
                    && matches!(r.op, Operator::In | Operator::NotIn)
                    && r.matches(Some(&node.name))
            })
    }
}

/// Which effects a toleration covers: all when it names none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Covers {
    All,
    One(Effect),
    /// `PreferNoSchedule` or unknown: covers no taint the filter reads.
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct TolerationView {
    key: Box<str>,
    /// `Exists`; otherwise `Equal` (or empty) compares values, anything else tolerates nothing.
    exists: Option<bool>,
    value: Box<str>,
    covers: Covers,
}

impl TolerationView {
    fn read(t: &Toleration) -> TolerationView {
        TolerationView {
            key: t.key.as_deref().unwrap_or("").into(),
            exists: match t.operator.as_deref() {
                Some("Exists") => Some(true),
                None | Some("" | "Equal") => Some(false),
                Some(_) => None,
            },
            value: t.value.as_deref().unwrap_or("").into(),
            covers: match t.effect.as_deref() {
                None | Some("") => Covers::All,
                Some(e) => Effect::parse(e).map_or(Covers::Other, Covers::One),
            },
        }
    }

    /// corev1 helpers' `ToleratesTaint`.
    fn tolerates(&self, taint: &TaintView) -> bool {
        let effect = match self.covers {
            Covers::All => true,
            Covers::One(e) => e == taint.effect,
            Covers::Other => false,
        };
        let key = self.key.is_empty() || self.key == taint.key;
        effect
            && key
            && match self.exists {
                Some(true) => true,
                Some(false) => self.value == taint.value,
                None => false,
            }
    }
}

/// The taint a cordoned node carries for the scheduler (NodeUnschedulable plugin): a pod
/// that tolerates it may still go there.
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// Why a node cannot take a pod of a shape, whatever its free room; in the order the
/// filters run, which is the order messages list them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Exclusion {
    Cordoned,
    /// The first taint the pod does not tolerate, as `key=value:Effect`.
    Taint(Box<str>),
    /// The first `key=value` of the nodeSelector the node lacks.
    NodeSelector(Box<str>),
    Affinity,
}

/// One pod of a Job, as the filter sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodShape {
    pub requests: Resources,
    /// Sorted by key.
    node_selector: Box<[(Box<str>, Box<str>)]>,
    /// `None` when the template has no required node affinity; terms are ORed.
    affinity: Option<Box<[Term]>>,
    tolerations: Box<[TolerationView]>,
}

impl PodShape {
    /// The shape of the pods of a Job (`spec.template.spec`).
    pub fn of_job(job: &Value) -> Result<PodShape, ShapeError> {
        let spec = job
            .pointer("/spec/template/spec")
            .ok_or(ShapeError::NoTemplate)?;
        let spec: PodSpec = serde_json::from_value(spec.clone()).map_err(ShapeError::Template)?;
        PodShape::of_spec(&spec)
    }

    pub fn of_spec(spec: &PodSpec) -> Result<PodShape, ShapeError> {
        let requests = pod_requests(spec, Resources::from_list).map_err(ShapeError::Requests)?;
        let mut node_selector: Vec<(Box<str>, Box<str>)> = spec
            .node_selector
            .iter()
            .flatten()
            .map(|(k, v)| (k.as_str().into(), v.as_str().into()))
            .collect();
        node_selector.sort();
        let affinity = spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(|s| {
                s.node_selector_terms
                    .iter()
                    .map(|t| Term {
                        expressions: t
                            .match_expressions
                            .iter()
                            .flatten()
                            .map(Requirement::read)
                            .collect(),
                        fields: t
                            .match_fields
                            .iter()
                            .flatten()
                            .map(Requirement::read)
                            .collect(),
                    })
                    .collect()
            });
        Ok(PodShape {
            requests,
            node_selector: node_selector.into_boxed_slice(),
            affinity,
            tolerations: spec
                .tolerations
                .iter()
                .flatten()
                .map(TolerationView::read)
                .collect(),
        })
    }

    /// A shape that asks for `requests` and sets no filter (tests, foreign pods).
    pub fn of_requests(requests: Resources) -> PodShape {
        PodShape {
            requests,
            node_selector: Box::new([]),
            affinity: None,
            tolerations: Box::new([]),
        }
    }

    fn tolerates(&self, taint: &TaintView) -> bool {
        self.tolerations.iter().any(|t| t.tolerates(taint))
    }

    /// Why `node` can never take a pod of this shape, in the order kube-scheduler's filters
    /// run (NodeUnschedulable, TaintToleration, NodeAffinity); `None` when it passes them.
    pub fn excludes(&self, node: &NodeView) -> Option<Exclusion> {
        if node.unschedulable
            && !self.tolerates(&TaintView {
                key: UNSCHEDULABLE_TAINT.into(),
                value: "".into(),
                effect: Effect::NoSchedule,
            })
        {
            return Some(Exclusion::Cordoned);
        }
        if let Some(t) = node.taints.iter().find(|t| !self.tolerates(t)) {
            return Some(Exclusion::Taint(t.to_string().into()));
        }
        if let Some((k, v)) = self
            .node_selector
            .iter()
            .find(|(k, v)| node.label(k) != Some(&**v))
        {
            return Some(Exclusion::NodeSelector(format!("{k}={v}").into()));
        }
        if let Some(terms) = &self.affinity
            && !terms.iter().any(|t| t.matches(node))
        {
            return Some(Exclusion::Affinity);
        }
        None
    }

    /// The same filters, compared (reservations of one shape share the nodes they may use).
    pub(crate) fn same_filters(&self, other: &PodShape) -> bool {
        self.node_selector == other.node_selector
            && self.affinity == other.affinity
            && self.tolerations == other.tolerations
    }
}

/// How many pods of a Job run at once: `min(parallelism, completions − succeeded)`, with
/// the Job API's defaults (parallelism 1; no completions: parallelism). A suspended Job
/// counts its pods too: it is placed to run them once resumed.
pub fn pods_at_once(job: &Value) -> u32 {
    let int = |p: &str| job.pointer(p).and_then(Value::as_i64);
    let parallelism = int("/spec/parallelism").unwrap_or(1).max(0);
    let left = match int("/spec/completions") {
        Some(c) => c
            .saturating_sub(int("/status/succeeded").unwrap_or(0))
            .max(0),
        None => parallelism,
    };
    u32::try_from(parallelism.min(left)).unwrap_or(u32::MAX)
}
