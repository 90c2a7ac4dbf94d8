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

mod podresources_node;
use podresources_node::{env_usize, node};

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
