//! The dispatcher at scale on real control planes (issue 44): the same Jobs run two ways, each
//! on planes started fresh for the run (etcd and kube-apiserver v1.36.2 with its audit log,
//! kube-controller-manager at its default client rate, 20 qps and burst 30: envtest passes it
//! no rate flag):
//!
//! * **single**: created directly in one worker-like plane (kube-controller-manager running a
//!   worker's controllers) and run by its kube-controller-manager alone;
//! * **dispatched**: created on a management plane with `spec.managedBy:
//!   jobwarden.io/dispatcher` and dispatched by jobwarden (the release binary, `serve
//!   --no-webhook` under the installed identity, its policy naming two workers through
//!   Secrets, three with `WORKERS=3`) to as many worker planes, whose kube-controller-managers
//!   run the copies.
//!
//! A kubelet played by this process (User-Agent `scale-kubelet`) ends each pod about a second
//! after it appears, on the single plane and on each worker. Prints Markdown tables:
//!
//! * the time from the first Job's create to the moment this process saw the last Job show
//!   its terminal condition (its watch of the Jobs), single and dispatched, and their ratio;
//! * the mirror's lag at p50, p99 and max, measured from outside: this process watches the
//!   copies on the workers and the user's Jobs on the management cluster, notes when each
//!   version arrives, and matches each status a copy was stored with to the first version
//!   of its user's Job that shows it or a later status of the same copy
//!   (`jobwarden_envtest::mirror_lag`: the fields the mirror copies, not the times); beside
//!   it, p50 and p99 of jobwarden's own `jobwarden_dispatch_mirror_lag_seconds`;
//! * requests per Job jobwarden sent to the management cluster (User-Agent
//!   `jobwarden.io/dispatcher`) and to each worker (`jobwarden.io/dispatcher/<worker>`), by
//!   verb and resource, from each kube-apiserver's audit log, in the workload's namespace;
//!   and kube-controller-manager's Job controller's on the single plane;
//! * copies per worker, and how many Jobs had exactly one copy;
//! * jobwarden's CPU and RSS growth (at the last Job's end, and once its copies are deleted
//!   and its Events written), per dispatched Job, beside the single plane's
//!   kube-controller-manager's for the same Jobs;
//! * leadership: jobwarden's `jobwarden_controller_leader_losses_total` and its Lease's
//!   transitions.
//!
//! ```sh
//! bench/dispatch_scale_real.sh                 # builds jobwarden in release, runs every shape once
//! RUNS=3 bench/dispatch_scale_real.sh burst    # the burst of 1,000 one-pod Jobs, three times
//! bench/dispatch_scale_real.sh indexed-10x100 indexed-5000
//! SHARES=1 bench/dispatch_scale_real.sh burst  # with dispatch.shares set (issue 53)
//! WORKERS=3 bench/dispatch_scale_real.sh burst # over three workers (issue 54)
//! ```
//!
//! `SHARES=1` gives the policy two teams of other namespaces (issue 53's example): the fair
//! order's gate and holds run for every placement, the burst's Jobs all in the team `default`.
//!
//! Flags after `--` go to `jobwarden serve` (`-- --dispatch-kube-api-qps 100`), to try another
//! setting against the same run's single plane.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use jobwarden_envtest::job_versions::{JobVersions, Seen};
use jobwarden_envtest::measure::usage::Growth;
use jobwarden_envtest::measure::{Requests, Usage, command_line};
use jobwarden_envtest::mirror_lag::{self, quantile};
use jobwarden_envtest::{ControlPlane, DispatcherSettings, Fleet, Options, WORKER_DISPATCHER_USER};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Event;
use kube::Client;
use kube::api::{Api, PostParams};

const DISPATCHER: &str = "jobwarden.io/dispatcher";
/// The workers' names; `WORKERS=3` takes the first three (two by default).
const NAMES: [&str; 3] = ["east", "west", "north"];

