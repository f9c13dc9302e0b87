//! `jobwarden workers` on real control planes: a management cluster and two workers (no
//! kubelet: the Nodes are objects written here, the pods bound to them by `nodeName`), read
//! with the workers' admin kubeconfigs given as `--worker-kubeconfig`. The table is the one
//! docs/dispatch.md shows.

use crate::support;
use crate::support::run;

use jobwarden_envtest::{ControlPlane, Fleet, NodeLayout};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod, ServiceAccount};
use kube::Client;
use kube::api::{Api, PostParams};
use run::{jobwarden, stderr, stdout};
use serde_json::{Value, json};

const DISPATCHER: &str = "jobwarden.io/dispatcher";

/// A Node laid out as a kubelet would have registered it (envtest's `Nodes`: its status
/// written, Ready, the not-ready taint kube-apiserver puts on a new Node taken off).
async fn node(plane: &ControlPlane, layout: NodeLayout) {
    plane
        .nodes()
        .await
        .create(&layout)
        .await
        .expect("Node laid out");
}

/// A pod bound to `node` with these requests (it stays Pending: no kubelet runs it, and it
/// holds its room as a running one does).
async fn bound_pod(client: &Client, name: &str, node: &str, requests: Value) {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "default"}})).expect("an account");
    // Made by the controller manager's token controller where one runs; not always here.
    let _ = accounts.create(&PostParams::default(), &account).await;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "automountServiceAccountToken": false,
                 "containers": [{"name": "c", "image": "x",
                                 "resources": {"requests": requests, "limits": requests}}]}
    }))
    .expect("a Pod");
    Api::<Pod>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
}

/// A Job the dispatcher runs (none runs here: it stays as written), its one pod asking a GPU.
async fn dispatched(client: &Client, name: &str, worker: Option<&str>) -> String {
    let gpu = json!({"nvidia.com/gpu": "1"});
    let mut job = json!({
        "metadata": {"name": name, "namespace": "default", "annotations": {}},
        "spec": {"managedBy": DISPATCHER, "suspend": false,
                 "template": {"spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "c", "image": "x",
                                           "resources": {"requests": gpu, "limits": gpu}}]}}}
    });
    if let Some(w) = worker {
        job["metadata"]["annotations"]["jobwarden.io/worker"] = json!(w);
    }
    let job: Job = serde_json::from_value(job).expect("a Job");
    let made = Api::<Job>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &job)
        .await
        .expect("Job created");
    made.metadata.uid.unwrap_or_default()
}

/// The dispatcher's Warning on a waiting Job, as it writes one.
async fn waiting_warning(client: &Client, job: &str, uid: &str) {
    let event: Event = serde_json::from_value(json!({
        "metadata": {"name": format!("{job}.wait"), "namespace": "default"},
        "involvedObject": {"apiVersion": "batch/v1", "kind": "Job", "name": job,
                           "namespace": "default", "uid": uid},
        "type": "Warning", "reason": "NoWorkerFits",
        "message": "no worker has room for the Job's pods now: alpha: 0 of 2 pods fit: insufficient nvidia.com/gpu (0 free on 2 nodes)",
        "source": {"component": DISPATCHER},
        "firstTimestamp": "2026-11-28T00:00:00Z", "lastTimestamp": "2026-11-28T00:00:00Z",
        "count": 1
    }))
    .expect("an Event");
    Api::<Event>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &event)
        .await
        .expect("Event created");
}

/// The fleet of these tests: alpha's and beta's Nodes and pods, the management cluster's
/// Jobs, and the policy naming alpha, beta and gamma (whose Secret is never made); its path.
async fn set_up(fleet: &Fleet, test: &str) -> (support::ScratchDir, std::path::PathBuf) {
    let [alpha, beta] = [&fleet.workers[0], &fleet.workers[1]];
    let a = alpha.client().await;
    let gpus = |name: &str, n: &str| NodeLayout::new(name).resource("nvidia.com/gpu", n);
    node(alpha, gpus("a1", "1")).await;
    node(alpha, gpus("a2", "1")).await;
    node(alpha, gpus("a3", "2").unschedulable()).await;
    bound_pod(
        &a,
        "train-0",
        "a1",
        json!({"cpu": "500m", "memory": "4Gi", "nvidia.com/gpu": "1"}),
    )
    .await;
    bound_pod(
        &a,
        "train-1",
        "a2",
        json!({"cpu": "500m", "memory": "4Gi", "nvidia.com/gpu": "1"}),
    )
    .await;
    node(
        beta,
        NodeLayout::new("b1")
            .resource("cpu", "8")
            .resource("memory", "32Gi"),
    )
    .await;

    let m = fleet.management.client().await;
    dispatched(&m, "train", Some("alpha")).await;
    let uid = dispatched(&m, "train-more", None).await;
    waiting_warning(&m, "train-more", &uid).await;
    dispatched(&m, "fresh", None).await;

    let dir = support::scratch_dir(test);
    let policy = dir.join("policy.yaml");
    std::fs::write(
        &policy,
        "dispatch:\n  workers:\n    - {name: alpha, kubeconfigSecret: jobwarden-worker-alpha}\n    - {name: beta, kubeconfigSecret: jobwarden-worker-beta}\n    - {name: gamma, kubeconfigSecret: jobwarden-worker-gamma}\n",
    )
    .expect("policy written");
    (dir, policy)
}

