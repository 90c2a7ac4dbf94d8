//! The one core `dpctl plugin check`'s checks and `dpctl smoke`'s steps share:
//! a case (stable name, why it matters, the rule it enforces), how it came
//! out, its result with the evidence, and the totals of a run.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::text::millis;

/// One row of a suite's id table: what a check or step is called and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CaseInfo {
    /// The stable kebab-case name (`--only`, `--skip`, JSON and JUnit).
    pub name: &'static str,
    /// One line: why the case matters.
    pub reason: &'static str,
    /// The rule the case enforces, as the kubelet applies it, with sources.
    pub rule: &'static str,
}

/// A suite's case ids (checks, smoke steps): each maps to one [`CaseInfo`]
/// row; names, lookups and results come from that table.
pub trait Case: Copy + Eq + 'static {
    /// Every case of the suite, in run order.
    fn all() -> &'static [Self];

    /// The case's row of the id table.
    fn info(self) -> CaseInfo;

    /// The stable kebab-case name.
    fn name(self) -> &'static str {
        self.info().name
    }

    /// One line: why the case matters.
    fn reason(self) -> &'static str {
        self.info().reason
    }

    /// The rule the case enforces.
    fn rule(self) -> &'static str {
        self.info().rule
    }

    /// The case with this name.
    fn from_name(name: &str) -> Option<Self> {
        Self::all().iter().copied().find(|c| c.name() == name)
    }

    /// Every name, in run order.
    fn names() -> Vec<&'static str> {
        Self::all().iter().map(|c| c.name()).collect()
    }
}

/// How a case came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The plugin did what the kubelet needs.
    Pass,
    /// The plugin broke the rule; the evidence says how.
    Fail,
    /// The case does not apply (the evidence says why).
    Skip,
    /// The case could not run (the evidence says why).
    Error,
}

impl Outcome {
    /// `pass`, `fail`, `skip` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Skip => "skip",
            Outcome::Error => "error",
        }
    }

    /// True for a failure or a case that could not run: either fails the run.
    pub fn is_failure(self) -> bool {
        matches!(self, Outcome::Fail | Outcome::Error)
    }
}

/// One case's result (a check's or a smoke step's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    /// The case's stable name.
    pub name: String,
    /// Why the case matters.
    pub reason: String,
    /// How it came out.
    pub outcome: Outcome,
    /// What was seen: the numbers and IDs on pass and fail, why on skip and error.
    pub evidence: String,
    /// The rule the case enforces (the one broken, on failure).
    pub rule: String,
    /// How long the case took.
    pub duration_ms: u64,
}

impl CheckResult {
    /// A result for the case `id`.
    pub fn new(id: impl Case, outcome: Outcome, evidence: impl Into<String>, took: Duration) -> Self {
        CheckResult::of(id.info(), outcome, evidence, took)
    }

    /// A result for a case described by its row alone.
    pub fn of(info: CaseInfo, outcome: Outcome, evidence: impl Into<String>, took: Duration) -> Self {
        CheckResult {
            name: info.name.into(),
            reason: info.reason.into(),
            outcome,
            evidence: evidence.into(),
            rule: info.rule.into(),
            duration_ms: millis(took),
        }
    }
}

/// Totals by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Cases run.
    pub total: usize,
    /// Passed.
    pub passed: usize,
    /// Failed.
    pub failed: usize,
    /// Skipped.
    pub skipped: usize,
    /// Could not run.
    pub errors: usize,
}

impl Totals {
    /// Counts results by outcome.
    pub fn of(results: &[CheckResult]) -> Self {
        let count = |o| results.iter().filter(|c| c.outcome == o).count();
        Totals {
            total: results.len(),
            passed: count(Outcome::Pass),
            failed: count(Outcome::Fail),
            skipped: count(Outcome::Skip),
            errors: count(Outcome::Error),
        }
    }
}

/// True when a result failed or could not run.
pub fn any_failure(results: &[CheckResult]) -> bool {
    results.iter().any(|c| c.outcome.is_failure())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Two {
        A,
        B,
    }

    impl Case for Two {
        fn all() -> &'static [Self] {
            &[Two::A, Two::B]
        }
        fn info(self) -> CaseInfo {
            match self {
                Two::A => CaseInfo { name: "a-case", reason: "why a", rule: "rule a" },
                Two::B => CaseInfo { name: "b-case", reason: "why b", rule: "rule b" },
            }
        }
    }

    #[test]
    fn a_case_table_gives_names_lookups_and_results() {
        assert_eq!(Two::names(), ["a-case", "b-case"]);
        assert_eq!(Two::from_name("b-case"), Some(Two::B));
        assert_eq!(Two::from_name("c-case"), None);
        let r = CheckResult::new(Two::B, Outcome::Fail, "seen", Duration::from_millis(3));
        assert_eq!(
            (r.name.as_str(), r.reason.as_str(), r.rule.as_str(), r.duration_ms),
            ("b-case", "why b", "rule b", 3)
        );
        assert!(any_failure(&[r]) && !Outcome::Skip.is_failure() && Outcome::Error.is_failure());
    }
}
