//! The dispatch checks: each worker as the dispatcher meets it (its kubeconfig judged by the
//! dispatcher's own judge, its API server, the credentials taken or refused with 401, the
//! dispatcher's permissions there, the namespaces its Jobs need, its Nodes and pods readable,
//! the leader's view of its room), and the workers its Jobs find lost, from the marks on them.

use std::collections::BTreeMap;
use std::time::Duration;

use jobwarden_admission::policy::{Dispatch, NamespaceMatch, Worker};
use jobwarden_dispatcher::copy::record::OnWorkerLost;
use jobwarden_dispatcher::placement::Named;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::json;

use super::{ERROR, OK, SKIPPED, UNKNOWN, WARNING, expect, refused};
use crate::access::Access;
use crate::answer::Answer;
use crate::catalogue::*;
use crate::check::{Check, Status};
use crate::dispatch::budget::management_budget;
use crate::dispatch::jobs::{DispatchedJob, wanted_namespaces};
use crate::dispatch::lost::lost_workers;
use crate::dispatch::room::{BudgetSaid, LeaderMetrics, fresh, lease_views, readable, view_states};
use crate::dispatch::worker::{
    KubeconfigRead, NamespaceFound, NamespaceSeen, Reached, WorkerObserved, checks, reviews,
};
use crate::dispatch::{DispatchObserved, checks as all_checks};
use crate::installed::permissions::worker_room_uses;
use crate::pre::Allowed;

const T0: &str = "2026-01-01T00:00:00Z";

fn t(secs: i64) -> Timestamp {
    let t0: Timestamp = T0.parse().expect("a time");
    t0.checked_add(SignedDuration::from_secs(secs))
        .expect("in range")
}

/// A kubeconfig as deploy/worker/'s instructions make it, its user as given.
fn kubeconfig(user: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
current-context: east
contexts: [{{name: east, context: {{cluster: east, user: dispatcher}}}}]
clusters: [{{name: east, cluster: {{server: 'https://east.example:6443', certificate-authority-data: Q0E=}}}}]
users: [{{name: dispatcher, user: {user}}}]
"
    )
}

fn read(user: &str) -> KubeconfigRead {
    KubeconfigRead::Read {
        from: "Secret jobwarden-system/jobwarden-worker-east".to_owned(),
        text: kubeconfig(user),
    }
}

fn answer(code: u16, body: serde_json::Value) -> Answer {
    Answer {
        code,
        warnings: Vec::new(),
        body,
    }
}

const DISPATCHER: &str = "system:serviceaccount:jobwarden-worker:jobwarden-dispatcher";

/// A worker that answers, takes the dispatcher, allows all it does, and has `ml`.
fn reached() -> Reached {
    Reached {
        server: "https://east.example:6443".to_owned(),
        version: Ok(answer(200, json!({"gitVersion": "v1.36.2"}))),
        whoami: Ok(answer(
            201,
            json!({"kind": "SelfSubjectReview", "status": {"userInfo": {"username": DISPATCHER}}}),
        )),
        permissions: reviews(&worker_spec(&[]))
            .into_iter()
            .map(|a| (a, Ok(true)))
            .collect(),
        room: worker_room_uses(None)
            .into_iter()
            .map(|a| (a, Ok(true)))
            .collect(),
        namespaces: Ok(vec![NamespaceSeen {
            name: "ml".to_owned(),
            jobs: vec!["ml/train".to_owned()],
            found: NamespaceFound::Exists,
        }]),
    }
}

fn worker_spec(namespaces: &[&str]) -> Worker {
    Worker {
        name: "east".to_owned(),
        kubeconfig_secret: Some("jobwarden-worker-east".to_owned()),
        namespaces: NamespaceMatch {
            names: namespaces.iter().map(|n| (*n).to_owned()).collect(),
            selector: None,
        },
        ..Worker::default()
    }
}

fn observed(
    kubeconfig: KubeconfigRead,
    reached: Option<Result<Reached, String>>,
) -> WorkerObserved {
    WorkerObserved {
        name: "east".to_owned(),
        kubeconfig,
        reached,
    }
}

