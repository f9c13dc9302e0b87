use super::builders::{GPU, at, cpus, gpu_fleet, gpus, place_all, res, share, shares_of, team};
use crate::shares::{JobState, Teams};

#[test]
fn a_latecomer_team_goes_first() {
    let mut s = shares_of(&[share("early", 1.0, &[]), share("late", 1.0, &[])]);
    let (early, late) = (team(&s, "early"), team(&s, "late"));
    s.set_fleet_allocatable(gpu_fleet(8));
    s.chose("e0", early, gpus(2));
    s.waiting("e1", early, at(10));
    s.waiting("l1", late, at(500));
    assert_eq!(
        s.next().map(|k| &*k.uid),
        Some("l1"),
        "newer, but its team uses nothing"
    );
    assert_eq!(s.position("e1"), Some(1));
}

#[test]
fn weights_one_and_three_share_eight_gpus_two_and_six() {
    let mut s = shares_of(&[share("prod", 1.0, &[]), share("research", 3.0, &[])]);
    let (prod, research) = (team(&s, "prod"), team(&s, "research"));
    s.set_fleet_allocatable(gpu_fleet(8));
    for i in 0..8 {
        s.waiting(&format!("p{i}"), prod, at(i));
        s.waiting(&format!("r{i}"), research, at(i));
    }
    let placed = place_all(&mut s, &|_| gpus(1));
    // The first eight placements fill the fleet.
    let first: Vec<&str> = placed.iter().take(8).map(String::as_str).collect();
    assert_eq!(first, ["p0", "r0", "r1", "r2", "p1", "r3", "r4", "r5"]);
    let prods = first.iter().filter(|u| u.starts_with('p')).count();
    assert_eq!((prods, 8 - prods), (2, 6));
}

#[test]
fn within_a_team_the_oldest_goes_first_then_the_lower_uid() {
    let mut s = shares_of(&[]);
    let t = s.teams().default_team();
    s.waiting("c", t, at(5));
    s.waiting("b", t, at(5));
    s.waiting("a", t, at(9));
    s.waiting("z", t, at(1));
    let order: Vec<&str> = s.iter_in_order().map(|k| &*k.uid).collect();
    assert_eq!(order, ["z", "b", "c", "a"]);
    assert_eq!(s.position("a"), Some(3));
    assert_eq!(s.position("nobody"), None);
}

#[test]
fn a_job_removed_and_waiting_again_takes_its_place_by_age() {
    let mut s = shares_of(&[]);
    let t = s.teams().default_team();
    s.waiting("old", t, at(1));
    s.waiting("new", t, at(2));
    s.forget("old");
    assert_eq!(s.next().map(|k| &*k.uid), Some("new"));
    s.waiting("old", t, at(1));
    assert_eq!(s.next().map(|k| &*k.uid), Some("old"));
    // Waiting twice is one entry; placed, then back (taken off a lost worker).
    s.waiting("old", t, at(1));
    assert_eq!(s.waiting_count(), 2);
    s.chose("old", t, cpus(1));
    assert_eq!(s.next().map(|k| &*k.uid), Some("new"));
    s.observe("old", t, JobState::Waiting { created: at(1) });
    assert_eq!(s.next().map(|k| &*k.uid), Some("old"));
    assert_eq!(s.usage(t), &res(&[]), "waiting again, it counts no more");
}

#[test]
fn a_job_that_finishes_lowers_its_teams_priority_at_once() {
    let mut s = shares_of(&[share("a", 1.0, &[]), share("b", 1.0, &[])]);
    let (a, b) = (team(&s, "a"), team(&s, "b"));
    s.set_fleet_allocatable(gpu_fleet(8));
    s.chose("a-big", a, gpus(4));
    s.chose("b-small", b, gpus(1));
    s.waiting("a1", a, at(1));
    s.waiting("b1", b, at(2));
    assert_eq!(s.next().map(|k| &*k.uid), Some("b1"));
    s.observe("a-big", a, JobState::Uncounted);
    assert_eq!(s.priority(a), 0.0);
    assert_eq!(s.next().map(|k| &*k.uid), Some("a1"));
    // The watch's word that a Job is placed counts as a choice does.
    s.observe("a-big", a, JobState::Placed { requests: gpus(4) });
    assert_eq!(s.next().map(|k| &*k.uid), Some("b1"));
}

