//! The story of a Job as a pure function of what was read (the Job, its pods, its events,
//! jobwarden's Lease) and the time it is told at. Every judgement is the controller's own: the
//! rule a failed pod matched is `pods::failure_policy::match_pod`, a back-off is
//! `backoff`/`per_index` over the pods, a stuck delegation is the audit's `stuck_delegation`.
//! No I/O and no clock here.

use std::time::Duration;

use jobwarden_audit::{PodEvidence, stuck_delegation};
use jobwarden_controller::plan::backoff::{self, DEFAULT_BACKOFF, MAX_BACKOFF};
use jobwarden_controller::plan::per_index;
use jobwarden_controller::pods::failure_policy::{Action, match_pod};
use jobwarden_controller::pods::view::PodView;
use jobwarden_controller::pods::{CachedPod, Phase};
use jobwarden_rules::condition::{COMPLETE, FAILED, SUCCESS_CRITERIA_MET, SUSPENDED};
use jobwarden_rules::indexes::IndexSet;
use jobwarden_rules::rule_names::effective_names;
use jobwarden_rules::seconds::ceil_secs;
use jobwarden_rules::well_known::{BUILT_IN_CONTROLLER_NAME, POLICY_FAILED};
use jobwarden_rules::{DecodeError, JobObject};
use k8s_openapi::api::batch::v1::{JobCondition, PodFailurePolicy};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::dispatch::{self, DispatchReading};
use crate::explanation::*;
use crate::pods::{self, add, matched_rule};

/// The events kept, the latest.
pub const MAX_EVENTS: usize = 10;

/// What was read from the cluster.
#[derive(Debug, Clone)]
pub struct Observed {
    /// The Job as the API returned it.
    pub job: Value,
    /// The pods carrying its `controller-uid` label.
    pub pods: Vec<Pod>,
    /// The events about it.
    pub events: Vec<Event>,
    pub lease: LeaseReading,
    /// For a Job the dispatcher runs: the policy and its copy as read from its worker.
    pub dispatch: Option<DispatchReading>,
}

/// jobwarden's Lease: read only for a Job jobwarden runs, and optional (RBAC may not grant it).
#[derive(Debug, Clone)]
pub enum LeaseReading {
    NotRead,
    Read {
        namespace: String,
        name: String,
        lease: Box<Lease>,
    },
    Unreadable {
        namespace: String,
        name: String,
        reason: String,
    },
}

/// What the caller decides.
#[derive(Debug, Clone)]
pub struct Settings {
    /// jobwarden's controller name (`serve --controller-name`).
    pub controller_name: String,
    /// jobwarden's dispatcher's name (the policy's `dispatch.controllerName`).
    pub dispatcher_name: String,
    /// How long a delegated Job may show no sign of its controller.
    pub stuck_after: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error("cannot read the Job: {0}")]
    Job(#[from] DecodeError),
}

/// The story of `observed` at `now`.
pub fn explain(
    observed: &Observed,
    now: Timestamp,
    settings: &Settings,
) -> Result<Explanation, ExplainError> {
    let job = JobObject::parse(&observed.job)?;
    let meta = &job.metadata;
    let namespace = meta.namespace.clone().unwrap_or_default();
    let indexed = job.is_indexed();
    let completions = job.spec.completions.unwrap_or(1);
    let names = effective_names(&job);
    let policy = job.spec.pod_failure_policy.as_ref();

    let cached = sorted_pods(&observed.pods);
    let views = pod_views(&cached, policy, &namespace);

    let finished = finished(&job.status.conditions);
    let completed = status_indexes(job.status.completed_indexes.as_deref(), completions);
    let mut failed_indexes = status_indexes(job.status.failed_indexes.as_deref(), completions);
    let (waiting, backoff_indexes) = if finished.is_none() {
        waits(&job, &views, &names, &completed, &mut failed_indexes, now)
    } else {
        (Vec::new(), IndexSet::new())
    };
    let indexes = indexed.then(|| {
        index_view(
            completions,
            &views,
            &completed,
            &failed_indexes,
            &backoff_indexes,
        )
    });

    let (active_pods, finished_pods) =
        pods::pods(&job, &views, &names, finished.as_ref().and_then(|f| f.at));
    let mut runner = runner(observed, &job, &cached, now, settings);
    let all_events: Vec<EventLine> = observed.events.iter().map(event_line).collect();
    let dispatch = match runner.controller {
        ControllerKind::Dispatcher => Some(dispatch_view(
            observed,
            meta.uid.as_deref().unwrap_or_default(),
            &all_events,
            finished.is_some(),
            now,
            settings,
        )?),
        _ => None,
    };
    if let Some(d) = &dispatch
        && (d.worker.is_some() || all_events.iter().any(|e| e.from == d.dispatcher))
    {
        // The dispatcher acts on it (a worker recorded, an Event of its own): a Job that waits
        // for a worker is not one nobody runs, and its pods are its copy's, on the worker.
        runner.stuck = None;
    }
    Ok(Explanation {
        namespace,
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        now,
        created: meta.creation_timestamp.as_ref().map(|t| t.0),
        completion_mode: if indexed { "Indexed" } else { "NonIndexed" }.to_owned(),
        pod_failure_policy_rules: policy.map_or(0, |p| p.rules.len()),
        runner,
        conditions: pods::conditions(&job.status.conditions),
        finished,
        active_pods,
        finished_pods,
        waiting,
        indexes,
        events: events(&observed.events),
        dispatch,
    })
}

