//! `dpctl bench`: the flags of the load generator, its progress display on
//! stderr, and the verdict of `--fail-if`. The load itself is [`crate::bench`].

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::plugin::Target;
use super::{Ctx, out_err};
use crate::bench::{self, BenchConfig, BenchReport, ControlFlipper, Limit, Op, Prepared, Progress, Threshold};
use crate::duration::parse as parse_duration;
use crate::error::{Result, exit};
use crate::output::bench as render;

const BENCH_HELP: &str = "\
Every request is built from the plugin's own ListAndWatch list: healthy device IDs, sizes the list
can satisfy, must-include IDs drawn from the available ones. The answers are checked against the
same contract rules as `dpctl plugin check` and broken rules are counted.

Without --rate the load is closed-loop: each of --concurrency workers sends its next request when
the previous one is answered. With --rate it is open-loop: requests are due on a fixed schedule and
latency is measured from the time a request was due, so requests that wait behind a slow answer
are charged for the wait (no coordinated omission). Latency percentiles come from an HDR histogram
(3 significant digits). CPU/CALL is this process's user+system CPU (getrusage) per call.

The load calls Allocate and PreStartContainer for real: point it at a test instance of a plugin,
not at one serving a production node.

Examples:
  dpctl bench allocate --socket /tmp/dp/example-gpu.sock --concurrency 16 --duration 10s
  dpctl bench allocate --socket A.sock --compare B.sock --rate 2000 --total 20000
  dpctl bench preferred --endpoint vendor.sock --devices-per-request 2 --fail-if 'p99>5ms' --fail-if 'errors>0'
  dpctl bench list --socket /tmp/dp/example-gpu.sock --churn --total 50";

/// `dpctl bench ...`
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Load Allocate (one container request per call).
    #[command(after_long_help = BENCH_HELP)]
    Allocate(LoadArgs),
    /// Load GetPreferredAllocation (every healthy device available).
    #[command(after_long_help = BENCH_HELP)]
    Preferred(LoadArgs),
    /// Load GetDevicePluginOptions.
    #[command(after_long_help = BENCH_HELP)]
    Options(LoadArgs),
    /// Load PreStartContainer.
    #[command(after_long_help = BENCH_HELP)]
    Prestart(LoadArgs),
    /// Measure ListAndWatch: open -> first message decoded; with --churn, a
    /// health change -> the message carrying it decoded.
    #[command(after_long_help = BENCH_HELP)]
    List {
        /// The load.
        #[command(flatten)]
        load: LoadArgs,
        /// Flip one device Unhealthy and back, one change at a time, and time
        /// each change until its message is decoded. Needs a `dpctl
        /// mock-plugin` (health is changed through its control socket).
        #[arg(long, conflicts_with_all = ["rate", "compare"])]
        churn: bool,
    },
}

/// How to load the plugin.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Which plugin.
    #[command(flatten)]
    pub target: Target,
    /// Requests in flight at most.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub concurrency: u32,
    /// HTTP/2 connections the requests share.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub connections: u32,
    /// How long to measure [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "total")]
    pub duration: Option<Duration>,
    /// Measure this many requests instead of a duration.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub total: Option<u64>,
    /// Open-loop arrival rate in requests per second (see below).
    #[arg(long, value_name = "PER_SECOND", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// Load run first and not measured.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "1s")]
    pub warmup: Duration,
    /// Devices per Allocate / PreStartContainer request; the size asked of GetPreferredAllocation.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub devices_per_request: u32,
    /// A second plugin socket: both are loaded alternately (A, B, A, B) and the ratio B/A is printed.
    #[arg(long, value_name = "SOCKET2")]
    pub compare: Option<PathBuf>,
    /// Fail (exit 1) when a condition holds, e.g. 'p99>5ms', 'errors>0', 'throughput<20000'.
    /// Metrics: p50 p90 p99 p99.9 max mean errors violations throughput. Repeatable.
    #[arg(long, value_name = "CONDITION", value_parser = parse_threshold)]
    pub fail_if: Vec<Threshold>,
}

