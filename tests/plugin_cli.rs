//! `dpctl plugin` as a user runs it, against a plugin built on the generated code.

use dpctl::proto::deviceplugin::v1beta1 as dp;

use crate::support::fake_plugin::{Behaviour, FakePlugin, device};
use crate::support::{Child, Sandbox, dpctl, dpctl_env};

async fn plugin(
    sb: &Sandbox,
    behaviour: Behaviour,
) -> (FakePlugin, std::path::PathBuf, tokio::sync::oneshot::Sender<()>) {
    let devices = vec![
        device("GPU-0", "Healthy", Some(&[0])),
        device("GPU-1", "Healthy", Some(&[0])),
        device("GPU-2", "Unhealthy", Some(&[1])),
        device("GPU-3", "Healthy", None),
    ];
    let p = FakePlugin::new(devices, behaviour);
    let path = sb.join("gpu.sock");
    let stop = p.serve(&path).await;
    (p, path, stop)
}

#[tokio::test]
async fn options_as_table_and_json() {
    let sb = Sandbox::new();
    let opts = dp::DevicePluginOptions { pre_start_required: true, get_preferred_allocation_available: false };
    let (_p, path, _stop) = plugin(&sb, Behaviour { options: opts, ..Default::default() }).await;
    let s = path.to_str().unwrap();
    let r = dpctl(&["plugin", "call", "options", "--socket", s]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("pre_start_required                   true"), "{}", r.stdout);
    assert!(r.stderr.is_empty(), "stderr: {}", r.stderr);
    let r = dpctl(&["plugin", "call", "options", "--socket", s, "-o", "json"]).await;
    let v = r.expect_code(0).json();
    assert_eq!(v["pre_start_required"], true);
    assert_eq!(v["get_preferred_allocation_available"], false, "zero values are kept");
}

#[tokio::test]
async fn dir_and_endpoint_from_flag_or_environment() {
    let sb = Sandbox::new();
    let (_p, _path, _stop) = plugin(&sb, Behaviour::default()).await;
    let dir = sb.path().to_str().unwrap();
    dpctl(&["plugin", "call", "options", "--dir", dir, "--endpoint", "gpu.sock"]).await.expect_code(0);
    dpctl_env(&["plugin", "call", "options", "--endpoint", "gpu.sock"], &[("DPCTL_DEVICE_PLUGIN_DIR", dir)])
        .await
        .expect_code(0);
    // Without a socket name, the error lists what is there.
    let r = dpctl(&["plugin", "call", "options", "--dir", dir]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("sockets in") && r.stderr.contains("gpu.sock"), "{}", r.stderr);
}

#[tokio::test]
async fn list_shows_devices_counts_and_numa_zero() {
    let sb = Sandbox::new();
    let (_p, path, _stop) = plugin(&sb, Behaviour::default()).await;
    let s = path.to_str().unwrap();
    let r = dpctl(&["plugin", "call", "list", "--socket", s]).await;
    r.expect_code(0);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), ["ID", "HEALTH", "NUMA"]);
    assert_eq!(lines[1].split_whitespace().collect::<Vec<_>>(), ["GPU-0", "Healthy", "0"]);
    assert_eq!(lines[4].split_whitespace().collect::<Vec<_>>(), ["GPU-3", "Healthy", "-"]);
    assert!(r.stdout.contains("capacity 4  allocatable 3"), "{}", r.stdout);
    let v = dpctl(&["plugin", "call", "list", "--socket", s, "-o", "json"]).await.expect_code(0).json();
    assert_eq!(v["devices"][0]["numa_nodes"], serde_json::json!([0]));
    assert_eq!(v["devices"][3]["numa_nodes"], serde_json::Value::Null);
    assert_eq!((v["capacity"].as_u64(), v["allocatable"].as_u64()), (Some(4), Some(3)));
}

#[tokio::test]
async fn allocate_sends_one_request_per_group() {
    let sb = Sandbox::new();
    let (p, path, _stop) = plugin(&sb, Behaviour::default()).await;
    let s = path.to_str().unwrap();
    let r = dpctl(&[
        "plugin",
        "call",
        "allocate",
        "--socket",
        s,
        "--devices",
        "GPU-0,GPU-1",
        "--devices",
        "GPU-3",
        "-o",
        "json",
    ])
    .await;
    let v = r.expect_code(0).json();
    let c = v["containers"].as_array().unwrap();
    assert_eq!(c.len(), 2);
    assert_eq!(c[0]["envs"]["VISIBLE_DEVICES"], "GPU-0,GPU-1");
    assert_eq!(c[1]["device_ids"], serde_json::json!(["GPU-3"]));
    assert_eq!(c[1]["cdi_devices"], serde_json::json!(["example.com/gpu=GPU-3"]));
    assert_eq!(c[0]["mounts"][0]["read_only"], true);
    assert_eq!(p.rpcs().as_slice(), ["Allocate"]);
    let r = dpctl(&["plugin", "call", "allocate", "--socket", s, "--devices", "GPU-0"]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("container 0  devices: GPU-0"), "{}", r.stdout);
    assert!(r.stdout.contains("cdi") && r.stdout.contains("example.com/gpu=GPU-0"), "{}", r.stdout);
}

#[tokio::test]
async fn allocate_error_status_is_reported() {
    let sb = Sandbox::new();
    let b = Behaviour {
        allocate_error: Some(tonic::Status::new(tonic::Code::InvalidArgument, "unknown device GPU-9")),
        ..Default::default()
    };
    let (_p, path, _stop) = plugin(&sb, b).await;
    let r = dpctl(&["plugin", "call", "allocate", "--socket", path.to_str().unwrap(), "--devices", "GPU-9"]).await;
    r.expect_code(4);
    assert!(
        r.stderr.contains("Allocate on") && r.stderr.contains("InvalidArgument: unknown device GPU-9"),
        "{}",
        r.stderr
    );
}

