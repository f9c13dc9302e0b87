//! The pod watch cache: every pod carrying a Job uid label, as a compact `CachedPod`, indexed by
//! the uid of the Job that controls it, so a sync reads its pods without a LIST and the cache
//! holds a few hundred bytes per pod. Fed by watch events (including relists, which it applies
//! atomically); each event is turned into what it means for the controller (`PodObservation`:
//! a pod showed up, began deleting, lost its finalizer, went away), for the expectations.
//! Until its first list has loaded it says so (`is_synced`): an empty cache then means "not
//! known yet", never "no pods", and nothing may be planned from it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;

use super::CachedPod;

/// The pods of one Job.
#[derive(Debug, Default, Clone)]
struct JobPods {
    namespace: Box<str>,
    /// The Job's name, from the pods' owner reference: what a sync is keyed by.
    job_name: Box<str>,
    /// By pod uid (the key shares the pod's own uid).
    pods: HashMap<Arc<str>, Arc<CachedPod>>,
}

/// The uids are shared, not copied: a pod's uid is one allocation whatever holds it, and a
/// Job's uid one for all its pods.
#[derive(Debug, Default, Clone)]
struct Index {
    /// By the controlling Job's uid; pods with no Job controller under `unowned_key` of their
    /// namespace.
    jobs: HashMap<Arc<str>, JobPods>,
    /// Pod uid to the key it is filed under in `jobs`.
    filed_under: HashMap<Arc<str>, Arc<str>>,
}

/// What one pod event means to the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodObservation {
    pub namespace: String,
    /// The Job that controls the pod (its owner reference), if any.
    pub job: Option<JobKey>,
    pub pod_uid: String,
    /// The pod is new to the cache (a creation the controller may be expecting).
    pub appeared: bool,
    /// The pod is being deleted, or gone.
    pub deleting: bool,
    /// The pod no longer holds the tracking finalizer, or is gone.
    pub released: bool,
    /// The pod as now cached; `None` once it is gone.
    pub pod: Option<Arc<CachedPod>>,
}

/// A Job as pod events name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JobKey {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// One copy of each value of `T` the cached pods hold. Values no pod holds any more are let go
/// whenever the set has doubled since it was last pruned, so it stays within twice what the
/// pods use.
#[derive(Debug)]
struct Shared<T: ?Sized> {
    values: HashSet<Arc<T>>,
    pruned_at: usize,
}

impl<T: ?Sized> Default for Shared<T> {
    fn default() -> Self {
        Shared {
            values: HashSet::new(),
            pruned_at: 0,
        }
    }
}

impl<T: ?Sized + Eq + std::hash::Hash> Shared<T> {
    fn share(&mut self, value: &Arc<T>) -> Arc<T> {
        if let Some(shared) = self.values.get(value) {
            return shared.clone();
        }
        self.values.insert(value.clone());
        if self.values.len() > 2 * self.pruned_at.max(4096) {
            self.values.retain(|v| Arc::strong_count(v) > 1);
            self.pruned_at = self.values.len();
        }
        value.clone()
    }
}

/// What the pods of the cache share of their labels: the lists (one per Job, the completion
/// index apart) and the index values.
#[derive(Debug, Default)]
struct Interned {
    lists: Shared<[(Arc<str>, Arc<str>)]>,
    indexes: Shared<str>,
}

impl Interned {
    fn labels(&mut self, pod: &mut CachedPod) {
        let labels = &mut pod.labels;
        labels.common = self.lists.share(&labels.common);
        if let Some(index) = &labels.index {
            labels.index = Some(self.indexes.share(index));
        }
    }
}

#[derive(Debug, Default)]
pub struct PodCache {
    index: RwLock<Index>,
    interned: Mutex<Interned>,
    /// A relist in progress: applied atomically at `InitDone`.
    relist: RwLock<Option<Index>>,
    /// Set once the first list has been applied (upstream's `HasSynced`); it stays set across
    /// later relists, which replace the index whole and never show it half filled.
    synced: tokio::sync::watch::Sender<bool>,
}

/// Where pods with no Job controller are filed: by namespace, under a key no uid can be
/// (uids are UUIDs; a NUL cannot come from one).
fn unowned_key(namespace: &str) -> String {
    format!("\0{namespace}")
}

fn owner(pod: &Pod) -> Option<(String, String)> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true) && o.kind == "Job" && o.api_version == "batch/v1")
        .map(|o| (o.name.clone(), o.uid.clone()))
}

impl Index {
    fn insert(
        &mut self,
        namespace: &str,
        owner: Option<&(String, String)>,
        mut pod: CachedPod,
    ) -> Arc<CachedPod> {
        let unowned;
        let (job_name, job_uid) = match owner {
            Some((n, u)) => (n.as_str(), u.as_str()),
            None => {
                unowned = unowned_key(namespace);
                ("", unowned.as_str())
            }
        };
        let key = match self.jobs.get_key_value(job_uid) {
            Some((k, _)) => k.clone(),
            None => Arc::from(job_uid),
        };
        if pod.owner_uid.is_some() {
            pod.owner_uid = Some(key.clone());
        }
        let pod = Arc::new(pod);
        let entry = self.jobs.entry(key.clone()).or_default();
        if entry.pods.is_empty() {
            entry.namespace = Box::from(namespace);
            entry.job_name = Box::from(job_name);
        }
        entry.pods.insert(pod.uid.clone(), pod.clone());
        self.filed_under.insert(pod.uid.clone(), key);
        pod
    }

