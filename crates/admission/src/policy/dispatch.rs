//! The policy file's `dispatch` section: the worker clusters jobwarden's dispatcher sends the
//! Jobs delegated to it (`spec.managedBy: jobwarden.io/dispatcher`). Data only, read by the
//! webhook (the dispatcher's name is a known controller; `delegate.dispatchNamespaces`), the
//! dispatcher (where to send) and `doctor` (what to check). How a worker's credentials are
//! read and judged is the dispatcher's business.

use jobwarden_rules::names;
use jobwarden_rules::well_known::DISPATCHER_NAME;
use serde::Deserialize;

use super::NamespaceMatch;

/// The default of [`Dispatch::worker_lost_seconds`]: five minutes, a third of MultiKueue's
/// `workerLostTimeout`: a worker that has not answered for that long is down, not slow.
pub const DEFAULT_WORKER_LOST_SECONDS: u64 = 300;

/// The default of [`Dispatch::unschedulable_seconds`]: five minutes, about what Karmada's
/// descheduler waits before it moves an unschedulable replica; long enough for a cluster
/// autoscaler to add a node, short enough that a Job does not sit where it cannot run.
pub const DEFAULT_UNSCHEDULABLE_SECONDS: u64 = 300;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Dispatch {
    /// The `spec.managedBy` value of the Jobs the dispatcher runs.
    pub controller_name: String,
    /// The value of the `jobwarden.io/origin` label on this cluster's copies, so that several
    /// management clusters can share a worker. Empty: the UID of this cluster's `kube-system`
    /// namespace, which no other cluster has.
    pub origin: String,
    pub workers: Vec<Worker>,
    /// How long a worker may not answer before the Jobs placed on it follow their
    /// `jobwarden.io/on-worker-lost` choice.
    pub worker_lost_seconds: u64,
    /// How long a copy's pods may all stay unschedulable (`PodScheduled=False`, reason
    /// `Unschedulable`), none ever bound, before the Job moves to another worker; a Job's
    /// `jobwarden.io/unschedulable-seconds` overrides it.
    pub unschedulable_seconds: u64,
    /// The teams that share the workers, by weight (`shares.rs`). Empty: one team.
    pub shares: Vec<super::Share>,
}

impl Default for Dispatch {
    fn default() -> Self {
        Dispatch {
            controller_name: DISPATCHER_NAME.to_owned(),
            origin: String::new(),
            workers: Vec::new(),
            worker_lost_seconds: DEFAULT_WORKER_LOST_SECONDS,
            unschedulable_seconds: DEFAULT_UNSCHEDULABLE_SECONDS,
            shares: Vec::new(),
        }
    }
}

/// One worker cluster, or this cluster itself (`local`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Worker {
    /// A DNS label: the value of `jobwarden.io/worker` on the Jobs placed there.
    pub name: String,
    /// A Secret in jobwarden's namespace whose key `kubeconfig` holds the worker's kubeconfig.
    pub kubeconfig_secret: Option<String>,
    /// A kubeconfig file in jobwarden's container (a mounted Secret, say); re-read when it
    /// changes.
    pub kubeconfig_file: Option<String>,
    /// This cluster: jobwarden's own Job controller runs the Jobs placed here, in place.
    pub local: bool,
    /// Only these namespaces' Jobs go here. Empty: every namespace's.
    pub namespaces: NamespaceMatch,
    /// How its room is judged when a Job is placed.
    pub capacity: Capacity,
    /// It takes no new Jobs; those placed there stay to their end, or move at once when they
    /// say `jobwarden.io/on-worker-drain: Redispatch`. A worker is drained before it is
    /// removed from the policy.
    pub draining: bool,
}

/// How a worker's room is judged.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
pub enum Capacity {
    /// By its Nodes: a Job goes there only if its pods fit now, node by node.
    #[default]
    Nodes,
    /// It grows on demand (a cluster autoscaler, virtual nodes): its Nodes say nothing of
    /// what it can take, so Jobs are placed there by count, and only the move rule applies.
    Unbounded,
}

/// Where a worker's kubeconfig comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerSource<'a> {
    Secret(&'a str),
    File(&'a str),
    Local,
}

impl Worker {
    /// Where its credentials come from; `None` unless exactly one source is named (a problem
    /// [`Dispatch::problems`] reports).
    pub fn source(&self) -> Option<WorkerSource<'_>> {
        match (
            self.kubeconfig_secret.as_deref(),
            self.kubeconfig_file.as_deref(),
            self.local,
        ) {
            (Some(secret), None, false) => Some(WorkerSource::Secret(secret)),
            (None, Some(file), false) => Some(WorkerSource::File(file)),
            (None, None, true) => Some(WorkerSource::Local),
            _ => None,
        }
    }
}