fn statuses(checks: &[Check]) -> Vec<(&'static str, Status)> {
    checks.iter().map(|c| (c.name(), c.status)).collect()
}

#[test]
fn a_worker_the_dispatcher_can_use_passes_every_check() {
    let out = checks(
        &observed(read("{token: abc}"), Some(Ok(reached()))),
        "jobwarden-system",
    );
    assert_eq!(
        statuses(&out),
        [
            (WORKER_KUBECONFIG.name, OK),
            (WORKER_ANSWERS.name, OK),
            (WORKER_CREDENTIALS.name, OK),
            (WORKER_PERMISSIONS.name, OK),
            (WORKER_NAMESPACES.name, OK),
            (WORKER_ROOM_READABLE.name, OK),
        ]
    );
    expect(
        &out[0],
        WORKER_KUBECONFIG,
        OK,
        &[
            "worker east",
            "Secret jobwarden-system/jobwarden-worker-east",
            "https://east.example:6443",
            "a token",
        ],
    );
    expect(&out[1], WORKER_ANSWERS, OK, &["v1.36.2"]);
    expect(&out[2], WORKER_CREDENTIALS, OK, &[DISPATCHER]);
    expect(
        &out[3],
        WORKER_PERMISSIONS,
        OK,
        &["all 8 calls", "in every namespace"],
    );
    expect(&out[4], WORKER_NAMESPACES, OK, &["ml", "1 Job"]);
    expect(
        &out[5],
        WORKER_ROOM_READABLE,
        OK,
        &["Nodes and pods cluster-wide", "placement sees its room"],
    );
}

#[test]
fn a_kubeconfig_the_dispatcher_refuses_is_an_error_naming_the_reason_and_nothing_more_is_asked() {
    let cases: &[(&str, &str)] = &[
        (
            "{exec: {command: gke-gcloud-auth-plugin, apiVersion: client.authentication.k8s.io/v1}}",
            "exec_plugin",
        ),
        ("{tokenFile: /var/run/token}", "token_file"),
        ("{username: admin, password: secret}", "basic_auth"),
        ("{}", "no_credentials"),
    ];
    for (user, label) in cases {
        let out = checks(&observed(read(user), None), "jobwarden-system");
        expect(
            &out[0],
            WORKER_KUBECONFIG,
            ERROR,
            &["worker east", "refuses", label],
        );
        expect(
            &out[1],
            WORKER_ANSWERS,
            SKIPPED,
            &["its kubeconfig is refused"],
        );
        assert_eq!(out.len(), 2, "{user}");
    }
}

#[test]
fn a_kubeconfig_not_found_or_not_readable_is_said_so() {
    let missing = KubeconfigRead::Missing {
        from: "Secret jobwarden-system/jobwarden-worker-east".to_owned(),
        why: "Secret jobwarden-system/jobwarden-worker-east does not exist".to_owned(),
    };
    let out = checks(&observed(missing, None), "jobwarden-system");
    expect(&out[0], WORKER_KUBECONFIG, ERROR, &["does not exist"]);
    assert!(
        out[0]
            .hint
            .as_deref()
            .is_some_and(|h| h.contains("kubectl -n jobwarden-system create secret generic"))
    );
    let forbidden = KubeconfigRead::Unreadable {
        from: "Secret jobwarden-system/jobwarden-worker-east".to_owned(),
        why: "secrets \"jobwarden-worker-east\" is forbidden".to_owned(),
    };
    let out = checks(&observed(forbidden, None), "jobwarden-system");
    expect(&out[0], WORKER_KUBECONFIG, UNKNOWN, &["forbidden"]);
    expect(&out[1], WORKER_ANSWERS, SKIPPED, &[]);
    let local = checks(&observed(KubeconfigRead::Local, None), "jobwarden-system");
    assert_eq!(statuses(&local), [(WORKER_KUBECONFIG.name, OK)]);
}