/// Indexes as the status lists them (`1,3-5`), read as upstream's controller reads its own.
fn status_indexes(listed: Option<&str>, completions: i32) -> IndexSet {
    IndexSet::parse_lenient(listed.unwrap_or(""), completions)
}

/// The pods as the controller caches them, by index, then age, then name.
fn sorted_pods(pods: &[Pod]) -> Vec<CachedPod> {
    let mut cached: Vec<CachedPod> = pods.iter().map(CachedPod::from_pod).collect();
    cached.sort_by(|a, b| (a.index, a.created, &a.name).cmp(&(b.index, b.created, &b.name)));
    cached
}

/// Every pod is looked at as the controller looks at the pods it still tracks: explain cannot
/// know which finalizer another controller uses.
fn pod_views<'a>(
    cached: &'a [CachedPod],
    policy: Option<&PodFailurePolicy>,
    namespace: &str,
) -> Vec<PodView<'a>> {
    cached
        .iter()
        .map(|pod| PodView {
            pod,
            policy: policy
                .filter(|_| pod.phase == Phase::Failed)
                .and_then(|p| match_pod(p, pod, namespace)),
            tracked: true,
        })
        .collect()
}

/// What a Job that has not finished waits for, with the indexes held in back-off (the failed
/// indexes brought up to what the pods say under `backoffLimitPerIndex`).
fn waits(
    job: &JobObject<'_>,
    views: &[PodView],
    names: &[Option<String>],
    completed: &IndexSet,
    failed_indexes: &mut IndexSet,
    now: Timestamp,
) -> (Vec<Wait>, IndexSet) {
    if job.is_suspended() {
        return (vec![suspended(&job.status.conditions)], IndexSet::new());
    }
    let mut waiting = Vec::new();
    let mut backoff_indexes = IndexSet::new();
    let only_replace_failed = job.spec.pod_replacement_policy.as_deref() == Some(POLICY_FAILED);
    let terminating: Vec<String> = views
        .iter()
        .filter(|p| p.is_terminating())
        .map(|p| p.name.clone())
        .collect();
    if only_replace_failed && !terminating.is_empty() {
        waiting.push(Wait::Terminating { pods: terminating });
    }
    if let Some(wait) = fail_job(views, names) {
        waiting.push(wait);
    } else {
        let (waits, per_index) = backoffs(job, views, completed, failed_indexes, now);
        waiting.extend(waits);
        backoff_indexes = per_index;
    }
    if job.is_indexed() && !job.has_condition(SUCCESS_CRITERIA_MET) {
        let completions = job.spec.completions.unwrap_or(1);
        waiting.extend(success_rules(job, completions, completed));
    }
    waiting.extend(active_deadline(job, now));
    (waiting, backoff_indexes)
}

