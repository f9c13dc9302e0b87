//! At start, `serve` reads the webhook configurations registered under its name and says, loudly
//! and once, when they do not send it every request its policy needs (a policy changed without
//! registering its configurations again), or that it cannot tell. It warns rather than refuses
//! to start: every install registers the configurations only once a replica serves, so a replica
//! that refused would hold back the very registration that would satisfy it.

use jobwarden_admission::Policy;
use jobwarden_admission::registration::gaps;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::Api;
use std::time::Duration;

/// `serve`'s flag naming the configurations to compare.
#[derive(Debug, Clone, clap::Args)]
pub struct RegistrationArgs {
    /// The name of the MutatingWebhookConfiguration and ValidatingWebhookConfiguration that
    /// send this server its requests, read once at start to compare with what the policy needs.
    #[arg(
        long,
        env = "JOBWARDEN_WEBHOOK_CONFIGURATIONS",
        default_value = "jobwarden"
    )]
    pub webhook_configurations: String,
}

/// How often the configurations are read before jobwarden says it cannot tell, and the pause
/// before the first retry (doubled each time): a replica often starts while its API server is
/// busy or briefly away, and one failed read should not leave the question open.
const READS: u32 = 5;
const FIRST_RETRY: Duration = Duration::from_secs(1);

/// Reads both configurations and logs what they fail to send.
pub async fn check(client: kube::Client, name: String, policy: Policy) {
    let Some((m, v)) = read(client, &name).await else {
        return;
    };
    if m.is_none() && v.is_none() {
        tracing::info!(
            configurations = %name,
            "no webhook configurations are registered under this name yet: kube-apiserver sends jobwarden nothing until they are"
        );
        return;
    }
    let found = gaps(&policy, m.as_ref(), v.as_ref());
    if found.is_empty() {
        tracing::info!(
            configurations = %name,
            "the registered webhook configurations send every request the policy needs"
        );
    }
    for gap in found {
        tracing::warn!(
            configurations = %name,
            gap = %gap,
            "THE REGISTERED WEBHOOK CONFIGURATIONS DO NOT SEND JOBWARDEN WHAT ITS POLICY NEEDS: requests it should judge are admitted without it; register the configurations `jobwarden webhooks` prints for this policy"
        );
    }
}

/// Both configurations (`None` for one not registered), retried with a back-off; `None` after
/// saying why when they could not be read.
async fn read(
    client: kube::Client,
    name: &str,
) -> Option<(
    Option<MutatingWebhookConfiguration>,
    Option<ValidatingWebhookConfiguration>,
)> {
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client);
    let mut pause = FIRST_RETRY;
    for attempt in 1..=READS {
        let error = match (mutating.get_opt(name).await, validating.get_opt(name).await) {
            (Ok(m), Ok(v)) => return Some((m, v)),
            (Err(error), _) | (_, Err(error)) => error,
        };
        if attempt == READS {
            tracing::warn!(
                %error,
                configurations = %name,
                "cannot read the registered webhook configurations: jobwarden cannot tell whether they send it every request its policy needs (`jobwarden webhooks` prints what they should be)"
            );
        } else {
            tracing::debug!(%error, configurations = %name, "reading the registered webhook configurations; trying again");
            tokio::time::sleep(pause).await;
            pause *= 2;
        }
    }
    None
}
