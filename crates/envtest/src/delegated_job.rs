//! The Job every e2e test starts from: delegated through `spec.managedBy`, its pods naming a
//! scheduler that does not exist (the test plays the kubelet), `spec` merged over these
//! defaults. The controller's e2e tests build their Jobs with it, and `tests/simulate_cli.rs`
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
