//! Jobs nobody runs. A Job that delegates itself (KEP-4368 `spec.managedBy`) to a controller
//! that is not installed, not running, or misspelled is accepted and then never progresses: the
//! built-in controller leaves it alone and nothing else looks at it. The KEP names this as its
//! drawback; this decides when a stored Job shows it. Pure: the clock is a parameter, nothing
//! is read. `jobwarden audit`, the in-process audit and `jobwarden explain` all ask it.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

// Whole-second durations, printed as Go and kubectl print them (`2m0s`).
use jobwarden_rules::seconds;
use jobwarden_rules::well_known::BUILT_IN_CONTROLLER_NAME;

use crate::finding::JobRef;
use crate::snapshot::{JobFindings, SnapshotFindings, StoredJob};
use crate::violations::{Rule, Violation};

/// How long a delegated Job may show no sign of a controller before it is reported.
pub const DEFAULT_STUCK_AFTER: Duration = Duration::from_secs(120);

/// What is known of a Job's pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodEvidence {
    /// The pods carrying the Job's `controller-uid` label were listed: this many.
    Listed(usize),
    /// Only the Job was read (`audit` lists Jobs and nothing else; the in-process audit reads
    /// the controller's Job cache and adds no request per Job). A controller that has made pods
    /// counts them in the status, so a status that counts none stands for "no pods": a pod made
    /// by a controller that writes no status at all would go unseen, which is no sign of
    /// acting either as far as the Job's owner can tell.
    StatusOnly,
}

/// A Job delegated to a controller that shows no sign of acting on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StuckDelegation {
    /// The `spec.managedBy` value nobody answers to.
    pub managed_by: String,
    /// Since the Job was created.
    pub age: Duration,
    /// The threshold it is past.
    pub after: Duration,
}

impl StuckDelegation {
    /// The audit's words, without the age (which grows every pass: a Warning Event is owed
    /// again only when the words change).
    /// As the audit reports it: on `spec.managedBy`, in the family of its own.
    pub fn violation(&self) -> Violation {
        Violation {
            rule: Rule::StuckDelegation,
            field: "spec.managedBy".to_owned(),
            message: self.message(),
        }
    }

    pub fn message(&self) -> String {
        format!(
            "no controller is running this Job: {:?} shows no sign of acting on it {} after its creation (not suspended, no status.startTime, no pods); is that controller installed, running, and spelled so?",
            self.managed_by,
            seconds::format(self.after.as_secs())
        )
    }
}

/// The stuck Jobs of a snapshot, added to what the rest of the audit found about it: each as a
/// [`Rule::StuckDelegation`] violation of its Job (a Job that also breaks a rule gets it beside
/// the others, a Job that breaks none is added after the offending ones). Only the Jobs
/// themselves are read ([`PodEvidence::StatusOnly`]).
pub fn add_stuck<J: StoredJob>(
    findings: &mut SnapshotFindings,
    jobs: &[J],
    now: Timestamp,
    after: Duration,
) {
    for job in jobs {
        let Ok(raw) = job.to_json() else { continue };
        let Some(stuck) = stuck_delegation(&raw, PodEvidence::StatusOnly, now, after) else {
            continue;
        };
        let job = JobRef::of(&raw);
        let uid = job.uid.unwrap_or("");
        let violation = stuck.violation();
        match findings.offending.iter_mut().find(|f| f.uid == uid) {
            Some(found) => found.violations.push(violation),
            None => findings.offending.push(JobFindings {
                namespace: job.namespace.unwrap_or("").to_owned(),
                name: job.name.unwrap_or("").to_owned(),
                uid: uid.to_owned(),
                violations: vec![violation],
            }),
        }
    }
}

