//! Where a Job fits, as doctor can tell it for one worker: whether the dispatcher's role there
//! may list and watch its Nodes and pods cluster-wide (else placement counts Jobs on it: a
//! warning, not a failure), and whether the leader's view of its room is fresh, read from the
//! leader's own `jobwarden_dispatch_worker_view` when its metrics can be reached. Pure.

use crate::access::{Access, listed};
use crate::catalogue::{WORKER_ROOM_READABLE, WORKER_VIEW_FRESH};
use crate::check::Check;
use crate::pre::Allowed;

/// The one-hot gauge of how the leader knows each worker's room.
pub const VIEW_METRIC: &str = "jobwarden_dispatch_worker_view";

/// The leader's metrics, as read through the API server's pod proxy, or why they were not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaderMetrics {
    Read { pod: String, text: String },
    Unreadable(String),
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
    let (pod, text) = match metrics {
        LeaderMetrics::Read { pod, text } => (pod, text),
        LeaderMetrics::Unreadable(why) => {
            return WORKER_VIEW_FRESH.cannot_tell(
                format!("worker {name}: the leader's view of its room is not known: {why}"),
                "doctor reads the leader's metrics through the API server's pod proxy (get on pods/proxy in jobwarden's namespace, metrics served without --metrics-secure); else read jobwarden_dispatch_worker_view where Prometheus scrapes it",
            );
        }
    };
    let states = view_states(text, name);
    match states.first().map(String::as_str) {
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
            format!("worker {name}: the leader ({pod}) serves no {VIEW_METRIC} for it"),
            "a jobwarden older than this doctor serves none; else the worker was added to the policy after the leader started",
        ),
    }
}
