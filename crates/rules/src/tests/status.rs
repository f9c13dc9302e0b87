//! `jobs/status` updates (UPSTREAM-RULES.md §6 and §9 cases 78–111): the transition rules, each
//! checked only when the update touches what it guards.

use serde_json::json;

use super::{JobBuilder, status_errors};

const T0: &str = "2026-01-01T10:00:00Z";
const T1: &str = "2026-01-01T10:10:00Z";

fn b() -> JobBuilder {
    JobBuilder::new()
        .spec("completions", json!(5))
        .spec("parallelism", json!(2))
}

fn started() -> JobBuilder {
    b().status("startTime", json!(T0))
}

fn check(cases: Vec<(&str, JobBuilder, JobBuilder, Vec<&str>)>) {
    for (name, old, new, want) in cases {
        assert_eq!(
            status_errors(&new.build(), &old.build()),
            want,
            "case: {name}"
        );
    }
}

const C: &str = "status.conditions: Invalid value: ";

#[test]
fn counters_and_uncounted_pods() {
    check(vec![
        (
            "progress",
            b().status("active", json!(1))
                .status("succeeded", json!(2))
                .status("failed", json!(3))
                .status("terminating", json!(4)),
            b().status("active", json!(2))
                .status("succeeded", json!(3))
                .status("failed", json!(4))
                .status("ready", json!(1))
                .status("terminating", json!(4)),
            vec![],
        ),
        (
            "negative counters",
            b(),
            b().status("active", json!(-1))
                .status("succeeded", json!(-1))
                .status("failed", json!(-1))
                .status("ready", json!(-1))
                .status("terminating", json!(-1)),
            vec![
                "status.active: Invalid value: -1: must be greater than or equal to 0",
                "status.succeeded: Invalid value: -1: must be greater than or equal to 0",
                "status.failed: Invalid value: -1: must be greater than or equal to 0",
                "status.ready: Invalid value: -1: must be greater than or equal to 0",
                "status.terminating: Invalid value: -1: must be greater than or equal to 0",
                // From 0, a negative value is also a decrease, and upstream says so too.
                "status.failed: Invalid value: -1: cannot decrease the failed counter",
                "status.succeeded: Invalid value: -1: cannot decrease the succeeded counter",
            ],
        ),
        (
            "uncounted duplicates and empties",
            b(),
            b().status(
                "uncountedTerminatedPods",
                json!({"succeeded": ["a", "b", "c", "a", ""], "failed": ["c", "d", "e", "d", ""]}),
            ),
            vec![
                "status.uncountedTerminatedPods.succeeded[3]: Duplicate value: \"a\"",
                "status.uncountedTerminatedPods.succeeded[4]: Invalid value: \"\": must not be empty",
                "status.uncountedTerminatedPods.failed[0]: Duplicate value: \"c\"",
                "status.uncountedTerminatedPods.failed[3]: Duplicate value: \"d\"",
                "status.uncountedTerminatedPods.failed[4]: Invalid value: \"\": must not be empty",
            ],
        ),
        (
            "failed decreases",
            b().status("failed", json!(3)),
            b().status("failed", json!(1)),
            vec!["status.failed: Invalid value: 1: cannot decrease the failed counter"],
        ),
        (
            "succeeded decreases (NonIndexed)",
            b().status("succeeded", json!(3)),
            b().status("succeeded", json!(1)),
            vec!["status.succeeded: Invalid value: 1: cannot decrease the succeeded counter"],
        ),
        (
            "succeeded decreases (Indexed, completions == parallelism)",
            b().indexed(2).status("succeeded", json!(2)),
            b().indexed(2).status("succeeded", json!(1)),
            vec![],
        ),
        (
            "ready above active",
            b().status("active", json!(1)),
            b().status("active", json!(1)).status("ready", json!(2)),
            vec!["status.ready: Invalid value: 2: cannot set more ready pods than active"],
        ),
        (
            "ready above active already stored",
            b().status("active", json!(1)).status("ready", json!(2)),
            b().status("active", json!(1))
                .status("ready", json!(2))
                .status("succeeded", json!(1)),
            vec![],
        ),
    ]);
}

