//! Renderers for `dpctl scenario run|diff`: a line per run (or comparison)
//! with its failures or differences, or the whole report as JSON.

use std::io::{self, Write};

use colored::Colorize;

use super::{Streams, out_err, write_json};
use crate::scenario::diff::{DiffReport, ScenarioDiff, Verdict};
use crate::scenario::run::{RunReport, ScenarioRun};

/// A progress line on `err` per run as it ends (`show`: not -q, not JSON).
pub fn run_progress<'a>(err: &'a mut (dyn Write + Send), show: bool) -> impl FnMut(&ScenarioRun) + Send + 'a {
    move |r: &ScenarioRun| {
        if show {
            let word = if r.passed() { "ok" } else { "FAILED" };
            let _ = writeln!(err, "{} {} on {}: {word}", r.scenario, r.release, r.engine);
        }
    }
}

/// A progress line on `err` per comparison as it ends.
pub fn diff_progress<'a>(err: &'a mut (dyn Write + Send), show: bool) -> impl FnMut(&ScenarioDiff) + Send + 'a {
    move |d: &ScenarioDiff| {
        if show {
            let _ = writeln!(
                err,
                "{} {}: {}",
                d.scenario,
                d.release,
                crate::text::count(d.entries.len(), "difference", "differences")
            );
        }
    }
}

/// `scenario run`: each run's verdict, steps and failures.
pub fn ran(s: &mut Streams<'_>, r: &RunReport) -> crate::Result<()> {
    write_run(&mut *s.out, s.format.is_json(), r).map_err(out_err)
}

fn write_run(w: &mut dyn Write, json: bool, r: &RunReport) -> io::Result<()> {
    if json {
        return write_json(w, r);
    }
    for run in &r.runs {
        let verdict = if run.passed() { "PASS".green().bold() } else { "FAIL".red().bold() };
        writeln!(
            w,
            "{verdict} {} {} on {} ({} steps, {} ms)",
            run.scenario,
            run.release,
            run.engine,
            run.steps.len(),
            run.duration_ms
        )?;
        for st in &run.steps {
            writeln!(w, "    {:<24} {}", st.step, st.observed["result"])?;
        }
        for f in &run.failures {
            writeln!(w, "    {} {f}", "failed:".red())?;
        }
    }
    for sk in &r.skipped {
        writeln!(w, "skipped {sk}")?;
    }
    let failed = r.runs.iter().filter(|x| !x.passed()).count();
    writeln!(w, "{}, {} failed", crate::text::count(r.runs.len(), "run", "runs"), failed)
}

/// `scenario diff`: each comparison and its differences.
pub fn diffed(s: &mut Streams<'_>, r: &DiffReport) -> crate::Result<()> {
    write_diff(&mut *s.out, s.format.is_json(), r).map_err(out_err)
}

fn write_diff(w: &mut dyn Write, json: bool, r: &DiffReport) -> io::Result<()> {
    if json {
        return write_json(w, r);
    }
    for d in &r.diffs {
        let verdict =
            if d.unexplained() == 0 && d.run_failures.is_empty() { "SAME".green().bold() } else { "DIFF".red().bold() };
        writeln!(w, "{verdict} {} {} ({} vs {})", d.scenario, d.release, d.left, d.right)?;
        // `referee` or `kubelet`: the right engine's name without its version.
        let right = d.right.split(' ').next().unwrap_or("referee");
        for e in &d.entries {
            let how = match e.verdict {
                Verdict::Unexplained => "unexplained".red().to_string(),
                Verdict::Stated => format!("stated: {}", e.reason.as_deref().unwrap_or_default()),
                Verdict::Open => format!("open: {}", e.reason.as_deref().unwrap_or_default()),
            };
            writeln!(w, "    {} {}: sim {} | {right} {}  [{how}]", e.step, e.path, e.left, e.right)?;
        }
        for f in &d.run_failures {
            writeln!(w, "    {} {f}", "failed:".red())?;
        }
    }
    for sk in &r.skipped {
        writeln!(w, "skipped {sk}")?;
    }
    let unexplained: usize = r.diffs.iter().map(ScenarioDiff::unexplained).sum();
    let declared: usize = r.diffs.iter().map(|d| d.entries.len()).sum::<usize>() - unexplained;
    writeln!(
        w,
        "{}: {}, {declared} declared",
        crate::text::count(r.diffs.len(), "comparison", "comparisons"),
        crate::text::count(unexplained, "unexplained difference", "unexplained differences")
    )
}
