//! Where a worker's kubeconfig comes from, as a stream of its successive texts: a Secret in
//! jobwarden's namespace (watched by name, so a change is taken up at once and the RBAC can be
//! a Role on that namespace alone), or a file (a mounted Secret, updated by the kubelet
//! through a symlink swap that file notifications miss, so it is read again every few
//! seconds). Only changes are passed on.

use std::path::PathBuf;
use std::time::Duration;

use futures::{Stream, StreamExt as _, stream};
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;
use kube::runtime::{WatchStreamExt as _, watcher};

/// The key of the Secret that holds the kubeconfig.
pub const SECRET_KEY: &str = "kubeconfig";

/// How often a kubeconfig file is read again.
pub const FILE_POLL: Duration = Duration::from_secs(5);

/// A worker's credentials as last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    Kubeconfig(String),
    /// There is none to read; why.
    Missing(String),
}

/// The kubeconfig in the Secret `namespace/name`, key `kubeconfig`, each time it changes.
pub fn from_secret(
    client: Client,
    namespace: String,
    name: String,
) -> impl Stream<Item = Credentials> + Send {
    let secrets: Api<Secret> = Api::namespaced(client, &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let what = format!("the Secret {namespace}/{name}");
    let mut seen_in_list = false;
    watcher(secrets, config)
        .default_backoff()
        .filter_map(move |event| {
            let out = match event {
                Ok(watcher::Event::Init) => {
                    seen_in_list = false;
                    None
                }
                Ok(watcher::Event::InitApply(secret) | watcher::Event::Apply(secret)) => {
                    seen_in_list = true;
                    Some(read_secret(&secret, &what))
                }
                Ok(watcher::Event::InitDone) if !seen_in_list => {
                    Some(Credentials::Missing(format!("{what} does not exist")))
                }
                Ok(watcher::Event::InitDone) => None,
                Ok(watcher::Event::Delete(_)) => {
                    Some(Credentials::Missing(format!("{what} was deleted")))
                }
                Err(error) => {
                    tracing::warn!(%error, secret = %what, "watching a worker's kubeconfig Secret");
                    None
                }
            };
            futures::future::ready(out)
        })
        .scan(None::<Credentials>, |last, next| {
            let changed = last.as_ref() != Some(&next);
            *last = Some(next.clone());
            futures::future::ready(Some(changed.then_some(next)))
        })
        .filter_map(futures::future::ready)
}

fn read_secret(secret: &Secret, what: &str) -> Credentials {
    let Some(bytes) = secret.data.as_ref().and_then(|d| d.get(SECRET_KEY)) else {
        return Credentials::Missing(format!("{what} has no key {SECRET_KEY:?}"));
    };
    match String::from_utf8(bytes.0.clone()) {
        Ok(text) => Credentials::Kubeconfig(text),
        Err(_) => Credentials::Missing(format!("{what}'s key {SECRET_KEY:?} is not UTF-8 text")),
    }
}

/// The kubeconfig in the file at `path`, read at once and then `every` ([`FILE_POLL`] in
/// jobwarden), each time it changes.
pub fn from_file(path: PathBuf, every: Duration) -> impl Stream<Item = Credentials> + Send {
    let reads = stream::unfold((path, true), move |(path, first)| async move {
        if !first {
            tokio::time::sleep(every).await;
        }
        let read = match tokio::fs::read_to_string(&path).await {
            Ok(text) => Credentials::Kubeconfig(text),
            Err(e) => Credentials::Missing(format!("cannot read {}: {e}", path.display())),
        };
        Some((read, (path, false)))
    });
    reads
        .scan(None::<Credentials>, |last, next| {
            let changed = last.as_ref() != Some(&next);
            *last = Some(next.clone());
            futures::future::ready(Some(changed.then_some(next)))
        })
        .filter_map(futures::future::ready)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_file_is_read_at_once_and_again_when_it_changes() {
        let dir = std::env::temp_dir().join(format!("jobwarden-creds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a folder");
        let path = dir.join("kubeconfig");
        std::fs::write(&path, "one").expect("written");
        let mut reads = Box::pin(from_file(path.clone(), Duration::from_millis(20)));
        assert_eq!(
            reads.next().await,
            Some(Credentials::Kubeconfig("one".to_owned()))
        );
        std::fs::write(&path, "two").expect("written");
        assert_eq!(
            reads.next().await,
            Some(Credentials::Kubeconfig("two".to_owned()))
        );
        std::fs::remove_file(&path).expect("removed");
        assert!(matches!(reads.next().await, Some(Credentials::Missing(_))));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_secret_without_the_key_is_missing_credentials() {
        let secret = Secret::default();
        assert!(
            matches!(read_secret(&secret, "the Secret ns/s"), Credentials::Missing(m) if m.contains("has no key"))
        );
    }
}
