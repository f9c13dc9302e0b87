//! deploy/ read as files: the invariants the install, upgrade and removal steps of
//! docs/operations.md rely on. No cluster and no kubectl needed: the few kustomize features
//! deploy/ uses are replayed here (any other fails the test instead of being ignored). Where
//! kubectl is installed, the same checks also run on what `kubectl kustomize` renders.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

#[path = "deploy/kustomize.rs"]
mod kustomize;

/// The default install: one Deployment serving the webhook and running the controller.
const COMBINED: &str = "deploy";
/// The large-cluster install: the two faces as two Deployments.
const SPLIT: &str = "deploy/split";
/// The webhook configurations, applied once one of the above is serving.
const WEBHOOKS: &str = "deploy/webhooks";
const OPERATIONS_DOC: &str = "docs/operations.md";

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
        webhooks: kustomize::build(&root().join(WEBHOOKS)),
    }
}

struct Renders {
    combined: Vec<Value>,
    split: Vec<Value>,
    webhooks: Vec<Value>,
}

impl Renders {
    /// Each way of installing, with its name for messages.
    fn installs(&self) -> [(&'static str, &[Value]); 2] {
        [(COMBINED, &self.combined), (SPLIT, &self.split)]
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
    let kinds: Vec<(&str, &str)> = r.webhooks.iter().map(|o| (kind(o), name(o))).collect();
    assert_eq!(
        kinds.len(),
        2,
        "{WEBHOOKS} must hold the two configurations and nothing else: {kinds:?}"
    );
    for k in WEBHOOK_KINDS {
        assert!(
            kinds.contains(&(k, "jobwarden")),
            "{WEBHOOKS} lacks {k} jobwarden: {kinds:?}"
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
            assert!(
                hook.get("matchConditions").is_none(),
                "{hook_name}: a CREATE-only webhook needs no matchConditions"
            );
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
                entry.extend(webhook_needs());
            }
            if runs_controller(d) {
                entry.extend(controller_needs(&ns));
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
fn every_face_runs_one_image_with_one_policy() {
    check_one_image_and_one_policy(&replayed());
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
    // Only a controller that serves no webhook may go without the serving certificate.
    let controller = deployments(&r.split)
        .find(|d| name(d) == "jobwarden-controller")
        .expect("the controller Deployment");
    assert!(
        !args(controller).iter().any(|a| a.starts_with("--tls-")),
        "the controller serves no HTTPS: {:?}",
        args(controller)
    );
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
            }
        }
    }
}

/// The docs the YAML comments point to exist, with the sections they name; and the links in
/// docs/operations.md reach files and sections that exist.
#[test]
fn links_between_deploy_and_the_docs_resolve() {
    let doc = std::fs::read_to_string(root().join(OPERATIONS_DOC)).expect("docs/operations.md");
    let anchors = markdown_anchors(&doc);
    let mut files = Vec::new();
    walk(&root().join("deploy"), &mut files);
    let mut seen = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable");
        for (i, _) in text.match_indices(OPERATIONS_DOC) {
            seen += 1;
            let rest = &text[i + OPERATIONS_DOC.len()..];
            if let Some(anchor) = rest.strip_prefix('#') {
                let anchor: String = anchor
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                    .collect();
                assert!(
                    anchors.contains(&anchor),
                    "{}: {OPERATIONS_DOC}#{anchor} is not a section of {OPERATIONS_DOC}",
                    file.display()
                );
            }
        }
    }
    assert!(
        seen > 0,
        "deploy/ should point operators to {OPERATIONS_DOC}"
    );
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

// ---------------------------------------------------------------------------------------------
// The same checks on kubectl's own rendering, when kubectl is installed.
// ---------------------------------------------------------------------------------------------

#[test]
fn kubectl_kustomize_renders_what_the_replay_checks() {
    if !kubectl_available() {
        eprintln!("kubectl not found: deploy/ checked as files only (the replay of kustomize)");
        return;
    }
    let rendered = Renders {
        combined: kubectl_kustomize(COMBINED),
        split: kubectl_kustomize(SPLIT),
        webhooks: kubectl_kustomize(WEBHOOKS),
    };
    check_installs_hold_no_webhook_configuration(&rendered);
    check_mutating_webhook_is_create_only(&rendered);
    check_webhooks_as_documented(&rendered);
    check_namespace_selectors_exclude_kube_system_and_our_namespace(&rendered);
    check_unrewritten_names_agree(&rendered);
    check_service_selects_only_webhook_pods(&rendered);
    check_rbac_is_least_privilege(&rendered);
    check_one_image_and_one_policy(&rendered);

    // The replay and kustomize agree on every object, but for the ConfigMap name's hash.
    let replay = replayed();
    for (what, ours, theirs) in [
        (COMBINED, &replay.combined, &rendered.combined),
        (SPLIT, &replay.split, &rendered.split),
        (WEBHOOKS, &replay.webhooks, &rendered.webhooks),
    ] {
        assert_eq!(
            by_identity(ours, true),
            by_identity(theirs, true),
            "{what}: the replay in tests/deploy.rs and kubectl kustomize disagree"
        );
    }
}

/// register.sh renders what `kubectl apply -k deploy/webhooks/` would, plus the CA in every
/// webhook's caBundle.
#[test]
fn register_sh_creates_the_webhooks_with_the_ca_in_place() {
    if !kubectl_available() {
        eprintln!("kubectl not found: skipping the register.sh rendering check");
        return;
    }
    let ca = std::env::temp_dir().join(format!(
        "jobwarden-deploy-test-ca-{}.pem",
        std::process::id()
    ));
    let pem = "-----BEGIN CERTIFICATE-----\nnot a certificate, only bytes to carry\n-----END CERTIFICATE-----\n";
    std::fs::write(&ca, pem).expect("write the CA file");
    let out = Command::new("bash")
        .arg(root().join(WEBHOOKS).join("register.sh"))
        .args(["--print", "--ca-file"])
        .arg(&ca)
        .output()
        .expect("register.sh runs");
    let _ = std::fs::remove_file(&ca);
    assert!(
        out.status.success(),
        "register.sh --print: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = yaml_docs(&String::from_utf8_lossy(&out.stdout));
    let plain = kubectl_kustomize(WEBHOOKS);
    assert_eq!(printed.len(), plain.len());
    let want = base64_encode(pem.as_bytes());
    let mut hooks = 0;
    for (mut p, q) in by_identity(&printed, false)
        .into_values()
        .zip(by_identity(&plain, false).into_values())
    {
        for hook in p["webhooks"].as_array_mut().expect("webhooks") {
            let bundle = hook["clientConfig"]
                .as_object_mut()
                .expect("clientConfig")
                .remove("caBundle");
            assert_eq!(bundle, Some(Value::from(want.clone())), "{hook}");
            hooks += 1;
        }
        assert_eq!(p, q, "register.sh must change nothing but caBundle");
    }
    assert_eq!(hooks, 3);
}

// ---------------------------------------------------------------------------------------------
// What each face uses of the API, from the code: the webhook's namespace watch
// (crates/server/src/namespaces.rs), the controller's kube calls (crates/controller/src/
// kube_api.rs, reconcile.rs), kube-runtime's event Recorder and kube-lease-manager.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Grant {
    /// None: cluster-wide (a ClusterRole bound by a ClusterRoleBinding).
    namespace: Option<String>,
    group: String,
    resource: String,
    /// None: any object of the resource.
    object: Option<String>,
    verb: String,
}

fn grants(
    namespace: Option<&str>,
    group: &str,
    resource: &str,
    object: Option<&str>,
    verbs: &[&str],
) -> Vec<Grant> {
    verbs
        .iter()
        .map(|v| Grant {
            namespace: namespace.map(str::to_owned),
            group: group.to_owned(),
            resource: resource.to_owned(),
            object: object.map(str::to_owned),
            verb: (*v).to_owned(),
        })
        .collect()
}

fn webhook_needs() -> Vec<Grant> {
    grants(None, "", "namespaces", None, &["get", "list", "watch"])
}

fn controller_needs(namespace: &str) -> Vec<Grant> {
    let lease = jobwarden_controller::ControllerConfig::default().lease_name;
    [
        grants(None, "batch", "jobs", None, &["get", "list", "watch"]),
        grants(None, "batch", "jobs/status", None, &["patch"]),
        grants(
            None,
            "",
            "pods",
            None,
            &["get", "list", "watch", "create", "delete", "patch"],
        ),
        // core/v1 Events, one object per event, as upstream's recorder writes them.
        grants(None, "", "events", None, &["create"]),
        // The Lease lives in the pod's own namespace; RBAC cannot limit create by name.
        grants(
            Some(namespace),
            "coordination.k8s.io",
            "leases",
            None,
            &["create"],
        ),
        grants(
            Some(namespace),
            "coordination.k8s.io",
            "leases",
            Some(&lease),
            &["get", "patch"],
        ),
    ]
    .concat()
}

/// What the bindings grant each ServiceAccount of `namespace`.
fn grants_by_service_account(
    objects: &[Value],
    namespace: &str,
) -> BTreeMap<String, BTreeSet<Grant>> {
    let mut out: BTreeMap<String, BTreeSet<Grant>> = BTreeMap::new();
    for binding in objects
        .iter()
        .filter(|o| matches!(kind(o), "ClusterRoleBinding" | "RoleBinding"))
    {
        let role_kind = str_at(binding, "/roleRef/kind");
        let role_name = str_at(binding, "/roleRef/name");
        let binding_ns = binding
            .pointer("/metadata/namespace")
            .and_then(Value::as_str);
        let role = objects
            .iter()
            .find(|o| {
                kind(o) == role_kind
                    && name(o) == role_name
                    && (role_kind == "ClusterRole"
                        || o.pointer("/metadata/namespace").and_then(Value::as_str) == binding_ns)
            })
            .unwrap_or_else(|| {
                panic!(
                    "{} {}: no {role_kind} {role_name}",
                    kind(binding),
                    name(binding)
                )
            });
        // A ClusterRole bound by a RoleBinding grants only in the RoleBinding's namespace.
        let scope = if kind(binding) == "RoleBinding" {
            binding_ns.map(str::to_owned)
        } else {
            None
        };
        for subject in array(&binding["subjects"]) {
            assert_eq!(
                subject["kind"],
                "ServiceAccount",
                "{}: {subject}",
                name(binding)
            );
            assert_eq!(
                subject["namespace"],
                namespace,
                "{} {}: subject {subject} is not in jobwarden's namespace",
                kind(binding),
                name(binding)
            );
            let granted = out.entry(str_at(&subject, "/name").to_owned()).or_default();
            for rule in array(&role["rules"]) {
                let objects_named = strings(&rule["resourceNames"]);
                let named: Vec<Option<&str>> = if objects_named.is_empty() {
                    vec![None]
                } else {
                    objects_named.iter().map(|n| Some(n.as_str())).collect()
                };
                for group in strings(&rule["apiGroups"]) {
                    for resource in strings(&rule["resources"]) {
                        for object in &named {
                            for verb in strings(&rule["verbs"]) {
                                granted.insert(Grant {
                                    namespace: scope.clone(),
                                    group: group.clone(),
                                    resource: resource.clone(),
                                    object: object.map(str::to_owned),
                                    verb,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Reading the rendered objects.
// ---------------------------------------------------------------------------------------------

fn kind(o: &Value) -> &str {
    o["kind"].as_str().unwrap_or_default()
}

fn name(o: &Value) -> &str {
    o.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn str_at<'v>(o: &'v Value, pointer: &str) -> &'v str {
    o.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{pointer} missing in {} {}", kind(o), name(o)))
}

fn array(v: &Value) -> Vec<Value> {
    v.as_array().cloned().unwrap_or_default()
}

fn strings(v: &Value) -> Vec<String> {
    array(v)
        .iter()
        .map(|s| s.as_str().expect("a string").to_owned())
        .collect()
}

fn of_kind<'o>(objects: &'o [Value], k: &'o str) -> impl Iterator<Item = &'o Value> {
    objects.iter().filter(move |o| kind(o) == k)
}

fn deployments(objects: &[Value]) -> impl Iterator<Item = &Value> {
    of_kind(objects, "Deployment")
}

fn webhooks_of(config: &Value) -> &[Value] {
    config["webhooks"].as_array().map_or(&[], Vec::as_slice)
}

fn args(d: &Value) -> Vec<String> {
    let containers = array(&d["spec"]["template"]["spec"]["containers"]);
    assert_eq!(containers.len(), 1, "deployment {}: one container", name(d));
    for env in array(&containers[0]["env"]) {
        let var = str_at(&env, "/name");
        assert!(
            !var.starts_with("JOBWARDEN_NO_"),
            "deployment {}: choose the faces with --no-webhook/--no-controller, not {var}",
            name(d)
        );
    }
    strings(&containers[0]["args"])
}

fn serves_webhook(d: &Value) -> bool {
    !args(d).iter().any(|a| a == "--no-webhook")
}

fn runs_controller(d: &Value) -> bool {
    !args(d).iter().any(|a| a == "--no-controller")
}

/// A matchLabels selector against a pod's labels.
fn selects(selector: &Value, labels: &Value) -> bool {
    let selector = selector.as_object().expect("a matchLabels selector");
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn namespace_of_install(objects: &[Value]) -> String {
    let namespaces: Vec<&str> = of_kind(objects, "Namespace").map(name).collect();
    assert_eq!(
        namespaces.len(),
        1,
        "one Namespace per install: {namespaces:?}"
    );
    namespaces[0].to_owned()
}

/// The Service the webhooks call: the one with a port to the containers' https port.
fn webhook_service(objects: &[Value]) -> &Value {
    let services: Vec<&Value> = of_kind(objects, "Service")
        .filter(|s| {
            array(&s["spec"]["ports"])
                .iter()
                .any(|p| p["targetPort"] == "https")
        })
        .collect();
    assert_eq!(services.len(), 1, "one Service to the https port");
    services[0]
}

/// The Certificate kube-apiserver checks: the one for the Service's DNS names, exactly.
fn the_serving_certificate<'o>(objects: &'o [Value], ns: &str, service: &str) -> &'o Value {
    let want = vec![
        format!("{service}.{ns}.svc"),
        format!("{service}.{ns}.svc.cluster.local"),
    ];
    let found: Vec<&Value> = of_kind(objects, "Certificate")
        .filter(|c| !c["spec"]["dnsNames"].is_null())
        .collect();
    assert_eq!(found.len(), 1, "one serving Certificate");
    assert_eq!(
        strings(&found[0]["spec"]["dnsNames"]),
        want,
        "the serving Certificate's dnsNames must be the Service's names"
    );
    found[0]
}

/// Objects by kind/namespace/name; `normalize` drops the hash kustomize adds to a generated
/// ConfigMap's name, and the label kustomize may add, so the replay can be compared.
fn by_identity(objects: &[Value], normalize: bool) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for o in objects {
        let mut o = o.clone();
        if normalize {
            strip_config_map_hash(&mut o);
        }
        let key = format!(
            "{}/{}/{}",
            kind(&o),
            o.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or(""),
            name(&o)
        );
        assert!(out.insert(key.clone(), o).is_none(), "{key} twice");
    }
    out
}

/// `jobwarden-policy-f82hcf6fk7` -> `jobwarden-policy`, wherever it appears.
fn strip_config_map_hash(v: &mut Value) {
    match v {
        Value::String(s) if s.starts_with("jobwarden-policy-") => *s = "jobwarden-policy".into(),
        Value::Array(items) => items.iter_mut().for_each(strip_config_map_hash),
        Value::Object(map) => map.values_mut().for_each(strip_config_map_hash),
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// The docs.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, PartialEq, Eq)]
struct DocumentedWebhook {
    resources: Vec<String>,
    operations: Vec<String>,
    failure_policy: String,
}

/// The rows of the table under "What the webhook configurations decide, and why":
/// | `name` | `resource` OPERATION, OPERATION | `Policy` | Why |
fn documented_webhooks() -> BTreeMap<String, DocumentedWebhook> {
    let doc = std::fs::read_to_string(root().join(OPERATIONS_DOC)).expect("docs/operations.md");
    let section = doc
        .split("### What the webhook configurations decide, and why")
        .nth(1)
        .expect("the section on the webhook configurations");
    let mut out = BTreeMap::new();
    for line in section.lines().skip_while(|l| !l.starts_with('|')) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Some(hook) = cells
            .get(1)
            .and_then(|c| c.strip_prefix('`'))
            .and_then(|c| c.strip_suffix('`'))
        else {
            continue;
        };
        let (resource, operations) = cells[2].split_once(' ').expect("`resource` OPERATIONS");
        out.insert(
            hook.to_owned(),
            DocumentedWebhook {
                resources: vec![resource.trim_matches('`').to_owned()],
                operations: operations.split(',').map(|o| o.trim().to_owned()).collect(),
                failure_policy: cells[3].trim_matches('`').to_owned(),
            },
        );
    }
    assert!(!out.is_empty(), "no table rows found");
    out
}

/// GitHub's anchors for the headings of a markdown file.
fn markdown_anchors(doc: &str) -> BTreeSet<String> {
    let mut in_code = false;
    let mut out = BTreeSet::new();
    for line in doc.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        if in_code || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        out.insert(
            title
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
                .map(|c| if c == ' ' { '-' } else { c })
                .collect(),
        );
    }
    out
}

/// The targets of `[text](target)` links outside code blocks.
fn markdown_link_targets(doc: &str) -> Vec<String> {
    let mut in_code = false;
    let mut out = Vec::new();
    for line in doc.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        if in_code {
            continue;
        }
        for (i, _) in line.match_indices("](") {
            let rest = &line[i + 2..];
            if let Some(end) = rest.find(')') {
                out.push(rest[..end].to_owned());
            }
        }
    }
    out
}

/// The files under `dir`, hidden ones left out: register.sh builds in a hidden directory beside
/// deploy/webhooks/, which the test of register.sh may be creating or removing meanwhile.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable directory") {
        let entry = entry.expect("an entry");
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// The port in `[default: ADDRESS:PORT]` on the line of `flag` in `serve -h`.
fn default_port(help: &str, flag: &str) -> u16 {
    let at = help
        .find(flag)
        .unwrap_or_else(|| panic!("serve -h has no {flag}"));
    let rest = &help[at..];
    let default = rest
        .find("[default: ")
        .map(|i| &rest[i + "[default: ".len()..])
        .and_then(|d| d.split(']').next())
        .unwrap_or_else(|| {
            panic!("serve -h shows no default for {flag}: deploy/ relies on it for its ports")
        });
    default
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in the default {default:?} of {flag}"))
}

// ---------------------------------------------------------------------------------------------
// YAML and kubectl.
// ---------------------------------------------------------------------------------------------

fn yaml_docs(text: &str) -> Vec<Value> {
    use serde::Deserialize as _;
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).expect("valid YAML"))
        .filter(|v| !v.is_null())
        .collect()
}

fn kubectl_available() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn kubectl_kustomize(dir: &str) -> Vec<Value> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(root().join(dir))
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl kustomize {dir}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    yaml_docs(&String::from_utf8_lossy(&out.stdout))
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
