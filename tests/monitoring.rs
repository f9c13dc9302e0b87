//! The chart's monitoring: the PrometheusRule's alerts under `promtool test rules`
//! (tests/monitoring/alerts_test.yaml), every alert's runbook in docs/operations.md, and every
//! `jobwarden_*` metric the rules and the Grafana dashboard read one that jobwarden serves, so
//! that renaming a metric breaks the build, not the pager.
//!
//! Where the served names come from: the server's, by scraping a running `jobwarden serve --dev`
//! after one review to each webhook (its families have no series, and so are not served, until
//! a request is counted); the controller's and the audit's, which `serve` registers only where
//! the reconcile loop runs (a cluster, the Lease), from a registry built by the same
//! `register_metrics` functions `serve` calls, every family given one series.
//!
//! Helm comes from `JOBWARDEN_HELM`, promtool from `JOBWARDEN_PROMTOOL`, else each from the
//! PATH; without them the promtool test prints one line and passes (`.ci/run` installs both).

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::dev_server::DevServer;

const CHART: &str = "charts/jobwarden";
const RULES_TEMPLATE: &str = "charts/jobwarden/templates/prometheusrule.yaml";
const DASHBOARD: &str = "charts/jobwarden/files/dashboard.json";
const PROMTOOL_TESTS: &str = "tests/monitoring/alerts_test.yaml";
const OPERATIONS_DOC: &str = "docs/operations.md";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A tool from its environment variable, else the PATH; None (after one line) when it does not run.
fn tool(env: &str, name: &str, version_arg: &str, how: &str) -> Option<PathBuf> {
    let candidate = std::env::var_os(env).map_or_else(|| PathBuf::from(name), PathBuf::from);
    let runs = Command::new(&candidate)
        .arg(version_arg)
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        eprintln!(
            "skipped: no {name} ({} does not run); {how}",
            candidate.display()
        );
    }
    runs.then_some(candidate)
}

/// `jobwarden_*` names in a text: the metrics an expression or a panel reads.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("jobwarden_") {
        let before = rest[..i].chars().next_back();
        let name: String = rest[i..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        rest = &rest[i + name.len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            || name.ends_with('_')
        {
            continue;
        }
        names.insert(name);
    }
    names
}

/// The sample names an OpenMetrics exposition serves, from its `# TYPE` lines.
fn served_names(exposition: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in exposition.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').expect("# TYPE name type");
        let suffixes: &[&str] = match kind {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            "gauge" | "unknown" => &[""],
            other => panic!("{name}: a metric type the checks do not know: {other}"),
        };
        names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
    }
    names
}

/// POSTs the review in `review_file` to `path`; it must be answered.
fn post_review(server: &DevServer, path: &str, review_file: &str) {
    let (status, answer) = server.post(path, &read(review_file));
    assert_eq!(status, 200, "{path}: {answer}");
    assert!(answer.contains("\"AdmissionReview\""), "{path}: {answer}");
}

fn scrape(server: &DevServer) -> String {
    let (status, body) = server.get("/metrics");
    assert_eq!(status, 200, "{body}");
    body
}

/// What `serve` registers where the reconcile loop runs: the controller's, the leadership's and
/// the audit's metrics, through the functions serve's controller hook calls, each family with
/// one series.
fn controller_exposition() -> String {
    use jobwarden_audit::metrics::{EventLabels, ViolationLabels};
    use jobwarden_controller::metrics::{
        CreatedLabels, FinishedLabels, StartTimeoutLabels, SyncLabels,
    };
    let mut registry = prometheus_client::registry::Registry::default();
    let c = jobwarden_controller::register_metrics(&mut registry);
    jobwarden_runtime::leader::metrics::LeaderMetrics::register(
        registry.sub_registry_with_prefix(jobwarden_controller::METRICS_PREFIX),
    );
    let a = jobwarden_audit::register_metrics(&mut registry);
    c.syncs
        .get_or_create(&SyncLabels {
            result: "success".into(),
        })
        .inc();
    c.jobs_finished
        .get_or_create(&FinishedLabels {
            completion_mode: "NonIndexed".into(),
            result: "succeeded".into(),
            reason: "Completed".into(),
        })
        .inc();
    c.pods_created
        .get_or_create(&CreatedLabels {
            reason: "new".into(),
        })
        .inc();
    c.pod_start_timeouts
        .get_or_create(&StartTimeoutLabels {
            reason: "ImagePullBackOff".into(),
        })
        .inc();
    a.violations
        .get_or_create(&ViolationLabels {
            namespace: "team-a".into(),
            rule: "status".into(),
        })
        .set(1);
    a.events
        .get_or_create(&EventLabels {
            result: "published".into(),
        })
        .inc();
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
    text
}

#[test]
fn every_metric_the_alerts_and_the_dashboard_read_is_served() {
    let server = DevServer::start();
    post_review(
        &server,
        "/validate",
        "examples/reviews/create-denied-duplicate-rule-name.json",
    );
    post_review(&server, "/mutate", "examples/reviews/mutate-create.json");
    let mut served = served_names(&scrape(&server));
    assert!(
        served.contains("jobwarden_admission_requests_total"),
        "the review was counted: {served:?}"
    );
    served.extend(served_names(&controller_exposition()));

    for (what, text) in [
        ("the PrometheusRule", read(RULES_TEMPLATE)),
        ("the dashboard", read(DASHBOARD)),
    ] {
        let used = metric_names(&text);
        assert!(used.len() > 5, "{what} reads jobwarden's metrics: {used:?}");
        let unknown: Vec<&String> = used.difference(&served).collect();
        assert!(
            unknown.is_empty(),
            "{what} reads metrics jobwarden does not serve: {unknown:?}\nserved: {served:#?}"
        );
    }
}

