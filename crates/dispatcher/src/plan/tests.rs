//! The dispatcher's decisions, one scenario a test: a user's Job described in a line, the
//! workers in another, the steps expected in a third.

use serde_json::json;

use super::*;

const NOW: &str = "2026-11-27T10:10:00Z";

fn now() -> Timestamp {
    NOW.parse().expect("a time")
}

fn settings() -> Settings {
    Settings {
        origin: "mgmt".to_owned(),
        worker_lost: Duration::from_secs(20),
        unschedulable: Duration::from_secs(300),
    }
}

/// A user's Job: created at 10:00, not suspended, no status.
struct UserJob(Value);

impl UserJob {
    fn new() -> UserJob {
        UserJob(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "ml", "uid": "u-1", "resourceVersion": "5",
                         "creationTimestamp": "2026-11-27T10:00:00Z", "annotations": {}},
            "spec": {"managedBy": "jobwarden.io/dispatcher", "completions": 1, "parallelism": 1,
                     "suspend": false,
                     "template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "c", "image": "busybox"}]}}},
            "status": {},
        }))
    }

    fn annotated(mut self, key: &str, value: &str) -> UserJob {
        self.0["metadata"]["annotations"][key] = json!(value);
        self
    }

    fn on(self, worker: &str) -> UserJob {
        self.annotated("jobwarden.io/worker", worker)
    }

    fn lost_since(self, at: &str) -> UserJob {
        self.annotated("jobwarden.io/worker-lost-since", at)
    }

    fn status(mut self, status: Value) -> UserJob {
        self.0["status"] = status;
        self
    }

    fn spec(mut self, key: &str, value: Value) -> UserJob {
        self.0["spec"][key] = value;
        self
    }

    fn deleting(mut self) -> UserJob {
        self.0["metadata"]["deletionTimestamp"] = json!(NOW);
        self
    }
}

/// Its copy as the worker stores it, with `status`.
fn copy_of(user: &UserJob, status: Value) -> Value {
    let worker = record::recorded(&user.0).unwrap_or("east");
    let mut copy = copy::copy_of(&user.0, "mgmt", worker).expect("a copy");
    copy["metadata"]["uid"] = json!("c-1");
    copy["status"] = status;
    copy
}

fn worker(name: &str, load: usize) -> WorkerState<'_> {
    WorkerState {
        name,
        local: false,
        reach: Reach::Answers,
        ready: true,
        takes_namespace: true,
        has_namespace: Some(true),
        load,
        room: RoomFit::Fits,
        draining: false,
    }
}

fn lost(name: &str) -> WorkerState<'_> {
    WorkerState {
        reach: Reach::Lost,
        ..worker(name, 0)
    }
}

