//! Policy beyond upstream, all opt-in and empty by default: a closed set of `managedBy` values,
//! who may resume a suspended Job, and namespaces whose Jobs are created suspended. Pure: the
//! server hands in what it knows (the requester, the namespace's labels).

use std::collections::BTreeMap;

use jobwarden_rules::well_known::{BUILT_IN_CONTROLLER_NAME, JOBWARDEN_CONTROLLER_NAME};
use jobwarden_rules::{FieldPath, JobObject, selector};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;

use crate::wire::UserInfo;

pub mod change;
pub mod dispatch;
pub mod shares;

pub use change::{PolicyVeto, PolicyVetoes, VetoRegistration, Vetoed, content_hash, needs_restart};
pub use dispatch::{Capacity, Dispatch, Worker, WorkerSource};
pub use shares::{DEFAULT_TEAM, Share};

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Policy {
    /// jobwarden's own controller name (the value its reconcile loop answers to).
    pub controller_name: String,
    /// When non-empty, the only `managedBy` values a new Job may name, besides jobwarden's own
    /// name and the built-in controller's.
    pub allowed_managed_by: Vec<String>,
    /// When any list is non-empty, only these identities may resume a suspended Job.
    pub resume: Identities,
    /// Namespaces whose new Jobs the mutating webhook creates suspended.
    pub suspend_on_create: NamespaceMatch,
    /// New Jobs the mutating webhook hands to jobwarden's controller or its dispatcher
    /// (`spec.managedBy`).
    pub delegate: Delegation,
    /// The worker clusters the dispatcher sends its Jobs to.
    pub dispatch: Dispatch,
}

