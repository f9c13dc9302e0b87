//! The chart's monitoring: the PrometheusRule's alerts under `promtool test rules`
//! (tests/monitoring/alerts_test.yaml), every alert's runbook in docs/operations.md, and every
//! `jobwarden_*` metric the rules and the Grafana dashboard read served by a freshly started
//! `jobwarden serve`, before it has reviewed a request or run a Job (issue 41): a panel over a
//! family without series shows "No data" instead of 0, and `increase()` misses the first change
//! of a series that appears at 1. Renaming a metric, or creating a series only on first use,
//! breaks the build, not the pager.
//!
//! Where the served names come from: the webhook's, by scraping a `jobwarden serve --dev` at
//! once (no cluster, so no reconcile loop: it serves the webhook's metrics and only those); the
//! controller's and the audit's, which `serve` registers when it has a cluster (the reconcile
//! loop comes with it, before the first scrape), by scraping at once a `serve` run as installed
//! on the envtest control plane, with the token of a ServiceAccount bound to the metrics reader
//! role; the dispatcher's, which `serve` registers only when its policy names workers, by
//! scraping at once another such `serve` whose policy names one (its kubeconfig Secret exists
//! and points at a port nothing listens on: the series are there whatever the worker's
//! state), while the first, with deploy/'s empty policy, serves none of them. Without the
//! control-plane binaries that part prints one line and reads instead registries built by the
//! same `register_metrics` functions `serve` calls, nothing recorded.
//!
//! Helm comes from `JOBWARDEN_HELM`, promtool from `JOBWARDEN_PROMTOOL`, else each from the
//! PATH; without them the promtool test prints one line and passes (`.ci/run` installs both).

use crate::support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::dev_server::DevServer;
use support::installed::InstalledNamespace;
use support::served::Served;

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

/// The names of the samples an OpenMetrics exposition serves: a family without a series has
/// none, whatever its `# TYPE` line says.
fn served_names(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

/// The families `serve` registers with the reconcile loop, only where there is a cluster.
fn is_controllers(name: &str) -> bool {
    name.starts_with("jobwarden_controller_")
        || name.starts_with("jobwarden_audit_")
        || is_dispatchers(name)
}

/// The dispatcher's families: `serve` registers them only when its policy names workers.
fn is_dispatchers(name: &str) -> bool {
    name.starts_with("jobwarden_dispatch_")
}

/// The worker the dispatching `serve`'s policy names.
const WORKER: &str = "east";

/// Every `jobwarden_*` name the PrometheusRule and the dashboard read, each with where.
fn read_by_the_charts() -> Vec<(String, &'static str)> {
    let mut used = Vec::new();
    for (what, path) in [
        ("the PrometheusRule", RULES_TEMPLATE),
        ("the dashboard", DASHBOARD),
    ] {
        let names = metric_names(&read(path));
        assert!(
            names.len() > 5,
            "{what} reads jobwarden's metrics: {names:?}"
        );
        used.extend(names.into_iter().map(|n| (n, what)));
    }
    used
}

/// The names in `used` that `served` lacks, as `name (read by …)` lines.
fn unserved<'u>(
    used: impl IntoIterator<Item = &'u (String, &'static str)>,
    served: &BTreeSet<String>,
) -> Vec<String> {
    used.into_iter()
        .filter(|(name, _)| !served.contains(name))
        .map(|(name, what)| format!("{name} (read by {what})"))
        .collect()
}

