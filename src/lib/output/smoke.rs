//! Renderers for `dpctl smoke`: the report as a table (steps, then each
//! failure in full, then the plugin's last output when something failed),
//! as JSON, and as JUnit XML (mirroring `dpctl plugin check`'s, with the
//! plugin's output in `<system-out>`/`<system-err>`), plus the one-line
//! narration of a finished step.

use std::io::{self, Write};

use colored::Colorize;

use super::cases::{failures, one_line, outcome};
use super::github;
use super::junit::{self as xml, JunitSuite, text};
use super::{Format, table, write_json, write_table};
use super::{Streams, out_err};
use crate::check::{CheckResult, Outcome};
use crate::error::Result;
use crate::kubelet_sim::KubeletVersion;
use crate::smoke::matrix::MatrixProgress;
use crate::smoke::{MatrixReport, SmokeProgress, SmokeReport, Stream, kind_of, shell_words};
use crate::text::shorten;

/// Lines of the plugin's output shown under a failed run's table.
const TAIL_LINES: usize = 20;

/// The JUnit XML of a smoke: one run's suite, or one suite per release.
pub fn junit_report(w: &mut dyn Write, matrix: &MatrixReport) -> io::Result<()> {
    match matrix.runs.first().filter(|_| matrix.runs.len() == 1) {
        Some(r) => self::junit(w, r),
        None => junit_matrix(w, matrix),
    }
}

/// The end of a smoke: a blank line after the narration, GitHub annotations
/// on stderr, then the report on stdout (one run's, or the matrix; `many`
/// when several releases were asked for; `stable`: only the verdicts, see
/// [`stable`]).
pub fn finished(io: &mut Streams<'_>, matrix: &MatrixReport, many: bool, stable: bool) -> Result<()> {
    let one = matrix.runs.first().filter(|_| !many);
    if !io.format.is_json() && !stable && !io.quiet {
        writeln!(io.err).map_err(out_err)?;
    }
    github_annotations(&mut *io.err, matrix).map_err(out_err)?;
    if stable {
        return self::stable(&mut *io.out, matrix).map_err(out_err);
    }
    match one {
        Some(r) if io.format.is_json() => write_json(
            &mut *io.out,
            &OneRun { report: r, passed: &matrix.passed, failed: &matrix.failed, runs: &matrix.runs },
        ),
        Some(r) => report(&mut *io.out, io.format, r),
        None => self::matrix(&mut *io.out, io.format, matrix),
    }
    .map_err(out_err)
}

/// `--stable`: what two runs of the same plugin agree on, byte for byte,
/// as JSON (YAML with `-o yaml`): the suite, which releases passed, and per
/// release the engine, the resource, the totals and each step's name and
/// outcome. The full report (`-o json`) keeps what changes between runs
/// (pids, directories, times) in keys of its own, but its evidence is prose
/// for people and quotes them too.
pub fn stable(w: &mut dyn Write, m: &MatrixReport) -> io::Result<()> {
    #[derive(serde::Serialize)]
    struct Run<'a> {
        kubelet_version: KubeletVersion,
        engine: &'a str,
        resource: Option<&'a str>,
        interrupted: bool,
        totals: &'a crate::check::Totals,
        steps: Vec<super::cases::StableCase<'a>>,
    }
    #[derive(serde::Serialize)]
    struct Stable<'a> {
        suite: &'a str,
        passed: &'a [KubeletVersion],
        failed: &'a [KubeletVersion],
        runs: Vec<Run<'a>>,
    }
    let runs = m
        .runs
        .iter()
        .map(|r| Run {
            kubelet_version: r.kubelet_version,
            engine: &r.engine,
            resource: r.resource.as_deref(),
            interrupted: r.interrupted,
            totals: &r.totals,
            steps: super::cases::stable_cases(&r.steps),
        })
        .collect();
    write_json(w, &Stable { suite: &m.suite, passed: &m.passed, failed: &m.failed, runs })
}

