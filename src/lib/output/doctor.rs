//! Renderer for `dpctl doctor`: one row per finding (result, check, subject,
//! evidence) with its hint on the line below, and a summary line; or JSON.

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

/// Renders the report. In the table, paths inside the device-plugin
/// directory are shown by name (JSON keeps them whole) and each hint sits on
/// its own line under its finding.
pub fn report(w: &mut dyn Write, format: Format, r: &DoctorReport) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, r);
    }
    let dir = r.dir.trim_end_matches('/');
    let prefix = format!("{dir}/");
    // The kubelet's root dir (`/var/lib/kubelet/`): pod-resources and plugins_registry live there.
    let parent = std::path::Path::new(dir).parent().map(|p| format!("{}/", p.display())).filter(|p| p.len() > 1);
    let mut t = table(["RESULT", "CHECK", "SUBJECT", "EVIDENCE"]);
    for f in &r.findings {
        let subject = Some(f.subject.as_str())
            .filter(|s| *s == dir)
            .or_else(|| f.subject.strip_prefix(&prefix))
            .or_else(|| parent.as_deref().and_then(|p| f.subject.strip_prefix(p)))
            .filter(|s| !s.is_empty())
            .unwrap_or(&f.subject);
        t.add_row([word(f.severity), f.check.clone(), subject.to_string(), f.evidence.clone()]);
        if let Some(hint) = f.hint.as_deref().filter(|h| f.severity != Severity::Ok && !h.is_empty()) {
            t.add_row([String::new(), String::new(), String::new(), format!("{} {hint}", "hint:".bold())]);
        }
    }
    write_table(w, &t)?;
    let (ok, warn, err) = r.counts();
    writeln!(
        w,
        "\n{} finding(s): {ok} ok, {warn} warning(s), {err} error(s) in {} ms ({})",
        r.findings.len(),
        r.took_ms,
        r.dir
    )
}
