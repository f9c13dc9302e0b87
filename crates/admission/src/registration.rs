//! Which requests jobwarden can answer differently from kube-apiserver v1.36 alone, under a
//! policy, and the webhook configurations that send it those and nothing else. kube-apiserver
//! already enforces every upstream rule jobwarden checks and defaults `podReplacementPolicy`
//! itself, so what is left is jobwarden's own: its annotations, the suspend of a finished Job,
//! the policy's namespaces and operations, and the status writes of Jobs run by controllers
//! other than the built-in one (jobwarden's own two among them). Every install path renders its configurations from here (the
//! chart's templates are held to it by a test). Pure: no I/O.

mod guard;
mod registered;

use std::collections::BTreeMap;

use jobwarden_rules::well_known::BUILT_IN_CONTROLLER_NAME;
use jobwarden_rules::{rule_names, selector};
use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations,
    ServiceReference, ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use serde_json::Value;

pub use guard::{Guard, Side};
pub use registered::{Gap, gaps};

use crate::{Policy, Webhook};

/// Every annotation jobwarden reads on a Job starts with this.
pub const ANNOTATION_PREFIX: &str = "jobwarden.io/";
/// The label every namespace carries with its own name (kube-apiserver sets it).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// A namespace labelled `jobwarden.io/admission=disabled` is never sent to jobwarden.
pub const ADMISSION_LABEL: &str = "jobwarden.io/admission";

/// The namespaces a webhook is registered for, besides the ones every install leaves out.
#[derive(Debug, Clone, PartialEq)]
pub enum Scope {
    All,
    /// Namespaces with these names.
    Names(Vec<String>),
    /// Namespaces whose labels the selector matches.
    Selector(LabelSelector),
}

/// One webhook jobwarden needs registered: what kube-apiserver sends it.
#[derive(Debug, Clone, PartialEq)]
pub struct Hook {
    pub name: &'static str,
    pub webhook: Webhook,
    /// `jobs` or `jobs/status`.
    pub resource: &'static str,
    pub operations: &'static [&'static str],
    pub scope: Scope,
    /// All must hold (kube-apiserver's `matchConditions`), by name.
    pub conditions: Vec<(&'static str, Guard)>,
}

impl Hook {
    /// Whether kube-apiserver sends this request to this hook. `labels` are those of the
    /// request's namespace, when known.
    pub fn sends(
        &self,
        webhook: Webhook,
        request: &Value,
        labels: Option<&BTreeMap<String, String>>,
    ) -> bool {
        let sub_resource = request["subResource"].as_str().unwrap_or("");
        let resource = match sub_resource {
            "" => "jobs",
            "status" => "jobs/status",
            _ => return false,
        };
        let namespace = request["namespace"].as_str().unwrap_or("");
        let in_scope = match &self.scope {
            Scope::All => true,
            Scope::Names(names) => names.iter().any(|n| n == namespace),
            Scope::Selector(sel) => {
                labels.is_some_and(|l| selector::matches_labels(Some(sel), l).unwrap_or(false))
            }
        };
        self.webhook == webhook
            && self.resource == resource
            && request["operation"]
                .as_str()
                .is_some_and(|op| self.operations.contains(&op))
            && in_scope
            && self.conditions.iter().all(|(_, g)| g.sends(request))
    }
}

/// The webhooks the policy needs: each request jobwarden can answer differently from the API
/// server, and as few others as the configuration language allows.
pub fn hooks(policy: &Policy) -> Vec<Hook> {
    let mut hooks = vec![mutate(policy)];
    // A webhook has one namespaceSelector, and label selectors only AND: names, and each
    // policy setting's own selector, are separate webhooks calling the same path.
    let mut names: Vec<String> = policy
        .suspend_on_create
        .names
        .iter()
        .chain(&policy.delegate.namespaces.names)
        .chain(&policy.delegate.dispatch_namespaces.names)
        .cloned()
        .collect();
    names.sort();
    names.dedup();
    if !names.is_empty() {
        hooks.push(namespaced(
            "mutate-namespaces.jobs.jobwarden.io",
            Scope::Names(names),
        ));
    }
    for (name, selector) in [
        (
            "mutate-suspend-on-create.jobs.jobwarden.io",
            &policy.suspend_on_create.selector,
        ),
        (
            "mutate-delegate.jobs.jobwarden.io",
            &policy.delegate.namespaces.selector,
        ),
        (
            "mutate-dispatch.jobs.jobwarden.io",
            &policy.delegate.dispatch_namespaces.selector,
        ),
    ] {
        if let Some(selector) = selector {
            hooks.push(namespaced(name, Scope::Selector(selector.clone())));
        }
    }
    hooks.push(validate(policy));
    hooks.push(validate_status());
    hooks
}

