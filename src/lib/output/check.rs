//! Renderers for `dpctl plugin check` (and `dpctl smoke`, which reuses the
//! report): a table for people, JSON for programs, JUnit XML for CI, and the
//! list of checks.

use std::io::{self, Write};

use colored::Colorize;
use serde::Serialize;

use super::{Format, table, write_json, write_table};
use crate::check::{CheckId, CheckResult, Outcome, Report};

/// Widest DETAIL cell in the table (wide output shows everything).
const DETAIL_WIDTH: usize = 110;

/// An outcome, colored: pass green, fail red, skip yellow, error magenta.
pub fn outcome(o: Outcome) -> String {
    paint(o, o.as_str())
}

/// `text` in the outcome's color.
fn paint(o: Outcome, text: &str) -> String {
    match o {
        Outcome::Pass => text.green().to_string(),
        Outcome::Fail => text.red().bold().to_string(),
        Outcome::Skip => text.yellow().to_string(),
        Outcome::Error => text.magenta().bold().to_string(),
    }
}

/// The outcome in capitals (FAIL, ERROR), colored after the change of case so
/// that the escape sequences stay intact.
fn outcome_upper(o: Outcome) -> String {
    paint(o, &o.as_str().to_uppercase())
}

/// Renders a report: one row per check, then each failure in full
/// (evidence, rule, why it matters), each error on a line, then a summary.
pub fn report(w: &mut dyn Write, format: Format, report: &Report) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, report);
    }
    if report.unreachable.is_some() {
        writeln!(
            w,
            "{} 0 of {} checks run: could not reach the plugin at {}",
            "error".magenta().bold(),
            report.checks.len(),
            report.socket
        )?;
        return w.flush();
    }
    let wide = format == Format::Wide;
    let mut headers = vec!["CHECK", "RESULT", "TIME", "DETAIL"];
    if wide {
        headers.push("WHY IT MATTERS");
    }
    let mut t = table(headers);
    for c in &report.checks {
        let detail = if wide { c.evidence.clone() } else { shorten(&c.evidence, DETAIL_WIDTH) };
        let mut row = vec![c.name.clone(), outcome(c.outcome), format!("{}ms", c.duration_ms), one_line(&detail)];
        if wide {
            row.push(c.reason.clone());
        }
        t.add_row(row);
    }
    write_table(w, &t)?;
    for c in report.checks.iter().filter(|c| c.outcome == Outcome::Fail) {
        writeln!(w)?;
        writeln!(w, "{} {}", outcome_upper(c.outcome), c.name.bold())?;
        writeln!(w, "  evidence: {}", c.evidence)?;
        writeln!(w, "  rule:     {}", c.rule)?;
        writeln!(w, "  why:      {}", c.reason)?;
    }
    // Checks that could not run mostly follow from a failure above: one line each.
    let errors: Vec<&CheckResult> = report.checks.iter().filter(|c| c.outcome == Outcome::Error).collect();
    if !errors.is_empty() {
        writeln!(w)?;
        for c in errors {
            writeln!(w, "{} {}: {}", outcome_upper(c.outcome), c.name.bold(), one_line(&c.evidence))?;
        }
    }
    writeln!(w)?;
    writeln!(w, "{}", summary(report))?;
    w.flush()
}

/// `14 checks: 12 passed, 1 failed, 1 skipped, 0 errors in 2.41s (socket)`.
pub fn summary(report: &Report) -> String {
    let t = &report.totals;
    let failed = format!("{} failed", t.failed);
    let errors = format!("{} errors", t.errors);
    format!(
        "{} checks: {} passed, {}, {} skipped, {} in {:.2}s ({})",
        t.total,
        t.passed,
        if t.failed > 0 { failed.red().bold().to_string() } else { failed },
        t.skipped,
        if t.errors > 0 { errors.magenta().bold().to_string() } else { errors },
        report.duration_ms as f64 / 1000.0,
        report.socket
    )
}

/// One check as `--list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct CheckInfo {
    /// The stable name.
    pub name: &'static str,
    /// Why it matters.
    pub reason: &'static str,
    /// The rule it enforces.
    pub rule: &'static str,
}

