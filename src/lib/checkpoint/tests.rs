//! Tests of the checkpoint format against files real kubelets wrote and the
//! synthetic vectors of docs/kubelet-versions.md §7.

use super::*;

const GPUOPS: &[u8] = include_bytes!("../../../tests/data/checkpoints/kubelet-gpuops-doc.json");
const TEGRA: &[u8] = include_bytes!("../../../tests/data/checkpoints/kubelet-kind-tegra.json");

fn parse(bytes: &[u8]) -> Checkpoint {
    Checkpoint::parse(bytes, "test", LegacyFormat::Refuse).unwrap()
}

/// docs/kubelet-versions.md §7: a real kubelet's file (no pod entries, `null`) verifies: 3952659280.
#[test]
fn real_kubelet_file_without_pods_verifies() {
    let cp = parse(GPUOPS);
    assert_eq!(cp.checksum, 3_952_659_280);
    assert_eq!(cp.computed_checksum(), 3_952_659_280);
    assert!(cp.verify().ok());
    assert_eq!(cp.format(), Format::Current);
    assert_eq!(cp.data.pod_device_entries, None);
}

/// docs/kubelet-versions.md §7: a real kubelet's file with one pod entry verifies: 3660592824,
/// and go-spew's text is the rendering the kubelet hashed (docs/kubelet-versions.md §7).
#[test]
fn real_kubelet_file_with_a_pod_verifies_and_prints_as_go_spew() {
    let cp = parse(TEGRA);
    assert_eq!(cp.checksum, 3_660_592_824);
    assert_eq!(cp.computed_checksum(), 3_660_592_824);
    assert_eq!(
        spew::spew_text(&cp.data),
        "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)[{PodUID:(string)\
         bf52b2cd-b611-4e79-86b1-280b283185c3 ContainerName:(string)check ResourceName:(string)nvidia.com/gpu \
         DeviceIDs:(checkpoint.DevicesPerNUMA)map[-1:[tegra]] AllocResp:([]uint8)[10 31 10 22 78 86 73 68 73 65 \
         95 86 73 83 73 66 76 69 95 68 69 86 73 67 69 83 18 5 116 101 103 114 97]}] \
         RegisteredDevices:(map[string][]string)map[nvidia.com/gpu:[tegra]]}"
    );
}

/// The writer reproduces both real files byte for byte (encoding/json layout).
#[test]
fn writes_real_kubelet_files_byte_for_byte() {
    assert_eq!(String::from_utf8(parse(GPUOPS).to_json()).unwrap(), String::from_utf8(GPUOPS.to_vec()).unwrap());
    assert_eq!(String::from_utf8(parse(TEGRA).to_json()).unwrap(), String::from_utf8(TEGRA.to_vec()).unwrap());
}

