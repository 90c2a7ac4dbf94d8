//! The device manager's checkpoint as kubelet-sim reads, restores and writes
//! it (docs/kubelet-versions.md §7: restored allocations stay in use, and a file
//! the sim did not write is never changed), against
//! files real kubelets wrote (tests/data/checkpoints/).

use std::path::Path;
use std::time::Duration;

use dpctl::checkpoint::{Checkpoint, Format, LegacyFormat};
use dpctl::kubelet_sim::{EventKind, KubeletVersion, PodSpec, SimConfig, SimHandle};

use crate::support::fake_plugin::{self, Behaviour, FakePlugin, register};
use crate::support::{Child, Sandbox, dpctl, within};

const GPU: &str = "example.com/gpu";
const TEGRA: &[u8] = include_bytes!("data/checkpoints/kubelet-kind-tegra.json");
const GPUOPS: &[u8] = include_bytes!("data/checkpoints/kubelet-gpuops-doc.json");
const CHECKPOINT: &str = "kubelet_internal_checkpoint";

async fn start_sim(dir: &Path, tune: impl FnOnce(&mut SimConfig)) -> SimHandle {
    crate::support::sim::start(dir, tune).await
}

fn verify_file(path: &Path) -> Checkpoint {
    let cp = Checkpoint::read(path, LegacyFormat::Refuse).unwrap().expect("a checkpoint file");
    let v = cp.verify();
    assert!(v.ok(), "{} does not verify: stored {} computed {}", path.display(), v.stored, v.computed);
    cp
}

/// docs/kubelet-versions.md §7 (all versions): a valid checkpoint restores its pods'
/// allocations by UID and container, its registered resources wait at 0 for
/// their plugins; a file the sim did not write (a real kubelet's) is never
/// changed, so pointing the sim at a node cannot damage it.
#[tokio::test]
async fn real_kubelets_checkpoint_is_restored_and_never_rewritten() {
    let sb = Sandbox::new();
    std::fs::write(sb.join(CHECKPOINT), TEGRA).unwrap();
    let sim = start_sim(sb.path(), |_| {}).await;
    let mut events = sim.events_from_start().unwrap();
    let status = sim.status();
    let cp = status.checkpoint.clone().expect("checkpoint status");
    assert_eq!(cp.found, "valid");
    assert_eq!((cp.stored_checksum, cp.computed_checksum), (Some(3_660_592_824), Some(3_660_592_824)));
    assert!(!cp.writes, "{cp:?}");
    assert!(cp.ownership.contains("--adopt-checkpoint"), "{}", cp.ownership);
    // The pod is known by UID only; its device is in use.
    assert_eq!(status.restored_pods.len(), 1);
    assert_eq!(status.restored_pods[0].uid, "bf52b2cd-b611-4e79-86b1-280b283185c3");
    assert_eq!(status.restored_pods[0].containers[0].name, "check");
    assert_eq!(status.restored_pods[0].containers[0].devices["nvidia.com/gpu"], ["tegra"]);
    let r = status.resource("nvidia.com/gpu").expect("restored resource");
    assert_eq!((r.state.as_str(), r.capacity, r.allocatable, r.in_use), ("awaiting-registration", 0, 0, 1));
    // The read-only decision is an event, before `started`.
    let mut saw_read_only = false;
    while let Ok(ev) = events.try_recv() {
        if let EventKind::CheckpointReadOnly { reason, .. } = &ev.kind {
            saw_read_only = reason.contains("--adopt-checkpoint");
        }
    }
    assert!(saw_read_only);
    // The device comes back with its plugin and stays taken.
    let p = FakePlugin::new(vec![fake_plugin::device("tegra", "Healthy", None)], Behaviour::default());
    let (_path, _stop) = p.start(sb.path(), "tegra.sock", "nvidia.com/gpu").await;
    sim.wait_for_counts(|c| c.get("nvidia.com/gpu").is_some_and(|c| c.allocatable == 1), Duration::from_secs(10))
        .await
        .unwrap();
    let o = sim.admit(PodSpec::shorthand("next", "default", &[("nvidia.com/gpu".into(), 1)])).await.unwrap();
    assert!(!o.admitted, "the restored pod holds the only device: {o:?}");
    // Deleting it by UID frees the device (the real kubelet's file still stays untouched).
    let freed = sim.delete("default", "bf52b2cd-b611-4e79-86b1-280b283185c3").await.unwrap();
    assert_eq!(freed.freed["nvidia.com/gpu"], ["tegra"]);
    assert!(sim.status().restored_pods.is_empty());
    let o = sim.admit(PodSpec::shorthand("after", "default", &[("nvidia.com/gpu".into(), 1)])).await.unwrap();
    assert_eq!(o.devices("c0", "nvidia.com/gpu"), ["tegra"]);
    sim.stop().await.unwrap();
    assert_eq!(std::fs::read(sb.join(CHECKPOINT)).unwrap(), TEGRA, "the real kubelet's file is unchanged");
}

