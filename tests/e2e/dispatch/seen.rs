//! Seen, not guessed (issue 42): `jobwarden explain` and `jobwarden doctor`, the built binary run
//! against the management cluster with the admin kubeconfig, as an operator runs them. explain
//! names a dispatched Job's worker and tells its copy's story with the copy's pods read from the
//! worker (with the operator's own kubeconfig for it; with the dispatcher's own, from its
//! Secret, the pods are said unread, and the worker refuses nothing), then, once the Job has
//! ended, that its copy was deleted; it says why a Job only the refused worker may take waits.
//! doctor's dispatch checks pass for east and west, fail for the refused worker naming why, and
//! for a worker whose token it never issued, with its 401.

use std::path::PathBuf;
use std::process::Command;

use jobwarden_envtest::kubelet::{EXIT_CODE_ANNOTATION, RUNS_SECONDS_ANNOTATION};
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::dispatch::env::*;

/// `jobwarden ARGS… --kubeconfig <the management cluster's admin>`: exit status, stdout.
pub(super) async fn jobwarden(test: &Test, args: &[String]) -> (Option<i32>, String) {
    let kubeconfig = test.world.fleet.management.kubeconfig().to_path_buf();
    let given = args.to_vec();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_jobwarden"))
            .args(&given)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .output()
    })
    .await
    .expect("the command's thread")
    .expect("jobwarden runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.code() != Some(2),
        "jobwarden {args:?}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), stdout)
}

/// The policy file jobwarden runs with, which explain and doctor are given (jobwarden runs as a
/// process here, not as a Deployment whose ConfigMap they could read).
fn policy(test: &Test) -> String {
    test.world.dispatcher.policy().display().to_string()
}

pub(super) fn explain_args(test: &Test, job: &str, extra: &[String]) -> Vec<String> {
    let mut args: Vec<String> = [
        "explain",
        "-n",
        &test.ns,
        job,
        "--jobwarden-namespace",
        &test.world.dispatcher.identity.namespace,
        "--config",
        &policy(test),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    args.extend_from_slice(extra);
    args
}

/// `--worker-kubeconfig NAME=<the worker's admin kubeconfig>` for each worker.
fn admin_of_workers(test: &Test) -> Vec<String> {
    WORKERS
        .iter()
        .zip(&test.world.fleet.workers)
        .flat_map(|(name, plane)| {
            let path: PathBuf = plane.kubeconfig().to_path_buf();
            [
                "--worker-kubeconfig".to_owned(),
                format!("{name}={}", path.display()),
            ]
        })
        .collect()
}

/// Ends a running pod on a worker as its kubelet would: `main` exited 0.
async fn succeed(pods: &Api<Pod>, name: &str) {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let status = json!({"status": {
        "phase": "Succeeded",
        "containerStatuses": [{
            "name": "main", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "startedAt": now, "finishedAt": now}},
        }],
    }});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("pod {name} is ended: {e}"));
}

