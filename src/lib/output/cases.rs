//! What `dpctl plugin check` and `dpctl smoke` do alike on the terminal:
//! where the report and the narration go, the progress display, colored
//! outcomes, the failure details under the table, and the one-line form of
//! evidence.

use std::io::{self, Write};

use colored::Colorize;

use crate::check::{CheckResult, Outcome};

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

/// Under a results table: each failure in full (evidence, rule, why it
/// matters), then each result that could not run on one line (those mostly
/// follow from a failure above).
pub fn failures(w: &mut dyn Write, results: &[CheckResult]) -> io::Result<()> {
    for c in results.iter().filter(|c| c.outcome == Outcome::Fail) {
        writeln!(w)?;
        writeln!(w, "{} {}", outcome_upper(c.outcome), c.name.bold())?;
        writeln!(w, "  evidence: {}", c.evidence)?;
        writeln!(w, "  rule:     {}", c.rule)?;
        writeln!(w, "  reason:   {}", c.reason)?;
    }
    let errors: Vec<&CheckResult> = results.iter().filter(|c| c.outcome == Outcome::Error).collect();
    if !errors.is_empty() {
        writeln!(w)?;
        for c in errors {
            writeln!(w, "{} {}: {}", outcome_upper(c.outcome), c.name.bold(), one_line(&c.evidence))?;
        }
    }
    Ok(())
}

/// Control characters (from a plugin's device IDs) shown escaped, so a row stays one line.
pub fn one_line(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

/// One case in the stable view (`--stable`): its name and outcome, nothing
/// that changes between two runs of the same plugin (no evidence, timings,
/// pids or paths), so that a committed baseline diffs clean (docs/json.md §9).
#[derive(Debug, serde::Serialize)]
pub struct StableCase<'a> {
    /// The case's stable name.
    pub name: &'a str,
    /// How it came out.
    pub outcome: Outcome,
}

/// The stable view of a run's results, in run order.
pub fn stable_cases(results: &[CheckResult]) -> Vec<StableCase<'_>> {
    results.iter().map(|c| StableCase { name: &c.name, outcome: c.outcome }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_in_full_then_errors_one_line_each() {
        colored::control::set_override(false);
        let r = |name: &str, outcome, evidence: &str| CheckResult {
            name: name.into(),
            reason: "why".into(),
            outcome,
            evidence: evidence.into(),
            rule: "rule".into(),
            duration_ms: 0,
        };
        let results =
            [r("a", Outcome::Pass, "ok"), r("b", Outcome::Fail, "bad"), r("c", Outcome::Error, "no\nmessage")];
        let mut out = Vec::new();
        failures(&mut out, &results).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert_eq!(s, "\nFAIL b\n  evidence: bad\n  rule:     rule\n  reason:   why\n\nERROR c: no\\nmessage\n");
    }
}
