//! `dpctl podresources` as a user runs it, against dpctl's PodResources
//! server answering from fixtures (swapped through the fixture handle to
//! drive `watch`), including a v1alpha1-only kubelet, a tight rate limit and
//! answers over the receive limit.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use dpctl::podresources::fixture::{Fixture, FixtureHandle, FixtureProvider};
use dpctl::podresources::server::{PodResourcesService, Provider, RATE_LIMIT_MESSAGE, ServedApis, ServerConfig};
use dpctl::proto::podresources::v1;
use dpctl::proto::podresources::v1::pod_resources_lister_server::PodResourcesListerServer;
use dpctl::transport::{self, BindOptions};
use serde_json::{Value, json};

use crate::support::{Child, Run, Sandbox, dpctl, dpctl_env, within};

/// A node: a sidecar listed before the main container (as the kubelet does),
/// NUMA node 0, CPUs that compress to ranges, memory and hugepages, a DRA
/// claim, a device without topology, and a pod without resources.
const NODE: &str = r#"{
  "pod_resources": [
    {"name": "train-0", "namespace": "gpu-jobs", "containers": [
      {"name": "log-shipper", "sidecar": true},
      {"name": "trainer",
       "devices": [
         {"resource_name": "nvidia.com/gpu", "device_ids": ["GPU-1"], "numa_nodes": [1]},
         {"resource_name": "nvidia.com/gpu", "device_ids": ["GPU-0"], "numa_nodes": [0]},
         {"resource_name": "example.com/nic", "device_ids": ["nic-7"]}
       ],
       "cpu_ids": [8, 3, 2, 1, 0],
       "memory": [
         {"memory_type": "memory", "size": 2147483648, "numa_nodes": [0]},
         {"memory_type": "hugepages-1Gi", "size": 4294967296, "numa_nodes": [0]}
       ],
       "dynamic_resources": [
         {"claim_name": "big-gpu", "claim_namespace": "gpu-jobs", "claim_resources": [
           {"cdi_devices": ["vendor.com/gpu=gpu-5"], "driver_name": "gpu.vendor.com", "pool_name": "node-a",
            "device_name": "gpu-5", "share_id": "s-1"}]}
       ]}
    ]},
    {"name": "web", "namespace": "default", "containers": [{"name": "nginx"}]},
    {"name": "infer", "namespace": "ml", "containers": [
      {"name": "server", "devices": [{"resource_name": "nvidia.com/gpu", "device_ids": ["GPU-2"], "numa_nodes": [1]}]}
    ]}
  ],
  "allocatable": {
    "devices": [
      {"resource_name": "nvidia.com/gpu", "device_ids": ["GPU-0"], "numa_nodes": [0]},
      {"resource_name": "nvidia.com/gpu", "device_ids": ["GPU-3"], "numa_nodes": [0]},
      {"resource_name": "nvidia.com/gpu", "device_ids": ["GPU-1"], "numa_nodes": [1]},
      {"resource_name": "nvidia.com/gpu", "device_ids": ["GPU-2"], "numa_nodes": [1]},
      {"resource_name": "example.com/nic", "device_ids": ["nic-7"]},
      {"resource_name": "example.com/nic", "device_ids": ["nic-8"]}
    ],
    "cpu_ids": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    "memory": [
      {"memory_type": "memory", "size": 17179869184, "numa_nodes": [0]},
      {"memory_type": "hugepages-1Gi", "size": 8589934592, "numa_nodes": [0]}
    ]
  }
}"#;

fn node() -> Fixture {
    Fixture::from_json(NODE, "NODE").expect("test fixture parses")
}

