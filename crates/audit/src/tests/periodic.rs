//! The periodic audit driven pass by pass, with a snapshot function and an event sink that are
//! fakes: which Events are published when, what the gauge says, what is forgotten. Nothing here
//! waits for a timer.

use std::sync::{Arc, Mutex};

use jobwarden_admission::Policy;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use serde_json::{Value, json};

use super::builder::{job, uid_of};
use crate::event_memory::{AuditWarning, EventMemory, MAX_NOTE_BYTES, warnings_for};
use crate::event_sink::{EventSink, SinkError};
use crate::metrics::register_metrics;
use crate::periodic::{AuditConfig, PeriodicAudit};
use crate::snapshot::JobFindings;
use crate::violations::{Rule, Violation};

/// Records what it is asked to publish; fails while `failing` is set.
#[derive(Clone, Default)]
struct FakeSink {
    published: Arc<Mutex<Vec<AuditWarning>>>,
    failing: Arc<Mutex<bool>>,
}

impl FakeSink {
    /// What was published since the last call, as `(job name, reason, note)`.
    fn take(&self) -> Vec<(String, &'static str, String)> {
        let mut published = self.published.lock().expect("not poisoned");
        published
            .drain(..)
            .map(|w| (w.name, w.reason, w.note))
            .collect()
    }

    fn fail(&self, failing: bool) {
        *self.failing.lock().expect("not poisoned") = failing;
    }
}

impl EventSink for FakeSink {
    async fn publish(&self, warning: &AuditWarning) -> Result<(), SinkError> {
        if *self.failing.lock().expect("not poisoned") {
            return Err("the API server said no".into());
        }
        self.published
            .lock()
            .expect("not poisoned")
            .push(warning.clone());
        Ok(())
    }
}

/// The Jobs the next snapshot returns; `None` means no view of them.
#[derive(Clone, Default)]
struct FakeCache(Arc<Mutex<Option<Vec<Value>>>>);

impl FakeCache {
    fn holds(&self, jobs: Vec<Value>) {
        *self.0.lock().expect("not poisoned") = Some(jobs);
    }

    fn unavailable(&self) {
        *self.0.lock().expect("not poisoned") = None;
    }

    fn snapshot(&self) -> impl FnMut() -> Option<Vec<Value>> + Send + use<> {
        let cache = self.0.clone();
        move || cache.lock().expect("not poisoned").clone()
    }
}

type Snapshot = Box<dyn FnMut() -> Option<Vec<Value>> + Send>;

struct Harness {
    cache: FakeCache,
    sink: FakeSink,
    registry: Registry,
    audit: PeriodicAudit<Snapshot, FakeSink>,
}

fn harness(policy: Policy, max_events_per_pass: usize) -> Harness {
    let cache = FakeCache::default();
    let sink = FakeSink::default();
    let mut registry = Registry::default();
    let metrics = register_metrics(&mut registry);
    let snapshot: Snapshot = Box::new(cache.snapshot());
    let audit = PeriodicAudit::new(
        Arc::new(policy),
        snapshot,
        sink.clone(),
        metrics,
        AuditConfig {
            max_events_per_pass,
            ..AuditConfig::default()
        },
    );
    Harness {
        cache,
        sink,
        registry,
        audit,
    }
}

impl Harness {
    /// The `jobwarden_audit_violations` lines of `/metrics` of a namespace, sorted (each rule's
    /// baseline at 0 left out).
    fn gauge(&self) -> Vec<String> {
        let mut text = String::new();
        encode(&mut text, &self.registry).expect("encodes");
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with("jobwarden_audit_violations{"))
            .filter(|l| !l.starts_with("jobwarden_audit_violations{namespace=\"\","))
            .map(str::to_owned)
            .collect();
        lines.sort();
        lines
    }

    /// The line of the series `name` (with its labels, if any).
    fn metric(&self, name: &str) -> Option<String> {
        let mut text = String::new();
        encode(&mut text, &self.registry).expect("encodes");
        text.lines()
            .find(|l| l.strip_prefix(name).is_some_and(|v| v.starts_with(' ')))
            .map(str::to_owned)
    }
}

