//! The in-memory cluster's watches as the streams kube's `watcher` yields: a list (`Init`,
//! `InitApply`…, `InitDone`), then every change in order, each batch held back by `lag`
//! (tokio time, so a paused clock makes it free), as a real watch trails the writes. The
//! reconcile loop runs on these in the scale benchmark and the tests exactly as on a cluster.
//! The list itself can be held back (`list_lag`), as a LIST of many pods takes longer than one
//! of a few Jobs: a controller restarting on a real cluster has its Jobs well before its pods.

use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;

use super::{Change, InMemoryCluster, Resource};
use jobwarden_runtime::job_cache::CachedJob;

/// Events fetched per read of the log.
const BATCH: usize = 256;

type Events<K> = Result<watcher::Event<K>, watcher::Error>;

/// How a watch trails the cluster.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lags {
    /// Before the first list is delivered (it is taken when the watch starts).
    pub list: Duration,
    /// Before each batch of changes is delivered.
    pub changes: Duration,
}

pub fn watch_jobs(
    cluster: Arc<InMemoryCluster>,
    lags: Lags,
) -> impl Stream<Item = Events<CachedJob>> + Send + 'static {
    watch(cluster, Resource::Jobs, lags)
}

pub fn watch_pods(
    cluster: Arc<InMemoryCluster>,
    lags: Lags,
) -> impl Stream<Item = Events<Pod>> + Send + 'static {
    watch(cluster, Resource::Pods, lags)
}

struct Watch {
    cluster: Arc<InMemoryCluster>,
    resource: Resource,
    id: u64,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.cluster.unsubscribe(self.resource, self.id);
    }
}

fn watch<K: DeserializeOwned + Send + 'static>(
    cluster: Arc<InMemoryCluster>,
    resource: Resource,
    lags: Lags,
) -> impl Stream<Item = Events<K>> + Send + 'static {
    let id = cluster.subscribe(resource);
    let listed = cluster.with(|s| match resource {
        Resource::Jobs => s.list_jobs(),
        Resource::Pods => s.list_pods(),
    });
    let mut initial = vec![watcher::Event::Init];
    initial.extend(
        listed
            .iter()
            .filter_map(|t| serde_json::from_str::<K>(t).ok())
            .map(watcher::Event::InitApply),
    );
    initial.push(watcher::Event::InitDone);
    let state = (
        Watch {
            cluster,
            resource,
            id,
        },
        initial,
    );
    let batches = futures::stream::unfold(state, move |(w, pending)| async move {
        if !pending.is_empty() {
            if !lags.list.is_zero() {
                tokio::time::sleep(lags.list).await;
            }
            return Some((pending, (w, Vec::new())));
        }
        let events = loop {
            let cluster = w.cluster.clone();
            let changed = cluster.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let events = w.cluster.next_events(w.resource, w.id, BATCH);
            if !events.is_empty() {
                break events;
            }
            changed.await;
        };
        {
            if !lags.changes.is_zero() {
                tokio::time::sleep(lags.changes).await;
            }
            let decoded: Vec<watcher::Event<K>> = events
                .iter()
                .filter_map(|e| {
                    let object = serde_json::from_str::<K>(&e.object).ok()?;
                    Some(match e.change {
                        Change::Added | Change::Modified => watcher::Event::Apply(object),
                        Change::Deleted => watcher::Event::Delete(object),
                    })
                })
                .collect();
            Some((decoded, (w, Vec::new())))
        }
    });
    futures::StreamExt::flat_map(batches, |events| {
        futures::stream::iter(events.into_iter().map(Ok))
    })
}
