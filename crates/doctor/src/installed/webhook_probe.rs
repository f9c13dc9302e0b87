//! The webhook answering through the API server, as `cmctl check api` proves cert-manager's:
//! a server-side dry run of a Job only jobwarden refuses (two pod failure policy rules of one
//! name, in jobwarden's annotation) must come back refused with jobwarden's own words, and one
//! it accepts must pass. A dry run goes through every admission webhook like a real create,
//! and jobwarden has no side effects. When kube-apiserver cannot call jobwarden, its message
//! says why; [`cause`] reads it. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use serde_json::{Value, json};

use jobwarden_rules::rule_names;
use jobwarden_rules::selector::matches_labels;

use crate::answer::{Reply, refusal};
use crate::catalogue::{WEBHOOK_ADMITS, WEBHOOK_DENIES};
use crate::check::{Check, Kind};
use crate::features::probe_metadata;

/// The webhook sent every Job carrying one of jobwarden's annotations, under every policy.
pub const VALIDATE_WEBHOOK: &str = "validate.jobs.jobwarden.io";

/// The rule name both probes use.
const PROBE_RULE: &str = "DoctorProbe";

fn probe(rule_names: &[&str]) -> Value {
    let rules: Vec<Value> = (0..rule_names.len())
        .map(|i| json!({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [i + 1]}}))
        .collect();
    let mut metadata = probe_metadata();
    metadata["annotations"] = json!({
        rule_names::ANNOTATION: serde_json::to_string(rule_names).unwrap_or_default(),
    });
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "suspend": true,
            "podFailurePolicy": {"rules": rules},
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "probe", "image": "registry.k8s.io/pause:3.10"}],
            }},
        },
    })
}

/// Two rules of one name: jobwarden refuses it (`Duplicate value`), kube-apiserver alone
/// never would.
pub fn denied_probe() -> Value {
    probe(&[PROBE_RULE, PROBE_RULE])
}

/// One named rule: jobwarden admits it.
pub fn admitted_probe() -> Value {
    probe(&[PROBE_RULE])
}

/// What jobwarden's refusal of [`denied_probe`] says, after kube-apiserver's prefix.
const DENIAL: &str = "spec.podFailurePolicy.rules[1].name: Duplicate value";

/// The registered validating webhook the probes go to, and the namespace to send them in: the
/// first of `namespaces` (name and labels, `default` first where it is one) that its
/// namespaceSelector selects.
pub fn probe_namespace(
    validating: &ValidatingWebhookConfiguration,
    namespaces: &[(String, BTreeMap<String, String>)],
) -> Option<String> {
    let webhook = validating
        .webhooks
        .iter()
        .flatten()
        .find(|w| w.name == VALIDATE_WEBHOOK)?;
    namespaces
        .iter()
        .find(|(_, labels)| {
            matches_labels(webhook.namespace_selector.as_ref(), labels).unwrap_or(false)
        })
        .map(|(name, _)| name.clone())
}

/// Why kube-apiserver could not call a webhook, from its message: a short cause and how to fix
/// it. `None` when the message is not a failed call.
pub fn cause(message: &str) -> Option<(&'static str, &'static str)> {
    // The first whose words appear wins: the x509 details before x509 in general. kube-apiserver
    // puts `?timeout=5s` in every URL it names, so a timeout is told by Go's own words.
    const CAUSES: [(&[&str], &str, &str); 10] = [
        (
            &["no endpoints available"],
            "no endpoints available",
            "no replica is Ready behind the Service: see the Deployment check",
        ),
        (
            &["connection refused"],
            "connection refused",
            "nothing listens where the configuration points: are the replicas Ready, and is the Service's targetPort their https port (8443)?",
        ),
        (
            &["certificate signed by unknown authority"],
            "x509: certificate signed by unknown authority",
            "the configuration's caBundle is not the CA that signed the serving certificate: see the serving certificate check (with cert-manager, is its CA injector running?)",
        ),
        (
            &["certificate has expired"],
            "x509: certificate has expired",
            "the serving certificate has expired: see the serving certificate check",
        ),
        (
            &["x509: certificate is valid for"],
            "x509: certificate is not valid for the Service's name",
            "the serving certificate must name <service>.<namespace>.svc: see the serving certificate check",
        ),
        (
            &["unable to load root certificates"],
            "the caBundle holds no usable CA certificate",
            "put the PEM of the CA that signed the serving certificate in every webhook's caBundle (base64 of the PEM): see the serving certificate check",
        ),
        (
            &["x509:"],
            "x509: the certificate is not trusted",
            "see the serving certificate check",
        ),
        (
            &[
                "deadline exceeded",
                "Client.Timeout exceeded",
                "i/o timeout",
            ],
            "timeout",
            "jobwarden did not answer within the webhook's timeoutSeconds: is a replica overloaded, or a network policy dropping kube-apiserver's traffic?",
        ),
        (
            &["no such host"],
            "the Service's name does not resolve",
            "kube-apiserver cannot resolve the Service: check the cluster's DNS for the control plane",
        ),
        (
            &["not found"],
            "the Service is not found",
            "the configuration's clientConfig.service names a Service that does not exist: apply the install again",
        ),
    ];
    if !message.contains("failed calling webhook") {
        return None;
    }
    Some(
        CAUSES
            .iter()
            .find(|(words, _, _)| words.iter().any(|w| message.contains(w)))
            .map_or(
                (
                    "the call failed",
                    "read kube-apiserver's message: it names what failed",
                ),
                |(_, cause, hint)| (*cause, *hint),
            ),
    )
}

