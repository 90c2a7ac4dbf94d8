//! `dpctl smoke --kubelet-version 1.28,1.32,1.36`: the whole smoke run once
//! per kubelet release, one after the other, each against a fresh kubelet-sim
//! playing that release; the [`MatrixReport`] says which releases the plugin
//! passes.

use std::future::Future;

use futures_util::FutureExt;
use serde::{Deserialize, Serialize};

use super::{SUITE_NAME, SmokeConfig, SmokeProgress, SmokeReport, run_smoke};
use crate::error::{Error, Result};
use crate::kubelet_sim::KubeletVersion;

/// Smoke runs of one plugin against several kubelet releases.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixReport {
    /// `dpctl smoke`.
    pub suite: String,
    /// The releases the plugin passes, in run order.
    pub passed: Vec<KubeletVersion>,
    /// The releases it fails (or that were interrupted), in run order.
    pub failed: Vec<KubeletVersion>,
    /// One full report per release, in run order.
    pub runs: Vec<SmokeReport>,
}

impl MatrixReport {
    /// True when every release passed.
    pub fn passed(&self) -> bool {
        self.failed.is_empty() && !self.runs.is_empty()
    }

    /// 0 when every release passed, else 1.
    pub fn exit_code(&self) -> u8 {
        if self.passed() { crate::error::exit::OK } else { crate::error::exit::CHECK_FAILED }
    }
}

/// What [`run_matrix`] reports as it goes: which release starts, then that
/// run's own progress.
#[derive(Debug, Clone)]
pub enum MatrixProgress {
    /// The run against this release starts (`index` of `count`, from 1).
    Version {
        /// The release.
        version: KubeletVersion,
        /// Its position, from 1.
        index: usize,
        /// How many releases in all.
        count: usize,
    },
    /// Progress of the current run.
    Run(SmokeProgress),
}

/// Runs [`run_smoke`] once per release in `versions`, in order. With
/// several releases, `log_dir` gets one sub-directory per release. An
/// interrupt stops the current run (the plugin is still stopped) and the
/// releases after it are not run. `Err` when nothing could run.
pub async fn run_matrix(
    config: SmokeConfig,
    versions: &[KubeletVersion],
    interrupt: impl Future<Output = ()> + Send,
    progress: &mut (dyn FnMut(MatrixProgress) + Send),
) -> Result<MatrixReport> {
    if versions.is_empty() {
        return Err(Error::invalid("--kubelet-version", "no kubelet version given"));
    }
    let interrupt = interrupt.boxed().shared();
    let mut report =
        MatrixReport { suite: SUITE_NAME.into(), passed: Vec::new(), failed: Vec::new(), runs: Vec::new() };
    for (i, v) in versions.iter().enumerate() {
        progress(MatrixProgress::Version { version: *v, index: i + 1, count: versions.len() });
        let mut cfg = config.clone();
        cfg.kubelet_version = *v;
        if versions.len() > 1 {
            cfg.log_dir = config.log_dir.as_ref().map(|d| d.join(format!("kubelet-{v}")));
        }
        let run = run_smoke(cfg, interrupt.clone(), &mut |p| progress(MatrixProgress::Run(p))).await?;
        if run.passed() {
            report.passed.push(*v);
        } else {
            report.failed.push(*v);
        }
        let stop = run.interrupted;
        report.runs.push(run);
        if stop {
            break;
        }
    }
    Ok(report)
}
