//! `jobs/status` updates: upstream's `ValidateJobStatusUpdate` with the options its strategy
//! computes (`getStatusValidationOptions`, v1.36, JobManagedBy GA). Most checks run only when
//! the update touches the fields they guard, so a Job stored with a status that is no longer
//! valid can still receive unrelated updates; the names of the checks are upstream's options.

use k8s_openapi::api::batch::v1::JobStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::condition::{COMPLETE, FAILED, FAILURE_TARGET, SUCCESS_CRITERIA_MET, SUSPENDED};
use super::field::{BadValue, FieldError, FieldPath};
use super::{ErrorList, JobObject, go_json, has_true_condition, indexes};

/// Times are stored with whole-second precision.
fn seconds(t: Option<&Time>) -> Option<i64> {
    t.map(|t| t.0.as_second())
}

fn time_value(t: Option<&Time>) -> BadValue {
    match t {
        Some(t) => BadValue::json(t),
        None => BadValue::Json("null".to_owned()),
    }
}

fn has_condition_status(status: &JobStatus, type_: &str, value: &str) -> bool {
    status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == type_ && c.status == value)
}

/// Which checks apply to this update; field names are upstream's `JobStatusValidationOptions`.
struct Options {
    reject_decreasing_succeeded_counter: bool,
    reject_invalid_completed_indexes: bool,
    reject_invalid_failed_indexes: bool,
    reject_completed_indexes_for_non_indexed_job: bool,
    reject_failed_indexes_for_no_backoff_limit_per_index: bool,
    reject_failed_indexes_overlapping_completed: bool,
    reject_failed_job_without_failure_target: bool,
    reject_complete_job_without_success_criteria_met: bool,
    reject_finished_job_with_active_pods: bool,
    reject_finished_job_without_start_time: bool,
    reject_finished_job_with_uncounted_terminated_pods: bool,
    reject_start_time_update_for_unsuspended_job: bool,
    reject_completion_time_before_start_time: bool,
    reject_not_complete_job_with_completion_time: bool,
    reject_complete_job_without_completion_time: bool,
    reject_complete_job_with_failed_condition: bool,
    reject_complete_job_with_failure_target_condition: bool,
    reject_more_ready_than_active_pods: bool,
    reject_finished_job_with_terminating_pods: bool,
}

impl Options {
    fn new(new: &JobObject<'_>, old: &JobObject<'_>) -> Self {
        let (n, o) = (&new.status, &old.status);
        let changed = |t: &str| has_true_condition(n, t) != has_true_condition(o, t);
        let finished_changed = new.is_finished() != old.is_finished();
        let completed_changed = n.completed_indexes.as_deref().unwrap_or("")
            != o.completed_indexes.as_deref().unwrap_or("");
        let failed_changed = n.failed_indexes != o.failed_indexes;
        let start_changed = seconds(n.start_time.as_ref()) != seconds(o.start_time.as_ref());
        let completion_changed =
            seconds(n.completion_time.as_ref()) != seconds(o.completion_time.as_ref());
        let active_changed = n.active.unwrap_or(0) != o.active.unwrap_or(0);
        let uncounted_changed = {
            let lists = |s: &JobStatus| {
                let u = s.uncounted_terminated_pods.as_ref();
                (
                    u.and_then(|u| u.succeeded.clone()).unwrap_or_default(),
                    u.and_then(|u| u.failed.clone()).unwrap_or_default(),
                )
            };
            lists(n) != lists(o)
        };
        let resuming = has_condition_status(o, SUSPENDED, "True")
            && has_condition_status(n, SUSPENDED, "False");
        // PR #132614: a suspended Job with zero completions may finish without ever starting.
        let exempt_from_start_time = new.is_suspended() && new.spec.completions == Some(0);
        Options {
            reject_decreasing_succeeded_counter: !new.is_indexed()
                || new.spec.completions != new.spec.parallelism,
            reject_invalid_completed_indexes: completed_changed,
            reject_invalid_failed_indexes: failed_changed,
            reject_completed_indexes_for_non_indexed_job: completed_changed,
            reject_failed_indexes_for_no_backoff_limit_per_index: failed_changed,
            reject_failed_indexes_overlapping_completed: failed_changed || completed_changed,
            reject_failed_job_without_failure_target: changed(FAILED) || failed_changed,
            reject_complete_job_without_success_criteria_met: changed(COMPLETE)
                || changed(SUCCESS_CRITERIA_MET),
            reject_finished_job_with_active_pods: finished_changed || active_changed,
            reject_finished_job_without_start_time: (finished_changed || start_changed)
                && !exempt_from_start_time,
            reject_finished_job_with_uncounted_terminated_pods: finished_changed
                || uncounted_changed,
            reject_start_time_update_for_unsuspended_job: start_changed && !resuming,
            reject_completion_time_before_start_time: start_changed || completion_changed,
            reject_not_complete_job_with_completion_time: changed(COMPLETE) || completion_changed,
            reject_complete_job_without_completion_time: changed(COMPLETE) || completion_changed,
            reject_complete_job_with_failed_condition: changed(COMPLETE) || changed(FAILED),
            reject_complete_job_with_failure_target_condition: changed(COMPLETE)
                || changed(FAILURE_TARGET),
            reject_more_ready_than_active_pods: n.ready != o.ready || active_changed,
            reject_finished_job_with_terminating_pods: finished_changed
                || n.terminating != o.terminating,
        }
    }
}

