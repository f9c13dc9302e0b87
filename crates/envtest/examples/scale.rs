//! The reconcile loop at scale on a real control plane: the same workloads run by upstream's Job
//! controller (kube-controller-manager v1.36.2, its Job controller alone) and by jobwarden (the
//! release binary, `serve --no-webhook`), each run on a control plane of its own (etcd and
//! kube-apiserver with its audit log on, and for upstream a freshly started
//! kube-controller-manager), so that no run inherits another's data or memory. Prints, per run
//! and controller, the time from the first Job's creation to the last Job's Complete condition,
//! how long after it the last pod lost its tracking finalizer, how often the leader stepped down
//! (jobwarden: its loss counter and the Lease's transitions), the Events written (and, for
//! jobwarden, dropped), the requests it made by verb and resource (counted from the audit log),
//! and the CPU time and resident memory of its process: the growth over the run (from the
//! controller ready and idle to the run's end, every pod still cached), that growth per pod, and
//! the growth of its peak (`VmHWM`). jobwarden runs at its default client rate and at upstream's
//! (`--kube-api-qps 20 --kube-api-burst 30`, kube-controller-manager's defaults).
//!
//! ```sh
//! bench/scale_real.sh                      # builds jobwarden in release and runs every shape
//! bench/scale_real.sh burst                # only the burst of 1,000 one-pod Jobs
//! bench/scale_real.sh indexed indexed-5000 # the 1,000- and 5,000-pod Indexed Jobs
//! RUNS=3 bench/scale_real.sh indexed       # each run three times
//! ```
//!
//! Events are best effort and may be written after the last Job completes: each run waits until
//! the controller's Events stop coming (for jobwarden, until its queue is empty) before it
//! counts them.
//!
//! A scripted kubelet (this process, User-Agent `scale-kubelet`) ends each pod about a second
//! after it appears. Requests are counted in the workload's namespace, so the one list and
//! watch each controller makes at start (cluster-wide) are not in the figures.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use jobwarden_envtest::measure::{Exposition, Requests, Usage, command_line};
use jobwarden_envtest::{ControlPlane, Options};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};

const JOBWARDEN: &str = "jobwarden.io/job-controller";
const TIMEOUT: Duration = Duration::from_secs(1200);

struct Workload {
    /// The name `bench/scale_real.sh` picks it by.
    key: &'static str,
    name: &'static str,
    jobs: usize,
    pods: usize,
    mode: &'static str,
}

const WORKLOADS: [Workload; 4] = [
    Workload {
        key: "indexed",
        name: "Indexed, 1,000 pods",
        jobs: 1,
        pods: 1000,
        mode: "Indexed",
    },
    Workload {
        key: "indexed-5000",
        name: "Indexed, 5,000 pods",
        jobs: 1,
        pods: 5000,
        mode: "Indexed",
    },
    Workload {
        key: "fan-out",
        name: "20 Jobs × 50 pods",
        jobs: 20,
        pods: 50,
        mode: "NonIndexed",
    },
    Workload {
        key: "burst",
        name: "burst: 1,000 Jobs × 1 pod",
        jobs: 1000,
        pods: 1,
        mode: "Indexed",
    },
];

/// jobwarden's runs: a label and the client rate flags (none: its default).
const JOBWARDEN_RATES: [(&str, &[&str]); 2] = [
    ("jobwarden (default 50 qps, burst 100)", &[]),
    (
        "jobwarden at 20 qps, burst 30",
        &["--kube-api-qps", "20", "--kube-api-burst", "30"],
    ),
];

fn job(name: &str, pods: usize, mode: &str, managed_by: Option<&str>) -> Job {
    serde_json::from_value(jobwarden_envtest::load_job(name, pods, mode, managed_by))
        .expect("a Job")
}

/// Seconds from the first Job's creation to the last Job's Complete condition, from the Jobs'
/// own timestamps; `None` while a Job is not complete.
fn last_complete_after(jobs: &[Job]) -> Option<f64> {
    let mut first_created = None::<k8s_openapi::jiff::Timestamp>;
    let mut last_complete = None::<k8s_openapi::jiff::Timestamp>;
    for job in jobs {
        let created = job.metadata.creation_timestamp.as_ref()?.0;
        first_created = Some(first_created.map_or(created, |t| t.min(created)));
        let complete = job
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c.type_ == "Complete" && c.status == "True")
            })?;
        let at = complete.last_transition_time.as_ref()?.0;
        last_complete = Some(last_complete.map_or(at, |t| t.max(at)));
    }
    let span = last_complete?.duration_since(first_created?);
    Some(span.as_secs_f64())
}

