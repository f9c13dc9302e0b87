//! The registered webhook configurations against what the policy needs: `serve`'s start-up
//! gap check (`jobwarden_admission::registration::gaps`), as a check. Pure.

use jobwarden_admission::Policy;
use jobwarden_admission::registration::gaps;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};

use crate::access::listed;
use crate::catalogue::REGISTRATION;
use crate::check::Check;

/// Both configurations as read (`None`: not registered).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Registered {
    pub mutating: Option<MutatingWebhookConfiguration>,
    pub validating: Option<ValidatingWebhookConfiguration>,
}

impl Registered {
    pub fn any(&self) -> bool {
        self.mutating.is_some() || self.validating.is_some()
    }
}

const REGISTER: &str = "register the configurations `jobwarden webhooks --config POLICY` prints for the install's policy once a replica serves: deploy/webhooks/register.sh --config POLICY (kustomize), or `helm upgrade` (the chart registers them in a hook)";

/// `name`: the configurations' name; `policy`: the policy they must serve (`Err`: unknown).
pub fn registration(
    name: &str,
    policy: &Result<Policy, String>,
    registered: &Result<Registered, String>,
) -> Check {
    let registered = match registered {
        Ok(r) => r,
        Err(e) => {
            return REGISTRATION.cannot_tell(
                format!("cannot read the webhook configurations named {name}: {e}"),
                format!("`kubectl get mutatingwebhookconfiguration,validatingwebhookconfiguration {name} -o yaml` shows them"),
            );
        }
    };
    if !registered.any() {
        return REGISTRATION.error(
            format!("no webhook configuration named {name} is registered: kube-apiserver sends jobwarden nothing"),
            REGISTER,
        );
    }
    let policy = match policy {
        Ok(p) => p,
        Err(e) => {
            return REGISTRATION.cannot_tell(
                format!("cannot tell what the policy needs: {e}"),
                "give the install's policy file with --config",
            );
        }
    };
    let found = gaps(
        policy,
        registered.mutating.as_ref(),
        registered.validating.as_ref(),
    );
    if !found.is_empty() {
        return REGISTRATION.error(
            format!(
                "the configurations named {name} do not send jobwarden what its policy needs: {}",
                listed(&found, 4)
            ),
            REGISTER,
        );
    }
    let webhooks = registered
        .mutating
        .iter()
        .flat_map(|m| m.webhooks.iter().flatten().map(|w| w.name.clone()))
        .chain(
            registered
                .validating
                .iter()
                .flat_map(|v| v.webhooks.iter().flatten().map(|w| w.name.clone())),
        )
        .count();
    REGISTRATION.ok(format!(
        "the configurations named {name} send every request the policy needs ({webhooks} webhooks)"
    ))
}
