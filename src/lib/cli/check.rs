//! `dpctl plugin check`: run the device-plugin sanity suite against a socket
//! and report it as a table, JSON or JUnit XML.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::args::Target;
use super::junit::JunitFile;
use super::out_err;
use crate::check::{self, Case, CheckId, CheckOptions, CheckTarget, Registration};
use crate::duration::parse as parse_duration;
use crate::error::{Result, exit};
use crate::output::{Streams, check as render};
use crate::proto::deviceplugin::v1beta1 as dp;

/// `dpctl plugin check` arguments (the help text is on `PluginCommand::Check`).
#[derive(Debug, Args)]
#[command(after_long_help = check_help())]
pub struct CheckArgs {
    /// Which plugin.
    #[command(flatten)]
    pub target: Target,
    /// Run only these checks (comma-separated names; see --list).
    #[arg(long, value_delimiter = ',', value_name = "NAME,...", value_parser = super::values::check_names())]
    pub only: Vec<String>,
    /// Leave out these checks (comma-separated names).
    #[arg(long, value_delimiter = ',', value_name = "NAME,...", value_parser = super::values::check_names())]
    pub skip: Vec<String>,
    /// Also write the results as JUnit XML to FILE (testsuite "dpctl plugin check").
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// The options the plugin sends in its RegisterRequest, e.g.
    /// pre_start_required=true,get_preferred_allocation_available=false (keys left out are false, as in
    /// the message). The kubelet never reads them; options-answer notes where GetDevicePluginOptions differs.
    #[arg(long, value_name = "KEY=BOOL,...", value_parser = check::parse_register_options)]
    pub register_options: Option<dp::DevicePluginOptions>,
    /// The check suite's deadlines.
    #[command(flatten)]
    pub timeouts: CheckTimeouts,
    /// How many concurrent calls parallel-calls makes.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub parallel: u16,
    /// Call GetPreferredAllocation even when the plugin does not advertise it
    /// (preferred-not-advertised then says whether it answers). A kubelet
    /// never does, and a plugin may crash in a handler it never expects to run.
    #[arg(long)]
    pub probe_unadvertised: bool,
    /// Print only what two runs against the same plugin agree on (each check's name and outcome, the
    /// totals; no evidence, times or paths), as JSON (YAML with -o yaml), for diffing against a
    /// committed baseline.
    #[arg(long)]
    pub stable: bool,
    /// List the checks (name and why it matters; -o wide adds the rule) and exit.
    #[arg(long)]
    pub list: bool,
}

/// The check suite's deadlines, the same flags in `plugin check` and `smoke`.
#[derive(Debug, Args)]
pub struct CheckTimeouts {
    /// How long the first ListAndWatch message may take (after registration, under smoke).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    pub first_list_timeout: Duration,
    /// How long the ListAndWatch stream must stay open after its first message (at least).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "2s")]
    pub stream_window: Duration,
    /// PreStartContainer deadline (the kubelet's is 30s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "30s")]
    pub prestart_timeout: Duration,
}

/// Runs `dpctl plugin check`.
pub async fn run(args: CheckArgs, s: &mut Streams<'_>) -> Result<u8> {
    if args.list {
        render::catalog(&mut *s.out, s.format).map_err(out_err)?;
        return Ok(exit::OK);
    }
    let checks = check::select(&args.only, &args.skip)?;
    let target = CheckTarget {
        socket: args.target.socket_path()?,
        connect_timeout: args.target.connect_timeout,
        max_message_bytes: args.target.max_recv_bytes,
        registration: args
            .register_options
            .map(|o| Registration { options: Some(o), source: "--register-options".into() }),
        tap: s.wire.clone(),
    };
    let opts = CheckOptions {
        checks,
        call_timeout: args.target.timeout.unwrap_or(Duration::from_secs(10)),
        first_message_timeout: args.timeouts.first_list_timeout,
        stream_window: args.timeouts.stream_window,
        prestart_timeout: args.timeouts.prestart_timeout,
        parallel: usize::from(args.parallel),
        probe_unadvertised: args.probe_unadvertised,
        ..CheckOptions::default()
    };
    run_check(s, &target, &opts, args.junit.as_deref(), args.stable).await
}

/// Runs the suite with a progress bar on a terminal, the report on stdout,
/// an unreachable plugin's error on stderr, and the JUnit file (opened
/// first, so a bad path is reported before the suite runs; written in every
/// case but usage errors). Returns the exit code.
async fn run_check(
    io: &mut Streams<'_>,
    target: &CheckTarget,
    opts: &CheckOptions,
    junit: Option<&std::path::Path>,
    stable: bool,
) -> Result<u8> {
    let junit = JunitFile::create(junit)?;
    let bar = crate::output::progress_bar(io.progress, Some(opts.checks.len() as u64), "{spinner} [{pos}/{len}] {msg}");
    let report = check::run_checks_with(target, opts, &mut |p| {
        if let Some(bar) = &bar {
            render::progress(bar, p);
        }
    })
    .await;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    render::finished(io, &report, stable)?;
    if let Some(file) = junit {
        file.write(|w| render::junit(w, &report))?;
    }
    super::junit::step_summary(&mut *io.err, |w| render::step_summary(w, &report))?;
    Ok(report.exit_code())
}

/// `--help`'s text after the options: the checks, outcomes and exit codes.
fn check_help() -> String {
    format!(
        "Checks, in run order (--list says why each matters): {}.\n\n\
         Outcomes: pass; fail (the plugin broke the rule: evidence and rule shown); skip (does not apply, \
         e.g. PreStartContainer not required); error (could not run, e.g. no device list to work with).\n\
         --timeout is the deadline of each call (default 10s).\n\n\
         Exit codes:\n  \
         0  every check passed or was skipped\n  \
         1  a check failed or could not run\n  \
         2  bad usage (e.g. an unknown check name in --only/--skip, one name in both, or a --junit file that cannot be written)\n  \
         3  the plugin could not be reached at all (no socket, nothing listening, ...): nothing was checked\n  \
         5  connecting timed out: nothing was checked\n\
         The JUnit file is written in every case but usage errors.",
        CheckId::names().join(", ")
    )
}
