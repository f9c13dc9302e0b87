//! Who may read the metrics, on a real kube-apiserver: the built binary's `serve`, run under the
//! ServiceAccount and RBAC `kubectl kustomize deploy/` installs with the Deployment's policy
//! file, reviews real ServiceAccount tokens. No token gets 401, a token not bound to the
//! `jobwarden-metrics-reader` role 403, a bound one 200 and the metrics; `/healthz` and
//! `/readyz` answer anyone; each refusal is logged and counted; and kube-apiserver refused
//! jobwarden nothing.
//!
//! Runs on the test binary's own control plane (`jobwarden-envtest`); skipped with one line
//! when the binaries are absent, and with `JOBWARDEN_E2E_KUBECONFIG` (a cluster elsewhere).

use crate::support;

use std::path::Path;

use support::installed::InstalledNamespace;
use support::served::Served;

fn refused(metrics: &str, reason: &str) -> Option<u64> {
    let line = format!("jobwarden_metrics_scrapes_refused_total{{reason=\"{reason}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&line)?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_answer_only_a_service_account_bound_to_the_reader_role() {
    let Some(InstalledNamespace {
        plane,
        ns,
        identity,
        dir,
        ..
    }) = InstalledNamespace::new("jobwarden-metrics").await
    else {
        return;
    };
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/base/policy.yaml");
    let served = tokio::task::block_in_place(|| {
        Served::start(
            &dir,
            &identity,
            &ns,
            &["--config", &policy.display().to_string()],
        )
    });

    // Prometheus's ServiceAccount, bound to the role the install ships; and another, not.
    let reader = plane.metrics_reader_token(&ns, "prometheus").await;
    let stranger = plane.token_for(&ns, "stranger").await;

    let get = |path: &'static str, token: Option<String>| {
        let served = &served;
        tokio::task::block_in_place(move || served.get(path, token.as_deref()))
    };
    for probe in ["/healthz", "/readyz"] {
        let answer = get(probe, None);
        assert!(answer.starts_with("HTTP/1.1 200"), "{probe}: {answer}");
    }
    let anonymous = get("/metrics", None);
    assert!(anonymous.starts_with("HTTP/1.1 401"), "{anonymous}");
    let forbidden = get("/metrics", Some(stranger));
    assert!(forbidden.starts_with("HTTP/1.1 403"), "{forbidden}");
    assert!(
        forbidden.contains(&format!(
            "forbidden: User \"system:serviceaccount:{ns}:stranger\" cannot get path \"/metrics\""
        )),
        "{forbidden}"
    );
    // RBAC takes a moment to see a new binding: a 403 before it does is the same answer a
    // scrape gets in a cluster then, and kept only ten seconds.
    let allowed = tokio::task::block_in_place(|| {
        support::eventually_blocking("a 200 for the bound token", || {
            let answer = served.get("/metrics", Some(&reader));
            answer
                .starts_with("HTTP/1.1 200")
                .then_some(answer.clone())
                .ok_or(answer)
        })
    });
    assert!(
        allowed.contains("jobwarden_admission_requests"),
        "{allowed}"
    );
    assert!(refused(&allowed, "unauthenticated") >= Some(1), "{allowed}");
    assert!(refused(&allowed, "forbidden") >= Some(1), "{allowed}");

    let lines = served.log_lines();
    let refusals: Vec<_> = lines
        .iter()
        .filter(|l| l["message"] == "refused a /metrics scrape")
        .collect();
    assert!(refusals.iter().any(|l| l["status"] == 401), "{refusals:#?}");
    assert!(
        refusals.iter().any(|l| l["status"] == 403
            && l["user"] == format!("system:serviceaccount:{ns}:stranger").as_str()),
        "{refusals:#?}"
    );
    identity.assert_nothing_refused();
}