/// Whether a probe was sent, and what came back.
#[derive(Debug, Clone, PartialEq)]
pub enum Probed {
    /// No ValidatingWebhookConfiguration of jobwarden's is registered.
    NotRegistered,
    /// Its validating webhook selects no namespace doctor can see.
    NoNamespace,
    Sent {
        namespace: String,
        reply: Reply,
    },
}

/// `configuration`: the ValidatingWebhookConfiguration's name.
pub fn denies(configuration: &str, probed: &Probed) -> Check {
    let (namespace, reply) = match probed {
        Probed::Sent { namespace, reply } => (namespace.as_str(), reply),
        other => return skipped(WEBHOOK_DENIES, configuration, other),
    };
    let answer = match reply {
        Ok(a) => a,
        Err(e) => return no_answer(WEBHOOK_DENIES, namespace, e),
    };
    let message = answer.message();
    let ours = format!("admission webhook \"{VALIDATE_WEBHOOK}\" denied the request");
    if !answer.succeeded() && message.contains(&ours) && message.contains(DENIAL) {
        return WEBHOOK_DENIES.ok(format!(
            "jobwarden refused a Job it alone refuses (a dry run in namespace {namespace}), in its own words"
        ));
    }
    if answer.succeeded() {
        return WEBHOOK_DENIES.error(
            format!("kube-apiserver admitted a Job jobwarden refuses (a dry run in namespace {namespace}): webhook {VALIDATE_WEBHOOK} was not called"),
            format!("is {VALIDATE_WEBHOOK} registered in ValidatingWebhookConfiguration {configuration} (see webhook registration), and namespace {namespace} not labelled jobwarden.io/admission=disabled?"),
        );
    }
    unanswered(WEBHOOK_DENIES, configuration, namespace, answer)
}

pub fn admits(configuration: &str, probed: &Probed) -> Check {
    let (namespace, reply) = match probed {
        Probed::Sent { namespace, reply } => (namespace.as_str(), reply),
        other => return skipped(WEBHOOK_ADMITS, configuration, other),
    };
    match reply {
        Ok(a) if a.succeeded() => WEBHOOK_ADMITS.ok(format!(
            "a Job jobwarden accepts passed (a dry run in namespace {namespace})"
        )),
        Ok(a) if a.message().contains("denied the request") && a.message().contains("jobwarden.io") => {
            WEBHOOK_ADMITS.error(
                format!("jobwarden refused a Job it should accept (a dry run in namespace {namespace}): {}", a.message()),
                "the policy refuses it (allowedManagedBy, suspendOnCreate…)? `jobwarden check` with the same policy tells why",
            )
        }
        Ok(a) => unanswered(WEBHOOK_ADMITS, configuration, namespace, a),
        Err(e) => no_answer(WEBHOOK_ADMITS, namespace, e),
    }
}

fn skipped(kind: Kind, configuration: &str, probed: &Probed) -> Check {
    if *probed == Probed::NoNamespace {
        kind.skipped(format!(
            "no namespace to probe: {VALIDATE_WEBHOOK} of {configuration} selects none doctor can see"
        ))
    } else {
        kind.skipped(format!(
            "no ValidatingWebhookConfiguration {configuration} to probe"
        ))
    }
}

fn no_answer(kind: Kind, namespace: &str, error: &str) -> Check {
    kind.cannot_tell(
        format!("the dry run in namespace {namespace} got no answer: {error}"),
        "is the API server healthy?",
    )
}

/// A refusal that is not jobwarden's verdict: the call failed, or the caller may not create
/// Jobs there, or something else refused.
fn unanswered(
    kind: Kind,
    configuration: &str,
    namespace: &str,
    answer: &crate::answer::Answer,
) -> Check {
    let message = answer.message();
    if let Some((cause, hint)) = cause(message) {
        let webhook = called_webhook(message).unwrap_or(VALIDATE_WEBHOOK);
        let kind_of = if webhook.starts_with("mutate") {
            "MutatingWebhookConfiguration"
        } else {
            "ValidatingWebhookConfiguration"
        };
        return kind.error(
            format!("webhook {webhook} of {kind_of} {configuration} is unreachable through the API server: {cause} ({message})"),
            hint,
        );
    }
    if answer.code == 403 && !message.contains("admission webhook") {
        return kind.cannot_tell(
            format!("cannot tell: a server-side dry run needs create on jobs in namespace {namespace}: {}", refusal(answer)),
            "run doctor as someone who may create Jobs there (nothing is stored: it is a dry run)",
        );
    }
    kind.error(
        format!(
            "the dry run in namespace {namespace} was refused, not by jobwarden: {}",
            refusal(answer)
        ),
        "another admission webhook or policy refuses the probe: read the message",
    )
}

/// The webhook a `failed calling webhook "NAME"` message names.
fn called_webhook(message: &str) -> Option<&str> {
    let rest = message.split("failed calling webhook \"").nth(1)?;
    rest.split('"').next()
}
