//! charts/jobwarden against deploy/: one install, two formats, no drift. `helm template` with the
//! default values renders the objects `kubectl kustomize deploy/` renders (with `split=true`,
//! those of deploy/split/, and the webhook configurations those of deploy/webhooks/), field for
//! field but for what Helm adds (labels, annotations) and what each format names its own way
//! (the image tag, the policy ConfigMap's hash suffix); the checks that hold deploy/ together
//! hold the chart under other names too; and the webhook configurations are hooks registered
//! only after a hook Job has seen the Deployment serve, and removed first on uninstall.
//!
//! Helm comes from `JOBWARDEN_HELM` (which `.ci/run` sets from charts/get-helm.sh), else `helm`
//! on the PATH; without it these tests print one line and pass.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

use crate::deploy::*;

const CHART: &str = "charts/jobwarden";
pub const RELEASE: &str = "jobwarden";
const NAMESPACE: &str = "jobwarden-system";
const HOOK: &str = "/metadata/annotations/helm.sh~1hook";
const HOOK_WEIGHT: &str = "/metadata/annotations/helm.sh~1hook-weight";

/// The Helm binary, or None after saying once why the chart tests do not run.
pub fn helm() -> Option<&'static PathBuf> {
    static HELM: OnceLock<Option<PathBuf>> = OnceLock::new();
    HELM.get_or_init(|| {
        let candidate = std::env::var_os("JOBWARDEN_HELM")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("helm"));
        let runs = Command::new(&candidate)
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !runs {
            eprintln!(
                "skipped: no Helm ({} does not run); charts/get-helm.sh fetches one, then set \
                 JOBWARDEN_HELM to the path it prints",
                candidate.display()
            );
        }
        runs.then_some(candidate)
    })
    .as_ref()
}

/// `helm VERB RELEASE? charts/jobwarden --namespace NAMESPACE ARGS...`, its output whatever it is.
fn helm_on_chart(
    helm: &PathBuf,
    verb_and_release: &[&str],
    namespace: &str,
    args: &[&str],
) -> Output {
    Command::new(helm)
        .args(verb_and_release)
        .arg(root().join(CHART))
        .args(["--namespace", namespace])
        .args(args)
        .output()
        .expect("helm runs")
}

/// `--set` for each of `set`; `--set-json` for one written `json:KEY=JSON`.
fn set_args<'s>(set: &[&'s str]) -> Vec<&'s str> {
    set.iter()
        .flat_map(|s| match s.strip_prefix("json:") {
            Some(json) => ["--set-json", json],
            None => ["--set", s],
        })
        .collect()
}

