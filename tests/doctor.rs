//! `dpctl doctor` on nodes built in a temporary directory with kubelet-sim
//! and in-test plugins: a healthy node gives no warnings, and each broken
//! thing an operator meets on a node (stale sockets, hung plugins, corrupt or
//! disagreeing checkpoints, bad CDI specs) gives its finding.

use std::path::{Path, PathBuf};
use std::time::Duration;

use dpctl::checkpoint::{Checkpoint, CheckpointData, DeviceIds, PodDevicesEntry};
use dpctl::doctor::{DoctorConfig, DoctorReport, Finding, Severity};
use dpctl::kubelet_sim::{KubeletSim, KubeletVersion, PodSpec, SimConfig, SimHandle};
use dpctl::mock_plugin::{MockConfig, MockPlugin, ResourceConfig};
use dpctl::proto::deviceplugin::v1beta1 as dp;
use prost::Message;

use crate::support::fake_plugin::{self, AllocateAnswer, Behaviour, FakePlugin};
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
    // Only the env in Allocate's answer: CDI names with no spec on this node would be a finding.
    let p = FakePlugin::new(devices, Behaviour { allocate_answer: AllocateAnswer::EnvOnly, ..Behaviour::default() });
    let (_path, stop) = p.start(&node.dir(), name, resource).await;
    stop
}

/// No false alarms: a healthy node (kubelet.sock, a live plugin, a pod, a verifying
/// checkpoint that agrees with PodResources) gives no warnings; exit 0.
#[tokio::test]
async fn healthy_node_gives_no_warnings() {
    let node = Node::new();
    let sim = node.sim().await;
    let _p = plugin_with(&node, FakePlugin::healthy(2, true), "gpu.sock", GPU).await;
    sim.wait_for_counts(|c| c.get(GPU).is_some_and(|c| c.allocatable == 2), Duration::from_secs(10)).await.unwrap();
    assert!(sim.admit(PodSpec::shorthand("p", "default", &[(GPU.into(), 1)])).await.unwrap().admitted);
    sim.restart(Duration::from_millis(10)).await.unwrap(); // writes the checkpoint now (and drops the plugin)
    let _p2 = plugin_with(&node, FakePlugin::healthy(2, true), "gpu.sock", GPU).await;
    let r = node.doctor().await;
    let bad: Vec<&Finding> = r.findings.iter().filter(|f| f.severity != Severity::Ok).collect();
    assert!(bad.is_empty(), "{bad:#?}");
    assert!(find(&r, "socket", "gpu.sock").evidence.contains("live: 2 devices, 2 healthy, NUMA 0,1"));
    assert!(find(&r, "checkpoint", "kubelet_internal_checkpoint").evidence.contains("verifies"));
    assert!(find(&r, "podresources", "kubelet.sock").evidence.contains("(1 pod)"));
    let run = dpctl(&["doctor", "--root", node.root().to_str().unwrap(), "-o", "json"]).await;
    run.expect_code(0);
    assert_eq!(run.json()["findings"].as_array().unwrap().len(), r.findings.len());
    sim.stop().await.unwrap();
}

/// Each kind of broken socket gets its own finding: stale socket, a regular
/// file named x.sock, a plugin that hangs,
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
        (0..1100).map(|i| fake_plugin::device(&format!("{i:04}{}", "x".repeat(4096)), "Healthy", None)).collect();
    let p = FakePlugin::new(big, Behaviour::default());
    let _big = p.serve(&dir.join("big.sock")).await;
    let r = node.doctor().await;
    let stale = find(&r, "socket", "stale.sock");
    assert_eq!(stale.severity, Severity::Warning);
    assert!(stale.evidence.starts_with("stale: connection refused"), "{stale:?}");
    let x = find(&r, "file", "x.sock");
    assert!(
        x.evidence.contains("regular file named like a socket") && x.evidence.contains("kubelet 1.37 keeps it"),
        "{x:?}"
    );
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
    // The table names sockets inside the directory by name, each hint on the line under its finding.
    let lines: Vec<&str> = run.stdout.lines().collect();
    let i = lines.iter().position(|l| l.contains(" big.sock ")).unwrap_or_else(|| panic!("{}", run.stdout));
    assert!(lines[i].starts_with("error "), "{}", run.stdout);
    assert!(
        lines[i + 1].trim_start().starts_with("hint:") && lines[i + 1].contains("send fewer or smaller devices"),
        "{}",
        run.stdout
    );
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

