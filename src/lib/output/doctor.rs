//! Renderer for `dpctl doctor`: one row per finding (result, check, subject,
//! evidence) with its hint on the line below, and a summary line; or JSON.

use std::io::{self, Write};

use colored::Colorize;

use super::{Format, Streams, out_err, table, write_json, write_table, write_table_wrapped};
use crate::doctor::merge::MergedReport;
use crate::doctor::{DoctorReport, Severity};

fn word(s: Severity) -> String {
    match s {
        Severity::Ok => "ok".green().to_string(),
        Severity::Warning => "warning".yellow().bold().to_string(),
        Severity::Error => "error".red().bold().to_string(),
    }
}

/// A path inside the device-plugin directory by name, one under the
/// kubelet's root dir (`/var/lib/kubelet/`: pod-resources,
/// plugins_registry) from there; the directory itself and others whole.
fn short_subject<'a>(dir: &str, subject: &'a str) -> &'a str {
    let dir = dir.trim_end_matches('/');
    if subject == dir {
        return subject;
    }
    let prefix = format!("{dir}/");
    let parent = std::path::Path::new(dir).parent().map(|p| format!("{}/", p.display())).filter(|p| p.len() > 1);
    subject
        .strip_prefix(&prefix)
        .or_else(|| parent.as_deref().and_then(|p| subject.strip_prefix(p)))
        .filter(|s| !s.is_empty())
        .unwrap_or(subject)
}

/// A finding's subject as the table shows it: DRA findings whole (they
/// compare paths against the kubelet's root, which need not be the one the
/// device-plugin directory sits in), others by [`short_subject`].
fn shown_subject<'a>(dir: &str, f: &'a crate::doctor::Finding) -> &'a str {
    let whole = matches!(f.check.as_str(), "kubelet-root" | "dra" | "dra-checkpoint" | "dp-dra")
        || f.code.ends_with("outside-root");
    if whole { &f.subject } else { short_subject(dir, &f.subject) }
}

/// `hint: …` for a finding that has one (an ok finding has one only when
/// it names the next command, as `allocate` does).
fn hint_line(f: &crate::doctor::Finding) -> Option<String> {
    f.hint.as_deref().filter(|h| !h.is_empty()).map(|h| format!("{} {h}", "hint:".bold()))
}

/// Renders `dpctl doctor merge`: one row per node (worst first), then every
/// finding that is not ok with its node and hint; or JSON.
pub fn merged(w: &mut dyn Write, format: Format, m: &MergedReport) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, m);
    }
    let mut t = table(["NODE", "RESULT", "ERRORS", "WARNINGS", "OK", "KUBELET", "TOOK"]);
    for n in &m.nodes {
        t.add_row([
            n.node.clone(),
            word(n.worst),
            n.errors.to_string(),
            n.warnings.to_string(),
            n.ok.to_string(),
            n.kubelet_version.clone(),
            format!("{} ms", n.took_ms),
        ]);
    }
    write_table(w, &t)?;
    if !m.findings.is_empty() {
        writeln!(w)?;
        let mut t = table(["NODE", "RESULT", "CHECK", "SUBJECT", "EVIDENCE"]);
        let dirs: std::collections::BTreeMap<&str, &str> =
            m.nodes.iter().map(|n| (n.node.as_str(), n.dir.as_str())).collect();
        for nf in &m.findings {
            let f = &nf.finding;
            let dir = dirs.get(nf.node.as_str()).copied().unwrap_or_default();
            t.add_row([
                nf.node.clone(),
                word(f.severity),
                f.check.clone(),
                shown_subject(dir, f).to_string(),
                f.evidence.clone(),
            ]);
            if let Some(hint) = hint_line(f) {
                t.add_row([String::new(), String::new(), String::new(), String::new(), hint]);
            }
        }
        write_table_wrapped(w, &t)?;
    }
    let bad = m.nodes.iter().filter(|n| n.worst != Severity::Ok).count();
    writeln!(w, "\n{}: {bad} with warnings or errors", crate::text::count(m.nodes.len(), "node", "nodes"))
}

/// Renders the report. In the table, paths inside the device-plugin
/// directory are shown by name (JSON keeps them whole) and each hint sits on
/// its own line under its finding.
pub fn report(w: &mut dyn Write, format: Format, r: &DoctorReport) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, r);
    }
    let mut t = table(["RESULT", "CHECK", "SUBJECT", "EVIDENCE"]);
    for f in &r.findings {
        t.add_row([word(f.severity), f.check.clone(), shown_subject(&r.dir, f).to_string(), f.evidence.clone()]);
        if let Some(hint) = hint_line(f) {
            t.add_row([String::new(), String::new(), String::new(), hint]);
        }
    }
    write_table_wrapped(w, &t)?;
    let (ok, warn, err) = r.counts();
    writeln!(
        w,
        "\n{}: {ok} ok, {}, {} in {} ms ({})",
        crate::text::count(r.findings.len() as u64, "finding", "findings"),
        crate::text::count(warn as u64, "warning", "warnings"),
        crate::text::count(err as u64, "error", "errors"),
        r.took_ms,
        r.dir
    )
}

/// Shows `doctor merge`'s view: what input was skipped (narration), then the
/// merged view.
pub fn merged_answer(s: &mut Streams<'_>, m: &MergedReport) -> crate::Result<()> {
    if !m.skipped.is_empty() {
        let lines: Vec<String> =
            m.skipped.iter().take(5).map(|k| format!("{} line {}: {}", k.source, k.line, k.why)).collect();
        let more = m.skipped.len().saturating_sub(lines.len());
        s.note(format!(
            "dpctl doctor merge: skipped {} of input that {} not a report ({}{})",
            crate::text::count(m.skipped.len() as u64, "stretch", "stretches"),
            if m.skipped.len() == 1 { "is" } else { "are" },
            lines.join("; "),
            if more > 0 { format!("; {more} more") } else { String::new() }
        ))?;
    }
    merged(s.out, s.format, m).map_err(out_err)
}
