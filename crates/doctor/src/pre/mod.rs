//! `doctor --pre`: may this caller install jobwarden here. Permission to create what the chosen
//! install (`--install`, else the one jobwarden ships: [`shipped`]) creates and to grant what its
//! roles grant, cert-manager served where the install uses it, the namespace there or
//! creatable, its Pod Security level admitting jobwarden's pod, and jobwarden's webhook names
//! free. Pure: every answer is a parameter.

pub mod install;
pub mod shipped;

use std::collections::BTreeMap;

use crate::access::{Access, listed};
use crate::answer::{Reply, refusal};
use crate::catalogue::{
    CERT_MANAGER, INSTALL_MANIFESTS, MAY_GRANT, MAY_INSTALL, NAMESPACE, POD_SECURITY, WEBHOOK_NAMES,
};
use crate::check::Check;
use install::{Install, TypeRef, WebhookConfiguration};

/// Everything `--pre` read.
#[derive(Debug, Clone)]
pub struct PreObserved {
    pub access: Vec<(Access, Allowed)>,
    pub grants: GrantAnswers,
    pub cert_manager: Result<Vec<String>, String>,
    pub namespace: NamespaceState,
    pub may_create_namespace: Allowed,
    pub pod_security: Vec<(String, Reply)>,
    pub registered: Result<Vec<WebhookConfiguration>, String>,
}

/// Every `--pre` check. `ours`: the webhook configurations the install registers (those the
/// policy needs, when the manifests hold none).
pub fn checks(
    namespace: &str,
    install: &Install,
    ours: &[WebhookConfiguration],
    o: &PreObserved,
) -> Vec<Check> {
    vec![
        install_manifests(install),
        may_install(install, &o.access),
        may_grant(install, &o.grants),
        cert_manager(install, &o.cert_manager),
        self::namespace(namespace, &o.namespace, &o.may_create_namespace, install),
        pod_security(namespace, &o.namespace, install, &o.pod_security),
        webhook_names(ours, &o.registered),
    ]
}

/// How many items a one-line message lists before "and N more".
const LISTED: usize = 6;

/// An access review's answer: allowed or not, or why there was no answer.
pub type Allowed = Result<bool, String>;

/// Which install the checks below are about: the caller's, or the one jobwarden ships.
pub fn install_manifests(install: &Install) -> Check {
    if install.objects.is_empty() {
        return INSTALL_MANIFESTS.error(
            format!("{} hold no object", install.sources.join(", ")),
            "give the output of `kubectl kustomize` or `helm template`, not the kustomization or chart itself",
        );
    }
    let kinds: Vec<String> = install.kinds().into_iter().map(|(_, k)| k).collect();
    INSTALL_MANIFESTS.ok(format!(
        "{}: {} objects ({})",
        install.sources.join(", "),
        install.objects.len(),
        kinds.join(", ")
    ))
}

/// Splits answers into the refused and the unanswered.
fn refused(answers: &[(Access, Allowed)]) -> (Vec<&Access>, Vec<String>) {
    let mut denied = Vec::new();
    let mut unknown = Vec::new();
    for (access, allowed) in answers {
        match allowed {
            Ok(true) => {}
            Ok(false) => denied.push(access),
            Err(e) => unknown.push(format!("{access}: {e}")),
        }
    }
    (denied, unknown)
}

/// Whether the caller may create, read and patch every object of the install.
pub fn may_install(install: &Install, answers: &[(Access, Allowed)]) -> Check {
    let (denied, unknown) = refused(answers);
    if !denied.is_empty() {
        return MAY_INSTALL.error(
            format!("you may not {}", listed(&denied, LISTED)),
            "install as someone who may (a cluster admin), or have these verbs granted; every denied one is needed by `kubectl apply` or `helm install`",
        );
    }
    if !unknown.is_empty() {
        return MAY_INSTALL.cannot_tell(
            format!("cannot tell: {}", listed(&unknown, 2)),
            "SelfSubjectAccessReview is open to every authenticated user; is the API server healthy?",
        );
    }
    MAY_INSTALL.ok(format!(
        "you may create, get and patch all {} objects ({} access reviews)",
        install.objects.len(),
        answers.len()
    ))
}

/// What the RBAC check read: whether the caller may `escalate` and `bind` roles, and, when
/// not, whether it holds each permission the install's roles grant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrantAnswers {
    pub escalate_and_bind: Option<Allowed>,
    pub held: Vec<(Access, Allowed)>,
}

