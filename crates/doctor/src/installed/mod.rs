//! `doctor` on an installed jobwarden: its Deployments and their ready replicas, the
//! controller's Lease (and the revision its leader runs) and its priority level, the ServiceAccounts' permissions, the metrics reader role; the webhook
//! configurations against the policy, the webhook answering through the API server, its
//! certificate; what `audit` would report; and, when the policy names workers, the dispatch
//! checks ([`crate::dispatch`]). Pure, but for [`crate::read::installed`] which
//! reads what [`checks`] judges.

pub mod certificate;
pub mod deployment;
pub mod lease;
pub mod lease_priority;
pub mod permissions;
pub mod policy_in_force;
pub mod registration;
pub mod revision;
pub mod stored_jobs;
pub mod webhook_probe;

use jobwarden_admission::Policy;
use jobwarden_audit::DEFAULT_STUCK_AFTER;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::access::Access;
use crate::check::Check;
use crate::pre::Allowed;
use certificate::Serving;
use deployment::DeploymentView;
use registration::Registered;
use stored_jobs::Tally;
use webhook_probe::Probed;

/// One ServiceAccount, the Deployments running as it, and its access reviews.
#[derive(Debug, Clone)]
pub struct AccountAnswers {
    pub name: String,
    pub deployments: Vec<String>,
    pub answers: Vec<(Access, Allowed)>,
}

/// Everything doctor read of the install.
#[derive(Debug, Clone)]
pub struct InstalledObserved {
    pub deployments: Result<Vec<DeploymentView>, String>,
    pub pods: Result<Vec<Pod>, String>,
    pub lease: Result<Option<Lease>, String>,
    /// The cluster's, for the Lease's priority level.
    pub flow_schemas: Result<Vec<FlowSchema>, String>,
    pub priority_levels: Result<Vec<PriorityLevelConfiguration>, String>,
    pub configurations: String,
    pub policy: Result<Policy, String>,
    pub registered: Result<Registered, String>,
    pub denied: Probed,
    pub admitted: Probed,
    pub serving: Serving,
    pub accounts: Vec<AccountAnswers>,
    pub metrics_reader: Result<Option<Value>, String>,
    pub stored: Result<Tally, String>,
    /// The dispatch checks' readings, when the policy the controller runs names workers.
    pub dispatch: Option<crate::dispatch::DispatchObserved>,
    /// When the Lease was read: what its age is measured against.
    pub now: Timestamp,
    /// The hash of the policy file the webhook's Deployment mounts (`None`: it has none).
    pub mounted_policy: Result<Option<String>, String>,
    /// What jobwarden's Pods said about the policy they run.
    pub policy_events: Result<Vec<policy_in_force::PolicyEvent>, String>,
}

/// Every installed check, from what was read in `namespace`; `binary_revision`: the commit the
/// binary running doctor was built from (`jobwarden --version`), set beside the leader's.
pub fn checks(namespace: &str, o: &InstalledObserved, binary_revision: &str) -> Vec<Check> {
    let mut out = deployment::deployments(namespace, &o.deployments);
    out.extend(controller_checks(namespace, o, binary_revision));
    out.extend(account_checks(namespace, o));
    out.push(policy_runs(o));
    out.extend(webhook_checks(o));
    out.extend(stored_jobs::stored_jobs(&o.stored, DEFAULT_STUCK_AFTER));
    if let Some(dispatch) = &o.dispatch {
        out.extend(crate::dispatch::checks(dispatch));
    }
    out
}

/// The controller's Lease, the revision its leader runs, and the Lease's priority level.
fn controller_checks(namespace: &str, o: &InstalledObserved, binary_revision: &str) -> Vec<Check> {
    let found: &[DeploymentView] = o.deployments.as_deref().unwrap_or_default();
    let controllers: Vec<&DeploymentView> = found.iter().filter(|d| d.runs_controller()).collect();
    let lease = lease::lease(namespace, &o.lease, &o.pods, &controllers, o.now);
    // Only a leader that renews its Lease says which revision runs: a Lease nobody renews
    // (the Lease check's failure) is a replica gone, whose word is not the running one's.
    let leading = lease.status == crate::check::Status::Ok;
    let revision = if leading || controllers.is_empty() {
        revision::running_revision(
            namespace,
            binary_revision,
            &o.lease,
            !controllers.is_empty(),
        )
    } else {
        crate::catalogue::RUNNING_REVISION
            .skipped("no replica leads now (see the controller Lease): none says what runs")
    };
    let priority = lease_priority::lease_priority(
        namespace,
        &o.flow_schemas,
        &o.priority_levels,
        &controllers,
    );
    vec![lease, revision, priority]
}

/// Each ServiceAccount's access reviews, and the metrics reader role.
fn account_checks(namespace: &str, o: &InstalledObserved) -> Vec<Check> {
    let mut out: Vec<Check> = o
        .accounts
        .iter()
        .map(|a| permissions::service_account(namespace, &a.name, &a.deployments, &a.answers))
        .collect();
    if o.accounts.is_empty() {
        out.push(
            crate::catalogue::SERVICE_ACCOUNT
                .skipped("no Deployment to read a ServiceAccount from"),
        );
    }
    out.push(permissions::metrics_reader(
        &permissions::metrics_reader_name(&o.configurations),
        &o.metrics_reader,
    ));
    out
}

/// Whether jobwarden's running pods run the policy file mounted.
fn policy_runs(o: &InstalledObserved) -> Check {
    let running: Vec<String> = o
        .pods
        .as_deref()
        .unwrap_or_default()
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    policy_in_force::policy_in_force(&o.mounted_policy, &running, &o.policy_events)
}

/// The webhook configurations registered, the two probes through the API server, and the
/// serving certificate against their `caBundle`s.
fn webhook_checks(o: &InstalledObserved) -> Vec<Check> {
    let endpoints = o
        .registered
        .as_ref()
        .map(certificate::endpoints)
        .unwrap_or_default();
    vec![
        registration::registration(&o.configurations, &o.policy, &o.registered),
        webhook_probe::denies(&o.configurations, &o.denied),
        webhook_probe::admits(&o.configurations, &o.admitted),
        certificate::serving_certificate(&endpoints, &o.serving, o.now),
    ]
}