/// A missing kubelet.sock and a corrupt checkpoint are errors, since no plugin
/// can register and the next kubelet start restores nothing
/// (docs/kubelet-versions.md §7: stored vs computed).
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
    assert!(c.evidence.contains("the next kubelet start restores nothing"), "{c:?}");
    assert!(c.hint.as_deref().unwrap().contains("drain the node"), "{c:?}");
}

/// Disagreements that mean a leak or a lost allocation: a checkpoint that
/// disagrees with PodResources (a pod it records
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

/// docs/kubelet-versions.md §4 (CleanupPluginDirectory): 1.26-1.32 (`os.Lstat`)
/// delete every non-directory but the checkpoint, links included; 1.33+
/// (`os.Stat` + ModeSocket) delete only entries whose target is a socket, so
/// other files stay. Doctor says which, for the version it is given.
#[tokio::test]
async fn non_socket_files_are_judged_by_the_kubelet_version() {
    let node = Node::new();
    let dir = node.dir();
    std::fs::write(dir.join("DEPRECATION"), "junk").unwrap();
    std::fs::write(dir.join(".12345678"), "a temporary file").unwrap();
    let _target = std::os::unix::net::UnixListener::bind(node.sb.join("real.sock")).unwrap();
    std::os::unix::fs::symlink(node.sb.join("real.sock"), dir.join("link.sock")).unwrap();
    std::os::unix::fs::symlink(node.sb.join("nothing"), dir.join("dangling")).unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    let mut cfg = node.config();
    cfg.kubelet_version = KubeletVersion::Release(32);
    let old = within("doctor 1.32", dpctl::doctor::run(&cfg)).await;
    let new = node.doctor().await; // 1.37, the default
    assert_eq!(new.kubelet_version, KubeletVersion::Release(37));
    for (name, kept_by_new) in [("DEPRECATION", true), (".12345678", true), ("link.sock", false), ("dangling", true)] {
        let o = find(&old, "file", &format!("/{name}"));
        assert!(
            o.evidence.contains("kubelet 1.32 deletes it at restart (every non-directory; 1.33+ delete sockets only)"),
            "{o:?}"
        );
        let n = find(&new, "file", &format!("/{name}"));
        let want = if kept_by_new { "kubelet 1.37 keeps it" } else { "kubelet 1.37 deletes it" };
        assert!(
            n.evidence.contains(want) && n.evidence.contains("(sockets only; 1.26-1.32 delete every non-directory)"),
            "{n:?}"
        );
        assert_eq!(n.severity, Severity::Warning);
    }
    assert!(find(&new, "file", "/link.sock").evidence.starts_with("a symlink to a socket"));
    assert!(find(&new, "file", "/dangling").evidence.starts_with("a dangling symlink"));
    assert!(!new.findings.iter().any(|f| f.subject.ends_with("/sub")), "directories are always kept");
    // The same from the command line; a version dpctl does not play is bad input.
    let root = node.root().to_str().unwrap();
    let run = dpctl(&["doctor", "--root", root, "--kubelet-version", "v1.32.4", "-o", "json"]).await;
    let v = run.json();
    assert_eq!(v["kubelet_version"], "1.32");
    let junk =
        v["findings"].as_array().unwrap().iter().find(|f| f["subject"].as_str().unwrap().ends_with("DEPRECATION"));
    assert!(junk.unwrap()["evidence"].as_str().unwrap().contains("kubelet 1.32 deletes it"), "{v}");
    let run = dpctl(&["doctor", "--root", root, "--kubelet-version", "1.20"]).await;
    run.expect_code(2);
    assert!(run.stderr.contains("1.20") && run.stderr.contains("1.26, 1.27"), "{}", run.stderr);
}

