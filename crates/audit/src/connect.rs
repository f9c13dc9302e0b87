//! Finding the cluster the way kubectl does: an explicit kubeconfig file (and context), else
//! `KUBECONFIG` or `~/.kube/config`, else the pod's in-cluster service account. Only builds a
//! client; it never talks to the cluster. And the words the command line says a client's
//! error in.

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot read the kubeconfig {path}: {source}")]
    ReadKubeconfig {
        path: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("cannot use the kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    #[error("no cluster found (no kubeconfig, and not running in a pod): {0}")]
    Infer(#[from] kube::config::InferConfigError),
    #[error("cannot build a client: {0}")]
    Client(#[from] kube::Error),
}

/// A client for the cluster `kubeconfig`/`context` name, or the one kubectl would use.
pub async fn connect(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Client, ConnectError> {
    Ok(Client::try_from(config(kubeconfig, context).await?)?)
}

/// The client configuration [`connect`] builds its client from (its `cluster_url` names the
/// API server in messages).
pub async fn config(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Config, ConnectError> {
    // kube's rustls needs a process-wide crypto provider; the server installs the same one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    let config = match (kubeconfig, context) {
        (Some(path), _) => {
            let file =
                Kubeconfig::read_from(path).map_err(|source| ConnectError::ReadKubeconfig {
                    path: path.display().to_string(),
                    source,
                })?;
            Config::from_custom_kubeconfig(file, &options).await?
        }
        // A context can only come from a kubeconfig: no in-cluster fallback.
        (None, Some(_)) => Config::from_kubeconfig(&options).await?,
        (None, None) => Config::infer().await?,
    };
    Ok(config)
}

/// An error and what caused it, `: `-joined, each cause once (kube's transport errors say
/// little on their own: "client error (Connect)" becomes "…: tcp connect error: Connection
/// refused").
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}