fn workers() -> &'static [&'static str] {
    let n = std::env::var("WORKERS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(2)
        .clamp(1, NAMES.len());
    &NAMES[..n]
}
/// Far beyond any shape's run: reaching it is a failure.
const TIMEOUT: Duration = Duration::from_secs(2400);

struct Shape {
    /// The name the script picks it by.
    key: &'static str,
    name: &'static str,
    jobs: usize,
    pods: usize,
}

const SHAPES: [Shape; 3] = [
    Shape {
        key: "burst",
        name: "burst: 1,000 Jobs × 1 pod",
        jobs: 1000,
        pods: 1,
    },
    Shape {
        key: "indexed-10x100",
        name: "10 Indexed Jobs × 100 pods",
        jobs: 10,
        pods: 100,
    },
    Shape {
        key: "indexed-5000",
        name: "1 Indexed Job × 5,000 pods",
        jobs: 1,
        pods: 5000,
    },
];

fn job(name: &str, pods: usize, managed_by: Option<&str>) -> Job {
    serde_json::from_value(jobwarden_envtest::load_job(
        name, pods, "Indexed", managed_by,
    ))
    .expect("a Job")
}

/// Creates the shape's Jobs in `ns`; returns when the first create was sent.
async fn create_jobs(
    client: &Client,
    ns: &str,
    shape: &Shape,
    managed_by: Option<&str>,
) -> Instant {
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let started = Instant::now();
    for i in 0..shape.jobs {
        jobs.create(
            &PostParams::default(),
            &job(&format!("job-{i}"), shape.pods, managed_by),
        )
        .await
        .expect("the Job is created");
    }
    eprintln!(
        "{ns}: {} Jobs created in {:.1} s",
        shape.jobs,
        started.elapsed().as_secs_f64()
    );
    started
}

/// Waits until every one of `jobs` Jobs `watched` has seen shows its terminal condition;
/// returns the seconds from `started` to the last of them.
async fn all_ended(watched: &JobVersions, jobs: usize, started: Instant) -> f64 {
    loop {
        let seen = watched.seen();
        let ended: Vec<Instant> = seen.values().filter_map(Seen::ended_at).collect();
        if ended.len() >= jobs {
            let last = ended.iter().max().copied().unwrap_or(started);
            return last.duration_since(started).as_secs_f64();
        }
        assert!(
            started.elapsed() < TIMEOUT,
            "{} of {jobs} Jobs ended within {TIMEOUT:?}",
            ended.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until the Events of `ns` stop coming: their count unchanged for 10 s.
async fn events_settle(client: &Client, ns: &str) {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let started = Instant::now();
    let mut last = (usize::MAX, Instant::now());
    while last.1.elapsed() < Duration::from_secs(10) && started.elapsed() < TIMEOUT {
        let n = events
            .list(&Default::default())
            .await
            .map_or(0, |l| l.items.len());
        if n != last.0 {
            last = (n, Instant::now());
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// The CPU seconds the processes `pids` used so far.
fn cpu_of(pids: &[u32]) -> f64 {
    pids.iter().map(|p| Usage::of(*p).cpu_seconds).sum()
}

/// One run under kube-controller-manager alone.
struct Single {
    seconds: f64,
    requests: jobwarden_envtest::measure::requests::Calls,
    growth: Growth,
    /// The control plane's CPU seconds (etcd, kube-apiserver, kube-controller-manager).
    plane_cpu: f64,
}

async fn single(shape: &Shape) -> Single {
    let plane = ControlPlane::start(Options {
        audit_log: true,
        ..Options::worker()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let kcm = *plane.pids().last().expect("kube-controller-manager");
    let admin = plane.client().await;
    let ns = plane.create_namespace(&admin, "single").await;
    let kubelet = jobwarden_envtest::kubelet::finish_pods_after_a_second(
        plane.client_named("scale-kubelet").await,
        &ns,
    );
    let watched = JobVersions::watch(admin.clone(), &ns, None);
    let before = Usage::of(kcm);
    let plane_cpu = cpu_of(&plane.pids());
    let started = create_jobs(&admin, &ns, shape, None).await;
    let seconds = all_ended(&watched, shape.jobs, started).await;
    let plane_cpu = cpu_of(&plane.pids()) - plane_cpu;
    events_settle(&admin, &ns).await;
    let growth = Usage::of(kcm).since(&before);
    kubelet.abort();
    let audit = plane.audit_log().expect("an audit log");
    Single {
        seconds,
        requests: Requests::in_namespace(&audit, &ns)
            .of("kube-controller-manager", "job-controller"),
        growth,
        plane_cpu,
    }
}

/// One dispatched run.
struct Dispatched {
    seconds: f64,
    /// The mirror's lags, from outside, and the copy statuses never shown.
    lags: Vec<Duration>,
    unmatched: usize,
    /// p50 and p99 of `jobwarden_dispatch_mirror_lag_seconds`.
    metric_lag: (Option<f64>, Option<f64>),
    management: jobwarden_envtest::measure::requests::Calls,
    workers: Vec<jobwarden_envtest::measure::requests::Calls>,
    /// Jobs with a copy on each worker, and Jobs with exactly one copy in all.
    copies: Vec<usize>,
    exactly_once: usize,
    /// jobwarden's growth at the last Job's end, and once its copies are gone.
    at_end: Growth,
    settled: Growth,
    /// The three control planes' CPU seconds until the last Job ended.
    planes_cpu: f64,
    losses: f64,
    transitions: i32,
    events_dropped: f64,
    /// `jobwarden_dispatch_mirrors_total` by result, and syncs.
    mirrors: String,
    refused: usize,
}

/// `dispatch.shares` with `SHARES=1`: issue 53's example, two teams of other namespaces.
const SHARES: &str = "shares:
  - {name: research, namespaces: {names: [research]}, weight: 2}
  - {name: prod, namespaces: {names: [prod-batch]}, weight: 1}
";

async fn dispatched(binary: &Path, shape: &Shape, flags: &[&str]) -> Dispatched {
    let fleet = Fleet::start_audited(workers().len()).unwrap_or_else(|e| panic!("{e}"));
    let mut settings = DispatcherSettings::new(workers());
    settings.flags = flags.iter().map(|f| (*f).to_owned()).collect();
    if std::env::var("SHARES").is_ok_and(|v| v == "1") {
        settings.dispatch = SHARES.to_owned();
    }
    let run = fleet
        .run_dispatcher(binary, &settings)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let pid = run.replicas[0].pid();
    let mgmt = fleet.management.client().await;
    let ns = fleet.dispatched_namespace("dispatched").await;
    let before = Usage::of(pid);
    let pids: Vec<u32> = fleet.planes().flat_map(ControlPlane::pids).collect();
    let planes_cpu = cpu_of(&pids);
    let started = create_jobs(&mgmt, &ns.name, shape, Some(DISPATCHER)).await;
    let seconds = all_ended(&ns.users, shape.jobs, started).await;
    let at_end = Usage::of(pid).since(&before);
    let planes_cpu = cpu_of(&pids) - planes_cpu;
    // Every copy deleted, and the Events written.
    loop {
        let queued = run
            .leader()
            .map_or(f64::MAX, |(_, e)| e.sum("jobwarden_dispatch_events_queued"));
        if ns.copies_gone() >= shape.jobs && queued == 0.0 {
            break;
        }
        assert!(
            started.elapsed() < TIMEOUT,
            "the copies were not deleted:\n{}",
            run.logs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    events_settle(&mgmt, &ns.name).await;
    let settled = Usage::of(pid).since(&before);
    let (_, metrics) = run
        .leader()
        .unwrap_or_else(|| panic!("no leader:\n{}", run.logs()));
    let transitions = Api::<Lease>::namespaced(mgmt.clone(), &run.dispatcher.identity.namespace)
        .get("jobwarden-job-controller")
        .await
        .ok()
        .and_then(|l| l.spec?.lease_transitions)
        .unwrap_or(0);

    let name = ns.name.clone();
    let record = ns.stop();
    let mut lags = Vec::new();
    // Each lag by when its copy's status arrived, in 10 s windows from the first create.
    let mut windows: BTreeMap<u64, Vec<Duration>> = BTreeMap::new();
    let mut unmatched = 0;
    let mut exactly_once = 0;
    for (uid, user) in &record.users {
        let copies = record.copies_of(uid);
        if copies.len() == 1 {
            exactly_once += 1;
        }
        let mut copy: Vec<_> = copies
            .iter()
            .flat_map(|(_, c)| c.versions.iter().cloned())
            .collect();
        copy.sort_by_key(|v| v.at);
        let matched = mirror_lag::lags(&copy, &user.versions);
        for (at, lag) in matched.arrived.iter().zip(&matched.lags) {
            let window = at.saturating_duration_since(started).as_secs() / 10;
            windows.entry(window).or_default().push(*lag);
        }
        lags.extend(matched.lags);
        unmatched += matched.unmatched;
    }
    let timeline: Vec<String> = windows
        .iter()
        .map(|(w, lags)| {
            format!(
                "{}-{} s: {} at p50 {} p99 {} max {}",
                w * 10,
                w * 10 + 10,
                lags.len(),
                secs(quantile(lags, 0.5)),
                secs(quantile(lags, 0.99)),
                secs(quantile(lags, 1.0)),
            )
        })
        .collect();
    eprintln!(
        "the mirror's lag by when the copy's status arrived:\n  {}",
        timeline.join("\n  ")
    );
    let audit = |plane: &ControlPlane| plane.audit_log().expect("an audit log");
    let management =
        Requests::in_namespace(&audit(&fleet.management), &name).of("jobwarden", DISPATCHER);
    let workers = workers()
        .iter()
        .zip(&fleet.workers)
        .map(|(worker, plane)| {
            Requests::in_namespace(&audit(plane), &name)
                .of("jobwarden", &format!("{DISPATCHER}/{worker}"))
        })
        .collect();
    let refused = run.dispatcher.identity.refusals().map_or(0, |r| r.len())
        + fleet
            .workers
            .iter()
            .map(|w| w.refusals_of(WORKER_DISPATCHER_USER).map_or(0, |r| r.len()))
            .sum::<usize>();
    Dispatched {
        seconds,
        lags,
        unmatched,
        metric_lag: (
            metrics.quantile("jobwarden_dispatch_mirror_lag_seconds", 0.5),
            metrics.quantile("jobwarden_dispatch_mirror_lag_seconds", 0.99),
        ),
        management,
        workers,
        copies: record.jobs_per_worker(),
        exactly_once,
        at_end,
        settled,
        planes_cpu,
        losses: metrics.sum("jobwarden_controller_leader_losses_total"),
        transitions,
        events_dropped: metrics.sum("jobwarden_dispatch_events_dropped_total"),
        mirrors: format!(
            "{:.0} written, {:.0} held back, {:.0} conflicts; {:.0} syncs; a write alone p50 {} / p99 {}",
            metrics
                .series("jobwarden_dispatch_mirrors_total", "result=\"written\"")
                .unwrap_or(0.0),
            metrics
                .series("jobwarden_dispatch_mirrors_total", "result=\"held\"")
                .unwrap_or(0.0),
            metrics
                .series("jobwarden_dispatch_mirrors_total", "result=\"conflict\"")
                .unwrap_or(0.0),
            metrics.sum("jobwarden_dispatch_syncs_total"),
            maybe(metrics.quantile("jobwarden_dispatch_mirror_write_seconds", 0.5)),
            maybe(metrics.quantile("jobwarden_dispatch_mirror_write_seconds", 0.99)),
        ),
        refused,
    }
}

fn secs(d: Option<Duration>) -> String {
    d.map_or("–".to_owned(), |d| format!("{:.2} s", d.as_secs_f64()))
}

fn maybe(v: Option<f64>) -> String {
    v.map_or("–".to_owned(), |v| format!("{v:.2} s"))
}

/// The rows of one run, one per table.
fn rows(shape: &Shape, run: usize, s: &Single, d: &Dispatched) -> [String; 3] {
    let jobs = shape.jobs;
    let copies: Vec<String> = workers()
        .iter()
        .zip(&d.copies)
        .map(|(w, n)| format!("{w} {n} ({:.0} %)", 100.0 * *n as f64 / jobs as f64))
        .collect();
    let time = format!(
        "| {} | {run} | {:.1} s | {:.1} s | **{:.2}** | {} / {} / {} | {} / {} | {} | {} | {}/{jobs} | {:.0} ({}) | {} |",
        shape.name,
        s.seconds,
        d.seconds,
        d.seconds / s.seconds,
        secs(quantile(&d.lags, 0.5)),
        secs(quantile(&d.lags, 0.99)),
        secs(quantile(&d.lags, 1.0)),
        maybe(d.metric_lag.0),
        maybe(d.metric_lag.1),
        d.unmatched,
        copies.join(", "),
        d.exactly_once,
        d.losses,
        d.transitions,
        d.refused,
    );
    let per = |calls: &jobwarden_envtest::measure::requests::Calls| {
        format!(
            "{:.2} ({})",
            calls.total() as f64 / jobs as f64,
            calls.describe_per(jobs)
        )
    };
    let workers: Vec<String> = workers()
        .iter()
        .zip(&d.workers)
        .map(|(w, c)| format!("{w}: {}", per(c)))
        .collect();
    let requests = format!(
        "| {} | {run} | {} | {} | {} | {} | {:.0} |",
        shape.name,
        per(&s.requests),
        per(&d.management),
        workers.join("; "),
        d.mirrors,
        d.events_dropped,
    );
    let kib = |mib: f64| mib * 1024.0 / jobs as f64;
    let usage = format!(
        "| {} | {run} | {:.2} s | {:+.1} MiB ({:+.1} KiB) | {:+.1} MiB | {:.2} s | {:+.1} MiB ({:+.1} KiB) | {:+.1} MiB ({:+.1} KiB) | {:+.1} MiB | {:.0} s / {:.0} s |",
        shape.name,
        s.growth.cpu_seconds,
        s.growth.rss_mib,
        kib(s.growth.rss_mib),
        s.growth.peak_mib,
        d.settled.cpu_seconds,
        d.at_end.rss_mib,
        kib(d.at_end.rss_mib),
        d.settled.rss_mib,
        kib(d.settled.rss_mib),
        d.settled.peak_mib,
        s.plane_cpu,
        d.planes_cpu,
    );
    [time, requests, usage]
}

const HEADERS: [&str; 3] = [
    "| shape | run | single cluster (kube-controller-manager) | dispatched over the workers | ratio | mirror lag p50 / p99 / max (outside) | lag p50 / p99 (jobwarden's metric) | statuses never shown | copies per worker | Jobs with exactly one copy | leader losses (Lease transitions) | refused |\n|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    "| shape | run | kube-controller-manager's Job controller, single cluster, per Job | jobwarden → management, per Job | jobwarden → each worker, per Job | mirror writes (jobwarden's metrics) | Events dropped |\n|---|---:|---|---|---|---|---:|",
    "| shape | run | kube-controller-manager CPU | its RSS growth (per Job) | its peak growth | jobwarden CPU | jobwarden RSS growth at the last end (per Job) | once copies are gone (per Job) | jobwarden peak growth | control planes' CPU until the last end, single / dispatched (etcd, kube-apiserver, kube-controller-manager) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
];

#[tokio::main]
async fn main() {
    let (binary, rest) = command_line::binary_and_args(
        "usage: dispatch_scale JOBWARDEN_BINARY [SHAPE...] [-- SERVE_FLAGS...]",
    );
    let (shapes, flags) = match rest.iter().position(|a| a == "--") {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (&rest[..], &[][..]),
    };
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let runs = command_line::runs();
    let chosen = command_line::chosen(&SHAPES, |s| s.key, shapes);
    let mut tables: [Vec<String>; 3] = Default::default();
    for shape in chosen {
        for run in 1..=runs {
            let s = single(shape).await;
            let d = dispatched(&binary, shape, &flags).await;
            for (table, row) in tables.iter_mut().zip(rows(shape, run, &s, &d)) {
                eprintln!("{row}");
                table.push(row);
            }
        }
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "dispatched over {} workers", workers().len());
    for (header, table) in HEADERS.iter().zip(&tables) {
        let _ = writeln!(out, "\n{header}");
        for row in table {
            let _ = writeln!(out, "{row}");
        }
    }
    let _ = out.flush();
}