/// docs/kubelet-versions.md §7: a pre-1.20 checkpoint is read up to 1.30 (a
/// warning: an upgrade loses it) and not from 1.31 (an error: nothing is
/// restored at the next start).
#[tokio::test]
async fn pre_1_20_checkpoint_is_judged_by_the_kubelet_version() {
    let node = Node::new();
    // A verifying v1 file (the checksum over the v1 Go value, as `checkpoint verify` computes it).
    std::fs::write(
        node.dir().join("kubelet_internal_checkpoint"),
        br#"{"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c","ResourceName":"r","DeviceIDs":["a"],"AllocResp":null}],"RegisteredDevices":{"r":["a"]}},"Checksum":4075138765}"#,
    )
    .unwrap();
    let mut cfg = node.config();
    cfg.kubelet_version = KubeletVersion::Release(30);
    let r30 = within("doctor 1.30", dpctl::doctor::run(&cfg)).await;
    let c = find(&r30, "checkpoint", "kubelet_internal_checkpoint");
    assert_eq!(c.severity, Severity::Warning);
    assert!(c.evidence.contains("pre-1.20 layout: kubelet 1.30 reads it"), "{c:?}");
    let r36 = node.doctor().await;
    let c = find(&r36, "checkpoint", "kubelet_internal_checkpoint");
    assert_eq!(c.severity, Severity::Error);
    assert!(c.evidence.contains("kubelet 1.37 cannot read it") && c.evidence.contains("restores nothing"), "{c:?}");
}

/// The checkpoint and PodResources disagree the other way round
/// (PodResources lists a device the checkpoint has no entry for), and the
/// checkpoint records a device that no live plugin reports any more.
#[tokio::test]
async fn podresources_device_missing_from_checkpoint_and_devices_no_plugin_reports() {
    let node = Node::new();
    // Written before the sim starts: the sim did not write it, so it never rewrites it.
    let cp = Checkpoint::new(CheckpointData {
        pod_device_entries: Some(vec![entry("uid-gone", "GPU-gone", &[])]),
        registered_devices: Some([(GPU.to_string(), Some(vec!["GPU-gone".to_string()]))].into()),
    });
    std::fs::write(node.dir().join("kubelet_internal_checkpoint"), cp.to_json()).unwrap();
    let sim = node.sim().await;
    let _p = plugin_with(&node, FakePlugin::healthy(2, true), "gpu.sock", GPU).await;
    sim.wait_for_counts(|c| c.get(GPU).is_some_and(|c| c.allocatable == 2), Duration::from_secs(10)).await.unwrap();
    assert!(sim.admit(PodSpec::shorthand("p", "default", &[(GPU.into(), 1)])).await.unwrap().admitted);
    let r = node.doctor().await;
    let listed = find(&r, "podresources", "pod default/p / c0");
    assert_eq!(listed.severity, Severity::Warning);
    assert!(
        listed.evidence.contains("the checkpoint has no such entry") && listed.evidence.contains(GPU),
        "{listed:?}"
    );
    let gone = r
        .findings
        .iter()
        .find(|f| f.subject == "pod uid-gone / c0" && f.evidence.contains("no live plugin reports"))
        .unwrap_or_else(|| panic!("{:#?}", r.findings));
    assert!(gone.evidence.contains("GPU-gone"), "{gone:?}");
    sim.stop().await.unwrap();
}

