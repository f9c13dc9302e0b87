//! The fair order as a sync applies it: a Job's turn on each worker where its pods fit, and the
//! room held for the head of the order, judged by a table of who waits, who fits where, and
//! who holds what.

use jobwarden_admission::policy::{NamespaceMatch, Share};
use serde_json::{Value, json};

use super::*;
use crate::placement::Reach;
use crate::room::{Lack, Short};

const GPU: &str = "nvidia.com/gpu";

fn share(name: &str, namespace: &str, weight: f64) -> Share {
    Share {
        name: name.to_owned(),
        namespaces: NamespaceMatch {
            names: vec![namespace.to_owned()],
            selector: None,
        },
        weight,
    }
}

/// Two teams of weight 1: `a` in namespace `a`, `b` in namespace `b`.
fn fair() -> Fair {
    let mut fair = Fair::new(&[share("a", "a", 1.0), share("b", "b", 1.0)]);
    let mut fleet = Resources::default();
    fleet.cpu_millis = 32_000;
    fleet.memory = 64 << 30;
    fleet.set(GPU, 8);
    fair.shares.set_fleet_allocatable(fleet);
    fair
}

/// A Job of one pod asking for `cpu` cores and `gpus` GPUs, created at second `created`.
fn job(ns: &str, name: &str, created: u32, cpu: u32, gpus: u32) -> Value {
    let mut requests = json!({"cpu": cpu.to_string()});
    if gpus > 0 {
        requests[GPU] = json!(gpus.to_string());
    }
    json!({
        "metadata": {"namespace": ns, "name": name, "uid": name,
                     "creationTimestamp": format!("2026-12-02T00:00:{created:02}Z")},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}}}
    })
}

fn team(fair: &Fair, ns: &str) -> TeamId {
    fair.shares.teams().team_of(ns, None)
}

fn wait(fair: &mut Fair, user: &Value) {
    let (ns, uid) = (text(user, "namespace"), text(user, "uid"));
    let team = team(fair, &ns);
    fair.waiting(&uid, team, user, vec!["east".to_owned(), "west".to_owned()]);
}

fn place(fair: &mut Fair, user: &Value) {
    let (ns, uid) = (text(user, "namespace"), text(user, "uid"));
    let team = team(fair, &ns);
    fair.chose(&uid, team, user);
}

fn text(user: &Value, field: &str) -> String {
    user["metadata"][field]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn worker(name: &str) -> WorkerState<'_> {
    WorkerState {
        name,
        local: false,
        reach: Reach::Answers,
        ready: true,
        takes_namespace: true,
        has_namespace: Some(true),
        load: 0,
        room: RoomFit::Fits,
        draining: false,
    }
}

