//! `jobwarden audit` against a real cluster: plants the violations a v1.36 kube-apiserver
//! accepts (rule-name annotations that break KEP-4443, a `managedBy` outside the policy's
//! allow-list, a Job suspended after it finished) beside valid Jobs, and checks that the built
//! binary finds exactly the planted ones.
//!
//! It runs on the test binary's own control plane (`jobwarden-envtest`: etcd, kube-apiserver
//! and kube-controller-manager, whose Job controller finishes the Jobs meant to finish), or on
//! the cluster `JOBWARDEN_E2E_KUBECONFIG` names; without either it prints one skip line and
//! passes. It works in a namespace of its own, labelled `jobwarden.io/admission=disabled` so
//! that a jobwarden webhook installed in the cluster lets the planted Jobs in. No pod is ever
//! started: Jobs are suspended, or have zero completions.
//!
//! `audit` is run by a person, with their own credentials, not by the installed ServiceAccount
//! (which runs the periodic audit inside `serve`, under the suites that run `serve`): so the
//! binary runs as a person who may only read, a ServiceAccount bound in the test's namespace to
//! the cluster's built-in `view` role, and must need nothing more.

use crate::support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use jobwarden_envtest::SharedPlane;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// This suite's own plane: `audit` reads every namespace, and must find exactly the Jobs planted here.
static PLANE: SharedPlane = SharedPlane::new();

const TIMEOUT: Duration = Duration::from_secs(120);
const RULE_NAMES: &str = "jobwarden.io/pod-failure-policy-rule-names";

fn job(name: &str, kind: &str, annotation: Option<&str>, spec: Value) -> Job {
    let mut job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"jobwarden.io/e2e": kind}},
        "spec": {"template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["true"]}]
        }}}
    });
    if let Some(names) = annotation {
        job["metadata"]["annotations"] = json!({ RULE_NAMES: names });
    }
    if let (Some(target), Some(extra)) = (job["spec"].as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            target.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(job).expect("a test Job")
}

fn rules(count: usize) -> Value {
    let rules: Vec<Value> = (1..=count)
        .map(|code| json!({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [code]}}))
        .collect();
    json!({ "rules": rules })
}

