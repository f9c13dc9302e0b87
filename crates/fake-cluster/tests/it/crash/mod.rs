//! The crash test: a scripted Job run against the in-memory cluster, stopped after every single
//! API call in turn and restarted from what the cluster holds. The final status must be the same
//! as in the run without a crash, every pod outcome counted exactly once, and every status write
//! must keep the lifecycle rules of UPSTREAM-RULES §6. The order of one sync's writes is in
//! `writes.rs`; restarts and hand-overs with pods that ended unwatched in `restarts.rs`.

mod restarts;
mod writes;

use std::sync::Arc;

use jobwarden_rules::JobObject;
use serde_json::Value;

use jobwarden_controller::plan::PlanConfig;
use jobwarden_controller::sync::executor::{ApplyError, apply};
use jobwarden_controller::testing::*;
use jobwarden_fake_cluster::{
    InMemoryCluster, Kubelet, Outcome as PodOutcome, Replica, Resource, meta_key,
};
use jobwarden_rules::well_known::{COMPLETION_INDEX_KEY, TRACKING_FINALIZER};

/// Decides how the n-th pod created (from 1) ends, given its completion index: succeeds or
/// fails (`ends`), keeps running until it is deleted (`Run`), or never starts (`NeverStart`).
type Script = fn(u64, Option<i32>) -> PodOutcome;

/// The pod succeeds, or with `false` its container exits 1.
fn ends(succeeds: bool) -> PodOutcome {
    if succeeds {
        PodOutcome::succeed()
    } else {
        PodOutcome::exit(1)
    }
}

/// The final state of a run, compared across crash points.
#[derive(Debug, PartialEq)]
struct Outcome {
    succeeded: i64,
    failed: i64,
    completed_indexes: String,
    failed_indexes: String,
    conditions: Vec<(String, String, String)>,
}

fn cond_true(job: &Value, t: &str) -> bool {
    job["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == t && c["status"] == "True"))
}

fn num(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

fn uncounted_len(job: &Value) -> usize {
    let u = &job["status"]["uncountedTerminatedPods"];
    u["succeeded"].as_array().map_or(0, Vec::len) + u["failed"].as_array().map_or(0, Vec::len)
}

/// jobwarden's lifecycle as seen from outside: the rules of UPSTREAM-RULES §6 that the
/// controller's writes touch, checked independently of `validate_status_update` (which the
/// executor also runs on every write).
fn lifecycle_violations(old: &Value, new: &Value) -> Vec<String> {
    let mut v = Vec::new();
    let (o, n) = (&old["status"], &new["status"]);
    let finished = cond_true(new, "Complete") || cond_true(new, "Failed");
    if cond_true(new, "Complete") && !cond_true(new, "SuccessCriteriaMet") {
        v.push("Complete without SuccessCriteriaMet".to_owned());
    }
    if cond_true(new, "Failed") && !cond_true(new, "FailureTarget") {
        v.push("Failed without FailureTarget".to_owned());
    }
    if cond_true(new, "SuccessCriteriaMet")
        && (cond_true(new, "FailureTarget") || cond_true(new, "Failed"))
    {
        v.push("SuccessCriteriaMet with a failure condition".to_owned());
    }
    if cond_true(new, "Complete") == n["completionTime"].is_null() {
        v.push("completionTime without Complete, or the reverse".to_owned());
    }
    if finished && (num(&n["active"]) > 0 || num(&n["terminating"]) > 0 || uncounted_len(new) > 0) {
        v.push(format!("finished with pods left: {n}"));
    }
    if finished && n["startTime"].is_null() {
        v.push("finished without startTime".to_owned());
    }
    if let (Some(s), Some(c)) = (n["startTime"].as_str(), n["completionTime"].as_str())
        && c < s
    {
        v.push("completionTime before startTime".to_owned());
    }
    if num(&n["ready"]) > num(&n["active"]) {
        v.push("ready > active".to_owned());
    }
    if num(&n["succeeded"]) < num(&o["succeeded"]) || num(&n["failed"]) < num(&o["failed"]) {
        v.push("a counter decreased".to_owned());
    }
    for t in ["Complete", "Failed", "FailureTarget", "SuccessCriteriaMet"] {
        if cond_true(old, t) && !cond_true(new, t) {
            v.push(format!("{t} removed"));
        }
    }
    if !o["completionTime"].is_null() && o["completionTime"] != n["completionTime"] {
        v.push("completionTime changed".to_owned());
    }
    let resuming = old["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Suspended" && c["status"] == "True")
    }) && !cond_true(new, "Suspended");
    if !o["startTime"].is_null()
        && o["startTime"] != n["startTime"]
        && new["spec"]["suspend"] != true
        && !resuming
    {
        v.push("startTime changed on a running Job".to_owned());
    }
    v
}

struct Run {
    outcome: Outcome,
    calls: usize,
}

