//! `jobwarden simulate`: a Job manifest checked as `check` checks it, then run offline by the
//! controller's own sync against the in-memory API server, its pods ending as a scenario says
//! (a file, `--pod` flags, a default). Prints the story as text, JSON or an SVG timeline.
//! Reads files only; never talks to a cluster.

use std::io::Read;
use std::time::Duration;

use clap::Args;
use jobwarden_audit::Violation;
use jobwarden_rules::seconds;
use jobwarden_simulator::{
    Limits, Scenario, ScenarioError, SimulationError, Story, scenario, simulate, text, timeline,
};
use serde_json::Value;

use super::Outcome;
use super::check::check_create;
use super::input;
use super::output::Output;

/// The largest Job or scenario file read: kube-apiserver's own request limit (3 MiB).
const MAX_INPUT: u64 = 3 * 1024 * 1024;

const OUTCOMES: &str = "\
An OUTCOME is one of succeeded, failed, exit:CODE, disrupted, deleted, running, with any of
exit:CONTAINER=CODE, condition:TYPE[=STATUS], after:DURATION (10s unless given), comma-separated.
PODS are completion indexes (Indexed Jobs) or positions in creation order from 0 (NonIndexed),
written like succeededIndexes (3, 1-5, 0,2,4-6); ATTEMPTS count an index's pods from 1.

Exit status: 0 the Job finished, 1 the Job is invalid, 2 unreadable input or a Job that cannot
be simulated, 3 the story stopped before the Job finished. See docs/simulate.md.";

/// How the story is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum StoryFormat {
    /// The story for people: a line per step, then the final status as YAML.
    Text,
    /// The same story as one JSON document, for scripts.
    Json,
    /// The same story drawn: one self-contained SVG, a lane per index (or pod slot) and a
    /// bar per pod.
    Svg,
}

#[derive(Debug, Args)]
#[command(after_help = OUTCOMES)]
pub struct SimulateArgs {
    /// The Job manifest (YAML or JSON; `-` reads stdin). It must hold exactly one batch/v1 Job.
    job: String,
    /// A scenario file (YAML or JSON) with `description`, `default` and `pods` (a list of
    /// PODS=OUTCOME entries).
    #[arg(long, value_name = "FILE")]
    scenario: Option<String>,
    /// What becomes of some pods: PODS[@ATTEMPTS]=OUTCOME, for example 3=exit:42,
    /// 0@1=disrupted,after:30s or 1-4=running. Repeatable; tried in order, before the
    /// scenario file's entries; the first that names a pod decides.
    #[arg(long = "pod", value_name = "PODS=OUTCOME")]
    pods: Vec<String>,
    /// What becomes of a pod no entry names [default: succeeded,after:10s, or the scenario
    /// file's default].
    #[arg(long, value_name = "OUTCOME")]
    default: Option<String>,
    #[arg(short = 'o', long, value_enum, default_value_t = StoryFormat::Text)]
    output: StoryFormat,
    /// Stop when nothing has ended the Job after this much virtual time.
    #[arg(long, value_name = "DURATION", default_value = "24h")]
    max_time: String,
    /// Stop after the clock has moved this many times.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    max_steps: usize,
    /// Stop once the controller has created more than this many pods.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    max_pods: u64,
}

pub fn run(args: &SimulateArgs) -> Outcome {
    let limits = match limits(args) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("jobwarden simulate: {e}");
            return Outcome::Unreadable;
        }
    };
    let job = match read_job(&args.job) {
        Ok(job) => job,
        Err(e) => {
            eprintln!("{}: {e:#}", args.job);
            return Outcome::Unreadable;
        }
    };
    let scenario = match read_scenario(args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("jobwarden simulate: {e:#}");
            return Outcome::Unreadable;
        }
    };
    let name = job
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let label = format!("{}: Job {name:?}", args.job);
    if let Err(outcome) = admitted(&job, &label) {
        return outcome;
    }
    let story = match simulate(&job, &scenario, &limits) {
        Ok(story) => story,
        Err(e @ SimulationError::Invalid(_)) => {
            eprintln!("{label}: {e}");
            return Outcome::Rejected;
        }
        Err(e) => {
            eprintln!("{label}: {e}");
            return Outcome::Unreadable;
        }
    };
    let out = match rendered(args.output, &story) {
        Ok(out) => out,
        Err(outcome) => return outcome,
    };
    if let Err(e) = Output::print(out.as_bytes()) {
        eprintln!("jobwarden simulate: cannot write the story: {e}");
        return Outcome::Unreadable;
    }
    if story.end.finished {
        Outcome::Ok
    } else {
        Outcome::Unfinished
    }
}

