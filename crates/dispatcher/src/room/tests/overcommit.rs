//! No sequence of fits and reservations promises a node more than its allocatable: whenever
//! `fits` says a Job fits, every reservation and every pod of the Job has a node in the
//! placement it was judged on, within what is left there; and pods bound where that
//! placement put them never exceed a node's allocatable.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::builders::{GPU, job, node, pod};
use crate::room::{Fit, PodShape, Reservation, Resources, Room, place};

#[derive(Debug, Clone)]
struct Step {
    cpu: u32,
    gpu: u32,
    pods: u32,
    tolerates: bool,
    /// Afterwards, the oldest reservation's pods are bound where it was placed.
    bind: bool,
}

fn step() -> impl Strategy<Value = Step> {
    (0u32..4, 0u32..3, 1u32..4, any::<bool>(), any::<bool>()).prop_map(
        |(cpu, gpu, pods, tolerates, bind)| Step {
            cpu,
            gpu,
            pods,
            tolerates,
            bind,
        },
    )
}

fn shape(s: &Step) -> PodShape {
    let mut j = job().requests("cpu", &format!("{}500m", s.cpu)).gpu(s.gpu);
    if s.tolerates {
        j = j.tolerate("gpu:");
    }
    j.shape()
}

/// Per node, what is placed there: bound pods (the test's own ledger, not the room's sums)
/// plus the placement's reservations and Job pods.
fn check_within(
    room: &Room,
    bound: &BTreeMap<String, Resources>,
    placed: &[(&PodShape, &[(&str, u32)])],
) -> Result<(), TestCaseError> {
    let mut on: BTreeMap<&str, Resources> = BTreeMap::new();
    for (n, r) in bound {
        on.entry(n.as_str()).or_default().add(r);
    }
    for (shape, nodes) in placed {
        for (n, k) in *nodes {
            on.entry(n)
                .or_default()
                .add(&shape.requests.times(u64::from(*k)));
        }
    }
    for n in room.nodes() {
        let used = on.remove(&*n.name).unwrap_or_default();
        prop_assert!(
            used.fits_in(&n.allocatable),
            "node {} holds {used:?} of {:?}",
            n.name,
            n.allocatable
        );
    }
    Ok(())
}

fn count(on: &[(&str, u32)]) -> u32 {
    on.iter().map(|(_, k)| k).sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn no_sequence_of_fits_and_reservations_overcommits(
        nodes in prop::collection::vec((0u32..8, 0u32..4, any::<bool>()), 1..5),
        steps in prop::collection::vec(step(), 1..24),
        pending in prop::collection::vec(0u32..3, 0..3),
    ) {
        let mut room = Room::new();
        for (i, (cpu, gpu, tainted)) in nodes.iter().enumerate() {
            let mut n = node(&format!("n{i}")).cpu(&cpu.to_string()).gpu(*gpu).alloc("pods", "5");
            if *tainted {
                n = n.taint("gpu:NoSchedule");
            }
            room.apply_node(n.view());
        }
        // Foreign pods the scheduler is about to bind take room first, wherever they fit.
        for (k, cpu) in pending.iter().enumerate() {
            room.apply_pod(&format!("pending-{k}"), pod().requests("cpu", &cpu.to_string()).view());
        }
        let mut bound: BTreeMap<String, Resources> = BTreeMap::new();
        let mut reserved: Vec<Reservation> = Vec::new();
        let mut uid = 0;
        for s in &steps {
            let sh = shape(s);
            let ev = place(&sh, s.pods, &room, &reserved);
            if ev.fit == Fit::Fits {
                prop_assert_eq!(count(&ev.job_on), s.pods);
                let mut placed: Vec<(&PodShape, &[(&str, u32)])> = Vec::new();
                for (r, on) in reserved.iter().zip(&ev.reserved_on) {
                    prop_assert_eq!(count(on), r.pods, "a reservation lost its room");
                    placed.push((&r.shape, on));
                }
                placed.push((&sh, &ev.job_on));
                check_within(&room, &bound, &placed)?;
                reserved.push(Reservation { shape: sh.clone(), pods: s.pods });
            }
            if s.bind && !reserved.is_empty() {
                let oldest = reserved.remove(0);
                let ev = place(&oldest.shape, 0, &room, std::slice::from_ref(&oldest));
                let nodes: Vec<String> = ev
                    .reserved_on
                    .first()
                    .into_iter()
                    .flatten()
                    .flat_map(|(n, k)| std::iter::repeat_n(n.to_string(), *k as usize))
                    .collect();
                for n in nodes {
                    uid += 1;
                    let p = pod()
                        .on(&n)
                        .requests("cpu", &format!("{}m", oldest.shape.requests.cpu_millis))
                        .requests(GPU, &oldest.shape.requests.get(GPU).to_string());
                    room.apply_pod(&format!("p{uid}"), p.view());
                    bound.entry(n).or_default().add(&oldest.shape.requests);
                }
                check_within(&room, &bound, &[])?;
            }
        }
    }
}