impl Dispatch {
    /// Whether any worker is configured: without one the dispatcher does not run.
    pub fn is_enabled(&self) -> bool {
        !self.workers.is_empty()
    }

    pub fn worker(&self, name: &str) -> Option<&Worker> {
        self.workers.iter().find(|w| w.name == name)
    }

    /// The local worker's name, if one is configured.
    pub fn local_worker(&self) -> Option<&str> {
        self.workers
            .iter()
            .find(|w| w.local)
            .map(|w| w.name.as_str())
    }

    /// What serde cannot see; each problem begins with its path in the file.
    pub fn problems(&self, job_controller_name: &str) -> Vec<String> {
        let mut problems = self.controller_name_problems(job_controller_name);
        if !self.origin.is_empty() {
            let errs = names::label_value(&self.origin);
            if !errs.is_empty() {
                problems.push(format!(
                    "dispatch.origin: {:?} is not a label value: {}",
                    self.origin,
                    errs.join("; ")
                ));
            }
        }
        if self.worker_lost_seconds == 0 {
            problems.push("dispatch.workerLostSeconds must be at least 1".to_owned());
        }
        if self.unschedulable_seconds == 0 {
            problems.push("dispatch.unschedulableSeconds must be at least 1".to_owned());
        }
        let mut seen: Vec<&str> = Vec::new();
        let mut locals = 0;
        for (i, worker) in self.workers.iter().enumerate() {
            let at = format!("dispatch.workers[{i}]");
            let errs = names::dns1123_label(&worker.name);
            if !errs.is_empty() {
                problems.push(format!("{at}.name: {:?}: {}", worker.name, errs.join("; ")));
            } else if seen.contains(&worker.name.as_str()) {
                problems.push(format!("{at}.name: {:?} names two workers", worker.name));
            }
            seen.push(&worker.name);
            if let Some(WorkerSource::Local) = worker.source() {
                locals += 1;
            }
            problems.extend(worker.problems(&at));
        }
        if locals > 1 {
            problems.push("dispatch.workers: at most one worker may be local".to_owned());
        }
        problems.extend(super::shares::problems(&self.shares));
        problems
    }

    /// `controllerName` is set, is not the Job controller's, and is a valid `managedBy`.
    fn controller_name_problems(&self, job_controller_name: &str) -> Vec<String> {
        let name = &self.controller_name;
        if name.trim().is_empty() {
            vec!["dispatch.controllerName must not be empty".to_owned()]
        } else if name == job_controller_name {
            vec![format!(
                "dispatch.controllerName: {name:?} is the Job controller's name; the dispatcher needs one of its own"
            )]
        } else {
            jobwarden_rules::managed_by::validate(
                Some(name),
                &jobwarden_rules::FieldPath::new("dispatch.controllerName"),
            )
            .iter()
            .map(ToString::to_string)
            .collect()
        }
    }
}