fn started() -> Option<Fleet> {
    match Fleet::start(2) {
        Ok(fleet) => Some(fleet),
        Err(skipped) => {
            eprintln!("{skipped}");
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_shows_each_workers_room_and_the_jobs_waiting() {
    let Some(fleet) = started() else { return };
    let (dir, policy) = set_up(&fleet, "workers-e2e-admin").await;
    let [alpha, beta] = [&fleet.workers[0], &fleet.workers[1]];
    let kubeconfig = |p: &std::path::Path| p.display().to_string();
    let (m_cfg, a_cfg, b_cfg, p_cfg) = (
        kubeconfig(fleet.management.kubeconfig()),
        format!("alpha={}", kubeconfig(alpha.kubeconfig())),
        format!("beta={}", kubeconfig(beta.kubeconfig())),
        kubeconfig(&policy),
    );
    let args = [
        "workers",
        "--kubeconfig",
        &m_cfg,
        "--config",
        &p_cfg,
        "--worker-kubeconfig",
        &a_cfg,
        "--worker-kubeconfig",
        &b_cfg,
    ];
    let out = jobwarden(&args, None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let table = stdout(&out);
    println!("{table}");
    let want = "\
WORKER  STATE       NODES  FREE CPU  FREE MEMORY  FREE GPU  PLACED
alpha   answering   2/3    7/8       24Gi/32Gi    0/2       1
beta    answering   1/1    8/8       32Gi/32Gi    -         0
gamma   connecting  -      -         -            -         0       Secret jobwarden-system/jobwarden-worker-gamma does not exist
Waiting for a worker: 2 Jobs (NoWorkerFits 1, NotSaid 1).
";
    assert_eq!(table, want);

    let json_out = jobwarden(&[&args[..], &["-o", "json"]].concat(), None);
    assert_eq!(json_out.status.code(), Some(0), "{}", stderr(&json_out));
    let view: Value = serde_json::from_str(&stdout(&json_out)).expect("JSON");
    assert_eq!(
        view["workers"][0]["room"]["free"]["nvidia.com/gpu"],
        json!(0.0)
    );
    assert_eq!(view["workers"][0]["room"]["allocatable"]["cpu"], json!(8.0));
    assert_eq!(view["waiting"]["byReason"]["NoWorkerFits"], json!(1));

    // explain judges the waiting Job on each worker now, from the same readings.
    let explained = jobwarden(
        &[
            "explain",
            "-n",
            "default",
            "train-more",
            "--kubeconfig",
            &m_cfg,
            "--config",
            &p_cfg,
            "--worker-kubeconfig",
            &a_cfg,
            "--worker-kubeconfig",
            &b_cfg,
        ],
        None,
    );
    assert_eq!(explained.status.code(), Some(0), "{}", stderr(&explained));
    let story = stdout(&explained);
    println!("{story}");
    assert!(
        story.contains(
            "Where it would fit now (each worker's Nodes and pods, read now):\n  \
             alpha: 0 of 1 pods fit: insufficient nvidia.com/gpu (0 free on 2 nodes); cordoned (1 node)\n  \
             beta: does not fit on any node today: "
        ),
        "{story}"
    );
    assert!(
        story.contains(
            "  gamma: not read: Secret jobwarden-system/jobwarden-worker-gamma does not exist\n"
        ),
        "{story}"
    );
    silent_workers_are_read_at_once(&fleet, &dir).await;
}

/// A kubeconfig like `like`'s (its CA and credentials, so the dispatcher's judge accepts it),
/// for a server that accepts connections and never answers.
fn silent_worker(like: &std::path::Path, dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = listener.local_addr().expect("its address").port();
    std::thread::spawn(move || {
        // Every connection is kept open, unanswered, until the test binary exits.
        let held: Vec<std::net::TcpStream> = listener.incoming().filter_map(Result::ok).collect();
        drop(held);
    });
    let text = std::fs::read_to_string(like).expect("a kubeconfig");
    let silent: String = text
        .lines()
        .map(|l| match l.split_once("server: ") {
            Some((indent, _)) => format!("{indent}server: https://127.0.0.1:{port}\n"),
            None => format!("{l}\n"),
        })
        .collect();
    let path = dir.join(format!("{name}.kubeconfig"));
    std::fs::write(&path, silent).expect("kubeconfig written");
    path
}

/// Two of three workers accept connections and never answer: they are read at once, each
/// bounded by its own timeout (10 s), so the command takes about as long as one of them, and
/// names both.
async fn silent_workers_are_read_at_once(fleet: &Fleet, dir: &std::path::Path) {
    let alpha = &fleet.workers[0];
    let policy = dir.join("silent.yaml");
    std::fs::write(
        &policy,
        "dispatch:\n  workers:\n    - {name: alpha, kubeconfigSecret: a}\n    - {name: quiet-1, kubeconfigSecret: q1}\n    - {name: quiet-2, kubeconfigSecret: q2}\n",
    )
    .expect("policy written");
    let worker = |name: &str| {
        let path = silent_worker(alpha.kubeconfig(), dir, name);
        format!("{name}={}", path.display())
    };
    let (q1, q2) = (worker("quiet-1"), worker("quiet-2"));
    let a = format!("alpha={}", alpha.kubeconfig().display());
    let (m, p) = (
        fleet.management.kubeconfig().display().to_string(),
        policy.display().to_string(),
    );
    let args = [
        "workers",
        "--kubeconfig",
        &m,
        "--config",
        &p,
        "--worker-kubeconfig",
        &a,
        "--worker-kubeconfig",
        &q1,
        "--worker-kubeconfig",
        &q2,
    ];
    let started = std::time::Instant::now();
    let out = jobwarden(&args, None);
    let took = started.elapsed();
    let table = stdout(&out);
    println!("{table}(took {took:?})");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rows: Vec<&str> = table.lines().skip(1).take(3).collect();
    assert!(
        rows[0].starts_with("alpha") && rows[0].contains(" answering "),
        "{table}"
    );
    for (row, name) in rows[1..].iter().zip(["quiet-1", "quiet-2"]) {
        assert!(
            row.starts_with(name) && row.contains("does not answer"),
            "{table}"
        );
    }
    // Read one after the other, the two would take at least twice the timeout.
    assert!(
        took < std::time::Duration::from_secs(20),
        "read one after the other: {took:?}"
    );
}

/// As the dispatcher reads them: each worker's kubeconfig from its Secret, judged first, with
/// the identity deploy/worker/ installs. Cluster-wide, it lists Nodes and pods; granted in one
/// namespace (deploy/worker/namespaced/), it cannot, and the worker is placed by count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_dispatchers_identity_a_namespaced_worker_is_placed_by_count() {
    let Some(fleet) = started() else { return };
    let (_dir, policy) = set_up(&fleet, "workers-e2e-dispatcher").await;
    let m = fleet.management.client().await;
    jobwarden_envtest::create_named_namespace(&m, "jobwarden-system").await;
    let cluster_wide = fleet.workers[0]
        .dispatcher_kubeconfig(None)
        .await
        .expect("deploy/worker/ on alpha");
    let one_namespace = fleet.workers[1]
        .dispatcher_kubeconfig(Some(&["default"]))
        .await
        .expect("deploy/worker/namespaced/ on beta, in default");
    for (name, kubeconfig) in [("alpha", &cluster_wide), ("beta", &one_namespace)] {
        jobwarden_envtest::put_kubeconfig_secret(
            &m,
            "jobwarden-system",
            &jobwarden_envtest::worker_secret(name),
            kubeconfig,
        )
        .await
        .expect("Secret made");
    }
    let (m_cfg, p_cfg) = (
        fleet.management.kubeconfig().display().to_string(),
        policy.display().to_string(),
    );
    let out = jobwarden(
        &["workers", "--kubeconfig", &m_cfg, "--config", &p_cfg],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let table = stdout(&out);
    println!("{table}");
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines
            .get(1)
            .is_some_and(|l| l.starts_with("alpha   answering   2/3       7/8")),
        "{table}"
    );
    assert!(
        lines
            .get(2)
            .is_some_and(|l| l.starts_with("beta    answering   counting  -")
                && l.contains("placement counts Jobs here: nodes is forbidden")),
        "{table}"
    );
}
