//! jobwarden as a cluster runs it: the namespace, ServiceAccount and RBAC objects that
//! `kubectl kustomize deploy/` renders (the real manifests, applied as rendered), a token for
//! that ServiceAccount from the TokenRequest API, and a kubeconfig holding only that token. A
//! test that starts jobwarden with it runs with exactly the rights the install grants; the
//! API server's audit log then names every call it refused ([`Installed::refusals`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};

use crate::{ControlPlane, bin_dir, kubectl_program};

/// The kinds of the rendered install that make up jobwarden's identity: who it is, what it may
/// do, and how kube-apiserver's API Priority and Fairness classifies its Lease.
const IDENTITY_KINDS: [&str; 7] = [
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "FlowSchema",
];

/// Tokens last the longest test binary's run; kube-apiserver caps them at its own maximum.
const TOKEN_SECONDS: i64 = 6 * 3600;

/// The installed ServiceAccount, its token, and the namespaced RBAC objects that can be
/// granted again in a test's own namespace.
pub struct Installed {
    pub namespace: String,
    pub service_account: String,
    token: String,
    /// Where this identity's kubeconfigs are written, and the cluster they name.
    kubeconfigs: TokenKubeconfigs,
    namespaced_rbac: Vec<Value>,
    audit_log: Option<PathBuf>,
}

/// Kubeconfigs holding a bearer token and no other credential, for the admin kubeconfig's
/// cluster (server and CA).
struct TokenKubeconfigs {
    cluster: Value,
    dir: PathBuf,
}

impl TokenKubeconfigs {
    fn new(plane: &ControlPlane) -> TokenKubeconfigs {
        let admin = Kubeconfig::read_from(plane.kubeconfig()).expect("the admin kubeconfig");
        let cluster = admin
            .clusters
            .first()
            .and_then(|c| serde_json::to_value(c).ok())
            .expect("the admin kubeconfig names a cluster");
        let dir = std::env::temp_dir().join(format!(
            "jobwarden-envtest-{}-identities",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("a folder for the identities' kubeconfigs");
        crate::process::remove_at_exit(&dir);
        TokenKubeconfigs { cluster, dir }
    }

    /// `name`'s kubeconfig: `token`, `namespace` its context's.
    fn write(&self, name: &str, token: &str, namespace: &str) -> PathBuf {
        let config = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [self.cluster],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": name, "context": {
                "cluster": self.cluster["name"],
                "user": name,
                "namespace": namespace,
            }}],
            "current-context": name,
        });
        let path = self.dir.join(format!("{name}-{namespace}.kubeconfig"));
        std::fs::write(&path, config.to_string()).expect("the kubeconfig is written");
        path
    }
}

/// One call kube-apiserver refused an identity, from its audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `create pods in namespace e2e-1`, `get path /metrics`.
    pub call: String,
    /// kube-apiserver's message.
    pub message: String,
}

impl ControlPlane {
    /// deploy/'s identity, applied as `kubectl kustomize deploy/` renders it (again at each
    /// call: applying is idempotent), with a fresh token.
    pub async fn installed_identity(&self) -> Installed {
        self.install_identity("", None, |_| {}).await
    }

    /// deploy/dispatch/'s identity: deploy/'s and the Role that lets the dispatcher read its
    /// workers' kubeconfig Secrets, naming exactly `secrets` (as an operator edits
    /// deploy/dispatch/secrets.yaml to name the policy's).
    pub async fn installed_dispatching_identity(&self, secrets: &[String]) -> Installed {
        self.install_dispatching_identity(None, secrets).await
    }

    /// [`installed_dispatching_identity`](Self::installed_dispatching_identity) under other
    /// names, as [`installed_identity_variant`](Self::installed_identity_variant) makes them.
    pub async fn installed_dispatching_identity_variant(
        &self,
        variant: &str,
        secrets: &[String],
    ) -> Installed {
        self.install_dispatching_identity(Some(variant), secrets)
            .await
    }

    async fn install_dispatching_identity(
        &self,
        variant: Option<&str>,
        secrets: &[String],
    ) -> Installed {
        let names = json!(secrets);
        self.install_identity("dispatch", variant, move |objects| {
            let mut named = 0;
            for rule in objects
                .iter_mut()
                .filter(|o| o["kind"] == "Role")
                .flat_map(|o| o["rules"].as_array_mut().into_iter().flatten())
                .filter(|r| {
                    r["resources"]
                        .as_array()
                        .is_some_and(|r| r.iter().any(|x| x == "secrets"))
                })
            {
                rule["resourceNames"] = names.clone();
                named += 1;
            }
            assert_eq!(named, 1, "deploy/dispatch/ grants Secrets in one rule");
        })
        .await
    }

