//! Shared pieces of the kubelet-sim benchmarks: the tests' fake device plugin
//! (tests/support/fake_plugin.rs, served in the bench process) and its
//! registering client, and a `dpctl kubelet-sim` child process whose JSON events and
//! resident memory the benchmarks read.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use dpctl::proto::deviceplugin::v1beta1 as dp;
use tokio::io::AsyncBufReadExt;

#[path = "../tests/support/fake_plugin.rs"]
mod fake_plugin;

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

/// A `dpctl kubelet-sim -o json` child process.
pub struct SimChild {
    pub child: tokio::process::Child,
    pub lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    pub dir: PathBuf,
}

impl SimChild {
    /// Starts the sim in `dir` and waits for its `started` event.
    pub async fn start(dir: &Path, extra: &[&str]) -> SimChild {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_dpctl"));
        cmd.args(["kubelet-sim", "--dir", dir.to_str().unwrap(), "-o", "json"])
            .args(extra)
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn dpctl kubelet-sim");
        let stdout = child.stdout.take().unwrap();
        let mut sim = SimChild { child, lines: tokio::io::BufReader::new(stdout).lines(), dir: dir.to_path_buf() };
        sim.event("started", Duration::from_secs(10)).await;
        sim
    }

    /// The next event named `name`, as JSON.
    pub async fn event(&mut self, name: &str, timeout: Duration) -> serde_json::Value {
        let fut = async {
            loop {
                let line = self.lines.next_line().await.expect("read").expect("the sim exited");
                let v: serde_json::Value = serde_json::from_str(&line).expect("JSON line");
                if v["event"] == name {
                    return v;
                }
            }
        };
        tokio::time::timeout(timeout, fut).await.unwrap_or_else(|_| panic!("no {name} event within {timeout:?}"))
    }

    /// Resident and peak resident memory of the sim process, in KiB.
    pub fn rss_kib(&self) -> (u64, u64) {
        let pid = self.child.id().expect("running");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc status");
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    /// Asks the sim to stop (SIGTERM) and waits.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status();
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

/// A fresh short directory under /tmp (socket paths must stay short).
pub fn tempdir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(prefix).tempdir_in("/tmp").expect("temp dir")
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
