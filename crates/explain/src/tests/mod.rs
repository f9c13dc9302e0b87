//! The story told of Jobs described in a line or two: the Job as stored, its pods as the
//! kubelet left them, the moment it is told at; the judgement expected beside them.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use crate::explanation::*;
use crate::story::{LeaseReading, Observed, Settings, explain};
use crate::text::render;

mod dispatch;
mod fit;
mod history;
mod workers;

const T0: &str = "2026-01-01T00:00:00Z";
const NAMES: &str = "jobwarden.io/pod-failure-policy-rule-names";

/// `secs` after T0, as the API writes times.
fn at(secs: i64) -> String {
    t(secs).to_string()
}

fn t(secs: i64) -> Timestamp {
    let t0: Timestamp = T0.parse().expect("a time");
    t0.checked_add(SignedDuration::from_secs(secs))
        .expect("in range")
}

struct JobB(Value);

fn job(managed_by: Option<&str>) -> JobB {
    let mut j = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "uid": "job-uid", "creationTimestamp": T0},
        "spec": {
            "completions": 1, "parallelism": 1, "backoffLimit": 6, "completionMode": "NonIndexed",
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "x"}]}}
        },
        "status": {}
    });
    if let Some(m) = managed_by {
        j["spec"]["managedBy"] = json!(m);
    }
    JobB(j)
}

impl JobB {
    fn set(mut self, pointer: &str, value: Value) -> Self {
        let (parent, key) = pointer.rsplit_once('/').expect("a pointer");
        if let Some(obj) = self.0.pointer_mut(parent).and_then(Value::as_object_mut) {
            obj.insert(key.to_owned(), value);
        }
        self
    }

    fn indexed(self, completions: i32) -> Self {
        self.set("/spec/completionMode", json!("Indexed"))
            .set("/spec/completions", json!(completions))
            .set("/spec/parallelism", json!(completions))
    }

    /// Rule 0 `ExitCode2` FailJob on exit 2; rule 1 unnamed Ignore on DisruptionTarget.
    fn named_rules(self) -> Self {
        self.set("/metadata/annotations", json!({NAMES: r#"["ExitCode2", null]"#}))
            .set("/spec/podReplacementPolicy", json!("Failed"))
            .set(
                "/spec/podFailurePolicy",
                json!({"rules": [
                    {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [2]}},
                    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
                ]}),
            )
    }
}

struct PodB(Value);

fn pod(name: &str) -> PodB {
    PodB(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                     "creationTimestamp": T0,
                     "labels": {"batch.kubernetes.io/controller-uid": "job-uid"}},
        "spec": {"containers": [{"name": "main", "image": "x"}]},
        "status": {"phase": "Running"}
    }))
}

impl PodB {
    fn index(mut self, i: i32) -> Self {
        self.0["metadata"]["annotations"] =
            json!({"batch.kubernetes.io/job-completion-index": i.to_string()});
        self
    }

    fn annotate(mut self, key: &str, value: &str) -> Self {
        self.0["metadata"]["annotations"][key] = json!(value);
        self
    }

