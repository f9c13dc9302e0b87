//! A report: its verdict, its text and its JSON, and the catalogue of checks.

use std::collections::BTreeSet;

use crate::catalogue::*;
use crate::check::{Report, Verdict};
use crate::text::render;

#[test]
fn every_check_has_a_name_and_an_anchor_of_its_own() {
    let names: BTreeSet<&str> = ALL.iter().map(|k| k.name).collect();
    let anchors: BTreeSet<String> = ALL.iter().map(|k| k.anchor()).collect();
    assert_eq!((names.len(), anchors.len()), (ALL.len(), ALL.len()));
    assert_eq!(MAY_GRANT.anchor(), "permission-to-grant-the-installs-rbac");
    assert_eq!(MANAGED_BY.doc(), "docs/operations.md#managedby-served");
    let mut sorted = ALL.to_vec();
    sorted.sort_by_key(|k| k.group);
    assert_eq!(sorted, ALL.to_vec(), "ALL lists the checks group by group");
}

fn report() -> Report {
    Report {
        checks: vec![
            WEBHOOK_DENIES.error("unreachable: connection refused", "start a replica"),
            API_SERVER_REACHABLE.ok("https://k answers (v1.36.2)"),
            LEASE.warning("past its 15s", "wait"),
            SERVICE_ACCOUNT.skipped("no Deployment"),
        ],
        unreachable: false,
    }
}

#[test]
fn text_is_grouped_and_marked_with_a_hint_and_a_link_under_each_problem() {
    assert_eq!(
        render(&report()),
        "\
API server
----------
✔ API server reachable: https://k answers (v1.36.2)

jobwarden
---------
‼ controller Lease: past its 15s
    wait
    see docs/operations.md#controller-lease
- ServiceAccount permissions: no Deployment

Webhook
-------
× webhook denies through the API server: unreachable: connection refused
    start a replica
    see docs/operations.md#webhook-denies-through-the-api-server

× 1 check failed, 1 warning
"
    );
}

#[test]
fn json_is_one_object_per_check() {
    let line = serde_json::to_value(&report().checks[0]).expect("JSON");
    assert_eq!(
        line,
        serde_json::json!({
            "group": "webhook",
            "name": "webhook denies through the API server",
            "status": "error",
            "message": "unreachable: connection refused",
            "hint": "start a replica",
            "doc": "docs/operations.md#webhook-denies-through-the-api-server",
        })
    );
    let ok = serde_json::to_value(&report().checks[1]).expect("JSON");
    assert_eq!(ok["hint"], serde_json::Value::Null);
    assert_eq!(ok["group"], "api-server");
}

/// A check that could not be made is counted apart from warnings, and a run with one is never
/// called healthy.
#[test]
fn the_verdict_is_the_exit_status() {
    assert_eq!(report().verdict(), Verdict::Failed);
    let mut healthy = report();
    healthy.checks.remove(0);
    assert_eq!(healthy.verdict(), Verdict::Healthy);
    assert!(render(&healthy).ends_with("‼ healthy, 1 warning\n"));
    let mut unchecked = healthy.clone();
    unchecked.checks.push(MAY_INSTALL.cannot_tell(
        "cannot tell: create namespaces cluster-wide: timeout",
        "is the API server healthy?",
    ));
    assert_eq!(unchecked.verdict(), Verdict::Unchecked);
    let text = render(&unchecked);
    assert!(
        text.contains(
            "? permission to install: cannot tell: create namespaces cluster-wide: timeout\n    is the API server healthy?\n    see docs/operations.md#permission-to-install\n"
        ),
        "{text}"
    );
    assert!(
        text.ends_with("? not all checked: 1 check could not be made, 1 warning\n"),
        "{text}"
    );
    let mut failed = unchecked.clone();
    failed
        .checks
        .push(CERT_MANAGER.error("not installed", "install it"));
    failed
        .checks
        .push(NAMESPACE.cannot_tell("forbidden", "ask"));
    assert_eq!(failed.verdict(), Verdict::Failed);
    assert!(
        render(&failed).ends_with("× 1 check failed, 2 could not be made, 1 warning\n"),
        "{}",
        render(&failed)
    );
    let json = serde_json::to_value(&unchecked.checks[3]).expect("JSON");
    assert_eq!(json["status"], "unknown");
    let unreachable = Report {
        checks: vec![API_SERVER_REACHABLE.error("no", "fix")],
        unreachable: true,
    };
    assert_eq!(unreachable.verdict(), Verdict::Unreachable);
    assert!(render(&unreachable).ends_with("× cannot reach the API server\n"));
}
