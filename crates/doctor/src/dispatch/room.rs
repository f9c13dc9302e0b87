//! Where a Job fits, as doctor can tell it for one worker: whether the dispatcher's role there
//! may list and watch its Nodes and pods cluster-wide (else placement counts Jobs on it: a
//! warning, not a failure), and whether the leader's view of its room is fresh: as the leader
//! says it on its Lease (`jobwarden.io/worker-views`, written with each renewal), else from
//! its own `jobwarden_dispatch_worker_view` when its metrics can be reached. Pure.

use std::collections::BTreeMap;

use jobwarden_rules::well_known::{
    LEASE_MANAGEMENT_BUDGET_ANNOTATION, LEASE_NAME, LEASE_WORKER_VIEWS_ANNOTATION,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::access::{Access, listed};
use crate::catalogue::{WORKER_ROOM_READABLE, WORKER_VIEW_FRESH};
use crate::check::Check;
use crate::pre::Allowed;

/// The one-hot gauge of how the leader knows each worker's room.
pub const VIEW_METRIC: &str = "jobwarden_dispatch_worker_view";

/// How the leader says it knows each worker's room: on its Lease, or in its metrics read
/// through the API server's pod proxy; or why neither could be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaderMetrics {
    /// The Lease's `jobwarden.io/worker-views`: each worker's state, by name; and its
    /// `jobwarden.io/management-budget`, where it says one.
    Lease {
        pod: String,
        views: BTreeMap<String, String>,
        budget: Option<BudgetSaid>,
    },
    Read {
        pod: String,
        text: String,
    },
    Unreadable(String),
}

/// How the leader's status writes wait for its budget on the management cluster, as it says
/// on its Lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetSaid {
    /// Status writes waiting when it last renewed.
    pub waiting: u64,
    /// The longest a status write waited in the last minute or two, in milliseconds.
    pub longest_wait_ms: u64,
}

impl BudgetSaid {
    /// From the annotation's JSON; `None` when it says nothing (`{}`) or cannot be read.
    fn parse(text: &str) -> Option<BudgetSaid> {
        let said: Value = serde_json::from_str(text).ok()?;
        let seconds = said.get("longestWaitSeconds")?.as_f64()?;
        // Whole milliseconds of a wait that is at most hours.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let longest_wait_ms = (seconds.max(0.0) * 1000.0).round() as u64;
        Some(BudgetSaid {
            waiting: said.get("statusWritesWaiting")?.as_u64()?,
            longest_wait_ms,
        })
    }
}

/// The leader's word on its Lease, where it says one: `None` when the Lease holds none (a
/// jobwarden older than this doctor: its metrics are read instead). A word not renewed for
/// `stale_after` is nobody's now.
pub fn lease_views(
    lease: &Lease,
    now: Timestamp,
    stale_after: std::time::Duration,
) -> Option<LeaderMetrics> {
    let text = annotations(lease)?.get(LEASE_WORKER_VIEWS_ANNOTATION)?;
    let spec = lease.spec.clone().unwrap_or_default();
    let Some(pod) = spec.holder_identity.filter(|h| !h.is_empty()) else {
        return Some(LeaderMetrics::Unreadable(format!(
            "no replica holds Lease {LEASE_NAME}"
        )));
    };
    let renewed = spec.renew_time.map(|t| t.0);
    let age = renewed.and_then(|r| std::time::Duration::try_from(now.duration_since(r)).ok());
    if age.is_none_or(|age| age >= stale_after) {
        return Some(LeaderMetrics::Unreadable(format!(
            "the leader ({pod}) has not renewed Lease {LEASE_NAME} for {}s: what it said of the workers is old",
            age.map_or(0, |a| a.as_secs())
        )));
    }
    let parsed: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            return Some(LeaderMetrics::Unreadable(format!(
                "the leader's {LEASE_WORKER_VIEWS_ANNOTATION} does not read as JSON: {e}"
            )));
        }
    };
    let views = parsed
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(worker, view)| {
            let state = view.get("state")?.as_str()?;
            Some((worker.clone(), state.to_owned()))
        })
        .collect();
    let budget = annotations(lease)
        .and_then(|a| a.get(LEASE_MANAGEMENT_BUDGET_ANNOTATION))
        .and_then(|text| BudgetSaid::parse(text));
    Some(LeaderMetrics::Lease { pod, views, budget })
}

fn annotations(lease: &Lease) -> Option<&BTreeMap<String, String>> {
    lease.metadata.annotations.as_ref()
}

