//! The installed checks: Deployments, their files, the registration against the policy, the
//! ServiceAccounts' permissions, the metrics reader role, and what the audit would report.

use std::time::Duration;

use jobwarden_admission::Policy;
use jobwarden_admission::registration::{Install, configurations};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::expect;
use super::{ERROR, OK, SKIPPED, UNKNOWN, WARNING};
use crate::access::Access;
use crate::catalogue::*;
use crate::installed::deployment::{
    DeploymentView, FileSource, ServeCommandLine, ServeFlags, deployments, file_source,
};
use crate::installed::permissions::{metrics_reader, service_account, uses};
use crate::installed::registration::{Registered, registration};
use crate::installed::stored_jobs::{Tally, stored_jobs};

/// `serve`'s flags as far as these tests write them (`--flag=value` only); the binary's own
/// parser is tested against deploy/ in tests/e2e/doctor/.
struct Flags;

impl ServeCommandLine for Flags {
    fn flags(&self, args: &[String]) -> Result<ServeFlags, String> {
        let value = |flag: &str| {
            args.iter()
                .find_map(|a| a.strip_prefix(&format!("--{flag}=")).map(str::to_owned))
        };
        if args.iter().any(|a| a == "--bogus") {
            return Err("unexpected argument '--bogus'".into());
        }
        Ok(ServeFlags {
            serves_webhook: !args.iter().any(|a| a == "--no-webhook"),
            runs_controller: !args.iter().any(|a| a == "--no-controller"),
            secures_metrics: value("metrics-secure").as_deref() != Some("false"),
            webhook_configurations: value("webhook-configurations").unwrap_or("jobwarden".into()),
            tls_cert: value("tls-cert"),
            config: value("config"),
        })
    }

    fn policy(&self, _: &[String], text: Option<&str>) -> Result<Policy, String> {
        text.map_or(Ok(Policy::default()), |t| {
            serde_json::from_str(t).map_err(|e| e.to_string())
        })
    }
}

/// deploy/'s Deployment, its arguments extended by `extra`, named `name` and selecting pods
/// labelled `app.kubernetes.io/name: <name>`; two replicas, both ready.
pub fn deployment_object(name: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "serve",
        "--tls-cert=/etc/jobwarden/tls/tls.crt",
        "--tls-key=/etc/jobwarden/tls/tls.key",
        "--config=/etc/jobwarden/policy/policy.yaml",
    ];
    args.extend_from_slice(extra);
    json!({
        "metadata": {"name": name, "namespace": "jobwarden-system", "generation": 3},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "template": {"spec": {
                "serviceAccountName": "jobwarden",
                "containers": [{
                    "name": "jobwarden",
                    "args": args,
                    "volumeMounts": [
                        {"name": "tls", "mountPath": "/etc/jobwarden/tls", "readOnly": true},
                        {"name": "policy", "mountPath": "/etc/jobwarden/policy/"},
                    ],
                }],
                "volumes": [
                    {"name": "tls", "secret": {"secretName": "jobwarden-tls"}},
                    {"name": "policy", "configMap": {"name": "jobwarden-policy-5h2kc"}},
                ],
            }},
        },
        "status": {"observedGeneration": 3, "replicas": 2, "readyReplicas": 2, "updatedReplicas": 2},
    })
}

pub fn deployment(name: &str, extra: &[&str]) -> DeploymentView {
    DeploymentView::of(&deployment_object(name, extra), &Flags)
}

#[test]
fn a_deployment_reads_its_faces_files_and_replicas() {
    let d = deployment("jobwarden", &[]);
    assert!(d.serves_webhook() && d.runs_controller());
    assert_eq!(d.service_account, "jobwarden");
    assert_eq!(d.args[0], "--tls-cert=/etc/jobwarden/tls/tls.crt");
    assert_eq!(
        file_source(&d.pod_spec, "/etc/jobwarden/tls/tls.crt"),
        Some(FileSource::Secret {
            name: "jobwarden-tls".into(),
            key: "tls.crt".into()
        })
    );
    assert_eq!(
        file_source(&d.pod_spec, "/etc/jobwarden/policy/policy.yaml"),
        Some(FileSource::ConfigMap {
            name: "jobwarden-policy-5h2kc".into(),
            key: "policy.yaml".into()
        })
    );
    assert_eq!(file_source(&d.pod_spec, "/etc/other/file"), None);
    let mut mapped = deployment_object("jobwarden", &[]);
    mapped["spec"]["template"]["spec"]["volumes"][0]["secret"]["items"] =
        json!([{"key": "cert.pem", "path": "tls.crt"}]);
    let d = DeploymentView::of(&mapped, &Flags);
    assert_eq!(
        file_source(&d.pod_spec, "/etc/jobwarden/tls/tls.crt"),
        Some(FileSource::Secret {
            name: "jobwarden-tls".into(),
            key: "cert.pem".into()
        })
    );
    let mut no_serve = deployment_object("x", &[]);
    no_serve["spec"]["template"]["spec"]["containers"][0]["args"] = json!(["sleep"]);
    assert!(DeploymentView::of(&no_serve, &Flags).flags.is_err());
}

