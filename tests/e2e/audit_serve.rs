//! `serve`'s in-process audit on a real kube-apiserver: the built binary, both faces, leading
//! its own Lease with a short `--audit-interval-seconds`, and Jobs stored while no webhook
//! was registered: one whose rule-names annotation repeats a name, one delegated to a
//! controller that does not exist. Its first pass as leader must publish each as a Warning
//! Event on the Job and a `jobwarden_audit_violations` series, and log "audit pass".
//!
//! It runs on the test binary's own control plane (`jobwarden-envtest`), or on the cluster
//! `JOBWARDEN_E2E_KUBECONFIG` names; without either it prints one skip line and passes.
//! `serve` runs under the ServiceAccount and RBAC `deploy/` installs, and `/metrics` is read
//! as a Prometheus bound to the metrics reader role reads it.

use crate::support;

use std::time::{Duration, Instant};

use jobwarden_envtest::ControlPlane;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Namespace};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};
use support::served::Served;

const TIMEOUT: Duration = Duration::from_secs(90);
const INTERVAL_SECONDS: u64 = 5;

fn job(name: &str, annotations: Value, spec: Value) -> Job {
    let mut job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["true"]}]
        }}}
    });
    if let (Some(target), Some(extra)) = (job["spec"].as_object_mut(), spec.as_object()) {
        target.extend(extra.clone());
    }
    serde_json::from_value(job).expect("a test Job")
}

/// The Warning Events on Job `name`, as `(reason, message)`.
async fn warnings(events: &Api<Event>, name: &str) -> Vec<(String, String)> {
    let list = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .expect("events are listed");
    list.items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

#[tokio::test]
async fn a_leading_replica_publishes_stored_violations_as_events_and_gauge_series() {
    let Some(plane) = ControlPlane::shared() else {
        return;
    };
    let client = plane.client().await;
    let ns = plane.create_namespace(&client, "audit-serve").await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    // No webhook is registered on this control plane: the API server stores what jobwarden
    // would deny.
    let planted = [
        job(
            "dup-rule-names",
            json!({"jobwarden.io/pod-failure-policy-rule-names": r#"["Retry", "Retry"]"#}),
            json!({"suspend": true, "podFailurePolicy": {"rules": [
                {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}},
                {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [2]}}
            ]}}),
        ),
        job(
            "nobody-runs-it",
            json!({}),
            json!({"managedBy": "example.com/nobody"}),
        ),
    ];
    for j in &planted {
        jobs.create(&PostParams::default(), j)
            .await
            .expect("the Job is stored");
    }

    let dir = support::scratch_dir("audit-serve-e2e");
    let identity = plane.installed_identity().await;
    // The install's Lease Role in the test's namespace, so this replica leads a Lease of its own.
    identity.grant_in(plane, &ns);
    let reader = plane
        .metrics_reader_token(&ns, "audit-serve-e2e-prometheus")
        .await;
    let interval = INTERVAL_SECONDS.to_string();
    let served = Served::start(
        &dir,
        &identity,
        &ns,
        &[
            "--audit-interval-seconds",
            &interval,
            "--audit-stuck-after-seconds",
            "1",
        ],
    );
    let log = || std::fs::read_to_string(&served.log).unwrap_or_default();
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let want_series = [
        format!("jobwarden_audit_violations{{namespace=\"{ns}\",rule=\"rule_names\"}} 1"),
        format!("jobwarden_audit_violations{{namespace=\"{ns}\",rule=\"stuck_delegation\"}} 1"),
    ];
    let started = Instant::now();
    let (dup, nobody) = loop {
        let dup = warnings(&events, "dup-rule-names").await;
        let nobody = warnings(&events, "nobody-runs-it").await;
        let metrics = served.get("/metrics", Some(&reader));
        let series = want_series.iter().all(|s| metrics.lines().any(|l| l == s));
        let logged = log().contains("\"audit pass\"");
        if !dup.is_empty() && !nobody.is_empty() && series && logged {
            break (dup, nobody);
        }
        assert!(
            started.elapsed() < TIMEOUT,
            "no audit pass published the stored violations (events {dup:?} {nobody:?}); /metrics:\n{metrics}\nlog:\n{}",
            log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    identity.assert_nothing_refused();
    drop(served);
    let _ = Api::<Namespace>::all(client)
        .delete(&ns, &DeleteParams::default())
        .await;
    assert_eq!(
        dup,
        [(
            "AuditInvalidRuleNames".to_owned(),
            "spec.podFailurePolicy.rules[1].name: Duplicate value: \"Retry\"".to_owned()
        )]
    );
    assert_eq!(nobody.len(), 1, "{nobody:?}");
    assert_eq!(nobody[0].0, "AuditStuckDelegation");
    assert!(
        nobody[0].1.starts_with(
            "spec.managedBy: no controller is running this Job: \"example.com/nobody\""
        ),
        "{nobody:?}"
    );
}
