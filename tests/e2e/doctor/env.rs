//! What the doctor tests share: deploy/ installed on the envtest control plane under a name of
//! the test's own (its namespace, its webhook configurations' and cluster roles' name), the test
//! playing what the control plane lacks (cert-manager's Secret, the Deployment controller's
//! status, the kubelet's running pod), `serve` as the built binary under the install's
//! ServiceAccount, and `jobwarden doctor` run as a user would.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use jobwarden_envtest::{ControlPlane, SharedPlane};
use serde_json::{Value, json};

use crate::support::served::Served;

/// This suite's own plane: it installs deploy/ (webhooks that answer nobody among them) as a cluster's admin would.
static PLANE: SharedPlane = SharedPlane::new();

/// The test binary's control plane, with kube-controller-manager (it gives namespaces their
/// `default` ServiceAccount and aggregates the built-in `view` role); `None` after a line
/// saying why when there is none, or when it is elsewhere (a cluster elsewhere cannot call
/// 127.0.0.1).
pub fn plane() -> Option<&'static ControlPlane> {
    if std::env::var_os("JOBWARDEN_E2E_KUBECONFIG").is_some() {
        eprintln!(
            "skipped: the doctor e2e tests need the envtest control plane on this machine \
             (a cluster elsewhere cannot call 127.0.0.1)"
        );
        return None;
    }
    PLANE.with_upstream()
}

/// kubectl as the admin; stdin when given. Fails the test when kubectl does.
pub fn kubectl(plane: &ControlPlane, args: &[&str], stdin: Option<&str>) -> String {
    let out = kubectl_output(plane, args, stdin);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn kubectl_output(plane: &ControlPlane, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = plane
        .kubectl()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    if let (Some(text), Some(mut input)) = (stdin, child.stdin.take()) {
        use std::io::Write as _;
        input.write_all(text.as_bytes()).expect("kubectl reads");
    }
    child.wait_with_output().expect("kubectl ends")
}

/// `kubectl kustomize DIR` of the repository's `dir`, as objects.
pub fn render(plane: &ControlPlane, dir: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let text = kubectl(plane, &["kustomize", &path.display().to_string()], None);
    serde_yaml_ng::Deserializer::from_str(&text)
        .filter_map(|doc| serde::Deserialize::deserialize(doc).ok())
        .filter(|o: &Value| !o.is_null())
        .collect()
}

pub fn apply(plane: &ControlPlane, objects: &[Value]) {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string();
    kubectl(
        plane,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=doctor-e2e",
            "-f",
            "-",
        ],
        Some(&list),
    );
}

/// `jobwarden doctor ARGS -o json` with `kubeconfig`: the exit status and the checks.
pub fn doctor(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> (i32, Vec<Value>) {
    let out = doctor_output(kubeconfig, &[args, &["-o", "json"]].concat(), stdin);
    let text = String::from_utf8_lossy(&out.stdout);
    let checks: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let code = out.status.code().expect("doctor exits");
    eprintln!("doctor {args:?}: exit {code}\n{text}");
    (code, checks)
}

pub fn doctor_output(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_jobwarden"))
        .arg("doctor")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("JOBWARDEN_E2E_KUBECONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("jobwarden doctor runs");
    if let (Some(text), Some(mut input)) = (stdin, child.stdin.take()) {
        use std::io::Write as _;
        input.write_all(text.as_bytes()).expect("doctor reads");
    }
    let out = child.wait_with_output().expect("doctor ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "doctor panicked: {stderr}");
    out
}

/// The check named `name` (the first, where there are several).
pub fn check<'c>(checks: &'c [Value], name: &str) -> &'c Value {
    checks
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name:?} in {checks:#?}"))
}

/// The checks that failed, warned or could not be made, as `name: message` lines.
pub fn problems(checks: &[Value]) -> Vec<String> {
    checks
        .iter()
        .filter(|c| {
            ["error", "warning", "unknown"]
                .iter()
                .any(|s| c["status"] == *s)
        })
        .map(|c| format!("{}: {}", c["name"], c["message"]))
        .collect()
}

/// A kubeconfig for the ServiceAccount `namespace/name` (created when absent): a token from
/// the TokenRequest API and nothing else, `namespace` its context's.
pub fn service_account_kubeconfig(
    plane: &ControlPlane,
    dir: &Path,
    namespace: &str,
    name: &str,
) -> PathBuf {
    let _ = kubectl_output(
        plane,
        &["-n", namespace, "create", "serviceaccount", name],
        None,
    );
    let token = kubectl(
        plane,
        &["-n", namespace, "create", "token", name, "--duration=6h"],
        None,
    );
    let admin: Value = serde_json::from_str(&kubectl(
        plane,
        &["config", "view", "--raw", "--minify", "-o", "json"],
        None,
    ))
    .expect("the admin kubeconfig");
    let cluster = &admin["clusters"][0];
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": name, "user": {"token": token.trim()}}],
        "contexts": [{"name": name, "context": {
            "cluster": cluster["name"], "user": name, "namespace": namespace,
        }}],
        "current-context": name,
    });
    let path = dir.join(format!("{namespace}-{name}.kubeconfig"));
    std::fs::write(&path, config.to_string()).expect("the kubeconfig is written");
    path
}