/// docs/kubelet-versions.md §7 synthetic vector: `{"PodDeviceEntries":null,"RegisteredDevices":{}}` -> 3467439661.
#[test]
fn synthetic_vector_empty_registered_devices() {
    let data = CheckpointData { pod_device_entries: None, registered_devices: Some(BTreeMap::new()) };
    assert_eq!(spew::checksum(&data), 3_467_439_661);
    let cp = parse(br#"{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}},"Checksum":3467439661}"#);
    assert!(cp.verify().ok());
}

/// docs/kubelet-versions.md §7 synthetic vector: one entry uid-1/c0/example.com/resource,
/// DeviceIDs {-1:[Dev-1]}, AllocResp [0x1a,0x00], two registered devices -> 3198519509.
#[test]
fn synthetic_vector_one_entry() {
    let data = CheckpointData {
        pod_device_entries: Some(vec![PodDevicesEntry {
            pod_uid: "uid-1".into(),
            container_name: "c0".into(),
            resource_name: "example.com/resource".into(),
            device_ids: DeviceIds::PerNuma(Some(BTreeMap::from([(-1, Some(vec!["Dev-1".to_string()]))]))),
            alloc_resp: Some(vec![0x1a, 0x00]),
        }]),
        registered_devices: Some(BTreeMap::from([(
            "example.com/resource".to_string(),
            Some(vec!["Dev-1".to_string(), "Dev-2".to_string()]),
        )])),
    };
    let cp = Checkpoint::new(data);
    assert_eq!(cp.checksum, 3_198_519_509);
    // And it survives our JSON and the kubelet's reading of it.
    assert_eq!(parse(&cp.to_json()), cp);
}

/// docs/kubelet-versions.md §7: one changed byte makes a real file corrupt, stored vs computed named.
#[test]
fn one_byte_changed_is_corrupt_in_both_real_files() {
    for (file, at) in [(GPUOPS, "GPU-0650a168"), (TEGRA, "tegra\"]}}")] {
        let text = String::from_utf8(file.to_vec()).unwrap();
        let i = text.find(at).unwrap();
        let mut bytes = file.to_vec();
        bytes[i] = if bytes[i] == b'G' { b'H' } else { b'u' };
        let v = parse(&bytes).verify();
        assert!(!v.ok(), "{}", String::from_utf8_lossy(&bytes));
        assert_ne!(v.stored, v.computed);
    }
}

/// docs/kubelet-versions.md §7 "nil vs empty matters": null and [] hash differently and round-trip.
#[test]
fn nil_and_empty_stay_apart() {
    let null = parse(br#"{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{"a/b":null}},"Checksum":0}"#);
    let empty = parse(br#"{"Data":{"PodDeviceEntries":[],"RegisteredDevices":{"a/b":[]}},"Checksum":0}"#);
    assert!(spew::spew_text(&null.data).contains("([]checkpoint.PodDevicesEntry)<nil>"));
    assert!(spew::spew_text(&null.data).contains("map[a/b:<nil>]"));
    assert!(spew::spew_text(&empty.data).contains("([]checkpoint.PodDevicesEntry)[] "));
    assert_ne!(null.computed_checksum(), empty.computed_checksum());
    assert_eq!(null.to_json(), br#"{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{"a/b":null}},"Checksum":0}"#);
    assert_eq!(empty.to_json(), br#"{"Data":{"PodDeviceEntries":[],"RegisteredDevices":{"a/b":[]}},"Checksum":0}"#);
}

/// go-spew sorts int64 map keys numerically; encoding/json sorts them as text.
#[test]
fn numa_keys_sort_numerically_in_spew_and_as_text_in_json() {
    let cp = parse(
        br#"{"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c","ResourceName":"r","DeviceIDs":{"10":["x"],"2":["y"],"-1":["z"]},"AllocResp":""}],"RegisteredDevices":{}},"Checksum":0}"#,
    );
    let text = spew::spew_text(&cp.data);
    assert!(text.contains("map[-1:[z] 2:[y] 10:[x]]"), "{text}");
    assert!(text.contains("AllocResp:([]uint8)[]}"), "{text}");
    let json = String::from_utf8(cp.to_json()).unwrap();
    assert!(json.contains(r#""DeviceIDs":{"-1":["z"],"10":["x"],"2":["y"]}"#), "{json}");
}

/// Strings go into go-spew raw and into JSON escaped as Go escapes them.
#[test]
fn strings_are_raw_in_spew_and_go_escaped_in_json() {
    let data = CheckpointData {
        pod_device_entries: None,
        registered_devices: Some(BTreeMap::from([("a<b>&\"c\" d\n".to_string(), Some(vec!["x\u{2028}".into()]))])),
    };
    assert!(spew::spew_text(&data).contains("map[a<b>&\"c\" d\n:[x\u{2028}]]"));
    let json = String::from_utf8(Checkpoint::new(data.clone()).to_json()).unwrap();
    assert!(json.contains(r#""a\u003cb\u003e\u0026\"c\" d\n":["x\u2028"]"#), "{json}");
    assert_eq!(parse(json.as_bytes()).data, data);
}

/// docs/kubelet-versions.md §7: the pre-1.20 v1 layout is read up to 1.30 and refused from 1.31.
#[test]
fn pre_1_20_format_is_recognised_and_named() {
    let v1 = br#"{"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c","ResourceName":"r","DeviceIDs":["a","b"],"AllocResp":null}],"RegisteredDevices":{"r":["a","b"]}},"Checksum":1}"#;
    let err = Checkpoint::parse(v1, "f", LegacyFormat::Refuse).unwrap_err().to_string();
    assert!(err.contains("pre-1.20") && err.contains("DeviceIDs"), "{err}");
    let cp = Checkpoint::parse(v1, "f", LegacyFormat::Accept).unwrap();
    assert_eq!(cp.format(), Format::V1);
    assert!(spew::spew_text(&cp.data).contains("DeviceIDs:([]string)[a b] AllocResp:([]uint8)<nil>"));
    assert_eq!(cp.to_json(), v1.to_vec());
    let e = &cp.data.pod_device_entries.as_ref().unwrap()[0];
    assert_eq!(e.device_ids.per_numa()[&-1], ["a", "b"]);
}

/// Bad input names what is wrong and where.
#[test]
fn bad_input_names_the_field() {
    let err =
        Checkpoint::parse(br#"{"Data":{"PodDeviceEntries":[{"DeviceIDs":{"x":[]}}]}}"#, "f", LegacyFormat::Refuse)
            .unwrap_err()
            .to_string();
    assert!(err.contains("Data.PodDeviceEntries[0].DeviceIDs") && err.contains("int64"), "{err}");
    let err = Checkpoint::parse(br#"{"Checksum":-1}"#, "f", LegacyFormat::Refuse).unwrap_err().to_string();
    assert!(err.contains("Checksum") && err.contains("uint64"), "{err}");
    let err = Checkpoint::parse(b"{", "f", LegacyFormat::Refuse).unwrap_err().to_string();
    assert!(err.contains("invalid JSON"), "{err}");
    // Go matches field names case-insensitively and leaves missing ones at zero.
    let cp = parse(br#"{"data":{"registereddevices":{"r":["a"]}},"checksum":7}"#);
    assert_eq!(cp.checksum, 7);
    assert_eq!(cp.data.pod_device_entries, None);
}

/// docs/kubelet-versions.md §7 atomic write: same-directory `.` temp file, 0600, renamed over the target.
#[test]
fn atomic_write_leaves_one_0600_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubelet_internal_checkpoint");
    std::fs::write(&path, b"old").unwrap();
    let cp = parse(TEGRA);
    cp.write(&path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), TEGRA);
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["kubelet_internal_checkpoint"]);
}

/// `ids` keeps NUMA-key order and lists an ID on two nodes once (now with a
/// set; 100,000 IDs in one entry took minutes with a list lookup per ID).
#[test]
fn ids_are_unique_in_numa_order_at_scale() {
    let many: Vec<String> = (0..100_000).map(|i| format!("G{i}")).collect();
    let m = BTreeMap::from([(1, Some(vec!["B".to_string(), "A".to_string()])), (0, Some(many.clone())), (2, None)]);
    let ids = DeviceIds::PerNuma(Some(m)).ids();
    assert_eq!(ids.len(), 100_002);
    assert_eq!(&ids[..2], ["G0", "G1"]);
    assert_eq!(&ids[100_000..], ["B", "A"]);
    let dup = BTreeMap::from([(0, Some(vec!["A".to_string()])), (1, Some(vec!["A".to_string(), "C".to_string()]))]);
    assert_eq!(DeviceIds::PerNuma(Some(dup)).ids(), ["A", "C"]);
}
