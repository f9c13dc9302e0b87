//! A report as text, grouped and marked like `linkerd check`'s: a line per check, and under
//! each warning and failure the hint and the troubleshooting link. Pure.

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
            if matches!(check.status, Status::Warning | Status::Error) {
                if let Some(hint) = &check.hint {
                    let _ = writeln!(out, "    {hint}");
                }
                let _ = writeln!(out, "    see {}", check.kind.doc());
            }
        }
        out.push('\n');
    }
    let (errors, warnings) = (report.count(Status::Error), report.count(Status::Warning));
    let summary = match report.verdict() {
        Verdict::Unreachable => "× cannot reach the API server".to_owned(),
        Verdict::Failed => format!(
            "× {errors} check{} failed{}",
            if errors == 1 { "" } else { "s" },
            with_warnings(warnings)
        ),
        Verdict::Healthy if warnings > 0 => format!("‼ healthy{}", with_warnings(warnings)),
        Verdict::Healthy => "✔ healthy".to_owned(),
    };
    out.push_str(&summary);
    out.push('\n');
    out
}

fn with_warnings(n: usize) -> String {
    match n {
        0 => String::new(),
        1 => ", 1 warning".to_owned(),
        n => format!(", {n} warnings"),
    }
}
