//! What reaches jobwarden, on a real kube-apiserver with the shipped default configurations:
//! with nothing serving, plain Jobs (no `spec.managedBy`, no `jobwarden.io/` annotation) are
//! created, run by the built-in Job controller, updated and deleted, while Jobs jobwarden has
//! something to say about are refused in words that name jobwarden's webhook; with a replica
//! serving, a plain Job's create and whole run cost no call at all, and a guarded one is
//! reviewed. And `serve` says, at start, when the registered configurations miss requests its
//! policy needs.

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::webhook::served::{
    Target, job, local_plane, register, registration, runtime, serve, shipped, unregister,
};

/// How many Jobs of each kind the tests create (the issue's figure).
const JOBS: usize = 40;

/// A Job the built-in controller runs: one pod, not suspended, nothing for jobwarden.
fn plain(name: &str) -> Job {
    serde_json::from_value(job(name, json!({}), json!({"suspend": false}))).expect("a Job")
}

/// A valid Job naming its pod failure policy rule: only jobwarden can judge the name.
fn annotated(name: &str) -> Job {
    serde_json::from_value(job(
        name,
        json!({"jobwarden.io/pod-failure-policy-rule-names": r#"["ExitCode1"]"#}),
        json!({"podFailurePolicy": {"rules": [
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}},
        ]}}),
    ))
    .expect("a Job")
}

fn condition(job: &Job, type_: &str) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