/// `helm template` of the chart, every object (hooks included).
pub fn template(helm: &PathBuf, release: &str, namespace: &str, set: &[&str]) -> Vec<Value> {
    let out = helm_on_chart(helm, &["template", release], namespace, &set_args(set));
    assert!(
        out.status.success(),
        "helm template {set:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    yaml_docs(&String::from_utf8_lossy(&out.stdout))
}

fn is_hook(o: &Value) -> bool {
    o.pointer(HOOK).is_some()
}

fn hook_phases(o: &Value) -> Vec<&str> {
    o.pointer(HOOK)
        .and_then(Value::as_str)
        .map(|h| h.split(',').map(str::trim).collect())
        .unwrap_or_default()
}

fn hook_weight(o: &Value) -> i64 {
    o.pointer(HOOK_WEIGHT)
        .and_then(Value::as_str)
        .map_or(0, |w| w.parse().expect("an integer hook weight"))
}

/// What kustomize renders, by kubectl when it is installed, else by the replay (which
/// tests/it/deploy/kubectl.rs holds to kubectl's rendering wherever kubectl is).
fn kustomized(dir: &str) -> Vec<Value> {
    if kubectl_available() {
        kubectl_kustomize(dir)
    } else {
        kustomize::build(&root().join(dir))
    }
}

/// An install as the chart renders it, in the shape the deploy/ checks take: the release's
/// objects plus the Namespace `helm install --create-namespace` makes (the chart cannot make
/// the namespace it is installed into: Helm stores the release there first).
fn chart_renders(helm: &PathBuf, release: &str, namespace: &str, set: &[&str]) -> Renders {
    let mut split_set = set.to_vec();
    split_set.push("split=true");
    let with_namespace = |objects: Vec<Value>| -> (Vec<Value>, Vec<Value>) {
        let (hooks, mut installs): (Vec<Value>, Vec<Value>) =
            objects.into_iter().partition(is_hook);
        installs.push(serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}
        }));
        (installs, hooks)
    };
    let (combined, hooks) = with_namespace(template(helm, release, namespace, set));
    let (split, _) = with_namespace(template(helm, release, namespace, &split_set));
    // A policy whose workers name two Secrets (one twice) and a local worker: the chart grants
    // exactly those two, by name.
    let mut dispatch_set = set.to_vec();
    dispatch_set.push(
        r#"json:policy.dispatch.workers=[{"name":"west","kubeconfigSecret":"worker-west"},{"name":"east","kubeconfigSecret":"worker-east"},{"name":"east2","kubeconfigSecret":"worker-east"},{"name":"here","local":true}]"#,
    );
    let (dispatch, _) = with_namespace(template(helm, release, namespace, &dispatch_set));
    Renders {
        combined,
        split,
        dispatch,
        dispatch_secrets: vec!["worker-east".to_owned(), "worker-west".to_owned()],
        webhooks: hooks
            .into_iter()
            .filter(|o| WEBHOOK_KINDS.contains(&kind(o)))
            .collect(),
    }
}

/// The two formats' objects with what may differ taken out (and checked on the way): the image
/// tag, the policy ConfigMap's hash suffix and its comments, the chart's checksum annotation.
/// Labels and annotations are compared in [`assert_same_objects`].
fn comparable(objects: &[Value], chart: bool) -> BTreeMap<String, Value> {
    let app_version = chart_app_version();
    by_identity(objects, true)
        .into_iter()
        .map(|(key, mut o)| {
            if kind(&o) == "ConfigMap" {
                let policy: Value = serde_yaml_ng::from_str(str_at(&o, "/data/policy.yaml"))
                    .expect("the policy is YAML");
                o["data"]["policy.yaml"] = policy;
            }
            if kind(&o) == "Deployment" {
                let template = &mut o["spec"]["template"];
                if chart {
                    let checksum = template["metadata"]["annotations"]
                        .as_object_mut()
                        .and_then(|a| a.remove("checksum/policy"));
                    assert!(checksum.is_some(), "{key}: no checksum/policy annotation");
                }
                for c in template["spec"]["containers"]
                    .as_array_mut()
                    .expect("containers")
                {
                    let image = c["image"].as_str().expect("an image").to_owned();
                    let (repository, tag) = image.rsplit_once(':').expect("image:tag");
                    if chart {
                        assert_eq!(
                            tag, app_version,
                            "{key}: the chart's default image tag is its appVersion"
                        );
                    }
                    c["image"] = Value::from(repository);
                }
            }
            (key, o)
        })
        .collect()
}

fn chart_app_version() -> String {
    let chart: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(root().join(CHART).join("Chart.yaml")).expect("Chart.yaml"),
    )
    .expect("Chart.yaml is YAML");
    str_at(&chart, "/appVersion").to_owned()
}

fn assert_same_objects(what: &str, kustomize: &[Value], chart: &[Value]) {
    let ours = comparable(kustomize, false);
    let theirs = comparable(chart, true);
    let only_kustomize: Vec<&String> = ours.keys().filter(|k| !theirs.contains_key(*k)).collect();
    let only_chart: Vec<&String> = theirs.keys().filter(|k| !ours.contains_key(*k)).collect();
    assert!(
        only_kustomize.is_empty() && only_chart.is_empty(),
        "{what}: only in kustomize's render {only_kustomize:?}, only in the chart's {only_chart:?}"
    );
    for (key, o) in &ours {
        let mut chart_object = theirs[key].clone();
        // Helm's labels and annotations come on top of kustomize's, which must all be there.
        let meta = chart_object["metadata"].as_object_mut().expect("metadata");
        for field in ["labels", "annotations"] {
            let got = meta.remove(field).unwrap_or_default();
            if let Some(want) = o["metadata"].get(field) {
                for (k, v) in want.as_object().expect("a map") {
                    assert_eq!(got.get(k), Some(v), "{what}: {key}: metadata.{field}.{k}");
                }
                meta.insert(field.to_owned(), want.clone());
            }
        }
        assert_eq!(
            o, &chart_object,
            "{what}: {key} differs between kustomize and the chart"
        );
    }
}