/// What freshly started `serve`s with a cluster serve: one with deploy/'s policy, which names no
/// worker, and one whose policy names [`WORKER`], each scraped at once as installed on the
/// envtest control plane; without one, after a line, what the functions serve's controller
/// hook calls register into empty registries.
async fn fresh_serves_with_a_cluster() -> (String, String) {
    let Some(InstalledNamespace {
        plane,
        admin,
        ns,
        identity,
        dir,
    }) = InstalledNamespace::new("jobwarden-monitoring").await
    else {
        eprintln!(
            "the controller's, the audit's and the dispatcher's metrics read from registries \
             built by the functions serve calls, not scraped"
        );
        let registry = |workers: Option<&[&str]>| {
            let mut registry = prometheus_client::registry::Registry::default();
            let _controller = jobwarden_controller::register_metrics(&mut registry);
            let _audit = jobwarden_audit::register_metrics(&mut registry);
            if let Some(workers) = workers {
                let _dispatch = jobwarden_dispatcher::register_metrics(&mut registry, workers);
            }
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
            text
        };
        return (registry(None), registry(Some(&[WORKER])));
    };
    let reader = plane.metrics_reader_token(&ns, "prometheus").await;
    let scrape_at_once = |served: &Served| {
        // RBAC takes a moment to see the new binding.
        tokio::task::block_in_place(|| {
            support::eventually_blocking("a 200 for the metrics reader", || {
                let answer = served.get("/metrics", Some(&reader));
                answer
                    .starts_with("HTTP/1.1 200")
                    .then(|| answer.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()))
                    .flatten()
                    .ok_or(answer)
            })
        })
    };

    let deploys = root().join("deploy/base/policy.yaml");
    let without_workers = {
        let served = tokio::task::block_in_place(|| {
            Served::start(
                &dir,
                &identity,
                &ns,
                &["--config", &deploys.display().to_string()],
            )
        });
        scrape_at_once(&served)
    };

    // A worker whose kubeconfig the dispatcher accepts (an https server, the CA inline, a
    // token) and whose server never answers.
    let nowhere = jobwarden_envtest::free_port().expect("a free port");
    let secret = format!("jobwarden-worker-{WORKER}");
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(admin.clone(), &ns);
    secrets
        .create(
            &kube::api::PostParams::default(),
            &serde_json::from_value(serde_json::json!({
                "metadata": {"name": secret},
                "stringData": {"kubeconfig": kubeconfig_of_nowhere(plane.kubeconfig(), nowhere)},
            }))
            .expect("a Secret"),
        )
        .await
        .expect("the worker's kubeconfig Secret is created");
    let policy = dir.join("policy-with-a-worker.yaml");
    std::fs::write(
        &policy,
        format!("dispatch:\n  workers:\n    - {{name: {WORKER}, kubeconfigSecret: {secret}}}\n"),
    )
    .expect("the policy is written");
    // As deploy/dispatch/ installs it: the Role naming the worker's Secret.
    let identity = plane.installed_dispatching_identity(&[secret]).await;
    identity.grant_in(plane, &ns);
    let with_a_worker = {
        let served = tokio::task::block_in_place(|| {
            Served::start(
                &dir,
                &identity,
                &ns,
                &["--config", &policy.display().to_string()],
            )
        });
        scrape_at_once(&served)
    };
    identity.assert_nothing_refused();
    (without_workers, with_a_worker)
}

/// A kubeconfig the dispatcher accepts, for a server on 127.0.0.1:`port`: the control plane's
/// CA inline and a token, so it is judged, used, and finds nothing answering.
fn kubeconfig_of_nowhere(admin: &Path, port: u16) -> String {
    let admin: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(admin).expect("the admin kubeconfig"))
            .expect("the admin kubeconfig is YAML");
    let ca = admin
        .pointer("/clusters/0/cluster/certificate-authority-data")
        .and_then(Value::as_str)
        .expect("the admin kubeconfig holds its CA inline");
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": WORKER, "cluster": {
            "server": format!("https://127.0.0.1:{port}"),
            "certificate-authority-data": ca,
        }}],
        "users": [{"name": "dispatcher", "user": {"token": "nobody-checks-it"}}],
        "contexts": [{"name": WORKER, "context": {"cluster": WORKER, "user": "dispatcher"}}],
        "current-context": WORKER,
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_alerts_and_the_dashboard_read_is_served_from_the_start() {
    let used = read_by_the_charts();

    // Without a cluster: the webhook's metrics, and no controller's.
    let server = tokio::task::block_in_place(DevServer::start);
    let (status, body) = tokio::task::block_in_place(|| server.get("/metrics"));
    assert_eq!(status, 200, "{body}");
    let webhook = served_names(&body);
    let missing = unserved(used.iter().filter(|(n, _)| !is_controllers(n)), &webhook);
    assert!(
        missing.is_empty(),
        "a fresh serve --dev does not serve {missing:#?}\nserved: {webhook:#?}"
    );
    assert!(
        !webhook.iter().any(|n| is_controllers(n)),
        "no reconcile loop runs without a cluster: {webhook:#?}"
    );
    assert!(
        body.contains("jobwarden_admission_requests_total{endpoint=\"validate\",operation=\"unknown\",verdict=\"too_large\"} 0"),
        "{body}"
    );

    let (without_workers, with_a_worker) = fresh_serves_with_a_cluster().await;

    // With a cluster and no worker: all of them but the dispatcher's, and none of those.
    let served = served_names(&without_workers);
    let missing = unserved(used.iter().filter(|(n, _)| !is_dispatchers(n)), &served);
    assert!(
        missing.is_empty(),
        "a fresh serve does not serve {missing:#?}\nserved: {served:#?}"
    );
    assert!(
        !served.iter().any(|n| is_dispatchers(n)),
        "no dispatcher runs without workers: {served:#?}"
    );
    assert!(
        without_workers
            .lines()
            .any(|l| l
                == "jobwarden_controller_pod_start_timeouts_total{reason=\"ImagePullBackOff\"} 0"),
        "{without_workers}"
    );

    // With a cluster and a worker: every one of them, the worker's series among them.
    let served = served_names(&with_a_worker);
    let missing = unserved(&used, &served);
    assert!(
        missing.is_empty(),
        "a fresh serve whose policy names a worker does not serve {missing:#?}\nserved: {served:#?}"
    );
    for series in [
        format!(
            "jobwarden_dispatch_copies_deleted_total{{worker=\"{WORKER}\",reason=\"moved\"}} 0"
        ),
        format!(
            "jobwarden_dispatch_worker_refused{{worker=\"{WORKER}\",reason=\"exec_plugin\"}} 0"
        ),
        "jobwarden_dispatch_jobs_waiting{reason=\"NoWorker\"} 0".to_owned(),
    ] {
        assert!(
            with_a_worker.lines().any(|l| l == series),
            "{series} in\n{with_a_worker}"
        );
    }
}

