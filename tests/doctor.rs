//! `dpctl doctor` on nodes built in a temporary directory with kubelet-sim
//! and in-test plugins: a healthy node gives no warnings, and each broken
//! thing issue 11 lists gives its finding.

use std::path::{Path, PathBuf};
use std::time::Duration;

use dpctl::checkpoint::{Checkpoint, CheckpointData, DeviceIds, PodDevicesEntry};
use dpctl::doctor::{DoctorConfig, DoctorReport, Finding, Severity};
use dpctl::kubelet_sim::{KubeletSim, PodSpec, SimConfig, SimHandle};
use dpctl::proto::deviceplugin::v1beta1 as dp;
use prost::Message;

use crate::support::simplugin::{self, Script, SimPlugin};
use crate::support::{Sandbox, dpctl, within};

const GPU: &str = "example.com/gpu";

/// A node root: `<root>/var/lib/kubelet/device-plugins` and friends.
struct Node {
    sb: Sandbox,
}

impl Node {
    fn new() -> Node {
        let sb = Sandbox::new();
        for d in ["var/lib/kubelet/device-plugins", "var/lib/kubelet/pod-resources", "etc/cdi"] {
            std::fs::create_dir_all(sb.join(d)).unwrap();
        }
        Node { sb }
    }
    fn root(&self) -> &Path {
        self.sb.path()
    }
    fn dir(&self) -> PathBuf {
        self.sb.join("var/lib/kubelet/device-plugins")
    }
    async fn sim(&self) -> SimHandle {
        let mut c = SimConfig::new(self.dir());
        c.podresources_socket = Some(self.sb.join("var/lib/kubelet/pod-resources/kubelet.sock"));
        c.dial_timeout = Duration::from_millis(400);
        KubeletSim::start(c).await.expect("start the sim")
    }
    fn config(&self) -> DoctorConfig {
        let mut c = DoctorConfig::new(self.root());
        c.probe_timeout = Duration::from_millis(500);
        c.budget = Duration::from_secs(3);
        c
    }
    async fn doctor(&self) -> DoctorReport {
        within("doctor", dpctl::doctor::run(&self.config())).await
    }
}

fn find<'a>(r: &'a DoctorReport, check: &str, subject_ends: &str) -> &'a Finding {
    r.findings
        .iter()
        .find(|f| f.check == check && f.subject.ends_with(subject_ends))
        .unwrap_or_else(|| panic!("no {check} finding for {subject_ends}: {:#?}", r.findings))
}

async fn plugin_with(
    node: &Node,
    devices: Vec<dp::Device>,
    name: &str,
    resource: &str,
) -> tokio::sync::oneshot::Sender<()> {
    let p = SimPlugin::new(devices, Script::default());
    let (_path, stop) = simplugin::start(&p, &node.dir(), name, resource).await;
    stop
}

/// Issue 11: a healthy node (kubelet.sock, a live plugin, a pod, a verifying
/// checkpoint that agrees with PodResources) gives no warnings; exit 0.
#[tokio::test]
async fn healthy_node_gives_no_warnings() {
    let node = Node::new();
    let sim = node.sim().await;
    let _p = plugin_with(&node, SimPlugin::healthy(2, true), "gpu.sock", GPU).await;
    sim.wait_for_counts(|c| c.get(GPU).is_some_and(|c| c.allocatable == 2), Duration::from_secs(10)).await.unwrap();
    assert!(sim.admit(PodSpec::shorthand("p", "default", &[(GPU.into(), 1)])).await.unwrap().admitted);
    sim.restart(Duration::from_millis(10)).await.unwrap(); // writes the checkpoint now (and drops the plugin)
    let _p2 = plugin_with(&node, SimPlugin::healthy(2, true), "gpu.sock", GPU).await;
    let r = node.doctor().await;
    let bad: Vec<&Finding> = r.findings.iter().filter(|f| f.severity != Severity::Ok).collect();
    assert!(bad.is_empty(), "{bad:#?}");
    assert!(find(&r, "socket", "gpu.sock").evidence.contains("live: 2 device(s), 2 healthy, NUMA 0,1"));
    assert!(find(&r, "checkpoint", "kubelet_internal_checkpoint").evidence.contains("verifies"));
    assert!(find(&r, "podresources", "kubelet.sock").evidence.contains("1 pod(s)"));
    let run = dpctl(&["doctor", "--root", node.root().to_str().unwrap(), "-o", "json"]).await;
    run.expect_code(0);
    assert_eq!(run.json()["findings"].as_array().unwrap().len(), r.findings.len());
    sim.stop().await.unwrap();
}

