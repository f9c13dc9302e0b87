//! A dispatched Job's story: its worker, a lost worker's mark and what follows it, what the
//! dispatcher said while it waits, and its copy as read from the worker, told as any Job and
//! its pods are; the copy recognised by its origin UID only.

use std::collections::BTreeMap;

use jobwarden_admission::policy::Dispatch;
use jobwarden_dispatcher::worker::credentials::{Refusal, RefusalReason};
use k8s_openapi::api::core::v1::Event;

use super::*;
use crate::dispatch::{CopyReading, DispatchReading};
use crate::timeline;

const DISPATCHER: &str = "jobwarden.io/dispatcher";
const SECRET: &str = "Secret jobwarden-system/jobwarden-worker-east";

/// A Job the dispatcher runs, with these annotations.
fn dispatched(annotations: Value) -> JobB {
    job(Some(DISPATCHER)).set("/metadata/annotations", annotations)
}

/// An event about the Job, as the dispatcher (or `from`) writes them.
fn event(from: &str, type_: &str, reason: &str, message: &str, secs: i64) -> Event {
    serde_json::from_value(json!({
        "metadata": {"name": format!("j.{reason}"), "namespace": "ns"},
        "involvedObject": {"kind": "Job", "name": "j", "namespace": "ns", "uid": "job-uid"},
        "type": type_, "reason": reason, "message": message,
        "lastTimestamp": at(secs), "reportingComponent": from, "count": 1
    }))
    .expect("an event")
}

fn policy(worker_lost_seconds: u64) -> Result<Dispatch, String> {
    Ok(Dispatch {
        worker_lost_seconds,
        ..Dispatch::default()
    })
}

/// The copy on the worker: the user's Job's spec, its own UID, the origin label given.
fn copy(origin_uid: &str) -> Value {
    let mut c = job(None).0;
    c["metadata"]["uid"] = json!("copy-uid");
    c["metadata"]["labels"] = json!({
        "jobwarden.io/origin-uid": origin_uid, "jobwarden.io/origin": "mgmt"});
    c["status"] = json!({
        "startTime": at(2), "completionTime": at(8), "succeeded": 1,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": at(8)},
            {"type": "Complete", "status": "True", "reason": "CompletionsReached",
             "message": "Reached expected number of succeeded pods", "lastTransitionTime": at(8)}]
    });
    c
}

