//! The command line as users run it: the built binary, real files and stdin, exit codes and
//! output lines.

use crate::support::run;
use run::{jobwarden, jobwarden_to_closed_reader, stderr, stdout};

#[test]
fn check_reports_every_error_kubectl_style() {
    let out = jobwarden(&["check", "examples/check/train.yaml"], None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "examples/check/train.yaml: Job \"train\": spec.successPolicy.rules[0].succeededIndexes: Invalid value: \"5-2\": error parsing succeededIndexes: too large index: \"5\"\n\
         examples/check/train.yaml: Job \"leader-worker\": valid\n"
    );
    assert!(stderr(&out).contains("skipping a ConfigMap"));
}

#[test]
fn check_prints_upstream_warnings_on_stderr() {
    let job = br#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"a.b"},"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"i"}]}}}}"#;
    let out = jobwarden(&["check", "-"], Some(job));
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stderr(&out).starts_with(
            "Warning: -: Job \"a.b\": metadata.name: this is used in Pod names and hostnames"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn check_judges_the_dispatcher_s_annotations() {
    let job = |annotations: &str, managed_by: &str| {
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: remote\n  annotations: {annotations}\n\
             spec:\n  {managed_by}\n  template: {{spec: {{restartPolicy: Never, containers: [{{name: c, image: i}}]}}}}\n"
        )
        .into_bytes()
    };
    let good = r#"{jobwarden.io/workers: "east, west", jobwarden.io/on-worker-lost: Wait}"#;
    let out = jobwarden(&["check", "-"], Some(&job(good, "")));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(
        stderr(&out),
        "Warning: -: Job \"remote\": metadata.annotations[jobwarden.io/workers]: takes effect only for Jobs with spec.managedBy \"jobwarden.io/dispatcher\"; no other controller reads it\n\
         Warning: -: Job \"remote\": metadata.annotations[jobwarden.io/on-worker-lost]: takes effect only for Jobs with spec.managedBy \"jobwarden.io/dispatcher\"; no other controller reads it\n"
    );
    let dispatched = "managedBy: jobwarden.io/dispatcher";
    let out = jobwarden(&["check", "-"], Some(&job(good, dispatched)));
    assert_eq!((out.status.code(), stderr(&out)), (Some(0), String::new()));
    let bad = r#"{jobwarden.io/workers: "east,,east", jobwarden.io/worker-lost-since: today}"#;
    let out = jobwarden(&["check", "-"], Some(&job(bad, dispatched)));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout(&out),
        "-: Job \"remote\": metadata.annotations[jobwarden.io/workers][1]: Required value\n\
         -: Job \"remote\": metadata.annotations[jobwarden.io/workers][2]: Duplicate value: \"east\"\n\
         -: Job \"remote\": metadata.annotations[jobwarden.io/worker-lost-since]: Invalid value: \"today\": must be an RFC 3339 time such as 2026-11-27T16:13:32Z\n\
         -: Job \"remote\": metadata.annotations[jobwarden.io/worker-lost-since]: Forbidden: set by jobwarden's dispatcher once the Job exists; a new Job may not carry it\n"
    );
}

#[test]
fn check_accepts_valid_json_and_stdin() {
    let out = jobwarden(&["check", "tests/fixtures/valid.json"], None);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stdout(&out),
        "tests/fixtures/valid.json: Job \"pi\": valid\n"
    );
    let yaml = std::fs::read("tests/fixtures/valid.json").expect("fixture");
    let out = jobwarden(&["check", "-"], Some(&yaml));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), "-: Job \"pi\": valid\n");
}

#[test]
fn check_with_old_validates_an_update() {
    let out = jobwarden(
        &[
            "check",
            "--old",
            "tests/fixtures/stored.yaml",
            "tests/fixtures/more-completions.yaml",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "tests/fixtures/more-completions.yaml: Job \"pi\": spec.completions: Invalid value: 3: field is immutable\n"
    );
    let out = jobwarden(
        &[
            "check",
            "--old",
            "tests/fixtures/stored.yaml",
            "tests/fixtures/stored.yaml",
        ],
        None,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
}

/// `jobwarden check *.yaml | head`: the reader stops early; jobwarden neither panics nor calls it
/// an error, and its exit status still counts every Job, the last (invalid) one too. The output
/// is far larger than a pipe's buffer, so the closed pipe is met whatever the timing.
#[test]
fn check_to_a_reader_that_stops_early_still_checks_every_job() {
    let valid = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\nspec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: i}]}}}\n";
    let mut input = format!("---\n{valid}").repeat(5_000);
    input.push_str("---\n");
    input.push_str(&valid.replace("restartPolicy: Never", "restartPolicy: Always"));
    for output in ["text", "json"] {
        let out = jobwarden_to_closed_reader(&["check", "-o", output, "-"], Some(input.as_bytes()));
        assert_eq!(out.status.code(), Some(1), "-o {output}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "-o {output}");
    }
}

#[test]
fn check_unreadable_input_exits_2() {
    for (args, stdin) in [
        (vec!["check", "tests/fixtures/does-not-exist.yaml"], None),
        (vec!["check", "-"], Some(&b"kind: [unclosed"[..])),
        (
            vec!["check", "-"],
            Some(&b"apiVersion: v1\nkind: ConfigMap\n"[..]),
        ),
        (
            vec![
                "check",
                "--old",
                "examples/check/train.yaml",
                "tests/fixtures/valid.json",
            ],
            None,
        ),
    ] {
        let out = jobwarden(&args, stdin);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).is_empty());
    }
}

