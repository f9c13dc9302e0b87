//! The runner of the plan tables: a `Row` is one case (a Job, its pods, the clock, what the
//! controller remembers, and what the plan must contain) and `table` runs every row, then fails
//! once with every mismatch of every row. Test-only; it reaches `plan` only through its public
//! function and types (and the status check the executor makes), so that the plan's inner shape
//! can change under it.

use std::collections::HashSet;
use std::fmt::{self, Debug};
use std::panic::{AssertUnwindSafe, Location, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use jobwarden_rules::JobObject;
use k8s_openapi::api::batch::v1::JobStatus;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::plan::{DeleteReason, InFlight, Plan, PlanConfig, plan};
use crate::pods::CachedPod;
use crate::testing::{JobBuilder, PodBuilder, T0, at};

/// One case of a table. Unset expectations are not checked, with two exceptions: every row
/// says whether the Job is skipped (not, unless `.skipped()`), and every planned status must
/// pass the status rules the executor checks before it writes.
pub struct Row {
    name: &'static str,
    line: &'static Location<'static>,
    job: JobBuilder,
    pods: Vec<PodBuilder>,
    now: i64,
    in_flight: InFlight,
    config: PlanConfig,
    want: Want,
    created: Vec<CreatedField>,
}

/// A row: `name` (what the case shows), the Job, its pods, and the clock as seconds after `T0`.
#[track_caller]
pub fn row(
    name: &'static str,
    job: JobBuilder,
    pods: impl IntoIterator<Item = PodBuilder>,
    now: i64,
) -> Row {
    Row {
        name,
        line: Location::caller(),
        job,
        pods: pods.into_iter().collect(),
        now,
        in_flight: InFlight::default(),
        config: PlanConfig::default(),
        want: Want {
            skipped: Some(false),
            ..Want::default()
        },
        created: Vec::new(),
    }
}

/// What a row expects; each call adds one expectation.
impl Row {
    /// What the controller remembers from its earlier syncs (`InFlight::default()` if unset).
    pub fn remembering(mut self, in_flight: InFlight) -> Row {
        self.in_flight = in_flight;
        self
    }

    /// The controller's settings (`PlanConfig::default()` if unset).
    pub fn config(mut self, config: PlanConfig) -> Row {
        self.config = config;
        self
    }

    /// The Job is left alone (`Plan::skipped`).
    pub fn skipped(mut self) -> Row {
        self.want.skipped = Some(true);
        self
    }

    pub fn no_status_write(mut self) -> Row {
        self.want.status_written = Some(false);
        self
    }

    pub fn writes_status(mut self) -> Row {
        self.want.status_written = Some(true);
        self
    }

    /// The index of every pod created, in order (`None` for a NonIndexed Job).
    pub fn creates(mut self, indexes: &[Option<i32>]) -> Row {
        self.want.creates = Some(indexes.to_vec());
        self
    }

    /// `(pod, reason)` of every deletion, in order.
    pub fn deletes(mut self, pods: &[(&str, DeleteReason)]) -> Row {
        let pods = pods.iter().map(|(n, r)| ((*n).to_owned(), *r)).collect();
        self.want.deletes = Some(pods);
        self
    }

    /// `(pod, waiting reason)` of every pod failed for not starting in time, in order.
    pub fn fails(mut self, pods: &[(&str, &str)]) -> Row {
        let pods = pods
            .iter()
            .map(|(n, r)| ((*n).to_owned(), (*r).to_owned()))
            .collect();
        self.want.fails = Some(pods);
        self
    }

    pub fn removes_finalizers(mut self, pods: &[&str]) -> Row {
        self.want.removes_finalizers = Some(owned(pods));
        self
    }

    pub fn active(mut self, n: i32) -> Row {
        self.want.active = Some(n);
        self
    }

    pub fn ready(mut self, n: i32) -> Row {
        self.want.ready = Some(n);
        self
    }

    pub fn terminating(mut self, n: i32) -> Row {
        self.want.terminating = Some(n);
        self
    }

    pub fn succeeded(mut self, n: i32) -> Row {
        self.want.succeeded = Some(n);
        self
    }

    pub fn failed(mut self, n: i32) -> Row {
        self.want.failed = Some(n);
        self
    }

    /// `status.completedIndexes` (`""` when absent).
    pub fn completed_indexes(mut self, s: &str) -> Row {
        self.want.completed_indexes = Some(s.to_owned());
        self
    }

    /// The pods (by name) in `uncountedTerminatedPods.succeeded`, in order.
    pub fn uncounted_succeeded(mut self, pods: &[&str]) -> Row {
        self.want.uncounted_succeeded = Some(uids(pods));
        self
    }

    /// The pods (by name) in `uncountedTerminatedPods.failed`, in order.
    pub fn uncounted_failed(mut self, pods: &[&str]) -> Row {
        self.want.uncounted_failed = Some(uids(pods));
        self
    }

    /// `(type, status, reason)` of every condition, in order.
    pub fn conditions(mut self, list: &[(&str, &str, &str)]) -> Row {
        let list = list
            .iter()
            .map(|(t, s, r)| ((*t).to_owned(), (*s).to_owned(), (*r).to_owned()))
            .collect();
        self.want.conditions = Some(list);
        self
    }

    /// The message of every condition, in order.
    pub fn messages(mut self, list: &[&str]) -> Row {
        self.want.messages = Some(owned(list));
        self
    }

    /// `status.failedIndexes`, present with this value.
    pub fn failed_indexes(mut self, s: &str) -> Row {
        self.want.failed_indexes = Some(Some(s.to_owned()));
        self
    }

    /// `status.failedIndexes` absent.
    pub fn no_failed_indexes(mut self) -> Row {
        self.want.failed_indexes = Some(None);
        self
    }

    pub fn start_time(mut self, offset: i64) -> Row {
        self.want.start_time = Some(Some(Clock(at(offset))));
        self
    }

    pub fn no_start_time(mut self) -> Row {
        self.want.start_time = Some(None);
        self
    }

    pub fn completion_time(mut self, offset: i64) -> Row {
        self.want.completion_time = Some(Some(Clock(at(offset))));
        self
    }

    pub fn no_completion_time(mut self) -> Row {
        self.want.completion_time = Some(None);
        self
    }

    /// The reason of every event, in order.
    pub fn events(mut self, reasons: &[&str]) -> Row {
        self.want.events = Some(owned(reasons));
        self
    }

    /// Look again after this many seconds (`Plan::requeue_after`; 0 is "at once").
    pub fn requeue_after(mut self, secs: u64) -> Row {
        self.want.requeue_after = Some(Some(Duration::from_secs(secs)));
        self
    }

    /// No look again unless something changes.
    pub fn no_requeue(mut self) -> Row {
        self.want.requeue_after = Some(None);
        self
    }

    /// The Job finishes in this plan with this reason.
    pub fn finished(mut self, reason: &str) -> Row {
        self.want.finished = Some(Some(reason.to_owned()));
        self
    }

    pub fn not_finished(mut self) -> Row {
        self.want.finished = Some(None);
        self
    }

    /// The back-off to remember: this many failures since the last success.
    pub fn backoff_failures(mut self, n: u32) -> Row {
        self.want.backoff_failures = Some(Some(n));
        self
    }

    /// The string at `path` in every pod created, in order (`None` where it is absent).
    pub fn created_pods_have(mut self, path: &[&'static str], values: &[Option<&str>]) -> Row {
        let want = values.iter().map(|v| v.map(|v| Json(v.into()))).collect();
        let path = path.to_vec();
        self.created.push(CreatedField { path, want });
        self
    }

    /// Plans the row and compares; every mismatch, none left out.
    fn mismatches(self) -> Vec<Mismatch> {
        let job = self.job.build();
        let parsed = match JobObject::parse(&job) {
            Ok(parsed) => parsed,
            Err(e) => return vec![Mismatch::note(format!("the Job does not parse: {e}"))],
        };
        let pods: Vec<Arc<CachedPod>> = self.pods.into_iter().map(PodBuilder::cached).collect();
        let p = plan(&parsed, &pods, at(self.now), &self.config, &self.in_flight);
        let mut out = self.want.mismatches(&Seen::of(&p, parsed.status.clone()));
        out.extend(status_rules_broken(&job, &p));
        for field in &self.created {
            let got: Vec<Option<Json>> = p
                .create
                .iter()
                .map(|c| lookup(&c.pod, &field.path).cloned().map(Json))
                .collect();
            if got != field.want {
                let label = format!("created_pods_have {}", field.path.join("."));
                out.push(Mismatch::new(&label, &field.want, &got));
            }
        }
        out
    }
}

/// Runs every row and fails once, naming each failing row (with its line) and every field it
/// gets wrong, so that one run shows all that is wrong in the table.
pub fn table(rows: impl IntoIterator<Item = Row>) {
    let mut names = HashSet::new();
    let mut total = 0;
    let mut failures = Vec::new();
    for row in rows {
        total += 1;
        let (name, line) = (row.name, row.line);
        let mut mismatches = Vec::new();
        if !names.insert(name) {
            mismatches.push(Mismatch::note(
                "another row of this table has the same name".to_owned(),
            ));
        }
        match catch_unwind(AssertUnwindSafe(|| row.mismatches())) {
            Ok(found) => mismatches.extend(found),
            Err(panic) => mismatches.push(Mismatch::note(format!(
                "plan panicked: {}",
                panic_text(panic.as_ref())
            ))),
        }
        if !mismatches.is_empty() {
            failures.push(render(name, line, &mismatches));
        }
    }
    assert!(total > 0, "a table with no rows");
    if !failures.is_empty() {
        panic!(
            "{} of the {total} rows fail:\n\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}

/// What the plan holds, in the tables' terms (`Seen`), and what a row expects of it (`Want`:
/// the same fields, each optional). One list so that a new field is compared and reported the
/// moment it is added.
macro_rules! plan_fields {
    ($($field:ident: $ty:ty,)*) => {
        #[derive(Default)]
        struct Want {
            $($field: Option<$ty>,)*
        }

        struct Seen {
            $($field: $ty,)*
        }

        impl Want {
            fn mismatches(&self, seen: &Seen) -> Vec<Mismatch> {
                let mut out = Vec::new();
                $(
                    if let Some(want) = &self.$field {
                        if *want != seen.$field {
                            out.push(Mismatch::new(stringify!($field), want, &seen.$field));
                        }
                    }
                )*
                out
            }
        }
    };
}

plan_fields! {
    skipped: bool,
    status_written: bool,
    creates: Vec<Option<i32>>,
    deletes: Vec<(String, DeleteReason)>,
    fails: Vec<(String, String)>,
    removes_finalizers: Vec<String>,
    active: i32,
    ready: i32,
    terminating: i32,
    succeeded: i32,
    failed: i32,
    completed_indexes: String,
    uncounted_succeeded: Vec<String>,
    uncounted_failed: Vec<String>,
    conditions: Vec<(String, String, String)>,
    messages: Vec<String>,
    failed_indexes: Option<String>,
    start_time: Option<Clock>,
    completion_time: Option<Clock>,
    events: Vec<String>,
    requeue_after: Option<Duration>,
    finished: Option<String>,
    backoff_failures: Option<u32>,
}

/// The JSON at `path` in every pod the plan creates.
struct CreatedField {
    path: Vec<&'static str>,
    want: Vec<Option<Json>>,
}

/// JSON shown as JSON in a mismatch.
#[derive(Clone, PartialEq)]
struct Json(Value);

impl Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Seen {
    /// The status fields are read from the planned status, or from the stored one when the
    /// plan writes none: a row states what the Job holds after the plan.
    fn of(p: &Plan, stored: JobStatus) -> Seen {
        let s = p.status.clone().unwrap_or(stored);
        let uncounted = s.uncounted_terminated_pods.clone().unwrap_or_default();
        let conditions = s.conditions.clone().unwrap_or_default();
        let num = |v: Option<i32>| v.unwrap_or(0);
        Seen {
            skipped: p.skipped.is_some(),
            status_written: p.status.is_some(),
            creates: p.create.iter().map(|c| c.index).collect(),
            deletes: p
                .delete
                .iter()
                .map(|d| (d.pod.name.clone(), d.reason))
                .collect(),
            fails: p
                .fail
                .iter()
                .map(|f| (f.pod.name.clone(), f.reason.to_owned()))
                .collect(),
            removes_finalizers: p.remove_finalizers.iter().map(|r| r.name.clone()).collect(),
            active: num(s.active),
            ready: num(s.ready),
            terminating: num(s.terminating),
            succeeded: num(s.succeeded),
            failed: num(s.failed),
            completed_indexes: s.completed_indexes.clone().unwrap_or_default(),
            uncounted_succeeded: uncounted.succeeded.unwrap_or_default(),
            uncounted_failed: uncounted.failed.unwrap_or_default(),
            conditions: conditions
                .iter()
                .map(|c| {
                    let reason = c.reason.clone().unwrap_or_default();
                    (c.type_.clone(), c.status.clone(), reason)
                })
                .collect(),
            messages: conditions
                .iter()
                .map(|c| c.message.clone().unwrap_or_default())
                .collect(),
            failed_indexes: s.failed_indexes.clone(),
            start_time: s.start_time.map(|t| Clock(t.0)),
            completion_time: s.completion_time.map(|t| Clock(t.0)),
            events: p.events.iter().map(|e| e.reason.clone()).collect(),
            requeue_after: p.requeue_after,
            finished: p.finished.as_ref().map(|f| f.reason.clone()),
            backoff_failures: p.backoff.map(|b| b.failures_after_last_success),
        }
    }
}

/// A time in a table: shown as seconds after `T0`, as the rows write it.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Clock(Timestamp);

impl Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let offset = self.0.as_second() - T0;
        if at(offset) == self.0 {
            write!(f, "{offset}")
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// The pods' uids, as `PodBuilder` makes them from their names.
fn uids(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| format!("uid-{n}")).collect()
}

fn owned(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// Every row also checks what the executor would: a planned status that the status rules
/// reject is never written, so a plan that makes one leaves the Job stuck.
fn status_rules_broken(job: &Value, p: &Plan) -> Option<Mismatch> {
    let status = p.status.as_ref()?;
    let patch = match crate::sync::status_patch::status_patch(job, status) {
        Ok(patch) => patch?,
        Err(e) => {
            return Some(Mismatch::note(format!(
                "the status does not serialize: {e}"
            )));
        }
    };
    let refused = crate::sync::executor::check_status_patch(job, &patch).err()?;
    Some(Mismatch::note(format!(
        "the executor would refuse the planned status: {refused}\n        patch: {patch}"
    )))
}

/// The JSON at `path`: an object's key, or an array's index written as a number.
fn lookup<'v>(v: &'v Value, path: &[&str]) -> Option<&'v Value> {
    path.iter().try_fold(v, |v, key| match v {
        Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => v.get(key),
    })
}

/// One expectation a row does not meet, with the difference spelt out.
struct Mismatch(Vec<String>);

impl Mismatch {
    fn new<T: Difference>(field: &str, want: &T, got: &T) -> Mismatch {
        let mut lines = vec![
            format!("{field}: want {want:?}"),
            format!("{:width$}   got {got:?}", "", width = field.len()),
        ];
        lines.extend(
            T::notes(want, got)
                .into_iter()
                .map(|n| format!("{:width$}   {n}", "", width = field.len())),
        );
        Mismatch(lines)
    }

    fn note(text: String) -> Mismatch {
        Mismatch(vec![text])
    }
}

/// How a wrong value is explained beyond want and got: lists say which items are missing and
/// which are unexpected, as a long list of conditions or pods is hard to compare by eye.
trait Difference: Debug + PartialEq {
    fn notes(_want: &Self, _got: &Self) -> Vec<String> {
        Vec::new()
    }
}

impl Difference for bool {}
impl Difference for i32 {}
impl Difference for String {}
impl<T: Difference> Difference for Option<T> {}
impl Difference for Clock {}
impl Difference for Duration {}
impl Difference for u32 {}
impl Difference for Json {}
impl Difference for (String, DeleteReason) {}
impl Difference for (String, String) {}
impl Difference for (String, String, String) {}

impl<T: Difference> Difference for Vec<T> {
    fn notes(want: &Self, got: &Self) -> Vec<String> {
        if want.len() <= 1 && got.len() <= 1 {
            return Vec::new();
        }
        let missing: Vec<&T> = want.iter().filter(|w| !got.contains(w)).collect();
        let unexpected: Vec<&T> = got.iter().filter(|g| !want.contains(g)).collect();
        let mut notes = Vec::new();
        if !missing.is_empty() {
            notes.push(format!("missing {missing:?}"));
        }
        if !unexpected.is_empty() {
            notes.push(format!("unexpected {unexpected:?}"));
        }
        if notes.is_empty() {
            notes.push("the same items, but not as many of each or not in this order".to_owned());
        }
        notes
    }
}

fn render(name: &str, line: &Location<'_>, mismatches: &[Mismatch]) -> String {
    let mut out = format!("row {name:?} ({}:{})\n", line.file(), line.line());
    for m in mismatches {
        for l in &m.0 {
            out.push_str("    ");
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_owned()
    }
}
