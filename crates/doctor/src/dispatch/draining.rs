//! The workers the policy drains (`draining: true`): how many of the dispatcher's Jobs are
//! still placed on each, and, once none is, that it may be removed from the policy (a policy
//! removing a worker that still has Jobs is refused). Pure.

use jobwarden_admission::policy::Dispatch;

use super::jobs::DispatchedJob;
use crate::catalogue::DRAINING_WORKERS;
use crate::check::Check;

/// How many Jobs a check names before it counts the rest.
const NAMED: usize = 5;

/// One check per draining worker; none when no worker drains.
pub fn draining_workers(
    policy: &Dispatch,
    jobs: &Result<Vec<DispatchedJob>, String>,
) -> Vec<Check> {
    policy
        .workers
        .iter()
        .filter(|w| w.draining)
        .map(|w| {
            let jobs = match jobs {
                Ok(jobs) => jobs,
                Err(e) => {
                    return DRAINING_WORKERS.cannot_tell(
                        format!("worker {} is draining; cannot list the dispatched Jobs to know whether any is left there: {e}", w.name),
                        "doctor reads where each Job is placed, which needs list on jobs (batch) in every namespace",
                    );
                }
            };
            let left: Vec<String> = jobs
                .iter()
                .filter(|j| j.worker.as_deref() == Some(w.name.as_str()))
                .map(DispatchedJob::key)
                .collect();
            if left.is_empty() {
                return DRAINING_WORKERS.ok(format!(
                    "worker {} is drained and may be removed from the policy",
                    w.name
                ));
            }
            let mut named = left.iter().take(NAMED).cloned().collect::<Vec<_>>().join(", ");
            if left.len() > NAMED {
                named.push_str(&format!(" and {} more", left.len() - NAMED));
            }
            DRAINING_WORKERS.warning(
                format!(
                    "worker {} is draining: {} Job{} still placed there ({named})",
                    w.name,
                    left.len(),
                    if left.len() == 1 { "" } else { "s" }
                ),
                "they finish there, or move at once with jobwarden.io/on-worker-drain: Redispatch; remove the worker from the policy once none is left",
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use jobwarden_admission::policy::Worker;
    use jobwarden_dispatcher::copy::record::OnWorkerLost;
    use jobwarden_dispatcher::placement::Named;

    fn policy() -> Dispatch {
        let worker = |name: &str, draining| Worker {
            name: name.to_owned(),
            kubeconfig_secret: Some(format!("jobwarden-worker-{name}")),
            draining,
            ..Worker::default()
        };
        Dispatch {
            workers: vec![worker("east", true), worker("west", false)],
            ..Dispatch::default()
        }
    }

    fn job(name: &str, worker: &str) -> DispatchedJob {
        DispatchedJob {
            namespace: "ml".to_owned(),
            name: name.to_owned(),
            worker: Some(worker.to_owned()),
            named: Named::Any,
            lost_since: None,
            on_worker_lost: OnWorkerLost::Redispatch,
        }
    }

    #[test]
    fn a_draining_worker_says_what_is_left_then_that_it_may_go() {
        let said = |jobs: Result<Vec<DispatchedJob>, String>| {
            draining_workers(&policy(), &jobs)
                .iter()
                .map(|c| format!("{} {}", c.status.mark(), c.message))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            said(Ok(vec![job("train", "east"), job("other", "west")])),
            ["‼ worker east is draining: 1 Job still placed there (ml/train)"]
        );
        assert_eq!(
            said(Ok(vec![job("other", "west")])),
            ["✔ worker east is drained and may be removed from the policy"]
        );
        assert_eq!(said(Err("forbidden".to_owned())).len(), 1);
        assert!(draining_workers(&Dispatch::default(), &Ok(Vec::new())).is_empty());
    }
}