/// Plugins that register the plugin-watcher way are checked too:
/// `plugins_registry` sockets and what GetInfo says (a
/// mock-plugin serving the plugin-watcher way), a stale registration socket,
/// and a CDI spec that does not parse even when there is no checkpoint.
#[tokio::test]
async fn plugins_registry_getinfo_and_a_broken_cdi_spec() {
    let node = Node::new();
    let registry = node.sb.join("var/lib/kubelet/plugins_registry");
    std::fs::create_dir_all(&registry).unwrap();
    drop(std::os::unix::net::UnixListener::bind(registry.join("old-reg.sock")).unwrap());
    std::fs::write(node.sb.join("etc/cdi/broken.yaml"), "cdiVersion: [").unwrap();
    let mock = MockPlugin::start(MockConfig {
        dir: Some(node.dir()),
        register: false,
        control: false,
        registry_dir: Some(registry.clone()),
        resources: vec![ResourceConfig::new(GPU, 3)],
        ..MockConfig::default()
    })
    .await
    .expect("mock starts");
    let r = node.doctor().await;
    let info = find(&r, "registry", "example-gpu.sock");
    assert_eq!(info.severity, Severity::Ok);
    assert!(info.evidence.contains("type DevicePlugin") && info.evidence.contains(&format!("name {GPU}")), "{info:?}");
    let stale = find(&r, "registry", "old-reg.sock");
    assert_eq!(stale.severity, Severity::Warning);
    assert!(stale.evidence.contains("stale"), "{stale:?}");
    let live = find(&r, "socket", "example-gpu.sock");
    assert!(live.evidence.starts_with("live: 3 devices"), "{live:?}");
    let broken = find(&r, "cdi", "broken.yaml");
    assert!(broken.evidence.starts_with("does not parse"), "{broken:?}");
    mock.stop().await.unwrap();
}

/// A fleet's results must be readable at once: `dpctl doctor merge` folds the
/// reports of several nodes, as `kubectl logs -l ... --tail=1` prints them
/// (JSON Lines, pretty JSON, kubectl's `--prefix`, its own messages), into
/// one view; exit 1 when a node has an error, 2 when no report is found.
#[tokio::test]
async fn merge_folds_every_nodes_report_into_one_view() {
    let healthy = Node::new();
    let sim = healthy.sim().await;
    let broken = Node::new(); // no kubelet.sock
    std::fs::write(broken.dir().join("junk"), "x").unwrap();
    let a = dpctl(&["doctor", "--root", healthy.root().to_str().unwrap(), "--node", "node-a", "-o", "json"]).await;
    a.expect_code(0);
    let b = dpctl(&["doctor", "--root", broken.root().to_str().unwrap(), "--node", "node-b", "-o", "json"]).await;
    b.expect_code(1);
    let line_a = serde_json::to_string(&a.json()).unwrap();
    let logs = format!(
        "[pod/dpctl-doctor-x1/doctor] {line_a}\nunable to retrieve container logs for containerd://abc\n{}",
        b.stdout
    );
    let file = healthy.sb.join("logs.txt");
    std::fs::write(&file, logs).unwrap();
    let run = dpctl(&["doctor", "merge", file.to_str().unwrap()]).await;
    run.expect_code(1);
    let rows: Vec<&str> = run.stdout.lines().collect();
    assert!(
        rows[0].starts_with("NODE") && rows[1].starts_with("node-b ") && rows[2].starts_with("node-a "),
        "{}",
        run.stdout
    );
    assert!(rows[1].contains("error") && rows[2].contains(" ok "), "{}", run.stdout);
    let kubelet = rows.iter().find(|l| l.starts_with("node-b") && l.contains("kubelet-sock")).expect(&run.stdout);
    assert!(kubelet.contains("no plugin can register"), "{kubelet}");
    assert!(rows.iter().any(|l| l.starts_with("node-b") && l.contains(" junk ")), "{}", run.stdout);
    assert!(!rows.iter().any(|l| l.starts_with("node-a") && l.contains("kubelet-sock")), "ok findings are left out");
    assert!(run.stderr.contains("skipped 1") && run.stderr.contains("line 2: not JSON"), "{}", run.stderr);
    let json = dpctl(&["doctor", "merge", "--all", file.to_str().unwrap(), "-o", "json"]).await.json();
    assert_eq!(json["nodes"][0]["node"], "node-b");
    assert_eq!(json["nodes"][0]["worst"], "error");
    assert_eq!(json["nodes"][1]["worst"], "ok");
    let of_a = json["findings"].as_array().unwrap().iter().filter(|f| f["node"] == "node-a").count();
    assert_eq!(of_a, a.json()["findings"].as_array().unwrap().len(), "--all keeps ok findings");
    std::fs::write(&file, "Error from server (NotFound): pods not found\n").unwrap();
    let none = dpctl(&["doctor", "merge", file.to_str().unwrap()]).await;
    none.expect_code(2);
    assert!(none.stderr.contains("no dpctl doctor report"), "{}", none.stderr);
    sim.stop().await.unwrap();
}

