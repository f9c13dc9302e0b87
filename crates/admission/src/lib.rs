//! The webhook as a pure function: AdmissionReview v1 bytes in, AdmissionReview v1 bytes out.
//! Read the body once, strictly, into a tree borrowing from it (`json_tree`), decode the typed
//! views the rules read (`job_view`), pick the rule set by operation and subresource, turn
//! errors into a denial shaped like kube-apiserver's, write the JSON Patch from the decisions
//! (`patch`). No sockets here and no Job rule: the server calls this, and this calls
//! `jobwarden_rules`.

mod job_view;
mod json_tree;
mod patch;
pub mod policy;
pub mod registration;
pub mod wire;

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use jobwarden_rules::field::invalid_message;
use jobwarden_rules::{
    FieldError, JOB_KIND_GROUP, JobObject, defaults, dispatch_annotations, pod_timing, rule_names,
    success_rule_settings,
};
use serde::Deserialize as _;
use serde_json::Value;

use job_view::{Raw, RawFromTree};
use json_tree::Item;
use patch::SpecPatch;
pub use policy::Policy;
use wire::{Cause, Empty, Request, Response, ReviewOut, Status, StatusDetails};

/// Which of the two webhooks a request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Webhook {
    Mutate,
    Validate,
}

impl fmt::Display for Webhook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Webhook::Mutate => "mutate",
            Webhook::Validate => "validate",
        })
    }
}

/// Looks up a namespace's labels; `None` when the namespace is unknown.
pub type NamespaceLookup<'a> = &'a (dyn Fn(&str) -> Option<BTreeMap<String, String>> + Sync);

/// What the server knows beyond the request itself.
#[derive(Clone, Copy, Default)]
pub struct Context<'a> {
    /// The labels of namespaces, when the server can look them up. Asked only for the request's
    /// own namespace, and only when a policy selects namespaces by label.
    pub namespace_labels: Option<NamespaceLookup<'a>>,
}

/// How a review ended, for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not a Job, or an operation jobwarden has nothing to say about.
    Ignored,
    Allowed,
    /// Allowed with a patch.
    Patched,
    Denied {
        code: u16,
    },
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Ignored => f.write_str("ignored"),
            Verdict::Allowed => f.write_str("allowed"),
            Verdict::Patched => f.write_str("patched"),
            Verdict::Denied { code } => write!(f, "denied_{code}"),
        }
    }
}

/// One line's worth of facts about a review; never the object itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub uid: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub operation: String,
    pub sub_resource: String,
    pub dry_run: bool,
    pub verdict: Verdict,
}

/// A review answered with an AdmissionReview response.
#[derive(Debug, Clone)]
pub struct Reviewed {
    /// The response body, ending in a newline: what the server sends and `review` prints.
    pub body: Vec<u8>,
    pub allowed: bool,
    pub summary: Summary,
}

/// A body that is not an AdmissionReview v1 request with a uid: there is nobody to answer, so
/// the server replies 400 with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    /// Not JSON, or JSON that reads two ways (a key repeated in one object).
    #[error("request body cannot be read as JSON: {0}")]
    NotJson(String),
    #[error(
        "request body is not an admission.k8s.io/v1 AdmissionReview (apiVersion {api_version:?}, kind {kind:?})"
    )]
    NotAdmissionReview { api_version: String, kind: String },
    #[error("AdmissionReview has no request.uid")]
    NoUid,
}

/// The reviewer: policy configuration plus the rules. Cheap to share across threads.
#[derive(Debug, Clone, Default)]
pub struct Reviewer {
    pub policy: Policy,
}

/// The objects of a request, JSON null read as absent.
#[derive(Clone, Copy)]
struct Objects<'t, 'a> {
    new: Option<Item<'t, 'a>>,
    old: Option<Item<'t, 'a>>,
}

/// The decision before it is encoded.
struct Decision {
    denial: Option<Status>,
    patch: Option<Vec<u8>>,
    warnings: Vec<String>,
    ignored: bool,
}

impl Decision {
    fn allow() -> Self {
        Decision {
            denial: None,
            patch: None,
            warnings: Vec::new(),
            ignored: false,
        }
    }

    fn ignore() -> Self {
        Decision {
            ignored: true,
            ..Decision::allow()
        }
    }

    fn deny(status: Status) -> Self {
        Decision {
            denial: Some(status),
            ..Decision::allow()
        }
    }

    fn verdict(&self) -> Verdict {
        match (&self.denial, &self.patch, self.ignored) {
            (Some(status), _, _) => Verdict::Denied { code: status.code },
            (None, Some(_), _) => Verdict::Patched,
            (None, None, true) => Verdict::Ignored,
            (None, None, false) => Verdict::Allowed,
        }
    }
}