/// docs/kubelet-versions.md §7 "Corrupt checkpoint": stored and computed are reported,
/// nothing is restored, the kubelet goes on; the sim does not replace a file it
/// did not write (it may be a real kubelet's).
#[tokio::test]
async fn one_byte_changed_checkpoint_is_corrupt_and_restores_nothing() {
    let sb = Sandbox::new();
    let mut bytes = GPUOPS.to_vec();
    let i = bytes.windows(5).position(|w| w == b"GPU-0").unwrap();
    bytes[i + 4] = b'1';
    std::fs::write(sb.join(CHECKPOINT), &bytes).unwrap();
    let sim = start_sim(sb.path(), |_| {}).await;
    let status = sim.status();
    let cp = status.checkpoint.clone().unwrap();
    assert_eq!(cp.found, "corrupt");
    assert_eq!(cp.stored_checksum, Some(3_952_659_280));
    assert_ne!(cp.computed_checksum, Some(3_952_659_280));
    let err = cp.error.unwrap();
    assert!(err.contains("3952659280") && err.contains("nothing is restored"), "{err}");
    assert!(status.resources.is_empty() && status.restored_pods.is_empty());
    sim.stop().await.unwrap();
    assert_eq!(std::fs::read(sb.join(CHECKPOINT)).unwrap(), bytes);
    // Asked to adopt it, the sim behaves as the kubelet: the next write replaces it.
    let sim = start_sim(sb.path(), |c| c.adopt_checkpoint = true).await;
    assert!(sim.status().checkpoint.unwrap().writes);
    sim.stop().await.unwrap();
    let cp = verify_file(&sb.join(CHECKPOINT));
    assert_eq!(cp.data.pod_device_entries, None);
}

/// docs/kubelet-versions.md §7 checksum and atomic write: what the sim writes verifies
/// with the kubelet's algorithm, is 0600, leaves no temporary file, and a new sim
/// restores it by pod UID and container.
#[tokio::test]
async fn files_the_sim_writes_verify_and_come_back() {
    let sb = Sandbox::new();
    let sim = start_sim(sb.path(), |_| {}).await;
    assert_eq!(sim.status().checkpoint.unwrap().found, "none");
    let p = FakePlugin::new(FakePlugin::healthy(2, true), Behaviour::default());
    let (_path, _stop) = p.start(sb.path(), "a.sock", GPU).await;
    sim.wait_for_counts(|c| c.get(GPU).is_some_and(|c| c.allocatable == 2), Duration::from_secs(10)).await.unwrap();
    let pod = sim.admit(PodSpec::shorthand("p", "default", &[(GPU.into(), 1)])).await.unwrap();
    assert!(pod.admitted);
    sim.stop().await.unwrap();
    let path = sb.join(CHECKPOINT);
    let cp = verify_file(&path);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    let stray: Vec<_> = std::fs::read_dir(sb.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with('.') && e.file_name() != ".dpctl")
        .map(|e| e.file_name())
        .collect();
    assert!(stray.is_empty(), "temporary files left: {stray:?}");
    let e = &cp.data.pod_device_entries.as_ref().unwrap()[0];
    assert_eq!((e.pod_uid.as_str(), e.container_name.as_str()), (pod.uid.as_str(), "c0"));
    // A new sim on the same directory: its own file, restored and still written.
    let sim = start_sim(sb.path(), |_| {}).await;
    let status = sim.status();
    let c = status.checkpoint.clone().unwrap();
    assert_eq!((c.found.as_str(), c.writes, c.restored_entries), ("valid", true, 1));
    assert_eq!(status.restored_pods[0].uid, pod.uid);
    assert_eq!(status.restored_pods[0].containers[0].devices[GPU], pod.devices("c0", GPU));
    assert_eq!(status.resource(GPU).unwrap().in_use, 1);
    sim.stop().await.unwrap();
    let cp = verify_file(&path);
    assert_eq!(cp.data.pod_device_entries.unwrap()[0].pod_uid, pod.uid, "entries of pods it does not know are kept");
}

