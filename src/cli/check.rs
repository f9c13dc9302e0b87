//! `jobwarden check`: Job manifests checked as a server-side dry run would — upstream's
//! defaulting and create-time preparation (generated selector and labels), then validation —
//! or, with `--old`, as an update of the stored Job. One line per error, kubectl-style, or with
//! `-o json` one JSON object per error (the shape `audit -o json` prints, plus the file).

use clap::Args;
use jobwarden_audit::{Finding, JobRef, Rule, Violation};
use jobwarden_rules::{
    DecodeError, ErrorList, JobObject, defaults, dispatch_annotations, pod_timing,
    success_rule_settings, warnings, well_known,
};
use serde_json::{Value, json};
use std::io::Write as _;

use super::input;
use super::output::Output;
use super::{Outcome, OutputFormat};

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The stored Job (for example `kubectl get job NAME -o yaml`): check the input as an
    /// update of it.
    #[arg(long, value_name = "FILE")]
    old: Option<String>,
    /// `text`: a line per Job and error; `json`: one JSON object per error and line (file,
    /// namespace, name, uid, rule, field, message), nothing for a valid Job.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Text)]
    output: OutputFormat,
    /// Manifests to check; `-` reads stdin.
    #[arg(required = true)]
    files: Vec<String>,
}

/// A Job found in the input, with where it came from.
struct Found {
    file: String,
    raw: Value,
}

impl Found {
    fn label(&self) -> String {
        let name = self
            .raw
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        format!("{}: Job {name:?}", self.file)
    }
}

pub fn run(args: &CheckArgs) -> Outcome {
    let mut jobs = Vec::new();
    for file in &args.files {
        match read_jobs(file) {
            Ok(found) => jobs.extend(found),
            Err(e) => {
                eprintln!("{file}: {e:#}");
                return Outcome::Unreadable;
            }
        }
    }
    if jobs.is_empty() {
        eprintln!("jobwarden check: no batch/v1 Job in the input");
        return Outcome::Unreadable;
    }
    let old = match &args.old {
        None => None,
        Some(path) => match read_jobs(path) {
            Ok(mut found) if found.len() == 1 => found.pop(),
            Ok(found) => {
                eprintln!("{path}: --old needs exactly one Job, found {}", found.len());
                return Outcome::Unreadable;
            }
            Err(e) => {
                eprintln!("{path}: {e:#}");
                return Outcome::Unreadable;
            }
        },
    };
    let mut outcome = Outcome::Ok;
    let mut out = Output::stdout();
    for job in &jobs {
        let result = match &old {
            None => check_create(&job.raw),
            Some(old) => check_update(&job.raw, &old.raw),
        };
        let label = job.label();
        if let Ok(verdict) = &result {
            for warning in &verdict.warnings {
                eprintln!("Warning: {label}: {warning}");
            }
        }
        let violations: Vec<Violation> = match &result {
            Ok(verdict) => verdict
                .errors
                .iter()
                .map(Violation::of_spec_error)
                .collect(),
            Err(e) => vec![unreadable_part(e)],
        };
        if !violations.is_empty() {
            outcome = Outcome::Rejected;
        }
        let written = match (args.output, &result) {
            (OutputFormat::Text, Err(e)) => writeln!(out, "{label}: {e}"),
            (OutputFormat::Text, Ok(_)) => write_text(&mut out, &label, &violations),
            (OutputFormat::Json, _) => {
                let job_ref = JobRef::of(&job.raw);
                let mut printed = std::collections::HashSet::new();
                violations
                    .iter()
                    .filter(|v| printed.insert(*v))
                    .try_for_each(|v| {
                        let finding = Finding::new(job_ref, v).in_file(&job.file);
                        writeln!(out, "{}", finding.to_json_line())
                    })
            }
        };
        if let Err(e) = written {
            eprintln!("jobwarden check: cannot write the findings: {e}");
            return Outcome::Unreadable;
        }
    }
    outcome
}

