//! The annotations of a Job jobwarden's dispatcher runs (`spec.managedBy:
//! jobwarden.io/dispatcher`), two written by the user and two by the dispatcher itself:
//!
//! * `jobwarden.io/workers: east,west`: the workers the Job may be placed on, DNS labels
//!   separated by commas (spaces around a name are allowed, as the dispatcher reads them);
//! * `jobwarden.io/on-worker-lost`: `Redispatch` (the default), `Wait` or `Fail`;
//! * `jobwarden.io/on-worker-drain`: `Finish` (the default) or `Redispatch`;
//! * `jobwarden.io/worker`: the worker the Job is placed on, a DNS label;
//! * `jobwarden.io/worker-lost-since`: when its worker stopped answering, RFC 3339;
//! * `jobwarden.io/unschedulable-seconds`: how long its copy may stay unschedulable before it
//!   moves, whole seconds (user);
//! * `jobwarden.io/max-moves`: how often it may move for that, a count (user);
//! * `jobwarden.io/moved-from`: the workers it left for that, DNS labels (dispatcher).
//!
//! All stay mutable: the dispatcher writes its own over a Job's life (with a merge patch of
//! the user's Job), and a user may widen or narrow the candidates of a Job not yet placed.
//! The dispatcher's record (worker, lost mark, moves) may not come with a new Job, though, or
//! a manifest could place itself past `jobwarden.io/workers` and the workers' namespaces, or
//! spend its moves before it ran (`validate_new`). A Job without any of them costs eight map
//! lookups, nothing more.

use std::collections::BTreeSet;

use k8s_openapi::jiff::Timestamp;

use super::field::{BadValue, FieldError, FieldPath};
use super::well_known::{
    MAX_MOVES_ANNOTATION, MOVED_FROM_ANNOTATION, ON_WORKER_DRAIN_ANNOTATION,
    ON_WORKER_LOST_ANNOTATION, UNSCHEDULABLE_SECONDS_ANNOTATION, WORKER_ANNOTATION,
    WORKER_LOST_SINCE_ANNOTATION, WORKERS_ANNOTATION,
};
use super::{ErrorList, JobObject, names};

/// `jobwarden.io/on-worker-lost`'s values, in the sorted order upstream lists supported values.
pub const ON_WORKER_LOST_VALUES: [&str; 3] = ["Fail", "Redispatch", "Wait"];
/// `jobwarden.io/on-worker-drain`'s values, sorted.
pub const ON_WORKER_DRAIN_VALUES: [&str; 2] = ["Finish", "Redispatch"];

/// The most workers `jobwarden.io/workers` may name. No dispatcher has that many workers, and
/// the bound keeps a hostile annotation (256 KiB of `a,a,a,…`) from costing a review, and its
/// answer, more than a valid one.
pub const MAX_WORKERS: usize = 64;

/// The longest `jobwarden.io/unschedulable-seconds`: a week. Longer is "never move", which
/// `jobwarden.io/max-moves: "0"` says plainly.
pub const MAX_UNSCHEDULABLE_SECONDS: u64 = 7 * 24 * 3600;
/// The most `jobwarden.io/max-moves` may allow.
pub const MAX_MOVES: u32 = 16;

const ANNOTATIONS: FieldPath<'static> = FieldPath::new("metadata.annotations");

/// What a time in `jobwarden.io/worker-lost-since` looks like.
const TIME_EXAMPLE: &str = "2026-11-27T16:13:32Z";

pub fn validate(job: &JobObject<'_>) -> ErrorList {
    let mut errs = ErrorList::new();
    if let Some(text) = job.annotation(WORKERS_ANNOTATION) {
        validate_workers(text, &mut errs);
    }
    if let Some(text) = job.annotation(ON_WORKER_LOST_ANNOTATION)
        && !ON_WORKER_LOST_VALUES.contains(&text)
    {
        errs.push(FieldError::not_supported(
            &ANNOTATIONS.key(ON_WORKER_LOST_ANNOTATION),
            BadValue::Str(text.to_owned()),
            &ON_WORKER_LOST_VALUES,
        ));
    }
    if let Some(text) = job.annotation(ON_WORKER_DRAIN_ANNOTATION)
        && !ON_WORKER_DRAIN_VALUES.contains(&text)
    {
        errs.push(FieldError::not_supported(
            &ANNOTATIONS.key(ON_WORKER_DRAIN_ANNOTATION),
            BadValue::Str(text.to_owned()),
            &ON_WORKER_DRAIN_VALUES,
        ));
    }
    if let Some(text) = job.annotation(UNSCHEDULABLE_SECONDS_ANNOTATION) {
        validate_count(
            text,
            UNSCHEDULABLE_SECONDS_ANNOTATION,
            1,
            MAX_UNSCHEDULABLE_SECONDS,
            &mut errs,
        );
    }
    if let Some(text) = job.annotation(MAX_MOVES_ANNOTATION) {
        validate_count(
            text,
            MAX_MOVES_ANNOTATION,
            0,
            u64::from(MAX_MOVES),
            &mut errs,
        );
    }
    if let Some(text) = job.annotation(MOVED_FROM_ANNOTATION) {
        validate_names(text, MOVED_FROM_ANNOTATION, &mut errs);
    }
    if let Some(text) = job.annotation(WORKER_ANNOTATION) {
        let path = ANNOTATIONS.key(WORKER_ANNOTATION);
        for msg in names::dns1123_label(text) {
            errs.push(FieldError::invalid(
                &path,
                BadValue::Str(text.to_owned()),
                msg,
            ));
        }
    }
    if let Some(text) = job.annotation(WORKER_LOST_SINCE_ANNOTATION)
        && !is_rfc3339(text)
    {
        errs.push(FieldError::invalid(
            &ANNOTATIONS.key(WORKER_LOST_SINCE_ANNOTATION),
            BadValue::Str(text.to_owned()),
            format!("must be an RFC 3339 time such as {TIME_EXAMPLE}"),
        ));
    }
    errs
}