/// A folder for one test's files, under the control plane's.
pub fn folder(plane: &ControlPlane, test: &str) -> PathBuf {
    let dir = plane
        .dir()
        .map_or_else(std::env::temp_dir, Path::to_path_buf)
        .join(format!("doctor-{test}"));
    std::fs::create_dir_all(&dir).expect("a folder");
    dir
}

/// deploy/ installed as `name`: in namespace `name`, its cluster-scoped objects and webhook
/// configurations named `name…` instead of `jobwarden…` (so tests do not share them), and the
/// webhook Deployment told so (`--webhook-configurations`, as the chart tells it its release
/// name). cert-manager's objects are left out (no cert-manager here): the test plays it, and
/// writes the Secret it would issue. The webhook configurations are deleted when it drops.
pub struct Install {
    pub plane: &'static ControlPlane,
    pub name: String,
    pub dir: PathBuf,
    /// The rendered objects as applied, for the test to change and apply again.
    pub objects: Vec<Value>,
}

/// The pod the test marks Running: the Lease's holder.
pub const REPLICA: &str = "jobwarden-7d9f8c6b5-doctr";

impl Install {
    pub fn new(plane: &'static ControlPlane, name: &str) -> Install {
        let objects = render(plane, "deploy")
            .into_iter()
            .filter(|o| o["apiVersion"] != "cert-manager.io/v1")
            .map(|mut o| {
                retarget(&mut o, name);
                o
            })
            .collect();
        Install {
            plane,
            name: name.to_owned(),
            dir: folder(plane, name),
            objects,
        }
    }

    /// Applies the install, and plays the Deployment controller: every replica ready.
    pub fn apply(&self) {
        apply(self.plane, &self.objects);
        let generation = kubectl(
            self.plane,
            &[
                "-n",
                &self.name,
                "get",
                "deployment",
                "jobwarden",
                "-o",
                "jsonpath={.metadata.generation}",
            ],
            None,
        );
        let status = json!({"status": {
            "observedGeneration": generation.trim().parse::<i64>().unwrap_or(1),
            "replicas": 2, "readyReplicas": 2, "updatedReplicas": 2, "availableReplicas": 2,
        }});
        kubectl(
            self.plane,
            &[
                "-n",
                &self.name,
                "patch",
                "deployment",
                "jobwarden",
                "--subresource=status",
                "--type=merge",
                "-p",
                &status.to_string(),
            ],
            None,
        );
    }

