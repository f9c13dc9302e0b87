//! Where a Job goes. Its candidates are the workers it names (`jobwarden.io/workers: east,west`;
//! every worker when it names none) that take its namespace (the worker's `namespaces` in the
//! policy), have that namespace, answer, hold no Job of its name that is not its copy, and have
//! room for the pods it runs at once (`room::fits`, judged before this by the caller: a worker
//! of `capacity: Unbounded`, or whose role cannot list its nodes and pods, is taken by count);
//! among them, the one with the fewest of the dispatcher's Jobs not yet finished, ties by name.
//! A Job with no candidate waits, and says why for each worker. Pure.

pub mod loads;
pub mod moving;
pub mod placing_lane;
pub mod reservations;

use std::fmt;

use jobwarden_rules::well_known::WORKERS_ANNOTATION;

/// How a worker can be reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// Its API server answers with the dispatcher's credentials (the local worker always).
    Answers,
    /// Not yet asked: its credentials are being read, or its first answer awaited.
    Connecting,
    /// Its API server does not answer, or refuses every request as unauthorized.
    Lost,
    /// Its credentials are refused by the dispatcher itself (an exec plugin, a file, ...):
    /// it is never used.
    Refused(String),
}

/// What the dispatcher knows of one worker when it places a Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerFacts<'a> {
    pub name: &'a str,
    pub reach: Reach,
    /// The policy lets this worker take Jobs of the Job's namespace.
    pub takes_namespace: bool,
    /// The namespace exists on the worker; `None` while not known.
    pub has_namespace: Option<bool>,
    /// The dispatcher's Jobs placed there and not finished.
    pub load: usize,
    /// Whether the Job's pods fit there now.
    pub room: RoomFit,
    /// The policy drains it: no new Jobs.
    pub draining: bool,
}

/// Whether a Job's pods fit on a worker now, as the caller judged it from the worker's view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoomFit {
    /// They fit, or the worker is taken by count (`capacity: Unbounded`, or no view of its
    /// nodes and pods).
    Fits,
    /// They do not: `why` as an Event says it ("0 of 2 pods fit: insufficient cpu (1 free on
    /// 2 nodes)"), `label` for the metrics; `never` when no node could hold one of its pods
    /// even empty.
    Short {
        why: String,
        label: &'static str,
        never: bool,
    },
    /// Its nodes and pods are not listed yet.
    Listing,
}

/// Why a worker is no candidate for a Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unfit {
    /// The Job's `jobwarden.io/workers` does not name it.
    NotNamed,
    /// The policy gives it other namespaces.
    NamespaceNotTaken,
    /// The Job's namespace does not exist there.
    NoNamespace,
    /// Whether the namespace exists there is not known yet.
    NamespaceUnknown,
    Connecting,
    Lost,
    Refused(String),
    /// It holds a Job of this name that is not this Job's copy (never touched).
    HoldsAnotherJob,
    /// The Job was moved away from it when it was lost.
    LostBefore,
    /// The Job's copy could not be scheduled there, and the Job left it.
    UnschedulableBefore,
    /// Its nodes have no room for the Job's pods now.
    NoRoom {
        why: String,
        label: &'static str,
        never: bool,
    },
    /// Its nodes and pods are not listed yet.
    Listing,
    /// The policy drains it (`draining: true`).
    Draining,
}

impl Unfit {
    /// Whether the worker would take the Job but for room.
    pub fn is_room(&self) -> bool {
        matches!(self, Unfit::NoRoom { .. })
    }
}

