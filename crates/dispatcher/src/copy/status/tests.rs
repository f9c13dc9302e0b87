use super::*;

const T0: &str = "2026-11-27T10:00:00Z";
const T1: &str = "2026-11-27T10:00:05Z";
const T2: &str = "2026-11-27T10:01:00Z";

fn job(suspend: bool, status: Value) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml", "uid": "u-1", "resourceVersion": "9"},
        "spec": {"managedBy": "jobwarden.io/dispatcher", "completions": 2, "parallelism": 2,
                 "suspend": suspend,
                 "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}}},
        "status": status,
    })
}

fn cond(type_: &str, status: &str, at: &str) -> Value {
    json!({"type": type_, "status": status, "reason": format!("{type_}Reason"),
           "message": "m", "lastProbeTime": at, "lastTransitionTime": at})
}

fn written_status(patch: &Value) -> &Value {
    &patch["status"]
}

#[test]
fn a_running_copy_is_mirrored_with_the_stored_version_as_precondition() {
    let user = job(false, json!({}));
    let copy = job(
        false,
        json!({"active": 2, "ready": 1, "startTime": T0,
                                 "uncountedTerminatedPods": {}}),
    );
    let patch = mirror(&user, &copy).expect("accepted").expect("a write");
    assert_eq!(
        patch,
        json!({"metadata": {"resourceVersion": "9"},
               "status": {"active": 2, "ready": 1, "startTime": T0,
                          "uncountedTerminatedPods": {}}})
    );
}

/// The user's Job after the patch, as the API server merges it.
fn applied(user: &Value, patch: &Value) -> Value {
    let mut job = user.clone();
    json_patch::merge(&mut job, patch);
    job
}

#[test]
fn the_patch_leaves_exactly_the_copys_status() {
    // Seen on a real worker: the last pods counted, `uncountedTerminatedPods` emptied. A
    // merge patch of `{}` would have left the two UIDs there.
    let user = job(
        false,
        json!({
        "startTime": T0, "ready": 0, "terminating": 0,
        "uncountedTerminatedPods": {"succeeded": ["p1", "p2"]},
        "conditions": [cond("SuccessCriteriaMet", "True", T1)]}),
    );
    let done = json!({
        "startTime": T0, "completionTime": T1, "succeeded": 2, "ready": 0, "terminating": 0,
        "uncountedTerminatedPods": {},
        "conditions": [cond("SuccessCriteriaMet", "True", T1), cond("Complete", "True", T1)]});
    let patch = mirror(&user, &job(false, done.clone()))
        .expect("accepted")
        .expect("a write");
    assert_eq!(applied(&user, &patch)["status"], done);
}

#[test]
fn a_status_already_shown_needs_no_write() {
    let status = json!({"active": 1, "startTime": T0});
    assert_eq!(
        mirror(&job(false, status.clone()), &job(false, status)),
        Ok(None)
    );
}

#[test]
fn the_final_status_arrives_whole_in_one_write() {
    let user = job(false, json!({"active": 2, "startTime": T0}));
    let copy = job(
        false,
        json!({
            "succeeded": 2, "startTime": T0, "completionTime": T1, "uncountedTerminatedPods": {},
            "conditions": [cond("SuccessCriteriaMet", "True", T1), cond("Complete", "True", T1)],
        }),
    );
    let patch = mirror(&user, &copy).expect("accepted").expect("a write");
    let status = written_status(&patch);
    assert_eq!(
        status["active"],
        Value::Null,
        "a removed field is written as null"
    );
    assert_eq!(status["succeeded"], json!(2));
    assert_eq!(status["completionTime"], json!(T1));
    assert_eq!(status["conditions"].as_array().map(Vec::len), Some(2));
}

#[test]
fn a_finished_user_job_is_never_written_again() {
    let done = json!({"succeeded": 2, "startTime": T0, "completionTime": T1,
                      "conditions": [cond("SuccessCriteriaMet", "True", T1),
                                     cond("Complete", "True", T1)]});
    let copy = job(false, json!({"active": 1, "startTime": T2}));
    assert_eq!(mirror(&job(false, done), &copy), Ok(None));
}

#[test]
fn counters_never_go_down() {
    // A copy made again on another worker starts from zero.
    let user = job(false, json!({"failed": 3, "succeeded": 1, "startTime": T0}));
    let copy = job(false, json!({"failed": 1, "active": 1, "startTime": T2}));
    let patch = mirror(&user, &copy).expect("accepted").expect("a write");
    let status = written_status(&patch);
    assert_eq!(status.get("failed"), None, "3 stays");
    assert_eq!(status.get("succeeded"), None, "1 stays");
    assert_eq!(status["active"], json!(1));
}

#[test]
fn the_first_start_time_stays_while_the_job_runs() {
    let user = job(false, json!({"active": 1, "startTime": T0}));
    let copy = job(false, json!({"active": 2, "startTime": T2}));
    let patch = mirror(&user, &copy).expect("accepted").expect("a write");
    assert_eq!(written_status(&patch).get("startTime"), None);
}

