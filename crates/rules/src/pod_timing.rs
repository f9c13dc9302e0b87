//! Two timings upstream's Job controller fixes and jobwarden lets a delegated Job set, each in
//! an annotation beside the spec (kube-apiserver prunes fields it does not know):
//!
//! * `jobwarden.io/pod-failure-backoff: '{"initial":"1s","max":"2m"}'`: the delay before a
//!   failed pod is replaced, `initial` doubling per failure since the last success up to `max`
//!   (upstream: 10 s and 10 min, kubernetes/kubernetes #94012, #114651). Either member may be
//!   left out and keeps upstream's value.
//! * `jobwarden.io/pod-start-timeout: 10m`: how long a pod may stay `Pending` with a container
//!   the kubelet cannot start (`NOT_STARTED_REASONS`) before the controller fails it with the
//!   condition `jobwarden.io/PodStartTimeout` (kubernetes/kubernetes #122300).
//!
//! Durations are whole seconds, written as `simulate` reads them (`seconds.rs`). The bounds:
//!
//! * `initial` from 1 s (the controller plans in whole seconds, so a shorter delay cannot be
//!   kept) to 10 min (upstream's cap: a first delay longer than any upstream ever waits is a
//!   typo, not a policy);
//! * `max` from `initial` (the delay never shrinks as failures add up) to 1 h (past an hour a
//!   Job that waits looks hung, and `activeDeadlineSeconds` is the tool for giving up);
//! * the start timeout from 1 s (it only counts while a container is in one of the failure
//!   states, never while an image is merely being pulled, so a short one fails only pods that
//!   already cannot start) to 24 h.
//!
//! The back-off only changes delays not yet waited, so it may change while the Job runs. The
//! start timeout may not: shortened mid-run it would fail, at once, pods the user had allowed
//! to wait; it is immutable as the pod failure policy it feeds is.

use std::time::Duration;

use serde_json::Value;

use super::field::{BadValue, FieldError, FieldPath};
use super::{ErrorList, JobObject, seconds};

pub const BACKOFF_ANNOTATION: &str = "jobwarden.io/pod-failure-backoff";
pub const START_TIMEOUT_ANNOTATION: &str = "jobwarden.io/pod-start-timeout";

/// The pod condition the controller adds to a pod whose start timed out, before deleting it; a
/// pod failure policy rule may match it in `onPodConditions`.
pub const START_TIMEOUT_CONDITION: &str = "jobwarden.io/PodStartTimeout";

/// The `state.waiting.reason`s the kubelet writes for a container it cannot start, whatever
/// the wait: the image cannot be pulled or named, or the container cannot be configured or
/// created. `ContainerCreating` and `PodInitializing` are left out: they are progress.
pub const NOT_STARTED_REASONS: [&str; 5] = [
    "CreateContainerConfigError",
    "CreateContainerError",
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
];

/// Upstream's `DefaultJobPodFailureBackOff` and `MaxJobPodFailureBackOff`.
pub const UPSTREAM_INITIAL: Duration = Duration::from_secs(10);
pub const UPSTREAM_MAX: Duration = Duration::from_secs(600);

pub const INITIAL_RANGE: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(600));
pub const MAX_CEILING: Duration = Duration::from_secs(3600);
pub const START_TIMEOUT_RANGE: (Duration, Duration) =
    (Duration::from_secs(1), Duration::from_secs(24 * 3600));

const ANNOTATIONS: FieldPath<'static> = FieldPath::new("metadata.annotations");

/// The failure back-off a Job asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureBackoff {
    pub initial: Duration,
    pub max: Duration,
}

impl Default for FailureBackoff {
    fn default() -> Self {
        FailureBackoff {
            initial: UPSTREAM_INITIAL,
            max: UPSTREAM_MAX,
        }
    }
}

/// The back-off the annotation sets, when it is valid: the controller's reading of a Job the
/// webhook has already admitted (a malformed one keeps the controller's own).
pub fn failure_backoff(job: &JobObject<'_>) -> Option<FailureBackoff> {
    let text = job.annotation(BACKOFF_ANNOTATION)?;
    let mut errs = ErrorList::new();
    let backoff = parse_backoff(text, &mut errs);
    errs.is_empty().then_some(backoff).flatten()
}

/// The start timeout the annotation sets, when it is valid.
pub fn start_timeout(job: &JobObject<'_>) -> Option<Duration> {
    let text = job.annotation(START_TIMEOUT_ANNOTATION)?;
    let mut errs = ErrorList::new();
    parse_start_timeout(text, &mut errs).filter(|_| errs.is_empty())
}

/// Whether the Job sets either annotation.
pub fn any_set(job: &JobObject<'_>) -> bool {
    job.annotation(BACKOFF_ANNOTATION).is_some()
        || job.annotation(START_TIMEOUT_ANNOTATION).is_some()
}