#[test]
fn check_wrong_typed_field_is_invalid_not_a_crash() {
    let job = br#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"},"spec":{"completions":"three"}}"#;
    let out = jobwarden(&["check", "-"], Some(job));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).starts_with("-: Job \"x\": cannot decode spec:"),
        "{}",
        stdout(&out)
    );
}

fn review_request(spec: &str) -> Vec<u8> {
    format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u-1",
        "kind":{{"group":"batch","version":"v1","kind":"Job"}},"resource":{{"group":"batch","version":"v1","resource":"jobs"}},
        "operation":"CREATE","namespace":"ns","name":"j","userInfo":{{"username":"alice"}},
        "object":{{"apiVersion":"batch/v1","kind":"Job","metadata":{{"name":"j","namespace":"ns","uid":"u"}},"spec":{spec}}}}}}}"#
    )
    .into_bytes()
}

#[test]
fn review_prints_the_response_and_exits_by_verdict() {
    let denied = jobwarden(&["review"], Some(&review_request(r#"{"parallelism":-1}"#)));
    assert_eq!(denied.status.code(), Some(1));
    let body: serde_json::Value = serde_json::from_slice(&denied.stdout).expect("JSON response");
    assert_eq!(body["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(body["response"]["uid"], "u-1");
    assert_eq!(body["response"]["allowed"], false);
    assert_eq!(body["response"]["status"]["code"], 422);
    assert_eq!(body["response"]["status"]["reason"], "Invalid");
    assert!(body["response"]["status"]["message"]
        .as_str()
        .is_some_and(|m| m.starts_with("Job.batch \"j\" is invalid: [spec.parallelism: Invalid value: -1: must be greater than or equal to 0")));

    let mutated = jobwarden(&["review", "--mutate", "-"], Some(&review_request("{}")));
    assert_eq!(mutated.status.code(), Some(0));
    let body: serde_json::Value = serde_json::from_slice(&mutated.stdout).expect("JSON response");
    assert_eq!(body["response"]["patchType"], "JSONPatch");
}

#[test]
fn review_unreadable_input_exits_2() {
    for input in [&b""[..], b"not json", br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}}"#, br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}"#] {
        let out = jobwarden(&["review"], Some(input));
        assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(input));
        assert!(out.stdout.is_empty());
        assert!(stderr(&out).starts_with("jobwarden review: -: "), "{}", stderr(&out));
    }
}

#[test]
fn review_applies_a_policy_file() {
    let dir = std::env::temp_dir().join(format!("jobwarden-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, "allowedManagedBy: [example.com/batch]\n").expect("write policy");
    let request = review_request(
        r#"{"managedBy":"other.io/x","selector":{"matchLabels":{"batch.kubernetes.io/controller-uid":"u"}},"template":{"metadata":{"labels":{"batch.kubernetes.io/controller-uid":"u","batch.kubernetes.io/job-name":"j","controller-uid":"u","job-name":"j"}},"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"i"}]}}}"#,
    );
    let out = jobwarden(
        &["review", "--config", policy.to_str().expect("utf-8 path")],
        Some(&request),
    );
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON response");
    assert_eq!(body["response"]["status"]["code"], 403);
    std::fs::write(&policy, "notAField: 1\n").expect("write policy");
    let out = jobwarden(
        &["review", "--config", policy.to_str().expect("utf-8 path")],
        Some(&request),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unknown field"), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn review_applies_the_dispatch_section_of_a_policy_file() {
    let dir = std::env::temp_dir().join(format!("jobwarden-cli-dispatch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let policy = dir.join("policy.yaml");
    std::fs::write(
        &policy,
        "delegate:\n  dispatchNamespaces: {names: [ns]}\n\
         dispatch:\n  workers:\n    - {name: east, kubeconfigSecret: jobwarden-worker-east}\n",
    )
    .expect("write policy");
    let config = policy.to_str().expect("utf-8 path");
    let plain = review_request(
        r#"{"podReplacementPolicy":"Failed","template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"i"}]}}}"#,
    );
    let out = jobwarden(&["review", "--mutate", "--config", config], Some(&plain));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON response");
    assert_eq!(
        body["response"]["warnings"],
        serde_json::json!([
            "spec.managedBy: set to \"jobwarden.io/dispatcher\" by jobwarden: Jobs in namespace \"ns\" are sent to worker clusters by jobwarden's dispatcher"
        ])
    );
    // The patch, decoded: the dispatcher's name where the Job named none.
    let patch = body["response"]["patch"].as_str().expect("a patch");
    let decoded =
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, patch).expect("base64");
    assert_eq!(
        String::from_utf8_lossy(&decoded),
        r#"[{"op":"add","path":"/spec/managedBy","value":"jobwarden.io/dispatcher"}]"#
    );

    // A dispatchNamespaces without workers would leave its Jobs to nobody: refused.
    std::fs::write(&policy, "delegate:\n  dispatchNamespaces: {names: [ns]}\n")
        .expect("write policy");
    let out = jobwarden(&["review", "--mutate", "--config", config], Some(&plain));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(&format!("the policy file {config}: "))
            && stderr(&out).contains("delegate.dispatchNamespaces: the dispatcher has no workers"),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_examples_in_the_readme_are_valid_jobs() {
    let mut files: Vec<String> = std::fs::read_dir("examples")
        .expect("examples/ exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    let mut args = vec!["check"];
    args.extend(files.iter().map(String::as_str));
    let out = jobwarden(&args, None);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(stdout(&out).lines().count(), files.len());
}