const NEGATIVE: &str = "spec.parallelism: Invalid value: -1: must be greater than or equal to 0";

fn negative_parallelism(name: &str, value: i64) -> Value {
    job(name).spec("parallelism", json!(value)).build()
}

fn unlisted_controller(name: &str) -> Value {
    job(name)
        .namespace("team-b")
        .spec("managedBy", json!("example.com/other"))
        .build()
}

fn kueue_only() -> Policy {
    Policy {
        allowed_managed_by: vec!["kueue.x-k8s.io/multikueue".to_owned()],
        ..Policy::default()
    }
}

#[tokio::test]
async fn one_event_per_job_and_rule_then_silence_while_unchanged() {
    let mut h = harness(kueue_only(), 100);
    let both = job("both")
        .spec("parallelism", json!(-1))
        .started()
        .status("failed", json!(-1))
        .build();
    h.cache.holds(vec![
        both,
        unlisted_controller("other"),
        job("fine").build(),
    ]);
    let report = h.audit.pass().await;
    assert!(report.ran);
    assert_eq!(
        (report.jobs, report.offending_jobs, report.violations),
        (3, 2, 3)
    );
    assert_eq!(report.events_published, 3);
    let published = h.sink.take();
    assert_eq!(
        published
            .iter()
            .map(|(name, reason, _)| (name.as_str(), *reason))
            .collect::<Vec<_>>(),
        [
            ("both", "AuditInvalidSpec"),
            ("both", "AuditInvalidStatus"),
            ("other", "AuditPolicyViolation"),
        ]
    );
    assert_eq!(published[0].2, NEGATIVE);
    assert_eq!(
        h.gauge(),
        [
            "jobwarden_audit_violations{namespace=\"team-a\",rule=\"spec\"} 1",
            "jobwarden_audit_violations{namespace=\"team-a\",rule=\"status\"} 1",
            "jobwarden_audit_violations{namespace=\"team-b\",rule=\"policy\"} 1",
        ]
    );
    assert_eq!(
        h.metric("jobwarden_audit_jobs").as_deref(),
        Some("jobwarden_audit_jobs 3")
    );

    for _ in 0..3 {
        let again = h.audit.pass().await;
        assert_eq!((again.violations, again.events_published), (3, 0));
        assert!(h.sink.take().is_empty());
    }
}

#[tokio::test]
async fn a_changed_violation_is_reported_again_a_fixed_one_forgotten() {
    let mut h = harness(kueue_only(), 100);
    h.cache.holds(vec![
        negative_parallelism("changes", -1),
        negative_parallelism("fixed", -1),
        unlisted_controller("gone"),
    ]);
    h.audit.pass().await;
    assert_eq!(h.sink.take().len(), 3);

    // `changes` breaks the same rule differently; `fixed` is fixed; `gone` is deleted.
    h.cache.holds(vec![
        negative_parallelism("changes", -2),
        negative_parallelism("fixed", 1),
    ]);
    let report = h.audit.pass().await;
    assert_eq!(report.events_published, 1);
    assert_eq!(
        h.sink.take(),
        [(
            "changes".to_owned(),
            "AuditInvalidSpec",
            "spec.parallelism: Invalid value: -2: must be greater than or equal to 0".to_owned()
        )]
    );
    // The series that dropped to zero is gone, not zeroed.
    assert_eq!(
        h.gauge(),
        ["jobwarden_audit_violations{namespace=\"team-a\",rule=\"spec\"} 1"]
    );

    // Broken again after the fix, and the deleted Job recreated: both are news.
    h.cache.holds(vec![
        negative_parallelism("changes", -2),
        negative_parallelism("fixed", -1),
        unlisted_controller("gone"),
    ]);
    let report = h.audit.pass().await;
    let names: Vec<String> = h.sink.take().into_iter().map(|(n, _, _)| n).collect();
    assert_eq!(names, ["fixed", "gone"]);
    assert_eq!(report.events_published, 2);
}

