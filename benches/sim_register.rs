//! Benchmark: 200 plugins of 1,000 devices each register with one
//! `dpctl kubelet-sim` at once; time until every first snapshot is processed
//! (target: 2 s) and the sim's resident memory (target: under 150 MB).
//!
//! The plugins run in this process (generated server code, one socket each);
//! the sim is a child process, so its memory is measured alone.
//!
//!     cargo bench --bench sim_register            # release build
//!     SIM_BENCH_PLUGINS=50 SIM_BENCH_DEVICES=100 cargo bench --bench sim_register

#[path = "sim_common.rs"]
mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::{SimChild, bench_plugin, devices, register, tempdir, verdict};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

async fn run() -> bool {
    let plugins = env_usize("SIM_BENCH_PLUGINS", 200);
    let per = env_usize("SIM_BENCH_DEVICES", 1000);
    let tmp = tempdir("dpb");
    let dir = tmp.path().to_path_buf();
    let mut sim = SimChild::start(&dir, &[]).await;
    let (rss_idle, _) = sim.rss_kib();
    let mut stops = Vec::new();
    for i in 0..plugins {
        let p = bench_plugin(devices(&format!("r{i}"), per), Default::default());
        stops.push(p.serve(&dir.join(format!("p{i}.sock"))).await);
    }
    let t0 = Instant::now();
    let regs: Vec<_> = (0..plugins)
        .map(|i| {
            let dir = dir.clone();
            tokio::spawn(async move { register(&dir, &format!("example.com/r{i}"), &format!("p{i}.sock")).await })
        })
        .collect();
    let mut seen = HashSet::new();
    while seen.len() < plugins {
        let ev = sim.event("snapshot", Duration::from_secs(60)).await;
        assert_eq!(ev["allocatable"].as_u64(), Some(per as u64));
        seen.insert(ev["resource"].as_str().unwrap_or_default().to_string());
    }
    let elapsed = t0.elapsed();
    for r in regs {
        r.await.expect("register task");
    }
    let (rss, hwm) = sim.rss_kib();
    println!(
        "sim_register: {plugins} plugins x {per} devices registered, first snapshots processed in {:.3} s",
        elapsed.as_secs_f64()
    );
    println!(
        "sim_register: sim RSS idle {:.1} MB, after {:.1} MB, peak {:.1} MB",
        rss_idle as f64 / 1024.0,
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
    let ok_time = verdict("registration and first snapshots within 2 s", elapsed < Duration::from_secs(2));
    let ok_mem = verdict("sim resident memory under 150 MB (peak)", hwm < 150 * 1024);
    sim.stop().await;
    drop(stops);
    ok_time && ok_mem
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let ok = rt.block_on(run());
    std::process::exit(if ok { 0 } else { 1 });
}