#[test]
fn a_suspended_job_takes_the_copys_start_time_away() {
    // Upstream clears startTime when it suspends a Job; the rules allow it while suspended.
    let user = job(true, json!({"active": 2, "startTime": T0}));
    let copy = job(true, json!({"conditions": [cond("Suspended", "True", T1)]}));
    let patch = mirror(&user, &copy).expect("accepted").expect("a write");
    let status = written_status(&patch);
    assert_eq!(status["startTime"], Value::Null);
    assert_eq!(status["active"], Value::Null);
    assert_eq!(status["conditions"][0]["type"], json!("Suspended"));
}

#[test]
fn a_resumed_job_takes_the_copys_new_start_time_with_the_resume() {
    let user = job(
        false,
        json!({"startTime": T0,
                                 "conditions": [cond("Suspended", "True", T1)]}),
    );
    let copy = job(
        false,
        json!({"active": 2, "startTime": T2,
                                 "conditions": [cond("Suspended", "False", T2)]}),
    );
    let patch = mirror(&user, &copy).expect("accepted").expect("a write");
    assert_eq!(written_status(&patch)["startTime"], json!(T2));
}

#[test]
fn sticky_and_foreign_conditions_of_the_user_job_stay() {
    let mine = json!({"type": "example.com/Audited", "status": "True", "lastTransitionTime": T0});
    let user = job(
        false,
        json!({"active": 1, "startTime": T0,
                                 "conditions": [cond("FailureTarget", "True", T1), mine.clone()]}),
    );
    // A copy made again elsewhere knows nothing of either.
    let copy = job(false, json!({"active": 1, "startTime": T2}));
    // FailureTarget and the foreign condition are kept, the first start too: nothing changes.
    assert_eq!(mirror(&user, &copy), Ok(None));
}

#[test]
fn a_write_the_rules_refuse_is_not_sent() {
    // Complete without SuccessCriteriaMet: the API server refuses it on a delegated Job.
    let user = job(false, json!({"active": 1, "startTime": T0}));
    let copy = job(
        false,
        json!({"succeeded": 2, "startTime": T0, "completionTime": T1,
                                 "conditions": [cond("Complete", "True", T1)]}),
    );
    let refused = mirror(&user, &copy).expect_err("refused");
    assert!(
        refused.to_string().contains("SuccessCriteriaMet"),
        "{refused}"
    );
}

#[test]
fn an_end_before_the_kept_start_ends_at_the_start() {
    let user = job(false, json!({"active": 1, "startTime": T1}));
    let copy = job(
        false,
        json!({
            "succeeded": 2, "startTime": T0, "completionTime": T0, "uncountedTerminatedPods": {},
            "conditions": [cond("SuccessCriteriaMet", "True", T0), cond("Complete", "True", T0)],
        }),
    );
    let patch = mirror(&user, &copy).expect("accepted").expect("a write");
    assert_eq!(written_status(&patch)["completionTime"], json!(T1));
}

#[test]
fn a_field_this_build_does_not_know_is_mirrored() {
    let user = job(false, json!({"startTime": T0}));
    let copy = job(false, json!({"startTime": T0, "futureCounter": 4}));
    let patch = mirror(&user, &copy).expect("accepted").expect("a write");
    assert_eq!(written_status(&patch)["futureCounter"], json!(4));
}

fn now() -> Timestamp {
    T2.parse().expect("a time")
}

#[test]
fn a_job_that_never_ran_fails_with_a_start_time_and_both_conditions() {
    let user = job(false, json!({}));
    let patch = failed(&user, "WorkerLost", "worker east was lost", now())
        .expect("accepted")
        .expect("a write");
    let status = written_status(&patch);
    assert_eq!(status["startTime"], json!(T2));
    let types: Vec<&str> = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["type"].as_str())
        .collect();
    assert_eq!(types, ["FailureTarget", "Failed"]);
    assert_eq!(status["conditions"][1]["reason"], json!("WorkerLost"));
    assert_eq!(status["active"], json!(0));
}

#[test]
fn a_running_job_fails_keeping_its_start_and_counts() {
    let user = job(
        false,
        json!({"active": 2, "ready": 2, "failed": 1, "startTime": T0,
                                 "uncountedTerminatedPods": {"failed": ["p"]}}),
    );
    let patch = failed(&user, "WorkerLost", "m", now())
        .expect("accepted")
        .expect("a write");
    let status = written_status(&patch);
    assert_eq!(status.get("startTime"), None);
    assert_eq!(status.get("failed"), None);
    assert_eq!(status["uncountedTerminatedPods"], Value::Null);
    assert_eq!(status["ready"], json!(0));
}

#[test]
fn a_finished_job_is_not_failed_again() {
    let done = json!({"failed": 1, "startTime": T0,
                      "conditions": [cond("FailureTarget", "True", T1), cond("Failed", "True", T1)]});
    assert_eq!(
        failed(&job(false, done), "WorkerLost", "m", now()),
        Ok(None)
    );
}

#[test]
fn terminal_conditions_are_read() {
    let done = job(false, json!({"conditions": [cond("Failed", "True", T1)]}));
    assert_eq!(terminal_condition(&done), Some("Failed"));
    assert!(is_finished(&done));
    assert_eq!(terminal_condition(&job(false, json!({}))), None);
}
