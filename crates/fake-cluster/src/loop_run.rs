//! The reconcile loop run to the end against the in-memory cluster, with a kubelet ending the
//! pods, on tokio's clock (paused in the tests and the scale benchmark, so minutes of Job time
//! pass in milliseconds). The same `run_loop` a cluster runs, fed by the in-memory watches.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::{
    Change, InMemoryCluster, Kubelet, Lags, Outcome, Resource, SeenPod, watch_jobs, watch_pods,
};
use jobwarden_controller::metrics::ControllerMetrics;
use jobwarden_controller::plan::PlanConfig;
use jobwarden_controller::reconcile::{Clock, LoopConfig, Sources, run_loop};
use jobwarden_controller::sync::JobController;
use jobwarden_rules::well_known::TRACKING_FINALIZER;

#[derive(Debug, Clone)]
pub struct LoopRunConfig {
    /// How far each watch trails the writes.
    pub watch_lag: Duration,
    /// How long the pod list takes to arrive after the Job list has (a controller starting on
    /// a real cluster has its few Jobs well before its many pods).
    pub pod_list_lag: Duration,
    /// How often the kubelet looks at its pods.
    pub kubelet_period: Duration,
    pub plan: PlanConfig,
    pub run: LoopConfig,
    /// Virtual time after which the run is declared stuck.
    pub give_up_after: Duration,
}

impl Default for LoopRunConfig {
    fn default() -> Self {
        LoopRunConfig {
            watch_lag: Duration::from_millis(50),
            pod_list_lag: Duration::from_secs(2),
            kubelet_period: Duration::from_millis(100),
            plan: PlanConfig::default(),
            run: LoopConfig::default(),
            give_up_after: Duration::from_secs(3600),
        }
    }
}

#[derive(Debug)]
pub struct LoopRunReport {
    /// Every Job finished and no pod holds the tracking finalizer.
    pub finished: bool,
    /// Virtual time from start to the end.
    pub took: Duration,
    pub metrics: ControllerMetrics,
}

/// The cluster's clock for a run that starts now: `base` plus tokio time elapsed.
pub fn virtual_clock(base: Timestamp) -> Clock {
    let start = tokio::time::Instant::now();
    Arc::new(move || {
        let elapsed = tokio::time::Instant::now().duration_since(start);
        base.checked_add(elapsed).unwrap_or(base)
    })
}

/// Whether the run is over, followed through watches of its own so a check costs the changes
/// since the last one: the Jobs still unfinished, and the pods still holding our finalizer.
struct Progress {
    cluster: Arc<InMemoryCluster>,
    watches: [(Resource, u64); 2],
    unfinished: HashSet<(String, String)>,
    held: HashSet<String>,
}

impl Progress {
    fn new(cluster: &Arc<InMemoryCluster>, jobs: &[(String, String)]) -> Progress {
        let watches = [Resource::Jobs, Resource::Pods].map(|r| (r, cluster.subscribe(r)));
        let mut p = Progress {
            cluster: cluster.clone(),
            watches,
            unfinished: jobs.iter().cloned().collect(),
            held: HashSet::new(),
        };
        let (jobs, pods) = cluster.with(|s| (s.list_jobs_uncounted(), s.list_pods_uncounted()));
        for t in jobs {
            p.job(&serde_json::from_str(&t).unwrap_or(Value::Null));
        }
        for t in pods {
            p.pod(&serde_json::from_str(&t).unwrap_or(Value::Null), false);
        }
        p
    }

    fn job(&mut self, job: &Value) {
        let finished = job["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                (c["type"] == "Complete" || c["type"] == "Failed") && c["status"] == "True"
            })
        });
        if finished {
            let f = |k: &str| job["metadata"][k].as_str().unwrap_or("").to_owned();
            self.unfinished.remove(&(f("namespace"), f("name")));
        }
    }

    fn pod(&mut self, pod: &Value, gone: bool) {
        let uid = pod["metadata"]["uid"].as_str().unwrap_or("").to_owned();
        let holds = pod["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == TRACKING_FINALIZER));
        if holds && !gone {
            self.held.insert(uid);
        } else {
            self.held.remove(&uid);
        }
    }

    fn done(&mut self) -> bool {
        for (resource, id) in self.watches {
            loop {
                let events = self.cluster.next_events(resource, id, 4096);
                if events.is_empty() {
                    break;
                }
                for e in events {
                    let v: Value = serde_json::from_str(&e.object).unwrap_or(Value::Null);
                    match resource {
                        Resource::Jobs => self.job(&v),
                        Resource::Pods => self.pod(&v, e.change == Change::Deleted),
                    }
                }
            }
        }
        self.unfinished.is_empty() && self.held.is_empty()
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        for (resource, id) in self.watches {
            self.cluster.unsubscribe(resource, id);
        }
    }
}

