//! Upstream's `ValidateJob`: object metadata, the generated selector, `ValidateJobSpec` (counts
//! and limits, completion mode, managedBy, the two policies, podReplacementPolicy, restartPolicy,
//! the selector) and the Indexed hostname length, in upstream's order. Pod template internals
//! (containers, volumes) are kube-apiserver's core validation and are not repeated here.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::JobSpec;

use super::field::{BadValue, FieldError, FieldPath};
use super::well_known::{
    CONTROLLER_UID_LABEL, JOB_NAME_LABEL, LEGACY_CONTROLLER_UID_LABEL, LEGACY_JOB_NAME_LABEL,
};
use super::{
    ErrorList, JobObject, go_json, managed_by, names, pod_failure_policy, selector, success_policy,
};

pub const MAX_INDEXED_PARALLELISM: i32 = 100_000;
pub const MAX_FAILED_INDEXES: i32 = 100_000;
pub const COMPLETIONS_SOFT_LIMIT: i32 = 100_000;
pub const PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS: i32 = 10_000;
pub const MAX_FAILED_INDEXES_FOR_HIGH_COMPLETIONS: i32 = 10_000;

/// `RequirePrefixedLabels` on update: only when the stored template already has both
/// `batch.kubernetes.io/` labels (Jobs created before they existed keep validating).
pub fn old_has_prefixed_labels(old: &JobObject<'_>) -> bool {
    let labels = template_labels(old);
    labels.is_some_and(|l| l.contains_key(JOB_NAME_LABEL) && l.contains_key(CONTROLLER_UID_LABEL))
}

fn template_labels<'a>(job: &'a JobObject<'_>) -> Option<&'a BTreeMap<String, String>> {
    job.template.metadata.labels.as_ref()
}

/// `ValidateJob`: everything a create checks, and what an update re-checks on the new object.
pub fn validate_job(job: &JobObject<'_>, require_prefixed_labels: bool) -> ErrorList {
    let mut errs = validate_metadata(job);
    errs.extend(validate_generated_selector(job, require_prefixed_labels));
    errs.extend(validate_job_spec(job));
    errs.extend(validate_indexed_hostname(job));
    errs
}

fn validate_metadata(job: &JobObject<'_>) -> ErrorList {
    let mut errs = ErrorList::new();
    let meta = FieldPath::new("metadata");
    let name = job.name();
    if name.is_empty() {
        if job
            .metadata
            .generate_name
            .as_deref()
            .unwrap_or("")
            .is_empty()
        {
            errs.push(FieldError::required(
                &meta.child("name"),
                "name or generateName is required",
            ));
        }
    } else {
        for msg in names::dns1123_subdomain(name) {
            errs.push(FieldError::invalid(
                &meta.child("name"),
                BadValue::Str(name.to_owned()),
                msg,
            ));
        }
    }
    match job.metadata.namespace.as_deref().unwrap_or("") {
        "" => errs.push(FieldError::required(&meta.child("namespace"), "")),
        ns => {
            for msg in names::dns1123_label(ns) {
                errs.push(FieldError::invalid(
                    &meta.child("namespace"),
                    BadValue::Str(ns.to_owned()),
                    msg,
                ));
            }
        }
    }
    errs
}

/// `validateGeneratedSelector`: with a generated selector, the template carries the labels that
/// tie its pods to this Job's uid and name, and the selector selects exactly those.
fn validate_generated_selector(job: &JobObject<'_>, require_prefixed_labels: bool) -> ErrorList {
    let mut errs = ErrorList::new();
    if job.spec.manual_selector == Some(true) || job.spec.selector.is_none() {
        return errs;
    }
    let uid = job.metadata.uid.as_deref().unwrap_or("");
    if uid.is_empty() {
        errs.push(FieldError::required(
            &FieldPath::new("metadata").child("uid"),
            "",
        ));
    }
    let name = job.name();
    let all_required = [
        (LEGACY_CONTROLLER_UID_LABEL, uid),
        (LEGACY_JOB_NAME_LABEL, name),
        (CONTROLLER_UID_LABEL, uid),
        (JOB_NAME_LABEL, name),
    ];
    // The `batch.kubernetes.io/` pair is required on create, and on update only if the stored
    // Job already had it.
    let required = &all_required[..if require_prefixed_labels { 4 } else { 2 }];
    let labels_path = FieldPath::new("spec.template.metadata.labels");
    let empty = BTreeMap::new();
    let labels = template_labels(job).unwrap_or(&empty);
    for (key, expected) in required {
        let path = labels_path.key(key);
        match labels.get(*key) {
            None => errs.push(FieldError::required(&path, format!("must be '{expected}'"))),
            Some(actual) if actual != expected => errs.push(FieldError::invalid(
                &path,
                BadValue::json(labels),
                format!("must be '{expected}'"),
            )),
            Some(_) => {}
        }
    }
    let expected = |key: &str| required.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    if selector::matches(job.spec.selector.as_ref(), expected) == Some(false) {
        errs.push(FieldError::invalid(
            &FieldPath::new("spec").child("selector"),
            BadValue::Json(go_json::label_selector(job.raw().pointer("/spec/selector"))),
            "`selector` not auto-generated",
        ));
    }
    errs
}

