//! Whether the leader's dispatcher is bound by its request budget on the management cluster:
//! how long its status writes (each Job's end among them) waited for it, as the leader says on
//! its Lease (`jobwarden.io/management-budget`, written with each renewal). Pure.

use crate::catalogue::MANAGEMENT_BUDGET;
use crate::check::Check;
use crate::dispatch::room::{BudgetSaid, LeaderMetrics};

/// A status write that waited longer than this is a Job's end shown late: the alert's bar.
const BOUND_AFTER_MS: u64 = 1000;

/// The leader's word on its budget.
pub fn management_budget(metrics: &LeaderMetrics) -> Check {
    let (pod, said) = match metrics {
        LeaderMetrics::Lease {
            pod,
            budget: Some(said),
            ..
        } => (pod, *said),
        LeaderMetrics::Unreadable(why) => {
            return MANAGEMENT_BUDGET.cannot_tell(
                format!("how the leader's writes wait for its budget is not known: {why}"),
                "read jobwarden_dispatch_management_budget_wait_seconds where Prometheus scrapes it",
            );
        }
        LeaderMetrics::Lease { pod, .. } | LeaderMetrics::Read { pod, .. } => {
            return MANAGEMENT_BUDGET.cannot_tell(
                format!("the leader ({pod}) says nothing of its budget on its Lease (jobwarden.io/management-budget)"),
                "a jobwarden older than this doctor says none; read jobwarden_dispatch_management_budget_wait_seconds where Prometheus scrapes it",
            );
        }
    };
    let BudgetSaid {
        waiting,
        longest_wait_ms,
    } = said;
    let longest = format!("{:.1}s", ms_to_s(longest_wait_ms));
    if longest_wait_ms > BOUND_AFTER_MS {
        return MANAGEMENT_BUDGET.warning(
            format!(
                "the leader ({pod}) is bound by its request budget on the management cluster: its status writes waited up to {longest} for it in the last minute or two ({waiting} waiting now), so Jobs show their ends late"
            ),
            "if this rate of Jobs stays, raise --dispatch-kube-api-qps (and --dispatch-kube-api-burst) once the management API server has room for it",
        );
    }
    MANAGEMENT_BUDGET.ok(format!(
        "the leader's ({pod}) status writes waited at most {longest} for its request budget on the management cluster in the last minute or two"
    ))
}

/// Milliseconds as seconds, for a message.
fn ms_to_s(ms: u64) -> f64 {
    // A wait of hours at most: exact in an f64.
    #[allow(clippy::cast_precision_loss)]
    let s = ms as f64 / 1000.0;
    s
}