/// Runs `workload` in a new namespace until every Job is complete and no pod keeps a finalizer;
/// returns the namespace, the seconds to the last Complete, and the seconds from the last
/// Complete to the last finalizer gone (as this loop sees it, to the second).
async fn run(
    plane: &ControlPlane,
    admin: &Client,
    workload: &Workload,
    managed_by: Option<&str>,
    prefix: &str,
) -> (String, f64, f64) {
    let ns = plane
        .create_namespace(admin, &format!("scale-{prefix}-{}", workload.jobs))
        .await;
    let kubelet = jobwarden_envtest::kubelet::finish_pods_after_a_second(
        plane.client_named("scale-kubelet").await,
        &ns,
    );
    let jobs: Api<Job> = Api::namespaced(admin.clone(), &ns);
    for i in 0..workload.jobs {
        jobs.create(
            &PostParams::default(),
            &job(
                &format!("job-{i}"),
                workload.pods,
                workload.mode,
                managed_by,
            ),
        )
        .await
        .expect("the Job is created");
    }
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    let started = Instant::now();
    let mut completed_at = None;
    let after = loop {
        let list = jobs.list(&Default::default()).await.map(|l| l.items);
        let complete = list.ok().and_then(|l| last_complete_after(&l));
        if complete.is_some() && completed_at.is_none() {
            completed_at = Some(Instant::now());
        }
        let released = pods
            .list(&Default::default())
            .await
            .is_ok_and(|l| l.items.iter().all(|p| p.finalizers().is_empty()));
        if let Some(after) = complete.filter(|_| released) {
            break after;
        }
        assert!(started.elapsed() < TIMEOUT, "{ns}: the Jobs did not finish");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let lag = completed_at.map_or(0.0, |at| at.elapsed().as_secs_f64());
    kubelet.abort();
    (ns, after, lag)
}

/// Events `agent` (`product`, `component`) created in `ns`, from the audit log.
fn events_created(audit: &Path, ns: &str, agent: (&str, &str)) -> u64 {
    Requests::in_namespace(audit, ns)
        .of(agent.0, agent.1)
        .0
        .get("create events")
        .copied()
        .unwrap_or(0)
}

/// Waits until the controller's Events stop coming: its count in the audit log unchanged for
/// 10 s, and (for jobwarden) its queue empty.
async fn events_settle(audit: &Path, ns: &str, agent: (&str, &str), metrics_port: Option<u16>) {
    let started = Instant::now();
    let mut last = (events_created(audit, ns, agent), Instant::now());
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = events_created(audit, ns, agent);
        if now != last.0 {
            last = (now, Instant::now());
        }
        let queue_empty = metrics_port.is_none_or(|port| metric(port, "events_queued") == 0.0);
        if queue_empty && last.1.elapsed() >= Duration::from_secs(10) {
            return;
        }
        if started.elapsed() > TIMEOUT {
            eprintln!("{ns}: the Events did not settle in {TIMEOUT:?}");
            return;
        }
    }
}

/// `jobwarden serve --no-webhook`, stopped when dropped.
struct Jobwarden {
    child: Child,
    metrics_port: u16,
}