/// What a create may not hold: the dispatcher's record and its lost mark. The dispatcher
/// writes them once the Job exists; a manifest that brings them (copied from `kubectl get -o
/// yaml`, say) would choose its own worker.
pub fn validate_new(job: &JobObject<'_>) -> ErrorList {
    [
        WORKER_ANNOTATION,
        WORKER_LOST_SINCE_ANNOTATION,
        MOVED_FROM_ANNOTATION,
    ]
    .into_iter()
    .filter(|key| job.annotation(key).is_some())
    .map(|key| {
        FieldError::forbidden(
            &ANNOTATIONS.key(key),
            "set by jobwarden's dispatcher once the Job exists; a new Job may not carry it",
        )
    })
    .collect()
}

fn validate_workers(text: &str, errs: &mut ErrorList) {
    validate_names(text, WORKERS_ANNOTATION, errs);
}

/// A whole number in `min..=max`, written as Go's `strconv.ParseUint` reads one (digits only:
/// no sign, no spaces, no unit).
fn validate_count(text: &str, key: &str, min: u64, max: u64, errs: &mut ErrorList) {
    let ok = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && text.parse::<u64>().is_ok_and(|n| (min..=max).contains(&n));
    if !ok {
        errs.push(FieldError::invalid(
            &ANNOTATIONS.key(key),
            BadValue::Str(text.to_owned()),
            format!("must be a whole number from {min} to {max}"),
        ));
    }
}

/// Each entry by its position, as upstream reports the items of a list: empty (`east,,west`,
/// a trailing comma, or a blank annotation) is Required, a name that is not a DNS label
/// Invalid, a name given twice Duplicate.
fn validate_names(text: &str, key: &str, errs: &mut ErrorList) {
    let path = ANNOTATIONS.key(key);
    let count = text.split(',').count();
    if count > MAX_WORKERS {
        errs.push(FieldError::too_many(&path, count, MAX_WORKERS));
        return;
    }
    let mut seen = BTreeSet::new();
    for (i, name) in text.split(',').map(str::trim).enumerate() {
        let at = path.index(i);
        if name.is_empty() {
            errs.push(FieldError::required(&at, ""));
            continue;
        }
        let problems = names::dns1123_label(name);
        if !problems.is_empty() {
            for msg in problems {
                errs.push(FieldError::invalid(
                    &at,
                    BadValue::Str(name.to_owned()),
                    msg,
                ));
            }
        } else if !seen.insert(name) {
            errs.push(FieldError::duplicate(&at, BadValue::Str(name.to_owned())));
        }
    }
}

/// RFC 3339's `date-time` as kube-apiserver reads and writes a `metav1.Time` (Go's
/// `time.RFC3339`: `T` and `Z` in capitals, seconds required, a fraction allowed): the shape
/// here, the calendar (days of the month, leap years, the offset's range) by jiff, the reader
/// the dispatcher uses. jiff alone would also take what RFC 3339 does not (a space for the
/// `T`, no seconds, a bracketed time zone), which other readers of the Job would refuse.
fn is_rfc3339(text: &str) -> bool {
    let b = text.as_bytes();
    let digits = |from: usize, to: usize| {
        b.get(from..to)
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    let date_time = digits(0, 4)
        && at(4, b'-')
        && digits(5, 7)
        && at(7, b'-')
        && digits(8, 10)
        && at(10, b'T')
        && digits(11, 13)
        && at(13, b':')
        && digits(14, 16)
        && at(16, b':')
        && digits(17, 19);
    if !date_time {
        return false;
    }
    let mut offset = 19;
    if at(offset, b'.') {
        let fraction = b
            .get(offset + 1..)
            .map_or(0, |f| f.iter().take_while(|d| d.is_ascii_digit()).count());
        if fraction == 0 {
            return false;
        }
        offset += 1 + fraction;
    }
    let zone = match b.get(offset..) {
        Some(b"Z") => true,
        // Go refuses an offset of 24 hours or more, which jiff takes.
        Some([b'+' | b'-', h1, h2, b':', m1, m2]) => {
            [h1, h2, m1, m2].iter().all(|d| d.is_ascii_digit())
                && (h1 - b'0') * 10 + (h2 - b'0') < 24
                && *m1 < b'6'
        }
        _ => false,
    };
    zone && text.parse::<Timestamp>().is_ok()
}

/// The annotations a user sets that only the dispatcher reads, on a Job it does not run.
pub fn warnings(job: &JobObject<'_>, dispatcher_name: &str) -> Vec<String> {
    if job.spec.managed_by.as_deref() == Some(dispatcher_name) {
        return Vec::new();
    }
    [
        WORKERS_ANNOTATION,
        ON_WORKER_LOST_ANNOTATION,
        ON_WORKER_DRAIN_ANNOTATION,
        UNSCHEDULABLE_SECONDS_ANNOTATION,
        MAX_MOVES_ANNOTATION,
    ]
    .into_iter()
    .filter(|key| job.annotation(key).is_some())
        .map(|key| {
            format!(
                "metadata.annotations[{key}]: takes effect only for Jobs with spec.managedBy {dispatcher_name:?}; no other controller reads it"
            )
        })
        .collect()
}