/// `Some` when `job` is delegated to a controller other than the built-in one, is neither
/// suspended, finished nor being deleted, shows nothing a controller writes (no `startTime`,
/// no condition, no pod counted) and has no pods by `pods`, and was created at least `after`
/// before `now`. A Job without a readable `creationTimestamp` is never judged stuck.
pub fn stuck_delegation(
    job: &Value,
    pods: PodEvidence,
    now: Timestamp,
    after: Duration,
) -> Option<StuckDelegation> {
    let spec = job.get("spec")?;
    let managed_by = spec.get("managedBy")?.as_str()?;
    if managed_by == BUILT_IN_CONTROLLER_NAME {
        return None;
    }
    if spec.get("suspend").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    let meta = job.get("metadata")?;
    if meta.get("deletionTimestamp").is_some_and(|t| !t.is_null()) {
        return None;
    }
    if acted_on(job.get("status")) {
        return None;
    }
    if let PodEvidence::Listed(n) = pods
        && n > 0
    {
        return None;
    }
    let created: Timestamp = meta.get("creationTimestamp")?.as_str()?.parse().ok()?;
    let age = Duration::try_from(now.duration_since(created)).ok()?;
    (age >= after).then(|| StuckDelegation {
        managed_by: managed_by.to_owned(),
        age,
        after,
    })
}

