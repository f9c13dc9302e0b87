//! `jobwarden doctor` on a real kube-apiserver v1.36, one test per state a user meets: before
//! anything is installed (`--pre` as an admin and as someone without rights; the installed
//! checks naming what is missing), the webhook registered with nothing serving, serving with a
//! `caBundle` of another CA, a ServiceAccount short of a permission, a Lease nobody renews, and
//! everything healthy. deploy/ is installed as rendered, under a name of each test's own; the
//! test plays cert-manager, the Deployment controller and the kubelet, and runs `serve` as the
//! built binary under the install's ServiceAccount. Their webhook configurations are
//! cluster-wide, so the tests take turns.
//!
//! Skipped with one line without the control-plane binaries (docs/development.md).

use crate::support;

mod env;

use std::sync::Mutex;

use env::{Install, REPLICA, check, doctor, doctor_output, problems, render};
use serde_json::{Value, json};

/// One test at a time: each registers webhook configurations every namespace is sent.
static TAKE_TURNS: Mutex<()> = Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    TAKE_TURNS.lock().unwrap_or_else(|e| e.into_inner())
}

fn status<'c>(checks: &'c [Value], name: &str) -> &'c str {
    check(checks, name)["status"].as_str().unwrap_or_default()
}

fn message(checks: &[Value], name: &str) -> String {
    check(checks, name)["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The rendered install `--pre` is given: deploy/ and its webhook configurations.
fn rendered_install(plane: &jobwarden_envtest::ControlPlane) -> String {
    let mut objects = render(plane, "deploy");
    objects.extend(render(plane, "deploy/webhooks"));
    json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string()
}

/// cert-manager's two kinds deploy/ creates, served by stand-in CRDs.
fn cert_manager_stand_ins() -> Vec<Value> {
    vec![
        jobwarden_envtest::stand_in_crd("cert-manager.io", "Issuer", "issuers"),
        jobwarden_envtest::stand_in_crd("cert-manager.io", "Certificate", "certificates"),
    ]
}

/// `(name, status)` of every check, for comparing two runs.
fn statuses(checks: &[Value]) -> Vec<(String, String)> {
    checks
        .iter()
        .map(|c| (c["name"].to_string(), c["status"].to_string()))
        .collect()
}

/// What `--pre` says of the install it checks without `--install`: the one jobwarden ships.
const SHIPPED: &str = concat!(
    "the install jobwarden ",
    env!("CARGO_PKG_VERSION"),
    " ships, built in"
);

#[test]
fn before_installing_pre_passes_for_an_admin_but_for_cert_manager() {
    let Some(plane) = env::plane() else { return };
    let _turn = turn();
    let install = rendered_install(plane);
    let (code, checks) = doctor(
        plane.kubeconfig(),
        &["--pre", "--install", "-"],
        Some(&install),
    );
    assert_eq!(code, 1, "cert-manager is not installed");
    assert_eq!(status(&checks, "cert-manager served"), "error");
    assert!(message(&checks, "cert-manager served").contains("Certificate (cert-manager.io/v1)"));
    for name in [
        "install manifests",
        "permission to install",
        "permission to grant the install's RBAC",
        "install namespace",
        "webhook names free",
        "managedBy served",
        "matchConditions served",
    ] {
        assert_eq!(
            status(&checks, name),
            "ok",
            "{name}: {}",
            message(&checks, name)
        );
    }
    // jobwarden-system does not exist yet: its pod is tried once it does.
    assert_eq!(status(&checks, "Pod Security admits jobwarden"), "skipped");
    assert_eq!(
        problems(&checks),
        [format!(
            "\"cert-manager served\": {:?}",
            message(&checks, "cert-manager served")
        )]
    );

    // Without --install, the install jobwarden ships: the same objects, the same verdicts.
    let (shipped_code, shipped) = doctor(plane.kubeconfig(), &["--pre"], None);
    assert_eq!(shipped_code, 1, "cert-manager is not installed");
    assert_eq!(statuses(&shipped), statuses(&checks));
    assert_eq!(problems(&shipped), problems(&checks));
    assert!(
        message(&shipped, "install manifests").starts_with(SHIPPED),
        "{}",
        message(&shipped, "install manifests")
    );
    assert!(message(&checks, "install manifests").starts_with("stdin: "));

    // cert-manager's kinds served (stand-in CRDs: names and scope only), and the namespace
    // made as deploy/ makes it: every check passes, the pod tried under restricted.
    env::apply(plane, &cert_manager_stand_ins());
    let namespace = render(plane, "deploy")
        .into_iter()
        .find(|o| o["kind"] == "Namespace")
        .expect("deploy/ makes its namespace");
    env::apply(plane, &[namespace]);
    for args in [&["--pre", "--install", "-"][..], &["--pre"]] {
        let admitted = || {
            let (code, checks) = doctor(plane.kubeconfig(), args, Some(&install));
            if code == 0 {
                Ok(checks)
            } else {
                Err(format!("{:?}", problems(&checks)))
            }
        };
        // The namespace's default ServiceAccount comes from kube-controller-manager, moments
        // later.
        let checks = support::eventually_blocking("doctor --pre to pass", admitted);
        assert!(
            problems(&checks).is_empty(),
            "{args:?}: {:?}",
            problems(&checks)
        );
        assert!(
            message(&checks, "Pod Security admits jobwarden")
                .contains("(pod-security.kubernetes.io/enforce: restricted) admits the pods of Deployment jobwarden"),
            "{checks:#?}"
        );
    }
    let text = doctor_output(plane.kubeconfig(), &["--pre"], None);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.ends_with("\n✔ healthy\n"), "{text}");
}

/// The new user: the command the README shows, run by someone who may do nothing in
/// the cluster, fails naming what they may not create, and says which checks it could not
/// make rather than calling the cluster healthy.
#[test]
fn before_installing_pre_without_an_install_fails_a_caller_without_rights() {
    let Some(plane) = env::plane() else { return };
    let _turn = turn();
    let dir = env::folder(plane, "pre-nobody");
    env::kubectl(plane, &["create", "namespace", "doctor-nobody"], None);
    let kubeconfig = env::service_account_kubeconfig(plane, &dir, "doctor-nobody", "nobody");
    let (code, checks) = doctor(&kubeconfig, &["--pre"], None);
    assert_eq!(code, 1);
    assert!(message(&checks, "install manifests").starts_with(SHIPPED));
    assert_eq!(status(&checks, "permission to install"), "error");
    let refused = message(&checks, "permission to install");
    assert!(
        refused.starts_with("you may not create namespaces cluster-wide, "),
        "{refused}"
    );
    assert_eq!(
        status(&checks, "permission to grant the install's RBAC"),
        "error"
    );
    // What it may not even read or try is not known, and said so.
    for name in [
        "managedBy served",
        "matchConditions served",
        "install namespace",
        "webhook names free",
    ] {
        assert_eq!(
            status(&checks, name),
            "unknown",
            "{name}: {}",
            message(&checks, name)
        );
        assert!(
            message(&checks, name).contains("cannot"),
            "{name}: {}",
            message(&checks, name)
        );
    }

    let out = doctor_output(&kubeconfig, &["--pre"], None);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    let last = text.lines().last().unwrap_or_default();
    assert!(last.starts_with("× "), "{text}");
    assert!(last.contains(" could not be made"), "{text}");
    assert!(!text.contains("healthy"), "{text}");
    assert!(
        text.contains("× permission to install: you may not create namespaces cluster-wide, "),
        "{text}"
    );
}

#[test]
fn before_installing_pre_names_what_a_caller_without_rights_may_not_do() {
    let Some(plane) = env::plane() else { return };
    let _turn = turn();
    let dir = env::folder(plane, "pre-viewer");
    env::kubectl(plane, &["create", "namespace", "doctor-viewer"], None);
    let kubeconfig = env::service_account_kubeconfig(plane, &dir, "doctor-viewer", "viewer");
    env::kubectl(
        plane,
        &[
            "create",
            "clusterrolebinding",
            "doctor-viewer",
            "--clusterrole=view",
            "--serviceaccount=doctor-viewer:viewer",
        ],
        None,
    );
    let (code, checks) = doctor(
        &kubeconfig,
        &["--pre", "--install", "-"],
        Some(&rendered_install(plane)),
    );
    assert_eq!(code, 1);
    assert_eq!(status(&checks, "permission to install"), "error");
    let refused = message(&checks, "permission to install");
    assert!(
        refused.starts_with("you may not create namespaces cluster-wide, "),
        "{refused}"
    );
    assert!(
        refused.contains(
            "create mutatingwebhookconfigurations (admissionregistration.k8s.io) cluster-wide"
        ),
        "{refused}"
    );
    assert_eq!(
        status(&checks, "permission to grant the install's RBAC"),
        "error"
    );
    assert_eq!(status(&checks, "caller identity"), "ok");
    assert!(
        message(&checks, "caller identity").contains("system:serviceaccount:doctor-viewer:viewer")
    );
}

#[test]
fn before_installing_the_installed_checks_name_what_is_missing() {
    let Some(plane) = env::plane() else { return };
    let _turn = turn();
    let (code, checks) = doctor(plane.kubeconfig(), &["-n", "doctor-nothing-here"], None);
    assert_eq!(code, 1);
    assert_eq!(status(&checks, "Deployment ready"), "error");
    assert!(message(&checks, "Deployment ready").contains("no Deployment labelled app.kubernetes.io/part-of=jobwarden in namespace doctor-nothing-here"));
    assert_eq!(status(&checks, "webhook registration"), "error");
    assert!(
        message(&checks, "webhook registration")
            .contains("no webhook configuration named jobwarden is registered")
    );
    assert_eq!(
        status(&checks, "webhook denies through the API server"),
        "skipped"
    );
}

#[test]
fn registered_with_nothing_serving_the_webhook_is_unreachable() {
    let Some(plane) = env::plane() else { return };
    let _turn = turn();
    let install = Install::new(plane, "doctor-unserved");
    install.apply();
    let nobody = jobwarden_envtest::free_port().expect("a free port");
    let ca = jobwarden_envtest::serving_certificate(&install.dir).ca_pem;
    install.register(nobody, &ca);
    let (code, checks) = doctor(install.kubeconfig(), &["-n", &install.name], None);
    assert_eq!(code, 1);
    for name in [
        "webhook denies through the API server",
        "webhook admits through the API server",
    ] {
        assert_eq!(status(&checks, name), "error", "{name}");
        let said = message(&checks, name);
        assert!(
            said.contains("webhook validate.jobs.jobwarden.io of ValidatingWebhookConfiguration doctor-unserved is unreachable through the API server: connection refused"),
            "{said}"
        );
    }
    assert_eq!(status(&checks, "webhook registration"), "ok", "{checks:#?}");
}

#[test]
fn a_ca_bundle_of_another_ca_fails_naming_the_certificate() {
    let Some(plane) = env::plane() else { return };
    let _turn = turn();
    let install = Install::new(plane, "doctor-other-ca");
    install.apply();
    let served = install.serve(&["--no-controller"]);
    install.play_cert_manager_and_kubelet(&served);
    let other = env::folder(plane, "doctor-other-ca/other");
    let other_ca = jobwarden_envtest::serving_certificate(&other).ca_pem;
    install.register(served.port, &other_ca);
    let (code, checks) = doctor(install.kubeconfig(), &["-n", &install.name], None);
    assert_eq!(code, 1);
    assert_eq!(
        status(&checks, "webhook denies through the API server"),
        "error"
    );
    assert!(
        message(&checks, "webhook denies through the API server")
            .contains("x509: certificate signed by unknown authority")
    );
    assert_eq!(status(&checks, "serving certificate"), "error");
    let said = message(&checks, "serving certificate");
    // Both test CAs have an empty name, as two cert-manager CAs of one name would: Go and
    // rustls both find the bundle's CA by name, and its key does not match.
    assert!(said.contains("the certificate in Secret doctor-other-ca/jobwarden-tls is not signed by a CA in the caBundle"), "{said}");
    assert!(
        said.contains("x509: certificate signed by unknown authority"),
        "{said}"
    );
}

#[test]
fn a_service_account_missing_a_permission_fails_naming_verb_and_resource() {
    let Some(plane) = env::plane() else { return };
    let _turn = turn();
    let mut install = Install::new(plane, "doctor-short");
    install.without_verb("jobwarden-controller", "pods", "create");
    install.apply();
    let (code, checks) = doctor(install.kubeconfig(), &["-n", &install.name], None);
    assert_eq!(code, 1);
    assert_eq!(status(&checks, "ServiceAccount permissions"), "error");
    assert_eq!(
        message(&checks, "ServiceAccount permissions"),
        "system:serviceaccount:doctor-short:jobwarden may not create pods cluster-wide"
    );
}

#[test]
fn a_lease_not_renewed_for_a_minute_fails() {
    let Some(plane) = env::plane() else { return };
    let _turn = turn();
    let install = Install::new(plane, "doctor-stale");
    install.apply();
    let served = install.serve(&["--no-controller"]);
    install.play_cert_manager_and_kubelet(&served);
    install.register(served.port, &served.ca_pem);
    // Written two minutes in the past rather than waited for.
    let renewed =
        k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(120);
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "jobwarden-job-controller", "namespace": install.name},
        "spec": {"holderIdentity": REPLICA, "leaseDurationSeconds": 15,
                 "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()},
    });
    env::apply(plane, &[lease]);
    let (code, checks) = doctor(install.kubeconfig(), &["-n", &install.name], None);
    assert_eq!(code, 1);
    assert_eq!(status(&checks, "controller Lease"), "error");
    let said = message(&checks, "controller Lease");
    assert!(
        said.contains(&format!("held by {REPLICA}, renewed 2m")),
        "{said}"
    );
    assert!(said.contains("no replica is leading"), "{said}");
    assert_eq!(problems(&checks).len(), 1, "{:?}", problems(&checks));
}

