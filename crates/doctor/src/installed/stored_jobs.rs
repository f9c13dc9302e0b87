//! What `jobwarden audit` would report today, counted: stored Jobs the rules (and the policy)
//! refuse, and Jobs delegated to a controller that shows no sign of running them. The same
//! decisions as the audit's (`audit_job`, `stuck_delegation`), one Job at a time so that a
//! large cluster is counted page by page. Pure: the clock is a parameter.

use std::time::Duration;

use jobwarden_admission::Policy;
use jobwarden_audit::{PodEvidence, audit_job, stuck_delegation};
use jobwarden_rules::seconds;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::catalogue::{NOBODY_RUNS, REFUSED_JOBS};
use crate::check::Check;

/// The counts so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub jobs: usize,
    /// Jobs with at least one violation.
    pub refused: usize,
    pub violations: usize,
    pub nobody_runs: usize,
    /// Jobs that do not decode as Jobs.
    pub unreadable: usize,
}

impl Tally {
    /// Counts one stored Job (raw, as listed).
    pub fn add(&mut self, job: &Value, policy: &Policy, now: Timestamp, stuck_after: Duration) {
        self.jobs += 1;
        match audit_job(job, policy) {
            Ok(violations) if !violations.is_empty() => {
                self.refused += 1;
                self.violations += violations.len();
            }
            Ok(_) => {}
            Err(_) => self.unreadable += 1,
        }
        if stuck_delegation(job, PodEvidence::StatusOnly, now, stuck_after).is_some() {
            self.nobody_runs += 1;
        }
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The two checks, from the tally of every stored Job (`Err`: the Jobs could not be listed).
pub fn stored_jobs(tally: &Result<Tally, String>, stuck_after: Duration) -> Vec<Check> {
    let t = match tally {
        Ok(t) => t,
        Err(e) => {
            return vec![
                REFUSED_JOBS.cannot_tell(
                    format!("cannot list the stored Jobs: {e}"),
                    "doctor counts what `jobwarden audit` reports, which needs list on jobs (batch) in every namespace",
                ),
                NOBODY_RUNS.skipped(format!("cannot tell (see \"{}\")", REFUSED_JOBS.name)),
            ];
        }
    };
    let of = plural(t.jobs, "stored Job", "stored Jobs");
    let unreadable = if t.unreadable > 0 {
        format!("; {} do not decode", t.unreadable)
    } else {
        String::new()
    };
    let refused = if t.refused > 0 || t.unreadable > 0 {
        REFUSED_JOBS.warning(
            format!(
                "{} of {of} break rules jobwarden enforces today ({}){unreadable}",
                t.refused,
                plural(t.violations, "violation", "violations")
            ),
            "`jobwarden audit` lists them (add --config POLICY for the policy's rules); the webhook refuses their next write until they are fixed",
        )
    } else if t.jobs == 0 {
        REFUSED_JOBS.ok("no Jobs are stored")
    } else {
        REFUSED_JOBS.ok(format!("none of {of} breaks a rule jobwarden enforces"))
    };
    let after = seconds::format(stuck_after.as_secs());
    let nobody = if t.nobody_runs > 0 {
        NOBODY_RUNS.warning(
            format!(
                "{} delegated (spec.managedBy) to a controller that shows no sign of running {} {after} after creation",
                plural(t.nobody_runs, "Job is", "Jobs are"),
                if t.nobody_runs == 1 { "it" } else { "them" }
            ),
            "`jobwarden audit` lists them (rule stuck_delegation); `jobwarden explain -n NAMESPACE JOB` tells one's story: is that controller installed, running, and spelled so?",
        )
    } else if t.jobs == 0 {
        NOBODY_RUNS.ok("no Jobs are stored")
    } else {
        NOBODY_RUNS.ok(format!(
            "none of {of} waits on a controller that shows no sign of running it"
        ))
    };
    vec![refused, nobody]
}
