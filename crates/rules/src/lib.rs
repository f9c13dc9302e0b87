//! jobwarden's rules: the Job API contract as pure functions over Job values. Defaulting, spec
//! validation on create, update validation, status-update validation, the index-interval type and
//! the naming rules. No I/O, no async, no clocks: every other layer calls in, nothing here calls
//! out.

pub mod defaults;
pub mod field;
pub mod go_json;
pub mod indexes;
pub mod job_spec;
pub mod job_update;
pub mod managed_by;
pub mod names;
pub mod pod_failure_policy;
pub mod rule_names;
pub mod selector;
pub mod semantic;
pub mod status_transitions;
pub mod success_policy;
pub mod template_update;

use k8s_openapi::api::batch::v1::{JobSpec, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
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
#[derive(Debug, Clone)]
pub struct JobObject<'a> {
    pub raw: &'a Value,
    pub metadata: ObjectMeta,
    pub spec: JobSpec,
    pub status: JobStatus,
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
        fn part<T: Default + for<'de> Deserialize<'de>>(
            raw: &Value,
            name: &'static str,
        ) -> Result<T, DecodeError> {
            match raw.get(name) {
                None | Some(Value::Null) => Ok(T::default()),
                Some(v) => {
                    T::deserialize(v).map_err(|source| DecodeError::Part { part: name, source })
                }
            }
        }
        Ok(JobObject {
            raw,
            metadata: part(raw, "metadata")?,
            spec: part(raw, "spec")?,
            status: part(raw, "status")?,
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

    /// The raw `spec.template`, or JSON null.
    pub fn raw_template(&self) -> &Value {
        self.raw
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
    errs
}

/// A spec update (PUT/PATCH of `jobs`): upstream's `ValidateJob(new)` followed by
/// `ValidateJobSpecUpdate`, then jobwarden's own update rules.
pub fn validate_update(new: &JobObject<'_>, old: &JobObject<'_>) -> ErrorList {
    let prefixed_labels = job_spec::old_has_prefixed_labels(old);
    let mut errs = job_spec::validate_job(new, prefixed_labels);
    errs.extend(job_update::validate_spec_update(new, old));
    errs.extend(rule_names::validate(new));
    errs.extend(job_update::validate_jobwarden_update(new, old));
    errs
}

/// A `jobs/status` update: upstream's `ValidateJobUpdateStatus`.
pub fn validate_status_update(new: &JobObject<'_>, old: &JobObject<'_>) -> ErrorList {
    status_transitions::validate(new, old)
}

#[cfg(test)]
mod tests;
