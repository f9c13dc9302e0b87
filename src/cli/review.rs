//! `jobwarden review`: one AdmissionReview request in, the exact response bytes the webhook
//! would send out. How an operator reproduces a denial without a cluster.

use std::path::Path;

use clap::Args;
use jobwarden_admission::{Context, Policy, Reviewer, Webhook};

use super::Outcome;
use super::input;
use super::output::Output;

#[derive(Debug, Args)]
pub struct ReviewArgs {
    /// Answer as the mutating webhook (/mutate) instead of the validating one.
    #[arg(long)]
    mutate: bool,
    /// Policy configuration file (YAML), as given to `serve --config`.
    #[arg(long, value_name = "FILE")]
    config: Option<String>,
    /// The AdmissionReview request (JSON); `-` or nothing reads stdin.
    #[arg(default_value = "-")]
    file: String,
}

pub fn run(args: &ReviewArgs) -> Outcome {
    let policy = match &args.config {
        None => Policy::default(),
        Some(path) => match jobwarden_server::load_policy_file(Path::new(path)) {
            Ok(policy) => policy,
            Err(e) => {
                eprintln!("jobwarden review: {:#}", anyhow::Error::from(e));
                return Outcome::Unreadable;
            }
        },
    };
    let body = match input::read(&args.file) {
        Ok(body) => body,
        Err(e) => {
            eprintln!("jobwarden review: {e:#}");
            return Outcome::Unreadable;
        }
    };
    let webhook = if args.mutate {
        Webhook::Mutate
    } else {
        Webhook::Validate
    };
    match Reviewer::new(policy).review(webhook, &body, &Context::default()) {
        Ok(reviewed) => {
            if Output::print(&reviewed.body).is_err() {
                return Outcome::Unreadable;
            }
            if reviewed.allowed {
                Outcome::Ok
            } else {
                Outcome::Rejected
            }
        }
        Err(e) => {
            eprintln!("jobwarden review: {}: {e}", args.file);
            Outcome::Unreadable
        }
    }
}