/// A single run's JSON: the matrix's shape (`suite`, `passed`, `failed`,
/// `runs`), which is the same for any number of `--kubelet-version` values,
/// plus that run's own fields at the top level, as before (docs/json.md).
#[derive(serde::Serialize)]
struct OneRun<'a> {
    #[serde(flatten)]
    report: &'a SmokeReport,
    passed: &'a [KubeletVersion],
    failed: &'a [KubeletVersion],
    runs: &'a [SmokeReport],
}

/// Under GitHub Actions (`GITHUB_ACTIONS=true`): one `::error` annotation
/// per failed step across the releases, none for failures after the first
/// of a run (they are named in its message).
pub fn github_annotations(w: &mut dyn Write, m: &MatrixReport) -> io::Result<()> {
    if !github::in_actions() {
        return Ok(());
    }
    let versions = releases(m);
    github::annotations(w, &m.suite, &github_runs(m, &versions), github::Sequence::Ordered)
}

/// The Markdown step summary of a smoke (`$GITHUB_STEP_SUMMARY`): the
/// verdict, a table of steps by release, each failed step in full.
pub fn step_summary(w: &mut dyn Write, m: &MatrixReport) -> io::Result<()> {
    let versions = releases(m);
    let join = |v: &[KubeletVersion]| v.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    let verdict = if m.passed() {
        format!("{}: PASS on kubelet {}", m.suite, join(&m.passed))
    } else {
        let passed = if m.passed.is_empty() { "none".to_string() } else { join(&m.passed) };
        format!("{}: FAIL on kubelet {} (passed: {passed})", m.suite, join(&m.failed))
    };
    github::step_summary(w, &verdict, &github_runs(m, &versions), github::Sequence::Ordered)
}

/// Each run's release as text (`1.37`, or `1.37 (referee v1.37.2)` on another engine).
fn releases(m: &MatrixReport) -> Vec<String> {
    m.runs
        .iter()
        .map(|r| {
            if r.engine == crate::kubelet_sim::default_engine() {
                r.kubelet_version.label()
            } else {
                format!("{} ({})", r.kubelet_version.label(), r.engine)
            }
        })
        .collect()
}

/// The runs as [`github::Run`]s, named by `versions`.
fn github_runs<'a>(m: &'a MatrixReport, versions: &'a [String]) -> Vec<github::Run<'a>> {
    m.runs.iter().zip(versions).map(|(r, v)| github::Run { release: Some(v), results: &r.steps }).collect()
}

/// Tells a smoke run's progress on stderr, a line per event; on a terminal
/// the spinner shows the step running and only what went wrong is printed.
pub struct Narrator<'a> {
    err: &'a mut (dyn Write + Send),
    quiet: bool,
    bar: Option<&'a indicatif::ProgressBar>,
    /// Several releases: each run gets a heading.
    many: bool,
    /// Steps that did not run for one reason, told once: the reason and how many.
    not_run: Option<(String, usize)>,
    /// Tell finished steps (stdout carries JSON, not the step table).
    steps: bool,
    /// Evidence whole (stderr is not a terminal: a CI log keeps every word).
    whole: bool,
}

impl<'a> Narrator<'a> {
    /// Narrates on `err` (nothing when `quiet`), through `bar` when there is
    /// one; `many` releases get a heading each; `steps`: tell finished steps
    /// (stdout carries JSON, not the step table); `whole`: never shorten
    /// evidence (stderr is not a terminal).
    pub fn new(
        err: &'a mut (dyn Write + Send),
        quiet: bool,
        bar: Option<&'a indicatif::ProgressBar>,
        many: bool,
        steps: bool,
        whole: bool,
    ) -> Self {
        Narrator { err, quiet, bar, many, not_run: None, steps, whole }
    }

