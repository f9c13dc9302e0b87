//! `jobwarden.io/pod-failure-backoff` and `jobwarden.io/pod-start-timeout`: both sides of every
//! bound, the messages as the webhook returns them, what may change on update, and what the
//! controller reads.

use std::time::Duration;

use serde_json::json;

use super::{JobBuilder, create_errors, update_errors};
use crate::JobObject;
use crate::pod_timing::{self, FailureBackoff};

const BACKOFF: &str = "/metadata/annotations/jobwarden.io~1pod-failure-backoff";
const TIMEOUT: &str = "/metadata/annotations/jobwarden.io~1pod-start-timeout";
const B: &str = "metadata.annotations[jobwarden.io/pod-failure-backoff]";
const T: &str = "metadata.annotations[jobwarden.io/pod-start-timeout]";

fn backoff(text: &str) -> JobBuilder {
    JobBuilder::new().set(BACKOFF, json!(text))
}

fn timeout(text: &str) -> JobBuilder {
    JobBuilder::new().set(TIMEOUT, json!(text))
}

#[test]
fn failure_backoff_bounds() {
    let cases: Vec<(&str, Vec<String>)> = vec![
        (r#"{"initial":"1s","max":"2m"}"#, vec![]),
        (r#"{"initial":"10m","max":"1h"}"#, vec![]),
        (r#"{"initial":"5s"}"#, vec![]),
        (r#"{"max":"10s"}"#, vec![]),
        (r#"{"initial":"30s","max":"30s"}"#, vec![]),
        ("{}", vec![]),
        (
            r#"{"initial":"0s"}"#,
            vec![format!(
                "{B}.initial: Invalid value: \"0s\": must be greater than or equal to 1s"
            )],
        ),
        (
            r#"{"initial":"10m1s","max":"1h"}"#,
            vec![format!(
                "{B}.initial: Invalid value: \"10m1s\": must be less than or equal to 10m0s"
            )],
        ),
        (
            r#"{"initial":"1s","max":"1h0m1s"}"#,
            vec![format!(
                "{B}.max: Invalid value: \"1h0m1s\": must be less than or equal to 1h0m0s"
            )],
        ),
        (
            r#"{"max":"5s"}"#,
            vec![format!(
                "{B}.max: Invalid value: \"5s\": must be greater than or equal to initial (10s)"
            )],
        ),
        (
            r#"{"initial":"2m","max":"1m"}"#,
            vec![format!(
                "{B}.max: Invalid value: \"1m0s\": must be greater than or equal to initial (2m0s)"
            )],
        ),
        (
            r#"{"initial":"500ms"}"#,
            vec![format!(
                "{B}.initial: Invalid value: \"500ms\": must be a duration of whole seconds such as 30s, 1m30s or 2h"
            )],
        ),
        (
            r#"{"initial":1}"#,
            vec![format!(
                "{B}.initial: Invalid value: 1: must be a string such as \"30s\""
            )],
        ),
        (
            r#"{"initial":"1s","min":"1s"}"#,
            vec![format!(
                "{B}.min: Unsupported value: \"min\": supported values: \"initial\", \"max\""
            )],
        ),
        (
            "1s",
            vec![format!(
                r#"{B}: Invalid value: "1s": must be a JSON object such as {{"initial":"1s","max":"2m"}}"#
            )],
        ),
        (
            r#"["1s"]"#,
            vec![format!(
                r#"{B}: Invalid value: "[\"1s\"]": must be a JSON object such as {{"initial":"1s","max":"2m"}}"#
            )],
        ),
    ];
    for (text, want) in cases {
        assert_eq!(create_errors(&backoff(text).build()), want, "{text}");
    }
}

#[test]
fn start_timeout_bounds() {
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("1s", vec![]),
        ("10m", vec![]),
        ("24h", vec![]),
        ("PT30S", vec![]),
        (
            "0s",
            vec![format!(
                "{T}: Invalid value: \"0s\": must be greater than or equal to 1s"
            )],
        ),
        (
            "24h0m1s",
            vec![format!(
                "{T}: Invalid value: \"24h0m1s\": must be less than or equal to 24h0m0s"
            )],
        ),
        (
            "ten minutes",
            vec![format!(
                "{T}: Invalid value: \"ten minutes\": must be a duration of whole seconds such as 30s, 1m30s or 2h"
            )],
        ),
        (
            "-1m",
            vec![format!(
                "{T}: Invalid value: \"-1m\": must be a duration of whole seconds such as 30s, 1m30s or 2h"
            )],
        ),
    ];
    for (text, want) in cases {
        assert_eq!(create_errors(&timeout(text).build()), want, "{text}");
    }
}

#[test]
fn the_back_off_may_change_the_start_timeout_may_not() {
    let both = |b: &str, t: &str| backoff(b).set(TIMEOUT, json!(t));
    assert_eq!(
        update_errors(
            &both(r#"{"initial":"2s"}"#, "1m").build(),
            &both(r#"{"initial":"1s"}"#, "1m").build()
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        update_errors(&timeout("2m").build(), &timeout("1m").build()),
        [format!("{T}: Invalid value: \"2m\": field is immutable")]
    );
    assert_eq!(
        update_errors(&timeout("2m").build(), &JobBuilder::new().build()),
        [format!("{T}: Invalid value: \"2m\": field is immutable")]
    );
    assert_eq!(
        update_errors(&JobBuilder::new().build(), &timeout("2m").build()),
        [format!("{T}: Invalid value: null: field is immutable")]
    );
}

#[test]
fn the_controller_reads_only_what_is_valid() {
    let read = |job: JobBuilder| {
        let raw = job.build();
        let job = JobObject::parse(&raw).expect("test Job decodes");
        (
            pod_timing::failure_backoff(&job),
            pod_timing::start_timeout(&job),
        )
    };
    assert_eq!(read(JobBuilder::new()), (None, None));
    assert_eq!(
        read(backoff(r#"{"initial":"1s","max":"2m"}"#).set(TIMEOUT, json!("30s"))),
        (
            Some(FailureBackoff {
                initial: Duration::from_secs(1),
                max: Duration::from_secs(120)
            }),
            Some(Duration::from_secs(30))
        )
    );
    assert_eq!(
        read(backoff(r#"{"max":"1h"}"#)).0,
        Some(FailureBackoff {
            initial: Duration::from_secs(10),
            max: Duration::from_secs(3600)
        })
    );
    assert_eq!(
        read(backoff(r#"{"initial":"0s"}"#).set(TIMEOUT, json!("0s"))),
        (None, None)
    );
}

#[test]
fn warned_about_when_another_controller_runs_the_job() {
    let ours = crate::well_known::JOBWARDEN_CONTROLLER_NAME;
    let warn = |job: JobBuilder| {
        let raw = job.build();
        let job = JobObject::parse(&raw).expect("test Job decodes");
        pod_timing::warnings(&job, ours)
    };
    let both = backoff("{}").set(TIMEOUT, json!("1m"));
    assert_eq!(
        warn(both.clone()),
        [
            format!(
                "{B}: takes effect only for Jobs with spec.managedBy \"{ours}\"; the built-in Job controller ignores it"
            ),
            format!(
                "{T}: takes effect only for Jobs with spec.managedBy \"{ours}\"; the built-in Job controller ignores it"
            ),
        ]
    );
    assert_eq!(
        warn(both.spec("managedBy", json!(ours))),
        Vec::<String>::new()
    );
}
