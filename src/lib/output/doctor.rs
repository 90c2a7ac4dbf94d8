//! Renderer for `dpctl doctor`: one row per finding (result, check, subject,
//! evidence), hints under the table, and a summary line; or JSON.

use std::io::{self, Write};

use colored::Colorize;

use super::{Format, table, write_json, write_table};
use crate::doctor::{DoctorReport, Severity};

fn word(s: Severity) -> String {
    match s {
        Severity::Ok => "ok".green().to_string(),
        Severity::Warning => "warning".yellow().bold().to_string(),
        Severity::Error => "error".red().bold().to_string(),
    }
}

/// Renders the report.
pub fn report(w: &mut dyn Write, format: Format, r: &DoctorReport) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, r);
    }
    let mut t = table(["RESULT", "CHECK", "SUBJECT", "EVIDENCE"]);
    for f in &r.findings {
        t.add_row([word(f.severity), f.check.clone(), f.subject.clone(), f.evidence.clone()]);
    }
    write_table(w, &t)?;
    let hints: Vec<_> = r.findings.iter().filter(|f| f.severity != Severity::Ok && f.hint.is_some()).collect();
    if !hints.is_empty() {
        writeln!(w)?;
        for f in hints {
            writeln!(w, "{} {}: {}", "hint".bold(), f.subject, f.hint.as_deref().unwrap_or_default())?;
        }
    }
    let (ok, warn, err) = r.counts();
    writeln!(
        w,
        "\n{} finding(s): {ok} ok, {warn} warning(s), {err} error(s) in {} ms ({})",
        r.findings.len(),
        r.took_ms,
        r.dir
    )
}