/// A pre-1.20 (v1) checkpoint, `DeviceIDs` a plain list, with the checksum
/// the kubelet computes for it (docs/kubelet-versions.md §7).
fn v1_checkpoint() -> Vec<u8> {
    let data = r#"{"PodDeviceEntries":[{"PodUID":"old-pod-uid","ContainerName":"main","ResourceName":"example.com/gpu","DeviceIDs":["GPU-1"],"AllocResp":null}],"RegisteredDevices":{"example.com/gpu":["GPU-0","GPU-1"]}}"#;
    let unsummed = format!(r#"{{"Data":{data},"Checksum":0}}"#);
    let cp = Checkpoint::parse(unsummed.as_bytes(), "v1", LegacyFormat::Accept).unwrap();
    assert_eq!(cp.format(), dpctl::checkpoint::Format::V1);
    let sum = cp.verify().computed;
    let bytes = format!(r#"{{"Data":{data},"Checksum":{sum}}}"#).into_bytes();
    assert!(Checkpoint::parse(&bytes, "v1", LegacyFormat::Accept).unwrap().verify().ok());
    bytes
}

/// docs/kubelet-versions.md §7 "Reading" (1.26-1.30 fall back to the pre-1.20 v1
/// format): a sim playing 1.30 restores a v1 checkpoint's allocations; the
/// file is not the sim's, so it is never rewritten (it may be a real
/// kubelet's), even
/// after the state changes and a kubelet restart.
#[tokio::test]
async fn v1_checkpoint_is_restored_by_1_30_and_never_rewritten() {
    let sb = Sandbox::new();
    let bytes = v1_checkpoint();
    std::fs::write(sb.join(CHECKPOINT), &bytes).unwrap();
    let sim = start_sim(sb.path(), |c| c.set_kubelet_version(KubeletVersion::Release(30))).await;
    let status = sim.status();
    let cp = status.checkpoint.clone().unwrap();
    assert_eq!((cp.found.as_str(), cp.format, cp.restored_entries), ("valid", Some(Format::V1), 1), "{cp:?}");
    assert!(!cp.writes && cp.ownership.contains("--adopt-checkpoint"), "{cp:?}");
    assert_eq!(status.restored_pods.len(), 1);
    assert_eq!(status.restored_pods[0].uid, "old-pod-uid");
    assert_eq!(status.restored_pods[0].containers[0].devices[GPU], ["GPU-1"]);
    let r = status.resource(GPU).expect("restored resource");
    assert_eq!((r.state.as_str(), r.in_use), ("awaiting-registration", 1));
    // Its plugin comes back; the restored device stays taken.
    let p = FakePlugin::new(
        vec![fake_plugin::device("GPU-0", "Healthy", None), fake_plugin::device("GPU-1", "Healthy", None)],
        Behaviour::default(),
    );
    let (_path, _stop) = p.start(sb.path(), "a.sock", GPU).await;
    sim.wait_for_counts(|c| c.get(GPU).is_some_and(|c| c.allocatable == 2), Duration::from_secs(10)).await.unwrap();
    let o = sim.admit(PodSpec::shorthand("new", "default", &[(GPU.into(), 1)])).await.unwrap();
    assert_eq!(o.devices("c0", GPU), ["GPU-0"], "GPU-1 is held by the restored pod: {o:?}");
    sim.restart(Duration::from_millis(300)).await.unwrap();
    sim.stop().await.unwrap();
    assert_eq!(std::fs::read(sb.join(CHECKPOINT)).unwrap(), bytes, "the v1 file is unchanged");
}

/// docs/kubelet-versions.md §7 "Reading" and "Corrupt checkpoint" (1.31+ have no
/// v1 fallback): the v1 file is the JSON error, so a sim playing 1.31 starts
/// with no allocations and no restored resources, as the kubelet does; it
/// keeps the file unless adopted, and adopted, the next write replaces it
/// with the current format, as the kubelet's next write does.
#[tokio::test]
async fn v1_checkpoint_under_1_31_restores_nothing() {
    let sb = Sandbox::new();
    let bytes = v1_checkpoint();
    std::fs::write(sb.join(CHECKPOINT), &bytes).unwrap();
    let sim = start_sim(sb.path(), |c| c.set_kubelet_version(KubeletVersion::Release(31))).await;
    let status = sim.status();
    let cp = status.checkpoint.clone().unwrap();
    assert_eq!(cp.found, "unreadable", "{cp:?}");
    let err = cp.error.clone().unwrap();
    assert!(err.contains("pre-1.20") && err.contains("nothing is restored"), "{err}");
    assert!(status.restored_pods.is_empty() && status.resources.is_empty(), "{status:?}");
    assert!(!cp.writes, "{cp:?}");
    sim.stop().await.unwrap();
    assert_eq!(std::fs::read(sb.join(CHECKPOINT)).unwrap(), bytes, "kept: the sim did not write it");
    // Adopted: the sim writes as the kubelet would, replacing it.
    let sim = start_sim(sb.path(), |c| {
        c.set_kubelet_version(KubeletVersion::Release(31));
        c.adopt_checkpoint = true;
    })
    .await;
    assert!(sim.status().checkpoint.unwrap().writes);
    sim.stop().await.unwrap();
    let cp = verify_file(&sb.join(CHECKPOINT));
    assert_eq!(cp.format(), Format::Current);
    assert_eq!(cp.data.pod_device_entries, None, "nothing was restored, so nothing is written back");
}

/// Waits until the file at `path` contains `needle` (file-system events, bounded).
async fn file_contains(path: &Path, needle: &str) {
    use notify::Watcher;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut w = notify::recommended_watcher(move |e| {
        let _ = tx.send(e);
    })
    .unwrap();
    w.watch(path.parent().unwrap(), notify::RecursiveMode::NonRecursive).unwrap();
    within("the checkpoint write", async {
        while !std::fs::read_to_string(path).is_ok_and(|s| s.contains(needle)) {
            let _ = rx.recv().await.expect("watcher");
        }
    })
    .await;
}

/// `dpctl kubelet-sim admit` of one GPU pod named `name` (exit 0 asserted).
async fn admit_one(dir: &str, name: &str) -> crate::support::Run {
    let r =
        dpctl(&["kubelet-sim", "admit", "--dir", dir, "--allocate", "example.com/gpu=1", "--name", name, "-o", "json"])
            .await;
    r.expect_code(0);
    r
}

fn admitted_device(stdout: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    v["containers"][0]["resources"][0]["devices"][0].as_str().unwrap_or_else(|| panic!("no device in {v}")).to_string()
}

/// A sim killed with devices handed out must not hand them out again when it
/// restarts (docs/kubelet-versions.md §7: restored allocations are in use):
/// admit, kill -9 the sim, start a new one on the directory, admit again ->
/// a different device, and the checkpoint lists each device once.
#[tokio::test]
async fn devices_are_not_handed_out_twice_after_the_sim_is_killed() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    let mut sim =
        Child::dpctl(&["kubelet-sim", "-o", "json", "--dial-timeout", "2s", "--dir", sb.path().to_str().unwrap()]);
    sim.event("started").await;
    let p = FakePlugin::new(FakePlugin::healthy(2, false), Behaviour::default());
    let stop = p.serve(&sb.join("a.sock")).await;
    register(&sb.join("kubelet.sock"), "v1beta1", GPU, "a.sock", None).await.unwrap();
    sim.event("snapshot").await;
    let first = admit_one(dir, "one").await;
    let first_dev = admitted_device(&first.stdout);
    let uid = first.json()["uid"].as_str().unwrap().to_string();
    file_contains(&sb.join(CHECKPOINT), &uid).await;
    sim.kill().await; // SIGKILL: no clean stop, no last write
    drop(stop);
    let mut sim =
        Child::dpctl(&["kubelet-sim", "-o", "json", "--dial-timeout", "2s", "--dir", sb.path().to_str().unwrap()]);
    let read = sim.event("checkpoint_read").await;
    assert_eq!(read["checkpoint"]["found"], "valid", "{read}");
    sim.event("started").await;
    let _stop = p.serve(&sb.join("a.sock")).await;
    register(&sb.join("kubelet.sock"), "v1beta1", GPU, "a.sock", None).await.unwrap();
    sim.event("snapshot").await;
    let second = admit_one(dir, "two").await;
    assert_ne!(admitted_device(&second.stdout), first_dev, "the checkpointed device was handed out again");
    let status = dpctl(&["kubelet-sim", "status", "--dir", dir, "-o", "json"]).await;
    let status = status.json();
    assert_eq!(status["restored_pods"][0]["uid"], uid.as_str(), "{status}");
    assert_eq!(status["resources"][0]["in_use"], 2);
    let text = dpctl(&["kubelet-sim", "status", "--dir", dir]).await;
    assert!(text.stdout.contains(&format!("uid {uid} (checkpoint)")), "{}", text.stdout);
    // SIGTERM: a clean stop writes the checkpoint a last time.
    sim.terminate();
    sim.wait().await;
    let cp = verify_file(&sb.join(CHECKPOINT));
    let mut ids: Vec<String> = cp.data.pod_device_entries.unwrap().iter().flat_map(|e| e.device_ids.ids()).collect();
    ids.sort();
    assert_eq!(ids, ["dev-0", "dev-1"], "each device once");
}

/// An operator must be able to tell whether the next kubelet start will accept
/// the file: `checkpoint verify` passes both real kubelets' files and fails a
/// modified one with stored vs computed (docs/kubelet-versions.md §7); read-only.
#[tokio::test]
async fn checkpoint_verify_passes_real_files_and_fails_a_modified_one() {
    let sb = Sandbox::new();
    for (name, bytes, sum) in [("a", GPUOPS, "3952659280"), ("b", TEGRA, "3660592824")] {
        let path = sb.join(name);
        std::fs::write(&path, bytes).unwrap();
        let r = dpctl(&["checkpoint", "verify", path.to_str().unwrap()]).await;
        r.expect_code(0);
        assert!(r.stdout.contains(&format!("stored {sum} = computed {sum}")), "{}", r.stdout);
        let mut changed = bytes.to_vec();
        let i = changed.windows(2).position(|w| w == b"\"]").unwrap() - 1; // last byte of a device ID
        changed[i] ^= 0x01;
        std::fs::write(&path, &changed).unwrap();
        let r = dpctl(&["checkpoint", "verify", path.to_str().unwrap(), "-o", "json"]).await;
        r.expect_code(1);
        let v = r.json();
        assert_eq!(v["stored_checksum"].to_string(), sum);
        assert_ne!(v["computed_checksum"], v["stored_checksum"]);
        assert!(v["meaning"].as_str().unwrap().contains("restores nothing"), "{v}");
        assert_eq!(std::fs::read(&path).unwrap(), changed, "verify never writes");
    }
    // Default path from --dir; a missing file is bad input.
    let r = dpctl(&["checkpoint", "verify", "--dir", sb.path().to_str().unwrap()]).await;
    r.expect_code(2);
    assert!(r.stderr.contains("kubelet_internal_checkpoint") && r.stderr.contains("no such file"), "{}", r.stderr);
    // docs/kubelet-versions.md §7: the pre-1.20 layout is named.
    let v1 = sb.join("v1");
    std::fs::write(&v1, br#"{"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c","ResourceName":"r","DeviceIDs":["a"],"AllocResp":null}],"RegisteredDevices":{"r":["a"]}},"Checksum":0}"#).unwrap();
    let r = dpctl(&["checkpoint", "verify", v1.to_str().unwrap()]).await;
    assert!(r.stdout.contains("pre-1.20") && r.stdout.contains("1.31"), "{}", r.stdout);
}

/// An operator must see who holds which device as the kubelet records it:
/// `checkpoint show` decodes each stored Allocate answer and lists
/// devices per NUMA node and the registered devices.
#[tokio::test]
async fn checkpoint_show_decodes_entries() {
    let sb = Sandbox::new();
    std::fs::write(sb.join(CHECKPOINT), TEGRA).unwrap();
    let r = dpctl(&["checkpoint", "show", "--dir", sb.path().to_str().unwrap(), "-o", "json"]).await;
    r.expect_code(0);
    let v = r.json();
    assert_eq!(v["verifies"], true);
    let e = &v["entries"][0];
    assert_eq!(e["pod_uid"], "bf52b2cd-b611-4e79-86b1-280b283185c3");
    assert_eq!(e["devices_per_numa"]["-1"], serde_json::json!(["tegra"]));
    assert_eq!(e["allocation"]["envs"]["NVIDIA_VISIBLE_DEVICES"], "tegra");
    assert_eq!(v["registered_devices"]["nvidia.com/gpu"], serde_json::json!(["tegra"]));
    let r = dpctl(&["checkpoint", "show", "--dir", sb.path().to_str().unwrap()]).await;
    r.expect_code(0);
    assert!(r.stdout.contains("NVIDIA_VISIBLE_DEVICES") && r.stdout.contains("nvidia.com/gpu"), "{}", r.stdout);
    assert_eq!(std::fs::read(sb.join(CHECKPOINT)).unwrap(), TEGRA);
}

/// A checkpoint over dpctl's 64 MiB limit is refused before it is read
/// (exit 2, saying so); the size is what the file system reports.
#[tokio::test]
async fn checkpoint_over_64_mib_is_refused() {
    let sb = Sandbox::new();
    let big = sb.join(CHECKPOINT);
    std::fs::File::create(&big).unwrap().set_len(64 * 1024 * 1024 + 1).unwrap();
    for cmd in ["show", "verify"] {
        let r = dpctl(&["checkpoint", cmd, big.to_str().unwrap()]).await;
        r.expect_code(2);
        assert!(r.stderr.contains("67108865 bytes is over the 64 MiB"), "{}", r.stderr);
    }
}

/// `checkpoint show` with a 4 MiB device ID: the table cuts the ID and says
/// how long it is (the table layout was quadratic in a cell's length: 3.2 s
/// for 4 MiB), JSON keeps all of it.
#[tokio::test]
async fn checkpoint_show_cuts_huge_ids_in_the_table_only() {
    let sb = Sandbox::new();
    let id = "A".repeat(4 * 1024 * 1024);
    let text = format!(
        "{{\"Data\":{{\"PodDeviceEntries\":[{{\"PodUID\":\"u\",\"ContainerName\":\"c\",\"ResourceName\":\"r\",\
         \"DeviceIDs\":{{\"-1\":[\"{id}\"]}},\"AllocResp\":null}}],\"RegisteredDevices\":{{\"r\":[\"{id}\"]}}}},\"Checksum\":1}}"
    );
    let path = sb.join(CHECKPOINT);
    std::fs::write(&path, text).unwrap();
    let r = dpctl(&["checkpoint", "show", path.to_str().unwrap()]).await;
    r.expect_code(0);
    assert_eq!(r.stdout.matches("…(4194304 bytes)").count(), 2, "{}", &r.stdout[..r.stdout.len().min(2000)]);
    assert!(r.stdout.len() < 10_000, "{} bytes of table", r.stdout.len());
    let j = dpctl(&["checkpoint", "show", path.to_str().unwrap(), "-o", "json"]).await;
    assert_eq!(j.json()["entries"][0]["devices_per_numa"]["-1"][0].as_str().map(str::len), Some(id.len()));
}

/// With a read-only checkpoint (a real kubelet's), the sim keeps the pods it
/// admits in its own file under `.dpctl/`, says so at admit time, and a sim
/// killed right after the answer has them back at its next start; the
/// foreign file is never changed. Every version: the sim's own file.
#[tokio::test]
async fn admissions_under_a_foreign_checkpoint_survive_a_kill() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    let foreign = "{\"Data\":{\"PodDeviceEntries\":null,\"RegisteredDevices\":{}},\"Checksum\":3467439661}\n";
    std::fs::write(sb.join(CHECKPOINT), foreign).unwrap();
    let start = || Child::dpctl(&["kubelet-sim", "-o", "json", "--dial-timeout", "2s", "--force", "--dir", dir]);
    let mut sim = start();
    let read_only = sim.event("checkpoint_read_only").await;
    assert!(read_only["reason"].as_str().unwrap().contains(".dpctl/kubelet-sim-allocations"), "{read_only}");
    sim.event("started").await;
    let p = FakePlugin::new(FakePlugin::healthy(2, false), Behaviour::default());
    let stop = p.serve(&sb.join("a.sock")).await;
    register(&sb.join("kubelet.sock"), "v1beta1", GPU, "a.sock", None).await.unwrap();
    sim.event("snapshot").await;
    let first = admit_one(dir, "one").await;
    let v = first.json();
    assert!(v["kept_in"].as_str().unwrap().ends_with(".dpctl/kubelet-sim-allocations (the checkpoint is read-only for the sim; it is restored from there at start)"), "{v}");
    let text = dpctl(&["kubelet-sim", "admit", "--dir", dir, "--allocate", "example.com/gpu=1", "--name", "two"]).await;
    assert!(text.stdout.contains("recorded in ") && text.stdout.contains("kubelet-sim-allocations"), "{}", text.stdout);
    sim.kill().await; // at once, no clean stop
    drop(stop);
    let mut sim = start();
    sim.event("started").await;
    let status = dpctl(&["kubelet-sim", "status", "--dir", dir, "-o", "json"]).await.json();
    let uids: Vec<&str> =
        status["restored_pods"].as_array().unwrap().iter().map(|p| p["uid"].as_str().unwrap()).collect();
    assert!(uids.contains(&v["uid"].as_str().unwrap()), "{status}");
    assert_eq!(uids.len(), 2, "{status}");
    assert_eq!(status["checkpoint"]["journal_entries"], 2, "{status}");
    sim.terminate();
    sim.wait().await;
    assert_eq!(std::fs::read_to_string(sb.join(CHECKPOINT)).unwrap(), foreign, "the foreign checkpoint is untouched");
}

/// At start the sim deletes the temporary files its own interrupted writes
/// left (named with the tag its record holds), and nothing else: not a
/// kubelet's `.NNN` temporary, not a file with another tag, not a link
/// named like its own.
#[tokio::test]
async fn leftover_temporaries_of_the_sim_are_deleted_and_only_those() {
    let sb = Sandbox::new();
    let dir = sb.path().to_str().unwrap();
    let mut sim = Child::dpctl(&["kubelet-sim", "-o", "json", "--dir", dir]);
    sim.event("started").await;
    // A SIGTERM right after "started" must find the handler installed (on a
    // loaded machine it once killed the sim before it wrote its record).
    sim.terminate();
    assert_eq!(sim.wait().await, 0, "SIGTERM right after start ends the sim cleanly");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sb.join(".dpctl/kubelet-sim-checkpoint.json")).unwrap()).unwrap();
    let tag = record["tmp_tag"].as_str().expect("the record holds the tag").to_string();
    let ours = sb.join(&format!(".{CHECKPOINT}.dpctl-{tag}-a1b2c3.tmp"));
    let ours_in_ctl = sb.join(".dpctl/.kubelet-sim-allocations.dpctl-0123-zz9.tmp");
    let keep = [
        sb.join(".123456789"),
        sb.join(&format!(".{CHECKPOINT}.dpctl-ffff-a1b2c3.tmp")),
        sb.join(".dpctl/.unrelated.dpctl-0123-x.tmp"),
    ];
    for p in keep.iter().chain([&ours, &ours_in_ctl]) {
        std::fs::write(p, "x").unwrap();
    }
    let link = sb.join(&format!(".{CHECKPOINT}.dpctl-{tag}-link00.tmp"));
    std::os::unix::fs::symlink(&keep[0], &link).unwrap();
    let mut sim = Child::dpctl(&["kubelet-sim", "-o", "json", "--dir", dir]);
    sim.event("started").await;
    assert!(!ours.exists() && !ours_in_ctl.exists(), "the sim's own leftovers are deleted");
    for p in &keep {
        assert!(p.exists(), "{} kept", p.display());
    }
    assert!(std::fs::symlink_metadata(&link).is_ok(), "a link named like the sim's temporaries is kept");
    sim.terminate();
    sim.wait().await;
}
