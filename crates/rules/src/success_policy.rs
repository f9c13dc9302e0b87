//! KEP-3998 `spec.successPolicy`, as upstream's `validateSuccessPolicy` and
//! `validateSuccessPolicyRule` check it (the shipped API's `rules`, not the seed's `criteria`).

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
    // Upstream dereferences completions here and panics when it is nil; the Required error on
    // spec.completions is already in the list, so only the checks that need no bound run.
    let completions = job.spec.completions;
    for (i, rule) in policy.rules.iter().enumerate() {
        let rule_path = rules_path.index(i);
        let mut total_indexes = 0u64;
        if let Some(indexes) = &rule.succeeded_indexes {
            let indexes_path = rule_path.child("succeededIndexes");
            if indexes.len() > MAX_SUCCEEDED_INDEXES_BYTES {
                errs.push(FieldError::too_long(
                    &indexes_path,
                    MAX_SUCCEEDED_INDEXES_BYTES,
                ));
            }
            if let Some(completions) = completions {
                match indexes::count_valid(indexes, completions) {
                    Ok(total) => total_indexes = total,
                    Err(e) => errs.push(FieldError::invalid(
                        &indexes_path,
                        BadValue::Str(indexes.clone()),
                        format!("error parsing succeededIndexes: {e}"),
                    )),
                }
            }
        }
        if let Some(count) = rule.succeeded_count {
            let count_path = rule_path.child("succeededCount");
            if count < 0 {
                errs.push(FieldError::negative(&count_path, count.into()));
            }
            if let Some(completions) = completions {
                if count > completions {
                    errs.push(FieldError::invalid(
                        &count_path,
                        BadValue::Int(count.into()),
                        format!("must be less than or equal to {completions} (the number of specified completions)"),
                    ));
                }
                if rule.succeeded_indexes.is_some() && i64::from(count) > total_indexes as i64 {
                    errs.push(FieldError::invalid(
                        &count_path,
                        BadValue::Int(count.into()),
                        format!("must be less than or equal to {total_indexes} (the number of indexes in the specified succeededIndexes field)"),
                    ));
                }
            }
        }
        if rule.succeeded_count.is_none() && rule.succeeded_indexes.is_none() {
            errs.push(FieldError::required(
                &rule_path,
                "at least one of succeededCount or succeededIndexes must be specified",
            ));
        }
    }
    errs
}
