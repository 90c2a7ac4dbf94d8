//! The step harness of `dpctl smoke` and `dpctl dra smoke`: the rows a run
//! records (each one shown as it finishes), the steps `--skip` leaves out,
//! the steps that did not run, the plugin's output, and the report they
//! make. The steps themselves, and what a row says, are each command's own.

use std::time::{Duration, SystemTime};

use super::process::{OutputView, PluginProcess, Stream};
use super::{LEAVES_NO_PROCESSES, PluginReport, SmokeProgress, SmokeReport};
use crate::check::{Case, CheckResult, Outcome, Totals};
use crate::kubelet_sim::KubeletVersion;

/// The rows of one run, in the order recorded, and why the steps still
/// missing did not run.
pub(crate) struct Rows<'p, S> {
    results: Vec<CheckResult>,
    skip: Vec<S>,
    progress: Box<dyn FnMut(SmokeProgress) + Send + 'p>,
    /// Why the remaining steps do not run (set by the step that stops the run).
    pub why_not: Option<String>,
}

impl<'p, S: Case + PartialEq> Rows<'p, S> {
    /// No rows yet; `skip` are the steps `--skip` leaves out, `progress`
    /// is told of each step as it starts and ends.
    pub fn new(skip: Vec<S>, progress: impl FnMut(SmokeProgress) + Send + 'p) -> Self {
        Rows { results: Vec::new(), skip, progress: Box::new(progress), why_not: None }
    }

    /// Passes a progress message on.
    pub fn send(&mut self, p: SmokeProgress) {
        (self.progress)(p);
    }

    /// Tells that `step` started.
    pub fn started(&mut self, step: S) {
        self.send(SmokeProgress::StepStarted(step.name().to_string()));
    }

    /// Records a row and tells that it finished.
    pub fn record(&mut self, r: CheckResult) {
        self.send(SmokeProgress::StepFinished(r.clone()));
        self.results.push(r);
    }

    /// Whether `--skip` left `step` out.
    pub fn skipped(&self, step: S) -> bool {
        self.skip.contains(&step)
    }

    /// The rows so far.
    pub fn results(&self) -> &[CheckResult] {
        &self.results
    }

    /// The rows so far, to add a row already shown, or to reorder them.
    pub fn results_mut(&mut self) -> &mut Vec<CheckResult> {
        &mut self.results
    }

    /// Whether a row named `name` was recorded.
    pub fn has(&self, name: &str) -> bool {
        self.results.iter().any(|r| r.name == name)
    }

    /// The cases of `order` (steps, or checks run among them) with no row
    /// yet, in that order.
    pub fn missing<C: Case + Copy>(&self, order: &[C]) -> Vec<C> {
        order.iter().copied().filter(|s| !self.has(s.name())).collect()
    }

    /// Adds a row for each step of [`Case::all`] that has none (`row` says
    /// what it is: skipped by `--skip`, not played, not run), without telling
    /// progress, and puts every row in report order.
    pub fn fill_sorted(&mut self, row: impl Fn(&Self, S) -> CheckResult)
    where
        S: Copy + 'static,
    {
        for s in self.missing(S::all()) {
            let r = row(self, s);
            self.results.push(r);
        }
        let pos = |name: &str| S::all().iter().position(|s| s.name() == name).unwrap_or(usize::MAX);
        self.results.sort_by_key(|r| pos(&r.name));
    }

    /// The rows, for the report (none are left).
    pub fn take(&mut self) -> Vec<CheckResult> {
        std::mem::take(&mut self.results)
    }
}

/// What a report says of the run besides its rows.
pub(crate) struct Head {
    /// The suite's name.
    pub suite: &'static str,
    /// The release the kubelet played.
    pub kubelet_version: KubeletVersion,
    /// The engine's name.
    pub engine: String,
    /// The plugin's command as run.
    pub command: Vec<String>,
    /// The run's directory, and whether it is kept.
    pub dir: String,
    pub dir_kept: bool,
    /// The kubelet socket and the plugins_registry directory.
    pub kubelet_socket: String,
    pub registry_dir: String,
    /// The resource (or driver) and the socket it registered.
    pub resource: Option<String>,
    pub plugin_socket: Option<String>,
}

/// When a run started, how long it took, and whether Ctrl-C ended it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ran {
    pub started: SystemTime,
    pub took: Duration,
    pub interrupted: bool,
}

impl Head {
    /// The report of `steps` and the plugin's process as it shows (its last one).
    pub fn report(self, ran: Ran, steps: Vec<CheckResult>, plugin: PluginReport) -> SmokeReport {
        SmokeReport {
            suite: self.suite.into(),
            kubelet_version: self.kubelet_version,
            engine: self.engine,
            command: self.command,
            dir: self.dir,
            dir_kept: self.dir_kept,
            kubelet_socket: self.kubelet_socket,
            resource: self.resource,
            plugin_socket: self.plugin_socket,
            started: crate::text::timestamp(ran.started),
            duration_ms: crate::text::millis(ran.took),
            interrupted: ran.interrupted,
            totals: Totals::default(),
            steps,
            plugin,
            registry_dir: self.registry_dir,
            isolation: None,
            restarts: None,
            processes: Vec::new(),
        }
    }
}

/// A plugin process in the report: its pid, how it ended, what it wrote.
pub(crate) fn plugin_report(p: Option<&PluginProcess>) -> PluginReport {
    let empty = OutputView { bytes: 0, tail: String::new(), truncated: false, file: None };
    match p {
        Some(p) => PluginReport {
            pid: Some(p.pid()),
            exit: p.exit(),
            stdout: p.output(Stream::Stdout),
            stderr: p.output(Stream::Stderr),
        },
        None => PluginReport { pid: None, exit: None, stdout: empty.clone(), stderr: empty },
    }
}

/// Closes a report: `survivors`, the processes the plugin (`what`:
/// "plugin", "driver") left running, killed after it was stopped
/// ([`super::process::kill_survivors`]), fail it; then the totals.
pub(crate) fn close(report: &mut SmokeReport, what: &str, survivors: &[String]) {
    if !survivors.is_empty() {
        // A plugin that daemonises outlives its process and the run, as it would
        // outlive its pod on a node: that is a failure, not a pass.
        let evidence = format!("still running after the {what} was stopped, now killed: {}", survivors.join(", "));
        report.steps.push(CheckResult::of(LEAVES_NO_PROCESSES, Outcome::Fail, evidence, Duration::ZERO));
    }
    report.tally();
}