/// A suspended Job waits on its `Suspended` condition, if it has one.
fn suspended(conditions: &Option<Vec<JobCondition>>) -> Wait {
    let condition = true_condition(conditions, SUSPENDED);
    Wait::Suspended {
        since: condition.and_then(|c| c.last_transition_time.as_ref().map(|t| t.0)),
        reason: condition.and_then(|c| c.reason.clone()),
        message: condition.and_then(|c| c.message.clone()),
    }
}

/// A pod a FailJob rule matched ends the Job: no pod is made, no back-off waited out.
fn fail_job(views: &[PodView], names: &[Option<String>]) -> Option<Wait> {
    views.iter().find_map(|p| {
        let m = p.policy.as_ref().filter(|m| m.action == Action::FailJob)?;
        Some(Wait::FailJob {
            pod: p.name.clone(),
            rule: matched_rule(m, names),
        })
    })
}

/// The time `activeDeadlineSeconds` leaves a started Job, while some is left.
fn active_deadline(job: &JobObject<'_>, now: Timestamp) -> Option<Wait> {
    let limit = job.spec.active_deadline_seconds?;
    let start = job.status.start_time.as_ref()?;
    let deadline = add(start.0, Duration::from_secs(limit.unsigned_abs()));
    let left = until(now, deadline).filter(|d| !d.is_zero())?;
    Some(Wait::ActiveDeadline {
        remaining_seconds: ceil_secs(left),
        deadline,
    })
}

/// Each index of an Indexed Job by what holds it: succeeded, failed, running, in back-off, or
/// waiting for a pod.
fn index_view(
    completions: i32,
    views: &[PodView],
    completed: &IndexSet,
    failed_indexes: &IndexSet,
    backoff_indexes: &IndexSet,
) -> IndexView {
    let running = IndexSet::from_indexes(
        views
            .iter()
            .filter(|p| p.is_active())
            .filter_map(|p| p.index)
            .filter(|i| *i < completions),
    );
    let taken = |i: i32| {
        completed.contains(i)
            || failed_indexes.contains(i)
            || running.contains(i)
            || backoff_indexes.contains(i)
    };
    IndexView {
        completions,
        succeeded: completed.to_string(),
        failed: failed_indexes.to_string(),
        running: running.to_string(),
        backoff: backoff_indexes.to_string(),
        waiting: IndexSet::from_indexes((0..completions).filter(|i| !taken(*i))).to_string(),
    }
}

/// The dispatch part of a dispatched Job's story. The copy is told as any Job with its pods
/// is: the worker's built-in controller runs it.
fn dispatch_view(
    observed: &Observed,
    uid: &str,
    all_events: &[EventLine],
    finished: bool,
    now: Timestamp,
    settings: &Settings,
) -> Result<DispatchView, ExplainError> {
    let copy_story = match dispatch::copy_read(observed.dispatch.as_ref(), uid) {
        Some((copy, pods, events)) => Some(explain(
            &Observed {
                job: copy.clone(),
                pods: pods.clone().unwrap_or_default(),
                events: events.clone().unwrap_or_default(),
                lease: LeaseReading::NotRead,
                dispatch: None,
            },
            now,
            settings,
        )?),
        None => None,
    };
    Ok(dispatch::view(
        &observed.job,
        all_events,
        observed.dispatch.as_ref(),
        copy_story,
        finished,
        now,
        &settings.dispatcher_name,
    ))
}

