//! Devices flapping: N devices toggle health together at H Hz (one
//! ListAndWatch message per toggle) for a while. Checks that memory stays
//! flat and that every change reaches a client's stream.
//!
//!   cargo bench --bench mock_flap -- [--devices 1000] [--hz 100] [--duration 60s]

#[path = "mock_common.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{arg_or, duration_or, mib, rss_kib};
use dpctl::mock_plugin::{FlapConfig, ResourceConfig};
use dpctl::plugin_client::PluginClient;
use dpctl::transport::ClientConfig;
use futures_util::StreamExt;

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(run());
}

async fn run() {
    let n: usize = arg_or("--devices", 1000);
    let hz: f64 = arg_or("--hz", 100.0);
    let duration = duration_or("--duration", Duration::from_secs(60));
    const RES: &str = "example.com/gpu";

    let mut r = ResourceConfig::new(RES, n);
    r.numa_nodes = 2;
    let all: Vec<String> = r.initial_devices().into_iter().map(|d| d.id).collect();
    r.flap = vec![FlapConfig { ids: all, every: Duration::from_secs_f64(1.0 / hz) }];
    let (handle, socket, _dir) = common::start_mock(r).await;
    let client = PluginClient::connect(&socket, &ClientConfig::default()).await.expect("connect");
    // The stream subscribes somewhere between these two readings of the
    // change counter; changes before it are in its first message.
    let c0 = handle.status()[0].changes;
    let mut stream = Box::pin(client.list_and_watch().await.expect("stream"));
    let first = stream.next().await.expect("first").expect("first ok");
    let c1 = handle.status()[0].changes;

    println!("mock_flap: {n} devices toggling together at {hz} Hz for {duration:?}");
    let rss_start = rss_kib();
    let mut rss_max = rss_start;
    let mut samples = vec![rss_start];
    let mut messages = 0u64;
    let mut missed = 0u64; // messages where the devices did not flip from the previous one
    let mut mixed = 0u64; // messages with devices in different states
    let mut prev = first.devices[0].health.clone();
    let t0 = Instant::now();
    let mut next_sample = t0 + Duration::from_secs(5);
    while t0.elapsed() < duration {
        let left = duration.saturating_sub(t0.elapsed());
        let Ok(item) = tokio::time::timeout(left, stream.next()).await else { break };
        let snap = item.expect("stream open").expect("message");
        messages += 1;
        let h = &snap.devices[0].health;
        if *h == prev {
            missed += 1;
        }
        if snap.devices.iter().any(|d| d.health != *h) {
            mixed += 1;
        }
        prev = h.clone();
        if Instant::now() >= next_sample {
            let r = rss_kib();
            rss_max = rss_max.max(r);
            samples.push(r);
            next_sample += Duration::from_secs(5);
        }
    }
    let elapsed = t0.elapsed();
    // Let the last published changes arrive.
    let c_end = handle.status()[0].changes;
    let (low, high) = (c_end - c1, c_end - c0);
    while messages < low {
        match tokio::time::timeout(Duration::from_secs(1), stream.next()).await {
            Ok(Some(Ok(_))) => messages += 1,
            _ => break,
        }
    }
    let rss_end = rss_kib();
    let expected = if low == high { low.to_string() } else { format!("{low}..={high}") };
    println!(
        "  changes published while streaming {expected} ({:.1}/s); messages received {messages}; not flipped {missed}; mixed {mixed}",
        low as f64 / elapsed.as_secs_f64(),
    );
    println!(
        "  RSS start {}  end {}  max {}  (samples every 5 s: {})",
        mib(rss_start),
        mib(rss_end),
        mib(rss_max),
        samples.iter().map(|k| format!("{:.1}", *k as f64 / 1024.0)).collect::<Vec<_>>().join(" ")
    );
    let ok = (low..=high).contains(&messages) && missed == 0 && mixed == 0;
    println!("  every change reached the stream: {}", if ok { "yes" } else { "NO" });
    handle.stop().await.expect("stop");
}
