//! A kubelet for the in-memory cluster: it starts pending pods, ends running ones as it is told
//! (exit codes per container, pod conditions such as `DisruptionTarget`, a deletion), and
//! finishes pods that were deleted. Its writes are the node's, not the controller's, so they
//! are not counted as controller requests. Time is the cluster's clock; nothing sleeps.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::{Change, InMemoryCluster, Resource, str_at};
use jobwarden_controller::plan::PodRef;
use jobwarden_rules::well_known::COMPLETION_INDEX_KEY;

/// A pod as the kubelet sees it, for deciding its outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// 1 for the first pod this kubelet saw, and so on, in creation order.
    pub ordinal: u64,
    /// The completion index, for Indexed Jobs.
    pub index: Option<i32>,
    /// How long it has been running.
    pub running_for: Duration,
}

/// What becomes of a running pod at this step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It keeps running.
    Run,
    /// It ends: each container exits with its code in `codes` (by container name, init
    /// containers included), the others with `default`; the pod gets `conditions`.
    End {
        default: i32,
        codes: Vec<(String, i32)>,
        conditions: Vec<(String, String)>,
    },
    /// Someone deletes it (`kubectl delete pod`); the kubelet then kills it.
    Delete,
    /// It never starts: the kubelet binds it and reports its first container waiting with
    /// `reason` (`ImagePullBackOff`, ...), and it stays `Pending`. Asked of pending pods only;
    /// any other answer for a pending pod starts it.
    NeverStart { reason: String },
}

impl Outcome {
    pub fn succeed() -> Outcome {
        Outcome::exit(0)
    }

    /// Every container exits with `code`.
    pub fn exit(code: i32) -> Outcome {
        Outcome::End {
            default: code,
            codes: Vec::new(),
            conditions: Vec::new(),
        }
    }
}

/// A pod the kubelet still has work with: not ended, or deleted and not yet killed.
#[derive(Debug, Clone)]
struct LivePod {
    namespace: String,
    name: String,
    uid: String,
    ordinal: u64,
    index: Option<i32>,
    running: bool,
    started: Option<Timestamp>,
    /// Deleted with a grace period the kubelet has not honoured yet.
    to_kill: bool,
    /// Pending with a container the kubelet reported waiting.
    held: bool,
}

/// The kubelet follows the cluster's pods through a watch of its own, so each step costs the
/// pods that changed and those it still runs, not every pod there is.
pub struct Kubelet {
    cluster: Arc<InMemoryCluster>,
    watch: u64,
    /// By uid: zero-padded uids sort in creation order.
    live: BTreeMap<String, LivePod>,
    ordinals: HashMap<String, u64>,
    seen: u64,
}

impl Kubelet {
    pub fn new(cluster: &Arc<InMemoryCluster>) -> Kubelet {
        let watch = cluster.subscribe(Resource::Pods);
        let listed = cluster.with(|s| s.pods());
        let mut kubelet = Kubelet {
            cluster: cluster.clone(),
            watch,
            live: BTreeMap::new(),
            ordinals: HashMap::new(),
            seen: 0,
        };
        for pod in &listed {
            kubelet.track(pod, false);
        }
        kubelet
    }

    fn track(&mut self, pod: &Value, gone: bool) {
        let uid = str_at(pod, &["metadata", "uid"]).unwrap_or("").to_owned();
        let phase = str_at(pod, &["status", "phase"]).unwrap_or("Pending");
        let deleting = pod["metadata"].get("deletionTimestamp").is_some();
        let to_kill = deleting && pod["metadata"]["deletionGracePeriodSeconds"].as_i64() != Some(0);
        let terminal = matches!(phase, "Succeeded" | "Failed");
        if gone || (deleting && !to_kill) || (terminal && !to_kill) {
            self.live.remove(&uid);
            return;
        }
        let ordinal = *self.ordinals.entry(uid.clone()).or_insert_with(|| {
            self.seen += 1;
            self.seen
        });
        self.live.insert(
            uid.clone(),
            LivePod {
                namespace: str_at(pod, &["metadata", "namespace"])
                    .unwrap_or("")
                    .to_owned(),
                name: str_at(pod, &["metadata", "name"]).unwrap_or("").to_owned(),
                uid,
                ordinal,
                index: str_at(pod, &["metadata", "annotations", COMPLETION_INDEX_KEY])
                    .and_then(|i| i.parse().ok()),
                running: phase == "Running",
                held: phase == "Pending"
                    && pod["status"]["containerStatuses"]
                        .as_array()
                        .is_some_and(|cs| cs.iter().any(|c| c["state"].get("waiting").is_some())),
                started: str_at(pod, &["status", "startTime"]).and_then(|t| t.parse().ok()),
                to_kill,
            },
        );
    }

