//! Shared by the mock_* benchmarks: argument parsing, memory readings,
//! percentiles, and starting an in-process mock plugin.

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use dpctl::mock_plugin::{MockConfig, MockHandle, MockPlugin, ResourceConfig};

/// `--name value` from the command line (cargo bench adds `--bench`, ignored).
pub fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

/// `--name value` parsed, or `default`.
pub fn arg_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    arg(name).map(|v| v.parse().unwrap_or_else(|_| panic!("bad value for {name}: {v}"))).unwrap_or(default)
}

/// A duration flag (`10s`, `500ms`, `1m`).
pub fn duration_or(name: &str, default: Duration) -> Duration {
    arg(name).map(|v| dpctl::duration::parse(&v).expect("a duration")).unwrap_or(default)
}

/// Resident memory of this process, in KiB (VmRSS).
pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).map(str::to_string))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

/// KiB as MiB with one decimal.
pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// The `q` quantile (0..=1) of sorted values.
pub fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

/// Nanoseconds as milliseconds, 3 decimals.
pub fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// Starts a mock serving `resource` in a fresh temp dir, without
/// registering or a control socket. Returns the handle, the socket and the
/// temp dir (keep it alive).
pub async fn start_mock(resource: ResourceConfig) -> (MockHandle, PathBuf, tempfile::TempDir) {
    let dir = tempfile::Builder::new().prefix("dpb").tempdir_in("/tmp").expect("temp dir");
    let config = MockConfig {
        dir: Some(dir.path().to_path_buf()),
        register: false,
        control: false,
        resources: vec![resource],
        ..MockConfig::default()
    };
    let handle = MockPlugin::start(config).await.expect("mock starts");
    let socket = handle.socket(&handle.resources()[0]).expect("socket");
    (handle, socket, dir)
}
