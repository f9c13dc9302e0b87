//! Auditing a snapshot of Jobs handed over by whoever keeps them (the controller's cache), and
//! the numbers the gauge shows for it. Pure: the snapshot is data, nothing is read or written.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use jobwarden_admission::Policy;
use k8s_openapi::api::batch::v1::Job;
use serde_json::Value;

use crate::violations::{Rule, Violation, audit_job};

/// A Job as a cache holds it, viewed as the JSON the API returns. A raw `Value` is audited as
/// it is; a typed `Job` is serialised first, so fields this build's `k8s-openapi` does not know
/// (a rule's `name` from a newer API) are not seen.
pub trait StoredJob {
    fn to_json(&self) -> Result<Cow<'_, Value>, serde_json::Error>;
}

impl StoredJob for Value {
    fn to_json(&self) -> Result<Cow<'_, Value>, serde_json::Error> {
        Ok(Cow::Borrowed(self))
    }
}

impl StoredJob for Job {
    fn to_json(&self) -> Result<Cow<'_, Value>, serde_json::Error> {
        serde_json::to_value(self).map(Cow::Owned)
    }
}

impl StoredJob for kube::api::DynamicObject {
    fn to_json(&self) -> Result<Cow<'_, Value>, serde_json::Error> {
        serde_json::to_value(self).map(Cow::Owned)
    }
}

impl<T: StoredJob + ?Sized> StoredJob for Arc<T> {
    fn to_json(&self) -> Result<Cow<'_, Value>, serde_json::Error> {
        (**self).to_json()
    }
}

/// An offending Job and everything it breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFindings {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub violations: Vec<Violation>,
}

/// What one pass over a snapshot found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotFindings {
    /// Jobs in the snapshot.
    pub jobs: usize,
    /// Jobs that could not be read as Jobs at all (reported in the logs and a gauge).
    pub unreadable: Vec<String>,
    /// The offending Jobs, in snapshot order.
    pub offending: Vec<JobFindings>,
}

impl SnapshotFindings {
    /// Violations per namespace and rule: the gauge's values. Pairs without a violation are
    /// absent.
    pub fn counts(&self) -> BTreeMap<(String, Rule), i64> {
        let mut counts = BTreeMap::new();
        for job in &self.offending {
            for v in &job.violations {
                *counts.entry((job.namespace.clone(), v.rule)).or_insert(0) += 1;
            }
        }
        counts
    }
}

/// Audits every Job of a snapshot.
pub fn audit_snapshot<J: StoredJob>(policy: &Policy, jobs: &[J]) -> SnapshotFindings {
    let mut findings = SnapshotFindings {
        jobs: jobs.len(),
        ..SnapshotFindings::default()
    };
    for job in jobs {
        let raw = match job.to_json() {
            Ok(raw) => raw,
            Err(e) => {
                findings
                    .unreadable
                    .push(format!("a Job that does not serialise: {e}"));
                continue;
            }
        };
        let text = |key: &str| {
            raw.get("metadata")
                .and_then(|m| m.get(key))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        match audit_job(&raw, policy) {
            Ok(violations) if violations.is_empty() => {}
            Ok(violations) => findings.offending.push(JobFindings {
                namespace: text("namespace"),
                name: text("name"),
                uid: text("uid"),
                violations,
            }),
            Err(e) => {
                findings
                    .unreadable
                    .push(format!("{}/{}: {e}", text("namespace"), text("name")))
            }
        }
    }
    findings
}
