//! jobwarden's Deployments as doctor reads them: which faces each runs (from `serve`'s own
//! arguments in its pod template), under which ServiceAccount, and how many replicas are
//! ready. Their checks are pure.

use std::collections::BTreeMap;

use jobwarden_admission::Policy;
use serde_json::Value;

use crate::catalogue::DEPLOYMENT;
use crate::check::Check;

/// The label every install puts on jobwarden's objects (deploy/'s kustomization, the chart's
/// labels): how doctor finds the Deployments.
pub const PART_OF: &str = "app.kubernetes.io/part-of=jobwarden";

/// The webhook configurations' name when no Deployment says otherwise (`serve`'s default
/// `--webhook-configurations`, deploy/'s name).
pub const DEFAULT_CONFIGURATIONS: &str = "jobwarden";

/// What doctor needs from `serve`'s flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeFlags {
    pub serves_webhook: bool,
    pub runs_controller: bool,
    /// `/metrics` behind TokenReview and SubjectAccessReview (`--metrics-secure`).
    pub secures_metrics: bool,
    /// The webhook configurations' name (`--webhook-configurations`).
    pub webhook_configurations: String,
    /// `--tls-cert`: where the serving certificate is mounted.
    pub tls_cert: Option<String>,
    /// `--config`: where the policy file is mounted.
    pub config: Option<String>,
}

/// `serve`'s command line, as the binary parses it (this crate does not know its flags).
pub trait ServeCommandLine: Send + Sync {
    /// The flags in `args` (what follows `serve`).
    fn flags(&self, args: &[String]) -> Result<ServeFlags, String>;
    /// The policy `serve` runs with these `args`, its `--config` file holding `config_text`.
    fn policy(&self, args: &[String], config_text: Option<&str>) -> Result<Policy, String>;
}

/// Replica counts, from the Deployment's spec and status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replicas {
    pub desired: i64,
    pub ready: i64,
    pub updated: i64,
    /// The controller has seen the latest spec (`observedGeneration >= generation`).
    pub observed: bool,
}

/// One of jobwarden's Deployments.
#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentView {
    pub name: String,
    pub namespace: String,
    pub service_account: String,
    /// What follows `serve` in its container's command and arguments.
    pub args: Vec<String>,
    pub flags: Result<ServeFlags, String>,
    pub replicas: Replicas,
    /// `spec.selector.matchLabels`: which pods are its replicas.
    pub selector: BTreeMap<String, String>,
    /// `spec.template.spec`.
    pub pod_spec: Value,
}

fn int(o: &Value, pointer: &str) -> Option<i64> {
    o.pointer(pointer).and_then(Value::as_i64)
}

impl DeploymentView {
    pub fn of(deployment: &Value, command_line: &dyn ServeCommandLine) -> DeploymentView {
        let text = |p: &str| {
            deployment
                .pointer(p)
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let pod_spec = deployment["spec"]["template"]["spec"].clone();
        let args = serve_args(&pod_spec);
        let flags = match &args {
            Some(args) => command_line.flags(args),
            None => Err("no container runs `jobwarden serve`".to_owned()),
        };
        let generation = int(deployment, "/metadata/generation").unwrap_or(0);
        DeploymentView {
            name: text("/metadata/name").to_owned(),
            namespace: text("/metadata/namespace").to_owned(),
            service_account: pod_spec["serviceAccountName"]
                .as_str()
                .unwrap_or("default")
                .to_owned(),
            args: args.unwrap_or_default(),
            flags,
            replicas: Replicas {
                desired: int(deployment, "/spec/replicas").unwrap_or(1),
                ready: int(deployment, "/status/readyReplicas").unwrap_or(0),
                updated: int(deployment, "/status/updatedReplicas").unwrap_or(0),
                observed: int(deployment, "/status/observedGeneration").unwrap_or(0) >= generation,
            },
            selector: deployment["spec"]["selector"]["matchLabels"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect(),
            pod_spec,
        }
    }

    pub fn serves_webhook(&self) -> bool {
        self.flags.as_ref().is_ok_and(|f| f.serves_webhook)
    }

    pub fn runs_controller(&self) -> bool {
        self.flags.as_ref().is_ok_and(|f| f.runs_controller)
    }

    /// Whether `labels` (a pod's) make it one of this Deployment's replicas.
    pub fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.selector.is_empty() && self.selector.iter().all(|(k, v)| labels.get(k) == Some(v))
    }

    /// What the Deployment runs, for messages.
    fn faces(&self) -> &'static str {
        match (self.serves_webhook(), self.runs_controller()) {
            (true, true) => "webhook and controller",
            (true, false) => "webhook",
            (false, true) => "controller",
            (false, false) => "neither face",
        }
    }
}

/// The arguments after `serve` of the first container whose command and arguments run it
/// (the image's entrypoint is jobwarden, so `args` starts with `serve`; a `command` naming the
/// binary works too).
fn serve_args(pod_spec: &Value) -> Option<Vec<String>> {
    pod_spec["containers"].as_array()?.iter().find_map(|c| {
        let argv: Vec<String> = ["command", "args"]
            .iter()
            .flat_map(|k| c[*k].as_array().into_iter().flatten())
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect();
        let at = argv.iter().position(|a| a == "serve")?;
        Some(argv[at + 1..].to_vec())
    })
}

