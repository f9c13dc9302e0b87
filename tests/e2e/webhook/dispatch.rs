//! The dispatcher's side of the webhook, as kube-apiserver calls it: a plain manifest in a
//! dispatch namespace stored with the dispatcher's name, the dispatcher's own writes of its
//! annotations (merge patches of the user's Job, as it makes them) and of the Job's status
//! admitted, and a bad `jobwarden.io/workers` refused in kube-apiserver's words.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::webhook::served::{
    TIMEOUT, Target, generated, job, kubectl, local_plane, register, registration, runtime, serve,
    text, unregister,
};

#[test]
fn dispatch_namespaces_and_the_dispatcher_s_writes_pass_through_the_api_server() {
    let Some((plane, dir)) = local_plane("webhook-e2e-dispatch") else {
        return;
    };
    let (remote, other) = runtime().block_on(async {
        let client = plane.client().await;
        (
            plane.create_namespace(&client, "webhook-e2e-remote").await,
            plane.create_namespace(&client, "webhook-e2e-local").await,
        )
    });
    let policy = format!(
        "delegate:\n  dispatchNamespaces:\n    names: [{remote}]\n\
         dispatch:\n  workers:\n    - {{name: east, kubeconfigSecret: jobwarden-worker-east}}\n    \
         - {{name: here, local: true}}\n"
    );
    let served = serve(plane, &dir, &policy, &[]);
    let target = Target {
        port: served.port,
        ca_pem: Some(&served.ca_pem),
    };
    let name = "jobwarden-e2e-dispatch";
    register(
        plane,
        &registration(&generated(&dir, &policy), name, &target, &[&remote, &other]),
    );
    let apply = |ns: &str, job: &serde_json::Value| {
        let file = dir.join(format!(
            "{}.json",
            job["metadata"]["name"].as_str().unwrap_or("job")
        ));
        std::fs::write(&file, job.to_string()).expect("written");
        let file = file.to_str().expect("a UTF-8 path").to_owned();
        kubectl(plane, &["create", "-n", ns, "-f", &file], None)
    };

    // The API server reads webhook configurations through an informer: wait until a server-side
    // dry run is refused by jobwarden.
    let twice = job(
        "twice",
        json!({"jobwarden.io/workers": "east,east"}),
        json!({}),
    );
    let file = dir.join("probe.json");
    std::fs::write(&file, twice.to_string()).expect("written");
    let started = Instant::now();
    loop {
        let probe = kubectl(
            plane,
            &[
                "create",
                "--dry-run=server",
                "-n",
                &other,
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
    let out = apply(&other, &twice);
    assert_eq!(
        text(&out.stderr).trim_end(),
        "The Job \"twice\" is invalid: metadata.annotations[jobwarden.io/workers][1]: Duplicate value: \"east\""
    );

    // A plain manifest in a dispatch namespace is stored with the dispatcher's name, and kubectl
    // shows why; elsewhere, the dispatcher's annotations on a Job it will not run are advised
    // against.
    let out = apply(&remote, &job("plain", json!({}), json!({})));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr).trim_end(),
        format!(
            "Warning: spec.managedBy: set to \"jobwarden.io/dispatcher\" by jobwarden: Jobs in namespace \"{remote}\" are sent to worker clusters by jobwarden's dispatcher"
        )
    );
    let get = |ns: &str, path: &str| {
        let out = kubectl(
            plane,
            &[
                "get",
                "job",
                "plain",
                "-n",
                ns,
                "-o",
                &format!("jsonpath={path}"),
            ],
            None,
        );
        text(&out.stdout)
    };
    assert_eq!(get(&remote, "{.spec.managedBy}"), "jobwarden.io/dispatcher");
    let out = apply(
        &other,
        &job("plain", json!({"jobwarden.io/workers": "east"}), json!({})),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr).trim_end(),
        "Warning: metadata.annotations[jobwarden.io/workers]: takes effect only for Jobs with spec.managedBy \"jobwarden.io/dispatcher\"; no other controller reads it"
    );

    // The dispatcher's writes on the user's Job, as it makes them: merge patches of its
    // annotations (the record, the lost mark, the move), then a status write.
    let patch = |extra: &[&str], body: &str| {
        let mut args = vec![
            "patch",
            "job",
            "plain",
            "-n",
            &remote,
            "--type=merge",
            "-p",
            body,
        ];
        args.extend_from_slice(extra);
        kubectl(plane, &args, None)
    };
    for body in [
        r#"{"metadata":{"annotations":{"jobwarden.io/worker":"east"}}}"#,
        r#"{"metadata":{"annotations":{"jobwarden.io/worker-lost-since":"2026-11-27T16:13:32Z"}}}"#,
        r#"{"metadata":{"annotations":{"jobwarden.io/worker":"here","jobwarden.io/worker-lost-since":null}}}"#,
    ] {
        let out = patch(&[], body);
        assert!(out.status.success(), "{body}: {}", text(&out.stderr));
    }
    assert_eq!(
        get(&remote, "{.metadata.annotations}"),
        r#"{"jobwarden.io/worker":"here"}"#
    );
    let now = "2026-11-27T16:14:00Z";
    let status = json!({"status": {"conditions": [{
        "type": "Suspended", "status": "True", "reason": "JobSuspended",
        "message": "Job suspended", "lastProbeTime": now, "lastTransitionTime": now,
    }]}});
    let out = patch(&["--subresource=status"], &status.to_string());
    assert!(out.status.success(), "{}", text(&out.stderr));
    // A write the rules refuse is refused on the way in, whoever makes it.
    let out = patch(
        &[],
        r#"{"metadata":{"annotations":{"jobwarden.io/worker-lost-since":"a minute ago"}}}"#,
    );
    assert_eq!(
        text(&out.stderr).trim_end(),
        "The Job \"plain\" is invalid: metadata.annotations[jobwarden.io/worker-lost-since]: Invalid value: \"a minute ago\": must be an RFC 3339 time such as 2026-11-27T16:13:32Z"
    );

    // Each was a review: the create's mutation, the annotation writes, the status write.
    let reviews: Vec<[String; 5]> = served
        .log_lines()
        .iter()
        .filter(|l| l["message"] == "review" && l["dry_run"] == false)
        .map(|l| {
            ["webhook", "namespace", "name", "operation", "sub_resource"]
                .map(|k| l[k].as_str().unwrap_or("").to_owned())
        })
        .collect();
    for seen in [
        ["mutate", &remote, "plain", "CREATE", ""],
        ["validate", &remote, "plain", "UPDATE", ""],
        ["validate", &remote, "plain", "UPDATE", "status"],
    ] {
        let seen = seen.map(str::to_owned);
        assert!(reviews.contains(&seen), "no review {seen:?} in {reviews:?}");
    }

    unregister(plane, name);
}
