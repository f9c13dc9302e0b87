//! The dispatcher's metrics, under `jobwarden_dispatch_`. Every series a dashboard panel or an
//! alert reads is served from the start: the workers are known from the policy, and so are
//! the label values (states, reasons), so each starts at 0.

mod teams;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
pub use teams::TeamMetrics;

use jobwarden_runtime::client::BudgetMetrics;
use jobwarden_runtime::events::metrics::EventMetrics;

use crate::plan::DeleteReason;
use crate::worker::credentials::RefusalReason;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WorkerLabels {
    pub worker: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusedLabels {
    pub worker: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DeletedLabels {
    pub worker: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabels {
    pub worker: String,
    pub resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ViewLabels {
    pub worker: String,
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: String,
}

/// A worker's states, as `jobwarden_dispatch_workers{state}` counts them.
pub const WORKER_STATES: [&str; 4] = ["answering", "connecting", "lost", "refused"];
/// Why a Job waits, as `jobwarden_dispatch_jobs_waiting{reason}` counts them.
pub const WAITING_REASONS: [&str; 6] = [
    "NoWorker",
    "NoWorkerFits",
    "Unschedulable",
    "WorkerDraining",
    "WorkerLost",
    "Connecting",
];
/// The states of a worker's view of its nodes and pods, as
/// `jobwarden_dispatch_worker_view{state}` shows them.
pub const VIEW_STATES: [&str; 4] = ["fresh", "listing", "counting", "unbounded"];
/// The resources every worker's free room is shown for from the start (others, such as
/// `nvidia.com/gpu`, once a node has them).
pub const ROOM_RESOURCES: [&str; 3] = ["cpu", "memory", "pods"];
/// Why a Job was sent to another worker than its first.
pub const REDISPATCH_REASONS: [&str; 6] = [
    "worker_lost",
    "unschedulable",
    "worker_draining",
    "holds_another_job",
    "no_namespace",
    "copy_refused",
];
/// Why a copy was deleted: the plan's reasons, and the fence's.
pub const DELETE_REASONS: [&str; 7] = [
    DeleteReason::Finished.label(),
    DeleteReason::JobFailed.label(),
    DeleteReason::JobDeleted.label(),
    DeleteReason::Moved.label(),
    DeleteReason::Drained.label(),
    "moved",
    "orphan",
];
const SYNC_RESULTS: [&str; 3] = ["success", "conflict", "error"];
const MIRROR_RESULTS: [&str; 5] = ["written", "held", "conflict", "refused", "error"];

/// Handles to every metric; cheap to clone.
#[derive(Clone, Debug)]
pub struct DispatchMetrics {
    pub workers: Family<StateLabels, Gauge>,
    pub worker_up: Family<WorkerLabels, Gauge>,
    pub worker_last_answer_seconds: Family<WorkerLabels, Gauge<f64, AtomicU64>>,
    pub worker_refused: Family<RefusedLabels, Gauge>,
    pub jobs: Family<WorkerLabels, Gauge>,
    pub jobs_waiting: Family<ReasonLabels, Gauge>,
    pub oldest_waiting: Family<ReasonLabels, Gauge<f64, AtomicU64>>,
    pub worker_free: Family<ResourceLabels, Gauge<f64, AtomicU64>>,
    pub worker_allocatable: Family<ResourceLabels, Gauge<f64, AtomicU64>>,
    pub worker_nodes: Family<WorkerLabels, Gauge>,
    pub worker_view: Family<ViewLabels, Gauge>,
    pub worker_draining: Family<WorkerLabels, Gauge>,
    /// The resources each worker's room series were shown for, so that they go with it.
    room_resources: Arc<Mutex<HashMap<String, BTreeSet<String>>>>,
    pub syncs: Family<ResultLabels, Counter>,
    pub sync_duration: Histogram,
    pub mirrors: Family<ResultLabels, Counter>,
    pub mirror_lag: Histogram,
    /// The mirror's status write alone: its wait for the budget and the API server's answer.
    pub mirror_write: Histogram,
    pub copies_created: Family<WorkerLabels, Counter>,
    pub copies_deleted: Family<DeletedLabels, Counter>,
    pub redispatches: Family<ReasonLabels, Counter>,
    pub events: EventMetrics,
    pub teams: TeamMetrics,
    /// The management cluster's request budget: how long writes waited, how many wait.
    pub management_budget: BudgetMetrics,
}

impl Default for DispatchMetrics {
    /// Metrics registered nowhere: for tests.
    fn default() -> Self {
        DispatchMetrics {
            workers: Family::default(),
            worker_up: Family::default(),
            worker_last_answer_seconds: Family::default(),
            worker_refused: Family::default(),
            jobs: Family::default(),
            jobs_waiting: Family::default(),
            oldest_waiting: Family::default(),
            worker_free: Family::default(),
            worker_allocatable: Family::default(),
            worker_nodes: Family::default(),
            worker_view: Family::default(),
            worker_draining: Family::default(),
            room_resources: Arc::default(),
            syncs: Family::default(),
            sync_duration: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            mirrors: Family::default(),
            // 10 ms to ~40 s: the bar is 2 s at the 99th percentile.
            mirror_lag: Histogram::new(exponential_buckets(0.01, 2.0, 13)),
            mirror_write: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            copies_created: Family::default(),
            copies_deleted: Family::default(),
            redispatches: Family::default(),
            events: EventMetrics::default(),
            teams: TeamMetrics::default(),
            management_budget: BudgetMetrics::default(),
        }
    }
}

fn worker(name: &str) -> WorkerLabels {
    WorkerLabels {
        worker: name.to_owned(),
    }
}

impl DispatchMetrics {
    pub fn deleted(&self, worker: &str, reason: &str) {
        self.copies_deleted
            .get_or_create(&DeletedLabels {
                worker: worker.to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
    }

    pub fn created(&self, name: &str) {
        self.copies_created.get_or_create(&worker(name)).inc();
    }

    pub fn redispatched(&self, reason: &str) {
        self.redispatches
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    pub fn mirrored(&self, result: &str) {
        self.mirrors
            .get_or_create(&ResultLabels {
                result: result.to_owned(),
            })
            .inc();
    }

    pub fn synced(&self, result: &str) {
        self.syncs
            .get_or_create(&ResultLabels {
                result: result.to_owned(),
            })
            .inc();
    }

    /// A worker's reach: up or not, and the refusal of its credentials (all reasons 0 but
    /// `refused`'s).
    pub fn worker_reach(&self, name: &str, up: bool, refused: Option<RefusalReason>) {
        self.worker_up
            .get_or_create(&worker(name))
            .set(i64::from(up));
        for reason in RefusalReason::ALL {
            self.worker_refused
                .get_or_create(&RefusedLabels {
                    worker: name.to_owned(),
                    reason: reason.label().to_owned(),
                })
                .set(i64::from(refused == Some(reason)));
        }
    }

    pub fn last_answer(&self, name: &str, seconds: f64) {
        self.worker_last_answer_seconds
            .get_or_create(&worker(name))
            .set(seconds);
    }

    /// Each state's count of workers.
    pub fn worker_states(&self, counts: &[(&str, i64)]) {
        for state in WORKER_STATES {
            let n = counts
                .iter()
                .find(|(s, _)| *s == state)
                .map_or(0, |(_, n)| *n);
            self.workers
                .get_or_create(&StateLabels {
                    state: state.to_owned(),
                })
                .set(n);
        }
    }

    pub fn set_jobs(&self, name: &str, n: usize) {
        self.jobs
            .get_or_create(&worker(name))
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Seconds the oldest Job waiting for `reason` has waited (0: none waits).
    pub fn set_oldest_waiting(&self, reason: &str, seconds: f64) {
        self.oldest_waiting
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .set(seconds);
    }

    /// A worker's view: its state (one-hot), schedulable nodes, and free and allocatable room
    /// per resource (cpu in cores, memory in bytes, the rest in units).
    pub fn worker_room(&self, name: &str, state: &str, nodes: u32, room: &[(String, f64, f64)]) {
        for s in VIEW_STATES {
            self.worker_view
                .get_or_create(&ViewLabels {
                    worker: name.to_owned(),
                    state: s.to_owned(),
                })
                .set(i64::from(s == state));
        }
        self.worker_nodes
            .get_or_create(&worker(name))
            .set(i64::from(nodes));
        for resource in ROOM_RESOURCES {
            if !room.iter().any(|(r, _, _)| r == resource) {
                self.set_room(name, resource, 0.0, 0.0);
            }
        }
        for (resource, free, allocatable) in room {
            self.set_room(name, resource, *free, *allocatable);
        }
    }

    fn set_room(&self, name: &str, resource: &str, free: f64, allocatable: f64) {
        if let Ok(mut shown) = self.room_resources.lock() {
            shown
                .entry(name.to_owned())
                .or_default()
                .insert(resource.to_owned());
        }
        let labels = ResourceLabels {
            worker: name.to_owned(),
            resource: resource.to_owned(),
        };
        self.worker_free.get_or_create(&labels).set(free);
        self.worker_allocatable
            .get_or_create(&labels)
            .set(allocatable);
    }

    pub fn set_waiting(&self, reason: &str, n: usize) {
        self.jobs_waiting
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
}

/// Registers the dispatcher's metrics under `jobwarden_dispatch_`, every series known in
/// advance for `workers` created at 0.
pub fn register_metrics(registry: &mut Registry, workers: &[&str]) -> DispatchMetrics {
    let mut m = DispatchMetrics::default();
    let r = registry.sub_registry_with_prefix("jobwarden_dispatch");
    m.events = EventMetrics::register(r);
    m.teams = TeamMetrics::register(r);
    m.management_budget = BudgetMetrics::register(
        r.sub_registry_with_prefix("management"),
        "the management cluster",
    );
    register_worker_series(r, &m);
    register_job_series(r, &m);
    m.create_known_series(workers);
    m
}

/// Each worker's reach, credentials, view and room.
fn register_worker_series(r: &mut Registry, m: &DispatchMetrics) {
    r.register(
        "workers",
        "Worker clusters by state: answering, connecting (credentials being read or copies listed), lost (no answer, or every request unauthorized), refused (credentials jobwarden will not use)",
        m.workers.clone(),
    );
    r.register(
        "worker_up",
        "1 while the worker's API server answers the dispatcher",
        m.worker_up.clone(),
    );
    r.register(
        "worker_last_answer_seconds",
        "Seconds since the worker's API server last answered the dispatcher",
        m.worker_last_answer_seconds.clone(),
    );
    r.register(
        "worker_refused",
        "1 while the worker's kubeconfig is refused, by reason (an exec plugin, a file, basic auth, insecure-skip-tls-verify, ...); the worker is not used",
        m.worker_refused.clone(),
    );
    r.register(
        "worker_free",
        "Free room on a worker's schedulable nodes, by resource (cpu in cores, memory in bytes, pods and extended resources in units): allocatable less the requests of its unfinished pods",
        m.worker_free.clone(),
    );
    r.register(
        "worker_allocatable",
        "Allocatable room of a worker's schedulable nodes, by resource (cpu in cores, memory in bytes, pods and extended resources in units)",
        m.worker_allocatable.clone(),
    );
    r.register(
        "worker_nodes",
        "A worker's schedulable nodes, as its view shows them",
        m.worker_nodes.clone(),
    );
    r.register(
        "worker_draining",
        "1 while the policy drains the worker (draining: true): it takes no new Jobs",
        m.worker_draining.clone(),
    );
    r.register(
        "worker_view",
        "1 for the state of a worker's view of its nodes and pods: fresh (listed and watched), listing, counting (its role cannot list nodes and pods cluster-wide: Jobs placed by count), unbounded (capacity: Unbounded: placed by count)",
        m.worker_view.clone(),
    );
}

/// The dispatched Jobs: placed, waiting, synced, mirrored, and their copies.
fn register_job_series(r: &mut Registry, m: &DispatchMetrics) {
    r.register(
        "jobs",
        "Dispatched Jobs not finished, by the worker they are placed on (\"\" for none yet)",
        m.jobs.clone(),
    );
    r.register(
        "jobs_waiting",
        "Dispatched Jobs waiting, by reason: no worker can take them (NoWorker), no worker has room for their pods (NoWorkerFits), their copy's pods cannot be scheduled on its worker (Unschedulable), their worker is lost (WorkerLost), their worker is being connected to (Connecting)",
        m.jobs_waiting.clone(),
    );
    r.register(
        "oldest_waiting_seconds",
        "Seconds the oldest dispatched Job waiting for each reason has waited (0: none waits)",
        m.oldest_waiting.clone(),
    );
    r.register(
        "syncs",
        "Syncs of dispatched Jobs, by result",
        m.syncs.clone(),
    );
    r.register(
        "sync_duration_seconds",
        "Time to sync one dispatched Job: decide and carry out",
        m.sync_duration.clone(),
    );
    r.register(
        "mirrors",
        "Status writes mirroring a copy onto its Job, by result (refused: the Job status rules refuse it, not sent)",
        m.mirrors.clone(),
    );
    r.register(
        "mirror_lag_seconds",
        "From a copy's change reaching the dispatcher to the Job's status showing it",
        m.mirror_lag.clone(),
    );
    r.register(
        "mirror_write_seconds",
        "A mirror's status write to the management cluster, from asking the budget to the answer",
        m.mirror_write.clone(),
    );
    r.register(
        "copies_created",
        "Copies created on workers",
        m.copies_created.clone(),
    );
    r.register(
        "copies_deleted",
        "Copies deleted on workers, by reason: finished, job_failed, job_deleted, unschedulable (its pods could not be scheduled: the Job moved), moved (fenced: the Job left a lost worker), orphan (its Job is gone)",
        m.copies_deleted.clone(),
    );
    r.register(
        "redispatches",
        "Jobs sent to another worker than their first, by reason",
        m.redispatches.clone(),
    );
}

impl DispatchMetrics {
    /// Every series whose labels are known in advance, at 0, so that a dashboard and an
    /// alert see them before anything happens: each waiting and redispatch reason, each sync
    /// and mirror result, the Jobs not placed, and `workers`' own.
    fn create_known_series(&self, workers: &[&str]) {
        let m = self;
        m.worker_states(&[]);
        for reason in WAITING_REASONS {
            m.set_waiting(reason, 0);
            m.set_oldest_waiting(reason, 0.0);
        }
        for reason in REDISPATCH_REASONS {
            let _ = m.redispatches.get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            });
        }
        for result in SYNC_RESULTS {
            let _ = m.syncs.get_or_create(&ResultLabels {
                result: result.to_owned(),
            });
        }
        for result in MIRROR_RESULTS {
            let _ = m.mirrors.get_or_create(&ResultLabels {
                result: result.to_owned(),
            });
        }
        m.set_jobs("", 0);
        for name in workers {
            m.add_worker(name, false);
        }
    }
}

impl DispatchMetrics {
    /// A worker's series, each at 0 (a worker new to the policy, or every one at start).
    pub fn add_worker(&self, name: &str, draining: bool) {
        self.worker_reach(name, false, None);
        self.last_answer(name, 0.0);
        self.set_jobs(name, 0);
        self.worker_room(name, "listing", 0, &[]);
        self.set_draining(name, draining);
        let _ = self.copies_created.get_or_create(&worker(name));
        for reason in DELETE_REASONS {
            let _ = self.copies_deleted.get_or_create(&DeletedLabels {
                worker: name.to_owned(),
                reason: reason.to_owned(),
            });
        }
    }

    pub fn set_draining(&self, name: &str, draining: bool) {
        self.worker_draining
            .get_or_create(&worker(name))
            .set(i64::from(draining));
    }

    /// A worker gone from the policy: its series go with it (a dashboard would otherwise
    /// show it lost, and an alert page for it, for as long as the process runs).
    pub fn remove_worker(&self, name: &str) {
        let w = worker(name);
        self.worker_up.remove(&w);
        self.worker_last_answer_seconds.remove(&w);
        self.jobs.remove(&w);
        self.worker_nodes.remove(&w);
        self.worker_draining.remove(&w);
        self.copies_created.remove(&w);
        for reason in RefusalReason::ALL {
            self.worker_refused.remove(&RefusedLabels {
                worker: name.to_owned(),
                reason: reason.label().to_owned(),
            });
        }
        for reason in DELETE_REASONS {
            self.copies_deleted.remove(&DeletedLabels {
                worker: name.to_owned(),
                reason: reason.to_owned(),
            });
        }
        for state in VIEW_STATES {
            self.worker_view.remove(&ViewLabels {
                worker: name.to_owned(),
                state: state.to_owned(),
            });
        }
        // Every resource it showed, extended ones too.
        let shown = self
            .room_resources
            .lock()
            .map(|mut r| r.remove(name).unwrap_or_default())
            .unwrap_or_default();
        for resource in shown {
            let labels = ResourceLabels {
                worker: name.to_owned(),
                resource,
            };
            self.worker_free.remove(&labels);
            self.worker_allocatable.remove(&labels);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn every_series_is_served_from_the_start() {
        let mut registry = Registry::default();
        let _m = register_metrics(&mut registry, &["east", "west"]);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        for line in [
            "jobwarden_dispatch_workers{state=\"lost\"} 0",
            "jobwarden_dispatch_worker_up{worker=\"east\"} 0",
            "jobwarden_dispatch_worker_refused{worker=\"west\",reason=\"exec_plugin\"} 0",
            "jobwarden_dispatch_jobs{worker=\"east\"} 0",
            "jobwarden_dispatch_jobs_waiting{reason=\"NoWorker\"} 0",
            "jobwarden_dispatch_jobs_waiting{reason=\"NoWorkerFits\"} 0",
            "jobwarden_dispatch_oldest_waiting_seconds{reason=\"NoWorkerFits\"} 0.0",
            "jobwarden_dispatch_worker_free{worker=\"east\",resource=\"cpu\"} 0.0",
            "jobwarden_dispatch_worker_allocatable{worker=\"west\",resource=\"memory\"} 0.0",
            "jobwarden_dispatch_worker_nodes{worker=\"east\"} 0",
            "jobwarden_dispatch_worker_view{worker=\"east\",state=\"listing\"} 1",
            "jobwarden_dispatch_worker_view{worker=\"east\",state=\"fresh\"} 0",
            "jobwarden_dispatch_redispatches_total{reason=\"unschedulable\"} 0",
            "jobwarden_dispatch_copies_deleted_total{worker=\"east\",reason=\"moved\"} 0",
            "jobwarden_dispatch_redispatches_total{reason=\"worker_lost\"} 0",
            "jobwarden_dispatch_mirrors_total{result=\"refused\"} 0",
            "jobwarden_dispatch_mirror_lag_seconds_count 0",
            "jobwarden_dispatch_mirror_write_seconds_count 0",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }

    #[test]
    fn a_worker_removed_from_the_policy_takes_its_series_with_it() {
        let mut registry = Registry::default();
        let m = register_metrics(&mut registry, &["east", "west"]);
        m.worker_room(
            "east",
            "fresh",
            2,
            &[("nvidia.com/gpu".to_owned(), 1.0, 2.0)],
        );
        m.created("east");
        m.remove_worker("east");
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        assert!(!text.contains("worker=\"east\""), "{text}");
        assert!(text.contains("jobwarden_dispatch_worker_up{worker=\"west\"} 0"));
        m.add_worker("gamma", true);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        assert!(
            text.contains("jobwarden_dispatch_worker_draining{worker=\"gamma\"} 1"),
            "{text}"
        );
    }
}
