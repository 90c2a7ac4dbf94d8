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

/// Two entries and two registered resources: go-spew separates slice
/// elements and map entries with one space. The checksum is what the
/// kubelet's `checkpointmanager/checksum` (k8s.io/utils `dump.ForHash`, then
/// FNV-32a) gives for the same Go value; it holds for 1.20+ (the v2 layout).
#[test]
fn two_entries_and_two_resources_hash_as_the_kubelet_hashes_them() {
    let entry = |c: &str, r: &str, ids: BTreeMap<i64, Option<Vec<String>>>, resp: Option<Vec<u8>>| PodDevicesEntry {
        pod_uid: "uid-1".into(),
        container_name: c.into(),
        resource_name: r.into(),
        device_ids: DeviceIds::PerNuma(Some(ids)),
        alloc_resp: resp,
    };
    let v = |ids: &[&str]| Some(ids.iter().map(ToString::to_string).collect::<Vec<_>>());
    let data = CheckpointData {
        pod_device_entries: Some(vec![
            entry("c0", "example.com/a", BTreeMap::from([(0, v(&["A0", "A1"])), (1, v(&["A2"]))]), Some(vec![1, 2])),
            entry("c1", "example.com/b", BTreeMap::from([(-1, v(&["B0"]))]), None),
        ]),
        registered_devices: Some(BTreeMap::from([
            ("example.com/b".to_string(), v(&["B0", "B1"])),
            ("example.com/a".to_string(), v(&["A0", "A1", "A2"])),
        ])),
    };
    assert_eq!(
        spew::spew_text(&data),
        "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)[{PodUID:(string)uid-1 \
         ContainerName:(string)c0 ResourceName:(string)example.com/a DeviceIDs:(checkpoint.DevicesPerNUMA)\
         map[0:[A0 A1] 1:[A2]] AllocResp:([]uint8)[1 2]} {PodUID:(string)uid-1 ContainerName:(string)c1 \
         ResourceName:(string)example.com/b DeviceIDs:(checkpoint.DevicesPerNUMA)map[-1:[B0]] \
         AllocResp:([]uint8)<nil>}] RegisteredDevices:(map[string][]string)map[example.com/a:[A0 A1 A2] \
         example.com/b:[B0 B1]]}"
    );
    assert_eq!(spew::checksum(&data), 2_680_277_395);
    let cp = Checkpoint::new(data);
    let json = String::from_utf8(cp.to_json()).unwrap();
    assert!(
        json.contains(
            r#""RegisteredDevices":{"example.com/a":["A0","A1","A2"],"example.com/b":["B0","B1"]}},"Checksum":2680277395}"#
        ),
        "{json}"
    );
    assert!(json.contains(r#""AllocResp":"AQI="},{"PodUID":"uid-1","ContainerName":"c1""#), "{json}");
    assert!(json.contains(r#""DeviceIDs":{"0":["A0","A1"],"1":["A2"]}"#), "{json}");
    assert_eq!(parse(json.as_bytes()), cp);
}

/// A stored Allocate answer (`AllocResp`, a `[]byte`) is base64 in the file;
/// Go's decoder skips `\r` and `\n` inside it (encoding/base64), so a file
/// with wrapped base64 still loads, and is written back unwrapped.
#[test]
fn alloc_resp_base64_skips_line_breaks_as_go_does() {
    let file = |b64: &str| {
        format!(
            r#"{{"Data":{{"PodDeviceEntries":[{{"PodUID":"u","ContainerName":"c","ResourceName":"r","DeviceIDs":null,"AllocResp":"{b64}"}}]}},"Checksum":0}}"#
        )
    };
    for b64 in ["GgA=", r"Gg\nA=", r"Gg\rA=", r"Gg\r\nA=\n", r"\n\rGgA="] {
        let cp = parse(file(b64).as_bytes());
        let e = &cp.data.pod_device_entries.as_ref().unwrap()[0];
        assert_eq!(e.alloc_resp, Some(vec![0x1a, 0x00]), "{b64}");
        assert!(String::from_utf8(cp.to_json()).unwrap().contains(r#""AllocResp":"GgA=""#), "{b64}");
    }
    let empty = parse(file("").as_bytes());
    assert_eq!(empty.data.pod_device_entries.unwrap()[0].alloc_resp, Some(vec![]));
    // Other whitespace is not skipped: refused, naming the field.
    let err = Checkpoint::parse(file("Gg A=").as_bytes(), "f", LegacyFormat::Refuse).unwrap_err().to_string();
    assert!(err.contains("Data.PodDeviceEntries[0].AllocResp: not base64"), "{err}");
}

/// A value of the wrong JSON kind is refused naming the field, the kind
/// found and the Go type wanted (as encoding/json's UnmarshalTypeError does).
#[test]
fn wrong_json_kinds_name_the_field_the_kind_and_the_go_type() {
    let cases: &[(&str, &str)] = &[
        (r#"[]"#, "cannot unmarshal array into Go value of type checkpoint.Data"),
        (r#"{"Data":true}"#, "Data: cannot unmarshal bool into Go value of type checkpoint.checkpointData"),
        (
            r#"{"Data":{"PodDeviceEntries":{}}}"#,
            "Data.PodDeviceEntries: cannot unmarshal object into Go value of type []checkpoint.PodDevicesEntry",
        ),
        (
            r#"{"Data":{"PodDeviceEntries":["x"]}}"#,
            "Data.PodDeviceEntries[0]: cannot unmarshal string into Go value of type checkpoint.PodDevicesEntry",
        ),
        (
            r#"{"Data":{"PodDeviceEntries":[{"PodUID":5}]}}"#,
            "Data.PodDeviceEntries[0].PodUID: cannot unmarshal number into Go value of type string",
        ),
        (
            r#"{"Data":{"PodDeviceEntries":[{"AllocResp":true}]}}"#,
            "Data.PodDeviceEntries[0].AllocResp: cannot unmarshal bool into Go value of type []uint8",
        ),
        (
            r#"{"Data":{"PodDeviceEntries":[{"DeviceIDs":"x"}]}}"#,
            "Data.PodDeviceEntries[0].DeviceIDs: cannot unmarshal string into Go value of type checkpoint.DevicesPerNUMA",
        ),
        (
            r#"{"Data":{"PodDeviceEntries":[{"DeviceIDs":{"0":[null,{}]}}]}}"#,
            "Data.PodDeviceEntries[0].DeviceIDs.0[1]: cannot unmarshal object into Go value of type string",
        ),
        (
            r#"{"Data":{"RegisteredDevices":[]}}"#,
            "Data.RegisteredDevices: cannot unmarshal array into Go value of type map[string][]string",
        ),
        (
            r#"{"Data":{"RegisteredDevices":{"r":"a"}}}"#,
            "Data.RegisteredDevices.r: cannot unmarshal string into Go value of type []string",
        ),
        (r#"{"Checksum":"1"}"#, "Checksum: cannot unmarshal string into Go value of type uint64"),
    ];
    for (json, want) in cases {
        let err = Checkpoint::parse(json.as_bytes(), "f", LegacyFormat::Refuse).unwrap_err().to_string();
        assert!(err.contains(want), "{json}: {err}");
    }
}

/// encoding/json writes control characters below U+0020 as `\u00XX` (other
/// than `\n`, `\r`, `\t`, `\b`, `\f`), and the space and DEL as they are.
#[test]
fn control_characters_are_escaped_as_go_escapes_them() {
    let data = CheckpointData {
        pod_device_entries: None,
        registered_devices: Some(BTreeMap::from([("\u{1}\u{1f} \u{7f}\t\u{8}\u{c}".to_string(), None)])),
    };
    let json = String::from_utf8(Checkpoint::new(data.clone()).to_json()).unwrap();
    assert!(json.contains("{\"\\u0001\\u001f \u{7f}\\t\\b\\f\":null}"), "{json}");
    assert_eq!(parse(json.as_bytes()).data, data);
}