#[test]
fn a_worker_that_does_not_answer_fails_and_is_asked_nothing_more() {
    let silent = Reached {
        version: Err("tcp connect error: Connection refused (os error 111)".to_owned()),
        ..reached()
    };
    let out = checks(
        &observed(read("{token: abc}"), Some(Ok(silent))),
        "jobwarden-system",
    );
    expect(
        &out[1],
        WORKER_ANSWERS,
        ERROR,
        &[
            "https://east.example:6443 does not answer",
            "Connection refused",
        ],
    );
    expect(&out[2], WORKER_CREDENTIALS, SKIPPED, &["does not answer"]);
    assert_eq!(out.len(), 3);
    let no_client = checks(
        &observed(
            read("{token: abc}"),
            Some(Err("invalid CA data".to_owned())),
        ),
        "jobwarden-system",
    );
    expect(
        &no_client[0],
        WORKER_KUBECONFIG,
        ERROR,
        &["no client can be made", "invalid CA data"],
    );
}

#[test]
fn an_expired_token_is_a_401_whose_fix_is_a_new_token_in_the_secret() {
    let expired = Reached {
        version: Ok(refused(401, "Unauthorized")),
        whoami: Ok(refused(401, "Unauthorized")),
        ..reached()
    };
    let out = checks(
        &observed(read("{token: old}"), Some(Ok(expired))),
        "jobwarden-system",
    );
    expect(&out[1], WORKER_ANSWERS, OK, &["answers (401)"]);
    expect(
        &out[2],
        WORKER_CREDENTIALS,
        ERROR,
        &["unauthorized (401)", "expired"],
    );
    let hint = out[2].hint.as_deref().unwrap_or_default();
    assert!(
        hint.contains("create token")
            && hint.contains("Secret jobwarden-system/jobwarden-worker-east"),
        "{hint}"
    );
    expect(
        &out[3],
        WORKER_PERMISSIONS,
        SKIPPED,
        &["refuses the credentials"],
    );
    assert_eq!(out.len(), 4);
}

#[test]
fn permissions_are_reviewed_per_namespace_where_the_worker_names_them() {
    let reviews = reviews(&worker_spec(&["ml", "etl"]));
    assert_eq!(reviews.len(), 16);
    assert!(reviews.contains(&Access::resource(
        Some("ml"),
        "",
        "namespaces",
        Some("ml"),
        "get"
    )));
    assert!(reviews.contains(&Access::resource(
        Some("etl"),
        "batch",
        "jobs",
        None,
        "create"
    )));
    assert!(
        !reviews.iter().any(|a| matches!(
            a,
            Access::Resource {
                namespace: None,
                ..
            }
        )),
        "{reviews:?}"
    );
    let denied: Vec<_> = reviews
        .iter()
        .cloned()
        .map(|a| {
            let allowed = !matches!(&a, Access::Resource { namespace: Some(ns), verb, .. } if ns == "etl" && verb == "delete");
            (a, Ok(allowed))
        })
        .collect();
    let out = checks(
        &observed(
            read("{token: abc}"),
            Some(Ok(Reached {
                permissions: denied,
                ..reached()
            })),
        ),
        "jobwarden-system",
    );
    expect(
        &out[3],
        WORKER_PERMISSIONS,
        ERROR,
        &["may not delete jobs (batch) in namespace etl"],
    );
    let allowed: Vec<_> = reviews.into_iter().map(|a| (a, Ok(true))).collect();
    let out = checks(
        &observed(
            read("{token: abc}"),
            Some(Ok(Reached {
                permissions: allowed,
                ..reached()
            })),
        ),
        "jobwarden-system",
    );
    expect(
        &out[3],
        WORKER_PERMISSIONS,
        OK,
        &["all 16 calls", "in namespaces ml, etl"],
    );
}