#[test]
fn everything_healthy_every_check_passes() {
    let Some(plane) = env::plane() else { return };
    let _turn = turn();
    let install = Install::new(plane, "doctor-healthy");
    install.apply();
    let served = install.serve(&[]);
    install.play_cert_manager_and_kubelet(&served);
    install.register(served.port, &served.ca_pem);
    // The replica takes the Lease within seconds of starting: --wait until it has.
    let (code, checks) = doctor(
        install.kubeconfig(),
        &["-n", &install.name, "--wait", "90s"],
        None,
    );
    assert_eq!(code, 0, "{:?}", problems(&checks));
    assert!(problems(&checks).is_empty(), "{:?}", problems(&checks));
    assert!(checks.iter().all(|c| c["status"] == "ok"), "{checks:#?}");
    assert!(message(&checks, "controller Lease").contains(&format!("held by {REPLICA}")));
    // The replica is this very binary: the revision its Lease says is doctor's own.
    let ours = env!("JOBWARDEN_REVISION");
    let short = ours.get(..12).unwrap_or(ours);
    assert_eq!(
        message(&checks, "running revision"),
        format!("binary revision {short}, running image revision {short}")
    );
    assert!(
        message(&checks, "Lease priority level")
            .contains("FlowSchema doctor-healthy-leader-election, priority level leader-election")
    );
    assert!(message(&checks, "webhook denies through the API server").contains("in its own words"));

    // The same as text, as a person reads it.
    let text = doctor_output(install.kubeconfig(), &["-n", &install.name], None);
    let text = String::from_utf8_lossy(&text.stdout);
    eprintln!("{text}");
    assert!(text.ends_with("✔ healthy\n"), "{text}");
}