impl Reviewer {
    pub fn new(policy: Policy) -> Self {
        Reviewer { policy }
    }

    pub fn review(
        &self,
        webhook: Webhook,
        body: &[u8],
        ctx: &Context<'_>,
    ) -> Result<Reviewed, Unreadable> {
        let tree = json_tree::parse(body).map_err(|e| Unreadable::NotJson(e.to_string()))?;
        let envelope = tree.root();
        let (api_version, kind) = (
            text(Some(envelope), "apiVersion"),
            text(Some(envelope), "kind"),
        );
        if api_version != wire::API_VERSION || kind != wire::KIND {
            return Err(Unreadable::NotAdmissionReview {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            });
        }
        let request = envelope.get("request");
        let uid = text(request, "uid");
        if uid.is_empty() {
            return Err(Unreadable::NoUid);
        }
        let mut summary = Summary {
            uid: uid.to_owned(),
            kind: String::new(),
            namespace: text(request, "namespace").to_owned(),
            name: text(request, "name").to_owned(),
            operation: text(request, "operation").to_owned(),
            sub_resource: text(request, "subResource").to_owned(),
            dry_run: request
                .and_then(|r| r.get("dryRun"))
                .and_then(|d| d.as_bool())
                == Some(true),
            verdict: Verdict::Allowed,
        };
        let (kind, decision) = self.decide_request(webhook, request, ctx);
        summary.kind = kind;
        summary.verdict = decision.verdict();
        let allowed = decision.denial.is_none();
        Ok(Reviewed {
            body: encode(uid, decision),
            allowed,
            summary,
        })
    }

    /// Reads the request as a typed [`Request`] and decides it; the `resource/subresource`
    /// it names, for the summary (empty when it does not read, and is denied).
    fn decide_request(
        &self,
        webhook: Webhook,
        request: Option<Item<'_, '_>>,
        ctx: &Context<'_>,
    ) -> (String, Decision) {
        // The tree reads as a `serde_json::Value` would; should it ever refuse what a `Value`
        // reads, the `Value` decides, so the request is read, or refused in the words of
        // serde_json, as it always was.
        let typed = match request.map(Request::deserialize) {
            Some(Ok(typed)) => Ok(typed),
            _ => Request::deserialize(request.map_or(Value::Null, |r| r.to_value())),
        };
        match typed {
            Ok(typed) => {
                let kind = format!(
                    "{}/{}",
                    typed.resource.resource,
                    typed.sub_resource.as_deref().unwrap_or("")
                )
                .trim_end_matches('/')
                .to_owned();
                let objects = Objects {
                    new: request.and_then(|r| r.get_set("object")),
                    old: request.and_then(|r| r.get_set("oldObject")),
                };
                (kind, self.decide(webhook, &typed, objects, ctx))
            }
            Err(e) => (
                String::new(),
                Decision::deny(bad_request(format!(
                    "cannot read the AdmissionReview request: {e}"
                ))),
            ),
        }
    }

    fn decide(
        &self,
        webhook: Webhook,
        request: &Request,
        objects: Objects<'_, '_>,
        ctx: &Context<'_>,
    ) -> Decision {
        let is_job = request.kind.group == "batch"
            && request.kind.kind == "Job"
            && request.resource.resource == "jobs";
        if !is_job {
            return Decision::ignore();
        }
        let sub_resource = request.sub_resource.as_deref().unwrap_or("");
        match (webhook, &*request.operation, sub_resource) {
            (Webhook::Mutate, "CREATE" | "UPDATE", "") => self.mutate(request, objects.new, ctx),
            (Webhook::Validate, "CREATE" | "UPDATE", "")
            | (Webhook::Validate, "UPDATE", "status") => self.validate(request, objects),
            _ => Decision::ignore(),
        }
    }

