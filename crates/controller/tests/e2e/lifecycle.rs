//! The core lifecycle: pods created and counted, back-off, suspend and resume, and Jobs left
//! to other controllers.

use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn non_indexed_job_runs_to_completion() {
    let Some(env) = setup("nonindexed").await else {
        return;
    };
    env.create(&env.job("work", json!({"completions": 3, "parallelism": 2})))
        .await;
    let first = env.wait_active_pods("work", 2).await;
    for pod in &first {
        assert!(
            pod.finalizers()
                .iter()
                .any(|f| f == "jobwarden.io/job-tracking")
        );
        env.finish_pod(pod, 0).await;
    }
    let last = env.wait_active_pods("work", 1).await;
    env.finish_pod(&last[0], 0).await;
    let job = env
        .wait_job("work", "Complete", |j| is_true(j, "Complete"))
        .await;
    let status = job.status.clone().unwrap_or_default();
    assert_eq!(counter(status.succeeded), 3);
    assert!(is_true(&job, "SuccessCriteriaMet"));
    assert!(status.completion_time.is_some() && status.start_time.is_some());
    env.no_finalizers_left("work").await;
    env.teardown().await;
}

#[tokio::test]
async fn indexed_job_runs_to_completion() {
    let Some(env) = setup("indexed").await else {
        return;
    };
    env.create(&env.job(
        "idx",
        json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed"}),
    ))
    .await;
    let pods = env.wait_active_pods("idx", 3).await;
    let mut indexes: Vec<String> = pods
        .iter()
        .filter_map(|p| {
            annotation(p, "batch.kubernetes.io/job-completion-index").map(str::to_owned)
        })
        .collect();
    indexes.sort();
    assert_eq!(indexes, ["0", "1", "2"]);
    for pod in &pods {
        let index = annotation(pod, "batch.kubernetes.io/job-completion-index").unwrap_or("");
        let hostname = pod.spec.as_ref().and_then(|s| s.hostname.clone());
        assert_eq!(hostname, Some(format!("idx-{index}")));
        assert_eq!(
            pod.labels()
                .get("batch.kubernetes.io/job-completion-index")
                .map(String::as_str),
            Some(index)
        );
        // As upstream's addCompletionIndexEnvVariable: read from the label.
        let index_env = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.env.as_ref())
            .and_then(|env| env.iter().find(|e| e.name == "JOB_COMPLETION_INDEX"))
            .and_then(|e| e.value_from.as_ref())
            .and_then(|v| v.field_ref.as_ref())
            .map(|f| f.field_path.clone());
        assert_eq!(
            index_env.as_deref(),
            Some("metadata.labels['batch.kubernetes.io/job-completion-index']")
        );
        env.finish_pod(pod, 0).await;
    }
    let job = env
        .wait_job("idx", "Complete", |j| is_true(j, "Complete"))
        .await;
    let status = job.status.clone().unwrap_or_default();
    assert_eq!(status.completed_indexes.as_deref(), Some("0-2"));
    assert_eq!(counter(status.succeeded), 3);
    env.no_finalizers_left("idx").await;
    env.teardown().await;
}

#[tokio::test]
async fn backoff_limit_exceeded_fails_the_job() {
    let Some(env) = setup("backoff").await else {
        return;
    };
    env.create(&env.job(
        "doomed",
        json!({"completions": 2, "parallelism": 2, "backoffLimit": 0}),
    ))
    .await;
    let pods = env.wait_active_pods("doomed", 2).await;
    env.finish_pod(&pods[0], 1).await;
    let job = env
        .wait_job("doomed", "Failed", |j| is_true(j, "Failed"))
        .await;
    assert_eq!(
        condition(&job, "FailureTarget"),
        Some(("True".to_owned(), "BackoffLimitExceeded".to_owned()))
    );
    assert_eq!(
        condition(&job, "Failed"),
        Some(("True".to_owned(), "BackoffLimitExceeded".to_owned()))
    );
    let status = job.status.clone().unwrap_or_default();
    assert_eq!(counter(status.active), 0);
    assert_eq!(status.completion_time, None);
    // The failed pod, and the running one deleted with the Job's failure.
    assert_eq!(counter(status.failed), 2);
    env.no_finalizers_left("doomed").await;
    env.teardown().await;
}

