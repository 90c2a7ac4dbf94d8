//! Compares two runs of one scenario (kubelet-sim and a referee) step by
//! step, observable by observable; a difference the scenario declares is
//! reported with its reason, as `stated` (deliberate, in `kubelet-sim
//! --help`) or `open` (found, not yet fixed), and only the rest fails.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;

use super::run::{Plan, RunConfig, ScenarioRun, run};
use super::{DiffStatus, Scenario};
use crate::error::Result;
use crate::kubelet_sim::KubeletVersion;
use crate::smoke::engine::EngineKind;

/// How one difference is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Not declared: a failure.
    Unexplained,
    /// Declared deliberate and stated in `kubelet-sim --help`.
    Stated,
    /// Declared as a known, open difference.
    Open,
}

/// One observable that differs.
#[derive(Debug, Clone, Serialize)]
pub struct DiffEntry {
    /// The step's name.
    pub step: String,
    /// JSON pointer into the step's observation.
    pub path: String,
    /// What the left engine (kubelet-sim) showed; null when absent.
    pub left: Value,
    /// What the right engine (the referee) showed; null when absent.
    pub right: Value,
    /// How it is judged.
    pub verdict: Verdict,
    /// The declared reason, for stated and open ones.
    pub reason: Option<String>,
}

/// The comparison of two runs.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioDiff {
    /// The scenario.
    pub scenario: String,
    /// The release.
    pub release: String,
    /// The left engine's name.
    pub left: String,
    /// The right engine's name.
    pub right: String,
    /// Every difference.
    pub entries: Vec<DiffEntry>,
    /// Failures of either run (expectations, steps that could not run).
    pub run_failures: Vec<String>,
}

impl ScenarioDiff {
    /// Differences nobody declared.
    pub fn unexplained(&self) -> usize {
        self.entries.iter().filter(|e| e.verdict == Verdict::Unexplained).count()
    }
}

/// Diffs two runs of `scenario` on one release.
pub fn diff(scenario: &Scenario, left: &ScenarioRun, right: &ScenarioRun) -> ScenarioDiff {
    let mut raw = Vec::new();
    let n = left.steps.len().max(right.steps.len());
    for i in 0..n {
        let (l, r) = (left.steps.get(i), right.steps.get(i));
        let step = l.or(r).map(|s| s.step.clone()).unwrap_or_default();
        let null = Value::Null;
        compare(&step, "", l.map_or(&null, |s| &s.observed), r.map_or(&null, |s| &s.observed), &mut raw);
    }
    let entries = raw
        .into_iter()
        .map(|(step, path, left_v, right_v)| {
            let declared = scenario.differences.iter().find(|d| d.covers(&step, &path, &left.release));
            let (verdict, reason) = match declared {
                Some(d) => (
                    match d.status {
                        DiffStatus::Stated => Verdict::Stated,
                        DiffStatus::Open => Verdict::Open,
                    },
                    Some(d.reason.clone()),
                ),
                None => (Verdict::Unexplained, None),
            };
            DiffEntry { step, path, left: left_v, right: right_v, verdict, reason }
        })
        .collect();
    let run_failures = left
        .failures
        .iter()
        .map(|f| format!("{}: {f}", left.engine))
        .chain(right.failures.iter().map(|f| format!("{}: {f}", right.engine)))
        .collect();
    ScenarioDiff {
        scenario: scenario.name.clone(),
        release: left.release.clone(),
        left: left.engine.clone(),
        right: right.engine.clone(),
        entries,
        run_failures,
    }
}

/// Escapes a key for a JSON pointer.
fn escape(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

/// Collects `(step, pointer, left, right)` for every leaf that differs.
fn compare(step: &str, path: &str, l: &Value, r: &Value, out: &mut Vec<(String, String, Value, Value)>) {
    match (l, r) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let null = Value::Null;
                let p = format!("{path}/{}", escape(k));
                compare(step, &p, a.get(k).unwrap_or(&null), b.get(k).unwrap_or(&null), out);
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                compare(step, &format!("{path}/{i}"), x, y, out);
            }
        }
        _ if l == r => {}
        _ => out.push((step.to_string(), if path.is_empty() { "/".into() } else { path.into() }, l.clone(), r.clone())),
    }
}

