//! `jobwarden workers`: the fleet as the dispatcher places on it, read-only, with the caller's
//! kubeconfig (and, for each worker, the kubeconfig `explain` would use). The reading is
//! `jobwarden_explain::workers::read`, the view `workers::fleet`, the table `workers::text`;
//! this only parses flags and prints.

use std::path::PathBuf;

use clap::Args;
use jobwarden_audit::connect::{connect, with_causes};
use jobwarden_explain::workers::{self, read};

use super::Outcome;
use super::output::Output;
use super::worker_access::{worker_access, worker_kubeconfig};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FleetFormat {
    /// One line per worker, then the Jobs waiting for one.
    Text,
    /// The same as one JSON object (schema in docs/cli.md).
    Json,
}

#[derive(Debug, Args)]
pub struct WorkersArgs {
    /// `text`: a line per worker; `json`: the same as one JSON object.
    #[arg(short = 'o', long, value_enum, default_value_t = FleetFormat::Text)]
    output: FleetFormat,
    /// jobwarden's dispatcher's name (the policy's `dispatch.controllerName`): the Jobs with
    /// this `spec.managedBy` are counted.
    #[arg(long, value_name = "NAME", default_value = jobwarden_rules::well_known::DISPATCHER_NAME)]
    dispatcher_name: String,
    /// The namespace jobwarden is installed in: its Deployments, the policy ConfigMap they
    /// mount, the workers' kubeconfig Secrets.
    #[arg(long, value_name = "NAMESPACE", default_value = "jobwarden-system",
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    jobwarden_namespace: String,
    /// The policy file (YAML) the dispatcher runs with, instead of the installed one.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Your own kubeconfig for a worker (`east=~/.kube/east`), used as kubectl uses it, instead
    /// of the worker's kubeconfig Secret; repeatable.
    #[arg(long = "worker-kubeconfig", value_name = "NAME=FILE", value_parser = worker_kubeconfig)]
    worker_kubeconfigs: Vec<(String, PathBuf)>,
    /// The kubeconfig file (default: KUBECONFIG, ~/.kube/config, else the in-cluster service
    /// account).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
}

pub fn run(args: &WorkersArgs) -> Outcome {
    super::run_on_runtime("workers", show(args))
}

async fn show(args: &WorkersArgs) -> Outcome {
    let client = match connect(args.kubeconfig.as_deref(), args.context.as_deref()).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("jobwarden workers: {e}");
            return Outcome::Unreadable;
        }
    };
    // The management cluster first: without it nothing else is worth reading.
    let jobs = match read::read_jobs(&client, &args.dispatcher_name).await {
        Ok(jobs) => jobs,
        Err(e) => {
            eprintln!("jobwarden workers: {}", with_causes(&e));
            return Outcome::Unreadable;
        }
    };
    let access = worker_access(
        &client,
        &args.jobwarden_namespace,
        args.config.as_deref(),
        &args.worker_kubeconfigs,
    )
    .await;
    let policy = match &access.policy {
        Ok(policy) => policy.clone(),
        Err(e) => {
            eprintln!("jobwarden workers: cannot read the policy that names the workers: {e}");
            return Outcome::Unreadable;
        }
    };
    let readings = read::read_workers(&client, &policy, &access).await;
    let mut view = workers::fleet(&readings, &jobs, &args.dispatcher_name);
    view.teams = teams(&client, &policy, &readings, &jobs).await;
    let out = match args.output {
        FleetFormat::Text => workers::text::render(&view),
        FleetFormat::Json => match serde_json::to_string_pretty(&view) {
            Ok(json) => json + "\n",
            Err(e) => {
                eprintln!("jobwarden workers: {e}");
                return Outcome::Unreadable;
            }
        },
    };
    if let Err(e) = Output::print(out.as_bytes()) {
        eprintln!("jobwarden workers: cannot write the fleet: {e}");
        return Outcome::Unreadable;
    }
    Outcome::Ok
}

/// The teams of the fair order, from the policy, the Jobs and the workers' Nodes as read.
async fn teams(
    client: &kube::Client,
    policy: &jobwarden_admission::policy::Dispatch,
    readings: &[workers::view::WorkerReading],
    jobs: &workers::view::JobsRead,
) -> Vec<workers::teams::TeamView> {
    if policy.shares.is_empty() {
        return Vec::new();
    }
    let namespaces = read::team_namespaces(client, &policy.shares).await;
    workers::teams::teams(&workers::teams::TeamsRead {
        shares: &policy.shares,
        jobs: &jobs.jobs,
        namespaces: &namespaces,
        fleet: workers::view::fleet_allocatable(readings),
        held: &jobs.held,
    })
}