    fn say(&mut self, line: String) {
        if self.quiet {
            return;
        }
        // Steps' evidence quotes the plugin: no control character of it reaches the terminal.
        let line = super::layout::clean(&line).into_owned();
        match self.bar {
            Some(b) => b.println(line),
            None => {
                let _ = writeln!(self.err, "{line}");
            }
        }
    }

    /// Tells one event of the run.
    pub fn on(&mut self, mp: MatrixProgress) {
        let p = match mp {
            MatrixProgress::Version { version, index, count } => {
                if self.many {
                    self.say(format!("== kubelet {version} ({index}/{count}) =="));
                }
                return;
            }
            MatrixProgress::Run(p) => p,
        };
        if !self.steps && matches!(&p, SmokeProgress::StepFinished(_)) {
            return;
        }
        let still_not_run = matches!(&p, SmokeProgress::StepFinished(r) if r.evidence.starts_with("not run"));
        if let Some((why, n)) = self.not_run.take_if(|_| !still_not_run) {
            self.say(format!("skip  {}: {why}", crate::text::count(n as u64, "step", "steps")));
        }
        match p {
            SmokeProgress::SimReady { dir, kubelet_socket, engine } => {
                self.say(format!("{engine}: serving {} in {}", kubelet_socket.display(), dir.display()));
            }
            SmokeProgress::Isolated(r) => {
                self.say(format!("isolate: {} namespaces, private mounts:", r.namespaces));
                for m in &r.mounts {
                    self.say(format!("  {} <- {} ({})", m.target, m.source, m.kind));
                }
            }
            SmokeProgress::Launched { pid, command } => {
                self.say(format!("plugin: started pid {pid}: {}", shell_words(&command)));
            }
            SmokeProgress::StepStarted(name) => {
                if let Some(b) = self.bar {
                    b.set_message(name);
                }
            }
            SmokeProgress::StepFinished(r) if still_not_run => match &mut self.not_run {
                Some((why, n)) if *why == r.evidence => *n += 1,
                _ => self.not_run = Some((r.evidence, 1)),
            },
            // On a terminal the spinner shows progress; only what went wrong is printed.
            SmokeProgress::StepFinished(r) if self.bar.is_some() && !r.outcome.is_failure() => {}
            SmokeProgress::StepFinished(r) => self.say(step_line(&r, false, self.whole)),
            SmokeProgress::Output { stream, line } => self.say(format!("plugin {}| {line}", stream.as_str())),
            SmokeProgress::Stopping { grace } => self
                .say(format!("plugin: stopping (SIGTERM, then SIGKILL after {})", humantime::format_duration(grace))),
        }
    }
}

/// Renders the report.
pub fn report(w: &mut dyn Write, format: Format, r: &SmokeReport) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, r);
    }
    let wide = format == Format::Wide;
    let mut headers = vec!["STEP", "RESULT", "TIME", "DETAIL"];
    if wide {
        headers.insert(1, "KIND");
        headers.push("REASON");
    }
    let mut t = table(headers);
    let mut i = 0;
    while i < r.steps.len() {
        let c = &r.steps[i];
        // A run of steps that did not run for one reason is one row.
        let run = r.steps[i..]
            .iter()
            .take_while(|x| x.outcome == Outcome::Skip && x.evidence == c.evidence && c.evidence.starts_with("not run"))
            .count();
        if run >= 3 {
            let last = &r.steps[i + run - 1];
            let mut row =
                vec![format!("{} … {} ({run})", c.name, last.name), outcome(c.outcome), "-".into(), c.evidence.clone()];
            if wide {
                row.insert(1, "-".into());
                row.push(String::new());
            }
            t.add_row(row);
            i += run;
            continue;
        }
        let detail = one_line(&c.evidence);
        let mut row = vec![c.name.clone(), outcome(c.outcome), format!("{}ms", c.duration_ms), detail];
        if wide {
            row.insert(1, kind_of(&c.name).to_string());
            row.push(c.reason.clone());
        }
        t.add_row(row);
        i += 1;
    }
    write_table(w, &t)?;
    failures(w, &r.steps)?;
    if !r.passed() {
        plugin_output(w, r)?;
    }
    writeln!(w)?;
    writeln!(w, "{}", summary(r))?;
    if r.dir_kept {
        writeln!(w, "directory kept: {}", r.dir)?;
    }
    if let Some(iso) = &r.isolation {
        writeln!(w, "isolated ({} namespaces); mounted inside, the host's mounts unchanged:", iso.namespaces)?;
        for m in &iso.mounts {
            writeln!(w, "  {} <- {} ({}: {})", m.target, m.source, m.kind, m.note)?;
        }
    }
    let files: Vec<&crate::smoke::PluginReport> =
        if r.processes.is_empty() { vec![&r.plugin] } else { r.processes.iter().map(|p| &p.plugin).collect() };
    for f in files.into_iter().flat_map(|p| [&p.stdout.file, &p.stderr.file]).flatten() {
        writeln!(w, "plugin output: {f}")?;
    }
    w.flush()
}