/// A PodResources server on a socket in the sandbox.
struct Kubelet {
    socket: PathBuf,
    handle: FixtureHandle,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Kubelet {
    fn sock(&self) -> &str {
        self.socket.to_str().unwrap()
    }
}

async fn kubelet_with(sb: &Sandbox, fixture: Fixture, config: ServerConfig, apis: ServedApis) -> Kubelet {
    let provider = FixtureProvider::new(fixture);
    let handle = provider.handle();
    let service = PodResourcesService::new(Arc::new(provider), config);
    let socket = sb.join("pr.sock");
    let listener = transport::bind(&socket, &BindOptions::default()).await.expect("bind");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(transport::serve(service.router_for(apis), listener, async {
        let _ = rx.await;
    }));
    Kubelet { socket, handle, _stop: tx }
}

async fn kubelet(sb: &Sandbox, fixture: Fixture) -> Kubelet {
    kubelet_with(sb, fixture, ServerConfig::default(), ServedApis::default()).await
}

fn cells(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

#[tokio::test]
async fn list_table_has_a_row_per_container_and_resource() {
    let sb = Sandbox::new();
    let k = kubelet(&sb, node()).await;
    let r = dpctl(&["podresources", "list", "--socket", k.sock()]).await;
    r.expect_code(0);
    assert!(r.stderr.is_empty(), "stderr: {}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(cells(lines[0]), ["NAMESPACE", "POD", "CONTAINER", "RESOURCE", "AMOUNT", "IDS", "NUMA"]);
    // The sidecar comes first, as the kubelet sent it.
    assert_eq!(cells(lines[1]), ["gpu-jobs", "train-0", "log-shipper", "-", "-", "-", "-"]);
    // Both NUMA entries of one resource merge into one row; node 0 is shown.
    assert_eq!(cells(lines[2]), ["gpu-jobs", "train-0", "trainer", "nvidia.com/gpu", "2", "GPU-0,GPU-1", "0-1"]);
    assert_eq!(cells(lines[3]), ["gpu-jobs", "train-0", "trainer", "example.com/nic", "1", "nic-7", "-"]);
    assert_eq!(cells(lines[4]), ["gpu-jobs", "train-0", "trainer", "cpu", "5", "0-3,8", "-"]);
    assert_eq!(cells(lines[5]), ["gpu-jobs", "train-0", "trainer", "memory", "2Gi", "-", "0"]);
    assert_eq!(cells(lines[6]), ["gpu-jobs", "train-0", "trainer", "hugepages-1Gi", "4Gi", "-", "0"]);
    assert_eq!(
        cells(lines[7]),
        ["gpu-jobs", "train-0", "trainer", "claim", "big-gpu", "1", "gpu.vendor.com/node-a/gpu-5", "-"]
    );
    assert_eq!(cells(lines[8]), ["default", "web", "nginx", "-", "-", "-", "-"]);
    assert_eq!(cells(lines[9]), ["ml", "infer", "server", "nvidia.com/gpu", "1", "GPU-2", "1"]);
    // DRA claims with their driver, pool, device and CDI devices.
    let claims = lines.iter().position(|l| l.starts_with("NAMESPACE") && l.contains("CLAIM")).expect("claims table");
    assert_eq!(
        cells(lines[claims]),
        ["NAMESPACE", "POD", "CONTAINER", "CLAIM", "DRIVER", "POOL", "DEVICE", "CDI", "DEVICES"]
    );
    assert_eq!(
        cells(lines[claims + 1]),
        ["gpu-jobs", "train-0", "trainer", "big-gpu", "gpu.vendor.com", "node-a", "gpu-5", "vendor.com/gpu=gpu-5"]
    );

    let wide = dpctl(&["podresources", "list", "--socket", k.sock(), "-o", "wide"]).await;
    wide.expect_code(0);
    assert!(wide.stdout.contains("0:GPU-0 1:GPU-1"), "{}", wide.stdout);
    assert!(wide.stdout.contains("SHARE ID") && wide.stdout.contains("s-1"), "{}", wide.stdout);
}

#[tokio::test]
async fn list_json_keeps_zero_values_and_the_kubelets_order() {
    let sb = Sandbox::new();
    let k = kubelet(&sb, node()).await;
    let v = dpctl(&["podresources", "list", "--socket", k.sock(), "-o", "json"]).await.expect_code(0).json();
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["api_version"], "v1");
    let pod = &v["pod_resources"][0];
    assert_eq!((pod["namespace"].as_str(), pod["name"].as_str()), (Some("gpu-jobs"), Some("train-0")));
    assert_eq!(pod["containers"][0]["name"], "log-shipper");
    assert_eq!(pod["containers"][0]["devices"], json!([]), "empty lists are kept");
    let c = &pod["containers"][1];
    // Entries as the kubelet sent them (not merged), NUMA node 0 present.
    assert_eq!(c["devices"][0], json!({"resource_name": "nvidia.com/gpu", "device_ids": ["GPU-1"], "numa_nodes": [1]}));
    assert_eq!(c["devices"][1]["numa_nodes"], json!([0]));
    assert_eq!(c["devices"][2]["numa_nodes"], Value::Null, "no topology is null, not node 0");
    assert_eq!(c["cpu_ids"], json!([8, 3, 2, 1, 0]), "CPU IDs as sent");
    assert_eq!(c["memory"][0], json!({"memory_type": "memory", "size": 2147483648u64, "numa_nodes": [0]}));
    let claim = &c["dynamic_resources"][0];
    assert_eq!(claim["claim_name"], "big-gpu");
    assert_eq!(
        claim["claim_resources"][0],
        json!({"cdi_devices": ["vendor.com/gpu=gpu-5"], "driver_name": "gpu.vendor.com", "pool_name": "node-a",
               "device_name": "gpu-5", "share_id": "s-1"})
    );
    assert_eq!(pod["cpu_ids"], json!([]));
}

#[tokio::test]
async fn filters_by_namespace_and_resource_and_socket_from_environment() {
    let sb = Sandbox::new();
    let k = kubelet(&sb, node()).await;
    let env = [("DPCTL_PODRESOURCES_SOCKET", k.sock())];
    let v = dpctl_env(&["podresources", "list", "-n", "ml", "-o", "json"], &env).await.expect_code(0).json();
    let names: Vec<&str> = v["pod_resources"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["infer"]);

    let r = dpctl_env(&["podresources", "list", "--resource", "nvidia.com/gpu"], &env).await;
    r.expect_code(0);
    let rows: Vec<Vec<&str>> = r.stdout.lines().skip(1).map(cells).collect();
    assert_eq!(rows.len(), 2, "{}", r.stdout);
    assert!(rows.iter().all(|row| row[3] == "nvidia.com/gpu"), "{}", r.stdout);
    assert!(!r.stdout.contains("CLAIM"), "other resources are dropped: {}", r.stdout);

    let r = dpctl_env(&["podresources", "list", "--resource", "cpu", "-o", "json"], &env).await;
    let v = r.expect_code(0).json();
    assert_eq!(v["pod_resources"].as_array().unwrap().len(), 1);
    assert_eq!(v["pod_resources"][0]["containers"][0]["cpu_ids"], json!([8, 3, 2, 1, 0]));

    let r = dpctl_env(&["podresources", "list", "-n", "nowhere"], &env).await;
    r.expect_code(0);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    assert!(r.stderr.contains("no pods in namespace nowhere"), "{}", r.stderr);
}

/// A node where a DRA driver serves devices (KEP-5004: from 1.36 even pods
/// that ask for an extended resource): PodResources names them by driver, so
/// a filter by resource name tells of them rather than showing nothing, on
/// stderr in every format; stdout and its JSON are unchanged.
#[tokio::test]
async fn a_filter_by_resource_name_tells_of_dra_devices_it_cannot_show() {
    let sb = Sandbox::new();
    let k = kubelet(&sb, node()).await;
    let env = [("DPCTL_PODRESOURCES_SOCKET", k.sock())];
    for format in ["table", "json"] {
        let r = dpctl_env(&["podresources", "list", "--resource", "nvidia.com/gpu", "-o", format], &env).await;
        r.expect_code(0);
        assert!(
            r.stderr.contains(
                "note: 1 container holds DRA devices (driver gpu.vendor.com) that --resource nvidia.com/gpu cannot show"
            ) && r.stderr.contains("see them with --resource gpu.vendor.com"),
            "{format}: {}",
            r.stderr
        );
        assert!(!r.stdout.contains("gpu.vendor.com"), "{format}: {}", r.stdout);
    }
    let r = dpctl_env(&["podresources", "list", "--resource", "gpu.vendor.com"], &env).await;
    r.expect_code(0);
    assert!(r.stdout.contains("gpu.vendor.com") && !r.stderr.contains("DRA devices"), "{}\n{}", r.stdout, r.stderr);
    let r = dpctl_env(&["podresources", "list", "--resource", "nvidia.com/gpu", "-n", "ml"], &env).await;
    assert!(!r.expect_code(0).stderr.contains("DRA devices"), "no claim in ml: {}", r.stderr);
}

#[tokio::test]
async fn an_empty_node_says_so() {
    let sb = Sandbox::new();
    let k = kubelet(&sb, Fixture::default()).await;
    let r = dpctl(&["podresources", "list", "--socket", k.sock()]).await;
    r.expect_code(0);
    assert!(r.stdout.is_empty());
    assert!(r.stderr.contains("no pods on this node"), "{}", r.stderr);
    let v = dpctl(&["podresources", "list", "--socket", k.sock(), "-o", "json"]).await.expect_code(0).json();
    assert_eq!(v["pod_resources"], json!([]));
    let r = dpctl(&["podresources", "allocatable", "--socket", k.sock()]).await;
    r.expect_code(0);
    assert!(r.stderr.contains("nothing allocatable"), "{}", r.stderr);
}

#[tokio::test]
async fn get_found_unknown_and_disabled() {
    let sb = Sandbox::new();
    let k = kubelet(&sb, node()).await;
    let r = dpctl(&["podresources", "get", "train-0", "-n", "gpu-jobs", "--socket", k.sock()]).await;
    r.expect_code(0);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(cells(lines[1])[..3], ["gpu-jobs", "train-0", "log-shipper"]);
    assert!(r.stdout.contains("0-3,8"), "{}", r.stdout);
    let v = dpctl(&["podresources", "get", "web", "--socket", k.sock(), "-o", "json"]).await.expect_code(0).json();
    assert_eq!(v["pod_resources"]["name"], "web", "namespace defaults to default");
    assert_eq!(v["pod_resources"]["containers"][0]["name"], "nginx");

    let r = dpctl(&["podresources", "get", "train-9", "-n", "gpu-jobs", "--socket", k.sock()]).await;
    r.expect_code(4);
    assert!(r.stderr.contains("pod train-9 in namespace gpu-jobs not found"), "{}", r.stderr);
    assert!(r.stderr.contains("list -n gpu-jobs"), "{}", r.stderr);

    let sb2 = Sandbox::new();
    let off =
        kubelet_with(&sb2, node(), ServerConfig { get_enabled: false, ..Default::default() }, ServedApis::default())
            .await;
    let r = dpctl(&["podresources", "get", "train-0", "-n", "gpu-jobs", "--socket", off.sock()]).await;
    r.expect_code(4);
    assert!(r.stderr.contains("PodResources API Get method disabled"), "{}", r.stderr);
    assert!(r.stderr.contains("KubeletPodResourcesGet") && r.stderr.contains("list -n"), "{}", r.stderr);
}

#[tokio::test]
async fn allocatable_per_resource_and_numa() {
    let sb = Sandbox::new();
    let k = kubelet(&sb, node()).await;
    let r = dpctl(&["podresources", "allocatable", "--socket", k.sock()]).await;
    r.expect_code(0);
    let rows: Vec<Vec<&str>> = r.stdout.lines().map(cells).collect();
    assert_eq!(rows[0], ["RESOURCE", "NUMA", "AMOUNT", "IDS"]);
    assert!(rows.contains(&vec!["nvidia.com/gpu", "0", "2", "GPU-0,GPU-3"]), "{}", r.stdout);
    assert!(rows.contains(&vec!["nvidia.com/gpu", "1", "2", "GPU-1,GPU-2"]), "{}", r.stdout);
    assert!(rows.contains(&vec!["example.com/nic", "-", "2", "nic-7,nic-8"]), "{}", r.stdout);
    assert!(rows.contains(&vec!["cpu", "-", "10", "0-9"]), "{}", r.stdout);
    assert!(rows.contains(&vec!["memory", "0", "16Gi", "-"]), "{}", r.stdout);
    assert!(rows.contains(&vec!["hugepages-1Gi", "0", "8Gi", "-"]), "{}", r.stdout);
    let v = dpctl(&["podresources", "allocatable", "--socket", k.sock(), "-o", "json"]).await.expect_code(0).json();
    assert_eq!(v["devices"][0]["numa_nodes"], json!([0]));
    assert_eq!(v["devices"][4]["numa_nodes"], Value::Null);
    assert_eq!(v["cpu_ids"].as_array().unwrap().len(), 10);
}

#[tokio::test]
async fn free_per_resource_and_numa_node_with_cpus() {
    let sb = Sandbox::new();
    let k = kubelet(&sb, node()).await;
    let r = dpctl(&["podresources", "free", "--socket", k.sock()]).await;
    r.expect_code(0);
    let rows: Vec<Vec<&str>> = r.stdout.lines().map(cells).collect();
    assert_eq!(rows[0], ["RESOURCE", "NUMA", "ALLOCATABLE", "IN", "USE", "FREE", "FREE", "IDS"]);
    assert!(rows.contains(&vec!["nvidia.com/gpu", "0", "2", "1", "1", "GPU-3"]), "{}", r.stdout);
    assert!(rows.contains(&vec!["nvidia.com/gpu", "1", "2", "2", "0", "-"]), "{}", r.stdout);
    assert!(rows.contains(&vec!["example.com/nic", "-", "2", "1", "1", "nic-8"]), "{}", r.stdout);
    assert!(rows.contains(&vec!["cpu", "-", "10", "5", "5", "4-7,9"]), "{}", r.stdout);
    assert!(rows.contains(&vec!["memory", "0", "16Gi", "2Gi", "14Gi", "-"]), "{}", r.stdout);
    assert!(rows.contains(&vec!["hugepages-1Gi", "0", "8Gi", "4Gi", "4Gi", "-"]), "{}", r.stdout);

    // A device held that is no longer allocatable (it turned unhealthy).
    k.handle.update(|f| f.allocatable.devices.retain(|d| d.device_ids != ["GPU-2"]));
    let v = dpctl(&["podresources", "free", "--socket", k.sock(), "-o", "json"]).await.expect_code(0).json();
    let gpu1 = v["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["resource_name"] == "nvidia.com/gpu" && d["numa_nodes"] == json!([1]))
        .unwrap();
    assert_eq!(
        (gpu1["allocatable"].as_u64(), gpu1["in_use"].as_u64(), gpu1["free"].as_u64()),
        (Some(1), Some(1), Some(0))
    );
    assert_eq!(v["cpus"]["free_ids"], json!([4, 5, 6, 7, 9]));
    assert_eq!(
        v["held_not_allocatable"],
        json!([{"resource_name": "nvidia.com/gpu", "device_id": "GPU-2",
        "namespace": "ml", "pod": "infer", "container": "server"}])
    );
    let r = dpctl(&["podresources", "free", "--socket", k.sock()]).await;
    assert!(r.stdout.contains("In use but not allocatable"), "{}", r.stdout);

    let r = dpctl(&["podresources", "free", "--socket", k.sock(), "--resource", "cpu"]).await;
    r.expect_code(0);
    assert_eq!(r.stdout.lines().count(), 2, "{}", r.stdout);
}

/// A running `dpctl podresources watch -o json --interval INTERVAL EXTRA...`.
fn watch(socket: &str, interval: &str, extra: &[&str]) -> Child {
    let args = ["podresources", "watch", "--socket", socket, "-o", "json", "--interval", interval];
    Child::dpctl(&[&args[..], extra].concat())
}

fn pod(name: &str, ids: &[&str]) -> v1::PodResources {
    v1::PodResources {
        name: name.into(),
        namespace: "ns".into(),
        containers: vec![v1::ContainerResources {
            name: "c".into(),
            devices: ids
                .iter()
                .map(|id| v1::ContainerDevices {
                    resource_name: "x.io/gpu".into(),
                    device_ids: vec![id.to_string()],
                    topology: Some(v1::TopologyInfo { nodes: vec![v1::NumaNode { id: 0 }] }),
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_reports_pods_that_appear_change_and_go_away() {
    let sb = Sandbox::new();
    let k = kubelet(&sb, Fixture { pods: vec![pod("a", &["g0"])], ..Default::default() }).await;
    let mut w = watch(k.sock(), "20ms", &["--count", "4"]);
    let e = w.json().await;
    assert_eq!((e["event"].as_str(), e["pod"].as_str(), e["poll"].as_u64()), (Some("present"), Some("a"), Some(1)));
    assert_eq!(e["changes"][0]["after"], json!({"devices": [{"numa_nodes": [0], "device_ids": ["g0"]}]}));

    k.handle.update(|f| f.pods.push(pod("b", &["g1"])));
    let e = w.json().await;
    assert_eq!(
        (e["event"].as_str(), e["namespace"].as_str(), e["pod"].as_str()),
        (Some("added"), Some("ns"), Some("b"))
    );

    // Reordered IDs are not a change; a new device is.
    k.handle.update(|f| f.pods[0] = pod("a", &["g2", "g0"]));
    let e = w.json().await;
    assert_eq!((e["event"].as_str(), e["pod"].as_str()), (Some("changed"), Some("a")));
    let ch = &e["changes"][0];
    assert_eq!(
        (ch["change"].as_str(), ch["container"].as_str(), ch["resource"].as_str()),
        (Some("changed"), Some("c"), Some("x.io/gpu"))
    );
    assert_eq!(ch["before"]["devices"][0]["device_ids"], json!(["g0"]));
    assert_eq!(ch["after"]["devices"][0]["device_ids"], json!(["g0", "g2"]));

    k.handle.update(|f| f.pods.retain(|p| p.name != "b"));
    let e = w.json().await;
    assert_eq!((e["event"].as_str(), e["pod"].as_str()), (Some("removed"), Some("b")));
    assert_eq!(e["changes"][0]["before"]["devices"][0]["device_ids"], json!(["g1"]));
    let (code, err) = w.finish().await;
    assert_eq!(code, 0, "stderr: {err}");
}

/// A provider that counts List calls, so a test knows a poll has happened.
struct Counting {
    inner: FixtureProvider,
    lists: tokio::sync::watch::Sender<u64>,
}

impl Provider for Counting {
    fn list(&self) -> Vec<v1::PodResources> {
        let pods = self.inner.list();
        self.lists.send_modify(|n| *n += 1);
        pods
    }
    fn allocatable(&self) -> v1::AllocatableResourcesResponse {
        self.inner.allocatable()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_table_marks_changes_and_can_skip_the_initial_state() {
    let sb = Sandbox::new();
    let inner = FixtureProvider::new(Fixture { pods: vec![pod("a", &["g0"])], ..Default::default() });
    let handle = inner.handle();
    let (lists, mut seen) = tokio::sync::watch::channel(0u64);
    let service = PodResourcesService::new(Arc::new(Counting { inner, lists }), ServerConfig::default());
    let socket = sb.join("pr.sock");
    let listener = transport::bind(&socket, &BindOptions::default()).await.unwrap();
    let (_stop, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(transport::serve(service.router(), listener, async {
        let _ = rx.await;
    }));
    let mut child = Child::dpctl(&[
        "podresources",
        "watch",
        "--socket",
        socket.to_str().unwrap(),
        "--interval",
        "20ms",
        "--count",
        "2",
        "--no-initial",
    ]);
    within("the first poll", seen.wait_for(|n| *n >= 1)).await.unwrap();
    handle.update(|f| f.pods[0] = pod("a", &["g1"]));
    let head = child.line().await.expect("an event line");
    assert!(head.contains("changed") && head.ends_with("ns/a"), "the initial state is skipped: {head}");
    let detail = child.line().await.expect("a detail line");
    assert_eq!(cells(&detail), ["~", "c", "x.io/gpu", "g0", "(NUMA", "0)", "->", "g1", "(NUMA", "0)"]);
    handle.update(|f| f.pods.clear());
    let head = child.line().await.expect("an event line");
    assert!(head.contains("removed"), "{head}");
    let detail = child.line().await.expect("a detail line");
    assert_eq!(cells(&detail), ["-", "c", "x.io/gpu", "g1", "(NUMA", "0)"]);
    assert_eq!(child.wait().await, 0);
}

#[tokio::test]
async fn watch_stops_at_timeout() {
    // A timeout generous enough for the first poll on a loaded machine (the
    // run waits for it whole); many polls of an unchanged node print only
    // the initial state.
    let sb = Sandbox::new();
    let k = kubelet(&sb, Fixture { pods: vec![pod("a", &["g0"])], ..Default::default() }).await;
    let r =
        dpctl(&["podresources", "watch", "--socket", k.sock(), "-o", "json", "--interval", "50ms", "--timeout", "2s"])
            .await;
    r.expect_code(0);
    assert_eq!(r.json_lines().len(), 1, "only the initial state: {}", r.stdout);
}

#[tokio::test]
async fn falls_back_to_v1alpha1_on_an_old_kubelet() {
    let sb = Sandbox::new();
    let old = ServedApis { v1: false, v1alpha1: true };
    let k = kubelet_with(&sb, node(), ServerConfig::default(), old).await;
    let r = dpctl(&["podresources", "list", "--socket", k.sock(), "-o", "json"]).await;
    let v = r.expect_code(0).json();
    assert_eq!(v["api_version"], "v1alpha1");
    // docs/protocol.md §2.2: v1alpha1 lists regular containers only, so the
    // fixture's sidecar (log-shipper) is not there.
    let names: Vec<&str> =
        v["pod_resources"][0]["containers"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["trainer"], "{v:#}");
    let c = &v["pod_resources"][0]["containers"][0];
    assert_eq!(c["devices"][1]["device_ids"], json!(["GPU-0"]));
    assert_eq!(c["devices"][1]["numa_nodes"], Value::Null, "v1alpha1 has no topology");
    assert_eq!(c["cpu_ids"], json!([]));
    assert!(r.stderr.contains("does not serve PodResources v1") && r.stderr.contains("v1alpha1"), "{}", r.stderr);

    let r = dpctl(&["podresources", "list", "--socket", k.sock()]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("GPU-0,GPU-1"), "{}", r.stdout);

    // Forcing v1 shows the error, explained.
    let r = dpctl(&["podresources", "list", "--socket", k.sock(), "--api", "v1"]).await;
    r.expect_code(4);
    assert!(r.stderr.contains("v1.PodResourcesLister/List") && r.stderr.contains("not implemented"), "{}", r.stderr);
    assert!(r.stderr.contains("before 1.20 have only v1alpha1"), "{}", r.stderr);
    let r = dpctl(&["podresources", "get", "web", "--socket", k.sock()]).await;
    r.expect_code(4);
    assert!(r.stderr.contains("no v1 Get") && r.stderr.contains("falls back to v1alpha1"), "{}", r.stderr);
    let r = dpctl(&["podresources", "free", "--socket", k.sock()]).await;
    r.expect_code(4);
    assert!(r.stderr.contains("GetAllocatableResources"), "{}", r.stderr);

    // And on a current kubelet, v1alpha1 can be asked for.
    let sb2 = Sandbox::new();
    let k2 = kubelet(&sb2, node()).await;
    let v = dpctl(&["podresources", "list", "--socket", k2.sock(), "--api", "v1alpha1", "-o", "json"])
        .await
        .expect_code(0)
        .json();
    assert_eq!(v["api_version"], "v1alpha1");
    let r = dpctl(&["podresources", "allocatable", "--socket", k2.sock(), "--api", "v1alpha1"]).await;
    r.expect_code(2);
}

#[tokio::test]
async fn a_socket_that_serves_no_podresources_is_explained() {
    let sb = Sandbox::new();
    let k = kubelet_with(&sb, node(), ServerConfig::default(), ServedApis { v1: false, v1alpha1: false }).await;
    let r = dpctl(&["podresources", "list", "--socket", k.sock()]).await;
    r.expect_code(4);
    assert!(r.stderr.contains("neither PodResources v1 nor v1alpha1"), "{}", r.stderr);
    let r = dpctl(&["podresources", "list", "--socket", sb.join("none.sock").to_str().unwrap()]).await;
    r.expect_code(3);
}

/// A kubelet whose calls `reject` picks (numbered from 1) are answered like
/// the kubelet's rate limit and the others passed on (no other limit), so a
/// test of backing off does not depend on how fast this machine is.
async fn rejecting_kubelet(sb: &Sandbox, fixture: Fixture, reject: fn(u32) -> bool) -> Kubelet {
    let provider = FixtureProvider::new(fixture);
    let handle = provider.handle();
    let inner = PodResourcesService::new(Arc::new(provider), ServerConfig { rate_limit: None, ..Default::default() });
    // Every RPC passes through one interceptor that counts it and may reject it.
    let calls = Arc::new(AtomicU32::new(0));
    let admit = move |req: tonic::Request<()>| {
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        if reject(n) { Err(tonic::Status::resource_exhausted(RATE_LIMIT_MESSAGE)) } else { Ok(req) }
    };
    let socket = sb.join("pr.sock");
    let listener = transport::bind(&socket, &BindOptions::default()).await.expect("bind");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let router =
        tonic::transport::Server::builder().add_service(PodResourcesListerServer::with_interceptor(inner, admit));
    tokio::spawn(transport::serve(router, listener, async {
        let _ = rx.await;
    }));
    Kubelet { socket, handle, _stop: tx }
}

#[tokio::test]
async fn one_shot_commands_back_off_when_rate_limited() {
    // free asks GetAllocatableResources (call 1), then List: calls 2 and 3 are
    // rejected, the second retry (call 4) passes.
    let sb = Sandbox::new();
    let k = rejecting_kubelet(&sb, node(), |n| n == 2 || n == 3).await;
    let r = dpctl(&["podresources", "free", "--socket", k.sock()]).await;
    r.expect_code(0);
    assert!(r.stderr.contains("rate-limited 2 calls") && r.stderr.contains("retried"), "{}", r.stderr);
    assert!(r.stdout.contains("GPU-3"), "{}", r.stdout);

    // A kubelet that stays rate-limited: the error explains the limit.
    let sb2 = Sandbox::new();
    let config = ServerConfig { rate_limit: Some((0.01, 1)), ..Default::default() };
    let k2 = kubelet_with(&sb2, node(), config, ServedApis::default()).await;
    let r = dpctl(&["podresources", "free", "--socket", k2.sock()]).await;
    r.expect_code(4);
    assert!(r.stderr.contains("ResourceExhausted") && r.stderr.contains("rejected by rate limit"), "{}", r.stderr);
    assert!(r.stderr.contains("burst 10") && r.stderr.contains("another client"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_backs_off_when_rate_limited_and_carries_on() {
    // The second poll is rate-limited, whatever the timing.
    let sb = Sandbox::new();
    let k = rejecting_kubelet(&sb, Fixture { pods: vec![pod("a", &["g0"])], ..Default::default() }, |n| n == 2).await;
    let mut w = watch(k.sock(), "10ms", &["--count", "2"]);
    assert_eq!(w.json().await["event"], "present");
    k.handle.update(|f| f.pods.push(pod("b", &["g1"])));
    assert_eq!(w.json().await["event"], "added");
    let (code, err) = w.finish().await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("rate-limited the poll") && err.contains("backing off"), "{err}");
}

#[tokio::test]
async fn receive_limit_is_16_mib_by_default_and_settable() {
    // About 5 MiB: over grpc-go's and tonic's 4 MiB default, under 16 MiB.
    let ids: Vec<String> = (0..50_000).map(|i| format!("{i:0>96}")).collect();
    let big = v1::PodResources {
        name: "big".into(),
        namespace: "ns".into(),
        containers: vec![v1::ContainerResources {
            name: "c".into(),
            devices: vec![v1::ContainerDevices { resource_name: "x.io/v".into(), device_ids: ids, topology: None }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let sb = Sandbox::new();
    let k = kubelet(&sb, Fixture { pods: vec![big], ..Default::default() }).await;
    let r = dpctl(&["podresources", "list", "--socket", k.sock()]).await;
    r.expect_code(0);
    assert!(
        r.stdout.contains("50000") && r.stdout.contains("(+49992 more)"),
        "{}",
        &r.stdout[..r.stdout.len().min(500)]
    );
    let r = dpctl(&["podresources", "list", "--socket", k.sock(), "--max-recv-bytes", "4194304"]).await;
    r.expect_code(4);
    assert!(r.stderr.contains("over the receive limit of 4194304 bytes"), "{}", r.stderr);
    assert!(r.stderr.contains("--max-recv-bytes"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_from_a_file_and_reloads_it() {
    let sb = Sandbox::new();
    let data = sb.join("node.json");
    // The protobuf JSON mapping loads as well (topology.nodes[].ID, strings for int64).
    std::fs::write(
        &data,
        r#"{"_comment": "x", "pod_resources": [{"name": "p0", "namespace": "default", "containers": [
            {"name": "c", "devices": [{"resource_name": "x.io/gpu", "device_ids": ["d0"],
                                        "topology": {"nodes": [{"ID": 0}]}}]}]}],
            "allocatable": {"cpu_ids": ["0", "1"]}}"#,
    )
    .unwrap();
    let socket = sb.join("k.sock");
    let s = socket.to_str().unwrap();
    let mut child = Child::dpctl(&[
        "podresources",
        "serve",
        "--socket",
        s,
        "--data",
        data.to_str().unwrap(),
        "--disable-get",
        "-o",
        "json",
    ]);
    let banner = child.json().await;
    assert_eq!(banner["event"], "serving");
    assert_eq!((banner["pods"].as_u64(), banner["get_enabled"].as_bool()), (Some(1), Some(false)));
    assert_eq!(banner["apis"], json!(["v1", "v1alpha1"]));

    let v = dpctl(&["podresources", "list", "--socket", s, "-o", "json"]).await.expect_code(0).json();
    assert_eq!(v["pod_resources"][0]["containers"][0]["devices"][0]["numa_nodes"], json!([0]));
    let r = dpctl(&["podresources", "get", "p0", "--socket", s]).await;
    r.expect_code(4);
    assert!(r.stderr.contains("Get method disabled"), "{}", r.stderr);

    // dump writes the same format serve reads.
    let dump = dpctl(&["podresources", "dump", "--socket", s]).await;
    dump.expect_code(0);
    let mut recorded: Value = serde_json::from_str(&dump.stdout).unwrap();
    assert_eq!(recorded["allocatable"]["cpu_ids"], json!([0, 1]));
    recorded["pod_resources"][0]["name"] = json!("p1");
    std::fs::write(&data, serde_json::to_string(&recorded).unwrap()).unwrap();
    let line = child.stderr_line().await.expect("a reload line");
    assert!(line.contains("reloaded"), "{line}");
    let v = dpctl(&["podresources", "list", "--socket", s, "-o", "json"]).await.expect_code(0).json();
    assert_eq!(v["pod_resources"][0]["name"], "p1");

    // A second server on the same socket is refused.
    let r = dpctl(&["podresources", "serve", "--socket", s]).await;
    r.expect_code(3);
    assert!(r.stderr.contains("--force"), "{}", r.stderr);
    child.kill().await;
}

#[tokio::test]
async fn serve_rejects_a_bad_fixture_naming_the_key() {
    let sb = Sandbox::new();
    let data = sb.join("bad.json");
    std::fs::write(&data, r#"{"pod_resources": [{"name": "p", "containers": [{"name": "c", "device": []}]}]}"#)
        .unwrap();
    let r = serve_refused(&sb.join("k.sock"), &data).await;
    assert!(r.stderr.contains("bad.json") && r.stderr.contains("unknown field `device`"), "{}", r.stderr);
}

/// `dpctl podresources serve --socket SOCKET --data DATA` refused as bad
/// input (exit 2) with nothing bound; the run, for its stderr.
async fn serve_refused(socket: &std::path::Path, data: &std::path::Path) -> Run {
    let r =
        dpctl(&["podresources", "serve", "--socket", socket.to_str().unwrap(), "--data", data.to_str().unwrap()]).await;
    r.expect_code(2);
    assert!(!socket.exists(), "nothing was bound");
    r
}

#[tokio::test]
async fn serve_rejects_a_data_file_it_cannot_read() {
    let sb = Sandbox::new();
    let socket = sb.join("k.sock");
    let missing = sb.join("nonexistent.json");
    // Bad input (2), not a socket problem (3); the flag, the file and the OS reason.
    let r = serve_refused(&socket, &missing).await;
    let missing = missing.to_str().unwrap();
    assert!(r.stderr.contains(&format!("--data {missing}: cannot read the file")), "{}", r.stderr);
    assert!(r.stderr.contains("does not exist"), "{}", r.stderr);
    let r = serve_refused(&socket, sb.path()).await;
    assert!(r.stderr.contains("--data") && r.stderr.contains("it is a directory, not a regular file"), "{}", r.stderr);
}

/// docs/protocol.md §2.1 (every version): the kubelet sends one ContainerDevices
/// per (device, NUMA node); a data file with an entry no kubelet sends is bad
/// input (exit 2) naming the entry, and nothing is served.
#[tokio::test]
async fn serve_refuses_device_entries_no_kubelet_sends() {
    let sb = Sandbox::new();
    let socket = sb.join("k.sock");
    let data = sb.join("node.json");
    std::fs::write(
        &data,
        r#"{"pod_resources": [{"name": "train-0", "namespace": "gpu-jobs", "containers": [{"name": "trainer",
             "devices": [{"resource_name": "nvidia.com/gpu", "device_ids": ["GPU-0", "GPU-1"], "numa_nodes": [0, 1]}]}]}]}"#,
    )
    .unwrap();
    let r = serve_refused(&socket, &data).await;
    assert!(
        r.stderr.contains(
            "pod gpu-jobs/train-0 container trainer devices nvidia.com/gpu [GPU-0,GPU-1]: 2 device IDs and 2 NUMA \
             nodes in one entry, which no kubelet sends"
        ),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("split it into one entry per ID and node"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_narrates_its_banner_on_stderr_in_table_mode() {
    let sb = Sandbox::new();
    let socket = sb.join("k.sock");
    let s = socket.to_str().unwrap();
    let mut child = Child::dpctl(&["podresources", "serve", "--socket", s]);
    let line = child.stderr_line().await.expect("a banner line");
    assert!(line.starts_with(&format!("serving PodResources v1, v1alpha1 on {s}: 0 pods")), "{line}");
    // It answers, and stdout (data only) stays empty.
    dpctl(&["podresources", "list", "--socket", s]).await.expect_code(0);
    child.kill().await;
    let out = child.rest().await;
    assert!(out.is_empty(), "stdout: {out:?}");
}

/// The kubelet's own encoding: one `ContainerDevices` per (device, NUMA
/// node), so g0, on NUMA nodes 0 and 1, comes twice.
const UPSTREAM: &str = r#"{
  "pod_resources": [
    {"name": "dual", "namespace": "ns", "containers": [
      {"name": "c", "devices": [
        {"resource_name": "x.io/gpu", "device_ids": ["g0"], "numa_nodes": [0]},
        {"resource_name": "x.io/gpu", "device_ids": ["g1"], "numa_nodes": [1]},
        {"resource_name": "x.io/gpu", "device_ids": ["g0"], "numa_nodes": [1]}
      ]}
    ]}
  ],
  "allocatable": {"devices": [
    {"resource_name": "x.io/gpu", "device_ids": ["g0"], "numa_nodes": [0]},
    {"resource_name": "x.io/gpu", "device_ids": ["g2"], "numa_nodes": [0]},
    {"resource_name": "x.io/gpu", "device_ids": ["g0"], "numa_nodes": [1]},
    {"resource_name": "x.io/gpu", "device_ids": ["g1"], "numa_nodes": [1]},
    {"resource_name": "x.io/gpu", "device_ids": ["g3"], "numa_nodes": [1]}
  ]}
}"#;

fn upstream() -> Fixture {
    Fixture::from_json(UPSTREAM, "UPSTREAM").expect("test fixture parses")
}

#[tokio::test]
async fn a_device_on_two_numa_nodes_counts_once_in_list_get_allocatable_and_free() {
    let sb = Sandbox::new();
    let k = kubelet(&sb, upstream()).await;
    let row = ["ns", "dual", "c", "x.io/gpu", "2", "g0,g1", "0-1"];
    let r = dpctl(&["podresources", "list", "--socket", k.sock()]).await;
    r.expect_code(0);
    assert_eq!(r.stdout.lines().skip(1).map(cells).collect::<Vec<_>>(), [row], "{}", r.stdout);
    let r = dpctl(&["podresources", "list", "--socket", k.sock(), "-o", "wide"]).await;
    assert!(r.expect_code(0).stdout.contains("0-1:g0 1:g1"), "{}", r.stdout);
    let r = dpctl(&["podresources", "get", "dual", "-n", "ns", "--socket", k.sock()]).await;
    r.expect_code(0);
    assert_eq!(r.stdout.lines().skip(1).map(cells).collect::<Vec<_>>(), [row], "{}", r.stdout);

    let r = dpctl(&["podresources", "allocatable", "--socket", k.sock()]).await;
    r.expect_code(0);
    assert_eq!(
        r.stdout.lines().skip(1).map(cells).collect::<Vec<_>>(),
        [["x.io/gpu", "0", "1", "g2"], ["x.io/gpu", "0-1", "1", "g0"], ["x.io/gpu", "1", "2", "g1,g3"]],
        "{}",
        r.stdout
    );

    let r = dpctl(&["podresources", "free", "--socket", k.sock()]).await;
    r.expect_code(0);
    assert_eq!(
        r.stdout.lines().skip(1).map(cells).collect::<Vec<_>>(),
        [
            ["x.io/gpu", "0", "1", "0", "1", "g2"],
            ["x.io/gpu", "0-1", "1", "1", "0", "-"],
            ["x.io/gpu", "1", "2", "1", "1", "g3"]
        ],
        "{}",
        r.stdout
    );
    let v = dpctl(&["podresources", "free", "--socket", k.sock(), "-o", "json"]).await.expect_code(0).json();
    let sum = |key: &str| v["devices"].as_array().unwrap().iter().map(|d| d[key].as_u64().unwrap()).sum::<u64>();
    assert_eq!((sum("allocatable"), sum("in_use"), sum("free")), (4, 2, 2), "{v:#}");
    assert_eq!(v["held_not_allocatable"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_sees_no_change_when_a_multi_numa_device_is_encoded_differently() {
    let sb = Sandbox::new();
    let inner = FixtureProvider::new(upstream());
    let handle = inner.handle();
    let (lists, mut seen) = tokio::sync::watch::channel(0u64);
    let service = PodResourcesService::new(Arc::new(Counting { inner, lists }), ServerConfig::default());
    let socket = sb.join("pr.sock");
    let listener = transport::bind(&socket, &BindOptions::default()).await.unwrap();
    let (_stop, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(transport::serve(service.router(), listener, async {
        let _ = rx.await;
    }));
    let mut w = watch(socket.to_str().unwrap(), "20ms", &["--count", "2"]);
    let e = w.json().await;
    assert_eq!((e["event"].as_str(), e["pod"].as_str()), (Some("present"), Some("dual")));
    assert_eq!(
        e["changes"][0]["after"],
        json!({"devices": [{"numa_nodes": [0, 1], "device_ids": ["g0"]}, {"numa_nodes": [1], "device_ids": ["g1"]}]})
    );

    // The same devices, g0 now in one entry naming both nodes, in another order.
    let topo = |nodes: &[i64]| Some(v1::TopologyInfo { nodes: nodes.iter().map(|&id| v1::NumaNode { id }).collect() });
    let gpu = |id: &str, nodes: &[i64]| v1::ContainerDevices {
        resource_name: "x.io/gpu".into(),
        device_ids: vec![id.into()],
        topology: topo(nodes),
    };
    handle.update(|f| f.pods[0].containers[0].devices = vec![gpu("g1", &[1]), gpu("g0", &[1, 0])]);
    // Polls are sequential: the second List that ends after this point started after the change.
    let at = *seen.borrow();
    within("two more polls", seen.wait_for(|n| *n >= at + 2)).await.unwrap();
    handle.update(|f| f.pods.push(pod("b", &["g2"])));
    let e = w.json().await;
    assert_eq!((e["event"].as_str(), e["pod"].as_str()), (Some("added"), Some("b")), "no change for dual: {e:#}");
    let (code, err) = w.finish().await;
    assert_eq!(code, 0, "stderr: {err}");
}

/// kubectl habits: `get NAMESPACE/NAME` as `kubectl get pods -A` prints it,
/// `list -A` (every namespace, the default) and `--no-headers` (rows only,
/// for `| awk`).
#[tokio::test]
async fn kubectl_habits_namespace_slash_name_all_namespaces_and_no_headers() {
    let sb = Sandbox::new();
    let k = kubelet(&sb, node()).await;
    let r = dpctl(&["podresources", "get", "gpu-jobs/train-0", "--socket", k.sock()]).await;
    r.expect_code(0);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(cells(lines[1])[..3], ["gpu-jobs", "train-0", "log-shipper"]);
    let r = dpctl(&["podresources", "get", "gpu-jobs/train-0", "-n", "web", "--socket", k.sock()]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("another namespace than -n"), "{}", r.stderr);

    let all = dpctl(&["podresources", "list", "-A", "--socket", k.sock()]).await;
    all.expect_code(0);
    let bare = dpctl(&["podresources", "list", "-A", "--no-headers", "--socket", k.sock()]).await;
    bare.expect_code(0);
    // Two tables (devices, then DRA claims): both lose their header line, and only it.
    let headers = |s: &str| s.lines().filter(|l| l.starts_with("NAMESPACE ")).count();
    assert_eq!(headers(&all.stdout), 2, "{}", all.stdout);
    assert_eq!(headers(&bare.stdout), 0, "{}", bare.stdout);
    assert_eq!(bare.stdout.lines().count() + 2, all.stdout.lines().count(), "{}\n{}", all.stdout, bare.stdout);
}
