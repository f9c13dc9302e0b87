//! What the leader says of its dispatching on its Lease, written in the renewal it makes anyway
//! (one write per renewal, whatever it says): how it knows each worker's room and when that
//! last changed (`jobwarden.io/worker-views`), and how its status writes wait for its budget on
//! the management cluster (`jobwarden.io/management-budget`). `doctor` reads them there with the
//! rights it already has, where the leader's metrics (served to authorized readers only)
//! cannot be read.

use std::collections::BTreeMap;
use std::sync::Arc;

use jobwarden_rules::well_known::{
    LEASE_MANAGEMENT_BUDGET_ANNOTATION, LEASE_WORKER_VIEWS_ANNOTATION,
};
use jobwarden_runtime::client::{BudgetSeen, Priority};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use crate::worker::link::Link;

/// Where the annotations the Lease is written with are published.
pub type Published = watch::Sender<BTreeMap<String, String>>;

/// What a replica that does not dispatch says: nothing of any worker nor of a budget (a merge
/// patch of the Lease keeps a key it does not name, so each key is always written).
pub fn nothing() -> BTreeMap<String, String> {
    BTreeMap::from([
        (LEASE_WORKER_VIEWS_ANNOTATION.to_owned(), "{}".to_owned()),
        (
            LEASE_MANAGEMENT_BUDGET_ANNOTATION.to_owned(),
            "{}".to_owned(),
        ),
    ])
}

/// Each worker's view now: its state (as `jobwarden_dispatch_worker_view{state}` names it) and
/// when its watches last brought anything, to the second.
pub fn views(links: &[Arc<Link>], now: Timestamp) -> String {
    let views: Map<String, Value> = links
        .iter()
        .map(|link| {
            let changed = link.view.quiet_for().and_then(|quiet| {
                // Seconds, far below i64's range.
                #[allow(clippy::cast_possible_truncation)]
                let quiet = quiet.round() as i64;
                Timestamp::from_second(now.as_second() - quiet).ok()
            });
            let mut view = json!({"state": link.view.state().label()});
            if let Some(changed) = changed {
                view["lastChange"] = json!(changed.to_string());
            }
            (link.name().to_owned(), view)
        })
        .collect();
    Value::Object(views).to_string()
}

/// How the management cluster's budget holds the status writes now, to the tenth of a second.
pub fn budget(seen: &BudgetSeen) -> String {
    let longest = (seen.longest_sync_wait().as_secs_f64() * 10.0).round() / 10.0;
    json!({
        "statusWritesWaiting": seen.waiting(Priority::Sync),
        "longestWaitSeconds": longest,
    })
    .to_string()
}

/// Publishes `said` under the annotation `key` when it says something new.
pub fn publish(published: &Published, key: &str, said: String) {
    published.send_if_modified(|annotations| {
        let changed = annotations.get(key) != Some(&said);
        if changed {
            annotations.insert(key.to_owned(), said);
        }
        changed
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use jobwarden_admission::policy::{Capacity, Worker};
    use serde_json::json;

    fn link(name: &str, capacity: Capacity) -> Arc<Link> {
        let worker: Worker = serde_json::from_value(json!({"name": name, "kubeconfigSecret": "s"}))
            .expect("a worker");
        Arc::new(Link::new(Worker { capacity, ..worker }))
    }

    #[test]
    fn each_worker_is_said_with_its_state_and_its_last_change() {
        let now = Timestamp::from_second(1_800_000_000).expect("a time");
        let (east, gpu) = (
            link("east", Capacity::Nodes),
            link("gpu", Capacity::Unbounded),
        );
        let said = |links: &[Arc<Link>]| -> Value {
            serde_json::from_str(&views(links, now)).expect("JSON")
        };
        // Nothing heard yet: no time is said.
        assert_eq!(
            said(&[east.clone(), gpu.clone()]),
            json!({"east": {"state": "listing"}, "gpu": {"state": "unbounded"}})
        );
        east.view.listed(crate::worker::view::Listed::Nodes);
        east.view.listed(crate::worker::view::Listed::Pods);
        assert_eq!(
            said(std::slice::from_ref(&east)),
            json!({"east": {"state": "fresh", "lastChange": now.to_string()}})
        );

        let (published, lease) = watch::channel(nothing());
        publish(
            &published,
            LEASE_WORKER_VIEWS_ANNOTATION,
            views(std::slice::from_ref(&gpu), now),
        );
        assert_eq!(
            lease
                .borrow()
                .get(LEASE_WORKER_VIEWS_ANNOTATION)
                .map(String::as_str),
            Some(r#"{"gpu":{"state":"unbounded"}}"#)
        );
        // The budget is said beside, in the same annotations.
        publish(
            &published,
            LEASE_MANAGEMENT_BUDGET_ANNOTATION,
            budget(&BudgetSeen::default()),
        );
        let lease = lease.borrow();
        assert_eq!(
            lease
                .get(LEASE_MANAGEMENT_BUDGET_ANNOTATION)
                .map(String::as_str),
            Some(r#"{"longestWaitSeconds":0.0,"statusWritesWaiting":0}"#)
        );
        assert!(lease.contains_key(LEASE_WORKER_VIEWS_ANNOTATION));
    }
}
