//! `dpctl bench` against dpctl's mock plugin served in this process: the
//! counts it reports match the calls the plugin saw, the open-loop schedule
//! sends exactly what was asked, thresholds decide the exit code, and bad
//! input is refused with exit 2. Figures that depend on timing (latency,
//! rate accuracy) are in BENCHMARKS.md, not asserted here.

use std::time::Duration;

use dpctl::mock_plugin::control::{ControlReply, ControlRequest};
use dpctl::mock_plugin::{ErrorSpec, MockConfig, MockHandle, MockPlugin, ResourceConfig, Rpc, RpcFault, RpcSelector};

use crate::support::{Child, Sandbox, Stderr, dpctl, unregistered_mock, within};

const GPU: &str = "example.com/gpu";

fn calls(h: &MockHandle, rpc: &str) -> u64 {
    h.status()[0].calls.get(rpc).copied().unwrap_or(0)
}

#[tokio::test]
async fn allocate_total_sends_exactly_n_kubelet_like_requests() {
    let sb = Sandbox::new();
    let (h, sock) = unregistered_mock(&sb, ResourceConfig::new(GPU, 4)).await;
    let r = dpctl(&[
        "bench",
        "allocate",
        "--socket",
        &sock,
        "--total",
        "200",
        "--concurrency",
        "4",
        "--warmup",
        "0s",
        "-o",
        "json",
    ])
    .await;
    r.expect_code(0);
    let j = r.json();
    let t = &j["targets"][0];
    assert_eq!((t["sent"].as_u64(), t["ok"].as_u64(), t["errors"].as_u64()), (Some(200), Some(200), Some(0)));
    assert_eq!(t["violations"], 0, "the mock answers Allocate by the contract");
    assert_eq!((t["devices"].as_u64(), t["healthy"].as_u64()), (Some(4), Some(4)));
    let l = &t["latency_ms"];
    let (p50, p99, max) = (l["p50"].as_f64().unwrap(), l["p99"].as_f64().unwrap(), l["max"].as_f64().unwrap());
    assert!(p50 > 0.0 && p50 <= p99 && p99 <= max, "{l}");
    assert!(t["client_cpu_ms"].as_f64().unwrap() > 0.0, "{t}");
    // Every request reached the plugin as a valid Allocate: the mock refuses unknown IDs.
    assert_eq!(calls(&h, "Allocate"), 200);
    h.stop().await.unwrap();
}

/// Ctrl-C during a 10-minute run: it stops sending at once and reports
/// what it measured, marked interrupted, with exit 1 (nothing passed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_the_load_and_reports_what_was_measured() {
    let sb = Sandbox::new();
    let (h, sock) = unregistered_mock(&sb, ResourceConfig::new(GPU, 4)).await;
    let args = [
        "bench",
        "allocate",
        "--socket",
        &sock,
        "--duration",
        "10m",
        "--warmup",
        "0s",
        "--concurrency",
        "2",
        "-o",
        "json",
    ];
    let mut bench = Child::dpctl(&args);
    // A worker sends its next call only once the last one was answered:
    // past 2 calls, at least one answer was counted (a call in flight at
    // the signal is given up).
    within("the third Allocate", async {
        while calls(&h, "Allocate") <= 2 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    bench.interrupt();
    let code = bench.wait().await;
    let report: serde_json::Value = serde_json::from_str(&bench.rest().await.join("\n")).expect("a JSON report");
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["interrupted"], true, "{report}");
    assert!(report["passed"] == false && report["targets"][0]["ok"].as_u64() > Some(0), "{report}");
    h.stop().await.unwrap();
}