async fn wait_complete(jobs: &Api<Job>, name: &str) {
    let started = Instant::now();
    loop {
        let job = jobs.get(name).await.expect("the Job exists");
        let complete = job
            .status
            .and_then(|s| s.conditions)
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Complete" && c.status == "True");
        if complete {
            return;
        }
        assert!(
            started.elapsed() < TIMEOUT,
            "{name} did not complete within {TIMEOUT:?}: is the built-in Job controller running?"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn audit(
    kubeconfig: &str,
    namespace: &str,
    policy: &Path,
    extra: &[&str],
) -> (i32, Vec<Value>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_jobwarden"))
        .args([
            "audit",
            "--kubeconfig",
            kubeconfig,
            "-n",
            namespace,
            "-o",
            "json",
        ])
        .arg("--config")
        .arg(policy)
        .args(extra)
        .output()
        .expect("jobwarden runs");
    let found = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    (
        out.status.code().unwrap_or(-1),
        found,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn audit_finds_exactly_the_planted_jobs_in_a_real_cluster() {
    // Upstream's Job controller finishes the Jobs that are to be finished.
    let Some(plane) = PLANE.with_upstream() else {
        return;
    };
    let client: Client = jobwarden_audit::connect::connect(Some(plane.kubeconfig()), None)
        .await
        .expect("the kubeconfig is usable");
    let ns = plane.create_namespace(&client, "jobwarden-e2e-audit").await;
    let kubeconfig = plane.person_kubeconfig(&ns, "auditor", "view").await;
    // RBAC sees a new binding, and kube-controller-manager fills `view`, a moment later.
    let auditor: Api<Job> = Api::namespaced(
        jobwarden_audit::connect::connect(Some(&kubeconfig), None)
            .await
            .expect("the auditor's kubeconfig is usable"),
        &ns,
    );
    let started = Instant::now();
    while let Err(e) = auditor.list(&Default::default()).await {
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the auditor never could list Jobs: {e}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let kubeconfig = kubeconfig.display().to_string();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    // A jobwarden webhook installed in the cluster lets the planted Jobs in.
    namespaces
        .patch(
            &ns,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"jobwarden.io/admission": "disabled"}}})),
        )
        .await
        .expect("the namespace is labelled");
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);

    let suspended = json!({"suspend": true});
    let with = |extra: Value| {
        let mut spec = suspended.clone();
        if let (Some(target), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            target.extend(extra.clone());
        }
        spec
    };
    let plants = [
        job(
            "dup-rule-names",
            "planted",
            Some(r#"["Retry", "Retry"]"#),
            with(json!({"podFailurePolicy": rules(2)})),
        ),
        job(
            "index-clash",
            "planted",
            Some(r#"["first", "2", "third"]"#),
            with(json!({"podFailurePolicy": rules(3)})),
        ),
        job(
            "names-without-policy",
            "planted",
            Some(r#"["A"]"#),
            suspended.clone(),
        ),
        job(
            "unlisted-controller",
            "planted",
            None,
            with(json!({"managedBy": "example.com/unlisted"})),
        ),
        job(
            "suspended-after-finish",
            "planted",
            None,
            json!({"completions": 0}),
        ),
        job("plain", "valid", None, suspended.clone()),
        job(
            "named-rules",
            "valid",
            Some(r#"["ExitCode1", null]"#),
            with(json!({"podFailurePolicy": rules(2)})),
        ),
        job(
            "allowed-controller",
            "valid",
            None,
            with(json!({"managedBy": "example.com/allowed"})),
        ),
        job("finished", "valid", None, json!({"completions": 0})),
        // Finishes while suspended without ever starting (upstream PR #132614), or stays
        // suspended on an older cluster: valid either way.
        job(
            "zero-while-suspended",
            "valid",
            None,
            with(json!({"completions": 0})),
        ),
    ];
    for plant in &plants {
        jobs.create(&PostParams::default(), plant)
            .await
            .unwrap_or_else(|e| panic!("{:?} is created: {e}", plant.metadata.name));
    }
    wait_complete(&jobs, "finished").await;
    wait_complete(&jobs, "suspended-after-finish").await;
    jobs.patch(
        "suspended-after-finish",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": true}})),
    )
    .await
    .expect("a finished Job can be suspended through a plain apiserver");

    let dir = support::scratch_dir("audit-e2e");
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, "allowedManagedBy: [example.com/allowed]\n").expect("written");

    let (code, found, stderr) = audit(&kubeconfig, &ns, &policy, &["--page-size", "3"]);
    let got: BTreeSet<(String, String, String)> = found
        .iter()
        .map(|f| {
            assert_eq!(f["namespace"], ns.as_str());
            let s = |k: &str| f[k].as_str().unwrap_or("").to_owned();
            (s("name"), s("rule"), s("field"))
        })
        .collect();
    let want: BTreeSet<(String, String, String)> = [
        (
            "dup-rule-names",
            "rule_names",
            "spec.podFailurePolicy.rules[1].name",
        ),
        (
            "index-clash",
            "rule_names",
            "spec.podFailurePolicy.rules[1].name",
        ),
        (
            "names-without-policy",
            "rule_names",
            "metadata.annotations[jobwarden.io/pod-failure-policy-rule-names]",
        ),
        ("unlisted-controller", "policy", "spec.managedBy"),
        ("suspended-after-finish", "status", "spec.suspend"),
    ]
    .into_iter()
    .map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned()))
    .collect();
    let valid = audit(&kubeconfig, &ns, &policy, &["-l", "jobwarden.io/e2e=valid"]);

    let _ = namespaces.delete(&ns, &DeleteParams::default()).await;
    assert_eq!(got, want, "{stderr}");
    assert_eq!(found.len(), 5, "{found:?}");
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("5 violations in 5 of 10 Jobs"), "{stderr}");
    assert_eq!((valid.0, valid.1.len()), (0, 0), "{}", valid.2);
}