/// The copy's pods on `worker`, by the Job's name, as `(name, phase)`.
async fn copy_pods(test: &Test, worker: &str, job: &str) -> Vec<(String, String)> {
    test.worker_pods(worker)
        .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}")))
        .await
        .map(|l| {
            l.items
                .iter()
                .map(|p| {
                    (
                        p.name_any(),
                        jobwarden_envtest::kubelet::pod_phase(p).to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_names_the_worker_and_tells_the_copys_pods_read_there() {
    let Some(test) = Test::new("dispatch-seen").await else {
        return;
    };
    // Two pods one after the other, each running until the test ends it.
    let user = test
        .create(
            "seen",
            json!({"completions": 2, "parallelism": 1, "template": {
                "metadata": {"annotations": {
                    RUNS_SECONDS_ANNOTATION: "3600", EXIT_CODE_ANNOTATION: "0"}},
                "spec": {"schedulerName": "jobwarden-e2e-nobody", "restartPolicy": "Never",
                         "containers": [{"name": "main", "image": "busybox"}]}}}),
            json!({}),
        )
        .await;
    let placed = test
        .wait_job("seen", "a worker recorded", |j| recorded(j).is_some())
        .await;
    let worker = recorded(&placed).expect("recorded");
    let pods = test.worker_pods(&worker);
    test.wait_for("the copy's first pod running", || async {
        copy_pods(&test, &worker, "seen")
            .await
            .iter()
            .any(|(_, p)| p == "Running")
    })
    .await;
    let first = copy_pods(&test, &worker, "seen").await[0].0.clone();
    succeed(&pods, &first).await;
    test.wait_for("the second pod running", || async {
        copy_pods(&test, &worker, "seen")
            .await
            .iter()
            .any(|(n, p)| *n != first && p == "Running")
    })
    .await;
    let second = copy_pods(&test, &worker, "seen")
        .await
        .into_iter()
        .find(|(n, _)| *n != first)
        .map(|(n, _)| n)
        .expect("a second pod");

    // With the operator's own kubeconfig for the worker: the copy and its pods.
    let (code, text) = jobwarden(
        &test,
        &explain_args(&test, "seen", &admin_of_workers(&test)),
    )
    .await;
    assert_eq!(code, Some(0), "{text}");
    for said in [
        format!(
            "Job {}/seen, run by jobwarden's dispatcher (spec.managedBy: {DISPATCHER}) on worker {worker}.",
            test.ns
        ),
        format!(
            "Placed on worker {worker} (jobwarden.io/worker); should it stop answering, the Job keeps its place there for {WORKER_LOST_SECONDS}s"
        ),
        format!("Its copy on worker {worker}, read with --worker-kubeconfig {worker}="),
        "run there by the built-in Job controller.".to_owned(),
        format!("  Pods:\n    pod {first} succeeded"),
        format!("    pod {second} running"),
        format!("  Events on worker {worker}:"),
        "Normal SuccessfulCreate from job-controller".to_owned(),
        format!("Normal Dispatched from {DISPATCHER}: Created the Job's copy on worker {worker}"),
    ] {
        assert!(text.contains(&said), "{said:?} in:\n{text}");
    }
    let (_, json) = jobwarden(
        &test,
        &explain_args(
            &test,
            "seen",
            &[admin_of_workers(&test), vec!["-o".into(), "json".into()]].concat(),
        ),
    )
    .await;
    let json: Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(json["dispatch"]["worker"], worker.as_str());
    assert_eq!(json["dispatch"]["copy"]["state"], "read");
    let story = &json["dispatch"]["copy"]["story"];
    assert_ne!(
        story["uid"],
        uid(&user).as_str(),
        "the copy has a UID of its own"
    );
    assert_eq!(story["finishedPods"][0]["name"], first.as_str());
    assert_eq!(story["activePods"][0]["name"], second.as_str());
    let (_, svg) = jobwarden(
        &test,
        &explain_args(
            &test,
            "seen",
            &[admin_of_workers(&test), vec!["-o".into(), "svg".into()]].concat(),
        ),
    )
    .await;
    assert!(
        svg.starts_with("<svg") && svg.contains(&first) && svg.contains(&second),
        "the copy's timeline: {svg}"
    );

    // With the dispatcher's own kubeconfig, from its Secret: the copy and its pods (the
    // worker role reads pods, for placement), and that its Events may not be read with it
    // (nothing is asked that the worker would refuse).
    let (code, text) = jobwarden(&test, &explain_args(&test, "seen", &[])).await;
    assert_eq!(code, Some(0), "{text}");
    for said in [
        format!(
            "Its copy on worker {worker}, read with Secret {}/jobwarden-worker-{worker}:",
            test.world.dispatcher.identity.namespace
        ),
        "  Pods:\n".to_owned(),
        format!(
            "  Events on worker {worker}: not read: Secret {}/jobwarden-worker-{worker} may not list events in namespace {} on worker {worker}.",
            test.world.dispatcher.identity.namespace, test.ns
        ),
    ] {
        assert!(text.contains(&said), "{said:?} in:\n{text}");
    }

    // Ended: the user's Job tells how, and that the copy went with its pods.
    succeed(&pods, &second).await;
    test.wait_job("seen", "Complete", |j| condition(j, "Complete").is_some())
        .await;
    test.wait_for("the copy deleted", || async {
        test.copy_on(&worker, "seen", &uid(&placed)).await.is_none()
    })
    .await;
    let (_, text) = jobwarden(
        &test,
        &explain_args(&test, "seen", &admin_of_workers(&test)),
    )
    .await;
    for said in [
        format!("on worker {worker}."),
        "Complete ".to_owned(),
        format!(
            "Its copy on worker {worker} is gone: the dispatcher deletes a copy once the Job shows how it ended"
        ),
    ] {
        assert!(text.contains(&said), "{said:?} in:\n{text}");
    }
    test.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_says_why_a_job_only_a_refused_worker_may_take_waits() {
    let Some(test) = Test::new("dispatch-seen-waits").await else {
        return;
    };
    test.create(
        "only-plugin",
        json!({}),
        json!({"jobwarden.io/workers": PLUGIN_WORKER}),
    )
    .await;
    test.wait_for("the dispatcher's Warning", || async {
        test.events("only-plugin")
            .await
            .iter()
            .any(|e| e.starts_with("NoWorker"))
    })
    .await;
    let (code, text) = jobwarden(&test, &explain_args(&test, "only-plugin", &[])).await;
    assert_eq!(code, Some(0), "{text}");
    for said in [
        format!(
            "Job {}/only-plugin, run by jobwarden's dispatcher (spec.managedBy: {DISPATCHER}), not placed on a worker yet.",
            test.ns
        ),
        format!("Not placed on a worker yet (jobwarden.io/workers: {PLUGIN_WORKER})."),
        "Waiting for: a worker to take it; the dispatcher said ".to_owned(),
        format!(
            "(NoWorker): no worker can take the Job now: {PLUGIN_WORKER}: its credentials are refused: its kubeconfig is refused: it runs an exec credential plugin"
        ),
    ] {
        assert!(text.contains(&said), "{said:?} in:\n{text}");
    }
    assert!(!text.contains("No controller is running it"), "{text}");
    let (_, json) = jobwarden(
        &test,
        &explain_args(&test, "only-plugin", &["-o".into(), "json".into()]),
    )
    .await;
    let json: Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(json["dispatch"]["worker"], Value::Null);
    assert_eq!(json["dispatch"]["copy"]["state"], "notPlaced");
    assert_eq!(json["dispatch"]["dispatcherSaid"]["reason"], "NoWorker");
    assert_eq!(json["dispatch"]["workerLostSeconds"], WORKER_LOST_SECONDS);
    test.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_every_worker_as_the_dispatcher_meets_it() {
    let Some(test) = Test::new("dispatch-doctor").await else {
        return;
    };
    // doctor is given the policy jobwarden runs with and one worker more, `stale`: east's
    // kubeconfig with a token east never issued, as a token that expired would be refused.
    let namespace = &test.world.dispatcher.identity.namespace;
    let secrets: Api<Secret> = Api::namespaced(test.mgmt.clone(), namespace);
    let east = secrets
        .get("jobwarden-worker-east")
        .await
        .expect("east's kubeconfig Secret");
    let text = east
        .data
        .as_ref()
        .and_then(|d| d.get("kubeconfig"))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .expect("its kubeconfig");
    let mut stale: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("YAML");
    stale["users"][0]["user"]["token"] = "not-a-token-east-issued".into();
    let stale: Secret = serde_json::from_value(json!({
        "metadata": {"name": "jobwarden-worker-stale"},
        "stringData": {"kubeconfig": serde_yaml_ng::to_string(&stale).expect("YAML")},
    }))
    .expect("a Secret");
    let _ = secrets
        .delete("jobwarden-worker-stale", &Default::default())
        .await;
    secrets
        .create(&Default::default(), &stale)
        .await
        .expect("the stale Secret is created");
    let with_stale = test.world.dispatcher.dir.join("policy-doctor.yaml");
    let running = std::fs::read_to_string(policy(&test)).expect("the policy");
    std::fs::write(
        &with_stale,
        format!("{running}    - {{name: stale, kubeconfigSecret: jobwarden-worker-stale}}\n"),
    )
    .expect("doctor's policy is written");
    let args: Vec<String> = [
        "doctor",
        "-n",
        namespace,
        "--config",
        &with_stale.display().to_string(),
        "-o",
        "json",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let (_, out) = jobwarden(&test, &args).await;
    let dispatch: Vec<Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|c| c["group"] == "dispatch")
        .collect();
    let of = |worker: &str| -> Vec<(String, String, String)> {
        dispatch
            .iter()
            .filter(|c| {
                c["message"].as_str().is_some_and(|m| {
                    m.starts_with(&format!("worker {worker}:"))
                        || m.starts_with(&format!("worker {worker} "))
                })
            })
            .map(|c| {
                (
                    c["name"].as_str().unwrap_or_default().to_owned(),
                    c["status"].as_str().unwrap_or_default().to_owned(),
                    c["message"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };
    for worker in WORKERS {
        let checks = of(worker);
        let names: Vec<(&str, &str)> = checks
            .iter()
            .map(|(n, s, _)| (n.as_str(), s.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("worker kubeconfig", "ok"),
                ("worker API server answers", "ok"),
                ("worker credentials accepted", "ok"),
                ("worker permissions", "ok"),
                ("worker namespaces", "ok"),
                ("worker room readable", "ok"),
                // Read from what the leader says on its Lease: jobwarden runs as a process
                // here, not a Pod the API server's proxy reaches.
                ("worker view fresh", "ok"),
            ],
            "{worker}: {checks:#?}"
        );
        assert!(
            checks[2]
                .2
                .contains(jobwarden_envtest::WORKER_DISPATCHER_USER),
            "{checks:#?}"
        );
    }
    let plugin = of(PLUGIN_WORKER);
    assert_eq!(plugin.len(), 2, "{plugin:#?}");
    assert_eq!(
        (plugin[0].0.as_str(), plugin[0].1.as_str()),
        ("worker kubeconfig", "error"),
        "{plugin:#?}"
    );
    assert!(plugin[0].2.contains("exec_plugin"), "{plugin:#?}");
    assert_eq!(plugin[1].1, "skipped", "{plugin:#?}");
    let stale = of("stale");
    let stale: Vec<(&str, &str)> = stale
        .iter()
        .map(|(n, s, _)| (n.as_str(), s.as_str()))
        .collect();
    assert_eq!(
        stale,
        [
            ("worker kubeconfig", "ok"),
            ("worker API server answers", "ok"),
            ("worker credentials accepted", "error"),
            ("worker permissions", "skipped"),
        ],
        "{dispatch:#?}"
    );
    assert!(
        dispatch
            .iter()
            .any(|c| c["name"] == "worker credentials accepted"
                && c["message"].as_str().is_some_and(|m| m.contains(
                    "worker stale refuses the kubeconfig's credentials as unauthorized (401)"
                ))
                && c["hint"]
                    .as_str()
                    .is_some_and(|h| h.contains("create token")
                        && h.contains(&format!("Secret {namespace}/jobwarden-worker-stale")))),
        "{dispatch:#?}"
    );
    assert!(
        dispatch.iter().any(|c| c["name"] == "lost workers"),
        "{dispatch:#?}"
    );
    assert!(
        dispatch.iter().all(|c| c["doc"]
            .as_str()
            .is_some_and(|d| d.starts_with("docs/dispatch.md#"))),
        "{dispatch:#?}"
    );
    test.finish().await;
}
