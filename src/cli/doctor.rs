//! `jobwarden doctor [--pre]`: is this cluster ready for jobwarden, and is jobwarden healthy in
//! it. The checks are `jobwarden_doctor`'s; this parses flags, reads the files given, tells the
//! crate how `serve` reads its own command line, retries under `--wait`, and prints.

use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Args, CommandFactory as _, FromArgMatches as _, Parser};
use jobwarden_admission::Policy;
use jobwarden_doctor::{
    Cluster, Install, Memo, Options, Report, ServeCommandLine, ServeFlags, Verdict,
};

use super::output::Output;
use super::serve::ServeCommand;
use super::{Outcome, OutputFormat, input};

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Before installing: may the caller install jobwarden here (instead of: is the installed
    /// jobwarden healthy).
    #[arg(long)]
    pre: bool,
    /// jobwarden's namespace.
    #[arg(short = 'n', long, value_name = "NAMESPACE", default_value = "jobwarden-system",
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    namespace: String,
    /// The policy file (YAML) the webhook configurations must serve (default: the one the
    /// installed webhook Deployment runs, read from the ConfigMap it mounts).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// With --pre: the install's rendered manifests (`kubectl kustomize deploy/`, `helm
    /// template …`), YAML or JSON, `-` for stdin; repeatable.
    #[arg(long = "install", value_name = "FILE")]
    install: Vec<String>,
    /// `text`: grouped lines with hints; `json`: one JSON object per check and line.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Text)]
    output: OutputFormat,
    /// Check again until every check passes or this much time has gone (`30s`, `5m`);
    /// prints the last run.
    #[arg(long, value_name = "DURATION", value_parser = jobwarden_rules::seconds::parse)]
    wait: Option<Duration>,
    /// The kubeconfig file (default: KUBECONFIG, ~/.kube/config, else the in-cluster service
    /// account).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
}

/// Between two runs under `--wait`.
const RETRY_EVERY: Duration = Duration::from_secs(3);

/// The longest doctor waits for one request's answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

pub fn run(args: &DoctorArgs) -> Outcome {
    let policy = match &args.config {
        None => None,
        Some(path) => match jobwarden_server::load_policy_file(path) {
            Ok(policy) => Some(policy),
            Err(e) => {
                eprintln!("jobwarden doctor: {:#}", anyhow::Error::from(e));
                return Outcome::Unreadable;
            }
        },
    };
    let install = match read_install(&args.install) {
        Ok(install) => install,
        Err(e) => {
            eprintln!("jobwarden doctor: {e:#}");
            return Outcome::Unreadable;
        }
    };
    if install.is_some() && !args.pre {
        eprintln!(
            "jobwarden doctor: --install is for --pre (an installed jobwarden is read from the cluster)"
        );
        return Outcome::Unreadable;
    }
    let options = Options {
        pre: args.pre,
        namespace: args.namespace.clone(),
        install,
        policy,
        binary_revision: super::REVISION.to_owned(),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("jobwarden doctor: cannot start the runtime: {e}");
            return Outcome::Unreadable;
        }
    };
    let report = match runtime.block_on(doctor(args, &options)) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("jobwarden doctor: {e}");
            return Outcome::Unreadable;
        }
    };
    if print(&report, args.output).is_err() {
        return Outcome::Unreadable;
    }
    match report.verdict() {
        // A check that could not be made is the caller's rights or an API server's silence,
        // not something wrong with the cluster: the summary line says so, the exit does not.
        Verdict::Healthy | Verdict::Unchecked => Outcome::Ok,
        Verdict::Failed => Outcome::Rejected,
        Verdict::Unreachable => Outcome::Unreadable,
    }
}

fn read_install(files: &[String]) -> anyhow::Result<Option<Install>> {
    if files.is_empty() {
        return Ok(None);
    }
    let mut install = Install::default();
    for file in files {
        let docs = input::documents(&input::read(file)?).map_err(|e| {
            e.context(format!(
                "{file}: not the YAML or JSON of rendered manifests"
            ))
        })?;
        install.sources.push(if file == "-" {
            "stdin".to_owned()
        } else {
            file.clone()
        });
        install.objects.extend(docs);
    }
    Ok(Some(install))
}

async fn doctor(args: &DoctorArgs, options: &Options) -> Result<Report, String> {
    let mut config =
        jobwarden_audit::connect::config(args.kubeconfig.as_deref(), args.context.as_deref())
            .await
            .map_err(|e| e.to_string())?;
    // An API server that takes longer than this to answer one of doctor's small requests is a
    // finding, not something to wait five minutes for (kube's default read timeout).
    config.connect_timeout = Some(REQUEST_TIMEOUT);
    config.read_timeout = Some(REQUEST_TIMEOUT);
    let server = config.cluster_url.to_string();
    let client =
        kube::Client::try_from(config).map_err(|e| format!("cannot build a client: {e}"))?;
    let cluster = Cluster {
        client,
        server: server.trim_end_matches('/').to_owned(),
    };
    let deadline = args.wait.map(|w| Instant::now() + w);
    let waiting = std::io::stderr().is_terminal();
    let mut memo = Memo::default();
    loop {
        let report = jobwarden_doctor::diagnose(&cluster, options, &ServeLine, &mut memo).await;
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        match left {
            Some(left)
                if matches!(report.verdict(), Verdict::Failed | Verdict::Unreachable)
                    && !left.is_zero() =>
            {
                if waiting {
                    let failing = report.count(jobwarden_doctor::Status::Error);
                    eprint!(
                        "\r\x1b[2Kwaiting: {failing} check(s) failing, {}s left",
                        left.as_secs()
                    );
                }
                tokio::time::sleep(left.min(RETRY_EVERY)).await;
            }
            _ => {
                if waiting && deadline.is_some() {
                    eprint!("\r\x1b[2K");
                }
                return Ok(report);
            }
        }
    }
}

