//! `jobwarden audit`: the Jobs already stored in a cluster that the rules would deny today,
//! read page by page from the API and printed one violation per line (or one JSON object per
//! violation). Progress goes to stderr, and only when stderr is a terminal.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use jobwarden_admission::Policy;
use jobwarden_audit::finding::text_line;
use jobwarden_audit::{
    Finding, JobLister, JobRef, ListScope, PodEvidence, audit_job, connect::connect,
    stuck_delegation,
};
use k8s_openapi::jiff::Timestamp;

use super::output::Output;
use super::{Outcome, OutputFormat};

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Only this namespace (default: every namespace).
    #[arg(short = 'n', long, value_name = "NAMESPACE", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    namespace: Option<String>,
    /// Only Jobs whose labels match this selector (`team=a,tier in (batch)`), as kubectl's -l.
    #[arg(short = 'l', long, value_name = "SELECTOR", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    selector: Option<String>,
    /// Policy configuration file (YAML), as given to `serve --config`: adds the policy's rules
    /// (`allowedManagedBy`).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// `text`: one line per violation; `json`: one JSON object per violation and line.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Text)]
    output: OutputFormat,
    /// Jobs per LIST request (`limit`), like kubectl's --chunk-size.
    #[arg(long, value_name = "N", default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..))]
    page_size: u32,
    /// Report a Job delegated to another controller (`spec.managedBy`) that shows no sign of
    /// running it this long after its creation: not suspended, no status.startTime, no pod
    /// counted in its status (`30s`, `2m`, `1h`); `0s` reports every such Job at once.
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = jobwarden_rules::seconds::parse)]
    stuck_after: Duration,
    /// The kubeconfig file (default: KUBECONFIG, ~/.kube/config, else the in-cluster service
    /// account).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
}

pub fn run(args: &AuditArgs) -> Outcome {
    let policy = match &args.config {
        None => Policy::default(),
        Some(path) => match jobwarden_server::load_policy_file(path) {
            Ok(policy) => policy,
            Err(e) => {
                eprintln!("jobwarden audit: {:#}", anyhow::Error::from(e));
                return Outcome::Unreadable;
            }
        },
    };
    super::run_on_runtime("audit", audit(args, &policy))
}

/// Counts for the summary line and the exit status.
#[derive(Default)]
struct Tally {
    jobs: usize,
    offending_jobs: usize,
    violations: usize,
    unreadable: usize,
}

impl Tally {
    /// The exit status of a complete pass.
    fn outcome(&self) -> Outcome {
        if self.unreadable > 0 {
            Outcome::Unreadable
        } else if self.violations > 0 {
            Outcome::Rejected
        } else {
            Outcome::Ok
        }
    }
}

async fn audit(args: &AuditArgs, policy: &Policy) -> Outcome {
    let client = match connect(args.kubeconfig.as_deref(), args.context.as_deref()).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("jobwarden audit: {e}");
            return Outcome::Unreadable;
        }
    };
    let scope = ListScope {
        namespace: args.namespace.clone(),
        label_selector: args.selector.clone(),
        page_size: args.page_size,
    };
    let mut lister = JobLister::new(client, scope);
    let mut progress = Progress::new();
    let mut tally = Tally::default();
    let mut out = std::io::BufWriter::new(Output::stdout());
    let outcome = loop {
        let page = match lister.next_page().await {
            Ok(Some(page)) => page,
            Ok(None) => break None,
            Err(e) => {
                break Some(format!(
                    "cannot list Jobs: {}",
                    jobwarden_audit::connect::with_causes(&e)
                ));
            }
        };
        if let Some(message) = &page.after_expiry {
            progress.clear();
            eprintln!(
                "jobwarden audit: the list went on from a newer snapshot after its continue token expired (Jobs created or deleted meanwhile may be missed): {message}"
            );
        }
        for raw in &page.items {
            if audit_one(raw, args, policy, &mut tally, &mut progress, &mut out).is_err() {
                return Outcome::Unreadable;
            }
        }
        if out.flush().is_err() {
            return Outcome::Unreadable;
        }
        progress.show(&tally, page.remaining_item_count);
    };
    progress.clear();
    if out.flush().is_err() {
        return Outcome::Unreadable;
    }
    summarize(args, &tally, outcome.as_deref());
    if outcome.is_some() {
        return Outcome::Unreadable;
    }
    tally.outcome()
}

/// One Job audited: its violations written to `out`, one a line, and counted; `Err` when
/// `out` cannot be written.
fn audit_one(
    raw: &serde_json::Value,
    args: &AuditArgs,
    policy: &Policy,
    tally: &mut Tally,
    progress: &mut Progress,
    out: &mut impl Write,
) -> std::io::Result<()> {
    tally.jobs += 1;
    let job = JobRef::of(raw);
    match audit_job(raw, policy) {
        Ok(mut violations) => {
            // Only the Job is read: its status stands for its pods.
            let stuck = stuck_delegation(
                raw,
                PodEvidence::StatusOnly,
                Timestamp::now(),
                args.stuck_after,
            );
            violations.extend(stuck.map(|s| s.violation()));
            tally.offending_jobs += usize::from(!violations.is_empty());
            tally.violations += violations.len();
            for v in &violations {
                let line = match args.output {
                    OutputFormat::Text => text_line(job, v),
                    OutputFormat::Json => Finding::new(job, v).to_json_line(),
                };
                writeln!(out, "{line}")?;
            }
        }
        Err(e) => {
            tally.unreadable += 1;
            progress.clear();
            eprintln!("{}: cannot audit: {e}", job.label());
        }
    }
    Ok(())
}

/// The summary line on stderr, after why the pass stopped short (`incomplete`) if it did.
fn summarize(args: &AuditArgs, tally: &Tally, incomplete: Option<&str>) {
    let scope = match &args.namespace {
        Some(ns) => format!("in namespace {ns:?}"),
        None => "in all namespaces".to_owned(),
    };
    if let Some(error) = incomplete {
        eprintln!("jobwarden audit: {error}");
    }
    eprintln!(
        "jobwarden audit: {}{} violation{} in {} of {} Job{}{} {scope}{}",
        if incomplete.is_some() {
            "incomplete: "
        } else {
            ""
        },
        tally.violations,
        plural(tally.violations),
        tally.offending_jobs,
        tally.jobs,
        plural(tally.jobs),
        if incomplete.is_some() { " read" } else { "" },
        if tally.unreadable > 0 {
            format!("; {} could not be read", tally.unreadable)
        } else {
            String::new()
        }
    );
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A one-line counter on stderr, rewritten in place; silent unless stderr is a terminal, so
/// logs and pipes only ever see the final summary.
struct Progress {
    on: bool,
    shown: bool,
}

impl Progress {
    fn new() -> Self {
        Progress {
            on: std::io::stderr().is_terminal(),
            shown: false,
        }
    }

    fn show(&mut self, tally: &Tally, remaining: Option<i64>) {
        if !self.on {
            return;
        }
        let left = remaining
            .filter(|r| *r > 0)
            .map(|r| format!(", about {r} to go"))
            .unwrap_or_default();
        eprint!(
            "\r\x1b[2Kaudited {} Jobs{left}; {} violations so far",
            tally.jobs, tally.violations
        );
        self.shown = true;
    }

    fn clear(&mut self) {
        if self.shown {
            eprint!("\r\x1b[2K");
            self.shown = false;
        }
    }
}
