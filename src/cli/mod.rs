//! The command line: `check` and `review` run the rules offline; `serve` runs the webhook and
//! the reconcile loop. Exit codes follow the contract in DESIGN.md: 0 fine, 1 denied or
//! invalid, 2 unreadable input.

mod check;
mod input;
mod review;
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "jobwarden",
    version,
    about = "Guards and runs Kubernetes batch/v1 Jobs"
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
    /// Run the admission webhook (HTTPS) and, when a cluster is reachable, the Job controller.
    Serve(Box<jobwarden_server::ServeArgs>),
}

/// Exit statuses: `check` and `review` use all three; `serve` exits 1 when it cannot run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    Ok = 0,
    Rejected = 1,
    Unreadable = 2,
}

impl From<Outcome> for ExitCode {
    fn from(o: Outcome) -> Self {
        ExitCode::from(o as u8)
    }
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Check(args) => check::run(&args),
        Command::Review(args) => review::run(&args),
        Command::Serve(args) => serve::run(*args),
    };
    outcome.into()
}