/// Renders the list of checks (`--list`).
pub fn catalog(w: &mut dyn Write, format: Format) -> io::Result<()> {
    let items: Vec<CheckInfo> =
        CheckId::ALL.iter().map(|c| CheckInfo { name: c.name(), reason: c.reason(), rule: c.rule() }).collect();
    if format.is_json() {
        return write_json(w, &items);
    }
    let mut t = table(if format == Format::Wide {
        vec!["CHECK", "WHY IT MATTERS", "RULE"]
    } else {
        vec!["CHECK", "WHY IT MATTERS"]
    });
    for i in &items {
        let mut row = vec![i.name.to_string(), i.reason.to_string()];
        if format == Format::Wide {
            row.push(i.rule.to_string());
        }
        t.add_row(row);
    }
    write_table(w, &t)
}

/// Writes the report as JUnit XML: one `<testsuite>` named after the suite,
/// one `<testcase>` per check, with `<failure>`, `<error>` or `<skipped>`
/// carrying the evidence, and the evidence of passes in `<system-out>`.
pub fn junit(w: &mut dyn Write, report: &Report) -> io::Result<()> {
    let mut props = vec![("socket", report.socket.clone())];
    if let Some(u) = &report.unreachable {
        props.push(("unreachable", u.message.clone()));
    }
    let suite = JunitSuite {
        name: &report.suite,
        totals: &report.totals,
        duration_ms: report.duration_ms,
        started: &report.started,
        properties: &props,
    };
    suite.open(w)?;
    let classname = report.suite.replace(' ', ".");
    for c in &report.checks {
        testcase(w, &classname, c)?;
    }
    JunitSuite::close(w)
}

/// The frame of a JUnit report with one suite (shared with `dpctl smoke`).
pub(crate) struct JunitSuite<'a> {
    /// Suite name.
    pub name: &'a str,
    /// Counts by outcome.
    pub totals: &'a crate::check::Totals,
    /// Run time.
    pub duration_ms: u64,
    /// Start time, RFC 3339.
    pub started: &'a str,
    /// `<property>` name/value pairs.
    pub properties: &'a [(&'a str, String)],
}

