//! The dispatcher's side of a fleet, as docs/dispatch.md has a user install it: on each worker
//! the worker side (deploy/worker/, [`ControlPlane::dispatcher_kubeconfig`]), and on the
//! management cluster each worker's kubeconfig in a Secret of jobwarden's namespace, which
//! the policy names (`dispatch.workers[].kubeconfigSecret`).

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::Fleet;

/// The Secret holding worker `name`'s kubeconfig.
pub fn worker_secret(name: &str) -> String {
    format!("jobwarden-worker-{name}")
}

/// A Secret `name` in `namespace` holding `kubeconfig` under the key the dispatcher reads,
/// made afresh (one of the name is replaced).
pub async fn put_kubeconfig_secret(
    client: &Client,
    namespace: &str,
    name: &str,
    kubeconfig: &str,
) -> Result<(), String> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name},
        "stringData": {"kubeconfig": kubeconfig},
    }))
    .map_err(|e| e.to_string())?;
    let _ = secrets.delete(name, &Default::default()).await;
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .map(drop)
        .map_err(|e| format!("the Secret {name} is created: {e}"))
}

impl Fleet {
    /// Installs the worker side on each worker, named `names` in the fleet's order, and puts
    /// the kubeconfig it gives in [`worker_secret`] in `namespace` on the management cluster.
    pub async fn install_workers(&self, namespace: &str, names: &[&str]) -> Result<(), String> {
        let management = self.management.client().await;
        for (name, worker) in names.iter().zip(&self.workers) {
            let kubeconfig = worker
                .dispatcher_kubeconfig(None)
                .await
                .map_err(|e| format!("the worker side is installed on {name}: {e}"))?;
            put_kubeconfig_secret(&management, namespace, &worker_secret(name), &kubeconfig)
                .await?;
        }
        Ok(())
    }
}
