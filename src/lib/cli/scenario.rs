//! `dpctl scenario run|diff`: scenario files (a node, mock plugins, steps)
//! run on kubelet-sim or on a referee running the kubelet's own code, and
//! the two compared.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::error::Result;
use crate::kubelet_sim::KubeletVersion;
use crate::output::{Streams, scenario as render};
use crate::scenario::diff::diff_plan;
use crate::scenario::run::{plan, run_plan};
use crate::smoke::engine::EngineKind;

const EXAMPLES: &str = "\
Examples:
  dpctl scenario run conformance/scenarios/
  dpctl scenario run conformance/scenarios/register-basic.toml --kubelet-version 1.34 -o json
  dpctl scenario run conformance/scenarios/ --engine referee:target/referee
  dpctl scenario diff conformance/scenarios/ --referee target/referee --kubelet-version 1.36,1.37
  sudo dpctl scenario diff conformance/scenarios/ --engine kubelet:target/kubelet

A scenario (TOML, see docs/scenarios.md) names a node, mock plugins and steps; after each step
the run records what a user or a plugin can observe: registrations and calls each plugin saw,
capacity and allocatable, admission verdicts and devices, the checkpoint, PodResources.
`diff` runs each scenario on kubelet-sim and on the referee (conformance/build.sh builds them),
or with --engine kubelet:PATH on a real kubelet (static pods: scenarios with DRA drivers,
restarts, reboots or a Topology/CPU manager are skipped, each with the reason), and exits 1 on
a difference the scenario does not declare.

Exit codes: 0 all good; 1 an expectation failed or an undeclared difference; 2 bad input
(a scenario file, a missing referee: the message says how to build it).";

/// `dpctl scenario ...`
#[derive(Debug, Subcommand)]
pub enum ScenarioCommand {
    /// Run scenarios on one engine; show what was observed after each step.
    #[command(after_long_help = EXAMPLES)]
    Run(RunArgs),
    /// Run scenarios on kubelet-sim and on a referee or a real kubelet; show every difference.
    #[command(after_long_help = EXAMPLES)]
    Diff(DiffArgs),
}

/// `dpctl scenario run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Scenario files, or directories of them (*.toml).
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// sim (kubelet-sim, in-process) or referee:PATH (a referee binary, or a directory of
    /// dpctl-referee-1.NN binaries built by conformance/build.sh).
    #[arg(long, value_name = "ENGINE", default_value = "sim")]
    pub engine: EngineKind,
    /// Only these releases of each scenario's, comma-separated (e.g. 1.34,1.37) or a range (1.34-1.37)
    /// [default: each scenario's].
    #[arg(long, value_name = "VERSION,...", value_parser = super::values::kubelet_versions())]
    pub kubelet_version: Option<String>,
}

/// `dpctl scenario diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// Scenario files, or directories of them (*.toml).
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// A directory of dpctl-referee-1.NN binaries (conformance/build.sh), or one binary
    /// (the same as --engine referee:PATH).
    #[arg(long, value_name = "PATH", required_unless_present = "engine", conflicts_with = "engine")]
    pub referee: Option<PathBuf>,
    /// What kubelet-sim is compared with: referee:PATH, or kubelet:PATH (a real kubelet,
    /// conformance/build.sh kubelet; root, containerd and runc): only the scenarios static pods
    /// can express run there, the others are listed as skipped with the reason.
    #[arg(long, value_name = "ENGINE")]
    pub engine: Option<EngineKind>,
    /// Only these releases of each scenario's, comma-separated or a range (1.34-1.37) [default: each scenario's].
    #[arg(long, value_name = "VERSION,...", value_parser = super::values::kubelet_versions())]
    pub kubelet_version: Option<String>,
}

/// Runs `dpctl scenario ...`.
pub async fn run(cmd: ScenarioCommand, s: &mut Streams<'_>) -> Result<u8> {
    match cmd {
        ScenarioCommand::Run(a) => {
            let versions = a.kubelet_version.as_deref().map(KubeletVersion::parse_list).transpose()?;
            let plan = plan(&a.files, versions.as_deref())?;
            let report = {
                let show = !s.quiet && !s.format.is_json();
                let mut each = render::run_progress(&mut *s.err, show);
                run_plan(plan, &a.engine, None, &mut each).await?
            };
            render::ran(s, &report)?;
            Ok(report.exit_code())
        }
        ScenarioCommand::Diff(a) => {
            let versions = a.kubelet_version.as_deref().map(KubeletVersion::parse_list).transpose()?;
            let plan = plan(&a.files, versions.as_deref())?;
            let report = {
                let show = !s.quiet && !s.format.is_json();
                let mut each = render::diff_progress(&mut *s.err, show);
                let other = a.engine.or(a.referee.map(EngineKind::Referee)).ok_or_else(|| {
                    crate::error::Error::invalid(
                        "scenario diff",
                        "compare with what? give --referee PATH or --engine ENGINE",
                    )
                })?;
                diff_plan(plan, &other, None, &mut each).await?
            };
            render::diffed(s, &report)?;
            Ok(report.exit_code())
        }
    }
}
