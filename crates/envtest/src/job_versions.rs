//! Every version of the Jobs of a namespace as a watch delivers them, each with the moment it
//! arrived: what the scale benchmark times (the mirror's lag, the last Job to end) and what
//! the scale test checks (how many copies each Job had, the status a copy ended with). A
//! version is kept once, however often a re-list delivers it; a Job deleted while the watch
//! was down is marked deleted when the next list misses it.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt as _;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::Value;

/// One version of a Job: when it arrived, and its status.
#[derive(Debug, Clone, PartialEq)]
pub struct Version {
    pub at: Instant,
    pub resource_version: String,
    /// `status`, `Null` when it has none.
    pub status: Value,
}

/// What was seen of one Job (by UID).
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// In the order they arrived.
    pub versions: Vec<Version>,
    /// When its deletion was seen.
    pub deleted: Option<Instant>,
}

impl Seen {
    /// The status it was last seen with (`Null` before any).
    pub fn last_status(&self) -> &Value {
        self.versions.last().map_or(&Value::Null, |v| &v.status)
    }

    /// When a version showing `Complete` or `Failed` true first arrived.
    pub fn ended_at(&self) -> Option<Instant> {
        self.versions
            .iter()
            .find(|v| terminal_condition(&v.status).is_some())
            .map(|v| v.at)
    }
}

/// `Complete` or `Failed`, whichever is true in `status`.
pub fn terminal_condition(status: &Value) -> Option<&str> {
    status
        .get("conditions")?
        .as_array()?
        .iter()
        .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"))
        .find_map(|c| match c.get("type").and_then(Value::as_str) {
            Some(t @ ("Complete" | "Failed")) => Some(t),
            _ => None,
        })
}

type Record = Arc<Mutex<BTreeMap<String, Seen>>>;

/// A running watch and what it has seen; stops when dropped.
pub struct JobVersions {
    seen: Record,
    task: tokio::task::JoinHandle<()>,
}

impl JobVersions {
    /// Watches the Jobs of `namespace` through `client` (those with `selector`'s labels, when
    /// given), from now until dropped.
    pub fn watch(client: kube::Client, namespace: &str, selector: Option<&str>) -> JobVersions {
        let jobs: Api<DynamicObject> =
            Api::namespaced_with(client, namespace, &ApiResource::erase::<Job>(&()));
        let mut config = watcher::Config::default();
        if let Some(selector) = selector {
            config = config.labels(selector);
        }
        let seen = Record::default();
        let task = {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut listed = HashSet::new();
                let mut events = watcher(jobs, config).default_backoff().boxed();
                while let Some(event) = events.next().await {
                    let Ok(event) = event else { continue };
                    note(&seen, &mut listed, event, Instant::now());
                }
            })
        };
        JobVersions { seen, task }
    }

    /// What was seen so far, by UID.
    pub fn seen(&self) -> BTreeMap<String, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// How many Jobs were seen so far, and how many of them are not deleted.
    pub fn count(&self) -> (usize, usize) {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let live = seen.values().filter(|s| s.deleted.is_none()).count();
        (seen.len(), live)
    }
}

impl Drop for JobVersions {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn note(
    seen: &Record,
    listed: &mut HashSet<String>,
    event: watcher::Event<DynamicObject>,
    at: Instant,
) {
    let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    match event {
        watcher::Event::Init => listed.clear(),
        watcher::Event::InitApply(job) => {
            if let Some(uid) = job.metadata.uid.clone() {
                listed.insert(uid);
            }
            apply(&mut seen, job, at);
        }
        watcher::Event::InitDone => {
            for (uid, s) in seen.iter_mut() {
                if !listed.contains(uid) && s.deleted.is_none() {
                    s.deleted = Some(at);
                }
            }
        }
        watcher::Event::Apply(job) => apply(&mut seen, job, at),
        watcher::Event::Delete(job) => {
            let uid = job.metadata.uid.clone().unwrap_or_default();
            apply(&mut seen, job, at);
            if let Some(s) = seen.get_mut(&uid) {
                s.deleted.get_or_insert(at);
            }
        }
    }
}

fn apply(seen: &mut BTreeMap<String, Seen>, job: DynamicObject, at: Instant) {
    let Some(uid) = job.metadata.uid.clone() else {
        return;
    };
    let resource_version = job.metadata.resource_version.clone().unwrap_or_default();
    let entry = seen.entry(uid).or_insert_with(|| Seen {
        name: job.metadata.name.clone().unwrap_or_default(),
        labels: job.metadata.labels.clone().unwrap_or_default(),
        versions: Vec::new(),
        deleted: None,
    });
    if entry
        .versions
        .iter()
        .any(|v| v.resource_version == resource_version)
    {
        return;
    }
    entry.versions.push(Version {
        at,
        resource_version,
        status: job.data.get("status").cloned().unwrap_or(Value::Null),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(uid: &str, rv: &str, status: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": format!("job-{uid}"), "uid": uid, "resourceVersion": rv,
                         "labels": {"jobwarden.io/origin-uid": "o"}},
            "spec": {},
            "status": status,
        }))
        .expect("a Job")
    }

    #[test]
    fn keeps_each_version_once_and_marks_what_a_relist_misses_as_deleted() {
        let (seen, mut listed) = (Record::default(), HashSet::new());
        let t0 = Instant::now();
        let t1 = t0 + std::time::Duration::from_secs(1);
        let done = json!({"conditions": [{"type": "Complete", "status": "True"}]});
        let events = [
            (watcher::Event::Init, t0),
            (watcher::Event::InitApply(job("a", "1", json!({}))), t0),
            (watcher::Event::InitApply(job("b", "2", json!({}))), t0),
            (watcher::Event::InitDone, t0),
            (watcher::Event::Apply(job("a", "3", done.clone())), t1),
            // The watch starts again: a's last version again, and b gone meanwhile.
            (watcher::Event::Init, t1),
            (watcher::Event::InitApply(job("a", "3", done.clone())), t1),
            (watcher::Event::InitDone, t1),
        ];
        for (event, at) in events {
            note(&seen, &mut listed, event, at);
        }
        let seen = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let a = &seen["a"];
        assert_eq!(a.versions.len(), 2);
        assert_eq!(a.ended_at(), Some(t1));
        assert_eq!(a.last_status(), &done);
        assert_eq!(a.deleted, None);
        assert_eq!(a.labels["jobwarden.io/origin-uid"], "o");
        assert_eq!(seen["b"].deleted, Some(t1));
        assert_eq!(seen["b"].ended_at(), None);
    }

    #[test]
    fn a_condition_that_is_not_true_does_not_end_a_job() {
        let status = json!({"conditions": [
            {"type": "Failed", "status": "False"},
            {"type": "SuccessCriteriaMet", "status": "True"},
        ]});
        assert_eq!(terminal_condition(&status), None);
        let status = json!({"conditions": [{"type": "Failed", "status": "True"}]});
        assert_eq!(terminal_condition(&status), Some("Failed"));
    }
}