pub fn validate(new: &JobObject<'_>, old: &JobObject<'_>) -> ErrorList {
    let opts = Options::new(new, old);
    let mut errs = validate_status(new, &opts);
    errs.extend(validate_transitions(new, old, &opts));
    errs
}

/// The `True` conditions the status checks read, looked up once.
struct TrueConditions {
    complete: bool,
    failed: bool,
    failure_target: bool,
    success_criteria_met: bool,
}

impl TrueConditions {
    fn of(s: &JobStatus) -> Self {
        TrueConditions {
            complete: has_true_condition(s, COMPLETE),
            failed: has_true_condition(s, FAILED),
            failure_target: has_true_condition(s, FAILURE_TARGET),
            success_criteria_met: has_true_condition(s, SUCCESS_CRITERIA_MET),
        }
    }

    fn finished(&self) -> bool {
        self.complete || self.failed
    }
}

/// `validateJobStatus`: the new status on its own, under the options. Each part below is one
/// concern; they run in upstream's order, so the errors come out in upstream's order.
fn validate_status(job: &JobObject<'_>, opts: &Options) -> ErrorList {
    let path = FieldPath::new("status");
    let s = &job.status;
    let conditions = TrueConditions::of(s);
    let mut errs = counters_not_negative(s, &path);
    errs.extend(uncounted_uids(s, &path.child("uncountedTerminatedPods")));
    errs.extend(conflicting_conditions(&conditions, opts, &path));
    errs.extend(completion_time(s, &conditions, opts, &path));
    errs.extend(missing_prerequisite_conditions(&conditions, opts, &path));
    errs.extend(finished_job_leftovers(job, &conditions, opts, &path));
    errs.extend(index_lists_parse(job, opts, &path));
    errs.extend(index_lists_allowed(job, opts, &path));
    errs.extend(pod_counts(s, &conditions, opts, &path));
    errs.extend(success_criteria_met_scope(job, &conditions, &path));
    errs
}

/// The counters may not be negative; `ready` and `terminating` are checked only when set.
fn counters_not_negative(s: &JobStatus, path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::new();
    for (name, value) in [
        ("active", Some(s.active.unwrap_or(0))),
        ("succeeded", Some(s.succeeded.unwrap_or(0))),
        ("failed", Some(s.failed.unwrap_or(0))),
        ("ready", s.ready),
        ("terminating", s.terminating),
    ] {
        if let Some(v) = value.filter(|v| *v < 0) {
            errs.push(FieldError::negative(&path.child(name), v.into()));
        }
    }
    errs
}

/// Every UID in `uncountedTerminatedPods` is non-empty and appears once across both lists.
fn uncounted_uids(s: &JobStatus, uncounted_path: &FieldPath) -> ErrorList {
    let uncounted = s.uncounted_terminated_pods.as_ref();
    let mut errs = ErrorList::new();
    let mut seen = std::collections::HashSet::new();
    for (list_name, list) in [
        ("succeeded", uncounted.and_then(|u| u.succeeded.as_deref())),
        ("failed", uncounted.and_then(|u| u.failed.as_deref())),
    ] {
        let list_path = uncounted_path.child(list_name);
        for (i, uid) in list.unwrap_or_default().iter().enumerate() {
            let p = list_path.index(i);
            if uid.is_empty() {
                errs.push(FieldError::invalid(
                    &p,
                    BadValue::json_str(uid),
                    "must not be empty",
                ));
            } else if !seen.insert(uid.as_str()) {
                errs.push(FieldError::duplicate(&p, BadValue::json_str(uid)));
            }
        }
    }
    errs
}