#[tokio::test]
async fn a_warning_that_could_not_be_published_stays_owed() {
    let mut h = harness(Policy::default(), 100);
    h.cache.holds(vec![negative_parallelism("a", -1)]);
    h.sink.fail(true);
    let report = h.audit.pass().await;
    assert_eq!((report.events_published, report.events_failed), (0, 1));
    assert_eq!(
        h.metric("jobwarden_audit_events_total{result=\"failed\"}")
            .as_deref(),
        Some("jobwarden_audit_events_total{result=\"failed\"} 1")
    );
    h.sink.fail(false);
    let report = h.audit.pass().await;
    assert_eq!((report.events_published, report.events_failed), (1, 0));
    assert_eq!(h.sink.take().len(), 1);
    assert_eq!(h.audit.pass().await.events_published, 0);
}

#[tokio::test]
async fn events_beyond_the_cap_wait_for_later_passes() {
    let mut h = harness(Policy::default(), 2);
    h.cache.holds(
        (0..5)
            .map(|i| negative_parallelism(&format!("j{i}"), -1))
            .collect(),
    );
    let mut published = Vec::new();
    let mut deferred = Vec::new();
    for _ in 0..4 {
        let report = h.audit.pass().await;
        published.push(report.events_published);
        deferred.push(report.events_deferred);
    }
    assert_eq!(published, [2, 2, 1, 0]);
    assert_eq!(deferred, [3, 1, 0, 0]);
    let mut names: Vec<String> = h.sink.take().into_iter().map(|(n, _, _)| n).collect();
    names.sort();
    assert_eq!(names, ["j0", "j1", "j2", "j3", "j4"]);
}

#[tokio::test]
async fn without_a_snapshot_the_gauge_shows_nothing_rather_than_stale_numbers() {
    let mut h = harness(Policy::default(), 100);
    h.cache.holds(vec![negative_parallelism("a", -1)]);
    h.audit.pass().await;
    assert_eq!(h.gauge().len(), 1);
    h.cache.unavailable();
    let report = h.audit.pass().await;
    assert!(!report.ran);
    assert!(h.gauge().is_empty());
    // Back in view, unchanged: the gauge returns, the Event is not repeated.
    h.cache.holds(vec![negative_parallelism("a", -1)]);
    let report = h.audit.pass().await;
    assert_eq!((report.ran, report.events_published), (true, 0));
    assert_eq!(h.gauge().len(), 1);
}

#[tokio::test]
async fn unreadable_jobs_are_counted_not_fatal() {
    let mut h = harness(Policy::default(), 100);
    h.cache.holds(vec![
        json!({"metadata": {"name": "weird", "namespace": "team-a"}, "spec": {"parallelism": "two"}}),
        negative_parallelism("a", -1),
    ]);
    let report = h.audit.pass().await;
    assert_eq!(
        (report.jobs, report.unreadable, report.violations),
        (2, 1, 1)
    );
    assert_eq!(
        h.metric("jobwarden_audit_unreadable_jobs").as_deref(),
        Some("jobwarden_audit_unreadable_jobs 1")
    );
}

#[tokio::test]
async fn typed_jobs_from_a_cache_are_audited_too() {
    let typed: k8s_openapi::api::batch::v1::Job =
        serde_json::from_value(negative_parallelism("typed", -1)).expect("a Job");
    let mut registry = Registry::default();
    let sink = FakeSink::default();
    let jobs = vec![Arc::new(typed)];
    let mut audit = PeriodicAudit::new(
        Arc::new(Policy::default()),
        move || Some(jobs.clone()),
        sink.clone(),
        register_metrics(&mut registry),
        AuditConfig::default(),
    );
    assert_eq!(audit.pass().await.violations, 1);
    assert_eq!(sink.take()[0].2, NEGATIVE);
}

