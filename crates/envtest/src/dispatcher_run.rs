//! jobwarden dispatching over a fleet, as deploy/ runs it: `serve --no-webhook` under the
//! installed identity ([`ControlPlane::installed_identity`]), configured only by a policy file
//! naming the workers, whose kubeconfigs [`Fleet::install_workers`] put in Secrets; one or
//! more replicas, one leading. For the scale test and benchmark, which start it on a fleet of
//! their own.

use std::path::{Path, PathBuf};

use std::time::{Duration, Instant};

use crate::measure::Exposition;
use crate::{Fleet, Installed, OwnedProcess, worker_entry};

/// How long the leader may take to lead and reach its workers on a busy two-core machine.
const READY_WITHIN: Duration = Duration::from_secs(180);

/// The replicas, and what they run under.
pub struct DispatcherRun {
    pub identity: Installed,
    pub replicas: Vec<OwnedProcess>,
    /// Each replica's `/metrics` port (plain HTTP), in the order of `replicas`.
    pub metrics_ports: Vec<u16>,
    workers: usize,
}

impl Fleet {
    /// Installs the dispatcher (jobwarden's identity, the worker side of each worker, named
    /// `names` in the fleet's order, and their Secrets), writes its policy and starts
    /// `replicas` replicas of `binary` with `flags` added, their logs beside the management
    /// plane's; returns once one leads with every worker answering it.
    pub async fn run_dispatcher(
        &self,
        binary: &Path,
        names: &[&str],
        replicas: usize,
        flags: &[&str],
    ) -> Result<DispatcherRun, String> {
        let dir = self
            .management
            .dir()
            .ok_or("the management plane is not this binary's")?
            .join("dispatcher");
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let secrets: Vec<String> = names.iter().map(|n| crate::worker_secret(n)).collect();
        let identity = self
            .management
            .installed_dispatching_identity(&secrets)
            .await;
        self.install_workers(&identity.namespace, names).await?;
        let policy = dir.join("policy.yaml");
        let entries: String = names.iter().map(|n| worker_entry(n)).collect();
        std::fs::write(&policy, format!("dispatch:\n  workers:\n{entries}"))
            .map_err(|e| format!("writing {}: {e}", policy.display()))?;
        let kubeconfig: PathBuf = identity.kubeconfig(&identity.namespace);
        let mut run = DispatcherRun {
            identity,
            replicas: Vec::new(),
            metrics_ports: Vec::new(),
            workers: names.len(),
        };
        for i in 0..replicas {
            let port = crate::free_port()?;
            let args: Vec<String> = [
                "serve",
                "--no-webhook",
                "--audit-interval-seconds=0",
                // The scrapes' TokenReviews would be requests that are not the dispatcher's.
                "--metrics-secure=false",
            ]
            .iter()
            .chain(flags)
            .map(|a| (*a).to_owned())
            .chain([
                format!("--config={}", policy.display()),
                format!("--metrics-listen=127.0.0.1:{port}"),
            ])
            .collect();
            let envs = [
                ("KUBECONFIG", kubeconfig.display().to_string()),
                ("HOSTNAME", format!("dispatcher-{i}")),
                ("RUST_LOG", "info".to_owned()),
            ]
            .map(|(k, v)| (k.to_owned(), v));
            let log = dir.join(format!("dispatcher-{i}.log"));
            run.replicas
                .push(OwnedProcess::start(binary, &args, &envs, &log)?);
            run.metrics_ports.push(port);
        }
        run.wait_ready().await?;
        Ok(run)
    }
}

impl DispatcherRun {
    /// Each replica's `/metrics`, `None` for one that does not answer.
    pub fn scrapes(&self) -> Vec<Option<Exposition>> {
        self.metrics_ports
            .iter()
            .map(|p| Exposition::scrape(*p))
            .collect()
    }

    /// The replica that leads and its `/metrics`, if one does.
    pub fn leader(&self) -> Option<(usize, Exposition)> {
        self.scrapes().into_iter().enumerate().find_map(|(i, e)| {
            e.filter(|e| e.sum("jobwarden_controller_leader") == 1.0)
                .map(|e| (i, e))
        })
    }

    /// Waits until a replica leads and every worker answers it with its copies listed;
    /// returns which replica leads.
    async fn wait_ready(&self) -> Result<usize, String> {
        let started = Instant::now();
        loop {
            let ready = self.leader().filter(|(_, e)| {
                e.series("jobwarden_dispatch_workers", "state=\"answering\"")
                    == Some(self.workers as f64)
            });
            if let Some((i, _)) = ready {
                return Ok(i);
            }
            if started.elapsed() > READY_WITHIN {
                let logs: Vec<String> = self
                    .replicas
                    .iter()
                    .map(|p| format!("== {}\n{}", p.log().display(), p.tail(30)))
                    .collect();
                return Err(format!(
                    "no replica led with its {} workers answering within {READY_WITHIN:?}:\n{}",
                    self.workers,
                    logs.join("\n")
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// The end of each replica's log, for a failure's message.
    pub fn logs(&self) -> String {
        self.replicas
            .iter()
            .map(|p| format!("== {}\n{}", p.log().display(), p.tail(40)))
            .collect()
    }
}
