//! Shared pieces of the kubelet-sim benchmarks: the tests' fake device plugin
//! (tests/support/fake_plugin.rs, served in the bench process) and its
//! registering client, and a `dpctl kubelet-sim` child process (the tests'
//! child helper, tests/support/child.rs) whose JSON events and resident
//! memory the benchmarks read.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use dpctl::proto::deviceplugin::v1beta1 as dp;

#[path = "../tests/support/child.rs"]
mod child;
#[path = "../tests/support/fake_plugin.rs"]
mod fake_plugin;

pub use child::{Child, Stderr};

pub use fake_plugin::FakePlugin;
use fake_plugin::{AllocateAnswer, Behaviour};

/// `n` healthy devices `<prefix>-0..`, alternating NUMA nodes 0 and 1.
pub fn devices(prefix: &str, n: usize) -> Vec<dp::Device> {
    fake_plugin::numbered(prefix, n, true)
}

/// The tests' fake plugin advertising `options`, answering every RPC with
/// the small Allocate answer (only the env) and recording nothing.
pub fn bench_plugin(devices: Vec<dp::Device>, options: dp::DevicePluginOptions) -> FakePlugin {
    let behaviour =
        Behaviour { options, allocate_answer: AllocateAnswer::EnvOnly, quiet: true, ..Behaviour::default() };
    FakePlugin::new(devices, behaviour)
}

/// Registers `resource` served at `<dir>/<endpoint>` with the kubelet.sock in `dir`.
pub async fn register(dir: &Path, resource: &str, endpoint: &str) {
    fake_plugin::register(&dir.join("kubelet.sock"), dp::VERSION, resource, endpoint, None)
        .await
        .unwrap_or_else(|e| panic!("register {resource}: {e}"));
}

/// A `dpctl kubelet-sim -o json` child process (the tests' child helper,
/// its stderr passed through).
pub struct SimChild {
    pub child: Child,
    pub dir: PathBuf,
}

/// Starts `dpctl ARGS` in the background, its stderr passed through.
pub fn dpctl(args: &[&str]) -> Child {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_dpctl"));
    cmd.args(args).env("NO_COLOR", "1");
    Child::spawn(cmd, Stderr::Inherit)
}

impl SimChild {
    /// Starts the sim in `dir` and waits for its `started` event.
    pub async fn start(dir: &Path, extra: &[&str]) -> SimChild {
        let args = ["kubelet-sim", "--dir", dir.to_str().expect("UTF-8 dir"), "-o", "json"];
        let child = dpctl(&[&args[..], extra].concat());
        let mut sim = SimChild { child, dir: dir.to_path_buf() };
        sim.event("started", Duration::from_secs(10)).await;
        sim
    }

    /// The next event named `name`, as JSON.
    pub async fn event(&mut self, name: &str, timeout: Duration) -> serde_json::Value {
        self.child.event_within(name, timeout).await
    }

    /// Resident and peak resident memory of the sim process, in KiB.
    pub fn rss_kib(&self) -> (u64, u64) {
        self.child.rss_kib()
    }

    /// Asks the sim to stop (SIGTERM) and waits.
    pub async fn stop(mut self) {
        self.child.stop().await;
    }
}

/// A fresh short directory under /tmp (socket paths must stay short).
/// `SIM_BENCH_TMP` (default /tmp) chooses the file system: the sim fsyncs
/// its checkpoint during each admission, so a busy disk shows in
/// `sim_admit`; a tmpfs (/dev/shm) leaves the sim's own cost.
pub fn tempdir(prefix: &str) -> tempfile::TempDir {
    let base = std::env::var("SIM_BENCH_TMP").unwrap_or_else(|_| "/tmp".into());
    tempfile::Builder::new().prefix(prefix).tempdir_in(base).expect("temp dir")
}

/// The `p`-th percentile of sorted values.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p / 100.0).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Prints a result line and returns whether it met the target.
pub fn verdict(what: &str, ok: bool) -> bool {
    println!("{} {what}", if ok { "PASS" } else { "FAIL" });
    ok
}