    /// Takes the pod out, wherever it is filed.
    fn take(&mut self, pod_uid: &str) -> Option<Arc<CachedPod>> {
        let job_uid = self.filed_under.remove(pod_uid)?;
        let entry = self.jobs.get_mut(&job_uid)?;
        let pod = entry.pods.remove(pod_uid);
        if entry.pods.is_empty() {
            self.jobs.remove(&job_uid);
        }
        pod
    }

    fn get(&self, job_uid: &str, pod_uid: &str) -> Option<&Arc<CachedPod>> {
        self.jobs.get(job_uid)?.pods.get(pod_uid)
    }
}

impl PodCache {
    /// Applies one watch event and says what changed.
    pub fn apply(&self, event: &watcher::Event<Pod>) -> Vec<PodObservation> {
        match event {
            watcher::Event::Apply(pod) => self.upsert(pod).into_iter().collect(),
            watcher::Event::Delete(pod) => self.delete(pod).into_iter().collect(),
            watcher::Event::Init => {
                *write(&self.relist) = Some(Index::default());
                Vec::new()
            }
            watcher::Event::InitApply(pod) => {
                if let Some(relist) = write(&self.relist).as_mut() {
                    let owner = owner(pod);
                    let ns = pod.metadata.namespace.as_deref().unwrap_or("");
                    relist.insert(ns, owner.as_ref(), self.cached(pod));
                }
                Vec::new()
            }
            watcher::Event::InitDone => {
                let Some(new) = write(&self.relist).take() else {
                    return Vec::new();
                };
                let old = std::mem::replace(&mut *write(&self.index), new.clone());
                self.synced.send_replace(true);
                diff(&old, &new)
            }
        }
    }

    /// The pod as the cache keeps it, its label strings shared.
    fn cached(&self, pod: &Pod) -> CachedPod {
        let mut cached = CachedPod::from_pod(pod);
        self.interned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .labels(&mut cached);
        cached
    }

    fn upsert(&self, pod: &Pod) -> Option<PodObservation> {
        let cached = self.cached(pod);
        let owner = owner(pod);
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let unowned = unowned_key(&namespace);
        let job_uid = owner.as_ref().map_or(unowned.as_str(), |(_, u)| u.as_str());
        let mut index = write(&self.index);
        if index.get(job_uid, &cached.uid).map(|p| &**p) == Some(&cached) {
            return None;
        }
        // Taken out and filed again: a pod whose controller changed moves to its new Job.
        let previous = index.take(&cached.uid);
        let cached = index.insert(&namespace, owner.as_ref(), cached);
        drop(index);
        Some(observation(
            namespace,
            owner,
            previous.as_deref(),
            Some(cached),
        ))
    }

