//! `dpctl apiserver` under a hostile or careless client (issue: the API
//! server's memory and connections bounded like the real API server's):
//! resident memory of the server process through 100 PUTs of a 1.4 MB
//! ResourceSlice (stored) and 100 of a 2 MB one (refused as etcd refuses
//! it), ten watches from an old resourceVersion that never read while 50
//! more PUTs go on, the time per create across 3,000 creates (the record is
//! no longer rewritten whole on every write), and a request's latency with
//! 1,000 idle connections open. Thresholds: RSS under 100 MB at every
//! stage; the last 100 creates no slower than 3x the first 100; the
//! request within 100 ms.
//!
//!     cargo bench --bench apiserver_memory

#[path = "sim_common.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{dpctl, tempdir, verdict};
use dpctl::apiserver::client::Client;
use serde_json::{Value, json};

const SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";

fn slice(name: &str, blob: usize) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {"driver": "gpu.example", "nodeName": "n", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "d", "attributes": {"blob": {"string": "x".repeat(blob)}}}]},
    })
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// PUTs `n` times the slice `name` of `blob` bytes (created first when
/// absent); the count of answers that were refused.
async fn puts(c: &Client, name: &str, blob: usize, n: usize) -> usize {
    let mut refused = 0;
    let mut obj = match c.request("POST", SLICES, Some(&slice(name, blob))).await {
        Ok(o) => Some(o),
        Err(_) => {
            refused += 1;
            None
        }
    };
    for _ in 1..n {
        let body = obj.clone().unwrap_or_else(|| slice(name, blob));
        match c.request("PUT", &format!("{SLICES}/{name}"), Some(&body)).await {
            Ok(o) => obj = Some(o),
            Err(_) => refused += 1,
        }
    }
    refused
}

async fn run() -> bool {
    let dir = tempdir("dpctl-api-bench");
    let objects = dir.path().join("objects.yaml");
    std::fs::write(&objects, "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n").unwrap();
    let api_dir = dir.path().join("api");
    let mut child =
        dpctl(&["apiserver", "--dir", api_dir.to_str().unwrap(), "--objects", objects.to_str().unwrap(), "-o", "json"]);
    let serving = child.event_within("serving", Duration::from_secs(10)).await;
    let server = serving["server"].as_str().unwrap().to_string();
    let c =
        Client::from_kubeconfig(std::path::Path::new(serving["kubeconfig"].as_str().unwrap()), "kubeconfig").unwrap();
    let limit_kib = 100 * 1024;
    let mut ok = true;
    println!("{:<58} {:>10} {:>10}", "stage", "RSS MiB", "peak MiB");
    let show = |stage: &str, child: &common::Child| {
        let (rss, peak) = child.rss_kib();
        println!("{stage:<58} {:>10.1} {:>10.1}", mib(rss), mib(peak));
        rss
    };
    show("started", &child);
    let refused = puts(&c, "big", 1_400_000, 100).await;
    ok &= verdict(&format!("100 PUTs of a 1.4 MB slice stored ({refused} refused)"), refused == 0);
    ok &= verdict("RSS under 100 MB", show("after 100 PUTs of a 1.4 MB slice", &child) < limit_kib);
    let refused = puts(&c, "huge", 2_000_000, 100).await;
    ok &= verdict(&format!("100 PUTs of a 2 MB slice refused ({refused})"), refused == 100);
    ok &= verdict("RSS under 100 MB", show("after 100 PUTs of a 2 MB slice", &child) < limit_kib);
    let host = server.trim_start_matches("http://").to_string();
    let token =
        dpctl::apiserver::client::token_of(&std::fs::read_to_string(serving["kubeconfig"].as_str().unwrap()).unwrap())
            .unwrap();
    let mut stuck = Vec::new();
    for _ in 0..10 {
        use tokio::io::AsyncWriteExt;
        let mut s = tokio::net::TcpStream::connect(&host).await.unwrap();
        let head = format!(
            "GET {SLICES}?watch=true&resourceVersion=2 HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n"
        );
        s.write_all(head.as_bytes()).await.unwrap();
        stuck.push(s);
    }
    let started = Instant::now();
    let mut sent = 0;
    while sent < 50 {
        puts(&c, &format!("w{sent}"), 1_400_000, 1).await;
        sent += 1;
    }
    let _ = started;
    ok &= verdict("RSS under 100 MB", show("10 unread watches from rv 2, 50 more 1.4 MB creates", &child) < limit_kib);
    drop(stuck);
    let mut times = Vec::new();
    for i in 0..3000 {
        let t = Instant::now();
        c.request("POST", SLICES, Some(&slice(&format!("small-{i}"), 10))).await.expect("a small create");
        times.push(t.elapsed());
    }
    let avg = |d: &[Duration]| d.iter().sum::<Duration>().as_secs_f64() * 1000.0 / d.len() as f64;
    let (first, last) = (avg(&times[..100]), avg(&times[2900..]));
    println!("3,000 small creates: first 100 {first:.2} ms each, last 100 {last:.2} ms each");
    ok &= verdict("the last 100 creates no slower than 3x the first 100", last <= first * 3.0);
    show("after 3,000 small creates", &child);
    let mut idle = Vec::new();
    for _ in 0..1000 {
        match tokio::net::TcpStream::connect(&host).await {
            Ok(s) => idle.push(s),
            Err(e) => {
                println!("connect: {e}");
                break;
            }
        }
    }
    let t = Instant::now();
    let answered = c.request("GET", "/api/v1/nodes/n", None).await.is_ok();
    let took = t.elapsed();
    println!("{} idle connections open: GET answered {answered} in {:.1} ms", idle.len(), took.as_secs_f64() * 1000.0);
    ok &= verdict("a request answered within 100 ms", answered && took < Duration::from_millis(100));
    show("with 1,000 idle connections", &child);
    drop(idle);
    child.stop().await;
    ok
}

#[tokio::main]
async fn main() {
    if !run().await {
        std::process::exit(1);
    }
}
