//! The labels of the management cluster's namespaces, for workers that choose their
//! namespaces by a selector. Read when asked and kept a minute; read never when no worker has
//! a selector.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::Api;

const KEPT_FOR: Duration = Duration::from_secs(60);

pub type Labels = BTreeMap<String, String>;

pub struct NamespaceLabels {
    client: Client,
    needed: bool,
    kept: Mutex<HashMap<String, (Option<Labels>, Instant)>>,
}

impl NamespaceLabels {
    /// `needed`: whether any worker chooses namespaces by a selector.
    pub fn new(client: Client, needed: bool) -> NamespaceLabels {
        NamespaceLabels {
            client,
            needed,
            kept: Mutex::default(),
        }
    }

    /// The namespace's labels; `None` when not needed or not readable now (a selector then
    /// matches nothing, as the policy's other namespace choices do without labels).
    pub async fn get(&self, namespace: &str) -> Option<Labels> {
        if !self.needed {
            return None;
        }
        if let Some((labels, at)) = self
            .kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(namespace)
            && at.elapsed() < KEPT_FOR
        {
            return labels.clone();
        }
        let read = Api::<Namespace>::all(self.client.clone())
            .get_metadata_opt(namespace)
            .await;
        let labels = match read {
            Ok(found) => found.map(|n| n.metadata.labels.unwrap_or_default()),
            Err(error) => {
                tracing::debug!(namespace, %error, "reading a namespace's labels");
                return None;
            }
        };
        self.kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(namespace.to_owned(), (labels.clone(), Instant::now()));
        labels
    }
}
