//! A report as text, grouped and marked like `linkerd check`'s: a line per check, and under
//! each check that could not be made, warning and failure the hint and the troubleshooting
//! link; the last line counts each apart. Pure.

use std::fmt::Write as _;

use crate::check::{Report, Status, Verdict};

pub fn render(report: &Report) -> String {
    let mut out = String::new();
    for (group, checks) in report.grouped() {
        let title = group.title();
        let _ = writeln!(out, "{title}\n{}", "-".repeat(title.chars().count()));
        for check in checks {
            let _ = writeln!(
                out,
                "{} {}: {}",
                check.status.mark(),
                check.name(),
                check.message
            );
            if matches!(
                check.status,
                Status::Unknown | Status::Warning | Status::Error
            ) {
                if let Some(hint) = &check.hint {
                    let _ = writeln!(out, "    {hint}");
                }
                let _ = writeln!(out, "    see {}", check.kind.doc());
            }
        }
        out.push('\n');
    }
    let (errors, unknown, warnings) = (
        report.count(Status::Error),
        report.count(Status::Unknown),
        report.count(Status::Warning),
    );
    let summary = match report.verdict() {
        Verdict::Unreachable => "× cannot reach the API server".to_owned(),
        Verdict::Failed => format!(
            "× {}{}{}",
            checks(errors, "failed"),
            with_unknown(unknown),
            with_warnings(warnings)
        ),
        // Never "healthy": what could not be checked may be what is wrong.
        Verdict::Unchecked => format!(
            "? not all checked: {}{}",
            checks(unknown, "could not be made"),
            with_warnings(warnings)
        ),
        Verdict::Healthy if warnings > 0 => format!("‼ healthy{}", with_warnings(warnings)),
        Verdict::Healthy => "✔ healthy".to_owned(),
    };
    out.push_str(&summary);
    out.push('\n');
    out
}

/// `1 check failed`, `3 checks could not be made`.
fn checks(n: usize, what: &str) -> String {
    format!("{n} check{} {what}", if n == 1 { "" } else { "s" })
}

fn with_unknown(n: usize) -> String {
    match n {
        0 => String::new(),
        n => format!(", {n} could not be made"),
    }
}

fn with_warnings(n: usize) -> String {
    match n {
        0 => String::new(),
        1 => ", 1 warning".to_owned(),
        n => format!(", {n} warnings"),
    }
}
