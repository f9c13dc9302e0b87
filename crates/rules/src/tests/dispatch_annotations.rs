//! The dispatcher's annotations: `jobwarden.io/workers`, `jobwarden.io/on-worker-lost`,
//! `jobwarden.io/worker` and `jobwarden.io/worker-lost-since`, each value beside the errors a
//! create gets, the updates the dispatcher itself makes, and the warnings.

use serde_json::{Value, json};

use super::{JobBuilder, create_errors, update_errors};
use crate::JobObject;
use crate::dispatch_annotations::{self, MAX_WORKERS};
use crate::well_known::DISPATCHER_NAME;

const WORKERS: &str = "/metadata/annotations/jobwarden.io~1workers";
const ON_LOST: &str = "/metadata/annotations/jobwarden.io~1on-worker-lost";
const WORKER: &str = "/metadata/annotations/jobwarden.io~1worker";
const SINCE: &str = "/metadata/annotations/jobwarden.io~1worker-lost-since";
const W: &str = "metadata.annotations[jobwarden.io/workers]";
const L: &str = "metadata.annotations[jobwarden.io/on-worker-lost]";
const P: &str = "metadata.annotations[jobwarden.io/worker]";
const S: &str = "metadata.annotations[jobwarden.io/worker-lost-since]";

const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn with(pointer: &str, text: &str) -> Value {
    JobBuilder::new().set(pointer, json!(text)).build()
}

/// The errors of an update of a plain Job to `job`: the dispatcher's own annotations are
/// written on Jobs that exist.
fn updated(job: &Value) -> Vec<String> {
    update_errors(job, &JobBuilder::new().build())
}

#[test]
fn a_new_job_may_not_carry_the_dispatchers_record() {
    assert_eq!(
        create_errors(&with(WORKER, "east")),
        [format!(
            "{P}: Forbidden: set by jobwarden's dispatcher once the Job exists; a new Job may not carry it"
        )]
    );
    assert_eq!(
        create_errors(&with(SINCE, "2026-11-27T16:13:32Z")),
        [format!(
            "{S}: Forbidden: set by jobwarden's dispatcher once the Job exists; a new Job may not carry it"
        )]
    );
}

#[test]
fn workers_are_distinct_dns_labels() {
    let names = |n: usize| {
        (0..n)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let long = "a".repeat(64);
    let cases: Vec<(String, Vec<String>)> = vec![
        ("east".into(), vec![]),
        ("east,west".into(), vec![]),
        ("east, west".into(), vec![]),
        (" east ".into(), vec![]),
        (names(MAX_WORKERS), vec![]),
        ("".into(), vec![format!("{W}[0]: Required value")]),
        (" ".into(), vec![format!("{W}[0]: Required value")]),
        ("east,".into(), vec![format!("{W}[1]: Required value")]),
        (
            ",east,,west".into(),
            vec![
                format!("{W}[0]: Required value"),
                format!("{W}[2]: Required value"),
            ],
        ),
        (
            "East".into(),
            vec![format!("{W}[0]: Invalid value: \"East\": {LABEL_MSG}")],
        ),
        (
            "east,eu.west".into(),
            vec![format!("{W}[1]: Invalid value: \"eu.west\": {LABEL_MSG}")],
        ),
        (
            format!("east,{long}"),
            vec![format!(
                "{W}[1]: Invalid value: \"{long}\": must be no more than 63 characters"
            )],
        ),
        (
            "east,east".into(),
            vec![format!("{W}[1]: Duplicate value: \"east\"")],
        ),
        (
            "east,west, east,west".into(),
            vec![
                format!("{W}[2]: Duplicate value: \"east\""),
                format!("{W}[3]: Duplicate value: \"west\""),
            ],
        ),
        (
            names(MAX_WORKERS + 1),
            vec![format!("{W}: Too many: 65: must have at most 64 items")],
        ),
        // A hostile value is one error, whatever its length.
        (
            "a,".repeat(100_000),
            vec![format!("{W}: Too many: 100001: must have at most 64 items")],
        ),
    ];
    for (text, want) in cases {
        let shown: String = text.chars().take(40).collect();
        assert_eq!(create_errors(&with(WORKERS, &text)), want, "{shown:?}");
    }
}

#[test]
fn on_worker_lost_is_one_of_three() {
    let unsupported = |v: &str| {
        vec![format!(
            "{L}: Unsupported value: \"{v}\": supported values: \"Fail\", \"Redispatch\", \"Wait\""
        )]
    };
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("Redispatch", vec![]),
        ("Wait", vec![]),
        ("Fail", vec![]),
        ("wait", unsupported("wait")),
        (" Wait", unsupported(" Wait")),
        ("", unsupported("")),
        ("Retry", unsupported("Retry")),
    ];
    for (text, want) in cases {
        assert_eq!(create_errors(&with(ON_LOST, text)), want, "{text:?}");
    }
}

