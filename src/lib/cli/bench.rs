//! `dpctl bench`: the flags of the load generator, turned into a
//! [`Session`] that `run_bench` runs with its progress
//! display. The load itself is [`crate::bench`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::args::Target;
use crate::bench::session::Session;
use crate::bench::{self, BenchConfig, Limit, Op, Progress, Threshold};
use crate::duration::parse as parse_duration;
use crate::error::{Result, exit};
use crate::output::{Streams, bench as render, out_err};

const EXAMPLES: &str = "\
Examples:
  dpctl bench allocate --socket /tmp/dp/example-gpu.sock --concurrency 16 --duration 10s
  dpctl bench allocate --socket A.sock --compare B.sock --rate 2000 --total 20000
  dpctl bench preferred --endpoint vendor.sock --devices-per-request 2 \\
      --fail-if 'p99>5ms' --fail-if 'errors>0'
  dpctl bench list --socket /tmp/dp/example-gpu.sock --churn --total 50";

/// `--help`'s long text: how the load works, then examples.
fn bench_help() -> String {
    format!("{}\n\n{EXAMPLES}", bench::session::HOW_IT_WORKS)
}

/// `dpctl bench ...`
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Load Allocate (one container request per call).
    #[command(after_long_help = bench_help())]
    Allocate(LoadArgs),
    /// Load GetPreferredAllocation (every healthy device available).
    #[command(after_long_help = bench_help())]
    Preferred(LoadArgs),
    /// Load GetDevicePluginOptions.
    #[command(after_long_help = bench_help())]
    Options(LoadArgs),
    /// Load PreStartContainer.
    #[command(after_long_help = bench_help())]
    Prestart(LoadArgs),
    /// Measure ListAndWatch: open -> first message decoded; with --churn, a
    /// health change -> the message carrying it decoded.
    #[command(after_long_help = bench_help())]
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
    /// Requests in flight at most (1 to 1,000).
    // Each worker keeps its own latency histogram (about 220 KB): 10,000
    // workers took 2.2 GB, 100,000 aborted out of memory.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1_000))]
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
    #[arg(long, value_name = "CONDITION")]
    pub fail_if: Vec<Threshold>,
}

fn parse_rate(s: &str) -> std::result::Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 && r <= 10_000_000.0 => Ok(r),
        _ => Err(format!("{s:?} is not a rate between 0 and 10000000 requests per second")),
    }
}

/// Runs `dpctl bench ...`.
pub async fn run(cmd: BenchCommand, s: &mut Streams<'_>) -> Result<u8> {
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
    let config = BenchConfig {
        op,
        concurrency: load.concurrency as usize,
        connections: load.connections as usize,
        limit,
        rate: load.rate,
        warmup: load.warmup,
        devices_per_request: load.devices_per_request as usize,
        client: load.target.client_config(Duration::from_secs(10)),
    };
    let session =
        Session { config, socket: load.target.socket_path()?, compare: load.compare, churn, fail_if: load.fail_if };
    run_bench(&session, s).await
}

/// Runs `dpctl bench`: the session with a spinner on a terminal, then the
/// report on stdout. Returns the exit code (1 when a `--fail-if` held).
async fn run_bench(session: &Session, s: &mut Streams<'_>) -> Result<u8> {
    let progress = Arc::new(Progress::default());
    let limit = match session.config.limit {
        crate::bench::Limit::Duration(d) => Some((session.config.warmup, d)),
        crate::bench::Limit::Total(_) => None,
    };
    let total = match session.config.limit {
        crate::bench::Limit::Total(n) => n,
        crate::bench::Limit::Duration(_) => 0,
    };
    let spinner = s.progress.then(|| render::Spinner::start(Arc::clone(&progress), limit, total));
    // Ctrl-C or SIGTERM: no new request goes out, and the report shows what
    // was measured until then (exit 1: an interrupted run passes nothing).
    let signalled = crate::signal::shutdown();
    let stopper = Arc::clone(&progress);
    let watcher = tokio::spawn(async move {
        signalled.await;
        stopper.request_stop();
    });
    let report = crate::bench::session::run(session, &progress).await;
    watcher.abort();
    drop(spinner);
    let report = report?;
    render::report(&mut *s.out, s.format, &report).map_err(out_err)?;
    Ok(if report.passed { exit::OK } else { exit::CHECK_FAILED })
}
