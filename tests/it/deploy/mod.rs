//! deploy/ read as files: the invariants the install, upgrade and removal steps of
//! docs/operations.md rely on. No cluster and no kubectl needed: the few kustomize features
//! deploy/ uses are replayed here (any other fails the test instead of being ignored). Where
//! kubectl is installed, the same checks also run on what `kubectl kustomize` renders.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

mod chart;
mod chart_dry_run;
mod docs_tables;
mod kubectl;
mod kustomize;
mod objects;
mod rbac;
mod registration;
mod shipped;
mod worker;

use docs_tables::*;
use objects::*;
use rbac::*;

/// The default install: one Deployment serving the webhook and running the controller.
const COMBINED: &str = "deploy";
/// The large-cluster install: the two faces as two Deployments.
const SPLIT: &str = "deploy/split";
/// The default install with the Role that lets the dispatcher read its workers' Secrets.
const DISPATCH: &str = "deploy/dispatch";
/// The Secrets deploy/dispatch/ names (secrets.yaml), as docs/dispatch.md's workers name them.
const DISPATCH_SECRETS: [&str; 2] = ["jobwarden-worker-east", "jobwarden-worker-west"];
/// The webhook configurations, applied once one of the above is serving.
const WEBHOOKS: &str = "deploy/webhooks";
const OPERATIONS_DOC: &str = "docs/operations.md";
/// Where a worker cluster's admin reads how to install deploy/worker/.
const DISPATCH_DOC: &str = "docs/dispatch.md";