fn label(w: &WorkerState<'_>) -> &'static str {
    match &w.room {
        RoomFit::Fits => "fits",
        RoomFit::Short { label, .. } => label,
        RoomFit::Listing => "listing",
    }
}

fn short_of_gpus() -> Fit {
    Fit::Short(Short::Insufficient {
        fit: 0,
        wanted: 1,
        lacks: vec![Lack {
            resource: GPU.into(),
            free: 1,
        }],
        eligible: 1,
        excluded: Vec::new(),
    })
}

#[test]
fn without_teams_every_job_is_judged_on_its_own() {
    let mut fair = Fair::new(&[]);
    let (first, later) = (job("a", "first", 1, 1, 1), job("a", "later", 2, 1, 1));
    wait(&mut fair, &first);
    wait(&mut fair, &later);
    let mut workers = [worker("east")];
    let woken = fair.gate("later", &mut workers, |_, _, _| true);
    assert_eq!((label(&workers[0]), woken.len()), ("fits", 0));
}

#[test]
fn a_job_ahead_that_fits_goes_first_and_is_woken() {
    let mut fair = fair();
    // Team a already holds 4 GPUs: team b's Job is ahead of a's waiting one.
    place(&mut fair, &job("a", "running", 0, 1, 4));
    let (mine, theirs) = (job("a", "mine", 1, 1, 1), job("b", "theirs", 5, 1, 1));
    wait(&mut fair, &mine);
    wait(&mut fair, &theirs);
    let mut workers = [worker("east"), worker("west")];
    let woken = fair.gate("mine", &mut workers, |w, ahead, _| {
        ahead == "theirs" && w == "east"
    });
    assert_eq!(label(&workers[0]), "order");
    assert_eq!(label(&workers[1]), "fits", "theirs does not fit on west");
    assert_eq!(woken, vec![("b".to_owned(), "theirs".to_owned())]);
    // The Job ahead is not held back by the one behind it.
    let woken = fair.gate("theirs", &mut [worker("east")], |_, _, _| true);
    assert!(woken.is_empty());
}

#[test]
fn a_job_ahead_that_fits_nowhere_never_holds_back_one_that_fits() {
    let mut fair = fair();
    let (big, small) = (job("b", "big", 1, 1, 4), job("a", "small", 2, 1, 1));
    wait(&mut fair, &big);
    wait(&mut fair, &small);
    let mut workers = [worker("east")];
    let woken = fair.gate("small", &mut workers, |_, _, _| false);
    assert_eq!((label(&workers[0]), woken.len()), ("fits", 0));
}

#[test]
fn room_held_keeps_what_the_holder_lacks_from_later_jobs_and_only_that() {
    let mut fair = fair();
    // Team a runs a Job: b's big Job is first in the order, and stays first.
    place(&mut fair, &job("a", "running", 0, 1, 1));
    let big = job("b", "big", 1, 1, 4);
    wait(&mut fair, &big);
    let said = fair.hold_if_head(
        "big",
        &[("east", short_of_gpus()), ("west", short_of_gpus())],
    );
    assert_eq!(said, Some(("east".to_owned(), vec![GPU.to_owned()])));
    // Said once per hold.
    assert_eq!(fair.hold_if_head("big", &[("east", short_of_gpus())]), None);

    let (gpu, cpu) = (job("a", "gpu", 2, 1, 1), job("a", "cpu", 3, 2, 0));
    wait(&mut fair, &gpu);
    wait(&mut fair, &cpu);
    let mut workers = [worker("east"), worker("west")];
    fair.gate("gpu", &mut workers, |_, _, _| false);
    assert_eq!((label(&workers[0]), label(&workers[1])), ("held", "fits"));
    let mut workers = [worker("east")];
    fair.gate("cpu", &mut workers, |_, _, _| false);
    assert_eq!(
        label(&workers[0]),
        "fits",
        "a cpu-only Job is not blocked by a GPU hold"
    );

    // Placed, the holder holds nothing more.
    place(&mut fair, &big);
    let mut workers = [worker("east")];
    fair.gate("gpu", &mut workers, |_, _, _| false);
    assert_eq!(label(&workers[0]), "fits");
}

#[test]
fn a_hold_passes_to_the_new_head_of_the_order() {
    let mut fair = fair();
    let first = job("a", "first", 1, 1, 4);
    wait(&mut fair, &first);
    assert!(
        fair.hold_if_head("first", &[("east", short_of_gpus())])
            .is_some()
    );
    // Team a's Job placed elsewhere raises a's share: b's Job, come later, is first now.
    place(&mut fair, &job("a", "running", 0, 1, 1));
    wait(&mut fair, &job("b", "later", 2, 1, 1));
    assert_eq!(
        fair.shares.holds().count(),
        0,
        "the former head holds nothing"
    );
    let mut workers = [worker("east")];
    fair.gate("later", &mut workers, |_, _, _| false);
    assert_eq!(label(&workers[0]), "fits");
}

#[test]
fn only_the_head_of_the_order_holds_and_not_where_it_can_never_fit() {
    let mut fair = fair();
    let (first, second) = (job("b", "first", 1, 1, 4), job("b", "second", 2, 1, 4));
    wait(&mut fair, &first);
    wait(&mut fair, &second);
    assert_eq!(
        fair.hold_if_head("second", &[("east", short_of_gpus())]),
        None
    );
    let never = Fit::Short(Short::NeverFits {
        need: None,
        excluded: Vec::new(),
    });
    assert_eq!(fair.hold_if_head("first", &[("east", never)]), None);
    assert_eq!(fair.shares.holds().count(), 0);
}

#[test]
fn a_job_no_worker_would_take_is_not_in_line_and_keeps_no_hold_from_the_next() {
    let mut fair = fair();
    // Team a runs a Job; b's big Job holds east. A Job of a third, idle team (`default`)
    // that no worker would take (named for a refused worker) would head the order.
    place(&mut fair, &job("a", "running", 0, 1, 1));
    let big = job("b", "big", 1, 1, 4);
    wait(&mut fair, &big);
    assert!(
        fair.hold_if_head("big", &[("east", short_of_gpus())])
            .is_some()
    );
    place(&mut fair, &job("b", "cpu-only", 2, 1, 0));
    let stray = job("elsewhere", "stray", 0, 1, 0);
    let team = team(&fair, "elsewhere");
    fair.waiting("stray", team, &stray, Vec::new());
    assert_eq!(fair.shares.next().map(|k| &*k.uid), Some("big"));
    assert_eq!(fair.shares.holds().count(), 1, "big still holds east");
    // Once a worker would take it, it is in line, first (its team uses nothing).
    fair.waiting("stray", team, &stray, vec!["west".to_owned()]);
    assert_eq!(fair.shares.next().map(|k| &*k.uid), Some("stray"));
}

#[test]
fn a_job_placed_counts_against_its_team_at_once() {
    let mut fair = fair();
    let (a1, a2, b1) = (
        job("a", "a1", 1, 1, 1),
        job("a", "a2", 2, 1, 1),
        job("b", "b1", 3, 1, 1),
    );
    for j in [&a1, &a2, &b1] {
        wait(&mut fair, j);
    }
    let next = |fair: &Fair| fair.shares.next().map(|k| k.uid.to_string());
    assert_eq!(
        next(&fair).as_deref(),
        Some("a1"),
        "equal shares: the oldest"
    );
    place(&mut fair, &a1);
    assert_eq!(
        next(&fair).as_deref(),
        Some("b1"),
        "a's share rose with its placement"
    );
    place(&mut fair, &b1);
    assert_eq!(next(&fair).as_deref(), Some("a2"));
    fair.forget("a2");
    assert_eq!(next(&fair), None);
}

/// The scenarios on a toy fleet: GPUs free per worker, one Job's pods fitting where
/// enough are free; each sync judges the room, applies the turn, places on the first worker
/// left, or waits (holding room when it is the head). Wakes follow the fair order, as
/// `room_wakes` sends them.
struct Sim {
    fair: Fair,
    /// (worker, GPUs free) in the fleet's order.
    free: Vec<(&'static str, u32)>,
    jobs: Vec<Value>,
    /// Where each placed Job runs.
    placed: Vec<(String, &'static str)>,
}

impl Sim {
    fn new(free: &[(&'static str, u32)]) -> Sim {
        Sim {
            fair: fair(),
            free: free.to_vec(),
            jobs: Vec::new(),
            placed: Vec::new(),
        }
    }

    fn gpus(user: &Value) -> u32 {
        user.pointer("/spec/template/spec/containers/0/resources/requests/nvidia.com~1gpu")
            .and_then(Value::as_str)
            .and_then(|g| g.parse().ok())
            .unwrap_or(0)
    }

    fn submit(&mut self, ns: &str, name: &str, gpus: u32) {
        let created = u32::try_from(self.jobs.len()).unwrap_or(0);
        let user = job(ns, name, created % 60, 1, gpus);
        self.jobs.push(user);
        self.sync(name);
    }

    fn user(&self, name: &str) -> Value {
        self.jobs
            .iter()
            .find(|j| text(j, "name") == name)
            .cloned()
            .unwrap_or_default()
    }

    /// One sync of a Job not placed yet.
    fn sync(&mut self, name: &str) {
        if self.placed.iter().any(|(p, _)| p == name) {
            return;
        }
        let user = self.user(name);
        wait(&mut self.fair, &user);
        let want = Sim::gpus(&user);
        let free = self.free.clone();
        let mut workers: Vec<WorkerState<'_>> = free
            .iter()
            .map(|(w, n)| {
                let mut state = worker(w);
                if *n < want {
                    state.room = RoomFit::Short {
                        why: "insufficient nvidia.com/gpu".to_owned(),
                        label: "insufficient",
                        never: false,
                    };
                }
                state
            })
            .collect();
        let fits = |w: &str, _: &str, waiter: &Waiter| {
            let asks = u32::try_from(waiter.shape.requests.get(GPU)).unwrap_or(u32::MAX);
            free.iter().any(|(f, n)| *f == w && *n >= asks)
        };
        self.fair.gate(name, &mut workers, fits);
        if let Some(w) = workers.iter().find(|w| w.room == RoomFit::Fits) {
            let worker = free.iter().map(|(f, _)| *f).find(|f| *f == w.name);
            if let Some(worker) = worker {
                place(&mut self.fair, &user);
                self.take(worker, want);
                self.placed.push((name.to_owned(), worker));
            }
            return;
        }
        let candidates: Vec<(&str, Fit)> = free
            .iter()
            .map(|(w, n)| {
                (
                    *w,
                    if *n >= want {
                        Fit::Fits
                    } else {
                        short_of_gpus()
                    },
                )
            })
            .collect();
        let _ = self.fair.hold_if_head(name, &candidates);
    }

    fn take(&mut self, worker: &str, gpus: u32) {
        for (w, n) in &mut self.free {
            if *w == worker {
                *n -= gpus;
            }
        }
    }

    /// A placed Job ends: its GPUs free, and the waiting Jobs are synced in the fair order.
    fn end(&mut self, name: &str) {
        let Some(i) = self.placed.iter().position(|(p, _)| p == name) else {
            return;
        };
        let (_, worker) = self.placed.remove(i);
        let gpus = Sim::gpus(&self.user(name));
        for (w, n) in &mut self.free {
            if *w == worker {
                *n += gpus;
            }
        }
        self.fair.forget(name);
        let order: Vec<String> = self
            .fair
            .shares
            .iter_in_order()
            .map(|k| k.uid.to_string())
            .collect();
        for waiting in order {
            self.sync(&waiting);
        }
    }

    fn running(&self, prefix: &str) -> usize {
        self.placed
            .iter()
            .filter(|(p, _)| p.starts_with(prefix))
            .count()
    }
}

#[test]
fn a_latecomer_team_gets_each_gpu_that_frees() {
    let mut sim = Sim::new(&[("east", 4), ("west", 4)]);
    for i in 0..12 {
        sim.submit("a", &format!("a{i:02}"), 1);
    }
    assert_eq!(sim.running("a"), 8, "the fleet is full, 4 of a's wait");
    for i in 0..4 {
        sim.submit("b", &format!("b{i}"), 1);
    }
    assert_eq!(sim.running("b"), 0);
    for (i, ended) in ["a00", "a01", "a02", "a03"].into_iter().enumerate() {
        sim.end(ended);
        assert_eq!(
            sim.running("b"),
            i + 1,
            "the GPU freed by {ended} went to b"
        );
        assert_eq!(sim.running("a"), 7 - i);
    }
}

#[test]
fn weights_one_and_three_fill_the_fleet_two_and_six() {
    let mut sim = Sim::new(&[("east", 4), ("west", 4)]);
    for i in 0..8 {
        sim.submit("other", &format!("o{i}"), 1);
    }
    sim.fair = {
        // Team a weight 1, b weight 3; the other team's 8 GPUs counted as the default team's.
        let mut fair = Fair::new(&[share("a", "a", 1.0), share("b", "b", 3.0)]);
        let mut fleet = Resources::default();
        fleet.set(GPU, 8);
        fair.shares.set_fleet_allocatable(fleet);
        for i in 0..8 {
            place(&mut fair, &sim.user(&format!("o{i}")));
        }
        fair
    };
    for i in 0..8 {
        sim.submit("a", &format!("a{i}"), 1);
    }
    for i in 0..12 {
        sim.submit("b", &format!("b{i:02}"), 1);
    }
    sim.end("o0");
    sim.end("o1");
    assert!(
        sim.running("b") >= 1,
        "b's first Job runs by the second GPU freed"
    );
    for i in 2..8 {
        sim.end(&format!("o{i}"));
    }
    assert_eq!((sim.running("a"), sim.running("b")), (2, 6));
}

#[test]
fn a_job_needing_a_whole_node_is_not_overtaken_for_ever() {
    let mut sim = Sim::new(&[("east", 4), ("west", 4)]);
    for i in 0..8 {
        sim.submit("a", &format!("a{i:02}"), 1);
    }
    sim.submit("b", "big", 4);
    assert_eq!(sim.running("big"), 0);
    // a's stream goes on: each Job that ends is followed by a new one of a's.
    for (round, next) in (8..16).enumerate() {
        let oldest = sim
            .placed
            .iter()
            .find(|(p, _)| p.starts_with('a'))
            .map(|(p, _)| p.clone());
        if let Some(oldest) = oldest {
            sim.end(&oldest);
        }
        sim.submit("a", &format!("a{next:02}"), 1);
        if sim.running("big") == 1 {
            assert!(
                round <= 4,
                "placed once one worker's four GPUs freed, at round {round}"
            );
            return;
        }
    }
    panic!("the big Job was overtaken by every Job of a's stream");
}

#[test]
fn a_job_ahead_that_may_not_go_to_a_worker_does_not_keep_it() {
    let mut fair = fair();
    place(&mut fair, &job("a", "running", 0, 1, 4));
    // b's Job is ahead, but only west would take it (its namespace is not on east, say).
    let theirs = job("b", "theirs", 1, 1, 1);
    let team = team(&fair, "b");
    fair.waiting("theirs", team, &theirs, vec!["west".to_owned()]);
    let mine = job("a", "mine", 2, 1, 1);
    wait(&mut fair, &mine);
    let mut workers = [worker("east"), worker("west")];
    fair.gate("mine", &mut workers, |_, _, _| true);
    assert_eq!((label(&workers[0]), label(&workers[1])), ("fits", "order"));
}