/// kubectl's lines: the errors, each once, or `valid`.
fn write_text(
    out: &mut impl std::io::Write,
    label: &str,
    violations: &[Violation],
) -> std::io::Result<()> {
    if violations.is_empty() {
        return writeln!(out, "{label}: valid");
    }
    let mut printed = std::collections::HashSet::new();
    for v in violations {
        let line = v.to_string();
        if printed.insert(line.clone()) {
            writeln!(out, "{label}: {line}")?;
        }
    }
    Ok(())
}

/// A manifest that cannot be read as a Job, as a violation of the part that does not decode.
fn unreadable_part(e: &DecodeError) -> Violation {
    match e {
        DecodeError::Part { part, source } => Violation {
            rule: if *part == "status" {
                Rule::Status
            } else {
                Rule::Spec
            },
            field: (*part).to_owned(),
            message: format!("cannot decode: {source}"),
        },
        DecodeError::NotAnObject => Violation {
            rule: Rule::Spec,
            field: String::new(),
            message: e.to_string(),
        },
    }
}

fn read_jobs(file: &str) -> anyhow::Result<Vec<Found>> {
    let bytes = input::read(file)?;
    Ok(input::documents(&bytes)?
        .into_iter()
        .filter(|doc| {
            let keep = input::is_job(doc);
            if !keep {
                let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("?");
                eprintln!("{file}: skipping a {kind}: not a batch/v1 Job");
            }
            keep
        })
        .map(|raw| Found {
            file: file.to_owned(),
            raw,
        })
        .collect())
}

/// What kubectl and the apiserver fill in before validation ever runs.
fn as_submitted(raw: &Value) -> Value {
    let mut job = raw.clone();
    if let Some(meta) = job.get_mut("metadata").and_then(Value::as_object_mut) {
        if meta
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            meta.insert("namespace".into(), json!("default"));
        }
        let generate = meta
            .get("generateName")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if meta
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
            && let Some(prefix) = generate
        {
            meta.insert("name".into(), json!(format!("{prefix}abcde")));
        }
    }
    defaults::upstream_defaults(&mut job);
    job
}

/// Upstream's warnings on a create, and jobwarden's on annotations that will do nothing, as
/// the webhook gives them for its default controller and dispatcher names.
fn create_warnings(job: &JobObject<'_>) -> Vec<String> {
    let mut out = warnings::job_warnings(job, true);
    out.extend(success_rule_settings::warnings(
        job,
        well_known::JOBWARDEN_CONTROLLER_NAME,
    ));
    out.extend(pod_timing::warnings(
        job,
        well_known::JOBWARDEN_CONTROLLER_NAME,
    ));
    out.extend(dispatch_annotations::warnings(
        job,
        well_known::DISPATCHER_NAME,
    ));
    out
}

/// What validation found: the errors, and upstream's warnings (advice, never a denial).
pub(super) struct Verdict {
    pub(super) errors: ErrorList,
    pub(super) warnings: Vec<String>,
}

/// Also `simulate`'s check of the Job it is about to run.
pub(super) fn check_create(raw: &Value) -> Result<Verdict, jobwarden_rules::DecodeError> {
    let mut job = as_submitted(raw);
    defaults::prepare_for_create(&mut job);
    let job = JobObject::parse(&job)?;
    Ok(Verdict {
        errors: jobwarden_rules::validate_create(&job),
        warnings: create_warnings(&job),
    })
}

fn check_update(raw: &Value, old_raw: &Value) -> Result<Verdict, jobwarden_rules::DecodeError> {
    let mut old = as_submitted(old_raw);
    if old.pointer("/metadata/uid").is_none() {
        // A manifest rather than a stored object: give it what creating it would have.
        let status = old.get("status").cloned();
        defaults::prepare_for_create(&mut old);
        if let (Some(status), Some(root)) = (status, old.as_object_mut()) {
            root.insert("status".into(), status);
        }
    }
    let mut new = as_submitted(raw);
    defaults::prepare_for_update(&mut new, &old);
    let (new, old) = (JobObject::parse(&new)?, JobObject::parse(&old)?);
    Ok(Verdict {
        errors: jobwarden_rules::validate_update(&new, &old),
        warnings: warnings::job_warnings(&new, false),
    })
}
