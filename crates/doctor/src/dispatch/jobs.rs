//! The management cluster's dispatched Jobs as the dispatch checks need them: where each is
//! recorded, which workers it names, its lost mark and what it does when its worker is lost;
//! and, for a worker, the namespaces of the Jobs placed there or waiting for a worker that may
//! take them. Pure.

use std::collections::BTreeMap;

use jobwarden_admission::policy::Worker;
use jobwarden_dispatcher::copy::record::{self, OnWorkerLost};
use jobwarden_dispatcher::copy::status::is_finished;
use jobwarden_dispatcher::placement::Named;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

/// One of the dispatcher's Jobs, not yet finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchedJob {
    pub namespace: String,
    pub name: String,
    /// `jobwarden.io/worker`: where it is recorded; `None` while it waits for a worker.
    pub worker: Option<String>,
    /// `jobwarden.io/workers`.
    pub named: Named,
    /// `jobwarden.io/worker-lost-since`, when it reads as a time.
    pub lost_since: Option<Timestamp>,
    pub on_worker_lost: OnWorkerLost,
}

impl DispatchedJob {
    /// The Job as listed, when the dispatcher named `dispatcher` runs it and it has not ended
    /// (nor is being deleted): an ended Job neither waits for a worker nor minds one lost.
    pub fn of(job: &Value, dispatcher: &str) -> Option<DispatchedJob> {
        let managed_by = job.pointer("/spec/managedBy").and_then(Value::as_str);
        if managed_by != Some(dispatcher)
            || is_finished(job)
            || job.pointer("/metadata/deletionTimestamp").is_some()
        {
            return None;
        }
        let text = |p: &str| {
            job.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Some(DispatchedJob {
            namespace: text("/metadata/namespace"),
            name: text("/metadata/name"),
            worker: record::recorded(job).map(str::to_owned),
            named: record::named(job),
            lost_since: record::lost_since(job),
            on_worker_lost: record::on_worker_lost(job),
        })
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    fn names(&self, worker: &str) -> bool {
        match &self.named {
            Named::Any => true,
            Named::Only(names) => names.iter().any(|n| n == worker),
        }
    }
}

/// Whether the policy lets `worker` take Jobs of `namespace` (whose labels on the management
/// cluster are `labels`), as the dispatcher decides it.
pub fn takes_namespace(
    worker: &Worker,
    namespace: &str,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    worker.namespaces.is_empty() || worker.namespaces.matches(namespace, labels)
}

/// The namespaces `worker` must have for the Jobs placed there and the Jobs waiting for a
/// worker that it may take, each with those Jobs (`namespace/name`). `labels`: the management
/// cluster's namespaces' labels, for a worker that chooses its namespaces by a selector.
pub fn wanted_namespaces(
    worker: &Worker,
    jobs: &[DispatchedJob],
    labels: &BTreeMap<String, BTreeMap<String, String>>,
) -> BTreeMap<String, Vec<String>> {
    let mut wanted: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for job in jobs {
        let placed_here = job.worker.as_deref() == Some(worker.name.as_str());
        let waiting_for_it = job.worker.is_none()
            && job.names(&worker.name)
            && takes_namespace(worker, &job.namespace, labels.get(&job.namespace));
        if placed_here || waiting_for_it {
            wanted
                .entry(job.namespace.clone())
                .or_default()
                .push(job.key());
        }
    }
    wanted
}
