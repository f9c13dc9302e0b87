//! The thin, read-only shell of `jobwarden workers`: on the management cluster, with the
//! caller's credentials, the dispatcher's Jobs and the Warning Events on them; on each worker,
//! reached as `explain` reaches one (the dispatcher's judge first), its Nodes and its
//! unfinished pods, cluster-wide. A worker that cannot be read is said, with why.

use std::collections::BTreeMap;

use jobwarden_admission::policy::{Capacity, Dispatch, Share};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Namespace, Node, Pod};
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, Client};
use serde_json::Value;

use super::view::{JobsRead, Listing, WorkerRead, WorkerReading};
use crate::explanation::EventLine;
use crate::reach::{Reach, WorkerAccess, reach, with_causes, worker_error};
use crate::story::event_line;

/// The pods that hold room: those not ended (as the dispatcher's watch selects them).
pub const UNFINISHED_PODS: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// Why the management cluster's side could not be read.
#[derive(Debug, thiserror::Error)]
pub enum JobsError {
    #[error("the API server does not answer: {0}")]
    NoAnswer(#[source] kube::Error),
    #[error("cannot list Jobs cluster-wide: {0}")]
    Jobs(#[source] kube::Error),
    #[error("cannot read a Job: {0}")]
    Decode(#[source] serde_json::Error),
}

/// The Jobs `dispatcher` runs, and the reason of its latest Warning Event on each that has no
/// worker. Events the caller may not list leave the reasons unknown, not the command failed.
pub async fn read_jobs(client: &Client, dispatcher: &str) -> Result<JobsRead, JobsError> {
    let jobs: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::erase::<Job>(&()));
    let jobs: Vec<Value> = jobs
        .list(&ListParams::default())
        .await
        .map_err(|e| match e {
            kube::Error::Api(_) => JobsError::Jobs(e),
            other => JobsError::NoAnswer(other),
        })?
        .items
        .into_iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()
        .map_err(JobsError::Decode)?;
    let jobs: Vec<Value> = jobs
        .into_iter()
        .filter(|j| j.pointer("/spec/managedBy").and_then(Value::as_str) == Some(dispatcher))
        .collect();
    let waiting = jobs
        .iter()
        .any(|j| jobwarden_dispatcher::copy::record::recorded(j).is_none());
    let (latest_warning, held) = if waiting {
        (
            latest_warnings(client, dispatcher).await,
            latest_holds(client, dispatcher).await,
        )
    } else {
        (BTreeMap::new(), BTreeMap::new())
    };
    Ok(JobsRead {
        jobs,
        latest_warning,
        held,
    })
}

/// The worker named by the dispatcher's latest `RoomHeld` Event, by the UID of the Job it is
/// on ("room is held for the Job on worker W (...)").
async fn latest_holds(client: &Client, dispatcher: &str) -> BTreeMap<String, String> {
    latest_by_object(client, dispatcher, "reason=RoomHeld", |line| {
        let (_, rest) = line.message.split_once(" on worker ")?;
        rest.split_whitespace().next().map(str::to_owned)
    })
    .await
}

/// The labels of every namespace, where a team of `shares` names namespaces by a selector;
/// none otherwise, or where the caller may not list namespaces (those teams then show only
/// their named namespaces' Jobs).
pub async fn team_namespaces(
    client: &Client,
    shares: &[Share],
) -> BTreeMap<String, BTreeMap<String, String>> {
    if shares.iter().any(|s| s.namespaces.selector.is_some()) {
        namespace_labels(client).await
    } else {
        BTreeMap::new()
    }
}

async fn namespace_labels(client: &Client) -> BTreeMap<String, BTreeMap<String, String>> {
    let Ok(list) = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await
    else {
        return BTreeMap::new();
    };
    list.items
        .into_iter()
        .filter_map(|n| Some((n.metadata.name?, n.metadata.labels.unwrap_or_default())))
        .collect()
}

/// The reason of the dispatcher's latest Warning Event, by the UID of the object it is on.
async fn latest_warnings(client: &Client, dispatcher: &str) -> BTreeMap<String, String> {
    latest_by_object(client, dispatcher, "type=Warning", |line| {
        Some(line.reason.clone())
    })
    .await
}

/// What `said` reads off the dispatcher's latest Event of those `fields` select, by the UID of
/// the object it is on. Unknown, not failed, where the caller may not list Events.
async fn latest_by_object(
    client: &Client,
    dispatcher: &str,
    fields: &str,
    said: impl Fn(&EventLine) -> Option<String>,
) -> BTreeMap<String, String> {
    let Ok(events) = Api::<Event>::all(client.clone())
        .list(&ListParams::default().fields(fields))
        .await
    else {
        return BTreeMap::new();
    };
    let mut latest: BTreeMap<String, (Option<k8s_openapi::jiff::Timestamp>, String)> =
        BTreeMap::new();
    for e in &events.items {
        let line = event_line(e);
        let Some(uid) = e.involved_object.uid.clone() else {
            continue;
        };
        if line.from != dispatcher {
            continue;
        }
        let Some(value) = said(&line) else {
            continue;
        };
        if latest.get(&uid).is_none_or(|(at, _)| line.at >= *at) {
            latest.insert(uid, (line.at, value));
        }
    }
    latest.into_iter().map(|(uid, (_, v))| (uid, v)).collect()
}

/// Every worker of the policy, read all at once (each bounded by its client's timeout, so a
/// fleet with workers that do not answer takes about as long as the slowest one), in the
/// policy's order.
pub async fn read_workers(
    client: &Client,
    policy: &Dispatch,
    access: &WorkerAccess,
) -> Vec<WorkerReading> {
    futures::future::join_all(policy.workers.iter().map(|worker| async move {
        WorkerReading {
            name: worker.name.clone(),
            unbounded: worker.capacity == Capacity::Unbounded,
            draining: worker.draining,
            read: read_worker(client, &worker.name, access).await,
        }
    }))
    .await
}

/// One worker: reached, then its Nodes and unfinished pods listed.
pub async fn read_worker(client: &Client, worker: &str, access: &WorkerAccess) -> WorkerRead {
    let (via, worker_client) = match reach(client, worker, access).await {
        Reach::Local => (
            "this cluster (local: true), with your credentials".to_owned(),
            client.clone(),
        ),
        Reach::NoKubeconfig(why) => return WorkerRead::NoKubeconfig(why),
        Reach::Refused { via, refusal } => return WorkerRead::Refused { via, refusal },
        Reach::Unreachable { via, reason } => return WorkerRead::Lost { via, reason },
        Reach::Client { via, client } => (via, client),
    };
    let nodes = match list(
        &Api::<Node>::all(worker_client.clone()),
        &ListParams::default(),
        worker,
    )
    .await
    {
        Ok(nodes) => nodes,
        Err(reason) => return WorkerRead::Lost { via, reason },
    };
    let pods = match list(
        &Api::<Pod>::all(worker_client),
        &ListParams::default().fields(UNFINISHED_PODS),
        worker,
    )
    .await
    {
        Ok(pods) => pods,
        Err(reason) => return WorkerRead::Lost { via, reason },
    };
    WorkerRead::Read { via, nodes, pods }
}

/// A list, its refusal (403: the role is not granted cluster-wide), or why the worker is lost
/// (no answer, or the credentials refused).
async fn list<K>(api: &Api<K>, params: &ListParams, worker: &str) -> Result<Listing<K>, String>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.list(params).await {
        Ok(list) => Ok(Listing::Items(list.items)),
        Err(kube::Error::Api(s)) if s.code == 403 => Ok(Listing::Forbidden(s.message)),
        Err(e @ kube::Error::Api(_)) => Err(worker_error(worker, &e)),
        Err(e) => Err(format!(
            "worker {worker} does not answer: {}",
            with_causes(&e)
        )),
    }
}