/// `ValidateJobSpec`: `validateJobSpec`, then the selector's syntax and its match with the
/// template labels. Update validation runs this a second time, as upstream does.
pub fn validate_job_spec(job: &JobObject<'_>) -> ErrorList {
    let spec_path = FieldPath::new("spec");
    let mut errs = validate_counts_and_modes(job, &spec_path);
    errs.extend(managed_by::validate(
        job.spec.managed_by.as_deref(),
        &spec_path.child("managedBy"),
    ));
    errs.extend(validate_completion_mode(job, &spec_path));
    errs.extend(pod_failure_policy::validate(
        job,
        &spec_path.child("podFailurePolicy"),
    ));
    errs.extend(success_policy::validate(
        job,
        &spec_path.child("successPolicy"),
    ));
    errs.extend(validate_pod_replacement_policy(job, &spec_path));
    errs.extend(validate_restart_policy(job, &spec_path));
    match &job.spec.selector {
        None => errs.push(FieldError::required(&spec_path.child("selector"), "")),
        Some(sel) => errs.extend(selector::validate(sel, &spec_path.child("selector"))),
    }
    let empty = BTreeMap::new();
    let labels = template_labels(job).unwrap_or(&empty);
    if selector::matches_labels(job.spec.selector.as_ref(), labels) == Some(false) {
        let value = match template_labels(job) {
            Some(labels) => BadValue::json(labels),
            None => BadValue::Json("null".to_owned()),
        };
        errs.push(FieldError::invalid(
            &spec_path
                .child("template")
                .child("metadata")
                .child("labels"),
            value,
            "`selector` does not match template `labels`",
        ));
    }
    errs
}

/// The non-negative checks, then maxFailedIndexes' need for backoffLimitPerIndex.
fn validate_counts_and_modes(job: &JobObject<'_>, spec_path: &FieldPath) -> ErrorList {
    let s = &job.spec;
    let mut errs = ErrorList::new();
    let fields: [(&str, Option<i64>); 7] = [
        ("parallelism", s.parallelism.map(i64::from)),
        ("completions", s.completions.map(i64::from)),
        ("activeDeadlineSeconds", s.active_deadline_seconds),
        ("backoffLimit", s.backoff_limit.map(i64::from)),
        (
            "ttlSecondsAfterFinished",
            s.ttl_seconds_after_finished.map(i64::from),
        ),
        (
            "backoffLimitPerIndex",
            s.backoff_limit_per_index.map(i64::from),
        ),
        ("maxFailedIndexes", s.max_failed_indexes.map(i64::from)),
    ];
    for (name, value) in fields {
        if let Some(v) = value.filter(|v| *v < 0) {
            errs.push(FieldError::negative(&spec_path.child(name), v));
        }
    }
    if s.max_failed_indexes.is_some() && s.backoff_limit_per_index.is_none() {
        errs.push(FieldError::required(
            &spec_path.child("backoffLimitPerIndex"),
            "when maxFailedIndexes is specified",
        ));
    }
    errs
}

fn validate_completion_mode(job: &JobObject<'_>, spec_path: &FieldPath) -> ErrorList {
    let s = &job.spec;
    match s.completion_mode.as_deref() {
        Some("Indexed") => {
            let mut errs = indexed_limits(s, spec_path);
            errs.extend(indexed_high_completions_limits(s, spec_path));
            errs
        }
        None | Some("NonIndexed") => non_indexed_without_per_index_fields(s, spec_path),
        Some(other) => vec![FieldError::not_supported(
            &spec_path.child("completionMode"),
            BadValue::json_str(other),
            &["NonIndexed", "Indexed"],
        )],
    }
}

/// `spec.<field>` is invalid with the integer it holds.
fn invalid_int(spec_path: &FieldPath, field: &str, value: i32, detail: &str) -> FieldError {
    FieldError::invalid(&spec_path.child(field), BadValue::Int(value.into()), detail)
}

/// An Indexed Job needs `completions`, and its parallelism and failed-index budget are capped.
fn indexed_limits(s: &JobSpec, spec_path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::new();
    if s.completions.is_none() {
        errs.push(FieldError::required(
            &spec_path.child("completions"),
            "when completion mode is Indexed",
        ));
    }
    if let Some(p) = s.parallelism.filter(|p| *p > MAX_INDEXED_PARALLELISM) {
        errs.push(invalid_int(
            spec_path,
            "parallelism",
            p,
            "must be less than or equal to 100000 when completion mode is Indexed",
        ));
    }
    if let (Some(c), Some(m)) = (s.completions, s.max_failed_indexes)
        && m > c
    {
        errs.push(invalid_int(
            spec_path,
            "maxFailedIndexes",
            m,
            "must be less than or equal to completions",
        ));
    }
    if let Some(m) = s.max_failed_indexes.filter(|m| *m > MAX_FAILED_INDEXES) {
        errs.push(invalid_int(
            spec_path,
            "maxFailedIndexes",
            m,
            "must be less than or equal to 100000",
        ));
    }
    errs
}