#[test]
fn the_namespaces_jobs_need_on_a_worker() {
    let seen = |found: NamespaceFound| {
        Ok(vec![NamespaceSeen {
            name: "ml".to_owned(),
            jobs: vec!["ml/a".to_owned(), "ml/b".to_owned()],
            found,
        }])
    };
    let cases = [
        (
            seen(NamespaceFound::Missing),
            WARNING,
            "has no namespace ml (ml/a, ml/b)",
        ),
        (
            seen(NamespaceFound::NotAllowed),
            ERROR,
            "may not get namespace ml",
        ),
        (
            seen(NamespaceFound::Unknown("timeout".to_owned())),
            UNKNOWN,
            "timeout",
        ),
        (Ok(Vec::new()), OK, "no Job is placed there"),
        (Err("forbidden".to_owned()), UNKNOWN, "forbidden"),
    ];
    for (namespaces, status, fragment) in cases {
        let out = checks(
            &observed(
                read("{token: abc}"),
                Some(Ok(Reached {
                    namespaces,
                    ..reached()
                })),
            ),
            "jobwarden-system",
        );
        expect(&out[4], WORKER_NAMESPACES, status, &[fragment]);
    }
}

fn job(name: &str, worker: Option<&str>) -> DispatchedJob {
    DispatchedJob {
        namespace: "ml".to_owned(),
        name: name.to_owned(),
        worker: worker.map(str::to_owned),
        named: Named::Any,
        lost_since: None,
        on_worker_lost: OnWorkerLost::Redispatch,
    }
}

#[test]
fn the_dispatchers_jobs_are_read_from_their_annotations() {
    let raw = json!({
        "metadata": {"namespace": "ml", "name": "train", "annotations": {
            "jobwarden.io/worker": "east", "jobwarden.io/workers": "east, west",
            "jobwarden.io/worker-lost-since": "2026-01-01T00:00:00Z",
            "jobwarden.io/on-worker-lost": "Wait"}},
        "spec": {"managedBy": "jobwarden.io/dispatcher"},
        "status": {}
    });
    assert_eq!(
        DispatchedJob::of(&raw, "jobwarden.io/dispatcher"),
        Some(DispatchedJob {
            named: Named::Only(vec!["east".to_owned(), "west".to_owned()]),
            lost_since: Some(t(0)),
            on_worker_lost: OnWorkerLost::Wait,
            ..job("train", Some("east"))
        })
    );
    assert_eq!(DispatchedJob::of(&raw, "example.com/other"), None);
    let mut ended = raw.clone();
    ended["status"] = json!({"conditions": [{"type": "Complete", "status": "True"}]});
    assert_eq!(DispatchedJob::of(&ended, "jobwarden.io/dispatcher"), None);
}

#[test]
fn a_worker_needs_the_namespaces_of_its_jobs_and_of_the_jobs_waiting_that_it_may_take() {
    let jobs = [
        job("placed", Some("east")),
        job("elsewhere", Some("west")),
        job("waiting", None),
        DispatchedJob {
            named: Named::Only(vec!["west".to_owned()]),
            ..job("wants-west", None)
        },
        DispatchedJob {
            namespace: "etl".to_owned(),
            ..job("other-namespace", None)
        },
    ];
    let wanted = wanted_namespaces(&worker_spec(&["ml"]), &jobs, &BTreeMap::new());
    assert_eq!(
        wanted,
        BTreeMap::from([(
            "ml".to_owned(),
            vec!["ml/placed".to_owned(), "ml/waiting".to_owned()]
        )])
    );
    let any = wanted_namespaces(&worker_spec(&[]), &jobs, &BTreeMap::new());
    assert_eq!(any.keys().collect::<Vec<_>>(), ["etl", "ml"]);
}

