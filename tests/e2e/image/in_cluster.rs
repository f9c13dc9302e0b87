//! The image on the e2e suites' real kube-apiserver, started as the kubelet starts deploy/'s
//! pod: no kubeconfig, only what a pod is given (the ServiceAccount's token, the cluster's CA
//! and the namespace under /var/run/secrets/kubernetes.io/serviceaccount, and
//! `KUBERNETES_SERVICE_HOST`/`_PORT`), deploy/'s arguments, environment, policy and security
//! context, its serving certificate and policy mounted where deploy/ mounts them, read-only.
//!
//! Host networking stands in for the pod network, so that the container reaches the API server
//! on this machine's loopback (by IP, as in a cluster) and the API server calls its webhook;
//! the listeners are moved to free ports for that reason alone.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine as _;
use jobwarden_envtest::{ControlPlane, Installed, SharedPlane};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::Kubeconfig;
use serde_json::json;

use crate::image::engine::{Engine, IMAGE, Running, container_name, text};
use crate::image::pod;
use crate::support::webhook_registration::{Target, register, registration, unregister};

/// This suite's own plane: the image is installed as deploy/ installs it, webhooks and Lease included.
static PLANE: SharedPlane = SharedPlane::new();

const TIMEOUT: Duration = Duration::from_secs(120);
/// The Lease serve's controller takes (`jobwarden_controller::ControllerConfig`'s default), in
/// the pod's own namespace.
const LEASE: &str = "jobwarden-job-controller";
/// The controller name of deploy/'s empty policy.
const CONTROLLER: &str = "jobwarden.io/job-controller";
const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
const REGISTRATION: &str = "jobwarden-image-e2e";

/// deploy/'s pod, running in a container.
struct InClusterPod {
    container: Running,
    https_port: u16,
    metrics_port: u16,
    ca_pem: String,
}

/// The API server's address and CA, as the admin's kubeconfig names them.
fn api_server(plane: &ControlPlane) -> (String, u16, String) {
    let config = Kubeconfig::read_from(plane.kubeconfig()).expect("the admin kubeconfig");
    let cluster = config.clusters[0].cluster.clone().expect("a cluster");
    let server = cluster.server.expect("a server");
    let (host, port) = server
        .trim_start_matches("https://")
        .trim_end_matches('/')
        .rsplit_once(':')
        .expect("https://HOST:PORT");
    let ca = base64::engine::general_purpose::STANDARD
        .decode(cluster.certificate_authority_data.expect("the CA"))
        .expect("base64");
    (
        host.to_owned(),
        port.parse().expect("a port"),
        String::from_utf8(ca).expect("PEM"),
    )
}

/// Writes a file the container reads as uid 65532, as the kubelet writes a volume's files.
fn write_readable(path: &Path, content: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, content).expect("written");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
}

