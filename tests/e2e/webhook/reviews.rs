//! Reviews as kube-apiserver asks for them: on Job create, update and status update, with
//! the configurations `jobwarden webhooks` generates for the test's policy, and what kubectl
//! prints checked word for word against docs/operations.md.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use jobwarden_envtest::ControlPlane;
use serde_json::{Value, json};

use crate::webhook::served::{
    TIMEOUT, Target, generated, job, kubectl, local_plane, register, registration, runtime, serve,
    text, unregister,
};

/// Writes `job` to a file named after it and runs `kubectl apply -n ns -f FILE`.
fn apply(plane: &ControlPlane, dir: &Path, ns: &str, job: &Value) -> Output {
    let file = dir.join(format!(
        "{}.yaml",
        job["metadata"]["name"].as_str().unwrap_or("job")
    ));
    std::fs::write(&file, serde_yaml_ng::to_string(job).expect("YAML")).expect("written");
    let file = file.to_str().expect("a UTF-8 path").to_owned();
    kubectl(plane, &["apply", "-n", ns, "-f", &file], None)
}

/// The lines of docs/operations.md, joined as kubectl prints them (the doc wraps long lines).
fn documented(snippet_start: &str) -> String {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operations.md"))
            .expect("docs/operations.md");
    let mut lines = doc.lines().skip_while(|l| !l.starts_with(snippet_start));
    let mut out: Vec<&str> = Vec::new();
    for line in lines.by_ref() {
        if line.starts_with("```") {
            break;
        }
        out.push(line);
    }
    out.join(" ")
}

#[test]
fn the_api_server_calls_the_webhook_on_create_update_and_status_update() {
    let Some((plane, dir)) = local_plane("webhook-e2e") else {
        return;
    };
    let runtime = runtime();
    let (ns, gated) = runtime.block_on(async {
        let client = plane.client().await;
        (
            plane.create_namespace(&client, "webhook-e2e").await,
            plane.create_namespace(&client, "webhook-e2e-gated").await,
        )
    });
    let policy =
        format!("allowedManagedBy: [example.com/allowed]\nsuspendOnCreate:\n  names: [{gated}]\n");
    let served = serve(plane, &dir, &policy, &[]);
    let target = Target {
        port: served.port,
        ca_pem: Some(&served.ca_pem),
    };
    register(
        plane,
        &registration(
            &generated(&dir, &policy),
            "jobwarden-e2e",
            &target,
            &[&ns, &gated],
        ),
    );

    // The API server reads webhook configurations through an informer: wait until a server-side
    // dry run is refused by jobwarden.
    let dup = job(
        "job-rn",
        json!({"jobwarden.io/pod-failure-policy-rule-names": r#"["A", "A"]"#}),
        json!({"podFailurePolicy": {"rules": [
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}},
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [2]}},
        ]}}),
    );
    let started = Instant::now();
    loop {
        let file = dir.join("probe.json");
        std::fs::write(&file, dup.to_string()).expect("written");
        let probe = kubectl(
            plane,
            &[
                "create",
                "--dry-run=server",
                "-n",
                &ns,
                "-f",
                file.to_str().expect("UTF-8"),
            ],
            None,
        );
        if !probe.status.success() {
            break;
        }
        assert!(started.elapsed() < TIMEOUT, "the webhook was never called");
        std::thread::sleep(Duration::from_millis(250));
    }

    // A rule upstream does not know, refused on CREATE in kube-apiserver's own words.
    let out = apply(plane, &dir, &ns, &dup);
    assert!(!out.status.success());
    let want = "The Job \"job-rn\" is invalid: spec.podFailurePolicy.rules[1].name: Duplicate value: \"A\"";
    assert_eq!(text(&out.stderr).trim_end(), want);
    assert_eq!(
        documented("The Job \"job-rn\" is invalid"),
        want,
        "docs/operations.md shows what kubectl prints"
    );

    // A policy refusal: 403, with kube-apiserver's prefix.
    let other = job("pi", json!({}), json!({"managedBy": "example.com/other"}));
    let out = apply(plane, &dir, &ns, &other);
    assert!(!out.status.success());
    let file = dir.join("pi.yaml");
    let got = text(&out.stderr);
    let prefix = format!(
        "Error from server (Forbidden): error when creating \"{}\": admission webhook \
         \"validate.jobs.jobwarden.io\" denied the request: jobs.batch \"pi\" is forbidden: \
         spec.managedBy \"example.com/other\" is not one of the controllers this cluster allows: ",
        file.display()
    );
    assert!(got.starts_with(&prefix), "{got}");
    let doc = documented("Error from server (Forbidden)");
    let doc_prefix = doc.split(" …").next().unwrap_or_default();
    assert!(
        got.replace(&file.display().to_string(), "job.yaml")
            .starts_with(doc_prefix),
        "docs/operations.md shows what kubectl prints:\n{doc}\n{got}"
    );

    // The mutating webhook: a Job created in a gated namespace is stored suspended, and kubectl
    // shows jobwarden's warning.
    let gated_job = job("gated", json!({}), json!({"suspend": false}));
    let out = apply(plane, &dir, &gated, &gated_job);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).starts_with("Warning: "),
        "{}",
        text(&out.stderr)
    );
    let stored = kubectl(
        plane,
        &[
            "get",
            "job",
            "gated",
            "-n",
            &gated,
            "-o",
            "jsonpath={.spec.suspend}",
        ],
        None,
    );
    assert_eq!(text(&stored.stdout), "true");

    // UPDATE and the status subresource: a Job run by nobody here, finished by a status write
    // (which jobwarden reviews and allows), can no longer be suspended.
    let done = job(
        "done",
        json!({}),
        json!({"suspend": false, "managedBy": "example.com/allowed"}),
    );
    let out = apply(plane, &dir, &ns, &done);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let now = "2026-01-01T00:00:00Z";
    let condition = |type_: &str| {
        json!({"type": type_, "status": "True", "reason": "CompletionsReached",
               "lastProbeTime": now, "lastTransitionTime": now})
    };
    let status = json!({"status": {
        "startTime": now, "completionTime": now, "succeeded": 1,
        "conditions": [condition("SuccessCriteriaMet"), condition("Complete")],
    }});
    let patch = |extra: &[&str], body: &str| {
        let mut args = vec![
            "patch",
            "job",
            "done",
            "-n",
            &ns,
            "--type=merge",
            "-p",
            body,
        ];
        args.extend_from_slice(extra);
        kubectl(plane, &args, None)
    };
    let out = patch(&["--subresource=status"], &status.to_string());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = patch(&[], r#"{"spec":{"suspend":true}}"#);
    assert!(!out.status.success());
    assert_eq!(
        text(&out.stderr).trim_end(),
        "The Job \"done\" is invalid: spec.suspend: Forbidden: cannot suspend a \
         finished Job (it has the condition Complete=True)"
    );

    // What the server saw: one review line per call, the status update's with its subresource.
    let reviews: Vec<[String; 4]> = served
        .log_lines()
        .iter()
        .filter(|l| l["message"] == "review" && l["dry_run"] == false)
        .map(|l| {
            ["webhook", "name", "operation", "sub_resource"]
                .map(|k| l[k].as_str().unwrap_or("").to_owned())
        })
        .collect();
    for seen in [
        ["mutate", "gated", "CREATE", ""],
        ["validate", "done", "UPDATE", "status"],
        ["validate", "done", "UPDATE", ""],
    ] {
        assert!(
            reviews.iter().any(|r| *r == seen),
            "no review {seen:?} in {reviews:?}"
        );
    }

    unregister(plane, "jobwarden-e2e");
}