#[test]
fn lost_workers_are_told_from_the_marks_on_their_jobs() {
    let grace = Duration::from_secs(300);
    let lost = |name: &str, since: i64, choice: OnWorkerLost| DispatchedJob {
        lost_since: Some(t(since)),
        on_worker_lost: choice,
        ..job(name, Some("east"))
    };
    let none = lost_workers(&Ok(vec![job("a", Some("east"))]), grace, &["east"], t(10));
    expect(
        &none[0],
        LOST_WORKERS,
        OK,
        &["no dispatched Job", "1 Job not finished"],
    );

    let jobs = vec![
        lost("a", 0, OnWorkerLost::Redispatch),
        lost("b", 0, OnWorkerLost::Redispatch),
        lost("c", 0, OnWorkerLost::Wait),
        job("d", Some("west")),
    ];
    let out = lost_workers(&Ok(jobs.clone()), grace, &["east", "west"], t(60));
    assert_eq!(out.len(), 1);
    expect(
        &out[0],
        LOST_WORKERS,
        WARNING,
        &[
            "worker east lost since 2026-01-01T00:00:00Z (1m0s ago)",
            "3 Jobs keep their place until 2026-01-01T00:05:00Z, then 2 Redispatch, 1 Wait",
        ],
    );
    // Past the grace, a Job that waits stays; one to be moved that is still there has found no
    // other worker.
    let out = lost_workers(&Ok(jobs), grace, &["east", "west"], t(400));
    expect(
        &out[0],
        LOST_WORKERS,
        WARNING,
        &[
            "1 Job waits for it (Wait)",
            "2 Jobs past their grace still on it",
            "2 Redispatch",
        ],
    );
    let gone = lost_workers(
        &Ok(vec![lost("a", 0, OnWorkerLost::Fail)]),
        grace,
        &["west"],
        t(1),
    );
    expect(
        &gone[0],
        LOST_WORKERS,
        WARNING,
        &["no longer in the policy", "then 1 Fail"],
    );
    let unlisted = lost_workers(&Err("forbidden".to_owned()), grace, &[], t(1));
    expect(&unlisted[0], LOST_WORKERS, UNKNOWN, &["forbidden"]);
}

#[test]
fn a_run_tells_every_worker_in_the_policys_order_then_the_lost_ones() {
    let observed = DispatchObserved {
        namespace_labels: Default::default(),
        namespace: "jobwarden-system".to_owned(),
        policy: Dispatch {
            workers: vec![
                worker_spec(&[]),
                Worker {
                    name: "plugin".to_owned(),
                    ..worker_spec(&[])
                },
            ],
            ..Dispatch::default()
        },
        workers: vec![
            observed(read("{token: abc}"), Some(Ok(reached()))),
            WorkerObserved {
                name: "plugin".to_owned(),
                ..observed(
                    read("{exec: {command: x, apiVersion: client.authentication.k8s.io/v1}}"),
                    None,
                )
            },
        ],
        jobs: Ok(Vec::new()),
        leader_metrics: LeaderMetrics::Unreadable("not asked".to_owned()),
        now: t(0),
    };
    let out = all_checks(&observed);
    let names: Vec<(String, Status)> = out
        .iter()
        .map(|c| {
            (
                c.message.split(':').next().unwrap_or_default().to_owned(),
                c.status,
            )
        })
        .collect();
    // east: six checks and the leader's view; plugin: its kubeconfig refused, the rest (its
    // view too: a refused worker has none) skipped in one line; then the lost workers and the
    // leader's budget.
    assert_eq!(out.len(), 11, "{names:?}");
    expect(
        &out[6],
        WORKER_VIEW_FRESH,
        UNKNOWN,
        &["worker east", "not asked"],
    );
    expect(
        &out[7],
        WORKER_KUBECONFIG,
        ERROR,
        &["worker plugin", "exec_plugin"],
    );
    assert!(
        out.iter()
            .all(|c| c.kind != WORKER_VIEW_FRESH || !c.message.contains("worker plugin")),
        "{names:?}"
    );
    expect(&out[9], LOST_WORKERS, OK, &[]);
    expect(&out[10], MANAGEMENT_BUDGET, UNKNOWN, &["not asked"]);
    assert!(
        out.iter()
            .all(|c| c.kind.doc().starts_with("docs/dispatch.md#"))
    );
}

/// Access reviews and their answers.
type Answers = Vec<(Access, Allowed)>;

