//! 100,000 devices: the memory a mock holds for them, how long one
//! ListAndWatch list takes to encode whole and to patch for one health
//! change, what the client's decode costs in process, and how long the first
//! message and a health change take to reach a client over the socket. The two socket
//! measurements are `dpctl bench list` and `dpctl bench list --churn`'s own
//! code (`dpctl::bench`), with the health flipped in process.
//!
//!   cargo bench --bench mock_scale -- [--devices 100000] [--numa-nodes 4] [--iterations 20]

#[path = "mock_common.rs"]
mod common;

/// The allocator the dpctl binary uses (src/bin/dpctl.rs), so that decoding
/// here costs what it costs in kubelet-sim.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{arg_or, mib, ms, quantile, rss_kib};
use dpctl::bench::{self, BenchConfig, HealthFlipper, Limit, Op, Prepared, Progress};
use dpctl::mock_plugin::state::{EncodedList, IndexedList};
use dpctl::mock_plugin::{MockHandle, ResourceConfig};
use dpctl::proto::deviceplugin::v1beta1 as dp;
use dpctl::transport::ClientConfig;
use dpctl::transport::codec::decode_slice;
use futures_util::future::BoxFuture;
use prost::Message;

const RES: &str = "example.com/gpu";

/// Flips health through the in-process handle, as the control socket does.
struct InProcess(Arc<MockHandle>);