/// The last lines of stderr and stdout of each plugin process a failed step
/// judged (the last process when none did: a run with one process).
fn plugin_output(w: &mut dyn Write, r: &SmokeReport) -> io::Result<()> {
    let failed: Vec<&str> = r.steps.iter().filter(|c| c.outcome.is_failure()).map(|c| c.name.as_str()).collect();
    let judged: Vec<_> =
        r.processes.iter().filter(|p| p.judged_in.iter().any(|n| failed.contains(&n.as_str()))).collect();
    if judged.is_empty() {
        return process_output(w, &r.plugin, "");
    }
    for p in judged {
        let steps: Vec<&str> = p.judged_in.iter().map(String::as_str).filter(|n| failed.contains(n)).collect();
        let whose = format!(", started by {}, failed {}", p.started_by, steps.join(", "));
        process_output(w, &p.plugin, &whose)?;
    }
    Ok(())
}

/// One process's last lines of stderr and stdout.
fn process_output(w: &mut dyn Write, p: &crate::smoke::PluginReport, whose: &str) -> io::Result<()> {
    let state = match (&p.pid, &p.exit) {
        (None, _) => return Ok(()),
        (Some(pid), Some(e)) => format!("pid {pid}{whose}, {e}"),
        (Some(pid), None) => format!("pid {pid}{whose}"),
    };
    for (stream, out) in [(Stream::Stderr, &p.stderr), (Stream::Stdout, &p.stdout)] {
        writeln!(w)?;
        let lines = out.last_lines(TAIL_LINES);
        if lines.is_empty() {
            writeln!(w, "{} ({state}): nothing on {}", "plugin output".bold(), stream.as_str())?;
            continue;
        }
        let of = if out.truncated || out.tail.lines().count() > lines.len() {
            format!("last {} lines of {} ({} bytes in all)", lines.len(), stream.as_str(), out.bytes)
        } else {
            stream.as_str().to_string()
        };
        writeln!(w, "{} ({state}), {of}:", "plugin output".bold())?;
        for l in lines {
            writeln!(w, "  | {}", one_line(l))?;
        }
    }
    Ok(())
}

/// `dpctl smoke: 25 steps: 24 passed, 1 failed, 0 skipped, 0 errors in 4.12s (./my-plugin ...)`.
pub fn summary(r: &SmokeReport) -> String {
    let t = &r.totals;
    let failed = format!("{} failed", t.failed);
    let errors = format!("{} errors", t.errors);
    let verdict = if r.interrupted {
        "INTERRUPTED".magenta().bold().to_string()
    } else if r.passed() {
        "PASS".green().bold().to_string()
    } else {
        "FAIL".red().bold().to_string()
    };
    format!(
        "{verdict} {} steps: {} passed, {}, {} skipped, {} in {:.2}s on kubelet {}{} ({})",
        t.total,
        t.passed,
        if t.failed > 0 { failed.red().bold().to_string() } else { failed },
        t.skipped,
        if t.errors > 0 { errors.magenta().bold().to_string() } else { errors },
        r.duration_ms as f64 / 1000.0,
        r.kubelet_version.label(),
        engine_note(r),
        shell_words(&r.command)
    )
}

