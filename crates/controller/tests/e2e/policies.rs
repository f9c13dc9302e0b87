//! The policies: KEP-3998's success policy stories, KEP-4443's named failure reasons and
//! per-index retries.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use serde_json::{Value, json};

use crate::support::*;

fn index_of(pod: &Pod) -> Option<i32> {
    annotation(pod, "batch.kubernetes.io/job-completion-index").and_then(|i| i.parse().ok())
}

fn message(job: &Job, type_: &str) -> Option<String> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .and_then(|c| c.message.clone())
}

/// Runs a KEP-3998 story: `finish` lists the indexes whose pods succeed; the Job must meet
/// its success criteria by rule `rule`, delete the rest and end `Complete`.
async fn success_policy_story(scenario: &str, rules: Value, finish: &[i32], rule: usize) {
    let Some(env) = setup(scenario).await else {
        return;
    };
    env.create(&env.job(
        "sim",
        json!({"completions": 10, "parallelism": 10, "completionMode": "Indexed",
               "successPolicy": {"rules": rules}}),
    ))
    .await;
    let pods = env.wait_active_pods("sim", 10).await;
    for pod in pods
        .iter()
        .filter(|p| index_of(p).is_some_and(|i| finish.contains(&i)))
    {
        env.finish_pod(pod, 0).await;
    }
    let job = env
        .wait_job("sim", "SuccessCriteriaMet", |j| {
            is_true(j, "SuccessCriteriaMet")
        })
        .await;
    assert_eq!(
        condition(&job, "SuccessCriteriaMet").map(|c| c.1),
        Some("SuccessPolicy".to_owned())
    );
    let want = format!("Matched rules at index {rule}");
    assert_eq!(message(&job, "SuccessCriteriaMet"), Some(want.clone()));
    // The lingering pods are deleted, and only then is the Job Complete.
    let job = env
        .wait_job("sim", "Complete", |j| is_true(j, "Complete"))
        .await;
    assert_eq!(
        condition(&job, "Complete"),
        Some(("True".to_owned(), "SuccessPolicy".to_owned()))
    );
    assert_eq!(message(&job, "Complete"), Some(want));
    let status = job.status.clone().unwrap_or_default();
    assert_eq!(counter(status.active), 0);
    assert_eq!(counter(status.succeeded), count(finish.len()));
    assert!(status.completion_time.is_some());
    assert!(!is_true(&job, "Failed"));
    env.wait_active_pods("sim", 0).await;
    env.no_finalizers_left("sim").await;
    env.teardown().await;
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

#[tokio::test]
async fn success_policy_story_1_the_leader_decides() {
    success_policy_story("leader", json!([{"succeededIndexes": "0"}]), &[0], 0).await;
}

#[tokio::test]
async fn success_policy_story_2_leader_or_five_workers() {
    let rules = json!([
        {"succeededIndexes": "0", "succeededCount": 1},
        {"succeededIndexes": "1-9", "succeededCount": 5},
    ]);
    success_policy_story("workers", rules, &[1, 2, 3, 4, 5], 1).await;
}

/// KEP-3998's open questions, answered in jobwarden's annotations: the leader's rule gives the
/// reason `LeaderSucceeded` and lets the workers run on (`Continue`). Once the leader has
/// succeeded the workers keep running; each outcome is counted, a failed worker is not
/// replaced, and `Complete` (reason `LeaderSucceeded`) comes only after the last one, every
/// status write accepted by kube-apiserver.
#[tokio::test]
async fn success_rule_reason_and_continue_the_workers_finish() {
    let Some(env) = setup("continue").await else {
        return;
    };
    let mut job = env.job(
        "sim",
        json!({"completions": 4, "parallelism": 4, "completionMode": "Indexed",
               "successPolicy": {"rules": [{"succeededIndexes": "0"}, {"succeededIndexes": "1-3"}]}}),
    );
    job.metadata.annotations = Some(
        [
            (
                "jobwarden.io/success-policy-rule-reasons".to_owned(),
                r#"["LeaderSucceeded", "WorkersSucceeded"]"#.to_owned(),
            ),
            (
                "jobwarden.io/success-policy-when-achieved".to_owned(),
                r#"["Continue", "Terminate"]"#.to_owned(),
            ),
        ]
        .into(),
    );
    env.create(&job).await;
    let pods = env.wait_active_pods("sim", 4).await;
    let pod = |i: i32| {
        pods.iter()
            .find(|p| index_of(p) == Some(i))
            .unwrap_or_else(|| panic!("a pod for index {i}"))
    };
    env.finish_pod(pod(0), 0).await;
    let job = env
        .wait_job("sim", "SuccessCriteriaMet", |j| {
            is_true(j, "SuccessCriteriaMet")
        })
        .await;
    let leader_succeeded = Some(("True".to_owned(), "LeaderSucceeded".to_owned()));
    assert_eq!(condition(&job, "SuccessCriteriaMet"), leader_succeeded);
    assert_eq!(
        message(&job, "SuccessCriteriaMet"),
        Some("Matched rules at index 0".to_owned())
    );
    assert!(!is_true(&job, "Complete"));
    // The workers keep running: none is deleted.
    assert_eq!(env.wait_active_pods("sim", 3).await.len(), 3);

    env.finish_pod(pod(1), 0).await;
    env.finish_pod(pod(2), 1).await;
    let job = env
        .wait_job("sim", "two workers counted", |j| {
            let s = j.status.clone().unwrap_or_default();
            counter(s.succeeded) == 2 && counter(s.failed) == 1
        })
        .await;
    assert!(!is_true(&job, "Complete"), "{:?}", job.status);
    assert_eq!(counter(job.status.clone().unwrap_or_default().active), 1);
    // The failed worker is not replaced.
    assert_eq!(env.wait_active_pods("sim", 1).await.len(), 1);

    env.finish_pod(pod(3), 0).await;
    let job = env
        .wait_job("sim", "Complete", |j| is_true(j, "Complete"))
        .await;
    assert_eq!(condition(&job, "Complete"), leader_succeeded);
    assert_eq!(
        message(&job, "Complete"),
        Some("Matched rules at index 0".to_owned())
    );
    let status = job.status.clone().unwrap_or_default();
    assert_eq!(counter(status.succeeded), 3);
    assert_eq!(counter(status.failed), 1);
    assert_eq!(status.completed_indexes.as_deref(), Some("0,1,3"));
    assert_eq!(counter(status.active), 0);
    assert!(status.completion_time.is_some());
    assert_eq!(
        env.job_pods("sim").await.len(),
        4,
        "no pod was created after the leader's"
    );
    assert_eq!(env.metrics.rejected_status_writes.get(), 0);
    env.no_finalizers_left("sim").await;
    env.teardown().await;
}

/// Runs a KEP-4443 story: the one pod exits with `code`, and the Job must fail with `reason`.
async fn named_rule_story(scenario: &str, names: Value, code: i32, reason: &str, rule: usize) {
    let Some(env) = setup(scenario).await else {
        return;
    };
    let rule_for = |c: i32| {
        json!({"action": "FailJob",
               "onExitCodes": {"containerName": "main", "operator": "In", "values": [c]}})
    };
    let mut job = env.job(
        "sim",
        json!({"completions": 1, "parallelism": 1, "backoffLimit": 0,
               "podFailurePolicy": {"rules": [rule_for(2), rule_for(3)]}}),
    );
    job.metadata.annotations = Some(
        [(
            "jobwarden.io/pod-failure-policy-rule-names".to_owned(),
            names.to_string(),
        )]
        .into(),
    );
    env.create(&job).await;
    let pods = env.wait_active_pods("sim", 1).await;
    env.finish_pod(&pods[0], code).await;
    let job = env
        .wait_job("sim", "Failed", |j| is_true(j, "Failed"))
        .await;
    let want = Some(("True".to_owned(), reason.to_owned()));
    assert_eq!(condition(&job, "FailureTarget"), want);
    assert_eq!(condition(&job, "Failed"), want);
    let expected_message = format!(
        "Container main for pod {}/{} failed with exit code {code} matching FailJob rule at index {rule}",
        env.ns,
        pods[0].name_any()
    );
    assert_eq!(message(&job, "Failed"), Some(expected_message));
    let status = job.status.clone().unwrap_or_default();
    assert_eq!(counter(status.failed), 1);
    assert_eq!(status.completion_time, None);
    env.no_finalizers_left("sim").await;
    env.teardown().await;
}

#[tokio::test]
async fn named_rule_exit_code_2() {
    let names = json!(["ExitCode2", "ExitCode3"]);
    named_rule_story("exitcode2", names, 2, "PodFailurePolicy_ExitCode2", 0).await;
}

#[tokio::test]
async fn named_rule_exit_code_3() {
    let names = json!(["ExitCode2", "ExitCode3"]);
    named_rule_story("exitcode3", names, 3, "PodFailurePolicy_ExitCode3", 1).await;
}

#[tokio::test]
async fn unnamed_rule_is_named_by_its_index() {
    let names = json!(["ExitCode2", null]);
    named_rule_story("unnamed", names, 3, "PodFailurePolicy_1", 1).await;
}

#[tokio::test]
async fn backoff_limit_per_index_fails_an_index_not_the_job() {
    let Some(env) = setup("perindex").await else {
        return;
    };
    env.create(&env.job(
        "idx",
        json!({"completions": 2, "parallelism": 2, "completionMode": "Indexed",
               "backoffLimitPerIndex": 0}),
    ))
    .await;
    let pods = env.wait_active_pods("idx", 2).await;
    for pod in &pods {
        let code = if index_of(pod) == Some(1) { 1 } else { 0 };
        env.finish_pod(pod, code).await;
    }
    let job = env
        .wait_job("idx", "Failed", |j| is_true(j, "Failed"))
        .await;
    assert_eq!(
        condition(&job, "Failed"),
        Some(("True".to_owned(), "FailedIndexes".to_owned()))
    );
    assert_eq!(
        message(&job, "Failed"),
        Some("Job has failed indexes".to_owned())
    );
    let status = job.status.clone().unwrap_or_default();
    assert_eq!(status.failed_indexes.as_deref(), Some("1"));
    assert_eq!(status.completed_indexes.as_deref(), Some("0"));
    assert_eq!(counter(status.failed), 1);
    env.no_finalizers_left("idx").await;
    env.teardown().await;
}