impl Jobwarden {
    /// Starts jobwarden with `flags` and waits until it leads.
    async fn start(binary: &PathBuf, plane: &ControlPlane, flags: &[&str]) -> Jobwarden {
        let metrics_port = jobwarden_envtest::free_port().expect("a free port");
        let child = Command::new(binary)
            .args(["serve", "--no-webhook", "--metrics-listen"])
            .arg(format!("127.0.0.1:{metrics_port}"))
            // The benchmark counts the controller's requests; reviews of its own scrapes'
            // tokens would add calls that are not the controller's.
            .arg("--metrics-secure=false")
            .args(flags)
            .env("KUBECONFIG", plane.kubeconfig())
            .env("HOSTNAME", "scale")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("jobwarden starts");
        let jobwarden = Jobwarden {
            child,
            metrics_port,
        };
        let started = Instant::now();
        while metric(metrics_port, "leader") != 1.0 {
            assert!(started.elapsed() < TIMEOUT, "jobwarden never led");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        jobwarden
    }
}

impl Drop for Jobwarden {
    fn drop(&mut self) {
        // SIGTERM: it releases its Lease, so the next one leads at once.
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: kill(2) on the pid of a child this process started and has not reaped.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let _ = self.child.wait();
    }
}

/// The sum of every series of `jobwarden_controller_<name>` (any labels), 0 when absent.
fn metric(metrics_port: u16, name: &str) -> f64 {
    Exposition::scrape(metrics_port).map_or(0.0, |e| e.sum(&format!("jobwarden_controller_{name}")))
}

/// How often the leader stepped down in a run: jobwarden's loss counter (a shutdown's release
/// excluded, as the run is read before it) and the transitions of its Lease.
async fn stepped_down(admin: &Client, port: u16) -> String {
    let lease =
        Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(admin.clone(), "default")
            .get("jobwarden-job-controller")
            .await
            .ok()
            .and_then(|l| l.spec)
            .and_then(|s| s.lease_transitions)
            .unwrap_or(0);
    let losses = metric(port, "leader_losses_total");
    format!("{losses:.0} (Lease transitions: {lease})")
}

#[tokio::main]
async fn main() {
    let (binary, shapes) =
        command_line::binary_and_args("usage: scale JOBWARDEN_BINARY [SHAPE...]");
    let runs = command_line::runs();
    let workloads = command_line::chosen(&WORKLOADS, |w| w.key, &shapes);

    println!(
        "| run | controller | last Complete after | last finalizer gone after Complete | leader stepped down | events written | events dropped | requests | by verb and resource | CPU | RSS growth | per pod | peak RSS growth |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|");
    for workload in workloads {
        let upstream = [(
            "upstream (kube-controller-manager, 20 qps, burst 30)",
            None,
            ("kube-controller-manager", "job-controller"),
        )];
        let jobwarden = JOBWARDEN_RATES.iter().map(|(label, flags)| {
            (
                *label,
                Some(*flags),
                ("jobwarden", "jobwarden.io/job-controller"),
            )
        });
        let controllers: Vec<_> = upstream.into_iter().chain(jobwarden).collect();
        for _ in 0..runs {
            for (i, (label, flags, agent)) in controllers.iter().enumerate() {
                // A control plane of the run's own: a fresh etcd and API server, and for
                // upstream a freshly started kube-controller-manager.
                let plane = ControlPlane::start(Options {
                    audit_log: true,
                    upstream_controller: flags.is_none(),
                    controllers: Some("job"),
                    scheduler: false,
                })
                .unwrap_or_else(|e| panic!("{e}"));
                let audit = plane.audit_log().expect("an audit log");
                let admin = plane.client().await;
                let jobwarden = match flags {
                    Some(flags) => Some(Jobwarden::start(&binary, &plane, flags).await),
                    None => None,
                };
                let pid = jobwarden.as_ref().map_or_else(
                    || *plane.pids().last().expect("kube-controller-manager"),
                    |j| j.child.id(),
                );
                let port = jobwarden.as_ref().map(|j| j.metrics_port);
                let managed_by = flags.map(|_| JOBWARDEN);
                let before = Usage::of(pid);
                let (ns, after, lag) =
                    run(&plane, &admin, workload, managed_by, &format!("r{i}")).await;
                events_settle(&audit, &ns, *agent, port).await;
                let grown = Usage::of(pid).since(&before);
                let (dropped, stepped) = match port {
                    Some(p) => (
                        format!("{:.0}", metric(p, "events_dropped_total")),
                        stepped_down(&admin, p).await,
                    ),
                    None => ("not reported".to_owned(), "(no leader election)".to_owned()),
                };
                drop(jobwarden);
                let mine = Requests::in_namespace(&audit, &ns).of(agent.0, agent.1);
                let events = mine.0.get("create events").copied().unwrap_or(0);
                let detail: Vec<String> = mine.0.iter().map(|(k, v)| format!("{v} {k}")).collect();
                let pods = (workload.jobs * workload.pods) as f64;
                println!(
                    "| {} | {label} | {after:.1} s | {lag:.1} s | {stepped} | {events} | {dropped} | {} | {} | {:.2} s | {:+.1} MiB | {:+.1} KiB | {:+.1} MiB |",
                    workload.name,
                    mine.total(),
                    detail.join(", "),
                    grown.cpu_seconds,
                    grown.rss_mib,
                    grown.rss_mib * 1024.0 / pods,
                    grown.peak_mib,
                );
                let _ = std::io::stdout().flush();
            }
        }
    }
}
