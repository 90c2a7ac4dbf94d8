//! `dpctl mock-plugin` and the `mock_plugin` library, tested against a
//! kubelet registration server built on the generated code
//! (`support::kubelet`), and from the kubelet's side with `PluginClient`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dpctl::mock_plugin::{
    DeviceConfig, ErrorSpec, EventKind, FlapConfig, MockConfig, MockEvent, MockHandle, MockPlugin, Policy,
    ResourceConfig, Rpc, RpcFault, RpcSelector, TimelineStep,
};
use dpctl::plugin_client::PluginClient;
use dpctl::proto::deviceplugin::v1beta1 as dp;
use dpctl::transport::ClientConfig;
use futures_util::StreamExt;
use tokio::sync::broadcast;

use crate::support::kubelet::{KubeletBehaviour, Seen, TestKubelet};
use crate::support::{Child, Sandbox, dpctl, within};

const GPU: &str = "example.com/gpu";

fn config(sb: &Sandbox, resources: Vec<ResourceConfig>) -> MockConfig {
    MockConfig { dir: Some(sb.path().to_path_buf()), resources, ..MockConfig::default() }
}

/// [`config`] for a mock that does not register (tests that dial it directly).
fn unregistered(sb: &Sandbox, resources: Vec<ResourceConfig>) -> MockConfig {
    MockConfig { register: false, ..config(sb, resources) }
}

async fn start(config: MockConfig) -> (MockHandle, broadcast::Receiver<MockEvent>) {
    let plugin = MockPlugin::new(config).expect("valid config");
    let events = plugin.subscribe();
    (plugin.launch().await.expect("mock starts"), events)
}

/// A kubelet with `behaviour` and a mock serving one GPU device, its
/// resource changed by `fault`; returned once the kubelet has seen Register.
async fn registration_fault(
    sb: &Sandbox,
    behaviour: KubeletBehaviour,
    fault: impl FnOnce(&mut ResourceConfig),
) -> (TestKubelet, MockHandle, broadcast::Receiver<MockEvent>, Seen) {
    let mut kubelet = TestKubelet::start(sb.path(), behaviour).await;
    let mut r = ResourceConfig::new(GPU, 1);
    fault(&mut r);
    let (handle, events) = start(config(sb, vec![r])).await;
    let seen = kubelet.next().await;
    (kubelet, handle, events, seen)
}

/// The next event matching `pred`, skipping others.
async fn wait_for(
    events: &mut broadcast::Receiver<MockEvent>,
    what: &str,
    pred: impl Fn(&EventKind) -> bool,
) -> MockEvent {
    within(what, async {
        loop {
            match events.recv().await {
                Ok(e) if pred(&e.kind) => return e,
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("event stream ended waiting for {what}: {e}"),
            }
        }
    })
    .await
}

async fn client(path: &Path) -> PluginClient {
    PluginClient::connect(path, &ClientConfig::default()).await.expect("connect to the mock")
}

