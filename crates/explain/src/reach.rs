//! How `explain` and `workers` reach a worker: with the kubeconfig the caller names for it
//! (theirs, used as kubectl uses it), else the worker's own from where the policy keeps it (a
//! Secret in jobwarden's namespace, read with the caller's credentials), judged first by the
//! dispatcher's own judge, and a client with a short timeout.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use jobwarden_admission::policy::{Dispatch, WorkerSource};
use jobwarden_dispatcher::worker::credential_source::SECRET_KEY;
use jobwarden_dispatcher::worker::credentials::{self, Refusal};
use k8s_openapi::api::core::v1::Secret;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};

/// The longest explain waits for one answer of a worker.
const WORKER_TIMEOUT: Duration = Duration::from_secs(10);

/// How explain reaches a dispatched Job's worker.
#[derive(Debug, Clone)]
pub struct WorkerAccess {
    /// The policy's `dispatch` section (the installed one, or a file's), or why it could not
    /// be read.
    pub policy: Result<Dispatch, String>,
    /// jobwarden's namespace, where the workers' kubeconfig Secrets are.
    pub namespace: String,
    /// The caller's own kubeconfig files by worker (`--worker-kubeconfig NAME=PATH`).
    pub given: BTreeMap<String, PathBuf>,
    /// Where a worker's `kubeconfigFile` comes from: the Secret and key jobwarden's
    /// Deployment mounts at that path, by path.
    pub mounted: BTreeMap<String, (String, String)>,
}

/// How a worker is reached: a client for it, or why there is none.
pub enum Reach {
    /// The worker is this cluster (`local: true`): the caller's own client reads it.
    Local,
    /// No kubeconfig reaches the worker: why.
    NoKubeconfig(String),
    /// The kubeconfig found is refused by the dispatcher's judge, and was not used.
    Refused { via: String, refusal: Refusal },
    /// No client can be made from the kubeconfig: why.
    Unreachable { via: String, reason: String },
    /// A client for the worker, and which kubeconfig it was made from.
    Client { via: String, client: Client },
}

/// A client for `worker`: with the kubeconfig the caller gives for it, else the worker's own
/// where the policy keeps it, judged first by the dispatcher's judge. `explain` and `workers`
/// reach a worker this one way.
pub async fn reach(client: &Client, worker: &str, access: &WorkerAccess) -> Reach {
    let spec = access.policy.as_ref().ok().and_then(|p| p.worker(worker));
    if spec.is_some_and(|s| s.local) {
        return Reach::Local;
    }
    let (via, config) = if let Some(path) = access.given.get(worker) {
        let via = format!("--worker-kubeconfig {worker}={}", path.display());
        // The caller's own file, for the caller's own use: read as kubectl reads it.
        let config = match Kubeconfig::read_from(path) {
            Ok(config) => config,
            Err(e) => {
                return Reach::NoKubeconfig(format!(
                    "cannot read {}: {}",
                    path.display(),
                    with_causes(&e)
                ));
            }
        };
        (via, config)
    } else {
        let (via, text) = match worker_kubeconfig(client, worker, access).await {
            Ok(found) => found,
            Err(why) => return Reach::NoKubeconfig(why),
        };
        match credentials::check(&text) {
            Ok(config) => (via, config),
            Err(refusal) => return Reach::Refused { via, refusal },
        }
    };
    match worker_client(config).await {
        Ok(client) => Reach::Client { via, client },
        Err(reason) => Reach::Unreachable { via, reason },
    }
}

/// The worker's kubeconfig where the policy keeps it, read with the caller's credentials:
/// where from, and its text.
async fn worker_kubeconfig(
    client: &Client,
    worker: &str,
    access: &WorkerAccess,
) -> Result<(String, String), String> {
    let policy = access.policy.as_ref().map_err(|e| {
        format!("the policy that names worker {worker}'s kubeconfig could not be read: {e}")
    })?;
    let spec = policy
        .worker(worker)
        .ok_or_else(|| format!("the policy names no worker {worker}"))?;
    let ns = &access.namespace;
    let (name, key, via) = match spec.source() {
        Some(WorkerSource::Secret(name)) => (
            name.to_owned(),
            SECRET_KEY.to_owned(),
            format!("Secret {ns}/{name}"),
        ),
        Some(WorkerSource::File(path)) => match access.mounted.get(path) {
            Some((name, key)) => (
                name.clone(),
                key.clone(),
                format!("Secret {ns}/{name} (key {key}, mounted at {path})"),
            ),
            None => {
                return Err(format!(
                    "worker {worker}'s kubeconfig is the file {path} in jobwarden's container, mounted from no Secret explain could find"
                ));
            }
        },
        Some(WorkerSource::Local) => return Err(format!("worker {worker} is this cluster")),
        None => {
            return Err(format!(
                "the policy names no single kubeconfig for worker {worker}"
            ));
        }
    };
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get_opt(&name)
        .await
        .map_err(|e| format!("cannot read {via}: {}", with_causes(&e)))?
        .ok_or_else(|| format!("{via} does not exist"))?;
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(&key))
        .ok_or_else(|| format!("{via} has no key {key:?}"))?;
    let text = String::from_utf8(bytes.0.clone())
        .map_err(|_| format!("{via}: its key {key:?} is not UTF-8 text"))?;
    Ok((via, text))
}

/// A client for the worker, with a short timeout: a worker that does not answer is said, not
/// waited for.
async fn worker_client(config: Kubeconfig) -> Result<Client, String> {
    let mut config = kube::Config::from_custom_kubeconfig(config, &KubeConfigOptions::default())
        .await
        .map_err(|e| {
            format!(
                "no client can be made from the kubeconfig: {}",
                with_causes(&e)
            )
        })?;
    config.connect_timeout = Some(WORKER_TIMEOUT);
    config.read_timeout = Some(WORKER_TIMEOUT);
    Client::try_from(config).map_err(|e| {
        format!(
            "no client can be made from the kubeconfig: {}",
            with_causes(&e)
        )
    })
}

/// A worker's error, said plainly: no answer, credentials refused, or its refusal.
pub(crate) fn worker_error(worker: &str, e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if s.code == 401 => format!(
            "worker {worker} refuses the credentials as unauthorized (401): the token expired, or is not one of that cluster's"
        ),
        kube::Error::Api(s) => format!("worker {worker} refused the read: {}", s.message),
        other => format!("worker {worker} does not answer: {}", with_causes(other)),
    }
}

/// An error and what caused it (as `audit`'s connect says them).
pub(crate) fn with_causes(e: &dyn std::error::Error) -> String {
    jobwarden_audit::connect::with_causes(e)
}