/// How the controller's caches follow the cluster: the newest `jobs` Job events and `pods` pod
/// events are held back on every pass; when a pass writes nothing, one more event of a lagging
/// watch is let through (the pod watch first), so every interleaving of the two watches with
/// the controller's writes is walked through, one event at a time.
#[derive(Debug, Clone, Copy)]
struct Lag {
    jobs: u64,
    pods: u64,
}

/// Runs the Job to its end; with `crash_after = Some(k)` the controller dies after its k-th
/// API call and a new replica starts from a fresh list of the cluster.
fn run(job: Value, script: Script, crash_after: Option<usize>, lag: Lag, setup: Setup) -> Run {
    let cluster = Arc::new(InMemoryCluster::new(at(0)));
    let created = cluster
        .write(|s| s.create_job(job))
        .expect("the Job is valid");
    let (ns, name) = meta_key(&created);
    setup(&cluster, &created);
    cluster.with(|s| s.budget = crash_after);
    let config = PlanConfig::default();
    let mut replica = Replica::start(cluster.clone(), config.clone());
    let mut kubelet = Kubelet::new(&cluster);
    let mut done = false;
    for round in 0..100 {
        cluster.write(|s| s.now = at(30 * (round + 1)));
        kubelet.step(|p| script(p.ordinal, p.index));
        for _pass in 0..200 {
            replica.catch_up(lag.jobs, lag.pods);
            let now = cluster.with(|s| s.now);
            let wrote = match replica.sync(&ns, &name, now) {
                Some(Ok(r)) => {
                    r.status_written || r.created > 0 || r.deleted > 0 || r.finalizers_removed > 0
                }
                Some(Err(_)) if cluster.with(|s| s.budget == Some(0)) => {
                    // The controller died: a fresh one takes over.
                    cluster.with(|s| s.budget = None);
                    drop(replica);
                    replica = Replica::start(cluster.clone(), config.clone());
                    true
                }
                Some(Err(_)) => true,
                None => false,
            };
            if !wrote {
                let lagging = [Resource::Pods, Resource::Jobs]
                    .into_iter()
                    .find(|r| replica.behind(*r) > 0);
                match lagging {
                    Some(r) => {
                        replica.deliver(r, 1);
                    }
                    None => break,
                }
            }
        }
        let job = cluster.with(|s| s.job(&ns, &name)).expect("the Job exists");
        let finished = cond_true(&job, "Complete") || cond_true(&job, "Failed");
        let held = cluster.with(|s| {
            s.pods().iter().any(|p| {
                p["metadata"]["finalizers"]
                    .to_string()
                    .contains(TRACKING_FINALIZER)
            })
        });
        if finished && !held {
            done = true;
            break;
        }
    }
    let job = cluster.with(|s| s.job(&ns, &name)).expect("the Job exists");
    assert!(
        done,
        "the Job never finished (crash after {crash_after:?}, {lag:?}): {job}\n{:#?}",
        cluster.with(|s| s.pods())
    );
    cluster.with(|s| {
        for (before, after) in &s.status_writes {
            let v = lifecycle_violations(before, after);
            assert!(
                v.is_empty(),
                "crash after {crash_after:?}, {lag:?}: {v:?}\nbefore {before}\nafter {after}"
            );
        }
    });
    let all = pod_ends(&cluster);
    let st = &job["status"];
    let context = format!("crash after {crash_after:?}, {lag:?}");
    if job["spec"]["completionMode"] == "Indexed" {
        let mut idx: Vec<&str> = all
            .iter()
            .filter(|p| p.phase == "Succeeded")
            .filter_map(|p| p.index.as_deref())
            .collect();
        idx.sort_unstable();
        idx.dedup();
        assert_eq!(
            num(&st["succeeded"]),
            idx.len() as i64,
            "{context}: succeeded"
        );
    } else {
        let succeeded = all.iter().filter(|p| p.phase == "Succeeded").count() as i64;
        assert_eq!(num(&st["succeeded"]), succeeded, "{context}: succeeded");
    }
    // Every failed pod counts, the ones the kubelet killed after a deletion included, unless
    // the Job had met its success criteria by then (upstream lets such lingering pods go
    // uncounted). The scripted runs kill pods only while the Job is ending.
    let succeeding = cond_true(&job, "SuccessCriteriaMet");
    let failed = all
        .iter()
        .filter(|p| p.phase == "Failed" && !(p.killed && succeeding))
        .count() as i64;
    assert_eq!(num(&st["failed"]), failed, "{context}: failed");
    let conditions = st["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let f = |k: &str| c[k].as_str().unwrap_or("").to_owned();
            (f("type"), f("status"), f("reason"))
        })
        .collect();
    let calls = cluster.with(|s| s.requests.values().sum::<u64>());
    Run {
        outcome: Outcome {
            succeeded: num(&st["succeeded"]),
            failed: num(&st["failed"]),
            completed_indexes: st["completedIndexes"].as_str().unwrap_or("").to_owned(),
            failed_indexes: st["failedIndexes"].as_str().unwrap_or("").to_owned(),
            conditions,
        },
        calls: usize::try_from(calls).unwrap_or(usize::MAX),
    }
}

