//! `-v` on the wire, as a user reads it on stderr: each gRPC call that
//! `plugin call`, `plugin watch`, `plugin check` and `smoke` make to dpctl's
//! mock plugin, with its messages, headers, trailers, status and latency;
//! stdout stays the data it is without `-v`.

use std::time::Duration;

use dpctl::mock_plugin::{ErrorSpec, FlapConfig, MockConfig, MockPlugin, ResourceConfig, Rpc, RpcFault, RpcSelector};

use crate::support::{Sandbox, dpctl, dpctl_bin, unregistered_mock};

const GPU: &str = "example.com/gpu";

/// `(left of the latency, the latency)` of a line ending in `(... 1.23ms)`.
fn latency(line: &str) -> (&str, &str) {
    let at = line.rfind(" (").unwrap_or_else(|| panic!("no latency in {line:?}"));
    let took = line[at + 2..].trim_end_matches(')');
    let took = took.rsplit(", ").next().unwrap();
    assert!(took.ends_with("ms") || took.ends_with('s'), "{line:?}");
    (&line[..at], took)
}

#[tokio::test]
async fn v_shows_a_call_on_stderr_and_leaves_stdout_as_it_was() {
    let sb = Sandbox::new();
    let (_h, sock) = unregistered_mock(&sb, ResourceConfig::new(GPU, 2)).await;
    let args = ["plugin", "call", "allocate", "--socket", sock.as_str(), "--devices", "GPU-0"];
    let plain = dpctl(&args).await;
    plain.expect_code(0);
    assert_eq!(plain.stderr, "");
    let v = dpctl(&[&args[..], &["-v"]].concat()).await;
    v.expect_code(0);
    assert_eq!(v.stdout, plain.stdout, "stdout is the same data with -v");
    let lines: Vec<&str> = v.stderr.lines().collect();
    assert_eq!(lines.len(), 4, "{}", v.stderr);
    assert_eq!(lines[0], "> #1 call /v1beta1.DevicePlugin/Allocate");
    assert_eq!(lines[1], r#"> #1 request {"container_requests":[{"devices_ids":["GPU-0"]}]}"#);
    let (response, _) = latency(lines[2]);
    assert!(response.starts_with(r#"< #1 response 1 {"container_responses":[{"annotations":{},"#), "{response}");
    assert!(response.contains(r#""envs":{"DPCTL_MOCK_DEVICES":"GPU-0"}"#), "{response}");
    assert_eq!(latency(lines[3]).0, "< #1 status OK");
    // -vv adds what was sent and received around the messages.
    let vv = dpctl(&[&args[..], &["-vv"]].concat()).await;
    assert_eq!(vv.expect_code(0).stdout, plain.stdout);
    for line in ["> #1 header te: trailers", "> #1 header content-type: application/grpc", "> #1 header grpc-timeout: "]
    {
        assert!(vv.stderr.lines().any(|l| l.starts_with(line)), "{line:?} in\n{}", vv.stderr);
    }
    for line in
        ["< #1 header :status: 200", "< #1 header content-type: application/grpc", "< #1 trailer grpc-status: 0"]
    {
        assert!(vv.stderr.lines().any(|l| l == line), "{line:?} in\n{}", vv.stderr);
    }
    assert!(!v.stderr.contains("header"), "-v alone shows no headers");
}

#[tokio::test]
async fn v_with_json_output_gives_one_json_event_per_line_on_stderr() {
    let sb = Sandbox::new();
    let (_h, sock) = unregistered_mock(&sb, ResourceConfig::new(GPU, 2)).await;
    let args = ["plugin", "call", "options", "--socket", sock.as_str(), "-o", "json"];
    let plain = dpctl(&args).await.expect_code(0).json();
    let v = dpctl(&[&args[..], &["-v"]].concat()).await;
    assert_eq!(v.expect_code(0).json(), plain, "stdout is the same JSON with -v");
    let events: Vec<serde_json::Value> =
        v.stderr.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}"))).collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["call", "request", "headers", "response", "end"]);
    assert!(events.iter().all(|e| e["call"] == 1 && e["method"] == "/v1beta1.DevicePlugin/GetDevicePluginOptions"));
    // Zero values are shown, as the proto names them.
    assert_eq!(
        events[3]["message"]["json"],
        serde_json::json!({"pre_start_required": false, "get_preferred_allocation_available": false})
    );
    assert_eq!(events[3]["message"]["bytes"], 0);
    assert_eq!((events[4]["code"].as_str(), events[4]["ended_by"].as_str()), (Some("ok"), Some("server")));
    assert!(events[4]["trailers"].as_array().unwrap().iter().any(|t| t["name"] == "grpc-status" && t["value"] == "0"));
    assert!(events[4]["elapsed_ms"].as_f64().unwrap() >= events[2]["elapsed_ms"].as_f64().unwrap());
}

#[tokio::test]
async fn v_shows_a_refused_call_with_its_status_and_the_same_exit_code() {
    let sb = Sandbox::new();
    let mut r = ResourceConfig::new(GPU, 2);
    r.faults.rpc.push(RpcFault {
        rpc: RpcSelector::One(Rpc::Allocate),
        error: Some(ErrorSpec { code: tonic::Code::ResourceExhausted, message: "no room: 100% used".into() }),
        latency: None,
        after: 0,
    });
    let (_h, sock) = unregistered_mock(&sb, r).await;
    let args = ["plugin", "call", "allocate", "--socket", sock.as_str(), "--devices", "GPU-0"];
    let plain = dpctl(&args).await;
    plain.expect_code(4);
    let vv = dpctl(&[&args[..], &["-vv"]].concat()).await;
    vv.expect_code(4);
    assert_eq!(vv.stdout, plain.stdout);
    let lines: Vec<&str> = vv.stderr.lines().collect();
    // The status came in the headers (a trailers-only response), its message percent-decoded.
    assert!(lines.contains(&"< #1 header grpc-status: 8"), "{}", vv.stderr);
    assert!(
        lines.contains(&"< #1 trailers: none (a trailers-only response: the status came in the headers)"),
        "{}",
        vv.stderr
    );
    let status = lines.iter().find(|l| l.starts_with("< #1 status")).expect("a status line");
    assert_eq!(latency(status).0, "< #1 status ResourceExhausted: no room: 100% used");
    assert!(!vv.stderr.contains("< #1 response"), "no response message: {}", vv.stderr);
    // The error itself is printed once, after the call, as without -v.
    assert_eq!(vv.stderr.matches("dpctl: error:").count(), 1);
    assert!(plain.stderr.starts_with("dpctl: error:"), "{}", plain.stderr);
}

#[tokio::test]
async fn v_shows_each_watch_message_as_it_arrives_and_who_ended_the_stream() {
    let sb = Sandbox::new();
    let mut r = ResourceConfig::new(GPU, 2);
    r.flap.push(FlapConfig { ids: vec!["GPU-1".into()], every: Duration::from_millis(200) });
    let (_h, sock) = unregistered_mock(&sb, r).await;
    let v = dpctl(&["plugin", "watch", "--socket", &sock, "--count", "2", "-o", "json", "-v"]).await;
    v.expect_code(0);
    let snapshots = v.json_lines();
    assert_eq!(snapshots.len(), 2, "stdout holds the two snapshots only: {}", v.stdout);
    let lines: Vec<&str> = v.stderr.lines().collect();
    let kinds: Vec<serde_json::Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let responses: Vec<&serde_json::Value> = kinds.iter().filter(|e| e["event"] == "response").collect();
    assert_eq!(responses.len(), 2, "{}", v.stderr);
    assert_eq!((responses[0]["seq"].as_u64(), responses[1]["seq"].as_u64()), (Some(1), Some(2)));
    // Each message on stderr is the one the snapshot on stdout shows.
    for (e, snap) in responses.iter().zip(&snapshots) {
        let health = |d: &serde_json::Value| d["health"].as_str().unwrap().to_string();
        let wire: Vec<String> = e["message"]["json"]["devices"].as_array().unwrap().iter().map(health).collect();
        let shown: Vec<String> = snap["devices"].as_array().unwrap().iter().map(health).collect();
        assert_eq!(wire, shown);
        assert_eq!(e["message"]["bytes"], snap["message_bytes"]);
    }
    let end = kinds.last().unwrap();
    assert_eq!(
        (end["event"].as_str(), end["ended_by"].as_str(), end["code"].as_str()),
        (Some("end"), Some("client"), Some("cancelled"))
    );
    assert_eq!(end["responses"], 2);
    // As text: the stream ended by the plugin, with its trailers.
    let mut r = ResourceConfig::new(GPU, 1);
    r.faults.list_and_watch_end_after = Some(1);
    r.faults.list_and_watch_end_error =
        Some(ErrorSpec { code: tonic::Code::Unavailable, message: "going away".into() });
    let sb2 = Sandbox::new();
    let (_h2, sock2) = unregistered_mock(&sb2, r).await;
    let vv = dpctl(&["plugin", "watch", "--socket", &sock2, "-vv"]).await;
    vv.expect_code(4);
    let lines: Vec<&str> = vv.stderr.lines().collect();
    let at = |prefix: &str| {
        lines.iter().position(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("{prefix:?} in\n{}", vv.stderr))
    };
    let (response, trailer, status) = (
        at("< #1 response 1 {\"devices\":[{\"ID\":\"GPU-0\""),
        at("< #1 trailer grpc-status: 14"),
        at("< #1 status Unavailable: going away ("),
    );
    assert!(response < trailer && trailer < status, "{}", vv.stderr);
    // Headers and trailers are shown as sent: grpc-message percent-encoded.
    assert!(lines.contains(&"< #1 trailer grpc-message: going%20away"), "{}", vv.stderr);
    assert!(!vv.stdout.contains("> #") && !vv.stdout.contains("< #"), "{}", vv.stdout);
}

#[tokio::test]
async fn v_shows_the_check_suites_calls_and_the_report_stays_on_stdout() {
    let sb = Sandbox::new();
    let (_h, sock) = unregistered_mock(&sb, ResourceConfig::new(GPU, 2)).await;
    let args = ["plugin", "check", "--socket", sock.as_str(), "--stream-window", "200ms", "-o", "json"];
    let v = dpctl(&[&args[..], &["-v"]].concat()).await;
    let report = v.expect_code(0).json();
    assert_eq!(report["totals"]["failed"], 0, "{}", v.stdout);
    let events: Vec<serde_json::Value> = v.stderr.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let methods: std::collections::BTreeSet<&str> =
        events.iter().filter(|e| e["event"] == "call").map(|e| e["method"].as_str().unwrap()).collect();
    let want = ["GetDevicePluginOptions", "ListAndWatch", "Allocate"].map(|m| format!("/v1beta1.DevicePlugin/{m}"));
    assert!(want.iter().all(|m| methods.contains(m.as_str())), "{methods:?}");
    // allocate-unknown-id's refused call, as sent and as answered.
    let unknown = events
        .iter()
        .find(|e| e["event"] == "request" && e["message"]["json"].to_string().contains("dpctl-check-unknown-"))
        .expect("the unknown-id Allocate");
    let end = events.iter().find(|e| e["event"] == "end" && e["call"] == unknown["call"]).unwrap();
    assert_eq!(end["code"], "invalid_argument", "{end}");
    // Every call that started ended, once.
    let count = |kind: &str| events.iter().filter(|e| e["event"] == kind).count();
    assert_eq!(count("call"), count("end"), "{}", v.stderr);
}

#[tokio::test]
async fn smoke_v_names_who_makes_each_call() {
    let r = dpctl(&[
        "smoke",
        "-v",
        "--skip",
        "kubelet-restart,plugin-restart,health-recovery,parallel-calls",
        "--stream-window",
        "200ms",
        "--",
        dpctl_bin(),
        "mock-plugin",
        "--dir",
        "{dir}",
        "--resource",
        GPU,
        "--devices",
        "2",
    ])
    .await;
    r.expect_code(0);
    // The plugin's Register comes in first (kubelet-sim serves it), with what it asked.
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert!(lines.contains(&"< #1 served /v1beta1.Registration/Register (by kubelet-sim)"), "{}", r.stderr);
    let register = lines.iter().find(|l| l.starts_with("< #1 request ")).expect("the RegisterRequest");
    assert!(
        register.contains(r#""resource_name":"example.com/gpu""#) && register.contains(r#""version":"v1beta1""#),
        "{register}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("> #1 response 1 {} (0 bytes, ")),
        "the empty answer goes out: {}",
        r.stderr
    );
    let calls: Vec<&str> = lines.iter().copied().filter(|l| l.contains(" call /")).collect();
    assert_eq!(
        calls.first().copied(),
        Some("> #2 call /v1beta1.DevicePlugin/GetDevicePluginOptions (by kubelet-sim)"),
        "{}",
        r.stderr
    );
    assert!(calls.iter().any(|l| l.ends_with("/v1beta1.DevicePlugin/ListAndWatch (by kubelet-sim)")), "{calls:?}");
    assert!(
        calls.iter().any(|l| l.ends_with("/v1beta1.DevicePlugin/Allocate (by kubelet-sim)")),
        "the test pod's admission: {calls:?}"
    );
    assert!(calls.iter().any(|l| l.ends_with("/v1beta1.DevicePlugin/Allocate (by plugin check)")), "{calls:?}");
    assert!(!r.stdout.contains(" call /"), "{}", r.stdout);
}

/// kubelet-sim -v: the calls the sim makes to a plugin that registers, and
/// the Allocate of a pod it admits, on its stderr; its events stay on stdout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_sim_v_shows_its_calls_to_the_plugin() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    let mut sim = crate::support::Child::dpctl(&["kubelet-sim", "--dir", dir, "-o", "json", "-v"]);
    sim.line_with("\"started\"").await;
    let cfg = MockConfig {
        dir: Some(sb.path().to_path_buf()),
        resources: vec![ResourceConfig::new(GPU, 2)],
        ..MockConfig::default()
    };
    let _mock = MockPlugin::start(cfg).await.expect("mock starts");
    sim.line_with("\"snapshot\"").await;
    dpctl(&["kubelet-sim", "admit", "--dir", dir, "--allocate", "example.com/gpu=1", "--name", "p"])
        .await
        .expect_code(0);
    sim.line_with("\"admitted\"").await;
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|e: &serde_json::Value| e["event"] == "end" && e["method"] == "/v1beta1.DevicePlugin/Allocate")
    {
        let line = sim.stderr_line().await.expect("stderr open");
        if let Ok(e) = serde_json::from_str::<serde_json::Value>(&line)
            && e.get("event").is_some()
        {
            seen.push(e);
        }
    }
    let calls: Vec<&str> =
        seen.iter().filter(|e| e["event"] == "call").map(|e| e["method"].as_str().unwrap()).collect();
    let mut want = vec!["/v1beta1.Registration/Register".to_string()];
    want.extend(["GetDevicePluginOptions", "ListAndWatch", "Allocate"].map(|m| format!("/v1beta1.DevicePlugin/{m}")));
    assert_eq!(calls, want, "{seen:#?}");
    assert_eq!(seen[0]["served"], true, "the sim answers Register: {}", seen[0]);
    let allocate = seen.iter().find(|e| e["event"] == "call" && e["method"] == "/v1beta1.DevicePlugin/Allocate");
    let request = seen.iter().find(|e| e["event"] == "request" && e["call"] == allocate.unwrap()["call"]).unwrap();
    let ids = &request["message"]["json"]["container_requests"][0]["devices_ids"];
    assert_eq!(ids.as_array().map(Vec::len), Some(1), "{request}");
    assert!(sim.seen.iter().all(|l| {
        serde_json::from_str::<serde_json::Value>(l).is_ok_and(|v| v.get("event").is_none() || v["event"] != "call")
    }));
}