fn run(user: &UserJob, copy: Option<&Value>, workers: &[WorkerState<'_>]) -> Plan {
    run_seeing(user, copy, &[], &[], workers)
}

/// [`run`] at `at`, its copy's pods as the worker's view shows them.
fn run_with_pods(
    user: &UserJob,
    copy: &Value,
    pods: &CopyPods,
    workers: &[WorkerState<'_>],
    at: &str,
) -> Plan {
    plan(
        &settings(),
        JobView {
            user: &user.0,
            copy: Some(copy),
            copies_on: &[],
            avoid: &[],
            copy_pods: Some(pods),
        },
        workers,
        at.parse().expect("a time"),
    )
}

/// [`run`], with copies found on other workers and workers found unfit by trying.
fn run_seeing(
    user: &UserJob,
    copy: Option<&Value>,
    copies_on: &[&str],
    avoid: &[(&str, Unfit)],
    workers: &[WorkerState<'_>],
) -> Plan {
    plan(
        &settings(),
        JobView {
            user: &user.0,
            copy,
            copies_on,
            avoid,
            copy_pods: None,
        },
        workers,
        now(),
    )
}

/// The steps' kinds and targets, for one-line expectations.
fn kinds(plan: &Plan) -> Vec<String> {
    plan.steps
        .iter()
        .map(|s| match s {
            Step::Record {
                to,
                replacing,
                moved_from,
            } => match (replacing, moved_from) {
                (Some(from), Some(left)) => format!("record {to} (was {from}, left {left})"),
                (Some(from), None) => format!("record {to} (was {from})"),
                (None, _) => format!("record {to}"),
            },
            Step::Create { worker, .. } => format!("create on {worker}"),
            Step::PatchCopy { worker, .. } => format!("patch copy on {worker}"),
            Step::Mirror { worker, .. } => format!("mirror from {worker}"),
            Step::DeleteCopy { worker, reason, .. } => {
                format!("delete copy on {worker}: {}", reason.label())
            }
            Step::MarkLost { since } => format!("mark lost since {since}"),
            Step::ClearLost => "clear lost".to_owned(),
            Step::Fail { reason, .. } => format!("fail: {reason}"),
            Step::Event(e) => format!("event {}", e.reason),
        })
        .collect()
}

#[test]
fn a_new_job_is_recorded_on_the_least_loaded_worker_then_copied() {
    let plan = run(
        &UserJob::new(),
        None,
        &[worker("east", 3), worker("west", 1)],
    );
    assert_eq!(kinds(&plan), ["record west", "create on west"]);
    let Some(Step::Create { copy, .. }) = plan.steps.get(1) else {
        panic!("a create")
    };
    assert_eq!(
        copy["metadata"]["labels"]["jobwarden.io/origin-uid"],
        json!("u-1")
    );
    assert_eq!(plan.waiting, None);
}

#[test]
fn the_local_worker_is_only_recorded() {
    let local = WorkerState {
        local: true,
        has_namespace: None,
        ..worker("here", 0)
    };
    let plan = run(&UserJob::new(), None, &[worker("east", 2), local.clone()]);
    assert_eq!(kinds(&plan), ["record here"]);
    // Once recorded there, jobwarden's Job controller runs it: nothing for the dispatcher.
    let plan = run(
        &UserJob::new().on("here"),
        None,
        &[worker("east", 2), local],
    );
    assert_eq!(kinds(&plan), Vec::<String>::new());
}

#[test]
fn a_job_with_no_candidate_waits_and_says_why() {
    let plan = run(&UserJob::new(), None, &[lost("east")]);
    assert!(plan.steps.is_empty());
    assert_eq!(
        plan.waiting.map(|w| w.message()),
        Some("no worker can take the Job now: east: it does not answer".to_owned())
    );
}

#[test]
fn a_job_whose_deadline_passes_before_any_copy_started_fails() {
    let user = UserJob::new().spec("activeDeadlineSeconds", json!(60));
    let plan = run(&user, None, &[lost("east")]);
    assert_eq!(
        kinds(&plan),
        ["fail: DeadlineExceeded", "event DeadlineExceeded"]
    );
    assert_eq!(plan.waiting, None);
    // Before the deadline it waits, and looks again when it passes.
    let user = UserJob::new().spec("activeDeadlineSeconds", json!(3600));
    let plan = run(&user, None, &[lost("east")]);
    assert!(plan.steps.is_empty());
    assert_eq!(
        plan.recheck_at,
        Some("2026-11-27T11:00:00Z".parse().expect("a time"))
    );
    // A suspended Job's deadline does not run.
    let user = UserJob::new()
        .spec("activeDeadlineSeconds", json!(60))
        .spec("suspend", json!(true));
    assert!(run(&user, None, &[lost("east")]).steps.is_empty());
}

#[test]
fn a_recorded_job_without_a_copy_gets_one_where_it_is_recorded() {
    let plan = run(
        &UserJob::new().on("east"),
        None,
        &[worker("east", 9), worker("west", 0)],
    );
    assert_eq!(kinds(&plan), ["create on east"]);
}

#[test]
fn a_copy_that_vanished_after_it_ran_is_made_again_with_a_warning() {
    let user = UserJob::new()
        .on("east")
        .status(json!({"active": 1, "startTime": "2026-11-27T10:00:01Z"}));
    let plan = run(&user, None, &[worker("east", 0)]);
    assert_eq!(kinds(&plan), ["event CopyMissing", "create on east"]);
}

#[test]
fn the_copys_status_is_mirrored_and_its_spec_follows_the_job() {
    let user = UserJob::new().on("east");
    let copy = copy_of(
        &user,
        json!({"active": 1, "startTime": "2026-11-27T10:00:01Z"}),
    );
    let plan = run(&user, Some(&copy), &[worker("east", 0)]);
    assert_eq!(kinds(&plan), ["mirror from east"]);

    let suspended = UserJob::new().on("east").spec("suspend", json!(true));
    let plan = run(&suspended, Some(&copy), &[worker("east", 0)]);
    assert_eq!(kinds(&plan), ["patch copy on east", "mirror from east"]);
}

#[test]
fn a_mirror_the_rules_refuse_is_reported_not_written() {
    let user = UserJob::new().on("east");
    let copy = copy_of(
        &user,
        json!({"succeeded": 1, "startTime": "2026-11-27T10:00:01Z",
               "completionTime": "2026-11-27T10:00:09Z",
               "conditions": [{"type": "Complete", "status": "True"}]}),
    );
    let plan = run(&user, Some(&copy), &[worker("east", 0)]);
    assert!(plan.steps.is_empty());
    assert!(plan.refused.is_some());
}

fn complete() -> Value {
    json!({"succeeded": 1, "startTime": "2026-11-27T10:00:01Z",
           "completionTime": "2026-11-27T10:00:09Z",
           "conditions": [{"type": "SuccessCriteriaMet", "status": "True"},
                          {"type": "Complete", "status": "True"}]})
}

#[test]
fn the_copy_goes_once_the_job_shows_how_it_ended() {
    let running = UserJob::new().on("east");
    let copy = copy_of(&running, complete());
    // First the Job shows it...
    assert_eq!(
        kinds(&run(&running, Some(&copy), &[worker("east", 0)])),
        ["mirror from east"]
    );
    // ...then the copy goes.
    let done = UserJob::new().on("east").status(complete());
    assert_eq!(
        kinds(&run(&done, Some(&copy), &[worker("east", 0)])),
        ["delete copy on east: finished"]
    );
    // And nothing is left to do.
    assert!(run(&done, None, &[worker("east", 0)]).steps.is_empty());
}

#[test]
fn a_job_failed_here_takes_its_running_copy_down() {
    let failed = UserJob::new().on("east").status(json!({
        "startTime": "2026-11-27T10:00:01Z",
        "conditions": [{"type": "FailureTarget", "status": "True"},
                       {"type": "Failed", "status": "True", "reason": "WorkerLost"}]}));
    let copy = copy_of(&failed, json!({"active": 1}));
    assert_eq!(
        kinds(&run(&failed, Some(&copy), &[worker("east", 0)])),
        ["delete copy on east: job_failed"]
    );
    // Not while the worker is lost: the fence of its return, or the next sync, does it then.
    assert!(run(&failed, Some(&copy), &[lost("east")]).steps.is_empty());
}

#[test]
fn a_deleted_job_takes_its_copy_with_it() {
    let user = UserJob::new().on("east").deleting();
    let copy = copy_of(&user, json!({"active": 1}));
    assert_eq!(
        kinds(&run(&user, Some(&copy), &[worker("east", 0)])),
        ["delete copy on east: job_deleted"]
    );
}

#[test]
fn a_lost_worker_is_marked_and_its_job_keeps_its_place_for_the_grace() {
    let user = UserJob::new().on("east");
    let copy = copy_of(&user, json!({"active": 1}));
    let plan = run(&user, Some(&copy), &[lost("east"), worker("west", 0)]);
    assert_eq!(
        kinds(&plan),
        [
            format!("mark lost since {NOW}"),
            "event WorkerLost".to_owned()
        ]
    );
    assert_eq!(
        plan.recheck_at,
        Some("2026-11-27T10:10:20Z".parse().expect("a time"))
    );
    assert!(matches!(plan.waiting, Some(Waiting::WorkerLost { .. })));

    // The clock is the one written on the Job, whoever reads it.
    let marked = UserJob::new().on("east").lost_since("2026-11-27T10:09:50Z");
    let plan = run(&marked, None, &[lost("east"), worker("west", 0)]);
    assert!(plan.steps.is_empty());
    assert_eq!(
        plan.recheck_at,
        Some("2026-11-27T10:10:10Z".parse().expect("a time"))
    );
}

/// A replica that started with a policy its worker had already left knows nothing of the copy
/// that may still run there: the Job keeps its place, untouched, however long, and whatever
/// its choice; no mark, no second copy.
#[test]
fn a_job_on_a_worker_not_in_the_policy_is_left_where_it_is() {
    for choice in ["Redispatch", "Wait", "Fail"] {
        let user = UserJob::new()
            .on("gone")
            .lost_since("2026-11-27T10:09:00Z")
            .annotated("jobwarden.io/on-worker-lost", choice);
        let plan = run(&user, None, &[worker("west", 0)]);
        assert!(plan.steps.is_empty(), "{choice}: {:?}", kinds(&plan));
        let waiting = plan.waiting.expect("it waits");
        assert_eq!(
            waiting,
            Waiting::NotInPolicy {
                worker: "gone".to_owned()
            }
        );
        assert_eq!(waiting.reason(), "WorkerLost");
        assert!(
            waiting
                .message()
                .contains("worker gone is not in the policy")
        );
    }
}

#[test]
fn after_the_grace_each_job_follows_its_choice() {
    let past = |choice: Option<&str>| {
        let user = UserJob::new().on("east").lost_since("2026-11-27T10:09:00Z");
        match choice {
            Some(c) => user.annotated("jobwarden.io/on-worker-lost", c),
            None => user,
        }
    };
    let workers = [lost("east"), worker("west", 5)];
    assert_eq!(
        kinds(&run(&past(None), None, &workers)),
        [
            "record west (was east)",
            "create on west",
            "event Redispatched"
        ]
    );
    assert_eq!(
        kinds(&run(&past(Some("Redispatch")), None, &workers)),
        [
            "record west (was east)",
            "create on west",
            "event Redispatched"
        ]
    );
    let waits = run(&past(Some("Wait")), None, &workers);
    assert!(waits.steps.is_empty());
    assert!(matches!(waits.waiting, Some(Waiting::ForWorker { .. })));
    assert_eq!(
        kinds(&run(&past(Some("Fail")), None, &workers)),
        ["fail: WorkerLost", "event WorkerLost"]
    );
    // With nowhere to go, a Redispatch Job waits (and its worker may come back).
    let alone = run(&past(None), None, &[lost("east")]);
    assert!(alone.steps.is_empty());
    assert!(matches!(alone.waiting, Some(Waiting::NoWorker(_))));
}

#[test]
fn a_worker_that_answers_again_keeps_its_jobs() {
    let user = UserJob::new().on("east").lost_since("2026-11-27T10:09:55Z");
    let copy = copy_of(
        &user,
        json!({"active": 1, "startTime": "2026-11-27T10:00:01Z"}),
    );
    assert_eq!(
        kinds(&run(&user, Some(&copy), &[worker("east", 0)])),
        ["clear lost", "event WorkerAnswers", "mirror from east"]
    );
}

#[test]
fn a_worker_not_yet_listed_is_waited_for() {
    let connecting = WorkerState {
        ready: false,
        ..worker("east", 0)
    };
    let plan = run(
        &UserJob::new().on("east"),
        None,
        std::slice::from_ref(&connecting),
    );
    assert!(plan.steps.is_empty());
    assert!(matches!(plan.waiting, Some(Waiting::Connecting { .. })));
    // Nor is a new Job placed there before its copies are listed.
    let plan = run(&UserJob::new(), None, &[connecting, worker("west", 3)]);
    assert_eq!(kinds(&plan), ["record west", "create on west"]);
}

#[test]
fn a_copy_found_without_a_record_is_adopted_not_made_again() {
    let user = UserJob::new();
    let plan = run_seeing(
        &user,
        None,
        &["west"],
        &[],
        &[worker("east", 0), worker("west", 3)],
    );
    assert_eq!(kinds(&plan), ["record west"]);
}

#[test]
fn a_worker_holding_another_job_of_the_name_is_passed_over() {
    let user = UserJob::new();
    let avoid = [("east", Unfit::HoldsAnotherJob)];
    let plan = run_seeing(
        &user,
        None,
        &[],
        &avoid,
        &[worker("east", 0), worker("west", 3)],
    );
    assert_eq!(kinds(&plan), ["record west", "create on west"]);
}

#[test]
fn a_recorded_worker_found_holding_another_job_gives_the_job_up() {
    let user = UserJob::new().on("east");
    let avoid = [("east", Unfit::HoldsAnotherJob)];
    let plan = run_seeing(
        &user,
        None,
        &[],
        &avoid,
        &[worker("east", 0), worker("west", 3)],
    );
    assert_eq!(kinds(&plan), ["record west (was east)", "create on west"]);
}

#[test]
fn the_jobs_own_worker_list_is_honoured() {
    let user = UserJob::new().annotated("jobwarden.io/workers", "east");
    let plan = run(&user, None, &[worker("east", 9), worker("west", 0)]);
    assert_eq!(kinds(&plan), ["record east", "create on east"]);
}

#[test]
fn on_worker_lost_reads_its_three_values() {
    assert_eq!(OnWorkerLost::parse(None), OnWorkerLost::Redispatch);
    assert_eq!(OnWorkerLost::parse(Some("Wait")), OnWorkerLost::Wait);
    assert_eq!(OnWorkerLost::parse(Some(" Fail ")), OnWorkerLost::Fail);
    assert_eq!(
        OnWorkerLost::parse(Some("Redispatch")),
        OnWorkerLost::Redispatch
    );
}

fn short(why: &str) -> RoomFit {
    RoomFit::Short {
        why: why.to_owned(),
        label: "insufficient",
        never: false,
    }
}

#[test]
fn a_job_goes_where_its_pods_fit_though_another_worker_has_fewer_jobs() {
    let no_gpus = WorkerState {
        room: short("0 of 2 pods fit: insufficient nvidia.com/gpu (0 free on 2 nodes)"),
        ..worker("alpha", 0)
    };
    let plan = run(&UserJob::new(), None, &[no_gpus.clone(), worker("beta", 5)]);
    assert_eq!(kinds(&plan), ["record beta", "create on beta"]);
    let full = WorkerState {
        room: short("0 of 2 pods fit: insufficient cpu (1 free on 2 nodes)"),
        ..worker("beta", 5)
    };
    let plan = run(&UserJob::new(), None, &[no_gpus, full.clone()]);
    assert!(plan.steps.is_empty());
    let Some(Waiting::NoRoom { message, .. }) = &plan.waiting else {
        panic!("waits for room: {plan:?}")
    };
    assert_eq!(
        message,
        "no worker has room for the Job now: alpha: 0 of 2 pods fit: insufficient nvidia.com/gpu (0 free on 2 nodes); beta: 0 of 2 pods fit: insufficient cpu (1 free on 2 nodes)"
    );
    assert_eq!(
        plan.waiting.as_ref().map(Waiting::reason),
        Some("NoWorkerFits")
    );
    // A figure that changes is the same reason: no new Event for it.
    let fuller = WorkerState {
        room: short("0 of 2 pods fit: insufficient cpu (0 free on 2 nodes)"),
        ..worker("beta", 5)
    };
    let again = run(&UserJob::new(), None, &[worker_short("alpha"), fuller]);
    let (Some(a), Some(b)) = (&plan.waiting, &again.waiting) else {
        panic!("both wait")
    };
    assert!(a.same_reason(b));
    assert_ne!(a, b);
}

fn worker_short(name: &str) -> WorkerState<'_> {
    WorkerState {
        room: short("0 of 2 pods fit: insufficient nvidia.com/gpu (0 free on 2 nodes)"),
        ..worker(name, 0)
    }
}

#[test]
fn a_job_no_worker_can_hold_waits_until_its_deadline() {
    let never = |name| WorkerState {
        room: RoomFit::Short {
            why: "does not fit on any node today: needs 64 cpu, the largest node has 2".to_owned(),
            label: "never_fits",
            never: true,
        },
        ..worker(name, 0)
    };
    // Created at 10:00 with an hour to run: it waits, for a reason an Event says.
    let job = UserJob::new().spec("activeDeadlineSeconds", json!(3600));
    let plan = run(&job, None, &[never("alpha"), never("beta")]);
    assert!(plan.steps.is_empty(), "{plan:?}");
    assert!(
        plan.waiting
            .as_ref()
            .map(Waiting::message)
            .is_some_and(|m| m.starts_with("the Job does not fit on any node today")),
        "{plan:?}"
    );
    assert_eq!(plan.recheck_at, "2026-11-27T11:00:00Z".parse().ok());
    // With 30 s, long past at 10:10: it fails as upstream's controller fails it.
    let job = UserJob::new().spec("activeDeadlineSeconds", json!(30));
    let plan = run(&job, None, &[never("alpha"), never("beta")]);
    assert_eq!(
        kinds(&plan),
        ["fail: DeadlineExceeded", "event DeadlineExceeded"]
    );
}

fn unschedulable_pods() -> CopyPods {
    CopyPods {
        total: 1,
        bound: 0,
        unschedulable: Some((
            "2026-11-27T10:01:00Z".parse().expect("a time"),
            "0/2 nodes are available: 2 Insufficient cpu.".to_owned(),
        )),
    }
}

#[test]
fn a_copy_that_cannot_be_scheduled_moves_record_first_then_delete_then_create() {
    let user = UserJob::new()
        .on("alpha")
        .annotated("jobwarden.io/unschedulable-seconds", "20")
        .status(json!({"startTime": "2026-11-27T10:00:30Z", "active": 1}));
    let copy = copy_of(
        &user,
        json!({"startTime": "2026-11-27T10:00:30Z", "active": 1}),
    );
    let pods = unschedulable_pods();
    let workers = [worker("alpha", 0), worker("beta", 3)];
    // Before its time: it waits, and says so.
    let plan = run_with_pods(&user, &copy, &pods, &workers, "2026-11-27T10:01:10Z");
    assert!(plan.steps.is_empty(), "{plan:?}");
    assert_eq!(
        plan.waiting.as_ref().map(Waiting::reason),
        Some("Unschedulable")
    );
    assert_eq!(plan.recheck_at, "2026-11-27T10:01:20Z".parse().ok());
    // At its time: it moves.
    let plan = run_with_pods(&user, &copy, &pods, &workers, "2026-11-27T10:01:20Z");
    assert_eq!(
        kinds(&plan),
        [
            "record beta (was alpha, left alpha)",
            "delete copy on alpha: unschedulable",
            "create on beta",
            "event Moved",
        ]
    );
    let Some(Step::Event(moved)) = plan.steps.last() else {
        panic!("an Event")
    };
    assert_eq!(
        moved.message,
        "the Job's copy on worker alpha could not be scheduled for 20s (0/2 nodes are available: 2 Insufficient cpu.); the Job moved to worker beta"
    );
}

#[test]
fn a_job_moves_only_where_it_has_not_been_and_where_it_fits() {
    let user = UserJob::new()
        .on("beta")
        .annotated("jobwarden.io/moved-from", "alpha")
        .status(json!({"active": 1}));
    let copy = copy_of(&user, json!({"active": 1}));
    let pods = unschedulable_pods();
    let late = "2026-11-27T11:00:00Z";
    // alpha was left once: not tried again; gamma has no room: the Job stays, and says why.
    let workers = [worker("alpha", 0), worker("beta", 0), worker_short("gamma")];
    let plan = run_with_pods(&user, &copy, &pods, &workers, late);
    assert!(plan.steps.is_empty(), "{plan:?}");
    let message = plan
        .waiting
        .as_ref()
        .map(Waiting::message)
        .unwrap_or_default();
    assert!(
        message.contains("no other worker can take the Job now")
            && message
                .contains("alpha: the Job left it when its copy could not be scheduled there")
            && message.contains("gamma: 0 of 2 pods fit"),
        "{message}"
    );
    // With room on gamma it goes there, and both left workers are kept.
    let workers = [worker("alpha", 0), worker("beta", 0), worker("gamma", 9)];
    let plan = run_with_pods(&user, &copy, &pods, &workers, late);
    assert_eq!(
        kinds(&plan).first().map(String::as_str),
        Some("record gamma (was beta, left alpha,beta)")
    );
    // After max-moves it stays.
    let capped = UserJob::new()
        .on("beta")
        .annotated("jobwarden.io/moved-from", "alpha")
        .annotated("jobwarden.io/max-moves", "1")
        .status(json!({"active": 1}));
    let plan = run_with_pods(&capped, &copy, &pods, &workers, late);
    assert!(plan.steps.is_empty(), "{plan:?}");
    assert!(
        plan.waiting
            .as_ref()
            .map(Waiting::message)
            .is_some_and(|m| m.contains("has moved 1 times (jobwarden.io/max-moves) and stays")),
        "{plan:?}"
    );
}

#[test]
fn a_copy_partly_running_never_moves() {
    let user = UserJob::new().on("alpha").status(json!({"active": 2}));
    let copy = copy_of(&user, json!({"active": 2}));
    let pods = CopyPods {
        total: 2,
        bound: 1,
        ..unschedulable_pods()
    };
    let plan = run_with_pods(
        &user,
        &copy,
        &pods,
        &[worker("alpha", 0), worker("beta", 0)],
        "2026-11-27T12:00:00Z",
    );
    assert!(plan.steps.is_empty(), "{plan:?}");
    assert_eq!(plan.waiting, None);
}

fn draining(name: &str) -> WorkerState<'_> {
    WorkerState {
        draining: true,
        ..worker(name, 0)
    }
}

#[test]
fn a_draining_worker_takes_no_new_job() {
    let plan = run(
        &UserJob::new(),
        None,
        &[draining("alpha"), worker("beta", 7)],
    );
    assert_eq!(kinds(&plan), ["record beta", "create on beta"]);
    let plan = run(&UserJob::new(), None, &[draining("alpha")]);
    assert!(plan.steps.is_empty());
    assert_eq!(
        plan.waiting.as_ref().map(Waiting::message).as_deref(),
        Some("no worker can take the Job now: alpha: it is draining (the policy's draining: true)")
    );
}

#[test]
fn on_a_draining_worker_a_job_finishes_there_or_moves_at_once() {
    let running = json!({"startTime": "2026-11-27T10:00:30Z", "active": 1});
    let finishing = UserJob::new().on("alpha").status(running.clone());
    let copy = copy_of(&finishing, running.clone());
    let workers = [draining("alpha"), worker("beta", 3)];
    let plan = run(&finishing, Some(&copy), &workers);
    assert!(
        plan.steps.is_empty(),
        "Finish, the default, stays: {plan:?}"
    );
    assert_eq!(plan.waiting, None);
    let moving = UserJob::new()
        .on("alpha")
        .annotated("jobwarden.io/on-worker-drain", "Redispatch")
        .status(running.clone());
    let plan = run(&moving, Some(&copy), &workers);
    assert_eq!(
        kinds(&plan),
        [
            "record beta (was alpha)",
            "delete copy on alpha: drained",
            "create on beta",
            "event Redispatched",
        ]
    );
    // Nowhere else to go: it stays, and says why.
    let plan = run(&moving, Some(&copy), &[draining("alpha")]);
    assert!(plan.steps.is_empty(), "{plan:?}");
    assert_eq!(
        plan.waiting.as_ref().map(Waiting::reason),
        Some("WorkerDraining")
    );
}
