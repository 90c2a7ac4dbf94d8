//! Benchmark: `dpctl podresources list` against a node with 10,000 pods,
//! rendered as a table and as JSON, timed as a user sees it: the whole
//! process, from spawn to exit (stdout read to the end through a pipe).
//!
//! Run: `cargo bench --bench podresources_list` (release profile).
//! `BENCH_RUNS` (default 21) sets the runs per format, `BENCH_PODS` (default
//! 10000) the pod count. Target: median under 200 ms per format.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dpctl::podresources::fixture::{Fixture, FixtureProvider};
use dpctl::podresources::server::{PodResourcesService, ServerConfig};
use dpctl::proto::podresources::v1;
use dpctl::transport::{self, BindOptions};
use prost::Message;

mod podresources_node;
use podresources_node::{env_usize, node};

const TARGET: Duration = Duration::from_millis(200);

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let runs = env_usize("BENCH_RUNS", 21).max(1);
    let pods = env_usize("BENCH_PODS", 10_000);
    let fixture =
        Fixture { pods: node(pods), allocatable: v1::AllocatableResourcesResponse::default(), ..Default::default() };
    let encoded = v1::ListPodResourcesResponse { pod_resources: fixture.pods.clone() }.encoded_len();
    let dir = tempfile::Builder::new().prefix("dpb").tempdir_in("/tmp").expect("temp dir");
    let socket = dir.path().join("pr.sock");

    // The server runs on its own runtime thread for the whole benchmark.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let listener = rt.block_on(transport::bind(&socket, &BindOptions::default())).expect("bind");
    let service = PodResourcesService::new(Arc::new(FixtureProvider::new(fixture)), ServerConfig::default());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = rt.spawn(transport::serve(service.router(), listener, async {
        let _ = stop_rx.await;
    }));

    let bin = env!("CARGO_BIN_EXE_dpctl");
    println!("dpctl podresources list: {pods} pods, List answer {encoded} bytes, {runs} runs per format");
    println!("binary: {bin}");
    let mut failed = false;
    for (label, extra) in [("table", &[][..]), ("json", &["-o", "json"][..])] {
        let run = || {
            let start = Instant::now();
            let out = Command::new(bin)
                .args(["podresources", "list", "--socket"])
                .arg(&socket)
                .args(extra)
                .env("NO_COLOR", "1")
                .stdin(Stdio::null())
                .output()
                .expect("run dpctl");
            let took = start.elapsed();
            assert!(out.status.success(), "dpctl failed: {}", String::from_utf8_lossy(&out.stderr));
            (took, out.stdout.len())
        };
        // Warm the page cache and the server.
        let (_, bytes) = run();
        let _ = run();
        let times: Vec<Duration> = (0..runs).map(|_| run().0).collect();
        let min = times.iter().min().copied().unwrap_or_default();
        let max = times.iter().max().copied().unwrap_or_default();
        let med = median(times);
        let verdict = if med < TARGET { "ok" } else { "OVER TARGET" };
        failed |= med >= TARGET;
        println!(
            "{label:>5}: median {:>6.1} ms  min {:>6.1} ms  max {:>6.1} ms  ({bytes} bytes of output)  [{verdict}: target < {} ms]",
            med.as_secs_f64() * 1e3,
            min.as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3,
            TARGET.as_millis()
        );
    }
    let _ = stop_tx.send(());
    let _ = rt.block_on(server);
    if failed {
        std::process::exit(1);
    }
}
