//! The thin shell: what `explain` reads, with the caller's own credentials, and nothing it
//! writes. RBAC in the Job's namespace: `get` on `jobs`, `list` on `pods` and `events`; and,
//! optional, `get` on jobwarden's Lease (a refusal is told, not fatal).
//!
//! For a dispatched Job, its worker too: with the kubeconfig the caller names for it (theirs,
//! used as kubectl uses it), else the worker's own from where the policy keeps it (a Secret in
//! jobwarden's namespace, read with the caller's credentials), judged first by the
//! dispatcher's own judge: a kubeconfig read from the cluster never runs a program or reads a
//! file here. On the worker: `get` of the Job of that name, and, for the copy, its pods and
//! events, each listed only where an access review says the credentials may (the dispatcher's
//! identity there may not, and is never refused anything by explain).

use jobwarden_dispatcher::copy::origin_uid;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{ApiResource, DynamicObject, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::Value;

use jobwarden_rules::well_known::CONTROLLER_UID_LABEL;

use crate::dispatch::{CopyReading, DispatchReading, OrderReading, recorded_worker};
use crate::reach::{Reach, WorkerAccess, reach, with_causes, worker_error};
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
        dispatch: None,
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

/// What the worker the dispatched Job `job` is recorded on holds of it.
pub async fn read_dispatch(client: &Client, job: &Value, access: &WorkerAccess) -> DispatchReading {
    let (copy, fleet, order) = match recorded_worker(job) {
        None => match &access.policy {
            Ok(policy) => (
                CopyReading::NotPlaced,
                crate::workers::read::read_workers(client, policy, access).await,
                read_order(client, job, policy).await,
            ),
            Err(_) => (CopyReading::NotPlaced, Vec::new(), None),
        },
        Some(worker) => (
            read_copy(client, job, worker, access).await,
            Vec::new(),
            None,
        ),
    };
    DispatchReading {
        policy: access.policy.clone(),
        copy,
        fleet,
        order,
    }
}

/// For a Job not placed, where the policy names teams: the dispatcher's Jobs and the
/// namespaces' labels, for its turn in the fair order.
async fn read_order(
    client: &Client,
    job: &Value,
    policy: &jobwarden_admission::policy::Dispatch,
) -> Option<Result<OrderReading, String>> {
    if policy.shares.is_empty() {
        return None;
    }
    let dispatcher = job
        .pointer("/spec/managedBy")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some(
        match crate::workers::read::read_jobs(client, dispatcher).await {
            Ok(jobs) => Ok(OrderReading {
                jobs,
                namespaces: crate::workers::read::team_namespaces(client, &policy.shares).await,
            }),
            Err(e) => Err(e.to_string()),
        },
    )
}

async fn read_copy(
    client: &Client,
    job: &Value,
    worker: &str,
    access: &WorkerAccess,
) -> CopyReading {
    let (via, worker_client) = match reach(client, worker, access).await {
        Reach::Local => return CopyReading::Local,
        Reach::NoKubeconfig(why) => return CopyReading::NoKubeconfig(why),
        Reach::Refused { via, refusal } => return CopyReading::Refused { via, refusal },
        Reach::Unreachable { via, reason } => return CopyReading::Unreachable { via, reason },
        Reach::Client { via, client } => (via, client),
    };
    let text = |p: &str| job.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let (namespace, name, uid) = (
        text("/metadata/namespace"),
        text("/metadata/name"),
        text("/metadata/uid"),
    );
    let jobs: Api<DynamicObject> = Api::namespaced_with(
        worker_client.clone(),
        namespace,
        &ApiResource::erase::<Job>(&()),
    );
    let found = match jobs.get_opt(name).await {
        Ok(found) => found.and_then(|j| serde_json::to_value(j).ok()),
        Err(e) => {
            return CopyReading::Unreachable {
                via,
                reason: worker_error(worker, &e),
            };
        }
    };
    let copy = match found {
        Some(copy) if origin_uid(&copy) == Some(uid) => copy,
        // None, or someone else's Job of the name: nothing more of it is read.
        other => {
            return CopyReading::Read {
                via,
                job: other,
                pods: Ok(Vec::new()),
                events: Ok(Vec::new()),
            };
        }
    };
    let copy_uid = copy
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let pods = match may_list(&worker_client, namespace, "pods").await {
        Ok(true) => Api::<Pod>::namespaced(worker_client.clone(), namespace)
            .list(&ListParams::default().labels(&format!("{CONTROLLER_UID_LABEL}={copy_uid}")))
            .await
            .map(|l| l.items)
            .map_err(|e| worker_error(worker, &e)),
        Ok(false) => Err(format!(
            "{via} may not list pods in namespace {namespace} on worker {worker}"
        )),
        Err(e) => Err(e),
    };
    let events = match may_list(&worker_client, namespace, "events").await {
        Ok(true) => Api::<Event>::namespaced(worker_client.clone(), namespace)
            .list(&ListParams::default().fields(&format!("involvedObject.uid={copy_uid}")))
            .await
            .map(|l| l.items)
            .map_err(|e| worker_error(worker, &e)),
        Ok(false) => Err(format!(
            "{via} may not list events in namespace {namespace} on worker {worker}"
        )),
        Err(e) => Err(e),
    };
    CopyReading::Read {
        via,
        job: Some(copy),
        pods,
        events,
    }
}

/// May these credentials list `resource` (core) in `namespace`? A SelfSubjectAccessReview,
/// which every authenticated user may create.
async fn may_list(client: &Client, namespace: &str, resource: &str) -> Result<bool, String> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.to_owned()),
                verb: Some("list".to_owned()),
                resource: Some(resource.to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .map(|r| r.status.is_some_and(|s| s.allowed))
        .map_err(|e| {
            format!(
                "cannot ask whether {resource} may be listed: {}",
                with_causes(&e)
            )
        })
}
