//! The scenario grammar as tables (good and bad entries, with the errors people read), and
//! whole stories: their steps, how they end, and their final statuses checked against the
//! reconcile loop itself run over the same pod outcomes.

mod behaviours;
mod grammar;
mod keps;

use super::scenario::*;
use super::story::*;
use super::*;
use jobwarden_fake_cluster::{
    InMemoryCluster, LoopRunConfig, Outcome, SeenPod, meta_key, run_until_finished,
};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

fn job(name: &str, spec: Value) -> Value {
    let mut job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "managedBy": "jobwarden.io/job-controller",
            "template": {"spec": {"restartPolicy": "Never",
                                  "containers": [{"name": "main", "image": "busybox"}]}},
        },
    });
    if let (Some(target), Some(extra)) = (job["spec"].as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            if v.is_null() {
                target.remove(k);
            } else {
                target.insert(k.clone(), v.clone());
            }
        }
    }
    job
}

fn scenario(default: &str, entries: &[&str]) -> Scenario {
    let mut s = Scenario::default()
        .with_entries_first(
            entries
                .iter()
                .map(|t| parse_entry(t).expect("parses"))
                .collect(),
        )
        .expect("few entries");
    s.default = parse_outcome(default).expect("parses");
    s
}

fn tell(job: &Value, s: &Scenario) -> Story {
    simulate(job, s, &Limits::default()).expect("a story")
}

fn conditions(status: &Value) -> Vec<(String, String, String, String)> {
    status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let f = |k: &str| c[k].as_str().unwrap_or("").to_owned();
            (f("type"), f("status"), f("reason"), f("message"))
        })
        .collect()
}

/// What the reconcile loop's e2e tests look at: counters and conditions, never times.
fn outcome(status: &Value) -> Value {
    json!({
        "active": status["active"], "succeeded": status["succeeded"], "failed": status["failed"],
        "completedIndexes": status["completedIndexes"], "failedIndexes": status["failedIndexes"],
        "terminating": status["terminating"], "ready": status["ready"],
        "uncounted": status["uncountedTerminatedPods"],
        "conditions": conditions(status).iter()
            .map(|(t, s, r, m)| format!("{t}={s} {r}: {m}")).collect::<Vec<_>>(),
        "completionTime": !status["completionTime"].is_null(),
    })
}

/// The same Job run by the reconcile loop (watches, batching, the applier) on tokio's paused
/// clock, its pods ending as `s` says (attempts aside, which these stories do not use).
fn reconcile_loop_status(job: &Value, s: &Scenario) -> Value {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let cluster = Arc::new(InMemoryCluster::new(CLOCK_START));
    let created = cluster
        .write(|st| st.create_job(job.clone()))
        .expect("a valid Job");
    let (ns, name) = meta_key(&created);
    let indexed = created["spec"]["completionMode"] == "Indexed";
    let decide = |p: &SeenPod| {
        let number = if indexed {
            i64::from(p.index.unwrap_or(-1))
        } else {
            i64::try_from(p.ordinal).unwrap_or(0) - 1
        };
        let (_, script) = s.script_for(PodKey { number, attempt: 1 });
        super::book::outcome(script, p.running_for)
    };
    let report = runtime.block_on(run_until_finished(
        cluster.clone(),
        &[(ns.clone(), name.clone())],
        LoopRunConfig {
            give_up_after: Duration::from_secs(24 * 3600),
            ..LoopRunConfig::default()
        },
        decide,
    ));
    assert!(report.finished, "the reconcile loop did not finish {name}");
    cluster
        .with(|st| st.job(&ns, &name))
        .map(|j| j["status"].clone())
        .unwrap_or(Value::Null)
}

/// Pod names differ between two runs that create pods at different moments; the policy's
/// messages name them.
fn without_pod_names(v: Value, job_name: &str) -> Value {
    let text = v.to_string();
    let mut out = String::new();
    let mut rest = text.as_str();
    let marker = format!("/{job_name}-");
    while let Some(at) = rest.find(&marker) {
        out.push_str(&rest[..at]);
        out.push_str("/<pod>");
        let after = &rest[at + marker.len()..];
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(after.len());
        rest = &after[end..];
    }
    out.push_str(rest);
    serde_json::from_str(&out).unwrap_or(Value::Null)
}

fn same_end_as_the_reconcile_loop(job: &Value, s: &Scenario) -> Story {
    let story = tell(job, s);
    assert!(story.end.finished, "{:?}", story.end);
    let name = story.job.name.clone();
    assert_eq!(
        without_pod_names(outcome(&story.final_status), &name),
        without_pod_names(outcome(&reconcile_loop_status(job, s)), &name),
        "{name}"
    );
    story
}

fn kinds(story: &Story) -> Vec<String> {
    story
        .steps
        .iter()
        .map(|s| match &s.what {
            Happening::PodCreated(c) => format!("{} created {:?}", s.at, c.pod.index),
            Happening::PodWaiting(w) => format!("{} waiting {:?} {}", s.at, w.pod.index, w.reason),
            Happening::PodEnded(e) => format!("{} ended {:?} {}", s.at, e.pod.index, e.phase),
            Happening::PodDeleted(d) => format!("{} deleted {:?}", s.at, d.pod.index),
            Happening::Status(_) => format!("{} status", s.at),
            Happening::Condition(c) => format!("{} {}={} {}", s.at, c.type_, c.status, c.reason),
            Happening::Waiting(w) => format!("{} waits {} {:?}", s.at, w.seconds, w.cause),
            Happening::ControllerError(e) => format!("{} error {}", s.at, e.message),
        })
        .collect()
}

fn named_rules_job(names: &str) -> Value {
    let rule = |c: i32| {
        json!({"action": "FailJob",
               "onExitCodes": {"containerName": "main", "operator": "In", "values": [c]}})
    };
    let mut j = job(
        "named",
        json!({"completions": 1, "parallelism": 1, "backoffLimit": 0,
               "podFailurePolicy": {"rules": [rule(2), rule(3), rule(4),
                   {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}}),
    );
    j["metadata"]["annotations"] = json!({"jobwarden.io/pod-failure-policy-rule-names": names});
    j
}