impl JunitSuite<'_> {
    /// Writes the XML declaration, `<testsuites>`, `<testsuite>` and its properties.
    pub(crate) fn open(&self, w: &mut dyn Write) -> io::Result<()> {
        let t = self.totals;
        let secs = format!("{:.3}", self.duration_ms as f64 / 1000.0);
        let counts = format!(
            r#"tests="{}" failures="{}" errors="{}" skipped="{}" time="{secs}""#,
            t.total, t.failed, t.errors, t.skipped
        );
        writeln!(w, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
        writeln!(w, r#"<testsuites name="dpctl" {counts}>"#)?;
        self.open_suite(w)
    }

    /// `<testsuites>` for several suites with these summed totals.
    pub(crate) fn open_many(w: &mut dyn Write, t: &crate::check::Totals, duration_ms: u64) -> io::Result<()> {
        let secs = format!("{:.3}", duration_ms as f64 / 1000.0);
        writeln!(w, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
        writeln!(
            w,
            r#"<testsuites name="dpctl" tests="{}" failures="{}" errors="{}" skipped="{}" time="{secs}">"#,
            t.total, t.failed, t.errors, t.skipped
        )
    }

    /// Writes `<testsuite>` and its properties (inside [`JunitSuite::open_many`]).
    pub(crate) fn open_suite(&self, w: &mut dyn Write) -> io::Result<()> {
        let t = self.totals;
        let secs = format!("{:.3}", self.duration_ms as f64 / 1000.0);
        let counts = format!(
            r#"tests="{}" failures="{}" errors="{}" skipped="{}" time="{secs}""#,
            t.total, t.failed, t.errors, t.skipped
        );
        writeln!(w, r#"  <testsuite name="{}" {counts} timestamp="{}">"#, attr(self.name), attr(self.started))?;
        writeln!(w, "    <properties>")?;
        for (k, v) in self.properties {
            writeln!(w, r#"      <property name="{k}" value="{}"/>"#, attr(v))?;
        }
        writeln!(w, "    </properties>")
    }

    /// Closes what [`JunitSuite::open`] opened, and flushes.
    pub(crate) fn close(w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "  </testsuite>")?;
        writeln!(w, "</testsuites>")?;
        w.flush()
    }

    /// Closes one `<testsuite>` of several.
    pub(crate) fn close_suite(w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "  </testsuite>")
    }
}

/// One JUnit `<testcase>` for a result (shared with `dpctl smoke`'s report).
pub(crate) fn testcase(w: &mut dyn Write, classname: &str, c: &CheckResult) -> io::Result<()> {
    write!(
        w,
        r#"    <testcase name="{}" classname="{}" time="{:.3}""#,
        attr(&c.name),
        attr(classname),
        c.duration_ms as f64 / 1000.0
    )?;
    let body = format!("evidence: {}\nrule: {}\nwhy it matters: {}", c.evidence, c.rule, c.reason);
    match c.outcome {
        Outcome::Pass if c.evidence.is_empty() => writeln!(w, "/>"),
        Outcome::Pass => {
            writeln!(w, ">")?;
            writeln!(w, "      <system-out>{}</system-out>", text(&c.evidence))?;
            writeln!(w, "    </testcase>")
        }
        Outcome::Skip => {
            writeln!(w, ">")?;
            writeln!(w, r#"      <skipped message="{}"/>"#, attr(&c.evidence))?;
            writeln!(w, "    </testcase>")
        }
        Outcome::Fail | Outcome::Error => {
            let tag = if c.outcome == Outcome::Fail { "failure" } else { "error" };
            writeln!(w, ">")?;
            writeln!(
                w,
                r#"      <{tag} message="{}" type="{}">{}</{tag}>"#,
                attr(&c.evidence),
                attr(&c.name),
                text(&body)
            )?;
            writeln!(w, "    </testcase>")
        }
    }
}

/// Escapes character data for XML 1.0; characters XML cannot carry at all
/// (most control characters) are written as `\u{..}` so nothing is lost.
pub fn text(s: &str) -> String {
    escape(s, false)
}

/// Escapes an attribute value (quotes and newlines too).
pub fn attr(s: &str) -> String {
    escape(s, true)
}

fn escape(s: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            '\'' if attribute => out.push_str("&apos;"),
            '\n' if attribute => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' if attribute => out.push_str("&#9;"),
            '\t' | '\n' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {
                out.push_str(&format!("\\u{{{:04x}}}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

pub(crate) use crate::text::shorten;

/// Control characters (from a plugin's device IDs) shown escaped, so a row stays one line.
pub(crate) fn one_line(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::check::{CheckId, Totals};
    use std::time::Duration;

    fn sample() -> Report {
        let mut r = Report {
            suite: crate::check::SUITE_NAME.into(),
            socket: "/tmp/a&b.sock".into(),
            started: "2026-01-01T00:00:00.000Z".into(),
            duration_ms: 1234,
            unreachable: None,
            totals: Totals::default(),
            checks: vec![
                CheckResult::new(CheckId::OptionsAnswer, Outcome::Pass, "answered", Duration::from_millis(2)),
                CheckResult::new(
                    CheckId::DeviceIdsValid,
                    Outcome::Fail,
                    "IDs listed more than once: <a&\"b'>\u{1}",
                    Duration::ZERO,
                ),
                CheckResult::new(CheckId::PreferredContract, Outcome::Skip, "not advertised", Duration::ZERO),
                CheckResult::new(CheckId::MessageSize, Outcome::Error, "no message", Duration::ZERO),
            ],
        };
        r.tally();
        r
    }

    #[test]
    fn escaping() {
        assert_eq!(text("a<b>&c\"'\n"), "a&lt;b&gt;&amp;c\"'\n");
        assert_eq!(attr("a\"b'\nc\td"), "a&quot;b&apos;&#10;c&#9;d");
        assert_eq!(text("x\u{0}y\u{1b}"), "x\\u{0000}y\\u{001b}");
        assert_eq!(text("ünï"), "ünï");
    }

    #[test]
    fn junit_has_one_testcase_per_check() {
        let mut out = Vec::new();
        junit(&mut out, &sample()).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(
            s.contains(r#"<testsuite name="dpctl plugin check" tests="4" failures="1" errors="1" skipped="1""#),
            "{s}"
        );
        assert_eq!(s.matches("<testcase ").count(), 4);
        assert!(s.contains("&lt;a&amp;&quot;b&apos;&gt;\\u{0001}"), "{s}");
        assert!(s.contains(r#"value="/tmp/a&amp;b.sock""#));
    }

    #[test]
    fn table_lists_checks_then_failures_then_summary() {
        colored::control::set_override(false);
        let mut out = Vec::new();
        report(&mut out, Format::Table, &sample()).unwrap();
        let s = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[0].starts_with("CHECK") && lines[0].contains("DETAIL"), "{s}");
        assert!(s.contains("FAIL device-ids-valid\n  evidence: IDs listed more than once"), "{s}");
        assert!(s.contains("\nERROR message-size: no message\n"), "{s}");
        assert!(lines.last().unwrap().starts_with("4 checks: 1 passed, 1 failed, 1 skipped, 1 errors in 1.23s"), "{s}");
    }
}