    /// The defaults and policy settings, written as a JSON Patch of the fields they set. Each
    /// is `add` where the field is absent and `replace` where it is present (null, or another
    /// value), in the order of the field names: the patch a diff of the two objects gives.
    fn mutate(
        &self,
        request: &Request,
        object: Option<Item<'_, '_>>,
        ctx: &Context<'_>,
    ) -> Decision {
        // A mutating webhook never denies: whatever is wrong with the object, the validating
        // webhook (and the apiserver) will say so.
        let Some(object) = object.filter(|o| o.is_object()) else {
            return Decision::allow();
        };
        let spec = object.get("spec").filter(|s| s.is_object());
        let mut patch = SpecPatch::default();
        let mut warnings = Vec::new();
        if let Some(spec) = spec
            && spec.get_set("podReplacementPolicy").is_none()
        {
            let policy =
                defaults::pod_replacement_policy_for(spec.get_set("podFailurePolicy").is_some());
            patch.set(spec, "podReplacementPolicy", Value::from(policy));
        }
        let namespace = request.namespace.as_deref().unwrap_or("");
        let creating = request.operation == "CREATE";
        let labels = match ctx.namespace_labels {
            Some(lookup) if creating && self.policy.needs_namespace_labels() => lookup(namespace),
            _ => None,
        };
        if creating
            && self
                .policy
                .suspend_on_create
                .matches(namespace, labels.as_ref())
            && let Some(spec) = spec
            && spec.get("suspend").and_then(|s| s.as_bool()) != Some(true)
        {
            patch.set(spec, "suspend", Value::Bool(true));
            warnings.push(format!(
                "spec.suspend: set to true by jobwarden: Jobs in namespace {namespace:?} are created suspended"
            ));
        }
        if creating
            && let Some((name, reason)) = self.delegation(object, namespace, labels.as_ref())
            && let Some(spec) = spec
        {
            patch.set(spec, "managedBy", Value::String(name.to_owned()));
            warnings.push(format!(
                "spec.managedBy: set to {name:?} by jobwarden: {reason}"
            ));
        }
        Decision {
            patch: patch.into_bytes(),
            warnings,
            ..Decision::allow()
        }
    }

    /// The controller a new Job without `spec.managedBy` is delegated to, and why, if it is:
    /// the dispatcher for the dispatch namespaces (a team's manifests run on the workers
    /// unchanged), before jobwarden's controller for its namespaces or for named rules.
    fn delegation(
        &self,
        object: Item<'_, '_>,
        namespace: &str,
        labels: Option<&BTreeMap<String, String>>,
    ) -> Option<(&str, String)> {
        let delegate = &self.policy.delegate;
        if !delegate.jobs_naming_rules
            && delegate.namespaces.is_empty()
            && delegate.dispatch_namespaces.is_empty()
        {
            return None;
        }
        if object
            .get("spec")
            .and_then(|s| s.get_set("managedBy"))
            .is_some()
        {
            return None;
        }
        if delegate.dispatch_namespaces.matches(namespace, labels) {
            return Some((
                &self.policy.dispatch.controller_name,
                format!(
                    "Jobs in namespace {namespace:?} are sent to worker clusters by jobwarden's dispatcher"
                ),
            ));
        }
        let ours = self.policy.controller_name.as_str();
        if delegate.namespaces.matches(namespace, labels) {
            return Some((
                ours,
                format!("Jobs in namespace {namespace:?} are run by jobwarden"),
            ));
        }
        let names_rules = delegate.jobs_naming_rules
            && job_view::decode(object, Raw::RulesOnly)
                .is_ok_and(|(raw, views)| rule_names::names_any_rule(&views.with_raw(&raw)));
        names_rules.then(|| {
            (
                ours,
                "the Job names its pod failure policy rules, which only jobwarden's controller honours"
                    .to_owned(),
            )
        })
    }

    fn validate(&self, request: &Request, objects: Objects<'_, '_>) -> Decision {
        let Some(object) = objects.new else {
            return Decision::deny(bad_request("request.object is required".to_owned()));
        };
        let is_status = request.sub_resource.as_deref() == Some("status");
        let creating = request.operation == "CREATE";
        // A spec update compares the pod templates as raw JSON.
        let raw = if creating || is_status {
            Raw::RulesOnly
        } else {
            Raw::WithTemplate
        };
        let (new_raw, new) = match job_view::decode(object, raw) {
            Ok(decoded) => decoded,
            Err(e) => return Decision::deny(bad_request(format!("object: {e}"))),
        };
        let (old_raw, old) = match decode_old(creating, objects.old, raw) {
            Ok(decoded) => decoded,
            Err(message) => return Decision::deny(bad_request(message)),
        };
        let new = new.with_raw(&new_raw);
        let old = old
            .zip(old_raw.as_ref())
            .map(|(views, raw)| views.with_raw(raw));
        let errors = match (&old, is_status) {
            (None, _) => jobwarden_rules::validate_create(&new),
            (Some(old), false) => jobwarden_rules::validate_update(&new, old),
            (Some(old), true) => jobwarden_rules::validate_status_update(&new, old),
        };
        let name = match new.name() {
            "" => request.name.as_deref().unwrap_or(""),
            name => name,
        };
        if !errors.is_empty() {
            return Decision::deny(invalid(name, &errors));
        }
        if is_status {
            return Decision::allow();
        }
        if let Some(forbidden) = self.policy.check(&request.user_info, &new, old.as_ref()) {
            return Decision::deny(forbidden_by_policy(name, &forbidden.0));
        }
        Decision {
            warnings: self.warnings(&new, old.as_ref()),
            ..Decision::allow()
        }
    }

