//! A replica restarted with pods that finished while no controller ran, and a hand-over between
//! two replicas, the new one's pod list held back: no index runs twice.

use super::*;

/// Syncs the Job from `replica`'s caches, feeding them everything, until a pass writes nothing.
fn settle(replica: &mut Replica, ns: &str, name: &str, now: k8s_openapi::jiff::Timestamp) {
    for _ in 0..50 {
        replica.catch_up(0, 0);
        match replica.sync(ns, name, now) {
            Some(Ok(r))
                if r.status_written
                    || r.created > 0
                    || r.deleted > 0
                    || r.finalizers_removed > 0 => {}
            _ => return,
        }
    }
}

#[test]
fn a_restart_with_pods_that_finished_while_no_controller_ran_runs_no_index_twice() {
    restart_mid_run(true);
}

#[test]
fn a_hand_over_between_two_replicas_runs_no_index_twice() {
    restart_mid_run(false);
}

/// The controller stops once its first pods exist; with `pods_end_unwatched` they start and
/// succeed before the next replica starts (a crash and a restart), else it starts at once (a
/// hand-over). The next replica has its Jobs before its pods.
fn restart_mid_run(pods_end_unwatched: bool) {
    let cluster = Arc::new(InMemoryCluster::new(at(0)));
    let created = cluster
        .write(|s| s.create_job(JobBuilder::indexed(6, 3).manifest()))
        .expect("the Job is valid");
    let (ns, name) = meta_key(&created);
    let config = PlanConfig::default();
    let mut kubelet = Kubelet::new(&cluster);
    let mut replica = Replica::start(cluster.clone(), config.clone());
    settle(&mut replica, &ns, &name, at(1));
    assert_eq!(
        cluster.with(|s| s.pod_count()),
        3,
        "the first three indexes run"
    );

    drop(replica);
    if pods_end_unwatched {
        for t in [2, 3] {
            cluster.write(|s| s.now = at(t));
            kubelet.step(|_| PodOutcome::succeed());
        }
    }
    let creates = |c: &InMemoryCluster| {
        c.with(|s| {
            s.requests
                .get(&jobwarden_fake_cluster::Request {
                    verb: "create",
                    resource: "pods",
                })
                .copied()
                .unwrap_or(0)
        })
    };
    assert_eq!(creates(&cluster), 3);

    // The new replica has the Job before its pods: it plans nothing until they are in.
    let writes = cluster.with(|s| s.status_writes.len());
    let mut replica = Replica::start_before_pod_list(cluster.clone(), config);
    let report = replica
        .sync(&ns, &name, at(4))
        .expect("the Job is cached")
        .expect("no error");
    assert_eq!(report.skipped, Some("pod cache not synced yet"));
    assert_eq!(creates(&cluster), 3, "no pod made from an empty cache");
    assert_eq!(cluster.with(|s| s.status_writes.len()), writes);

    replica.list_pods();
    for t in 4..40 {
        cluster.write(|s| s.now = at(t));
        settle(&mut replica, &ns, &name, at(t));
        kubelet.step(|_| PodOutcome::succeed());
    }
    let job = cluster.with(|s| s.job(&ns, &name)).expect("the Job exists");
    assert!(cond_true(&job, "Complete"), "{job}");
    assert_eq!(job["status"]["completedIndexes"], "0-5");
    assert_eq!(num(&job["status"]["succeeded"]), 6);
    assert_eq!(
        creates(&cluster),
        6,
        "one pod per index, as an undisturbed run"
    );
    let mut indexes: Vec<String> = pod_ends(&cluster)
        .into_iter()
        .filter(|p| p.phase == "Succeeded")
        .filter_map(|p| p.index)
        .collect();
    indexes.sort();
    assert_eq!(
        indexes,
        ["0", "1", "2", "3", "4", "5"],
        "no index succeeded twice"
    );
}