/// Defaulting `podReplacementPolicy` for a Job that reaches admission without it (none on
/// v1.36, where the API server defaults it first, so the condition costs nothing there), and
/// `delegate.jobsNamingRules` for a Job that names its rules and picks no controller.
fn mutate(policy: &Policy) -> Hook {
    let mut any = vec![!Guard::SpecField(Side::New, "podReplacementPolicy")];
    if policy.delegate.jobs_naming_rules {
        any.push(Guard::All(vec![
            Guard::Annotation(Side::New, rule_names::ANNOTATION),
            !Guard::SpecField(Side::New, "managedBy"),
        ]));
    }
    Hook {
        name: "mutate.jobs.jobwarden.io",
        webhook: Webhook::Mutate,
        resource: "jobs",
        operations: &["CREATE"],
        scope: Scope::All,
        conditions: vec![("jobwarden-may-mutate", Guard::Any(any))],
    }
}

/// `suspendOnCreate`, `delegate.namespaces` and `delegate.dispatchNamespaces`: every new Job in
/// the namespaces they choose.
fn namespaced(name: &'static str, scope: Scope) -> Hook {
    Hook {
        name,
        webhook: Webhook::Mutate,
        resource: "jobs",
        operations: &["CREATE"],
        scope,
        conditions: Vec::new(),
    }
}

/// Creates and spec updates: jobwarden's annotations (on either object: removing one is as
/// immutable a change as adding it), the suspend of a finished Job, and the policy's checks,
/// each only for the requests it can refuse.
fn validate(policy: &Policy) -> Hook {
    let mut any = vec![
        Guard::AnnotationPrefix(Side::New, ANNOTATION_PREFIX),
        Guard::AnnotationPrefix(Side::Old, ANNOTATION_PREFIX),
        Guard::All(vec![
            Guard::Suspended(Side::New),
            !Guard::Suspended(Side::Old),
            Guard::Finished(Side::Old),
        ]),
    ];
    if !policy.resume.is_empty() {
        any.push(Guard::All(vec![
            Guard::Suspended(Side::Old),
            !Guard::Suspended(Side::New),
        ]));
    }
    if !policy.allowed_managed_by.is_empty() {
        // A Job naming a controller the allow-list holds passes: only the others can be refused.
        // The dispatcher's name is allowed as jobwarden's own is, once it has workers to run.
        let dispatcher = policy
            .dispatch
            .is_enabled()
            .then_some(policy.dispatch.controller_name.as_str());
        let allowed = first_of_each(
            [policy.controller_name.as_str(), BUILT_IN_CONTROLLER_NAME]
                .into_iter()
                .chain(dispatcher)
                .chain(policy.allowed_managed_by.iter().map(String::as_str)),
        );
        any.push(Guard::All(vec![
            Guard::Operation("CREATE"),
            Guard::ManagedByNoneOf(allowed),
        ]));
    }
    Hook {
        name: "validate.jobs.jobwarden.io",
        webhook: Webhook::Validate,
        resource: "jobs",
        operations: &["CREATE", "UPDATE"],
        scope: Scope::All,
        conditions: vec![
            ("jobwarden-has-a-rule", Guard::Any(any)),
            (
                "create-or-spec-or-annotations-changed",
                Guard::CreateOrSpecOrAnnotationsChanged,
            ),
        ],
    }
}

/// Status writes of Jobs run by another controller than the built-in one, which the API server
/// holds to the same transition rules; the built-in controller's never reach jobwarden.
fn validate_status() -> Hook {
    Hook {
        name: "validate-status.jobs.jobwarden.io",
        webhook: Webhook::Validate,
        resource: "jobs/status",
        operations: &["UPDATE"],
        scope: Scope::All,
        conditions: vec![
            (
                "managed-by-another-controller",
                Guard::ManagedByNoneOf(vec![BUILT_IN_CONTROLLER_NAME.to_owned()]),
            ),
            ("status-changed", Guard::StatusChanged),
        ],
    }
}

/// Where the configurations send requests, and what every webhook leaves out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Install {
    /// The configurations' name, and the Service's.
    pub name: String,
    /// The Service's namespace, which every webhook leaves out (jobwarden must never be needed
    /// to repair jobwarden), as it does kube-system.
    pub namespace: String,
    /// Other namespaces every webhook leaves out.
    pub excluded_namespaces: Vec<String>,
    pub timeout_seconds: i32,
    /// Whether cert-manager's CA injector fills `caBundle` (from `<name>-tls`).
    pub cert_manager: bool,
}

impl Default for Install {
    fn default() -> Self {
        Install {
            name: "jobwarden".to_owned(),
            namespace: "jobwarden-system".to_owned(),
            excluded_namespaces: Vec::new(),
            timeout_seconds: 5,
            cert_manager: true,
        }
    }
}

impl Install {
    /// What every webhook's namespaceSelector starts with.
    fn exclusions(&self) -> Vec<LabelSelectorRequirement> {
        let excluded = first_of_each(
            ["kube-system", self.namespace.as_str()]
                .into_iter()
                .chain(self.excluded_namespaces.iter().map(String::as_str)),
        );
        vec![
            requirement(NAMESPACE_NAME_LABEL, "NotIn", excluded),
            requirement(ADMISSION_LABEL, "NotIn", vec!["disabled".to_owned()]),
        ]
    }

