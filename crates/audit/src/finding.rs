//! The record a violation is printed as: one JSON object per violation for scripts and CI
//! (`jobwarden audit -o json`, `jobwarden check -o json`), and the one-line text form. Pure
//! formatting; it decides nothing about what is a violation.

use serde::Serialize;

use crate::violations::{Rule, Violation};

/// Where a violation was found and what it is. `audit` fills `namespace`, `name` and `uid` from
/// the stored Job and has no `file`; `check` adds the `file` and gives what the manifest says
/// (`null` where it says nothing, e.g. a manifest's `uid`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub name: Option<&'a str>,
    pub uid: Option<&'a str>,
    pub rule: Rule,
    pub field: &'a str,
    pub message: &'a str,
}

impl<'a> Finding<'a> {
    pub fn new(job: JobRef<'a>, violation: &'a Violation) -> Self {
        Finding {
            file: None,
            namespace: job.namespace,
            name: job.name,
            uid: job.uid,
            rule: violation.rule,
            field: &violation.field,
            message: &violation.message,
        }
    }

    pub fn in_file(mut self, file: &'a str) -> Self {
        self.file = Some(file);
        self
    }

    /// One JSON object on one line.
    pub fn to_json_line(&self) -> String {
        // A struct of strings always serialises; the fallback only keeps this infallible.
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }
}

/// Which Job, as its metadata says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobRef<'a> {
    pub namespace: Option<&'a str>,
    pub name: Option<&'a str>,
    pub uid: Option<&'a str>,
}

impl<'a> JobRef<'a> {
    /// Reads `metadata.namespace`, `.name` and `.uid` from a Job's JSON.
    pub fn of(raw: &'a serde_json::Value) -> Self {
        let meta = |key: &str| {
            raw.get("metadata")
                .and_then(|m| m.get(key))
                .and_then(serde_json::Value::as_str)
        };
        JobRef {
            namespace: meta("namespace"),
            name: meta("name"),
            uid: meta("uid"),
        }
    }

    /// The text line's prefix, shaped like `check`'s `FILE: Job "NAME"`: `NAMESPACE: Job "NAME"`.
    pub fn label(&self) -> String {
        format!(
            "{}: Job {:?}",
            self.namespace.unwrap_or(""),
            self.name.unwrap_or("")
        )
    }
}

/// The text line for a violation of a stored Job: `team-a: Job "pi": spec.parallelism: …`.
pub fn text_line(job: JobRef<'_>, violation: &Violation) -> String {
    format!("{}: {violation}", job.label())
}
