//! The in-memory API server's semantics, each as kube-apiserver has them.

use serde_json::{Value, json};

use super::*;
use jobwarden_controller::cluster::ApiError;
use jobwarden_controller::plan::PodRef;
use jobwarden_rules::well_known::{CONTROLLER_UID_LABEL, TRACKING_FINALIZER};

fn job() -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"completions": 1, "parallelism": 1,
                 "template": {"spec": {"restartPolicy": "Never",
                              "containers": [{"name": "main", "image": "busybox"}]}}},
        "status": {"active": 5},
    })
}

#[test]
fn zero_omitempty_status_fields_are_not_stored_but_pointer_zeroes_are() {
    let c = InMemoryCluster::default();
    c.with(|s| {
        s.create_job(job()).expect("created");
        let patch = json!({"status": {
            "active": 0, "succeeded": 0, "failed": 0, "ready": 0, "terminating": 0,
            "completedIndexes": "", "failedIndexes": "", "conditions": [],
            "startTime": null,
            "uncountedTerminatedPods": {"succeeded": [], "failed": []},
        }});
        let stored = s.patch_job_status("ns", "j", &patch).expect("patched");
        assert_eq!(
            stored["status"],
            json!({"ready": 0, "terminating": 0, "failedIndexes": "",
                   "uncountedTerminatedPods": {}})
        );
        assert_eq!(
            s.job("ns", "j").expect("stored")["status"],
            stored["status"]
        );
    });
}

#[test]
fn create_defaults_wipes_status_and_sets_identity() {
    let c = InMemoryCluster::default();
    let stored = c.with(|s| s.create_job(job())).expect("created");
    assert_eq!(stored["status"], json!({}));
    assert_eq!(stored["metadata"]["generation"], 1);
    assert_eq!(stored["metadata"]["resourceVersion"], "1");
    let uid = stored["metadata"]["uid"].as_str().expect("a uid");
    assert_eq!(
        stored["spec"]["selector"]["matchLabels"][CONTROLLER_UID_LABEL],
        uid
    );
    assert_eq!(
        stored["spec"]["template"]["metadata"]["labels"][CONTROLLER_UID_LABEL],
        uid
    );
    assert_eq!(stored["spec"]["backoffLimit"], 6);
    assert_eq!(
        stored["spec"]["podReplacementPolicy"],
        "TerminatingOrFailed"
    );
}

#[test]
fn an_invalid_job_is_refused() {
    let c = InMemoryCluster::default();
    let mut bad = job();
    bad["spec"]["parallelism"] = json!(-1);
    let err = c.with(|s| s.create_job(bad)).expect_err("refused");
    assert!(
        err.to_string()
            .contains("spec.parallelism: Invalid value: -1"),
        "{err}"
    );
}

#[test]
fn generation_moves_with_the_spec_only_and_each_write_gets_a_new_resource_version() {
    let c = InMemoryCluster::default();
    c.with(|s| {
        s.create_job(job()).expect("created");
        let labelled = s
            .update_job("ns", "j", |j| j["metadata"]["labels"] = json!({"a": "b"}))
            .expect("updated");
        assert_eq!(labelled["metadata"]["generation"], 1);
        assert_eq!(labelled["metadata"]["resourceVersion"], "2");
        let suspended = s
            .update_job("ns", "j", |j| j["spec"]["suspend"] = json!(true))
            .expect("updated");
        assert_eq!(suspended["metadata"]["generation"], 2);
        assert_eq!(suspended["metadata"]["resourceVersion"], "3");
        let status = s
            .patch_job_status("ns", "j", &json!({"status": {"active": 1}}))
            .expect("patched");
        assert_eq!(status["metadata"]["generation"], 2);
        assert_eq!(status["metadata"]["resourceVersion"], "4");
        // An unchanged object is not written again.
        let same = s
            .patch_job_status("ns", "j", &json!({"status": {"active": 1}}))
            .expect("patched");
        assert_eq!(same["metadata"]["resourceVersion"], "4");
    });
}

