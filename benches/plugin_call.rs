//! End-to-end speed of a one-shot call: `dpctl plugin call options` as a whole
//! process (start to exit, release build) against grpcurl making the same call
//! on the same socket. Target: dpctl's median at most one fifth of grpcurl's.
//!
//!     cargo bench --bench plugin_call [-- --runs N --grpcurl PATH]
//!
//! grpcurl comes from `DPCTL_GRPCURL`, `--grpcurl`, or the interop venv that
//! `cargo test` creates (target/tmp/interop-venv/bin/grpcurl).

#[path = "../tests/support/fake_plugin.rs"]
mod fake_plugin;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn time_runs(runs: usize, mut make: impl FnMut() -> Command) -> Vec<Duration> {
    let mut out = Vec::with_capacity(runs);
    for i in 0..runs + 3 {
        let mut cmd = make();
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        let t = Instant::now();
        let o = cmd.output().expect("run");
        let d = t.elapsed();
        assert!(o.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&o.stderr));
        if i >= 3 {
            out.push(d); // the first three runs warm the page cache
        }
    }
    out.sort();
    out
}

fn pct(v: &[Duration], p: f64) -> Duration {
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let runs: usize = arg("--runs").and_then(|s| s.parse().ok()).unwrap_or(50);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let grpcurl: PathBuf = arg("--grpcurl")
        .or_else(|| std::env::var("DPCTL_GRPCURL").ok())
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/tmp/interop-venv/bin/grpcurl"));
    if !grpcurl.exists() {
        eprintln!("grpcurl not found at {} (run `cargo test` once, or pass --grpcurl)", grpcurl.display());
        std::process::exit(2);
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::Builder::new().prefix("dpb").tempdir_in("/tmp").unwrap();
    let sock = dir.path().join("bench.sock");
    let p = fake_plugin::FakePlugin::new(vec![fake_plugin::device("d0", "Healthy", None)], Default::default());
    let _stop = rt.block_on(p.serve(&sock));

    let dpctl = time_runs(runs, || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_dpctl"));
        c.args(["plugin", "call", "options", "--socket"]).arg(&sock);
        c
    });
    let grpc = time_runs(runs, || {
        let mut c = Command::new(&grpcurl);
        c.current_dir(root)
            .args(["-plaintext", "-unix", "-authority", "localhost", "-import-path", "proto", "-proto"])
            .args(["deviceplugin/v1beta1/api.proto"])
            .arg(&sock)
            .arg("v1beta1.DevicePlugin/GetDevicePluginOptions");
        c
    });
    println!("plugin call options, whole process, {runs} runs each (after 3 warm-up runs)");
    println!("{:<10} {:>10} {:>10} {:>10}", "", "p50", "p90", "min");
    for (name, v) in [("dpctl", &dpctl), ("grpcurl", &grpc)] {
        println!("{:<10} {:>10} {:>10} {:>10}", name, ms(pct(v, 0.5)), ms(pct(v, 0.9)), ms(v[0]));
    }
    let ratio = pct(&dpctl, 0.5).as_secs_f64() / pct(&grpc, 0.5).as_secs_f64();
    println!(
        "dpctl median / grpcurl median = {ratio:.3} (target <= 0.200): {}",
        if ratio <= 0.2 { "MET" } else { "NOT MET" }
    );
}