#[test]
fn deployments_by_table() {
    let with = |f: &dyn Fn(&mut Value)| {
        let mut d = deployment_object("jobwarden", &[]);
        f(&mut d);
        DeploymentView::of(&d, &Flags)
    };
    let cases: [(&str, DeploymentView, _, &[&str]); 6] = [
        (
            "ready",
            deployment("jobwarden", &[]),
            OK,
            &["Deployment jobwarden (webhook and controller): 2 of 2 replicas ready"],
        ),
        (
            "none ready",
            with(&|d| d["status"]["readyReplicas"] = json!(0)),
            ERROR,
            &["0 of 2 replicas ready"],
        ),
        (
            "one ready",
            with(&|d| d["status"]["readyReplicas"] = json!(1)),
            WARNING,
            &["1 of 2"],
        ),
        (
            "rolling out",
            with(&|d| d["status"]["observedGeneration"] = json!(2)),
            WARNING,
            &["rolling out"],
        ),
        (
            "scaled to 0",
            with(&|d| d["spec"]["replicas"] = json!(0)),
            ERROR,
            &["scaled to 0"],
        ),
        (
            "unreadable args",
            deployment("jobwarden", &["--bogus"]),
            ERROR,
            &["cannot read its `serve` arguments", "--bogus"],
        ),
    ];
    for (what, d, status, says) in cases {
        let checks = deployments("jobwarden-system", &Ok(vec![d]));
        assert_eq!(checks[0].status, status, "{what}: {}", checks[0].message);
        expect(&checks[0], DEPLOYMENT, status, says);
    }
    let split = vec![
        deployment("jobwarden", &["--no-controller"]),
        deployment("jobwarden-controller", &["--no-webhook"]),
    ];
    let checks = deployments("jobwarden-system", &Ok(split));
    expect(&checks[0], DEPLOYMENT, OK, &["(webhook)"]);
    expect(
        &checks[1],
        DEPLOYMENT,
        OK,
        &["jobwarden-controller (controller)"],
    );
    let checks = deployments(
        "jobwarden-system",
        &Ok(vec![deployment("c", &["--no-webhook"])]),
    );
    expect(
        &checks[1],
        DEPLOYMENT,
        ERROR,
        &["no Deployment in namespace jobwarden-system serves the webhook"],
    );
    expect(
        &deployments("x", &Ok(vec![]))[0],
        DEPLOYMENT,
        ERROR,
        &["no Deployment labelled app.kubernetes.io/part-of=jobwarden in namespace x"],
    );
    expect(
        &deployments("x", &Err("forbidden".into()))[0],
        DEPLOYMENT,
        UNKNOWN,
        &["cannot list"],
    );
}

fn registered(policy: &Policy) -> Registered {
    let (m, v) = configurations(policy, &Install::default());
    Registered {
        mutating: Some(m),
        validating: Some(v),
    }
}

#[test]
fn the_registration_against_the_policy() {
    let default = Policy::default();
    let resume: Policy =
        serde_json::from_value(json!({"resume": {"groups": ["admins"]}})).expect("a policy");
    expect(
        &registration("jobwarden", &Ok(default.clone()), &Ok(registered(&default))),
        REGISTRATION,
        OK,
        &["send every request the policy needs (3 webhooks)"],
    );
    expect(
        &registration("jobwarden", &Ok(resume.clone()), &Ok(registered(&resume))),
        REGISTRATION,
        OK,
        &[],
    );
    expect(
        &registration("jobwarden", &Ok(resume), &Ok(registered(&default))),
        REGISTRATION,
        ERROR,
        &[
            "do not send jobwarden what its policy needs",
            "validate.jobs.jobwarden.io",
            "matchConditions",
        ],
    );
    let mut half = registered(&default);
    half.mutating = None;
    expect(
        &registration("jobwarden", &Ok(default.clone()), &Ok(half)),
        REGISTRATION,
        ERROR,
        &["\"mutate.jobs.jobwarden.io\" is not registered"],
    );
    expect(
        &registration(
            "jobwarden",
            &Ok(default.clone()),
            &Ok(Registered::default()),
        ),
        REGISTRATION,
        ERROR,
        &["no webhook configuration named jobwarden"],
    );
    expect(
        &registration(
            "jobwarden",
            &Err("no ConfigMap".into()),
            &Ok(registered(&default)),
        ),
        REGISTRATION,
        UNKNOWN,
        &["no ConfigMap"],
    );
    expect(
        &registration("jobwarden", &Ok(default), &Err("forbidden".into())),
        REGISTRATION,
        UNKNOWN,
        &["forbidden"],
    );
}

