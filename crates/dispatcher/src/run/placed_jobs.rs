//! Where the dispatcher's Jobs are placed, as every replica reads it from the management
//! cluster: a watch of the Jobs, each kept as little more than its `jobwarden.io/worker`.
//! It backs the veto of a policy that removes a worker with Jobs still placed there, which
//! every replica registers for its whole life, leading or not: a standby refuses what the
//! leader refuses, from the same facts and in the same words, so that a replica that takes over
//! while a refused file is mounted still has the worker in its fleet.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use jobwarden_admission::Policy;
use jobwarden_admission::policy::{PolicyVetoes, VetoRegistration};
use jobwarden_runtime::job_cache::CachedJob;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client};

use super::fleet_change::{PlacedJob, removal_refused};
use crate::sync::lock;
use crate::worker::link as worker_link;

/// A Job placed on a worker, as the veto needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Placed {
    namespace: String,
    name: String,
    worker: String,
    finished: bool,
}

/// The dispatcher's Jobs recorded on a worker, by UID; shared by the watch and the veto.
#[derive(Debug, Clone, Default)]
pub struct PlacedJobs {
    jobs: Arc<Mutex<HashMap<String, Placed>>>,
    /// The first list is in: until then no removal can be judged.
    listed: Arc<AtomicBool>,
}

impl PlacedJobs {
    /// What the watch brought: the Job kept while it is `dispatcher`'s and placed, else
    /// forgotten.
    fn seen(jobs: &mut HashMap<String, Placed>, job: &CachedJob, dispatcher: &str) {
        match job.worker.as_deref() {
            Some(worker) if job.is_managed_by(dispatcher) => {
                jobs.insert(
                    job.uid().to_owned(),
                    Placed {
                        namespace: job.namespace().to_owned(),
                        name: job.name().to_owned(),
                        worker: worker.to_owned(),
                        finished: job.finished,
                    },
                );
            }
            _ => {
                jobs.remove(job.uid());
            }
        }
    }

    /// Follows the Jobs of `dispatcher` on the management cluster until dropped; the watch
    /// lists again after an outage, as the leader's does.
    pub async fn watch(self, client: Client, dispatcher: String) {
        let mut relist: HashMap<String, Placed> = HashMap::new();
        let mut events = watcher(Api::<CachedJob>::all(client), watcher::Config::default())
            .backoff(worker_link::quick_backoff())
            .boxed();
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Init) => relist.clear(),
                Ok(watcher::Event::InitApply(job)) => Self::seen(&mut relist, &job, &dispatcher),
                Ok(watcher::Event::InitDone) => {
                    *lock(&self.jobs) = std::mem::take(&mut relist);
                    self.listed.store(true, Ordering::SeqCst);
                }
                Ok(watcher::Event::Apply(job)) => {
                    Self::seen(&mut lock(&self.jobs), &job, &dispatcher);
                }
                Ok(watcher::Event::Delete(job)) => {
                    lock(&self.jobs).remove(job.uid());
                }
                Err(error) => {
                    tracing::warn!(%error, "watching where the dispatched Jobs are placed")
                }
            }
        }
    }

    /// `Err` with the refusal's words when `new` removes a worker of `running` on which an
    /// unfinished Job is placed, or when that cannot be told yet.
    pub fn judge(&self, running: &Policy, new: &Policy) -> Result<(), String> {
        let removes = running
            .dispatch
            .workers
            .iter()
            .any(|w| new.dispatch.worker(&w.name).is_none());
        if !removes {
            return Ok(());
        }
        if !self.listed.load(Ordering::SeqCst) {
            return Err(NOT_LISTED.to_owned());
        }
        let jobs = lock(&self.jobs);
        removal_refused(
            &running.dispatch,
            &new.dispatch,
            jobs.values().map(|p| PlacedJob {
                namespace: &p.namespace,
                name: &p.name,
                worker: Some(&p.worker),
                finished: p.finished,
            }),
        )
    }

    /// Registers [`Self::judge`] as the dispatcher's veto, until the registration is dropped.
    pub fn register(&self, vetoes: &PolicyVetoes) -> VetoRegistration {
        let placed = self.clone();
        vetoes.register("dispatcher", move |running: &Policy, new: &Policy| {
            placed.judge(running, new)
        })
    }
}

/// Why a removal is refused before the Jobs are listed.
pub const NOT_LISTED: &str = "dispatch.workers: a worker is removed, and the dispatcher has not listed its Jobs yet to know whether any is placed there; the policy is tried again";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(workers: &[&str]) -> Policy {
        let workers: Vec<_> = workers
            .iter()
            .map(|w| json!({"name": w, "kubeconfigSecret": format!("s-{w}")}))
            .collect();
        serde_json::from_value(json!({"dispatch": {"workers": workers}})).expect("a policy")
    }

    fn job(uid: &str, worker: Option<&str>, managed_by: &str, finished: bool) -> CachedJob {
        let mut j = json!({
            "metadata": {"name": uid, "namespace": "ns", "uid": uid, "annotations": {}},
            "spec": {"managedBy": managed_by}, "status": {}});
        if let Some(w) = worker {
            j["metadata"]["annotations"]["jobwarden.io/worker"] = json!(w);
        }
        if finished {
            j["status"]["conditions"] = json!([{"type": "Complete", "status": "True"}]);
        }
        CachedJob::from_value(j)
    }

    #[test]
    fn a_removal_is_judged_from_the_jobs_placed_as_every_replica_reads_them() {
        const D: &str = "jobwarden.io/dispatcher";
        let placed = PlacedJobs::default();
        let (both, west) = (policy(&["east", "west"]), policy(&["west"]));
        // Nothing listed yet: a removal cannot be judged, anything else can.
        assert_eq!(placed.judge(&both, &west), Err(NOT_LISTED.to_owned()));
        assert_eq!(placed.judge(&west, &both), Ok(()));

        let mut jobs = HashMap::new();
        for j in [
            job("train", Some("east"), D, false),
            job("done", Some("east"), D, true),
            job("waits", None, D, false),
            job("theirs", Some("east"), "example.com/other", false),
        ] {
            PlacedJobs::seen(&mut jobs, &j, D);
        }
        assert_eq!(jobs.len(), 2, "{jobs:?}");
        *lock(&placed.jobs) = jobs;
        placed.listed.store(true, Ordering::SeqCst);
        let refused = placed.judge(&both, &west).expect_err("refused");
        assert!(
            refused.contains("worker east still has 1 Job placed on it (ns/train)"),
            "{refused}"
        );
        // The Job ends: the removal passes.
        PlacedJobs::seen(
            &mut lock(&placed.jobs),
            &job("train", Some("east"), D, true),
            D,
        );
        assert_eq!(placed.judge(&both, &west), Ok(()));
    }
}
