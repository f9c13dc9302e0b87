//! When a copy its worker accepted cannot be scheduled there after all (the worker changed
//! under it, or it asks for what placement does not model: pod affinity, a volume, a DRA
//! claim), the Job moves: once its pods have all stayed `PodScheduled=False` with reason
//! `Unschedulable` for `unschedulableSeconds`, none of them ever bound to a node. A copy that
//! ran at all, even partly, stays: moving it would run its work twice. After
//! `jobwarden.io/max-moves` moves the Job stays where it is, and says so. Pure.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::copy::record;

/// What the worker's view shows of a copy's pods that have not finished.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyPods {
    pub total: u32,
    /// Bound to a node.
    pub bound: u32,
    /// The earliest time one of them was found unschedulable, and the scheduler's message,
    /// when any is.
    pub unschedulable: Option<(Timestamp, String)>,
}

/// The move rule's word on a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It runs, has run, or nothing says it cannot be scheduled.
    Stays,
    /// Its pods cannot be scheduled; it moves at `at` unless one is bound by then.
    Unschedulable { at: Timestamp, message: String },
    /// Its pods could not be scheduled for `for_`: it moves now.
    Moves { for_: Duration, message: String },
    /// It would move, but it has moved `moves` times, its `jobwarden.io/max-moves`.
    StaysMovedEnough { moves: u32, message: String },
}

/// Whether a copy ran: a pod of it bound now, or counted as done or ready.
fn ran(copy: &Value, pods: &CopyPods) -> bool {
    let counted = |k: &str| {
        copy.pointer(&format!("/status/{k}"))
            .and_then(Value::as_i64)
            .is_some_and(|n| n > 0)
    };
    pods.bound > 0 || ["succeeded", "failed", "ready"].iter().any(|k| counted(k))
}

/// The move rule for `user`'s `copy`, whose pods the worker's view shows as `pods` (`None`:
/// the worker's pods are not watched, and nothing is known), at `now`.
pub fn judge(
    user: &Value,
    copy: &Value,
    pods: Option<&CopyPods>,
    policy_limit: Duration,
    now: Timestamp,
) -> Verdict {
    let Some(pods) = pods else {
        return Verdict::Stays;
    };
    if ran(copy, pods) {
        return Verdict::Stays;
    }
    let Some((since, message)) = &pods.unschedulable else {
        return Verdict::Stays;
    };
    let limit = record::unschedulable_limit(user, policy_limit);
    let at = since.checked_add(limit).unwrap_or(Timestamp::MAX);
    if now < at {
        return Verdict::Unschedulable {
            at,
            message: message.clone(),
        };
    }
    let moves = u32::try_from(record::moved_from(user).len()).unwrap_or(u32::MAX);
    if moves >= record::max_moves(user) {
        return Verdict::StaysMovedEnough {
            moves,
            message: message.clone(),
        };
    }
    Verdict::Moves {
        for_: limit,
        message: message.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const POLICY: Duration = Duration::from_secs(300);

    fn at(s: &str) -> Timestamp {
        s.parse().expect("a time")
    }

    fn unschedulable(since: &str) -> CopyPods {
        CopyPods {
            total: 2,
            bound: 0,
            unschedulable: Some((
                at(since),
                "0/2 nodes are available: 2 Insufficient cpu.".to_owned(),
            )),
        }
    }

    fn user(annotations: Value) -> Value {
        json!({"metadata": {"annotations": annotations}})
    }

    #[test]
    fn a_copy_moves_only_after_its_time_and_only_if_it_never_ran() {
        let fresh = json!({"status": {"active": 2}});
        let since = "2026-11-28T10:00:00Z";
        let pods = unschedulable(since);
        let u = user(json!({}));
        let cases: Vec<(&str, &Value, Option<&CopyPods>, Verdict)> = vec![
            (
                "2026-11-28T10:04:59Z",
                &fresh,
                Some(&pods),
                Verdict::Unschedulable {
                    at: at("2026-11-28T10:05:00Z"),
                    message: "0/2 nodes are available: 2 Insufficient cpu.".to_owned(),
                },
            ),
            (
                "2026-11-28T10:05:00Z",
                &fresh,
                Some(&pods),
                Verdict::Moves {
                    for_: POLICY,
                    message: "0/2 nodes are available: 2 Insufficient cpu.".to_owned(),
                },
            ),
            // No view of the worker's pods: nothing to go by.
            ("2026-11-28T11:00:00Z", &fresh, None, Verdict::Stays),
        ];
        for (now, copy, pods, want) in cases {
            assert_eq!(judge(&u, copy, pods, POLICY, at(now)), want, "{now}");
        }
    }

    #[test]
    fn a_copy_that_ran_even_partly_stays() {
        let late = at("2026-11-28T12:00:00Z");
        let u = user(json!({}));
        let one_bound = CopyPods {
            bound: 1,
            ..unschedulable("2026-11-28T10:00:00Z")
        };
        let fresh = json!({"status": {"active": 2}});
        assert_eq!(
            judge(&u, &fresh, Some(&one_bound), POLICY, late),
            Verdict::Stays
        );
        for done in [
            json!({"status": {"succeeded": 1}}),
            json!({"status": {"failed": 1}}),
            json!({"status": {"ready": 1}}),
        ] {
            let pods = unschedulable("2026-11-28T10:00:00Z");
            assert_eq!(judge(&u, &done, Some(&pods), POLICY, late), Verdict::Stays);
        }
        let schedulable = CopyPods {
            total: 2,
            ..CopyPods::default()
        };
        assert_eq!(
            judge(&u, &fresh, Some(&schedulable), POLICY, late),
            Verdict::Stays
        );
    }

    #[test]
    fn the_jobs_own_limits_win() {
        let fresh = json!({"status": {}});
        let pods = unschedulable("2026-11-28T10:00:00Z");
        let quick = user(json!({"jobwarden.io/unschedulable-seconds": "20"}));
        assert!(matches!(
            judge(&quick, &fresh, Some(&pods), POLICY, at("2026-11-28T10:00:20Z")),
            Verdict::Moves { for_, .. } if for_ == Duration::from_secs(20)
        ));
        let moved_twice = user(json!({"jobwarden.io/moved-from": "alpha,beta",
            "jobwarden.io/max-moves": "2"}));
        assert!(matches!(
            judge(
                &moved_twice,
                &fresh,
                Some(&pods),
                POLICY,
                at("2026-11-28T11:00:00Z")
            ),
            Verdict::StaysMovedEnough { moves: 2, .. }
        ));
        let never = user(json!({"jobwarden.io/max-moves": "0"}));
        assert!(matches!(
            judge(
                &never,
                &fresh,
                Some(&pods),
                POLICY,
                at("2026-11-28T11:00:00Z")
            ),
            Verdict::StaysMovedEnough { moves: 0, .. }
        ));
    }
}