/// A folder the container mounts, readable by uid 65532.
fn folder(dir: &Path, name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(name);
    std::fs::create_dir_all(&path).expect("a folder");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

impl InClusterPod {
    async fn start(engine: &'static Engine, plane: &ControlPlane, identity: &Installed) -> Self {
        let dir = folder(
            plane.dir().expect("a local control plane"),
            "image-in-cluster",
        );
        let (host, port, cluster_ca) = api_server(plane);

        // What the kubelet projects into every pod of the ServiceAccount.
        let service_account = folder(&dir, "serviceaccount");
        let token = plane
            .token_for(&identity.namespace, &identity.service_account)
            .await;
        write_readable(&service_account.join("token"), &token);
        write_readable(&service_account.join("ca.crt"), &cluster_ca);
        write_readable(&service_account.join("namespace"), &identity.namespace);

        // deploy/'s volumes: the Secret cert-manager writes, the policy ConfigMap.
        let tls = folder(&dir, "tls");
        let certificate = jobwarden_envtest::serving_certificate(&tls);
        for file in [&certificate.cert, &certificate.key] {
            let content = std::fs::read_to_string(file).expect("the certificate");
            write_readable(file, &content);
        }
        let policy = folder(&dir, "policy");
        let deployed_policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/base/policy.yaml");
        write_readable(
            &policy.join("policy.yaml"),
            &std::fs::read_to_string(deployed_policy).expect("deploy/base/policy.yaml"),
        );

        let deployed = pod::deployed();
        let name = container_name("in-cluster");
        let (https_port, metrics_port) = (free_port(), free_port());
        let mut command = engine.run(&name);
        command
            .args(["--detach", "--network=host"])
            .args(deployed.security_flags(engine))
            .arg(format!(
                "--volume={}:{SERVICE_ACCOUNT_DIR}:ro",
                service_account.display()
            ))
            .args(["--env", &format!("KUBERNETES_SERVICE_HOST={host}")])
            .args(["--env", &format!("KUBERNETES_SERVICE_PORT={port}")])
            // A pod's HOSTNAME is its name: the Lease's holder.
            .args(["--env", &format!("HOSTNAME={name}")]);
        for (volume, path) in &deployed.mounts {
            let from = match volume.as_str() {
                "tls" => &tls,
                "policy" => &policy,
                other => panic!("deploy/'s pod mounts a volume the test does not make: {other}"),
            };
            command.arg(format!("--volume={}:{path}:ro", from.display()));
        }
        for (key, value) in &deployed.env {
            command.args(["--env", &format!("{key}={value}")]);
        }
        command
            .arg(IMAGE)
            .args(&deployed.args)
            .arg(format!("--listen=127.0.0.1:{https_port}"))
            .arg(format!("--metrics-listen=127.0.0.1:{metrics_port}"));
        let out = command
            .stdin(Stdio::null())
            .output()
            .expect("the engine runs");
        let container = Running::new(engine, name);
        assert!(out.status.success(), "{}", text(&out.stderr));
        InClusterPod {
            container,
            https_port,
            metrics_port,
            ca_pem: certificate.ca_pem,
        }
    }

    /// Waits until `/readyz` answers 200 over HTTPS, as the kubelet's readiness probe asks.
    async fn wait_ready(&self) {
        let (port, ca) = (self.metrics_port, self.ca_pem.clone());
        self.eventually("/readyz answers 200", || {
            let ca = ca.clone();
            async move {
                tokio::task::spawn_blocking(move || {
                    jobwarden_envtest::https_get(port, "/readyz", &ca, None)
                        .is_some_and(|r| r.starts_with("HTTP/1.1 200"))
                        .then_some(())
                })
                .await
                .ok()
                .flatten()
            }
        })
        .await;
    }

    /// Asks `look` every 250 ms until it answers, failing after [`TIMEOUT`] with the
    /// container's logs.
    async fn eventually<T, F, Fut>(&self, what: &str, mut look: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        let started = Instant::now();
        loop {
            if let Some(found) = look().await {
                return found;
            }
            assert!(
                started.elapsed() < TIMEOUT,
                "timed out waiting until {what}; the container's logs:\n{}",
                self.container.logs()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

fn free_port() -> u16 {
    jobwarden_envtest::free_port().expect("a free port")
}

/// The engine and the envtest control plane, or `None` (after a line saying why) when either
/// is missing or `JOBWARDEN_E2E_KUBECONFIG` names a cluster elsewhere: the container reaches
/// the API server, and the API server the container, on this machine's loopback.
pub fn engine_and_local_plane(test: &str) -> Option<(&'static Engine, &'static ControlPlane)> {
    let engine = Engine::shared()?;
    if std::env::var_os("JOBWARDEN_E2E_KUBECONFIG").is_some() {
        eprintln!("skipped: {test} needs the envtest control plane on this machine");
        return None;
    }
    Some((engine, PLANE.get()?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_s_pod_leads_runs_delegated_jobs_and_denies_a_bad_annotation() {
    let Some((engine, plane)) = engine_and_local_plane("the in-cluster image test") else {
        return;
    };
    let client = plane.client().await;
    let identity = plane.installed_identity().await;
    let pod = InClusterPod::start(engine, plane, &identity).await;
    pod.wait_ready().await;

    // It leads, in the namespace the pod was told it runs in: in-cluster configuration.
    let leases = Api::<Lease>::namespaced(client.clone(), &identity.namespace);
    let holder = pod
        .eventually("it holds the Lease", || async {
            let lease = leases.get_opt(LEASE).await.ok().flatten()?;
            lease.spec?.holder_identity
        })
        .await;
    assert_eq!(holder, pod.container.name);

    let ns = plane.create_namespace(&client, "image-e2e").await;
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/webhooks/webhooks.yaml"),
    )
    .expect("deploy/webhooks/webhooks.yaml");
    let target = Target {
        port: pod.https_port,
        ca_pem: Some(&pod.ca_pem),
    };
    register(
        &client,
        &registration(&shipped, REGISTRATION, &target, &[&ns]),
    )
    .await;

    denies_a_bad_annotation(&pod, &client, &ns).await;
    runs_delegated_jobs_to_complete(&pod, &client, &ns).await;

    identity.assert_nothing_refused();
    // deploy/'s --log-format=json: its lines are read, and none is an error.
    let logs = pod.container.logs();
    assert!(logs.contains("\"level\":\"INFO\""), "{logs}");
    let errors: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("\"level\":\"ERROR\""))
        .collect();
    assert!(errors.is_empty(), "it logged errors: {errors:#?}");

    unregister(&client, REGISTRATION).await;
    let _ = Api::<Namespace>::all(client)
        .delete(&ns, &DeleteParams::default())
        .await;
}

/// A Job whose rule-names annotation is not JSON: refused by the webhook in jobwarden's words
/// (what `jobwarden check` says of the same manifest), once the API server calls it.
async fn denies_a_bad_annotation(pod: &InClusterPod, client: &Client, ns: &str) {
    let manifest = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "bad-annotation", "annotations": {
            "jobwarden.io/pod-failure-policy-rule-names": "not-json",
        }},
        "spec": {
            "podFailurePolicy": {"rules": [
                {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},
            ]},
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox"}],
            }},
        },
    });
    let checked = std::process::Command::new(env!("CARGO_BIN_EXE_jobwarden"))
        .args(["check", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(manifest.to_string().as_bytes())?;
            child.wait_with_output()
        })
        .expect("jobwarden check runs");
    let said = text(&checked.stdout);
    let detail = said
        .lines()
        .find_map(|l| {
            l.find("metadata.annotations[jobwarden.io/pod-failure-policy-rule-names]")
                .map(|i| l[i..].to_owned())
        })
        .unwrap_or_else(|| panic!("jobwarden check names the annotation: {said}"));

    let job: Job = serde_json::from_value(manifest).expect("a Job");
    let jobs = Api::<Job>::namespaced(client.clone(), ns);
    // The API server reads webhook configurations through an informer: until it has ours, the
    // Job is stored (and deleted again here).
    let refusal = pod
        .eventually("the webhook refuses the Job", || async {
            match jobs.create(&PostParams::default(), &job).await {
                Err(kube::Error::Api(e)) => Some(e),
                Ok(_) => {
                    let _ = jobs
                        .delete("bad-annotation", &DeleteParams::background())
                        .await;
                    None
                }
                Err(_) => None,
            }
        })
        .await;
    assert_eq!(refusal.code, 422, "{refusal:?}");
    assert!(
        refusal.message.contains(&detail),
        "kube-apiserver says {:?}, jobwarden check says {detail:?}",
        refusal.message
    );
}

/// Two Jobs delegated to jobwarden, run to `Complete` by it while the test plays the kubelet:
/// an Indexed one, and one whose named pod-failure-policy rule the webhook admits.
async fn runs_delegated_jobs_to_complete(pod: &InClusterPod, client: &Client, ns: &str) {
    let jobs = Api::<Job>::namespaced(client.clone(), ns);
    let indexed = jobwarden_envtest::delegated_job(
        "indexed",
        CONTROLLER,
        json!({"completionMode": "Indexed", "completions": 3, "parallelism": 2}),
    );
    let mut named = jobwarden_envtest::delegated_job(
        "named-rule",
        CONTROLLER,
        json!({
            "completions": 2,
            "podFailurePolicy": {"rules": [
                {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},
            ]},
        }),
    );
    named["metadata"]["annotations"] =
        json!({"jobwarden.io/pod-failure-policy-rule-names": r#"["ExitCode42"]"#});
    for job in [indexed, named] {
        let job: Job = serde_json::from_value(job).expect("a Job");
        jobs.create(&PostParams::default(), &job)
            .await
            .unwrap_or_else(|e| panic!("{:?} is created: {e}", job.metadata.name));
    }
    let kubelet = jobwarden_envtest::kubelet(Api::<Pod>::namespaced(client.clone(), ns));
    for (name, completions) in [("indexed", 3), ("named-rule", 2)] {
        let status = pod
            .eventually(&format!("Job {name} is Complete"), || async {
                let status = jobs.get(name).await.ok()?.status?;
                let complete = status
                    .conditions
                    .as_ref()?
                    .iter()
                    .any(|c| c.type_ == "Complete" && c.status == "True");
                complete.then_some(status)
            })
            .await;
        assert_eq!(status.succeeded, Some(completions), "{name}: {status:?}");
        let types: Vec<&str> = status
            .conditions
            .iter()
            .flatten()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(types, ["SuccessCriteriaMet", "Complete"], "{name}");
    }
    kubelet.abort();
}
