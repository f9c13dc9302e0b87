//! What the controller has asked the API server for and not yet seen in its watch caches, per
//! Job, as upstream's `ControllerExpectations` and `uidTrackingExpectations`: pod creations and
//! deletions (until they are seen, a sync neither creates nor deletes pods, nor declares the Job
//! finished), finalizer removals (their pods count as released at once), and the Job
//! resourceVersion its last status write replaced (a cached Job still at that version is older
//! than our own write, and is not planned from). Creations and deletions expire after five
//! minutes, as upstream's do, so a lost watch event delays a Job and never stalls it.
//! Plain bookkeeping: the caller passes the time in.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// Upstream's `ExpectationsTimeout`.
pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, Default)]
struct JobExpectations {
    /// Pods created (or being created) that the watch has not shown yet.
    creations: i64,
    /// Pods whose deletion the watch has not shown yet.
    deletions: HashSet<String>,
    /// When `creations`/`deletions` were last raised.
    since: Option<Timestamp>,
    /// Pods whose tracking finalizer is being removed.
    removing_finalizers: HashSet<String>,
    /// The resourceVersion of the Job our last status write replaced, and when it was written.
    replaced_version: Option<(String, Timestamp)>,
}

#[derive(Debug, Default)]
pub struct Expectations {
    jobs: HashMap<String, JobExpectations>,
}

fn expired(since: Timestamp, now: Timestamp) -> bool {
    let waited = now.duration_since(since);
    waited.as_secs() >= EXPECTATIONS_TIMEOUT.as_secs() as i64
}

impl Expectations {
    fn job(&mut self, job_uid: &str) -> &mut JobExpectations {
        self.jobs.entry(job_uid.to_owned()).or_default()
    }

    /// Upstream's `SatisfiedExpectations`: every creation and deletion asked for has been seen
    /// (or they have expired).
    pub fn satisfied(&mut self, job_uid: &str, now: Timestamp) -> bool {
        let Some(e) = self.jobs.get_mut(job_uid) else {
            return true;
        };
        if e.creations <= 0 && e.deletions.is_empty() {
            return true;
        }
        if e.since.is_some_and(|since| expired(since, now)) {
            tracing::warn!(
                job_uid,
                creations = e.creations,
                deletions = e.deletions.len(),
                "expected pod changes never showed up in the watch; going on without them"
            );
            e.creations = 0;
            e.deletions.clear();
            return true;
        }
        false
    }

    /// Pods are only created once every earlier creation was seen, so this sets the count
    /// rather than adding to it, as upstream's `SetExpectations` does: a count driven below
    /// zero by pods seen after a restart cannot hide the new ones.
    pub fn expect_creations(&mut self, job_uid: &str, n: usize, now: Timestamp) {
        if n == 0 {
            return;
        }
        let e = self.job(job_uid);
        e.creations = i64::try_from(n).unwrap_or(i64::MAX);
        e.since = Some(now);
    }

    /// A pod of the Job showed up in the watch, or a creation failed and never will.
    pub fn creation_observed(&mut self, job_uid: &str, n: usize) {
        if let Some(e) = self.jobs.get_mut(job_uid) {
            e.creations -= i64::try_from(n).unwrap_or(i64::MAX);
        }
    }