    /// A copy of deploy/'s identity under other names (`variant` before each name: the
    /// ServiceAccount, its roles and bindings), changed by `edit` before it is applied: a
    /// negative control, say, with one verb taken out of a role.
    pub async fn installed_identity_variant(
        &self,
        variant: &str,
        edit: impl FnOnce(&mut Vec<Value>),
    ) -> Installed {
        self.install_identity("", Some(variant), edit).await
    }

    /// The identity `kubectl kustomize deploy/<dir>` renders.
    async fn install_identity(
        &self,
        dir: &str,
        variant: Option<&str>,
        edit: impl FnOnce(&mut Vec<Value>),
    ) -> Installed {
        let mut objects: Vec<Value> = render(dir)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .filter(|o| IDENTITY_KINDS.contains(&o["kind"].as_str().unwrap_or_default()))
            .collect();
        let account = objects
            .iter()
            .find(|o| o["kind"] == "ServiceAccount")
            .unwrap_or_else(|| panic!("kubectl kustomize deploy/ renders no ServiceAccount"));
        let namespace = text(account, "/metadata/namespace");
        let mut service_account = text(account, "/metadata/name");
        if let Some(variant) = variant {
            rename(&mut objects, variant, &service_account);
            service_account = format!("{variant}-{service_account}");
        }
        edit(&mut objects);
        self.apply(&objects);

        let token = self.token_for(&namespace, &service_account).await;
        Installed {
            namespaced_rbac: objects
                .into_iter()
                .filter(|o| matches!(o["kind"].as_str(), Some("Role" | "RoleBinding")))
                .collect(),
            namespace,
            service_account,
            token,
            kubeconfigs: TokenKubeconfigs::new(self),
            audit_log: self.owned.as_ref().map(|o| o.dir.join(crate::AUDIT_LOG)),
        }
    }

