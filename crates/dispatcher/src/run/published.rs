//! What the leader says of its workers on its Lease (`jobwarden.io/worker-views`), written in
//! the renewal it makes anyway: how it knows each worker's room and when that last changed.
//! `doctor` reads it there with the rights it already has, where the leader's metrics (served
//! to authorized readers only) cannot be read.

use std::collections::BTreeMap;
use std::sync::Arc;

use jobwarden_rules::well_known::LEASE_WORKER_VIEWS_ANNOTATION;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use crate::worker::link::Link;

/// Where the annotations the Lease is written with are published.
pub type Published = watch::Sender<BTreeMap<String, String>>;

/// What a replica that does not dispatch says: nothing of any worker (a merge patch of the
/// Lease keeps a key it does not name, so the key is always written).
pub fn nothing() -> BTreeMap<String, String> {
    BTreeMap::from([(LEASE_WORKER_VIEWS_ANNOTATION.to_owned(), "{}".to_owned())])
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

/// Publishes `views` when it says something new.
pub fn publish(published: &Published, views: String) {
    published.send_if_modified(|annotations| {
        let changed = annotations.get(LEASE_WORKER_VIEWS_ANNOTATION) != Some(&views);
        if changed {
            annotations.insert(LEASE_WORKER_VIEWS_ANNOTATION.to_owned(), views);
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
        publish(&published, views(std::slice::from_ref(&gpu), now));
        assert_eq!(
            lease
                .borrow()
                .get(LEASE_WORKER_VIEWS_ANNOTATION)
                .map(String::as_str),
            Some(r#"{"gpu":{"state":"unbounded"}}"#)
        );
    }
}