#[test]
fn helm_lint_passes_with_both_layouts_and_the_worker_side() {
    let Some(helm) = helm() else { return };
    for set in [
        &[][..],
        &["split=true"][..],
        &["worker.enabled=true"][..],
        &["worker.enabled=true", "worker.namespaces={ml-training,ci}"][..],
    ] {
        let out = helm_on_chart(helm, &["lint", "--strict"], NAMESPACE, &set_args(set));
        assert!(
            out.status.success(),
            "helm lint --strict {set:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_chart_renders_what_kustomize_renders() {
    let Some(helm) = helm() else { return };
    let chart = chart_renders(helm, RELEASE, NAMESPACE, &[]);
    for (dir, kustomize, ours) in [
        (COMBINED, kustomized(COMBINED), &chart.combined),
        (SPLIT, kustomized(SPLIT), &chart.split),
        (WEBHOOKS, kustomized(WEBHOOKS), &chart.webhooks),
    ] {
        // The namespace is Helm's to make (see chart_renders), with the label the docs give.
        let without_namespace = |objects: &[Value]| -> Vec<Value> {
            objects
                .iter()
                .filter(|o| kind(o) != "Namespace")
                .cloned()
                .collect()
        };
        if dir != WEBHOOKS {
            assert_eq!(namespace_of_install(&kustomize), NAMESPACE);
        }
        assert_same_objects(
            dir,
            &without_namespace(&kustomize),
            &without_namespace(ours),
        );
    }
    assert_eq!(
        chart_app_version(),
        env!("CARGO_PKG_VERSION"),
        "the chart's appVersion is jobwarden's version"
    );
}

/// `worker.enabled` renders the worker side and nothing of jobwarden itself: what `kubectl
/// kustomize deploy/worker` renders, and with `worker.namespaces` what deploy/worker/namespaced
/// renders for the same namespaces, field for field but for Helm's labels; under other names
/// too, the dispatcher gets exactly its calls on a worker.
#[test]
fn the_chart_s_worker_side_renders_what_deploy_worker_renders() {
    let Some(helm) = helm() else { return };
    const WORKER_NAMESPACE: &str = "jobwarden-worker";
    let without_namespace = |objects: Vec<Value>| -> Vec<Value> {
        objects
            .into_iter()
            .filter(|o| kind(o) != "Namespace")
            .collect()
    };
    for (dir, set) in [
        (worker::WORKER, &["worker.enabled=true"][..]),
        (
            worker::WORKER_NAMESPACED,
            &["worker.enabled=true", "worker.namespaces={ml-training}"][..],
        ),
    ] {
        let kustomize = kustomized(dir);
        assert_eq!(
            of_kind(&kustomize, "Namespace")
                .map(name)
                .collect::<Vec<_>>(),
            [WORKER_NAMESPACE]
        );
        let chart = template(helm, RELEASE, WORKER_NAMESPACE, set);
        assert_same_objects(dir, &without_namespace(kustomize), &chart);
    }
    for (release, namespace) in [(RELEASE, WORKER_NAMESPACE), ("east", "batch-worker")] {
        let objects = template(helm, release, namespace, &["worker.enabled=true"]);
        worker::check_worker_side("the chart's worker side", &objects, None);
        let objects = template(
            helm,
            release,
            namespace,
            &["worker.enabled=true", "worker.namespaces={ml-training,ci}"],
        );
        worker::check_worker_side(
            "the chart's worker side in two namespaces",
            &objects,
            Some(&["ml-training", "ci"]),
        );
    }
}

/// The checks deploy/ passes, on the chart under another release name and namespace, with
/// values a team would set: the names the chart writes where nothing rewrites them (the
/// webhooks' Service, inject-ca-from, the Certificate's DNS names, RBAC subjects, the
/// excluded namespace) must follow.
#[test]
fn the_deploy_checks_hold_for_the_chart_under_other_names() {
    let Some(helm) = helm() else { return };
    for (release, namespace) in [(RELEASE, NAMESPACE), ("platform-jobwarden", "batch-guard")] {
        let r = chart_renders(
            helm,
            release,
            namespace,
            &[
                "webhooks.excludedNamespaces={ci}",
                "webhook.priorityClassName=system-cluster-critical",
            ],
        );
        check_installs_hold_no_webhook_configuration(&r);
        check_mutating_webhook_is_create_only(&r);
        check_webhooks_as_documented(&r);
        check_namespace_selectors_exclude_kube_system_and_our_namespace(&r);
        check_unrewritten_names_agree(&r);
        check_service_selects_only_webhook_pods(&r);
        check_rbac_is_least_privilege(&r);
        check_one_image_and_one_policy(&r);
        check_the_lease_has_the_leader_election_priority_level(&r);
    }
}

/// The webhook configurations are registered after a hook Job has waited for the serving
/// Certificate and the Deployment's rollout (post-install and post-upgrade, a higher weight),
/// and deleted by a pre-delete hook Job before anything else. The hooks' ServiceAccount may do
/// that and nothing more.
#[test]
fn the_webhooks_are_registered_after_a_replica_serves_and_removed_first() {
    let Some(helm) = helm() else { return };
    for set in [&[][..], &["split=true"][..]] {
        let objects = template(helm, RELEASE, NAMESPACE, set);
        let hooks: Vec<&Value> = objects.iter().filter(|o| is_hook(o)).collect();
        let configurations: Vec<&Value> = hooks
            .iter()
            .copied()
            .filter(|o| WEBHOOK_KINDS.contains(&kind(o)))
            .collect();
        assert_eq!(configurations.len(), 2, "{set:?}");
        let jobs: Vec<&Value> = hooks.iter().copied().filter(|o| kind(o) == "Job").collect();
        let job_in = |phase: &str| -> &Value {
            let found: Vec<&&Value> = jobs
                .iter()
                .filter(|j| hook_phases(j).contains(&phase))
                .collect();
            assert_eq!(found.len(), 1, "{set:?}: one {phase} Job");
            found[0]
        };
        let register = job_in("post-install");
        assert_eq!(hook_phases(register), ["post-install", "post-upgrade"]);
        let commands = job_commands(register);
        assert!(
            commands.contains(&format!(
                "--namespace={NAMESPACE} wait --for=condition=Ready certificate/jobwarden-tls --timeout=5m"
            )),
            "{set:?}: the register hook waits for the Certificate: {commands:#?}"
        );
        assert_eq!(
            commands.last().map(String::as_str),
            Some(
                format!("--namespace={NAMESPACE} rollout status deployment/jobwarden --timeout=5m")
                    .as_str()
            ),
            "{set:?}: the register hook ends once the webhook's Deployment has rolled out"
        );
        for c in &configurations {
            assert_eq!(hook_phases(c), ["post-install", "post-upgrade"]);
            assert!(
                hook_weight(c) > hook_weight(register),
                "{set:?}: {} {} must come after the Job that waits for a replica",
                kind(c),
                name(c)
            );
            assert_eq!(
                c.pointer("/metadata/annotations/helm.sh~1hook-delete-policy"),
                Some(&Value::from("hook-failed")),
                "an upgrade updates the configurations in place; before-hook-creation (Helm's \
                 default) would delete them first"
            );
        }
        let unregister = job_in("pre-delete");
        assert_eq!(
            job_commands(unregister),
            [
                "delete --ignore-not-found mutatingwebhookconfiguration/jobwarden \
              validatingwebhookconfiguration/jobwarden"
            ]
        );
        assert_eq!(
            backoff_limit(register),
            0,
            "a failed wait fails the install at once"
        );

        // The hooks' account: read the Deployment and the Certificate, delete the two
        // configurations; nothing else, and present in every phase that runs a Job.
        let account = str_at(register, "/spec/template/spec/serviceAccountName");
        assert_eq!(
            str_at(unregister, "/spec/template/spec/serviceAccountName"),
            account
        );
        let rbac: Vec<Value> = hooks
            .iter()
            .filter(|o| {
                matches!(
                    kind(o),
                    "ServiceAccount"
                        | "Role"
                        | "RoleBinding"
                        | "ClusterRole"
                        | "ClusterRoleBinding"
                )
            })
            .map(|o| (*o).clone())
            .collect();
        for o in &rbac {
            assert_eq!(
                hook_phases(o),
                ["post-install", "post-upgrade", "pre-delete"],
                "{} {}",
                kind(o),
                name(o)
            );
            assert!(hook_weight(o) < hook_weight(register));
        }
        let granted = grants_by_service_account(&rbac, NAMESPACE);
        let want: BTreeSet<Grant> = [
            Grant::verbs(
                Some(NAMESPACE),
                "apps",
                "deployments",
                Some("jobwarden"),
                &["get", "list", "watch"],
            ),
            Grant::verbs(
                Some(NAMESPACE),
                "cert-manager.io",
                "certificates",
                Some("jobwarden-tls"),
                &["get", "list", "watch"],
            ),
            Grant::verbs(
                None,
                "admissionregistration.k8s.io",
                "mutatingwebhookconfigurations",
                Some("jobwarden"),
                &["get", "list", "watch", "delete"],
            ),
            Grant::verbs(
                None,
                "admissionregistration.k8s.io",
                "validatingwebhookconfigurations",
                Some("jobwarden"),
                &["get", "list", "watch", "delete"],
            ),
        ]
        .concat()
        .into_iter()
        .collect();
        assert_eq!(granted.keys().collect::<Vec<_>>(), [account]);
        assert_eq!(granted[account], want, "{set:?}: the hooks' RBAC");
    }
}

/// Each container of a hook Job as one line: its arguments (the image's entrypoint is kubectl).
fn job_commands(job: &Value) -> Vec<String> {
    let spec = &job["spec"]["template"]["spec"];
    array(&spec["initContainers"])
        .iter()
        .chain(array(&spec["containers"]).iter())
        .map(|c| {
            assert!(c.get("command").is_none(), "{c}: kubectl is the entrypoint");
            strings(&c["args"]).join(" ")
        })
        .collect()
}

fn backoff_limit(job: &Value) -> i64 {
    job.pointer("/spec/backoffLimit")
        .and_then(Value::as_i64)
        .unwrap_or(6)
}

/// values.schema.json refuses what a typo or a wrong type would otherwise let through silently.
#[test]
fn the_values_schema_refuses_mistyped_values() {
    let Some(helm) = helm() else { return };
    for (set, complaint) in [
        ("webhook.replicas=two", "/webhook/replicas"),
        ("split=yes", "/split"),
        ("policy.resum.users={alice}", "resum"),
        (
            "policy.suspendOnCreate.names=gated",
            "/policy/suspendOnCreate/names",
        ),
        (
            "policy.delegate.dispatchNamespaces.names=remote",
            "/policy/delegate/dispatchNamespaces/names",
        ),
        (
            "policy.dispatch.workers[0].name=East",
            "/policy/dispatch/workers/0/name",
        ),
        ("policy.dispatch.workers[0].kubeconfig=inline", "kubeconfig"),
        (
            "policy.dispatch.workerLostSeconds=0",
            "/policy/dispatch/workerLostSeconds",
        ),
        // The failure policy is no choice: each webhook fails closed on what it is sent.
        (
            "webhooks.validateFailurePolicy=Ignore",
            "validateFailurePolicy",
        ),
        ("webhooks.timeoutSeconds=60", "/webhooks/timeoutSeconds"),
        ("webhook.extraArgs={no-controller}", "/webhook/extraArgs/0"),
        ("webhook.replica=3", "replica"),
        ("tls.certManager.duration=90d", "/tls/certManager/duration"),
        ("worker.enable=true", "enable"),
        ("worker.namespaces={ML_Training}", "/worker/namespaces/0"),
        ("worker.namespaces=ml-training", "/worker/namespaces"),
    ] {
        let out = helm_on_chart(helm, &["template", RELEASE], NAMESPACE, &["--set", set]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(complaint),
            "--set {set}: want a schema error naming {complaint}, got: {err}"
        );
    }
    // Without cert-manager, the Secret and its CA must be named.
    let out = helm_on_chart(
        helm,
        &["template", RELEASE],
        NAMESPACE,
        &["--set", "tls.certManager.enabled=false"],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("tls.existingSecret is required"));
}

/// A Secret of one's own instead of cert-manager: no cert-manager object, the Deployment mounts
/// that Secret, and the CA given is in every webhook's caBundle from the start.
#[test]
fn a_certificate_secret_of_ones_own_replaces_cert_manager() {
    let Some(helm) = helm() else { return };
    let pem = "-----BEGIN CERTIFICATE-----\nbytes to carry\n-----END CERTIFICATE-----\n";
    let ca = std::env::temp_dir().join(format!("jobwarden-chart-ca-{}.pem", std::process::id()));
    std::fs::write(&ca, pem).expect("write the CA");
    let ca_bundle = format!("tls.caBundle={}", ca.display());
    let out = helm_on_chart(
        helm,
        &["template", RELEASE],
        NAMESPACE,
        &[
            "--set",
            "tls.certManager.enabled=false",
            "--set",
            "tls.existingSecret=corp-tls",
            "--set-file",
            &ca_bundle,
        ],
    );
    let _ = std::fs::remove_file(&ca);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let objects = yaml_docs(&String::from_utf8_lossy(&out.stdout));
    for o in &objects {
        assert!(
            !o["apiVersion"]
                .as_str()
                .unwrap_or_default()
                .starts_with("cert-manager.io/"),
            "{} {} without cert-manager",
            kind(o),
            name(o)
        );
        assert!(
            o.pointer("/metadata/annotations/cert-manager.io~1inject-ca-from")
                .is_none()
        );
    }
    let deployment = deployments(&objects).next().expect("the Deployment");
    assert!(
        array(&deployment["spec"]["template"]["spec"]["volumes"])
            .iter()
            .any(|v| v.pointer("/secret/secretName") == Some(&Value::from("corp-tls")))
    );
    let mut hooks = 0;
    for config in objects.iter().filter(|o| WEBHOOK_KINDS.contains(&kind(o))) {
        for hook in webhooks_of(config) {
            assert_eq!(
                hook["clientConfig"]["caBundle"],
                base64_encode(pem.as_bytes())
            );
            hooks += 1;
        }
    }
    assert_eq!(hooks, 3);
    // The register hook waits for the rollout only: there is no Certificate to wait for.
    let register = objects
        .iter()
        .find(|o| kind(o) == "Job" && hook_phases(o).contains(&"post-install"))
        .expect("the register Job");
    assert_eq!(job_commands(register).len(), 1);
}

/// `leaderElection.flowSchema=false`, for clusters where installs may not make FlowSchemas:
/// the install has none, and nothing else changes.
#[test]
fn the_lease_s_flow_schema_can_be_left_out() {
    let Some(helm) = helm() else { return };
    for split in ["split=false", "split=true"] {
        let with = template(helm, RELEASE, NAMESPACE, &[split]);
        let without = template(
            helm,
            RELEASE,
            NAMESPACE,
            &[split, "leaderElection.flowSchema=false"],
        );
        let mut expected: Vec<Value> = with
            .into_iter()
            .filter(|o| kind(o) != "FlowSchema")
            .collect();
        expected.sort_by_key(|o| format!("{}/{}", kind(o), name(o)));
        let mut got = without;
        got.sort_by_key(|o| format!("{}/{}", kind(o), name(o)));
        assert_eq!(got, expected, "{split}");
    }
}
