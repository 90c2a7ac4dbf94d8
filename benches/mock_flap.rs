//! Devices flapping: N devices toggle health at H Hz for a while, in G
//! groups that flap independently (each toggle of a group is one
//! ListAndWatch message; G = 1: all devices together). Checks that memory
//! stays flat and that every change reaches a client's stream.
//!
//!   cargo bench --bench mock_flap -- [--devices 1000] [--hz 100] [--groups 1] [--duration 60s]

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
    let groups: usize = arg_or("--groups", 1).max(1);
    let duration = duration_or("--duration", Duration::from_secs(60));
    const RES: &str = "example.com/gpu";

    let mut r = ResourceConfig::new(RES, n);
    r.numa_nodes = 2;
    let all: Vec<String> = r.initial_devices().into_iter().map(|d| d.id).collect();
    let every = Duration::from_secs_f64(1.0 / hz);
    let per = n.div_ceil(groups);
    r.flap = all.chunks(per).map(|ids| FlapConfig { ids: ids.to_vec(), every }).collect();
    let (handle, socket, _dir) = common::start_mock(r).await;
    let client = PluginClient::connect(&socket, &ClientConfig::default()).await.expect("connect");
    // The stream subscribes somewhere between these two readings of the
    // change counter; changes before it are in its first message.
    let c0 = handle.status()[0].changes;
    let mut stream = Box::pin(client.list_and_watch().await.expect("stream"));
    let first = stream.next().await.expect("first").expect("first ok");
    let c1 = handle.status()[0].changes;

    println!(
        "mock_flap: {n} devices toggling at {hz} Hz in {} group(s) of {per} for {duration:?} ({:.0} messages/s expected)",
        r_groups(n, per),
        hz * r_groups(n, per) as f64
    );
    let rss_start = rss_kib();
    let mut rss_max = rss_start;
    let mut samples = vec![rss_start];
    let mut messages = 0u64;
    // Messages where not exactly one group flipped from the previous message
    // (a lost or merged change).
    let mut missed = 0u64;
    let mut prev: Vec<String> = first.devices.iter().map(|d| d.health.clone()).collect();
    let t0 = Instant::now();
    let mut next_sample = t0 + Duration::from_secs(5);
    while t0.elapsed() < duration {
        let left = duration.saturating_sub(t0.elapsed());
        let Ok(item) = tokio::time::timeout(left, stream.next()).await else { break };
        let snap = item.expect("stream open").expect("message");
        messages += 1;
        let flipped: Vec<usize> =
            snap.devices.iter().zip(&prev).enumerate().filter(|(_, (d, p))| d.health != **p).map(|(i, _)| i).collect();
        let one_group = !flipped.is_empty()
            && flipped.len() == per.min(n - flipped[0] / per * per)
            && flipped.iter().all(|i| i / per == flipped[0] / per);
        if !one_group {
            missed += 1;
        }
        prev = snap.devices.iter().map(|d| d.health.clone()).collect();
        if Instant::now() >= next_sample {
            let r = rss_kib();
            rss_max = rss_max.max(r);
            samples.push(r);
            next_sample += Duration::from_secs(5);
        }
    }
    let elapsed = t0.elapsed();
    // Everything the server sent up to now must reach the client, and the
    // server must not have skipped any list (a stream that falls behind gets
    // the newest list instead of every one).
    let c_end = handle.status()[0].changes;
    let server = handle.status()[0].clone();
    while messages + 1 < server.messages_sent {
        match tokio::time::timeout(Duration::from_secs(2), stream.next()).await {
            Ok(Some(Ok(_))) => messages += 1,
            _ => break,
        }
    }
    let rss_end = rss_kib();
    let published = if c0 == c1 { (c_end - c1).to_string() } else { format!("{}..={}", c_end - c1, c_end - c0) };
    println!(
        "  changes published while streaming {published} ({:.1}/s); server sent {} messages after the first, skipped {}; client received {messages}",
        (c_end - c1) as f64 / elapsed.as_secs_f64(),
        server.messages_sent - 1,
        server.skipped_messages,
    );
    println!("  messages that were not exactly one group's toggle: {missed}");
    println!(
        "  RSS start {}  end {}  max {}  (samples every 5 s: {})",
        mib(rss_start),
        mib(rss_end),
        mib(rss_max),
        samples.iter().map(|k| format!("{:.1}", *k as f64 / 1024.0)).collect::<Vec<_>>().join(" ")
    );
    let ok = server.skipped_messages == 0 && messages + 1 >= server.messages_sent && missed == 0;
    println!("  every change reached the stream: {}", if ok { "yes" } else { "NO" });
    handle.stop().await.expect("stop");
}

fn r_groups(n: usize, per: usize) -> usize {
    n.div_ceil(per)
}
