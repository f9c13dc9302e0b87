//! `--pre`: the install's manifests read, and each check by table.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{ERROR, OK, SKIPPED, UNKNOWN, WARNING};
use super::{expect, refused};
use crate::access::Access;
use crate::answer::Answer;
use crate::catalogue::*;
use crate::pre::install::{Install, Resource, TypeRef, WebhookConfiguration};
use crate::pre::*;

/// An install like deploy/'s, in miniature: a namespace enforcing restricted, a ServiceAccount,
/// a ClusterRole and a Role with their bindings, a Deployment and cert-manager's two kinds.
fn install() -> Install {
    Install {
        sources: vec!["stdin".into()],
        objects: vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "jobwarden-system",
                   "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "jobwarden", "namespace": "jobwarden-system"}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "jobwarden"},
                   "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list"]},
                             {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "lease"},
                   "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["jobwarden-job-controller"], "verbs": ["get"]}]}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "jobwarden", "namespace": "jobwarden-system"},
                   "spec": {"template": {"metadata": {"labels": {"app.kubernetes.io/name": "jobwarden"}},
                            "spec": {"serviceAccountName": "jobwarden", "containers": [{"name": "jobwarden", "image": "jobwarden"}]}}}}),
            json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": {"name": "jobwarden-tls"}}),
            json!({"apiVersion": "cert-manager.io/v1", "kind": "Issuer", "metadata": {"name": "jobwarden-ca"}}),
        ],
    }
}

fn resources() -> BTreeMap<TypeRef, Resource> {
    let r = |v: &str, k: &str, group: &str, plural: &str, namespaced: bool| {
        (
            (v.to_owned(), k.to_owned()),
            Resource {
                group: group.into(),
                plural: plural.into(),
                namespaced,
            },
        )
    };
    BTreeMap::from([
        r("v1", "Namespace", "", "namespaces", false),
        r("v1", "ServiceAccount", "", "serviceaccounts", true),
        r(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            "rbac.authorization.k8s.io",
            "clusterroles",
            false,
        ),
        r(
            "rbac.authorization.k8s.io/v1",
            "Role",
            "rbac.authorization.k8s.io",
            "roles",
            true,
        ),
        r("apps/v1", "Deployment", "apps", "deployments", true),
        r(
            "cert-manager.io/v1",
            "Certificate",
            "cert-manager.io",
            "certificates",
            true,
        ),
        r(
            "cert-manager.io/v1",
            "Issuer",
            "cert-manager.io",
            "issuers",
            true,
        ),
    ])
}

#[test]
fn an_install_asks_create_get_and_patch_of_each_object() {
    let accesses = install().accesses(&resources(), "jobwarden-system");
    let shown: Vec<String> = accesses.iter().map(ToString::to_string).collect();
    for expected in [
        "create namespaces cluster-wide",
        "patch namespaces named jobwarden-system cluster-wide",
        "create clusterroles (rbac.authorization.k8s.io) cluster-wide",
        "get roles (rbac.authorization.k8s.io) named lease in namespace jobwarden-system",
        "create deployments (apps) in namespace jobwarden-system",
        "create certificates (cert-manager.io) in namespace jobwarden-system",
    ] {
        assert!(
            shown.iter().any(|s| s == expected),
            "{expected} not in {shown:#?}"
        );
    }
    // Seven objects, three verbs each, but for create by name: one create per kind and namespace.
    assert_eq!(accesses.len(), 7 * 3);
    assert_eq!(install().namespace().as_deref(), Some("jobwarden-system"));
    let mut two = install();
    two.objects
        .push(json!({"kind": "ConfigMap", "metadata": {"name": "x", "namespace": "other"}}));
    assert_eq!(two.namespace(), None);
}

#[test]
fn an_install_grants_what_its_roles_say() {
    let granted: Vec<String> = install()
        .granted("jobwarden-system")
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        granted,
        [
            "get namespaces cluster-wide",
            "list namespaces cluster-wide",
            "get leases (coordination.k8s.io) named jobwarden-job-controller in namespace jobwarden-system",
            "get /metrics",
        ]
    );
}

#[test]
fn the_pod_probe_is_the_template_under_the_default_service_account() {
    let probes = install().pod_probes("elsewhere");
    assert_eq!(probes.len(), 1);
    let pod = &probes[0].pod;
    assert_eq!(probes[0].owner, "Deployment jobwarden");
    assert_eq!(probes[0].namespace, "jobwarden-system");
    assert_eq!(
        pod["metadata"]["generateName"],
        "jobwarden-doctor-jobwarden-"
    );
    assert_eq!(
        pod["metadata"]["labels"]["app.kubernetes.io/name"],
        "jobwarden"
    );
    assert_eq!(pod["spec"]["serviceAccountName"], "default");
    assert_eq!(pod["spec"]["containers"][0]["image"], "jobwarden");
}

