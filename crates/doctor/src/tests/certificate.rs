//! The serving certificate against the caBundles, with CAs and certificates made here.

use jobwarden_admission::Policy;
use jobwarden_admission::registration::{Install, configurations};
use k8s_openapi::ByteString;
use k8s_openapi::jiff::Timestamp;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, date_time_ymd};

use super::expect;
use super::{ERROR, OK, SKIPPED, UNKNOWN, WARNING};
use crate::catalogue::SERVING_CERTIFICATE;
use crate::check::Status;
use crate::installed::certificate::{Endpoint, Serving, endpoints, serving_certificate};
use crate::installed::registration::Registered;

const SERVICE: &str = "jobwarden.jobwarden-system.svc";

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.not_before = date_time_ymd(2020, 1, 1);
    params.not_after = date_time_ymd(2040, 1, 1);
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("a key")).expect("a CA")
}

/// A serving certificate for `name`, valid from 2026-01-01 to 2026-04-01, signed by `ca`.
fn leaf(ca: &CertifiedIssuer<'static, KeyPair>, name: &str) -> Vec<u8> {
    let mut params = CertificateParams::new(vec![name.to_owned()]).expect("params");
    params.not_before = date_time_ymd(2026, 1, 1);
    params.not_after = date_time_ymd(2026, 4, 1);
    let key = KeyPair::generate().expect("a key");
    params
        .signed_by(&key, ca)
        .expect("a certificate")
        .pem()
        .into_bytes()
}

fn at(date: &str) -> Timestamp {
    format!("{date}T00:00:00Z").parse().expect("a timestamp")
}

/// The default policy's configurations as deploy/ registers them, with `ca` in every caBundle.
fn registered(ca_pem: Option<&str>) -> Registered {
    let (mut m, mut v) = configurations(&Policy::default(), &Install::default());
    let bundle = ca_pem.map(|pem| ByteString(pem.as_bytes().to_vec()));
    for w in m.webhooks.iter_mut().flatten() {
        w.client_config.ca_bundle = bundle.clone();
    }
    for w in v.webhooks.iter_mut().flatten() {
        w.client_config.ca_bundle = bundle.clone();
    }
    Registered {
        mutating: Some(m),
        validating: Some(v),
    }
}

fn read(pem: Vec<u8>) -> Serving {
    Serving::Read {
        secret: "jobwarden-system/jobwarden-tls".into(),
        pem,
    }
}

#[test]
fn every_webhook_calls_the_services_name() {
    let found = endpoints(&registered(Some("x")));
    assert_eq!(found.len(), 3);
    assert!(
        found
            .iter()
            .all(|e| e.server_name.as_deref() == Some(SERVICE)),
        "{found:#?}"
    );
    assert_eq!(
        found[0].configuration,
        "MutatingWebhookConfiguration jobwarden"
    );
}

#[test]
fn a_url_is_verified_for_its_host() {
    let mut r = registered(Some("x"));
    for w in r
        .validating
        .iter_mut()
        .flat_map(|v| v.webhooks.iter_mut().flatten())
    {
        w.client_config.service = None;
        w.client_config.url = Some("https://127.0.0.1:8443/validate".into());
    }
    let found = endpoints(&r);
    assert!(
        found
            .iter()
            .any(|e| e.server_name.as_deref() == Some("127.0.0.1"))
    );
}

/// What the test calls it, the webhooks, the certificate read, the day, the status and what
/// the message says.
type Row<'e> = (
    &'static str,
    &'e [Endpoint],
    Serving,
    &'static str,
    Status,
    &'static [&'static str],
);

#[test]
fn the_certificate_against_the_bundle_and_the_clock() {
    let ours = ca("jobwarden-ca");
    let other = ca("someone-else");
    let cert = leaf(&ours, SERVICE);
    let trusted = endpoints(&registered(Some(&ours.pem())));
    let cases: [Row<'_>; 7] = [
        (
            "trusted, 59 days left",
            &trusted,
            read(cert.clone()),
            "2026-02-01",
            OK,
            &["valid until 2026-04-01 (59 days)", SERVICE],
        ),
        (
            "trusted, 17 days left",
            &trusted,
            read(cert.clone()),
            "2026-03-15",
            WARNING,
            &["expires in 17 days (2026-04-01)"],
        ),
        (
            "expired",
            &trusted,
            read(cert.clone()),
            "2026-05-01",
            ERROR,
            &["has expired"],
        ),
        (
            "another CA's bundle",
            &endpoints(&registered(Some(&other.pem()))),
            read(cert.clone()),
            "2026-02-01",
            ERROR,
            &[
                "webhook mutate.jobs.jobwarden.io of MutatingWebhookConfiguration jobwarden",
                "is not signed by a CA in the caBundle",
                "unknown authority",
            ],
        ),
        (
            "another CA of the same name",
            &endpoints(&registered(Some(&ca("jobwarden-ca").pem()))),
            read(cert.clone()),
            "2026-02-01",
            ERROR,
            &["is not signed by a CA in the caBundle, only by one of the same name"],
        ),
        (
            "another name",
            &trusted,
            read(leaf(&ours, "other.svc")),
            "2026-02-01",
            ERROR,
            &["is not valid for jobwarden.jobwarden-system.svc"],
        ),
        (
            "no caBundle",
            &endpoints(&registered(None)),
            read(cert.clone()),
            "2026-02-01",
            ERROR,
            &["has no caBundle"],
        ),
    ];
    for (what, found, serving, now, status, says) in cases {
        let check = serving_certificate(found, &serving, at(now));
        assert_eq!(check.status, status, "{what}: {}", check.message);
        expect(&check, SERVING_CERTIFICATE, status, says);
    }
}

#[test]
fn when_the_certificate_cannot_be_read() {
    let trusted = endpoints(&registered(Some("-----BEGIN CERTIFICATE-----\n")));
    let now = at("2026-02-01");
    expect(
        &serving_certificate(&[], &read(Vec::new()), now),
        SERVING_CERTIFICATE,
        SKIPPED,
        &["no webhook configuration"],
    );
    expect(
        &serving_certificate(
            &trusted,
            &Serving::Unreadable {
                secret: "ns/s".into(),
                error: "forbidden".into(),
            },
            now,
        ),
        SERVING_CERTIFICATE,
        UNKNOWN,
        &["cannot read Secret ns/s: forbidden"],
    );
    expect(
        &serving_certificate(
            &trusted,
            &Serving::Missing {
                secret: "ns/s".into(),
            },
            now,
        ),
        SERVING_CERTIFICATE,
        ERROR,
        &["Secret ns/s, which the webhook Deployment serves its certificate from, does not exist"],
    );
    expect(
        &serving_certificate(&trusted, &Serving::Unknown("no --tls-cert".into()), now),
        SERVING_CERTIFICATE,
        UNKNOWN,
        &["no --tls-cert"],
    );
    expect(
        &serving_certificate(&trusted, &read(b"not pem".to_vec()), now),
        SERVING_CERTIFICATE,
        ERROR,
        &["holds no PEM certificate"],
    );
    let cert = leaf(&ca("c"), SERVICE);
    expect(
        &serving_certificate(&trusted, &read(cert), now),
        SERVING_CERTIFICATE,
        ERROR,
        &["no usable CA certificate"],
    );
}
