//! The thin shell: what `explain` reads, with the caller's own credentials, and nothing it
//! writes. RBAC in the Job's namespace: `get` on `jobs`, `list` on `pods` and `events`; and,
//! optional, `get` on jobwarden's Lease (a refusal is told, not fatal).

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, Client};

use jobwarden_rules::well_known::CONTROLLER_UID_LABEL;

use crate::story::{LeaseReading, Observed};

/// Which Job, and where jobwarden keeps its Lease.
#[derive(Debug, Clone)]
pub struct Target {
    pub namespace: String,
    pub name: String,
    /// jobwarden's controller name: a Job with this `spec.managedBy` gets its Lease read.
    pub controller_name: String,
    pub lease_namespace: String,
    pub lease_name: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("jobs.batch {name:?} not found in namespace {namespace:?}")]
    NotFound { namespace: String, name: String },
    #[error("cannot get the Job: {0}")]
    Job(#[source] kube::Error),
    #[error("cannot read the Job: {0}")]
    Decode(#[source] serde_json::Error),
    #[error("cannot list the Job's pods: {0}")]
    Pods(#[source] kube::Error),
    #[error("cannot list the Job's events: {0}")]
    Events(#[source] kube::Error),
}

/// Reads the Job, its pods (by its `controller-uid` label, as its selector), its events (by
/// `involvedObject.uid`) and, for a Job jobwarden runs, jobwarden's Lease.
pub async fn read(client: &Client, target: &Target) -> Result<Observed, ReadError> {
    let jobs: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &target.namespace,
        &ApiResource::erase::<Job>(&()),
    );
    // As a raw object, so fields this build's k8s-openapi does not know are kept (a rule's
    // `name` from a newer API).
    let job = match jobs.get(&target.name).await {
        Ok(job) => serde_json::to_value(job).map_err(ReadError::Decode)?,
        Err(kube::Error::Api(e)) if e.code == 404 => {
            return Err(ReadError::NotFound {
                namespace: target.namespace.clone(),
                name: target.name.clone(),
            });
        }
        Err(e) => return Err(ReadError::Job(e)),
    };
    let uid = job
        .pointer("/metadata/uid")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let pods = Api::<Pod>::namespaced(client.clone(), &target.namespace)
        .list(&ListParams::default().labels(&format!("{CONTROLLER_UID_LABEL}={uid}")))
        .await
        .map_err(ReadError::Pods)?
        .items;
    let events = Api::<Event>::namespaced(client.clone(), &target.namespace)
        .list(&ListParams::default().fields(&format!("involvedObject.uid={uid}")))
        .await
        .map_err(ReadError::Events)?
        .items;
    let managed_by = job
        .pointer("/spec/managedBy")
        .and_then(serde_json::Value::as_str);
    let lease = if managed_by == Some(target.controller_name.as_str()) {
        read_lease(client, target).await
    } else {
        LeaseReading::NotRead
    };
    Ok(Observed {
        job,
        pods,
        events,
        lease,
    })
}

async fn read_lease(client: &Client, target: &Target) -> LeaseReading {
    let (namespace, name) = (target.lease_namespace.clone(), target.lease_name.clone());
    match Api::<Lease>::namespaced(client.clone(), &namespace)
        .get(&name)
        .await
    {
        Ok(lease) => LeaseReading::Read {
            namespace,
            name,
            lease: Box::new(lease),
        },
        Err(e) => {
            let reason = match &e {
                kube::Error::Api(s) if s.code == 403 => "forbidden".to_owned(),
                kube::Error::Api(s) if s.code == 404 => "not found".to_owned(),
                other => other.to_string(),
            };
            LeaseReading::Unreadable {
                namespace,
                name,
                reason,
            }
        }
    }
}