impl fmt::Display for Unfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unfit::NotNamed => write!(f, "not named in {WORKERS_ANNOTATION}"),
            Unfit::NamespaceNotTaken => f.write_str("the policy gives it other namespaces"),
            Unfit::NoNamespace => f.write_str("it has no namespace of this name"),
            Unfit::NamespaceUnknown => f.write_str("whether it has the namespace is not known yet"),
            Unfit::Connecting => f.write_str("not connected yet"),
            Unfit::Lost => f.write_str("it does not answer"),
            Unfit::Refused(why) => write!(f, "its credentials are refused: {why}"),
            Unfit::HoldsAnotherJob => {
                f.write_str("it holds a Job of this name that is not this Job's copy")
            }
            Unfit::LostBefore => f.write_str("the Job left it when it was lost"),
            Unfit::UnschedulableBefore => {
                f.write_str("the Job left it when its copy could not be scheduled there")
            }
            Unfit::NoRoom { why, .. } => f.write_str(why),
            Unfit::Listing => f.write_str("its nodes and pods are not listed yet"),
            Unfit::Draining => f.write_str("it is draining (the policy's draining: true)"),
        }
    }
}

/// The workers a Job names, read from `jobwarden.io/workers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    /// No annotation: any worker.
    Any,
    Only(Vec<String>),
}

impl Named {
    /// `east, west` → `Only([east, west])`; an absent or blank annotation → `Any`.
    pub fn parse(annotation: Option<&str>) -> Named {
        let names: Vec<String> = annotation
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect();
        if names.is_empty() {
            Named::Any
        } else {
            Named::Only(names)
        }
    }

    pub fn names(&self, worker: &str) -> bool {
        match self {
            Named::Any => true,
            Named::Only(names) => names.iter().any(|n| n == worker),
        }
    }
}

