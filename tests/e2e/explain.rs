//! `jobwarden explain` (and `jobwarden audit`) against a real kube-apiserver. The test plays a
//! Job controller of its own, `example.com/e2e-explain`, and the kubelet: it makes the pods
//! and writes their status as the kubelet would. Six Jobs: one whose pod failed with an
//! exit code a named rule matches, one waiting out its back-off after five failures, an Indexed
//! one whose index 1 backs off under `backoffLimitPerIndex`, one
//! delegated to `example.com/nobody`, which does not exist; one jobwarden runs, whose
//! Lease it reads; and an Indexed one with a retried index, a named rule matched and a
//! back-off, drawn with `-o svg`. What `explain` prints is compared word for word with
//! examples/explain/ (spans of time and the namespace aside), and those files are what
//! docs/cli.md shows.
//!
//! It runs on the test binary's own control plane (`jobwarden-envtest`), or on the cluster
//! `JOBWARDEN_E2E_KUBECONFIG` names; without either it prints one skip line and passes.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use jobwarden_envtest::ControlPlane;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::support::svg;

const TIMEOUT: Duration = Duration::from_secs(60);
const CONTROLLER: &str = "example.com/e2e-explain";
const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/explain");
/// The namespace the examples show.
const SHOWN_NAMESPACE: &str = "team-a";

fn job(name: &str, managed_by: &str, extra: Value) -> Job {
    let mut job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "managedBy": managed_by,
            "backoffLimit": 6,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "exit $EXIT_CODE"]}]
            }}
        }
    });
    if let Some(target) = job.as_object_mut() {
        json_merge(target, &extra);
    }
    serde_json::from_value(job).expect("a test Job")
}

fn json_merge(target: &mut serde_json::Map<String, Value>, extra: &Value) {
    for (k, v) in extra.as_object().into_iter().flatten() {
        match (target.get_mut(k), v) {
            (Some(Value::Object(t)), Value::Object(_)) => json_merge(t, v),
            _ => {
                target.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Makes pod `name` of `job` as its controller would (with `annotations`), then, given a
/// `code`, ends it as the kubelet would: container `main` exited `code` just now (the pod
/// succeeded with 0, failed otherwise).
async fn make_pod(pods: &Api<Pod>, job: &Job, name: &str, annotations: Value, code: Option<i32>) {
    let uid = job.uid().expect("a stored Job has a uid");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "annotations": annotations,
            "labels": {
                "batch.kubernetes.io/controller-uid": uid,
                "batch.kubernetes.io/job-name": job.name_any(),
            },
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job.name_any(),
                                 "uid": uid, "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1.36"}],
        }
    }))
    .expect("a pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("the pod is created");
    let Some(code) = code else {
        return;
    };
    let now = Timestamp::now().to_string();
    let status = json!({"status": {
        "phase": if code == 0 { "Succeeded" } else { "Failed" },
        "containerStatuses": [{
            "name": "main", "image": "busybox:1.36", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": code, "reason": "Error", "startedAt": now, "finishedAt": now}}
        }]
    }});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("the kubelet's status is written");
}