fn ids(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn rpc_fault(rpc: Rpc, error: Option<&str>, latency_ms: Option<u64>, after: u64) -> RpcFault {
    RpcFault {
        rpc: RpcSelector::One(rpc),
        error: error.map(|e| e.parse::<ErrorSpec>().unwrap()),
        latency: latency_ms.map(Duration::from_millis),
        after,
    }
}

fn rpc_code(e: &dpctl::Error) -> tonic::Code {
    match e {
        dpctl::Error::Rpc { code, .. } => *code,
        dpctl::Error::Unimplemented { .. } => tonic::Code::Unimplemented,
        other => panic!("not an RPC error: {other}"),
    }
}

#[tokio::test]
async fn serves_then_registers_with_what_the_kubelet_needs() {
    let sb = Sandbox::new();
    let mut kubelet = TestKubelet::start(sb.path(), KubeletBehaviour::default()).await;
    let mut r = ResourceConfig::new(GPU, 4);
    r.numa_nodes = 2;
    r.pre_start_required = true;
    let (handle, mut events) = start(config(&sb, vec![r])).await;
    let seen = kubelet.next().await;
    assert_eq!(seen.rejected, None);
    assert_eq!(seen.request.version, "v1beta1");
    assert_eq!(seen.request.endpoint, "example-gpu.sock", "a file name relative to the directory");
    assert_eq!(seen.request.resource_name, GPU);
    let opts = dp::DevicePluginOptions { pre_start_required: true, get_preferred_allocation_available: false };
    assert_eq!(seen.request.options, Some(opts));
    assert!(seen.socket_existed, "the socket is served before Register");
    assert_eq!(seen.options, Some(opts), "the kubelet's dial-back got the same options");
    let ev = wait_for(&mut events, "registered", |k| matches!(k, EventKind::Registered { .. })).await;
    assert_eq!(ev.resource, GPU);
    // The kubelet's view of the devices, NUMA 0 included.
    let snap = client(&sb.join("example-gpu.sock")).await.list_once(Duration::from_secs(5)).await.unwrap();
    let got: Vec<(String, Option<Vec<i64>>)> = snap.devices.into_iter().map(|d| (d.id, d.numa_nodes)).collect();
    assert_eq!(
        got,
        [
            ("GPU-0".into(), Some(vec![0])),
            ("GPU-1".into(), Some(vec![0])),
            ("GPU-2".into(), Some(vec![1])),
            ("GPU-3".into(), Some(vec![1]))
        ]
    );
    assert!(handle.status()[0].registered);
    handle.stop().await.unwrap();
    assert!(!sb.join("example-gpu.sock").exists(), "stop removes the plugin socket");
    assert!(!dpctl::paths::control_socket(sb.path(), GPU).exists(), "and the control socket");
}

#[tokio::test]
async fn several_resources_one_socket_each() {
    let sb = Sandbox::new();
    let mut kubelet = TestKubelet::start(sb.path(), KubeletBehaviour::default()).await;
    let mut nic = ResourceConfig::new("example.com/nic", 2);
    nic.endpoint = Some("nic.sock".into());
    let (handle, _events) = start(config(&sb, vec![ResourceConfig::new(GPU, 1), nic])).await;
    let mut seen = [kubelet.next().await.request, kubelet.next().await.request];
    seen.sort_by(|a, b| a.endpoint.cmp(&b.endpoint));
    assert_eq!((seen[0].endpoint.as_str(), seen[0].resource_name.as_str()), ("example-gpu.sock", GPU));
    assert_eq!((seen[1].endpoint.as_str(), seen[1].resource_name.as_str()), ("nic.sock", "example.com/nic"));
    let nic_devices = client(&sb.join("nic.sock")).await.list_once(Duration::from_secs(5)).await.unwrap().devices;
    assert_eq!(nic_devices.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(), ["NIC-0", "NIC-1"]);
    handle.stop().await.unwrap();
}

#[tokio::test]
async fn retries_while_kubelet_sock_is_missing() {
    let sb = Sandbox::new();
    let (handle, mut events) = start(config(&sb, vec![ResourceConfig::new(GPU, 2)])).await;
    let retry = wait_for(&mut events, "a retry", |k| matches!(k, EventKind::RegisterRetry { .. })).await;
    let EventKind::RegisterRetry { error, retry_in_ms, .. } = retry.kind else { unreachable!() };
    assert!(error.contains("no socket at"), "{error}");
    assert!(retry_in_ms > 0);
    // A refusing kubelet.sock (stale file, nobody listening) is retried too.
    drop(std::os::unix::net::UnixListener::bind(sb.join("kubelet.sock")).unwrap());
    wait_for(
        &mut events,
        "a refused retry",
        |k| matches!(k, EventKind::RegisterRetry { error, .. } if error.contains("connection refused")),
    )
    .await;
    std::fs::remove_file(sb.join("kubelet.sock")).unwrap();
    // The kubelet appears: registration follows at once, not after the backoff.
    let mut kubelet = TestKubelet::start(sb.path(), KubeletBehaviour::default()).await;
    let up = Instant::now();
    let seen = kubelet.next().await;
    assert!(seen.at - up < Duration::from_secs(1), "registered {:?} after kubelet.sock appeared", seen.at - up);
    wait_for(&mut events, "registered", |k| matches!(k, EventKind::Registered { attempts, .. } if *attempts > 1)).await;
    handle.stop().await.unwrap();
}

#[tokio::test]
async fn reregisters_within_a_second_after_a_kubelet_restart() {
    let sb = Sandbox::new();
    let mut kubelet = TestKubelet::start(sb.path(), KubeletBehaviour::default()).await;
    let (handle, mut events) = start(config(&sb, vec![ResourceConfig::new(GPU, 2)])).await;
    kubelet.next().await;
    let socket = sb.join("example-gpu.sock");
    for round in 2..=3 {
        let restarted = kubelet.restart().await;
        let seen = kubelet.next().await;
        let took = seen.at.duration_since(restarted);
        assert!(took < Duration::from_secs(1), "re-registration {round} took {took:?}");
        assert_eq!(seen.rejected, None, "the kubelet could dial the new socket back");
        assert!(seen.socket_existed, "served again before registering again");
        let ev = wait_for(
            &mut events,
            "re-registered",
            |k| matches!(k, EventKind::Registered { registration, .. } if *registration == round),
        )
        .await;
        let EventKind::Registered { reason, took_ms, .. } = ev.kind else { unreachable!() };
        assert!(reason.contains("socket deleted") || reason.contains("kubelet.sock"), "{reason}");
        assert!(took_ms < 1000.0, "{took_ms}");
        eprintln!("re-registration {round}: {took:?} from kubelet.sock to Register ({reason})");
    }
    let snap = client(&socket).await.list_once(Duration::from_secs(5)).await.unwrap();
    assert_eq!(snap.devices.len(), 2);
    handle.stop().await.unwrap();
}

// A kubelet that restarts without deleting the plugin sockets re-creates
// kubelet.sock, and ext4 gives the new socket the inode just freed: the mock
// watched for a new inode and missed 6 restarts in 10. Every restart in a
// row must bring a Register. (Every kubelet release 1.26-1.37 listens on a
// fresh kubelet.sock when it starts, pkg/kubelet/cm/devicemanager/plugin/
// v1beta1/server.go Start; a real one also deletes the plugin sockets, which
// `kubelet-sim` restarted without --force does not.)
#[tokio::test]
async fn reregisters_after_every_restart_that_reuses_kubelet_socks_inode() {
    use std::os::unix::fs::MetadataExt;
    let sb = Sandbox::new();
    let mut kubelet = TestKubelet::start(sb.path(), KubeletBehaviour::default()).await;
    let (handle, mut events) = start(config(&sb, vec![ResourceConfig::new(GPU, 2)])).await;
    kubelet.next().await;
    let mut reused = 0;
    for round in 2..=11u32 {
        let before = std::fs::metadata(kubelet.socket()).unwrap().ino();
        let restarted = kubelet.restart_keeping_plugin_sockets().await;
        reused += usize::from(std::fs::metadata(kubelet.socket()).unwrap().ino() == before);
        let seen = kubelet.next().await;
        assert_eq!(seen.rejected, None);
        let ev = wait_for(
            &mut events,
            "re-registered",
            |k| matches!(k, EventKind::Registered { registration, .. } if *registration == round),
        )
        .await;
        let EventKind::Registered { reason, .. } = ev.kind else { unreachable!() };
        assert!(reason.contains("kubelet.sock"), "{reason}");
        eprintln!("restart {round}: Register after {:?} ({reason})", seen.at.duration_since(restarted));
    }
    eprintln!("kubelet.sock's inode was reused in {reused} of 10 restarts");
    // No extra Register: exactly one per kubelet.
    assert!(kubelet.next_within(Duration::from_millis(700)).await.is_none(), "a Register no restart asked for");
    handle.stop().await.unwrap();
}

#[tokio::test]
async fn stop_does_not_wait_for_a_hanging_register() {
    let sb = Sandbox::new();
    let behaviour = KubeletBehaviour { delay: Some(Duration::from_secs(30)), ..Default::default() };
    let mut kubelet = TestKubelet::start(sb.path(), behaviour).await;
    let (handle, _events) = start(config(&sb, vec![ResourceConfig::new(GPU, 1)])).await;
    kubelet.arrived().await;
    let t = Instant::now();
    within("stop", handle.stop()).await.unwrap();
    assert!(t.elapsed() < Duration::from_secs(2), "stop took {:?}", t.elapsed());
    assert!(!sb.join("example-gpu.sock").exists());
}

#[tokio::test]
async fn no_reregister_fault_ignores_a_kubelet_restart() {
    let sb = Sandbox::new();
    let (mut kubelet, handle, mut events, _) =
        registration_fault(&sb, KubeletBehaviour::default(), |r| r.faults.no_reregister = true).await;
    kubelet.restart().await;
    wait_for(&mut events, "the restart to be ignored", |k| matches!(k, EventKind::KubeletRestartIgnored { .. })).await;
    assert!(kubelet.next_within(Duration::from_millis(300)).await.is_none(), "no Register after the restart");
    assert!(!sb.join("example-gpu.sock").exists(), "and no socket served again");
    handle.stop().await.unwrap();
}

#[tokio::test]
async fn rejection_is_fatal_and_carries_the_kubelets_message() {
    let sb = Sandbox::new();
    let fault = |r: &mut ResourceConfig| r.faults.register_resource_name = Some("gpu".into());
    let (_kubelet, mut handle, _events, seen) = registration_fault(&sb, KubeletBehaviour::default(), fault).await;
    assert_eq!(seen.request.resource_name, "gpu");
    let err = within("the failure", handle.failure()).await;
    assert_eq!(err.exit_code(), dpctl::error::exit::RPC);
    assert!(err.to_string().contains(r#"the ResourceName "gpu" is invalid"#), "{err}");
    handle.stop().await.unwrap();
    assert!(!sb.join("example-gpu.sock").exists());
}

#[tokio::test]
async fn register_before_serving_fault_fails_the_kubelets_dial_back() {
    let sb = Sandbox::new();
    let behaviour = KubeletBehaviour { dial_timeout: Duration::from_millis(300), ..Default::default() };
    let (_kubelet, mut handle, _events, seen) =
        registration_fault(&sb, behaviour, |r| r.faults.register_before_serving = true).await;
    assert!(!seen.socket_existed, "Register arrived before the socket existed");
    assert!(seen.rejected.as_deref().unwrap().starts_with("failed to dial device plugin"), "{seen:?}");
    let err = within("the failure", handle.failure()).await;
    assert!(err.to_string().contains("failed to dial device plugin"), "{err}");
    handle.stop().await.unwrap();
}

#[tokio::test]
async fn options_mismatch_fault_differs_from_get_device_plugin_options() {
    let sb = Sandbox::new();
    let fault = |r: &mut ResourceConfig| {
        r.get_preferred_allocation_available = true;
        r.faults.register_options_mismatch = true;
    };
    let (_kubelet, handle, _events, seen) = registration_fault(&sb, KubeletBehaviour::default(), fault).await;
    let sent = seen.request.options.unwrap();
    let asked = seen.options.unwrap();
    assert!(!sent.get_preferred_allocation_available && sent.pre_start_required);
    assert!(asked.get_preferred_allocation_available && !asked.pre_start_required);
    handle.stop().await.unwrap();
}

#[tokio::test]
async fn allocate_fills_templates_and_refuses_unknown_and_unhealthy_ids() {
    let sb = Sandbox::new();
    let mut cfg = MockConfig::load(Path::new("examples/gpu.toml")).unwrap();
    cfg.dir = Some(sb.path().to_path_buf());
    cfg.register = false;
    let (handle, _events) = start(cfg).await;
    let c = client(&sb.join("example-gpu.sock")).await;
    let resp = c.allocate(&[ids(&["GPU-0", "GPU-2"]), ids(&["GPU-1"])]).await.unwrap();
    assert_eq!(resp.container_responses.len(), 2, "one answer per container");
    let a = &resp.container_responses[0];
    assert_eq!(a.envs["EXAMPLE_VISIBLE_DEVICES"], "GPU-0,GPU-2");
    assert_eq!((a.envs["EXAMPLE_DEVICE_0"].as_str(), a.envs["EXAMPLE_DEVICE_1"].as_str()), ("GPU-0", "GPU-2"));
    assert_eq!(a.annotations["example.com/allocated"], "2");
    let nodes: Vec<&str> = a.devices.iter().map(|d| d.container_path.as_str()).collect();
    assert_eq!(nodes, ["/dev/example-GPU-0", "/dev/example-GPU-2"]);
    assert_eq!(a.devices[0].permissions, "rw");
    assert_eq!(a.mounts.len(), 1);
    assert!(a.mounts[0].read_only);
    let cdi: Vec<&str> = a.cdi_devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(cdi, ["example.com/gpu=GPU-0", "example.com/gpu=GPU-2"]);
    assert_eq!(resp.container_responses[1].envs["EXAMPLE_VISIBLE_DEVICES"], "GPU-1");

    let e = c.allocate(&[ids(&["GPU-9"])]).await.unwrap_err();
    assert_eq!(rpc_code(&e), tonic::Code::InvalidArgument);
    assert!(e.to_string().contains(r#"unknown device "GPU-9""#), "{e}");
    let e = c.allocate(&[ids(&["GPU-3"])]).await.unwrap_err();
    assert_eq!(rpc_code(&e), tonic::Code::InvalidArgument, "GPU-3 is unhealthy and refuse_unhealthy is set");
    assert!(e.to_string().contains("Unhealthy"), "{e}");
    handle.stop().await.unwrap();
}

#[tokio::test]
async fn preferred_allocation_uses_the_policy_and_numa() {
    let sb = Sandbox::new();
    let mut r = ResourceConfig::new(GPU, 6);
    r.numa_nodes = 2;
    r.preferred_policy = Policy::Pack;
    let cfg = unregistered(&sb, vec![r]);
    let (handle, _events) = start(cfg).await;
    let c = client(&sb.join("example-gpu.sock")).await;
    let req = dp::ContainerPreferredAllocationRequest {
        available_device_i_ds: ids(&["GPU-0", "GPU-3", "GPU-4", "GPU-1", "GPU-5"]),
        must_include_device_i_ds: ids(&["GPU-4"]),
        allocation_size: 3,
    };
    let resp = c.preferred(vec![req]).await.unwrap();
    assert_eq!(resp.container_responses[0].device_i_ds, ids(&["GPU-4", "GPU-3", "GPU-5"]), "packed on node 1");
    handle.stop().await.unwrap();
}

#[tokio::test]
async fn rpc_faults_error_latency_and_fail_after() {
    let sb = Sandbox::new();
    let mut r = ResourceConfig::new(GPU, 2);
    r.faults.rpc = vec![
        rpc_fault(Rpc::Allocate, Some("unavailable: driver gone"), None, 2),
        rpc_fault(Rpc::PreStartContainer, None, Some(300), 0),
        rpc_fault(Rpc::GetDevicePluginOptions, Some("internal"), None, 0),
    ];
    let cfg = unregistered(&sb, vec![r]);
    let (handle, _events) = start(cfg).await;
    let c = client(&sb.join("example-gpu.sock")).await;
    for _ in 0..2 {
        c.allocate(&[ids(&["GPU-0"])]).await.expect("the first two calls work");
    }
    let e = c.allocate(&[ids(&["GPU-0"])]).await.unwrap_err();
    assert_eq!(rpc_code(&e), tonic::Code::Unavailable);
    assert!(e.to_string().contains("driver gone"), "{e}");
    let t = Instant::now();
    c.pre_start(ids(&["GPU-0"])).await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(300), "{:?}", t.elapsed());
    let e = c.options().await.unwrap_err();
    assert_eq!(rpc_code(&e), tonic::Code::Internal);
    assert!(e.to_string().contains("injected by dpctl mock-plugin"), "{e}");
    let calls = &handle.status()[0].calls;
    assert_eq!((calls["Allocate"], calls["PreStartContainer"]), (3, 1));
    handle.stop().await.unwrap();
}

#[tokio::test]
async fn list_and_watch_faults_end_the_stream_or_exceed_4mib() {
    let sb = Sandbox::new();
    let mut ends_ok = ResourceConfig::new(GPU, 2);
    ends_ok.faults.list_and_watch_end_after = Some(2);
    let mut ends_err = ResourceConfig::new("example.com/err", 1);
    ends_err.faults.list_and_watch_end_after = Some(1);
    ends_err.faults.list_and_watch_end_error = Some("internal: monitor crashed".parse().unwrap());
    let mut big = ResourceConfig::new("example.com/big", 1);
    big.faults.list_and_watch_oversize = true;
    let mut fails = ResourceConfig::new("example.com/fail", 1);
    fails.faults.rpc = vec![rpc_fault(Rpc::ListAndWatch, Some("unavailable"), None, 0)];
    let cfg = unregistered(&sb, vec![ends_ok, ends_err, big, fails]);
    let (handle, _events) = start(cfg).await;

    let mut s = Box::pin(client(&sb.join("example-gpu.sock")).await.list_and_watch().await.unwrap());
    within("message 1", s.next()).await.unwrap().unwrap();
    handle.set_health(GPU, &ids(&["GPU-1"]), "Unhealthy").unwrap();
    let second = within("message 2", s.next()).await.unwrap().unwrap();
    assert_eq!(second.devices[1].health, "Unhealthy");
    assert!(within("the end", s.next()).await.is_none(), "the stream ends with OK after 2 messages");

    let mut s = Box::pin(client(&sb.join("example-err.sock")).await.list_and_watch().await.unwrap());
    within("message 1", s.next()).await.unwrap().unwrap();
    let e = within("the error", s.next()).await.unwrap().unwrap_err();
    assert_eq!(rpc_code(&e), tonic::Code::Internal);
    assert!(e.to_string().contains("monitor crashed"), "{e}");

    let e = client(&sb.join("example-big.sock")).await.list_once(Duration::from_secs(5)).await.unwrap_err();
    assert!(matches!(e, dpctl::Error::MessageTooLarge { size: Some(n), .. } if n > 4 * 1024 * 1024), "{e}");

    let e = client(&sb.join("example-fail.sock")).await.list_once(Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(rpc_code(&e), tonic::Code::Unavailable);
    handle.stop().await.unwrap();
}

#[tokio::test]
async fn timeline_and_flap_reach_the_stream() {
    let sb = Sandbox::new();
    let mut r = ResourceConfig::new(GPU, 2);
    r.flap = vec![FlapConfig { ids: ids(&["GPU-0"]), every: Duration::from_millis(40) }];
    r.timeline = vec![TimelineStep {
        at: Duration::from_millis(100),
        add: vec![DeviceConfig { id: "GPU-9".into(), health: "Healthy".into(), numa: Some(vec![0]) }],
        ..Default::default()
    }];
    let cfg = unregistered(&sb, vec![r]);
    let (handle, _events) = start(cfg).await;
    let mut s = Box::pin(client(&sb.join("example-gpu.sock")).await.list_and_watch().await.unwrap());
    let mut healths = Vec::new();
    let mut saw_added = false;
    while healths.len() < 6 || !saw_added {
        let snap = within("a flap", s.next()).await.unwrap().unwrap();
        healths.push(snap.devices[0].health.clone());
        saw_added |= snap.devices.iter().any(|d| d.id == "GPU-9" && d.numa_nodes == Some(vec![0]));
    }
    assert_eq!(healths[0], "Healthy");
    assert!(healths.windows(2).filter(|w| w[0] != w[1]).count() >= 4, "GPU-0 keeps toggling: {healths:?}");
    handle.stop().await.unwrap();
}

#[tokio::test]
async fn record_file_has_every_rpc() {
    let sb = Sandbox::new();
    let record = sb.join("calls.jsonl");
    let mut cfg = unregistered(&sb, vec![ResourceConfig::new(GPU, 2)]);
    cfg.record = Some(record.clone());
    cfg.rpc_events = false;
    let (handle, mut events) = start(cfg).await;
    let c = client(&sb.join("example-gpu.sock")).await;
    c.options().await.unwrap();
    c.allocate(&[ids(&["GPU-1"])]).await.unwrap();
    c.allocate(&[ids(&["nope"])]).await.unwrap_err();
    c.list_once(Duration::from_secs(5)).await.unwrap();
    // Flushed per line: readable while the mock still runs.
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    handle.stop().await.unwrap();
    while let Ok(e) = events.try_recv() {
        assert!(!matches!(e.kind, EventKind::Rpc(_)), "rpc_events off: RPCs go to the record only");
    }
    let rpcs: Vec<&str> = lines.iter().map(|l| l["rpc"].as_str().unwrap()).collect();
    assert_eq!(rpcs, ["GetDevicePluginOptions", "Allocate", "Allocate", "ListAndWatch"]);
    for l in &lines {
        assert!(l["time"].as_str().unwrap().ends_with('Z'));
        assert_eq!(l["resource"], GPU);
        assert!(l["latency_ms"].as_f64().unwrap() >= 0.0);
    }
    assert_eq!(lines[1]["request"]["container_requests"][0]["device_ids"], serde_json::json!(["GPU-1"]));
    assert_eq!(lines[1]["response"]["container_responses"][0]["envs"]["DPCTL_MOCK_DEVICES"], "GPU-1");
    assert!(lines[1]["error"].is_null());
    assert_eq!(lines[2]["error"]["code"], "invalid_argument");
    assert!(lines[2]["response"].is_null());
    assert_eq!(lines[3]["seq"], 1);
    assert_eq!(lines[3]["response"]["devices"][1]["id"], "GPU-1");
}

#[tokio::test]
async fn plugin_watcher_registration_is_served() {
    use dpctl::proto::pluginregistration as reg;
    use dpctl::proto::pluginregistration::registration_client::RegistrationClient;
    let sb = Sandbox::new();
    let registry = sb.join("registry");
    let mut cfg = unregistered(&sb, vec![ResourceConfig::new(GPU, 1)]);
    cfg.registry_dir = Some(registry.clone());
    let (handle, mut events) = start(cfg).await;
    let channel = dpctl::transport::connect(&registry.join("example-gpu.sock"), Duration::from_secs(5)).await.unwrap();
    let mut c = RegistrationClient::new(channel);
    let info = c.get_info(reg::InfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.r#type, "DevicePlugin");
    assert_eq!(info.name, GPU);
    assert_eq!(PathBuf::from(&info.endpoint), sb.join("example-gpu.sock"));
    assert_eq!(info.supported_versions, ["v1beta1"]);
    c.notify_registration_status(reg::RegistrationStatus { plugin_registered: false, error: "nope".into() })
        .await
        .unwrap();
    let ev = wait_for(&mut events, "the status", |k| matches!(k, EventKind::RegistrationStatus { .. })).await;
    assert!(
        matches!(ev.kind, EventKind::RegistrationStatus { plugin_registered: false, ref error } if error == "nope")
    );
    handle.stop().await.unwrap();
    assert!(!registry.join("example-gpu.sock").exists());
}

#[tokio::test]
async fn nothing_starts_half_configured() {
    let sb = Sandbox::new();
    // The second resource's socket path is taken by a regular file.
    std::fs::write(sb.join("nic.sock"), b"not a socket").unwrap();
    let mut nic = ResourceConfig::new("example.com/nic", 1);
    nic.endpoint = Some("nic.sock".into());
    let err = MockPlugin::start(config(&sb, vec![ResourceConfig::new(GPU, 1), nic])).await.unwrap_err();
    assert!(err.to_string().contains("refusing to replace"), "{err}");
    assert!(!sb.join("example-gpu.sock").exists(), "the first socket was removed again");
    assert!(!dpctl::paths::control_socket(sb.path(), GPU).exists());
    // Config problems are found before anything is bound.
    let mut dup = ResourceConfig::new(GPU, 0);
    dup.count = None;
    dup.devices = vec![DeviceConfig::new("a"), DeviceConfig::new("a")];
    let err = MockPlugin::new(config(&sb, vec![dup])).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"mock plugin config: resource[0].device[1].id: duplicate device ID "a" (also resource[0].device[0])"#
    );
}

#[tokio::test]
async fn examples_load_and_check() {
    let mut n = 0;
    for entry in std::fs::read_dir("examples").unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            MockConfig::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            n += 1;
        }
    }
    assert!(n >= 3, "examples/ has the example configs");
}

// ---- the command line ----

#[tokio::test]
async fn config_errors_name_file_key_and_problem() {
    let sb = Sandbox::new();
    let cases = [
        (
            "[[resource]]\nname = \"example.com/gpu\"\ncount = 1\ncolour = \"red\"\n",
            "resource[0].colour",
            "unknown field `colour`",
        ),
        (
            "[[resource]]\nname = \"example.com/gpu\"\ncount = 1\n[[resource.flap]]\nids = [\"GPU-0\"]\nevery = \"fast\"\n",
            "resource[0].flap[0].every",
            "invalid duration \"fast\"",
        ),
        (
            "[[resource]]\nname = \"example.com/gpu\"\n[[resource.device]]\nid = \"X\"\n[[resource.device]]\nid = \"X\"\n",
            "resource[0].device[1].id",
            "duplicate device ID \"X\"",
        ),
        ("[[resource]]\nname = \"gpu\"\ncount = 1\n", "resource[0].name", "no domain prefix"),
        (
            "[[resource]]\nname = \"example.com/gpu\"\ncount = 1\n[[resource.faults.rpc]]\nrpc = \"Allocate\"\nerror = \"oops\"\n",
            "resource[0].faults.rpc[0].error",
            "unknown gRPC code \"oops\"",
        ),
    ];
    for (i, (text, key, problem)) in cases.iter().enumerate() {
        let file = sb.join(&format!("bad{i}.toml"));
        std::fs::write(&file, text).unwrap();
        let r = dpctl(&["mock-plugin", "--config", file.to_str().unwrap(), "--dir", sb.path().to_str().unwrap()]).await;
        r.expect_code(2);
        let want = format!("{}: {key}: ", file.display());
        assert!(
            r.stderr.contains(&want) && r.stderr.contains(problem),
            "case {i}: want {want}..{problem} in:\n{}",
            r.stderr
        );
    }
    assert!(!sb.join("example-gpu.sock").exists(), "nothing was started");
}

#[tokio::test]
async fn cli_rejection_shows_the_kubelets_message_and_exits_4() {
    let sb = Sandbox::new();
    let _kubelet = TestKubelet::start(sb.path(), KubeletBehaviour::default()).await;
    let dir = sb.path().to_str().unwrap();
    let r = dpctl(&["mock-plugin", "--dir", dir, "--resource", GPU, "--devices", "2", "--register-version", "v1alpha"])
        .await;
    r.expect_code(4);
    assert!(
        r.stderr.contains(
            r#"requested API version "v1alpha" is not supported by kubelet. Supported version is ["v1beta1"]"#
        ),
        "{}",
        r.stderr
    );
    assert!(r.stdout.contains("rejected"), "the rejection is an event too:\n{}", r.stdout);
    assert!(!sb.join("example-gpu.sock").exists(), "sockets removed on the way out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_health_from_another_process_reaches_list_and_watch() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    let mut mock = Child::dpctl(&[
        "mock-plugin",
        "--dir",
        dir,
        "--resource",
        GPU,
        "--devices",
        "4",
        "--no-register",
        "-o",
        "json",
    ]);
    let serving = mock.event("serving").await;
    assert_eq!(serving["socket"], sb.join("example-gpu.sock").to_str().unwrap());
    let c = client(&sb.join("example-gpu.sock")).await;
    let mut s = Box::pin(c.list_and_watch().await.unwrap());
    let first = within("first list", s.next()).await.unwrap().unwrap();
    assert!(first.devices.iter().all(|d| d.health == "Healthy"));

    let r = dpctl(&["mock-plugin", "set-health", "--dir", dir, GPU, "GPU-1,GPU-2", "unhealthy"]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("GPU-1") && r.stdout.contains("Healthy -> Unhealthy"), "{}", r.stdout);
    assert!(r.stdout.contains("capacity 4  allocatable 2"), "{}", r.stdout);
    let next = within("the change", s.next()).await.unwrap().unwrap();
    let health: Vec<&str> = next.devices.iter().map(|d| d.health.as_str()).collect();
    assert_eq!(health, ["Healthy", "Unhealthy", "Unhealthy", "Healthy"]);
    let ev = mock.event("devices_changed").await;
    assert_eq!((ev["cause"].as_str(), ev["allocatable"].as_u64()), (Some("control"), Some(2)));

    dpctl(&["mock-plugin", "add-device", "--dir", dir, GPU, "GPU-7", "--numa", "0"]).await.expect_code(0);
    let next = within("the new device", s.next()).await.unwrap().unwrap();
    assert_eq!(next.devices.last().map(|d| (d.id.as_str(), d.numa_nodes.clone())), Some(("GPU-7", Some(vec![0]))));
    dpctl(&["mock-plugin", "remove-device", "--dir", dir, GPU, "GPU-0"]).await.expect_code(0);
    assert_eq!(within("the removal", s.next()).await.unwrap().unwrap().devices.len(), 4);

    let status = dpctl(&["mock-plugin", "status", "--dir", dir, GPU, "-o", "json"]).await.expect_code(0).json();
    assert_eq!((status["capacity"].as_u64(), status["allocatable"].as_u64()), (Some(4), Some(2)));
    assert_eq!(status["open_streams"], 1);
    assert_eq!(status["registered"], false);

    let r = dpctl(&["mock-plugin", "set-health", "--dir", dir, GPU, "GPU-42", "unhealthy"]).await;
    r.expect_code(2);
    assert!(r.stderr.contains(r#"no device "GPU-42""#), "{}", r.stderr);
    // Nothing serves it there: a socket problem, exit 3, as for every command.
    let r = dpctl(&["mock-plugin", "status", "--dir", dir, "example.com/other"]).await;
    r.expect_code(3);
    assert!(r.stderr.contains("no mock plugin serves example.com/other"), "{}", r.stderr);
    // The only mock running there: no resource needed (as kubectl's default context).
    let only = dpctl(&["mock-plugin", "status", "--dir", dir, "-o", "json"]).await.expect_code(0).json();
    assert_eq!(only["resource"], GPU, "{only:#}");
    mock.kill().await;
    let r = dpctl(&["mock-plugin", "status", "--dir", dir]).await;
    r.expect_code(3);
    assert!(r.stderr.contains("no mock plugin runs in"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_removes_sockets_flushes_the_record_and_exits_0() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    let record = sb.join("calls.jsonl");
    // No kubelet: it keeps retrying (and says so on stderr) while serving.
    let mut mock = Child::dpctl(&[
        "mock-plugin",
        "--dir",
        dir,
        "--resource",
        GPU,
        "--record",
        record.to_str().unwrap(),
        "-o",
        "json",
    ]);
    mock.event("serving").await;
    client(&sb.join("example-gpu.sock")).await.allocate(&[ids(&["GPU-0"])]).await.unwrap();
    let rpc = mock.event("rpc").await;
    assert_eq!(rpc["rpc"], "Allocate");
    mock.terminate();
    let (code, stderr) = mock.finish().await;
    assert_eq!(code, 0, "SIGTERM is a clean stop");
    assert!(stderr.contains("cannot register with") && stderr.contains("retrying"), "{stderr}");
    assert!(!sb.join("example-gpu.sock").exists(), "plugin socket removed");
    assert!(!dpctl::paths::control_socket(sb.path(), GPU).exists(), "control socket removed");
    let text = std::fs::read_to_string(&record).unwrap();
    assert!(text.lines().any(|l| l.contains("\"rpc\":\"Allocate\"")), "{text}");
}

#[tokio::test]
async fn a_kubelet_that_goes_away_during_register_is_retried_not_taken_for_a_rejection() {
    let sb = Sandbox::new();
    // This kubelet sits on Register; it is stopped while the call is in flight.
    let slow = KubeletBehaviour { delay: Some(Duration::from_secs(30)), ..Default::default() };
    let mut gone = TestKubelet::start(sb.path(), slow).await;
    let (mut handle, _events) = start(config(&sb, vec![ResourceConfig::new(GPU, 2)])).await;
    within("the first Register", gone.arrived()).await;
    gone.stop().await;
    // A new kubelet comes up: the plugin registers with it.
    let mut kubelet = TestKubelet::start(sb.path(), KubeletBehaviour::default()).await;
    let seen = within("registration with the new kubelet", kubelet.next()).await;
    assert_eq!(seen.rejected, None);
    assert_eq!(seen.request.resource_name, GPU);
    let failed = tokio::time::timeout(Duration::from_millis(200), handle.failure()).await;
    assert!(failed.is_err(), "the plugin must keep running: {failed:?}");
    handle.stop().await.unwrap();
}

/// `--record` never follows a symbolic link (a dangling one used to exit 0
/// and create its target; one to a file emptied it) and never empties a
/// file dpctl did not write: exit 2, naming it, the target untouched.
#[tokio::test]
async fn record_refuses_links_and_files_it_did_not_write() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    let precious = sb.join("precious.txt");
    std::fs::write(&precious, "keep me\n").unwrap();
    std::os::unix::fs::symlink(&precious, sb.join("to-file")).unwrap();
    std::os::unix::fs::symlink(sb.join("nowhere.jsonl"), sb.join("dangling")).unwrap();
    let cases = [
        ("to-file", "a symbolic link"),
        ("dangling", "a symbolic link"),
        ("precious.txt", "is not a record dpctl wrote"),
    ];
    for (name, says) in cases {
        let path = sb.join(name);
        let r = dpctl(&[
            "mock-plugin",
            "--dir",
            dir,
            "--resource",
            GPU,
            "--no-register",
            "--record",
            path.to_str().unwrap(),
        ])
        .await;
        r.expect_code(2);
        assert!(r.stderr.contains(says) && r.stderr.contains(name), "{name}: {}", r.stderr);
    }
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me\n");
    assert!(!sb.join("nowhere.jsonl").exists(), "the dangling link's target is not created");
    // A record dpctl wrote before is replaced.
    let old = sb.join("old.jsonl");
    std::fs::write(
        &old,
        "{\"time\":\"2026-11-26T00:00:00.000Z\",\"resource\":\"example.com/gpu\",\"event\":\"rpc\"}\n",
    )
    .unwrap();
    let mut mock = Child::dpctl(&[
        "mock-plugin",
        "--dir",
        dir,
        "--resource",
        GPU,
        "--no-register",
        "-o",
        "json",
        "--record",
        old.to_str().unwrap(),
    ]);
    mock.event("serving").await;
    assert_eq!(std::fs::read_to_string(&old).unwrap(), "", "the old record is replaced");
    mock.terminate();
    assert_eq!(mock.wait().await, 0);
}

// A kubelet starting deletes the plugin sockets, then creates kubelet.sock;
// the mock serves again on its socket's deletion and registers with the new
// kubelet.sock at once, before the directory's events about kubelet.sock
// reach it. Those late events must not bring a second Register: 1.37+
// refuse one on a live (name, socket) with `device plugin already
// connected` (pkg/kubelet/cm/devicemanager/manager.go PluginConnected), and
// the mock used to take that as fatal and stop. Five SIGKILLed sims, each
// replaced by a new one on the same directory (`--force`, as a kubelet).
#[tokio::test]
async fn registers_once_per_kubelet_sock_creation_when_its_events_arrive_late_1_37() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap().to_string();
    let sim_args = |force: bool| {
        let mut a = vec!["kubelet-sim", "--dir", &dir, "-o", "json", "--no-podresources", "--kubelet-version", "1.37"];
        if force {
            a.push("--force");
        }
        a
    };
    let mut sim = Child::dpctl(&sim_args(false));
    sim.event("started").await;
    let mut mock = Child::dpctl(&["mock-plugin", "--dir", &dir, "--resource", GPU, "--devices", "2", "-o", "json"]);
    sim.event("snapshot").await;
    for round in 1..=5 {
        sim.kill().await;
        sim = Child::dpctl(&sim_args(true));
        sim.event("started").await;
        sim.event("snapshot").await;
        // Time for a late second Register to arrive and be refused.
        let more = tokio::time::timeout(Duration::from_millis(700), async {
            loop {
                match sim.line().await {
                    Some(l) if l.contains("registration_rejected") || l.contains("\"registered\"") => return l,
                    Some(_) => {}
                    None => std::future::pending::<()>().await,
                }
            }
        })
        .await;
        assert!(more.is_err(), "round {round}: a second Register for one kubelet.sock: {}", more.unwrap());
        assert!(mock.running(), "round {round}: the mock stopped: {}", mock.stderr());
    }
    let admit = dpctl(&["kubelet-sim", "admit", "--dir", &dir, "--name", "p", "--allocate", &format!("{GPU}=1")]).await;
    assert_eq!(admit.code, 0, "{}{}", admit.stdout, admit.stderr);
    sim.stop().await;
    mock.stop().await;
}
