//! One run of doctor: the API server's checks, then `--pre`'s or the installed ones. The order
//! of reading is the order of printing; each group's reads go to its pure checks.

use jobwarden_admission::Policy;
use jobwarden_admission::registration::{self, configurations};
use serde_json::Value;

use crate::api_server;
use crate::check::Report;
use crate::features;
use crate::installed;
use crate::installed::deployment::{DEFAULT_CONFIGURATIONS, ServeCommandLine};
use crate::pre;
use crate::pre::install::{Install, WebhookConfiguration};
use crate::read::{self, Cluster};

/// What the caller asked for.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--pre`: may jobwarden be installed here (instead of: is it healthy).
    pub pre: bool,
    /// jobwarden's namespace.
    pub namespace: String,
    /// `--install`: the rendered manifests `--pre` checks; without, the install jobwarden
    /// ships ([`Install::shipped`]).
    pub install: Option<Install>,
    /// `--config`: the policy, instead of the one the install runs.
    pub policy: Option<Policy>,
    /// The commit the binary was built from (`jobwarden --version`; "unknown" without git),
    /// shown beside the one the running leader says.
    pub binary_revision: String,
}

/// What one run leaves for the next under `--wait`.
#[derive(Debug, Clone, Default)]
pub struct Memo {
    /// The stored Jobs, counted once (see [`read::installed::read`]).
    stored: Option<read::installed::Counted>,
}

pub async fn diagnose(
    cluster: &Cluster,
    options: &Options,
    command_line: &dyn ServeCommandLine,
    memo: &mut Memo,
) -> Report {
    let mut report = Report::default();
    let version = read::api::version(cluster).await;
    report
        .checks
        .push(api_server::reachable(&cluster.server, &version));
    let Ok(version) = version else {
        report.unreachable = true;
        return report;
    };
    report.checks.push(api_server::version(&version));
    report
        .checks
        .push(api_server::caller(&read::api::caller(cluster).await));

    // The Job probe goes where no webhook of jobwarden's is sent it (its own namespace, which
    // every configuration leaves out), so it shows what the API server keeps, not whether a
    // webhook answers; before jobwarden's namespace exists, `default`.
    let state = read::pre::namespace_state(cluster, &options.namespace).await;
    let probe_namespace = match state {
        pre::NamespaceState::Exists { .. } => options.namespace.as_str(),
        _ => "default",
    };
    let (job, webhook) = read::api::features(cluster, probe_namespace).await;
    report
        .checks
        .extend(features::job_features(probe_namespace, &job));
    report.checks.push(features::match_conditions(&webhook));

    if options.pre {
        let shipped;
        let install = match &options.install {
            Some(install) => install,
            None => {
                shipped = Install::shipped();
                &shipped
            }
        };
        // Where the manifests put their objects is where they will go, whatever -n says.
        let namespace = install
            .namespace()
            .unwrap_or_else(|| options.namespace.clone());
        let observed = read::pre::read(cluster, install, &namespace).await;
        let ours = our_configurations(install, &namespace, options.policy.as_ref());
        report
            .checks
            .extend(pre::checks(&namespace, install, &ours, &observed));
    } else {
        let (observed, counted) = read::installed::read(
            cluster,
            &options.namespace,
            command_line,
            options.policy.as_ref(),
            memo.stored.take(),
        )
        .await;
        memo.stored = Some(counted);
        report.checks.extend(installed::checks(
            &options.namespace,
            &observed,
            &options.binary_revision,
        ));
    }
    report
}

/// The webhook configurations the install registers: those its manifests hold, else those
/// `jobwarden webhooks` generates for the policy (deploy/ registers them from its own folder).
fn our_configurations(
    install: &Install,
    namespace: &str,
    policy: Option<&Policy>,
) -> Vec<WebhookConfiguration> {
    let listed = install.webhook_configurations();
    if !listed.is_empty() {
        return listed;
    }
    let policy = policy.cloned().unwrap_or_default();
    let (mutating, validating) = configurations(
        &policy,
        &registration::Install {
            name: DEFAULT_CONFIGURATIONS.to_owned(),
            namespace: namespace.to_owned(),
            ..registration::Install::default()
        },
    );
    let as_value = |v: Result<Value, serde_json::Error>, kind: &str| {
        v.ok().and_then(|mut v| {
            v["kind"] = Value::from(kind);
            WebhookConfiguration::of(&v)
        })
    };
    [
        as_value(
            serde_json::to_value(mutating),
            "MutatingWebhookConfiguration",
        ),
        as_value(
            serde_json::to_value(validating),
            "ValidatingWebhookConfiguration",
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
}