/// The access reviews of the dispatcher's Nodes and pods on `worker`'s answers.
pub fn readable(name: &str, answers: &[(Access, Allowed)]) -> Check {
    let denied: Vec<&Access> = answers
        .iter()
        .filter(|(_, a)| matches!(a, Ok(false)))
        .map(|(access, _)| access)
        .collect();
    if !denied.is_empty() {
        return WORKER_ROOM_READABLE.warning(
            format!(
                "worker {name}: the dispatcher may not {}: placement falls back to counting Jobs on this worker",
                listed(&denied, 3)
            ),
            format!(
                "to place by room, grant it cluster-wide: `kubectl --context {name} apply -k deploy/worker/` (Nodes are cluster-scoped: deploy/worker/namespaced/'s RoleBindings cannot grant them)"
            ),
        );
    }
    if let Some((access, Err(e))) = answers.iter().find(|(_, a)| a.is_err()) {
        return WORKER_ROOM_READABLE.cannot_tell(
            format!("worker {name}: cannot tell whether the dispatcher may {access}: {e}"),
            "doctor asks with SelfSubjectAccessReviews as the dispatcher, which every authenticated user may create",
        );
    }
    WORKER_ROOM_READABLE.ok(format!(
        "worker {name}: the dispatcher may list and watch its Nodes and pods cluster-wide: placement sees its room"
    ))
}

/// The states `jobwarden_dispatch_worker_view{worker}` is 1 in, in the leader's exposition.
pub fn view_states(text: &str, worker: &str) -> Vec<String> {
    let want = format!("worker=\"{worker}\"");
    text.lines()
        .filter(|l| {
            l.starts_with(VIEW_METRIC)
                && l.get(VIEW_METRIC.len()..)
                    .is_some_and(|r| r.starts_with('{'))
        })
        .filter(|l| l.contains(&want))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let one = value.trim().parse::<f64>().ok()? == 1.0;
            let state = series.split("state=\"").nth(1)?.split('"').next()?;
            one.then(|| state.to_owned())
        })
        .collect()
}

/// Whether the leader's view of `name`'s room is fresh.
pub fn fresh(name: &str, metrics: &LeaderMetrics) -> Check {
    let (pod, state) = match metrics {
        LeaderMetrics::Lease { pod, views, .. } => (pod, views.get(name).cloned()),
        LeaderMetrics::Read { pod, text } => (pod, view_states(text, name).into_iter().next()),
        LeaderMetrics::Unreadable(why) => {
            return WORKER_VIEW_FRESH.cannot_tell(
                format!("worker {name}: the leader's view of its room is not known: {why}"),
                "doctor reads what the leader says on its Lease (jobwarden.io/worker-views), else its metrics through the API server's pod proxy; else read jobwarden_dispatch_worker_view where Prometheus scrapes it",
            );
        }
    };
    match state.as_deref() {
        Some("fresh") => WORKER_VIEW_FRESH.ok(format!(
            "worker {name}: the leader ({pod}) has listed its Nodes and pods and watches them"
        )),
        Some("unbounded") => WORKER_VIEW_FRESH.ok(format!(
            "worker {name}: capacity: Unbounded: the leader ({pod}) places on it by count"
        )),
        Some("counting") => WORKER_VIEW_FRESH.warning(
            format!(
                "worker {name}: the leader ({pod}) cannot list its Nodes or pods: placement falls back to counting Jobs on this worker"
            ),
            format!(
                "grant the dispatcher's role on {name} cluster-wide (deploy/worker/), or mark the worker capacity: Unbounded in the policy to say it is meant"
            ),
        ),
        Some("listing") => WORKER_VIEW_FRESH.warning(
            format!("worker {name}: the leader ({pod}) is still listing its Nodes and pods: until then nothing is placed on it by room"),
            "a listing lasts seconds; one that stays says the worker answers slowly or its lists are large: the leader's log names it",
        ),
        Some(other) => WORKER_VIEW_FRESH.cannot_tell(
            format!("worker {name}: the leader ({pod}) says its view is {other}"),
            "a state this doctor does not know: is doctor older than the running jobwarden?",
        ),
        None => WORKER_VIEW_FRESH.cannot_tell(
            format!("worker {name}: the leader ({pod}) says nothing of its view ({VIEW_METRIC})"),
            "a jobwarden older than this doctor says none; else the worker was added to the policy a moment ago",
        ),
    }
}