/// The dashboard is one Grafana can load, and it shows what the issue asks of it.
#[test]
fn the_dashboard_shows_requests_latency_syncs_finished_jobs_caches_leadership_and_dispatch() {
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
        "jobwarden_dispatch_workers",
        "jobwarden_dispatch_worker_up",
        "jobwarden_dispatch_worker_last_answer_seconds",
        "jobwarden_dispatch_jobs{",
        "jobwarden_dispatch_jobs_waiting",
        "jobwarden_dispatch_mirror_lag_seconds_bucket",
        "jobwarden_dispatch_copies_created_total",
        "jobwarden_dispatch_copies_deleted_total",
        "jobwarden_dispatch_redispatches_total",
        "jobwarden_dispatch_worker_refused",
        "jobwarden_dispatch_events_dropped_total",
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

/// Every dashboard query is PromQL Prometheus parses, Grafana's variables given values: each
/// becomes a recording rule that `promtool check rules` reads.
#[test]
fn every_dashboard_query_parses() {
    let Some(promtool) = tool(
        "JOBWARDEN_PROMTOOL",
        "promtool",
        "--version",
        "Debian's prometheus package ships it",
    ) else {
        return;
    };
    let dashboard: Value = serde_json::from_str(&read(DASHBOARD)).expect("the dashboard is JSON");
    let rules: Vec<Value> = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .enumerate()
        .map(|(i, t)| {
            let expr = t["expr"]
                .as_str()
                .expect("a PromQL expression")
                .replace("$__rate_interval", "5m")
                .replace("$namespace", "jobwarden-system");
            serde_json::json!({"record": format!("dashboard:query_{i}"), "expr": expr})
        })
        .collect();
    let file = std::env::temp_dir().join(format!(
        "jobwarden-dashboard-queries-{}.yaml",
        std::process::id()
    ));
    let groups = serde_json::json!({"groups": [{"name": "dashboard", "rules": rules}]});
    std::fs::write(&file, serde_yaml_ng::to_string(&groups).expect("YAML")).expect("written");
    let out = Command::new(&promtool)
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .expect("promtool runs");
    let _ = std::fs::remove_file(&file);
    assert!(
        out.status.success(),
        "promtool check rules on the dashboard's queries:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
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
            "# HELP jobwarden_w nothing\n# TYPE jobwarden_w counter\n\
             jobwarden_x_total{a=\"1\"} 0\njobwarden_y_bucket{le=\"1\"} 0\njobwarden_z 3\n# EOF\n"
        ),
        ["jobwarden_x_total", "jobwarden_y_bucket", "jobwarden_z"]
            .into_iter()
            .map(str::to_owned)
            .collect()
    );
}