#[test]
fn what_each_face_uses() {
    let namespace = "jobwarden-system";
    let secrets = ["jobwarden-worker-east"];
    let both = uses(
        &deployment("j", &[]).flags.expect("flags"),
        namespace,
        &secrets,
    );
    let webhook = uses(
        &deployment("j", &["--no-controller", "--metrics-secure=false"])
            .flags
            .expect("flags"),
        namespace,
        &secrets,
    );
    let controller = uses(
        &deployment("j", &["--no-webhook", "--webhook-configurations=other"])
            .flags
            .expect("flags"),
        namespace,
        &secrets,
    );
    // Without a worker's Secret in the policy, no Secret is read at all.
    let dispatching_nothing = uses(&deployment("j", &[]).flags.expect("flags"), namespace, &[]);
    assert!(
        !dispatching_nothing
            .iter()
            .any(|a| matches!(a, Access::Resource { resource, .. } if resource == "secrets")),
        "{dispatching_nothing:?}"
    );
    let lease = Access::resource(
        Some(namespace),
        "coordination.k8s.io",
        "leases",
        Some("jobwarden-job-controller"),
        "patch",
    );
    let tokens = Access::resource(
        None,
        "authentication.k8s.io",
        "tokenreviews",
        None,
        "create",
    );
    let configuration = Access::resource(
        None,
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        Some("jobwarden"),
        "get",
    );
    // The dispatcher runs beside the Job controller: its workers' kubeconfigs are read where
    // the controller runs, from jobwarden's own namespace only.
    let kubeconfigs = Access::resource(
        Some(namespace),
        "",
        "secrets",
        Some("jobwarden-worker-east"),
        "watch",
    );
    // A refused policy is said on the replica's own Pod, by every face that follows the file.
    let pod_events = Access::resource(Some(namespace), "", "events", None, "create");
    assert!(webhook.contains(&pod_events));
    assert!(both.contains(&lease) && both.contains(&tokens) && both.contains(&configuration));
    assert!(both.contains(&kubeconfigs) && !webhook.contains(&kubeconfigs));
    assert!(
        !webhook.contains(&lease) && !webhook.contains(&tokens) && webhook.contains(&configuration)
    );
    assert!(
        controller.contains(&lease)
            && controller.contains(&kubeconfigs)
            && !controller
                .iter()
                .any(|a| a.to_string().contains("webhookconfigurations"))
    );
    assert_eq!(
        lease.to_string(),
        "patch leases (coordination.k8s.io) named jobwarden-job-controller in namespace jobwarden-system"
    );
}

#[test]
fn a_service_account_missing_a_permission_is_named() {
    let pods = Access::resource(None, "", "pods", None, "create");
    let status = Access::resource(None, "batch", "jobs/status", None, "patch");
    let deployments = vec!["Deployment jobwarden".to_owned()];
    let all = [(pods.clone(), Ok(true)), (status.clone(), Ok(true))];
    expect(
        &service_account("ns", "jobwarden", &deployments, &all),
        SERVICE_ACCOUNT,
        OK,
        &["system:serviceaccount:ns:jobwarden holds all 2 permissions Deployment jobwarden uses"],
    );
    let short = [(pods.clone(), Ok(false)), (status, Ok(true))];
    expect(
        &service_account("ns", "jobwarden", &deployments, &short),
        SERVICE_ACCOUNT,
        ERROR,
        &["system:serviceaccount:ns:jobwarden may not create pods cluster-wide"],
    );
    let unknown = [(pods, Err("forbidden".into()))];
    expect(
        &service_account("ns", "jobwarden", &deployments, &unknown),
        SERVICE_ACCOUNT,
        UNKNOWN,
        &["cannot tell"],
    );
}

