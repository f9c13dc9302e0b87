//! Which Job API features the API server really serves. A feature gate that is off makes
//! kube-apiserver drop its field from a write without a word, so the only sure test is to
//! write: a server-side dry run (`dryRun=All`: admitted and validated, never stored) of a Job
//! using every field jobwarden builds on, and of a webhook configuration with
//! `matchConditions`, then see which fields came back. Pure: the probes are built here and the
//! answers judged here; the shell only sends them.

use serde_json::{Value, json};

use jobwarden_rules::well_known::JOBWARDEN_CONTROLLER_NAME;

use crate::answer::{Answer, Reply, refusal};
use crate::catalogue::{
    BACKOFF_LIMIT_PER_INDEX, MANAGED_BY, MATCH_CONDITIONS, POD_FAILURE_POLICY,
    POD_REPLACEMENT_POLICY, SUCCESS_POLICY,
};
use crate::check::{Check, Kind, Status};

/// What every probe doctor sends is named after, so an audit log shows whose it was.
pub const PROBE_PREFIX: &str = "jobwarden-doctor-";

/// The metadata of every probe Job: a generated name, so a dry run never meets a stored Job.
pub fn probe_metadata() -> Value {
    json!({
        "generateName": PROBE_PREFIX,
        "labels": {"app.kubernetes.io/name": "jobwarden-doctor"},
    })
}

/// The Job of the feature probe: Indexed, suspended, delegated to jobwarden, with a success
/// policy, a per-index back-off limit, a pod replacement policy and a pod failure policy rule
/// on a pod condition. Valid on v1.36 with every gate on, so what is missing from the answer
/// was dropped, not refused.
pub fn probe_job() -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": probe_metadata(),
        "spec": {
            "managedBy": JOBWARDEN_CONTROLLER_NAME,
            "suspend": true,
            "completionMode": "Indexed",
            "completions": 2,
            "parallelism": 1,
            "backoffLimitPerIndex": 1,
            "podReplacementPolicy": "Failed",
            "successPolicy": {"rules": [{"succeededIndexes": "0"}]},
            "podFailurePolicy": {"rules": [{
                "action": "Ignore",
                "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
            }]},
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "probe", "image": "registry.k8s.io/pause:3.10"}],
            }},
        },
    })
}

/// The ValidatingWebhookConfiguration of the `matchConditions` probe: one webhook that would
/// never be called (a dry run registers nothing).
pub fn probe_webhook_configuration() -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"generateName": PROBE_PREFIX},
        "webhooks": [{
            "name": "probe.doctor.jobwarden.io",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Ignore",
            "clientConfig": {"service": {
                "namespace": "jobwarden-doctor", "name": "jobwarden-doctor", "path": "/validate",
            }},
            "rules": [{
                "apiGroups": ["batch"], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["jobs"],
            }],
            "matchConditions": [{"name": "never", "expression": "false"}],
        }],
    })
}

/// One field of the probe, and what its absence means for jobwarden.
struct Feature {
    kind: Kind,
    /// The field, as kubectl writes it.
    field: &'static str,
    /// Where the field is in the answer.
    pointer: &'static str,
    /// How bad its absence is.
    missing: Status,
    /// `kube-apiserver drops …: <meaning>`.
    meaning: &'static str,
    hint: &'static str,
}

const JOB_FEATURES: [Feature; 5] = [
    Feature {
        kind: MANAGED_BY,
        field: "spec.managedBy",
        pointer: "/spec/managedBy",
        missing: Status::Error,
        meaning: "kube-apiserver drops spec.managedBy (feature gate JobManagedBy is off): a Job delegated to jobwarden is run by the built-in Job controller, and jobwarden's controller never sees it",
        hint: "turn JobManagedBy on in kube-apiserver and kube-controller-manager alike (on by default from v1.32, GA in v1.35)",
    },
    Feature {
        kind: SUCCESS_POLICY,
        field: "spec.successPolicy",
        pointer: "/spec/successPolicy/rules/0",
        missing: Status::Warning,
        meaning: "kube-apiserver drops spec.successPolicy (feature gate JobSuccessPolicy is off): KEP-3998's success rules never reach jobwarden, and no controller honours them",
        hint: "turn JobSuccessPolicy on (on by default from v1.31, GA in v1.33)",
    },
    Feature {
        kind: POD_REPLACEMENT_POLICY,
        field: "spec.podReplacementPolicy",
        pointer: "/spec/podReplacementPolicy",
        missing: Status::Warning,
        meaning: "kube-apiserver drops spec.podReplacementPolicy (feature gate JobPodReplacementPolicy is off): replacement pods start while the old ones still terminate, whatever the Job asks",
        hint: "turn JobPodReplacementPolicy on (on by default from v1.29, GA in v1.34)",
    },
    Feature {
        kind: BACKOFF_LIMIT_PER_INDEX,
        field: "spec.backoffLimitPerIndex",
        pointer: "/spec/backoffLimitPerIndex",
        missing: Status::Warning,
        meaning: "kube-apiserver drops spec.backoffLimitPerIndex (feature gate JobBackoffLimitPerIndex is off): no per-index back-off, and FailIndex rules cannot be written",
        hint: "turn JobBackoffLimitPerIndex on (on by default from v1.29, GA in v1.33)",
    },
    Feature {
        kind: POD_FAILURE_POLICY,
        field: "spec.podFailurePolicy.rules[].onPodConditions",
        pointer: "/spec/podFailurePolicy/rules/0/onPodConditions/0",
        missing: Status::Warning,
        meaning: "kube-apiserver drops spec.podFailurePolicy (feature gate JobPodFailurePolicy is off): there are no pod failure policy rules for jobwarden to name (KEP-4443) or its controller to match",
        hint: "turn JobPodFailurePolicy on (on by default from v1.26, GA in v1.31)",
    },
];

