//! A webhook's match condition as data, read two ways: written as the CEL expression
//! kube-apiserver evaluates (`cel`), and evaluated here on an AdmissionReview request (`sends`),
//! so the tests can hold the conditions against the conformance corpus without an API server,
//! and the e2e suite holds the same text against a real one.
//!
//! The CEL never errors on a request jobwarden registers for: every path is guarded by `has()`
//! one level at a time (a missing key is an error in CEL, and an error in a fail-closed webhook's
//! condition refuses the request), and `oldObject`, null on CREATE, is compared with null before
//! it is read.

use serde_json::Value;

/// The object a condition reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `object`: the Job as it would be stored.
    New,
    /// `oldObject`: the Job as it is stored (null on CREATE).
    Old,
}

impl Side {
    /// The CEL variable, which is also the member of the AdmissionReview request.
    fn cel(self) -> &'static str {
        match self {
            Side::New => "object",
            Side::Old => "oldObject",
        }
    }
}

/// One condition on a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guard {
    /// `request.operation` is this one (`CREATE`, `UPDATE`).
    Operation(&'static str),
    /// The Job has an annotation whose key starts with this prefix.
    AnnotationPrefix(Side, &'static str),
    /// The Job has this annotation.
    Annotation(Side, &'static str),
    /// `spec.<field>` is set (present and not null).
    SpecField(Side, &'static str),
    /// `spec.suspend` is true.
    Suspended(Side),
    /// The Job has `Complete=True` or `Failed=True`.
    Finished(Side),
    /// `spec.managedBy` is set and is none of these.
    ManagedByNoneOf(Vec<String>),
    /// A CREATE, or an UPDATE that changes `spec` or `metadata.annotations`.
    CreateOrSpecOrAnnotationsChanged,
    /// `status` differs between the two objects.
    StatusChanged,
    Not(Box<Guard>),
    /// True when any is (false when empty).
    Any(Vec<Guard>),
    /// True when all are (true when empty).
    All(Vec<Guard>),
}

impl std::ops::Not for Guard {
    type Output = Guard;

    fn not(self) -> Guard {
        Guard::Not(Box::new(self))
    }
}

impl Guard {
    /// The CEL expression kube-apiserver evaluates.
    pub fn cel(&self) -> String {
        match self {
            Guard::Operation(op) => format!("request.operation == {}", quote(op)),
            Guard::AnnotationPrefix(side, prefix) => format!(
                "{}has({s}.metadata.annotations) && {s}.metadata.annotations.exists(k, k.startsWith({}))",
                null_guard(*side),
                quote(prefix),
                s = side.cel()
            ),
            Guard::Annotation(side, key) => format!(
                "{}has({s}.metadata.annotations) && {} in {s}.metadata.annotations",
                null_guard(*side),
                quote(key),
                s = side.cel()
            ),
            Guard::SpecField(side, field) => {
                format!("{}has({}.spec.{field})", null_guard(*side), side.cel())
            }
            Guard::Suspended(side) => format!(
                "{}has({s}.spec.suspend) && {s}.spec.suspend == true",
                null_guard(*side),
                s = side.cel()
            ),
            Guard::Finished(side) => format!(
                "{}has({s}.status) && has({s}.status.conditions) && \
                 {s}.status.conditions.exists(c, (c.type == 'Complete' || c.type == 'Failed') && c.status == 'True')",
                null_guard(*side),
                s = side.cel()
            ),
            Guard::ManagedByNoneOf(names) => format!(
                "has(object.spec.managedBy) && !(object.spec.managedBy in [{}])",
                names
                    .iter()
                    .map(|n| quote(n))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Guard::CreateOrSpecOrAnnotationsChanged => "request.operation != 'UPDATE' || \
                 object.spec != oldObject.spec || \
                 has(object.metadata.annotations) != has(oldObject.metadata.annotations) || \
                 (has(object.metadata.annotations) && \
                 object.metadata.annotations != oldObject.metadata.annotations)"
                .to_owned(),
            Guard::StatusChanged => "has(object.status) != has(oldObject.status) || \
                 (has(object.status) && object.status != oldObject.status)"
                .to_owned(),
            Guard::Not(inner) => format!("!({})", inner.cel()),
            Guard::Any(any) if any.is_empty() => "false".to_owned(),
            Guard::Any(any) => join(any, " || "),
            Guard::All(all) if all.is_empty() => "true".to_owned(),
            Guard::All(all) => join(all, " && "),
        }
    }

    /// Whether the condition holds for an AdmissionReview `request`, as the CEL above does.
    pub fn sends(&self, request: &Value) -> bool {
        let object = |side: Side| Some(&request[side.cel()]).filter(|o| !o.is_null());
        let spec = |side: Side, field: &str| {
            object(side)
                .and_then(|o| o.pointer(&format!("/spec/{field}")))
                .filter(|v| !v.is_null())
        };
        let annotations = |side: Side| {
            object(side)
                .and_then(|o| o.pointer("/metadata/annotations"))
                .and_then(Value::as_object)
        };
        match self {
            Guard::Operation(op) => request["operation"] == *op,
            Guard::AnnotationPrefix(side, prefix) => {
                annotations(*side).is_some_and(|a| a.keys().any(|k| k.starts_with(prefix)))
            }
            Guard::Annotation(side, key) => {
                annotations(*side).is_some_and(|a| a.contains_key(*key))
            }
            Guard::SpecField(side, field) => spec(*side, field).is_some(),
            Guard::Suspended(side) => spec(*side, "suspend") == Some(&Value::Bool(true)),
            Guard::Finished(side) => object(*side)
                .and_then(|o| o.pointer("/status/conditions"))
                .and_then(Value::as_array)
                .is_some_and(|conditions| {
                    conditions.iter().any(|c| {
                        (c["type"] == "Complete" || c["type"] == "Failed") && c["status"] == "True"
                    })
                }),
            Guard::ManagedByNoneOf(names) => spec(Side::New, "managedBy")
                .and_then(Value::as_str)
                .is_some_and(|m| !names.iter().any(|n| n == m)),
            Guard::CreateOrSpecOrAnnotationsChanged => {
                let part =
                    |side: Side, pointer: &str| object(side).and_then(|o| o.pointer(pointer));
                request["operation"] != "UPDATE"
                    || part(Side::New, "/spec") != part(Side::Old, "/spec")
                    || part(Side::New, "/metadata/annotations")
                        != part(Side::Old, "/metadata/annotations")
            }
            Guard::StatusChanged => {
                object(Side::New).and_then(|o| o.get("status"))
                    != object(Side::Old).and_then(|o| o.get("status"))
            }
            Guard::Not(inner) => !inner.sends(request),
            Guard::Any(any) => any.iter().any(|g| g.sends(request)),
            Guard::All(all) => all.iter().all(|g| g.sends(request)),
        }
    }
}

/// `oldObject` is null on CREATE: reading it then is an error, not false.
fn null_guard(side: Side) -> &'static str {
    match side {
        Side::New => "",
        Side::Old => "oldObject != null && ",
    }
}

/// Joins conditions, each in parentheses when it has operators of its own.
fn join(guards: &[Guard], operator: &str) -> String {
    if let [only] = guards {
        return only.cel();
    }
    guards
        .iter()
        .map(|g| match g {
            Guard::Operation(_) | Guard::SpecField(Side::New, _) | Guard::Not(_) => g.cel(),
            _ => format!("({})", g.cel()),
        })
        .collect::<Vec<_>>()
        .join(operator)
}

/// A CEL string literal.
pub(crate) fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}