#[tokio::test]
async fn run_stops_when_shutdown_completes() {
    let h = harness(Policy::default(), 100);
    h.cache.holds(vec![negative_parallelism("a", -1)]);
    let sink = h.sink.clone();
    // The first pass runs at once, then shutdown (already complete) ends the loop.
    h.audit.run(async {}).await;
    assert_eq!(sink.take().len(), 1);
}

fn findings(name: &str, violations: Vec<Violation>) -> JobFindings {
    JobFindings {
        namespace: "team-a".to_owned(),
        name: name.to_owned(),
        uid: uid_of(name),
        violations,
    }
}

fn violation(rule: Rule, field: &str, message: &str) -> Violation {
    Violation {
        rule,
        field: field.to_owned(),
        message: message.to_owned(),
    }
}

#[test]
fn a_job_recreated_under_the_same_name_is_a_new_job() {
    let mut memory = EventMemory::default();
    let v = || vec![violation(Rule::Spec, "spec.x", "Invalid value: 1: no")];
    let first = findings("a", v());
    for w in memory.due(std::slice::from_ref(&first)) {
        memory.sent(&w);
    }
    assert!(memory.due(std::slice::from_ref(&first)).is_empty());
    let recreated = JobFindings {
        uid: uid_of("a-recreated"),
        ..first
    };
    assert_eq!(memory.due(&[recreated]).len(), 1);
    // The old uid was forgotten when the new one replaced it.
    assert_eq!(memory.len(), 0);
}

#[test]
fn notes_fit_the_events_api_and_say_what_was_left_out() {
    let many: Vec<Violation> = (0..40)
        .map(|i| {
            violation(
                Rule::Spec,
                &format!("spec.field{i}"),
                &"Invalid value: x".repeat(3),
            )
        })
        .collect();
    let note = &warnings_for(&findings("a", many))[0].note;
    assert!(note.len() <= MAX_NOTE_BYTES, "{}", note.len());
    assert!(note.starts_with("spec.field0: Invalid value: x"), "{note}");
    assert!(note.ends_with(" more)"), "{note}");

    let huge = vec![violation(Rule::Status, "status.x", &"é".repeat(2000))];
    let note = &warnings_for(&findings("a", huge))[0].note;
    assert!(
        note.len() <= MAX_NOTE_BYTES && note.ends_with('…'),
        "{}",
        note.len()
    );

    // The note is cut, the fingerprint is not: a change past the cut is still news.
    let tail = |last: &str| {
        let mut v: Vec<Violation> = (0..40)
            .map(|i| violation(Rule::Spec, &format!("spec.f{i}"), &"y".repeat(60)))
            .collect();
        v.push(violation(Rule::Spec, "spec.last", last));
        findings("a", v)
    };
    let mut memory = EventMemory::default();
    for w in memory.due(&[tail("one")]) {
        memory.sent(&w);
    }
    let due = memory.due(&[tail("two")]);
    assert_eq!(due.len(), 1);
}

