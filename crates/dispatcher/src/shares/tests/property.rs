//! `next()` is always the Job a brute force picks: the lowest dominant share ÷ weight,
//! worked out from scratch, ties by team, then the oldest, then the lowest UID.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::builders::{GPU, at, res, share, shares_of};
use crate::room::Resources;
use crate::shares::{Shares, TeamId, dominant};

#[derive(Debug, Clone)]
enum Op {
    Wait {
        job: u8,
        team: u8,
        created: u8,
    },
    Place {
        job: u8,
        team: u8,
        gpus: u8,
        cpus: u8,
    },
    PlaceNext {
        gpus: u8,
        cpus: u8,
    },
    Forget {
        job: u8,
    },
    Fleet {
        gpus: u8,
        cpus: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..24u8, 0..4u8, 0..6u8).prop_map(|(job, team, created)| Op::Wait { job, team, created }),
        (0..24u8, 0..4u8, 0..3u8, 0..5u8).prop_map(|(job, team, gpus, cpus)| Op::Place {
            job,
            team,
            gpus,
            cpus
        }),
        (0..3u8, 0..5u8).prop_map(|(gpus, cpus)| Op::PlaceNext { gpus, cpus }),
        (0..24u8).prop_map(|job| Op::Forget { job }),
        (0..9u8, 0..20u8).prop_map(|(gpus, cpus)| Op::Fleet { gpus, cpus }),
    ]
}

#[derive(Default)]
struct Model {
    waiting: BTreeMap<String, (TeamId, i64)>,
    placed: BTreeMap<String, (TeamId, Resources)>,
    fleet: Resources,
}

fn requests(gpus: u8, cpus: u8) -> Resources {
    res(&[
        (GPU, u64::from(gpus)),
        ("cpu", 1000 * u64::from(cpus)),
        ("pods", 1),
    ])
}

impl Model {
    fn priority(&self, s: &Shares, team: TeamId) -> f64 {
        let mut usage = Resources::default();
        for (t, r) in self.placed.values() {
            if *t == team {
                usage.add(r);
            }
        }
        dominant(&usage, &self.fleet).map_or(0.0, |d| d.share) / s.teams().weight(team)
    }

    fn first(&self, s: &Shares) -> Option<String> {
        let key = |(uid, (team, created)): (&String, &(TeamId, i64))| {
            (self.priority(s, *team), *team, *created, uid.clone())
        };
        let best = self.waiting.iter().map(key).min_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then_with(|| (a.1, a.2, &a.3).cmp(&(b.1, b.2, &b.3)))
        })?;
        Some(best.3)
    }

    fn apply(&mut self, s: &mut Shares, op: &Op) {
        let teams: Vec<TeamId> = s.teams().iter().collect();
        let team = |i: u8| teams.get(usize::from(i) % teams.len()).copied().unwrap();
        match *op {
            Op::Wait {
                job,
                team: t,
                created,
            } => {
                let uid = format!("job-{job}");
                self.placed.remove(&uid);
                self.waiting
                    .insert(uid.clone(), (team(t), i64::from(created)));
                s.waiting(&uid, team(t), at(i64::from(created)));
            }
            Op::Place {
                job,
                team: t,
                gpus,
                cpus,
            } => {
                self.place(s, format!("job-{job}"), team(t), requests(gpus, cpus));
            }
            Op::PlaceNext { gpus, cpus } => {
                if let Some(uid) = s.next().map(|k| k.uid.to_string()) {
                    let t = s.team_of_job(&uid).unwrap();
                    self.place(s, uid, t, requests(gpus, cpus));
                }
            }
            Op::Forget { job } => {
                let uid = format!("job-{job}");
                self.waiting.remove(&uid);
                self.placed.remove(&uid);
                s.forget(&uid);
            }
            Op::Fleet { gpus, cpus } => {
                self.fleet = requests(gpus, cpus);
                s.set_fleet_allocatable(self.fleet.clone());
            }
        }
    }

    fn place(&mut self, s: &mut Shares, uid: String, team: TeamId, r: Resources) {
        self.waiting.remove(&uid);
        self.placed.insert(uid.clone(), (team, r.clone()));
        s.chose(&uid, team, r);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn next_is_the_brute_force_first(ops in proptest::collection::vec(op(), 1..80)) {
        let mut s = shares_of(&[share("a", 1.0, &[]), share("b", 2.0, &[]), share("c", 0.5, &[])]);
        let mut model = Model::default();
        for op in &ops {
            model.apply(&mut s, op);
            prop_assert_eq!(s.next().map(|k| k.uid.to_string()), model.first(&s), "after {:?}", op);
            prop_assert_eq!(s.waiting_count(), model.waiting.len());
            let in_order: Vec<String> = s.iter_in_order().map(|k| k.uid.to_string()).collect();
            prop_assert_eq!(in_order.len(), model.waiting.len());
        }
    }
}
