//! One sync's writes, in the order that keeps the status true whenever the controller stops:
//! a status that breaks the rules is never written, pods exist before the status counts them,
//! and a refused creation leaves `active` counting only the pods made.

use super::*;

#[test]
fn a_status_that_breaks_the_rules_is_refused_and_not_written() {
    use futures::executor::block_on;
    use jobwarden_controller::plan::Plan;
    use jobwarden_controller::plan::conditions::new_condition;

    let cluster = InMemoryCluster::new(at(0));
    let stored = cluster
        .write(|s| s.create_job(JobBuilder::non_indexed(1, 1).manifest()))
        .expect("created");
    let mut status = JobObject::parse(&stored).expect("decodes").status;
    // Complete without SuccessCriteriaMet (and without completionTime): a planning bug.
    status.conditions = Some(vec![new_condition(
        "Complete",
        "True",
        "CompletionsReached",
        "",
        at(5),
    )]);
    let bad = Plan {
        status: Some(status),
        ..Plan::default()
    };
    let applied = block_on(apply(&cluster, &stored, &bad));
    assert!(
        matches!(applied.error, Some(ApplyError::InvalidStatus(_))),
        "{:?}",
        applied.error
    );
    assert!(
        cluster.with(|s| s.status_writes.is_empty()),
        "nothing was written"
    );
}

/// The first sync of a new Job, planned from what the cluster holds.
fn first_plan(cluster: &InMemoryCluster, job: Value) -> (Value, jobwarden_controller::plan::Plan) {
    let stored = cluster.write(|s| s.create_job(job)).expect("created");
    let parsed = JobObject::parse(&stored).expect("decodes");
    let planned = jobwarden_controller::plan::plan(
        &parsed,
        &[],
        at(1),
        &PlanConfig::default(),
        &jobwarden_controller::plan::InFlight::default(),
    );
    (stored, planned)
}

#[test]
fn pods_are_created_before_the_status_counts_them() {
    use futures::executor::block_on;

    let cluster = InMemoryCluster::new(at(0));
    let (stored, planned) = first_plan(&cluster, JobBuilder::non_indexed(2, 2).manifest());
    assert_eq!(planned.create.len(), 2);
    assert_eq!(planned.status.as_ref().and_then(|s| s.active), Some(2));
    // The controller dies after two calls: the two creations, not the status write.
    cluster.write(|s| s.budget = Some(2));
    let applied = block_on(apply(&cluster, &stored, &planned));
    assert_eq!(applied.created.len(), 2);
    assert!(!applied.status_written);
    assert_eq!(cluster.with(|s| s.pod_count()), 2, "the pods exist");
    assert!(
        cluster.with(|s| s.status_writes.is_empty()),
        "no status counts pods before they exist"
    );
}

#[test]
fn a_refused_creation_leaves_active_counting_only_the_pods_made() {
    use futures::executor::block_on;

    let cluster = InMemoryCluster::new(at(0));
    let (stored, planned) = first_plan(&cluster, JobBuilder::non_indexed(3, 3).manifest());
    assert_eq!(planned.create.len(), 3);
    cluster.write(|s| s.reject_pod_creates = Some("exceeded quota".to_owned()));
    let applied = block_on(apply(&cluster, &stored, &planned));
    assert!(applied.created.is_empty());
    assert!(
        matches!(&applied.create_error, Some(e) if e.to_string().contains("exceeded quota")),
        "{:?}",
        applied.create_error
    );
    // The status still goes out (startTime), as upstream's sync goes on after manageJob's
    // error, with `active` at 0: no pod was made.
    assert!(applied.status_written, "{:?}", applied.error);
    let (ns, name) = meta_key(&stored);
    let job = cluster.with(|s| s.job(&ns, &name)).expect("the Job");
    // `active` is an omitempty int32: stored as 0, read back as absent.
    assert_eq!(num(&job["status"]["active"]), 0, "{}", job["status"]);
    assert!(job["status"]["startTime"].is_string());
}