/// Where a Job fits: the dispatcher's Nodes and pods on a worker. A role granted in chosen
/// namespaces only is a warning (placement counts Jobs there), never a failure.
#[test]
fn a_worker_whose_role_cannot_read_nodes_and_pods_cluster_wide_places_by_count() {
    let answers = |allowed: fn(&Access) -> Allowed| -> Vec<(Access, Allowed)> {
        worker_room_uses(None)
            .into_iter()
            .map(|a| {
                let answer = allowed(&a);
                (a, answer)
            })
            .collect()
    };
    let is_nodes =
        |a: &Access| matches!(a, Access::Resource { resource, .. } if resource == "nodes");
    let cases: Vec<(Answers, Status, &[&str])> = vec![
        (
            answers(|_| Ok(true)),
            OK,
            &["may list and watch its Nodes and pods"],
        ),
        (
            answers(|a| Ok(!matches!(a, Access::Resource { resource, .. } if resource == "nodes"))),
            WARNING,
            &[
                "may not get nodes cluster-wide",
                "placement falls back to counting Jobs on this worker",
            ],
        ),
        (
            answers(|_| Err("timed out".to_owned())),
            UNKNOWN,
            &["cannot tell", "timed out"],
        ),
    ];
    for (answers, status, says) in cases {
        let check = readable("east", &answers);
        expect(&check, WORKER_ROOM_READABLE, status, says);
    }
    // Denied is said before unknown.
    let mixed: Vec<(Access, Allowed)> = worker_room_uses(None)
        .into_iter()
        .map(|a| {
            let answer = if is_nodes(&a) {
                Ok(false)
            } else {
                Err("x".to_owned())
            };
            (a, answer)
        })
        .collect();
    assert_eq!(readable("east", &mixed).status, WARNING);
    // Its hint names the cluster-wide install: a RoleBinding cannot grant Nodes.
    let hint = readable("east", &answers(|_| Ok(false)))
        .hint
        .unwrap_or_default();
    assert!(hint.contains("apply -k deploy/worker/"), "{hint}");
}