/// ` played by referee v1.37.2` when a referee played the kubelet (the
/// sim needs no note: it is the default).
fn engine_note(r: &SmokeReport) -> String {
    if r.engine == crate::kubelet_sim::default_engine() { String::new() } else { format!(", played by {}", r.engine) }
}

/// One line of narration for a finished step: `pass  registration  31ms`,
/// with the evidence when `detail` or when it did not pass: whole when
/// `whole` (not a terminal), else shortened to fit a line.
pub fn step_line(c: &CheckResult, detail: bool, whole: bool) -> String {
    let pad = 5usize.saturating_sub(c.outcome.as_str().len());
    let mut line =
        format!("{}{} {:<28} {:>7}", outcome(c.outcome), " ".repeat(pad), c.name, format!("{}ms", c.duration_ms));
    if detail || c.outcome.is_failure() {
        line.push_str("  ");
        let evidence = one_line(&c.evidence);
        line.push_str(&if whole { evidence } else { shorten(&evidence, 110) });
    }
    line.trim_end().to_string()
}

/// Writes the report as JUnit XML: one `<testsuite name="dpctl smoke">`, one
/// `<testcase>` per step or check (classname `dpctl.smoke.kubelet-1.37` or
/// `dpctl.plugin.check.kubelet-1.37`, name `registration (kubelet-1.37)`:
/// the release always, as in a run of several, so that the files of a CI
/// matrix's jobs merge without two cases of one name), and the plugin's
/// output in the suite's `<system-out>` and `<system-err>`.
pub fn junit(w: &mut dyn Write, r: &SmokeReport) -> io::Result<()> {
    let props = junit_properties(r);
    suite_of(&r.suite, r, &props).open(w)?;
    junit_body(w, r, &format!("kubelet-{}", r.kubelet_version))?;
    JunitSuite::close(w)
}

