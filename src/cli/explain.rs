//! `jobwarden explain [-n NAMESPACE] JOB`: a live Job's story, read-only, with the caller's
//! kubeconfig. The reading is `jobwarden_explain::read` (and, for a dispatched Job,
//! `read_dispatch`, its worker reached as the policy says: the installed policy is found as
//! `doctor` finds it), the story `jobwarden_explain::explain`; this only parses flags, reads
//! the clock and prints.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use jobwarden_audit::connect::connect;
use jobwarden_explain::{Settings, Target};
use k8s_openapi::jiff::Timestamp;

use super::Outcome;
use super::output::Output;
use super::worker_access::{worker_access, worker_kubeconfig};

/// How the story is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum StoryFormat {
    /// The story for people.
    Text,
    /// The same as one JSON object (schema in docs/cli.md).
    Json,
    /// The same drawn: one self-contained SVG, a lane per index (or pod slot) and a bar per
    /// pod.
    Svg,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The Job's name.
    #[arg(value_name = "JOB")]
    job: String,
    /// The Job's namespace (default: the kubeconfig context's, else `default`).
    #[arg(short = 'n', long, value_name = "NAMESPACE", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    namespace: Option<String>,
    /// `text`: the story; `json`: the same as one JSON object (schema in docs/cli.md); `svg`:
    /// the same drawn as a timeline.
    #[arg(short = 'o', long, value_enum, default_value_t = StoryFormat::Text)]
    output: StoryFormat,
    /// Say that no controller is running a delegated Job (`spec.managedBy`) that shows no
    /// sign of it this long after its creation (`30s`, `2m`, `1h`).
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = jobwarden_rules::seconds::parse)]
    stuck_after: Duration,
    /// jobwarden's controller name, as given to `serve --controller-name`: Jobs with this
    /// `spec.managedBy` get jobwarden's Lease read.
    #[arg(long, value_name = "NAME", default_value = jobwarden_rules::well_known::JOBWARDEN_CONTROLLER_NAME)]
    controller_name: String,
    /// jobwarden's dispatcher's name (the policy's `dispatch.controllerName`): Jobs with this
    /// `spec.managedBy` get their worker and their copy's story there told.
    #[arg(long, value_name = "NAME", default_value = jobwarden_rules::well_known::DISPATCHER_NAME)]
    dispatcher_name: String,
    /// The namespace jobwarden is installed in: its Deployments, the policy ConfigMap they
    /// mount, the workers' kubeconfig Secrets, its Lease.
    #[arg(long, value_name = "NAMESPACE", default_value = "jobwarden-system",
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    jobwarden_namespace: String,
    /// The policy file (YAML) the dispatcher runs with, instead of the installed one (read from
    /// the ConfigMap jobwarden's controller Deployment mounts).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Your own kubeconfig for a worker (`east=~/.kube/east`), used as kubectl uses it, instead
    /// of the worker's kubeconfig Secret; repeatable. The dispatcher's own identity on a worker
    /// may not list pods or events there: yours tells the copy's pods.
    #[arg(long = "worker-kubeconfig", value_name = "NAME=FILE", value_parser = worker_kubeconfig)]
    worker_kubeconfigs: Vec<(String, PathBuf)>,
    /// Where jobwarden's Lease is (default: --jobwarden-namespace). Reading it is optional:
    /// without `get` on it, the story says so.
    #[arg(long, value_name = "NAMESPACE")]
    lease_namespace: Option<String>,
    #[arg(long, value_name = "NAME", default_value = jobwarden_rules::well_known::LEASE_NAME)]
    lease_name: String,
    /// The kubeconfig file (default: KUBECONFIG, ~/.kube/config, else the in-cluster service
    /// account).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
}

pub fn run(args: &ExplainArgs) -> Outcome {
    super::run_on_runtime("explain", explain(args))
}

async fn explain(args: &ExplainArgs) -> Outcome {
    let client = match connect(args.kubeconfig.as_deref(), args.context.as_deref()).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("jobwarden explain: {e}");
            return Outcome::Unreadable;
        }
    };
    let target = Target {
        namespace: args
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_owned()),
        name: args.job.clone(),
        controller_name: args.controller_name.clone(),
        lease_namespace: args
            .lease_namespace
            .clone()
            .unwrap_or_else(|| args.jobwarden_namespace.clone()),
        lease_name: args.lease_name.clone(),
    };
    let mut observed = match jobwarden_explain::read(&client, &target).await {
        Ok(observed) => observed,
        Err(e) => {
            eprintln!(
                "jobwarden explain: {}",
                jobwarden_audit::connect::with_causes(&e)
            );
            return Outcome::Unreadable;
        }
    };
    let dispatched = observed
        .job
        .pointer("/spec/managedBy")
        .and_then(|v| v.as_str())
        == Some(args.dispatcher_name.as_str());
    if dispatched {
        let access = worker_access(
            &client,
            &args.jobwarden_namespace,
            args.config.as_deref(),
            &args.worker_kubeconfigs,
        )
        .await;
        observed.dispatch =
            Some(jobwarden_explain::read_dispatch(&client, &observed.job, &access).await);
    }
    let settings = Settings {
        controller_name: args.controller_name.clone(),
        dispatcher_name: args.dispatcher_name.clone(),
        stuck_after: args.stuck_after,
    };
    let explanation = match jobwarden_explain::explain(&observed, Timestamp::now(), &settings) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("jobwarden explain: {e}");
            return Outcome::Unreadable;
        }
    };
    let out = match args.output {
        StoryFormat::Text => jobwarden_explain::render(&explanation),
        StoryFormat::Svg => jobwarden_explain::timeline::svg(&explanation),
        StoryFormat::Json => match serde_json::to_string_pretty(&explanation) {
            Ok(json) => json + "\n",
            Err(e) => {
                eprintln!("jobwarden explain: {e}");
                return Outcome::Unreadable;
            }
        },
    };
    if let Err(e) = Output::print(out.as_bytes()) {
        eprintln!("jobwarden explain: cannot write the story: {e}");
        return Outcome::Unreadable;
    }
    Outcome::Ok
}