fn parse_rate(s: &str) -> std::result::Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 && r <= 10_000_000.0 => Ok(r),
        _ => Err(format!("{s:?} is not a rate between 0 and 10000000 requests per second")),
    }
}

fn parse_threshold(s: &str) -> std::result::Result<Threshold, String> {
    s.parse()
}

/// Runs `dpctl bench ...`.
pub async fn run(cmd: BenchCommand, ctx: &mut Ctx<'_>) -> Result<u8> {
    let (op, load, churn) = match cmd {
        BenchCommand::Allocate(l) => (Op::Allocate, l, false),
        BenchCommand::Preferred(l) => (Op::Preferred, l, false),
        BenchCommand::Options(l) => (Op::Options, l, false),
        BenchCommand::Prestart(l) => (Op::Prestart, l, false),
        BenchCommand::List { load, churn } => (Op::List, load, churn),
    };
    let limit = match (load.total, load.duration) {
        (Some(n), _) => Limit::Total(n),
        (None, d) => Limit::Duration(d.unwrap_or(Duration::from_secs(10))),
    };
    let cfg = BenchConfig {
        op,
        concurrency: if churn { 1 } else { load.concurrency as usize },
        connections: load.connections as usize,
        limit,
        rate: load.rate,
        warmup: if churn { Duration::ZERO } else { load.warmup },
        devices_per_request: load.devices_per_request as usize,
        client: load.target.client_config(Duration::from_secs(10)),
    };
    let socket = load.target.socket_path()?;
    let mut targets = vec![Prepared::connect(&socket, &cfg).await?];
    if let Some(b) = &load.compare {
        targets.push(Prepared::connect(b, &cfg).await?);
    }
    let progress = Arc::new(Progress::default());
    let ticker = ctx.progress_allowed().then(|| spawn_progress(Arc::clone(&progress)));
    let outcome = if churn {
        let flipper = Arc::new(ControlFlipper::find(&socket, cfg.client.call_timeout).await?);
        bench::churn::run(&targets[0], &cfg, flipper, &progress)
            .await
            .map(|tally| vec![tally.report(targets[0].socket(), targets[0].device_counts())])
    } else {
        bench::run(&targets, &cfg, &progress).await
    };
    if let Some((task, bar)) = ticker {
        task.abort();
        bar.finish_and_clear();
    }
    let reports = outcome?;
    let thresholds: Vec<_> = reports.iter().flat_map(|r| load.fail_if.iter().map(|t| t.check(r))).collect();
    let passed = thresholds.iter().all(|t| !t.crossed);
    let report = BenchReport {
        op,
        mode: if churn { "churn" } else { "calls" },
        concurrency: cfg.concurrency,
        connections: cfg.connections,
        rate: cfg.rate,
        duration_s: match limit {
            Limit::Duration(d) => Some(d.as_secs_f64()),
            Limit::Total(_) => None,
        },
        total: match limit {
            Limit::Total(n) => Some(n),
            Limit::Duration(_) => None,
        },
        warmup_s: cfg.warmup.as_secs_f64(),
        devices_per_request: cfg.devices_per_request,
        ratio: match reports.as_slice() {
            [a, b] => Some(bench::ratio(a, b)),
            _ => None,
        },
        targets: reports,
        thresholds,
        passed,
    };
    render::report(&mut ctx.term.out, ctx.format, &report).map_err(out_err)?;
    Ok(if passed { exit::OK } else { exit::CHECK_FAILED })
}

/// A spinner on stderr showing the counters, redrawn ten times a second.
fn spawn_progress(progress: Arc<Progress>) -> (tokio::task::JoinHandle<()>, indicatif::ProgressBar) {
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    let shown = bar.clone();
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tick.tick().await;
            let phase = if progress.measuring.load(Ordering::Relaxed) == 1 { "measuring" } else { "warming up" };
            shown.set_message(format!(
                "{phase}: sent {}  ok {}  errors {}",
                progress.sent.load(Ordering::Relaxed),
                progress.ok.load(Ordering::Relaxed),
                progress.errors.load(Ordering::Relaxed)
            ));
            shown.tick();
        }
    });
    (task, bar)
}
