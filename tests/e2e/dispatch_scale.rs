//! The dispatcher under a burst, on real clusters (issue 44): a fleet of this binary's own (a
//! management kube-apiserver and two workers, each with kube-controller-manager at its
//! default client rate), jobwarden run as deploy/ installs it, two replicas, configured only
//! by its policy file, and a burst of one-pod Jobs created at once on the management cluster
//! (200; the 1,000 with `JOBWARDEN_E2E_SCALE=full`, as bench/dispatch_scale_real.sh
//! measures them); a kubelet played by the test ends each pod on the workers a second after
//! it appears.
//!
//! Asserted on what the clusters and the metrics say, never on time: each Job had exactly one
//! copy (the test watches the copies on both workers from before the burst), every user's Job
//! ended `Complete` with its copy's final status (the copy's last status seen before it was
//! deleted equals the user's Job's on every field the mirror copies, times included), each
//! worker took at least 40 % of the Jobs, the leader never lost its Lease (its holder and
//! transitions, the replicas' loss counters), and neither jobwarden on the management cluster
//! nor its identity on a worker was refused anything.
//!
//! About a minute on the project's two-core machine (four at full scale). Skipped with one line without the
//! control-plane binaries, and with `JOBWARDEN_E2E_KUBECONFIG` (a fleet needs clusters of its
//! own).

use std::time::{Duration, Instant};

use jobwarden_envtest::job_versions::terminal_condition;
use jobwarden_envtest::mirror_lag::mirrored;
use jobwarden_envtest::{DispatcherSettings, Fleet, WORKER_DISPATCHER_USER};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const DISPATCHER: &str = "jobwarden.io/dispatcher";
const WORKERS: [&str; 2] = ["east", "west"];
/// Far beyond what the burst needs (about three minutes): reaching it is a failure.
const TIMEOUT: Duration = Duration::from_secs(1800);

/// The Lease's holder and transitions.
async fn lease(mgmt: &Client, ns: &str) -> (String, i32) {
    let lease = Api::<Lease>::namespaced(mgmt.clone(), ns)
        .get("jobwarden-job-controller")
        .await
        .expect("the Lease");
    let spec = lease.spec.unwrap_or_default();
    (
        spec.holder_identity.unwrap_or_default(),
        spec.lease_transitions.unwrap_or(0),
    )
}

/// Waits until `done` holds of what the watches have seen, saying `what` if it never does.
async fn wait_until(what: &str, logs: impl Fn() -> String, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < TIMEOUT,
            "{what}: not within {TIMEOUT:?}; jobwarden's logs:\n{}",
            logs()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The status fields the mirror copies, and the times.
fn final_status(status: &Value) -> Value {
    json!({
        "mirrored": mirrored(status),
        "startTime": status.get("startTime"),
        "completionTime": status.get("completionTime"),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_jobs_runs_once_each_over_two_workers() {
    let burst = crate::support::scale(1000, 200);
    if std::env::var_os("JOBWARDEN_E2E_KUBECONFIG").is_some() {
        eprintln!("skipped: a dispatcher's fleet needs control planes of its own");
        return;
    }
    let fleet = match tokio::task::block_in_place(|| Fleet::start(WORKERS.len())) {
        Ok(fleet) => fleet,
        Err(e) if e.starts_with("skipped:") => {
            eprintln!("{e}");
            return;
        }
        Err(e) => panic!("the fleet did not start: {e}"),
    };
    let mut settings = DispatcherSettings::new(&WORKERS);
    settings.replicas = 2;
    let run = fleet
        .run_dispatcher(
            std::path::Path::new(env!("CARGO_BIN_EXE_jobwarden")),
            &settings,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mgmt = fleet.management.client().await;
    let leased = lease(&mgmt, &run.dispatcher.identity.namespace).await;

    let ns = fleet.dispatched_namespace("burst").await;
    let jobs: Api<Job> = Api::namespaced(mgmt.clone(), &ns.name);
    for i in 0..burst {
        let job = jobwarden_envtest::load_job(&format!("job-{i}"), 1, "Indexed", Some(DISPATCHER));
        jobs.create(
            &PostParams::default(),
            &serde_json::from_value(job).expect("a Job"),
        )
        .await
        .expect("the Job is created");
    }
    let logs = || run.logs();
    wait_until("every user's Job ended", logs, || ns.ended() == burst).await;
    // Once a Job shows how it ended, its copy goes.
    wait_until("every copy deleted", logs, || ns.copies_gone() >= burst).await;

    let record = ns.stop();
    assert_eq!(record.users.len(), burst);
    for (uid, user) in &record.users {
        let found = record.copies_of(uid);
        let [(worker, copy)] = found.as_slice() else {
            panic!(
                "{}: {} copies, on workers {:?}",
                user.name,
                found.len(),
                found.iter().map(|(w, _)| WORKERS[*w]).collect::<Vec<_>>()
            );
        };
        let ended = user.last_status();
        assert_eq!(terminal_condition(ended), Some("Complete"), "{}", user.name);
        assert_eq!(ended.get("succeeded"), Some(&json!(1)), "{}", user.name);
        assert_eq!(
            final_status(ended),
            final_status(copy.last_status()),
            "{}: the user's Job's final status is not its copy's on {}",
            user.name,
            WORKERS[*worker]
        );
    }
    let strays = record.copies_of_no_job();
    assert!(strays.is_empty(), "copies of no user's Job: {strays:?}");
    for (worker, took) in WORKERS.iter().zip(record.jobs_per_worker()) {
        assert!(
            took * 5 >= burst * 2,
            "worker {worker} took {took} of {burst} Jobs"
        );
    }

    assert_eq!(
        lease(&mgmt, &run.dispatcher.identity.namespace).await,
        leased,
        "the Lease changed hands"
    );
    for (i, scrape) in run.scrapes().iter().enumerate() {
        let scrape = scrape
            .as_ref()
            .unwrap_or_else(|| panic!("replica {i} serves no metrics:\n{}", run.logs()));
        assert_eq!(
            scrape.sum("jobwarden_controller_leader_losses_total"),
            0.0,
            "replica {i} lost its Lease"
        );
    }
    run.dispatcher.identity.assert_nothing_refused();
    for (name, plane) in WORKERS.iter().zip(&fleet.workers) {
        let refused = plane
            .refusals_of(WORKER_DISPATCHER_USER)
            .unwrap_or_default();
        assert!(
            refused.is_empty(),
            "worker {name} refused the dispatcher: {refused:#?}"
        );
    }
}