/// The five Job features, from the answer to [`probe_job`] sent in `namespace`.
pub fn job_features(namespace: &str, reply: &Reply) -> Vec<Check> {
    match reply {
        Ok(answer) if answer.succeeded() => JOB_FEATURES
            .iter()
            .map(|f| judge(f.kind, present(answer, f.pointer), f))
            .collect(),
        other => cannot_tell(
            JOB_FEATURES.iter().map(|f| f.kind),
            &why_not(other, "Jobs", namespace),
        ),
    }
}

/// `matchConditions`, from the answer to [`probe_webhook_configuration`].
pub fn match_conditions(reply: &Reply) -> Check {
    const FEATURE: Feature = Feature {
        kind: MATCH_CONDITIONS,
        field: "webhooks[].matchConditions",
        pointer: "/webhooks/0/matchConditions/0",
        missing: Status::Error,
        meaning: "kube-apiserver drops matchConditions from webhook configurations (feature gate AdmissionWebhookMatchConditions is off): jobwarden's webhooks, which fail closed, would be sent every Job write, and an outage would refuse them all",
        hint: "upgrade to v1.30 or later, where matchConditions are GA (on by default from v1.28)",
    };
    match reply {
        Ok(answer) if answer.succeeded() => {
            judge(MATCH_CONDITIONS, present(answer, FEATURE.pointer), &FEATURE)
        }
        other => cannot_tell(
            [MATCH_CONDITIONS],
            &why_not(other, "validatingwebhookconfigurations", ""),
        )
        .remove(0),
    }
}

fn present(answer: &Answer, pointer: &str) -> bool {
    answer.body.pointer(pointer).is_some_and(|v| !v.is_null())
}

fn judge(kind: Kind, present: bool, feature: &Feature) -> Check {
    if present {
        return kind.ok(format!("a server-side dry run keeps {}", feature.field));
    }
    let message = feature.meaning.to_owned();
    match feature.missing {
        Status::Error => kind.error(message, feature.hint),
        _ => kind.warning(message, feature.hint),
    }
}

/// Why a probe told nothing: the caller may not create the probe, or the server refused it.
fn why_not(reply: &Reply, resource: &str, namespace: &str) -> String {
    let place = if namespace.is_empty() {
        String::new()
    } else {
        format!(" in namespace {namespace}")
    };
    match reply {
        Ok(answer) if answer.code == 403 => format!(
            "cannot tell: a server-side dry run needs create on {resource}{place}: {}",
            refusal(answer)
        ),
        Ok(answer) => format!(
            "cannot tell: the API server refused the probe{place}: {}",
            refusal(answer)
        ),
        Err(e) => format!("cannot tell: the probe{place} got no answer: {e}"),
    }
}

/// The first check warns with the reason; the rest, which share it, point to the first.
fn cannot_tell(kinds: impl IntoIterator<Item = Kind>, why: &str) -> Vec<Check> {
    let mut kinds = kinds.into_iter();
    let Some(first) = kinds.next() else {
        return Vec::new();
    };
    let mut checks = vec![first.cannot_tell(
        why,
        "run doctor as someone who may create them (nothing is stored: it is a dry run), or read the feature gates from the cluster's configuration",
    )];
    checks.extend(kinds.map(|k| k.skipped(format!("cannot tell (see \"{}\")", first.name))));
    checks
}
