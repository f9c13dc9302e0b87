use std::collections::BTreeSet;

use super::builders::{GPU, at, cpus, gpus, insufficient, never, res, shares_of};
use crate::room::{Fit, NodeView, PodShape, PodView, Room, Short, fits};
use crate::shares::{Hold, Shares, TeamId, blocks, choose_hold};

fn short_of(list: &[&str]) -> BTreeSet<Box<str>> {
    list.iter().map(|r| (*r).into()).collect()
}

/// The head's fit on each candidate worker, and the worker held with what it is short of.
type Case<'a> = (&'a [(&'a str, Fit)], Option<(&'a str, &'a [&'a str])>);

/// Three Jobs waiting in the default team: `head` (oldest), `gpu-job` and `cpu-job`.
fn three_waiting() -> (Shares, TeamId) {
    let mut s = shares_of(&[]);
    let t = s.teams().default_team();
    s.waiting("head", t, at(1));
    s.waiting("gpu-job", t, at(2));
    s.waiting("cpu-job", t, at(3));
    (s, t)
}

#[test]
fn the_soonest_worker_is_held_fewest_pods_missing_then_fewest_lacks_then_first() {
    let cases: &[Case<'_>] = &[
        (
            &[
                ("east", insufficient(0, 4, &[GPU])),
                ("west", insufficient(3, 4, &[GPU, "cpu"])),
            ],
            Some(("west", &["cpu", GPU])),
        ),
        (
            &[
                ("east", insufficient(2, 4, &[GPU, "cpu"])),
                ("west", insufficient(2, 4, &[GPU])),
            ],
            Some(("west", &[GPU])),
        ),
        (
            &[
                ("east", insufficient(2, 4, &[GPU])),
                ("west", insufficient(2, 4, &["cpu"])),
            ],
            Some(("east", &[GPU])),
        ),
        // A worker it never fits on is passed over.
        (
            &[("east", never()), ("west", insufficient(0, 1, &[GPU]))],
            Some(("west", &[GPU])),
        ),
        // Never fits anywhere, or no nodes, or every node excluded: nothing is held.
        (&[("east", never()), ("west", never())], None),
        (&[("east", Fit::Short(Short::NoNodes))], None),
        (&[("east", Fit::Short(Short::Excluded(Vec::new())))], None),
        // Nothing named as lacking: nothing to keep.
        (&[("east", insufficient(0, 1, &[]))], None),
        // It fits somewhere: it is placed, not held for.
        (
            &[("east", insufficient(0, 1, &[GPU])), ("west", Fit::Fits)],
            None,
        ),
        (&[], None),
    ];
    for (candidates, expected) in cases {
        let got = choose_hold(candidates);
        let expected = expected.map(|(w, r)| (w, short_of(r)));
        assert_eq!(got, expected, "{candidates:?}");
    }
}

#[test]
fn a_gpu_hold_blocks_gpu_jobs_there_only() {
    let (mut s, _) = three_waiting();
    let hold = s.hold_head("head", &[("east", insufficient(1, 2, &[GPU]))]);
    assert_eq!(hold.map(|h| &*h.worker), Some("east"));
    let blocked = s.held_against("east", "gpu-job", &gpus(1));
    assert_eq!(blocked.map(|h| &*h.holder), Some("head"));
    assert_eq!(s.held_against("east", "cpu-job", &cpus(4)), None);
    assert_eq!(s.held_against("west", "gpu-job", &gpus(1)), None);
    assert_eq!(
        s.held_against("east", "head", &gpus(1)),
        None,
        "not by itself"
    );
    let hold = s.hold_of("head").unwrap();
    assert!(blocks(hold, &res(&[(GPU, 1)])));
    assert!(!blocks(hold, &res(&[(GPU, 0), ("memory", 1)])));
}

#[test]
fn one_holder_per_worker() {
    let (mut s, _) = three_waiting();
    assert!(s.hold_for("head", "east", short_of(&[GPU])));
    assert!(!s.hold_for("gpu-job", "east", short_of(&[GPU])));
    // The next Job's soonest worker is held: it holds the next soonest, if any.
    let both = [
        ("east", insufficient(1, 2, &[GPU])),
        ("west", insufficient(0, 2, &[GPU])),
    ];
    assert_eq!(
        s.hold_head("gpu-job", &both).map(|h| &*h.worker),
        Some("west")
    );
    assert_eq!(s.hold_head("cpu-job", &both), None);
    assert_eq!(s.holds().count(), 2);
    // A Job not waiting holds nothing.
    assert!(!s.hold_for("stranger", "north", short_of(&[GPU])));
}