    fn ended(mut self, phase: &str, code: i32, finished: i64) -> Self {
        self.0["status"] = json!({
            "phase": phase,
            "containerStatuses": [{"name": "main", "image": "x", "imageID": "", "ready": false,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": code, "finishedAt": at(finished)}}}]
        });
        self
    }

    fn condition(mut self, type_: &str) -> Self {
        self.0["status"]["conditions"] = json!([{"type": type_, "status": "True"}]);
        self
    }

    fn created(mut self, secs: i64) -> Self {
        self.0["metadata"]["creationTimestamp"] = json!(at(secs));
        self
    }

    fn deleted(mut self) -> Self {
        self.0["metadata"]["deletionTimestamp"] = json!(T0);
        self
    }

    fn build(self) -> Pod {
        serde_json::from_value(self.0).expect("a pod")
    }
}

fn settings() -> Settings {
    Settings {
        controller_name: "jobwarden.io/job-controller".to_owned(),
        dispatcher_name: "jobwarden.io/dispatcher".to_owned(),
        stuck_after: Duration::from_secs(120),
    }
}

fn tell(job: JobB, pods: Vec<PodB>, now: i64) -> Explanation {
    tell_with(job, pods, now, LeaseReading::NotRead)
}

fn tell_with(job: JobB, pods: Vec<PodB>, now: i64, lease: LeaseReading) -> Explanation {
    let observed = Observed {
        job: job.0,
        pods: pods.into_iter().map(PodB::build).collect(),
        events: Vec::new(),
        lease,
        dispatch: None,
    };
    explain(&observed, t(now), &settings()).expect("explained")
}

#[test]
fn each_failed_pod_is_matched_by_the_controller_s_own_matcher() {
    let rule = |index, name: Option<&str>, action: &str| {
        Some(MatchedRule {
            index,
            name: name.map(str::to_owned),
            action: action.to_owned(),
        })
    };
    let cases = [
        (
            "exit 2: the named FailJob rule",
            pod("p").ended("Failed", 2, 5),
            rule(0, Some("ExitCode2"), "FailJob"),
        ),
        (
            "disrupted: the unnamed Ignore rule",
            pod("p")
                .ended("Failed", 143, 5)
                .condition("DisruptionTarget"),
            rule(1, None, "Ignore"),
        ),
        ("exit 3: no rule", pod("p").ended("Failed", 3, 5), None),
        (
            "succeeded: nothing to match",
            pod("p").ended("Succeeded", 0, 5),
            None,
        ),
    ];
    for (what, p, want) in cases {
        let e = tell(job(Some("example.com/e2e")).named_rules(), vec![p], 10);
        assert_eq!(e.finished_pods.len(), 1, "{what}");
        assert_eq!(e.finished_pods[0].rule, want, "{what}");
    }
}

#[test]
fn what_the_job_waits_for() {
    let backoff = |index, failures, left: u64, now: i64| Wait::Backoff {
        index,
        failures,
        remaining_seconds: left,
        until: t(now + i64::try_from(left).expect("small")),
    };
    // What, the Job, its pods, now, what it waits for.
    type Case = (&'static str, JobB, Vec<PodB>, i64, Vec<Wait>);
    let cases: Vec<Case> = vec![
        (
            "three failures since the last success: 40s from the last, 35s left",
            job(None),
            vec![pod("a").ended("Failed", 1, 1), pod("b").ended("Failed", 1, 3), pod("c").ended("Failed", 1, 5)],
            10,
            vec![backoff(None, 3, 35, 10)],
        ),
        (
            "a back-off already over",
            job(None),
            vec![pod("a").ended("Failed", 1, 5)],
            30,
            vec![],
        ),
        (
            "a running pod fills the parallelism: no back-off holds anything",
            job(None),
            vec![pod("a").ended("Failed", 1, 5), pod("b")],
            6,
            vec![],
        ),
        (
            "per index: the index's second failure backs off 20s",
            job(None).indexed(3).set("/spec/backoffLimitPerIndex", json!(3)),
            vec![
                pod("i0").index(0),
                pod("i1").index(1).annotate("batch.kubernetes.io/job-index-failure-count", "1").ended("Failed", 1, 5),
                pod("i2").index(2),
            ],
            10,
            vec![backoff(Some(1), 2, 15, 10)],
        ),
        (
            "podReplacementPolicy Failed: a deleted pod still running",
            job(None).named_rules(),
            vec![pod("old").deleted()],
            10,
            vec![Wait::Terminating { pods: vec!["old".to_owned()] }],
        ),
        (
            "active deadline",
            job(None).set("/spec/activeDeadlineSeconds", json!(600)).set("/status/startTime", json!(at(0))),
            vec![pod("a")],
            100,
            vec![Wait::ActiveDeadline { remaining_seconds: 500, deadline: t(600) }],
        ),
        (
            "suspended, with the condition's words",
            job(None).set("/spec/suspend", json!(true)).set(
                "/status/conditions",
                json!([{"type": "Suspended", "status": "True", "reason": "JobSuspended", "message": "Job suspended", "lastTransitionTime": at(3)}]),
            ),
            vec![pod("a").ended("Failed", 1, 5)],
            10,
            vec![Wait::Suspended { since: Some(t(3)), reason: Some("JobSuspended".to_owned()), message: Some("Job suspended".to_owned()) }],
        ),
        (
            "a finished Job waits for nothing",
            job(None).set("/status/conditions", json!([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}])),
            vec![pod("a").ended("Failed", 1, 5)],
            6,
            vec![],
        ),
    ];
    for (what, job, pods, now, want) in cases {
        assert_eq!(tell(job, pods, now).waiting, want, "{what}");
    }
}

#[test]
fn a_success_rule_says_which_indexes_it_still_needs() {
    let j = job(Some("jobwarden.io/job-controller"))
        .indexed(6)
        .set(
            "/spec/successPolicy",
            json!({"rules": [{"succeededIndexes": "0-3", "succeededCount": 2}, {"succeededIndexes": "5"}]}),
        )
        .set("/status/completedIndexes", json!("0,4"));
    let e = tell(
        j,
        vec![pod("p1").index(1), pod("p2").index(2).ended("Failed", 1, 1)],
        100,
    );
    assert_eq!(
        e.waiting,
        vec![
            Wait::SuccessRule {
                rule: 0,
                succeeded_indexes: Some("0-3".to_owned()),
                succeeded_count: Some(2),
                missing_indexes: "1-3".to_owned(),
                needs: 1,
            },
            Wait::SuccessRule {
                rule: 1,
                succeeded_indexes: Some("5".to_owned()),
                succeeded_count: None,
                missing_indexes: "5".to_owned(),
                needs: 1,
            },
        ]
    );
    let ix = e.indexes.expect("an Indexed Job");
    assert_eq!(
        (
            ix.succeeded.as_str(),
            ix.failed.as_str(),
            ix.running.as_str(),
            ix.backoff.as_str(),
            ix.waiting.as_str()
        ),
        ("0,4", "", "1", "", "2,3,5")
    );
}

#[test]
fn a_delegated_job_nobody_acts_on_is_stuck_once_past_the_threshold() {
    let nobody = || job(Some("example.com/nobody"));
    let stuck = |now| tell(nobody(), vec![], now).runner.stuck;
    assert_eq!(stuck(119), None);
    assert_eq!(
        stuck(180),
        Some(Stuck {
            managed_by: "example.com/nobody".to_owned(),
            age_seconds: 180,
            after_seconds: 120,
        })
    );
    assert_eq!(
        tell(nobody(), vec![pod("a")], 180).runner.stuck,
        None,
        "it has a pod"
    );
    assert_eq!(
        tell(job(None), vec![], 180).runner.stuck,
        None,
        "the built-in controller"
    );
    assert_eq!(
        tell(nobody(), vec![], 180).runner.controller,
        ControllerKind::Other
    );
}

#[test]
fn jobwarden_s_lease_tells_whether_a_replica_leads() {
    let lease = |holder: &str, renewed: i64| {
        LeaseReading::Read {
        namespace: "jobwarden-system".to_owned(),
        name: "jobwarden-job-controller".to_owned(),
        lease: Box::new(
            serde_json::from_value::<Lease>(json!({
                "metadata": {"name": "jobwarden-job-controller"},
                "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "renewTime": format!("{}", t(renewed))}
            }))
            .expect("a Lease"),
        ),
    }
    };
    let ours = || job(Some("jobwarden.io/job-controller"));
    let view = |reading| {
        tell_with(ours(), vec![], 100, reading)
            .runner
            .lease
            .expect("read")
    };
    let fresh = view(lease("jobwarden-a", 97));
    assert_eq!(
        (
            fresh.holder.as_deref(),
            fresh.since_renewal_seconds,
            fresh.expired
        ),
        (Some("jobwarden-a"), Some(3), false)
    );
    assert!(
        view(lease("jobwarden-a", 60)).expired,
        "renewed 40s ago, held for 15s"
    );
    assert!(view(lease("", 99)).expired, "released");
    let refused = view(LeaseReading::Unreadable {
        namespace: "jobwarden-system".to_owned(),
        name: "jobwarden-job-controller".to_owned(),
        reason: "forbidden".to_owned(),
    });
    assert_eq!(refused.unreadable.as_deref(), Some("forbidden"));
    let other = tell_with(
        job(Some("example.com/x")),
        vec![],
        100,
        lease("jobwarden-a", 97),
    );
    assert_eq!(
        other.runner.lease, None,
        "another controller's Job says nothing of jobwarden's Lease"
    );
}

#[test]
fn the_text_tells_it_in_simulate_s_voice() {
    let j = job(Some("example.com/e2e"))
        .named_rules()
        .set("/status/startTime", json!(at(0)))
        .set("/status/failed", json!(1));
    let e = tell(
        j,
        vec![
            pod("j-a").ended("Failed", 2, 4),
            pod("j-b").ended("Failed", 3, 6),
        ],
        10,
    );
    assert_eq!(
        render(&e),
        "\
Job ns/j, run by example.com/e2e (spec.managedBy), not by the built-in Job controller.
Its status last changed 10s ago; its pods 4s ago.

Pods:
  pod j-a failed 6s ago: main exited 2; rule 0 \"ExitCode2\" matched: FailJob
  pod j-b failed 4s ago: main exited 3; no pod failure policy rule matched: it counts as a failure

Waiting for:
  its controller to fail it: pod j-a matched rule 0 \"ExitCode2\": FailJob

Events: none.
"
    );
    let stuck = tell(job(Some("example.com/nobody")), vec![], 150);
    assert!(
        render(&stuck).contains("No controller is running it: \"example.com/nobody\" shows no sign of acting on it 2m0s after its creation (it is 2m30s old,"),
        "{}",
        render(&stuck)
    );
}

#[test]
fn the_status_write_is_read_from_managed_fields_else_from_the_status_times() {
    let fields = json!([
        {"manager": "kubectl", "operation": "Update", "time": at(1)},
        {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status", "time": at(7)},
        {"manager": "older", "operation": "Update", "subresource": "status", "time": at(4)},
    ]);
    let written = tell(
        job(None)
            .set("/metadata/managedFields", fields)
            .set("/status/startTime", json!(at(2))),
        vec![],
        10,
    );
    assert_eq!(
        (
            written.runner.status_changed,
            written.runner.status_writer.as_deref()
        ),
        (Some(t(7)), Some("kube-controller-manager"))
    );
    assert!(
        render(&written).contains(
            "Its status was last written 3s ago by kube-controller-manager; it has no pods."
        ),
        "{}",
        render(&written)
    );
    let recorded = tell(job(None).set("/status/startTime", json!(at(2))), vec![], 10);
    assert_eq!(
        (
            recorded.runner.status_changed,
            recorded.runner.status_writer
        ),
        (Some(t(2)), None)
    );
}
