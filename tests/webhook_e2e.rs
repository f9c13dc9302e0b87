//! The webhook as a real kube-apiserver calls it: the built binary's `serve` on a loopback
//! port, registered with the configurations `deploy/webhooks/webhooks.yaml` ships (rules,
//! match conditions, failure policies), with `clientConfig.url` in place of the Service and a
//! CA made in the test. The API server calls it on Job create, update and status update, and
//! what kubectl prints is checked word for word against docs/operations.md.
//!
//! jobwarden runs under the ServiceAccount and RBAC `kubectl kustomize deploy/` installs, and
//! the API server must have refused it nothing.
//!
//! It runs on the test binary's own control plane (`jobwarden-envtest`), and is skipped with
//! one line when the binaries are absent. With `JOBWARDEN_E2E_KUBECONFIG` (another cluster) it
//! is skipped too: a cluster elsewhere cannot call a server on this machine's loopback.

mod support;

use std::io::Write as _;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use jobwarden_envtest::{ControlPlane, Installed};
use serde_json::{Value, json};
use support::served::Served;

const TIMEOUT: Duration = Duration::from_secs(90);

/// Starts `serve` (webhook only) under deploy/'s ServiceAccount and RBAC, and waits for
/// `/readyz`.
fn serve(dir: &Path, identity: &Installed, policy: &str, ns: &str) -> Served {
    let config = dir.join("policy.yaml");
    std::fs::write(&config, policy).expect("written");
    let config = config.display().to_string();
    Served::start(dir, identity, ns, &["--config", &config, "--no-controller"])
}

/// The shipped webhook configurations, pointed at the test's server and scoped to `namespaces`.
fn registration(port: u16, ca_pem: &str, namespaces: &[&str]) -> String {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/webhooks/webhooks.yaml"),
    )
    .expect("deploy/webhooks/webhooks.yaml");
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let mut items = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let mut config: Value = serde::Deserialize::deserialize(doc).expect("webhooks.yaml");
        if config.is_null() {
            continue;
        }
        config["metadata"]["name"] = json!("jobwarden-e2e");
        if let Some(annotations) = config["metadata"].as_object_mut() {
            // No cert-manager here: the CA goes in directly.
            annotations.remove("annotations");
        }
        for webhook in config["webhooks"].as_array_mut().expect("webhooks") {
            let path = webhook["clientConfig"]["service"]["path"]
                .as_str()
                .expect("a path")
                .to_owned();
            webhook["clientConfig"] = json!({
                "url": format!("https://127.0.0.1:{port}{path}"),
                "caBundle": ca,
            });
            webhook["namespaceSelector"] = json!({"matchExpressions": [{
                "key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces,
            }]});
        }
        items.push(config);
    }
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

fn kubectl(plane: &ControlPlane, args: &[&str], stdin: Option<&str>) -> Output {
    let mut command = plane.kubectl();
    command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = command.spawn().expect("kubectl runs");
    if let Some(text) = stdin
        && let Some(mut input) = child.stdin.take()
    {
        input.write_all(text.as_bytes()).expect("kubectl reads");
    }
    child.wait_with_output().expect("kubectl ends")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn job(name: &str, annotations: Value, spec: Value) -> Value {
    let mut job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"suspend": true, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["true"]}]
        }}}
    });
    if let (Some(target), Some(extra)) = (job["spec"].as_object_mut(), spec.as_object()) {
        target.extend(extra.clone());
    }
    job
}

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
    if std::env::var_os("JOBWARDEN_E2E_KUBECONFIG").is_some() {
        eprintln!(
            "skipped: the webhook e2e test needs the envtest control plane on this machine \
             (a cluster elsewhere cannot call 127.0.0.1)"
        );
        return;
    }
    let Some(plane) = ControlPlane::shared() else {
        return;
    };
    let dir = plane
        .dir()
        .expect("a control plane of this binary's own")
        .join("webhook-e2e");
    std::fs::create_dir_all(&dir).expect("a folder");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let (ns, gated) = runtime.block_on(async {
        let client = plane.client().await;
        (
            plane.create_namespace(&client, "webhook-e2e").await,
            plane.create_namespace(&client, "webhook-e2e-gated").await,
        )
    });
    let policy =
        format!("allowedManagedBy: [example.com/allowed]\nsuspendOnCreate:\n  names: [{gated}]\n");
    let identity = runtime.block_on(plane.installed_identity());
    let served = serve(&dir, &identity, &policy, &ns);
    let registered = kubectl(
        plane,
        &["apply", "-f", "-"],
        Some(&registration(served.port, &served.ca_pem, &[&ns, &gated])),
    );
    assert!(registered.status.success(), "{}", text(&registered.stderr));

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
        ["validate", "done", "CREATE", ""],
        ["validate", "done", "UPDATE", "status"],
        ["validate", "done", "UPDATE", ""],
    ] {
        assert!(
            reviews.iter().any(|r| *r == seen),
            "no review {seen:?} in {reviews:?}"
        );
    }

    let removed = kubectl(
        plane,
        &[
            "delete",
            "mutatingwebhookconfiguration,validatingwebhookconfiguration",
            "jobwarden-e2e",
        ],
        None,
    );
    assert!(removed.status.success(), "{}", text(&removed.stderr));
    identity.assert_nothing_refused();
}