fn copy_pod() -> Pod {
    let mut p = pod("j-abcde").created(2).ended("Succeeded", 0, 7).0;
    p["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] = json!("copy-uid");
    serde_json::from_value(p).expect("a pod")
}

fn tell_dispatched(
    job: JobB,
    events: Vec<Event>,
    reading: Option<DispatchReading>,
    now: i64,
) -> Explanation {
    let observed = Observed {
        job: job.0,
        pods: Vec::new(),
        events,
        lease: LeaseReading::NotRead,
        dispatch: reading,
    };
    explain(&observed, t(now), &settings()).expect("explained")
}

fn read_copy(job: Option<Value>, pods: Result<Vec<Pod>, String>) -> DispatchReading {
    DispatchReading {
        policy: policy(60),
        copy: CopyReading::Read {
            via: SECRET.to_owned(),
            job,
            pods,
            events: Ok(vec![event(
                "job-controller",
                "Normal",
                "SuccessfulCreate",
                "Created pod: j-abcde",
                2,
            )]),
        },
        fleet: Vec::new(),
        order: None,
    }
}

#[test]
fn a_job_no_worker_can_take_waits_and_the_dispatchers_warning_says_why() {
    let said = "no worker can take the Job now: plugin: its credentials are refused: its kubeconfig is refused: it runs an exec credential plugin";
    let e = tell_dispatched(
        dispatched(json!({"jobwarden.io/workers": "plugin"})),
        vec![event(DISPATCHER, "Warning", "NoWorker", said, 5)],
        Some(DispatchReading {
            policy: policy(60),
            copy: CopyReading::NotPlaced,
            fleet: Vec::new(),
            order: None,
        }),
        600,
    );
    assert_eq!(e.runner.controller, ControllerKind::Dispatcher);
    assert_eq!(
        e.runner.stuck, None,
        "the dispatcher acts on it: it is not stuck"
    );
    let d = e.dispatch.as_ref().expect("dispatched");
    assert_eq!((d.worker.as_deref(), &d.copy), (None, &CopyView::NotPlaced));
    assert_eq!(d.named_workers, ["plugin"]);
    assert_eq!(
        d.dispatcher_said.as_ref().map(|s| s.reason.as_str()),
        Some("NoWorker")
    );
    let text = render(&e);
    assert!(text.starts_with(
        "Job ns/j, run by jobwarden's dispatcher (spec.managedBy: jobwarden.io/dispatcher), not placed on a worker yet.\n"
    ), "{text}");
    assert!(text.contains(&format!(
        "Not placed on a worker yet (jobwarden.io/workers: plugin).\nWaiting for: a worker to take it; the dispatcher said 9m55s ago (NoWorker): {said}\n"
    )), "{text}");
    assert!(!text.contains("Pods:"), "{text}");

    // A dispatcher that never said anything about an old Job may not be running at all.
    let silent = tell_dispatched(dispatched(json!({})), vec![], None, 600);
    assert!(silent.runner.stuck.is_some());
    assert!(render(&silent).contains("it has said nothing about the Job yet"));
}

#[test]
fn the_copy_is_read_from_its_worker_and_told_with_its_pods() {
    let e = tell_dispatched(
        dispatched(json!({"jobwarden.io/worker": "east"})).set("/status/startTime", json!(at(2))),
        vec![event(
            DISPATCHER,
            "Normal",
            "Dispatched",
            "Created the Job's copy on worker east",
            1,
        )],
        Some(read_copy(Some(copy("job-uid")), Ok(vec![copy_pod()]))),
        10,
    );
    let d = e.dispatch.as_ref().expect("dispatched");
    let CopyView::Read {
        story, pods_unread, ..
    } = &d.copy
    else {
        panic!("the copy is read: {:?}", d.copy)
    };
    assert_eq!(pods_unread, &None);
    assert_eq!(story.uid, "copy-uid");
    assert_eq!(story.runner.controller, ControllerKind::BuiltIn);
    assert_eq!(story.finished_pods.len(), 1);
    assert_eq!(
        story.finished.as_ref().map(|f| f.type_.as_str()),
        Some("Complete")
    );
    let text = render(&e);
    for line in [
        "Job ns/j, run by jobwarden's dispatcher (spec.managedBy: jobwarden.io/dispatcher) on worker east.\n",
        "Placed on worker east (jobwarden.io/worker); should it stop answering, the Job keeps its place there for 1m0s, then another worker runs it (jobwarden.io/on-worker-lost: Redispatch).\n",
        "Its copy on worker east, read with Secret jobwarden-system/jobwarden-worker-east: Job ns/j (UID copy-uid), run there by the built-in Job controller.\n",
        "  Complete 2s ago, reason CompletionsReached: Reached expected number of succeeded pods.\n",
        "  Pods:\n    pod j-abcde succeeded 3s ago\n",
        "  Events on worker east:\n    8s ago  Normal SuccessfulCreate from job-controller: Created pod: j-abcde\n",
        "\nEvents:\n  9s ago  Normal Dispatched from jobwarden.io/dispatcher: Created the Job's copy on worker east\n",
    ] {
        assert!(text.contains(line), "{line:?} in\n{text}");
    }
    assert!(!text.contains("it has no pods"), "{text}");
    let json = serde_json::to_value(&e).expect("JSON");
    assert_eq!(json["dispatch"]["copy"]["state"], "read");
    assert_eq!(
        json["dispatch"]["copy"]["story"]["finishedPods"][0]["name"],
        "j-abcde"
    );
    assert_eq!(json["runner"]["controller"], "dispatcher");

    // The picture is the copy's: its pod, on the worker.
    let drawn = timeline::svg(&e);
    assert!(
        drawn.contains("j-abcde") && drawn.contains("on worker east"),
        "{drawn}"
    );
}

#[test]
fn pods_the_credentials_may_not_list_are_said_unread() {
    let why = "Secret jobwarden-system/jobwarden-worker-east may not list pods in namespace ns on worker east";
    let mut running = copy("job-uid");
    running["status"] = json!({"startTime": at(2), "active": 1});
    let e = tell_dispatched(
        dispatched(json!({"jobwarden.io/worker": "east"})),
        vec![],
        Some(read_copy(Some(running), Err(why.to_owned()))),
        10,
    );
    let text = render(&e);
    assert!(
        text.contains(&format!("  Pods: not read: {why}.\n")),
        "{text}"
    );
    assert!(!text.contains("Waiting for: its controller"), "{text}");
    assert!(!text.contains("it has no pods"), "{text}");
}

#[test]
fn a_job_of_the_name_that_is_not_the_copy_is_someone_elses() {
    for (found, says) in [
        (
            copy("another-uid"),
            "its jobwarden.io/origin-uid is another-uid, not job-uid",
        ),
        (job(None).0, "it has no jobwarden.io/origin-uid"),
    ] {
        let e = tell_dispatched(
            dispatched(json!({"jobwarden.io/worker": "east"})),
            vec![],
            Some(read_copy(Some(found), Ok(vec![]))),
            10,
        );
        assert!(matches!(
            e.dispatch.as_ref().map(|d| &d.copy),
            Some(CopyView::NotTheCopy { .. })
        ));
        let text = render(&e);
        assert!(
            text.contains("Worker east holds a Job ns/j that is not this Job's copy")
                && text.contains(says)
                && text.contains("someone else's"),
            "{text}"
        );
    }
}

#[test]
fn a_copy_gone_after_the_job_ended_is_said_deleted() {
    let complete = || {
        dispatched(json!({"jobwarden.io/worker": "east"})).set(
            "/status/conditions",
            json!([{"type": "Complete", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": at(8)}]),
        )
    };
    // The dispatcher writes no Event for a finished Job's copy: it always deletes it then.
    let e = tell_dispatched(complete(), vec![], Some(read_copy(None, Ok(vec![]))), 10);
    let text = render(&e);
    assert!(
        text.contains("\nPlaced on worker east (jobwarden.io/worker).\n\n"),
        "an ended Job's worker is lost to nobody: {text}"
    );
    assert!(text.contains(
        "Its copy on worker east is gone: the dispatcher deletes a copy once the Job shows how it ended (no Job ns/j there, read with Secret jobwarden-system/jobwarden-worker-east)."
    ), "{text}");
    // An Event that said it (an older jobwarden's, or a copy deleted for another reason) is told.
    let deleted =
        "Deleted the Job's copy on worker east (the Job shows how it ended); its pods go with it";
    let e = tell_dispatched(
        complete(),
        vec![event(DISPATCHER, "Normal", "CopyDeleted", deleted, 9)],
        Some(read_copy(None, Ok(vec![]))),
        10,
    );
    assert!(render(&e).contains(&format!(
        "Its copy on worker east is gone: the dispatcher deleted it 1s ago (CopyDeleted: {deleted})."
    )));
    let never = tell_dispatched(
        dispatched(json!({"jobwarden.io/worker": "east"})),
        vec![],
        Some(read_copy(None, Ok(vec![]))),
        10,
    );
    assert!(render(&never).contains("No copy of it on worker east: no Job ns/j there (read with Secret jobwarden-system/jobwarden-worker-east)."));
}

#[test]
fn a_lost_worker_keeps_the_job_until_its_grace_ends_then_the_job_follows_its_choice() {
    let lost = |choice: Option<&str>| {
        let mut a =
            json!({"jobwarden.io/worker": "east", "jobwarden.io/worker-lost-since": at(40)});
        if let Some(c) = choice {
            a["jobwarden.io/on-worker-lost"] = json!(c);
        }
        dispatched(a)
    };
    let unreachable = |policy: Result<Dispatch, String>| DispatchReading {
        policy,
        copy: CopyReading::Unreachable {
            via: SECRET.to_owned(),
            reason: "worker east does not answer: tcp connect error: Connection refused".to_owned(),
        },
        fleet: Vec::new(),
        order: None,
    };
    let e = tell_dispatched(lost(None), vec![], Some(unreachable(policy(60))), 70);
    let d = e.dispatch.as_ref().expect("dispatched");
    assert_eq!(
        d.lost,
        Some(LostView {
            mark: at(40),
            since: Some(t(40)),
            keeps_place_until: Some(t(100)),
            remaining_seconds: Some(30),
        })
    );
    let text = render(&e);
    assert!(text.contains(
        "Placed on worker east (jobwarden.io/worker), which does not answer: lost since 2026-01-01T00:00:40Z (30s ago, jobwarden.io/worker-lost-since). The Job keeps its place there until 2026-01-01T00:01:40Z (in 30s; dispatch.workerLostSeconds: 60), then another worker runs it (jobwarden.io/on-worker-lost: Redispatch).\n"
    ), "{text}");
    assert!(text.contains(
        "Its copy on worker east could not be read with Secret jobwarden-system/jobwarden-worker-east: worker east does not answer: tcp connect error: Connection refused. What this cluster shows is above"
    ), "{text}");

    let waiting = render(&tell_dispatched(
        lost(Some("Wait")),
        vec![],
        Some(unreachable(policy(60))),
        130,
    ));
    assert!(waiting.contains("Its place was kept until 2026-01-01T00:01:40Z (30s ago): now it waits for east to answer again (jobwarden.io/on-worker-lost: Wait)."), "{waiting}");
    let failing = render(&tell_dispatched(
        lost(Some("Fail")),
        vec![],
        Some(unreachable(policy(60))),
        70,
    ));
    assert!(
        failing
            .contains("then it fails with reason WorkerLost (jobwarden.io/on-worker-lost: Fail)"),
        "{failing}"
    );
    let unknown = render(&tell_dispatched(
        lost(None),
        vec![],
        Some(unreachable(Err("no Deployment in namespace jobwarden-system runs the controller to read its policy from".to_owned()))),
        70,
    ));
    assert!(unknown.contains("The Job keeps its place there for dispatch.workerLostSeconds (the policy could not be read: no Deployment in namespace jobwarden-system runs the controller"), "{unknown}");
}

#[test]
fn a_kubeconfig_the_dispatcher_refuses_is_said_and_never_used() {
    let e = tell_dispatched(
        dispatched(json!({"jobwarden.io/worker": "east"})),
        vec![],
        Some(DispatchReading {
            policy: policy(60),
            copy: CopyReading::Refused {
                via: SECRET.to_owned(),
                refusal: Refusal {
                    reason: RefusalReason::ExecPlugin,
                    message: "it runs an exec credential plugin".to_owned(),
                },
            },
            fleet: Vec::new(),
            order: None,
        }),
        10,
    );
    let text = render(&e);
    assert!(text.contains("Its copy on worker east is not read: the kubeconfig in Secret jobwarden-system/jobwarden-worker-east is refused, as the dispatcher refuses it (exec_plugin): it runs an exec credential plugin. `--worker-kubeconfig east=FILE` reads it with yours."), "{text}");
    let json = serde_json::to_value(&e).expect("JSON");
    assert_eq!(json["dispatch"]["copy"]["state"], "refused");
    assert_eq!(json["dispatch"]["copy"]["reason"], "exec_plugin");
}

#[test]
fn on_the_local_worker_the_job_runs_here_with_its_own_pods() {
    let e = tell_dispatched(
        dispatched(json!({"jobwarden.io/worker": "here"})),
        vec![],
        Some(DispatchReading {
            policy: policy(60),
            copy: CopyReading::Local,
            fleet: Vec::new(),
            order: None,
        }),
        10,
    );
    let text = render(&e);
    assert!(text.contains("Placed on worker here (jobwarden.io/worker): this cluster, where jobwarden's own Job controller runs it.\n\nPods: none.\n"), "{text}");
}

#[test]
fn a_job_not_dispatched_has_no_dispatch_in_its_json() {
    let e = tell(job(None), vec![], 10);
    assert_eq!(e.dispatch, None);
    let json = serde_json::to_value(&e).expect("JSON");
    assert!(json.get("dispatch").is_none(), "{json}");
}

/// A placed Job's copy's pods as the worker's scheduler left them, and the workers the Job was
/// moved from because its pods could not be scheduled there.
#[test]
fn a_placed_job_tells_where_its_copys_pods_are_and_where_it_was_moved_from() {
    let mut running = copy("job-uid");
    running["status"] = json!({"startTime": at(2), "active": 2});
    let copy_pod = |name: &str, pod: Value| -> Pod {
        let mut p = pod;
        p["metadata"]["name"] = json!(name);
        p["metadata"]["namespace"] = json!("ns");
        p["metadata"]["creationTimestamp"] = json!(at(2));
        p["metadata"]["labels"] = json!({"batch.kubernetes.io/controller-uid": "copy-uid"});
        serde_json::from_value(p).expect("a pod")
    };
    let pods = vec![
        copy_pod(
            "j-bound",
            json!({"spec": {"nodeName": "gpu-1", "containers": [{"name": "main", "image": "x"}]},
                   "status": {"phase": "Running"}}),
        ),
        copy_pod(
            "j-waits",
            json!({"spec": {"containers": [{"name": "main", "image": "x"}]},
                   "status": {"phase": "Pending", "conditions": [{
                       "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                       "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}]}}),
        ),
    ];
    let e = tell_dispatched(
        dispatched(json!({"jobwarden.io/worker": "east", "jobwarden.io/moved-from": "west,north"})),
        vec![],
        Some(read_copy(Some(running), Ok(pods))),
        10,
    );
    let d = e.dispatch.as_ref().expect("dispatched");
    assert_eq!(d.moved_from, ["west", "north"]);
    assert_eq!(d.copy_pods.len(), 2);
    let text = render(&e);
    for line in [
        "Moved from west, then north (jobwarden.io/moved-from): its pods could not be scheduled there.\n",
        "  Its pods on worker east:\n    pod j-bound on node gpu-1\n    pod j-waits unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.\n",
    ] {
        assert!(text.contains(line), "{line:?} in\n{text}");
    }
    let json = serde_json::to_value(&e).expect("json");
    assert_eq!(json["dispatch"]["movedFrom"], json!(["west", "north"]));
    assert_eq!(
        json["dispatch"]["copyPods"][0],
        json!({"pod": "j-bound", "node": "gpu-1"})
    );
}

/// A Job of `ns` asking one GPU: waiting, or placed on `worker`.
fn gpu_job(namespace: &str, name: &str, created: i64, worker: Option<&str>) -> Value {
    let mut j = dispatched(json!({}))
        .set("/metadata/namespace", json!(namespace))
        .set("/metadata/name", json!(name))
        .set("/metadata/uid", json!(format!("{namespace}-{name}")))
        .set("/metadata/creationTimestamp", json!(at(created)))
        .set(
            "/spec/template/spec/containers",
            json!([{"name": "main", "image": "x",
                    "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]),
        )
        .0;
    if let Some(w) = worker {
        j["metadata"]["annotations"]["jobwarden.io/worker"] = json!(w);
    }
    j
}

#[test]
fn a_waiting_job_is_told_its_team_its_place_and_the_room_held() {
    use crate::dispatch::OrderReading;
    use crate::workers::view::{JobsRead, Listing, WorkerRead, WorkerReading};
    use jobwarden_admission::policy::{NamespaceMatch, Share};
    let share = |name: &str, namespace: &str, weight: f64| Share {
        name: name.to_owned(),
        namespaces: NamespaceMatch {
            names: vec![namespace.to_owned()],
            selector: None,
        },
        weight,
    };
    let policy = Dispatch {
        shares: vec![share("research", "research", 2.0), share("prod", "ns", 1.0)],
        ..Dispatch::default()
    };
    let node = serde_json::from_value(json!({
        "metadata": {"name": "n"},
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "8"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .expect("a Node");
    let east = WorkerReading {
        name: "east".to_owned(),
        unbounded: false,
        draining: false,
        read: WorkerRead::Read {
            via: SECRET.to_owned(),
            nodes: Listing::Items(vec![node]),
            pods: Listing::Items(Vec::new()),
        },
    };
    // research runs 4 of the 8 GPUs (4/8 ÷ 2 = 0.25), prod none: prod's Jobs go first, the
    // older first; research's big Job holds room on east.
    let mut jobs: Vec<Value> = (0..4)
        .map(|i| gpu_job("research", &format!("r{i}"), 0, Some("east")))
        .collect();
    jobs.push(gpu_job("research", "big", 1, None));
    jobs.push(gpu_job("ns", "older", 2, None));
    let me = gpu_job("ns", "j", 3, None);
    jobs.push(me.clone());
    let order = OrderReading {
        jobs: JobsRead {
            jobs,
            latest_warning: BTreeMap::new(),
            held: BTreeMap::from([("research-big".to_owned(), "east".to_owned())]),
        },
        namespaces: BTreeMap::new(),
    };
    let reading = |order: Option<Result<OrderReading, String>>| DispatchReading {
        policy: Ok(policy.clone()),
        copy: CopyReading::NotPlaced,
        fleet: vec![east.clone()],
        order,
    };
    let e = tell_dispatched(JobB(me.clone()), vec![], Some(reading(Some(Ok(order)))), 60);
    let turn = e
        .dispatch
        .as_ref()
        .and_then(|d| d.turn.as_ref())
        .expect("its turn");
    assert_eq!(
        (turn.team.name.as_str(), turn.place, turn.waiting),
        ("prod", 2, 3)
    );
    assert_eq!(turn.team.fair_share, 1.0 / 3.0);
    assert_eq!(turn.held_for_it, None);
    let text = render(&e);
    assert!(
        text.contains(
            "Its turn: team prod (weight 1), 2 of 3 waiting Jobs. The team uses 0% of the fleet, against a fair share of 33%.\n\
             Room is held for research/big on worker east.\n"
        ),
        "{text}"
    );

    // The head of the order, holding room itself.
    let big = gpu_job("research", "big", 1, None);
    let mut order = OrderReading::default();
    order.jobs.jobs = vec![big.clone()];
    order.jobs.held = BTreeMap::from([("research-big".to_owned(), "east".to_owned())]);
    let e = tell_dispatched(JobB(big), vec![], Some(reading(Some(Ok(order)))), 60);
    let text = render(&e);
    assert!(
        text.contains(
            "Its turn: team research (weight 2), first of 1 waiting Jobs: the next to go as room frees. The team uses 0% of the fleet, against a fair share of 100%.\n\
             Room is held for it on worker east until it is placed.\n"
        ),
        "{text}"
    );

    // The dispatcher's Jobs could not be read: said, not guessed.
    let e = tell_dispatched(
        JobB(me),
        vec![],
        Some(reading(Some(Err(
            "cannot list Jobs cluster-wide: forbidden".to_owned(),
        )))),
        60,
    );
    assert!(render(&e).contains(
        "Its turn among the teams is unknown: cannot list Jobs cluster-wide: forbidden.\n"
    ));
}