/// An error on `status.conditions` as a whole: upstream names no value.
fn condition_error(path: &FieldPath, detail: &str) -> FieldError {
    FieldError::invalid(&path.child("conditions"), BadValue::Omit, detail)
}

/// RejectCompleteJobWithFailedCondition, RejectCompleteJobWithFailureTargetCondition.
fn conflicting_conditions(c: &TrueConditions, opts: &Options, path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::new();
    if opts.reject_complete_job_with_failed_condition && c.complete && c.failed {
        errs.push(condition_error(
            path,
            "cannot set Complete=True and Failed=true conditions",
        ));
    }
    if opts.reject_complete_job_with_failure_target_condition && c.complete && c.failure_target {
        errs.push(condition_error(
            path,
            "cannot set Complete=True and FailureTarget=true conditions",
        ));
    }
    errs
}

/// RejectNotCompleteJobWithCompletionTime, RejectCompleteJobWithoutCompletionTime,
/// RejectCompletionTimeBeforeStartTime.
fn completion_time(
    s: &JobStatus,
    c: &TrueConditions,
    opts: &Options,
    path: &FieldPath,
) -> ErrorList {
    let completion_path = path.child("completionTime");
    let mut errs = ErrorList::new();
    if opts.reject_not_complete_job_with_completion_time
        && s.completion_time.is_some()
        && !c.complete
    {
        errs.push(FieldError::invalid(
            &completion_path,
            time_value(s.completion_time.as_ref()),
            "cannot set completionTime when there is no Complete=True condition",
        ));
    }
    if opts.reject_complete_job_without_completion_time && c.complete && s.completion_time.is_none()
    {
        errs.push(FieldError::required(
            &completion_path,
            "completionTime is required for Complete jobs",
        ));
    }
    if opts.reject_completion_time_before_start_time
        && let (Some(start), Some(completion)) = (
            seconds(s.start_time.as_ref()),
            seconds(s.completion_time.as_ref()),
        )
        && completion < start
    {
        errs.push(FieldError::invalid(
            &completion_path,
            time_value(s.completion_time.as_ref()),
            "must be equal to or after `startTime`",
        ));
    }
    errs
}

/// RejectFailedJobWithoutFailureTarget, RejectCompleteJobWithoutSuccessCriteriaMet: a terminal
/// condition needs the interim condition the controller sets first.
fn missing_prerequisite_conditions(
    c: &TrueConditions,
    opts: &Options,
    path: &FieldPath,
) -> ErrorList {
    let mut errs = ErrorList::new();
    if opts.reject_failed_job_without_failure_target && c.failed && !c.failure_target {
        errs.push(condition_error(
            path,
            "cannot set Failed=True condition without the FailureTarget=true condition",
        ));
    }
    if opts.reject_complete_job_without_success_criteria_met
        && c.complete
        && !c.success_criteria_met
    {
        errs.push(condition_error(
            path,
            "cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
        ));
    }
    errs
}

/// RejectFinishedJobWithActivePods, RejectFinishedJobWithoutStartTime,
/// RejectFinishedJobWithUncountedTerminatedPods.
fn finished_job_leftovers(
    job: &JobObject<'_>,
    c: &TrueConditions,
    opts: &Options,
    path: &FieldPath,
) -> ErrorList {
    let s = &job.status;
    let finished = c.finished();
    let mut errs = ErrorList::new();
    let active = s.active.unwrap_or(0);
    if opts.reject_finished_job_with_active_pods && active > 0 && finished {
        errs.push(FieldError::invalid(
            &path.child("active"),
            BadValue::Int(active.into()),
            "active>0 is invalid for finished job",
        ));
    }
    if opts.reject_finished_job_without_start_time && s.start_time.is_none() && finished {
        errs.push(FieldError::required(
            &path.child("startTime"),
            "startTime is required for finished job",
        ));
    }
    let uncounted_any = s.uncounted_terminated_pods.as_ref().is_some_and(|u| {
        !u.succeeded.as_deref().unwrap_or_default().is_empty()
            || !u.failed.as_deref().unwrap_or_default().is_empty()
    });
    if opts.reject_finished_job_with_uncounted_terminated_pods && finished && uncounted_any {
        errs.push(FieldError::invalid(
            &path.child("uncountedTerminatedPods"),
            BadValue::Json(go_json::uncounted_terminated_pods(
                job.raw().pointer("/status/uncountedTerminatedPods"),
            )),
            "must be empty for finished job",
        ));
    }
    errs
}

