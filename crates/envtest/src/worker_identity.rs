//! The dispatcher's identity on a worker, made as docs/dispatch.md tells a worker's admin to
//! make it: deploy/worker/ (or deploy/worker/namespaced/, its RoleBinding copied into each
//! chosen namespace) applied as `kubectl kustomize` renders it, an expiring token for its
//! ServiceAccount from the TokenRequest API, and the kubeconfig the dispatcher is given, with
//! the server, its CA and the token inline and no other credential.

use base64::Engine as _;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams};
use kube::config::Kubeconfig;
use serde_json::{Value, json};

use crate::ControlPlane;
use crate::identity::render;

/// Who the dispatcher is on a worker: deploy/worker/'s ServiceAccount, as kube-apiserver
/// names it (in its audit log, in a SelfSubjectReview).
pub const WORKER_DISPATCHER_USER: &str =
    "system:serviceaccount:jobwarden-worker:jobwarden-dispatcher";

/// An expiring token, as docs/dispatch.md advises where the cluster allows: long enough for
/// any test binary's run.
const WORKER_TOKEN_SECONDS: i64 = 2 * 3600;

impl ControlPlane {
    /// Installs the worker side on this plane and returns the kubeconfig (YAML text) the
    /// dispatcher would be given for it: deploy/worker/'s ClusterRoleBinding when `namespaces`
    /// is `None`; else deploy/worker/namespaced/'s RoleBinding in each of `namespaces` (which
    /// must exist) and nowhere else. The plane has one such identity: each call leaves exactly
    /// its own grants (the other variant's bindings are deleted, after the new ones are in
    /// place), so tests that want different grants use different planes.
    pub async fn dispatcher_kubeconfig(
        &self,
        namespaces: Option<&[&str]>,
    ) -> Result<String, String> {
        let dir = if namespaces.is_some() {
            "worker/namespaced"
        } else {
            "worker"
        };
        let mut objects = render(dir)?;
        let account = objects
            .iter()
            .find(|o| o["kind"] == "ServiceAccount")
            .ok_or_else(|| format!("deploy/{dir} renders no ServiceAccount"))?;
        let (account_namespace, account_name) = (
            text(account, "/metadata/namespace")?,
            text(account, "/metadata/name")?,
        );
        let user = format!("system:serviceaccount:{account_namespace}:{account_name}");
        if user != WORKER_DISPATCHER_USER {
            return Err(format!(
                "deploy/{dir}'s ServiceAccount is {user}; WORKER_DISPATCHER_USER says \
                 {WORKER_DISPATCHER_USER}"
            ));
        }
        let role = objects
            .iter()
            .find(|o| o["kind"] == "ClusterRole")
            .ok_or_else(|| format!("deploy/{dir} renders no ClusterRole"))
            .and_then(|o| text(o, "/metadata/name"))?;
        if let Some(namespaces) = namespaces {
            // rolebindings.yaml's one RoleBinding, copied into each namespace as its comment
            // tells the admin to.
            let binding = objects
                .iter()
                .find(|o| o["kind"] == "RoleBinding")
                .cloned()
                .ok_or_else(|| format!("deploy/{dir} renders no RoleBinding"))?;
            objects.retain(|o| o["kind"] != "RoleBinding");
            objects.extend(namespaces.iter().map(|ns| {
                let mut copy = binding.clone();
                copy["metadata"]["namespace"] = json!(ns);
                copy
            }));
        }
        self.try_apply(&objects)
            .map_err(|e| format!("kubectl apply of deploy/{dir}: {e}"))?;
        self.remove_other_worker_bindings(&role, namespaces).await?;
        let token = self
            .try_token_for(&account_namespace, &account_name, WORKER_TOKEN_SECONDS)
            .await?;
        self.token_kubeconfig(&account_name, &token)
    }

    /// Deletes the worker role's bindings that `namespaces` does not ask for: the
    /// ClusterRoleBinding when it names namespaces, RoleBindings in any other namespace.
    async fn remove_other_worker_bindings(
        &self,
        role: &str,
        namespaces: Option<&[&str]>,
    ) -> Result<(), String> {
        let client = self.client().await;
        let gone = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 404);
        if namespaces.is_some() {
            let bindings = Api::<ClusterRoleBinding>::all(client.clone());
            match bindings.delete(role, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if gone(&e) => {}
                Err(e) => return Err(format!("deleting ClusterRoleBinding {role}: {e}")),
            }
        }
        let listed = Api::<RoleBinding>::all(client.clone())
            .list(&ListParams::default().fields(&format!("metadata.name={role}")))
            .await
            .map_err(|e| format!("listing RoleBindings {role}: {e}"))?;
        for binding in listed.items {
            let Some(namespace) = binding.metadata.namespace else {
                continue;
            };
            if namespaces.is_some_and(|n| n.contains(&namespace.as_str())) {
                continue;
            }
            match Api::<RoleBinding>::namespaced(client.clone(), &namespace)
                .delete(role, &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(e) if gone(&e) => {}
                Err(e) => {
                    return Err(format!(
                        "deleting RoleBinding {role} in namespace {namespace}: {e}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// A kubeconfig for this plane's API server holding `token` and no other credential, the
    /// server's CA inline.
    fn token_kubeconfig(&self, user: &str, token: &str) -> Result<String, String> {
        let admin = Kubeconfig::read_from(self.kubeconfig())
            .map_err(|e| format!("reading {}: {e}", self.kubeconfig().display()))?;
        let cluster = admin
            .clusters
            .first()
            .and_then(|c| c.cluster.as_ref())
            .ok_or("the admin kubeconfig names no cluster")?;
        let server = cluster
            .server
            .clone()
            .ok_or("the admin kubeconfig's cluster has no server")?;
        let ca = match (
            &cluster.certificate_authority_data,
            &cluster.certificate_authority,
        ) {
            (Some(data), _) => data.clone(),
            (None, Some(file)) => {
                let pem = std::fs::read(file).map_err(|e| format!("reading {file}: {e}"))?;
                base64::engine::general_purpose::STANDARD.encode(pem)
            }
            (None, None) => return Err("the admin kubeconfig's cluster has no CA".to_owned()),
        };
        let config = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "worker", "cluster": {
                "server": server,
                "certificate-authority-data": ca,
            }}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "worker", "context": {"cluster": "worker", "user": user}}],
            "current-context": "worker",
        });
        serde_yaml_ng::to_string(&config).map_err(|e| format!("writing the kubeconfig: {e}"))
    }
}

fn text(o: &Value, pointer: &str) -> Result<String, String> {
    o.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("no {pointer} in {o}"))
}
