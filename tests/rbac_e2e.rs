//! The negative control of the e2e suites' identity: jobwarden run under a copy of deploy/'s
//! RBAC with one verb taken out (`create` on pods, from the controller's role) is refused by
//! kube-apiserver as soon as it needs that verb, and the harness's report names the call, so a
//! suite run under the real RBAC fails with the same clear message the day a call outgrows it.
//!
//! Runs on the test binary's own control plane (`jobwarden-envtest`); skipped with one line
//! when the binaries are absent, and with `JOBWARDEN_E2E_KUBECONFIG` (no audit log to read).

mod support;

use jobwarden_envtest::ControlPlane;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use support::served::Served;

const CONTROLLER: &str = "jobwarden.io/e2e-rbac";

/// Takes `verb` out of every rule on `resource` in the ClusterRole whose name ends in `role`.
fn without_verb(objects: &mut [Value], role: &str, resource: &str, verb: &str) {
    let mut removed = false;
    for o in objects
        .iter_mut()
        .filter(|o| o["kind"] == "ClusterRole")
        .filter(|o| {
            o["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.ends_with(role))
        })
    {
        for rule in o["rules"].as_array_mut().into_iter().flatten() {
            let on_resource = rule["resources"]
                .as_array()
                .is_some_and(|r| r.iter().any(|x| x == resource));
            if let (true, Some(verbs)) = (on_resource, rule["verbs"].as_array_mut()) {
                let before = verbs.len();
                verbs.retain(|v| v != verb);
                removed |= verbs.len() < before;
            }
        }
    }
    assert!(
        removed,
        "deploy/ grants no {verb} on {resource} in {role} to take out"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verb_missing_from_the_role_is_refused_and_named() {
    if std::env::var_os("JOBWARDEN_E2E_KUBECONFIG").is_some() {
        eprintln!("skipped: the refusals are read from the envtest API server's audit log");
        return;
    }
    let Some(plane) = ControlPlane::shared() else {
        return;
    };
    let admin = plane.client().await;
    let ns = plane.create_namespace(&admin, "jobwarden-rbac").await;
    let identity = plane
        .installed_identity_variant("no-pod-create", |objects| {
            without_verb(objects, "jobwarden-controller", "pods", "create")
        })
        .await;
    identity.grant_in(plane, &ns);
    let dir = std::env::temp_dir().join(format!("jobwarden-{ns}"));
    std::fs::create_dir_all(&dir).expect("the test's folder");
    let _served = tokio::task::block_in_place(|| {
        Served::start(&dir, &identity, &ns, &["--controller-name", CONTROLLER])
    });

    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "needs-a-pod"},
        "spec": {
            "managedBy": CONTROLLER,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox:1.36", "command": ["true"]}],
            }},
        },
    }))
    .expect("a Job");
    Api::<Job>::namespaced(admin, &ns)
        .create(&PostParams::default(), &job)
        .await
        .expect("the Job is created");

    let wanted = format!("create pods in namespace {ns}");
    let refused = tokio::task::block_in_place(|| {
        support::eventually_blocking(&format!("kube-apiserver to refuse {wanted}"), || {
            let refused = identity.refusals().unwrap_or_default();
            if refused.iter().any(|r| r.call == wanted) {
                Ok(refused)
            } else {
                Err(format!("{refused:?}"))
            }
        })
    });
    let report = identity.refusal_report(&refused);
    // What a suite run under a role short of this verb fails with.
    eprintln!("{report}");
    assert!(
        report.contains(
            "kube-apiserver refused system:serviceaccount:jobwarden-system:no-pod-create-jobwarden "
        ),
        "{report}"
    );
    assert!(report.contains(&wanted), "{report}");
    assert!(
        report.contains("cannot create resource \"pods\""),
        "{report}"
    );
    // Nothing else was refused: only the verb taken out is missing.
    assert!(refused.iter().all(|r| r.call == wanted), "{report}");
}