impl Worker {
    /// One worker's own settings, `at` its path (`dispatch.workers[i]`): where its kubeconfig
    /// comes from, and its namespace selector. Its name is checked with the others'.
    fn problems(&self, at: &str) -> Vec<String> {
        let mut problems = Vec::new();
        match self.source() {
            None => problems.push(format!(
                "{at}: name exactly one of kubeconfigSecret, kubeconfigFile and local: true"
            )),
            Some(WorkerSource::Secret(secret)) => {
                let errs = names::dns1123_subdomain(secret);
                if !errs.is_empty() {
                    problems.push(format!(
                        "{at}.kubeconfigSecret: {secret:?} is not a Secret name: {}",
                        errs.join("; ")
                    ));
                }
            }
            Some(WorkerSource::File(file)) => {
                if !file.starts_with('/') {
                    problems.push(format!(
                        "{at}.kubeconfigFile: {file:?} must be an absolute path"
                    ));
                }
            }
            Some(WorkerSource::Local) => {}
        }
        if let Some(sel) = &self.namespaces.selector {
            problems.extend(
                jobwarden_rules::selector::validate(
                    sel,
                    &jobwarden_rules::FieldPath::new(&format!("{at}.namespaces.selector")),
                )
                .iter()
                .map(ToString::to_string),
            );
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Dispatch {
        let policy: super::super::Policy =
            serde_json::from_value(serde_json::from_str(yaml).expect("JSON")).expect("a policy");
        policy.dispatch
    }

    #[test]
    fn the_issue_example_parses_and_is_usable() {
        let d = parse(
            r#"{"dispatch": {"controllerName": "jobwarden.io/dispatcher", "workers": [
                {"name": "east", "kubeconfigSecret": "jobwarden-worker-east"},
                {"name": "west", "kubeconfigFile": "/etc/jobwarden/workers/west/kubeconfig",
                 "namespaces": {"names": ["ml-training"]}},
                {"name": "here", "local": true},
                {"name": "burst", "kubeconfigSecret": "jobwarden-worker-burst", "capacity": "Unbounded"}],
               "workerLostSeconds": 300, "unschedulableSeconds": 20}}"#,
        );
        assert_eq!(d.workers.len(), 4);
        assert_eq!(d.unschedulable_seconds, 20);
        assert_eq!(d.worker("east").map(|w| w.capacity), Some(Capacity::Nodes));
        assert_eq!(
            d.worker("burst").map(|w| w.capacity),
            Some(Capacity::Unbounded)
        );
        assert_eq!(d.local_worker(), Some("here"));
        assert_eq!(
            d.worker("east").and_then(Worker::source),
            Some(WorkerSource::Secret("jobwarden-worker-east"))
        );
        assert!(d.problems("jobwarden.io/job-controller").is_empty());
        assert!(d.is_enabled());
    }

    #[test]
    fn defaults_name_the_dispatcher_and_enable_nothing() {
        let d = Dispatch::default();
        assert_eq!(d.controller_name, "jobwarden.io/dispatcher");
        assert_eq!(d.worker_lost_seconds, DEFAULT_WORKER_LOST_SECONDS);
        assert_eq!(d.unschedulable_seconds, DEFAULT_UNSCHEDULABLE_SECONDS);
        assert!(!d.is_enabled());
        assert!(d.problems("jobwarden.io/job-controller").is_empty());
    }

    #[test]
    fn problems_name_the_path() {
        let cases: &[(&str, &str)] = &[
            (
                r#"{"workers": [{"name": "East", "local": true}]}"#,
                "dispatch.workers[0].name",
            ),
            (
                r#"{"workers": [{"name": "a", "local": true}, {"name": "a", "kubeconfigFile": "/k"}]}"#,
                "dispatch.workers[1].name: \"a\" names two workers",
            ),
            (
                r#"{"workers": [{"name": "a"}]}"#,
                "dispatch.workers[0]: name exactly one of",
            ),
            (
                r#"{"workers": [{"name": "a", "local": true, "kubeconfigFile": "/k"}]}"#,
                "dispatch.workers[0]: name exactly one of",
            ),
            (
                r#"{"workers": [{"name": "a", "kubeconfigFile": "k"}]}"#,
                "dispatch.workers[0].kubeconfigFile",
            ),
            (
                r#"{"workers": [{"name": "a", "kubeconfigSecret": "Not_A_Name"}]}"#,
                "dispatch.workers[0].kubeconfigSecret",
            ),
            (
                r#"{"workers": [{"name": "a", "local": true}, {"name": "b", "local": true}]}"#,
                "at most one worker may be local",
            ),
            (r#"{"workerLostSeconds": 0}"#, "dispatch.workerLostSeconds"),
            (
                r#"{"unschedulableSeconds": 0}"#,
                "dispatch.unschedulableSeconds",
            ),
            (
                r#"{"controllerName": "jobwarden.io/job-controller"}"#,
                "the Job controller's name",
            ),
            (
                r#"{"controllerName": "no-domain"}"#,
                "dispatch.controllerName",
            ),
            (r#"{"origin": "not a label value"}"#, "dispatch.origin"),
            (
                r#"{"workers": [{"name": "a", "local": true, "namespaces": {"selector": {"matchExpressions": [{"key": "k", "operator": "Sometimes"}]}}}]}"#,
                "dispatch.workers[0].namespaces.selector",
            ),
        ];
        for (dispatch, expected) in cases {
            let d = parse(&format!(r#"{{"dispatch": {dispatch}}}"#));
            let problems = d.problems("jobwarden.io/job-controller");
            assert!(
                problems.iter().any(|p| p.contains(expected)),
                "{dispatch}: expected a problem with {expected:?}, got {problems:?}"
            );
        }
    }

    #[test]
    fn unknown_fields_are_refused() {
        let policy: Result<super::super::Policy, _> = serde_json::from_str(
            r#"{"dispatch": {"workers": [{"name": "a", "kubeconfig": "inline"}]}}"#,
        );
        assert!(policy.is_err());
    }
}
