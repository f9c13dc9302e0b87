//! The install jobwarden ships, built into the binary: `kubectl kustomize deploy/` and `kubectl
//! kustomize deploy/webhooks/` as rendered from this checkout (tests/it/deploy/shipped.rs holds
//! the copies equal to what kubectl renders). `doctor --pre` without `--install` checks it, so
//! the command the README shows asks permission for what `kubectl apply -k deploy/` and
//! `deploy/webhooks/register.sh` create, as `linkerd check --pre` checks the install its own
//! CLI renders.

use serde::Deserialize as _;
use serde_json::Value;

use super::install::Install;

/// Each rendered kustomization, as the folder it is rendered from and the rendering.
pub const RENDERED: [(&str, &str); 2] = [
    ("deploy", include_str!("shipped/deploy.yaml")),
    ("deploy/webhooks", include_str!("shipped/webhooks.yaml")),
];

impl Install {
    /// The install jobwarden ships, as its objects.
    pub fn shipped() -> Install {
        Install {
            sources: vec![format!(
                "the install jobwarden {} ships, built in (`kubectl kustomize deploy/` and \
                 `deploy/webhooks/`; --install checks another)",
                env!("CARGO_PKG_VERSION")
            )],
            objects: RENDERED
                .iter()
                .flat_map(|(_, text)| documents(text))
                .collect(),
        }
    }
}

/// The objects of a multi-document YAML text. The texts are the build's own, rendered by
/// kubectl and read back by a test, so a document that does not read cannot ship.
fn documents(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .filter_map(|doc| Value::deserialize(doc).ok())
        .filter(|v| !v.is_null())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_document_of_the_shipped_install_reads() {
        for (dir, text) in RENDERED {
            let written = text.matches("\n---\n").count() + 1;
            assert_eq!(documents(text).len(), written, "{dir}");
        }
        let install = Install::shipped();
        assert_eq!(install.namespace().as_deref(), Some("jobwarden-system"));
        assert!(install.namespace_object("jobwarden-system").is_some());
        assert_eq!(install.webhook_configurations().len(), 2);
        assert!(!install.cert_manager_kinds().is_empty());
        assert!(install.grants_rbac());
    }
}