    /// The policy's warnings; on create also those of jobwarden's annotations that only its
    /// controllers honour, when the Job is not theirs.
    fn warnings(&self, new: &JobObject<'_>, old: Option<&JobObject<'_>>) -> Vec<String> {
        let mut warnings = self.policy.warnings(new, old);
        if old.is_some() {
            return warnings;
        }
        if rule_names::names_any_rule(new)
            && new.spec.managed_by.as_deref() != Some(self.policy.controller_name.as_str())
        {
            warnings.push(format!(
                "metadata.annotations[{}]: pod failure policy rule names take effect only for Jobs with spec.managedBy {:?}; the built-in Job controller ignores them",
                rule_names::ANNOTATION,
                self.policy.controller_name
            ));
        }
        warnings.extend(success_rule_settings::warnings(
            new,
            &self.policy.controller_name,
        ));
        warnings.extend(pod_timing::warnings(new, &self.policy.controller_name));
        warnings.extend(dispatch_annotations::warnings(
            new,
            &self.policy.dispatch.controller_name,
        ));
        warnings
    }
}

/// The stored Job of an UPDATE, decoded as the new one is (none on CREATE); why the request
/// is bad when it is missing or does not decode.
fn decode_old<'t, 'a>(
    creating: bool,
    old: Option<Item<'t, 'a>>,
    raw: Raw,
) -> Result<(Option<RawFromTree<'t, 'a>>, Option<job_view::Views>), String> {
    match (creating, old) {
        (true, _) => Ok((None, None)),
        (false, Some(old)) => match job_view::decode(old, raw) {
            Ok((raw, views)) => Ok((Some(raw), Some(views))),
            Err(e) => Err(format!("oldObject: {e}")),
        },
        (false, None) => Err("request.oldObject is required for UPDATE".to_owned()),
    }
}

/// A 403 denial: the policy forbids the Job (as kube-apiserver words an authorization refusal).
fn forbidden_by_policy(name: &str, why: &str) -> Status {
    Status {
        metadata: Empty {},
        status: "Failure",
        message: format!("jobs.batch {name:?} is forbidden: {why}"),
        reason: "Forbidden",
        details: Some(StatusDetails {
            name: name.to_owned(),
            group: "batch",
            kind: "jobs",
            causes: Vec::new(),
        }),
        code: 403,
    }
}

/// The AdmissionReview answering `uid`: the response body's bytes, ending in a newline.
fn encode(uid: &str, decision: Decision) -> Vec<u8> {
    let out = ReviewOut {
        api_version: wire::API_VERSION,
        kind: wire::KIND,
        response: Response {
            uid,
            allowed: decision.denial.is_none(),
            status: decision.denial,
            patch_type: decision.patch.as_ref().map(|_| "JSONPatch"),
            patch: decision
                .patch
                .map(|p| base64::engine::general_purpose::STANDARD.encode(p)),
            warnings: decision.warnings,
        },
    };
    let mut body = Vec::with_capacity(256);
    // Writing plain structs and strings into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut body, &out);
    body.push(b'\n');
    body
}

/// The string member `key` of an object; empty when absent or not a string.
fn text<'t>(item: Option<Item<'t, '_>>, key: &str) -> &'t str {
    item.and_then(|i| i.get(key))
        .and_then(|v| v.as_str())
        .unwrap_or("")
}

/// A 422 denial, shaped as kube-apiserver rejects an invalid Job.
fn invalid(name: &str, errors: &[FieldError]) -> Status {
    Status {
        metadata: Empty {},
        status: "Failure",
        message: invalid_message(JOB_KIND_GROUP, name, errors),
        reason: "Invalid",
        details: Some(StatusDetails {
            name: name.to_owned(),
            group: "batch",
            kind: "Job",
            causes: errors
                .iter()
                .map(|e| Cause {
                    reason: e.kind.cause_reason(),
                    message: e.body(),
                    field: e.path.to_string(),
                })
                .collect(),
        }),
        code: 422,
    }
}

fn bad_request(message: String) -> Status {
    Status {
        metadata: Empty {},
        status: "Failure",
        message,
        reason: "BadRequest",
        details: None,
        code: 400,
    }
}

#[cfg(test)]
mod tests;
