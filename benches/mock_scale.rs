//! 100,000 devices: the memory a mock holds for them, how long one
//! ListAndWatch snapshot takes to build and encode, and how long the first
//! message and a change take to reach a client over the socket.
//!
//!   cargo bench --bench mock_scale -- [--devices 100000] [--numa-nodes 4] [--iterations 20]

#[path = "mock_common.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{arg_or, mib, ms, quantile, rss_kib};
use dpctl::mock_plugin::ResourceConfig;
use dpctl::plugin_client::PluginClient;
use dpctl::transport::ClientConfig;
use futures_util::StreamExt;
use prost::Message;

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(run());
}

async fn run() {
    let n: usize = arg_or("--devices", 100_000);
    let numa: usize = arg_or("--numa-nodes", 4);
    let iterations: usize = arg_or("--iterations", 20).max(1);
    const RES: &str = "example.com/gpu";

    let rss0 = rss_kib();
    let mut r = ResourceConfig::new(RES, n);
    r.numa_nodes = numa;
    let t = Instant::now();
    let (handle, socket, _dir) = common::start_mock(r).await;
    let started = t.elapsed();
    let rss1 = rss_kib();
    println!("mock_scale: {n} devices on {numa} NUMA nodes");
    println!(
        "  start: {started:?}; memory held for the device table: {} (RSS {} -> {})",
        mib(rss1.saturating_sub(rss0)),
        mib(rss0),
        mib(rss1)
    );

    // What each stream does per message: clone the shared snapshot, then
    // encode it (tonic encodes with prost).
    let snap = handle.snapshot(RES).expect("snapshot");
    let size = snap.encoded_len();
    let mut clone_ns = Vec::new();
    let mut encode_ns = Vec::new();
    for _ in 0..iterations {
        let t = Instant::now();
        let msg = (*snap).clone();
        clone_ns.push(t.elapsed().as_nanos() as u64);
        let t = Instant::now();
        let bytes = msg.encode_to_vec();
        encode_ns.push(t.elapsed().as_nanos() as u64);
        assert_eq!(bytes.len(), size);
    }
    clone_ns.sort_unstable();
    encode_ns.sort_unstable();
    let over = if size > dpctl::error::KUBELET_MAX_RECV { "OVER" } else { "under" };
    println!(
        "  snapshot: {size} bytes ({:.2} MiB, {over} the kubelet's 4 MiB limit); clone p50 {} ; prost encode p50 {} (p90 {})",
        size as f64 / 1048576.0,
        ms(quantile(&clone_ns, 0.5)),
        ms(quantile(&encode_ns, 0.5)),
        ms(quantile(&encode_ns, 0.9))
    );

    // Over the socket, with the client's limit raised to read it at all.
    let cfg = ClientConfig { max_recv_bytes: 256 << 20, ..ClientConfig::default() };
    let client = PluginClient::connect(&socket, &cfg).await.expect("connect");
    let mut first_ns = Vec::new();
    for _ in 0..iterations {
        let t = Instant::now();
        let s = client.list_once(Duration::from_secs(30)).await.expect("first message");
        first_ns.push(t.elapsed().as_nanos() as u64);
        assert_eq!(s.devices.len(), n);
    }
    first_ns.sort_unstable();
    println!(
        "  ListAndWatch open -> first message decoded by the client: p50 {}  p90 {}",
        ms(quantile(&first_ns, 0.5)),
        ms(quantile(&first_ns, 0.9))
    );

    // A change: one device's health, from set_health to the client.
    let mut stream = Box::pin(client.list_and_watch().await.expect("stream"));
    stream.next().await.expect("first").expect("first ok");
    let mut change_ns = Vec::new();
    for i in 0..iterations {
        let id = format!("GPU-{}", i % n);
        let t = Instant::now();
        handle.set_health(RES, &[id], "Unhealthy").expect("set health");
        let s = stream.next().await.expect("change").expect("change ok");
        change_ns.push(t.elapsed().as_nanos() as u64);
        assert_eq!(s.devices.len(), n);
    }
    change_ns.sort_unstable();
    println!(
        "  one health change -> new message decoded by the client: p50 {}  p90 {}",
        ms(quantile(&change_ns, 0.5)),
        ms(quantile(&change_ns, 0.9))
    );
    drop(stream);
    println!("  RSS at the end: {}", mib(rss_kib()));
    handle.stop().await.expect("stop");
}
