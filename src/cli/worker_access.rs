//! How `explain` and `workers` reach the workers: the policy (`--config`, else the installed
//! controller's, as `doctor` reads it), the Secrets its `kubeconfigFile`s are mounted from, and
//! the caller's own kubeconfigs (`--worker-kubeconfig NAME=FILE`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use jobwarden_admission::policy::{Dispatch, WorkerSource};
use jobwarden_doctor::installed::deployment::{FileSource, file_source};
use jobwarden_explain::WorkerAccess;
use kube::Client;

use super::doctor::ServeLine;

/// `east=~/.kube/east` → (`east`, the path).
pub fn worker_kubeconfig(value: &str) -> Result<(String, PathBuf), String> {
    match value.split_once('=') {
        Some((name, path)) if !name.trim().is_empty() && !path.trim().is_empty() => {
            Ok((name.trim().to_owned(), PathBuf::from(path.trim())))
        }
        _ => Err("expected NAME=FILE: a worker's name and a kubeconfig file".to_owned()),
    }
}

/// The policy and where each worker's kubeconfig is, with the caller's `given` files.
pub async fn worker_access(
    client: &Client,
    jobwarden_namespace: &str,
    config: Option<&Path>,
    given: &[(String, PathBuf)],
) -> WorkerAccess {
    let namespace = jobwarden_namespace.to_owned();
    let (policy, pod_spec) = match config {
        Some(path) => match jobwarden_server::load_policy_file(path) {
            Ok(policy) => (Ok(policy.dispatch), None),
            Err(e) => (Err(format!("{:#}", anyhow::Error::from(e))), None),
        },
        None => {
            let cluster = jobwarden_doctor::Cluster {
                client: client.clone(),
                server: String::new(),
            };
            match jobwarden_doctor::read::installed::controller_policy(
                &cluster, &namespace, &ServeLine,
            )
            .await
            {
                Ok((policy, pod_spec)) => (Ok(policy.dispatch), Some(pod_spec)),
                Err(e) => (Err(e), None),
            }
        }
    };
    let mounted = mounted_kubeconfigs(policy.as_ref().ok(), pod_spec.as_ref());
    WorkerAccess {
        policy,
        namespace,
        given: given.iter().cloned().collect(),
        mounted,
    }
}

/// The Secret (and key) each worker's `kubeconfigFile` is mounted from in jobwarden's
/// controller Deployment, by path.
fn mounted_kubeconfigs(
    dispatch: Option<&Dispatch>,
    pod_spec: Option<&serde_json::Value>,
) -> BTreeMap<String, (String, String)> {
    let (Some(dispatch), Some(pod_spec)) = (dispatch, pod_spec) else {
        return BTreeMap::new();
    };
    dispatch
        .workers
        .iter()
        .filter_map(|w| match w.source() {
            Some(WorkerSource::File(path)) => match file_source(pod_spec, path) {
                Some(FileSource::Secret { name, key }) => Some((path.to_owned(), (name, key))),
                _ => None,
            },
            _ => None,
        })
        .collect()
}