/// Anything a Job controller writes when it acts: a start time, a condition, a pod counted
/// (active, ready, terminating, succeeded, failed, or not yet counted), an index recorded.
fn acted_on(status: Option<&Value>) -> bool {
    let Some(status) = status.and_then(Value::as_object) else {
        return false;
    };
    let set = |key: &str| status.get(key).is_some_and(|v| !v.is_null());
    let positive = |key: &str| status.get(key).and_then(Value::as_i64).unwrap_or(0) > 0;
    let non_empty = |key: &str| {
        status.get(key).is_some_and(|v| match v {
            Value::String(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => o
                .values()
                .any(|v| v.as_array().is_some_and(|a| !a.is_empty())),
            _ => false,
        })
    };
    set("startTime")
        || set("completionTime")
        || non_empty("conditions")
        || ["active", "ready", "terminating", "succeeded", "failed"]
            .into_iter()
            .any(positive)
        || [
            "completedIndexes",
            "failedIndexes",
            "uncountedTerminatedPods",
        ]
        .into_iter()
        .any(non_empty)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const CREATED: &str = "2026-01-01T00:00:00Z";

    fn at(secs: i64) -> Timestamp {
        let created: Timestamp = CREATED.parse().expect("a timestamp");
        created
            .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(secs))
            .expect("in range")
    }

    fn job(managed_by: Option<&str>) -> Value {
        let mut job = json!({
            "metadata": {"name": "j", "namespace": "ns", "creationTimestamp": CREATED},
            "spec": {},
            "status": {},
        });
        if let Some(m) = managed_by {
            job["spec"]["managedBy"] = json!(m);
        }
        job
    }

    fn with(mut job: Value, pointer: &str, value: Value) -> Value {
        if let Some(slot) = job.pointer_mut(pointer) {
            *slot = value;
        } else if let Some((parent, key)) = pointer.rsplit_once('/')
            && let Some(obj) = job.pointer_mut(parent).and_then(Value::as_object_mut)
        {
            obj.insert(key.to_owned(), value);
        }
        job
    }

    #[test]
    fn decides_from_the_job_its_pods_and_its_age() {
        let nobody = Some("example.com/nobody");
        let two_min = DEFAULT_STUCK_AFTER;
        let cases: Vec<(&str, Value, PodEvidence, i64, bool)> = vec![
            (
                "delegated, untouched, old",
                job(nobody),
                PodEvidence::StatusOnly,
                121,
                true,
            ),
            (
                "exactly at the threshold",
                job(nobody),
                PodEvidence::StatusOnly,
                120,
                true,
            ),
            (
                "too young",
                job(nobody),
                PodEvidence::StatusOnly,
                119,
                false,
            ),
            (
                "listed: no pods",
                job(nobody),
                PodEvidence::Listed(0),
                300,
                true,
            ),
            (
                "listed: a pod",
                job(nobody),
                PodEvidence::Listed(1),
                300,
                false,
            ),
            (
                "built-in controller",
                job(Some(BUILT_IN_CONTROLLER_NAME)),
                PodEvidence::StatusOnly,
                300,
                false,
            ),
            (
                "no managedBy",
                job(None),
                PodEvidence::StatusOnly,
                300,
                false,
            ),
            (
                "suspended",
                with(job(nobody), "/spec/suspend", json!(true)),
                PodEvidence::StatusOnly,
                300,
                false,
            ),
            (
                "suspend: false",
                with(job(nobody), "/spec/suspend", json!(false)),
                PodEvidence::StatusOnly,
                300,
                true,
            ),
            (
                "being deleted",
                with(job(nobody), "/metadata/deletionTimestamp", json!(CREATED)),
                PodEvidence::StatusOnly,
                300,
                false,
            ),
            (
                "started",
                with(job(nobody), "/status/startTime", json!(CREATED)),
                PodEvidence::StatusOnly,
                300,
                false,
            ),
            (
                "a condition",
                with(
                    job(nobody),
                    "/status/conditions",
                    json!([{"type": "Suspended", "status": "False"}]),
                ),
                PodEvidence::StatusOnly,
                300,
                false,
            ),
            (
                "empty conditions",
                with(job(nobody), "/status/conditions", json!([])),
                PodEvidence::StatusOnly,
                300,
                true,
            ),
            (
                "a pod active",
                with(job(nobody), "/status/active", json!(1)),
                PodEvidence::StatusOnly,
                300,
                false,
            ),
            (
                "a pod failed",
                with(job(nobody), "/status/failed", json!(2)),
                PodEvidence::StatusOnly,
                300,
                false,
            ),
            (
                "zero counters",
                with(
                    with(job(nobody), "/status/active", json!(0)),
                    "/status/ready",
                    json!(0),
                ),
                PodEvidence::StatusOnly,
                300,
                true,
            ),
            (
                "an index completed",
                with(job(nobody), "/status/completedIndexes", json!("0")),
                PodEvidence::StatusOnly,
                300,
                false,
            ),
            (
                "uncounted pods",
                with(
                    job(nobody),
                    "/status/uncountedTerminatedPods",
                    json!({"failed": ["u"]}),
                ),
                PodEvidence::StatusOnly,
                300,
                false,
            ),
            (
                "empty uncounted",
                with(
                    job(nobody),
                    "/status/uncountedTerminatedPods",
                    json!({"failed": []}),
                ),
                PodEvidence::StatusOnly,
                300,
                true,
            ),
            (
                "no creationTimestamp",
                with(job(nobody), "/metadata/creationTimestamp", json!(null)),
                PodEvidence::StatusOnly,
                300,
                false,
            ),
            (
                "created in the future",
                job(nobody),
                PodEvidence::StatusOnly,
                -5,
                false,
            ),
        ];
        for (what, job, pods, secs, want) in cases {
            let got = stuck_delegation(&job, pods, at(secs), two_min);
            assert_eq!(got.is_some(), want, "{what}: {got:?}");
        }
    }

    #[test]
    fn names_the_controller_and_the_threshold_not_the_age() {
        let job = job(Some("example.com/nobody"));
        let early = stuck_delegation(&job, PodEvidence::StatusOnly, at(130), DEFAULT_STUCK_AFTER);
        let late = stuck_delegation(&job, PodEvidence::StatusOnly, at(4000), DEFAULT_STUCK_AFTER);
        let (early, late) = (early.expect("stuck"), late.expect("stuck"));
        assert_eq!(early.managed_by, "example.com/nobody");
        assert_eq!(early.age, Duration::from_secs(130));
        assert_eq!(early.message(), late.message());
        assert_eq!(
            early.message(),
            "no controller is running this Job: \"example.com/nobody\" shows no sign of acting on it 2m0s after its creation (not suspended, no status.startTime, no pods); is that controller installed, running, and spelled so?"
        );
    }
}
