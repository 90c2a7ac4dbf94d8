//! Renderers for `dpctl plugin check`: a table for people, JSON for
//! programs, JUnit XML for CI (through [`super::junit`]), and the list of
//! checks.

use std::io::{self, Write};

use colored::Colorize;

use super::cases::{failures, one_line, outcome};
use super::junit::{JunitSuite, testcase};
use super::{Format, table, write_json, write_table};
use super::{Streams, out_err};
use crate::check::{Case, CaseInfo, CheckId, Outcome, Progress, Report};
use crate::error::Result;

/// The end of a check: the report on stdout, GitHub annotations and an
/// unreachable plugin's error on stderr (as the binary prints errors: even
/// with --quiet).
pub fn finished(io: &mut Streams<'_>, report: &Report, stable: bool) -> Result<()> {
    if stable {
        self::stable(&mut *io.out, report).map_err(out_err)?;
    } else {
        self::report(&mut *io.out, io.format, report).map_err(out_err)?;
    }
    if super::github::in_actions() {
        let run = [super::github::Run { release: None, results: &report.checks }];
        super::github::annotations(&mut *io.err, &report.suite, &run, super::github::Sequence::Independent)
            .map_err(out_err)?;
    }
    if let Some(u) = &report.unreachable {
        super::write_error(&mut *io.err, &u.message, u.hint.as_deref()).map_err(out_err)?;
    }
    Ok(())
}

/// `--stable`: what two runs against the same plugin agree on, as JSON
/// (YAML with `-o yaml`): the suite, whether the plugin was reached, the
/// totals and each check's name and outcome; no evidence, times or socket
/// path.
pub fn stable(w: &mut dyn Write, report: &Report) -> io::Result<()> {
    #[derive(serde::Serialize)]
    struct Stable<'a> {
        suite: &'a str,
        reached: bool,
        totals: &'a crate::check::Totals,
        checks: Vec<super::cases::StableCase<'a>>,
    }
    let view = Stable {
        suite: &report.suite,
        reached: report.unreachable.is_none(),
        totals: &report.totals,
        checks: super::cases::stable_cases(&report.checks),
    };
    write_json(w, &view)
}

/// The Markdown step summary of a check (`$GITHUB_STEP_SUMMARY`): the
/// summary line, a table of the checks, each failure in full.
pub fn step_summary(w: &mut dyn Write, report: &Report) -> io::Result<()> {
    let run = [super::github::Run { release: None, results: &report.checks }];
    let t = &report.totals;
    let verdict = match &report.unreachable {
        Some(u) => format!("{}: nothing checked: {}", report.suite, u.message),
        None => format!(
            "{}: {} ({} passed, {} failed, {} skipped, {}) on {}",
            report.suite,
            if crate::check::any_failure(&report.checks) { "FAIL" } else { "PASS" },
            t.passed,
            t.failed,
            t.skipped,
            crate::text::count(t.errors as u64, "error", "errors"),
            report.socket
        ),
    };
    super::github::step_summary(w, &verdict, &run, super::github::Sequence::Independent)
}

/// The progress bar's view of a check: the check running, each failure
/// printed above the bar.
pub fn progress(bar: &indicatif::ProgressBar, p: Progress) {
    match p {
        Progress::Started(id) => bar.set_message(id.name()),
        Progress::Finished(r) => {
            bar.inc(1);
            if r.outcome == Outcome::Fail {
                bar.println(format!("{} {}", outcome(r.outcome), r.name));
            }
        }
    }
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
            "{} 0 of {} run: could not reach the plugin at {}",
            "error".magenta().bold(),
            crate::text::count(report.checks.len() as u64, "check", "checks"),
            report.socket
        )?;
        return w.flush();
    }
    let wide = format == Format::Wide;
    let mut headers = vec!["CHECK", "RESULT", "TIME", "DETAIL"];
    if wide {
        headers.push("REASON");
    }
    let mut t = table(headers);
    for c in &report.checks {
        let detail = c.evidence.clone();
        let mut row = vec![c.name.clone(), outcome(c.outcome), format!("{}ms", c.duration_ms), one_line(&detail)];
        if wide {
            row.push(c.reason.clone());
        }
        t.add_row(row);
    }
    write_table(w, &t)?;
    failures(w, &report.checks)?;
    writeln!(w)?;
    writeln!(w, "{}", summary(report))?;
    w.flush()
}

/// `13 checks: 11 passed, 1 failed, 1 skipped, 0 errors in 2.41s (socket)`.
pub fn summary(report: &Report) -> String {
    let t = &report.totals;
    let failed = format!("{} failed", t.failed);
    let errors = crate::text::count(t.errors as u64, "error", "errors");
    format!(
        "{}: {} passed, {}, {} skipped, {} in {:.2}s ({})",
        crate::text::count(t.total as u64, "check", "checks"),
        t.passed,
        if t.failed > 0 { failed.red().bold().to_string() } else { failed },
        t.skipped,
        if t.errors > 0 { errors.magenta().bold().to_string() } else { errors },
        report.duration_ms as f64 / 1000.0,
        report.socket
    )
}

/// Renders the list of checks (`--list`).
pub fn catalog(w: &mut dyn Write, format: Format) -> io::Result<()> {
    let items: Vec<CaseInfo> = CheckId::ALL.iter().map(|c| c.info()).collect();
    if format.is_json() {
        return write_json(w, &items);
    }
    let mut t = table(if format == Format::Wide { vec!["CHECK", "REASON", "RULE"] } else { vec!["CHECK", "REASON"] });
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

#[cfg(test)]
mod tests {

    use super::*;
    use crate::check::{CheckResult, Outcome, Totals};
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

    // --stable: names and outcomes only; nothing of the socket, the times or the evidence.
    #[test]
    fn the_stable_view_has_only_names_outcomes_and_totals() {
        let mut out = Vec::new();
        stable(&mut out, &sample()).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["reached"], true);
        assert_eq!(v["totals"]["failed"], 1);
        assert_eq!(v["checks"][1], serde_json::json!({"name": "device-ids-valid", "outcome": "fail"}));
        let s = String::from_utf8(out).unwrap();
        for volatile in ["/tmp/", "duration_ms", "started", "evidence", "IDs listed"] {
            assert!(!s.contains(volatile), "{volatile} in {s}");
        }
    }

    #[test]
    fn the_step_summary_names_the_verdict_and_each_check() {
        let mut out = Vec::new();
        step_summary(&mut out, &sample()).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(
            s.starts_with(
                "### dpctl plugin check: FAIL (1 passed, 1 failed, 1 skipped, 1 error) on /tmp/a&amp;b.sock\n\n\
                 | step | result |\n"
            ),
            "{s}"
        );
        assert!(s.contains("| device-ids-valid | ❌ fail |\n| preferred-contract | ⏭️ skip |\n"), "{s}");
        // The error after the failure is marked as following it.
        assert!(s.contains("| message-size | ⚠️ error ↳ |"), "{s}");
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
        assert!(lines.last().unwrap().starts_with("4 checks: 1 passed, 1 failed, 1 skipped, 1 error in 1.23s"), "{s}");
    }
}
