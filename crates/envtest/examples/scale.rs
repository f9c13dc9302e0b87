//! The reconcile loop at scale on a real control plane: the same workloads run by upstream's Job
//! controller (kube-controller-manager v1.36.2, its Job controller alone) and by jobwarden (the
//! release binary, `serve --no-webhook`), one after the other on one kube-apiserver with its
//! audit log on. Prints, per run and controller, the requests it made by verb and resource
//! (counted from the audit log), and the CPU time and resident-memory growth of its process.
//!
//! ```sh
//! bench/scale_real.sh            # builds jobwarden in release and runs this
//! ```
//!
//! A scripted kubelet (this process, User-Agent `scale-kubelet`) ends each pod about a second
//! after it appears. Requests are counted in the workload's namespace, so the one list and
//! watch each controller makes at start (cluster-wide) are not in the figures.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::{StreamExt as _, TryStreamExt as _};
use jobwarden_envtest::{ControlPlane, Options};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const JOBWARDEN: &str = "jobwarden.io/job-controller";
const TIMEOUT: Duration = Duration::from_secs(600);

struct Workload {
    name: &'static str,
    jobs: usize,
    pods: usize,
    mode: &'static str,
}

const WORKLOADS: [Workload; 2] = [
    Workload {
        name: "Indexed, 1,000 pods",
        jobs: 1,
        pods: 1000,
        mode: "Indexed",
    },
    Workload {
        name: "20 Jobs × 50 pods",
        jobs: 20,
        pods: 50,
        mode: "NonIndexed",
    },
];

/// CPU seconds (user + system) and resident memory of a process, from /proc.
fn usage(pid: u32) -> (f64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(") ")
        .map(|(_, rest)| rest.split(' ').collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
    let cpu = (ticks(11) + ticks(12)) / 100.0;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0);
    (cpu, rss_kib)
}

/// A client that names itself, so its requests are told apart in the audit log.
async fn client_as(plane: &ControlPlane, agent: &str) -> Client {
    let mut config = plane.config().await;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_str(agent).expect("a header value"),
    ));
    Client::try_from(config).expect("a client")
}

/// Ends every pod of `ns` about a second after it appears.
fn kubelet(client: Client, ns: String) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let pods: Api<Pod> = Api::namespaced(client, &ns);
        let mut seen = HashSet::new();
        let mut events = watcher(pods.clone(), watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Ok(Some(pod)) = events.try_next().await {
            let done = pod.metadata.deletion_timestamp.is_some()
                || pod
                    .status
                    .as_ref()
                    .and_then(|s| s.phase.as_deref())
                    .is_some_and(|p| p == "Succeeded" || p == "Failed");
            if done || !seen.insert(pod.uid().unwrap_or_default()) {
                continue;
            }
            let (pods, name) = (pods.clone(), pod.name_any());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let now = k8s_openapi::jiff::Timestamp::now().to_string();
                let status = json!({"status": {
                    "phase": "Succeeded",
                    "containerStatuses": [{
                        "name": "main", "image": "busybox", "imageID": "", "ready": false,
                        "restartCount": 0,
                        "state": {"terminated": {"exitCode": 0, "startedAt": now, "finishedAt": now}},
                    }],
                }});
                for _ in 0..5 {
                    let patched = pods
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                        .await;
                    if patched.is_ok() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            });
        }
    })
}

fn job(name: &str, pods: usize, mode: &str, managed_by: Option<&str>) -> Job {
    let mut job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completions": pods, "parallelism": pods, "completionMode": mode,
            "template": {"spec": {
                "schedulerName": "scale-nobody",
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox"}],
            }},
        },
    });
    if let Some(name) = managed_by {
        job["spec"]["managedBy"] = json!(name);
    }
    serde_json::from_value(job).expect("a Job")
}

/// Runs `workload` in a new namespace until every Job is complete and no pod keeps a finalizer.
async fn run(
    plane: &ControlPlane,
    admin: &Client,
    workload: &Workload,
    managed_by: Option<&str>,
) -> String {
    let prefix = if managed_by.is_some() { "jw" } else { "up" };
    let ns = plane
        .create_namespace(admin, &format!("scale-{prefix}-{}", workload.jobs))
        .await;
    let kubelet = kubelet(client_as(plane, "scale-kubelet").await, ns.clone());
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
    loop {
        let list = jobs.list(&Default::default()).await.map(|l| l.items);
        let complete = list.is_ok_and(|l| {
            l.iter().all(|j| {
                j.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c.type_ == "Complete" && c.status == "True")
                    })
            })
        });
        let released = pods
            .list(&Default::default())
            .await
            .is_ok_and(|l| l.items.iter().all(|p| p.finalizers().is_empty()));
        if complete && released {
            break;
        }
        assert!(started.elapsed() < TIMEOUT, "{ns}: the Jobs did not finish");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    kubelet.abort();
    ns
}