#[tokio::test]
async fn suspend_then_resume() {
    let Some(env) = setup("suspend").await else {
        return;
    };
    env.create(&env.job("pausable", json!({"completions": 2, "parallelism": 2})))
        .await;
    let pods = env.wait_active_pods("pausable", 2).await;
    env.finish_pod(&pods[0], 0).await;
    env.wait_job("pausable", "one success counted", |j| {
        counter(j.status.as_ref().and_then(|s| s.succeeded)) == 1
    })
    .await;

    let suspend = json!({"spec": {"suspend": true}});
    env.jobs()
        .patch("pausable", &PatchParams::default(), &Patch::Merge(&suspend))
        .await
        .expect("suspended");
    let job = env
        .wait_job("pausable", "Suspended=True", |j| is_true(j, "Suspended"))
        .await;
    assert_eq!(
        condition(&job, "Suspended").map(|c| c.1),
        Some("JobSuspended".to_owned())
    );
    // Upstream clears startTime in the write that sets Suspended=True (v1.36's
    // MutableSchedulingDirectivesForSuspendedJobs), so the same Job object shows both.
    assert_eq!(
        job.status.as_ref().and_then(|s| s.start_time.clone()),
        None,
        "startTime is cleared with Suspended=True"
    );
    env.wait_active_pods("pausable", 0).await;

    let resume = json!({"spec": {"suspend": false}});
    env.jobs()
        .patch("pausable", &PatchParams::default(), &Patch::Merge(&resume))
        .await
        .expect("resumed");
    let job = env
        .wait_job("pausable", "Suspended=False", |j| {
            condition(j, "Suspended").is_some_and(|(s, _)| s == "False")
        })
        .await;
    assert_eq!(
        condition(&job, "Suspended").map(|c| c.1),
        Some("JobResumed".to_owned())
    );
    assert!(
        job.status
            .as_ref()
            .and_then(|s| s.start_time.clone())
            .is_some(),
        "startTime is set again on resume"
    );
    // The success before the suspension still counts: one pod is left to run.
    let pods = env.wait_active_pods("pausable", 1).await;
    env.finish_pod(&pods[0], 0).await;
    let job = env
        .wait_job("pausable", "Complete", |j| is_true(j, "Complete"))
        .await;
    assert_eq!(counter(job.status.and_then(|s| s.succeeded)), 2);
    env.teardown().await;
}

#[tokio::test]
async fn a_job_not_delegated_to_this_controller_is_left_alone() {
    let Some(env) = setup("foreign").await else {
        return;
    };
    let mut job = env.job("theirs", json!({"completions": 1, "parallelism": 1}));
    if let Some(spec) = job.spec.as_mut() {
        spec.managed_by = Some("example.com/someone-else".to_owned());
    }
    env.create(&job).await;
    // One Job watch delivers every Job in resourceVersion order: once a Job of its own,
    // created afterwards, has its pod, the controller has gone past the foreign one.
    env.create(&env.job("ours", json!({"completions": 1, "parallelism": 1})))
        .await;
    env.wait_active_pods("ours", 1).await;
    assert!(
        env.metrics.foreign_jobs_seen.get() > 0,
        "the foreign Job was seen and counted"
    );
    let job = env.jobs().get("theirs").await.expect("the Job exists");
    assert!(
        env.job_pods("theirs").await.is_empty(),
        "no pod was created"
    );
    let status = job.status.unwrap_or_default();
    assert_eq!(status.start_time, None);
    assert_eq!(status.conditions, None);
    assert_eq!(counter(status.active), 0);
    env.teardown().await;
}

#[tokio::test]
async fn a_pod_deleted_while_running_holds_its_replacement_back_after_it_is_gone() {
    let Some(env) = setup("backoffmemory").await else {
        return;
    };
    env.create(&env.job(
        "once",
        json!({"completions": 1, "parallelism": 1, "backoffLimit": 3}),
    ))
    .await;
    let pods = env.wait_active_pods("once", 1).await;
    let running = json!({"status": {"phase": "Running"}});
    env.pods()
        .patch_status(
            &pods[0].name_any(),
            &PatchParams::default(),
            &Patch::Merge(&running),
        )
        .await
        .expect("the pod runs");
    // Deleted while running: it counts as failed, loses its tracking finalizer, and (never
    // scheduled, so no grace period) is gone at once.
    let deleted_at = k8s_openapi::jiff::Timestamp::now();
    env.pods()
        .delete(&pods[0].name_any(), &DeleteParams::default())
        .await
        .expect("deleted");
    env.wait_job("once", "the failure counted", |j| {
        counter(j.status.as_ref().and_then(|s| s.failed)) == 1
    })
    .await;
    let replacement = env.wait_active_pods("once", 1).await;
    let created = replacement[0]
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .expect("a creation time");
    // Upstream's back-off record outlives the pod: no replacement before its 10 s. (The
    // creation time has whole seconds, hence 9.)
    let waited = created.duration_since(deleted_at);
    assert!(waited.as_secs() >= 9, "replaced after {waited:?}");
    env.teardown().await;
}