#[test]
fn a_worker_secret_named_in_the_policy_but_not_readable_says_where_to_grant_it() {
    let policy: Policy = serde_json::from_value(json!({"dispatch": {"workers": [
        {"name": "west", "kubeconfigSecret": "jobwarden-worker-west"},
        {"name": "east", "kubeconfigSecret": "jobwarden-worker-east"},
        {"name": "east-again", "kubeconfigSecret": "jobwarden-worker-east"},
        {"name": "here", "local": true},
    ]}}))
    .expect("a policy");
    let secrets = crate::installed::permissions::worker_secrets(&policy);
    assert_eq!(secrets, ["jobwarden-worker-east", "jobwarden-worker-west"]);
    let deployments = ["Deployment jobwarden".to_owned()];
    let answers: Vec<(Access, crate::pre::Allowed)> =
        crate::installed::permissions::dispatcher_uses("ns", &secrets)
            .into_iter()
            .map(|a| {
                let readable = !matches!(&a, Access::Resource { name: Some(n), .. } if n == "jobwarden-worker-west");
                (a, Ok(readable))
            })
            .collect();
    let check = service_account("ns", "jobwarden", &deployments, &answers);
    expect(
        &check,
        SERVICE_ACCOUNT,
        ERROR,
        &["may not get secrets named jobwarden-worker-west in namespace ns"],
    );
    let hint = check.hint.unwrap_or_default();
    assert!(hint.contains("deploy/dispatch/secrets.yaml"), "{hint}");
}

#[test]
fn the_metrics_reader_role() {
    let role = json!({"rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]});
    expect(
        &metrics_reader("jobwarden-metrics-reader", &Ok(Some(role))),
        METRICS_READER,
        OK,
        &["grants get on /metrics"],
    );
    let other = json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]});
    expect(
        &metrics_reader("r", &Ok(Some(other))),
        METRICS_READER,
        WARNING,
        &["does not grant"],
    );
    expect(
        &metrics_reader("r", &Ok(None)),
        METRICS_READER,
        WARNING,
        &["no ClusterRole r"],
    );
    expect(
        &metrics_reader("r", &Err("forbidden".into())),
        METRICS_READER,
        UNKNOWN,
        &["cannot read"],
    );
}

#[test]
fn what_the_audit_would_report_counted() {
    let now: Timestamp = "2026-06-01T12:00:00Z".parse().expect("a timestamp");
    let after = Duration::from_secs(120);
    // A Job as kube-apiserver v1.36.2 stores it (the feature probe's dry run), suspended.
    let stored = super::recorded!("job-features-v1.36.2").body;
    let job = |annotations: Value, managed_by: Option<&str>, created: &str| {
        let mut job = stored.clone();
        job["metadata"]["annotations"] = annotations;
        job["metadata"]["creationTimestamp"] = json!(created);
        job["spec"]["suspend"] = json!(false);
        match managed_by {
            Some(m) => job["spec"]["managedBy"] = json!(m),
            None => {
                job["spec"].as_object_mut().map(|s| s.remove("managedBy"));
            }
        }
        job
    };
    let policy = Policy::default();
    let mut tally = Tally::default();
    for (annotations, managed_by, created) in [
        (json!({}), None, "2026-06-01T11:00:00Z"),
        (
            json!({"jobwarden.io/pod-failure-policy-rule-names": "not json"}),
            None,
            "2026-06-01T11:00:00Z",
        ),
        // An hour without a sign of example.com/nobody; and a minute, not yet two.
        (
            json!({}),
            Some("example.com/nobody"),
            "2026-06-01T11:00:00Z",
        ),
        (
            json!({}),
            Some("example.com/nobody"),
            "2026-06-01T11:59:00Z",
        ),
    ] {
        tally.add(&job(annotations, managed_by, created), &policy, now, after);
    }
    tally.add(
        &json!({"kind": "Job", "spec": "not an object"}),
        &policy,
        now,
        after,
    );
    assert_eq!(
        tally,
        Tally {
            jobs: 5,
            refused: 1,
            violations: 1,
            nobody_runs: 1,
            unreadable: 1
        }
    );
    let checks = stored_jobs(&Ok(tally), after);
    expect(
        &checks[0],
        REFUSED_JOBS,
        WARNING,
        &[
            "1 of 5 stored Jobs break rules",
            "(1 violation)",
            "1 do not decode",
        ],
    );
    assert!(
        checks[0]
            .hint
            .as_deref()
            .is_some_and(|h| h.contains("jobwarden audit"))
    );
    expect(
        &checks[1],
        NOBODY_RUNS,
        WARNING,
        &["1 Job is delegated", "2m0s after creation"],
    );
    let clean = stored_jobs(
        &Ok(Tally {
            jobs: 3,
            ..Tally::default()
        }),
        after,
    );
    expect(&clean[0], REFUSED_JOBS, OK, &["none of 3 stored Jobs"]);
    expect(&clean[1], NOBODY_RUNS, OK, &[]);
    let unread = stored_jobs(&Err("forbidden".into()), after);
    expect(
        &unread[0],
        REFUSED_JOBS,
        UNKNOWN,
        &["cannot list the stored Jobs"],
    );
    expect(&unread[1], NOBODY_RUNS, SKIPPED, &[]);
}