/// RejectInvalidCompletedIndexes, RejectInvalidFailedIndexes: the lists parse and stay below
/// `completions`.
fn index_lists_parse(job: &JobObject<'_>, opts: &Options, path: &FieldPath) -> ErrorList {
    let s = &job.status;
    let mut errs = ErrorList::new();
    let completed_indexes = s.completed_indexes.as_deref().unwrap_or("");
    if opts.reject_invalid_completed_indexes
        && let Some(completions) = job.spec.completions
        && let Err(e) = indexes::count_valid(completed_indexes, completions)
    {
        errs.push(FieldError::invalid(
            &path.child("completedIndexes"),
            BadValue::Str(completed_indexes.to_owned()),
            format!("error parsing completedIndexes: {e}"),
        ));
    }
    if opts.reject_invalid_failed_indexes
        && let (Some(completions), Some(_), Some(failed_indexes)) = (
            job.spec.completions,
            job.spec.backoff_limit_per_index,
            s.failed_indexes.as_deref(),
        )
        && let Err(e) = indexes::count_valid(failed_indexes, completions)
    {
        errs.push(FieldError::invalid(
            &path.child("failedIndexes"),
            BadValue::json_str(failed_indexes),
            format!("error parsing failedIndexes: {e}"),
        ));
    }
    errs
}

/// RejectCompletedIndexesForNonIndexedJob, RejectFailedIndexesForNoBackoffLimitPerIndex,
/// RejectFailedIndexesOverlappingCompleted: where the lists may be set at all.
fn index_lists_allowed(job: &JobObject<'_>, opts: &Options, path: &FieldPath) -> ErrorList {
    let s = &job.status;
    let mut errs = ErrorList::new();
    let completed_indexes = s.completed_indexes.as_deref().unwrap_or("");
    if opts.reject_completed_indexes_for_non_indexed_job
        && !completed_indexes.is_empty()
        && !job.is_indexed()
    {
        errs.push(FieldError::invalid(
            &path.child("completedIndexes"),
            BadValue::Str(completed_indexes.to_owned()),
            "cannot set non-empty completedIndexes when non-indexed completion mode",
        ));
    }
    if opts.reject_failed_indexes_for_no_backoff_limit_per_index
        && job.spec.backoff_limit_per_index.is_none()
        && let Some(failed_indexes) = s.failed_indexes.as_deref()
    {
        errs.push(FieldError::invalid(
            &path.child("failedIndexes"),
            BadValue::Str(failed_indexes.to_owned()),
            "cannot set non-null failedIndexes when backoffLimitPerIndex is null",
        ));
    }
    if opts.reject_failed_indexes_overlapping_completed
        && let (Some(completions), Some(failed_indexes)) =
            (job.spec.completions, s.failed_indexes.as_deref())
        && let Some(index) = indexes::first_overlap(completed_indexes, failed_indexes, completions)
    {
        errs.push(FieldError::invalid(
            &path.child("failedIndexes"),
            BadValue::json_str(failed_indexes),
            format!("failedIndexes and completedIndexes overlap at index: {index}"),
        ));
    }
    errs
}

/// RejectFinishedJobWithTerminatingPods, RejectMoreReadyThanActivePods.
fn pod_counts(s: &JobStatus, c: &TrueConditions, opts: &Options, path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::new();
    if opts.reject_finished_job_with_terminating_pods
        && let Some(terminating) = s.terminating.filter(|t| *t > 0)
        && c.finished()
    {
        errs.push(FieldError::invalid(
            &path.child("terminating"),
            BadValue::Int(terminating.into()),
            "terminating>0 is invalid for finished job",
        ));
    }
    let active = s.active.unwrap_or(0);
    if opts.reject_more_ready_than_active_pods
        && let Some(ready) = s.ready.filter(|r| *r > active)
    {
        errs.push(FieldError::invalid(
            &path.child("ready"),
            BadValue::Int(ready.into()),
            "cannot set more ready pods than active",
        ));
    }
    errs
}

