//! The serving certificate against each registered webhook's `caBundle`, verified as
//! kube-apiserver verifies it when it calls jobwarden (rustls's WebPKI verifier: chain to a CA
//! of the bundle, valid now, for the name the configuration calls), and how long it has left:
//! cert-manager renews 30 days ahead by default, so a certificate with less left is not being
//! renewed. The certificate is read from the Secret the webhook Deployment mounts (reaching the
//! Service from outside the cluster is rarely possible; the probes through the API server show
//! whether kube-apiserver gets through). Pure: the clock is a parameter.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::WebhookClientConfig;
use k8s_openapi::jiff::Timestamp;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use super::registration::Registered;
use crate::catalogue::SERVING_CERTIFICATE;
use crate::check::Check;

/// Less than this left: warn (cert-manager's default renewal point, a third of 90 days).
pub const WARN_WITHIN: Duration = Duration::from_secs(30 * 24 * 3600);

/// Where one webhook sends its calls, and what it trusts there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `ValidatingWebhookConfiguration jobwarden`.
    pub configuration: String,
    pub webhook: String,
    /// The decoded `caBundle` (PEM); `None` or empty: none.
    pub ca_bundle: Option<Vec<u8>>,
    /// The name the certificate must be valid for: `<service>.<namespace>.svc`, or the URL's
    /// host.
    pub server_name: Option<String>,
}

/// Every webhook of the registered configurations.
pub fn endpoints(registered: &Registered) -> Vec<Endpoint> {
    let mut out = Vec::new();
    let mut add =
        |kind: &str, name: &Option<String>, webhook: &str, client: &WebhookClientConfig| {
            out.push(Endpoint {
                configuration: format!("{kind} {}", name.as_deref().unwrap_or_default()),
                webhook: webhook.to_owned(),
                ca_bundle: client.ca_bundle.as_ref().map(|b| b.0.clone()),
                server_name: server_name(client),
            });
        };
    if let Some(m) = &registered.mutating {
        for w in m.webhooks.iter().flatten() {
            add(
                "MutatingWebhookConfiguration",
                &m.metadata.name,
                &w.name,
                &w.client_config,
            );
        }
    }
    if let Some(v) = &registered.validating {
        for w in v.webhooks.iter().flatten() {
            add(
                "ValidatingWebhookConfiguration",
                &v.metadata.name,
                &w.name,
                &w.client_config,
            );
        }
    }
    out
}

fn server_name(client: &WebhookClientConfig) -> Option<String> {
    if let Some(service) = &client.service {
        return Some(format!("{}.{}.svc", service.name, service.namespace));
    }
    let url = client.url.as_deref()?;
    let authority = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = authority.split(['/', '?']).next()?;
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    Some(host.to_owned())
}

/// The serving certificate, as far as it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Serving {
    /// The webhook Deployment names no Secret for `--tls-cert` (why).
    Unknown(String),
    /// The Secret the Deployment mounts does not exist: its pods cannot start.
    Missing {
        secret: String,
    },
    Unreadable {
        secret: String,
        error: String,
    },
    /// The Secret's `tls.crt` (or the key `--tls-cert` reads), PEM.
    Read {
        secret: String,
        pem: Vec<u8>,
    },
}

pub fn serving_certificate(endpoints: &[Endpoint], serving: &Serving, now: Timestamp) -> Check {
    if endpoints.is_empty() {
        return SERVING_CERTIFICATE.skipped("no webhook configuration is registered");
    }
    judged(endpoints, serving, now).unwrap_or_else(|wrong| wrong)
}

/// The certificate judged step by step; `Err`: the first step that fails, as the check.
fn judged(endpoints: &[Endpoint], serving: &Serving, now: Timestamp) -> Result<Check, Check> {
    every_bundle_filled(endpoints)?;
    let (secret, pem) = secret_read(serving)?;
    let served = served(secret, pem)?;
    trusted(endpoints, secret, &served, now)?;
    Ok(time_left(endpoints, secret, served.not_after, now))
}

/// Every webhook carries a `caBundle`: kube-apiserver verifies jobwarden with nothing else.
fn every_bundle_filled(endpoints: &[Endpoint]) -> Result<(), Check> {
    match endpoints
        .iter()
        .find(|e| e.ca_bundle.as_ref().is_none_or(|b| b.is_empty()))
    {
        Some(e) => Err(SERVING_CERTIFICATE.error(
            format!("webhook {} of {} has no caBundle: kube-apiserver cannot verify jobwarden", e.webhook, e.configuration),
            "with cert-manager, its CA injector fills it (annotation cert-manager.io/inject-ca-from): is cert-manager-cainjector running? Otherwise register with deploy/webhooks/register.sh, which puts the CA in",
        )),
        None => Ok(()),
    }
}

/// The Secret the webhook Deployment serves from, and the PEM it holds.
fn secret_read(serving: &Serving) -> Result<(&str, &[u8]), Check> {
    match serving {
        Serving::Read { secret, pem } => Ok((secret, pem)),
        Serving::Unknown(why) => Err(SERVING_CERTIFICATE.cannot_tell(
            format!("cannot tell which certificate jobwarden serves: {why}"),
            "the webhook probes above show whether kube-apiserver trusts it",
        )),
        Serving::Missing { secret } => Err(SERVING_CERTIFICATE.error(
            format!("Secret {secret}, which the webhook Deployment serves its certificate from, does not exist"),
            "with cert-manager, `kubectl describe certificate` says why it has not issued it; otherwise create it (a kubernetes.io/tls Secret for <service>.<namespace>.svc)",
        )),
        Serving::Unreadable { secret, error } => Err(SERVING_CERTIFICATE.cannot_tell(
            format!("cannot read Secret {secret}: {error}; the caBundle was not compared with the certificate"),
            "the webhook probes above show whether kube-apiserver trusts it; doctor needs get on that Secret to say more",
        )),
    }
}

