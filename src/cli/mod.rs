//! The command line: `check` and `review` run the rules offline; `audit` runs them over the
//! Jobs stored in a cluster; `explain` tells a live Job's story, read from the cluster;
//! `simulate` runs the controller offline over scripted pod outcomes; `serve` runs the webhook
//! and the reconcile loop; `doctor` checks a cluster before and after installing; `workers`
//! shows the dispatcher's workers and the room on each. Exit codes
//! follow the contract in DESIGN.md: 0 fine, 1 denied or invalid (a check failed), 2 unreadable
//! input (no API server), and for `simulate`, 3 unfinished.

mod audit;
mod check;
mod doctor;
mod explain;
mod input;
mod output;
mod registered_webhooks;
mod review;
mod serve;
mod simulate;
mod webhooks;
mod worker_access;
mod workers;

use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

/// The commit this binary was built from (build.rs), "unknown" without git.
pub const REVISION: &str = env!("JOBWARDEN_REVISION");

#[derive(Debug, Parser)]
#[command(
    name = "jobwarden",
    version,
    // `--version` names the commit too (build.rs): what `doctor` and the image's revision
    // label are compared with. `-V` stays the bare version that scripts cut the second word of.
    long_version = concat!(
        env!("CARGO_PKG_VERSION"),
        " (revision ",
        env!("JOBWARDEN_REVISION"),
        ")"
    ),
    about = "Guards and runs Kubernetes batch/v1 Jobs",
    after_help = KUBECTL_PLUGIN_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check Job manifests (YAML or JSON, multi-document; `-` for stdin) as kube-apiserver
    /// would on create, or on update with --old.
    Check(check::CheckArgs),
    /// Read one AdmissionReview request and print the response the webhook would send.
    Review(review::ReviewArgs),
    /// List the Jobs stored in a cluster that the rules would deny today (kubeconfig or
    /// in-cluster config, like kubectl).
    Audit(audit::AuditArgs),
    /// Tell a live Job's story from the cluster, read-only: who runs it, which pod failure
    /// policy rule each failed pod matched, what it waits for now.
    Explain(explain::ExplainArgs),
    /// Run a Job manifest offline through the controller's own sync, its pods ending as a
    /// scenario says, and print the Job's story.
    Simulate(simulate::SimulateArgs),
    /// Run the admission webhook (HTTPS) and, when a cluster is reachable, the Job controller.
    Serve(Box<serve::ServeCommand>),
    /// Print the webhook configurations a policy needs: the requests whose answer jobwarden
    /// can change, and no others.
    Webhooks(webhooks::WebhooksArgs),
    /// Is this cluster ready for jobwarden (--pre), and is jobwarden healthy in it: grouped
    /// checks, each failure with a hint and a troubleshooting link.
    Doctor(doctor::DoctorArgs),
    /// The dispatcher's workers, read-only: whether each answers, its schedulable Nodes and
    /// the cpu, memory and GPUs free there, the Jobs placed on it; and the Jobs waiting for a
    /// worker, by reason.
    Workers(workers::WorkersArgs),
}

/// The command line, its usage and errors naming the binary as it was called: `kubectl
/// jobwarden` when kubectl runs it as its plugin (kubectl executes `kubectl-jobwarden` from the
/// PATH with that path as argv[0]).
fn parse() -> Cli {
    let mut command = Cli::command();
    let invoked_as = std::env::args_os()
        .next()
        .map(std::path::PathBuf::from)
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()));
    if invoked_as.as_deref() == Some(KUBECTL_PLUGIN) {
        command = command.bin_name("kubectl jobwarden");
    }
    let matches = command.get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// How `check` and `audit` print what they find.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// One line per violation, kubectl-style.
    Text,
    /// One JSON object per violation and line, for scripts and CI annotations.
    Json,
}

/// Exit statuses: `check`, `review` and `audit` use the first three (`audit`: 2 when the cluster
/// could not be read); `simulate` also 3, when the story stopped before the Job finished;
/// `serve` exits 1 when it cannot run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    Ok = 0,
    Rejected = 1,
    Unreadable = 2,
    Unfinished = 3,
}

impl From<Outcome> for ExitCode {
    fn from(o: Outcome) -> Self {
        ExitCode::from(o as u8)
    }
}

/// The file name kubectl looks for on the PATH to run `kubectl jobwarden`.
const KUBECTL_PLUGIN: &str = "kubectl-jobwarden";

const KUBECTL_PLUGIN_HELP: &str = "\
As a kubectl plugin: put the binary on the PATH as kubectl-jobwarden (a copy or a symlink), then
run `kubectl jobwarden check|review|audit|simulate|explain|doctor|workers ...`. kubectl passes
the arguments on unchanged; `audit`, `explain`, `doctor` and `workers` take --kubeconfig and
--context after the subcommand (`kubectl jobwarden doctor --context prod`).";

/// Runs a command's `work` on a runtime of one thread; `Unreadable`, said on stderr, when
/// none can be started.
fn run_on_runtime(command: &str, work: impl Future<Output = Outcome>) -> Outcome {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(work),
        Err(e) => {
            eprintln!("jobwarden {command}: cannot start the runtime: {e}");
            Outcome::Unreadable
        }
    }
}

pub fn main() -> ExitCode {
    let cli = parse();
    let outcome = match cli.command {
        Command::Check(args) => check::run(&args),
        Command::Review(args) => review::run(&args),
        Command::Audit(args) => audit::run(&args),
        Command::Simulate(args) => simulate::run(&args),
        Command::Explain(args) => explain::run(&args),
        Command::Serve(args) => serve::run(*args),
        Command::Webhooks(args) => webhooks::run(&args),
        Command::Doctor(args) => doctor::run(&args),
        Command::Workers(args) => workers::run(&args),
    };
    outcome.into()
}