    /// The ClusterRole `role…` (renamed) without `verb` on `resource`.
    pub fn without_verb(&mut self, role: &str, resource: &str, verb: &str) {
        let role = role.replacen("jobwarden", &self.name, 1);
        let found = self
            .objects
            .iter_mut()
            .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == role.as_str())
            .unwrap_or_else(|| panic!("no ClusterRole {role}"));
        for rule in found["rules"].as_array_mut().into_iter().flatten() {
            if rule["resources"]
                .as_array()
                .is_some_and(|r| r.iter().any(|x| x == resource))
                && let Some(verbs) = rule["verbs"].as_array_mut()
            {
                verbs.retain(|v| v != verb);
            }
        }
    }

    /// `serve` as the install's ServiceAccount would run it, `HOSTNAME` the replica the test
    /// marks Running (its identity in the Lease), with `extra` arguments.
    pub fn serve(&self, extra: &[&str]) -> Served {
        let kubeconfig = service_account_kubeconfig(self.plane, &self.dir, &self.name, "jobwarden");
        let policy = self.dir.join("policy.yaml");
        std::fs::write(&policy, "{}\n").expect("the policy file");
        let policy = policy.display().to_string();
        let args: Vec<&str> = ["--config", &policy, "--webhook-configurations", &self.name]
            .into_iter()
            .chain(extra.iter().copied())
            .collect();
        Served::start_with(&self.dir, &kubeconfig, &args, &[("HOSTNAME", REPLICA)])
    }

    /// Plays cert-manager (the Secret it issues, with `served`'s certificate) and the kubelet
    /// (the replica holding the Lease, Running).
    pub fn play_cert_manager_and_kubelet(&self, served: &Served) {
        let key = std::fs::read_to_string(self.dir.join("tls.key")).expect("the serving key");
        let secret = json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "jobwarden-tls", "namespace": self.name},
            "stringData": {"tls.crt": served.cert_pem, "tls.key": key, "ca.crt": served.ca_pem},
        });
        let deployment = self
            .objects
            .iter()
            .find(|o| o["kind"] == "Deployment")
            .expect("deploy/ has a Deployment");
        let template = &deployment["spec"]["template"];
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": REPLICA, "namespace": self.name, "labels": template["metadata"]["labels"]},
            "spec": template["spec"],
        });
        apply(self.plane, &[secret, pod]);
        let running = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        kubectl(
            self.plane,
            &[
                "-n",
                &self.name,
                "patch",
                "pod",
                REPLICA,
                "--subresource=status",
                "--type=merge",
                "-p",
                &running.to_string(),
            ],
            None,
        );
    }

    /// The webhook configurations `jobwarden webhooks` prints for the default policy, named
    /// and scoped as this install's, pointed at `port` on 127.0.0.1 (no Service network here)
    /// and trusting `ca_pem`.
    pub fn register(&self, port: u16, ca_pem: &str) {
        let out = Command::new(env!("CARGO_BIN_EXE_jobwarden"))
            .args([
                "webhooks",
                "--no-cert-manager",
                "--name",
                &self.name,
                "--namespace",
                &self.name,
            ])
            .output()
            .expect("jobwarden webhooks runs");
        assert!(out.status.success());
        let bundle = {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.encode(ca_pem)
        };
        let configurations: Vec<Value> = serde_yaml_ng::Deserializer::from_str(
            &String::from_utf8_lossy(&out.stdout),
        )
        .filter_map(|doc| serde::Deserialize::deserialize(doc).ok())
        .filter(|o: &Value| !o.is_null())
        .map(|mut c: Value| {
            for w in c["webhooks"].as_array_mut().into_iter().flatten() {
                let path = w["clientConfig"]["service"]["path"].clone();
                w["clientConfig"] = json!({
                    "url": format!("https://127.0.0.1:{port}{}", path.as_str().unwrap_or("/")),
                    "caBundle": bundle,
                });
            }
            c
        })
        .collect();
        apply(self.plane, &configurations);
    }

    pub fn kubeconfig(&self) -> &Path {
        self.plane.kubeconfig()
    }
}

impl Drop for Install {
    /// Its webhook configurations go, so that no later test's Jobs are sent to them.
    fn drop(&mut self) {
        for kind in [
            "mutatingwebhookconfiguration",
            "validatingwebhookconfiguration",
        ] {
            let _ = kubectl_output(
                self.plane,
                &["delete", kind, &self.name, "--ignore-not-found"],
                None,
            );
        }
    }
}

/// deploy/'s object as installed under `name`: namespaced objects in namespace `name`,
/// cluster-scoped ones and every reference to them renamed, RBAC and FlowSchema subjects and
/// resource names following.
fn retarget(o: &mut Value, name: &str) {
    let rename = |s: &str| s.replacen("jobwarden", name, 1);
    let kind = o["kind"].as_str().unwrap_or_default().to_owned();
    match kind.as_str() {
        "Namespace" => o["metadata"]["name"] = json!(name),
        "ClusterRole" | "ClusterRoleBinding" | "FlowSchema" => {
            let renamed = rename(o["metadata"]["name"].as_str().unwrap_or_default());
            o["metadata"]["name"] = json!(renamed);
        }
        _ => o["metadata"]["namespace"] = json!(name),
    }
    if kind.ends_with("Binding") {
        if o["roleRef"]["kind"] == "ClusterRole" {
            let role = rename(o["roleRef"]["name"].as_str().unwrap_or_default());
            o["roleRef"]["name"] = json!(role);
        }
        for s in o["subjects"].as_array_mut().into_iter().flatten() {
            s["namespace"] = json!(name);
        }
    }
    if kind == "FlowSchema" {
        for rule in o["spec"]["rules"].as_array_mut().into_iter().flatten() {
            for s in rule["subjects"].as_array_mut().into_iter().flatten() {
                s["serviceAccount"]["namespace"] = json!(name);
            }
        }
    }
    if kind == "ClusterRole" {
        // Its own webhook configurations, by name.
        for rule in o["rules"].as_array_mut().into_iter().flatten() {
            for n in rule["resourceNames"].as_array_mut().into_iter().flatten() {
                if n == "jobwarden" {
                    *n = json!(name);
                }
            }
        }
    }
    if kind == "Deployment" {
        let args = &mut o["spec"]["template"]["spec"]["containers"][0]["args"];
        if let Some(args) = args.as_array_mut() {
            args.push(json!(format!("--webhook-configurations={name}")));
        }
    }
}