/// The served chain: the leaf first, and when it stops being valid (seconds since the epoch).
struct Served {
    leaf: CertificateDer<'static>,
    intermediates: Vec<CertificateDer<'static>>,
    not_after: i64,
}

/// The chain in `pem`, its leaf parsed.
fn served(secret: &str, pem: &[u8]) -> Result<Served, Check> {
    let mut chain = CertificateDer::pem_slice_iter(pem).filter_map(Result::ok);
    let Some(leaf) = chain.next() else {
        return Err(SERVING_CERTIFICATE.error(
            format!("Secret {secret} holds no PEM certificate"),
            "with cert-manager, `kubectl describe certificate` says why it is not issued",
        ));
    };
    let intermediates: Vec<CertificateDer<'static>> = chain.collect();
    let Ok(not_after) =
        x509_parser::parse_x509_certificate(&leaf).map(|(_, c)| c.validity().not_after.timestamp())
    else {
        return Err(SERVING_CERTIFICATE.error(
            format!("Secret {secret} holds a certificate that does not parse"),
            "with cert-manager, delete the Secret and let it issue another",
        ));
    };
    Ok(Served {
        leaf,
        intermediates,
        not_after,
    })
}

/// Every webhook's `caBundle` verifies the certificate for the name it calls.
fn trusted(
    endpoints: &[Endpoint],
    secret: &str,
    served: &Served,
    now: Timestamp,
) -> Result<(), Check> {
    let unix_now = UnixTime::since_unix_epoch(Duration::from_secs(
        u64::try_from(now.as_second()).unwrap_or(0),
    ));
    for e in endpoints {
        let (Some(bundle), Some(name)) = (&e.ca_bundle, &e.server_name) else {
            continue;
        };
        if let Err(why) = verify(bundle, &served.leaf, &served.intermediates, name, unix_now) {
            return Err(SERVING_CERTIFICATE.error(
                format!("webhook {} of {}: the certificate in Secret {secret} {why}", e.webhook, e.configuration),
                "the caBundle must hold the CA that signed the serving certificate, and the certificate must name the Service (<service>.<namespace>.svc): with cert-manager, check the inject-ca-from annotation names this Certificate; otherwise register the configurations again with the Secret's CA",
            ));
        }
    }
    Ok(())
}

/// A trusted certificate, by the time it has left: a warning within [`WARN_WITHIN`].
fn time_left(endpoints: &[Endpoint], secret: &str, not_after: i64, now: Timestamp) -> Check {
    let left = not_after - now.as_second();
    let expires = Timestamp::from_second(not_after)
        .map(|t| t.strftime("%Y-%m-%d").to_string())
        .unwrap_or_else(|_| not_after.to_string());
    let days = left / (24 * 3600);
    let names = endpoints.iter().filter_map(|e| e.server_name.clone()).fold(
        Vec::<String>::new(),
        |mut v, n| {
            if !v.contains(&n) {
                v.push(n);
            }
            v
        },
    );
    if u64::try_from(left).unwrap_or(0) < WARN_WITHIN.as_secs() {
        return SERVING_CERTIFICATE.warning(
            format!("the certificate in Secret {secret} expires in {days} days ({expires})"),
            "cert-manager renews it before it expires (renewBefore): `kubectl describe certificate` says why it has not; without cert-manager, issue another and register its CA",
        );
    }
    SERVING_CERTIFICATE.ok(format!(
        "Secret {secret} holds a certificate for {} that every caBundle trusts, valid until {expires} ({days} days)",
        names.join(", ")
    ))
}

/// Verifies `leaf` for `name` against the CAs in `bundle`: `Err` says what is wrong, in a
/// phrase that follows "the certificate".
fn verify(
    bundle: &[u8],
    leaf: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'static>],
    name: &str,
    now: UnixTime,
) -> Result<(), String> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(bundle).filter_map(Result::ok) {
        // A CA the store cannot take is as good as absent: the chain will not verify.
        let _ = roots.add(ca);
    }
    if roots.is_empty() {
        return Err("cannot be checked: the caBundle holds no usable CA certificate".to_owned());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| format!("cannot be checked: {e}"))?;
    let server_name = ServerName::try_from(name.to_owned())
        .map_err(|_| format!("cannot be checked: {name:?} is not a server name"))?;
    verifier
        .verify_server_cert(leaf, intermediates, &server_name, &[], now)
        .map(|_| ())
        .map_err(|e| match e {
            rustls::Error::InvalidCertificate(c) => describe(&c, name),
            other => format!("does not verify: {other}"),
        })
}

fn describe(error: &rustls::CertificateError, name: &str) -> String {
    use rustls::CertificateError as E;
    match error {
        E::UnknownIssuer => {
            "is not signed by a CA in the caBundle (x509: certificate signed by unknown authority)"
                .to_owned()
        }
        // A CA of the issuer's name is in the bundle, but another key: an older CA of the same
        // name (a reinstall that made a new one), as Go's verifier also reports it.
        E::BadSignature => {
            "is not signed by a CA in the caBundle, only by one of the same name (x509: certificate signed by unknown authority)"
                .to_owned()
        }
        E::Expired | E::ExpiredContext { .. } => "has expired".to_owned(),
        E::NotValidYet | E::NotValidYetContext { .. } => "is not valid yet".to_owned(),
        E::NotValidForName | E::NotValidForNameContext { .. } => {
            format!("is not valid for {name}, the name kube-apiserver calls")
        }
        other => format!("does not verify: {other:?}"),
    }
}