/// Requests in `ns` by agent, then by verb and resource, from the audit log.
fn count(audit: &PathBuf, ns: &str) -> BTreeMap<String, BTreeMap<String, u64>> {
    let text = std::fs::read_to_string(audit).unwrap_or_default();
    let mut out: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if event["stage"] != "ResponseComplete" || event["objectRef"]["namespace"] != ns {
            continue;
        }
        let agent = event["userAgent"].as_str().unwrap_or("");
        // `product/version (platform) component`: the product and the component's last part.
        let product = agent.split('/').next().unwrap_or("");
        let component = agent.rsplit('/').next().unwrap_or("");
        let agent = if product == component {
            product.to_owned()
        } else {
            format!("{product}/{component}")
        };
        let object = &event["objectRef"];
        let mut resource = object["resource"].as_str().unwrap_or("").to_owned();
        if let Some(sub) = object["subresource"].as_str() {
            resource = format!("{resource}/{sub}");
        }
        let verb = event["verb"].as_str().unwrap_or("");
        *out.entry(agent)
            .or_default()
            .entry(format!("{verb} {resource}"))
            .or_default() += 1;
    }
    out
}

/// `jobwarden serve --no-webhook`, killed when dropped.
struct Jobwarden(Child);

impl Drop for Jobwarden {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether `jobwarden_controller_leader` reads 1.
fn leads(metrics_port: u16) -> bool {
    jobwarden_envtest::http_get(metrics_port, "/metrics").is_some_and(|body| {
        body.lines()
            .any(|l| l.starts_with("jobwarden_controller_leader") && l.ends_with(" 1"))
    })
}

#[tokio::main]
async fn main() {
    let binary = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .expect("usage: scale JOBWARDEN_BINARY");
    let plane = ControlPlane::start(Options {
        audit_log: true,
        upstream_controller: true,
        controllers: Some("job"),
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let audit = plane.audit_log().expect("an audit log");
    let admin = plane.client().await;
    let kcm = *plane.pids().last().expect("kube-controller-manager");

    let metrics_port = jobwarden_envtest::free_port().expect("a free port");
    let jobwarden = Jobwarden(
        Command::new(&binary)
            .args(["serve", "--no-webhook", "--metrics-listen"])
            .arg(format!("127.0.0.1:{metrics_port}"))
            // The benchmark counts the controller's requests; reviews of its own scrapes'
            // tokens would add calls that are not the controller's.
            .arg("--metrics-secure=false")
            .env("KUBECONFIG", plane.kubeconfig())
            .env("HOSTNAME", "scale")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("jobwarden starts"),
    );
    let started = Instant::now();
    while !leads(metrics_port) {
        assert!(started.elapsed() < TIMEOUT, "jobwarden never led");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let jobwarden_pid = jobwarden.0.id();

    println!("| run | controller | requests | by verb and resource | CPU | RSS growth | wall |");
    println!("|---|---|---:|---|---:|---:|---:|");
    for workload in &WORKLOADS {
        for (label, managed_by, pid, agent) in [
            (
                "upstream",
                None,
                kcm,
                "kube-controller-manager/job-controller",
            ),
            (
                "jobwarden",
                Some(JOBWARDEN),
                jobwarden_pid,
                "jobwarden/job-controller",
            ),
        ] {
            let (cpu0, rss0) = usage(pid);
            let t0 = Instant::now();
            let ns = run(&plane, &admin, workload, managed_by).await;
            let wall = t0.elapsed();
            let (cpu1, rss1) = usage(pid);
            let counts = count(&audit, &ns);
            let mine = counts.get(agent).cloned().unwrap_or_default();
            let total: u64 = mine.values().sum();
            let detail: Vec<String> = mine.iter().map(|(k, v)| format!("{v} {k}")).collect();
            println!(
                "| {} | {label} | {total} | {} | {:.2} s | {:+.1} MiB | {:.0} s |",
                workload.name,
                detail.join(", "),
                cpu1 - cpu0,
                (rss1 as f64 - rss0 as f64) / 1024.0,
                wall.as_secs_f64(),
            );
        }
    }
    drop(jobwarden);
}
