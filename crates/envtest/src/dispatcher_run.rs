//! jobwarden dispatching over a fleet, as deploy/ runs it: `serve --no-webhook` under the
//! installed identity ([`ControlPlane::installed_identity`](crate::ControlPlane)), configured
//! only by a policy file naming the workers, whose kubeconfigs [`Fleet::install_workers`] put
//! in Secrets; one or more replicas, one leading. The one place that installs it and builds its
//! command line (issue 47): the scale runs start it whole ([`Fleet::run_dispatcher`]), the
//! dispatch e2e suite installs it ([`Fleet::install_dispatcher`]) and starts, kills and starts
//! again each replica itself.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::measure::Exposition;
use crate::{DispatcherSettings, Fleet, Installed, OwnedProcess};

/// How long the leader may take to lead and reach its workers on a busy two-core machine.
const READY_WITHIN: Duration = Duration::from_secs(180);

/// The dispatcher installed on a fleet, its policy written and its command line made; no
/// replica runs until [`start_replica`](Self::start_replica).
pub struct Dispatcher {
    pub identity: Installed,
    /// Its folder, beside the management plane's: `policy.yaml`, each replica's logs.
    pub dir: PathBuf,
    /// Each replica's `/metrics` port (plain HTTP), kept across its restarts.
    pub metrics_ports: Vec<u16>,
    binary: PathBuf,
    args: Vec<String>,
    envs: Vec<(String, String)>,
    /// How many workers answer a ready leader: the fleet's that it was given.
    workers: usize,
    starts: AtomicUsize,
}

/// The replicas, and what they run under.
pub struct DispatcherRun {
    pub dispatcher: Dispatcher,
    pub replicas: Vec<OwnedProcess>,
}

impl Fleet {
    /// Installs the dispatcher: jobwarden's identity, the worker side of each of
    /// `settings.workers` (named in the fleet's order) and their Secrets, and its policy
    /// ([`DispatcherSettings::policy_yaml`]); `binary` is jobwarden's.
    pub async fn install_dispatcher(
        &self,
        binary: &Path,
        settings: &DispatcherSettings,
    ) -> Result<Dispatcher, String> {
        if settings.workers.len() > self.workers.len() {
            return Err(format!(
                "{} workers named, the fleet has {}",
                settings.workers.len(),
                self.workers.len()
            ));
        }
        let dir = self
            .management
            .dir()
            .ok_or("the management plane is not this binary's")?
            .join("dispatcher");
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        // As deploy/dispatch/ installs it, its Role naming the Secrets the policy names.
        let identity = self
            .management
            .installed_dispatching_identity(&settings.secrets())
            .await;
        let names: Vec<&str> = settings.workers.iter().map(String::as_str).collect();
        self.install_workers(&identity.namespace, &names).await?;
        if settings.roomy_nodes {
            let planes = std::iter::once(&self.management).chain(&self.workers[..names.len()]);
            for plane in planes {
                plane
                    .nodes()
                    .await
                    .ensure(&crate::NodeLayout::roomy())
                    .await?;
            }
        }
        let policy = dir.join("policy.yaml");
        std::fs::write(&policy, settings.policy_yaml())
            .map_err(|e| format!("writing {}: {e}", policy.display()))?;
        let args = [
            "serve",
            "--no-webhook",
            "--audit-interval-seconds=0",
            // The scrapes' TokenReviews would be requests that are not the dispatcher's; and
            // without the webhook or secure metrics, serve reads no serving certificate.
            "--metrics-secure=false",
        ]
        .iter()
        .map(|a| (*a).to_owned())
        .chain(settings.flags.iter().cloned())
        .chain([format!("--config={}", policy.display())])
        .collect();
        let envs = vec![
            (
                "KUBECONFIG".to_owned(),
                identity
                    .kubeconfig(&identity.namespace)
                    .display()
                    .to_string(),
            ),
            ("RUST_LOG".to_owned(), "info".to_owned()),
        ];
        let metrics_ports = (0..settings.replicas)
            .map(|_| crate::free_port())
            .collect::<Result<_, _>>()?;
        Ok(Dispatcher {
            identity,
            dir,
            metrics_ports,
            binary: binary.to_owned(),
            args,
            envs,
            workers: settings.workers.len(),
            starts: AtomicUsize::new(0),
        })
    }

    /// Installs the dispatcher ([`install_dispatcher`](Self::install_dispatcher)) and starts
    /// its replicas, their logs beside the management plane's; returns once one leads with
    /// every worker answering it.
    pub async fn run_dispatcher(
        &self,
        binary: &Path,
        settings: &DispatcherSettings,
    ) -> Result<DispatcherRun, String> {
        let dispatcher = self.install_dispatcher(binary, settings).await?;
        let replicas = (0..dispatcher.metrics_ports.len())
            .map(|i| dispatcher.start_replica(i))
            .collect::<Result<_, _>>()?;
        let run = DispatcherRun {
            dispatcher,
            replicas,
        };
        match run.dispatcher.wait_ready().await {
            Ok(_) => Ok(run),
            Err(e) => Err(format!("{e}:\n{}", run.logs())),
        }
    }
}

impl Dispatcher {
    /// The policy file it runs with.
    pub fn policy(&self) -> PathBuf {
        self.dir.join("policy.yaml")
    }

    /// Replica `i`'s name (its `HOSTNAME`): the identity its Lease names when it leads.
    pub fn replica_name(i: usize) -> String {
        format!("dispatcher-{i}")
    }

    /// Starts replica `i` (again, after it was stopped), with a log of its own each time.
    pub fn start_replica(&self, i: usize) -> Result<OwnedProcess, String> {
        let port = self
            .metrics_ports
            .get(i)
            .ok_or_else(|| format!("no replica {i}: {} in all", self.metrics_ports.len()))?;
        let mut args = self.args.clone();
        args.push(format!("--metrics-listen=127.0.0.1:{port}"));
        let mut envs = self.envs.clone();
        envs.push(("HOSTNAME".to_owned(), Dispatcher::replica_name(i)));
        let start = self.starts.fetch_add(1, Ordering::Relaxed);
        let log = self
            .dir
            .join(format!("{}-{start}.log", Dispatcher::replica_name(i)));
        OwnedProcess::start(&self.binary, &args, &envs, &log)
    }

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

    /// Waits until a replica leads and every worker it was given answers it with its copies
    /// listed; returns which replica leads.
    pub async fn wait_ready(&self) -> Result<usize, String> {
        let started = Instant::now();
        loop {
            // `>=`: a local worker in `more_workers` answers too.
            let ready = self.leader().filter(|(_, e)| {
                e.series("jobwarden_dispatch_workers", "state=\"answering\"")
                    >= Some(self.workers as f64)
            });
            if let Some((i, _)) = ready {
                return Ok(i);
            }
            if started.elapsed() > READY_WITHIN {
                return Err(format!(
                    "no replica led with its {} workers answering within {READY_WITHIN:?}",
                    self.workers
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

impl DispatcherRun {
    /// Each replica's `/metrics`, `None` for one that does not answer.
    pub fn scrapes(&self) -> Vec<Option<Exposition>> {
        self.dispatcher.scrapes()
    }

    /// The replica that leads and its `/metrics`, if one does.
    pub fn leader(&self) -> Option<(usize, Exposition)> {
        self.dispatcher.leader()
    }

    /// The end of each replica's log, for a failure's message.
    pub fn logs(&self) -> String {
        self.replicas
            .iter()
            .map(|p| format!("== {}\n{}", p.log().display(), p.tail(40)))
            .collect()
    }
}
