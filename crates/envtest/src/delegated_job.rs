//! The Job every e2e test starts from: delegated through `spec.managedBy`, its pods naming a
//! scheduler that does not exist (the test plays the kubelet), `spec` merged over these
//! defaults. The controller's e2e tests build their Jobs with it, and `tests/it/simulate_cli.rs`
//! too, so that its stories are told of the very Jobs those tests hold a real cluster to.

use serde_json::{Value, json};

pub fn delegated_job(name: &str, managed_by: &str, spec: Value) -> Value {
    let mut job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "managedBy": managed_by,
            "template": {"spec": {
                "schedulerName": "jobwarden-e2e-nobody",
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox"}],
            }},
        },
    });
    if let (Some(target), Some(extra)) = (job["spec"].as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            target.insert(k.clone(), v.clone());
        }
    }
    job
}

/// [`delegated_job`], its pods for kube-scheduler (`default-scheduler`), on a plane that runs
/// one ([`crate::Options::scheduler`]): they are bound to the Nodes a test lays out, or stay
/// `Pending` as `Unschedulable`.
pub fn scheduled_job(name: &str, managed_by: &str, spec: Value) -> Value {
    let mut job = delegated_job(name, managed_by, spec);
    if let Some(pod) = job["spec"]["template"]["spec"].as_object_mut() {
        pod.remove("schedulerName");
    }
    job
}

/// The Job the scale tests and benchmarks run: `pods` pods at once (`completions` and
/// `parallelism`), `mode` their completion mode, delegated to `managed_by` or (`None`) run by
/// the cluster's own Job controller; its pods name no scheduler that exists, as above.
pub fn load_job(name: &str, pods: usize, mode: &str, managed_by: Option<&str>) -> Value {
    let mut job = delegated_job(
        name,
        managed_by.unwrap_or_default(),
        json!({"completions": pods, "parallelism": pods, "completionMode": mode}),
    );
    if managed_by.is_none()
        && let Some(spec) = job["spec"].as_object_mut()
    {
        spec.remove("managedBy");
    }
    job
}