fn print(report: &Report, output: OutputFormat) -> std::io::Result<()> {
    let mut out = Output::stdout();
    match output {
        OutputFormat::Text => out.write_all(jobwarden_doctor::text::render(report).as_bytes())?,
        OutputFormat::Json => {
            for check in &report.checks {
                let line = serde_json::to_string(check).map_err(std::io::Error::other)?;
                writeln!(out, "{line}")?;
            }
        }
    }
    out.flush()
}

/// `serve`'s own command line, as a Deployment's container gives it: parsed by the very flags
/// `serve` parses, with the environment of the machine doctor runs on left out (it is not the
/// pod's).
#[derive(Debug, Parser)]
#[command(no_binary_name = true)]
struct ServeLineArgs {
    #[command(flatten)]
    serve: ServeCommand,
}

/// `serve`'s command line as doctor (and explain, finding the installed policy) reads it.
pub(super) struct ServeLine;

impl ServeLine {
    fn parse(args: &[String]) -> Result<ServeCommand, String> {
        let command = ServeLineArgs::command().mut_args(|a| a.env(None::<&'static str>));
        let matches = command.try_get_matches_from(args).map_err(|e| {
            e.render()
                .to_string()
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned()
        })?;
        ServeLineArgs::from_arg_matches(&matches)
            .map(|a| a.serve)
            .map_err(|e| e.to_string())
    }
}

impl ServeCommandLine for ServeLine {
    fn flags(&self, args: &[String]) -> Result<ServeFlags, String> {
        let serve = Self::parse(args)?;
        let path = |p: Option<&Path>| p.map(|p| p.display().to_string());
        Ok(ServeFlags {
            serves_webhook: !serve.server.no_webhook,
            runs_controller: !serve.server.no_controller,
            secures_metrics: serve.server.metrics_secure && !serve.server.dev,
            webhook_configurations: serve.registration.webhook_configurations,
            tls_cert: path(serve.server.tls_cert.as_deref()),
            config: path(serve.server.config.as_deref()),
        })
    }

    fn policy(&self, args: &[String], config_text: Option<&str>) -> Result<Policy, String> {
        let serve = Self::parse(args)?;
        let file = match (config_text, &serve.server.config) {
            (Some(text), Some(path)) => Some(
                jobwarden_server::parse_policy(text, path)
                    .map_err(|e| format!("{:#}", anyhow::Error::from(e)))?,
            ),
            _ => None,
        };
        serve
            .server
            .policy_over(file)
            .map_err(|e| format!("{:#}", anyhow::Error::from(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &[&str]) -> Vec<String> {
        line.iter().map(|a| (*a).to_owned()).collect()
    }

    /// deploy/'s and the chart's Deployments, read as `serve` reads its own arguments.
    #[test]
    fn a_deployments_serve_arguments_read_as_serve_reads_them() {
        let deploy = args(&[
            "--tls-cert=/etc/jobwarden/tls/tls.crt",
            "--tls-key=/etc/jobwarden/tls/tls.key",
            "--config=/etc/jobwarden/policy/policy.yaml",
            "--log-format=json",
        ]);
        assert_eq!(
            ServeLine.flags(&deploy),
            Ok(ServeFlags {
                serves_webhook: true,
                runs_controller: true,
                secures_metrics: true,
                webhook_configurations: "jobwarden".to_owned(),
                tls_cert: Some("/etc/jobwarden/tls/tls.crt".to_owned()),
                config: Some("/etc/jobwarden/policy/policy.yaml".to_owned()),
            })
        );
        let controller = args(&[
            "--no-webhook",
            "--metrics-secure=false",
            "--webhook-configurations",
            "release-jobwarden",
        ]);
        let flags = ServeLine
            .flags(&controller)
            .expect("the controller's flags");
        assert!(!flags.serves_webhook && flags.runs_controller && !flags.secures_metrics);
        assert_eq!(flags.webhook_configurations, "release-jobwarden");
        assert!(
            ServeLine
                .flags(&args(&["--no-such-flag"]))
                .is_err_and(|e| e.contains("--no-such-flag"))
        );
    }

    /// The policy file's text, with what the flags add, as `serve` would run with them.
    #[test]
    fn the_policy_is_the_files_with_the_flags_added() {
        let line = args(&[
            "--tls-cert=c",
            "--tls-key=k",
            "--config=/etc/jobwarden/policy/policy.yaml",
            "--allowed-managed-by=example.com/a",
        ]);
        let policy = ServeLine
            .policy(&line, Some("resume:\n  groups: [batch-admins]\n"))
            .expect("a policy");
        assert_eq!(policy.resume.groups, ["batch-admins"]);
        assert_eq!(policy.allowed_managed_by, ["example.com/a"]);
        assert_eq!(
            ServeLine.policy(&args(&["--tls-cert=c", "--tls-key=k"]), None),
            Ok(Policy::default())
        );
        assert!(
            ServeLine
                .policy(&line, Some("resume: [oops"))
                .is_err_and(|e| e.contains("/etc/jobwarden/policy/policy.yaml"))
        );
    }
}