    pub fn expect_deletions<'a>(
        &mut self,
        job_uid: &str,
        pods: impl IntoIterator<Item = &'a str>,
        now: Timestamp,
    ) {
        let e = self.job(job_uid);
        let before = e.deletions.len();
        e.deletions.extend(pods.into_iter().map(str::to_owned));
        if e.deletions.len() > before {
            e.since = Some(now);
        }
    }

    /// The watch showed the pod deleting or gone, or its deletion failed and never will.
    pub fn deletion_observed(&mut self, job_uid: &str, pod_uid: &str) {
        if let Some(e) = self.jobs.get_mut(job_uid) {
            e.deletions.remove(pod_uid);
        }
    }

    pub fn expect_finalizer_removals<'a>(
        &mut self,
        job_uid: &str,
        pods: impl IntoIterator<Item = &'a str>,
    ) {
        let e = self.job(job_uid);
        e.removing_finalizers
            .extend(pods.into_iter().map(str::to_owned));
    }

    /// The watch showed the pod without our finalizer (or gone), or the removal failed.
    pub fn finalizer_removal_observed(&mut self, job_uid: &str, pod_uid: &str) {
        if let Some(e) = self.jobs.get_mut(job_uid) {
            e.removing_finalizers.remove(pod_uid);
        }
    }

    /// Pods whose finalizer removal is under way: `plan` counts them as released.
    pub fn removing_finalizers(&self, job_uid: &str) -> HashSet<String> {
        self.jobs
            .get(job_uid)
            .map(|e| e.removing_finalizers.clone())
            .unwrap_or_default()
    }

    /// Pods whose deletion the watch has not shown yet: never deleted twice.
    pub fn deleting(&self, job_uid: &str) -> HashSet<String> {
        self.jobs
            .get(job_uid)
            .map(|e| e.deletions.clone())
            .unwrap_or_default()
    }

    /// Our status write replaced the Job at `version`.
    pub fn wrote_status(&mut self, job_uid: &str, version: &str, now: Timestamp) {
        self.job(job_uid).replaced_version = Some((version.to_owned(), now));
    }

    /// Whether the cached Job at `version` is older than our own last status write. A watch
    /// delivers a Job's versions in order, so the cache is behind exactly while it still shows
    /// the version our write replaced; any other version is that write or a later one.
    pub fn job_is_stale(&mut self, job_uid: &str, version: &str, now: Timestamp) -> bool {
        let Some(e) = self.jobs.get_mut(job_uid) else {
            return false;
        };
        match &e.replaced_version {
            Some((v, at)) if v == version && !expired(*at, now) => true,
            Some(_) => {
                e.replaced_version = None;
                false
            }
            None => false,
        }
    }

    /// The Job is gone: nothing more to expect.
    pub fn forget(&mut self, job_uid: &str) {
        self.jobs.remove(job_uid);
    }

    /// Nothing expected of any Job: what the tests check after `forget`.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn creations_are_satisfied_once_seen_or_failed() {
        let mut e = Expectations::default();
        assert!(e.satisfied("j", at(0)));
        e.expect_creations("j", 3, at(0));
        assert!(!e.satisfied("j", at(1)));
        e.creation_observed("j", 2);
        assert!(!e.satisfied("j", at(1)));
        e.creation_observed("j", 1);
        assert!(e.satisfied("j", at(1)));
    }

    #[test]
    fn deletions_are_tracked_by_pod() {
        let mut e = Expectations::default();
        e.expect_deletions("j", ["a", "b"], at(0));
        e.deletion_observed("j", "a");
        e.deletion_observed("j", "a");
        assert!(!e.satisfied("j", at(1)), "b is still expected");
        e.deletion_observed("j", "b");
        assert!(e.satisfied("j", at(1)));
    }

    #[test]
    fn outstanding_changes_expire_after_five_minutes() {
        let mut e = Expectations::default();
        e.expect_creations("j", 1, at(0));
        assert!(!e.satisfied("j", at(299)));
        assert!(e.satisfied("j", at(300)));
        assert!(e.satisfied("j", at(301)), "reset once expired");
    }

    #[test]
    fn a_cached_job_at_the_replaced_version_is_stale_until_the_watch_moves_on() {
        let mut e = Expectations::default();
        assert!(!e.job_is_stale("j", "10", at(0)));
        e.wrote_status("j", "10", at(0));
        assert!(e.job_is_stale("j", "10", at(1)));
        assert!(!e.job_is_stale("j", "11", at(1)));
        assert!(
            !e.job_is_stale("j", "10", at(1)),
            "cleared once a newer version was seen"
        );
        e.wrote_status("j", "12", at(2));
        assert!(!e.job_is_stale("j", "12", at(400)), "expires");
    }

    #[test]
    fn finalizer_removals_are_listed_until_observed() {
        let mut e = Expectations::default();
        e.expect_finalizer_removals("j", ["a", "b"]);
        e.finalizer_removal_observed("j", "a");
        assert_eq!(e.removing_finalizers("j"), HashSet::from(["b".to_owned()]));
        e.forget("j");
        assert!(e.removing_finalizers("j").is_empty());
        assert!(e.is_empty());
    }
}
