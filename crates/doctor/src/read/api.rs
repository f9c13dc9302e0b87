//! The API server's own reads: its version (does it answer at all), who it takes the caller
//! for, and the feature probes (server-side dry runs).

use serde_json::json;

use super::{Cluster, collection, with_causes};
use crate::answer::Reply;
use crate::api_server::{Caller, Version};
use crate::features::{probe_job, probe_webhook_configuration};

/// `GET /version`: the first request, whose failure means the API server cannot be reached.
pub async fn version(cluster: &Cluster) -> Result<Version, String> {
    let info = cluster
        .client
        .apiserver_version()
        .await
        .map_err(|e| with_causes(&e))?;
    Ok(Version {
        git_version: info.git_version,
        major: info.major,
        minor: info.minor,
    })
}

/// A SelfSubjectReview (authentication.k8s.io/v1): the caller as the API server sees it.
pub async fn caller(cluster: &Cluster) -> Result<Caller, String> {
    let review = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "SelfSubjectReview",
    });
    let answer = cluster
        .review("/apis/authentication.k8s.io/v1/selfsubjectreviews", &review)
        .await?;
    if !answer.succeeded() {
        return Err(crate::answer::refusal(&answer));
    }
    let user = &answer.body["status"]["userInfo"];
    Ok(Caller {
        username: user["username"].as_str().unwrap_or("?").to_owned(),
        groups: user["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g.as_str().map(str::to_owned))
            .collect(),
    })
}

/// The Job probe in `namespace`, and the webhook configuration probe.
pub async fn features(cluster: &Cluster, namespace: &str) -> (Reply, Reply) {
    let jobs = collection("batch", "v1", Some(namespace), "jobs");
    let configurations = collection(
        "admissionregistration.k8s.io",
        "v1",
        None,
        "validatingwebhookconfigurations",
    );
    let (job, configuration) = (probe_job(), probe_webhook_configuration());
    futures::join!(
        cluster.dry_run_create(&jobs, &job),
        cluster.dry_run_create(&configurations, &configuration),
    )
}
