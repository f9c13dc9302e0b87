//! The negative control of the e2e suites' identity: jobwarden run under a copy of deploy/'s
//! RBAC with one verb taken out (`create` on pods, from the controller's role) is refused by
//! kube-apiserver as soon as it needs that verb, and the harness's report names the call, so a
//! suite run under the real RBAC fails with the same clear message the day a call outgrows it.
//!
//! And least privilege for Secrets: the default install reads none, deploy/dispatch/ exactly
//! the ones it names (by name, list and watch with a `metadata.name=` field selector).
//!
//! Runs on the test binary's own control plane (`jobwarden-envtest`); skipped with one line
//! when the binaries are absent, and with `JOBWARDEN_E2E_KUBECONFIG` (no audit log to read).

use crate::support;

use futures::StreamExt as _;
use jobwarden_envtest::ControlPlane;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, PostParams, WatchParams};
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

/// An install that dispatches nothing reads no Secret: deploy/'s ServiceAccount may neither
/// get nor list nor watch Secrets in its own namespace (where the webhook's TLS key is).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_install_may_read_no_secret() {
    let Some(plane) = ControlPlane::shared() else {
        return;
    };
    let admin = plane.client().await;
    let identity = plane
        .installed_identity_variant("no-dispatch", |_| {})
        .await;
    let namespace = identity.namespace.clone();
    put_secret(&admin, &namespace, "jobwarden-tls-e2e").await;
    let secrets: Api<Secret> = Api::namespaced(identity.client(&namespace).await, &namespace);
    assert_forbidden(secrets.get("jobwarden-tls-e2e").await, "get");
    assert_forbidden(secrets.list(&ListParams::default()).await, "list");
    let by_name = ListParams::default().fields("metadata.name=jobwarden-tls-e2e");
    assert_forbidden(secrets.list(&by_name).await, "list by name");
}

/// deploy/dispatch/'s Role lets the dispatcher read exactly the Secrets it names: by name,
/// and listed or watched with the field selector `metadata.name=` (as the dispatcher's
/// credential source reads them); not every Secret, and no other one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dispatch_install_reads_exactly_the_named_secrets() {
    let Some(plane) = ControlPlane::shared() else {
        return;
    };
    let admin = plane.client().await;
    let named = "jobwarden-worker-rbac-e2e";
    let identity = plane
        .installed_dispatching_identity_variant("named-secrets", &[named.to_owned()])
        .await;
    let namespace = identity.namespace.clone();
    put_secret(&admin, &namespace, named).await;
    put_secret(&admin, &namespace, "jobwarden-other-rbac-e2e").await;
    let secrets: Api<Secret> = Api::namespaced(identity.client(&namespace).await, &namespace);

    let got = secrets.get(named).await.expect("the named Secret is read");
    assert_eq!(got.metadata.name.as_deref(), Some(named));
    let by_name = ListParams::default().fields(&format!("metadata.name={named}"));
    let listed = secrets.list(&by_name).await.expect("listed by name");
    assert_eq!(listed.items.len(), 1);
    let watch = secrets
        .watch(
            &WatchParams::default().fields(&format!("metadata.name={named}")),
            "0",
        )
        .await
        .expect("watched by name");
    let mut watch = std::pin::pin!(watch);
    // The watch from resourceVersion 0 starts with the object as it is; its first event is
    // enough to prove the watch was allowed (a refused one fails above).
    let first = tokio::time::timeout(std::time::Duration::from_secs(60), watch.next())
        .await
        .expect("the watch answers");
    assert!(first.is_some(), "the watch delivers the named Secret");

    assert_forbidden(
        secrets.get("jobwarden-other-rbac-e2e").await,
        "get of another",
    );
    assert_forbidden(secrets.list(&ListParams::default()).await, "list of all");
    let other = ListParams::default().fields("metadata.name=jobwarden-other-rbac-e2e");
    assert_forbidden(secrets.list(&other).await, "list of another by name");
}

async fn put_secret(admin: &kube::Client, namespace: &str, name: &str) {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name},
        "stringData": {"kubeconfig": "not one"},
    }))
    .expect("a Secret");
    let api: Api<Secret> = Api::namespaced(admin.clone(), namespace);
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("the Secret {name} is created: {e}"),
    }
}

fn assert_forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>, what: &str) {
    match result {
        Err(kube::Error::Api(e)) if e.code == 403 => {}
        other => panic!("{what}: expected 403 Forbidden, got {other:?}"),
    }
}