    /// A token for the ServiceAccount `namespace/name` (created when absent) from the
    /// TokenRequest API, as a pod's projected token is made.
    pub async fn token_for(&self, namespace: &str, name: &str) -> String {
        self.try_token_for(namespace, name, TOKEN_SECONDS)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`token_for`](Self::token_for), valid for `seconds`, or why there is none.
    pub(crate) async fn try_token_for(
        &self,
        namespace: &str,
        name: &str,
        seconds: i64,
    ) -> Result<String, String> {
        let accounts = Api::<ServiceAccount>::namespaced(self.client().await, namespace);
        let account = json!({"metadata": {"name": name}});
        crate::create_if_absent(&accounts, account)
            .await
            .map_err(|e| format!("the ServiceAccount {namespace}/{name} is created: {e}"))?;
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: None,
                expiration_seconds: Some(seconds),
                bound_object_ref: None,
            }),
            ..TokenRequest::default()
        };
        accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .map_err(|e| format!("a token for {namespace}/{name}: {e}"))?
            .status
            .and_then(|s| s.token)
            .ok_or_else(|| format!("the TokenRequest for {namespace}/{name} has no token"))
    }

    /// A token for the ServiceAccount `namespace/name` (a Prometheus's, say), bound to the
    /// install's `jobwarden-metrics-reader` role, as docs/operations.md tells an operator to
    /// bind it.
    pub async fn metrics_reader_token(&self, namespace: &str, name: &str) -> String {
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": format!("{namespace}-{name}-metrics-reader")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "jobwarden-metrics-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        });
        let token = self.token_for(namespace, name).await;
        self.apply(&[binding]);
        token
    }

    /// A kubeconfig for a person: a ServiceAccount `namespace/name` (created when absent)
    /// bound in `namespace` to the cluster's built-in ClusterRole `role` (`view`, say), its
    /// token and nothing else.
    pub async fn person_kubeconfig(&self, namespace: &str, name: &str, role: &str) -> PathBuf {
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": format!("{name}-{role}"), "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        });
        let token = self.token_for(namespace, name).await;
        self.apply(&[binding]);
        TokenKubeconfigs::new(self).write(name, &token, namespace)
    }

    /// `kubectl apply --server-side` of `objects`, as the admin.
    pub(crate) fn apply(&self, objects: &[Value]) {
        if let Err(e) = self.try_apply(objects) {
            panic!("kubectl apply of deploy/'s identity: {e}");
        }
    }

    /// [`apply`](Self::apply), or why kubectl did not.
    pub(crate) fn try_apply(&self, objects: &[Value]) -> Result<(), String> {
        let stream: String = objects.iter().map(|o| format!("{o}\n")).collect();
        let mut child = self
            .kubectl()
            .args(["apply", "--server-side", "--force-conflicts"])
            .args(["--field-manager=jobwarden-envtest", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting kubectl: {e}"))?;
        if let Some(mut stdin) = child.stdin.take() {
            use std::io::Write as _;
            stdin
                .write_all(stream.as_bytes())
                .map_err(|e| format!("writing to kubectl: {e}"))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| format!("kubectl: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// The calls kube-apiserver's authorization refused `user` (403) so far, from its audit
    /// log, which keeps every ServiceAccount's requests; `None` for a cluster named by
    /// `JOBWARDEN_E2E_KUBECONFIG`. Writes into a namespace being deleted are left out (see
    /// [`Installed::refusals`]).
    pub fn refusals_of(&self, user: &str) -> Option<Vec<Refusal>> {
        let log = self.owned.as_ref()?.dir.join(crate::AUDIT_LOG);
        Some(refusals_in(&log, user))
    }
}

impl Installed {
    /// `system:serviceaccount:NAMESPACE:NAME`, as kube-apiserver names the identity.
    pub fn user(&self) -> String {
        format!(
            "system:serviceaccount:{}:{}",
            self.namespace, self.service_account
        )
    }

    /// A kubeconfig with this identity's token and no other credential, `namespace` its
    /// context's (where `serve` keeps its Lease).
    pub fn kubeconfig(&self, namespace: &str) -> PathBuf {
        self.kubeconfigs
            .write(&self.service_account, &self.token, namespace)
    }

    /// A client as this identity, `namespace` its default.
    pub async fn client(&self, namespace: &str) -> Client {
        Client::try_from(self.config(namespace).await).expect("a client")
    }

    /// The configuration of [`Installed::client`], for a caller that builds its own clients.
    pub async fn config(&self, namespace: &str) -> Config {
        let file = Kubeconfig::read_from(self.kubeconfig(namespace)).expect("the kubeconfig");
        Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
            .await
            .expect("the identity's kubeconfig is usable")
    }

    /// The install's Roles and RoleBindings (the Lease's) applied in `namespace` too, so a
    /// test's controller keeps its Lease in the test's own namespace with the same rights.
    pub fn grant_in(&self, plane: &ControlPlane, namespace: &str) {
        let objects: Vec<Value> = self
            .namespaced_rbac
            .iter()
            .cloned()
            .map(|mut o| {
                o["metadata"]["namespace"] = json!(namespace);
                o
            })
            .collect();
        plane.apply(&objects);
    }

    /// The calls kube-apiserver's authorization refused this identity (403) so far; `None` for
    /// a cluster named by `JOBWARDEN_E2E_KUBECONFIG`, whose audit log the tests cannot read.
    /// A write into a namespace being deleted is refused with 403 too, by the
    /// NamespaceLifecycle admission plugin rather than RBAC (a test's teardown deletes its
    /// namespace while the controller still says on its Lease that it stopped leading): not
    /// a grant missing, so not counted.
    pub fn refusals(&self) -> Option<Vec<Refusal>> {
        let log = self.audit_log.as_ref()?;
        Some(refusals_in(log, &self.user()))
    }

    /// Fails, naming each call and the grant it needs, if any call was refused.
    pub fn assert_nothing_refused(&self) {
        if let Some(refused) = self.refusals().filter(|r| !r.is_empty()) {
            panic!("{}", self.refusal_report(&refused));
        }
    }

    /// What a refusal says: who, which calls, and where the grant belongs.
    pub fn refusal_report(&self, refused: &[Refusal]) -> String {
        let calls: Vec<String> = refused
            .iter()
            .map(|r| format!("  {}: {}", r.call, r.message))
            .collect();
        format!(
            "kube-apiserver refused {} {} call(s) that deploy/'s RBAC (deploy/base/rbac.yaml) does \
             not grant; each needs its verb on its resource in a role bound to the ServiceAccount:\n{}",
            self.user(),
            refused.len(),
            calls.join("\n")
        )
    }
}

/// The calls refused `user` (403) in the audit log `log`, but for writes into a namespace
/// being deleted.
fn refusals_in(log: &Path, user: &str) -> Vec<Refusal> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["user"]["username"] == user)
        .filter(|e| e["responseStatus"]["code"] == 403)
        .filter(|e| {
            // A restarted API server's first seconds: its authorizer's caches, not the grants.
            let at = e["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
                .map(std::time::SystemTime::from);
            !at.is_some_and(|at| crate::apiserver::while_restarting(log, at))
        })
        .filter(|e| {
            !e["responseStatus"]["message"]
                .as_str()
                .is_some_and(|m| m.ends_with("because it is being terminated"))
        })
        .map(|e| Refusal {
            call: call(&e),
            message: e["responseStatus"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        })
        .collect()
}

/// `create pods in namespace x`, `patch jobs/status (batch) in namespace x`, `create
/// tokenreviews (authentication.k8s.io)`, `get path /metrics`.
fn call(event: &Value) -> String {
    let verb = event["verb"].as_str().unwrap_or("?");
    let object = &event["objectRef"];
    let Some(resource) = object["resource"].as_str() else {
        let path = event["requestURI"].as_str().unwrap_or("?");
        return format!("{verb} path {path}");
    };
    let mut call = format!("{verb} {resource}");
    if let Some(sub) = object["subresource"].as_str() {
        call.push('/');
        call.push_str(sub);
    }
    if let Some(group) = object["apiGroup"].as_str().filter(|g| !g.is_empty()) {
        call.push_str(&format!(" ({group})"));
    }
    if let Some(name) = object["name"].as_str() {
        call.push_str(&format!(" named {name}"));
    }
    match object["namespace"].as_str() {
        Some(ns) => call.push_str(&format!(" in namespace {ns}")),
        None => call.push_str(" cluster-wide"),
    }
    call
}

/// Puts `variant-` before the ServiceAccount's name and every role's, binding's and
/// FlowSchema's, in the objects and in the references between them.
fn rename(objects: &mut [Value], variant: &str, service_account: &str) {
    let renamed = |name: &str| format!("{variant}-{name}");
    for o in objects.iter_mut() {
        let kind = o["kind"].as_str().unwrap_or_default().to_owned();
        if kind == "Namespace" {
            continue;
        }
        let name = text(o, "/metadata/name");
        o["metadata"]["name"] = json!(renamed(&name));
        if kind.ends_with("Binding") {
            let role = text(o, "/roleRef/name");
            o["roleRef"]["name"] = json!(renamed(&role));
            if let Some(subjects) = o["subjects"].as_array_mut() {
                for s in subjects.iter_mut().filter(|s| s["name"] == service_account) {
                    s["name"] = json!(renamed(service_account));
                }
            }
        }
        if kind == "FlowSchema" {
            for rule in o["spec"]["rules"].as_array_mut().into_iter().flatten() {
                for s in rule["subjects"].as_array_mut().into_iter().flatten() {
                    if s["serviceAccount"]["name"] == service_account {
                        s["serviceAccount"]["name"] = json!(renamed(service_account));
                    }
                }
            }
        }
    }
}

fn text(o: &Value, pointer: &str) -> String {
    o.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{pointer} of {o}"))
        .to_owned()
}

/// The repository's deploy/ folder.
pub(crate) fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// `kubectl kustomize deploy/<dir>`, as objects.
pub(crate) fn render(dir: &str) -> Result<Vec<Value>, String> {
    let kubectl = kubectl_program();
    let path = deploy_dir().join(dir);
    let shown = Path::new("deploy").join(dir);
    let out = Command::new(&kubectl)
        .arg("kustomize")
        .arg(&path)
        .output()
        .map_err(|e| {
            format!(
                "{} kustomize {} (kubectl v1.36 in {} or on the PATH): {e}",
                kubectl.display(),
                shown.display(),
                bin_dir().display()
            )
        })?;
    if !out.status.success() {
        return Err(format!(
            "kubectl kustomize {}: {}",
            shown.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(serde_yaml_ng::Deserializer::from_str(&text)
        .filter_map(|doc| serde::Deserialize::deserialize(doc).ok())
        .filter(|o: &Value| !o.is_null())
        .collect())
}
