//! A namespace of the same name on every plane of a fleet, as a dispatched Job needs one
//! wherever it may run, with what a load run watches there: on each worker a kubelet that
//! ends each pod a second after it appears ([`crate::kubelet::finish_pods_after_a_second`],
//! its requests named `scale-kubelet`) and a watch of the dispatcher's copies (by their origin
//! label); on the management plane a watch of the user's Jobs. The scale test and benchmark
//! run their bursts in one.

use std::collections::BTreeMap;

use crate::Fleet;
use crate::job_versions::{JobVersions, Seen};

/// The label naming the user's Job a copy was made from.
pub const ORIGIN_UID_LABEL: &str = "jobwarden.io/origin-uid";

pub struct DispatchedNamespace {
    pub name: String,
    /// The user's Jobs, on the management plane.
    pub users: JobVersions,
    /// The copies on each worker, in the fleet's order.
    pub copies: Vec<JobVersions>,
    kubelets: Vec<tokio::task::JoinHandle<()>>,
}

impl Fleet {
    /// A new namespace named after `prefix` on every plane, watched, with a kubelet on each
    /// worker.
    pub async fn dispatched_namespace(&self, prefix: &str) -> DispatchedNamespace {
        let management = self.management.client().await;
        let name = self.management.create_namespace(&management, prefix).await;
        let mut kubelets = Vec::new();
        let mut copies = Vec::new();
        for worker in &self.workers {
            let admin = worker.client().await;
            crate::create_named_namespace(&admin, &name).await;
            kubelets.push(crate::kubelet::finish_pods_after_a_second(
                worker.client_named("scale-kubelet").await,
                &name,
            ));
            copies.push(JobVersions::watch(admin, &name, Some(ORIGIN_UID_LABEL)));
        }
        DispatchedNamespace {
            users: JobVersions::watch(management, &name, None),
            name,
            copies,
            kubelets,
        }
    }
}

impl DispatchedNamespace {
    /// How many of the user's Jobs have shown how they ended.
    pub fn ended(&self) -> usize {
        self.users
            .seen()
            .values()
            .filter(|s| s.ended_at().is_some())
            .count()
    }

    /// How many copies were seen deleted, on every worker.
    pub fn copies_gone(&self) -> usize {
        self.copies
            .iter()
            .map(|c| {
                let (seen, live) = c.count();
                seen - live
            })
            .sum()
    }

    /// The kubelets and watches stopped; what they saw.
    pub fn stop(self) -> Record {
        for k in &self.kubelets {
            k.abort();
        }
        Record {
            users: self.users.seen(),
            copies: self.copies.iter().map(JobVersions::seen).collect(),
        }
    }
}

/// What was seen in a [`DispatchedNamespace`], each Job by its UID.
#[derive(Debug, Clone, Default)]
pub struct Record {
    pub users: BTreeMap<String, Seen>,
    /// On each worker, in the fleet's order.
    pub copies: Vec<BTreeMap<String, Seen>>,
}

impl Record {
    /// The copies of the user's Job with UID `uid`: the index of the worker each was on, and
    /// what was seen of it.
    pub fn copies_of(&self, uid: &str) -> Vec<(usize, &Seen)> {
        self.copies
            .iter()
            .enumerate()
            .flat_map(|(w, copies)| copies.values().map(move |c| (w, c)))
            .filter(|(_, c)| c.labels.get(ORIGIN_UID_LABEL).map(String::as_str) == Some(uid))
            .collect()
    }

    /// For each worker, how many of the user's Jobs had a copy there.
    pub fn jobs_per_worker(&self) -> Vec<usize> {
        self.copies
            .iter()
            .map(|copies| {
                let origins: std::collections::BTreeSet<&String> = copies
                    .values()
                    .filter_map(|c| c.labels.get(ORIGIN_UID_LABEL))
                    .collect();
                origins.len()
            })
            .collect()
    }

    /// Origin UIDs named by copies that no user's Job seen has.
    pub fn copies_of_no_job(&self) -> Vec<&String> {
        self.copies
            .iter()
            .flat_map(|c| c.values())
            .filter_map(|c| c.labels.get(ORIGIN_UID_LABEL))
            .filter(|origin| !self.users.contains_key(*origin))
            .collect()
    }
}