/// The dashboard is one Grafana can load, and it shows what the issue asks of it.
#[test]
fn the_dashboard_shows_requests_latency_syncs_finished_jobs_caches_and_leadership() {
    let dashboard: Value = serde_json::from_str(&read(DASHBOARD)).expect("the dashboard is JSON");
    let exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| t["expr"].as_str().expect("a PromQL expression").to_owned())
        .collect();
    for must in [
        "jobwarden_admission_requests_total",
        "jobwarden_admission_request_duration_seconds_bucket",
        "jobwarden_controller_syncs_total",
        "jobwarden_controller_jobs_finished_total",
        "jobwarden_controller_cached_pods",
        "jobwarden_controller_leader",
        "jobwarden_controller_leader_losses_total",
        "jobwarden_controller_leader_last_renewal_seconds",
        "jobwarden_controller_pod_start_timeouts_total",
        "jobwarden_controller_events_queued",
        "jobwarden_controller_events_dropped_total",
    ] {
        assert!(
            exprs.iter().any(|e| e.contains(must)),
            "no panel reads {must}"
        );
    }
    for e in &exprs {
        assert!(
            e.contains("namespace=\"$namespace\""),
            "every query is scoped to the chosen namespace: {e}"
        );
    }
    let mut ids = BTreeSet::new();
    for p in dashboard["panels"].as_array().expect("panels") {
        assert!(
            ids.insert(p["id"].as_i64().expect("a panel id")),
            "panel ids repeat"
        );
    }
}

/// Every alert says where its runbook is, and the section exists.
#[test]
fn every_alert_has_a_runbook_in_the_operations_doc() {
    let template = read(RULES_TEMPLATE);
    let doc = read(OPERATIONS_DOC);
    let alerts: Vec<&str> = template
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    let runbooks: Vec<&str> = template
        .lines()
        .filter_map(|l| l.trim().strip_prefix("runbook_url: {{ $runbook }}"))
        .collect();
    assert!(alerts.len() >= 10, "{alerts:?}");
    assert_eq!(
        runbooks,
        alerts
            .iter()
            .map(|a| a.to_ascii_lowercase())
            .collect::<Vec<_>>(),
        "each alert's runbook_url names its own section"
    );
    for alert in &alerts {
        assert!(
            doc.lines().any(|l| l == format!("#### {alert}")),
            "{OPERATIONS_DOC} has no section #### {alert}"
        );
    }
}

#[test]
fn the_alerts_pass_their_promtool_unit_tests() {
    let Some(helm) = tool(
        "JOBWARDEN_HELM",
        "helm",
        "version",
        "charts/get-helm.sh fetches it; set JOBWARDEN_HELM to the path it prints",
    ) else {
        return;
    };
    let Some(promtool) = tool(
        "JOBWARDEN_PROMTOOL",
        "promtool",
        "--version",
        "Debian's prometheus package ships it",
    ) else {
        return;
    };
    let out = Command::new(&helm)
        .args(["template", "jobwarden"])
        .arg(root().join(CHART))
        .args([
            "--namespace",
            "jobwarden-system",
            "--set",
            "metrics.prometheusRule.enabled=true",
            "--show-only",
            "templates/prometheusrule.yaml",
        ])
        .output()
        .expect("helm runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rule: Value = serde_yaml_ng::from_slice(&out.stdout).expect("the PrometheusRule is YAML");
    assert_eq!(rule["kind"], "PrometheusRule");
    let groups = serde_json::json!({"groups": rule["spec"]["groups"]});

    let dir = std::env::temp_dir().join(format!("jobwarden-promtool-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    std::fs::write(
        dir.join("rules.yaml"),
        serde_yaml_ng::to_string(&groups).expect("YAML"),
    )
    .expect("write rules.yaml");
    std::fs::copy(root().join(PROMTOOL_TESTS), dir.join("alerts_test.yaml"))
        .expect("copy the promtool tests");
    let check = Command::new(&promtool)
        .args(["check", "rules", "rules.yaml"])
        .current_dir(&dir)
        .output()
        .expect("promtool runs");
    let test = Command::new(&promtool)
        .args(["test", "rules", "alerts_test.yaml"])
        .current_dir(&dir)
        .output()
        .expect("promtool runs");
    let _ = std::fs::remove_dir_all(&dir);
    for (what, out) in [("check rules", check), ("test rules", test)] {
        assert!(
            out.status.success(),
            "promtool {what}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // Every alert has a test.
    let tested = read(PROMTOOL_TESTS);
    for rule in rule["spec"]["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
    {
        let alert = rule["alert"].as_str().expect("an alerting rule");
        assert!(
            tested.contains(&format!("alertname: {alert}\n"))
                && tested.contains(&format!("alertname: {alert}, exp_alerts: []")),
            "{PROMTOOL_TESTS}: {alert} needs a case where it fires and one where it does not"
        );
    }
}

#[test]
fn metric_names_are_read_from_expressions() {
    assert_eq!(
        metric_names(
            r#"sum(rate(jobwarden_controller_syncs_total{result="error"}[5m])) / x_jobwarden_no "jobwarden-job-controller" jobwarden_*"#
        ),
        BTreeSet::from(["jobwarden_controller_syncs_total".to_owned()])
    );
    assert_eq!(
        served_names(
            "# TYPE jobwarden_x counter\n# TYPE jobwarden_y histogram\n# TYPE jobwarden_z gauge\n"
        ),
        [
            "jobwarden_x_total",
            "jobwarden_y_bucket",
            "jobwarden_y_count",
            "jobwarden_y_sum",
            "jobwarden_z"
        ]
        .into_iter()
        .map(str::to_owned)
        .collect()
    );
}
