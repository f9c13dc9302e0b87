//! A new policy's worker list against the running one: a worker may leave the policy only
//! once no Job is placed on it, so that nothing is ever orphaned (a copy nobody watches, a Job
//! whose status nobody mirrors). The dispatcher puts this to every new policy while it leads;
//! the policy follower refuses a policy it objects to whole. Pure.

use jobwarden_admission::policy::Dispatch;

/// How many Jobs a refusal names before it says "and N more".
const NAMED: usize = 10;

/// A dispatched Job as the check needs it: where it is placed, and whether it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlacedJob<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    /// `jobwarden.io/worker`.
    pub worker: Option<&'a str>,
    /// It shows how it ended (its copy is deleted once it does).
    pub finished: bool,
}

/// `Err` with the words of the refusal when `new` removes a worker of `running` that still has
/// Jobs placed on it.
pub fn removal_refused<'a>(
    running: &Dispatch,
    new: &Dispatch,
    jobs: impl IntoIterator<Item = PlacedJob<'a>>,
) -> Result<(), String> {
    let removed: Vec<&str> = running
        .workers
        .iter()
        .map(|w| w.name.as_str())
        .filter(|name| new.worker(name).is_none())
        .collect();
    if removed.is_empty() {
        return Ok(());
    }
    let mut held: Vec<(&str, String)> = jobs
        .into_iter()
        .filter(|j| !j.finished)
        .filter_map(|j| {
            let worker = removed.iter().find(|w| Some(**w) == j.worker)?;
            Some((*worker, format!("{}/{}", j.namespace, j.name)))
        })
        .collect();
    if held.is_empty() {
        return Ok(());
    }
    held.sort();
    let mut said: Vec<String> = Vec::new();
    for worker in &removed {
        let on: Vec<&str> = held
            .iter()
            .filter(|(w, _)| w == worker)
            .map(|(_, j)| j.as_str())
            .collect();
        if on.is_empty() {
            continue;
        }
        let more = on.len().saturating_sub(NAMED);
        let mut named = on
            .iter()
            .take(NAMED)
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        if more > 0 {
            named.push_str(&format!(" and {more} more"));
        }
        said.push(format!(
            "worker {worker} still has {} Job{} placed on it ({named})",
            on.len(),
            if on.len() == 1 { "" } else { "s" }
        ));
    }
    Err(format!(
        "dispatch.workers: {}; drain it first (draining: true), and remove it once its Jobs have left",
        said.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use jobwarden_admission::policy::Worker;

    fn dispatch(names: &[&str]) -> Dispatch {
        Dispatch {
            workers: names
                .iter()
                .map(|n| Worker {
                    name: (*n).to_owned(),
                    kubeconfig_secret: Some(format!("jobwarden-worker-{n}")),
                    ..Worker::default()
                })
                .collect(),
            ..Dispatch::default()
        }
    }

    fn job<'a>(name: &'a str, worker: Option<&'a str>, finished: bool) -> PlacedJob<'a> {
        PlacedJob {
            namespace: "ml",
            name,
            worker,
            finished,
        }
    }

    #[test]
    fn a_worker_with_jobs_may_not_leave_and_the_refusal_names_them() {
        let running = dispatch(&["alpha", "beta"]);
        let jobs = [
            job("train", Some("alpha"), false),
            job("done", Some("alpha"), true),
            job("other", Some("beta"), false),
            job("waiting", None, false),
        ];
        assert_eq!(
            removal_refused(&running, &dispatch(&["beta"]), jobs),
            Err("dispatch.workers: worker alpha still has 1 Job placed on it (ml/train); drain it first (draining: true), and remove it once its Jobs have left".to_owned())
        );
        // Once its Job ended, it may go; adding or keeping workers is always allowed.
        let ended = [job("train", Some("alpha"), true)];
        assert_eq!(
            removal_refused(&running, &dispatch(&["beta"]), ended),
            Ok(())
        );
        assert_eq!(
            removal_refused(&running, &dispatch(&["alpha", "beta", "gamma"]), jobs),
            Ok(())
        );
    }

    #[test]
    fn many_jobs_are_counted_not_all_named() {
        let names: Vec<String> = (0..12).map(|i| format!("j{i:02}")).collect();
        let jobs: Vec<PlacedJob<'_>> = names.iter().map(|n| job(n, Some("alpha"), false)).collect();
        let refused =
            removal_refused(&dispatch(&["alpha"]), &dispatch(&[]), jobs).expect_err("refused");
        assert!(
            refused.contains("still has 12 Jobs placed on it (ml/j00, ml/j01")
                && refused.contains("ml/j09 and 2 more)"),
            "{refused}"
        );
    }
}
