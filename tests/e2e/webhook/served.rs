//! What the suite's tests share: `jobwarden serve` on a loopback port with a certificate made in
//! the test, run under the ServiceAccount and RBAC `deploy/` installs; webhook configurations
//! (shipped or generated) pointed at it by URL and scoped to the test's namespaces; kubectl;
//! and jobwarden's own request counter, read as a Prometheus bound to the metrics reader role.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use jobwarden_envtest::{ControlPlane, Installed, SharedPlane};
use kube::Client;
use serde_json::{Value, json};

use crate::support::webhook_registration;

/// This suite's own plane: its webhooks, registered cluster-wide, would judge every other suite's Jobs.
static PLANE: SharedPlane = SharedPlane::new();
pub use crate::support::webhook_registration::{Target, registration};

pub const TIMEOUT: Duration = Duration::from_secs(90);

/// The test binary's own control plane, with upstream's Job controller, and a folder for the
/// test's files; `None` (after a line saying why) when there is none, or when
/// `JOBWARDEN_E2E_KUBECONFIG` names a cluster elsewhere, which cannot call 127.0.0.1.
pub fn local_plane(test: &str) -> Option<(&'static ControlPlane, PathBuf)> {
    if std::env::var_os("JOBWARDEN_E2E_KUBECONFIG").is_some() {
        eprintln!(
            "skipped: the webhook e2e tests need the envtest control plane on this machine \
             (a cluster elsewhere cannot call 127.0.0.1)"
        );
        return None;
    }
    let plane = PLANE.with_upstream()?;
    let dir = plane.dir()?.join(test);
    std::fs::create_dir_all(&dir).expect("a folder");
    Some((plane, dir))
}

/// `jobwarden serve` (webhook only) as a cluster runs it: under the ServiceAccount and RBAC
/// `deploy/` installs, its request counter read with a token bound to the metrics reader role.
/// Killed when dropped, and then the API server must have refused it nothing.
pub struct Served {
    inner: crate::support::served::Served,
    identity: Installed,
    reader_token: String,
}

impl std::ops::Deref for Served {
    type Target = crate::support::served::Served;
    fn deref(&self) -> &Self::Target {
        &self.inner
    }
}

impl Served {
    /// `jobwarden_admission_requests_total`, all series summed: every call kube-apiserver made.
    pub fn admission_requests(&self) -> f64 {
        let page = self.get("/metrics", Some(&self.reader_token));
        page.lines()
            .filter(|l| l.starts_with("jobwarden_admission_requests_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

impl Drop for Served {
    /// Fails, naming each call, when kube-apiserver refused `serve` anything (unless the test
    /// already failed: a second panic would abort the test binary).
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.identity.assert_nothing_refused();
        }
    }
}

/// Starts `serve` with the policy and extra arguments under deploy/'s identity, and waits for
/// `/readyz`.
pub fn serve(plane: &'static ControlPlane, dir: &Path, policy: &str, extra: &[&str]) -> Served {
    std::fs::create_dir_all(dir).expect("a folder");
    let config = dir.join("policy.yaml");
    std::fs::write(&config, policy).expect("written");
    let config = config.display().to_string();
    let (identity, reader_token) = on_a_runtime(move || async move {
        let identity = plane.installed_identity().await;
        let reader = plane
            .metrics_reader_token("default", "webhook-e2e-prometheus")
            .await;
        (identity, reader)
    });
    let args: Vec<&str> = ["--config", config.as_str(), "--no-controller"]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    let inner = crate::support::served::Served::start(dir, &identity, "default", &args);
    Served {
        inner,
        identity,
        reader_token,
    }
}

/// The configurations shipped in deploy/webhooks/ (the default policy's).
pub fn shipped() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/webhooks/webhooks.yaml"),
    )
    .expect("deploy/webhooks/webhooks.yaml")
}

/// What `jobwarden webhooks --config FILE` prints for a policy.
pub fn generated(dir: &Path, policy: &str) -> String {
    std::fs::create_dir_all(dir).expect("a folder");
    let file = dir.join("generate-policy.yaml");
    std::fs::write(&file, policy).expect("written");
    let out = Command::new(env!("CARGO_BIN_EXE_jobwarden"))
        .arg("webhooks")
        .arg("--config")
        .arg(&file)
        .output()
        .expect("jobwarden webhooks runs");
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// Registers the configurations (a `List` from [`registration`]) by server-side apply.
pub fn register(plane: &'static ControlPlane, list: &str) {
    let list = list.to_owned();
    on_the_api(plane, move |client| async move {
        webhook_registration::register(&client, &list).await
    });
}

pub fn unregister(plane: &'static ControlPlane, name: &str) {
    let name = name.to_owned();
    on_the_api(plane, move |client| async move {
        webhook_registration::unregister(&client, &name).await
    });
}

/// Runs `f` with a client of the control plane, on a thread and runtime of its own (the
/// callers may be inside a runtime already).
fn on_the_api<F, Fut>(plane: &'static ControlPlane, f: F)
where
    F: FnOnce(Client) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    on_a_runtime(move || async move { f(plane.client().await).await })
}

/// A runtime of the test's own, for the blocking tests' calls to the API.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Runs the future `work` makes to its end, on a thread and runtime of its own (the callers
/// may be inside a runtime already).
fn on_a_runtime<T, Fut>(work: impl FnOnce() -> Fut + Send + 'static) -> T
where
    T: Send + 'static,
    Fut: std::future::Future<Output = T>,
{
    let done = std::thread::spawn(move || runtime().block_on(work())).join();
    match done {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

pub fn kubectl(plane: &ControlPlane, args: &[&str], stdin: Option<&str>) -> Output {
    let mut command = plane.kubectl();
    command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = command.spawn().expect("kubectl runs");
    if let Some(text) = stdin
        && let Some(mut input) = child.stdin.take()
    {
        input.write_all(text.as_bytes()).expect("kubectl reads");
    }
    child.wait_with_output().expect("kubectl ends")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A suspended Job of one container, with these annotations and spec fields added.
pub fn job(name: &str, annotations: Value, spec: Value) -> Value {
    let mut job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"suspend": true, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["true"]}]
        }}}
    });
    if let (Some(target), Some(extra)) = (job["spec"].as_object_mut(), spec.as_object()) {
        target.extend(extra.clone());
    }
    job
}
