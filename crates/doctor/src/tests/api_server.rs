//! The API server group: reachability, version, caller, and the features a dry run keeps.

use super::{ERROR, OK, SKIPPED, UNKNOWN, WARNING};
use super::{expect, recorded, refused};
use crate::api_server::{Caller, Version, caller, reachable, version};
use crate::catalogue::*;
use crate::features::{job_features, match_conditions, probe_job, probe_webhook_configuration};

fn v(git: &str, major: &str, minor: &str) -> Version {
    Version {
        git_version: git.into(),
        major: major.into(),
        minor: minor.into(),
    }
}

#[test]
fn reachable_or_not() {
    let server = "https://10.0.0.1:6443";
    expect(
        &reachable(server, &Ok(v("v1.36.2", "1", "36"))),
        API_SERVER_REACHABLE,
        OK,
        &[server, "v1.36.2"],
    );
    expect(
        &reachable(server, &Err("tcp connect error: Connection refused".into())),
        API_SERVER_REACHABLE,
        ERROR,
        &["does not answer", "Connection refused"],
    );
}

#[test]
fn versions_against_the_supported_range() {
    for (git, major, minor, status, says) in [
        ("v1.36.2", "1", "36", OK, "Kubernetes v1.36.2"),
        ("v1.32.0", "1", "32", OK, "v1.32.0"),
        ("v1.33.1-eks-abc", "1", "33+", OK, "v1.33.1-eks-abc"),
        ("v1.37.0", "1", "37", OK, "newer than v1.36"),
        ("v1.31.4", "1", "31", ERROR, "older than v1.32"),
        ("v9", "", "", UNKNOWN, "cannot tell"),
    ] {
        expect(
            &version(&v(git, major, minor)),
            API_SERVER_VERSION,
            status,
            &[says],
        );
    }
}

#[test]
fn the_caller_as_the_api_server_sees_it() {
    let admin = Caller {
        username: "kubernetes-admin".into(),
        groups: vec!["system:masters".into(), "system:authenticated".into()],
    };
    expect(
        &caller(&Ok(admin)),
        CALLER,
        OK,
        &["kubernetes-admin (groups system:masters, system:authenticated)"],
    );
    expect(
        &caller(&Err("404".into())),
        CALLER,
        UNKNOWN,
        &["would not say"],
    );
}

#[test]
fn a_server_serving_every_feature_keeps_every_field() {
    let checks = job_features("default", &Ok(recorded!("job-features-v1.36.2")));
    let kinds = [
        MANAGED_BY,
        SUCCESS_POLICY,
        POD_REPLACEMENT_POLICY,
        BACKOFF_LIMIT_PER_INDEX,
        POD_FAILURE_POLICY,
    ];
    assert_eq!(checks.len(), kinds.len());
    for (check, kind) in checks.iter().zip(kinds) {
        expect(check, kind, OK, &["a server-side dry run keeps spec."]);
    }
    expect(
        &match_conditions(&Ok(recorded!("match-conditions-v1.36.2"))),
        MATCH_CONDITIONS,
        OK,
        &["matchConditions"],
    );
}

/// The API server of a cluster whose JobManagedBy gate is off: the probe is admitted and
/// `spec.managedBy` is gone, everything else kept.
#[test]
fn a_server_that_drops_managed_by_fails_the_managed_by_check_only() {
    let checks = job_features("default", &Ok(recorded!("job-features-managed-by-dropped")));
    expect(
        &checks[0],
        MANAGED_BY,
        ERROR,
        &[
            "drops spec.managedBy",
            "JobManagedBy",
            "run by the built-in Job controller",
        ],
    );
    assert!(
        checks[0]
            .hint
            .as_deref()
            .is_some_and(|h| h.contains("kube-controller-manager alike"))
    );
    assert!(checks[1..].iter().all(|c| c.status == OK), "{checks:#?}");
}

#[test]
fn each_dropped_field_says_what_it_costs() {
    let answer = recorded!("job-features-v1.36.2");
    for (pointer, kind, status, says) in [
        ("/spec/successPolicy", SUCCESS_POLICY, WARNING, "KEP-3998"),
        (
            "/spec/podReplacementPolicy",
            POD_REPLACEMENT_POLICY,
            WARNING,
            "replacement pods start",
        ),
        (
            "/spec/backoffLimitPerIndex",
            BACKOFF_LIMIT_PER_INDEX,
            WARNING,
            "per-index back-off",
        ),
        (
            "/spec/podFailurePolicy",
            POD_FAILURE_POLICY,
            WARNING,
            "KEP-4443",
        ),
    ] {
        let mut dropped = answer.clone();
        let (parent, field) = pointer.rsplit_once('/').expect("a pointer");
        dropped
            .body
            .pointer_mut(parent)
            .and_then(|p| p.as_object_mut())
            .expect("the parent")
            .remove(field);
        let checks = job_features("default", &Ok(dropped));
        let check = checks.iter().find(|c| c.kind == kind).expect("the check");
        expect(check, kind, status, &[says]);
        assert_eq!(
            checks.iter().filter(|c| c.status != OK).count(),
            1,
            "{checks:#?}"
        );
    }
    let mut dropped = recorded!("match-conditions-v1.36.2");
    dropped.body["webhooks"][0]
        .as_object_mut()
        .expect("a webhook")
        .remove("matchConditions");
    expect(
        &match_conditions(&Ok(dropped)),
        MATCH_CONDITIONS,
        ERROR,
        &["every Job write"],
    );
}

#[test]
fn a_probe_that_tells_nothing_is_one_warning() {
    let forbidden = refused(
        403,
        r#"jobs.batch is forbidden: User "dev" cannot create resource "jobs" in API group "batch" in the namespace "default""#,
    );
    let checks = job_features("default", &Ok(forbidden));
    expect(
        &checks[0],
        MANAGED_BY,
        UNKNOWN,
        &[
            "cannot tell",
            "create on Jobs in namespace default",
            "cannot create resource",
        ],
    );
    assert!(
        checks[1..]
            .iter()
            .all(|c| c.status == SKIPPED && c.message.contains("managedBy served"))
    );
    let checks = job_features("default", &Err("connection reset".into()));
    expect(
        &checks[0],
        MANAGED_BY,
        UNKNOWN,
        &["got no answer", "connection reset"],
    );
    expect(
        &match_conditions(&Ok(refused(403, "forbidden"))),
        MATCH_CONDITIONS,
        UNKNOWN,
        &["create on validatingwebhookconfigurations"],
    );
}

#[test]
fn the_probes_are_dry_runnable_objects() {
    let job = probe_job();
    assert_eq!(job["metadata"]["generateName"], "jobwarden-doctor-");
    assert_eq!(job["spec"]["suspend"], true);
    let configuration = probe_webhook_configuration();
    assert_eq!(
        configuration["webhooks"][0]["matchConditions"][0]["expression"],
        "false"
    );
}