#[tokio::test]
async fn preferred_flags_contract_breaches() {
    let sb = Sandbox::new();
    let (_p, path, _stop) = plugin(&sb, Behaviour::default()).await;
    let s = path.to_str().unwrap();
    let ok = dpctl(&[
        "plugin",
        "call",
        "preferred",
        "--socket",
        s,
        "--available",
        "GPU-2,GPU-0,GPU-1",
        "--must-include",
        "GPU-2",
        "--size",
        "2",
        "-o",
        "json",
    ])
    .await;
    let v = ok.expect_code(0).json();
    assert_eq!(v["preferred"], serde_json::json!(["GPU-2", "GPU-0"]));
    assert_eq!(v["violations"], serde_json::json!([]));

    let sb2 = Sandbox::new();
    let bad = Behaviour { preferred: Some(vec!["GPU-7".into()]), ..Default::default() };
    let (_p2, path2, _stop2) = plugin(&sb2, bad).await;
    let r = dpctl(&[
        "plugin",
        "call",
        "preferred",
        "--socket",
        path2.to_str().unwrap(),
        "--available",
        "GPU-0,GPU-1",
        "--must-include",
        "GPU-1",
        "--size",
        "2",
    ])
    .await;
    r.expect_code(1);
    for rule in ["preferred-size", "preferred-subset-of-available", "preferred-must-include"] {
        assert!(r.stdout.contains(rule), "{rule} missing from:\n{}", r.stdout);
    }
}

#[tokio::test]
async fn prestart_answers() {
    let sb = Sandbox::new();
    let (p, path, _stop) = plugin(&sb, Behaviour::default()).await;
    let r = dpctl(&["plugin", "call", "prestart", "--socket", path.to_str().unwrap(), "--devices", "GPU-0"]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("PreStartContainer OK for GPU-0"));
    assert_eq!(p.rpcs().as_slice(), ["PreStartContainer"]);
}

#[tokio::test]
async fn watch_streams_json_lines_with_changes() {
    let sb = Sandbox::new();
    let (p, path, _stop) = plugin(&sb, Behaviour::default()).await;
    let sock = path.to_str().unwrap();
    // Killed on drop, so a failed assertion leaves no process behind.
    let mut watch = Child::dpctl(&["plugin", "watch", "--socket", sock, "--count", "2", "-o", "json"]);
    let first = watch.json().await;
    assert_eq!(first["seq"], 1);
    assert_eq!(first["allocatable"], 3);
    p.set_devices(vec![device("GPU-0", "Unhealthy", Some(&[0])), device("GPU-4", "Healthy", Some(&[1]))]);
    let second = watch.json().await;
    assert_eq!(second["seq"], 2);
    assert_eq!((second["capacity"].as_u64(), second["allocatable"].as_u64()), (Some(2), Some(1)));
    let changes = second["changes"].as_array().unwrap();
    assert!(changes.contains(
        &serde_json::json!({"change": "health_changed", "id": "GPU-0", "from": "Healthy", "to": "Unhealthy"})
    ));
    assert!(changes.contains(&serde_json::json!({"change": "added", "id": "GPU-4"})));
    assert!(changes.contains(&serde_json::json!({"change": "removed", "id": "GPU-1"})));
    assert_eq!(watch.wait().await, 0, "watch stops by itself after --count");
}

#[tokio::test]
async fn watch_reports_a_stream_the_plugin_ends() {
    let sb = Sandbox::new();
    let (_p, path, _stop) = plugin(&sb, Behaviour { end_after: Some(1), ..Default::default() }).await;
    let r = dpctl(&["plugin", "watch", "--socket", path.to_str().unwrap(), "-o", "json"]).await;
    r.expect_code(4);
    assert_eq!(r.json_lines().len(), 1);
    assert!(!r.stderr.contains("Ok:"), "no bogus status in: {}", r.stderr);
    assert!(r.stderr.contains("the plugin ended the stream"), "{}", r.stderr);
}

#[tokio::test]
async fn control_characters_in_a_plugins_device_ids_are_shown_escaped() {
    let sb = Sandbox::new();
    let devices = vec![
        device("GPU\x1b[2J-0", "Healthy", Some(&[0])),
        device("GPU-1\rFAKE-9", "Healthy", None),
        device("GPU-\u{202e}2", "Unhealthy\x1b]0;owned\x07", None),
    ];
    let p = FakePlugin::new(devices, Behaviour::default());
    let path = sb.join("gpu.sock");
    let _stop = p.serve(&path).await;
    let s = path.to_str().unwrap();
    let r = dpctl(&["plugin", "call", "list", "--socket", s]).await;
    r.expect_code(0);
    assert!(!r.stdout.contains(['\x1b', '\r', '\x07', '\u{202e}']), "raw control characters: {:?}", r.stdout);
    for shown in ["GPU\\x1b[2J-0", "GPU-1\\rFAKE-9", "GPU-\\u{202e}2", "Unhealthy\\x1b]0;owned\\x07"] {
        assert!(r.stdout.contains(shown), "{shown} not in {:?}", r.stdout);
    }
    // JSON carries the IDs as they are (its own escapes).
    let v = dpctl(&["plugin", "call", "list", "--socket", s, "-o", "json"]).await.expect_code(0).json();
    assert_eq!(v["devices"][0]["id"], "GPU\x1b[2J-0");
}