const WEBHOOK_KINDS: [&str; 2] = [
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The three kustomizations, rendered by the replay below.
fn replayed() -> Renders {
    Renders {
        combined: kustomize::build(&root().join(COMBINED)),
        split: kustomize::build(&root().join(SPLIT)),
        dispatch: kustomize::build(&root().join(DISPATCH)),
        dispatch_secrets: DISPATCH_SECRETS.map(str::to_owned).to_vec(),
        webhooks: kustomize::build(&root().join(WEBHOOKS)),
    }
}

struct Renders {
    combined: Vec<Value>,
    split: Vec<Value>,
    /// An install whose dispatcher reads `dispatch_secrets`; the other two read no Secret.
    dispatch: Vec<Value>,
    dispatch_secrets: Vec<String>,
    webhooks: Vec<Value>,
}

impl Renders {
    /// Each way of installing, with its name for messages.
    fn installs(&self) -> [(&'static str, &[Value]); 3] {
        [
            (COMBINED, &self.combined),
            (SPLIT, &self.split),
            (DISPATCH, &self.dispatch),
        ]
    }

    /// The workers' Secrets the dispatcher of `install` reads.
    fn worker_secrets(&self, install: &str) -> Vec<&str> {
        match install {
            DISPATCH => self.dispatch_secrets.iter().map(String::as_str).collect(),
            _ => Vec::new(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The checks. Each takes rendered objects, so the kubectl test below runs them unchanged.
// ---------------------------------------------------------------------------------------------

fn check_installs_hold_no_webhook_configuration(r: &Renders) {
    for (install, objects) in r.installs() {
        for o in objects {
            assert!(
                !WEBHOOK_KINDS.contains(&kind(o)),
                "{install} holds {} {}: webhook configurations belong in {WEBHOOKS} only, \
                 applied once a replica is serving",
                kind(o),
                name(o)
            );
        }
    }
    // Named after the Service they call, as every install names both.
    let service = name(webhook_service(&r.combined));
    let kinds: Vec<(&str, &str)> = r.webhooks.iter().map(|o| (kind(o), name(o))).collect();
    assert_eq!(
        kinds.len(),
        2,
        "{WEBHOOKS} must hold the two configurations and nothing else: {kinds:?}"
    );
    for k in WEBHOOK_KINDS {
        assert!(
            kinds.contains(&(k, service)),
            "{WEBHOOKS} lacks {k} {service}: {kinds:?}"
        );
    }
}

fn check_mutating_webhook_is_create_only(r: &Renders) {
    for config in of_kind(&r.webhooks, "MutatingWebhookConfiguration") {
        for hook in webhooks_of(config) {
            let hook_name = str_at(hook, "/name");
            for rule in array(&hook["rules"]) {
                assert_eq!(
                    strings(&rule["operations"]),
                    ["CREATE"],
                    "{hook_name}: kube-apiserver defaults spec.podReplacementPolicy itself, so \
                     the mutation can change nothing on UPDATE"
                );
            }
            // Defaulting podReplacementPolicy reaches jobwarden only where the API server has
            // not defaulted it first: on v1.36, never.
            if hook_name == "mutate.jobs.jobwarden.io" {
                assert_eq!(
                    str_at(hook, "/matchConditions/0/expression"),
                    "!(has(object.spec.podReplacementPolicy))",
                    "{hook_name}: the default policy sends it only Jobs without the field"
                );
            }
        }
    }
}

/// The table in docs/operations.md ("What the webhook configurations decide, and why") is what
/// operators read; the YAML must say the same: names, resources, operations, failure policy.
fn check_webhooks_as_documented(r: &Renders) {
    let documented = documented_webhooks();
    let mut configured = BTreeMap::new();
    for config in r.webhooks.iter() {
        for hook in webhooks_of(config) {
            let rules = array(&hook["rules"]);
            assert_eq!(
                rules.len(),
                1,
                "{}: one rule expected",
                str_at(hook, "/name")
            );
            let rule = &rules[0];
            assert_eq!(strings(&rule["apiGroups"]), ["batch"]);
            assert_eq!(strings(&rule["apiVersions"]), ["v1"]);
            configured.insert(
                str_at(hook, "/name").to_owned(),
                DocumentedWebhook {
                    resources: strings(&rule["resources"]),
                    operations: strings(&rule["operations"]),
                    failure_policy: str_at(hook, "/failurePolicy").to_owned(),
                },
            );
        }
    }
    assert_eq!(
        configured, documented,
        "{WEBHOOKS} and the table in {OPERATIONS_DOC} disagree"
    );
}

fn check_namespace_selectors_exclude_kube_system_and_our_namespace(r: &Renders) {
    for (install, objects) in r.installs() {
        let ns = namespace_of_install(objects);
        for config in r.webhooks.iter() {
            for hook in webhooks_of(config) {
                let excluded: BTreeSet<String> = array(
                    &hook
                        .pointer("/namespaceSelector/matchExpressions")
                        .cloned()
                        .unwrap_or_default(),
                )
                .iter()
                .filter(|e| e["key"] == "kubernetes.io/metadata.name" && e["operator"] == "NotIn")
                .flat_map(|e| strings(&e["values"]))
                .collect();
                for must in ["kube-system", ns.as_str()] {
                    assert!(
                        excluded.contains(must),
                        "{}: namespaceSelector must leave out {must} (with {install}): jobwarden \
                         must never be needed to repair the cluster or itself",
                        str_at(hook, "/name")
                    );
                }
                assert!(
                    hook.get("objectSelector").is_none(),
                    "{}: an objectSelector would let a Job opt out of its own rules",
                    str_at(hook, "/name")
                );
            }
        }
    }
}

/// The names kustomize does not rewrite (the Service and namespace the webhooks call,
/// inject-ca-from, the Certificate's DNS names, RBAC subjects) agree with the objects.
fn check_unrewritten_names_agree(r: &Renders) {
    for (install, objects) in r.installs() {
        let ns = namespace_of_install(objects);
        for o in objects {
            if !kustomize::cluster_scoped(kind(o)) {
                assert_eq!(
                    o.pointer("/metadata/namespace").and_then(Value::as_str),
                    Some(ns.as_str()),
                    "{install}: {} {} is not in {ns}",
                    kind(o),
                    name(o)
                );
            }
        }
        let service = webhook_service(objects);
        let service_name = name(service);
        let certificate = the_serving_certificate(objects, &ns, service_name);
        for config in r.webhooks.iter() {
            assert_eq!(
                config.pointer("/metadata/annotations/cert-manager.io~1inject-ca-from"),
                Some(&Value::from(format!("{ns}/{}", name(certificate)))),
                "{} {}: inject-ca-from must name the serving Certificate ({install})",
                kind(config),
                name(config)
            );
            for hook in webhooks_of(config) {
                let svc = &hook["clientConfig"]["service"];
                assert_eq!(svc["name"], service_name, "{install}: {hook}");
                assert_eq!(svc["namespace"], ns.as_str(), "{install}: {hook}");
                let port = svc["port"].as_i64().unwrap_or(443);
                assert!(
                    array(&service["spec"]["ports"])
                        .iter()
                        .any(|p| p["port"] == port && p["targetPort"] == "https"),
                    "{install}: service {service_name} has no port {port} to the https port"
                );
                let want_path = if kind(config) == "MutatingWebhookConfiguration" {
                    "/mutate"
                } else {
                    "/validate"
                };
                assert_eq!(svc["path"], want_path, "{install}: {hook}");
            }
        }
        let secret = str_at(certificate, "/spec/secretName");
        for d in deployments(objects).filter(|d| serves_webhook(d)) {
            assert!(
                array(&d["spec"]["template"]["spec"]["volumes"])
                    .iter()
                    .any(|v| v.pointer("/secret/secretName") == Some(&Value::from(secret))),
                "{install}: deployment {} does not mount the serving certificate's Secret {secret}",
                name(d)
            );
        }
    }
}

/// kube-apiserver reaches the webhook through the Service; the PodDisruptionBudget guards the
/// replicas that answer it. Neither may count pods that do not serve the webhook, and no two
/// Deployments may claim each other's pods.
fn check_service_selects_only_webhook_pods(r: &Renders) {
    for (install, objects) in r.installs() {
        let service = webhook_service(objects);
        let selector = service["spec"]["selector"].clone();
        let all: Vec<&Value> = deployments(objects).collect();
        assert!(
            all.iter().any(|d| serves_webhook(d)),
            "{install}: no Deployment serves the webhook"
        );
        assert!(
            all.iter().any(|d| runs_controller(d)),
            "{install}: no Deployment runs the controller"
        );
        for d in &all {
            let labels = &d["spec"]["template"]["metadata"]["labels"];
            assert_eq!(
                selects(&selector, labels),
                serves_webhook(d),
                "{install}: service {} and deployment {}'s pods (which {} the webhook)",
                name(service),
                name(d),
                if serves_webhook(d) {
                    "serve"
                } else {
                    "do not serve"
                }
            );
            for other in &all {
                assert_eq!(
                    selects(
                        &d["spec"]["selector"]["matchLabels"],
                        &other["spec"]["template"]["metadata"]["labels"]
                    ),
                    name(d) == name(other),
                    "{install}: deployment {}'s selector and deployment {}'s pods",
                    name(d),
                    name(other)
                );
            }
        }
        for pdb in of_kind(objects, "PodDisruptionBudget") {
            let covered: Vec<&str> = all
                .iter()
                .filter(|d| {
                    selects(
                        &pdb["spec"]["selector"]["matchLabels"],
                        &d["spec"]["template"]["metadata"]["labels"],
                    )
                })
                .map(|d| name(d))
                .collect();
            assert_eq!(
                covered.len(),
                1,
                "{install}: PodDisruptionBudget {} must cover one Deployment's pods: {covered:?}",
                name(pdb)
            );
        }
    }
}

/// Every ServiceAccount a Deployment runs as has exactly the grants its pods' faces use.
fn check_rbac_is_least_privilege(r: &Renders) {
    for (install, objects) in r.installs() {
        let ns = namespace_of_install(objects);
        let mut needs: BTreeMap<String, BTreeSet<Grant>> = BTreeMap::new();
        for d in deployments(objects) {
            let sa = str_at(d, "/spec/template/spec/serviceAccountName").to_owned();
            let entry = needs.entry(sa).or_default();
            if serves_webhook(d) {
                entry.extend(webhook_needs(name(webhook_service(objects)), &ns));
            }
            if runs_controller(d) {
                entry.extend(controller_needs(&ns));
                // The dispatcher runs beside the Job controller, and reads its workers'
                // Secrets by name: none where it dispatches nothing.
                entry.extend(dispatcher_needs(&ns, &r.worker_secrets(install)));
            }
            if secures_metrics(d) {
                entry.extend(metrics_needs());
            }
        }
        let granted = grants_by_service_account(objects, &ns);
        for (sa, need) in &needs {
            let got = granted.get(sa).cloned().unwrap_or_default();
            let missing: Vec<_> = need.difference(&got).collect();
            let extra: Vec<_> = got.difference(need).collect();
            assert!(
                missing.is_empty() && extra.is_empty(),
                "{install}: serviceaccount {sa}: missing {missing:#?}, not needed {extra:#?}"
            );
            assert!(
                of_kind(objects, "ServiceAccount").any(|s| name(s) == sa),
                "{install}: serviceaccount {sa} is not created"
            );
        }
        for sa in granted.keys() {
            assert!(
                needs.contains_key(sa),
                "{install}: serviceaccount {sa} is granted RBAC but runs no Deployment"
            );
        }
    }
}

/// The Lease travels in kube-apiserver's `leader-election` priority level: one FlowSchema per
/// install, ahead of the `service-accounts` schema (precedence 9000) that would match otherwise,
/// naming exactly the ServiceAccounts whose pods lead, for exactly the Lease verbs they use.
fn check_the_lease_has_the_leader_election_priority_level(r: &Renders) {
    for (install, objects) in r.installs() {
        let ns = namespace_of_install(objects);
        let schemas: Vec<&Value> = of_kind(objects, "FlowSchema").collect();
        let [schema] = schemas.as_slice() else {
            panic!("{install}: one FlowSchema, found {}", schemas.len());
        };
        let what = format!("{install}: FlowSchema {}", name(schema));
        assert_eq!(
            str_at(schema, "/spec/priorityLevelConfiguration/name"),
            "leader-election",
            "{what}"
        );
        let precedence = schema["spec"]["matchingPrecedence"].as_i64();
        assert!(
            precedence.is_some_and(|p| p > 200 && p < 9000),
            "{what}: precedence {precedence:?} must follow the API server's own leader-election \
             schemas (100, 200) and precede service-accounts (9000)"
        );
        let rules = array(&schema["spec"]["rules"]);
        let [rule] = rules.as_slice() else {
            panic!("{what}: one rule");
        };
        let subjects: BTreeSet<(String, String)> = array(&rule["subjects"])
            .iter()
            .map(|s| {
                assert_eq!(s["kind"], "ServiceAccount", "{what}: {s}");
                (
                    str_at(s, "/serviceAccount/namespace").to_owned(),
                    str_at(s, "/serviceAccount/name").to_owned(),
                )
            })
            .collect();
        let leaders: BTreeSet<(String, String)> = deployments(objects)
            .filter(|d| runs_controller(d))
            .map(|d| {
                let sa = str_at(d, "/spec/template/spec/serviceAccountName");
                (ns.clone(), sa.to_owned())
            })
            .collect();
        assert_eq!(subjects, leaders, "{what}: subjects");
        let lease_verbs: BTreeSet<String> = controller_needs(&ns)
            .into_iter()
            .filter_map(|g| match g {
                Grant::Resource { resource, verb, .. } if resource == "leases" => Some(verb),
                _ => None,
            })
            .collect();
        let resource_rules = array(&rule["resourceRules"]);
        let [lease] = resource_rules.as_slice() else {
            panic!("{what}: one resource rule, the Lease's");
        };
        assert_eq!(
            strings(&lease["apiGroups"]),
            ["coordination.k8s.io"],
            "{what}"
        );
        assert_eq!(strings(&lease["resources"]), ["leases"], "{what}");
        let verbs: BTreeSet<String> = strings(&lease["verbs"]).into_iter().collect();
        assert_eq!(verbs, lease_verbs, "{what}: the verbs leader election uses");
    }
}

fn check_one_image_and_one_policy(r: &Renders) {
    for (install, objects) in r.installs() {
        let mut images = BTreeSet::new();
        let mut policies = BTreeSet::new();
        for d in deployments(objects) {
            for c in array(&d["spec"]["template"]["spec"]["containers"]) {
                images.insert(str_at(&c, "/image").to_owned());
            }
            for v in array(&d["spec"]["template"]["spec"]["volumes"]) {
                if let Some(cm) = v.pointer("/configMap/name").and_then(Value::as_str) {
                    policies.insert(cm.to_owned());
                }
            }
        }
        assert_eq!(
            images.len(),
            1,
            "{install}: one image for every face: {images:?}"
        );
        // The controller name (policy controllerName) must be the same in the webhook, whose
        // delegate policy writes it into spec.managedBy, and in the controller that runs it.
        assert_eq!(
            policies.len(),
            1,
            "{install}: one policy ConfigMap: {policies:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The tests, on the replayed renders.
// ---------------------------------------------------------------------------------------------

#[test]
fn the_installs_hold_no_webhook_configuration_and_the_webhooks_kustomization_only_them() {
    check_installs_hold_no_webhook_configuration(&replayed());
}

#[test]
fn the_mutating_webhook_is_registered_for_create_only() {
    check_mutating_webhook_is_create_only(&replayed());
}

#[test]
fn webhooks_are_as_the_docs_table_says() {
    check_webhooks_as_documented(&replayed());
}

#[test]
fn every_webhook_leaves_out_kube_system_and_jobwardens_namespace() {
    check_namespace_selectors_exclude_kube_system_and_our_namespace(&replayed());
}

#[test]
fn names_kustomize_does_not_rewrite_agree() {
    check_unrewritten_names_agree(&replayed());
}

#[test]
fn the_service_selects_only_pods_that_serve_the_webhook() {
    check_service_selects_only_webhook_pods(&replayed());
}

#[test]
fn each_service_account_has_the_rbac_its_pods_use_and_no_more() {
    check_rbac_is_least_privilege(&replayed());
}

#[test]
fn the_lease_has_the_leader_election_priority_level() {
    check_the_lease_has_the_leader_election_priority_level(&replayed());
}

#[test]
fn every_face_runs_one_image_with_one_policy() {
    let r = replayed();
    check_one_image_and_one_policy(&r);
    let built = format!("jobwarden:{}", env!("CARGO_PKG_VERSION"));
    for d in deployments(&r.combined).chain(deployments(&r.split)) {
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            str_at(c, "/image"),
            built,
            "{}: what image/build.sh tags",
            name(d)
        );
    }
}

#[test]
fn the_split_install_splits_the_faces() {
    let r = replayed();
    let faces: BTreeMap<&str, (bool, bool)> = deployments(&r.split)
        .map(|d| (name(d), (serves_webhook(d), runs_controller(d))))
        .collect();
    assert_eq!(
        faces,
        BTreeMap::from([
            ("jobwarden", (true, false)),
            ("jobwarden-controller", (false, true))
        ])
    );
    let faces: BTreeMap<&str, (bool, bool)> = deployments(&r.combined)
        .map(|d| (name(d), (serves_webhook(d), runs_controller(d))))
        .collect();
    assert_eq!(faces, BTreeMap::from([("jobwarden", (true, true))]));
    // Every Deployment serves its metrics over HTTPS, with the serving certificate.
    for d in deployments(&r.split).chain(deployments(&r.combined)) {
        let a = args(d);
        assert!(secures_metrics(d), "{}: {a:?}", name(d));
        for flag in ["--tls-cert=", "--tls-key="] {
            assert!(a.iter().any(|x| x.starts_with(flag)), "{}: {a:?}", name(d));
        }
    }
}

/// The right to scrape, for an operator to bind a Prometheus to: `get` on /metrics, nothing
/// else, bound by the install to no one.
#[test]
fn the_metrics_reader_role_grants_get_on_metrics_only() {
    let r = replayed();
    for (install, objects) in r.installs() {
        let reader = of_kind(objects, "ClusterRole")
            .find(|o| name(o) == "jobwarden-metrics-reader")
            .unwrap_or_else(|| panic!("{install}: no ClusterRole jobwarden-metrics-reader"));
        assert_eq!(
            reader["rules"],
            serde_json::json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]),
            "{install}"
        );
        assert!(
            !objects
                .iter()
                .any(|o| o.pointer("/roleRef/name").and_then(Value::as_str)
                    == Some("jobwarden-metrics-reader")),
            "{install}: the install binds the metrics reader role"
        );
    }
}

/// The Deployments leave --listen and --metrics-listen to the server's defaults (so the server
/// picks the address families); their container ports and probes must be those defaults.
#[test]
fn container_ports_are_the_servers_default_ports() {
    let out = Command::new(env!("CARGO_BIN_EXE_jobwarden"))
        .args(["serve", "-h"])
        .output()
        .expect("jobwarden serve -h runs");
    let help = String::from_utf8_lossy(&out.stdout);
    let https = default_port(&help, "--listen <");
    let metrics = default_port(&help, "--metrics-listen <");
    let r = replayed();
    for (install, objects) in r.installs() {
        for d in deployments(objects) {
            let a = args(d);
            assert!(
                !a.iter()
                    .any(|x| x.starts_with("--listen") || x.starts_with("--metrics-listen")),
                "{install}: deployment {} pins a listen address: {a:?}",
                name(d)
            );
            let container = &d["spec"]["template"]["spec"]["containers"][0];
            let ports: BTreeMap<String, u16> = array(&container["ports"])
                .iter()
                .map(|p| {
                    let port = p["containerPort"].as_u64().expect("containerPort");
                    (
                        str_at(p, "/name").to_owned(),
                        u16::try_from(port).expect("a port"),
                    )
                })
                .collect();
            assert_eq!(
                ports.get("metrics"),
                Some(&metrics),
                "{install}: {}",
                name(d)
            );
            if serves_webhook(d) {
                assert_eq!(ports.get("https"), Some(&https), "{install}: {}", name(d));
            }
            for probe in ["readinessProbe", "livenessProbe"] {
                assert_eq!(container[probe]["httpGet"]["port"], "metrics");
                // The metrics port speaks HTTPS when the metrics are secured.
                let scheme = if secures_metrics(d) { "HTTPS" } else { "HTTP" };
                assert_eq!(container[probe]["httpGet"]["scheme"], scheme, "{install}");
            }
        }
    }
}

/// The docs the YAML comments point to (docs/operations.md, docs/dispatch.md) exist, with the
/// sections they name; and the links in docs/operations.md reach files and sections that exist.
#[test]
fn links_between_deploy_and_the_docs_resolve() {
    let mut files = Vec::new();
    walk(&root().join("deploy"), &mut files);
    for page in [OPERATIONS_DOC, DISPATCH_DOC] {
        let doc = std::fs::read_to_string(root().join(page)).expect("a page of docs/");
        let anchors = markdown_anchors(&doc);
        let mut seen = 0;
        for file in &files {
            let text = std::fs::read_to_string(file).expect("readable");
            for (i, _) in text.match_indices(page) {
                seen += 1;
                let rest = &text[i + page.len()..];
                if let Some(anchor) = rest.strip_prefix('#') {
                    let anchor: String = anchor
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                        .collect();
                    assert!(
                        anchors.contains(&anchor),
                        "{}: {page}#{anchor} is not a section of {page}",
                        file.display()
                    );
                }
            }
        }
        assert!(seen > 0, "deploy/ should point operators to {page}");
    }
    let doc = std::fs::read_to_string(root().join(OPERATIONS_DOC)).expect("docs/operations.md");
    let anchors = markdown_anchors(&doc);
    let doc_dir = root().join("docs");
    for target in markdown_link_targets(&doc) {
        if target.starts_with("http") {
            continue;
        }
        let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
        if path.is_empty() {
            assert!(
                anchors.contains(anchor),
                "{OPERATIONS_DOC}: no section #{anchor}"
            );
        } else {
            assert!(
                doc_dir.join(path).exists(),
                "{OPERATIONS_DOC}: link to {path}, which does not exist"
            );
        }
    }
}
