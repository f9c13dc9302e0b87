//! What a dispatcher run is given (issue 47: the one place both the scale runs and the
//! dispatch e2e suite say it): the fleet's workers by name, the rest of its policy as YAML
//! text (so that a field the policy gains needs no change here), its replicas and flags.

use std::collections::BTreeMap;

use crate::worker_secret;

/// A dispatcher's settings; [`DispatcherSettings::new`] and then its fields.
#[derive(Debug, Clone)]
pub struct DispatcherSettings {
    /// The fleet's workers, in its order, by the names the policy gives them: each is
    /// installed (deploy/worker/) and its entry names its kubeconfig's Secret
    /// ([`worker_secret`]). A worker of the fleet past these is not the dispatcher's.
    pub workers: Vec<String>,
    /// More fields of a worker's entry, by the worker's name, as the inside of a YAML flow
    /// mapping: `capacity: Unbounded, namespaces: {names: [a]}`.
    pub worker_fields: BTreeMap<String, String>,
    /// More entries of `dispatch.workers`, after the fleet's, each a YAML flow mapping, for
    /// workers the fleet does not hold: `{name: here, local: true}`, or one whose kubeconfig
    /// the test puts in a Secret itself.
    pub more_workers: Vec<String>,
    /// Secrets the dispatcher may read beside its fleet workers' (deploy/dispatch/'s Role names
    /// them all): those of `more_workers`, or of a worker a test adds to the policy later.
    pub more_secrets: Vec<String>,
    /// The rest of the `dispatch:` block, YAML as at the top of the block:
    /// `"workerLostSeconds: 20\nunschedulableSeconds: 30\n"`.
    pub dispatch: String,
    /// The rest of the policy beside `dispatch:`, YAML at the top level.
    pub policy: String,
    pub replicas: usize,
    /// Flags added to `serve`'s.
    pub flags: Vec<String>,
    /// Lay out one roomy Node ([`NodeLayout::roomy`](crate::NodeLayout::roomy)) on each of
    /// the workers and on the management plane (the local worker's), as the suites that play
    /// the kubelet themselves need: the dispatcher places a Job only where its pods fit, and
    /// with no scheduler their pods stay unbound, counted against the worker as a whole. A
    /// suite that lays out its own Nodes per scenario says `false`.
    pub roomy_nodes: bool,
}

impl DispatcherSettings {
    /// One replica dispatching to these workers of the fleet, nothing else said.
    pub fn new(workers: &[&str]) -> DispatcherSettings {
        DispatcherSettings {
            workers: workers.iter().map(|w| (*w).to_owned()).collect(),
            worker_fields: BTreeMap::new(),
            more_workers: Vec::new(),
            more_secrets: Vec::new(),
            dispatch: String::new(),
            policy: String::new(),
            replicas: 1,
            flags: Vec::new(),
            roomy_nodes: true,
        }
    }

    /// Every kubeconfig Secret the dispatcher reads: its fleet workers', then `more_secrets`.
    pub fn secrets(&self) -> Vec<String> {
        self.workers
            .iter()
            .map(|w| worker_secret(w))
            .chain(self.more_secrets.iter().cloned())
            .collect()
    }

    /// The policy file's text. `dispatch.workers` comes last, an entry a line, so that a test
    /// may append an entry to the file as it is (doctor's test does).
    pub fn policy_yaml(&self) -> String {
        let indented = |text: &str, by: &str| -> String {
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| format!("{by}{l}\n"))
                .collect()
        };
        let mut yaml = indented(&self.policy, "");
        yaml.push_str("dispatch:\n");
        yaml.push_str(&indented(&self.dispatch, "  "));
        yaml.push_str("  workers:\n");
        for name in &self.workers {
            let more = self
                .worker_fields
                .get(name)
                .filter(|f| !f.trim().is_empty())
                .map(|f| format!(", {}", f.trim()))
                .unwrap_or_default();
            yaml.push_str(&format!(
                "    - {{name: {name}, kubeconfigSecret: {}{more}}}\n",
                worker_secret(name)
            ));
        }
        for entry in &self.more_workers {
            yaml.push_str(&format!("    - {}\n", entry.trim()));
        }
        yaml
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_names_each_worker_with_its_secret_and_keeps_the_rest_as_given() {
        let mut settings = DispatcherSettings::new(&["east", "west"]);
        settings.dispatch = "workerLostSeconds: 20\nunschedulableSeconds: 30\n".to_owned();
        settings
            .worker_fields
            .insert("west".to_owned(), "capacity: Unbounded".to_owned());
        settings
            .more_workers
            .push("{name: here, local: true}".to_owned());
        settings.policy = "resumers:\n  users: [alice]\n".to_owned();
        assert_eq!(
            settings.policy_yaml(),
            "resumers:\n  users: [alice]\ndispatch:\n  workerLostSeconds: 20\n  \
             unschedulableSeconds: 30\n  workers:\n    \
             - {name: east, kubeconfigSecret: jobwarden-worker-east}\n    \
             - {name: west, kubeconfigSecret: jobwarden-worker-west, capacity: Unbounded}\n    \
             - {name: here, local: true}\n"
        );
    }
}