fn parse_backoff(text: &str, errs: &mut ErrorList) -> Option<FailureBackoff> {
    let path = ANNOTATIONS.key(BACKOFF_ANNOTATION);
    let members = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(members)) => members,
        _ => {
            errs.push(FieldError::invalid(
                &path,
                BadValue::Str(text.to_owned()),
                r#"must be a JSON object such as {"initial":"1s","max":"2m"}"#,
            ));
            return None;
        }
    };
    for key in members
        .keys()
        .filter(|k| !["initial", "max"].contains(&k.as_str()))
    {
        errs.push(FieldError::not_supported(
            &path.child(key),
            BadValue::Str(key.clone()),
            &["initial", "max"],
        ));
    }
    let mut member = |name: &str, default: Duration| match members.get(name) {
        None => Some(default),
        Some(Value::String(s)) => duration(&path.child(name), s, errs),
        Some(other) => {
            errs.push(FieldError::invalid(
                &path.child(name),
                BadValue::json(other),
                "must be a string such as \"30s\"",
            ));
            None
        }
    };
    let initial = member("initial", UPSTREAM_INITIAL);
    let max = member("max", UPSTREAM_MAX);
    let initial_path = path.child("initial");
    let max_path = path.child("max");
    if let Some(i) = initial {
        within(&initial_path, i, INITIAL_RANGE, errs);
    }
    if let Some(m) = max {
        within(&max_path, m, (INITIAL_RANGE.0, MAX_CEILING), errs);
        if let Some(i) = initial.filter(|i| m < *i) {
            errs.push(FieldError::invalid(
                &max_path,
                BadValue::Str(seconds::format(m.as_secs())),
                format!(
                    "must be greater than or equal to initial ({})",
                    seconds::format(i.as_secs())
                ),
            ));
        }
    }
    Some(FailureBackoff {
        initial: initial?,
        max: max?,
    })
}

fn parse_start_timeout(text: &str, errs: &mut ErrorList) -> Option<Duration> {
    let path = ANNOTATIONS.key(START_TIMEOUT_ANNOTATION);
    let d = duration(&path, text, errs)?;
    within(&path, d, START_TIMEOUT_RANGE, errs);
    Some(d)
}

fn duration(path: &FieldPath<'_>, text: &str, errs: &mut ErrorList) -> Option<Duration> {
    match seconds::parse(text) {
        Ok(d) => Some(d),
        Err(_) => {
            errs.push(FieldError::invalid(
                path,
                BadValue::Str(text.to_owned()),
                "must be a duration of whole seconds such as 30s, 1m30s or 2h",
            ));
            None
        }
    }
}

fn within(
    path: &FieldPath<'_>,
    d: Duration,
    (low, high): (Duration, Duration),
    errs: &mut ErrorList,
) {
    let shown = || BadValue::Str(seconds::format(d.as_secs()));
    if d < low {
        errs.push(FieldError::invalid(
            path,
            shown(),
            format!(
                "must be greater than or equal to {}",
                seconds::format(low.as_secs())
            ),
        ));
    } else if d > high {
        errs.push(FieldError::invalid(
            path,
            shown(),
            format!(
                "must be less than or equal to {}",
                seconds::format(high.as_secs())
            ),
        ));
    }
}

pub fn validate(job: &JobObject<'_>) -> ErrorList {
    let mut errs = ErrorList::new();
    if let Some(text) = job.annotation(BACKOFF_ANNOTATION) {
        parse_backoff(text, &mut errs);
    }
    if let Some(text) = job.annotation(START_TIMEOUT_ANNOTATION) {
        parse_start_timeout(text, &mut errs);
    }
    errs
}

/// The start timeout may not change once set, nor be added or removed: see the module's
/// header. The back-off may.
pub fn validate_update(new: &JobObject<'_>, old: &JobObject<'_>) -> ErrorList {
    let mut errs = ErrorList::new();
    let new_value = new.annotation(START_TIMEOUT_ANNOTATION);
    if new_value != old.annotation(START_TIMEOUT_ANNOTATION) {
        let value = new_value.map_or(BadValue::Json(Value::Null.to_string()), |s| {
            BadValue::Str(s.to_owned())
        });
        errs.push(FieldError::immutable(
            &ANNOTATIONS.key(START_TIMEOUT_ANNOTATION),
            value,
        ));
    }
    errs
}

/// The annotations set on a Job another controller runs, which will do nothing.
pub fn warnings(job: &JobObject<'_>, controller_name: &str) -> Vec<String> {
    if job.spec.managed_by.as_deref() == Some(controller_name) {
        return Vec::new();
    }
    [BACKOFF_ANNOTATION, START_TIMEOUT_ANNOTATION]
        .into_iter()
        .filter(|key| job.annotation(key).is_some())
        .map(|key| {
            format!(
                "metadata.annotations[{key}]: takes effect only for Jobs with spec.managedBy {controller_name:?}; the built-in Job controller ignores it"
            )
        })
        .collect()
}
