//! Benchmark: how long a device health change takes to show in the sim's
//! PodResources `GetAllocatableResources` (target: p99 under 10 ms).
//!
//! The plugin (in this process) flips one device's health; the bench then
//! calls GetAllocatableResources in a tight loop until the answer shows the
//! change. The sim runs with `--no-rate-limit` so that the loop is not held
//! back by the kubelet's 100 calls/s limit.
//!
//!     cargo bench --bench sim_health

#[path = "sim_common.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{SimChild, bench_plugin, devices, percentile, register, tempdir, verdict};
use dpctl::proto::podresources::v1;

async fn run() -> bool {
    let rounds: usize = std::env::var("SIM_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let tmp = tempdir("dph");
    let dir = tmp.path().to_path_buf();
    let mut sim = SimChild::start(&dir, &["--no-rate-limit"]).await;
    let mut devs = devices("gpu", 100);
    let p = bench_plugin(devs.clone(), Default::default());
    let _stop = p.serve(&dir.join("gpu.sock")).await;
    register(&dir, "example.com/gpu", "gpu.sock").await;
    sim.event("snapshot", Duration::from_secs(30)).await;
    let channel =
        dpctl::transport::connect(&dir.join("pod-resources.sock"), Duration::from_secs(5)).await.expect("connect");
    let mut client = v1::pod_resources_lister_client::PodResourcesListerClient::new(channel);
    let mut latencies = Vec::with_capacity(rounds);
    let mut calls = 0u64;
    for round in 0..rounds {
        let healthy = round % 2 == 1;
        devs[7].health = if healthy { "Healthy" } else { "Unhealthy" }.into();
        let t0 = Instant::now();
        p.set_devices(devs.clone());
        loop {
            calls += 1;
            let resp = client
                .get_allocatable_resources(v1::AllocatableResourcesRequest {})
                .await
                .expect("GetAllocatableResources")
                .into_inner();
            let listed = resp.devices.iter().any(|d| d.device_ids.first().is_some_and(|id| id == "gpu-7"));
            if listed == healthy {
                break;
            }
            if t0.elapsed() > Duration::from_secs(5) {
                panic!("the change never showed");
            }
        }
        latencies.push(t0.elapsed());
    }
    latencies.sort();
    let p50 = percentile(&latencies, 50.0);
    let p99 = percentile(&latencies, 99.0);
    let max = *latencies.last().unwrap_or(&Duration::ZERO);
    println!(
        "sim_health: {rounds} health flips; health change to GetAllocatableResources: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({calls} calls)",
        p50.as_secs_f64() * 1000.0,
        p99.as_secs_f64() * 1000.0,
        max.as_secs_f64() * 1000.0
    );
    sim.stop().await;
    verdict("p99 under 10 ms", p99 < Duration::from_millis(10))
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let ok = rt.block_on(run());
    std::process::exit(if ok { 0 } else { 1 });
}
