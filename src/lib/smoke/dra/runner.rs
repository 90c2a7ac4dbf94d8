//! The one runner of `dpctl dra smoke`. An [`Engine`] plays the steps on
//! its kubelet (the in-process sim, [`super::sim`], or a one-node cluster,
//! [`super::cluster`]); [`drive`] runs it to the end whatever happens (the
//! steps finish, Ctrl-C, the engine lost), stops what it started, adds a row
//! for every step it did not record (left out by `--skip`, not played by the
//! engine, not run), in report order, and makes the report.

use std::future::Future;
use std::time::{Duration, Instant, SystemTime};

use super::judge;
use super::{DraSmokeConfig, Sandbox, StepId};
use crate::check::Outcome;
use crate::error::Result;
use crate::smoke::SmokeReport;
use crate::smoke::harness::{self, Head, Ran, Rows};
use crate::smoke::process::{Launch, PluginProcess};

/// A kubelet `dra smoke` plays its steps on.
pub(super) trait Engine<'p> {
    /// The run's rows.
    fn rows(&mut self) -> &mut Rows<'p, StepId>;

    /// Plays the steps the engine plays, in order, recording their rows.
    async fn steps(&mut self);

    /// Stops every driver instance still running, then the kubelet and
    /// whatever else the engine started.
    async fn stop(&mut self);

    /// Why the engine does not play `step` (none: it plays it).
    fn not_played(_step: StepId) -> Option<&'static str> {
        None
    }

    /// What the report says of the run besides its rows.
    fn head(&self) -> Head;

    /// The driver instance the report shows (none when none started).
    fn plugin(&self) -> Option<&PluginProcess>;
}

/// Runs `engine`'s steps until they end, `interrupt` completes (Ctrl-C), or
/// `lost` does (the engine's kubelet went away; it says why); then stops
/// the engine and makes the report. `started` and `t0`: when the run began.
pub(super) async fn drive<'p, E: Engine<'p>>(
    engine: &mut E,
    interrupt: impl Future<Output = ()>,
    lost: impl Future<Output = String>,
    started: SystemTime,
    t0: Instant,
) -> SmokeReport {
    let interrupted = tokio::select! {
        () = engine.steps() => false,
        () = interrupt => true,
        why = lost => {
            engine.rows().why_not = Some(why);
            false
        }
    };
    if interrupted {
        engine.rows().why_not = Some("interrupted".into());
    }
    engine.stop().await;
    engine.rows().fill_sorted(|rows, s| {
        if rows.skipped(s) {
            judge::result(s, Outcome::Skip, "skipped (--skip)", Duration::ZERO)
        } else if let Some(why) = E::not_played(s) {
            judge::result(s, Outcome::Skip, why, Duration::ZERO)
        } else {
            judge::not_run(s, rows.why_not.as_deref().unwrap_or("interrupted"))
        }
    });
    let survivors = crate::smoke::process::kill_survivors();
    let ran = Ran { started, took: t0.elapsed(), interrupted };
    let steps = engine.rows().take();
    let mut report = engine.head().report(ran, steps, harness::plugin_report(engine.plugin()));
    harness::close(&mut report, "driver", &survivors);
    report
}

/// The rows of a run of `cfg`, telling `progress`.
pub(super) fn rows<'p>(
    cfg: &DraSmokeConfig,
    progress: &'p mut (dyn FnMut(crate::smoke::SmokeProgress) + Send),
) -> Rows<'p, StepId> {
    Rows::new(cfg.skip.clone(), progress)
}

/// Starts one instance of the driver in `sb`.
/// The launch step's first driver: started with its logs kept, or the
/// launch row failed naming why (then nothing after it runs).
pub(super) async fn launch(
    cfg: &DraSmokeConfig,
    sb: &Sandbox,
    rows: &mut Rows<'_, StepId>,
    t0: Instant,
) -> Option<PluginProcess> {
    match spawn(cfg, sb, 1, true).await {
        Ok(p) => Some(p),
        Err(e) => {
            rows.record(judge::verdict(StepId::Launch, false, e.to_string(), t0.elapsed()));
            rows.why_not = Some("the driver did not start".into());
            None
        }
    }
}

pub(super) async fn spawn(cfg: &DraSmokeConfig, sb: &Sandbox, instance: u32, logs: bool) -> Result<PluginProcess> {
    PluginProcess::spawn(Launch {
        command: sb.substitute(&cfg.command, instance),
        env: sb.env(instance),
        keep_bytes: cfg.output_limit,
        log_dir: if logs { cfg.log_dir.clone() } else { None },
        log_name: "plugin".into(),
        lines: None,
    })
    .await
}