/// One controller process against the in-memory cluster: its reconcile loop with fresh caches
/// (the Job list first, the pod list `pod_list_lag` later), running until stopped or killed.
pub struct RunningLoop {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
    pub metrics: ControllerMetrics,
}

impl RunningLoop {
    pub fn start(cluster: &Arc<InMemoryCluster>, config: &LoopRunConfig, clock: Clock) -> Self {
        let metrics = ControllerMetrics::default();
        // Events as the binary writes them: queued by the syncs, written by the loop's writer.
        let controller = Arc::new(
            JobController::new(cluster.clone(), config.plan.clone(), metrics.clone())
                .with_event_writer(),
        );
        let changes = config.watch_lag;
        let sources = Sources {
            jobs: watch_jobs(
                cluster.clone(),
                Lags {
                    list: Duration::ZERO,
                    changes,
                },
            )
            .boxed(),
            pods: watch_pods(
                cluster.clone(),
                Lags {
                    list: config.pod_list_lag,
                    changes,
                },
            )
            .boxed(),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(run_loop(
            controller,
            sources,
            clock,
            config.run.clone(),
            async move {
                let _ = stopped.await;
            },
            |_| {},
        ));
        RunningLoop {
            stop,
            task,
            metrics,
        }
    }

    /// A graceful stop, as on SIGTERM: the syncs in flight finish.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }

    /// A crash, as on SIGKILL: the loop is dropped wherever it stands, between two API calls.
    pub async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// The cluster's clock and a kubelet ending the pods, stepped together whether or not a
/// controller runs.
pub struct World {
    cluster: Arc<InMemoryCluster>,
    clock: Clock,
    kubelet: Kubelet,
    period: Duration,
}

impl World {
    pub fn new(cluster: &Arc<InMemoryCluster>, kubelet_period: Duration) -> World {
        World {
            cluster: cluster.clone(),
            clock: virtual_clock(cluster.with(|s| s.now)),
            kubelet: Kubelet::new(cluster),
            period: kubelet_period,
        }
    }

    pub fn clock(&self) -> Clock {
        self.clock.clone()
    }

    /// Steps the kubelet until `done` holds (checked after each step) or `limit` of virtual
    /// time has passed; returns whether `done` held.
    pub async fn run_until(
        &mut self,
        limit: Duration,
        outcome: &mut impl FnMut(&SeenPod) -> Outcome,
        mut done: impl FnMut(&InMemoryCluster) -> bool,
    ) -> bool {
        let started = tokio::time::Instant::now();
        loop {
            let now = (self.clock)();
            self.cluster.write(|s| s.now = now);
            self.kubelet.step(&mut *outcome);
            if done(&self.cluster) {
                return true;
            }
            if started.elapsed() >= limit {
                return false;
            }
            tokio::time::sleep(self.period).await;
        }
    }
}

/// Runs the loop and a kubelet until the Jobs `jobs` (namespace, name) are finished, or
/// `give_up_after` of virtual time has passed.
pub async fn run_until_finished(
    cluster: Arc<InMemoryCluster>,
    jobs: &[(String, String)],
    config: LoopRunConfig,
    mut outcome: impl FnMut(&SeenPod) -> Outcome,
) -> LoopRunReport {
    let started = tokio::time::Instant::now();
    let mut world = World::new(&cluster, config.kubelet_period);
    let running = RunningLoop::start(&cluster, &config, world.clock());
    let metrics = running.metrics.clone();
    let mut progress = Progress::new(&cluster, jobs);
    let finished = world
        .run_until(config.give_up_after, &mut outcome, |_| progress.done())
        .await;
    running.stop().await;
    LoopRunReport {
        finished,
        took: started.elapsed(),
        metrics,
    }
}
