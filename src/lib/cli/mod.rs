//! The command line: clap definitions and the glue from arguments to the
//! library. This is the only module that knows about clap; it writes data to
//! the [`Term`]'s stdout and progress to its stderr, never anywhere else.

pub mod apiserver;
pub mod args;
pub mod bench;
pub mod check;
pub mod checkpoint;
pub mod completions;
pub mod demo;
pub mod doctor;
pub mod dra;
pub mod explain;
pub mod help;
mod junit;
pub mod kubelet_sim;
pub mod mock_plugin;
pub mod plugin;
pub mod podresources;
pub mod scenario;
pub mod smoke;
mod values;

use clap::{Args, Parser, Subcommand};

use crate::error::Result;
use crate::output::{Format, Term};

const EXIT_CODES: &str = "\
Exit codes:
  0  success (and every check passed)
  1  a check or expectation failed (the report says which)
  2  bad usage or input (flags, config file, manifest, a file over 64 MiB, a symbolic-link loop)
  3  socket problem: no socket, not a socket, permission denied, nothing listening, cannot bind;
     nothing running there is 3 for every command (plugin, podresources, kubelet-sim and
     mock-plugin steering alike)
  4  the peer answered with an error (gRPC status, rejected registration, message over the limit)
  5  a deadline or wait timed out

Environment:
  DPCTL_DEVICE_PLUGIN_DIR    device-plugin directory [default: /var/lib/kubelet/device-plugins]
  DPCTL_PODRESOURCES_SOCKET  PodResources socket [default: /var/lib/kubelet/pod-resources/kubelet.sock]
  DPCTL_ROOT                 host-path prefix for doctor and checkpoint, e.g. /host in a debug pod
  DPCTL_NODE_NAME            node name doctor records in its report
  DPCTL_LOG                  log filter for stderr, e.g. debug or dpctl=trace (overrides -v)
  NO_COLOR                   disables color (as --color never)";

/// Debug Kubernetes device plugins without a cluster: be the kubelet, poke a
/// plugin's socket, read a kubelet's PodResources API, or be a device plugin.
#[derive(Debug, Parser)]
#[command(name = "dpctl", version, after_long_help = EXIT_CODES, propagate_version = true, disable_help_subcommand = true)]
pub struct Cli {
    /// Options every command takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// Output format: table for people, json for programs (JSON Lines for streams).
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// When to color the output.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,
    /// More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call
    /// to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the
    /// latency; -vv adds the request and response headers and the trailers; -vvv prints long
    /// messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv
    /// debug, -vvv trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only errors on stderr; no progress display.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Never shorten table cells (they are shortened only when stdout is a terminal).
    #[arg(long, global = true)]
    pub no_trunc: bool,
    /// Tables without their header line (for `| awk`, as kubectl's --no-headers).
    #[arg(long, global = true)]
    pub no_headers: bool,
}

/// When to color.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// When stdout is a terminal and NO_COLOR is unset.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Talk to a device plugin's socket as the kubelet would.
    #[command(subcommand)]
    Plugin(plugin::PluginCommand),
    /// Be the kubelet's device manager: accept registrations, admit pods, restart.
    KubeletSim(kubelet_sim::KubeletSimArgs),
    /// Read a kubelet's PodResources API.
    #[command(subcommand)]
    Podresources(podresources::PodResourcesCommand),
    /// Be a device plugin, well-behaved or misbehaving on request.
    MockPlugin(mock_plugin::MockPluginArgs),
    /// DRA drivers: call a driver's sockets as the kubelet does (info, prepare, unprepare,
    /// watch-health) with the answers judged, or be a mock DRA driver.
    #[command(subcommand)]
    Dra(dra::DraCommand),
    /// Serve the Kubernetes API a DRA driver needs (claims, Node, ResourceSlices) from a file,
    /// with no cluster; record the slices it publishes.
    Apiserver(apiserver::ApiserverArgs),
    /// Run a vendor's plugin against a fresh kubelet-sim and check it end to end.
    Smoke(smoke::SmokeArgs),
    /// Run scenario files on kubelet-sim or a referee (the kubelet's own code); diff the two.
    #[command(subcommand)]
    Scenario(scenario::ScenarioCommand),
    /// Watch kubelet-sim and mock-plugin work together, in a temporary directory.
    Demo(demo::DemoArgs),
    /// Read the kubelet's device-manager checkpoint: show it, verify its checksum (read-only).
    #[command(subcommand)]
    Checkpoint(checkpoint::CheckpointCommand),
    /// Check a node's device-plugin setup in one read-only run: findings with evidence and hints.
    Doctor(doctor::DoctorArgs),
    /// Name the cause of a kubelet admission error as pasted, the releases that say it, and the check.
    Explain(explain::ExplainArgs),
    /// Load-test a device plugin as a busy node does: throughput, latency, errors, contract violations.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Print a shell completion script.
    Completions(completions::CompletionsArgs),
    /// Print the options every command takes (they are left out of each command's help).
    Options(help::OptionsArgs),
    /// Print a command's full help, or a reference topic (dpctl help topics lists them).
    Help(help::HelpArgs),
}

/// Runs a parsed command line. Returns the exit code (see `--help`).
pub async fn run(cli: Cli, term: &mut Term) -> Result<u8> {
    crate::output::set_width(if term.out_is_tty && !cli.global.no_trunc { Some(stdout_width()) } else { None });
    crate::output::set_no_headers(cli.global.no_headers);
    crate::output::set_yaml(cli.global.output == Format::Yaml);
    let detail = crate::output::verbose::Detail::from_flags(cli.global.verbose, cli.global.quiet, cli.global.output);
    let wire = detail.map(|d| crate::output::verbose::tap(term, d));
    let s = &mut term.streams(cli.global.output, cli.global.quiet, cli.global.verbose);
    s.wire = wire;
    let code = match cli.command {
        Command::Plugin(cmd) => plugin::run(cmd, s).await?,
        Command::KubeletSim(args) => kubelet_sim::run(args, s).await?,
        Command::Podresources(cmd) => podresources::run(cmd, s).await?,
        Command::MockPlugin(args) => mock_plugin::run(args, s).await?,
        Command::Dra(cmd) => dra::run(cmd, s).await?,
        Command::Apiserver(args) => apiserver::run(args, s).await?,
        Command::Smoke(args) => smoke::run(args, s).await?,
        Command::Scenario(cmd) => scenario::run(cmd, s).await?,
        Command::Demo(args) => demo::run(args, s).await?,
        Command::Checkpoint(cmd) => checkpoint::run(cmd, s)?,
        Command::Doctor(args) => doctor::run(args, s).await?,
        Command::Explain(args) => explain::run(args, s)?,
        Command::Bench(cmd) => bench::run(cmd, s).await?,
        Command::Completions(args) => completions::run(&args, s)?,
        Command::Options(_) => help::options(s)?,
        Command::Help(args) => help::help(&args, s)?,
    };
    s.out.flush().map_err(out_err)?;
    Ok(code)
}

pub use crate::output::out_err;

/// The width tables fit on stdout's terminal: its own, else `COLUMNS`, else 120.
fn stdout_width() -> usize {
    let columns = std::env::var("COLUMNS").ok().and_then(|c| c.parse::<usize>().ok()).filter(|w| *w >= 20);
    crate::output::terminal_size(libc::STDOUT_FILENO).map(|(w, _)| w).or(columns).unwrap_or(120)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
