//! The controller's Lease: held by a running replica, and renewed recently. The leader renews
//! every retry period (2 s) and a standby takes an expired Lease within one, so a Lease not
//! renewed for a minute means no replica can lead: delegated Jobs stand still. Pure: the
//! clock is a parameter.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use jobwarden_rules::seconds;
use jobwarden_rules::well_known::LEASE_NAME;

use super::deployment::DeploymentView;
use crate::catalogue::LEASE;
use crate::check::Check;

/// Not renewed for this long: no replica leads.
pub const STALE_AFTER: Duration = Duration::from_secs(60);

/// `lease`: the Lease (`None`: there is none); `pods`: the namespace's pods; `controllers`:
/// the Deployments that run the controller.
pub fn lease(
    namespace: &str,
    lease: &Result<Option<Lease>, String>,
    pods: &Result<Vec<Pod>, String>,
    controllers: &[&DeploymentView],
    now: Timestamp,
) -> Check {
    if controllers.is_empty() {
        return LEASE.skipped("no Deployment runs the controller");
    }
    let logs = format!(
        "`kubectl -n {namespace} logs deployment/{}` says why no replica leads",
        controllers[0].name
    );
    let lease = match lease {
        Ok(Some(lease)) => lease,
        Ok(None) => {
            return LEASE.error(
                format!("no Lease {LEASE_NAME} in namespace {namespace}: no replica has ever led"),
                logs,
            );
        }
        Err(e) => {
            return LEASE.cannot_tell(
                format!("cannot read Lease {namespace}/{LEASE_NAME}: {e}"),
                format!("`kubectl -n {namespace} get lease {LEASE_NAME} -o yaml` shows it"),
            );
        }
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let Some(holder) = spec.holder_identity.filter(|h| !h.is_empty()) else {
        return LEASE.error(format!("nobody holds Lease {namespace}/{LEASE_NAME}"), logs);
    };
    let Some(renewed) = spec.renew_time.map(|t| t.0) else {
        return LEASE.error(
            format!("Lease {namespace}/{LEASE_NAME} is held by {holder} but was never renewed"),
            logs,
        );
    };
    let ago = now.duration_since(renewed);
    let ago_secs = u64::try_from(ago.as_secs()).unwrap_or(0);
    let ago_text = seconds::format(ago_secs);
    let held = format!("held by {holder}, renewed {ago_text} ago");
    if ago_secs >= STALE_AFTER.as_secs() {
        return LEASE.error(
            format!("Lease {namespace}/{LEASE_NAME} is {held}: no replica is leading, and Jobs delegated to jobwarden stand still"),
            logs,
        );
    }
    let duration = u64::try_from(spec.lease_duration_seconds.unwrap_or(15)).unwrap_or(15);
    if ago_secs > duration {
        return LEASE.warning(
            format!("Lease {namespace}/{LEASE_NAME} is {held}, past its {duration}s: a standby should take it within seconds"),
            logs,
        );
    }
    match holder_pod(&holder, pods, controllers) {
        Ok(deployment) => LEASE.ok(format!("{held}, a running replica of Deployment {deployment}")),
        Err(Unseen::Unreadable(e)) => LEASE.cannot_tell(
            format!("{held}; cannot tell whether {holder} is a running replica: {e}"),
            format!("`kubectl -n {namespace} get pod {holder}` shows it"),
        ),
        Err(Unseen::Problem(why)) => LEASE.error(
            format!("Lease {namespace}/{LEASE_NAME} is {held}, but {why}"),
            format!("another process renews jobwarden's Lease: find it (`kubectl -n {namespace} get lease {LEASE_NAME} -o yaml`) and stop it; only {}'s replicas may lead", controllers[0].name),
        ),
    }
}

enum Unseen {
    Unreadable(String),
    Problem(String),
}

/// The Deployment whose running replica the holder is.
fn holder_pod(
    holder: &str,
    pods: &Result<Vec<Pod>, String>,
    controllers: &[&DeploymentView],
) -> Result<String, Unseen> {
    let pods = pods.as_ref().map_err(|e| Unseen::Unreadable(e.clone()))?;
    let Some(pod) = pods
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(holder))
    else {
        return Err(Unseen::Problem(format!(
            "no pod {holder} runs in its namespace"
        )));
    };
    let labels: BTreeMap<String, String> = pod.metadata.labels.clone().unwrap_or_default();
    let Some(deployment) = controllers.iter().find(|d| d.selects(&labels)) else {
        return Err(Unseen::Problem(format!(
            "pod {holder} is not a replica of {}",
            controllers
                .iter()
                .map(|d| format!("Deployment {}", d.name))
                .collect::<Vec<_>>()
                .join(" or ")
        )));
    };
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "Pending".to_owned());
    if phase != "Running" {
        return Err(Unseen::Problem(format!(
            "pod {holder} is {phase}, not Running"
        )));
    }
    Ok(deployment.name.clone())
}
