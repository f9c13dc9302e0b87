//! Every check doctor makes, once: its group and its name, which is also its heading on the
//! troubleshooting page (docs/operations.md, "Troubleshooting"; the dispatcher's on
//! docs/dispatch.md's; a test holds the two together).

use crate::check::{Group, Kind};

const fn kind(group: Group, name: &'static str) -> Kind {
    Kind { group, name }
}

pub const API_SERVER_REACHABLE: Kind = kind(Group::ApiServer, "API server reachable");
pub const API_SERVER_VERSION: Kind = kind(Group::ApiServer, "API server version");
pub const CALLER: Kind = kind(Group::ApiServer, "caller identity");
pub const MANAGED_BY: Kind = kind(Group::ApiServer, "managedBy served");
pub const SUCCESS_POLICY: Kind = kind(Group::ApiServer, "successPolicy served");
pub const POD_REPLACEMENT_POLICY: Kind = kind(Group::ApiServer, "podReplacementPolicy served");
pub const BACKOFF_LIMIT_PER_INDEX: Kind = kind(Group::ApiServer, "backoffLimitPerIndex served");
pub const POD_FAILURE_POLICY: Kind = kind(Group::ApiServer, "pod failure policy conditions served");
pub const MATCH_CONDITIONS: Kind = kind(Group::ApiServer, "matchConditions served");

pub const INSTALL_MANIFESTS: Kind = kind(Group::PreInstall, "install manifests");
pub const MAY_INSTALL: Kind = kind(Group::PreInstall, "permission to install");
pub const MAY_GRANT: Kind = kind(Group::PreInstall, "permission to grant the install's RBAC");
pub const CERT_MANAGER: Kind = kind(Group::PreInstall, "cert-manager served");
pub const NAMESPACE: Kind = kind(Group::PreInstall, "install namespace");
pub const POD_SECURITY: Kind = kind(Group::PreInstall, "Pod Security admits jobwarden");
pub const WEBHOOK_NAMES: Kind = kind(Group::PreInstall, "webhook names free");

pub const DEPLOYMENT: Kind = kind(Group::Jobwarden, "Deployment ready");
pub const LEASE: Kind = kind(Group::Jobwarden, "controller Lease");
pub const RUNNING_REVISION: Kind = kind(Group::Jobwarden, "running revision");
pub const LEASE_PRIORITY: Kind = kind(Group::Jobwarden, "Lease priority level");
pub const SERVICE_ACCOUNT: Kind = kind(Group::Jobwarden, "ServiceAccount permissions");
pub const METRICS_READER: Kind = kind(Group::Jobwarden, "metrics reader role");
pub const POLICY_IN_FORCE: Kind = kind(Group::Jobwarden, "policy in force");

pub const REGISTRATION: Kind = kind(Group::Webhook, "webhook registration");
pub const WEBHOOK_DENIES: Kind = kind(Group::Webhook, "webhook denies through the API server");
pub const WEBHOOK_ADMITS: Kind = kind(Group::Webhook, "webhook admits through the API server");
pub const SERVING_CERTIFICATE: Kind = kind(Group::Webhook, "serving certificate");

pub const REFUSED_JOBS: Kind = kind(Group::StoredJobs, "stored Jobs the rules refuse");
pub const NOBODY_RUNS: Kind = kind(Group::StoredJobs, "Jobs nobody runs");

pub const WORKER_KUBECONFIG: Kind = kind(Group::Dispatch, "worker kubeconfig");
pub const WORKER_ANSWERS: Kind = kind(Group::Dispatch, "worker API server answers");
pub const WORKER_CREDENTIALS: Kind = kind(Group::Dispatch, "worker credentials accepted");
pub const WORKER_PERMISSIONS: Kind = kind(Group::Dispatch, "worker permissions");
pub const WORKER_NAMESPACES: Kind = kind(Group::Dispatch, "worker namespaces");
pub const WORKER_ROOM_READABLE: Kind = kind(Group::Dispatch, "worker room readable");
pub const WORKER_VIEW_FRESH: Kind = kind(Group::Dispatch, "worker view fresh");
pub const LOST_WORKERS: Kind = kind(Group::Dispatch, "lost workers");
pub const DRAINING_WORKERS: Kind = kind(Group::Dispatch, "draining workers");
pub const NAMESPACES_IN_A_TEAM: Kind = kind(Group::Dispatch, "namespaces in a team");
pub const MANAGEMENT_BUDGET: Kind = kind(Group::Dispatch, "management budget");

/// All of them, in the order a run prints them.
pub const ALL: [Kind; 40] = [
    API_SERVER_REACHABLE,
    API_SERVER_VERSION,
    CALLER,
    MANAGED_BY,
    SUCCESS_POLICY,
    POD_REPLACEMENT_POLICY,
    BACKOFF_LIMIT_PER_INDEX,
    POD_FAILURE_POLICY,
    MATCH_CONDITIONS,
    INSTALL_MANIFESTS,
    MAY_INSTALL,
    MAY_GRANT,
    CERT_MANAGER,
    NAMESPACE,
    POD_SECURITY,
    WEBHOOK_NAMES,
    DEPLOYMENT,
    LEASE,
    RUNNING_REVISION,
    LEASE_PRIORITY,
    SERVICE_ACCOUNT,
    METRICS_READER,
    POLICY_IN_FORCE,
    REGISTRATION,
    WEBHOOK_DENIES,
    WEBHOOK_ADMITS,
    SERVING_CERTIFICATE,
    REFUSED_JOBS,
    NOBODY_RUNS,
    WORKER_KUBECONFIG,
    WORKER_ANSWERS,
    WORKER_CREDENTIALS,
    WORKER_PERMISSIONS,
    WORKER_NAMESPACES,
    WORKER_ROOM_READABLE,
    WORKER_VIEW_FRESH,
    DRAINING_WORKERS,
    NAMESPACES_IN_A_TEAM,
    LOST_WORKERS,
    MANAGEMENT_BUDGET,
];