/// README's `kubectl debug ... dpctl doctor --kubelet-version "$(kubectl get
/// node ... kubeletVersion)"`: managed clusters report `v1.30.7-eks-59bf375`,
/// `v1.31.3+k3s1`, `v1.29.8-gke.1031000`; each is judged as its release.
#[tokio::test]
async fn a_managed_clusters_kubelet_version_is_its_release() {
    let sb = Sandbox::new();
    let root = sb.path().to_str().unwrap();
    for (given, release) in [("v1.30.7-eks-59bf375", "1.30"), ("v1.31.3+k3s1", "1.31"), ("v1.29.8-gke.1031000", "1.29")]
    {
        let run = dpctl(&["doctor", "--root", root, "--kubelet-version", given, "-o", "json"]).await;
        assert_ne!(run.code, 2, "{given}: {}", run.stderr);
        let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{given}: {e}"));
        assert_eq!(v["kubelet_version"], release, "{given}");
    }
    let run = dpctl(&["doctor", "--root", root, "--kubelet-version", "v1.30.7-eks 59bf375"]).await;
    run.expect_code(2);
}

/// The stream-ended case, on a real sim (the kubelet's behaviour in every
/// release 1.26-1.37, pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go:
/// one ListAndWatch per registration, never reopened): the sim's stream to
/// the plugin ends, the sim lists nothing allocatable, while the plugin,
/// asked on doctor's own stream, reports both devices healthy. Doctor names
/// the mismatch and the fix (error, exit 1), says what it knows about
/// Allocate without calling it, and `kubelet-sim status` says why the stream
/// ended.
#[tokio::test]
async fn stream_ended_plugin_is_healthy_but_the_kubelet_lists_nothing() {
    let node = Node::new();
    let sim = node.sim().await;
    let p = FakePlugin::new(
        FakePlugin::healthy(2, true),
        Behaviour { allocate_answer: AllocateAnswer::EnvOnly, ..Behaviour::default() },
    );
    let (_path, _stop) = p.start(&node.dir(), "gpu.sock", GPU).await;
    sim.wait_for_counts(|c| c.get(GPU).is_some_and(|c| c.allocatable == 2), Duration::from_secs(10)).await.unwrap();
    // Before the cut: the two views agree.
    let r = node.doctor().await;
    assert_eq!(find(&r, "kubelet-view", "gpu.sock").severity, Severity::Ok, "{:#?}", r.findings);
    p.end_streams();
    sim.wait_for_counts(|c| c.get(GPU).is_some_and(|c| c.allocatable == 0), Duration::from_secs(10)).await.unwrap();

    let root = node.root().to_str().unwrap();
    let run = dpctl(&["doctor", "--root", root, "--timeout", "500ms", "-o", "json"]).await;
    run.expect_code(1);
    let json = run.json();
    let f = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "kubelet-view")
        .unwrap_or_else(|| panic!("no kubelet-view finding: {json:#}"));
    assert_eq!(f["severity"], "error", "{f:#}");
    let evidence = f["evidence"].as_str().unwrap();
    assert!(evidence.contains("reports 2 healthy devices of example.com/gpu"), "{evidence}");
    assert!(evidence.contains("lists none of them as allocatable"), "{evidence}");
    let hint = f["hint"].as_str().unwrap();
    assert!(hint.contains("stream to this plugin ended") && hint.contains("restart the plugin"), "{hint}");
    // The socket itself still looks fine: the finding is what tells them apart.
    let sock = json["findings"].as_array().unwrap().iter().find(|f| f["check"] == "socket").unwrap();
    assert_eq!(sock["severity"], "ok", "{sock:#}");

    let table = dpctl(&["doctor", "--root", root, "--timeout", "500ms"]).await;
    table.expect_code(1);
    assert!(table.stdout.contains("kubelet-view"), "{}", table.stdout);
    assert!(table.stdout.contains("plugin call allocate --socket"), "{}", table.stdout);
    assert!(table.stdout.contains("allocates for real"), "{}", table.stdout);

    let dir = node.dir();
    let status = dpctl(&["kubelet-sim", "status", "--dir", dir.to_str().unwrap()]).await;
    status.expect_code(0);
    assert!(
        status.stdout.contains("example.com/gpu: stream ended: the plugin ended the stream (status OK)"),
        "{}",
        status.stdout
    );
    let json = dpctl(&["kubelet-sim", "status", "--dir", dir.to_str().unwrap(), "-o", "json"]).await.json();
    let res = json["resources"].as_array().unwrap().iter().find(|r| r["resource"] == GPU).unwrap().clone();
    assert_eq!(res["stream_end_reason"], "the plugin ended the stream (status OK)", "{res:#}");
    sim.stop().await.unwrap();
}