/// The JUnit suite frame of one smoke run, named `name`.
fn suite_of<'a>(name: &'a str, r: &'a SmokeReport, props: &'a [(&'a str, String)]) -> JunitSuite<'a> {
    JunitSuite { name, totals: &r.totals, duration_ms: r.duration_ms, started: &r.started, properties: props }
}

/// Writes a matrix run as JUnit XML: one `<testsuite name="dpctl smoke
/// (kubelet 1.28)">` per release, each as [`junit`] writes its one suite.
pub fn junit_matrix(w: &mut dyn Write, m: &MatrixReport) -> io::Result<()> {
    let all: Vec<CheckResult> = m.runs.iter().flat_map(|r| r.steps.iter().cloned()).collect();
    let totals = crate::check::Totals::of(&all);
    xml::open_many(w, &totals, m.runs.iter().map(|r| r.duration_ms).sum())?;
    for r in &m.runs {
        let name = format!("{} (kubelet {})", r.suite, r.kubelet_version);
        let props = junit_properties(r);
        suite_of(&name, r, &props).open_suite(w)?;
        junit_body(w, r, &format!("kubelet-{}", r.kubelet_version))?;
        JunitSuite::close_suite(w)?;
    }
    xml::close_many(w)
}

/// The testcases and the plugin's output of one run.
fn junit_body(w: &mut dyn Write, r: &SmokeReport, release: &str) -> io::Result<()> {
    for c in &r.steps {
        testcase(w, c, release)?;
    }
    writeln!(w, "    <system-out>{}</system-out>", text(&r.plugin.stdout.tail))?;
    writeln!(w, "    <system-err>{}</system-err>", text(&r.plugin.stderr.tail))
}

/// The `<property>` pairs of one run.
fn junit_properties(r: &SmokeReport) -> Vec<(&'static str, String)> {
    let mut props: Vec<(&str, String)> = vec![
        ("kubelet_version", r.kubelet_version.to_string()),
        ("engine", r.engine.clone()),
        ("command", shell_words(&r.command)),
        ("dir", r.dir.clone()),
        ("kubelet_socket", r.kubelet_socket.clone()),
    ];
    if let Some(tag) = r.kubelet_version.pre_release() {
        props.push(("pre_release", tag.to_string()));
    }
    if let Some(res) = &r.resource {
        props.push(("resource", res.clone()));
    }
    if let Some(s) = &r.plugin_socket {
        props.push(("plugin_socket", s.clone()));
    }
    if let Some(e) = &r.plugin.exit {
        props.push(("plugin_exit", e.text.clone()));
    }
    if r.interrupted {
        props.push(("interrupted", "true".into()));
    }
    props
}

/// Renders a matrix run: each release's report under a `kubelet <version>`
/// heading, then one row per release and which ones passed. JSON: the
/// [`MatrixReport`] (one object).
pub fn matrix(w: &mut dyn Write, format: Format, m: &MatrixReport) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, m);
    }
    for r in &m.runs {
        writeln!(w, "{}", format!("== kubelet {}{} ==", r.kubelet_version.label(), engine_note(r)).bold())?;
        report(w, format, r)?;
        writeln!(w)?;
    }
    let mut t = table(["KUBELET", "RESULT", "STEPS", "PASSED", "FAILED", "SKIPPED", "ERRORS", "TIME", "FIRST FAILURE"]);
    for r in &m.runs {
        let verdict = if r.interrupted {
            "interrupted".magenta().to_string()
        } else if r.passed() {
            "pass".green().to_string()
        } else {
            "fail".red().bold().to_string()
        };
        let first = r
            .steps
            .iter()
            .find(|c| c.outcome.is_failure())
            .map_or_else(|| "-".to_string(), |c| format!("{}: {}", c.name, one_line(&c.evidence)));
        t.add_row([
            if r.engine == crate::kubelet_sim::default_engine() {
                r.kubelet_version.label()
            } else {
                format!("{} ({})", r.kubelet_version.label(), r.engine)
            },
            verdict,
            r.totals.total.to_string(),
            r.totals.passed.to_string(),
            r.totals.failed.to_string(),
            r.totals.skipped.to_string(),
            r.totals.errors.to_string(),
            format!("{:.2}s", r.duration_ms as f64 / 1000.0),
            first,
        ]);
    }
    write_table(w, &t)?;
    writeln!(w)?;
    writeln!(w, "{}", matrix_summary(m))?;
    w.flush()
}

/// `PASS on kubelet 1.28, 1.32, 1.36` or `FAIL on kubelet master (passed: 1.28, 1.36)`.
pub fn matrix_summary(m: &MatrixReport) -> String {
    let join = |v: &[crate::kubelet_sim::KubeletVersion]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
    if m.passed() {
        format!("{} on kubelet {}", "PASS".green().bold(), join(&m.passed).join(", "))
    } else {
        let passed = join(&m.passed);
        format!(
            "{} on kubelet {} (passed: {})",
            "FAIL".red().bold(),
            join(&m.failed).join(", "),
            if passed.is_empty() { "none".to_string() } else { passed.join(", ") }
        )
    }
}