fn jobwarden(kubeconfig: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_jobwarden"))
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .output()
        .expect("jobwarden runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The text with spans of time (`12s`, `2m39s`) as `<span>` and the test's namespace as the
/// examples show it: what is the same on every run.
fn steady(text: &str, namespace: &str) -> String {
    let is_span = |w: &str| {
        let w = w
            .trim_start_matches('(')
            .trim_end_matches(['.', ',', ':', ';', ')']);
        let mut rest = w;
        let mut units = 0;
        while !rest.is_empty() {
            let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            let Some(unit) = rest[digits..].chars().next().filter(|u| "hms".contains(*u)) else {
                return false;
            };
            if digits == 0 {
                return false;
            }
            rest = &rest[digits + unit.len_utf8()..];
            units += 1;
        }
        units > 0
    };
    text.replace(namespace, SHOWN_NAMESPACE)
        .lines()
        .map(|line| {
            line.split(' ')
                .map(|w| if is_span(w) { "<span>" } else { w })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `explain`'s text for `name`, checked against examples/explain/`example`.
fn check_example(kubeconfig: &Path, ns: &str, name: &str, example: &str, extra: &[&str]) -> String {
    let mut args = vec!["explain", "-n", ns, name];
    args.extend_from_slice(extra);
    let (code, out, err) = jobwarden(kubeconfig, &args);
    assert_eq!(code, 0, "{err}");
    let shown = std::fs::read_to_string(Path::new(EXAMPLES).join(example))
        .unwrap_or_else(|e| panic!("examples/explain/{example}: {e}"));
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md"))
        .expect("docs/cli.md");
    assert!(
        docs.contains(&shown),
        "docs/cli.md does not show examples/explain/{example} as it is"
    );
    assert_eq!(
        steady(&out, ns),
        steady(&shown, ns),
        "explain {name} no longer prints what examples/explain/{example} shows; it prints:\n{out}"
    );
    out
}

async fn wait_stored(jobs: &Api<Job>, name: &str) -> Job {
    jobs.get(name).await.expect("the Job is stored")
}

async fn failed_pod(pods: &Api<Pod>, job: &Job, name: &str, code: i32) {
    make_pod(pods, job, name, json!({}), Some(code)).await;
}

/// The status the test's controller writes once its pods have failed (and `more`).
async fn started(jobs: &Api<Job>, name: &str, failed: i32, more: Value) {
    let mut status =
        json!({"startTime": Timestamp::now().to_string(), "active": 0, "failed": failed});
    if let (Some(status), Some(more)) = (status.as_object_mut(), more.as_object()) {
        status.extend(more.clone());
    }
    let status = json!({ "status": status });
    let as_controller = PatchParams {
        field_manager: Some(CONTROLLER.to_owned()),
        ..PatchParams::default()
    };
    jobs.patch_status(name, &as_controller, &Patch::Merge(&status))
        .await
        .expect("the controller's status is written");
}

#[tokio::test]
async fn explain_tells_rules_back_offs_and_jobs_nobody_runs_on_a_real_api_server() {
    let Some(plane) = ControlPlane::shared() else {
        return;
    };
    let client: Client = plane.client().await;
    let ns = plane.create_namespace(&client, "explain").await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let kubeconfig = plane.kubeconfig().to_owned();

    // A pod failed with exit code 2, which the rule named ExitCode2 makes fail the Job.
    let named = job(
        "named-rule",
        CONTROLLER,
        json!({
            "metadata": {"annotations": {"jobwarden.io/pod-failure-policy-rule-names": r#"["ExitCode2", null]"#}},
            "spec": {"podFailurePolicy": {"rules": [
                {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [2]}},
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
            ]}}
        }),
    );
    // Five failures: the sixth pod waits 160 s from the last.
    let backing_off = job("backing-off", CONTROLLER, json!({}));
    let nobody = job("nobody-runs-it", "example.com/nobody", json!({}));
    for j in [&named, &backing_off, &nobody] {
        jobs.create(&PostParams::default(), j)
            .await
            .expect("the Job is stored");
    }
    let named = wait_stored(&jobs, "named-rule").await;
    failed_pod(&pods, &named, "named-rule-0", 2).await;
    started(&jobs, "named-rule", 1, json!({})).await;
    let backing_off = wait_stored(&jobs, "backing-off").await;
    for i in 0..5 {
        failed_pod(&pods, &backing_off, &format!("backing-off-{i}"), 1).await;
    }
    started(&jobs, "backing-off", 5, json!({})).await;
    // Indexed, three indexes with backoffLimitPerIndex: 0 done, 2 running, 1 failed for the
    // third time (its pod carries the two before), so index 1 backs off 40 s.
    let per_index = job(
        "per-index",
        CONTROLLER,
        json!({"spec": {"completionMode": "Indexed", "completions": 3, "parallelism": 3, "backoffLimitPerIndex": 3}}),
    );
    jobs.create(&PostParams::default(), &per_index)
        .await
        .expect("the Job is stored");
    let per_index = wait_stored(&jobs, "per-index").await;
    let index = |i: i32, failures: i32| {
        json!({
            "batch.kubernetes.io/job-completion-index": i.to_string(),
            "batch.kubernetes.io/job-index-failure-count": failures.to_string(),
        })
    };
    make_pod(&pods, &per_index, "per-index-1", index(1, 2), Some(1)).await;
    make_pod(&pods, &per_index, "per-index-2", index(2, 0), None).await;
    started(
        &jobs,
        "per-index",
        1,
        json!({"active": 1, "succeeded": 1, "completedIndexes": "0"}),
    )
    .await;

    let out = check_example(&kubeconfig, &ns, "named-rule", "named-rule.txt", &[]);
    assert!(
        out.contains("pod named-rule-0 failed ")
            && out.contains(": main exited 2; rule 0 \"ExitCode2\" matched: FailJob"),
        "{out}"
    );
    let out = check_example(&kubeconfig, &ns, "backing-off", "backing-off.txt", &[]);
    assert!(out.contains("back-off: the next pod waits "), "{out}");
    let out = check_example(&kubeconfig, &ns, "per-index", "per-index.txt", &[]);
    assert!(
        out.contains("back-off of index 1: its next pod waits "),
        "{out}"
    );

    // The same as data.
    let (code, json_out, err) = jobwarden(
        &kubeconfig,
        &["explain", "-n", &ns, "named-rule", "-o", "json"],
    );
    assert_eq!(code, 0, "{err}");
    let data: Value = serde_json::from_str(&json_out).expect("one JSON object");
    assert_eq!(
        data["finishedPods"][0]["rule"],
        json!({"index": 0, "name": "ExitCode2", "action": "FailJob"})
    );
    assert_eq!(data["finishedPods"][0]["exitCodes"][0]["code"], 2);

    drawn_as_a_timeline(&kubeconfig, &ns, &jobs, &pods).await;

    // A Job jobwarden runs: its Lease is read where --lease-namespace says (the test writes
    // it as a leading replica would).
    let ours = job(
        "ours",
        "jobwarden.io/job-controller",
        json!({"spec": {"suspend": true}}),
    );
    jobs.create(&PostParams::default(), &ours)
        .await
        .expect("the Job is stored");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "jobwarden-job-controller"},
        "spec": {"holderIdentity": "jobwarden-e2e", "leaseDurationSeconds": 15,
                 "renewTime": MicroTime(Timestamp::now())}
    }))
    .expect("a Lease");
    Api::<Lease>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &lease)
        .await
        .expect("the Lease is stored");
    let (code, out, err) = jobwarden(
        &kubeconfig,
        &["explain", "-n", &ns, "ours", "--lease-namespace", &ns],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            "jobwarden's Lease {ns}/jobwarden-job-controller is held by jobwarden-e2e, renewed "
        )) && out.contains("resume: it is suspended (spec.suspend: true)"),
        "{out}"
    );
    let (_, out, _) = jobwarden(
        &kubeconfig,
        &["explain", "-n", &ns, "ours", "--lease-name", "absent"],
    );
    assert!(
        out.contains("jobwarden's Lease jobwarden-system/absent could not be read (not found): whether a replica leads is not known."),
        "{out}"
    );

    // With the threshold at 1s, the Job delegated to nobody is stuck as soon as it is a
    // second old; both commands say so, naming the controller.
    let started = Instant::now();
    let out = loop {
        let (_, out, _) = jobwarden(
            &kubeconfig,
            &[
                "explain",
                "-n",
                &ns,
                "nobody-runs-it",
                "--stuck-after",
                "1s",
            ],
        );
        if out.contains("No controller is running it") {
            break out;
        }
        assert!(started.elapsed() < TIMEOUT, "never said stuck:\n{out}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(
        out.contains("\"example.com/nobody\" shows no sign of acting on it"),
        "{out}"
    );
    check_example(
        &kubeconfig,
        &ns,
        "nobody-runs-it",
        "nobody-runs-it.txt",
        &["--stuck-after", "1s"],
    );
    let (code, audit_out, err) =
        jobwarden(&kubeconfig, &["audit", "-n", &ns, "--stuck-after", "1s"]);
    let _ = Api::<Namespace>::all(client)
        .delete(&ns, &DeleteParams::default())
        .await;
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        steady(&audit_out, &ns),
        format!(
            "{SHOWN_NAMESPACE}: Job \"nobody-runs-it\": spec.managedBy: no controller is running this Job: \"example.com/nobody\" shows no sign of acting on it <span> after its creation (not suspended, no status.startTime, no pods); is that controller installed, running, and spelled so?"
        ),
        "{err}"
    );
}

