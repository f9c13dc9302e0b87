//! `metav1.LabelSelector`: its syntax (`ValidateLabelSelector`) and what it matches
//! (`LabelSelectorAsSelector(...).Matches`), for the Job's `spec.selector`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::field::{BadValue, FieldError, FieldPath};
use super::{ErrorList, names};

fn label_key_errors(key: &str, path: &FieldPath, errs: &mut ErrorList) {
    for msg in names::qualified_name(key) {
        errs.push(FieldError::invalid(
            path,
            BadValue::Str(key.to_owned()),
            msg,
        ));
    }
}

pub fn validate(selector: &LabelSelector, path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::new();
    let labels_path = path.child("matchLabels");
    for (k, v) in selector.match_labels.iter().flatten() {
        label_key_errors(k, &labels_path, &mut errs);
        for msg in names::label_value(v) {
            errs.push(FieldError::invalid(
                &labels_path,
                BadValue::Str(v.clone()),
                msg,
            ));
        }
    }
    let exprs_path = path.child("matchExpressions");
    for (i, e) in selector.match_expressions.iter().flatten().enumerate() {
        let p = exprs_path.index(i);
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => errs.push(FieldError::required(
                &p.child("values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::forbidden(
                &p.child("values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            op => errs.push(FieldError::invalid(
                &p.child("operator"),
                BadValue::Str(op.to_owned()),
                "not a valid selector operator",
            )),
        }
        label_key_errors(&e.key, &p.child("key"), &mut errs);
        for (j, v) in values.iter().enumerate() {
            for msg in names::label_value(v) {
                errs.push(FieldError::invalid(
                    &p.child("values").index(j),
                    BadValue::Str(v.clone()),
                    msg,
                ));
            }
        }
    }
    errs
}

/// Whether the labels `label(key)` looks up satisfy the selector. A selector upstream cannot
/// convert (an unknown operator) is `None`: upstream then skips the match check. No selector
/// matches nothing; an empty one matches everything.
pub fn matches<'l>(
    selector: Option<&LabelSelector>,
    label: impl Fn(&str) -> Option<&'l str>,
) -> Option<bool> {
    let Some(selector) = selector else {
        return Some(false);
    };
    let mut all = true;
    for (k, v) in selector.match_labels.iter().flatten() {
        all &= label(k) == Some(v.as_str());
    }
    for e in selector.match_expressions.iter().flatten() {
        let values = e.values.as_deref().unwrap_or_default();
        let value = label(&e.key);
        let listed = |v: &str| values.iter().any(|x| x == v);
        all &= match e.operator.as_str() {
            "In" if !values.is_empty() => value.is_some_and(listed),
            "NotIn" if !values.is_empty() => !value.is_some_and(listed),
            "Exists" if values.is_empty() => value.is_some(),
            "DoesNotExist" if values.is_empty() => value.is_none(),
            _ => return None,
        };
    }
    Some(all)
}

/// `matches` over a label map.
pub fn matches_labels(
    selector: Option<&LabelSelector>,
    labels: &BTreeMap<String, String>,
) -> Option<bool> {
    matches(selector, |k| labels.get(k).map(String::as_str))
}
