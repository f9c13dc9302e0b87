use super::builders::{GPU, gpus, res, share, shares_of, team};
use crate::shares::{Changed, Dominant, Ledger, TeamId, dominant};

const GI: u64 = 1 << 30;

/// A team's usage, and its dominant resource with its share.
type Case<'a> = (&'a [(&'a str, u64)], Option<(&'a str, f64)>);

#[test]
fn the_dominant_share_is_the_largest_fraction_of_any_resource() {
    let fleet = res(&[
        ("cpu", 10_000),
        ("memory", 16 * GI),
        (GPU, 8),
        ("pods", 110),
    ]);
    let cases: &[Case<'_>] = &[
        // cpu 0.2, memory 0.5: memory.
        (&[("cpu", 2000), ("memory", 8 * GI)], Some(("memory", 0.5))),
        // cpu 0.6, memory 0.25: cpu.
        (&[("cpu", 6000), ("memory", 4 * GI)], Some(("cpu", 0.6))),
        // One GPU of 8 beats 1 cpu of 10.
        (&[("cpu", 1000), (GPU, 1)], Some((GPU, 0.125))),
        // Pod slots are no share: 100 of 110 pods, 1 cpu of 10.
        (&[("cpu", 1000), ("pods", 100)], Some(("cpu", 0.1))),
        (&[("pods", 100)], None),
        // None of it in the fleet: skipped.
        (
            &[("example.com/fpga", 4), ("cpu", 500)],
            Some(("cpu", 0.05)),
        ),
        (&[("example.com/fpga", 4)], None),
        // Ties go to the resource listed first.
        (&[("cpu", 5000), ("memory", 8 * GI)], Some(("cpu", 0.5))),
        // More than the fleet has (it shrank): above 1.
        (&[(GPU, 12)], Some((GPU, 1.5))),
        (&[], None),
    ];
    for (usage, expected) in cases {
        let expected = expected.map(|(r, share)| Dominant {
            resource: r.into(),
            share,
        });
        assert_eq!(dominant(&res(usage), &fleet), expected, "{usage:?}");
    }
}

#[test]
fn weights_divide_the_dominant_share() {
    let mut s = shares_of(&[share("heavy", 2.0, &[]), share("light", 1.0, &[])]);
    let (heavy, light) = (team(&s, "heavy"), team(&s, "light"));
    s.set_fleet_allocatable(res(&[("cpu", 10_000), (GPU, 8)]));
    s.chose("h", heavy, gpus(4));
    s.chose("l", light, gpus(2));
    assert_eq!(s.priority(heavy), 0.5 / 2.0);
    assert_eq!(s.priority(light), 0.25);
    assert_eq!(s.dominant(heavy).map(|d| d.resource), Some(GPU.into()));
}

#[test]
fn the_ledger_counts_placed_jobs_once_and_forgets_them() {
    let mut l = Ledger::default();
    let (a, b) = (TeamId(0), TeamId(1));
    let fleet = res(&[("cpu", 8000)]);
    assert_eq!(
        l.chose("u", a, res(&[("cpu", 2000)])),
        Changed {
            was: None,
            is: Some(a)
        }
    );
    // The watch shows the same: nothing changes.
    assert_eq!(
        l.observe("u", a, Some(res(&[("cpu", 2000)]))),
        Changed::default()
    );
    l.observe("v", a, Some(res(&[("cpu", 2000)])));
    assert_eq!(l.usage(a), &res(&[("cpu", 4000)]));
    assert_eq!(l.placed(a), 2);
    assert_eq!(l.dominant_share(a, &fleet), 0.5);
    // Its namespace moved to another team.
    let moved = l.observe("v", b, Some(res(&[("cpu", 2000)])));
    assert_eq!(moved.teams().collect::<Vec<_>>(), [a, b]);
    assert_eq!(l.usage(a), &res(&[("cpu", 2000)]));
    // Finished: not counted.
    assert_eq!(l.observe("u", a, None).teams().collect::<Vec<_>>(), [a]);
    assert_eq!(l.usage(a), &res(&[]));
    assert_eq!(l.dominant_share(a, &fleet), 0.0);
    assert_eq!(l.forget("nobody"), Changed::default());
    l.forget("v");
    assert_eq!(l.placed(b), 0);
    assert_eq!(
        l.usage(TeamId(7)),
        &res(&[]),
        "a team never seen uses nothing"
    );
}
