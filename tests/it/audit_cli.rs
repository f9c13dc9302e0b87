//! `jobwarden audit` at the kube client's boundary: a fake kube-apiserver on 127.0.0.1 with
//! real paging, label selectors and 410s, read by the built binary through a kubeconfig the
//! test writes, and by the real `kube::Client` through the lister.

use crate::support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use jobwarden_audit::{JobLister, ListError, ListScope};
use serde_json::{Value, json};
use support::fake_apiserver::{Expiry, FakeApiServer, write_kubeconfig};
use support::scratch_dir;
use support::stored::{
    completed, condition, manifest, stored, two_rules, with_annotation, with_labels,
};

const RULE_NAMES: &str = "jobwarden.io/pod-failure-policy-rule-names";

/// Twelve Jobs in three namespaces: one planted violation of each kind, and valid Jobs that
/// look like them.
fn planted_cluster() -> Vec<Value> {
    let plain = |ns: &str, name: &str| stored(manifest(ns, name, json!({})), json!({}));
    vec![
        with_labels(
            stored(
                manifest("team-a", "bad-parallelism", json!({"parallelism": -1})),
                json!({}),
            ),
            json!({"tier": "gold"}),
        ),
        stored(
            with_annotation(
                manifest(
                    "team-a",
                    "dup-rule-names",
                    json!({"podFailurePolicy": two_rules()}),
                ),
                RULE_NAMES,
                r#"["Retry", "Retry"]"#,
            ),
            json!({}),
        ),
        plain("team-a", "fine-1"),
        stored(manifest("team-a", "finished-ok", json!({})), completed()),
        stored(
            manifest(
                "team-b",
                "unlisted-controller",
                json!({"managedBy": "example.com/other"}),
            ),
            json!({}),
        ),
        stored(
            manifest(
                "team-b",
                "allowed-controller",
                json!({"managedBy": "kueue.x-k8s.io/multikueue"}),
            ),
            json!({}),
        ),
        with_labels(
            stored(
                manifest("team-b", "negative-failed", json!({})),
                json!({"startTime": "2026-01-01T10:00:00Z", "failed": -1}),
            ),
            json!({"tier": "silver"}),
        ),
        stored(
            manifest("team-b", "old-complete", json!({})),
            json!({
                "conditions": [condition("Complete", "", "10:10")],
                "startTime": "2026-01-01T10:00:00Z", "completionTime": "2026-01-01T10:10:00Z",
                "succeeded": 1
            }),
        ),
        stored(
            manifest("team-c", "complete-and-failed", json!({})),
            json!({
                "conditions": [
                    condition("FailureTarget", "BackoffLimitExceeded", "10:05"),
                    condition("Failed", "BackoffLimitExceeded", "10:06"),
                    condition("Complete", "CompletionsReached", "10:10")
                ],
                "startTime": "2026-01-01T10:00:00Z", "completionTime": "2026-01-01T10:10:00Z"
            }),
        ),
        stored(
            manifest("team-c", "suspended-after-finish", json!({"suspend": true})),
            completed(),
        ),
        stored(
            with_annotation(
                manifest(
                    "team-c",
                    "named-rules-ok",
                    json!({"podFailurePolicy": two_rules()}),
                ),
                RULE_NAMES,
                r#"["ExitCode1", null]"#,
            ),
            json!({}),
        ),
        with_labels(plain("team-c", "fine-2"), json!({"tier": "gold"})),
    ]
}

/// `(namespace, name, rule, field)` of each planted violation.
fn planted() -> BTreeSet<(String, String, String, String)> {
    [
        ("team-a", "bad-parallelism", "spec", "spec.parallelism"),
        (
            "team-a",
            "dup-rule-names",
            "rule_names",
            "spec.podFailurePolicy.rules[1].name",
        ),
        ("team-b", "unlisted-controller", "policy", "spec.managedBy"),
        ("team-b", "negative-failed", "status", "status.failed"),
        (
            "team-c",
            "complete-and-failed",
            "status",
            "status.conditions",
        ),
        ("team-c", "suspended-after-finish", "status", "spec.suspend"),
    ]
    .into_iter()
    .map(|(a, b, c, d)| (a.to_owned(), b.to_owned(), c.to_owned(), d.to_owned()))
    .collect()
}

struct Setup {
    server: FakeApiServer,
    dir: support::ScratchDir,
}