/// Whether kube-apiserver will let the caller create the install's roles and bindings.
pub fn may_grant(install: &Install, answers: &GrantAnswers) -> Check {
    if !install.grants_rbac() {
        return MAY_GRANT.skipped("the install grants no RBAC");
    }
    if let Some(Ok(true)) = answers.escalate_and_bind {
        return MAY_GRANT.ok("you may escalate and bind roles and clusterroles");
    }
    let (denied, unknown) = refused(&answers.held);
    if !denied.is_empty() {
        return MAY_GRANT.error(
            format!(
                "the install's roles grant what you do not hold: {}",
                listed(&denied, LISTED)
            ),
            "kube-apiserver refuses to create or bind a role granting more than its creator holds: install as a cluster admin, or get escalate and bind on roles and clusterroles",
        );
    }
    if !unknown.is_empty() {
        return MAY_GRANT.cannot_tell(
            format!("cannot tell: {}", listed(&unknown, 2)),
            "SelfSubjectAccessReview is open to every authenticated user; is the API server healthy?",
        );
    }
    MAY_GRANT.ok(format!(
        "you hold all {} permissions the install's roles grant",
        answers.held.len()
    ))
}

/// cert-manager's kinds the install uses, against the kinds the API server serves in
/// `cert-manager.io` (`Ok(empty)`: the group is not served at all).
pub fn cert_manager(install: &Install, served: &Result<Vec<String>, String>) -> Check {
    let used: Vec<TypeRef> = install.cert_manager_kinds();
    if used.is_empty() {
        return CERT_MANAGER.skipped("the install does not use cert-manager");
    }
    let served = match served {
        Ok(served) => served,
        Err(e) => {
            return CERT_MANAGER.cannot_tell(
                format!("cannot tell: {e}"),
                "`kubectl api-resources --api-group=cert-manager.io` lists what is served",
            );
        }
    };
    let missing: Vec<String> = used
        .iter()
        .filter(|(_, kind)| !served.contains(kind))
        .map(|(version, kind)| format!("{kind} ({version})"))
        .collect();
    if missing.is_empty() {
        return CERT_MANAGER.ok(format!(
            "the API server serves {}",
            used.iter()
                .map(|(_, k)| k.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    CERT_MANAGER.error(
        format!(
            "the install creates {}, which the API server does not serve: cert-manager is not installed",
            missing.join(", ")
        ),
        "install cert-manager v1.14 or later and wait for its three Deployments, or install with your own certificate (the chart's tls.certManager.enabled=false)",
    )
}

/// What is known of the target namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceState {
    Exists {
        labels: BTreeMap<String, String>,
        terminating: bool,
    },
    Absent,
    Unknown(String),
}

pub fn namespace(
    name: &str,
    state: &NamespaceState,
    may_create: &Allowed,
    install: &Install,
) -> Check {
    let created = install.namespace_object(name).is_some();
    match state {
        NamespaceState::Exists {
            terminating: true, ..
        } => NAMESPACE.error(
            format!("namespace {name} is being deleted"),
            format!("wait until it is gone (`kubectl wait --for=delete namespace/{name}`), then install"),
        ),
        NamespaceState::Exists { .. } => NAMESPACE.ok(format!("namespace {name} exists")),
        NamespaceState::Absent => match may_create {
            Ok(true) if created => NAMESPACE.ok(format!(
                "namespace {name} does not exist yet; the install creates it, and you may"
            )),
            Ok(true) => NAMESPACE.ok(format!(
                "namespace {name} does not exist yet; you may create it"
            )),
            Ok(false) => NAMESPACE.error(
                format!("namespace {name} does not exist, and you may not create namespaces"),
                "ask a cluster admin to create it, labelled pod-security.kubernetes.io/enforce=restricted",
            ),
            Err(e) => NAMESPACE.cannot_tell(
                format!("namespace {name} does not exist; cannot tell whether you may create it: {e}"),
                format!("`kubectl auth can-i create namespaces` says; or create {name} first"),
            ),
        },
        NamespaceState::Unknown(e) => NAMESPACE.cannot_tell(
            format!("cannot tell whether namespace {name} exists: {e}"),
            format!("`kubectl get namespace {name}` says"),
        ),
    }
}

/// The label Pod Security admission enforces a namespace's level by.
pub const ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";

/// The dry-run pods of the install's Deployments in the target namespace.
pub fn pod_security(
    namespace: &str,
    state: &NamespaceState,
    install: &Install,
    probes: &[(String, Reply)],
) -> Check {
    let labels = match namespace_labels(namespace, state, install) {
        Ok(labels) => labels,
        Err(skipped) => return skipped,
    };
    if probes.is_empty() {
        return POD_SECURITY.skipped("the install runs no pod");
    }
    let level = labels
        .get(ENFORCE_LABEL)
        .map_or("privileged (no enforce label)", String::as_str);
    let mut warned = Vec::new();
    for (owner, reply) in probes {
        match admitted(namespace, owner, reply) {
            Ok(warnings) => warned.extend(warnings),
            Err(refused) => return refused,
        }
    }
    if !warned.is_empty() {
        return POD_SECURITY.warning(
            format!("admitted in namespace {namespace}, with warnings: {}", listed(&warned, 2)),
            "the namespace's warn or audit level is stricter than jobwarden's pod; harmless, but see what it names",
        );
    }
    POD_SECURITY.ok(format!(
        "namespace {namespace} ({ENFORCE_LABEL}: {level}) admits the pods of {}",
        probes
            .iter()
            .map(|(owner, _)| owner.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// The labels of the target namespace; `Err`: the check skipped, for a namespace that does
/// not exist yet or may not.
fn namespace_labels<'a>(
    namespace: &str,
    state: &'a NamespaceState,
    install: &Install,
) -> Result<&'a BTreeMap<String, String>, Check> {
    match state {
        NamespaceState::Exists { labels, .. } => Ok(labels),
        NamespaceState::Absent => {
            let level = install
                .namespace_object(namespace)
                .and_then(|n| {
                    n.pointer(&format!(
                        "/metadata/labels/{}",
                        ENFORCE_LABEL.replace('/', "~1")
                    ))
                })
                .and_then(serde_json::Value::as_str)
                .map(|l| format!(" (the install creates it enforcing {l:?})"))
                .unwrap_or_default();
            Err(POD_SECURITY.skipped(format!(
                "namespace {namespace} does not exist yet{level}: jobwarden's pod is tried there once it does"
            )))
        }
        NamespaceState::Unknown(_) => {
            Err(POD_SECURITY.skipped(format!("cannot tell whether namespace {namespace} exists")))
        }
    }
}

/// The warnings of `owner`'s dry-run pod admitted; `Err`: the check, for a pod refused or a
/// dry run that tells nothing.
fn admitted(namespace: &str, owner: &str, reply: &Reply) -> Result<Vec<String>, Check> {
    match reply {
        Ok(a) if a.succeeded() => Ok(a.warnings.iter().map(|w| format!("{owner}: {w}")).collect()),
        Ok(a) if a.message().contains("violates PodSecurity") => Err(POD_SECURITY.error(
            format!("namespace {namespace} refuses the pods of {owner}: {}", a.message()),
            format!("jobwarden's pod meets the restricted profile: label {namespace} {ENFORCE_LABEL}=restricted (or baseline, privileged), or lift what the message names"),
        )),
        Ok(a) if a.message().contains("error looking up service account") => Err(POD_SECURITY.cannot_tell(
            format!("cannot tell: namespace {namespace} has no ServiceAccount default to try jobwarden's pod under"),
            "kube-controller-manager gives every namespace one within seconds: is it running? Run doctor --pre again",
        )),
        Ok(a) if a.code == 403 => Err(POD_SECURITY.cannot_tell(
            format!("cannot tell: a server-side dry run of the pod needs create on pods in namespace {namespace}: {}", refusal(a)),
            "run doctor --pre as someone who may create pods there (nothing is stored: it is a dry run)",
        )),
        Ok(a) => Err(POD_SECURITY.error(
            format!("namespace {namespace} refuses the pods of {owner}: {}", refusal(a)),
            "a policy engine or admission plugin refuses the pod: lift what the message names for jobwarden's namespace",
        )),
        Err(e) => Err(POD_SECURITY.cannot_tell(
            format!("cannot tell: the dry run of {owner}'s pod got no answer: {e}"),
            "is the API server healthy?",
        )),
    }
}

/// The webhook configurations the install registers against those already registered.
pub fn webhook_names(
    ours: &[WebhookConfiguration],
    registered: &Result<Vec<WebhookConfiguration>, String>,
) -> Check {
    let registered = match registered {
        Ok(r) => r,
        Err(e) => {
            return WEBHOOK_NAMES.cannot_tell(
                format!("cannot list the registered webhook configurations: {e}"),
                "`kubectl get mutatingwebhookconfigurations,validatingwebhookconfigurations` lists them",
            );
        }
    };
    let taken: Vec<String> = ours
        .iter()
        .filter(|o| {
            registered
                .iter()
                .any(|r| r.kind == o.kind && r.name == o.name)
        })
        .map(|o| format!("{} {}", o.kind, o.name))
        .collect();
    if !taken.is_empty() {
        return WEBHOOK_NAMES.error(
            format!("{} exist already", taken.join(" and ")),
            "jobwarden is installed already (run `jobwarden doctor` without --pre), or another install holds the names: remove it, or install under another release name",
        );
    }
    let our_webhooks: Vec<&String> = ours.iter().flat_map(|o| &o.webhooks).collect();
    let claimed: Vec<String> = registered
        .iter()
        .flat_map(|r| {
            r.webhooks
                .iter()
                .filter(|w| our_webhooks.contains(w))
                .map(move |w| format!("{} {} ({w})", r.kind, r.name))
        })
        .collect();
    if !claimed.is_empty() {
        return WEBHOOK_NAMES.warning(
            format!(
                "{} already send Jobs to webhooks of jobwarden's names: another jobwarden judges this cluster's Jobs",
                listed(&claimed, 3)
            ),
            "two installs review the same Jobs, and with the same controller name both run the same delegated Jobs: remove the other, or give this one another controllerName",
        );
    }
    WEBHOOK_NAMES.ok(format!(
        "no webhook configuration is registered under {}",
        ours.iter()
            .map(|o| format!("{} {}", o.kind, o.name))
            .collect::<Vec<_>>()
            .join(" or ")
    ))
}
