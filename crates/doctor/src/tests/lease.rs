//! The controller's Lease: who holds it, how long ago it was renewed, and whether the holder
//! is a running replica.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::expect;
use super::installed::deployment;
use super::{ERROR, OK, SKIPPED, UNKNOWN, WARNING};
use crate::catalogue::LEASE;
use crate::check::Status;
use crate::installed::lease::lease;

const NOW: &str = "2026-06-01T12:00:00Z";

fn now() -> Timestamp {
    NOW.parse().expect("a timestamp")
}

fn held(holder: &str, seconds_ago: i64) -> Result<Option<Lease>, String> {
    let renewed = now() - k8s_openapi::jiff::SignedDuration::from_secs(seconds_ago);
    Ok(Some(
        serde_json::from_value(json!({
            "metadata": {"name": "jobwarden-job-controller", "namespace": "jobwarden-system"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                     "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()},
        }))
        .expect("a Lease"),
    ))
}

fn pod(name: &str, app: &str, phase: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": app}},
        "status": {"phase": phase},
    }))
    .expect("a pod")
}

/// What the test calls it, the Lease read, the status and what the message says.
type Row = (
    &'static str,
    Result<Option<Lease>, String>,
    Status,
    &'static [&'static str],
);

#[test]
fn the_lease_by_table() {
    let controller = deployment("jobwarden", &[]);
    let pods = Ok(vec![
        pod("jobwarden-abc", "jobwarden", "Running"),
        pod("jobwarden-pending", "jobwarden", "Pending"),
        pod("stranger", "other", "Running"),
    ]);
    let cases: [Row; 9] = [
        (
            "held and fresh",
            held("jobwarden-abc", 2),
            OK,
            &["held by jobwarden-abc, renewed 2s ago, a running replica of Deployment jobwarden"],
        ),
        (
            "not renewed for a minute",
            held("jobwarden-abc", 60),
            ERROR,
            &["renewed 1m0s ago", "no replica is leading"],
        ),
        (
            "past its duration",
            held("jobwarden-abc", 20),
            WARNING,
            &["past its 15s"],
        ),
        (
            "held by no pod",
            held("laptop", 1),
            ERROR,
            &["no pod laptop runs in its namespace"],
        ),
        (
            "held by another app's pod",
            held("stranger", 1),
            ERROR,
            &["not a replica of Deployment jobwarden"],
        ),
        (
            "held by a pending pod",
            held("jobwarden-pending", 1),
            ERROR,
            &["is Pending, not Running"],
        ),
        ("released", held("", 1), ERROR, &["nobody holds"]),
        (
            "absent",
            Ok(None),
            ERROR,
            &["no Lease jobwarden-job-controller in namespace jobwarden-system"],
        ),
        (
            "unreadable",
            Err("forbidden".into()),
            UNKNOWN,
            &["cannot read Lease", "forbidden"],
        ),
    ];
    for (what, l, status, says) in cases {
        let check = lease("jobwarden-system", &l, &pods, &[&controller], now());
        assert_eq!(check.status, status, "{what}: {}", check.message);
        expect(&check, LEASE, status, says);
    }
    let check = lease(
        "jobwarden-system",
        &held("jobwarden-abc", 2),
        &Err("forbidden".into()),
        &[&controller],
        now(),
    );
    expect(
        &check,
        LEASE,
        UNKNOWN,
        &["cannot tell whether jobwarden-abc is a running replica"],
    );
    let check = lease(
        "jobwarden-system",
        &held("jobwarden-abc", 2),
        &pods,
        &[],
        now(),
    );
    expect(
        &check,
        LEASE,
        SKIPPED,
        &["no Deployment runs the controller"],
    );
}