#[test]
fn a_status_write_ignores_the_spec_and_a_spec_write_ignores_the_status() {
    let c = InMemoryCluster::default();
    c.with(|s| {
        s.create_job(job()).expect("created");
        let after = s
            .patch_job_status(
                "ns",
                "j",
                &json!({"spec": {"parallelism": 9}, "status": {"active": 1}}),
            )
            .expect("patched");
        assert_eq!(after["spec"]["parallelism"], 1);
        assert_eq!(after["status"]["active"], 1);
        let after = s
            .update_job("ns", "j", |j| {
                j["spec"]["parallelism"] = json!(2);
                j["status"]["active"] = json!(7);
            })
            .expect("updated");
        assert_eq!(after["spec"]["parallelism"], 2);
        assert_eq!(after["status"]["active"], 1);
    });
}

#[test]
fn a_stale_resource_version_is_a_conflict() {
    let c = InMemoryCluster::default();
    c.with(|s| {
        s.create_job(job()).expect("created");
        s.update_job("ns", "j", |j| j["spec"]["suspend"] = json!(true))
            .expect("updated");
        let stale = json!({"metadata": {"resourceVersion": "1"}, "status": {"active": 1}});
        assert!(matches!(
            s.patch_job_status("ns", "j", &stale),
            Err(ApiError::Conflict)
        ));
    });
}

#[test]
fn finalizers_hold_a_deleted_pod_until_they_are_removed() {
    let c = InMemoryCluster::default();
    c.with(|s| {
        let pod = json!({"metadata": {"generateName": "j-", "finalizers": [TRACKING_FINALIZER, "other/x"]},
                         "spec": {"nodeName": "n1", "containers": [{"name": "main"}]}});
        let name = s.create_pod("ns", &pod).expect("created");
        let p = pod_ref(&s.pod("ns", &name).expect("stored"));
        let wrong = PodRef {
            name: name.clone(),
            uid: "another".into(),
        };
        assert!(matches!(
            s.delete_pod("ns", &wrong),
            Err(ApiError::Conflict)
        ));
        s.delete_pod("ns", &p).expect("deleted");
        let deleting = s.pod("ns", &name).expect("still there");
        assert_eq!(deleting["metadata"]["deletionGracePeriodSeconds"], 30);
        s.finish_deleted_pod("ns", &name).expect("kubelet");
        assert_eq!(s.pod("ns", &name).expect("held")["status"]["phase"], "Failed");
        s.remove_pod_finalizer("ns", &p).expect("patched");
        let held = s.pod("ns", &name).expect("still held by the other finalizer");
        assert_eq!(finalizers(&held), ["other/x"]);
    });
}

#[test]
fn watchers_see_every_change_in_order_at_their_own_pace() {
    let c = InMemoryCluster::default();
    let fast = c.subscribe(Resource::Jobs);
    let slow = c.subscribe(Resource::Jobs);
    c.with(|s| {
        s.create_job(job()).expect("created");
        s.update_job("ns", "j", |j| j["spec"]["suspend"] = json!(true))
            .expect("updated");
    });
    let got = c.next_events(Resource::Jobs, fast, 10);
    assert_eq!(
        got.iter().map(|e| e.change).collect::<Vec<_>>(),
        [Change::Added, Change::Modified]
    );
    assert_eq!(c.pending_events(Resource::Jobs, slow), 2);
    assert_eq!(c.next_events(Resource::Jobs, slow, 1).len(), 1);
    c.with(|s| s.delete_job("ns", "j")).expect("deleted");
    let rest = c.next_events(Resource::Jobs, slow, 10);
    assert_eq!(
        rest.iter().map(|e| e.change).collect::<Vec<_>>(),
        [Change::Modified, Change::Deleted]
    );
}