fn runner(
    observed: &Observed,
    job: &JobObject<'_>,
    pods: &[CachedPod],
    now: Timestamp,
    settings: &Settings,
) -> Runner {
    let managed_by = job.spec.managed_by.clone();
    let controller = match managed_by.as_deref() {
        None | Some(BUILT_IN_CONTROLLER_NAME) => ControllerKind::BuiltIn,
        Some(name) if name == settings.controller_name => ControllerKind::Jobwarden,
        Some(name) if name == settings.dispatcher_name => ControllerKind::Dispatcher,
        Some(_) => ControllerKind::Other,
    };
    let status = &job.status;
    // The API server records who last wrote the status subresource, and when, in
    // managedFields; the times the status itself holds are the fallback (a counter written
    // alone moves none of them).
    let status_write = observed
        .job
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|f| f.get("subresource").and_then(Value::as_str) == Some("status"))
        .filter_map(|f| {
            let time: Timestamp = f.get("time")?.as_str()?.parse().ok()?;
            let manager = f.get("manager").and_then(Value::as_str).unwrap_or("");
            Some((time, manager.to_owned()))
        })
        .max_by_key(|(time, _)| *time);
    let recorded = [status.start_time.as_ref(), status.completion_time.as_ref()]
        .into_iter()
        .flatten()
        .map(|t| t.0)
        .chain(status.conditions.iter().flatten().flat_map(|c| {
            [c.last_transition_time.as_ref(), c.last_probe_time.as_ref()]
                .into_iter()
                .flatten()
                .map(|t| t.0)
        }))
        .max();
    let (status_changed, status_writer) = match status_write {
        Some((time, manager)) => (Some(time), Some(manager).filter(|m| !m.is_empty())),
        None => (recorded, None),
    };
    let pods_changed = observed
        .pods
        .iter()
        .filter_map(|p| p.metadata.deletion_timestamp.as_ref().map(|t| t.0))
        .chain(
            pods.iter()
                .flat_map(|p| [p.created, p.finished_at])
                .flatten(),
        )
        .max();
    let stuck = stuck_delegation(
        &observed.job,
        PodEvidence::Listed(observed.pods.len()),
        now,
        settings.stuck_after,
    )
    .map(|s| Stuck {
        managed_by: s.managed_by,
        age_seconds: s.age.as_secs(),
        after_seconds: s.after.as_secs(),
    });
    Runner {
        managed_by,
        controller,
        lease: (controller == ControllerKind::Jobwarden)
            .then(|| lease_view(&observed.lease, now))
            .flatten(),
        status_changed,
        status_writer,
        pods_changed,
        stuck,
    }
}

fn lease_view(reading: &LeaseReading, now: Timestamp) -> Option<LeaseView> {
    match reading {
        LeaseReading::NotRead => None,
        LeaseReading::Unreadable {
            namespace,
            name,
            reason,
        } => Some(LeaseView {
            namespace: namespace.clone(),
            name: name.clone(),
            holder: None,
            renew_time: None,
            since_renewal_seconds: None,
            expired: false,
            unreadable: Some(reason.clone()),
        }),
        LeaseReading::Read {
            namespace,
            name,
            lease,
        } => {
            let spec = lease.spec.as_ref();
            let holder = spec
                .and_then(|s| s.holder_identity.clone())
                .filter(|h| !h.is_empty());
            let renew_time = spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0);
            let since = renew_time.map(|t| until(t, now).unwrap_or(Duration::ZERO));
            let duration = spec
                .and_then(|s| s.lease_duration_seconds)
                .map(|s| Duration::from_secs(u64::from(s.unsigned_abs())));
            Some(LeaseView {
                namespace: namespace.clone(),
                name: name.clone(),
                expired: holder.is_none()
                    || matches!((since, duration), (Some(s), Some(d)) if s > d),
                holder,
                renew_time,
                since_renewal_seconds: since.map(|d| d.as_secs()),
                unreadable: None,
            })
        }
    }
}

fn finished(conditions: &Option<Vec<JobCondition>>) -> Option<Finished> {
    [COMPLETE, FAILED].into_iter().find_map(|type_| {
        true_condition(conditions, type_).map(|c| Finished {
            type_: type_.to_owned(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            at: c.last_transition_time.as_ref().map(|t| t.0),
        })
    })
}

fn true_condition<'a>(
    conditions: &'a Option<Vec<JobCondition>>,
    type_: &str,
) -> Option<&'a JobCondition> {
    conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_ && c.status == "True")
}

fn backoff_wait(index: Option<i32>, failures: u32, left: Duration, now: Timestamp) -> Option<Wait> {
    (!left.is_zero()).then(|| Wait::Backoff {
        index,
        failures,
        remaining_seconds: ceil_secs(left),
        until: add(now, left),
    })
}

