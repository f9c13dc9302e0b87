//! Upstream's adoption on a real API server: a pod made by hand with a Job's selector labels
//! and no owner becomes the Job's (controller owner reference, tracking finalizer), counts,
//! and the controller makes one pod fewer.

use kube::ResourceExt;
use kube::api::PostParams;
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn a_bare_pod_with_the_job_s_labels_is_adopted() {
    let Some(mut env) = setup_without_controller("adopt").await else {
        return;
    };
    // The Job and the bare pod are both there before the controller lists anything.
    let job = env
        .create(&env.job("adopted", json!({"completions": 2, "parallelism": 2})))
        .await;
    let uid = job.uid().expect("a uid");
    let labels = job
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .and_then(|s| s.match_labels.clone())
        .expect("the generated selector");
    let bare: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "by-hand", "labels": labels},
        "spec": {"schedulerName": "jobwarden-e2e-nobody", "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "busybox"}]},
    }))
    .expect("a pod");
    env.pods()
        .create(&PostParams::default(), &bare)
        .await
        .expect("the bare pod is created");
    env.start_controller().await;

    let active = env.wait_active_pods("adopted", 2).await;
    assert!(
        active.iter().any(|p| p.name_any() == "by-hand"),
        "the bare pod is one of the two"
    );
    let adopted = env.pods().get("by-hand").await.expect("the pod");
    let owner = adopted
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .cloned()
        .expect("a controller");
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Job", uid.as_str())
    );
    assert_eq!(owner.block_owner_deletion, Some(true));
    assert!(
        adopted
            .finalizers()
            .iter()
            .any(|f| f == "jobwarden.io/job-tracking")
    );
    for pod in &active {
        env.finish_pod(pod, 0).await;
    }
    let done = env
        .wait_job("adopted", "Complete", |j| is_true(j, "Complete"))
        .await;
    assert_eq!(counter(done.status.as_ref().and_then(|s| s.succeeded)), 2);
    env.no_finalizers_left("adopted").await;
    assert_eq!(
        env.job_pods("adopted").await.len(),
        2,
        "one pod made, one adopted"
    );
    env.teardown().await;
}