/// Every comparison of `dpctl scenario diff`.
#[derive(Debug, Clone, Serialize)]
pub struct DiffReport {
    /// One per (scenario, release).
    pub diffs: Vec<ScenarioDiff>,
    /// Scenarios left out (no chosen release).
    pub skipped: Vec<String>,
}

impl DiffReport {
    /// 0 when every difference is declared and both runs met the
    /// scenario's expectations, else 1.
    pub fn exit_code(&self) -> u8 {
        let bad = self.diffs.iter().any(|d| d.unexplained() > 0 || !d.run_failures.is_empty());
        if bad { crate::error::exit::CHECK_FAILED } else { crate::error::exit::OK }
    }
}

/// Runs every planned scenario on kubelet-sim and on the referee at
/// `referee`, and compares them; `each` sees each comparison as it ends.
pub async fn diff_plan(
    plan: Plan,
    other: &EngineKind,
    helper: Option<PathBuf>,
    each: &mut (dyn FnMut(&ScenarioDiff) + Send),
) -> Result<DiffReport> {
    let plan = plan.for_engine(other);
    // Every referee or kubelet is found (and its release checked) before anything runs.
    let mut releases: Vec<KubeletVersion> = plan.runs.iter().map(|(_, v)| *v).collect();
    releases.dedup();
    for v in &releases {
        match other {
            EngineKind::Referee(path) => {
                crate::smoke::engine::referee_binary(path, *v)?;
            }
            EngineKind::Kubelet(path) => {
                crate::smoke::node::kubelet_binary(path, &v.numbered())?;
            }
            EngineKind::Sim => {
                return Err(crate::error::Error::invalid(
                    "--engine sim",
                    "scenario diff compares kubelet-sim with another engine: referee:PATH or kubelet:PATH",
                ));
            }
        }
    }
    let mut diffs = Vec::new();
    for (s, v) in &plan.runs {
        let sim = run(s, &RunConfig { engine: EngineKind::Sim, version: *v, helper: helper.clone() }).await?;
        let reference = run(s, &RunConfig { engine: other.clone(), version: *v, helper: helper.clone() }).await?;
        let d = diff(s, &sim, &reference);
        each(&d);
        diffs.push(d);
    }
    Ok(DiffReport { diffs, skipped: plan.skipped })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::run::StepObservation;
    use serde_json::json;

    fn run(engine: &str, observed: Value) -> ScenarioRun {
        ScenarioRun {
            scenario: "s".into(),
            path: "s.toml".into(),
            release: "1.36".into(),
            engine: engine.into(),
            steps: vec![StepObservation { step: "admit".into(), action: "admit".into(), observed }],
            failures: Vec::new(),
            duration_ms: 0,
        }
    }

    const SCENARIO: &str = r#"
description = "d"
releases = ["1.36"]
[[step]]
do = "admit"
name = "admit"
pod = "metadata: {name: p}\nspec: {containers: [{name: c}]}"
[[difference]]
step = "admit"
path = "/result/message"
reason = "wording"
status = "open"
"#;

    #[test]
    fn leaves_are_compared_and_declared_ones_explained() {
        let s = Scenario::parse(SCENARIO, "t").unwrap();
        let a = run("kubelet-sim", json!({"result": {"admitted": false, "message": "x", "ids": ["a"]}}));
        let b = run("referee", json!({"result": {"admitted": false, "message": "y", "ids": ["a", "b"]}}));
        let d = diff(&s, &a, &b);
        let paths: Vec<(&str, Verdict)> = d.entries.iter().map(|e| (e.path.as_str(), e.verdict)).collect();
        assert_eq!(paths, [("/result/ids", Verdict::Unexplained), ("/result/message", Verdict::Open)]);
        assert_eq!(d.unexplained(), 1);
        assert!(diff(&s, &a, &a).entries.is_empty());
    }

    #[test]
    fn keys_with_slashes_are_escaped() {
        let mut out = Vec::new();
        compare("s", "", &json!({"example.com/gpu": 1}), &json!({"example.com/gpu": 2}), &mut out);
        assert_eq!(out[0].1, "/example.com~1gpu");
    }
}