/// One `<testcase>`; the classname and the name carry the release
/// (`release`: `kubelet-1.28`), so each is unique across runs and files.
fn testcase(w: &mut dyn Write, c: &CheckResult, release: &str) -> io::Result<()> {
    let classname = if kind_of(&c.name) == "check" { "dpctl.plugin.check" } else { "dpctl.smoke" };
    let named = CheckResult { name: format!("{} ({release})", c.name), ..c.clone() };
    xml::testcase(w, &format!("{classname}.{release}"), &named)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{CheckId, Totals};
    use crate::smoke::{OutputView, PluginReport, StepId};
    use std::time::Duration;

    fn sample() -> SmokeReport {
        let out = |s: &str| OutputView { bytes: s.len() as u64, tail: s.into(), truncated: false, file: None };
        let mut r = SmokeReport {
            kubelet_version: crate::kubelet_sim::KubeletVersion::Release(32),
            engine: crate::kubelet_sim::default_engine(),
            suite: crate::smoke::SUITE_NAME.into(),
            command: vec!["./plugin".into(), "--dir".into(), "/tmp/x".into()],
            dir: "/tmp/x".into(),
            dir_kept: false,
            kubelet_socket: "/tmp/x/kubelet.sock".into(),
            resource: Some("example.com/gpu".into()),
            plugin_socket: Some("/tmp/x/gpu.sock".into()),
            started: "2026-01-01T00:00:00.000Z".into(),
            duration_ms: 3210,
            interrupted: false,
            totals: Totals::default(),
            steps: vec![
                CheckResult::new(StepId::Launch, Outcome::Pass, "pid 7", Duration::from_millis(1)),
                CheckResult::new(StepId::Registration, Outcome::Fail, "rejected: <bad & \"name\">", Duration::ZERO),
                CheckResult::new(CheckId::OptionsAnswer, Outcome::Skip, "not run", Duration::ZERO),
                CheckResult::new(StepId::RegistrationRequest, Outcome::Skip, "not run: x", Duration::ZERO),
                CheckResult::new(StepId::Admission, Outcome::Skip, "not run: x", Duration::ZERO),
                CheckResult::new(StepId::Shutdown, Outcome::Skip, "not run: x", Duration::ZERO),
            ],
            plugin: PluginReport {
                pid: Some(7),
                exit: None,
                stdout: out("hello\n"),
                stderr: out("E0101 registration failed\n"),
            },
            registry_dir: "/tmp/x/plugins_registry".into(),
            isolation: None,
            restarts: None,
            processes: Vec::new(),
        };
        r.tally();
        r
    }

    #[test]
    fn table_shows_failures_then_the_plugin_output_then_the_summary() {
        colored::control::set_override(false);
        let mut out = Vec::new();
        report(&mut out, Format::Table, &sample()).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.starts_with("STEP"), "{s}");
        assert!(s.contains("registration-request … shutdown (3)   skip"), "{s}");
        assert!(s.contains("FAIL registration\n  evidence: rejected"), "{s}");
        assert!(s.contains("plugin output (pid 7), stderr:\n  | E0101 registration failed"), "{s}");
        assert!(
            s.trim_end().ends_with(
                "FAIL 6 steps: 1 passed, 1 failed, 4 skipped, 0 errors in 3.21s on kubelet 1.32 (./plugin --dir /tmp/x)"
            ),
            "{s}"
        );
    }

    #[test]
    fn junit_has_classnames_and_the_plugin_output() {
        let mut out = Vec::new();
        junit(&mut out, &sample()).unwrap();
        let s = String::from_utf8(out).unwrap();
        // One release: the names carry it all the same.
        assert!(s.contains(r#"<testcase name="launch (kubelet-1.32)" classname="dpctl.smoke.kubelet-1.32""#), "{s}");
        assert!(
            s.contains(r#"<testcase name="options-answer (kubelet-1.32)" classname="dpctl.plugin.check.kubelet-1.32""#),
            "{s}"
        );
        assert!(s.contains("&lt;bad &amp; &quot;name&quot;&gt;"), "{s}");
        assert!(s.contains("<system-err>E0101 registration failed\n</system-err>"), "{s}");
        assert!(s.contains(r#"<property name="resource" value="example.com/gpu"/>"#), "{s}");
    }
}
