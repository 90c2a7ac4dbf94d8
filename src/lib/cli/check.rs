//! `dpctl plugin check`: run the device-plugin sanity suite against a socket
//! and report it as a table, JSON or JUnit XML.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::plugin::Target;
use super::{Ctx, out_err};
use crate::check::{self, Case, CheckId, CheckOptions, CheckTarget, Outcome, Progress, Registration};
use crate::duration::parse as parse_duration;
use crate::error::{Result, exit};
use crate::output::check as render;
use crate::output::junit::JunitFile;
use crate::proto::deviceplugin::v1beta1 as dp;

/// `dpctl plugin check` arguments (the help text is on `PluginCommand::Check`).
#[derive(Debug, Args)]
#[command(after_long_help = after_help())]
pub struct CheckArgs {
    /// Which plugin.
    #[command(flatten)]
    pub target: Target,
    /// Run only these checks (comma-separated names; see --list).
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    pub only: Vec<String>,
    /// Leave out these checks (comma-separated names).
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    pub skip: Vec<String>,
    /// Also write the results as JUnit XML to FILE (testsuite "dpctl plugin check").
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// The options the plugin sends in its RegisterRequest, to compare with
    /// GetDevicePluginOptions, e.g. pre_start_required=true,get_preferred_allocation_available=false
    /// (keys left out are false, as in the message).
    #[arg(long, value_name = "KEY=BOOL,...", value_parser = parse_register_options)]
    pub register_options: Option<dp::DevicePluginOptions>,
    /// How long the first ListAndWatch message may take.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    pub first_list_timeout: Duration,
    /// How long the ListAndWatch stream must stay open after its first message (at least).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "2s")]
    pub stream_window: Duration,
    /// PreStartContainer deadline (the kubelet's is 30s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "30s")]
    pub prestart_timeout: Duration,
    /// How many concurrent calls parallel-calls makes.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub parallel: u16,
    /// Call GetPreferredAllocation even when the plugin does not advertise it
    /// (preferred-not-advertised then says whether it answers). A kubelet
    /// never does, and a plugin may crash in a handler it never expects to run.
    #[arg(long)]
    pub probe_unadvertised: bool,
    /// List the checks (name and why it matters; -o wide adds the rule) and exit.
    #[arg(long)]
    pub list: bool,
}

fn after_help() -> String {
    let names = CheckId::names();
    let mut s = format!("Checks, in run order (--list says why each matters): {}.\n", names.join(", "));
    s.push_str(
        "\nOutcomes: pass; fail (the plugin broke the rule: evidence and rule shown); skip (does not apply, \
         e.g. PreStartContainer not required); error (could not run, e.g. no device list to work with).\n\
         --timeout is the deadline of each call (default 10s).\n\n\
         Exit codes:\n  \
         0  every check passed or was skipped\n  \
         1  a check failed or could not run\n  \
         2  bad usage (e.g. an unknown check name in --only/--skip, or a --junit file that cannot be written)\n  \
         3  the plugin could not be reached at all (no socket, nothing listening, ...): nothing was checked\n  \
         5  connecting timed out: nothing was checked\n\
         The JUnit file is written in every case but usage errors.",
    );
    s
}

/// Parses `pre_start_required=true,get_preferred_allocation_available=0`.
fn parse_register_options(s: &str) -> std::result::Result<dp::DevicePluginOptions, String> {
    let mut o = dp::DevicePluginOptions::default();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) =
            part.split_once('=').ok_or_else(|| format!("{part:?} is not KEY=BOOL (e.g. pre_start_required=true)"))?;
        let value = match value.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => true,
            "false" | "0" | "no" => false,
            v => return Err(format!("{key}: {v:?} is not true or false")),
        };
        match key.trim() {
            "pre_start_required" => o.pre_start_required = value,
            "get_preferred_allocation_available" => o.get_preferred_allocation_available = value,
            k => {
                return Err(format!(
                    "unknown option {k:?}; the options are pre_start_required and get_preferred_allocation_available"
                ));
            }
        }
    }
    Ok(o)
}

/// Runs `dpctl plugin check`.
pub async fn run(args: CheckArgs, ctx: &mut Ctx<'_>) -> Result<u8> {
    if args.list {
        render::catalog(&mut ctx.term.out, ctx.format).map_err(out_err)?;
        return Ok(exit::OK);
    }
    let checks = check::select(&args.only, &args.skip)?;
    let socket = args.target.socket_path()?;
    // Opened first, so that a bad path is reported before the suite runs.
    let junit = JunitFile::create(args.junit.as_deref())?;
    let target = CheckTarget {
        socket,
        connect_timeout: args.target.connect_timeout,
        max_message_bytes: args.target.max_recv_bytes,
        registration: args
            .register_options
            .map(|o| Registration { options: Some(o), source: "--register-options".into() }),
    };
    let opts = CheckOptions {
        checks,
        call_timeout: args.target.timeout.unwrap_or(Duration::from_secs(10)),
        first_message_timeout: args.first_list_timeout,
        stream_window: args.stream_window,
        prestart_timeout: args.prestart_timeout,
        parallel: usize::from(args.parallel),
        probe_unadvertised: args.probe_unadvertised,
        ..CheckOptions::default()
    };
    let bar = ctx.progress_allowed().then(|| {
        let bar = indicatif::ProgressBar::new(opts.checks.len() as u64);
        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} [{pos}/{len}] {msg}") {
            bar.set_style(style);
        }
        bar.enable_steady_tick(Duration::from_millis(100));
        bar
    });
    let report = check::run_checks_with(&target, &opts, &mut |p| {
        if let Some(bar) = &bar {
            match p {
                Progress::Started(id) => bar.set_message(id.name()),
                Progress::Finished(r) => {
                    bar.inc(1);
                    if r.outcome == Outcome::Fail {
                        bar.println(format!("{} {}", crate::output::cases::outcome(r.outcome), r.name));
                    }
                }
            }
        }
    })
    .await;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    render::report(&mut ctx.term.out, ctx.format, &report).map_err(out_err)?;
    if let Some(u) = &report.unreachable {
        // As the binary prints errors: even with --quiet.
        writeln!(ctx.term.err, "dpctl: error: {}", u.message).map_err(out_err)?;
        if let Some(h) = &u.hint {
            writeln!(ctx.term.err, "  hint: {h}").map_err(out_err)?;
        }
    }
    if let Some(file) = junit {
        file.write(|w| render::junit(w, &report))?;
    }
    Ok(report.exit_code())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_options_parse() {
        let o = parse_register_options("pre_start_required=true, get_preferred_allocation_available=0").unwrap();
        assert!(o.pre_start_required && !o.get_preferred_allocation_available);
        assert_eq!(parse_register_options("").unwrap(), dp::DevicePluginOptions::default());
        assert!(parse_register_options("pre_start_required").unwrap_err().contains("KEY=BOOL"));
        assert!(parse_register_options("prestart=true").unwrap_err().contains("unknown option"));
        assert!(parse_register_options("pre_start_required=maybe").unwrap_err().contains("not true or false"));
    }
}