/// Above 100000 completions with a per-index backoff limit, upstream asks for a
/// `maxFailedIndexes` and tighter caps, bounding the size of `status.failedIndexes`.
fn indexed_high_completions_limits(s: &JobSpec, spec_path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::new();
    if !(s.completions.is_some_and(|c| c > COMPLETIONS_SOFT_LIMIT)
        && s.backoff_limit_per_index.is_some())
    {
        return errs;
    }
    let high = "when completions are above 100000 and used with backoff limit per index";
    if s.max_failed_indexes.is_none() {
        errs.push(FieldError::required(
            &spec_path.child("maxFailedIndexes"),
            "must be specified when completions is above 100000",
        ));
    }
    if let Some(p) = s
        .parallelism
        .filter(|p| *p > PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS)
    {
        errs.push(invalid_int(
            spec_path,
            "parallelism",
            p,
            &format!("must be less than or equal to 10000 {high}"),
        ));
    }
    if let Some(m) = s
        .max_failed_indexes
        .filter(|m| *m > MAX_FAILED_INDEXES_FOR_HIGH_COMPLETIONS)
    {
        errs.push(invalid_int(
            spec_path,
            "maxFailedIndexes",
            m,
            &format!("must be less than or equal to 10000 {high}"),
        ));
    }
    errs
}

/// The per-index fields mean nothing without indexes.
fn non_indexed_without_per_index_fields(s: &JobSpec, spec_path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::new();
    if let Some(b) = s.backoff_limit_per_index {
        errs.push(invalid_int(
            spec_path,
            "backoffLimitPerIndex",
            b,
            "requires indexed completion mode",
        ));
    }
    if let Some(m) = s.max_failed_indexes {
        errs.push(invalid_int(
            spec_path,
            "maxFailedIndexes",
            m,
            "requires indexed completion mode",
        ));
    }
    errs
}

/// KEP-3939: `Failed` or `TerminatingOrFailed`, and only `Failed` with a pod failure policy.
/// Validated only when set: defaulting fills an absent value, never an empty one.
fn validate_pod_replacement_policy(job: &JobObject<'_>, spec_path: &FieldPath) -> ErrorList {
    let Some(policy) = job.spec.pod_replacement_policy.as_deref() else {
        return ErrorList::new();
    };
    let allowed: &[&str] = if job.spec.pod_failure_policy.is_some() {
        &["Failed"]
    } else {
        &["Failed", "TerminatingOrFailed"]
    };
    if allowed.contains(&policy) {
        return ErrorList::new();
    }
    vec![FieldError::not_supported(
        &spec_path.child("podReplacementPolicy"),
        BadValue::json_str(policy),
        allowed,
    )]
}

/// The template's restartPolicy: core validation's own NotSupported for an unknown value, then
/// the Job's rule (`OnFailure` or `Never`, and only `Never` with a pod failure policy).
fn validate_restart_policy(job: &JobObject<'_>, spec_path: &FieldPath) -> ErrorList {
    let path = spec_path.child("template.spec.restartPolicy");
    let policy = job.template.spec.restart_policy.as_deref().unwrap_or("");
    let mut errs = ErrorList::new();
    match policy {
        "Always" | "" => errs.push(FieldError::required(
            &path,
            "valid values: \"OnFailure\", \"Never\"",
        )),
        "OnFailure" if job.spec.pod_failure_policy.is_some() => errs.push(FieldError::invalid(
            &path,
            BadValue::json_str(policy),
            "only \"Never\" is supported when podFailurePolicy is specified",
        )),
        "OnFailure" | "Never" => {}
        other => {
            errs.push(FieldError::not_supported(
                &path,
                BadValue::json_str(other),
                &["Always", "OnFailure", "Never"],
            ));
            errs.push(FieldError::not_supported(
                &path,
                BadValue::json_str(other),
                &["OnFailure", "Never"],
            ));
        }
    }
    errs
}

/// An Indexed Job's last pod is named `<job>-<completions-1>` and that must be a DNS label.
fn validate_indexed_hostname(job: &JobObject<'_>) -> ErrorList {
    let Some(completions) = job.spec.completions.filter(|c| *c > 0 && job.is_indexed()) else {
        return ErrorList::new();
    };
    let hostname = format!("{}-{}", job.name(), completions - 1);
    if names::is_dns1123_label(&hostname) {
        return ErrorList::new();
    }
    vec![FieldError::invalid(
        &FieldPath::new("metadata").child("name"),
        BadValue::Str(job.name().to_owned()),
        format!("will not able to create pod with invalid DNS label: {hostname}"),
    )]
}