#[test]
fn terminal_conditions() {
    let complete = |j: JobBuilder| {
        j.conditions(&["SuccessCriteriaMet", "Complete"])
            .status("completionTime", json!(T1))
    };
    let failed = |j: JobBuilder| j.conditions(&["FailureTarget", "Failed"]);
    check(vec![
        (
            "Complete and Failed at once",
            b(),
            started()
                .conditions(&["Complete", "Failed"])
                .status("completionTime", json!(T1)),
            vec![
                &format!("{C}cannot set Complete=True and Failed=true conditions"),
                &format!(
                    "{C}cannot set Failed=True condition without the FailureTarget=true condition"
                ),
                &format!(
                    "{C}cannot set Complete=True condition without the SuccessCriteriaMet=true condition"
                ),
            ],
        ),
        (
            "Complete the right way",
            started().conditions(&["SuccessCriteriaMet"]),
            complete(started()),
            vec![],
        ),
        (
            "Failed the right way",
            started().conditions(&["FailureTarget"]),
            failed(started()),
            vec![],
        ),
        (
            "Failed without startTime",
            b().conditions(&["FailureTarget"]),
            failed(b()),
            vec!["status.startTime: Required value: startTime is required for finished job"],
        ),
        (
            "Complete with active pods",
            started()
                .conditions(&["SuccessCriteriaMet"])
                .status("active", json!(1)),
            complete(started()).status("active", json!(1)),
            vec!["status.active: Invalid value: 1: active>0 is invalid for finished job"],
        ),
        (
            "Failed with terminating pods",
            started().conditions(&["FailureTarget"]),
            failed(started()).status("terminating", json!(1)),
            vec!["status.terminating: Invalid value: 1: terminating>0 is invalid for finished job"],
        ),
        (
            "Failed with uncounted pods",
            started().conditions(&["FailureTarget"]),
            failed(started()).status("uncountedTerminatedPods", json!({"failed": ["a"]})),
            vec![
                "status.uncountedTerminatedPods: Invalid value: {\"Succeeded\":null,\"Failed\":[\"a\"]}: must be empty for finished job",
            ],
        ),
        (
            "Complete without completionTime",
            started().conditions(&["SuccessCriteriaMet"]),
            started().conditions(&["SuccessCriteriaMet", "Complete"]),
            vec![
                "status.completionTime: Required value: completionTime is required for Complete jobs",
            ],
        ),
        (
            "completionTime without Complete",
            started(),
            started().status("completionTime", json!(T1)),
            vec![&format!(
                "status.completionTime: Invalid value: \"{T1}\": cannot set completionTime when there is no Complete=True condition"
            )],
        ),
        (
            "completionTime before startTime",
            b().status("startTime", json!(T1))
                .conditions(&["SuccessCriteriaMet"]),
            b().status("startTime", json!(T1))
                .conditions(&["SuccessCriteriaMet", "Complete"])
                .status("completionTime", json!(T0)),
            vec![&format!(
                "status.completionTime: Invalid value: \"{T0}\": must be equal to or after `startTime`"
            )],
        ),
        (
            "completionTime changed",
            complete(started()),
            complete(started()).status("completionTime", json!("2026-01-01T10:15:00Z")),
            vec![
                "status.completionTime: Invalid value: \"2026-01-01T10:15:00Z\": field is immutable",
            ],
        ),
        (
            "terminal Failed removed",
            failed(started()),
            started().conditions(&["FailureTarget"]),
            vec![&format!(
                "{C}cannot disable the terminal Failed=True condition"
            )],
        ),
        (
            "Complete plus FailureTarget",
            complete(started()),
            complete(started()).conditions(&["SuccessCriteriaMet", "Complete", "FailureTarget"]),
            vec![
                &format!("{C}cannot set Complete=True and FailureTarget=true conditions"),
                &format!("{C}cannot set SuccessCriteriaMet=True and FailureTarget=true conditions"),
            ],
        ),
        (
            "SuccessCriteriaMet on a NonIndexed Job",
            b(),
            b().conditions(&["SuccessCriteriaMet"]),
            vec![],
        ),
        (
            "SuccessCriteriaMet removed",
            b().conditions(&["SuccessCriteriaMet"]),
            b(),
            vec![&format!(
                "{C}cannot disable the SuccessCriteriaMet=True condition"
            )],
        ),
        (
            "SuccessCriteriaMet after Complete",
            started()
                .conditions(&["Complete"])
                .status("completionTime", json!(T1)),
            complete(started()),
            vec![&format!(
                "{C}cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions"
            )],
        ),
        (
            "suspended, zero completions, no startTime",
            b().spec("suspend", json!(true))
                .spec("completions", json!(0)),
            complete(
                b().spec("suspend", json!(true))
                    .spec("completions", json!(0)),
            ),
            vec![],
        ),
        (
            "stored violations, unrelated update",
            started()
                .conditions(&["Complete"])
                .status("uncountedTerminatedPods", json!({"failed": ["a"]})),
            started()
                .conditions(&["Complete", "Custom"])
                .status("uncountedTerminatedPods", json!({"failed": ["a"]})),
            vec![],
        ),
    ]);
    let policy = |j: JobBuilder| {
        j.indexed(10)
            .success_rules(json!([{"succeededIndexes": "0-2"}]))
    };
    check(vec![(
        "success policy: Complete without SuccessCriteriaMet",
        policy(started()),
        policy(started())
            .conditions(&["Complete"])
            .status("completionTime", json!(T1)),
        vec![
            &format!(
                "{C}cannot set Complete=True condition without the SuccessCriteriaMet=true condition"
            ),
            &format!(
                "{C}cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True"
            ),
        ],
    )]);
}