/// Which new Jobs without a `spec.managedBy` get jobwarden's controller name in it, so that the
/// features only it implements (named failure reasons) take effect.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Delegation {
    /// Jobs that name their pod failure policy rules.
    pub jobs_naming_rules: bool,
    /// Every Job in these namespaces.
    pub namespaces: NamespaceMatch,
    /// Every Job in these namespaces goes to the dispatcher instead (it takes precedence over
    /// the two above), so that a team's manifests run on the worker clusters unchanged.
    pub dispatch_namespaces: NamespaceMatch,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            controller_name: JOBWARDEN_CONTROLLER_NAME.to_owned(),
            allowed_managed_by: Vec::new(),
            resume: Identities::default(),
            suspend_on_create: NamespaceMatch::default(),
            delegate: Delegation::default(),
            dispatch: Dispatch::default(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Identities {
    pub users: Vec<String>,
    pub groups: Vec<String>,
    /// `namespace/name`.
    pub service_accounts: Vec<String>,
}

impl Identities {
    pub fn is_empty(&self) -> bool {
        self.users.is_empty() && self.groups.is_empty() && self.service_accounts.is_empty()
    }

    pub fn contains(&self, user: &UserInfo) -> bool {
        self.users.iter().any(|u| *u == user.username)
            || self
                .groups
                .iter()
                .any(|g| user.groups.iter().any(|ug| ug == g))
            || self.service_accounts.iter().any(|sa| {
                sa.split_once('/').is_some_and(|(ns, name)| {
                    user.username == format!("system:serviceaccount:{ns}:{name}")
                })
            })
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct NamespaceMatch {
    pub names: Vec<String>,
    pub selector: Option<LabelSelector>,
}

impl NamespaceMatch {
    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.selector.is_none()
    }

    /// Whether the namespace is chosen. Labels are `None` when the server cannot know them
    /// (no cluster); then only names can match.
    pub fn matches(&self, namespace: &str, labels: Option<&BTreeMap<String, String>>) -> bool {
        if self.names.iter().any(|n| n == namespace) {
            return true;
        }
        match (&self.selector, labels) {
            // A selector with an unknown operator matches nothing.
            (Some(selector), Some(labels)) => {
                selector::matches_labels(Some(selector), labels).unwrap_or(false)
            }
            _ => false,
        }
    }
}

/// A request denied by policy: HTTP 403, as kube-apiserver words a forbidden write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forbidden(pub String);

impl Policy {
    /// Whether a namespace selector needs the namespaces' labels (the server then watches them).
    pub fn needs_namespace_labels(&self) -> bool {
        self.suspend_on_create.selector.is_some()
            || self.delegate.namespaces.selector.is_some()
            || self.delegate.dispatch_namespaces.selector.is_some()
    }

    /// What serde cannot see: values that would otherwise never match anything. Empty when the
    /// policy is usable.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.controller_name.trim().is_empty() {
            problems.push("controllerName must not be empty".to_owned());
        }
        for sa in &self.resume.service_accounts {
            let well_formed = sa.split_once('/').is_some_and(|(ns, name)| {
                !ns.is_empty() && !name.is_empty() && !name.contains('/')
            });
            if !well_formed {
                problems.push(format!(
                    "resume.serviceAccounts: {sa:?} must be written namespace/name"
                ));
            }
        }
        for (root, matcher) in [
            ("suspendOnCreate.selector", &self.suspend_on_create),
            ("delegate.namespaces.selector", &self.delegate.namespaces),
            (
                "delegate.dispatchNamespaces.selector",
                &self.delegate.dispatch_namespaces,
            ),
        ] {
            if let Some(sel) = &matcher.selector {
                problems.extend(
                    selector::validate(sel, &FieldPath::new(root))
                        .iter()
                        .map(ToString::to_string),
                );
            }
        }
        problems.extend(self.dispatch.problems(&self.controller_name));
        if !self.delegate.dispatch_namespaces.is_empty() && !self.dispatch.is_enabled() {
            problems.push(
                "delegate.dispatchNamespaces: the dispatcher has no workers (dispatch.workers): their Jobs would wait forever"
                    .to_owned(),
            );
        }
        problems
    }

    /// Policy checks on a create or spec update of `jobs`.
    pub fn check(
        &self,
        user: &UserInfo,
        new: &JobObject<'_>,
        old: Option<&JobObject<'_>>,
    ) -> Option<Forbidden> {
        if old.is_none()
            && let Some(managed_by) = new.spec.managed_by.as_deref()
            && !self.allowed_managed_by.is_empty()
            && !self.is_known_controller(managed_by)
            && !self.allowed_managed_by.iter().any(|a| a == managed_by)
        {
            return Some(Forbidden(format!(
                "spec.managedBy {managed_by:?} is not one of the controllers this cluster allows: {}",
                self.allowed_list()
            )));
        }
        if let Some(old) = old
            && old.is_suspended()
            && !new.is_suspended()
            && !self.resume.is_empty()
            && !self.resume.contains(user)
        {
            return Some(Forbidden(format!(
                "User {:?} may not resume a suspended Job: only the identities in the resume policy may",
                user.username
            )));
        }
        None
    }

    /// Advice that does not block the request.
    pub fn warnings(&self, new: &JobObject<'_>, old: Option<&JobObject<'_>>) -> Vec<String> {
        let mut warnings = Vec::new();
        if old.is_none()
            && let Some(managed_by) = new.spec.managed_by.as_deref()
            && !self.is_known_controller(managed_by)
            && !self.allowed_managed_by.iter().any(|a| a == managed_by)
        {
            warnings.push(format!(
                "spec.managedBy: {managed_by:?} is neither jobwarden's controller ({:?}) nor the built-in Job controller; neither will run this Job",
                self.controller_name
            ));
        }
        warnings
    }

    /// jobwarden's two controllers and the built-in one: a Job naming one of them is run.
    fn is_known_controller(&self, managed_by: &str) -> bool {
        managed_by == self.controller_name
            || managed_by == BUILT_IN_CONTROLLER_NAME
            || (self.dispatch.is_enabled() && managed_by == self.dispatch.controller_name)
    }

    fn allowed_list(&self) -> String {
        let mut all: Vec<&str> = vec![self.controller_name.as_str(), BUILT_IN_CONTROLLER_NAME];
        if self.dispatch.is_enabled() {
            all.push(self.dispatch.controller_name.as_str());
        }
        all.extend(self.allowed_managed_by.iter().map(String::as_str));
        all.iter()
            .map(|a| format!("{a:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}