    /// One pass: deleted pods are killed (ending `Failed`, exit code 143, unless already
    /// ended), pending pods start unless `decide` says they never do, and each running pod ends
    /// as `decide` says. Returns what `decide` chose for each running pod, and for each pod it
    /// held pending the first time, in creation order.
    pub fn step(&mut self, mut decide: impl FnMut(&SeenPod) -> Outcome) -> Vec<(SeenPod, Outcome)> {
        loop {
            let events = self.cluster.next_events(Resource::Pods, self.watch, 4096);
            if events.is_empty() {
                break;
            }
            for e in events {
                let pod: Value = serde_json::from_str(&e.object).unwrap_or(Value::Null);
                self.track(&pod, e.change == Change::Deleted);
            }
        }
        let cluster = self.cluster.clone();
        let now = cluster.with(|s| s.now);
        let now_text = now.to_string();
        let mut decided = Vec::new();
        for pod in self.live.values() {
            let (ns, name) = (pod.namespace.as_str(), pod.name.as_str());
            if pod.to_kill {
                let _ = cluster.write(|s| s.finish_deleted_pod(ns, name));
                continue;
            }
            let seen = SeenPod {
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
                uid: pod.uid.clone(),
                ordinal: pod.ordinal,
                index: pod.index,
                running_for: pod
                    .started
                    .map(|t| now.duration_since(t).unsigned_abs())
                    .unwrap_or_default(),
            };
            if !pod.running {
                match decide(&seen) {
                    Outcome::NeverStart { reason } => {
                        if !pod.held {
                            let _ = cluster.write(|s| {
                                s.kubelet_update(ns, name, |p| hold(p, &reason, &now_text))
                            });
                            decided.push((seen, Outcome::NeverStart { reason }));
                        }
                    }
                    _ => {
                        let _ =
                            cluster.write(|s| s.kubelet_update(ns, name, |p| start(p, &now_text)));
                    }
                }
            } else {
                let outcome = decide(&seen);
                apply(&cluster, &seen, &outcome, &now_text);
                if outcome != Outcome::Run {
                    decided.push((seen, outcome));
                }
            }
        }
        decided
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.cluster.unsubscribe(Resource::Pods, self.watch);
    }
}

fn container_names(pod: &Value, list: &str) -> Vec<String> {
    pod["spec"][list]
        .as_array()
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Bound to the node, its containers waiting: the first with `reason`, the others still
/// `ContainerCreating`, as a kubelet that cannot pull the first image reports them.
fn hold(pod: &mut Value, reason: &str, now: &str) {
    pod["spec"]["nodeName"] = json!("node-1");
    pod["status"]["conditions"] = json!([
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
        {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "lastTransitionTime": now},
    ]);
    let waiting: Vec<Value> = container_names(pod, "containers")
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let why = if i == 0 { reason } else { "ContainerCreating" };
            json!({"name": n, "image": "", "imageID": "", "ready": false, "restartCount": 0,
                   "state": {"waiting": {"reason": why}}})
        })
        .collect();
    pod["status"]["containerStatuses"] = json!(waiting);
}

fn start(pod: &mut Value, now: &str) {
    pod["spec"]["nodeName"] = json!("node-1");
    pod["status"]["phase"] = json!("Running");
    pod["status"]["startTime"] = json!(now);
    pod["status"]["conditions"] =
        json!([{"type": "Ready", "status": "True", "lastTransitionTime": now}]);
    let running: Vec<Value> = container_names(pod, "containers")
        .iter()
        .map(|n| {
            json!({"name": n, "image": "", "imageID": "", "ready": true, "restartCount": 0,
                   "state": {"running": {"startedAt": now}}})
        })
        .collect();
    pod["status"]["containerStatuses"] = json!(running);
}

fn terminated(name: &str, code: i32, now: &str) -> Value {
    json!({"name": name, "image": "", "imageID": "", "ready": false, "restartCount": 0,
           "state": {"terminated": {"exitCode": code, "finishedAt": now}}})
}

fn apply(cluster: &InMemoryCluster, seen: &SeenPod, outcome: &Outcome, now: &str) {
    match outcome {
        // A running pod has started: it goes on.
        Outcome::Run | Outcome::NeverStart { .. } => {}
        Outcome::Delete => {
            let r = PodRef {
                name: seen.name.clone(),
                uid: seen.uid.clone(),
            };
            let _ = cluster.write(|s| s.delete_pod(&seen.namespace, &r));
        }
        Outcome::End {
            default,
            codes,
            conditions,
        } => {
            let code_of = |name: &str| codes.iter().find(|(n, _)| n == name).map(|(_, c)| *c);
            let _ = cluster.write(|s| {
                s.kubelet_update(&seen.namespace, &seen.name, |p| {
                    let containers = container_names(p, "containers");
                    let inits = container_names(p, "initContainers");
                    let failed_init = inits
                        .iter()
                        .find_map(|n| code_of(n).filter(|c| *c != 0).map(|c| (n.clone(), c)));
                    let phase = if let Some((init, code)) = failed_init {
                        // An init container failed: the regular ones never ran.
                        p["status"]["initContainerStatuses"] =
                            json!([terminated(&init, code, now)]);
                        let waiting: Vec<Value> = containers
                            .iter()
                            .map(|n| {
                                json!({"name": n, "image": "", "imageID": "", "ready": false,
                                            "restartCount": 0, "state": {"waiting": {}}})
                            })
                            .collect();
                        p["status"]["containerStatuses"] = json!(waiting);
                        "Failed"
                    } else {
                        let ends: Vec<(String, i32)> = containers
                            .iter()
                            .map(|n| (n.clone(), code_of(n).unwrap_or(*default)))
                            .collect();
                        let statuses: Vec<Value> =
                            ends.iter().map(|(n, c)| terminated(n, *c, now)).collect();
                        p["status"]["containerStatuses"] = json!(statuses);
                        if ends.iter().all(|(_, c)| *c == 0) {
                            "Succeeded"
                        } else {
                            "Failed"
                        }
                    };
                    p["status"]["phase"] = json!(phase);
                    let mut conds = vec![
                        json!({"type": "Ready", "status": "False", "lastTransitionTime": now}),
                    ];
                    conds.extend(conditions.iter().map(
                        |(t, st)| json!({"type": t, "status": st, "lastTransitionTime": now}),
                    ));
                    p["status"]["conditions"] = json!(conds);
                })
            });
        }
    }
}