/// `dpctl explain` on the sim's own rejection after its stream to the plugin
/// was cut (every release 1.26-1.37 says the same text): the pasted event
/// line is explained as no-healthy-devices, with the releases and `dpctl
/// doctor` as the check; text it does not know exits 1.
#[tokio::test]
async fn explain_names_the_cause_of_the_sims_rejection_after_a_stream_cut() {
    let node = Node::new();
    let sim = node.sim().await;
    let p = FakePlugin::new(FakePlugin::healthy(1, false), Behaviour::default());
    let (_path, _stop) = p.start(&node.dir(), "gpu.sock", GPU).await;
    sim.wait_for_counts(|c| c.get(GPU).is_some_and(|c| c.allocatable == 1), Duration::from_secs(10)).await.unwrap();
    p.end_streams();
    sim.wait_for_counts(|c| c.get(GPU).is_some_and(|c| c.allocatable == 0), Duration::from_secs(10)).await.unwrap();
    let o = sim.admit(PodSpec::shorthand("p", "default", &[(GPU.into(), 1)])).await.unwrap();
    assert!(!o.admitted);
    let pasted = format!(
        "  Warning  {}  5s  kubelet  {}",
        o.reason.clone().unwrap_or_default(),
        o.message.clone().unwrap_or_default()
    );
    let run = dpctl(&["explain", &pasted]).await;
    run.expect_code(0);
    assert!(run.stdout.starts_with("UnexpectedAdmissionError (no-healthy-devices)"), "{}", run.stdout);
    assert!(run.stdout.contains("values:   example.com/gpu"), "{}", run.stdout);
    assert!(run.stdout.contains("stream to the plugin ended"), "{}", run.stdout);
    assert!(run.stdout.contains("confirm:  dpctl doctor"), "{}", run.stdout);
    assert!(run.stdout.contains("releases: 1.26-1.38"), "{}", run.stdout);
    let json = dpctl(&["explain", "-o", "json", &pasted]).await;
    json.expect_code(0);
    let codes: Vec<String> =
        json.json()["matches"].as_array().unwrap().iter().map(|m| m["code"].as_str().unwrap().to_string()).collect();
    assert_eq!(codes, ["no-healthy-devices", "allocate-failed-unexpected"]);
    let none = dpctl(&["explain", "ImagePullBackOff"]).await;
    none.expect_code(1);
    assert!(none.stderr.contains("no kubelet text dpctl knows"), "{}", none.stderr);
    sim.stop().await.unwrap();
}