/// Waits until `done` holds for the namespace's Jobs, re-listing every 100 ms.
async fn wait_for_jobs(jobs: &Api<Job>, what: &str, done: impl Fn(&[Job]) -> bool) {
    let started = Instant::now();
    loop {
        let listed = jobs
            .list(&ListParams::default())
            .await
            .expect("Jobs listed");
        if done(&listed.items) {
            return;
        }
        assert!(
            started.elapsed() < crate::webhook::served::TIMEOUT,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Plays the kubelet until every Job of the namespace is complete: each pod the Job
/// controller made succeeds.
async fn run_to_completion(client: &Client, ns: &str) {
    let (jobs, pods): (Api<Job>, Api<Pod>) = (
        Api::namespaced(client.clone(), ns),
        Api::namespaced(client.clone(), ns),
    );
    let started = Instant::now();
    loop {
        let listed = jobs
            .list(&ListParams::default())
            .await
            .expect("Jobs listed");
        if listed.items.iter().all(|j| condition(j, "Complete")) {
            return;
        }
        assert!(
            started.elapsed() < crate::webhook::served::TIMEOUT,
            "the Jobs never completed"
        );
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let done = json!({"status": {
            "phase": "Succeeded",
            "containerStatuses": [{
                "name": "main", "image": "busybox:1.36", "imageID": "", "ready": false,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "startedAt": now, "finishedAt": now}},
            }],
        }});
        for pod in pods
            .list(&ListParams::default())
            .await
            .expect("pods listed")
        {
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            if phase != Some("Succeeded")
                && let Some(name) = pod.metadata.name.as_deref()
            {
                // A pod deleted meanwhile is no longer the kubelet's business.
                let _ = pods
                    .patch_status(name, &PatchParams::default(), &Patch::Merge(&done))
                    .await;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until kube-apiserver's informer has the configurations: a guarded server-side dry run
/// is refused (by jobwarden when it serves, or for want of it when nothing does).
async fn wait_until_registered(jobs: &Api<Job>, probe: &Job) {
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let started = Instant::now();
    while jobs.create(&dry_run, probe).await.is_ok() {
        assert!(
            started.elapsed() < crate::webhook::served::TIMEOUT,
            "the webhook configurations never took effect"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Jobs with two rules named alike: jobwarden refuses it, the API server alone would not.
fn duplicate_names(name: &str) -> Job {
    let mut job = annotated(name);
    if let Some(a) = job.metadata.annotations.as_mut() {
        a.insert(
            "jobwarden.io/pod-failure-policy-rule-names".to_owned(),
            r#"["a", "a"]"#.to_owned(),
        );
    }
    if let Some(rules) = job
        .spec
        .as_mut()
        .and_then(|s| s.pod_failure_policy.as_mut())
    {
        let second = rules.rules.first().cloned();
        rules.rules.extend(second);
    }
    job
}

fn api_error(result: Result<Job, kube::Error>) -> Option<String> {
    match result {
        Ok(_) => None,
        Err(kube::Error::Api(status)) => Some(status.message),
        Err(other) => Some(other.to_string()),
    }
}

#[test]
fn with_nothing_serving_plain_jobs_live_and_guarded_ones_are_refused() {
    let Some((plane, _dir)) = local_plane("webhook-outage") else {
        return;
    };
    runtime().block_on(async {
        let client = plane.client().await;
        let ns = plane.create_namespace(&client, "outage").await;
        // A port nobody listens on: every replica down.
        let nobody = jobwarden_envtest::free_port().expect("a free port");
        let target = Target {
            port: nobody,
            ca_pem: None,
        };
        register(
            plane,
            &registration(&shipped(), "jobwarden-outage", &target, &[&ns]),
        );
        let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
        wait_until_registered(&jobs, &annotated("probe")).await;

        let mut plain_admitted = 0;
        let mut annotated_refusals = Vec::new();
        for i in 0..JOBS {
            if api_error(
                jobs.create(&PostParams::default(), &plain(&format!("plain-{i}")))
                    .await,
            )
            .is_none()
            {
                plain_admitted += 1;
            }
            let name = format!("annotated-{i}");
            annotated_refusals.extend(api_error(
                jobs.create(&PostParams::default(), &annotated(&name)).await,
            ));
        }
        assert_eq!(
            (plain_admitted, JOBS - annotated_refusals.len()),
            (JOBS, 0),
            "plain Jobs admitted, annotated ones admitted"
        );
        let want = format!(
            "Internal error occurred: failed calling webhook \"validate.jobs.jobwarden.io\": \
             failed to call webhook: Post \"https://127.0.0.1:{nobody}/validate?timeout=5s\": \
             dial tcp 127.0.0.1:{nobody}: connect: connection refused"
        );
        for refusal in &annotated_refusals {
            assert_eq!(refusal, &want, "what the user reads during an outage");
        }
        // docs/operations.md shows the same words, for the Service every install registers.
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operations.md"),
        )
        .expect("docs/operations.md");
        let shown = want.split(" Post ").next().unwrap_or_default();
        assert!(
            doc.lines()
                .any(|l| l.starts_with("Error from server (InternalError)")
                    && l.contains(&format!("{shown} Post "))),
            "docs/operations.md shows what an outage reads: {shown}"
        );

        // The built-in controller's status writes: the pods it made, counted, then the Jobs
        // complete.
        wait_for_jobs(&jobs, "every plain Job has its pod", |all| {
            all.len() == JOBS
                && all.iter().all(|j| {
                    j.status.as_ref().and_then(|s| s.active).unwrap_or(0) == 1
                        || condition(j, "Complete")
                })
        })
        .await;
        run_to_completion(&client, &ns).await;

        // Updates: labels, and a spec change (suspending a finished Job is jobwarden's to judge,
        // so it is refused; its other spec changes are not).
        let labels = json!({"metadata": {"labels": {"team": "a"}}});
        let unfinished = json!({"spec": {"suspend": true}});
        let p = PatchParams::default();
        assert!(
            jobs.patch("plain-0", &p, &Patch::Merge(&labels))
                .await
                .is_ok()
        );
        let suspended = jobs.patch("plain-1", &p, &Patch::Merge(&unfinished)).await;
        assert!(
            api_error(suspended).is_some_and(
                |m| m.contains("failed calling webhook \"validate.jobs.jobwarden.io\"")
            ),
            "suspending a finished Job waits for jobwarden"
        );
        let running = plain("running");
        jobs.create(&PostParams::default(), &running)
            .await
            .expect("created");
        let suspend = jobs.patch("running", &p, &Patch::Merge(&unfinished)).await;
        assert!(
            suspend.is_ok(),
            "suspending an unfinished plain Job: {suspend:?}"
        );

        // Another controller's Job: created freely, its status writes refused.
        let mut external = plain("external");
        if let Some(spec) = external.spec.as_mut() {
            spec.managed_by = Some("example.com/runner".to_owned());
        }
        jobs.create(&PostParams::default(), &external)
            .await
            .expect("created");
        let status = json!({"status": {"active": 1}});
        let written = jobs
            .patch_status("external", &p, &Patch::Merge(&status))
            .await;
        assert!(
            api_error(written).is_some_and(|m| m.contains("validate-status.jobs.jobwarden.io")),
            "an external controller's status write waits for jobwarden"
        );

        // Deletion is never jobwarden's business.
        for i in 0..JOBS {
            jobs.delete(&format!("plain-{i}"), &DeleteParams::default())
                .await
                .expect("deleted");
        }
        unregister(plane, "jobwarden-outage");
    });
}

#[test]
fn with_a_replica_serving_plain_jobs_cost_no_call_and_guarded_ones_are_reviewed() {
    let Some((plane, dir)) = local_plane("webhook-serving") else {
        return;
    };
    let served = serve(plane, &dir, "{}", &[]);
    runtime().block_on(async {
        let client = plane.client().await;
        let ns = plane.create_namespace(&client, "serving").await;
        let target = Target {
            port: served.port,
            ca_pem: Some(&served.ca_pem),
        };
        register(
            plane,
            &registration(&shipped(), "jobwarden-serving", &target, &[&ns]),
        );
        let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
        wait_until_registered(&jobs, &duplicate_names("probe")).await;

        let before = served.admission_requests();
        for i in 0..JOBS {
            jobs.create(&PostParams::default(), &plain(&format!("plain-{i}")))
                .await
                .expect("a plain Job is created");
        }
        run_to_completion(&client, &ns).await;
        let labels = json!({"metadata": {"labels": {"team": "a"}}});
        jobs.patch("plain-0", &PatchParams::default(), &Patch::Merge(&labels))
            .await
            .expect("labelled");
        jobs.delete("plain-0", &DeleteParams::default())
            .await
            .expect("deleted");
        assert_eq!(
            served.admission_requests() - before,
            0.0,
            "webhook calls for {JOBS} plain Jobs' creates and runs"
        );

        // A guarded Job is reviewed: admitted, and counted.
        jobs.create(&PostParams::default(), &annotated("guarded"))
            .await
            .expect("a valid annotated Job is admitted");
        assert!(served.admission_requests() - before >= 1.0);
        unregister(plane, "jobwarden-serving");
    });
}

/// The configurations registered under `name`, with a namespaceSelector no namespace matches
/// (every namespace has the label; an exclusion, which the start-up check allows installs).
fn register_matching_nothing(
    plane: &'static jobwarden_envtest::ControlPlane,
    configurations: &str,
    name: &str,
) {
    let target = Target {
        port: 9,
        ca_pem: None,
    };
    let mut list: Value =
        serde_json::from_str(&registration(configurations, name, &target, &[])).expect("JSON");
    for config in list["items"].as_array_mut().into_iter().flatten() {
        for webhook in config["webhooks"].as_array_mut().into_iter().flatten() {
            if let Some(expressions) = webhook
                .pointer_mut("/namespaceSelector/matchExpressions")
                .and_then(Value::as_array_mut)
            {
                // `registration` scoped it to no namespace with `In []`, which the API server
                // refuses: put an exclusion of every namespace in its place.
                expressions.pop();
                expressions.push(json!({
                    "key": "kubernetes.io/metadata.name", "operator": "DoesNotExist",
                }));
            }
        }
    }
    register(plane, &list.to_string());
}

#[test]
fn serve_says_when_the_registered_configurations_miss_what_its_policy_needs() {
    let Some((plane, dir)) = local_plane("webhook-startup") else {
        return;
    };
    // Under the name the install's RBAC lets serve read (`get` on `jobwarden` alone), so the
    // configurations registered here match no request.
    let logged = |policy: &str, sub: &str, message: &str| {
        let served = serve(plane, &dir.join(sub), policy, &[]);
        let said = || {
            served
                .log_lines()
                .iter()
                .any(|l| l["message"].as_str().is_some_and(|m| m.contains(message)))
        };
        let started = Instant::now();
        while !said() {
            assert!(
                started.elapsed() < crate::webhook::served::TIMEOUT,
                "serve did not say {message:?}; its log:\n{}",
                std::fs::read_to_string(&served.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        served.log_lines()
    };
    logged(
        "{}",
        "absent",
        "no webhook configurations are registered under this name yet",
    );
    register_matching_nothing(plane, &shipped(), "jobwarden");
    let lines = logged(
        "suspendOnCreate:\n  names: [gated]\n",
        "gated",
        "DO NOT SEND JOBWARDEN WHAT ITS POLICY NEEDS",
    );
    assert!(
        lines.iter().any(|l| l["gap"]
            == "webhook \"mutate-namespaces.jobs.jobwarden.io\" is not registered"
            && l["level"] == "WARN"),
        "{lines:?}"
    );
    logged("{}", "default", "send every request the policy needs");
    unregister(plane, "jobwarden");
}

/// kube-apiserver compiles every CEL condition of a configuration when it is written: the
/// configurations of a policy with every setting are accepted as they are.
#[test]
fn the_api_server_accepts_the_configurations_of_every_policy_setting() {
    let Some((plane, dir)) = local_plane("webhook-every-setting") else {
        return;
    };
    let policy = "\
controllerName: example.com/runner
allowedManagedBy: [kueue.x-k8s.io/multikueue]
resume: {groups: [batch-admins]}
suspendOnCreate: {names: [gated], selector: {matchLabels: {gate: \"on\"}}}
delegate:
  jobsNamingRules: true
  namespaces: {names: [ml], selector: {matchExpressions: [{key: team, operator: In, values: [ml]}]}}
  dispatchNamespaces: {names: [remote], selector: {matchLabels: {jobwarden.io/dispatch: \"true\"}}}
dispatch:
  controllerName: example.com/dispatcher
  workers: [{name: here, local: true}]
";
    let configurations = crate::webhook::served::generated(&dir, policy);
    register_matching_nothing(plane, &configurations, "jobwarden-every-setting");
    unregister(plane, "jobwarden-every-setting");
}

/// The create latency of a plain Job in three namespaces side by side, one create in each in
/// turn: without webhooks, with the shipped configurations (jobwarden serving), and with the
/// same webhooks sent every Job write (no matchConditions, as before jobwarden registered only
/// what it can judge). `cargo test -p jobwarden --test e2e webhook:: -- --ignored --nocapture
/// create_latency`; BENCHMARKS.md has the figures.
#[test]
#[ignore = "a measurement: prints figures, asserts none"]
fn create_latency_side_by_side() {
    let Some((plane, dir)) = local_plane("webhook-latency") else {
        return;
    };
    let served = serve(plane, &dir, "{}", &[]);
    let rounds: usize = std::env::var("JOBWARDEN_LATENCY_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(300);
    runtime().block_on(async {
        let client = plane.client().await;
        let bare = plane.create_namespace(&client, "latency-bare").await;
        let scoped = plane.create_namespace(&client, "latency-scoped").await;
        let every = plane.create_namespace(&client, "latency-every").await;
        let target = Target {
            port: served.port,
            ca_pem: Some(&served.ca_pem),
        };
        register(
            plane,
            &registration(&shipped(), "jobwarden-latency", &target, &[&scoped]),
        );
        let mut unconditional: Value = serde_json::from_str(&registration(
            &shipped(),
            "jobwarden-latency-every",
            &target,
            &[&every],
        ))
        .expect("JSON");
        for config in unconditional["items"].as_array_mut().into_iter().flatten() {
            for webhook in config["webhooks"].as_array_mut().into_iter().flatten() {
                if let Some(w) = webhook.as_object_mut() {
                    w.remove("matchConditions");
                }
            }
        }
        register(plane, &unconditional.to_string());
        for ns in [&scoped, &every] {
            let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
            wait_until_registered(&jobs, &duplicate_names("probe")).await;
        }
        let namespaces = [&bare, &scoped, &every];
        let mut took: [Vec<f64>; 3] = Default::default();
        for round in 0..rounds {
            for (i, ns) in namespaces.iter().enumerate() {
                let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
                let mut job = plain(&format!("job-{round}"));
                if let Some(spec) = job.spec.as_mut() {
                    // Nothing runs: only the create is measured.
                    spec.suspend = Some(true);
                }
                let started = Instant::now();
                jobs.create(&PostParams::default(), &job)
                    .await
                    .expect("created");
                took[i].push(started.elapsed().as_secs_f64() * 1000.0);
            }
        }
        for (label, mut ms) in ["no webhooks", "shipped configurations", "every Job write"]
            .into_iter()
            .zip(took)
        {
            ms.sort_by(f64::total_cmp);
            let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
            println!(
                "{label:>24}: p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms ({} creates)",
                at(0.50),
                at(0.95),
                at(0.99),
                ms.len()
            );
        }
        println!(
            "webhook calls during the run: {}",
            served.admission_requests()
        );
        unregister(plane, "jobwarden-latency");
        unregister(plane, "jobwarden-latency-every");
    });
}
