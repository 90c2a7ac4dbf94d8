//! Allocate under load: N concurrent callers over the unix socket, as the
//! kubelet calls (one ContainerAllocateRequest, no deadline). Reports
//! Allocate/s and latency percentiles.
//!
//!   cargo bench --bench mock_allocate -- [--callers 16] [--connections 1]
//!       [--duration 10s] [--warmup 1s] [--devices 8] [--socket PATH]
//!
//! Without --socket it starts dpctl's mock plugin in this process; with
//! --socket it loads an external plugin (e.g. the grpcio peer, or
//! `dpctl mock-plugin --no-register` in another process).

#[path = "mock_common.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{arg, arg_or, duration_or, ms, quantile};
use dpctl::mock_plugin::ResourceConfig;
use dpctl::plugin_client::PluginClient;
use dpctl::proto::deviceplugin::v1beta1 as dp;
use dpctl::proto::deviceplugin::v1beta1::device_plugin_client::DevicePluginClient;
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

    let (handle, socket, _dir, target) = match arg("--socket") {
        Some(s) => (None, std::path::PathBuf::from(&s), None, format!("external plugin at {s}")),
        None => {
            let (h, s, d) = common::start_mock(ResourceConfig::new("example.com/gpu", devices)).await;
            (Some(h), s, Some(d), format!("in-process dpctl mock ({devices} devices)"))
        }
    };
    let snapshot = PluginClient::connect(&socket, &ClientConfig::default())
        .await
        .expect("connect")
        .list_once(Duration::from_secs(5))
        .await
        .expect("device list");
    let ids: Arc<Vec<String>> =
        Arc::new(snapshot.devices.iter().filter(|d| d.is_healthy()).map(|d| d.id.clone()).collect());
    assert!(!ids.is_empty(), "the plugin has no healthy devices");

    let mut clients = Vec::new();
    for _ in 0..connections {
        let ch = dpctl::transport::connect(&socket, Duration::from_secs(5)).await.expect("connect");
        clients.push(DevicePluginClient::new(ch));
    }

    println!("mock_allocate: {target}");
    println!(
        "  {callers} concurrent callers over {connections} connection(s), warm-up {warmup:?}, measured {duration:?}"
    );
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for c in 0..callers {
        let mut client = clients[c % connections].clone();
        let ids = Arc::clone(&ids);
        let measuring = Arc::clone(&measuring);
        let stop = Arc::clone(&stop);
        tasks.push(tokio::spawn(async move {
            let mut lat: Vec<u64> = Vec::with_capacity(1 << 18);
            let mut errors = 0u64;
            let mut i = c;
            while !stop.load(Ordering::Relaxed) {
                let id = ids[i % ids.len()].clone();
                i += 1;
                let req = dp::AllocateRequest {
                    container_requests: vec![dp::ContainerAllocateRequest { devices_ids: vec![id] }],
                };
                let t = Instant::now();
                let ok = client.allocate(req).await.is_ok();
                let ns = t.elapsed().as_nanos() as u64;
                if measuring.load(Ordering::Relaxed) {
                    if ok {
                        lat.push(ns);
                    } else {
                        errors += 1;
                    }
                }
            }
            (lat, errors)
        }));
    }
    tokio::time::sleep(warmup).await;
    let cpu0 = cpu_seconds();
    measuring.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    tokio::time::sleep(duration).await;
    measuring.store(false, Ordering::Relaxed);
    let elapsed = t0.elapsed();
    let cpu = cpu_seconds() - cpu0;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (lat, e) = t.await.expect("caller");
        all.extend(lat);
        errors += e;
    }
    all.sort_unstable();
    let rate = all.len() as f64 / elapsed.as_secs_f64();
    println!("  calls {}  errors {errors}  throughput {rate:.0} Allocate/s", all.len());
    println!(
        "  latency p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
        ms(quantile(&all, 0.50)),
        ms(quantile(&all, 0.90)),
        ms(quantile(&all, 0.99)),
        ms(quantile(&all, 0.999)),
        ms(all.last().copied().unwrap_or(0))
    );
    println!("  this process used {:.2} CPU-seconds per wall second", cpu / elapsed.as_secs_f64());
    if let Some(h) = handle {
        h.stop().await.expect("stop");
    }
}

/// User plus system CPU time of this process, from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|u| u.parse::<f64>().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    ticks / 100.0
}
