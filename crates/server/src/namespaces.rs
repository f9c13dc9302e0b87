//! Namespace labels for the suspend-on-create selector: a kube-runtime reflector keeps the
//! metadata of every Namespace in memory, so a review looks labels up without an API call.
//! Only started when a cluster is reachable and the policy has a selector.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use tokio_util::sync::CancellationToken;

use crate::health::Health;

/// A read handle on the namespaces' labels.
#[derive(Clone)]
pub struct NamespaceLabels {
    store: Store<PartialObjectMeta<Namespace>>,
}

impl NamespaceLabels {
    /// Starts the reflector; it runs until `stop` is cancelled, retrying with backoff when the
    /// watch fails. Readiness waits for its first full list.
    pub fn start(client: kube::Client, health: Arc<Health>, stop: CancellationToken) -> Self {
        let (store, writer) = reflector::store();
        // An Api over PartialObjectMeta asks for metadata only: labels are all we need.
        let api = Api::<PartialObjectMeta<Namespace>>::all(client);
        let stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .touched_objects();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    next = stream.next() => match next {
                        Some(Ok(_)) => {}
                        Some(Err(error)) => {
                            tracing::warn!(%error, "watching namespaces failed; retrying");
                        }
                        None => return,
                    },
                }
            }
        });
        let ready = store.clone();
        tokio::spawn(async move {
            if ready.wait_until_ready().await.is_ok() {
                health.set_namespaces_synced();
                tracing::info!(namespaces = ready.len(), "namespace labels synced");
            }
        });
        NamespaceLabels { store }
    }

    /// The labels of `namespace`, or None when it is not (yet) known.
    pub fn labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        let found = self.store.get(&ObjectRef::new(namespace))?;
        Some(found.metadata.labels.clone().unwrap_or_default())
    }
}