#[test]
fn the_hold_ends_when_its_job_is_placed_or_deleted() {
    let (mut s, t) = three_waiting();
    let east = [("east", insufficient(0, 1, &[GPU]))];
    s.hold_head("head", &east);
    s.chose("head", t, gpus(1));
    assert_eq!(s.holds().count(), 0, "placed");
    s.hold_head("gpu-job", &east);
    s.forget("gpu-job");
    assert_eq!(s.holds().count(), 0, "deleted");
    s.hold_head("cpu-job", &[("east", insufficient(0, 1, &["cpu"]))]);
    // The head fits somewhere now: it is placed, and holds nothing meanwhile.
    assert_eq!(s.hold_head("cpu-job", &[("west", Fit::Fits)]), None);
    assert_eq!(s.holds().count(), 0);
}

#[test]
fn the_hold_stays_on_its_worker_until_the_candidates_change() {
    let (mut s, _) = three_waiting();
    let held = |s: &Shares| s.hold_of("head").map(|h| h.worker.to_string());
    s.hold_head(
        "head",
        &[
            ("east", insufficient(1, 2, &[GPU, "cpu"])),
            ("west", insufficient(0, 2, &[GPU])),
        ],
    );
    assert_eq!(held(&s).as_deref(), Some("east"));
    // West is now nearer, but the hold does not hop; what it is short of follows the fit.
    s.hold_head(
        "head",
        &[
            ("east", insufficient(1, 2, &[GPU])),
            ("west", insufficient(1, 2, &[])),
        ],
    );
    assert_eq!(held(&s).as_deref(), Some("east"));
    assert_eq!(s.hold_of("head").unwrap().short_of, short_of(&[GPU]));
    // A worker joins the candidates: the hold is chosen again.
    s.hold_head(
        "head",
        &[
            ("east", insufficient(0, 2, &[GPU])),
            ("north", insufficient(1, 2, &[GPU])),
            ("west", insufficient(0, 2, &[GPU])),
        ],
    );
    assert_eq!(held(&s).as_deref(), Some("north"));
    // Its worker now never fits it (a node left): another is chosen.
    s.hold_head(
        "head",
        &[
            ("east", insufficient(0, 2, &[GPU])),
            ("north", never()),
            ("west", insufficient(0, 2, &[GPU])),
        ],
    );
    assert_eq!(held(&s).as_deref(), Some("east"));
    // Never fits anywhere: the hold ends.
    s.hold_head(
        "head",
        &[("east", never()), ("north", never()), ("west", never())],
    );
    assert_eq!(held(&s), None);
    s.hold_for("head", "east", short_of(&[GPU]));
    assert_eq!(
        s.release("head").map(|h| h.worker.to_string()).as_deref(),
        Some("east")
    );
    s.hold_for("head", "east", short_of(&[GPU]));
    assert_eq!(
        s.release_worker("east")
            .map(|h| h.holder.to_string())
            .as_deref(),
        Some("head")
    );
    assert_eq!(s.holds().count(), 0);
}

#[test]
fn the_summary_shows_the_holds_of_each_team() {
    let (mut s, t) = three_waiting();
    s.hold_for("gpu-job", "east", short_of(&[GPU]));
    let summary = s.team_summary();
    let row = summary.iter().find(|r| r.team == t).unwrap();
    assert_eq!(
        row.holds,
        [Hold {
            holder: "gpu-job".into(),
            worker: "east".into(),
            short_of: short_of(&[GPU]),
            candidates: Box::new([]),
        }]
    );
}

/// A real worker's room: two nodes of 4 GPUs, three taken. A Job of two 1-GPU pods is short
/// of GPUs there (it would fit once one frees); one of 8 GPUs a pod never fits.
#[test]
fn holds_follow_the_rooms_own_fit() {
    let mut room = Room::new();
    for name in ["n1", "n2"] {
        room.apply_node(NodeView {
            name: name.into(),
            labels: Box::new([]),
            taints: Box::new([]),
            unschedulable: false,
            allocatable: res(&[("cpu", 32_000), (GPU, 4), ("pods", 110)]),
        });
    }
    for (i, node) in ["n1", "n1", "n2", "n2", "n2"].iter().enumerate() {
        let pod = PodView {
            namespace: "other".into(),
            node: Some((*node).into()),
            requests: gpus(1),
            owner: None,
            unschedulable: None,
        };
        room.apply_pod(&format!("pod-{i}"), pod);
    }
    let small = PodShape::of_requests(gpus(1));
    let large = PodShape::of_requests(gpus(8));
    let fit_small = fits(&small, 4, &room, &[]);
    assert_eq!(
        choose_hold(&[("east", fit_small)]),
        Some(("east", short_of(&[GPU])))
    );
    assert_eq!(choose_hold(&[("east", fits(&large, 1, &room, &[]))]), None);
}