/// How each pod that ever existed ended, from its last state.
struct PodEnd {
    phase: String,
    index: Option<String>,
    /// Killed by the kubelet after a deletion (exit code 143), not ended on its own.
    killed: bool,
}

fn pod_ends(cluster: &InMemoryCluster) -> Vec<PodEnd> {
    cluster.with(|s| {
        s.last_pod_states()
            .iter()
            .map(|p| PodEnd {
                phase: p["status"]["phase"].as_str().unwrap_or("").to_owned(),
                index: p["metadata"]["annotations"][COMPLETION_INDEX_KEY]
                    .as_str()
                    .map(str::to_owned),
                killed: p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"]
                    == 143,
            })
            .collect()
    })
}

const NO_LAG: Lag = Lag { jobs: 0, pods: 0 };
/// The pod watch behind the Job watch, the reverse, and both behind.
const LAGS: [Lag; 4] = [
    Lag { jobs: 0, pods: 1 },
    Lag { jobs: 0, pods: 3 },
    Lag { jobs: 1, pods: 0 },
    Lag { jobs: 2, pods: 2 },
];

/// What else the cluster holds before the controller first starts, given the created Job.
type Setup = fn(&InMemoryCluster, &Value);

fn crash_everywhere(job: Value, script: Script) -> Outcome {
    crash_everywhere_with(job, script, |_, _| {})
}

fn crash_everywhere_with(job: Value, script: Script, setup: Setup) -> Outcome {
    let clean = run(job.clone(), script, None, NO_LAG, setup);
    assert!(clean.calls > 5, "the scripted run makes API calls");
    for lag in LAGS {
        let lagging = run(job.clone(), script, None, lag, setup);
        assert_eq!(lagging.outcome, clean.outcome, "{lag:?}, no crash");
        for k in 0..lagging.calls {
            let crashed = run(job.clone(), script, Some(k), lag, setup);
            assert_eq!(
                crashed.outcome, clean.outcome,
                "crash after call {k} of {}, {lag:?}",
                lagging.calls
            );
        }
    }
    clean.outcome
}

fn conds(list: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    list.iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect()
}

#[test]
fn non_indexed_run_survives_a_crash_after_any_call() {
    // The 1st and 3rd pods fail; the rest succeed.
    let out = crash_everywhere(JobBuilder::non_indexed(4, 2).manifest(), |n, _| {
        ends(n != 1 && n != 3)
    });
    assert_eq!(out.succeeded, 4);
    assert_eq!(out.failed, 2);
    assert_eq!(
        out.conditions,
        conds(&[
            ("SuccessCriteriaMet", "True", "CompletionsReached"),
            ("Complete", "True", "CompletionsReached")
        ])
    );
}

#[test]
fn indexed_run_survives_a_crash_after_any_call() {
    // Index 1 fails on its first attempt.
    let out = crash_everywhere(JobBuilder::indexed(3, 3).manifest(), |n, i| {
        ends(!(i == Some(1) && n <= 3))
    });
    assert_eq!(out.completed_indexes, "0-2");
    assert_eq!(out.succeeded, 3);
    assert_eq!(out.failed, 1);
}

#[test]
fn failing_run_survives_a_crash_after_any_call() {
    // Two pods fail and exceed the back-off limit of 1 while the third still runs: it is
    // deleted, killed, and counted failed.
    let script: Script = |n, _| if n == 3 { PodOutcome::Run } else { ends(false) };
    let out = crash_everywhere(
        JobBuilder::non_indexed(3, 3).backoff_limit(1).manifest(),
        script,
    );
    assert_eq!(
        out.conditions,
        conds(&[
            ("FailureTarget", "True", "BackoffLimitExceeded"),
            ("Failed", "True", "BackoffLimitExceeded")
        ])
    );
    assert_eq!(out.failed, 3);
}

#[test]
fn success_policy_run_survives_a_crash_after_any_call() {
    // KEP-3998 story 1: the leader (index 0) fails once, then succeeds; the workers never end
    // on their own and are deleted once the success criteria are met.
    let script: Script = |n, i| match i {
        Some(0) => ends(n > 1),
        _ => PodOutcome::Run,
    };
    let job = JobBuilder::indexed(4, 4)
        .success_rules(&[(Some("0"), None)])
        .manifest();
    let out = crash_everywhere(job, script);
    assert_eq!(out.completed_indexes, "0");
    assert_eq!(out.succeeded, 1);
    assert_eq!(out.failed, 1);
    assert_eq!(
        out.conditions,
        conds(&[
            ("SuccessCriteriaMet", "True", "SuccessPolicy"),
            ("Complete", "True", "SuccessPolicy")
        ])
    );
}