    fn metadata(&self) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.name.clone()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/name".to_owned(),
                "jobwarden".to_owned(),
            )])),
            annotations: self.cert_manager.then(|| {
                BTreeMap::from([(
                    "cert-manager.io/inject-ca-from".to_owned(),
                    format!("{}/{}-tls", self.namespace, self.name),
                )])
            }),
            ..ObjectMeta::default()
        }
    }

    fn client_config(&self, webhook: Webhook) -> WebhookClientConfig {
        WebhookClientConfig {
            service: Some(ServiceReference {
                name: self.name.clone(),
                namespace: self.namespace.clone(),
                path: Some(format!("/{webhook}")),
                port: Some(443),
            }),
            ..WebhookClientConfig::default()
        }
    }
}

/// Each value once, where it first appears (as the chart's `uniq`).
fn first_of_each<'a>(values: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for value in values {
        if !out.iter().any(|o| o == value) {
            out.push(value.to_owned());
        }
    }
    out
}

fn requirement(key: &str, operator: &str, values: Vec<String>) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.to_owned(),
        operator: operator.to_owned(),
        values: Some(values),
    }
}

/// The requirements a scope adds to the exclusions: a label selector ANDs them all.
fn namespace_selector(scope: &Scope, exclusions: Vec<LabelSelectorRequirement>) -> LabelSelector {
    let mut expressions = exclusions;
    let mut labels = None;
    match scope {
        Scope::All => {}
        Scope::Names(names) => {
            expressions.push(requirement(NAMESPACE_NAME_LABEL, "In", names.clone()));
        }
        Scope::Selector(sel) => {
            labels = sel.match_labels.clone().filter(|l| !l.is_empty());
            expressions.extend(sel.match_expressions.iter().flatten().cloned());
        }
    }
    LabelSelector {
        match_labels: labels,
        match_expressions: Some(expressions),
    }
}

/// The parts both kinds of webhook share.
struct Rendered {
    rules: Vec<RuleWithOperations>,
    namespace_selector: LabelSelector,
    match_conditions: Option<Vec<MatchCondition>>,
}

fn render(hook: &Hook, install: &Install) -> Rendered {
    let conditions: Vec<MatchCondition> = hook
        .conditions
        .iter()
        .map(|(name, guard)| MatchCondition {
            name: (*name).to_owned(),
            expression: guard.cel(),
        })
        .collect();
    Rendered {
        rules: vec![RuleWithOperations {
            api_groups: Some(vec!["batch".to_owned()]),
            api_versions: Some(vec!["v1".to_owned()]),
            operations: Some(hook.operations.iter().map(|o| (*o).to_owned()).collect()),
            resources: Some(vec![hook.resource.to_owned()]),
            scope: Some("Namespaced".to_owned()),
        }],
        namespace_selector: namespace_selector(&hook.scope, install.exclusions()),
        match_conditions: (!conditions.is_empty()).then_some(conditions),
    }
}

/// The two configurations for a policy: every webhook fails closed, since each is sent only
/// what jobwarden alone can judge; each times out after `timeout_seconds` (a review takes under
/// a millisecond, so a slow answer means a sick replica); none has side effects.
pub fn configurations(
    policy: &Policy,
    install: &Install,
) -> (MutatingWebhookConfiguration, ValidatingWebhookConfiguration) {
    let hooks = hooks(policy);
    let v1 = || vec!["v1".to_owned()];
    let mutating = hooks
        .iter()
        .filter(|h| h.webhook == Webhook::Mutate)
        .map(|hook| {
            let r = render(hook, install);
            MutatingWebhook {
                name: hook.name.to_owned(),
                admission_review_versions: v1(),
                side_effects: "None".to_owned(),
                timeout_seconds: Some(install.timeout_seconds),
                failure_policy: Some("Fail".to_owned()),
                // The patch only fills in what is missing: a later webhook's changes do not
                // need jobwarden again.
                reinvocation_policy: Some("Never".to_owned()),
                match_policy: Some("Equivalent".to_owned()),
                client_config: install.client_config(Webhook::Mutate),
                rules: Some(r.rules),
                namespace_selector: Some(r.namespace_selector),
                match_conditions: r.match_conditions,
                object_selector: None,
            }
        })
        .collect();
    let validating = hooks
        .iter()
        .filter(|h| h.webhook == Webhook::Validate)
        .map(|hook| {
            let r = render(hook, install);
            ValidatingWebhook {
                name: hook.name.to_owned(),
                admission_review_versions: v1(),
                side_effects: "None".to_owned(),
                timeout_seconds: Some(install.timeout_seconds),
                failure_policy: Some("Fail".to_owned()),
                match_policy: Some("Equivalent".to_owned()),
                client_config: install.client_config(Webhook::Validate),
                rules: Some(r.rules),
                namespace_selector: Some(r.namespace_selector),
                match_conditions: r.match_conditions,
                object_selector: None,
            }
        })
        .collect();
    (
        MutatingWebhookConfiguration {
            metadata: install.metadata(),
            webhooks: Some(mutating),
        },
        ValidatingWebhookConfiguration {
            metadata: install.metadata(),
            webhooks: Some(validating),
        },
    )
}

#[cfg(test)]
mod tests;