#[test]
fn permission_to_install() {
    let create = Access::resource(
        None,
        "rbac.authorization.k8s.io",
        "clusterroles",
        None,
        "create",
    );
    let get = Access::resource(Some("x"), "apps", "deployments", Some("jobwarden"), "get");
    let i = install();
    expect(
        &may_install(&i, &[(create.clone(), Ok(true)), (get.clone(), Ok(true))]),
        MAY_INSTALL,
        OK,
        &["all 7 objects"],
    );
    expect(
        &may_install(&i, &[(create.clone(), Ok(false)), (get.clone(), Ok(true))]),
        MAY_INSTALL,
        ERROR,
        &["you may not create clusterroles (rbac.authorization.k8s.io) cluster-wide"],
    );
    expect(
        &may_install(&i, &[(get, Err("timeout".into()))]),
        MAY_INSTALL,
        UNKNOWN,
        &["cannot tell"],
    );
    expect(
        &install_manifests(&i),
        INSTALL_MANIFESTS,
        OK,
        &["stdin: 7 objects (", "Certificate"],
    );
    expect(
        &install_manifests(&Install::shipped()),
        INSTALL_MANIFESTS,
        OK,
        &[
            &format!(
                "the install jobwarden {} ships, built in",
                env!("CARGO_PKG_VERSION")
            ),
            "--install checks another",
            "Deployment",
            "ValidatingWebhookConfiguration",
        ],
    );
    expect(
        &install_manifests(&Install::default()),
        INSTALL_MANIFESTS,
        ERROR,
        &["hold no object"],
    );
}

#[test]
fn permission_to_grant_what_the_roles_grant() {
    let i = install();
    let metrics = Access::Path {
        path: "/metrics".into(),
        verb: "get".into(),
    };
    let escalate = |allowed: Allowed, held: Vec<(Access, Allowed)>| GrantAnswers {
        escalate_and_bind: Some(allowed),
        held,
    };
    expect(
        &may_grant(&i, &escalate(Ok(true), vec![])),
        MAY_GRANT,
        OK,
        &["escalate and bind"],
    );
    expect(
        &may_grant(&i, &escalate(Ok(false), vec![(metrics.clone(), Ok(true))])),
        MAY_GRANT,
        OK,
        &["you hold all 1 permissions"],
    );
    expect(
        &may_grant(&i, &escalate(Ok(false), vec![(metrics, Ok(false))])),
        MAY_GRANT,
        ERROR,
        &["the install's roles grant what you do not hold: get /metrics"],
    );
    let no_rbac = Install {
        sources: vec![],
        objects: vec![json!({"apiVersion": "v1", "kind": "ConfigMap"})],
    };
    expect(
        &may_grant(&no_rbac, &GrantAnswers::default()),
        MAY_GRANT,
        SKIPPED,
        &[],
    );
}

#[test]
fn cert_manager_where_the_install_uses_it() {
    let i = install();
    let served = |kinds: &[&str]| Ok(kinds.iter().map(|k| (*k).to_owned()).collect::<Vec<_>>());
    expect(
        &cert_manager(&i, &served(&["Certificate", "Issuer", "ClusterIssuer"])),
        CERT_MANAGER,
        OK,
        &["serves Certificate, Issuer"],
    );
    expect(
        &cert_manager(&i, &served(&[])),
        CERT_MANAGER,
        ERROR,
        &[
            "Certificate (cert-manager.io/v1), Issuer (cert-manager.io/v1)",
            "cert-manager is not installed",
        ],
    );
    let without = Install {
        sources: vec![],
        objects: i.objects[..5].to_vec(),
    };
    expect(
        &cert_manager(&without, &served(&[])),
        CERT_MANAGER,
        SKIPPED,
        &["does not use cert-manager"],
    );
    expect(
        &cert_manager(&i, &Err("503".into())),
        CERT_MANAGER,
        UNKNOWN,
        &["cannot tell"],
    );
}

fn exists(labels: &[(&str, &str)]) -> NamespaceState {
    NamespaceState::Exists {
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
        terminating: false,
    }
}

#[test]
fn the_namespace() {
    let i = install();
    let ns = "jobwarden-system";
    expect(
        &namespace(ns, &exists(&[]), &Ok(false), &i),
        NAMESPACE,
        OK,
        &["exists"],
    );
    expect(
        &namespace(ns, &NamespaceState::Absent, &Ok(true), &i),
        NAMESPACE,
        OK,
        &["the install creates it"],
    );
    expect(
        &namespace("other", &NamespaceState::Absent, &Ok(true), &i),
        NAMESPACE,
        OK,
        &["you may create it"],
    );
    expect(
        &namespace(ns, &NamespaceState::Absent, &Ok(false), &Install::default()),
        NAMESPACE,
        ERROR,
        &["you may not create namespaces"],
    );
    let terminating = NamespaceState::Exists {
        labels: BTreeMap::new(),
        terminating: true,
    };
    expect(
        &namespace(ns, &terminating, &Ok(true), &Install::default()),
        NAMESPACE,
        ERROR,
        &["being deleted"],
    );
    expect(
        &namespace(
            ns,
            &NamespaceState::Unknown("forbidden".into()),
            &Ok(true),
            &i,
        ),
        NAMESPACE,
        UNKNOWN,
        &["cannot tell"],
    );
}