/// Where the Job goes, or why nowhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement<'a> {
    To(&'a str),
    /// Each configured worker with the reason it cannot take the Job (empty: no worker is
    /// configured).
    Nowhere(Vec<(&'a str, Unfit)>),
}

/// Why a worker is unfit for this Job, if it is; the first reason in the order a reader
/// would fix them.
fn unfit(named: &Named, worker: &WorkerFacts<'_>, avoid: &[(&str, Unfit)]) -> Option<Unfit> {
    if !named.names(worker.name) {
        return Some(Unfit::NotNamed);
    }
    if !worker.takes_namespace {
        return Some(Unfit::NamespaceNotTaken);
    }
    if let Some((_, why)) = avoid.iter().find(|(name, _)| *name == worker.name) {
        return Some(why.clone());
    }
    if worker.draining {
        return Some(Unfit::Draining);
    }
    match &worker.reach {
        Reach::Answers => {}
        Reach::Connecting => return Some(Unfit::Connecting),
        Reach::Lost => return Some(Unfit::Lost),
        Reach::Refused(why) => return Some(Unfit::Refused(why.clone())),
    }
    match worker.has_namespace {
        Some(true) => {}
        Some(false) => return Some(Unfit::NoNamespace),
        None => return Some(Unfit::NamespaceUnknown),
    }
    match &worker.room {
        RoomFit::Fits => None,
        RoomFit::Short { why, label, never } => Some(Unfit::NoRoom {
            why: why.clone(),
            label,
            never: *never,
        }),
        RoomFit::Listing => Some(Unfit::Listing),
    }
}

/// The worker for a Job that `named` narrows, leaving out the workers in `avoid`.
pub fn place<'a>(
    named: &Named,
    workers: &[WorkerFacts<'a>],
    avoid: &[(&str, Unfit)],
) -> Placement<'a> {
    let mut reasons = Vec::new();
    let mut best: Option<&WorkerFacts<'a>> = None;
    for worker in workers {
        match unfit(named, worker, avoid) {
            Some(why) => reasons.push((worker.name, why)),
            None => {
                if best.is_none_or(|b| (worker.load, worker.name) < (b.load, b.name)) {
                    best = Some(worker);
                }
            }
        }
    }
    match best {
        Some(worker) => Placement::To(worker.name),
        None => Placement::Nowhere(reasons),
    }
}

/// Whether a Job waits for room: some worker would take it but for room.
pub fn waits_for_room(reasons: &[(&str, Unfit)]) -> bool {
    reasons.iter().any(|(_, why)| why.is_room())
}

/// One line for an Event and `explain`: why a Job waits.
pub fn nowhere_message(named: &Named, reasons: &[(&str, Unfit)]) -> String {
    if waits_for_room(reasons) {
        // "Never" only when no worker that could still turn out to have room (not listed,
        // not answering yet) is among them.
        let never = reasons.iter().all(|(_, why)| match why {
            Unfit::NoRoom { never, .. } => *never,
            Unfit::Listing | Unfit::Connecting | Unfit::Lost | Unfit::NamespaceUnknown => false,
            _ => true,
        });
        let each: Vec<String> = reasons
            .iter()
            .filter(|(_, why)| *why != Unfit::NotNamed)
            .map(|(name, why)| format!("{name}: {why}"))
            .collect();
        let head = if never {
            "the Job does not fit on any node today"
        } else {
            "no worker has room for the Job now"
        };
        return format!("{head}: {}", each.join("; "));
    }
    if reasons.is_empty() {
        return "no worker is configured (the policy's dispatch.workers)".to_owned();
    }
    if let Named::Only(names) = named
        && reasons.iter().all(|(_, why)| *why == Unfit::NotNamed)
    {
        return format!(
            "{WORKERS_ANNOTATION} names no configured worker ({}); the workers are {}",
            names.join(", "),
            reasons
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let each: Vec<String> = reasons
        .iter()
        .filter(|(_, why)| *why != Unfit::NotNamed)
        .map(|(name, why)| format!("{name}: {why}"))
        .collect();
    format!("no worker can take the Job now: {}", each.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(name: &str, load: usize) -> WorkerFacts<'_> {
        WorkerFacts {
            name,
            reach: Reach::Answers,
            takes_namespace: true,
            has_namespace: Some(true),
            load,
            room: RoomFit::Fits,
            draining: false,
        }
    }

    fn short(why: &str, never: bool) -> RoomFit {
        RoomFit::Short {
            why: why.to_owned(),
            label: if never { "never_fits" } else { "insufficient" },
            never,
        }
    }

    #[test]
    fn a_worker_without_room_is_passed_over_even_when_less_loaded() {
        let gpu_less = WorkerFacts {
            room: short(
                "0 of 2 pods fit: insufficient nvidia.com/gpu (0 free on 2 nodes)",
                false,
            ),
            ..up("alpha", 0)
        };
        let workers = [gpu_less.clone(), up("beta", 9)];
        assert_eq!(place(&Named::Any, &workers, &[]), Placement::To("beta"));
        let tainted = WorkerFacts {
            room: short("taint dedicated=gpu:NoSchedule not tolerated", false),
            ..up("beta", 0)
        };
        let Placement::Nowhere(reasons) = place(&Named::Any, &[gpu_less, tainted], &[]) else {
            panic!("no candidate")
        };
        assert!(waits_for_room(&reasons));
        assert_eq!(
            nowhere_message(&Named::Any, &reasons),
            "no worker has room for the Job now: alpha: 0 of 2 pods fit: insufficient nvidia.com/gpu (0 free on 2 nodes); beta: taint dedicated=gpu:NoSchedule not tolerated"
        );
    }

    #[test]
    fn a_job_no_node_could_hold_says_so_and_a_worker_not_listed_is_waited_for() {
        let never = |name| WorkerFacts {
            room: short(
                "does not fit on any node today: needs 64 cpu, the largest node has 2",
                true,
            ),
            ..up(name, 0)
        };
        let Placement::Nowhere(reasons) = place(&Named::Any, &[never("alpha"), never("beta")], &[])
        else {
            panic!("no candidate")
        };
        assert!(
            nowhere_message(&Named::Any, &reasons)
                .starts_with("the Job does not fit on any node today: alpha: does not fit")
        );
        let listing = WorkerFacts {
            room: RoomFit::Listing,
            ..up("gamma", 0)
        };
        let Placement::Nowhere(reasons) = place(&Named::Any, &[never("alpha"), listing], &[])
        else {
            panic!("no candidate")
        };
        assert_eq!(
            nowhere_message(&Named::Any, &reasons),
            "no worker has room for the Job now: alpha: does not fit on any node today: needs 64 cpu, the largest node has 2; gamma: its nodes and pods are not listed yet"
        );
    }

    #[test]
    fn the_least_loaded_answering_worker_is_chosen_ties_by_name() {
        let cases: &[(&[WorkerFacts<'_>], &str)] = &[
            (&[up("west", 3), up("east", 4)], "west"),
            (&[up("west", 4), up("east", 4)], "east"),
            (&[up("east", 0)], "east"),
        ];
        for (workers, chosen) in cases {
            assert_eq!(
                place(&Named::Any, workers, &[]),
                Placement::To(chosen),
                "{workers:?}"
            );
        }
    }

    #[test]
    fn a_worker_that_cannot_take_the_job_is_passed_over_for_its_reason() {
        let lost = WorkerFacts {
            reach: Reach::Lost,
            ..up("a-lost", 0)
        };
        let refused = WorkerFacts {
            reach: Reach::Refused("uses an exec plugin".to_owned()),
            ..up("b-refused", 0)
        };
        let connecting = WorkerFacts {
            reach: Reach::Connecting,
            ..up("c-connecting", 0)
        };
        let no_ns = WorkerFacts {
            has_namespace: Some(false),
            ..up("d-no-namespace", 0)
        };
        let unknown_ns = WorkerFacts {
            has_namespace: None,
            ..up("e-unknown", 0)
        };
        let other_ns = WorkerFacts {
            takes_namespace: false,
            ..up("f-other-namespaces", 0)
        };
        let workers = [
            lost,
            refused,
            connecting,
            no_ns,
            unknown_ns,
            other_ns,
            up("g-busy", 9),
        ];
        assert_eq!(place(&Named::Any, &workers, &[]), Placement::To("g-busy"));
        let Placement::Nowhere(reasons) = place(&Named::Any, &workers[..6], &[]) else {
            panic!("no candidate")
        };
        assert_eq!(
            reasons
                .iter()
                .map(|(_, why)| why.clone())
                .collect::<Vec<_>>(),
            [
                Unfit::Lost,
                Unfit::Refused("uses an exec plugin".to_owned()),
                Unfit::Connecting,
                Unfit::NoNamespace,
                Unfit::NamespaceUnknown,
                Unfit::NamespaceNotTaken,
            ]
        );
    }

    #[test]
    fn the_jobs_own_list_narrows_the_candidates() {
        let workers = [up("east", 5), up("west", 0)];
        let named = Named::parse(Some(" east "));
        assert_eq!(place(&named, &workers, &[]), Placement::To("east"));
        assert_eq!(Named::parse(Some("")), Named::Any);
        assert_eq!(Named::parse(None), Named::Any);
        assert_eq!(
            Named::parse(Some("east,,west")),
            Named::Only(vec!["east".to_owned(), "west".to_owned()])
        );
    }

    #[test]
    fn a_worker_holding_another_job_of_the_name_is_avoided() {
        let workers = [up("east", 0), up("west", 7)];
        let avoid = [("east", Unfit::HoldsAnotherJob)];
        assert_eq!(place(&Named::Any, &workers, &avoid), Placement::To("west"));
        let Placement::Nowhere(reasons) = place(&Named::parse(Some("east")), &workers, &avoid)
        else {
            panic!("no candidate")
        };
        assert_eq!(
            nowhere_message(&Named::parse(Some("east")), &reasons),
            "no worker can take the Job now: east: it holds a Job of this name that is not this Job's copy"
        );
    }

    #[test]
    fn the_message_says_what_to_fix() {
        assert_eq!(
            nowhere_message(&Named::Any, &[]),
            "no worker is configured (the policy's dispatch.workers)"
        );
        let named = Named::parse(Some("north"));
        let Placement::Nowhere(reasons) = place(&named, &[up("east", 0), up("west", 0)], &[])
        else {
            panic!("no candidate")
        };
        assert_eq!(
            nowhere_message(&named, &reasons),
            "jobwarden.io/workers names no configured worker (north); the workers are east, west"
        );
    }
}
