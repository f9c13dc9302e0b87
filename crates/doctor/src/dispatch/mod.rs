//! `doctor`'s dispatch checks, made when the policy names workers: each worker as the
//! dispatcher meets it ([`worker`]), and the workers the dispatcher's Jobs find lost
//! ([`lost`]), from the management cluster's dispatched Jobs ([`jobs`]). Pure, but for
//! [`crate::read::dispatch`], which reads what [`checks`] judges.

pub mod budget;
pub mod draining;
pub mod jobs;
pub mod lost;
pub mod room;
pub mod teams;
pub mod worker;

use std::collections::BTreeMap;
use std::time::Duration;

use jobwarden_admission::policy::Dispatch;
use k8s_openapi::jiff::Timestamp;

use crate::check::Check;
use jobs::DispatchedJob;
use room::LeaderMetrics;
use worker::WorkerObserved;

/// Everything doctor read for the dispatch checks.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatchObserved {
    /// jobwarden's namespace, where the workers' kubeconfig Secrets are.
    pub namespace: String,
    pub policy: Dispatch,
    /// In the policy's order.
    pub workers: Vec<WorkerObserved>,
    /// The dispatcher's Jobs not finished, or why they could not be listed.
    pub jobs: Result<Vec<DispatchedJob>, String>,
    /// The leader's metrics, for how it knows each worker's room.
    pub leader_metrics: LeaderMetrics,
    /// The labels of the dispatched Jobs' namespaces, where a worker or a team selects by them.
    pub namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
    pub now: Timestamp,
}

/// Every dispatch check: each worker's, in the policy's order (the leader's view of its room
/// last), then the draining workers, the teams, the lost workers, and the leader's budget on
/// the management cluster.
pub fn checks(o: &DispatchObserved) -> Vec<Check> {
    let mut out: Vec<Check> = o
        .workers
        .iter()
        .flat_map(|w| {
            let mut checks = worker::checks(w, &o.namespace);
            // A worker the dispatcher cannot use (its kubeconfig refused, its credentials
            // refused, no answer) has no view to judge: what fails is said above, once.
            if !checks
                .iter()
                .any(|c| c.status == crate::check::Status::Error)
            {
                checks.push(room::fresh(&w.name, &o.leader_metrics));
            }
            checks
        })
        .collect();
    out.extend(draining::draining_workers(&o.policy, &o.jobs));
    out.extend(teams::namespaces_in_a_team(
        &o.policy,
        &o.jobs,
        &o.namespace_labels,
    ));
    let configured: Vec<&str> = o.policy.workers.iter().map(|w| w.name.as_str()).collect();
    out.extend(lost::lost_workers(
        &o.jobs,
        Duration::from_secs(o.policy.worker_lost_seconds),
        &configured,
        o.now,
    ));
    out.push(budget::management_budget(&o.leader_metrics));
    out
}
