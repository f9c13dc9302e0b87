//! The pod timings a delegated Job may set (`jobwarden.io/pod-failure-backoff`,
//! `jobwarden.io/pod-start-timeout`), on a real API server, the test playing the kubelet.

use jobwarden_controller::metrics::StartTimeoutLabels;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::support::*;

fn created(pod: &Pod) -> Timestamp {
    pod.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .expect("a creation time")
}

fn with_annotations(mut job: Job, annotations: &[(&str, &str)]) -> Job {
    job.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    job
}

/// The kubelet's part: the pod is bound and its container cannot pull its image, as a kubelet
/// reports it (`PodScheduled=True`, `Ready=False`, the container waiting with `reason`).
async fn hold_in(env: &Env, pod: &Pod, reason: &str) {
    let now = Timestamp::now().to_string();
    let status = json!({"status": {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "lastTransitionTime": now},
        ],
        "containerStatuses": [{
            "name": "main", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": reason, "message": "Back-off pulling image \"busybox\""}},
        }],
    }});
    env.pods()
        .patch_status(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .expect("the kubelet's status write");
}

fn timeouts(env: &Env) -> u64 {
    env.metrics
        .pod_start_timeouts
        .get_or_create(&StartTimeoutLabels {
            reason: "ImagePullBackOff".to_owned(),
        })
        .get()
}

/// The Job of the issue's "done when", with a 2 s start timeout (the bounds allow 1 s) and a
/// 1 s back-off, so that the test takes seconds.
fn stuck_job(env: &Env, name: &str, spec: Value) -> Job {
    with_annotations(
        env.job(name, spec),
        &[
            ("jobwarden.io/pod-start-timeout", "2s"),
            ("jobwarden.io/pod-failure-backoff", r#"{"initial":"1s"}"#),
        ],
    )
}

#[tokio::test]
async fn a_pod_that_never_pulls_its_image_fails_and_counts_against_the_backoff_limit() {
    let Some(env) = setup("starttimeout").await else {
        return;
    };
    env.create(&stuck_job(
        &env,
        "stuck",
        json!({"completions": 1, "parallelism": 1, "backoffLimit": 1}),
    ))
    .await;
    let first = env.wait_active_pods("stuck", 1).await;
    hold_in(&env, &first[0], "ImagePullBackOff").await;
    // The first timeout: failed (the API server took the Pending -> Failed write with the
    // condition), deleted, counted, and replaced.
    env.wait_job("stuck", "the first timeout counted", |j| {
        counter(j.status.as_ref().and_then(|s| s.failed)) == 1
    })
    .await;
    let second = eventually("a replacement pod", || async {
        let active = only_active(env.job_pods("stuck").await);
        match active.first() {
            Some(p) if p.uid() != first[0].uid() => Ok(p.clone()),
            _ => Err(format!("{} active", active.len())),
        }
    })
    .await;
    assert!(!is_true(
        &env.jobs().get("stuck").await.expect("the Job"),
        "Failed"
    ));
    assert_eq!(timeouts(&env), 1);
    hold_in(&env, &second, "ImagePullBackOff").await;
    let job = env
        .wait_job("stuck", "Failed", |j| is_true(j, "Failed"))
        .await;
    assert_eq!(
        condition(&job, "Failed"),
        Some(("True".to_owned(), "BackoffLimitExceeded".to_owned()))
    );
    assert_eq!(counter(job.status.as_ref().and_then(|s| s.failed)), 2);
    assert_eq!(timeouts(&env), 2);
    assert_eq!(env.metrics.rejected_status_writes.get(), 0);
    env.no_finalizers_left("stuck").await;
    env.teardown().await;
}

#[tokio::test]
async fn a_rule_on_the_start_timeout_condition_fails_the_job_at_once() {
    let Some(env) = setup("starttimeoutrule").await else {
        return;
    };
    let mut job = stuck_job(
        &env,
        "stuck",
        json!({"completions": 1, "parallelism": 1, "backoffLimit": 6,
               "podFailurePolicy": {"rules": [{"action": "FailJob",
                   "onPodConditions": [{"type": "jobwarden.io/PodStartTimeout", "status": "True"}]}]}}),
    );
    job.metadata.annotations.get_or_insert_default().insert(
        "jobwarden.io/pod-failure-policy-rule-names".to_owned(),
        r#"["ImageNeverStarted"]"#.to_owned(),
    );
    // The API server takes the domain-qualified condition type in onPodConditions.
    env.create(&job).await;
    let pods = env.wait_active_pods("stuck", 1).await;
    hold_in(&env, &pods[0], "ImagePullBackOff").await;
    let job = env
        .wait_job("stuck", "Failed", |j| is_true(j, "Failed"))
        .await;
    assert_eq!(
        condition(&job, "Failed"),
        Some((
            "True".to_owned(),
            "PodFailurePolicy_ImageNeverStarted".to_owned()
        ))
    );
    assert_eq!(counter(job.status.as_ref().and_then(|s| s.failed)), 1);
    assert_eq!(env.metrics.rejected_status_writes.get(), 0);
    env.no_finalizers_left("stuck").await;
    env.teardown().await;
}

#[tokio::test]
async fn a_tuned_back_off_replaces_a_failed_pod_before_the_default_one() {
    let Some(env) = setup("tunedbackoff").await else {
        return;
    };
    let spec = json!({"completions": 1, "parallelism": 1, "backoffLimit": 3});
    let quick = with_annotations(
        env.job("quick", spec.clone()),
        &[(
            "jobwarden.io/pod-failure-backoff",
            r#"{"initial":"1s","max":"2m"}"#,
        )],
    );
    env.create(&quick).await;
    env.create(&env.job("default", spec)).await;
    let first_quick = env.wait_active_pods("quick", 1).await;
    let first_default = env.wait_active_pods("default", 1).await;
    // Both fail in the same second.
    env.finish_pod(&first_quick[0], 1).await;
    env.finish_pod(&first_default[0], 1).await;
    let failed_at = Timestamp::now();
    let quick_again = env.wait_active_pods("quick", 1).await;
    let default_again = env.wait_active_pods("default", 1).await;
    // The order the two back-offs (1 s and upstream's 10 s) put them in, and the 10 s one
    // kept in full (the creation time has whole seconds, hence 9).
    assert!(
        created(&quick_again[0]) < created(&default_again[0]),
        "the 1 s back-off's replacement {} came before the 10 s one's {}",
        created(&quick_again[0]),
        created(&default_again[0])
    );
    let waited = created(&default_again[0]).duration_since(failed_at);
    assert!(waited.as_secs() >= 9, "default replaced after {waited:?}");
    assert_ne!(quick_again[0].name_any(), first_quick[0].name_any());
    assert_eq!(env.metrics.rejected_status_writes.get(), 0);
    env.teardown().await;
}