fn setup(test: &str, jobs: Vec<Value>) -> Setup {
    let server = FakeApiServer::start(jobs);
    let dir = scratch_dir(test);
    server.write_kubeconfig(&dir.join("kubeconfig"));
    std::fs::write(
        dir.join("policy.yaml"),
        "allowedManagedBy:\n  - kueue.x-k8s.io/multikueue\n",
    )
    .expect("the policy is written");
    Setup { server, dir }
}

impl Setup {
    fn audit(&self, args: &[&str]) -> Output {
        let kubeconfig = self.dir.join("kubeconfig");
        let policy = self.dir.join("policy.yaml");
        let mut all = vec![
            "audit",
            "--kubeconfig",
            path_str(&kubeconfig),
            "--config",
            path_str(&policy),
        ];
        all.extend_from_slice(args);
        run(Command::new(env!("CARGO_BIN_EXE_jobwarden")).args(&all))
    }
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temp path")
}

fn run(cmd: &mut Command) -> Output {
    cmd.env_remove("KUBECONFIG")
        .output()
        .expect("jobwarden runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The JSON objects printed, as `(namespace, name, rule, field)`, checking each has every key.
fn json_findings(out: &Output) -> BTreeSet<(String, String, String, String)> {
    stdout(out)
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).expect("one JSON object per line");
            let keys: BTreeSet<&str> = v
                .as_object()
                .expect("an object")
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(
                keys,
                BTreeSet::from(["namespace", "name", "uid", "rule", "field", "message"]),
                "{line}"
            );
            assert!(v["uid"].as_str().is_some_and(|u| u.len() == 36), "{line}");
            assert!(!v["message"].as_str().unwrap_or("").is_empty(), "{line}");
            let s = |k: &str| v[k].as_str().unwrap_or("").to_owned();
            (s("namespace"), s("name"), s("rule"), s("field"))
        })
        .collect()
}