/// SuccessCriteriaMet excludes the failure conditions, and a Job with a success policy
/// completes only through it. Upstream's two SuccessCriteriaMet scope checks (NonIndexed Jobs,
/// Jobs without a success policy) are gated by AllowForSuccessCriteriaMetInExtendedScope,
/// always true in v1.36.
fn success_criteria_met_scope(
    job: &JobObject<'_>,
    c: &TrueConditions,
    path: &FieldPath,
) -> ErrorList {
    let mut errs = ErrorList::new();
    if c.success_criteria_met && c.failed {
        errs.push(condition_error(
            path,
            "cannot set SuccessCriteriaMet=True and Failed=true conditions",
        ));
    }
    if c.success_criteria_met && c.failure_target {
        errs.push(condition_error(
            path,
            "cannot set SuccessCriteriaMet=True and FailureTarget=true conditions",
        ));
    }
    if job.spec.success_policy.is_some() && !c.success_criteria_met && c.complete {
        errs.push(condition_error(
            path,
            "cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True",
        ));
    }
    errs
}

/// The checks of `ValidateJobStatusUpdate` that compare the old and new status.
fn validate_transitions(new: &JobObject<'_>, old: &JobObject<'_>, opts: &Options) -> ErrorList {
    let path = FieldPath::new("status");
    let (n, o) = (&new.status, &old.status);
    let conditions = path.child("conditions");
    let mut errs = ErrorList::new();
    // RejectDisablingTerminalCondition
    for terminal in [FAILED, COMPLETE, FAILURE_TARGET] {
        if has_true_condition(o, terminal) && !has_true_condition(n, terminal) {
            errs.push(FieldError::invalid(
                &conditions,
                BadValue::Omit,
                format!("cannot disable the terminal {terminal}=True condition"),
            ));
        }
    }
    // RejectDecreasingFailedCounter
    let (new_failed, old_failed) = (n.failed.unwrap_or(0), o.failed.unwrap_or(0));
    if new_failed < old_failed {
        errs.push(FieldError::invalid(
            &path.child("failed"),
            BadValue::Int(new_failed.into()),
            "cannot decrease the failed counter",
        ));
    }
    let (new_succeeded, old_succeeded) = (n.succeeded.unwrap_or(0), o.succeeded.unwrap_or(0));
    if opts.reject_decreasing_succeeded_counter && new_succeeded < old_succeeded {
        errs.push(FieldError::invalid(
            &path.child("succeeded"),
            BadValue::Int(new_succeeded.into()),
            "cannot decrease the succeeded counter",
        ));
    }
    // RejectMutatingCompletionTime
    if let (Some(new_time), Some(old_time)) = (
        seconds(n.completion_time.as_ref()),
        seconds(o.completion_time.as_ref()),
    ) && new_time != old_time
    {
        errs.push(FieldError::immutable(
            &path.child("completionTime"),
            time_value(n.completion_time.as_ref()),
        ));
    }
    if opts.reject_start_time_update_for_unsuspended_job
        && o.start_time.is_some()
        && seconds(o.start_time.as_ref()) != seconds(n.start_time.as_ref())
        && !new.is_suspended()
    {
        errs.push(FieldError::invalid(
            &path.child("startTime"),
            time_value(n.start_time.as_ref()),
            "field is immutable for unsuspended job once set",
        ));
    }
    let (new_met, old_met) = (
        has_true_condition(n, SUCCESS_CRITERIA_MET),
        has_true_condition(o, SUCCESS_CRITERIA_MET),
    );
    if old_met && !new_met {
        errs.push(FieldError::invalid(
            &conditions,
            BadValue::Omit,
            "cannot disable the SuccessCriteriaMet=True condition",
        ));
    }
    if has_true_condition(o, COMPLETE) && !old_met && new_met {
        errs.push(FieldError::invalid(
            &conditions,
            BadValue::Omit,
            "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions",
        ));
    }
    errs
}
