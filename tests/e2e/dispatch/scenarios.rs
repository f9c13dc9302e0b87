//! A dispatched Job's life while every cluster answers: run to its end on a worker, its status
//! mirrored whole; failed by a pod failure policy rule; suspended and resumed with its progress
//! kept; deleted with its copy; given a TTL; placed past a Job of its name that is not its copy;
//! narrowed to chosen workers; never sent to a worker whose credentials are refused; and made
//! once however jobwarden is killed.

use jobwarden_envtest::kubelet::{EXIT_CODE_ANNOTATION, RUNS_SECONDS_ANNOTATION};
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt as _;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::dispatch::env::*;

/// The copy of `user` on `worker`, by its origin UID; `None` when there is none.
async fn copy_on(test: &Test, worker: &str, user: &Job) -> Option<Job> {
    test.copy_on(worker, &user.name_any(), &uid(user)).await
}

/// Pod annotations for the test kubelet.
fn pods_that(runs_seconds: u64, exit_code: i32) -> Value {
    json!({"metadata": {"annotations": {
        RUNS_SECONDS_ANNOTATION: runs_seconds.to_string(),
        EXIT_CODE_ANNOTATION: exit_code.to_string(),
    }}, "spec": {
        "schedulerName": "jobwarden-e2e-nobody",
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox"}],
    }})
}

