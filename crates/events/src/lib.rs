//! The core/v1 Events jobwarden writes about Jobs: what an event says ([`EventRecord`]), the Job
//! it is about ([`JobRef`]), who says it ([`EventReporter`]), and the one writer
//! ([`record_job_event`], over [`record_event`], which leader election also uses to say on its
//! Lease who leads). The Job controller plans events and writes them; the periodic audit
//! writes its warnings. Both need these and nothing else of each other, so they live below
//! both: the audit does not depend on the controller for them.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};

/// The Job an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// An event to record on a Job, core/v1 style.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    pub warning: bool,
    pub reason: String,
    pub message: String,
}

/// Who an Event says it is from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventReporter {
    /// `source.component` and `reportingComponent`: the controller name, or the audit's.
    pub component: String,
    /// `reportingInstance`: this replica.
    pub instance: String,
}

/// How often an event happened before it was written, and when: an Event's `count`,
/// `firstTimestamp` and `lastTimestamp`, as client-go's correlator fills them for repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub count: u32,
    pub first: Timestamp,
    pub last: Timestamp,
}

impl Seen {
    /// Once, at `at`.
    pub fn once(at: Timestamp) -> Seen {
        Seen {
            count: 1,
            first: at,
            last: at,
        }
    }
}

/// Writes one core/v1 Event about a Job, as upstream's event recorder does (one object per
/// event; `kubectl describe job` lists them). The controller's events and the audit's warnings
/// both go through here.
pub async fn record_job_event(
    client: &Client,
    job: &JobRef,
    event: &EventRecord,
    reporter: &EventReporter,
) -> Result<(), kube::Error> {
    record_repeated_job_event(client, job, event, reporter, Seen::once(Timestamp::now())).await
}

/// [`record_job_event`] for an event that happened `seen.count` times: one object carrying
/// the count and the first and last times.
pub async fn record_repeated_job_event(
    client: &Client,
    job: &JobRef,
    event: &EventRecord,
    reporter: &EventReporter,
    seen: Seen,
) -> Result<(), kube::Error> {
    let regarding = ObjectReference {
        api_version: Some("batch/v1".to_owned()),
        kind: Some("Job".to_owned()),
        name: Some(job.name.clone()),
        namespace: Some(job.namespace.clone()),
        uid: Some(job.uid.clone()),
        ..ObjectReference::default()
    };
    record_event(client, &regarding, event, reporter, seen).await
}

/// Writes one core/v1 Event about any namespaced object, `regarding` (its namespace and name
/// set): the Job's events above, and leader election's on its Lease.
pub async fn record_event(
    client: &Client,
    regarding: &ObjectReference,
    event: &EventRecord,
    reporter: &EventReporter,
    seen: Seen,
) -> Result<(), kube::Error> {
    let now = Timestamp::now();
    let namespace = regarding.namespace.clone().unwrap_or_default();
    // client-go names events `<object>.<unix nanoseconds in hex>`.
    let name = format!(
        "{}.{:x}",
        regarding.name.as_deref().unwrap_or_default(),
        now.as_nanosecond()
    );
    let event = Event {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.clone()),
            ..ObjectMeta::default()
        },
        involved_object: regarding.clone(),
        reason: Some(event.reason.clone()),
        message: Some(event.message.clone()),
        type_: Some(if event.warning { "Warning" } else { "Normal" }.to_owned()),
        source: Some(EventSource {
            component: Some(reporter.component.clone()),
            host: None,
        }),
        reporting_component: Some(reporter.component.clone()),
        reporting_instance: Some(reporter.instance.clone()),
        first_timestamp: Some(Time(seen.first)),
        last_timestamp: Some(Time(seen.last)),
        count: Some(i32::try_from(seen.count).unwrap_or(i32::MAX)),
        ..Event::default()
    };
    Api::<Event>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), &event)
        .await
        .map(drop)
}
