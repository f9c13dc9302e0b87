//! The pod timings a delegated Job may set (`jobwarden.io/pod-failure-backoff`,
//! `jobwarden.io/pod-start-timeout`), on a real API server, the test playing the kubelet.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use serde_json::json;

use crate::support::*;

fn created(pod: &Pod) -> Timestamp {
    pod.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .expect("a creation time")
}

#[tokio::test]
async fn a_tuned_back_off_replaces_a_failed_pod_before_the_default_one() {
    let Some(env) = setup("tunedbackoff").await else {
        return;
    };
    let spec = json!({"completions": 1, "parallelism": 1, "backoffLimit": 3});
    let mut quick = env.job("quick", spec.clone());
    quick.metadata.annotations = Some(
        [(
            "jobwarden.io/pod-failure-backoff".to_owned(),
            r#"{"initial":"1s","max":"2m"}"#.to_owned(),
        )]
        .into(),
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