/// Issue 11: stale socket, a regular file named x.sock, a plugin that hangs,
/// an unknown-service socket, an oversize ListAndWatch message.
#[tokio::test]
async fn broken_sockets_each_get_their_finding() {
    let node = Node::new();
    let dir = node.dir();
    let sim = node.sim().await;
    drop(std::os::unix::net::UnixListener::bind(dir.join("stale.sock")).unwrap());
    std::fs::write(dir.join("x.sock"), "a regular file").unwrap();
    let _hang = std::os::unix::net::UnixListener::bind(dir.join("hang.sock")).unwrap(); // never accepts
    // A gRPC server that is not a device plugin: a second sim's PodResources.
    let other = Sandbox::new();
    let mut c = SimConfig::new(other.path());
    c.podresources_socket = Some(dir.join("other.sock"));
    let other_sim = KubeletSim::start(c).await.unwrap();
    // Over the kubelet's 4 MiB: 1,100 devices with 4 KiB IDs.
    let big: Vec<dp::Device> =
        (0..1100).map(|i| simplugin::device(&format!("{i:04}{}", "x".repeat(4096)), "Healthy", None)).collect();
    let p = SimPlugin::new(big, Script::default());
    let _big = p.serve(&dir.join("big.sock")).await;
    let r = node.doctor().await;
    let stale = find(&r, "socket", "stale.sock");
    assert_eq!(stale.severity, Severity::Warning);
    assert!(stale.evidence.starts_with("stale: connection refused"), "{stale:?}");
    let x = find(&r, "file", "x.sock");
    assert!(x.evidence.contains("regular file named like a socket") && x.evidence.contains("1.33+ keep it"), "{x:?}");
    let hang = find(&r, "socket", "hang.sock");
    assert!(hang.evidence.starts_with("slow:"), "{hang:?}");
    let unknown = find(&r, "socket", "other.sock");
    assert!(unknown.evidence.starts_with("not a device plugin"), "{unknown:?}");
    let big = find(&r, "socket", "big.sock");
    assert_eq!(big.severity, Severity::Error);
    assert!(big.evidence.contains("too large") && big.evidence.contains("4194304"), "{big:?}");
    assert!(r.took_ms < 3000, "within the budget: {} ms", r.took_ms);
    let run = dpctl(&["doctor", "--root", node.root().to_str().unwrap(), "--timeout", "300ms"]).await;
    run.expect_code(1);
    assert!(run.stdout.contains("hint") && run.stdout.contains("big.sock"), "{}", run.stdout);
    other_sim.stop().await.unwrap();
    sim.stop().await.unwrap();
}

fn entry(uid: &str, id: &str, cdi: &[&str]) -> PodDevicesEntry {
    let resp = dp::ContainerAllocateResponse {
        cdi_devices: cdi.iter().map(|n| dp::CdiDevice { name: (*n).to_string() }).collect(),
        ..Default::default()
    };
    PodDevicesEntry {
        pod_uid: uid.into(),
        container_name: "c0".into(),
        resource_name: GPU.into(),
        device_ids: DeviceIds::PerNuma(Some([(-1, Some(vec![id.to_string()]))].into())),
        alloc_resp: Some(resp.encode_to_vec()),
    }
}

/// Issue 11: a missing kubelet.sock and a corrupt checkpoint are errors
/// (kubelet-versions.md §7: stored vs computed).
#[tokio::test]
async fn missing_kubelet_sock_and_corrupt_checkpoint_are_errors() {
    let node = Node::new();
    let mut cp = Checkpoint::new(CheckpointData {
        pod_device_entries: Some(vec![entry("u1", "GPU-0", &[])]),
        registered_devices: Some(Default::default()),
    });
    cp.checksum += 1;
    std::fs::write(node.dir().join("kubelet_internal_checkpoint"), cp.to_json()).unwrap();
    let r = node.doctor().await;
    let k = find(&r, "kubelet-sock", "kubelet.sock");
    assert_eq!(k.severity, Severity::Error);
    assert!(k.evidence.contains("no socket") && k.evidence.contains("no plugin can register"), "{k:?}");
    let c = find(&r, "checkpoint", "kubelet_internal_checkpoint");
    assert_eq!(c.severity, Severity::Error);
    assert!(c.evidence.contains(&format!("stored checksum {}, computed {}", cp.checksum, cp.checksum - 1)), "{c:?}");
    assert!(c.hint.as_deref().unwrap().contains("restores nothing"));
}

/// Issue 11: a checkpoint that disagrees with PodResources (a pod it records
/// that PodResources does not list), and a CDI name no spec defines.
#[tokio::test]
async fn checkpoint_against_podresources_and_cdi() {
    let node = Node::new();
    std::fs::write(
        node.sb.join("etc/cdi/vendor.yaml"),
        "cdiVersion: 0.6.0\nkind: vendor.com/gpu\ndevices:\n  - name: gpu0\ncontainerEdits: {}\n",
    )
    .unwrap();
    std::fs::write(node.sb.join("etc/cdi/broken.json"), "{").unwrap();
    let cp = Checkpoint::new(CheckpointData {
        pod_device_entries: Some(vec![
            entry("uid-known-cdi", "GPU-0", &["vendor.com/gpu=gpu0"]),
            entry("uid-unknown-cdi", "GPU-1", &["vendor.com/gpu=gpu9"]),
        ]),
        registered_devices: Some([(GPU.to_string(), Some(vec!["GPU-0".to_string(), "GPU-1".to_string()]))].into()),
    });
    // The sim did not write it: it restores it read-only; its PodResources lists no pod.
    std::fs::write(node.dir().join("kubelet_internal_checkpoint"), cp.to_json()).unwrap();
    let sim = node.sim().await;
    let r = node.doctor().await;
    let f = find(&r, "checkpoint", "uid-known-cdi / c0");
    assert!(f.evidence.contains("PodResources lists no container holding them"), "{f:?}");
    let cdi = find(&r, "cdi", "uid-unknown-cdi / c0");
    assert_eq!(cdi.severity, Severity::Error);
    assert!(cdi.evidence.contains("vendor.com/gpu=gpu9") && cdi.evidence.contains("no spec"), "{cdi:?}");
    assert!(!r.findings.iter().any(|f| f.check == "cdi" && f.subject.contains("uid-known-cdi")));
    let broken = find(&r, "cdi", "broken.json");
    assert_eq!(broken.severity, Severity::Warning);
    sim.stop().await.unwrap();
}