/// The Job checked as `jobwarden check` checks it, its warnings printed; `Err`: it is
/// invalid (its errors printed, each line once).
fn admitted(job: &Value, label: &str) -> Result<(), Outcome> {
    let verdict = match check_create(job) {
        Ok(verdict) => verdict,
        Err(e) => {
            eprintln!("{label}: {e}");
            return Err(Outcome::Rejected);
        }
    };
    for warning in &verdict.warnings {
        eprintln!("Warning: {label}: {warning}");
    }
    if !verdict.errors.is_empty() {
        let mut printed = std::collections::HashSet::new();
        for e in verdict.errors.iter() {
            let line = Violation::of_spec_error(e).to_string();
            if printed.insert(line.clone()) {
                eprintln!("{label}: {line}");
            }
        }
        eprintln!("jobwarden simulate: the Job is invalid, as `jobwarden check` says");
        return Err(Outcome::Rejected);
    }
    Ok(())
}

/// The story in the format asked for.
fn rendered(format: StoryFormat, story: &Story) -> Result<String, Outcome> {
    Ok(match format {
        StoryFormat::Text => text::render(story),
        StoryFormat::Svg => timeline::svg(story),
        StoryFormat::Json => match serde_json::to_string_pretty(story) {
            Ok(json) => json + "\n",
            Err(e) => {
                eprintln!("jobwarden simulate: cannot encode the story: {e}");
                return Err(Outcome::Unreadable);
            }
        },
    })
}

fn limits(args: &SimulateArgs) -> Result<Limits, String> {
    let max_time: Duration =
        seconds::parse(&args.max_time).map_err(|e| format!("--max-time: {e}"))?;
    Ok(Limits {
        max_time,
        max_steps: args.max_steps,
        max_pods: args.max_pods,
    })
}

/// A file, or stdin for `-`, refused beyond `MAX_INPUT` bytes.
fn read_bounded(path: &str) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let read = if path == "-" {
        std::io::stdin().take(MAX_INPUT + 1).read_to_end(&mut bytes)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(MAX_INPUT + 1).read_to_end(&mut bytes))
    };
    read.map_err(|e| anyhow::anyhow!("cannot read {path}: {e}"))?;
    if bytes.len() as u64 > MAX_INPUT {
        anyhow::bail!("larger than {MAX_INPUT} bytes");
    }
    Ok(bytes)
}

fn read_job(path: &str) -> anyhow::Result<Value> {
    let docs = input::documents(&read_bounded(path)?)?;
    let total = docs.len();
    let mut jobs: Vec<Value> = docs.into_iter().filter(input::is_job).collect();
    if total > jobs.len() {
        eprintln!(
            "{path}: skipping {} documents that are not batch/v1 Jobs",
            total - jobs.len()
        );
    }
    match (jobs.pop(), jobs.is_empty()) {
        (Some(job), true) => Ok(job),
        (None, _) => anyhow::bail!("no batch/v1 Job in the input"),
        (Some(_), false) => anyhow::bail!(
            "{} Jobs in the input: simulate tells one Job's story at a time",
            jobs.len() + 1
        ),
    }
}

/// The file's scenario, then the `--pod` entries in front of its own and `--default` in place
/// of its default.
fn read_scenario(args: &SimulateArgs) -> anyhow::Result<Scenario> {
    let from_file = match &args.scenario {
        None => Scenario::default(),
        Some(path) => {
            let mut docs = input::documents(&read_bounded(path)?)
                .map_err(|e| anyhow::anyhow!("{path}: {e:#}"))?;
            if docs.len() != 1 {
                anyhow::bail!(
                    "{path}: a scenario file holds one document, this one holds {}",
                    docs.len()
                );
            }
            let doc = docs.pop().unwrap_or(Value::Null);
            Scenario::from_document(&doc).map_err(|e| anyhow::anyhow!("{path}: {e}"))?
        }
    };
    let entries = args
        .pods
        .iter()
        .map(|p| scenario::parse_entry(p))
        .collect::<Result<Vec<_>, ScenarioError>>()
        .map_err(|e| anyhow::anyhow!("--pod {e}"))?;
    let mut scenario = from_file
        .with_entries_first(entries)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(default) = &args.default {
        scenario.default =
            scenario::parse_outcome(default).map_err(|e| anyhow::anyhow!("--default: {e}"))?;
    }
    Ok(scenario)
}