#[test]
fn finds_exactly_the_planted_violations_page_by_page() {
    let s = setup("planted", planted_cluster());
    let out = s.audit(&["-o", "json", "--page-size", "5"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(json_findings(&out), planted());
    assert_eq!(stdout(&out).lines().count(), 6);
    assert_eq!(
        stderr(&out),
        "jobwarden audit: 6 violations in 6 of 12 Jobs in all namespaces\n"
    );
    // Three pages of at most five, each asking for five, the later ones with a continue token.
    let requests = s.server.requests();
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert!(
        requests
            .iter()
            .all(|r| r.starts_with("/apis/batch/v1/jobs?") && r.contains("limit=5"))
    );
    assert!(!requests[0].contains("continue="));
    assert!(requests[1..].iter().all(|r| r.contains("continue=")));
}

#[test]
fn text_lines_read_like_check() {
    let s = setup("text", planted_cluster());
    let out = s.audit(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6, "{text}");
    assert_eq!(
        lines[0],
        "team-a: Job \"bad-parallelism\": spec.parallelism: Invalid value: -1: must be greater than or equal to 0"
    );
    assert!(lines.contains(&"team-b: Job \"unlisted-controller\": spec.managedBy \"example.com/other\" is not one of the controllers this cluster allows: \"jobwarden.io/job-controller\", \"kubernetes.io/job-controller\", \"kueue.x-k8s.io/multikueue\""));
    assert!(lines.contains(&"team-c: Job \"suspended-after-finish\": spec.suspend: Forbidden: cannot suspend a finished Job (it has the condition Complete=True)"));
    // stderr is not a terminal here: no progress, no escape sequences.
    assert!(!stderr(&out).contains('\x1b'), "{:?}", stderr(&out));
}

#[test]
fn without_the_policy_file_the_allow_list_does_not_apply() {
    let s = setup("no-policy", planted_cluster());
    let kubeconfig = s.dir.join("kubeconfig");
    let out = run(Command::new(env!("CARGO_BIN_EXE_jobwarden")).args([
        "audit",
        "--kubeconfig",
        path_str(&kubeconfig),
        "-o",
        "json",
    ]));
    assert_eq!(out.status.code(), Some(1));
    let mut want = planted();
    want.retain(|f| f.2 != "policy");
    assert_eq!(json_findings(&out), want);
}

#[test]
fn one_namespace_is_listed_from_its_own_collection() {
    let s = setup("namespace", planted_cluster());
    let out = s.audit(&["-n", "team-b", "-o", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let mut want = planted();
    want.retain(|f| f.0 == "team-b");
    assert_eq!(json_findings(&out), want);
    assert!(stderr(&out).contains("2 violations in 2 of 4 Jobs in namespace \"team-b\""));
    assert!(
        s.server
            .requests()
            .iter()
            .all(|r| r.starts_with("/apis/batch/v1/namespaces/team-b/jobs?"))
    );
}

#[test]
fn a_label_selector_is_passed_to_the_server() {
    let s = setup("selector", planted_cluster());
    let out = s.audit(&[
        "-l",
        "tier in (gold, silver)",
        "-o",
        "json",
        "--page-size",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let want: BTreeSet<_> = planted()
        .into_iter()
        .filter(|f| f.1 == "bad-parallelism" || f.1 == "negative-failed")
        .collect();
    assert_eq!(json_findings(&out), want);
    assert!(stderr(&out).contains("of 3 Jobs"), "{}", stderr(&out));
    let requests = s.server.requests();
    assert!(
        requests
            .iter()
            .all(|r| r.contains("labelSelector=tier+in+%28gold%2C+silver%29")),
        "{requests:?}"
    );

    let clean = s.audit(&["-l", "tier=gold,!missing", "-n", "team-c"]);
    assert_eq!(clean.status.code(), Some(0), "{}", stderr(&clean));
    assert_eq!(stdout(&clean), "");
    assert_eq!(
        stderr(&clean),
        "jobwarden audit: 0 violations in 0 of 1 Job in namespace \"team-c\"\n"
    );

    let bad = s.audit(&["-l", "tier in gold"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("400 BadRequest: unable to parse requirement"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn a_clean_cluster_exits_zero() {
    let jobs = vec![
        stored(manifest("team-a", "a", json!({})), completed()),
        stored(manifest("team-a", "b", json!({})), json!({})),
    ];
    let s = setup("clean", jobs);
    let out = s.audit(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
}

#[test]
fn an_expired_continue_token_goes_on_from_the_fresh_one() {
    let s = setup("expired-fresh", planted_cluster());
    s.server.expire_next_continue(Expiry::OnceWithFreshToken);
    let out = s.audit(&["-o", "json", "--page-size", "4"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // Every Job once: nothing skipped, nothing twice.
    assert_eq!(json_findings(&out), planted());
    assert_eq!(stdout(&out).lines().count(), 6);
    let err = stderr(&out);
    assert!(err.contains("continue token expired"), "{err}");
    assert!(err.contains("6 violations in 6 of 12 Jobs"), "{err}");
}

#[test]
fn an_expired_token_without_a_fresh_one_fails_like_kubectl() {
    let s = setup("expired-dead", planted_cluster());
    s.server.expire_next_continue(Expiry::OnceWithoutToken);
    let out = s.audit(&["-o", "json", "--page-size", "4"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // What the first page held is still reported.
    let first_page: BTreeSet<_> = planted().into_iter().filter(|f| f.0 == "team-a").collect();
    assert_eq!(json_findings(&out), first_page);
    let err = stderr(&out);
    assert!(
        err.contains("cannot list Jobs: the server answered 410 Expired: The provided continue parameter is too old"),
        "{err}"
    );
}

#[test]
fn a_forbidden_cluster_wide_list_exits_two() {
    let s = setup("forbidden", planted_cluster());
    s.server.forbid_cluster_scope();
    let out = s.audit(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("403 Forbidden: jobs.batch is forbidden: User \"system:anonymous\" cannot list resource \"jobs\""),
        "{}",
        stderr(&out)
    );
    // The namespace the RBAC allows still works.
    assert!(
        stderr(&out).ends_with(
            "jobwarden audit: incomplete: 0 violations in 0 of 0 Jobs read in all namespaces\n"
        ),
        "{}",
        stderr(&out)
    );
    // The namespace the RBAC allows still works.
    assert_eq!(s.audit(&["-n", "team-a"]).status.code(), Some(1));
}

#[test]
fn an_unreachable_server_exits_two() {
    // A port that was free a moment ago and has nothing listening now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let dir = scratch_dir("unreachable");
    let kubeconfig = dir.join("kubeconfig");
    write_kubeconfig(&kubeconfig, &format!("http://127.0.0.1:{port}"));
    let out = run(Command::new(env!("CARGO_BIN_EXE_jobwarden")).args([
        "audit",
        "--kubeconfig",
        path_str(&kubeconfig),
    ]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot list Jobs: cannot reach the API server: ")
            && stderr(&out).contains("onnect"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_kubeconfig_comes_from_kubeconfig_like_kubectl() {
    let s = setup("env", planted_cluster());
    let out = Command::new(env!("CARGO_BIN_EXE_jobwarden"))
        .args(["audit", "-n", "team-c", "-o", "json"])
        .env("KUBECONFIG", s.dir.join("kubeconfig"))
        .output()
        .expect("jobwarden runs");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(json_findings(&out).len(), 2);

    let unknown_context = s.audit(&["--context", "nope"]);
    assert_eq!(unknown_context.status.code(), Some(2));
    assert!(
        stderr(&unknown_context).contains("nope"),
        "{}",
        stderr(&unknown_context)
    );
}

#[test]
fn a_bad_policy_file_exits_two_before_any_request() {
    let s = setup("bad-policy", planted_cluster());
    std::fs::write(s.dir.join("policy.yaml"), "allowedManagedBy: 5\n").expect("written");
    let out = s.audit(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("policy.yaml is not valid"),
        "{}",
        stderr(&out)
    );
    assert!(s.server.requests().is_empty());
}

fn client(server: &FakeApiServer) -> kube::Client {
    let config = kube::Config::new(server.url.parse().expect("a URL"));
    kube::Client::try_from(config).expect("a client")
}

#[tokio::test]
async fn the_lister_pages_with_the_real_client() {
    let server = FakeApiServer::start(planted_cluster());
    let scope = ListScope {
        page_size: 5,
        ..ListScope::default()
    };
    let mut lister = JobLister::new(client(&server), scope);
    let mut pages = Vec::new();
    while let Some(page) = lister.next_page().await.expect("a page") {
        assert!(page.after_expiry.is_none());
        let names: Vec<String> = page
            .items
            .iter()
            .map(|j| j["metadata"]["name"].as_str().unwrap_or("").to_owned())
            .collect();
        pages.push((names, page.remaining_item_count));
    }
    assert_eq!(
        pages.iter().map(|(n, r)| (n.len(), *r)).collect::<Vec<_>>(),
        [(5, Some(7)), (5, Some(2)), (2, None)]
    );
    // Raw JSON as served: managedFields and all.
    assert!(lister.next_page().await.expect("done").is_none());
    let first = &pages[0].0;
    assert_eq!(first[0], "bad-parallelism");
}

#[tokio::test]
async fn the_lister_reports_an_expiry_and_goes_on() {
    let server = FakeApiServer::start(planted_cluster());
    server.expire_next_continue(Expiry::OnceWithFreshToken);
    let mut lister = JobLister::new(
        client(&server),
        ListScope {
            page_size: 10,
            ..ListScope::default()
        },
    );
    let first = lister.next_page().await.expect("page 1").expect("some");
    assert_eq!(first.items.len(), 10);
    assert!(first.items[0]["metadata"]["managedFields"].is_array());
    // A Job created between the pages, after the last key read: the fresh snapshot has it.
    server.store(stored(manifest("team-z", "late", json!({})), json!({})));
    let second = lister.next_page().await.expect("page 2").expect("some");
    assert!(
        second
            .after_expiry
            .as_deref()
            .is_some_and(|m| m.contains("too old"))
    );
    let names: Vec<&str> = second
        .items
        .iter()
        .map(|j| j["metadata"]["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, ["named-rules-ok", "suspended-after-finish", "late"]);
    assert!(lister.next_page().await.expect("done").is_none());

    let server = FakeApiServer::start(planted_cluster());
    server.expire_next_continue(Expiry::OnceWithoutToken);
    let mut lister = JobLister::new(
        client(&server),
        ListScope {
            page_size: 10,
            ..ListScope::default()
        },
    );
    lister.next_page().await.expect("page 1");
    match lister.next_page().await {
        Err(ListError::Api {
            code: 410, reason, ..
        }) => assert_eq!(reason, "Expired"),
        other => panic!("want a 410, got {other:?}"),
    }
}

#[tokio::test]
async fn a_page_larger_than_any_apiserver_sends_is_refused_not_read_whole() {
    // One Job of 5 MiB in a page of one: more than kube-apiserver's 3 MiB per object.
    let huge = with_annotation(
        stored(manifest("team-a", "huge", json!({})), json!({})),
        "example.com/blob",
        &"x".repeat(5 * 1024 * 1024),
    );
    let server = FakeApiServer::start(vec![huge]);
    let mut lister = JobLister::new(
        client(&server),
        ListScope {
            page_size: 1,
            ..ListScope::default()
        },
    );
    match lister.next_page().await {
        Err(ListError::Body(message)) => assert!(message.contains("length limit"), "{message}"),
        other => panic!(
            "want a refused body, got {:?}",
            other.map(|p| p.map(|p| p.items.len()))
        ),
    }
}
