//! jobwarden's rules: the Job API contract as pure functions over Job values. Defaulting, spec
//! validation on create, update validation, status-update validation, the index-interval type and
//! the naming rules. No I/O, no async, no clocks: every other layer calls in, nothing here calls
//! out.

pub mod defaults;
pub mod dispatch_annotations;
pub mod field;
pub mod go_json;
pub mod indexes;
pub mod job_spec;
pub mod job_update;
pub mod managed_by;
pub mod names;
pub mod pod_failure_policy;
pub mod pod_timing;
pub mod rule_names;
pub mod seconds;
pub mod selector;
pub mod semantic;
pub mod status_transitions;
pub mod success_policy;
pub mod success_rule_settings;
pub mod template_update;
pub mod warnings;
pub mod well_known;

use k8s_openapi::api::batch::v1::{JobSpec, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::value::MapDeserializer;
use serde_json::Value;

pub use field::{BadValue, ErrorKind, ErrorList, FieldError, FieldPath};

/// The kind and group upstream names in its messages: `Job.batch "x" is invalid: ...`.
pub const JOB_KIND_GROUP: &str = "Job.batch";

/// Condition types of the Job API.
pub mod condition {
    pub const SUSPENDED: &str = "Suspended";
    pub const COMPLETE: &str = "Complete";
    pub const FAILED: &str = "Failed";
    pub const FAILURE_TARGET: &str = "FailureTarget";
    pub const SUCCESS_CRITERIA_MET: &str = "SuccessCriteriaMet";
}

/// A Job as the rules see it: the raw JSON (for fields our `k8s-openapi` does not know, and for
/// the template, compared as raw JSON so no field is ignored) beside typed views of its parts.
///
/// The pod template is not decoded into `spec.template` (left empty: decoding a whole PodSpec
/// on every review would cost more than all the Job rules together). The few template fields
/// the rules read are in `template`; everything else is in `raw_template()`. Likewise
/// `metadata.managedFields` is skipped.
#[derive(Debug, Clone)]
pub struct JobObject<'a> {
    /// Read through [`JobObject::raw`].
    pub raw: RawJson<'a>,
    pub metadata: ObjectMeta,
    pub spec: JobSpec,
    pub status: JobStatus,
    pub template: TemplateView,
}

/// A Job's raw JSON: given, or built the first time a rule reads it. Most rules read the typed
/// views and look at the raw JSON only to word an error (Go's rendering of a bad value) or for
/// a field our `k8s-openapi` lacks, so a webhook that builds the JSON from its request only on
/// demand skips that work for most valid Jobs.
#[derive(Clone, Copy)]
pub enum RawJson<'a> {
    Given(&'a Value),
    OnDemand(&'a (dyn RawOnDemand + Sync)),
}

/// The raw JSON of a Job, built (once) when first asked for.
pub trait RawOnDemand {
    fn raw(&self) -> &Value;
}

impl<'a> RawJson<'a> {
    pub fn get(&self) -> &'a Value {
        match *self {
            RawJson::Given(value) => value,
            RawJson::OnDemand(source) => source.raw(),
        }
    }
}

impl fmt::Debug for RawJson<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RawJson::Given(value) => value.fmt(f),
            RawJson::OnDemand(_) => f.write_str("(built on demand)"),
        }
    }
}

/// What the rules read of `spec.template`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct TemplateView {
    #[serde(deserialize_with = "null_as_default")]
    pub metadata: TemplateMetadata,
    #[serde(deserialize_with = "null_as_default")]
    pub spec: TemplatePodSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct TemplateMetadata {
    pub labels: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TemplatePodSpec {
    pub restart_policy: Option<String>,
    #[serde(deserialize_with = "null_as_default")]
    pub containers: Vec<NamedContainer>,
    #[serde(deserialize_with = "null_as_default")]
    pub init_containers: Vec<NamedContainer>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct NamedContainer {
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
}

/// Go decodes `null` into a zero value; so do these views.
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Why a Job could not be read at all, before any rule ran.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("the object is not a JSON object")]
    NotAnObject,
    #[error("cannot decode {part}: {source}")]
    Part {
        part: &'static str,
        #[source]
        source: serde_json::Error,
    },
}