#[test]
fn start_time_and_indexes() {
    check(vec![
        (
            "startTime removed while running",
            started(),
            b(),
            vec![
                "status.startTime: Invalid value: null: field is immutable for unsuspended job once set",
            ],
        ),
        (
            "startTime removed while suspended",
            started().spec("suspend", json!(true)),
            b().spec("suspend", json!(true)),
            vec![],
        ),
        (
            "startTime reset on resume",
            started().set(
                "/status/conditions",
                json!([{"type": "Suspended", "status": "True"}]),
            ),
            b().status("startTime", json!(T1)).set(
                "/status/conditions",
                json!([{"type": "Suspended", "status": "False"}]),
            ),
            vec![],
        ),
        (
            "completedIndexes on NonIndexed",
            b(),
            b().status("completedIndexes", json!("0")),
            vec![
                "status.completedIndexes: Invalid value: \"0\": cannot set non-empty completedIndexes when non-indexed completion mode",
            ],
        ),
        (
            "completedIndexes unparsable",
            b().indexed(5),
            b().indexed(5)
                .status("completedIndexes", json!("invalid format")),
            vec![
                "status.completedIndexes: Invalid value: \"invalid format\": error parsing completedIndexes: cannot convert string to integer for index: \"invalid format\"",
            ],
        ),
        (
            "completedIndexes stale after scale-down, unchanged",
            b().indexed(5).status("completedIndexes", json!("0,7")),
            b().indexed(5)
                .status("completedIndexes", json!("0,7"))
                .status("active", json!(1)),
            vec![],
        ),
        (
            "failedIndexes without backoffLimitPerIndex",
            b().indexed(5),
            b().indexed(5).status("failedIndexes", json!("")),
            vec![
                "status.failedIndexes: Invalid value: \"\": cannot set non-null failedIndexes when backoffLimitPerIndex is null",
            ],
        ),
        (
            "failedIndexes unparsable",
            b().indexed(5).spec("backoffLimitPerIndex", json!(1)),
            b().indexed(5)
                .spec("backoffLimitPerIndex", json!(1))
                .status("failedIndexes", json!("1-")),
            vec![
                "status.failedIndexes: Invalid value: \"1-\": error parsing failedIndexes: cannot convert string to integer for index: \"\"",
            ],
        ),
        (
            "overlap",
            b().indexed(5)
                .spec("backoffLimitPerIndex", json!(1))
                .status("failedIndexes", json!("0,2"))
                .status("completedIndexes", json!("3-4")),
            b().indexed(5)
                .spec("backoffLimitPerIndex", json!(1))
                .status("failedIndexes", json!("0,2"))
                .status("completedIndexes", json!("2-4")),
            vec![
                "status.failedIndexes: Invalid value: \"0,2\": failedIndexes and completedIndexes overlap at index: 2",
            ],
        ),
    ]);
}