#[test]
fn pod_failure_policy_run_survives_a_crash_after_any_call() {
    // The 1st pod succeeds, the 2nd exits with 1 (a named FailJob rule), the 3rd is still
    // running: it is deleted and counted failed.
    let script: Script = |n, _| match n {
        1 => ends(true),
        2 => ends(false),
        _ => PodOutcome::Run,
    };
    let job = JobBuilder::non_indexed(3, 3)
        .pod_failure_policy(serde_json::json!([{"action": "FailJob",
            "onExitCodes": {"operator": "In", "values": [1]}}]))
        .rule_names(&[Some("ExitCode1")])
        .manifest();
    let out = crash_everywhere(job, script);
    assert_eq!(
        out.conditions,
        conds(&[
            ("FailureTarget", "True", "PodFailurePolicy_ExitCode1"),
            ("Failed", "True", "PodFailurePolicy_ExitCode1")
        ])
    );
    assert_eq!(out.succeeded, 1);
    assert_eq!(out.failed, 2);
}

#[test]
fn per_index_run_survives_a_crash_after_any_call() {
    // Index 1 fails on every attempt: with one retry allowed it fails for good; the others
    // succeed, and the Job fails with FailedIndexes.
    let script: Script = |_, i| ends(i != Some(1));
    let job = JobBuilder::indexed(3, 3)
        .backoff_limit_per_index(1)
        .manifest();
    let out = crash_everywhere(job, script);
    assert_eq!(out.completed_indexes, "0,2");
    assert_eq!(out.failed_indexes, "1");
    assert_eq!(out.failed, 2);
    assert_eq!(
        out.conditions,
        conds(&[
            ("FailureTarget", "True", "FailedIndexes"),
            ("Failed", "True", "FailedIndexes")
        ])
    );
}

#[test]
fn adoption_survives_a_crash_after_any_call() {
    // A pod made by hand with the Job's selector labels and no owner: adopted, counted, and
    // one pod fewer made, whichever call the controller dies after.
    let setup: Setup = |cluster, job| {
        let bare = serde_json::json!({
            "metadata": {"name": "by-hand", "labels": job["spec"]["selector"]["matchLabels"]},
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "busybox"}]},
        });
        let (ns, _) = meta_key(job);
        cluster
            .write(|s| s.create_pod(&ns, &bare))
            .expect("the bare pod");
    };
    let out = crash_everywhere_with(
        JobBuilder::non_indexed(3, 3).manifest(),
        |_, _| ends(true),
        setup,
    );
    assert_eq!(out.succeeded, 3);
    assert_eq!(out.failed, 0);
}

#[test]
fn start_timeout_run_survives_a_crash_after_any_call() {
    // The 1st pod never pulls its image: failed for not starting (a pods/status write),
    // deleted, counted, and replaced; whichever call the controller dies after (between the
    // status write and the delete among them), it is failed once and counted once.
    let script: Script = |n, _| {
        if n == 1 {
            PodOutcome::NeverStart {
                reason: "ImagePullBackOff".to_owned(),
            }
        } else {
            ends(true)
        }
    };
    let job = JobBuilder::non_indexed(2, 1)
        .annotation(jobwarden_rules::pod_timing::START_TIMEOUT_ANNOTATION, "30s")
        .manifest();
    let out = crash_everywhere(job, script);
    assert_eq!(out.succeeded, 2);
    assert_eq!(out.failed, 1);
}

#[test]
fn manual_selector_adoption_survives_a_crash_after_any_call() {
    // A manualSelector Job, and a pod made by hand with its selector's label but not the uid
    // label the pod watch selects on: found by the labelled list of the Job's first sync,
    // adopted (and labelled, so the watch follows it), counted, and one pod fewer made,
    // whichever call the controller dies after.
    let setup: Setup = |cluster, job| {
        let bare = serde_json::json!({
            "metadata": {"name": "by-hand", "labels": {"app": "manual"}},
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "busybox"}]},
        });
        let (ns, _) = meta_key(job);
        cluster
            .write(|s| s.create_pod(&ns, &bare))
            .expect("the bare pod");
    };
    let mut job = JobBuilder::non_indexed(3, 3).manifest();
    job["spec"]["manualSelector"] = serde_json::json!(true);
    job["spec"]["selector"] = serde_json::json!({"matchLabels": {"app": "manual"}});
    job["spec"]["template"]["metadata"] = serde_json::json!({"labels": {"app": "manual"}});
    let out = crash_everywhere_with(job, |_, _| ends(true), setup);
    assert_eq!(out.succeeded, 3);
    assert_eq!(out.failed, 0);
}