impl<'a> JobObject<'a> {
    /// Reads `metadata`, `spec` and `status` separately, so a manifest without `apiVersion` or
    /// with a status of the wrong shape is reported precisely.
    pub fn parse(raw: &'a Value) -> Result<Self, DecodeError> {
        if !raw.is_object() {
            return Err(DecodeError::NotAnObject);
        }
        let template = match raw.pointer("/spec/template") {
            None | Some(Value::Null) => TemplateView::default(),
            Some(t) => TemplateView::deserialize(t).map_err(|source| DecodeError::Part {
                part: "spec.template",
                source,
            })?,
        };
        Ok(JobObject {
            raw: RawJson::Given(raw),
            metadata: decode_part(raw, "metadata", "managedFields")?,
            spec: decode_part(raw, "spec", "template")?,
            status: decode_part(raw, "status", "")?,
            template,
        })
    }

    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }

    pub fn is_indexed(&self) -> bool {
        self.spec.completion_mode.as_deref() == Some("Indexed")
    }

    pub fn is_suspended(&self) -> bool {
        self.spec.suspend == Some(true)
    }

    /// Whether the status holds a condition of this type with status `True`.
    pub fn has_condition(&self, type_: &str) -> bool {
        has_true_condition(&self.status, type_)
    }

    /// `Complete=True` or `Failed=True`.
    pub fn is_finished(&self) -> bool {
        self.has_condition(condition::COMPLETE) || self.has_condition(condition::FAILED)
    }

    /// The whole raw JSON of the Job (what of it the caller provided).
    pub fn raw(&self) -> &'a Value {
        self.raw.get()
    }

    /// The raw `spec.template`, or JSON null.
    pub fn raw_template(&self) -> &Value {
        self.raw()
            .get("spec")
            .and_then(|s| s.get("template"))
            .unwrap_or(&Value::Null)
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map(String::as_str)
    }
}

/// The member of `value` reached through the object keys `keys`: what `Value::pointer` finds
/// for a pointer made of those keys (none holding `~` or `/`), without the allocations a
/// pointer costs per token. Used on the paths every review takes.
pub(crate) fn member<'v>(value: &'v Value, keys: &[&str]) -> Option<&'v Value> {
    keys.iter().try_fold(value, |v, key| v.get(*key))
}

/// Decodes `raw[name]` (absent or null: the default) without its member `skip`, which is
/// either not needed or decoded on its own.
fn decode_part<T: Default + for<'de> Deserialize<'de>>(
    raw: &Value,
    name: &'static str,
    skip: &str,
) -> Result<T, DecodeError> {
    let fail = |source| DecodeError::Part { part: name, source };
    match raw.get(name) {
        None | Some(Value::Null) => Ok(T::default()),
        Some(Value::Object(map)) => {
            let members = map
                .iter()
                .filter(|(k, _)| k.as_str() != skip)
                .map(|(k, v)| (k.as_str(), v));
            T::deserialize(MapDeserializer::<_, serde_json::Error>::new(members)).map_err(fail)
        }
        Some(other) => T::deserialize(other).map_err(fail),
    }
}

pub fn has_true_condition(status: &JobStatus, type_: &str) -> bool {
    status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == type_ && c.status == "True")
}

pub fn validate_create(job: &JobObject<'_>) -> ErrorList {
    let mut errs = job_spec::validate_job(job, true);
    errs.extend(rule_names::validate(job));
    errs.extend(success_rule_settings::validate(job));
    errs.extend(pod_timing::validate(job));
    errs.extend(dispatch_annotations::validate(job));
    errs.extend(dispatch_annotations::validate_new(job));
    errs
}

/// A spec update (PUT/PATCH of `jobs`): upstream's `ValidateJob(new)` followed by
/// `ValidateJobSpecUpdate`, then jobwarden's own update rules.
pub fn validate_update(new: &JobObject<'_>, old: &JobObject<'_>) -> ErrorList {
    let prefixed_labels = job_spec::old_has_prefixed_labels(old);
    let mut errs = job_spec::validate_job(new, prefixed_labels);
    errs.extend(job_update::validate_spec_update(new, old));
    errs.extend(rule_names::validate(new));
    errs.extend(success_rule_settings::validate(new));
    errs.extend(pod_timing::validate(new));
    errs.extend(dispatch_annotations::validate(new));
    errs.extend(job_update::validate_jobwarden_update(new, old));
    errs.extend(pod_timing::validate_update(new, old));
    errs
}

/// A `jobs/status` update: upstream's `ValidateJobUpdateStatus`.
pub fn validate_status_update(new: &JobObject<'_>, old: &JobObject<'_>) -> ErrorList {
    status_transitions::validate(new, old)
}

#[cfg(test)]
mod tests;