    fn delete(&self, pod: &Pod) -> Option<PodObservation> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let owner = owner(pod);
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let removed = write(&self.index).take(&uid);
        let last = removed.unwrap_or_else(|| Arc::new(CachedPod::from_pod(pod)));
        Some(observation(namespace, owner, Some(&last), None))
    }

    /// Whether the first list has loaded.
    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Resolves once the first list has loaded.
    pub fn wait_synced(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut synced = self.synced.subscribe();
        async move {
            // The sender lives as long as the cache; a cache dropped unsynced never resolves.
            if synced.wait_for(|s| *s).await.is_err() {
                futures::future::pending::<()>().await;
            }
        }
    }

    /// The pods whose controller is the Job with this uid.
    pub fn for_job(&self, job_uid: &str) -> Vec<Arc<CachedPod>> {
        read(&self.index)
            .jobs
            .get(job_uid)
            .map(|e| e.pods.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The pods of `namespace` that no Job controls: candidates for adoption.
    pub fn unowned_in(&self, namespace: &str) -> Vec<Arc<CachedPod>> {
        self.for_job(&unowned_key(namespace))
    }

    pub fn len(&self) -> usize {
        read(&self.index).jobs.values().map(|e| e.pods.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn observation(
    namespace: String,
    owner: Option<(String, String)>,
    before: Option<&CachedPod>,
    after: Option<Arc<CachedPod>>,
) -> PodObservation {
    let pod_uid = after
        .as_ref()
        .map(|p| p.uid.to_string())
        .or_else(|| before.map(|p| p.uid.to_string()))
        .unwrap_or_default();
    let (deleting, released) = match &after {
        Some(p) => (p.deleting, !p.has_finalizer),
        None => (true, true),
    };
    PodObservation {
        namespace: namespace.clone(),
        job: owner.map(|(name, uid)| JobKey {
            namespace,
            name,
            uid,
        }),
        pod_uid,
        appeared: before.is_none() && after.is_some(),
        deleting,
        released,
        pod: after,
    }
}

/// What a relist changed: pods that appeared, changed or went away while the watch was down.
fn diff(old: &Index, new: &Index) -> Vec<PodObservation> {
    let mut out = Vec::new();
    for (job_uid, entry) in &new.jobs {
        for (pod_uid, pod) in &entry.pods {
            let before = old.get(job_uid, pod_uid);
            if before.map(|b| &**b) == Some(&**pod) {
                continue;
            }
            out.push(observation(
                entry.namespace.to_string(),
                job_key(job_uid, entry),
                before.map(|b| &**b),
                Some(pod.clone()),
            ));
        }
    }
    for (job_uid, entry) in &old.jobs {
        for (pod_uid, pod) in &entry.pods {
            if new.get(job_uid, pod_uid).is_none() {
                out.push(observation(
                    entry.namespace.to_string(),
                    job_key(job_uid, entry),
                    Some(pod),
                    None,
                ));
            }
        }
    }
    out
}

fn job_key(job_uid: &str, entry: &JobPods) -> Option<(String, String)> {
    (!job_uid.is_empty() && !job_uid.starts_with('\0'))
        .then(|| (entry.job_name.to_string(), job_uid.to_owned()))
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, job_uid: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                             "name": "j", "uid": job_uid, "controller": true}]},
        }))
        .expect("a pod")
    }

    #[test]
    fn synced_once_the_first_list_is_in_and_a_relist_is_never_seen_half_filled() {
        let cache = PodCache::default();
        assert!(!cache.is_synced());
        cache.apply(&watcher::Event::Init);
        cache.apply(&watcher::Event::InitApply(pod("a", "job")));
        assert!(!cache.is_synced(), "half a list is not a sync");
        assert!(cache.for_job("job").is_empty());
        cache.apply(&watcher::Event::InitApply(pod("b", "job")));
        cache.apply(&watcher::Event::InitDone);
        assert!(cache.is_synced());
        assert_eq!(cache.for_job("job").len(), 2);

        // A watch restarted after 410 Gone lists again: the old index is read until the new
        // one is whole, then replaced at once; the cache stays synced throughout.
        cache.apply(&watcher::Event::Init);
        cache.apply(&watcher::Event::InitApply(pod("b", "job")));
        assert_eq!(cache.for_job("job").len(), 2);
        assert!(cache.is_synced());
        cache.apply(&watcher::Event::InitApply(pod("c", "job")));
        let changes = cache.apply(&watcher::Event::InitDone);
        let mut names: Vec<String> = cache
            .for_job("job")
            .iter()
            .map(|p| p.name.clone())
            .collect();
        names.sort();
        assert_eq!(names, ["b", "c"]);
        let mut seen: Vec<(String, bool)> = changes
            .iter()
            .map(|o| (o.pod_uid.clone(), o.appeared))
            .collect();
        seen.sort();
        assert_eq!(
            seen,
            [("uid-a".to_owned(), false), ("uid-c".to_owned(), true)]
        );
    }

    #[test]
    fn the_pods_of_a_job_share_their_labels() {
        let labelled = |name: &str, index: &str| {
            let mut p = pod(name, "job");
            p.metadata.labels = Some(
                [
                    ("batch.kubernetes.io/controller-uid", "job"),
                    ("batch.kubernetes.io/job-completion-index", index),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            );
            p
        };
        let cache = PodCache::default();
        cache.apply(&watcher::Event::Apply(labelled("a", "0")));
        cache.apply(&watcher::Event::Apply(labelled("b", "1")));
        cache.apply(&watcher::Event::Apply(labelled("c", "1")));
        let pods = cache.for_job("job");
        assert!(
            pods.windows(2)
                .all(|w| Arc::ptr_eq(&w[0].labels.common, &w[1].labels.common)),
            "one list for the Job"
        );
        let ones: Vec<&Arc<str>> = pods
            .iter()
            .filter_map(|p| p.labels.index.as_ref())
            .filter(|i| &***i == "1")
            .collect();
        assert!(Arc::ptr_eq(ones[0], ones[1]), "one copy of an index");
        for p in &pods {
            assert_eq!(p.label("batch.kubernetes.io/controller-uid"), Some("job"));
            assert!(
                p.label("batch.kubernetes.io/job-completion-index")
                    .is_some()
            );
            assert_eq!(p.label("app"), None);
        }
    }

    #[test]
    fn values_no_pod_holds_are_let_go() {
        let mut shared = Shared::<str>::default();
        for i in 0..10_000 {
            let _ = shared.share(&Arc::from(format!("uid-{i}")));
        }
        assert!(
            shared.values.len() <= 2 * 4096 + 1,
            "{}",
            shared.values.len()
        );
    }

    #[tokio::test]
    async fn wait_synced_resolves_at_the_first_list() {
        let cache = PodCache::default();
        let waiting = cache.wait_synced();
        cache.apply(&watcher::Event::Init);
        cache.apply(&watcher::Event::InitDone);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("resolved");
    }
}