/// The status fields a user's Job must show as its copy showed them.
fn mirrored_fields(job: &Job) -> Value {
    let s = serde_json::to_value(job.status.clone().unwrap_or_default()).unwrap_or_default();
    let mut conditions: Vec<(String, String, String)> = s["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["type"].as_str().unwrap_or_default().to_owned(),
                c["status"].as_str().unwrap_or_default().to_owned(),
                c["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    conditions.sort();
    json!({
        "succeeded": s["succeeded"], "failed": s["failed"], "active": s["active"],
        "completedIndexes": s["completedIndexes"], "failedIndexes": s["failedIndexes"],
        "completionTime": s["completionTime"], "conditions": conditions,
    })
}

/// Runs a Job to its end and holds that the user's Job ends with its copy's final status, and
/// that the copy then goes with its pods.
async fn runs_to_its_end(test: &Test, name: &str, spec: Value, ended: &str) -> Job {
    let user = test.create(name, spec, json!({})).await;
    let placed = test
        .wait_job(name, "a worker recorded", |j| recorded(j).is_some())
        .await;
    let worker = recorded(&placed).expect("recorded");
    // The copy's final status, caught before the dispatcher deletes it (if the user's Job
    // shows its end first, the copy may be gone by the time it is looked at).
    let mut last_copy = None;
    let started = std::time::Instant::now();
    loop {
        match copy_on(test, &worker, &user).await {
            Some(c) if condition(&c, ended).is_some() => {
                last_copy = Some(c);
                break;
            }
            Some(_) => {}
            None if test
                .jobs()
                .get(name)
                .await
                .is_ok_and(|j| condition(&j, ended).is_some()) =>
            {
                break;
            }
            None => {}
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{name}: the copy never ended {ended}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let done = test
        .wait_job(name, ended, |j| condition(j, ended).is_some())
        .await;
    if let Some(copy) = &last_copy {
        assert_eq!(
            mirrored_fields(&done),
            mirrored_fields(copy),
            "the user's Job ends with its copy's status"
        );
        let start = |j: &Job| j.status.as_ref().and_then(|s| s.start_time.clone());
        assert!(start(&done).is_some(), "{done:#?}");
    }
    test.wait_for("the copy and its pods to go", || async {
        copy_on(test, &worker, &user).await.is_none()
            && test
                .worker_pods(&worker)
                .list(&Default::default())
                .await
                .is_ok_and(|l| {
                    !l.items.iter().any(|p| {
                        p.labels().get("batch.kubernetes.io/job-name") == Some(&name.to_owned())
                    })
                })
    })
    .await;
    // One Event: where it went. Its end is in its status; a finished Job's copy always goes
    // then, unsaid (one write less per Job on the management cluster).
    let events = test.events(name).await;
    assert!(
        events.iter().any(|e| e.starts_with("Dispatched")),
        "Dispatched among {events:#?}"
    );
    assert!(
        !events.iter().any(|e| e.starts_with("CopyDeleted")),
        "no CopyDeleted among {events:#?}"
    );
    // The management cluster's own Job controller left it alone: no pod of it there.
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(test.mgmt.clone(), &test.ns);
    assert!(
        pods.list(&Default::default())
            .await
            .is_ok_and(|l| l.items.is_empty())
    );
    done
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexed_and_non_indexed_jobs_run_to_complete_on_a_worker() {
    let Some(test) = Test::new("dispatch-complete").await else {
        return;
    };
    let done = runs_to_its_end(
        &test,
        "plain",
        json!({"completions": 3, "parallelism": 2}),
        "Complete",
    )
    .await;
    assert_eq!(done.status.as_ref().and_then(|s| s.succeeded), Some(3));
    let done = runs_to_its_end(
        &test,
        "indexed",
        json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed"}),
        "Complete",
    )
    .await;
    assert_eq!(
        done.status
            .as_ref()
            .and_then(|s| s.completed_indexes.clone()),
        Some("0-2".to_owned())
    );
    let seen = test.finish().await;
    for (_, history) in seen {
        assert_eq!(history.copies.len(), 1, "one copy each: {history:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_failure_policy_rule_fails_the_job_with_its_reason() {
    let Some(test) = Test::new("dispatch-pfp").await else {
        return;
    };
    let done = runs_to_its_end(
        &test,
        "fails",
        json!({
            "backoffLimit": 6,
            "podReplacementPolicy": "Failed",
            "podFailurePolicy": {"rules": [
                {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]},
            "template": pods_that(1, 42),
        }),
        "Failed",
    )
    .await;
    assert_eq!(
        condition(&done, "Failed").as_deref(),
        Some("PodFailurePolicy")
    );
    assert_eq!(
        condition(&done, "FailureTarget").as_deref(),
        Some("PodFailurePolicy")
    );
    test.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_and_resume_keep_the_copys_progress() {
    let Some(test) = Test::new("dispatch-suspend").await else {
        return;
    };
    let user = test
        .create(
            "steps",
            json!({"completions": 4, "parallelism": 1, "completionMode": "Indexed",
                   "template": pods_that(2, 0)}),
            json!({}),
        )
        .await;
    let running = test
        .wait_job("steps", "one index done", |j| {
            j.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0) >= 1
        })
        .await;
    let worker = recorded(&running).expect("recorded");
    let copy_before = copy_on(&test, &worker, &user).await.expect("its copy");
    let suspend = |on: bool| json!({"spec": {"suspend": on}});
    test.jobs()
        .patch(
            "steps",
            &PatchParams::default(),
            &Patch::Merge(&suspend(true)),
        )
        .await
        .expect("suspended");
    let suspended = test
        .wait_job("steps", "Suspended mirrored", |j| {
            condition(j, "Suspended").is_some()
        })
        .await;
    let kept = suspended
        .status
        .as_ref()
        .and_then(|s| s.succeeded)
        .unwrap_or(0);
    assert!(
        kept >= 1,
        "the progress is kept while suspended: {suspended:#?}"
    );
    let copy = copy_on(&test, &worker, &user).await.expect("the same copy");
    assert_eq!(uid(&copy), uid(&copy_before), "the copy was not made again");
    assert_eq!(copy.spec.as_ref().and_then(|s| s.suspend), Some(true));
    test.jobs()
        .patch(
            "steps",
            &PatchParams::default(),
            &Patch::Merge(&suspend(false)),
        )
        .await
        .expect("resumed");
    let done = test
        .wait_job("steps", "Complete", |j| condition(j, "Complete").is_some())
        .await;
    assert_eq!(done.status.as_ref().and_then(|s| s.succeeded), Some(4));
    let seen = test.finish().await;
    assert_eq!(seen.get(&uid(&user)).map(|h| h.copies.len()), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_job_removes_its_copy_and_pods() {
    let Some(test) = Test::new("dispatch-delete").await else {
        return;
    };
    let user = test
        .create(
            "long",
            json!({"completions": 2, "parallelism": 2, "template": pods_that(3600, 0)}),
            json!({}),
        )
        .await;
    let running = test
        .wait_job("long", "two pods active", |j| {
            j.status.as_ref().and_then(|s| s.active) == Some(2)
        })
        .await;
    let worker = recorded(&running).expect("recorded");
    test.jobs()
        .delete("long", &DeleteParams::background())
        .await
        .expect("deleted");
    test.wait_for("the copy and its pods to go", || async {
        copy_on(&test, &worker, &user).await.is_none() && test.pods_gone_on(&worker).await
    })
    .await;
    test.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_on_the_users_job_never_runs_it_again() {
    let Some(test) = Test::new("dispatch-ttl").await else {
        return;
    };
    let user = test
        .create("brief", json!({"ttlSecondsAfterFinished": 0}), json!({}))
        .await;
    let placed = test
        .wait_job("brief", "placed", |j| recorded(j).is_some())
        .await;
    let worker = recorded(&placed).expect("recorded");
    test.wait_for("the copy", || async {
        copy_on(&test, &worker, &user).await.is_some()
    })
    .await;
    let copy = copy_on(&test, &worker, &user).await.expect("the copy");
    assert_eq!(
        copy.spec
            .as_ref()
            .and_then(|s| s.ttl_seconds_after_finished),
        None,
        "the copy carries no TTL: the worker never deletes it before its status is mirrored"
    );
    // The management cluster's TTL controller deletes the user's Job once it is finished:
    // which it is only once the copy's final status is written on it.
    test.wait_for("the user's Job deleted by its TTL", || async {
        test.jobs()
            .get_opt("brief")
            .await
            .is_ok_and(|j| j.is_none())
    })
    .await;
    test.wait_for("its copy to go", || async {
        copy_on(&test, &worker, &user).await.is_none()
    })
    .await;
    let events = test.events("brief").await;
    assert!(
        events
            .iter()
            .filter(|e| e.starts_with("Dispatched"))
            .count()
            == 1,
        "dispatched once: {events:#?}"
    );
    let seen = test.finish().await;
    assert_eq!(
        seen.get(&uid(&user)).map(|h| h.copies.len()),
        Some(1),
        "one copy, never a second run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jobs_own_worker_list_is_honoured() {
    let Some(test) = Test::new("dispatch-named").await else {
        return;
    };
    for worker in WORKERS {
        let name = format!("on-{worker}");
        let user = test
            .create(&name, json!({}), json!({"jobwarden.io/workers": worker}))
            .await;
        let done = test
            .wait_job(&name, "Complete", |j| condition(j, "Complete").is_some())
            .await;
        assert_eq!(recorded(&done).as_deref(), Some(worker));
        let history = test.census.of(&uid(&user));
        assert_eq!(
            history.workers.iter().collect::<Vec<_>>(),
            [worker],
            "copies only there: {history:#?}"
        );
    }
    test.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeconfig_with_an_exec_plugin_is_refused_and_its_worker_never_used() {
    let Some(test) = Test::new("dispatch-plugin").await else {
        return;
    };
    test.wait_for("the refusal counted", || async {
        test.world
            .sample(&format!(
                "jobwarden_dispatch_worker_refused{{worker=\"{PLUGIN_WORKER}\",reason=\"exec_plugin\"}}"
            ))
            .await
            == Some(1.0)
    })
    .await;
    test.create(
        "wants-plugin",
        json!({}),
        json!({"jobwarden.io/workers": PLUGIN_WORKER}),
    )
    .await;
    test.wait_for("a Warning that no worker can take it", || async {
        test.events("wants-plugin")
            .await
            .iter()
            .any(|e| e.starts_with("NoWorker") && e.contains("credentials are refused"))
    })
    .await;
    let job = test.jobs().get("wants-plugin").await.expect("the Job");
    assert_eq!(recorded(&job), None, "never placed there");
    assert!(
        !std::path::Path::new("/tmp/jobwarden-exec-plugin-ran").exists(),
        "the plugin never ran"
    );
    test.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_same_named_job_on_a_worker_is_left_untouched_and_the_copy_goes_elsewhere() {
    let Some(test) = Test::alone("dispatch-namesake").await else {
        return;
    };
    // Alone: the Job must find east (the tie between equal loads goes by name) to be turned
    // away, so no other test's Jobs may weigh on either worker.
    test.wait_for("equal loads on both workers", || async {
        let east = test
            .world
            .sample("jobwarden_dispatch_jobs{worker=\"east\"}")
            .await;
        let west = test
            .world
            .sample("jobwarden_dispatch_jobs{worker=\"west\"}")
            .await;
        east.is_some() && east == west
    })
    .await;
    let theirs: Job = serde_json::from_value(json!({
        "metadata": {"name": "namesake", "labels": {"team": "theirs"}},
        "spec": {"suspend": true, "template": pods_that(1, 0)},
    }))
    .expect("a Job");
    let theirs = test
        .worker_jobs("east")
        .create(&PostParams::default(), &theirs)
        .await
        .expect("their Job on east");
    let user = test.create("namesake", json!({}), json!({})).await;
    let done = test
        .wait_job("namesake", "Complete", |j| {
            condition(j, "Complete").is_some()
        })
        .await;
    assert_eq!(recorded(&done).as_deref(), Some("west"));
    let events = test.events("namesake").await;
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("WorkerHoldsAnotherJob")),
        "{events:#?}"
    );
    let now = test
        .worker_jobs("east")
        .get("namesake")
        .await
        .expect("their Job is still there");
    assert_eq!(uid(&now), uid(&theirs));
    assert_eq!(now.labels(), theirs.labels(), "never touched");
    assert_eq!(now.spec, theirs.spec);
    let managers: Vec<&str> = now
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.as_deref())
        .collect();
    assert!(
        !managers.contains(&jobwarden_dispatcher::api::FIELD_MANAGER),
        "never written by the dispatcher: {managers:?}"
    );
    assert_eq!(
        test.census
            .of(&uid(&user))
            .workers
            .iter()
            .collect::<Vec<_>>(),
        ["west"]
    );
    test.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_killed_right_after_a_job_is_created_makes_exactly_one_copy() {
    let Some(test) = Test::alone("dispatch-killed").await else {
        return;
    };
    // The leader killed once as soon as the Job is created, once as soon as its record is
    // written (the copy being made, or not yet); the standby takes over.
    for (name, at_record) in [("killed-at-create", false), ("killed-at-record", true)] {
        let user = test
            .create(name, json!({"completions": 2, "parallelism": 2}), json!({}))
            .await;
        if at_record {
            test.wait_job(name, "recorded", |j| recorded(j).is_some())
                .await;
        }
        test.world.kill_leader(&test.mgmt).await;
        test.wait_job(name, "Complete", |j| condition(j, "Complete").is_some())
            .await;
        let history = test.census.of(&uid(&user));
        assert_eq!(history.copies.len(), 1, "exactly one copy: {history:#?}");
    }
    test.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_worker_runs_the_job_here_without_a_copy() {
    let Some(test) = Test::local().await else {
        return;
    };
    let user = test
        .create(
            "at-home",
            json!({"completions": 2, "parallelism": 2}),
            json!({"jobwarden.io/workers": LOCAL_WORKER}),
        )
        .await;
    let done = test
        .wait_job("at-home", "Complete", |j| {
            condition(j, "Complete").is_some()
        })
        .await;
    assert_eq!(recorded(&done).as_deref(), Some(LOCAL_WORKER));
    assert_eq!(done.status.as_ref().and_then(|s| s.succeeded), Some(2));
    // Run here, by jobwarden's Job controller: its pods are here, carrying its name.
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(test.mgmt.clone(), &test.ns);
    let made: Vec<_> = pods
        .list(&Default::default())
        .await
        .expect("the pods")
        .items
        .into_iter()
        .filter(|p| p.labels().get("batch.kubernetes.io/controller-uid") == Some(&uid(&user)))
        .collect();
    assert_eq!(made.len(), 2, "{made:#?}");
    assert!(
        made.iter()
            .all(|p| p.annotations().get("jobwarden.io/created-by")
                == Some(&"jobwarden.io/job-controller".to_owned()))
    );
    let seen = test.finish().await;
    assert!(
        !seen.contains_key(&uid(&user)),
        "no copy anywhere: {seen:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_no_worker_can_take_fails_when_its_deadline_passes_before_it_ran() {
    let Some(test) = Test::new("dispatch-deadline").await else {
        return;
    };
    test.create(
        "too-late",
        json!({"activeDeadlineSeconds": 5}),
        json!({"jobwarden.io/workers": PLUGIN_WORKER}),
    )
    .await;
    let failed = test
        .wait_job("too-late", "Failed", |j| condition(j, "Failed").is_some())
        .await;
    assert_eq!(
        condition(&failed, "Failed").as_deref(),
        Some("DeadlineExceeded")
    );
    assert_eq!(recorded(&failed), None, "never placed");
    assert!(
        failed
            .status
            .as_ref()
            .and_then(|s| s.start_time.clone())
            .is_some(),
        "a finished Job has a startTime"
    );
    test.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workers_secret_changed_is_taken_up_without_a_restart() {
    let Some(test) = Test::alone("dispatch-secret").await else {
        return;
    };
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(test.mgmt.clone(), &test.world.dispatcher.identity.namespace);
    let name = "jobwarden-worker-east";
    let original = secrets
        .get(name)
        .await
        .expect("east's Secret")
        .data
        .and_then(|d| d.get("kubeconfig").cloned())
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .expect("east's kubeconfig");
    let set = |kubeconfig: String| {
        let secrets = secrets.clone();
        async move {
            let patch = json!({"stringData": {"kubeconfig": kubeconfig}});
            secrets
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("the Secret is changed");
        }
    };
    set(plugin_kubeconfig()).await;
    test.wait_for("east refused", || async {
        test.world
            .sample("jobwarden_dispatch_worker_refused{worker=\"east\",reason=\"exec_plugin\"}")
            .await
            == Some(1.0)
    })
    .await;
    test.create(
        "waits-for-east",
        json!({}),
        json!({"jobwarden.io/workers": "east"}),
    )
    .await;
    test.wait_for("a Warning that east's credentials are refused", || async {
        test.events("waits-for-east")
            .await
            .iter()
            .any(|e| e.starts_with("NoWorker") && e.contains("east: its credentials are refused"))
    })
    .await;
    set(original).await;
    let done = test
        .wait_job("waits-for-east", "Complete", |j| {
            condition(j, "Complete").is_some()
        })
        .await;
    assert_eq!(recorded(&done).as_deref(), Some("east"));
    assert_eq!(
        test.world
            .sample("jobwarden_dispatch_worker_refused{worker=\"east\",reason=\"exec_plugin\"}")
            .await,
        Some(0.0)
    );
    test.finish().await;
}
