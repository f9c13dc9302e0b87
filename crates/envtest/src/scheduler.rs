//! kube-scheduler beside a control plane, as kube-envtest's start.sh starts it (`SCHEDULER=1`):
//! a user of its own, no leader election, its secure port on a free loopback port, its log
//! with the others'. It binds the pods that name `default-scheduler` to the Node objects a
//! test lays out ([`crate::Nodes`]); nothing runs them but a test kubelet.

use crate::{ControlPlane, process};

impl ControlPlane {
    /// Starts kube-scheduler (once; later calls return the first result) and waits until it
    /// says it is ready (`/readyz`: its informers have synced, so a pod created now is seen).
    pub fn start_scheduler(&self) -> Result<(), String> {
        let Some(owned) = &self.owned else {
            return Ok(());
        };
        owned
            .scheduler
            .get_or_init(|| {
                let (bin, dir) = (owned.bin.clone(), owned.dir.clone());
                let kubeconfig = owned.pki.scheduler_kubeconfig.clone();
                let (pid, port, log) = process::on_keeper(move || {
                    let port = process::free_port()?;
                    let args = vec![
                        format!("--kubeconfig={}", kubeconfig.display()),
                        format!("--authentication-kubeconfig={}", kubeconfig.display()),
                        format!("--authorization-kubeconfig={}", kubeconfig.display()),
                        "--bind-address=127.0.0.1".to_owned(),
                        format!("--secure-port={port}"),
                        // Its self-signed serving certificate, beside the plane's, not in
                        // the working directory.
                        format!("--cert-dir={}", dir.join("scheduler-certs").display()),
                        "--leader-elect=false".to_owned(),
                        "--v=2".to_owned(),
                    ];
                    let log = dir.join("logs/kube-scheduler.log");
                    let pid = process::spawn(&bin.join("kube-scheduler"), &args, &log)?;
                    Ok::<_, String>((pid, port, log))
                })?;
                owned
                    .pids
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(pid);
                crate::wait_for_ok(port, "/readyz", pid).map_err(|e| {
                    format!(
                        "kube-scheduler: {e}; the end of {}:\n{}",
                        log.display(),
                        process::tail(&log, 40)
                    )
                })
            })
            .clone()
    }
}