#[test]
fn the_fleet_changing_rekeys_every_team() {
    let mut s = shares_of(&[share("gpu", 1.0, &[]), share("cpu", 1.0, &[])]);
    let (g, c) = (team(&s, "gpu"), team(&s, "cpu"));
    s.set_fleet_allocatable(res(&[(GPU, 8), ("cpu", 100_000)]));
    s.chose("g", g, res(&[(GPU, 2)]));
    s.chose("c", c, res(&[("cpu", 50_000)]));
    s.waiting("g1", g, at(1));
    s.waiting("c1", c, at(1));
    assert_eq!(s.next().map(|k| &*k.uid), Some("g1"), "0.25 < 0.5");
    // A GPU worker leaves: 2 of 2 GPUs now.
    s.set_fleet_allocatable(res(&[(GPU, 2), ("cpu", 100_000)]));
    assert_eq!(s.next().map(|k| &*k.uid), Some("c1"), "0.5 < 1");
}

#[test]
fn new_teams_count_every_job_again() {
    let mut s = shares_of(&[]);
    let d = s.teams().default_team();
    s.set_fleet_allocatable(gpu_fleet(8));
    s.chose("ml-0", d, gpus(4));
    s.waiting("ml-1", d, at(1));
    s.waiting("web-1", d, at(2));
    let teams = Teams::from_policy(&[share("ml", 1.0, &["ml"])]);
    let ml = teams.find("ml").unwrap();
    let default = teams.default_team();
    s.set_teams(
        teams,
        |uid| if uid.starts_with("ml") { ml } else { default },
    );
    assert_eq!(s.usage(ml), &gpus(4));
    assert_eq!(s.next().map(|k| &*k.uid), Some("web-1"));
    assert_eq!(s.team_of_job("ml-1"), Some(ml));
}

#[test]
fn a_relist_forgets_the_jobs_gone() {
    let mut s = shares_of(&[]);
    let d = s.teams().default_team();
    s.chose("gone-placed", d, cpus(1));
    s.waiting("gone-waiting", d, at(1));
    s.waiting("here", d, at(2));
    s.retain(&|uid| uid == "here");
    assert_eq!(s.usage(d), &res(&[]));
    assert_eq!(s.iter_in_order().count(), 1);
}

#[test]
fn the_summary_gives_each_team_its_fair_share_and_counts() {
    let mut s = shares_of(&[
        share("research", 2.0, &[]),
        share("prod", 1.0, &[]),
        share("idle", 1.0, &[]),
    ]);
    let (research, prod) = (team(&s, "research"), team(&s, "prod"));
    s.set_fleet_allocatable(gpu_fleet(8));
    s.chose("r0", research, gpus(4));
    s.waiting("r1", research, at(1));
    s.waiting("p1", prod, at(2));
    let summary = s.team_summary();
    let row = |name: &str| summary.iter().find(|t| t.name == name).unwrap();
    let names: Vec<&str> = summary.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["research", "prod", "idle", "default"]);
    // Active: research (2) and prod (1).
    assert_eq!(row("research").fair_share, 2.0 / 3.0);
    assert_eq!(row("prod").fair_share, 1.0 / 3.0);
    assert_eq!(row("idle").fair_share, 1.0 / 4.0, "were it to ask");
    let r = row("research");
    assert_eq!((r.placed, r.waiting), (1, 1));
    assert_eq!(r.usage, gpus(4));
    assert_eq!(r.dominant.as_ref().map(|d| d.share), Some(0.5));
    assert_eq!(r.priority, 0.25);
    assert_eq!((row("prod").placed, row("prod").waiting), (0, 1));
}
