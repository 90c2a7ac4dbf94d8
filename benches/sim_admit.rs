//! Benchmark: 1,000 single-device pods admitted by a running
//! `dpctl kubelet-sim`, each through its control socket as
//! `dpctl kubelet-sim admit` sends it (target: 2 s for all).
//!
//! By default the plugin is served in this process (generated server code,
//! GetPreferredAllocation on). To measure against another plugin, give the
//! command that starts it; `{dir}` is replaced by the sim's directory:
//!
//!     cargo bench --bench sim_admit
//!     SIM_BENCH_TOPOLOGY_POLICY=single-numa-node cargo bench --bench sim_admit   # 2 NUMA nodes
//!     SIM_BENCH_PLUGIN_CMD='target/release/dpctl mock-plugin --dir {dir} --resource example.com/gpu --devices 1000' \
//!       SIM_BENCH_RESOURCE=example.com/gpu cargo bench --bench sim_admit

#[path = "sim_common.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{SimChild, bench_plugin, devices, percentile, register, tempdir, verdict};
use dpctl::kubelet_sim::PodSpec;
use dpctl::kubelet_sim::control::{self, Answer, Request};
use dpctl::proto::deviceplugin::v1beta1 as dp;

async fn run() -> bool {
    let pods: usize = std::env::var("SIM_BENCH_PODS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let resource = std::env::var("SIM_BENCH_RESOURCE").unwrap_or_else(|_| "example.com/gpu".into());
    let tmp = tempdir("dpa");
    let dir = tmp.path().to_path_buf();
    // The Topology Manager policy (2 NUMA nodes; the devices alternate between them).
    let policy = std::env::var("SIM_BENCH_TOPOLOGY_POLICY").unwrap_or_else(|_| "none".into());
    println!("sim_admit: --topology-manager-policy {policy} --numa-nodes 2");
    let mut sim = SimChild::start(&dir, &["--topology-manager-policy", &policy, "--numa-nodes", "2"]).await;
    let mut _external = None;
    let mut _stop = None;
    match std::env::var("SIM_BENCH_PLUGIN_CMD") {
        Ok(cmd) => {
            let cmd = cmd.replace("{dir}", dir.to_str().unwrap());
            println!("sim_admit: plugin: {cmd}");
            _external = Some(
                // `exec`: the shell becomes the plugin, so kill_on_drop stops the
                // plugin itself (a plain `sh -c` left it running after the bench).
                tokio::process::Command::new("sh")
                    .args(["-c", &format!("exec {cmd}")])
                    .stdout(std::process::Stdio::null())
                    .kill_on_drop(true)
                    .spawn()
                    .expect("start the plugin command"),
            );
        }
        Err(_) => {
            let opts = dp::DevicePluginOptions { get_preferred_allocation_available: true, pre_start_required: false };
            let p = bench_plugin(devices("gpu", pods), opts);
            _stop = Some(p.serve(&dir.join("gpu.sock")).await);
            register(&dir, &resource, "gpu.sock").await;
        }
    }
    let snap = sim.event("snapshot", Duration::from_secs(30)).await;
    println!("sim_admit: {} has {} allocatable devices", resource, snap["allocatable"]);
    let t0 = Instant::now();
    let mut slowest = Duration::ZERO;
    let mut each = Vec::with_capacity(pods);
    for i in 0..pods {
        let t = Instant::now();
        let pod = PodSpec::shorthand(&format!("p{i}"), "default", &[(resource.clone(), 1)]);
        let answer = control::call(&dir, &Request::Admit { pod }, Duration::from_secs(30)).await.expect("control call");
        match answer {
            Ok(Answer::Admit(o)) if o.admitted => {}
            other => panic!("pod p{i} not admitted: {other:?}"),
        }
        slowest = slowest.max(t.elapsed());
        each.push(t.elapsed());
    }
    let elapsed = t0.elapsed();
    each.sort();
    println!(
        "sim_admit: {pods} single-device pods admitted in {:.3} s ({:.0} pods/s, slowest {:.1} ms)",
        elapsed.as_secs_f64(),
        pods as f64 / elapsed.as_secs_f64(),
        slowest.as_secs_f64() * 1000.0
    );
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "sim_admit: per admission (control call to answer) p50 {:.2} ms, p99 {:.2} ms",
        ms(percentile(&each, 50.0)),
        ms(percentile(&each, 99.0))
    );
    let (rss, hwm) = sim.rss_kib();
    println!("sim_admit: sim RSS {:.1} MB, peak {:.1} MB", rss as f64 / 1024.0, hwm as f64 / 1024.0);
    sim.stop().await;
    verdict("admissions within 2 s", elapsed < Duration::from_secs(2))
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let ok = rt.block_on(run());
    std::process::exit(if ok { 0 } else { 1 });
}
