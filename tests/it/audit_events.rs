//! The periodic audit's Kubernetes Event sink at its boundary: the Warning Events it writes, as
//! the API server receives them, through the real `kube::Client` to the fake apiserver.

use crate::support;

use std::sync::Arc;

use jobwarden_admission::Policy;
use jobwarden_audit::{AuditConfig, AuditMetrics, KubeEventSink, PeriodicAudit};
use jobwarden_events::EventReporter;
use serde_json::{Value, json};
use support::fake_apiserver::FakeApiServer;
use support::stored::{manifest, stored};

fn client(server: &FakeApiServer) -> kube::Client {
    kube::Client::try_from(kube::Config::new(server.url.parse().expect("a URL"))).expect("a client")
}

#[tokio::test]
async fn warning_events_name_the_job_by_uid_and_carry_the_violations() {
    let server = FakeApiServer::start(vec![]);
    let job = stored(
        manifest("team-a", "bad", json!({"parallelism": -1})),
        json!({}),
    );
    let uid = job["metadata"]["uid"].clone();
    let jobs = Arc::new(std::sync::Mutex::new(vec![job]));
    let snapshot = {
        let jobs = jobs.clone();
        move || Some(jobs.lock().expect("not poisoned").clone())
    };
    let mut audit = PeriodicAudit::new(
        Arc::new(Policy::default()),
        snapshot,
        KubeEventSink::new(
            client(&server),
            EventReporter {
                component: "jobwarden.io/audit".into(),
                instance: "replica-1".into(),
            },
        ),
        AuditMetrics::default(),
        AuditConfig::default(),
    );
    let report = audit.pass().await;
    assert_eq!((report.events_published, report.events_failed), (1, 0));

    // The same Job breaks the same rule differently: a new Event with the new message.
    let changed = stored(
        manifest("team-a", "bad", json!({"parallelism": -2})),
        json!({}),
    );
    *jobs.lock().expect("not poisoned") = vec![changed];
    assert_eq!(audit.pass().await.events_published, 1);
    assert_eq!(audit.pass().await.events_published, 0);

    let events = server.events();
    assert_eq!(events.len(), 2, "{events:?}");
    for (method, path, _) in &events {
        assert_eq!(method, "POST");
        assert_eq!(path, "/api/v1/namespaces/team-a/events");
    }
    let event: &Value = &events[0].2;
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["reason"], "AuditInvalidSpec");
    assert_eq!(event["source"]["component"], "jobwarden.io/audit");
    assert_eq!(event["reportingComponent"], "jobwarden.io/audit");
    assert_eq!(event["reportingInstance"], "replica-1");
    assert_eq!(
        event["message"],
        "spec.parallelism: Invalid value: -1: must be greater than or equal to 0"
    );
    assert_eq!(
        event["involvedObject"],
        json!({"apiVersion": "batch/v1", "kind": "Job", "namespace": "team-a", "name": "bad", "uid": uid})
    );
    assert_eq!(event["metadata"]["namespace"], "team-a");
    assert_eq!(event["count"], 1);
    assert_eq!(
        events[1].2["message"],
        "spec.parallelism: Invalid value: -2: must be greater than or equal to 0"
    );
}