#[test]
fn the_leaders_view_of_a_worker_is_read_from_its_one_hot_gauge() {
    let exposition = "\
# HELP jobwarden_dispatch_worker_view How the dispatcher knows each worker's room.
# TYPE jobwarden_dispatch_worker_view gauge
jobwarden_dispatch_worker_view{worker=\"east\",state=\"fresh\"} 1
jobwarden_dispatch_worker_view{worker=\"east\",state=\"listing\"} 0
jobwarden_dispatch_worker_view{worker=\"east\",state=\"counting\"} 0
jobwarden_dispatch_worker_view{worker=\"west\",state=\"fresh\"} 0
jobwarden_dispatch_worker_view{worker=\"west\",state=\"counting\"} 1
jobwarden_dispatch_worker_view{worker=\"gpu\",state=\"unbounded\"} 1
jobwarden_dispatch_worker_view{worker=\"new\",state=\"listing\"} 1
jobwarden_dispatch_worker_views_total 3
";
    let read = LeaderMetrics::Read {
        pod: "jobwarden-7d9f-abcde".to_owned(),
        text: exposition.to_owned(),
    };
    assert_eq!(view_states(exposition, "east"), ["fresh"]);
    let cases: [(&str, Status, &[&str]); 5] = [
        (
            "east",
            OK,
            &["jobwarden-7d9f-abcde", "listed its Nodes and pods"],
        ),
        (
            "west",
            WARNING,
            &["placement falls back to counting Jobs on this worker"],
        ),
        ("gpu", OK, &["capacity: Unbounded"]),
        ("new", WARNING, &["still listing"]),
        (
            "gone",
            UNKNOWN,
            &["says nothing of its view (jobwarden_dispatch_worker_view)"],
        ),
    ];
    for (worker, status, says) in cases {
        expect(&fresh(worker, &read), WORKER_VIEW_FRESH, status, says);
    }
    let secured = LeaderMetrics::Unreadable(
        "the leader serves its metrics to authorized readers only (--metrics-secure)".to_owned(),
    );
    let unknown = fresh("east", &secured);
    expect(
        &unknown,
        WORKER_VIEW_FRESH,
        UNKNOWN,
        &["not known", "--metrics-secure"],
    );
}

#[test]
fn the_leaders_view_of_a_worker_is_read_from_its_lease_where_it_says_it() {
    let now = Timestamp::from_second(1_800_000_000).expect("a time");
    let lease = |annotation: Option<&str>, holder: &str, renewed_ago: i64| {
        let mut meta = json!({"name": "jobwarden-job-controller"});
        if let Some(a) = annotation {
            meta["annotations"] = json!({
                "jobwarden.io/worker-views": a,
                "jobwarden.io/revision": "x",
                "jobwarden.io/management-budget": r#"{"statusWritesWaiting": 4, "longestWaitSeconds": 2.3}"#,
            });
        }
        let renewed = now
            .checked_sub(SignedDuration::from_secs(renewed_ago))
            .expect("a time");
        serde_json::from_value::<k8s_openapi::api::coordination::v1::Lease>(json!({
            "metadata": meta,
            "spec": {"holderIdentity": holder, "renewTime": renewed.to_string()}
        }))
        .expect("a Lease")
    };
    let stale_after = Duration::from_secs(60);
    let said = r#"{"east": {"state": "fresh", "lastChange": "2027-01-15T08:00:00Z"}, "west": {"state": "listing"}}"#;
    let read = lease_views(
        &lease(Some(said), "jobwarden-7d9f-abcde", 2),
        now,
        stale_after,
    )
    .expect("the leader's word");
    let cases: [(&str, Status, &[&str]); 3] = [
        (
            "east",
            OK,
            &["jobwarden-7d9f-abcde", "listed its Nodes and pods"],
        ),
        ("west", WARNING, &["still listing"]),
        ("north", UNKNOWN, &["says nothing of its view"]),
    ];
    for (worker, status, says) in cases {
        expect(&fresh(worker, &read), WORKER_VIEW_FRESH, status, says);
    }
    // The budget, said beside the views.
    expect(
        &management_budget(&read),
        MANAGEMENT_BUDGET,
        WARNING,
        &[
            "jobwarden-7d9f-abcde",
            "bound by its request budget",
            "up to 2.3s",
            "4 waiting now",
        ],
    );
    // No word on the Lease (an older jobwarden): the metrics are read instead.
    assert_eq!(lease_views(&lease(None, "p", 2), now, stale_after), None);
    // A word nobody renews, and one that does not read, are said as such.
    let old = lease_views(&lease(Some(said), "p", 600), now, stale_after).expect("said");
    expect(
        &fresh("east", &old),
        WORKER_VIEW_FRESH,
        UNKNOWN,
        &["has not renewed", "600s"],
    );
    let garbled = lease_views(&lease(Some("{east"), "p", 2), now, stale_after).expect("said");
    expect(
        &fresh("east", &garbled),
        WORKER_VIEW_FRESH,
        UNKNOWN,
        &["does not read as JSON"],
    );
    let unheld = lease_views(&lease(Some(said), "", 2), now, stale_after).expect("said");
    expect(
        &fresh("east", &unheld),
        WORKER_VIEW_FRESH,
        UNKNOWN,
        &["no replica holds"],
    );
}

/// The leader's budget on the management cluster, as it says it on its Lease: a status write
/// that waited over a second warns; none said, or nothing read, cannot tell.
#[test]
fn the_leaders_budget_is_judged_by_its_longest_recent_wait() {
    let lease = |budget: Option<BudgetSaid>| LeaderMetrics::Lease {
        pod: "jobwarden-a".to_owned(),
        views: Default::default(),
        budget,
    };
    let said = |waiting, longest_wait_ms| {
        lease(Some(BudgetSaid {
            waiting,
            longest_wait_ms,
        }))
    };
    let cases: [(LeaderMetrics, Status, &[&str]); 5] = [
        (said(0, 0), OK, &["waited at most 0.0s"]),
        (said(2, 1000), OK, &["waited at most 1.0s"]),
        (said(7, 1400), WARNING, &["up to 1.4s", "7 waiting now"]),
        (lease(None), UNKNOWN, &["says nothing of its budget"]),
        (
            LeaderMetrics::Unreadable("no replica holds Lease x".to_owned()),
            UNKNOWN,
            &["no replica holds"],
        ),
    ];
    for (metrics, status, says) in cases {
        expect(
            &management_budget(&metrics),
            MANAGEMENT_BUDGET,
            status,
            says,
        );
    }
}
