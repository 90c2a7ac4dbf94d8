//! Benchmark, in process: where `dpctl podresources list` spends its time
//! on a 10,000-pod answer: decoding, conversion to dpctl's view, the table,
//! the JSON. Complements `podresources_list` (the whole process).
//!
//! Run: `cargo bench --bench podresources_render`. `BENCH_RUNS` (default
//! 21) and `BENCH_PODS` (default 10000) as there.

use std::time::{Duration, Instant};

use dpctl::output::{Format, podresources as render};
use dpctl::podresources::view::{Api, ListView, PodView, SCHEMA_VERSION};
use dpctl::proto::podresources::v1;
use prost::Message;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn numa(id: i64) -> Option<v1::TopologyInfo> {
    Some(v1::TopologyInfo { nodes: vec![v1::NumaNode { id }] })
}

/// The same node as `podresources_list`.
fn node(pods: usize) -> Vec<v1::PodResources> {
    (0..pods)
        .map(|i| {
            let n = (i % 2) as i64;
            v1::PodResources {
                name: format!("job-{i:05}-worker"),
                namespace: format!("team-{:02}", i % 40),
                containers: vec![
                    v1::ContainerResources { name: "istio-proxy".into(), ..Default::default() },
                    v1::ContainerResources {
                        name: "trainer".into(),
                        devices: vec![v1::ContainerDevices {
                            resource_name: "nvidia.com/gpu".into(),
                            device_ids: vec![format!("GPU-{i:08x}-7a3c-4f1e-9b2d-{:012x}", i * 7919)],
                            topology: numa(n),
                        }],
                        cpu_ids: vec![(2 * i) as i64 % 256, (2 * i + 1) as i64 % 256],
                        memory: vec![v1::ContainerMemory {
                            memory_type: "memory".into(),
                            size: 4 << 30,
                            topology: numa(n),
                        }],
                        dynamic_resources: Vec::new(),
                    },
                ],
                ..Default::default()
            }
        })
        .collect()
}

fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    let mut v: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(f());
            start.elapsed()
        })
        .collect();
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let runs = env_usize("BENCH_RUNS", 21).max(1);
    let pods = env_usize("BENCH_PODS", 10_000);
    let bytes = v1::ListPodResourcesResponse { pod_resources: node(pods) }.encode_to_vec();
    let decoded = v1::ListPodResourcesResponse::decode(bytes.as_slice()).expect("decode");
    let views: Vec<PodView> = decoded.pod_resources.iter().map(PodView::from).collect();
    let view = ListView { schema_version: SCHEMA_VERSION, api_version: Api::V1, pod_resources: views };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("in-process phases for {pods} pods ({} bytes), median of {runs}:", bytes.len());
    println!(
        "  decode      {:>6.1} ms",
        ms(time(runs, || v1::ListPodResourcesResponse::decode(bytes.as_slice()).map(|r| r.pod_resources.len())))
    );
    println!(
        "  to views    {:>6.1} ms",
        ms(time(runs, || {
            let d = decoded.clone();
            d.pod_resources.into_iter().map(PodView::from).count()
        }))
    );
    for (label, format) in [("table", Format::Table), ("wide", Format::Wide), ("json", Format::Json)] {
        println!(
            "  {label:<11} {:>6.1} ms",
            ms(time(runs, || {
                let mut out = Vec::with_capacity(1 << 20);
                render::list(&mut out, format, &view).expect("render");
                out.len()
            }))
        );
    }
}
