//! Allocate under load: N concurrent callers over the unix socket, as the
//! kubelet calls (one ContainerAllocateRequest). Reports Allocate/s and
//! latency percentiles. The load is `dpctl bench allocate`'s own code
//! (`dpctl::bench`), so this and the command measure the same way.
//!
//!   cargo bench --bench mock_allocate -- [--callers 16] [--connections 1]
//!       [--duration 10s] [--warmup 1s] [--devices 8] [--rate R] [--socket PATH]
//!
//! Without --socket it starts dpctl's mock plugin in this process; with
//! --socket it loads an external plugin (e.g. the grpcio peer, or
//! `dpctl mock-plugin --no-register` in another process).

#[path = "mock_common.rs"]
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{arg, arg_or, duration_or};
use dpctl::bench::{self, BenchConfig, Limit, Op, Prepared, Progress};
use dpctl::mock_plugin::ResourceConfig;
use dpctl::transport::ClientConfig;

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(run());
}

async fn run() {
    let callers: usize = arg_or("--callers", 16);
    let connections: usize = arg_or("--connections", 1).max(1);
    let duration = duration_or("--duration", Duration::from_secs(10));
    let warmup = duration_or("--warmup", Duration::from_secs(1));
    let devices: usize = arg_or("--devices", 8);
    let rate: Option<f64> = arg("--rate").map(|r| r.parse().expect("--rate: a number"));

    let (handle, socket, _dir, target) = match arg("--socket") {
        Some(s) => (None, std::path::PathBuf::from(&s), None, format!("external plugin at {s}")),
        None => {
            let (h, s, d) = common::start_mock(ResourceConfig::new("example.com/gpu", devices)).await;
            (Some(h), s, Some(d), format!("in-process dpctl mock ({devices} devices)"))
        }
    };
    let cfg = BenchConfig {
        op: Op::Allocate,
        concurrency: callers,
        connections,
        limit: Limit::Duration(duration),
        rate,
        warmup,
        devices_per_request: 1,
        client: ClientConfig::default(),
    };
    let prepared = Prepared::connect(&socket, &cfg).await.expect("connect and read the device list");

    println!("mock_allocate: {target}");
    let load = match rate {
        Some(r) => format!("open-loop {r}/s, at most {callers} in flight"),
        None => format!("{callers} concurrent callers"),
    };
    println!("  {load} over {connections} connection(s), warm-up {warmup:?}, measured {duration:?}");
    let progress = Arc::new(Progress::default());
    let r = bench::run(&[prepared], &cfg, &progress).await.expect("bench").remove(0);
    println!("  calls {}  errors {}  throughput {:.0} Allocate/s", r.ok, r.errors, r.throughput);
    if rate.is_some() {
        println!("  sent {} requests at {:.1}/s", r.sent, r.send_rate);
    }
    let l = r.latency_ms;
    println!(
        "  latency p50 {:.3} ms  p90 {:.3} ms  p99 {:.3} ms  p99.9 {:.3} ms  max {:.3} ms",
        l.p50, l.p90, l.p99, l.p99_9, l.max
    );
    println!(
        "  this process used {:.2} CPU-seconds per wall second ({:.0} us per call)",
        r.client_cpu_ms / r.elapsed_ms.max(1e-9),
        r.cpu_per_call_ms * 1000.0
    );
    if let Some(h) = handle {
        h.stop().await.expect("stop");
    }
}