/// An Indexed Job of three with a named rule: index 0 succeeded, index 1 failed with the exit
/// code `Transient` counts and runs its second pod, index 2 failed and backs off. `explain -o
/// svg` draws a lane per index, a bar per pod whose hover text names it, the rule's mark and
/// label, and the back-offs; the same facts as `-o json`.
async fn drawn_as_a_timeline(kubeconfig: &Path, ns: &str, jobs: &Api<Job>, pods: &Api<Pod>) {
    let drawn = job(
        "timeline",
        CONTROLLER,
        json!({
            "metadata": {"annotations": {"jobwarden.io/pod-failure-policy-rule-names": r#"["BadInput", "Transient"]"#}},
            "spec": {"completionMode": "Indexed", "completions": 3, "parallelism": 3, "backoffLimitPerIndex": 2,
                     "podFailurePolicy": {"rules": [
                {"action": "FailIndex", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
                {"action": "Count", "onExitCodes": {"containerName": "main", "operator": "In", "values": [75]}}
            ]}}
        }),
    );
    jobs.create(&PostParams::default(), &drawn)
        .await
        .expect("the Job is stored");
    let drawn = wait_stored(jobs, "timeline").await;
    let index = |i: i32, failures: i32| {
        json!({
            "batch.kubernetes.io/job-completion-index": i.to_string(),
            "batch.kubernetes.io/job-index-failure-count": failures.to_string(),
        })
    };
    make_pod(pods, &drawn, "timeline-0", index(0, 0), Some(0)).await;
    make_pod(pods, &drawn, "timeline-1-a", index(1, 0), Some(75)).await;
    make_pod(pods, &drawn, "timeline-1-b", index(1, 1), None).await;
    make_pod(pods, &drawn, "timeline-2", index(2, 0), Some(1)).await;
    started(
        jobs,
        "timeline",
        2,
        json!({"active": 1, "succeeded": 1, "completedIndexes": "0"}),
    )
    .await;

    let (code, out_svg, err) =
        jobwarden(kubeconfig, &["explain", "-n", ns, "timeline", "-o", "svg"]);
    assert_eq!(code, 0, "{err}");
    let _ = std::fs::write(
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("explain-timeline.svg"),
        &out_svg,
    );
    let doc = svg::parse(&out_svg);
    let class = |c: &str| svg::with_class(&doc, c);
    let title = svg::title_of(doc.root_element());
    assert!(
        title.starts_with(&format!("Job {ns}/timeline: Not finished")),
        "{title}"
    );
    // The axis ends when the story was told, a few seconds after the Job was created, though
    // index 2's back-off runs on for 10 s: no tick past that moment.
    let told = title
        .split("told, ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|age| jobwarden_rules::seconds::parse(age).ok())
        .map(|d| d.as_secs())
        .unwrap_or_else(|| panic!("the title says the Job's age: {title}"));
    let ticks: Vec<u64> = class("axis")
        .iter()
        .flat_map(|a| a.children())
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .filter_map(|l| jobwarden_rules::seconds::parse(l).ok())
        .map(|d| d.as_secs())
        .collect();
    // The title's age is in whole seconds, rounded down: the last tick may be the next one.
    assert!(
        !ticks.is_empty() && ticks.iter().all(|t| *t <= told + 1),
        "told {told}s after its creation, ticks at {ticks:?}"
    );
    let lanes: Vec<&str> = class("lane")
        .iter()
        .filter_map(|n| n.attribute("data-lane"))
        .collect();
    assert_eq!(lanes, ["0", "1", "2"]);
    let mut bars: Vec<(String, String, String)> = class("bar")
        .iter()
        .map(|b| {
            let title = svg::title_of(*b);
            let pod = b.attribute("data-pod").unwrap_or("").to_owned();
            assert!(title.starts_with(&format!("pod {pod} (index ")), "{title}");
            (
                pod,
                b.attribute("data-attempt").unwrap_or("").to_owned(),
                b.attribute("class").unwrap_or("").to_owned(),
            )
        })
        .collect();
    bars.sort();
    let bar = |pod: &str, attempt: &str, class: &str| {
        (pod.to_owned(), attempt.to_owned(), class.to_owned())
    };
    assert_eq!(
        bars,
        [
            bar("timeline-0", "1", "bar succeeded"),
            bar("timeline-1-a", "1", "bar failed"),
            bar("timeline-1-b", "2", "bar running"),
            bar("timeline-2", "1", "bar failed"),
        ]
    );
    let marks: Vec<(&str, &str)> = class("mark")
        .iter()
        .map(|m| {
            (
                m.attribute("data-rule").unwrap_or(""),
                m.attribute("data-action").unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(marks, [("Transient", "Count")]);
    let labels: Vec<&str> = class("rule-label")
        .iter()
        .filter_map(|n| n.text())
        .collect();
    assert_eq!(labels, ["Transient: Count"]);
    // Index 2 backs off now. (Index 1's back-off ended when the test, playing a controller
    // that does not wait, made its second pod.)
    let lane_2 = class("lane")
        .into_iter()
        .find(|l| l.attribute("data-lane") == Some("2"))
        .expect("lane 2");
    assert!(
        lane_2
            .children()
            .any(|c| c.attribute("class") == Some("backoff")),
        "{out_svg}"
    );

    let (code, json_out, err) =
        jobwarden(kubeconfig, &["explain", "-n", ns, "timeline", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let data: Value = serde_json::from_str(&json_out).expect("one JSON object");
    let finished = data["finishedPods"].as_array().expect("finished pods");
    assert_eq!(finished.len(), 3);
    assert!(
        finished
            .iter()
            .filter(|p| p["phase"] == "Failed")
            .all(|p| p["backoffUntil"].is_string()),
        "{json_out}"
    );
    assert_eq!(data["activePods"][0]["attempt"], 2);
}