#[test]
fn pod_security_by_a_dry_run_of_the_pod() {
    let i = install();
    let ns = "jobwarden-system";
    let restricted = exists(&[("pod-security.kubernetes.io/enforce", "restricted")]);
    let admitted = Answer {
        code: 201,
        warnings: vec![],
        body: json!({"kind": "Pod"}),
    };
    let warned = Answer {
        warnings: vec!["would violate PodSecurity \"restricted:latest\": seccompProfile".into()],
        ..admitted.clone()
    };
    // kube-apiserver v1.36.2's words, from a run of doctor --pre on a namespace enforcing restricted.
    let violation = refused(
        403,
        r#"pods "jobwarden-doctor-jobwarden-x8zjv" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false)"#,
    );
    let no_account = refused(
        403,
        r#"pods "jobwarden-doctor-jobwarden-" is forbidden: error looking up service account jobwarden-system/default: serviceaccount "default" not found"#,
    );
    let forbidden = refused(
        403,
        r#"pods is forbidden: User "dev" cannot create resource "pods""#,
    );
    let cases: [(
        &str,
        NamespaceState,
        Option<crate::answer::Reply>,
        _,
        &[&str],
    ); 7] = [
        (
            "admitted",
            restricted.clone(),
            Some(Ok(admitted)),
            OK,
            &[
                "(pod-security.kubernetes.io/enforce: restricted) admits the pods of Deployment jobwarden",
            ],
        ),
        (
            "warned",
            restricted.clone(),
            Some(Ok(warned)),
            WARNING,
            &["with warnings", "seccompProfile"],
        ),
        (
            "refused",
            restricted.clone(),
            Some(Ok(violation)),
            ERROR,
            &[
                "refuses the pods of Deployment jobwarden",
                "violates PodSecurity",
            ],
        ),
        (
            "no default ServiceAccount",
            restricted.clone(),
            Some(Ok(no_account)),
            UNKNOWN,
            &["no ServiceAccount default"],
        ),
        (
            "caller may not",
            restricted.clone(),
            Some(Ok(forbidden)),
            UNKNOWN,
            &["needs create on pods"],
        ),
        (
            "no answer",
            restricted,
            Some(Err("EOF".into())),
            UNKNOWN,
            &["got no answer"],
        ),
        (
            "namespace absent",
            NamespaceState::Absent,
            None,
            SKIPPED,
            &["does not exist yet (the install creates it enforcing \"restricted\")"],
        ),
    ];
    for (what, state, reply, status, says) in cases {
        let probes: Vec<(String, crate::answer::Reply)> = reply
            .into_iter()
            .map(|r| ("Deployment jobwarden".to_owned(), r))
            .collect();
        let check = pod_security(ns, &state, &i, &probes);
        assert_eq!(check.status, status, "{what}: {}", check.message);
        expect(&check, POD_SECURITY, status, says);
    }
}

#[test]
fn webhook_names_already_taken() {
    let ours = |kind: &str| WebhookConfiguration {
        kind: kind.into(),
        name: "jobwarden".into(),
        webhooks: vec!["validate.jobs.jobwarden.io".into()],
    };
    let mine = [ours("ValidatingWebhookConfiguration")];
    expect(
        &webhook_names(&mine, &Ok(vec![])),
        WEBHOOK_NAMES,
        OK,
        &["ValidatingWebhookConfiguration jobwarden"],
    );
    expect(
        &webhook_names(&mine, &Ok(vec![ours("ValidatingWebhookConfiguration")])),
        WEBHOOK_NAMES,
        ERROR,
        &["exist already"],
    );
    let other = WebhookConfiguration {
        name: "team-b-jobwarden".into(),
        ..ours("ValidatingWebhookConfiguration")
    };
    expect(
        &webhook_names(&mine, &Ok(vec![other])),
        WEBHOOK_NAMES,
        WARNING,
        &["ValidatingWebhookConfiguration team-b-jobwarden (validate.jobs.jobwarden.io)"],
    );
    let unrelated = WebhookConfiguration {
        name: "jobwarden".into(),
        ..ours("MutatingWebhookConfiguration")
    };
    let mut unrelated = unrelated;
    unrelated.webhooks = vec!["other.example.com".into()];
    expect(
        &webhook_names(&mine, &Ok(vec![unrelated])),
        WEBHOOK_NAMES,
        OK,
        &[],
    );
    expect(
        &webhook_names(&mine, &Err("forbidden".into())),
        WEBHOOK_NAMES,
        UNKNOWN,
        &["cannot list"],
    );
}

#[test]
fn webhook_configurations_read_from_the_manifests() {
    let v: Value = json!({"kind": "MutatingWebhookConfiguration", "metadata": {"name": "m"}, "webhooks": [{"name": "a"}, {"name": "b"}]});
    assert_eq!(
        WebhookConfiguration::of(&v),
        Some(WebhookConfiguration {
            kind: "MutatingWebhookConfiguration".into(),
            name: "m".into(),
            webhooks: vec!["a".into(), "b".into()]
        })
    );
    assert_eq!(WebhookConfiguration::of(&json!({"kind": "Job"})), None);
}