#[test]
fn the_recorded_worker_is_a_dns_label() {
    let long = "a".repeat(64);
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("east", vec![]),
        ("w-1", vec![]),
        (
            "East",
            vec![format!("{P}: Invalid value: \"East\": {LABEL_MSG}")],
        ),
        ("", vec![format!("{P}: Invalid value: \"\": {LABEL_MSG}")]),
        (
            "east,west",
            vec![format!("{P}: Invalid value: \"east,west\": {LABEL_MSG}")],
        ),
        (
            &long,
            vec![format!(
                "{P}: Invalid value: \"{long}\": must be no more than 63 characters"
            )],
        ),
    ];
    for (text, want) in cases {
        assert_eq!(updated(&with(WORKER, text)), want, "{text:?}");
    }
}

#[test]
fn worker_lost_since_is_an_rfc_3339_time() {
    for good in [
        "2026-11-27T16:13:32Z",
        "2026-11-27T16:13:32.5Z",
        "2026-11-27T16:13:32.123456789Z",
        "2026-11-27T16:13:32+01:00",
        "2026-11-27T16:13:32-05:30",
        "2028-02-29T00:00:00Z",
    ] {
        assert_eq!(updated(&with(SINCE, good)), Vec::<String>::new(), "{good}");
    }
    for bad in [
        "",
        "yesterday",
        "1764260012",
        "2026-11-27",
        "2026-11-27T16:13:32",
        "2026-11-27T16:13Z",
        "2026-11-27 16:13:32Z",
        "2026-11-27t16:13:32z",
        "2026-11-27T16:13:32.Z",
        "2026-11-27T16:13:32Z[UTC]",
        "2026-11-27T16:13:32+0100",
        "2026-11-27T16:13:32+24:00",
        "2026-11-27T16:13:32+01:60",
        "2026-02-29T00:00:00Z",
        "2026-11-27T24:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-11-27T16:13:32Z ",
    ] {
        assert_eq!(
            updated(&with(SINCE, bad)),
            [format!(
                "{S}: Invalid value: {bad:?}: must be an RFC 3339 time such as 2026-11-27T16:13:32Z"
            )],
            "{bad}"
        );
    }
}

#[test]
fn all_four_are_reported_at_once() {
    let job = JobBuilder::new()
        .set(WORKERS, json!("east,east"))
        .set(ON_LOST, json!("Later"))
        .set(WORKER, json!("East"))
        .set(SINCE, json!("now"))
        .build();
    let errors = updated(&job);
    assert_eq!(errors.len(), 4, "{errors:#?}");
    for (path, error) in [W, L, P, S].iter().zip(&errors) {
        assert!(error.starts_with(path), "{error}");
    }
}

/// What the dispatcher writes with a merge patch of the user's Job: the record before the copy
/// is made, the lost mark and its removal, a move to another worker; and a user's change of the
/// candidates. All of them updates of an otherwise unchanged Job.
#[test]
fn the_dispatcher_s_own_writes_are_updates_the_rules_allow() {
    let dispatched = || {
        JobBuilder::new()
            .spec("managedBy", json!(DISPATCHER_NAME))
            .set(WORKERS, json!("east,west"))
            .set(ON_LOST, json!("Wait"))
    };
    let placed = dispatched().set(WORKER, json!("east"));
    let lost = placed.clone().set(SINCE, json!("2026-11-27T16:13:32Z"));
    let moved = dispatched().set(WORKER, json!("west"));
    let steps: [(&str, JobBuilder, JobBuilder); 6] = [
        ("the record added", dispatched(), placed.clone()),
        ("the lost mark added", placed.clone(), lost.clone()),
        ("the lost mark removed", lost.clone(), placed.clone()),
        (
            "the mark and the record replaced by the move",
            lost.clone(),
            moved,
        ),
        (
            "the candidates changed",
            placed.clone(),
            placed.clone().set(WORKERS, json!("west")),
        ),
        (
            "the choice on loss removed",
            placed.clone(),
            placed.clone().set(ON_LOST, Value::Null),
        ),
    ];
    for (what, old, new) in steps {
        assert_eq!(
            update_errors(&new.build(), &old.build()),
            Vec::<String>::new(),
            "{what}"
        );
    }
    // An update is held to the same syntax as a create.
    assert_eq!(
        update_errors(
            &placed.clone().set(SINCE, json!("soon")).build(),
            &placed.build()
        ),
        [format!(
            "{S}: Invalid value: \"soon\": must be an RFC 3339 time such as 2026-11-27T16:13:32Z"
        )]
    );
}