/// Ctrl-C while every worker waits on a plugin that never answers: the
/// calls in flight are given up at once (not after the 10 s call
/// timeout), and the report says interrupted, with exit 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_gives_up_the_calls_a_hanging_plugin_holds() {
    let sb = Sandbox::new();
    let mut res = ResourceConfig::new(GPU, 4);
    let hang = RpcFault {
        rpc: RpcSelector::One(Rpc::Allocate),
        error: None,
        latency: Some(Duration::from_secs(600)),
        after: 0,
    };
    res.faults.rpc = vec![hang];
    let (h, sock) = unregistered_mock(&sb, res).await;
    let args = ["bench", "allocate", "--socket", &sock, "--total", "10", "--warmup", "0s", "-o", "json"];
    let mut bench = Child::dpctl(&args).patience(Duration::from_secs(5));
    within("the first Allocate", async {
        while calls(&h, "Allocate") == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    let asked = std::time::Instant::now();
    bench.interrupt();
    let code = bench.wait().await;
    assert!(asked.elapsed() < Duration::from_secs(5), "stopped after {:?}", asked.elapsed());
    let report: serde_json::Value = serde_json::from_str(&bench.rest().await.join("\n")).expect("a JSON report");
    assert_eq!((code, &report["interrupted"]), (1, &serde_json::json!(true)), "{report}");
    assert_eq!(report["targets"][0]["ok"], 0, "{report}");
    h.stop().await.unwrap();
}

#[tokio::test]
async fn open_loop_rate_sends_the_schedule_and_no_earlier() {
    let sb = Sandbox::new();
    let (h, sock) = unregistered_mock(&sb, ResourceConfig::new(GPU, 2)).await;
    let r = dpctl(&[
        "bench", "allocate", "--socket", &sock, "--rate", "400", "--total", "81", "--warmup", "0s", "-o", "json",
    ])
    .await;
    r.expect_code(0);
    let j = r.json();
    let t = &j["targets"][0];
    assert_eq!((t["sent"].as_u64(), t["ok"].as_u64()), (Some(81), Some(81)));
    assert_eq!(j["rate"], 400.0);
    // Request 80 is due 80/400 s = 200 ms after the start; it cannot go out before.
    assert!(t["elapsed_ms"].as_f64().unwrap() >= 200.0, "{t}");
    assert_eq!(calls(&h, "Allocate"), 81);
    h.stop().await.unwrap();
}

#[tokio::test]
async fn fail_if_thresholds_exit_1_and_errors_are_counted_by_code() {
    let sb = Sandbox::new();
    let mut res = ResourceConfig::new(GPU, 2);
    res.faults.rpc = vec![RpcFault {
        rpc: RpcSelector::One(Rpc::Allocate),
        error: Some("unavailable: driver gone".parse::<ErrorSpec>().unwrap()),
        latency: None,
        after: 10,
    }];
    let (h, sock) = unregistered_mock(&sb, res).await;
    let base = ["bench", "allocate", "--socket", &sock, "--total", "30", "--concurrency", "1", "--warmup", "0s"];
    let r = dpctl(&[&base[..], &["--fail-if", "errors>0", "-o", "json"]].concat()).await;
    r.expect_code(1);
    let j = r.json();
    let t = &j["targets"][0];
    assert_eq!((t["ok"].as_u64(), t["errors"].as_u64()), (Some(10), Some(20)));
    assert_eq!(t["errors_by_code"]["Unavailable"], 20);
    assert_eq!(j["passed"], false);
    assert_eq!(j["thresholds"][0]["condition"], "errors>0");
    assert_eq!(j["thresholds"][0]["crossed"], true);

    // The fault now fails every call. The table names the error code and each threshold's verdict.
    let r = dpctl(&[&base[..], &["--fail-if", "errors>=31", "--fail-if", "p50>1h"]].concat()).await;
    r.expect_code(0);
    assert!(r.stdout.contains("errors by code: Unavailable 30"), "{}", r.stdout);
    assert!(r.stdout.contains("first error: Unavailable: driver gone"), "{}", r.stdout);
    assert!(r.stdout.contains("fail-if errors>=31: ok"), "{}", r.stdout);
    // Latencies are shown with their unit, whatever unit the limit was written in.
    assert!(r.stdout.contains("fail-if p50>1h: ok (measured ") && r.stdout.contains(" ms) on "), "{}", r.stdout);
    let r = dpctl(&[&base[..], &["--fail-if", "errors>=30"]].concat()).await;
    r.expect_code(1);
    assert!(r.stdout.contains("fail-if errors>=30: CROSSED"), "{}", r.stdout);
    h.stop().await.unwrap();
}

#[tokio::test]
async fn preferred_requests_pass_the_contract_checks() {
    let sb = Sandbox::new();
    let (h, sock) = unregistered_mock(&sb, ResourceConfig::new(GPU, 8)).await;
    let r = dpctl(&[
        "bench",
        "preferred",
        "--socket",
        &sock,
        "--total",
        "50",
        "--devices-per-request",
        "3",
        "--warmup",
        "0s",
        "--fail-if",
        "violations>0",
        "-o",
        "json",
    ])
    .await;
    r.expect_code(0);
    let t = &r.json()["targets"][0];
    assert_eq!((t["ok"].as_u64(), t["violations"].as_u64()), (Some(50), Some(0)));
    assert_eq!(calls(&h, "GetPreferredAllocation"), 50);
    h.stop().await.unwrap();
}

#[tokio::test]
async fn compare_loads_both_plugins_alternately_and_prints_the_ratio() {
    let (sa, sb2) = (Sandbox::new(), Sandbox::new());
    let (ha, a) = unregistered_mock(&sa, ResourceConfig::new(GPU, 2)).await;
    let (hb, b) = unregistered_mock(&sb2, ResourceConfig::new(GPU, 2)).await;
    let r =
        dpctl(&["bench", "options", "--socket", &a, "--compare", &b, "--total", "40", "--warmup", "0s", "-o", "json"])
            .await;
    r.expect_code(0);
    let j = r.json();
    assert_eq!(j["targets"][0]["socket"], a.as_str());
    assert_eq!(j["targets"][1]["socket"], b.as_str());
    assert_eq!((j["targets"][0]["sent"].as_u64(), j["targets"][1]["sent"].as_u64()), (Some(40), Some(40)));
    assert!(j["ratio"]["throughput"].as_f64().unwrap() > 0.0, "{}", j["ratio"]);
    assert_eq!((calls(&ha, "GetDevicePluginOptions"), calls(&hb, "GetDevicePluginOptions")), (40, 40));
    let r = dpctl(&["bench", "options", "--socket", &a, "--compare", &b, "--total", "4", "--warmup", "0s"]).await;
    r.expect_code(0);
    assert!(r.stdout.contains(&format!("ratio {b} / {a}: throughput")), "{}", r.stdout);
    ha.stop().await.unwrap();
    hb.stop().await.unwrap();
}

#[tokio::test]
async fn list_churn_times_each_health_change_and_leaves_devices_healthy() {
    let sb = Sandbox::new();
    let (h, sock) = unregistered_mock(&sb, ResourceConfig::new(GPU, 3)).await;
    let r = dpctl(&["bench", "list", "--socket", &sock, "--churn", "--total", "5", "-o", "json"]).await;
    r.expect_code(0);
    let j = r.json();
    assert_eq!(j["mode"], "churn");
    assert_eq!((j["targets"][0]["sent"].as_u64(), j["targets"][0]["ok"].as_u64()), (Some(5), Some(5)));
    // Five changes, then the one that put the fifth back.
    assert_eq!(h.status()[0].changes, 6);
    assert!(h.devices(GPU).unwrap().iter().all(|d| d.health == "Healthy"));

    // The flips ask for a brief reply (no device list); a plain set-health still gets the status.
    let ctl = dpctl::paths::control_socket(sb.path(), GPU);
    let brief = ControlRequest::SetHealth { ids: vec!["GPU-0".into()], health: "Healthy".into(), brief: true };
    let reply: ControlReply =
        dpctl::transport::control::call(&ctl, &brief, std::time::Duration::from_secs(5)).await.unwrap();
    assert!(reply.ok && reply.status.is_none(), "{reply:?}");
    let full = ControlRequest::SetHealth { ids: vec!["GPU-0".into()], health: "Healthy".into(), brief: false };
    let reply: ControlReply =
        dpctl::transport::control::call(&ctl, &full, std::time::Duration::from_secs(5)).await.unwrap();
    assert_eq!(reply.status.map(|s| s.devices.len()), Some(3));

    let r = dpctl(&["bench", "list", "--socket", &sock, "--total", "3", "--warmup", "0s", "-o", "json"]).await;
    r.expect_code(0);
    assert_eq!(r.json()["targets"][0]["ok"], 3);
    h.stop().await.unwrap();
}

#[tokio::test]
async fn churn_needs_a_mock_control_socket() {
    let sb = Sandbox::new();
    let cfg = MockConfig {
        dir: Some(sb.path().to_path_buf()),
        register: false,
        control: false,
        resources: vec![ResourceConfig::new(GPU, 2)],
        ..MockConfig::default()
    };
    let h = MockPlugin::start(cfg).await.unwrap();
    let sock = sb.join("example-gpu.sock");
    let r = dpctl(&["bench", "list", "--socket", sock.to_str().unwrap(), "--churn", "--total", "2"]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("--churn") && r.stderr.contains("control socket"), "{}", r.stderr);
    h.stop().await.unwrap();
}

#[tokio::test]
async fn bad_input_is_refused_with_exit_2_or_3() {
    let sb = Sandbox::new();
    let (h, sock) = unregistered_mock(&sb, ResourceConfig::new(GPU, 4)).await;
    let r = dpctl(&["bench", "allocate", "--socket", &sock, "--devices-per-request", "5", "--total", "1"]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("--devices-per-request") && r.stderr.contains("4 healthy"), "{}", r.stderr);
    let r = dpctl(&["bench", "allocate", "--socket", &sock, "--fail-if", "p99>5"]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("need a unit"), "{}", r.stderr);
    let r = dpctl(&["bench", "allocate", "--socket", &sock, "--fail-if", "latency>5ms"]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("unknown metric"), "{}", r.stderr);
    let r = dpctl(&["bench", "allocate", "--socket", &sock, "--rate", "0"]).await;
    r.expect_code(2);
    let r = dpctl(&["bench", "list", "--socket", &sock, "--churn", "--rate", "10"]).await;
    r.expect_code(2);
    let missing = sb.join("nothing.sock");
    let r = dpctl(&["bench", "options", "--socket", missing.to_str().unwrap(), "--total", "1"]).await;
    r.expect_code(3);
    assert_eq!(calls(&h, "Allocate"), 0);
    h.stop().await.unwrap();
}

/// Reads HTTP/2 frames from `s` until a non-ACK SETTINGS frame and a
/// connection WINDOW_UPDATE have arrived; returns the settings and the
/// connection window (65,535 plus the update).
async fn h2_windows(s: &mut tokio::net::UnixStream) -> (Vec<(u16, u32)>, u64) {
    use tokio::io::AsyncReadExt;
    let mut settings = None;
    let mut conn_window = None;
    while settings.is_none() || conn_window.is_none() {
        let mut head = [0u8; 9];
        s.read_exact(&mut head).await.expect("a frame header");
        let len = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
        let mut payload = vec![0u8; len];
        s.read_exact(&mut payload).await.expect("a frame payload");
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        match (head[3], stream) {
            (4, 0) if head[4] & 1 == 0 => {
                settings = Some(
                    payload
                        .chunks_exact(6)
                        .map(|c| (u16::from_be_bytes([c[0], c[1]]), u32::from_be_bytes([c[2], c[3], c[4], c[5]])))
                        .collect::<Vec<_>>(),
                );
            }
            (8, 0) => {
                let inc = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & 0x7fff_ffff;
                conn_window = Some(65_535 + u64::from(inc));
            }
            _ => {}
        }
    }
    (settings.unwrap_or_default(), conn_window.unwrap_or(0))
}

/// SETTINGS_INITIAL_WINDOW_SIZE and SETTINGS_MAX_FRAME_SIZE (RFC 9113 §6.5.2).
fn window_and_frame(settings: &[(u16, u32)]) -> (Option<u32>, Option<u32>) {
    let get = |id: u16| settings.iter().rev().find(|(k, _)| *k == id).map(|(_, v)| *v);
    (get(0x4), get(0x5))
}

#[tokio::test]
async fn servers_advertise_windows_that_hold_a_kubelet_sized_message() {
    use tokio::io::AsyncWriteExt;
    let sb = Sandbox::new();
    let (h, sock) = unregistered_mock(&sb, ResourceConfig::new(GPU, 1)).await;
    let mut s = tokio::net::UnixStream::connect(&sock).await.unwrap();
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0").await.unwrap();
    let (settings, conn) = within("the mock's SETTINGS", h2_windows(&mut s)).await;
    // 2 x the kubelet's 4 MiB receive limit per stream, twice that per connection.
    assert_eq!(window_and_frame(&settings), (Some(8 << 20), Some(1 << 20)), "{settings:?}");
    assert_eq!(conn, 16 << 20);
    h.stop().await.unwrap();
}

#[tokio::test]
async fn clients_advertise_windows_that_hold_a_kubelet_sized_message() {
    let sb = Sandbox::new();
    let path = sb.join("raw.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    let mut client = crate::support::dpctl_command();
    client.args(["plugin", "call", "options", "--socket", path.to_str().unwrap(), "--connect-timeout", "5s"]);
    let mut child = Child::spawn(client, Stderr::Keep);
    let (mut s, _) = within("dpctl to connect", listener.accept()).await.unwrap();
    let mut preface = [0u8; 24];
    within("the client preface", tokio::io::AsyncReadExt::read_exact(&mut s, &mut preface)).await.unwrap();
    assert_eq!(&preface, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    let (settings, conn) = within("the client's SETTINGS", h2_windows(&mut s)).await;
    assert_eq!(window_and_frame(&settings), (Some(8 << 20), Some(1 << 20)), "{settings:?}");
    assert_eq!(conn, 16 << 20);
    child.kill().await;
}

// `--connections 300` against a dpctl server (256 connections at most, see
// the README's "What dpctl's servers accept") used to fail with exit 3
// ("could not open connection 257 of 300"): the server closed every new
// connection past its cap. Now a newcomer takes the place of the oldest idle
// connection, and the client dials an evicted one again when it uses it.
// (The error naming the cap remains for servers that refuse outright.)
#[tokio::test]
async fn connections_past_a_server_cap_take_idle_ones_places() {
    let sb = Sandbox::new();
    let (h, sock) = unregistered_mock(&sb, ResourceConfig::new(GPU, 1)).await;
    let r = dpctl(&["bench", "allocate", "--socket", &sock, "--connections", "300", "--total", "1", "--warmup", "0s"])
        .await;
    r.expect_code(0);
    // Under the cap, the same run works.
    let r = dpctl(&["bench", "allocate", "--socket", &sock, "--connections", "200", "--total", "1", "--warmup", "0s"])
        .await;
    r.expect_code(0);
    h.stop().await.unwrap();
}
