//! The webhook probes through the API server, judged from kube-apiserver's recorded answers.

use std::collections::BTreeMap;

use jobwarden_admission::Policy;
use jobwarden_admission::registration::{Install, configurations};

use super::{ERROR, OK, SKIPPED, UNKNOWN};
use super::{expect, recorded, refused};
use crate::catalogue::{WEBHOOK_ADMITS, WEBHOOK_DENIES};
use crate::installed::webhook_probe::{Probed, admits, cause, denies, probe_namespace};

fn sent(reply: crate::answer::Reply) -> Probed {
    Probed::Sent {
        namespace: "default".into(),
        reply,
    }
}

#[test]
fn a_serving_jobwarden_refuses_in_its_own_words_and_admits_the_rest() {
    expect(
        &denies("jobwarden", &sent(Ok(recorded!("webhook-denied-v1.36.2")))),
        WEBHOOK_DENIES,
        OK,
        &["in its own words", "namespace default"],
    );
    expect(
        &admits(
            "jobwarden",
            &sent(Ok(recorded!("webhook-admitted-v1.36.2"))),
        ),
        WEBHOOK_ADMITS,
        OK,
        &["passed"],
    );
}

#[test]
fn nothing_serving_is_connection_refused_naming_the_configuration() {
    let answer = recorded!("webhook-connection-refused-v1.36.2");
    for (check, kind) in [
        (
            denies("jobwarden", &sent(Ok(answer.clone()))),
            WEBHOOK_DENIES,
        ),
        (
            admits("jobwarden", &sent(Ok(answer.clone()))),
            WEBHOOK_ADMITS,
        ),
    ] {
        expect(
            &check,
            kind,
            ERROR,
            &[
                "webhook validate.jobs.jobwarden.io of ValidatingWebhookConfiguration jobwarden is unreachable",
                "connection refused",
                "dial tcp 127.0.0.1:1",
            ],
        );
    }
}

#[test]
fn a_ca_bundle_of_another_ca_is_an_unknown_authority() {
    let check = denies(
        "jobwarden",
        &sent(Ok(recorded!("webhook-unknown-authority-v1.36.2"))),
    );
    expect(
        &check,
        WEBHOOK_DENIES,
        ERROR,
        &["x509: certificate signed by unknown authority"],
    );
    assert!(
        check
            .hint
            .as_deref()
            .is_some_and(|h| h.contains("caBundle"))
    );
}

#[test]
fn a_job_admitted_that_jobwarden_refuses_means_the_webhook_was_not_called() {
    let admitted = recorded!("webhook-admitted-v1.36.2");
    expect(
        &denies("jobwarden", &sent(Ok(admitted))),
        WEBHOOK_DENIES,
        ERROR,
        &["was not called"],
    );
}

#[test]
fn refusals_that_are_not_jobwardens() {
    let forbidden = refused(
        403,
        r#"jobs.batch is forbidden: User "dev" cannot create resource "jobs""#,
    );
    expect(
        &denies("jobwarden", &sent(Ok(forbidden))),
        WEBHOOK_DENIES,
        UNKNOWN,
        &["cannot tell", "create on jobs"],
    );
    let other = refused(
        400,
        r#"admission webhook "policy.example.com" denied the request: no"#,
    );
    expect(
        &denies("jobwarden", &sent(Ok(other.clone()))),
        WEBHOOK_DENIES,
        ERROR,
        &["not by jobwarden", "policy.example.com"],
    );
    let policy = refused(
        403,
        r#"admission webhook "validate.jobs.jobwarden.io" denied the request: jobs.batch "x" is forbidden: spec.managedBy: Forbidden"#,
    );
    expect(
        &admits("jobwarden", &sent(Ok(policy))),
        WEBHOOK_ADMITS,
        ERROR,
        &["refused a Job it should accept"],
    );
    expect(
        &denies("jobwarden", &sent(Err("EOF".into()))),
        WEBHOOK_DENIES,
        UNKNOWN,
        &["no answer", "EOF"],
    );
    expect(
        &denies("jobwarden", &Probed::NotRegistered),
        WEBHOOK_DENIES,
        SKIPPED,
        &["no ValidatingWebhookConfiguration jobwarden"],
    );
    expect(
        &admits("jobwarden", &Probed::NoNamespace),
        WEBHOOK_ADMITS,
        SKIPPED,
        &["no namespace to probe"],
    );
}

#[test]
fn causes_read_from_kube_apiservers_messages() {
    let call = |tail: &str| {
        format!(
            r#"Internal error occurred: failed calling webhook "validate.jobs.jobwarden.io": failed to call webhook: Post "https://jobwarden.jobwarden-system.svc:443/validate?timeout=5s": {tail}"#
        )
    };
    let bad_bundle = r#"Internal error occurred: failed calling webhook "validate.jobs.jobwarden.io": could not get REST client: unable to load root certificates: failed to parse certificate: P256 point not on curve"#;
    assert_eq!(
        cause(bad_bundle).map(|(c, _)| c),
        Some("the caBundle holds no usable CA certificate")
    );
    for (tail, expected) in [
        (
            r#"no endpoints available for service "jobwarden""#,
            "no endpoints available",
        ),
        (
            "dial tcp 10.96.0.12:443: connect: connection refused",
            "connection refused",
        ),
        (
            "tls: failed to verify certificate: x509: certificate signed by unknown authority",
            "x509: certificate signed by unknown authority",
        ),
        (
            "tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2027-01-01T00:00:00Z is after 2026-12-01T00:00:00Z",
            "x509: certificate has expired",
        ),
        (
            "tls: failed to verify certificate: x509: certificate is valid for other.svc, not jobwarden.jobwarden-system.svc",
            "x509: certificate is not valid for the Service's name",
        ),
        (
            r#"service "jobwarden" not found"#,
            "the Service is not found",
        ),
        ("context deadline exceeded", "timeout"),
        (
            "net/http: request canceled (Client.Timeout exceeded while awaiting headers)",
            "timeout",
        ),
        ("something new", "the call failed"),
    ] {
        assert_eq!(cause(&call(tail)).map(|(c, _)| c), Some(expected), "{tail}");
    }
    assert_eq!(
        cause("Job.batch \"x\" is invalid: spec.completions: Invalid value"),
        None
    );
}

#[test]
fn probes_go_where_the_validating_webhook_is_sent_them() {
    let (_, validating) = configurations(&Policy::default(), &Install::default());
    let ns = |name: &str, labels: &[(&str, &str)]| {
        let mut l: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect();
        l.insert("kubernetes.io/metadata.name".into(), name.into());
        (name.to_owned(), l)
    };
    let candidates = [
        ns("default", &[("jobwarden.io/admission", "disabled")]),
        ns("kube-system", &[]),
        ns("jobwarden-system", &[]),
        ns("team-a", &[]),
    ];
    assert_eq!(
        probe_namespace(&validating, &candidates).as_deref(),
        Some("team-a")
    );
    assert_eq!(probe_namespace(&validating, &candidates[..3]), None);
}