/// The back-offs holding the next pods: per index under `backoffLimitPerIndex` (returned with
/// those indexes, and the failed indexes brought up to what the pods say), else the Job's,
/// while it has room for a pod under its parallelism.
fn backoffs(
    job: &JobObject<'_>,
    views: &[PodView],
    completed: &IndexSet,
    failed_indexes: &mut IndexSet,
    now: Timestamp,
) -> (Vec<Wait>, IndexSet) {
    let completions = job.spec.completions.unwrap_or(1);
    let only_replace_failed = job.spec.pod_replacement_policy.as_deref() == Some(POLICY_FAILED);
    let mut waits = Vec::new();
    let mut indexes = IndexSet::new();
    match job
        .spec
        .backoff_limit_per_index
        .filter(|_| job.is_indexed())
    {
        Some(limit) => {
            *failed_indexes = per_index::failed_indexes(
                job.status.failed_indexes.as_deref(),
                completions,
                views,
                only_replace_failed,
                limit,
                completed,
            );
            let awaiting = per_index::pods_awaiting_replacement(
                views,
                completions,
                only_replace_failed,
                completed,
                failed_indexes,
            );
            for (index, pod) in awaiting {
                let left = per_index::remaining(Some(pod), now, DEFAULT_BACKOFF, MAX_BACKOFF);
                // The replacement's failures: the replaced pod's, and its own.
                let failures = pod
                    .index_failures
                    .saturating_add(pod.index_ignored_failures);
                let failures = u32::try_from(failures).unwrap_or(0).saturating_add(1);
                if let Some(wait) = backoff_wait(Some(index), failures, left, now) {
                    indexes.insert(index);
                    waits.push(wait);
                }
            }
        }
        None => {
            let active = views.iter().filter(|p| p.is_active()).count();
            if i32::try_from(active).unwrap_or(i32::MAX) < job.spec.parallelism.unwrap_or(1) {
                let record = backoff::record_from_pods(views, only_replace_failed);
                let left = backoff::remaining(&record, now, DEFAULT_BACKOFF, MAX_BACKOFF);
                waits.extend(backoff_wait(
                    None,
                    record.failures_after_last_success,
                    left,
                    now,
                ));
            }
        }
    }
    (waits, indexes)
}

/// Each success policy rule with what it still needs, in order.
fn success_rules(job: &JobObject<'_>, completions: i32, completed: &IndexSet) -> Vec<Wait> {
    let Some(policy) = job.spec.success_policy.as_ref() else {
        return Vec::new();
    };
    policy
        .rules
        .iter()
        .enumerate()
        .map(|(rule, r)| {
            let required = match &r.succeeded_indexes {
                Some(listed) => IndexSet::parse_lenient(listed, completions),
                None => IndexSet::from_indexes(0..completions),
            };
            let missing =
                IndexSet::from_indexes(required.iter().filter(|i| !completed.contains(*i)));
            let done = required.count() - missing.count();
            let needs = match r.succeeded_count {
                Some(n) => u64::try_from(n).unwrap_or(0).saturating_sub(done),
                None => missing.count(),
            };
            Wait::SuccessRule {
                rule,
                succeeded_indexes: r.succeeded_indexes.clone(),
                succeeded_count: r.succeeded_count,
                missing_indexes: missing.to_string(),
                needs,
            }
        })
        .collect()
}

/// One event as the story tells it.
pub(crate) fn event_line(e: &Event) -> EventLine {
    EventLine {
        at: e
            .last_timestamp
            .as_ref()
            .map(|t| t.0)
            .or_else(|| e.event_time.as_ref().map(|t| t.0))
            .or_else(|| e.first_timestamp.as_ref().map(|t| t.0))
            .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0)),
        type_: e.type_.clone().unwrap_or_else(|| "Normal".to_owned()),
        reason: e.reason.clone().unwrap_or_default(),
        message: e.message.clone().unwrap_or_default(),
        count: e.count.unwrap_or(1),
        from: e
            .reporting_component
            .clone()
            .filter(|c| !c.is_empty())
            .or_else(|| e.source.as_ref().and_then(|s| s.component.clone()))
            .unwrap_or_default(),
    }
}

fn events(events: &[Event]) -> Vec<EventLine> {
    let mut lines: Vec<EventLine> = events.iter().map(event_line).collect();
    lines.sort_by_key(|l| l.at);
    let skip = lines.len().saturating_sub(MAX_EVENTS);
    lines.drain(..skip);
    lines
}

/// `to - from`, `None` when `to` is earlier.
fn until(from: Timestamp, to: Timestamp) -> Option<Duration> {
    Duration::try_from(to.duration_since(from)).ok()
}