/// Before any pass and with nothing found, every family is served: the violations as each
/// rule's baseline at 0 (no namespace), the Events at 0 for both results.
#[tokio::test]
async fn metrics_register_under_their_documented_names() {
    let mut h = harness(Policy::default(), 100);
    let mut before = String::new();
    encode(&mut before, &h.registry).expect("encodes");
    h.cache.holds(vec![job("fine").build()]);
    h.audit.pass().await;
    let mut text = String::new();
    encode(&mut text, &h.registry).expect("encodes");
    for text in [&before, &text] {
        for name in [
            "# TYPE jobwarden_audit_jobs gauge",
            "# TYPE jobwarden_audit_unreadable_jobs gauge",
            "# TYPE jobwarden_audit_last_pass_timestamp_seconds gauge",
            "jobwarden_audit_violations{namespace=\"\",rule=\"spec\"} 0",
            "jobwarden_audit_violations{namespace=\"\",rule=\"rule_names\"} 0",
            "jobwarden_audit_violations{namespace=\"\",rule=\"policy\"} 0",
            "jobwarden_audit_violations{namespace=\"\",rule=\"status\"} 0",
            "jobwarden_audit_violations{namespace=\"\",rule=\"stuck_delegation\"} 0",
            "jobwarden_audit_events_total{result=\"published\"} 0",
            "jobwarden_audit_events_total{result=\"failed\"} 0",
        ] {
            assert!(text.contains(name), "{name} missing from\n{text}");
        }
    }
    assert!(h.gauge().is_empty(), "{text}");
    let stamp = h
        .metric("jobwarden_audit_last_pass_timestamp_seconds")
        .unwrap_or_default();
    let seconds: i64 = stamp
        .rsplit(' ')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    assert!(seconds > 1_700_000_000, "{stamp}");

    h.cache.holds(vec![negative_parallelism("a", -1)]);
    h.audit.pass().await;
    let mut text = String::new();
    encode(&mut text, &h.registry).expect("encodes");
    for name in [
        "# TYPE jobwarden_audit_violations gauge",
        "# TYPE jobwarden_audit_events counter",
    ] {
        assert!(text.contains(name), "{name} missing from\n{text}");
    }
}

/// Delegated to a controller that never acted, created long before any pass.
fn nobody_runs(name: &str) -> Value {
    job(name)
        .namespace("team-b")
        .spec("managedBy", json!("example.com/other"))
        .set("/metadata/creationTimestamp", json!("2020-01-01T00:00:00Z"))
        .build()
}

#[tokio::test]
async fn a_job_nobody_runs_is_reported_beside_its_other_violations() {
    let mut h = harness(kueue_only(), 100);
    let suspended = job("waiting")
        .namespace("team-b")
        .spec("managedBy", json!("example.com/other"))
        .spec("suspend", json!(true))
        .set("/metadata/creationTimestamp", json!("2020-01-01T00:00:00Z"))
        .build();
    h.cache.holds(vec![nobody_runs("stuck"), suspended]);
    let report = h.audit.pass().await;
    // `stuck` breaks the policy (an unlisted controller) and nobody runs it; `waiting` is
    // suspended, which is a sign of waiting, not of nobody.
    assert_eq!((report.offending_jobs, report.violations), (2, 3));
    let published = h.sink.take();
    let reasons: Vec<(&str, &str)> = published
        .iter()
        .map(|(name, reason, _)| (name.as_str(), *reason))
        .collect();
    assert_eq!(
        reasons,
        [
            ("stuck", "AuditPolicyViolation"),
            ("stuck", "AuditStuckDelegation"),
            ("waiting", "AuditPolicyViolation"),
        ]
    );
    assert_eq!(
        published[1].2,
        "spec.managedBy: no controller is running this Job: \"example.com/other\" shows no sign of acting on it 2m0s after its creation (not suspended, no status.startTime, no pods); is that controller installed, running, and spelled so?"
    );
    assert_eq!(
        h.gauge(),
        [
            "jobwarden_audit_violations{namespace=\"team-b\",rule=\"policy\"} 2",
            "jobwarden_audit_violations{namespace=\"team-b\",rule=\"stuck_delegation\"} 1",
        ]
    );
    // Its words do not grow with its age: no second Event.
    assert_eq!(h.audit.pass().await.events_published, 0);
}

#[tokio::test]
async fn with_stuck_after_off_a_job_nobody_runs_is_not_reported() {
    let cache = FakeCache::default();
    let sink = FakeSink::default();
    let mut registry = Registry::default();
    let mut audit = PeriodicAudit::new(
        Arc::new(Policy::default()),
        cache.snapshot(),
        sink.clone(),
        register_metrics(&mut registry),
        AuditConfig {
            stuck_after: None,
            ..AuditConfig::default()
        },
    );
    cache.holds(vec![nobody_runs("stuck")]);
    let report = audit.pass().await;
    assert_eq!((report.ran, report.violations), (true, 0));
    assert!(sink.take().is_empty());
}
