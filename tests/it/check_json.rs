//! `jobwarden check -o json`: one JSON object per error, the shape `audit -o json` prints plus
//! the file, so a CI system can annotate the manifest; nothing for a valid Job.

use std::process::Output;

use serde_json::{Value, json};

use crate::support::run;
use run::jobwarden;

fn check(args: &[&str], stdin: Option<&[u8]>) -> Output {
    jobwarden(&[&["check"], args].concat(), stdin)
}

fn objects(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

#[test]
fn one_object_per_error_with_the_file() {
    let out = check(&["-o", "json", "examples/check/train.yaml"], None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        objects(&out),
        [json!({
            "file": "examples/check/train.yaml",
            "namespace": null,
            "name": "train",
            "uid": null,
            "rule": "spec",
            "field": "spec.successPolicy.rules[0].succeededIndexes",
            "message": "Invalid value: \"5-2\": error parsing succeededIndexes: too large index: \"5\""
        })]
    );
    // The skipped ConfigMap is still noted on stderr; the valid Job prints nothing.
    assert!(String::from_utf8_lossy(&out.stderr).contains("skipping a ConfigMap"));
}

#[test]
fn rule_names_are_their_own_rule_and_errors_print_once() {
    let job = br#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"named","namespace":"ml","annotations":{"jobwarden.io/pod-failure-policy-rule-names":"[\"Retry\",\"Retry\"]"}},"spec":{"parallelism":-1,"podFailurePolicy":{"rules":[{"action":"FailJob","onExitCodes":{"operator":"In","values":[1]}},{"action":"Ignore","onExitCodes":{"operator":"In","values":[2]}}]},"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"i"}]}}}}"#;
    let out = check(&["--output", "json", "-"], Some(job));
    assert_eq!(out.status.code(), Some(1));
    let found: Vec<(String, String, String, String)> = objects(&out)
        .iter()
        .map(|o| {
            let s = |k: &str| o[k].as_str().unwrap_or("").to_owned();
            (s("file"), s("namespace"), s("rule"), s("field"))
        })
        .collect();
    let line = |rule: &str, field: &str| {
        (
            "-".to_owned(),
            "ml".to_owned(),
            rule.to_owned(),
            field.to_owned(),
        )
    };
    assert_eq!(
        found,
        [
            line("spec", "spec.parallelism"),
            line("rule_names", "spec.podFailurePolicy.rules[1].name"),
        ]
    );
}

#[test]
fn an_update_reports_the_rule_names_annotation_as_rule_names() {
    // A manifest as the stored Job: `check` gives it what creating it would have.
    let stored = br#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","namespace":"default","annotations":{"jobwarden.io/pod-failure-policy-rule-names":"[\"A\"]"}},"spec":{"podFailurePolicy":{"rules":[{"action":"FailJob","onExitCodes":{"operator":"In","values":[1]}}]},"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"i"}]}}}}"#;
    let dir = std::env::temp_dir().join(format!("jobwarden-check-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let old = dir.join("stored.json");
    std::fs::write(&old, stored).expect("written");
    let renamed = String::from_utf8_lossy(stored).replace(r#"[\"A\"]"#, r#"[\"B\"]"#);
    let out = check(
        &["-o", "json", "--old", old.to_str().expect("UTF-8"), "-"],
        Some(renamed.as_bytes()),
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let found = objects(&out);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["rule"], "rule_names");
    assert_eq!(
        found[0]["field"],
        "metadata.annotations[jobwarden.io/pod-failure-policy-rule-names]"
    );
    // What the manifest says: it has no uid.
    assert_eq!(found[0]["uid"], Value::Null);
    assert_eq!(
        found[0]["message"],
        "Invalid value: \"[\\\"B\\\"]\": field is immutable"
    );
}

#[test]
fn a_valid_manifest_prints_nothing_and_exits_zero() {
    let out = check(&["-o", "json", "tests/fixtures/valid.json"], None);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
}

#[test]
fn a_part_that_does_not_decode_is_reported_on_that_part() {
    let job = br#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"},"spec":{"parallelism":"two"}}"#;
    let out = check(&["-o", "json", "-"], Some(job));
    assert_eq!(out.status.code(), Some(1));
    let found = objects(&out);
    assert_eq!(found.len(), 1);
    assert_eq!(
        (found[0]["rule"].as_str(), found[0]["field"].as_str()),
        (Some("spec"), Some("spec"))
    );
    assert!(
        found[0]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("cannot decode: invalid type: string \"two\"")),
        "{found:?}"
    );
    // The text form is unchanged.
    let text = check(&["-"], Some(job));
    assert!(
        String::from_utf8_lossy(&text.stdout)
            .starts_with("-: Job \"x\": cannot decode spec: invalid type"),
        "{}",
        String::from_utf8_lossy(&text.stdout)
    );
}