impl HealthFlipper for InProcess {
    fn set_health<'a>(&'a self, ids: Vec<String>, health: &'static str) -> BoxFuture<'a, dpctl::Result<()>> {
        Box::pin(async move { self.0.set_health(RES, &ids, health).map(|_| ()) })
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(run());
}

fn verdict(p50_ms: f64, target_ms: f64) -> String {
    if p50_ms <= target_ms {
        format!("[ok: target p50 <= {target_ms} ms]")
    } else {
        format!("[MISSED: target p50 <= {target_ms} ms]")
    }
}

async fn run() {
    let n: usize = arg_or("--devices", 100_000);
    let numa: usize = arg_or("--numa-nodes", 4);
    let iterations: u64 = arg_or("--iterations", 20).max(1);

    let rss0 = rss_kib();
    let mut r = ResourceConfig::new(RES, n);
    r.numa_nodes = numa;
    let t = Instant::now();
    let (handle, socket, _dir) = common::start_mock(r).await;
    let started = t.elapsed();
    let rss1 = rss_kib();
    let held = rss1.saturating_sub(rss0);
    println!("mock_scale: {n} devices on {numa} NUMA nodes");
    println!(
        "  start: {started:?}; memory held for the device table: {} (RSS {} -> {}), {:.0} bytes per device",
        mib(held),
        mib(rss0),
        mib(rss1),
        held as f64 * 1024.0 / n.max(1) as f64
    );

    // What a change costs the mock. The whole list encoded (at start, and
    // when devices are added or removed), and what a health change costs:
    // the changed device encoded again and the rest of the previous message
    // copied around it (shared by every open stream: no clone of the table,
    // no encode per stream).
    let snap = handle.snapshot(RES).expect("snapshot");
    let size = snap.encoded_len();
    let mut msg = snap.decode().expect("decodes");
    let mut encode_ns = Vec::new();
    let mut patch_ns = Vec::new();
    let mut list = IndexedList::encode(&msg.devices);
    for i in 0..iterations {
        let t = Instant::now();
        let e = EncodedList::encode(&msg);
        encode_ns.push(t.elapsed().as_nanos() as u64);
        assert_eq!(e.encoded_len(), size);
        let p = (i as usize * 7919) % msg.devices.len().max(1);
        let d = &mut msg.devices[p];
        d.health = if d.health == dp::HEALTHY { dp::UNHEALTHY } else { dp::HEALTHY }.to_string();
        let t = Instant::now();
        list = list.patched(&msg.devices, &[p]);
        patch_ns.push(t.elapsed().as_nanos() as u64);
        let d = &mut msg.devices[p];
        d.health = if d.health == dp::HEALTHY { dp::UNHEALTHY } else { dp::HEALTHY }.to_string();
        list = list.patched(&msg.devices, &[p]);
    }
    assert_eq!(list.snapshot().bytes(), snap.bytes(), "patching back and forth gives the first list again");
    encode_ns.sort_unstable();
    patch_ns.sort_unstable();
    let over = if size > dpctl::limits::KUBELET_MAX_RECV { "OVER" } else { "under" };
    println!(
        "  list: {size} bytes ({:.2} MiB, {over} the kubelet's 4 MiB limit); whole list encoded: p50 {} (p90 {}); \
         one health change (that device encoded, the rest copied): p50 {} (p90 {})",
        size as f64 / 1048576.0,
        ms(quantile(&encode_ns, 0.5)),
        ms(quantile(&encode_ns, 0.9)),
        ms(quantile(&patch_ns, 0.5)),
        ms(quantile(&patch_ns, 0.9))
    );

    // What the client's decode costs, in process: through a buffer's `Buf`
    // interface as tonic's default prost codec does (the cursor moves once
    // per field), from one slice, and from one slice into a list with room
    // for every device as dpctl's ListAndWatch reader does.
    let mut buf_ns = Vec::new();
    let mut slice_ns = Vec::new();
    let mut reserved_ns = Vec::new();
    for _ in 0..iterations {
        let mut b = bytes::BytesMut::from(&snap.bytes()[..]);
        let t = Instant::now();
        let m = dp::ListAndWatchResponse::decode(&mut b).expect("decodes");
        buf_ns.push(t.elapsed().as_nanos() as u64);
        drop(m);
        let b = snap.bytes();
        let t = Instant::now();
        let m = dp::ListAndWatchResponse::decode(&b[..]).expect("decodes");
        slice_ns.push(t.elapsed().as_nanos() as u64);
        assert_eq!(m.devices.len(), n);
        drop(m);
        let t = Instant::now();
        let m: dp::ListAndWatchResponse = decode_slice(&b).expect("decodes");
        reserved_ns.push(t.elapsed().as_nanos() as u64);
        assert_eq!(m.devices.len(), n);
    }
    reserved_ns.sort_unstable();
    buf_ns.sort_unstable();
    slice_ns.sort_unstable();
    println!(
        "  client decode in process: through a BytesMut (tonic's prost codec) p50 {}; from one slice p50 {}; \
         from one slice with the device slots reserved (dpctl's reader) p50 {}",
        ms(quantile(&buf_ns, 0.5)),
        ms(quantile(&slice_ns, 0.5)),
        ms(quantile(&reserved_ns, 0.5))
    );

    // Over the socket, with the kubelet's 4 MiB receive limit.
    let cfg = BenchConfig {
        op: Op::List,
        concurrency: 1,
        connections: 1,
        limit: Limit::Total(iterations),
        rate: None,
        warmup: Duration::ZERO,
        devices_per_request: 1,
        client: ClientConfig { call_timeout: Duration::from_secs(30), ..ClientConfig::default() },
    };
    let prepared = Prepared::connect(&socket, &cfg).await.expect("connect");
    let progress = Arc::new(Progress::default());
    let first = bench::run(std::slice::from_ref(&prepared), &cfg, &progress).await.expect("bench list").remove(0);
    assert_eq!(first.errors, 0, "{:?}", first.first_error);
    println!(
        "  ListAndWatch open -> first message decoded by the client: p50 {:.3} ms  p90 {:.3} ms  max {:.3} ms  {}",
        first.latency_ms.p50,
        first.latency_ms.p90,
        first.latency_ms.max,
        verdict(first.latency_ms.p50, 25.0)
    );

    let handle = Arc::new(handle);
    let flipper: Arc<dyn HealthFlipper> = Arc::new(InProcess(Arc::clone(&handle)));
    let change = bench::churn::run(&prepared, &cfg, flipper, &progress).await.expect("bench list --churn");
    let change = change.report(prepared.socket(), prepared.device_counts());
    println!(
        "  one health change -> new message decoded by the client: p50 {:.3} ms  p90 {:.3} ms  max {:.3} ms  {}",
        change.latency_ms.p50,
        change.latency_ms.p90,
        change.latency_ms.max,
        verdict(change.latency_ms.p50, 20.0)
    );
    drop(prepared);
    println!("  RSS at the end: {}", mib(rss_kib()));
    let Ok(handle) = Arc::try_unwrap(handle) else { panic!("the handle is still shared") };
    handle.stop().await.expect("stop");
}
