//! KEP-3998 `spec.successPolicy`, as upstream's `validateSuccessPolicy` and
//! `validateSuccessPolicyRule` check it (the shipped API's `rules`, not the seed's `criteria`).

use k8s_openapi::api::batch::v1::SuccessPolicyRule;

use super::field::{BadValue, FieldError, FieldPath};
use super::{ErrorList, JobObject, go_json, indexes};

pub const MAX_RULES: usize = 20;
pub const MAX_SUCCEEDED_INDEXES_BYTES: usize = 64 * 1024;

pub fn validate(job: &JobObject<'_>, path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::new();
    let Some(policy) = &job.spec.success_policy else {
        return errs;
    };
    if !job.is_indexed() {
        let raw = job.raw().pointer("/spec/successPolicy");
        errs.push(FieldError::invalid(
            path,
            BadValue::Json(go_json::success_policy(raw)),
            "requires indexed completion mode",
        ));
        return errs;
    }
    let rules_path = path.child("rules");
    if policy.rules.is_empty() {
        errs.push(FieldError::required(
            &rules_path,
            "at least one rules must be specified when the successPolicy is specified",
        ));
    }
    if policy.rules.len() > MAX_RULES {
        errs.push(FieldError::too_many(
            &rules_path,
            policy.rules.len(),
            MAX_RULES,
        ));
    }
    for (i, rule) in policy.rules.iter().enumerate() {
        errs.extend(validate_rule(
            rule,
            job.spec.completions,
            &rules_path.index(i),
        ));
    }
    errs
}

/// `validateSuccessPolicyRule`. Upstream dereferences completions here and panics when it is
/// nil; the Required error on spec.completions is already in the list, so only the checks that
/// need no bound run.
fn validate_rule(
    rule: &SuccessPolicyRule,
    completions: Option<i32>,
    path: &FieldPath,
) -> ErrorList {
    let mut errs = ErrorList::new();
    let mut total_indexes = 0u64;
    if let Some(indexes) = &rule.succeeded_indexes {
        let (indexes_errs, total) =
            validate_succeeded_indexes(indexes, completions, &path.child("succeededIndexes"));
        errs.extend(indexes_errs);
        total_indexes = total;
    }
    if let Some(count) = rule.succeeded_count {
        // The bound from succeededIndexes applies only when the rule has them.
        let indexes_total = rule.succeeded_indexes.as_ref().map(|_| total_indexes);
        errs.extend(validate_succeeded_count(
            count,
            completions,
            indexes_total,
            &path.child("succeededCount"),
        ));
    }
    if rule.succeeded_count.is_none() && rule.succeeded_indexes.is_none() {
        errs.push(FieldError::required(
            path,
            "at least one of succeededCount or succeededIndexes must be specified",
        ));
    }
    errs
}

/// `succeededIndexes` fits its size limit and parses below `completions`; the number of indexes
/// it holds (0 when it cannot be counted).
fn validate_succeeded_indexes(
    indexes: &str,
    completions: Option<i32>,
    indexes_path: &FieldPath,
) -> (ErrorList, u64) {
    let mut errs = ErrorList::new();
    let mut total_indexes = 0u64;
    if indexes.len() > MAX_SUCCEEDED_INDEXES_BYTES {
        errs.push(FieldError::too_long(
            indexes_path,
            MAX_SUCCEEDED_INDEXES_BYTES,
        ));
    }
    if let Some(completions) = completions {
        match indexes::count_valid(indexes, completions) {
            Ok(total) => total_indexes = total,
            Err(e) => errs.push(FieldError::invalid(
                indexes_path,
                BadValue::Str(indexes.to_owned()),
                format!("error parsing succeededIndexes: {e}"),
            )),
        }
    }
    (errs, total_indexes)
}

/// `succeededCount` is not negative, nor more than `completions`, nor more than the indexes in
/// the rule's `succeededIndexes` (`indexes_total`, when it has them).
fn validate_succeeded_count(
    count: i32,
    completions: Option<i32>,
    indexes_total: Option<u64>,
    count_path: &FieldPath,
) -> ErrorList {
    let mut errs = ErrorList::new();
    if count < 0 {
        errs.push(FieldError::negative(count_path, count.into()));
    }
    let Some(completions) = completions else {
        return errs;
    };
    if count > completions {
        errs.push(FieldError::invalid(
            count_path,
            BadValue::Int(count.into()),
            format!(
                "must be less than or equal to {completions} (the number of specified completions)"
            ),
        ));
    }
    if let Some(total_indexes) = indexes_total
        && i64::from(count) > total_indexes as i64
    {
        errs.push(FieldError::invalid(
            count_path,
            BadValue::Int(count.into()),
            format!("must be less than or equal to {total_indexes} (the number of indexes in the specified succeededIndexes field)"),
        ));
    }
    errs
}
