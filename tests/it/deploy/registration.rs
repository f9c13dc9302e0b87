//! One source of truth for the webhook configurations: `jobwarden webhooks` decides what each
//! policy needs, deploy/webhooks/webhooks.yaml is its output for the default policy byte for
//! byte, and the chart's templates and register.sh render the same webhooks for the same policy,
//! for a table of policies.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

use crate::deploy::chart::helm;
use crate::deploy::*;

/// Policies that reach every branch of the decision, as YAML (the policy file) and as JSON
/// (`helm --set-json policy=...`).
fn policies() -> Vec<(&'static str, Value)> {
    vec![
        ("the default policy", json!({})),
        (
            "a resume policy",
            json!({"resume": {"groups": ["batch-admins"]}}),
        ),
        (
            "a managedBy allow-list under another controller name",
            json!({
                "controllerName": "example.com/runner",
                "allowedManagedBy": ["kueue.x-k8s.io/multikueue", "example.com/runner"],
            }),
        ),
        (
            "namespaces named by both settings",
            json!({
                "suspendOnCreate": {"names": ["gated", "shared"]},
                "delegate": {"namespaces": {"names": ["shared", "ml"]}},
            }),
        ),
        (
            "the dispatcher with workers, its namespaces by name and label, and an allow-list",
            json!({
                "allowedManagedBy": ["kueue.x-k8s.io/multikueue"],
                "suspendOnCreate": {"names": ["gated"]},
                "delegate": {
                    "namespaces": {"names": ["ml"]},
                    "dispatchNamespaces": {
                        "names": ["team-remote", "gated"],
                        "selector": {"matchLabels": {"jobwarden.io/dispatch": "true"}},
                    },
                },
                "dispatch": {
                    "controllerName": "example.com/dispatcher",
                    "origin": "management-1",
                    "workers": [
                        {"name": "east", "kubeconfigSecret": "jobwarden-worker-east"},
                        {"name": "west", "kubeconfigFile": "/etc/jobwarden/workers/west/kubeconfig",
                         "namespaces": {"names": ["team-remote"]}},
                        {"name": "here", "local": true},
                    ],
                    "workerLostSeconds": 120,
                },
            }),
        ),
        (
            "a dispatch section without workers: the dispatcher's name is not allowed",
            json!({
                "allowedManagedBy": ["kueue.x-k8s.io/multikueue"],
                "dispatch": {"controllerName": "example.com/dispatcher"},
            }),
        ),
        (
            "namespaces selected by both settings, and rule names delegated",
            json!({
                "suspendOnCreate": {"selector": {"matchLabels": {"jobwarden.io/suspend-on-create": "true"}}},
                "delegate": {
                    "jobsNamingRules": true,
                    "namespaces": {"selector": {"matchExpressions": [
                        {"key": "team", "operator": "In", "values": ["ml"]},
                    ]}},
                },
            }),
        ),
    ]
}

/// A scratch file holding the policy.
fn policy_file(what: &str, policy: &Value) -> PathBuf {
    let file = std::env::temp_dir().join(format!(
        "jobwarden-deploy-policy-{}-{}.yaml",
        std::process::id(),
        what.replace(' ', "-")
    ));
    std::fs::write(&file, serde_yaml_ng::to_string(policy).expect("YAML")).expect("written");
    file
}

fn jobwarden_webhooks(config: Option<&PathBuf>) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_jobwarden"));
    command.arg("webhooks");
    if let Some(file) = config {
        command.arg("--config").arg(file);
    }
    let out = command.output().expect("jobwarden webhooks runs");
    assert!(
        out.status.success(),
        "jobwarden webhooks: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// The webhooks of each kind, without the CA (which each install fills its own way).
fn webhooks_by_kind(objects: &[Value]) -> Vec<(String, Vec<Value>)> {
    let mut out: Vec<(String, Vec<Value>)> = objects
        .iter()
        .filter(|o| WEBHOOK_KINDS.contains(&kind(o)))
        .map(|o| {
            let hooks = webhooks_of(o)
                .iter()
                .cloned()
                .map(|mut h| {
                    if let Some(client) = h["clientConfig"].as_object_mut() {
                        client.remove("caBundle");
                    }
                    h
                })
                .collect();
            (kind(o).to_owned(), hooks)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn deploy_webhooks_is_what_jobwarden_webhooks_prints_for_the_default_policy() {
    let committed = std::fs::read_to_string(root().join(WEBHOOKS).join("webhooks.yaml"))
        .expect("webhooks.yaml");
    assert_eq!(
        committed,
        jobwarden_webhooks(None),
        "deploy/webhooks/webhooks.yaml is generated: \
         jobwarden webhooks > deploy/webhooks/webhooks.yaml"
    );
    // deploy/'s own policy file is the default policy, so they go together.
    let base_policy = root().join("deploy/base/policy.yaml");
    assert_eq!(committed, jobwarden_webhooks(Some(&base_policy)));
}

#[test]
fn every_install_path_renders_the_same_webhooks_for_the_same_policy() {
    let helm = helm();
    let kubectl = kubectl_available();
    let ca = std::env::temp_dir().join(format!("jobwarden-deploy-ca-{}.pem", std::process::id()));
    std::fs::write(
        &ca,
        "-----BEGIN CERTIFICATE-----\nbytes\n-----END CERTIFICATE-----\n",
    )
    .expect("written");
    for (what, policy) in policies() {
        let file = policy_file(what, &policy);
        let want = webhooks_by_kind(&yaml_docs(&jobwarden_webhooks(Some(&file))));
        assert_eq!(want.len(), 2, "{what}: both configurations");
        if let Some(helm) = helm {
            let set = format!("policy={policy}");
            let out = Command::new(helm)
                .args(["template", "jobwarden"])
                .arg(root().join("charts/jobwarden"))
                .args(["--namespace", "jobwarden-system", "--set-json", &set])
                .output()
                .expect("helm runs");
            assert!(
                out.status.success(),
                "{what}: helm template: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let chart = webhooks_by_kind(&yaml_docs(&String::from_utf8_lossy(&out.stdout)));
            assert_eq!(
                chart, want,
                "{what}: the chart and jobwarden webhooks disagree"
            );
        }
        if kubectl {
            let out = Command::new("bash")
                .arg(root().join(WEBHOOKS).join("register.sh"))
                .arg("--config")
                .arg(&file)
                .args(["--print", "--ca-file"])
                .arg(&ca)
                .env("JOBWARDEN", env!("CARGO_BIN_EXE_jobwarden"))
                .output()
                .expect("register.sh runs");
            assert!(
                out.status.success(),
                "{what}: register.sh: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let printed = webhooks_by_kind(&yaml_docs(&String::from_utf8_lossy(&out.stdout)));
            assert_eq!(
                printed, want,
                "{what}: register.sh and jobwarden webhooks disagree"
            );
        }
        let _ = std::fs::remove_file(&file);
    }
    let _ = std::fs::remove_file(&ca);
}
