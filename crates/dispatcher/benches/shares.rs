//! One placement decision among 10,000 waiting Jobs of 20 teams, pure core only: the next Job
//! (`Shares::next`), then the choice recorded (`Shares::chose`: the Job leaves the order, its
//! team's usage grows, and the team is rekeyed). It must take well under 100 µs (10,000
//! decisions a second) for the dispatcher's loop not to wait on it.
//!
//! ```sh
//! cargo bench -p jobwarden-dispatcher --bench shares
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use jobwarden_admission::policy::{NamespaceMatch, Share};
use jobwarden_dispatcher::room::Resources;
use jobwarden_dispatcher::shares::{Shares, TeamId, Teams};
use k8s_openapi::jiff::Timestamp;

const JOBS: usize = 10_000;
const TEAMS: usize = 20;
/// Decisions between two refills: the order stays between 9,000 and 10,000 Jobs.
const BATCH: u64 = 1_000;

fn requests(i: usize) -> Resources {
    let mut r = Resources::default();
    r.set("cpu", 1000 * (1 + i as u64 % 8));
    r.set("memory", (1 + i as u64 % 16) << 30);
    r.set("pods", 1 + i as u64 % 4);
    if i.is_multiple_of(5) {
        r.set("nvidia.com/gpu", 1 + i as u64 % 8);
    }
    r
}

fn uid(i: usize) -> String {
    format!("123e4567-e89b-12d3-a456-{i:012}")
}

fn created(i: usize) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + (i as i64 * 7919) % 86_400).unwrap_or_default()
}

/// 20 teams of weights 1 to 4 over a fleet of 50 workers' worth, 10,000 Jobs waiting.
fn shares() -> (Shares, Vec<TeamId>) {
    let policy: Vec<Share> = (0..TEAMS)
        .map(|t| Share {
            name: format!("team-{t}"),
            namespaces: NamespaceMatch::default(),
            weight: 1.0 + (t % 4) as f64,
        })
        .collect();
    let mut s = Shares::new(Teams::from_policy(&policy));
    let teams: Vec<TeamId> = s.teams().iter().take(TEAMS).collect();
    let mut fleet = Resources::default();
    fleet.set("cpu", 50 * 64_000);
    fleet.set("memory", 50 * (512 << 30));
    fleet.set("nvidia.com/gpu", 50 * 8);
    s.set_fleet_allocatable(fleet);
    for i in 0..JOBS {
        s.waiting(&uid(i), teams[i % TEAMS], created(i));
    }
    (s, teams)
}

fn decision(c: &mut Criterion) {
    let (mut s, teams) = shares();
    let mut group = c.benchmark_group("shares");
    group.throughput(Throughput::Elements(1));
    group.bench_function("next_and_chose_of_10000_waiting", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                let n = BATCH.min(iters - done);
                let mut placed = Vec::with_capacity(n as usize);
                let start = Instant::now();
                for _ in 0..n {
                    let Some(key) = s.next() else { break };
                    let uid = key.uid.clone();
                    let i: usize = uid.get(24..).and_then(|d| d.parse().ok()).unwrap_or(0);
                    s.chose(&uid, teams[i % TEAMS], requests(i));
                    placed.push((uid, i));
                }
                spent += start.elapsed();
                // Untimed: the Jobs finish and wait again, so the next batch sees 10,000.
                for (uid, i) in placed {
                    s.forget(&uid);
                    s.waiting(&uid, teams[i % TEAMS], created(i));
                }
                done += n;
            }
            black_box(&s);
            spent
        })
    });
    group.finish();
}

criterion_group!(benches, decision);
criterion_main!(benches);