#[test]
fn warned_about_when_the_dispatcher_does_not_run_the_job() {
    let warn = |job: JobBuilder| {
        let raw = job.build();
        let job = JobObject::parse(&raw).expect("test Job decodes");
        dispatch_annotations::warnings(&job, DISPATCHER_NAME)
    };
    let user_set = JobBuilder::new()
        .set(WORKERS, json!("east"))
        .set(ON_LOST, json!("Fail"));
    let warning = |key: &str| {
        format!(
            "metadata.annotations[{key}]: takes effect only for Jobs with spec.managedBy \"{DISPATCHER_NAME}\"; no other controller reads it"
        )
    };
    assert_eq!(
        warn(user_set.clone()),
        [
            warning("jobwarden.io/workers"),
            warning("jobwarden.io/on-worker-lost")
        ]
    );
    assert_eq!(
        warn(
            user_set
                .clone()
                .spec("managedBy", json!("jobwarden.io/job-controller"))
        ),
        [
            warning("jobwarden.io/workers"),
            warning("jobwarden.io/on-worker-lost")
        ]
    );
    assert_eq!(
        warn(user_set.spec("managedBy", json!(DISPATCHER_NAME))),
        Vec::<String>::new()
    );
    // The dispatcher's own two are not the user's to set, and say nothing here.
    assert_eq!(
        warn(
            JobBuilder::new()
                .set(WORKER, json!("east"))
                .set(SINCE, json!("2026-11-27T16:13:32Z"))
        ),
        Vec::<String>::new()
    );
    assert_eq!(warn(JobBuilder::new()), Vec::<String>::new());
}

const UNSCHEDULABLE: &str = "/metadata/annotations/jobwarden.io~1unschedulable-seconds";
const MAX_MOVES: &str = "/metadata/annotations/jobwarden.io~1max-moves";
const MOVED_FROM: &str = "/metadata/annotations/jobwarden.io~1moved-from";

#[test]
fn unschedulable_seconds_and_max_moves_are_whole_numbers_in_range() {
    let u = "metadata.annotations[jobwarden.io/unschedulable-seconds]";
    let m = "metadata.annotations[jobwarden.io/max-moves]";
    let out_of = |path: &str, v: &str, max: &str, min: u8| {
        vec![format!(
            "{path}: Invalid value: \"{v}\": must be a whole number from {min} to {max}"
        )]
    };
    let cases: Vec<(&str, &str, Vec<String>)> = vec![
        (UNSCHEDULABLE, "20", vec![]),
        (UNSCHEDULABLE, "604800", vec![]),
        (UNSCHEDULABLE, "0", out_of(u, "0", "604800", 1)),
        (UNSCHEDULABLE, "604801", out_of(u, "604801", "604800", 1)),
        (UNSCHEDULABLE, "5m", out_of(u, "5m", "604800", 1)),
        (UNSCHEDULABLE, "+20", out_of(u, "+20", "604800", 1)),
        (UNSCHEDULABLE, " 20", out_of(u, " 20", "604800", 1)),
        (UNSCHEDULABLE, "", out_of(u, "", "604800", 1)),
        (
            UNSCHEDULABLE,
            "99999999999999999999999",
            out_of(u, "99999999999999999999999", "604800", 1),
        ),
        (MAX_MOVES, "0", vec![]),
        (MAX_MOVES, "3", vec![]),
        (MAX_MOVES, "16", vec![]),
        (MAX_MOVES, "17", out_of(m, "17", "16", 0)),
        (MAX_MOVES, "-1", out_of(m, "-1", "16", 0)),
        (MAX_MOVES, "three", out_of(m, "three", "16", 0)),
    ];
    for (pointer, text, want) in cases {
        assert_eq!(
            create_errors(&with(pointer, text)),
            want,
            "{pointer} {text:?}"
        );
        assert_eq!(updated(&with(pointer, text)), want, "{pointer} {text:?}");
    }
}

#[test]
fn moved_from_is_the_dispatchers_record_of_distinct_dns_labels() {
    let f = "metadata.annotations[jobwarden.io/moved-from]";
    assert_eq!(
        create_errors(&with(MOVED_FROM, "alpha")),
        [format!(
            "{f}: Forbidden: set by jobwarden's dispatcher once the Job exists; a new Job may not carry it"
        )]
    );
    assert!(updated(&with(MOVED_FROM, "alpha,beta")).is_empty());
    assert_eq!(
        updated(&with(MOVED_FROM, "alpha,alpha")),
        [format!("{f}[1]: Duplicate value: \"alpha\"")]
    );
    assert_eq!(
        updated(&with(MOVED_FROM, "Alpha")),
        [format!("{f}[0]: Invalid value: \"Alpha\": {LABEL_MSG}")]
    );
}

#[test]
fn on_worker_drain_is_finish_or_redispatch() {
    let d = "metadata.annotations[jobwarden.io/on-worker-drain]";
    let pointer = "/metadata/annotations/jobwarden.io~1on-worker-drain";
    for ok in ["Finish", "Redispatch"] {
        assert!(create_errors(&with(pointer, ok)).is_empty(), "{ok}");
    }
    for bad in ["finish", "Wait", ""] {
        assert_eq!(
            create_errors(&with(pointer, bad)),
            [format!(
                "{d}: Unsupported value: \"{bad}\": supported values: \"Finish\", \"Redispatch\""
            )]
        );
    }
}
