//! What the suite's tests share: `jobwarden serve` on a loopback port with a certificate made in
//! the test, run under the ServiceAccount and RBAC `deploy/` installs; webhook configurations
//! (shipped or generated) pointed at it by URL and scoped to the test's namespaces; kubectl;
//! and jobwarden's own request counter, read as a Prometheus bound to the metrics reader role.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use jobwarden_envtest::{ControlPlane, Installed};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};

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
    let plane = ControlPlane::shared_with_upstream()?;
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

/// Where the configurations send requests: a server of the test's, or a port nobody listens
/// on (an outage).
pub struct Target<'a> {
    pub port: u16,
    pub ca_pem: Option<&'a str>,
}

/// `configurations` (YAML, both kinds) renamed `name`, pointed at the target by URL, and scoped
/// to `namespaces` besides their own selectors (a label selector ANDs its requirements).
pub fn registration(
    configurations: &str,
    name: &str,
    target: &Target<'_>,
    namespaces: &[&str],
) -> String {
    let mut items = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(configurations) {
        let mut config: Value = serde::Deserialize::deserialize(doc).expect("configurations");
        if config.is_null() {
            continue;
        }
        config["metadata"]["name"] = json!(name);
        if let Some(metadata) = config["metadata"].as_object_mut() {
            // No cert-manager here: the CA goes in directly.
            metadata.remove("annotations");
        }
        for webhook in config["webhooks"].as_array_mut().expect("webhooks") {
            let path = webhook["clientConfig"]["service"]["path"]
                .as_str()
                .expect("a path")
                .to_owned();
            let mut client = json!({"url": format!("https://127.0.0.1:{}{path}", target.port)});
            if let Some(ca) = target.ca_pem {
                client["caBundle"] = json!(base64::engine::general_purpose::STANDARD.encode(ca));
            }
            webhook["clientConfig"] = client;
            let scoped = json!({
                "key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces,
            });
            match webhook
                .pointer_mut("/namespaceSelector/matchExpressions")
                .and_then(Value::as_array_mut)
            {
                Some(expressions) => expressions.push(scoped),
                None => webhook["namespaceSelector"] = json!({"matchExpressions": [scoped]}),
            }
        }
        items.push(config);
    }
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

/// Registers the configurations (a `List` from [`registration`]) by server-side apply.
pub fn register(plane: &'static ControlPlane, list: &str) {
    let list: Value = serde_json::from_str(list).expect("a List");
    on_the_api(plane, move |client| async move {
        let apply = PatchParams::apply("jobwarden-webhook-e2e").force();
        for item in list["items"].as_array().into_iter().flatten() {
            let name = item["metadata"]["name"].as_str().unwrap_or_default();
            let applied = match item["kind"].as_str() {
                Some("MutatingWebhookConfiguration") => {
                    Api::<MutatingWebhookConfiguration>::all(client.clone())
                        .patch(name, &apply, &Patch::Apply(item))
                        .await
                        .map(|_| ())
                }
                _ => Api::<ValidatingWebhookConfiguration>::all(client.clone())
                    .patch(name, &apply, &Patch::Apply(item))
                    .await
                    .map(|_| ()),
            };
            if let Err(e) = applied {
                panic!("{} {name} is registered: {e}", item["kind"]);
            }
        }
    });
}

pub fn unregister(plane: &'static ControlPlane, name: &str) {
    let name = name.to_owned();
    on_the_api(plane, move |client| async move {
        let delete = DeleteParams::default();
        Api::<MutatingWebhookConfiguration>::all(client.clone())
            .delete(&name, &delete)
            .await
            .expect("the MutatingWebhookConfiguration is deleted");
        Api::<ValidatingWebhookConfiguration>::all(client)
            .delete(&name, &delete)
            .await
            .expect("the ValidatingWebhookConfiguration is deleted");
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

/// Polls `done` every 100 ms until it holds, failing after [`TIMEOUT`] with `what`.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < TIMEOUT,
            "timed out waiting until {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
