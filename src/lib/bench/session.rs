//! One `dpctl bench` session as a library call: connect to the plugin (and
//! the one to compare with), run the load or the churn, judge `--fail-if`,
//! and return the report. The progress counters are the caller's to show.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::{BenchConfig, BenchReport, ControlFlipper, Limit, Prepared, Progress, Threshold};
use crate::error::Result;

/// What `--help` says about how the load is built, paced, measured and
/// checked: this module's behaviour, so it changes with it.
pub const HOW_IT_WORKS: &str = "\
Every request is built from the plugin's own ListAndWatch list: healthy device IDs, sizes the list
can satisfy, must-include IDs drawn from the available ones. The answers are checked against the
same contract rules as `dpctl plugin check` and broken rules are counted.

Without --rate the load is closed-loop: each of --concurrency workers sends its next request when
the previous one is answered. With --rate it is open-loop: requests are due on a fixed schedule and
latency is measured from the time a request was due, so requests that wait behind a slow answer
are charged for the wait (no coordinated omission). Latency percentiles come from an HDR histogram
(3 significant digits). CPU/CALL is this process's user+system CPU (getrusage) per call.

The load calls Allocate and PreStartContainer for real: point it at a test instance of a plugin,
not at one serving a production node.";

/// A bench session.
#[derive(Debug, Clone)]
pub struct Session {
    /// The load (for churn, concurrency 1 and no warm-up are forced).
    pub config: BenchConfig,
    /// The plugin's socket.
    pub socket: PathBuf,
    /// A second plugin socket, loaded alternately; the report has the ratio B/A.
    pub compare: Option<PathBuf>,
    /// Time health changes through a mock plugin's control socket instead of calls.
    pub churn: bool,
    /// `--fail-if` conditions.
    pub fail_if: Vec<Threshold>,
}

/// Runs the session and judges it; `report.passed` is false when a `--fail-if` condition held.
pub async fn run(session: &Session, progress: &Arc<Progress>) -> Result<BenchReport> {
    let mut cfg = session.config.clone();
    if session.churn {
        cfg.concurrency = 1;
        cfg.warmup = Duration::ZERO;
    }
    let mut targets = vec![Prepared::connect(&session.socket, &cfg).await?];
    if let Some(b) = &session.compare {
        targets.push(Prepared::connect(b, &cfg).await?);
    }
    let reports = if session.churn {
        let flipper = Arc::new(ControlFlipper::find(&session.socket, cfg.client.call_timeout).await?);
        let tally = super::churn::run(&targets[0], &cfg, flipper, progress).await?;
        vec![tally.report(targets[0].socket(), targets[0].device_counts())]
    } else {
        super::run(&targets, &cfg, progress).await?
    };
    let thresholds: Vec<_> = reports.iter().flat_map(|r| session.fail_if.iter().map(|t| t.check(r))).collect();
    let interrupted = progress.stopped();
    let passed = !interrupted && thresholds.iter().all(|t| !t.crossed);
    Ok(BenchReport {
        op: cfg.op,
        mode: if session.churn { "churn" } else { "calls" },
        concurrency: cfg.concurrency,
        connections: cfg.connections,
        rate: cfg.rate,
        duration_ms: match cfg.limit {
            Limit::Duration(d) => Some(d.as_secs_f64() * 1000.0),
            Limit::Total(_) => None,
        },
        total: match cfg.limit {
            Limit::Total(n) => Some(n),
            Limit::Duration(_) => None,
        },
        warmup_ms: cfg.warmup.as_secs_f64() * 1000.0,
        devices_per_request: cfg.devices_per_request,
        ratio: match reports.as_slice() {
            [a, b] => Some(super::ratio(a, b)),
            _ => None,
        },
        targets: reports,
        thresholds,
        passed,
        interrupted,
    })
}
