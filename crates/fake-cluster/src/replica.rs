//! A controller replica against the in-memory cluster, stepped by hand: its caches are fed from
//! the cluster's watch logs at a pace the caller chooses (all of it, or all but the newest
//! events, so the caches lag behind the writes), and its syncs run to completion at once. A new
//! `Replica` is a restarted controller: fresh caches from a list, no expectations. The crash
//! tests and `jobwarden simulate` drive the very `JobController` the reconcile loop runs.

use std::sync::Arc;

use futures::executor::block_on;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;

use super::{Change, InMemoryCluster, Resource, WatchEvent};
use jobwarden_controller::metrics::ControllerMetrics;
use jobwarden_controller::plan::PlanConfig;
use jobwarden_controller::sync::{JobController, SyncError, SyncReport};
use jobwarden_runtime::job_cache::CachedJob;

pub struct Replica {
    cluster: Arc<InMemoryCluster>,
    controller: JobController<Arc<InMemoryCluster>>,
    jobs: Store<CachedJob>,
    writer: reflector::store::Writer<CachedJob>,
    job_watch: u64,
    pod_watch: u64,
}

fn decode<K: serde::de::DeserializeOwned>(text: &str) -> Option<K> {
    serde_json::from_str(text).ok()
}

impl Replica {
    /// Starts a replica the way an informer does: watch, then list.
    pub fn start(cluster: Arc<InMemoryCluster>, config: PlanConfig) -> Replica {
        let mut replica = Replica::start_before_pod_list(cluster, config);
        replica.list_pods();
        replica
    }

    /// A replica whose Job list is in and whose pod list is not yet (on a cluster the pods,
    /// many more, arrive last): its pod cache has not synced.
    pub fn start_before_pod_list(cluster: Arc<InMemoryCluster>, config: PlanConfig) -> Replica {
        let job_watch = cluster.subscribe(Resource::Jobs);
        let pod_watch = cluster.subscribe(Resource::Pods);
        let (jobs, mut writer) = reflector::store::<CachedJob>();
        let listed_jobs = cluster.with(|s| s.list_jobs());
        writer.apply_watcher_event(&watcher::Event::Init);
        for j in listed_jobs.iter().filter_map(|t| decode::<CachedJob>(t)) {
            writer.apply_watcher_event(&watcher::Event::InitApply(j));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let controller = JobController::new(cluster.clone(), config, ControllerMetrics::default());
        Replica {
            cluster,
            controller,
            jobs,
            writer,
            job_watch,
            pod_watch,
        }
    }

    /// Lists the pods, and watches them from that list on (as an informer's watch starts at
    /// its list's resourceVersion).
    pub fn list_pods(&mut self) {
        self.cluster.unsubscribe(Resource::Pods, self.pod_watch);
        self.pod_watch = self.cluster.subscribe(Resource::Pods);
        let listed_pods = self.cluster.with(|s| s.list_pods());
        self.controller.observe_pods(&watcher::Event::Init);
        for p in listed_pods.iter().filter_map(|t| decode::<Pod>(t)) {
            self.controller.observe_pods(&watcher::Event::InitApply(p));
        }
        self.controller.observe_pods(&watcher::Event::InitDone);
    }

    pub fn controller(&self) -> &JobController<Arc<InMemoryCluster>> {
        &self.controller
    }

    /// Feeds the caches every event but the newest `jobs_lag` Job events and `pods_lag` pod
    /// events (the two watches lag independently, as two watches do); returns how many.
    pub fn catch_up(&mut self, jobs_lag: u64, pods_lag: u64) -> usize {
        let jobs = self.cluster.pending_events(Resource::Jobs, self.job_watch);
        let pods = self.cluster.pending_events(Resource::Pods, self.pod_watch);
        self.deliver(Resource::Jobs, jobs.saturating_sub(jobs_lag))
            + self.deliver(Resource::Pods, pods.saturating_sub(pods_lag))
    }

    /// Feeds the caches the next `n` events of one watch.
    pub fn deliver(&mut self, resource: Resource, n: u64) -> usize {
        let max = usize::try_from(n).unwrap_or(usize::MAX);
        match resource {
            Resource::Jobs => {
                let events = self.cluster.next_events(resource, self.job_watch, max);
                for e in &events {
                    if let Some(event) = watcher_event::<CachedJob>(e) {
                        if let watcher::Event::Delete(job) = &event {
                            self.controller.job_gone(job.uid());
                        }
                        self.writer.apply_watcher_event(&event);
                    }
                }
                events.len()
            }
            Resource::Pods => {
                let events = self.cluster.next_events(resource, self.pod_watch, max);
                for e in &events {
                    if let Some(event) = watcher_event::<Pod>(e) {
                        self.controller.observe_pods(&event);
                    }
                }
                events.len()
            }
        }
    }

    /// Events of `resource` the cache has not seen yet.
    pub fn behind(&self, resource: Resource) -> u64 {
        let id = match resource {
            Resource::Jobs => self.job_watch,
            Resource::Pods => self.pod_watch,
        };
        self.cluster.pending_events(resource, id)
    }

    /// The Job as this replica's cache holds it.
    pub fn cached_job(&self, namespace: &str, name: &str) -> Option<Arc<CachedJob>> {
        self.jobs.get(&ObjectRef::new(name).within(namespace))
    }

    /// Syncs the Job `namespace/name` from the caches, as the loop would.
    pub fn sync(
        &self,
        namespace: &str,
        name: &str,
        now: Timestamp,
    ) -> Option<Result<SyncReport, SyncError>> {
        let job = self.cached_job(namespace, name)?;
        Some(block_on(self.controller.sync(&job, now)))
    }
}

fn watcher_event<K: serde::de::DeserializeOwned>(e: &WatchEvent) -> Option<watcher::Event<K>> {
    let object = decode::<K>(&e.object)?;
    Some(match e.change {
        Change::Added | Change::Modified => watcher::Event::Apply(object),
        Change::Deleted => watcher::Event::Delete(object),
    })
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.cluster.unsubscribe(Resource::Jobs, self.job_watch);
        self.cluster.unsubscribe(Resource::Pods, self.pod_watch);
    }
}
