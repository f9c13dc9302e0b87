//! A namespace of a test's own on this test binary's envtest control plane, with the
//! ServiceAccount and RBAC `deploy/` installs granted in it (so `serve` keeps its Lease there)
//! and a scratch folder for its files: what every suite that runs `serve` as installed starts
//! from.

use std::path::PathBuf;

use jobwarden_envtest::{ControlPlane, Installed};
use kube::Client;

pub struct InstalledNamespace {
    pub plane: &'static ControlPlane,
    pub admin: Client,
    pub ns: String,
    pub identity: Installed,
    pub dir: PathBuf,
}

impl InstalledNamespace {
    /// `None`, after one line, without the control-plane binaries, or with a cluster named by
    /// `JOBWARDEN_E2E_KUBECONFIG`: `serve` runs on this machine, and the refusals are read from
    /// the envtest API server's audit log.
    pub async fn new(prefix: &str) -> Option<InstalledNamespace> {
        if std::env::var_os("JOBWARDEN_E2E_KUBECONFIG").is_some() {
            eprintln!(
                "skipped: a cluster elsewhere cannot reach a server on this machine's loopback"
            );
            return None;
        }
        let plane = ControlPlane::shared()?;
        let admin = plane.client().await;
        let ns = plane.create_namespace(&admin, prefix).await;
        let identity = plane.installed_identity().await;
        identity.grant_in(plane, &ns);
        let dir = std::env::temp_dir().join(format!("jobwarden-{ns}"));
        std::fs::create_dir_all(&dir).expect("the test's folder");
        Some(InstalledNamespace {
            plane,
            admin,
            ns,
            identity,
            dir,
        })
    }
}