/// One check per Deployment; an error when there is none, or none serves the webhook.
pub fn deployments(namespace: &str, read: &Result<Vec<DeploymentView>, String>) -> Vec<Check> {
    let found = match read {
        Ok(found) => found,
        Err(e) => {
            return vec![DEPLOYMENT.cannot_tell(
                format!("cannot list Deployments in namespace {namespace}: {e}"),
                format!("`kubectl -n {namespace} get deployments -l {PART_OF}` lists them"),
            )];
        }
    };
    if found.is_empty() {
        return vec![DEPLOYMENT.error(
            format!("no Deployment labelled {PART_OF} in namespace {namespace}"),
            "install jobwarden (docs/operations.md#install), or name the namespace it is installed in with -n",
        )];
    }
    let mut checks: Vec<Check> = found.iter().map(deployment).collect();
    if !found.iter().any(DeploymentView::serves_webhook) {
        checks.push(DEPLOYMENT.error(
            format!("no Deployment in namespace {namespace} serves the webhook"),
            "every install runs one Deployment without --no-webhook: apply the install again",
        ));
    }
    checks
}

fn deployment(d: &DeploymentView) -> Check {
    let what = format!("Deployment {}", d.name);
    let look = format!(
        "`kubectl -n {ns} describe deployment {name}` and `kubectl -n {ns} logs deployment/{name}` say why (an image that cannot be pulled, a Secret not issued yet, a policy that does not parse)",
        ns = d.namespace,
        name = d.name
    );
    if let Err(e) = &d.flags {
        return DEPLOYMENT.error(
            format!("{what}: cannot read its `serve` arguments: {e}"),
            "apply the install again; its container runs `jobwarden serve`",
        );
    }
    let r = d.replicas;
    if r.desired < 1 {
        return DEPLOYMENT.error(
            format!("{what} ({}) is scaled to 0", d.faces()),
            format!(
                "`kubectl -n {} scale deployment {} --replicas=2`",
                d.namespace, d.name
            ),
        );
    }
    if r.ready < 1 {
        return DEPLOYMENT.error(
            format!("{what} ({}): 0 of {} replicas ready", d.faces(), r.desired),
            look,
        );
    }
    if r.ready < r.desired {
        return DEPLOYMENT.warning(
            format!(
                "{what} ({}): {} of {} replicas ready",
                d.faces(),
                r.ready,
                r.desired
            ),
            look,
        );
    }
    if !r.observed || r.updated < r.desired {
        return DEPLOYMENT.warning(
            format!(
                "{what} ({}): rolling out, {} of {} replicas updated",
                d.faces(),
                r.updated,
                r.desired
            ),
            format!(
                "`kubectl -n {} rollout status deployment {}` waits for it",
                d.namespace, d.name
            ),
        );
    }
    DEPLOYMENT.ok(format!(
        "{what} ({}): {} of {} replicas ready",
        d.faces(),
        r.ready,
        r.desired
    ))
}

/// Where a file a container reads comes from: the volume mounted at the longest prefix of its
/// path, and the key in it (as kubelet projects a Secret's or ConfigMap's keys as files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileSource {
    Secret { name: String, key: String },
    ConfigMap { name: String, key: String },
}

/// The Secret or ConfigMap key a path in the first `serve` container is read from; `None`
/// when it is in no such volume.
pub fn file_source(pod_spec: &Value, path: &str) -> Option<FileSource> {
    let container = pod_spec["containers"].as_array()?.iter().find(|c| {
        ["command", "args"]
            .iter()
            .flat_map(|k| c[*k].as_array().into_iter().flatten())
            .any(|a| a == "serve")
    })?;
    let (mount, rest) = container["volumeMounts"]
        .as_array()?
        .iter()
        .filter_map(|m| {
            let at = m["mountPath"].as_str()?.trim_end_matches('/');
            let rest = path.strip_prefix(at)?.strip_prefix('/')?;
            Some((m, rest, at.len()))
        })
        .max_by_key(|(_, _, len)| *len)
        .map(|(m, rest, _)| (m, rest))?;
    // A subPath mount is the file itself: the key is the subPath.
    let rest = mount["subPath"]
        .as_str()
        .filter(|s| !s.is_empty())
        .unwrap_or(rest);
    let volume = pod_spec["volumes"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == mount["name"])?;
    // `items` maps keys to paths; without them every key is a file of its own name.
    let key_for = |source: &Value| -> String {
        source["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|i| i["path"] == rest)
            .and_then(|i| i["key"].as_str())
            .unwrap_or(rest)
            .to_owned()
    };
    if let Some(name) = volume["secret"]["secretName"].as_str() {
        return Some(FileSource::Secret {
            name: name.to_owned(),
            key: key_for(&volume["secret"]),
        });
    }
    let name = volume["configMap"]["name"].as_str()?;
    Some(FileSource::ConfigMap {
        name: name.to_owned(),
        key: key_for(&volume["configMap"]),
    })
}
