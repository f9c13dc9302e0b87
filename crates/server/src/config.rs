//! `jobwarden serve`'s configuration: command-line flags (each also read from a `JOBWARDEN_*`
//! environment variable) and the optional policy file given by `--config`. Everything here is
//! checked once at start, so a bad setting stops the server with a clear message instead of
//! surfacing as odd verdicts later.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jobwarden_admission::Policy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::limits::Limits;
use crate::listen::ListenAddr;

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Flags of `jobwarden serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address of the HTTPS admission listener (/mutate, /validate): HOST:PORT exactly as
    /// given, or :PORT for the port on IPv6 and IPv4 (`[::]` dual-stack; `0.0.0.0` on a host
    /// without IPv6).
    #[arg(long, env = "JOBWARDEN_LISTEN", default_value = ":8443")]
    pub listen: ListenAddr,

    /// Address of the listener for /healthz, /readyz and /metrics; written like --listen.
    /// HTTPS with the serving certificate where there is a cluster (see --metrics-secure).
    #[arg(long, env = "JOBWARDEN_METRICS_LISTEN", default_value = ":8080")]
    pub metrics_listen: ListenAddr,

    /// Serve /metrics over HTTPS to bearer tokens allowed to `get` the non-resource URL
    /// /metrics (checked with a TokenReview and a SubjectAccessReview, answers cached briefly);
    /// /healthz and /readyz stay open. On wherever a cluster is reachable; `=false` serves all
    /// three in plain HTTP to anyone (behind a mesh that does the same, say). `--dev` never
    /// secures them: it has no cluster to ask.
    #[arg(long, env = "JOBWARDEN_METRICS_SECURE", default_value_t = true,
          action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_name = "BOOL")]
    pub metrics_secure: bool,

    /// PEM certificate chain served to kube-apiserver and on --metrics-listen (a
    /// cert-manager Secret's `tls.crt`). Re-read when it changes on disk. With --no-webhook,
    /// optional: the metrics listener's certificate (one is made in memory without it).
    #[arg(
        long,
        env = "JOBWARDEN_TLS_CERT",
        requires = "tls_key",
        required_unless_present_any = ["dev", "no_webhook"],
        conflicts_with = "dev"
    )]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key matching `--tls-cert` (a cert-manager Secret's `tls.key`).
    #[arg(
        long,
        env = "JOBWARDEN_TLS_KEY",
        requires = "tls_cert",
        conflicts_with = "dev"
    )]
    pub tls_key: Option<PathBuf>,

    /// How often, in seconds, the certificate files are checked for a new certificate.
    #[arg(long, env = "JOBWARDEN_TLS_RELOAD_SECONDS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub tls_reload_seconds: u64,

    /// Serve with a self-signed certificate made in memory for localhost; never contacts a
    /// cluster (no reconcile loop, no namespace labels).
    #[arg(long, env = "JOBWARDEN_DEV")]
    pub dev: bool,

    /// Policy file (YAML): controllerName, allowedManagedBy, resume, suspendOnCreate,
    /// delegate, dispatch. Flags and environment add to it.
    #[arg(long, env = "JOBWARDEN_CONFIG")]
    pub config: Option<PathBuf>,

    /// Log format.
    #[arg(long, env = "JOBWARDEN_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// jobwarden's controller name, the `spec.managedBy` value its reconcile loop answers to
    /// [default: jobwarden.io/job-controller, or `controllerName` in --config].
    #[arg(long, env = "JOBWARDEN_CONTROLLER_NAME")]
    pub controller_name: Option<String>,

    /// Do not run the reconcile loop, even when a cluster is reachable: the webhook replicas
    /// of a two-Deployment install.
    #[arg(long, env = "JOBWARDEN_NO_CONTROLLER", conflicts_with = "no_webhook")]
    pub no_controller: bool,

    /// Run only the reconcile loop (and /healthz, /readyz, /metrics): no admission listener,
    /// no namespace watch. The controller Deployment of a two-Deployment install,
    /// so the webhook's availability never depends on the controller's memory.
    #[arg(long, env = "JOBWARDEN_NO_WEBHOOK", conflicts_with = "dev")]
    pub no_webhook: bool,

    /// A `spec.managedBy` value new Jobs may name besides jobwarden's and the built-in
    /// controller's. Repeat or comma-separate. When none is given, any value is allowed (with a
    /// warning).
    #[arg(
        long = "allowed-managed-by",
        env = "JOBWARDEN_ALLOWED_MANAGED_BY",
        value_delimiter = ',',
        value_name = "CONTROLLER"
    )]
    pub allowed_managed_by: Vec<String>,

    /// A user (userInfo.username) allowed to resume a suspended Job. When no resume identity
    /// is configured at all, anyone who may update the Job may resume it.
    #[arg(
        long = "resume-user",
        env = "JOBWARDEN_RESUME_USERS",
        value_delimiter = ',',
        value_name = "USER"
    )]
    pub resume_users: Vec<String>,

    /// A group (userInfo.groups) whose members may resume a suspended Job.
    #[arg(
        long = "resume-group",
        env = "JOBWARDEN_RESUME_GROUPS",
        value_delimiter = ',',
        value_name = "GROUP"
    )]
    pub resume_groups: Vec<String>,

    /// A service account, as `namespace/name`, allowed to resume a suspended Job.
    #[arg(
        long = "resume-service-account",
        env = "JOBWARDEN_RESUME_SERVICE_ACCOUNTS",
        value_delimiter = ',',
        value_name = "NAMESPACE/NAME"
    )]
    pub resume_service_accounts: Vec<String>,

    /// A namespace whose new Jobs the mutating webhook creates suspended.
    #[arg(
        long = "suspend-on-create-namespace",
        env = "JOBWARDEN_SUSPEND_ON_CREATE_NAMESPACES",
        value_delimiter = ',',
        value_name = "NAMESPACE"
    )]
    pub suspend_on_create_namespaces: Vec<String>,

    /// Namespaces, chosen by labels `key=value[,key=value…]` (all must match), whose new Jobs
    /// are created suspended. Needs a reachable cluster to read namespace labels. The policy
    /// file takes a full label selector (matchExpressions too).
    #[arg(
        long = "suspend-on-create-selector",
        env = "JOBWARDEN_SUSPEND_ON_CREATE_SELECTOR",
        value_name = "KEY=VALUE,..."
    )]
    pub suspend_on_create_selector: Option<String>,

    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Resource limits of the admission listener. The defaults suit kube-apiserver as the only
/// client; see `limits.rs` for the reasoning behind each.
#[derive(Debug, Clone, clap::Args)]
pub struct LimitArgs {
    /// Largest request body accepted, in bytes; larger gets 413. An UPDATE review carries the
    /// object and the old object, each up to kube-apiserver's 3 MiB request limit.
    #[arg(long, env = "JOBWARDEN_MAX_BODY_BYTES", default_value_t = Limits::default().max_body_bytes)]
    pub max_body_bytes: usize,

    /// Bytes of request bodies held in memory at once, all requests together (at least
    /// --max-body-bytes). A request reserves its body's bytes before reading them (the declared
    /// Content-Length at once) and waits, within the request timeout, while they are taken;
    /// 503 when none are freed in time.
    #[arg(long, env = "JOBWARDEN_MAX_BUFFERED_BODY_BYTES", default_value_t = Limits::default().max_buffered_body_bytes)]
    pub max_buffered_body_bytes: usize,

    /// Seconds a request may take from its headers to its response (answered 408 after).
    #[arg(long, env = "JOBWARDEN_REQUEST_TIMEOUT_SECONDS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub request_timeout_seconds: u64,

    /// Seconds a client has to send a request's headers, and the longest an idle HTTP/1.1
    /// keep-alive connection is kept.
    #[arg(long, env = "JOBWARDEN_HEADER_TIMEOUT_SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub header_timeout_seconds: u64,

    /// Seconds a client has to complete the TLS handshake.
    #[arg(long, env = "JOBWARDEN_TLS_HANDSHAKE_TIMEOUT_SECONDS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub tls_handshake_timeout_seconds: u64,

    /// Open connections at most; more wait in the kernel's accept queue.
    #[arg(long, env = "JOBWARDEN_MAX_CONNECTIONS", default_value_t = Limits::default().max_connections,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,

    /// Reviews in progress at most; more wait (within the request timeout) for a slot.
    #[arg(long, env = "JOBWARDEN_MAX_CONCURRENT_REQUESTS", default_value_t = Limits::default().max_concurrent_requests,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_concurrent_requests: u32,

    /// Concurrent HTTP/2 streams per connection.
    #[arg(long, env = "JOBWARDEN_HTTP2_MAX_CONCURRENT_STREAMS", default_value_t = Limits::default().http2_max_concurrent_streams,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub http2_max_concurrent_streams: u32,

    /// Seconds between SIGTERM (readiness turns false) and closing the listener, so that
    /// Service endpoints stop sending new requests first.
    #[arg(long, env = "JOBWARDEN_SHUTDOWN_DELAY_SECONDS", default_value_t = 5)]
    pub shutdown_delay_seconds: u64,

    /// Seconds in-flight requests get to finish after the listener closes.
    #[arg(long, env = "JOBWARDEN_SHUTDOWN_TIMEOUT_SECONDS", default_value_t = 20)]
    pub shutdown_timeout_seconds: u64,
}

impl LimitArgs {
    pub fn limits(&self) -> Limits {
        Limits {
            max_body_bytes: self.max_body_bytes,
            max_buffered_body_bytes: self.max_buffered_body_bytes,
            request_timeout: Duration::from_secs(self.request_timeout_seconds),
            header_timeout: Duration::from_secs(self.header_timeout_seconds),
            tls_handshake_timeout: Duration::from_secs(self.tls_handshake_timeout_seconds),
            max_connections: self.max_connections,
            max_concurrent_requests: self.max_concurrent_requests,
            http2_max_concurrent_streams: self.http2_max_concurrent_streams,
            ..Limits::default()
        }
    }
}

impl ServeArgs {
    /// The policy: the `--config` file when given, with flags and environment added to it.
    pub fn policy(&self) -> Result<Policy, PolicyError> {
        let file = match &self.config {
            Some(path) => Some(load_policy_file(path)?),
            None => None,
        };
        self.policy_over(file)
    }

    /// The flags and environment added to `file`, the policy of the `--config` file read
    /// elsewhere (`doctor` reads it from the ConfigMap a Deployment mounts).
    pub fn policy_over(&self, file: Option<Policy>) -> Result<Policy, PolicyError> {
        let mut policy = file.unwrap_or_default();
        if let Some(name) = &self.controller_name {
            policy.controller_name = name.clone();
        }
        extend_unique(&mut policy.allowed_managed_by, &self.allowed_managed_by);
        extend_unique(&mut policy.resume.users, &self.resume_users);
        extend_unique(&mut policy.resume.groups, &self.resume_groups);
        extend_unique(
            &mut policy.resume.service_accounts,
            &self.resume_service_accounts,
        );
        extend_unique(
            &mut policy.suspend_on_create.names,
            &self.suspend_on_create_namespaces,
        );
        if let Some(selector) = &self.suspend_on_create_selector {
            let labels = parse_match_labels(selector).map_err(|source| PolicyError::Selector {
                selector: selector.clone(),
                source,
            })?;
            // The flag narrows a selector from the file rather than replacing it: both must hold.
            let target = policy
                .suspend_on_create
                .selector
                .get_or_insert_with(LabelSelector::default);
            target
                .match_labels
                .get_or_insert_with(BTreeMap::new)
                .extend(labels);
        }
        check_policy(&policy).map_err(PolicyError::Flags)?;
        Ok(policy)
    }
}

/// Why the policy (`--config` and the flags that add to it) cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read the policy file {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the policy file {} is not valid", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_yaml_ng::Error,
    },
    /// The file parses, but breaks a rule of the policy.
    #[error("the policy file {}", path.display())]
    File {
        path: PathBuf,
        #[source]
        source: PolicyProblems,
    },
    #[error("--suspend-on-create-selector {selector:?}")]
    Selector {
        selector: String,
        #[source]
        source: SelectorError,
    },
    /// The policy with the flags added breaks a rule of the policy.
    #[error(transparent)]
    Flags(PolicyProblems),
}

/// What `Policy::problems` found, `; `-joined.
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.join("; "))]
pub struct PolicyProblems(pub Vec<String>);

/// Why `--suspend-on-create-selector` is not `key=value,...`.
#[derive(Debug, thiserror::Error)]
pub enum SelectorError {
    #[error("{0:?} is not key=value")]
    NotKeyValue(String),
    #[error("{0:?} has an empty key")]
    EmptyKey(String),
    #[error("no key=value pair")]
    Empty,
}

/// Reads the YAML policy file. An empty file is the empty policy.
pub fn load_policy_file(path: &Path) -> Result<Policy, PolicyError> {
    let bytes = std::fs::read(path).map_err(|source| PolicyError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_policy_bytes(&bytes, path)
}

/// The policy file's bytes, read from `path`: text in UTF-8, or the error reading it as text
/// gives. `serve` at start and the file follower both read the file through here.
pub fn parse_policy_bytes(bytes: &[u8], path: &Path) -> Result<Policy, PolicyError> {
    let text = std::str::from_utf8(bytes).map_err(|e| PolicyError::Read {
        path: path.to_owned(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })?;
    parse_policy(text, path)
}

/// The policy file's text, read from `path` (for messages). An empty file is the empty policy.
pub fn parse_policy(text: &str, path: &Path) -> Result<Policy, PolicyError> {
    if text.trim().is_empty() {
        return Ok(Policy::default());
    }
    let policy: Policy = serde_yaml_ng::from_str(text).map_err(|source| PolicyError::Parse {
        path: path.to_owned(),
        source,
    })?;
    check_policy(&policy).map_err(|source| PolicyError::File {
        path: path.to_owned(),
        source,
    })?;
    Ok(policy)
}

fn check_policy(policy: &Policy) -> Result<(), PolicyProblems> {
    match policy.problems() {
        problems if problems.is_empty() => Ok(()),
        problems => Err(PolicyProblems(problems)),
    }
}

fn extend_unique(list: &mut Vec<String>, more: &[String]) {
    for item in more.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        if !list.iter().any(|have| have == item) {
            list.push(item.to_owned());
        }
    }
}

/// `a=b,c=d` as matchLabels.
fn parse_match_labels(text: &str) -> Result<BTreeMap<String, String>, SelectorError> {
    let mut labels = BTreeMap::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(SelectorError::NotKeyValue(pair.to_owned()));
        };
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() {
            return Err(SelectorError::EmptyKey(pair.to_owned()));
        }
        labels.insert(key.to_owned(), value.to_owned());
    }
    if labels.is_empty() {
        return Err(SelectorError::Empty);
    }
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::error_chain::error_chain;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn args(extra: &[&str]) -> ServeArgs {
        let mut argv = vec!["jobwarden", "--dev"];
        argv.extend_from_slice(extra);
        Cli::parse_from(argv).serve
    }

    #[test]
    fn defaults_are_the_empty_policy() {
        let a = args(&[]);
        assert_eq!(a.listen, ListenAddr::AllFamilies { port: 8443 });
        assert_eq!(a.metrics_listen, ListenAddr::AllFamilies { port: 8080 });
        let exact = args(&["--listen", "0.0.0.0:9443", "--metrics-listen", "[::1]:9080"]);
        assert_eq!(
            exact.listen,
            ListenAddr::Exact("0.0.0.0:9443".parse().unwrap())
        );
        assert_eq!(
            exact.metrics_listen,
            ListenAddr::Exact("[::1]:9080".parse().unwrap())
        );
        assert!(Cli::try_parse_from(["jobwarden", "--dev", "--listen", "8443"]).is_err());
        assert_eq!(a.policy().unwrap(), Policy::default());
    }

    #[test]
    fn metrics_are_secure_unless_turned_off_by_name() {
        assert!(args(&[]).metrics_secure);
        assert!(args(&["--metrics-secure"]).metrics_secure);
        assert!(args(&["--metrics-secure=true"]).metrics_secure);
        assert!(!args(&["--metrics-secure=false"]).metrics_secure);
        // `=` is required, so the flag never swallows the next argument.
        let a = args(&["--metrics-secure", "--no-controller"]);
        assert!(a.metrics_secure && a.no_controller);
        assert!(Cli::try_parse_from(["jobwarden", "--dev", "--metrics-secure=maybe"]).is_err());
    }

    #[test]
    fn tls_files_are_required_without_dev() {
        assert!(Cli::try_parse_from(["jobwarden"]).is_err());
        assert!(Cli::try_parse_from(["jobwarden", "--tls-cert", "c"]).is_err());
        assert!(Cli::try_parse_from(["jobwarden", "--tls-cert", "c", "--tls-key", "k"]).is_ok());
        assert!(Cli::try_parse_from(["jobwarden", "--dev", "--tls-cert", "c"]).is_err());
    }

    #[test]
    fn the_controller_alone_needs_no_certificate() {
        let a = Cli::try_parse_from(["jobwarden", "--no-webhook"])
            .unwrap()
            .serve;
        assert!(a.no_webhook && a.tls_cert.is_none());
        // One for its metrics listener, when given.
        let with = [
            "jobwarden",
            "--no-webhook",
            "--tls-cert",
            "c",
            "--tls-key",
            "k",
        ];
        assert!(Cli::try_parse_from(with).unwrap().serve.tls_cert.is_some());
        for bad in [
            vec!["jobwarden", "--no-webhook", "--tls-cert", "c"],
            vec!["jobwarden", "--no-webhook", "--no-controller"],
            vec!["jobwarden", "--no-webhook", "--dev"],
        ] {
            assert!(Cli::try_parse_from(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn flags_add_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("policy.yaml");
        std::fs::write(
            &file,
            "controllerName: example.com/runner\nallowedManagedBy: [kueue.x-k8s.io/multikueue]\n\
             resume:\n  groups: [batch-admins]\nsuspendOnCreate:\n  selector:\n    matchLabels: {tier: batch}\n",
        )
        .unwrap();
        let a = args(&[
            "--config",
            file.to_str().unwrap(),
            "--allowed-managed-by",
            "a.io/x,kueue.x-k8s.io/multikueue",
            "--resume-service-account",
            "ops/resumer",
            "--suspend-on-create-namespace",
            "team-a",
            "--suspend-on-create-selector",
            "queue=gated",
        ]);
        let policy = a.policy().unwrap();
        assert_eq!(policy.controller_name, "example.com/runner");
        assert_eq!(
            policy.allowed_managed_by,
            ["kueue.x-k8s.io/multikueue", "a.io/x"]
        );
        assert_eq!(policy.resume.groups, ["batch-admins"]);
        assert_eq!(policy.resume.service_accounts, ["ops/resumer"]);
        assert_eq!(policy.suspend_on_create.names, ["team-a"]);
        let labels = policy.suspend_on_create.selector.unwrap().match_labels;
        assert_eq!(
            labels.unwrap().into_iter().collect::<Vec<_>>(),
            [
                ("queue".to_owned(), "gated".to_owned()),
                ("tier".to_owned(), "batch".to_owned())
            ]
        );
    }

    #[test]
    fn controller_name_flag_overrides_the_file() {
        let a = args(&["--controller-name", "example.com/other"]);
        assert_eq!(a.policy().unwrap().controller_name, "example.com/other");
    }

    #[test]
    fn a_bad_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("policy.yaml");
        std::fs::write(&file, "allowedManagedBy: [a]\nresumee: {}\n").unwrap();
        let err = error_chain(&load_policy_file(&file).unwrap_err());
        assert!(err.contains("is not valid: "), "{err}");
        assert!(err.contains("resumee"), "{err}");

        std::fs::write(&file, "resume:\n  serviceAccounts: [just-a-name]\n").unwrap();
        let err = error_chain(&load_policy_file(&file).unwrap_err());
        assert!(
            err.starts_with(&format!("the policy file {}: ", file.display())),
            "{err}"
        );
        assert!(err.contains("namespace/name"), "{err}");

        let missing = dir.path().join("missing.yaml");
        let err = error_chain(&load_policy_file(&missing).unwrap_err());
        assert!(
            err.starts_with(&format!(
                "cannot read the policy file {}: ",
                missing.display()
            )),
            "{err}"
        );
    }

    #[test]
    fn the_dispatch_section_and_dispatch_namespaces_arrive() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("policy.yaml");
        std::fs::write(
            &file,
            "delegate:\n  dispatchNamespaces:\n    names: [team-remote]\n    \
             selector: {matchLabels: {jobwarden.io/dispatch: \"true\"}}\n\
             dispatch:\n  controllerName: example.com/dispatcher\n  origin: management-1\n  \
             workers:\n    - {name: east, kubeconfigSecret: jobwarden-worker-east}\n    \
             - name: west\n      kubeconfigFile: /etc/jobwarden/workers/west/kubeconfig\n      \
             namespaces: {names: [team-remote]}\n    - {name: here, local: true}\n  \
             workerLostSeconds: 20\n",
        )
        .unwrap();
        let policy = args(&["--config", file.to_str().unwrap()])
            .policy()
            .unwrap();
        assert_eq!(policy.delegate.dispatch_namespaces.names, ["team-remote"]);
        assert!(policy.delegate.dispatch_namespaces.selector.is_some());
        assert!(policy.needs_namespace_labels());
        let dispatch = &policy.dispatch;
        assert_eq!(dispatch.controller_name, "example.com/dispatcher");
        assert_eq!(dispatch.origin, "management-1");
        assert_eq!(dispatch.worker_lost_seconds, 20);
        let names: Vec<&str> = dispatch.workers.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["east", "west", "here"]);
        assert_eq!(dispatch.local_worker(), Some("here"));
        assert_eq!(dispatch.workers[1].namespaces.names, ["team-remote"]);

        // Left out, the section is the default one: the dispatcher's name, no worker, 300 s.
        std::fs::write(&file, "delegate: {jobsNamingRules: true}\n").unwrap();
        let policy = load_policy_file(&file).unwrap();
        assert_eq!(
            policy.dispatch,
            jobwarden_admission::policy::Dispatch::default()
        );
        assert_eq!(policy.dispatch.controller_name, "jobwarden.io/dispatcher");
        assert_eq!(policy.dispatch.worker_lost_seconds, 300);
    }

    #[test]
    fn a_dispatch_section_that_cannot_work_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("policy.yaml");
        for (text, problem) in [
            (
                "delegate: {dispatchNamespaces: {names: [team-remote]}}\n",
                "delegate.dispatchNamespaces: the dispatcher has no workers (dispatch.workers): their Jobs would wait forever",
            ),
            (
                "dispatch: {workers: [{name: East, local: true}]}\n",
                "dispatch.workers[0].name: \"East\": a lowercase RFC 1123 label",
            ),
            (
                "dispatch: {workers: [{name: east}]}\n",
                "dispatch.workers[0]: name exactly one of kubeconfigSecret, kubeconfigFile and local: true",
            ),
            (
                "dispatch: {controllerName: jobwarden.io/job-controller}\n",
                "dispatch.controllerName: \"jobwarden.io/job-controller\" is the Job controller's name",
            ),
            (
                "dispatch: {workerLostSeconds: 0}\n",
                "dispatch.workerLostSeconds must be at least 1",
            ),
        ] {
            std::fs::write(&file, text).unwrap();
            let err = error_chain(&load_policy_file(&file).unwrap_err());
            assert!(
                err.starts_with(&format!("the policy file {}: ", file.display()))
                    && err.contains(problem),
                "{text}: {err}"
            );
        }
        // Unknown fields are refused at any depth, with the file's path, line and column.
        std::fs::write(
            &file,
            "dispatch:\n  workers:\n    - {name: east, kubeconfig: inline}\n",
        )
        .unwrap();
        let err = error_chain(&load_policy_file(&file).unwrap_err());
        assert!(
            err.starts_with(&format!(
                "the policy file {} is not valid: ",
                file.display()
            )) && err.contains("unknown field `kubeconfig`")
                && err.contains("line 3"),
            "{err}"
        );
        // The flags cannot break it either: --controller-name taking the dispatcher's name.
        std::fs::write(&file, "dispatch: {workers: [{name: here, local: true}]}\n").unwrap();
        let err = args(&[
            "--config",
            file.to_str().unwrap(),
            "--controller-name",
            "jobwarden.io/dispatcher",
        ])
        .policy()
        .unwrap_err();
        assert!(
            error_chain(&err).contains("the dispatcher needs one of its own"),
            "{}",
            error_chain(&err)
        );
    }

    #[test]
    fn an_empty_file_is_the_empty_policy() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("policy.yaml");
        std::fs::write(&file, "\n").unwrap();
        assert_eq!(load_policy_file(&file).unwrap(), Policy::default());
    }

    #[test]
    fn selector_flag_must_be_pairs() {
        for (selector, want) in [
            (
                "tier",
                r#"--suspend-on-create-selector "tier": "tier" is not key=value"#,
            ),
            (
                "=x",
                r#"--suspend-on-create-selector "=x": "=x" has an empty key"#,
            ),
            (
                " , ",
                r#"--suspend-on-create-selector " , ": no key=value pair"#,
            ),
        ] {
            let error = args(&["--suspend-on-create-selector", selector])
                .policy()
                .unwrap_err();
            assert_eq!(error_chain(&error), want);
        }
    }

    #[test]
    fn flags_that_break_the_policy_say_only_what_breaks() {
        let error = args(&["--controller-name", " "]).policy().unwrap_err();
        assert_eq!(error_chain(&error), "controllerName must not be empty");
    }
}
