//! What the registered configurations fail to send jobwarden that its policy needs: a webhook
//! missing, or one whose rules, conditions or namespaces differ from the policy's, or that fails
//! open. The install's own choices (where the Service is, the namespaces it leaves out) are not
//! the policy's, so a registered namespaceSelector may add exclusions (`NotIn`, `DoesNotExist`), and nothing
//! else the policy does not have.

use std::fmt;

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhookConfiguration, RuleWithOperations,
    ValidatingWebhookConfiguration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::{Install, Policy, configurations};

/// One way the registered configurations fall short of the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gap {
    /// No webhook of this name is registered.
    Missing { webhook: String },
    /// Registered, but sent other requests than the policy needs.
    Differs {
        webhook: String,
        field: &'static str,
    },
    /// Registered with `failurePolicy: Ignore`: an outage lets what it guards through.
    FailsOpen { webhook: String },
}

impl fmt::Display for Gap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Gap::Missing { webhook } => write!(f, "webhook {webhook:?} is not registered"),
            Gap::Differs { webhook, field } => write!(
                f,
                "webhook {webhook:?} is registered with other {field} than the policy needs"
            ),
            Gap::FailsOpen { webhook } => write!(
                f,
                "webhook {webhook:?}: failurePolicy is Ignore, so an outage lets through what it guards"
            ),
        }
    }
}

/// A webhook of either kind, as far as the comparison reads it.
struct View<'a> {
    name: &'a str,
    rules: &'a Option<Vec<RuleWithOperations>>,
    match_conditions: &'a Option<Vec<MatchCondition>>,
    namespace_selector: &'a Option<LabelSelector>,
    failure_policy: Option<&'a str>,
}

fn mutating(config: &MutatingWebhookConfiguration) -> Vec<View<'_>> {
    config
        .webhooks
        .iter()
        .flatten()
        .map(|w| View {
            name: &w.name,
            rules: &w.rules,
            match_conditions: &w.match_conditions,
            namespace_selector: &w.namespace_selector,
            failure_policy: w.failure_policy.as_deref(),
        })
        .collect()
}

fn validating(config: &ValidatingWebhookConfiguration) -> Vec<View<'_>> {
    config
        .webhooks
        .iter()
        .flatten()
        .map(|w| View {
            name: &w.name,
            rules: &w.rules,
            match_conditions: &w.match_conditions,
            namespace_selector: &w.namespace_selector,
            failure_policy: w.failure_policy.as_deref(),
        })
        .collect()
}

/// The gaps between what `policy` needs and what is registered (`None`: that configuration is
/// not registered at all). Empty when the registered configurations send every request the
/// policy can answer differently from the API server.
pub fn gaps(
    policy: &Policy,
    mutating_registered: Option<&MutatingWebhookConfiguration>,
    validating_registered: Option<&ValidatingWebhookConfiguration>,
) -> Vec<Gap> {
    let (m, v) = configurations(policy, &Install::default());
    let mut gaps = compare(&mutating(&m), mutating_registered.map(mutating));
    gaps.extend(compare(
        &validating(&v),
        validating_registered.map(validating),
    ));
    gaps
}

fn compare(needed: &[View<'_>], registered: Option<Vec<View<'_>>>) -> Vec<Gap> {
    let registered = registered.unwrap_or_default();
    let mut gaps = Vec::new();
    for need in needed {
        let webhook = need.name.to_owned();
        let Some(have) = registered.iter().find(|r| r.name == need.name) else {
            gaps.push(Gap::Missing { webhook });
            continue;
        };
        if have.rules != need.rules {
            gaps.push(Gap::Differs {
                webhook: webhook.clone(),
                field: "rules",
            });
        }
        if have.match_conditions != need.match_conditions {
            gaps.push(Gap::Differs {
                webhook: webhook.clone(),
                field: "matchConditions",
            });
        }
        if !selects_as_many(need.namespace_selector, have.namespace_selector) {
            gaps.push(Gap::Differs {
                webhook: webhook.clone(),
                field: "namespaceSelector",
            });
        }
        if have.failure_policy == Some("Ignore") {
            gaps.push(Gap::FailsOpen { webhook });
        }
    }
    gaps
}

/// Whether `have` selects every namespace `need` does, as far as a comparison can tell: each of
/// its requirements is one of `need`'s, or an exclusion (`NotIn`, `DoesNotExist`), which installs
/// choose, like kube-system and jobwarden's own namespace.
fn selects_as_many(need: &Option<LabelSelector>, have: &Option<LabelSelector>) -> bool {
    let Some(have) = have else {
        return true;
    };
    let need = need.clone().unwrap_or_default();
    let labels = have.match_labels.iter().flatten().all(|(k, v)| {
        need.match_labels
            .as_ref()
            .and_then(|l| l.get(k))
            .is_some_and(|n| n == v)
    });
    let expressions = have
        .match_expressions
        .iter()
        .flatten()
        .filter(|e| e.operator != "NotIn" && e.operator != "DoesNotExist")
        .all(|e| need.match_expressions.iter().flatten().any(|n| n == e));
    labels && expressions
}
