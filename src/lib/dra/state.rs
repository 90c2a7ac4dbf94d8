//! The kubelet DRA manager's checkpoint, `<kubelet root>/dra_manager_state`
//! (read-only here). Layout, the same in 1.34 to 1.37 (docs/dra.md §4):
//! `{"Data":"<JSON text>","Checksum":<uint32>}`, where `Checksum` is
//! CRC-32 (IEEE) over the bytes of `Data`, and `Data` is
//! `{"kind":"DRACheckpoint","apiVersion":"checkpoint.dra.kubelet.k8s.io/v1","ClaimInfoStateList":[...]}`.
//! Each entry: `ClaimUID`, `ClaimName`, `Namespace`, `PodUIDs` (a set as a
//! map to `{}`), `DriverState` (driver → `Devices` and, from 1.37,
//! `skipNodeOperations`); each device: `PoolName`, `DeviceName`, `ShareID`
//! (1.35+, `null` when unset), `RequestNames`, `CDIDeviceIDs`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The checkpoint's file name in the kubelet's root directory.
pub const FILE_NAME: &str = "dra_manager_state";
/// `kind` in `Data`.
pub const KIND: &str = "DRACheckpoint";
/// `apiVersion` in `Data`.
pub const API_VERSION: &str = "checkpoint.dra.kubelet.k8s.io/v1";

/// CRC-32 with the IEEE polynomial (Go's `crc32.ChecksumIEEE`).
pub fn crc32_ieee(bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 == 1 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    };
    !bytes.iter().fold(!0u32, |c, &b| TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8))
}

/// One device of a claim, as checkpointed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    /// `PoolName`.
    #[serde(rename = "PoolName", default)]
    pub pool_name: String,
    /// `DeviceName`.
    #[serde(rename = "DeviceName", default)]
    pub device_name: String,
    /// `ShareID`: absent before 1.35; `null` when unset.
    #[serde(rename = "ShareID", default, skip_serializing_if = "Option::is_none")]
    pub share_id: Option<Option<String>>,
    /// `RequestNames` (`null` = none).
    #[serde(rename = "RequestNames", default)]
    pub request_names: Option<Vec<String>>,
    /// `CDIDeviceIDs` (`null` = none).
    #[serde(rename = "CDIDeviceIDs", default)]
    pub cdi_device_ids: Option<Vec<String>>,
}

/// One driver's part of a claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverState {
    /// `Devices`.
    #[serde(rename = "Devices", default)]
    pub devices: Option<Vec<Device>>,
    /// `skipNodeOperations` (1.37+).
    #[serde(rename = "skipNodeOperations", default, skip_serializing_if = "Option::is_none")]
    pub skip_node_operations: Option<Vec<String>>,
}

/// One prepared (or being prepared) claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimState {
    /// `ClaimUID`.
    #[serde(rename = "ClaimUID", default)]
    pub claim_uid: String,
    /// `ClaimName`.
    #[serde(rename = "ClaimName", default)]
    pub claim_name: String,
    /// `Namespace`.
    #[serde(rename = "Namespace", default)]
    pub namespace: String,
    /// `PodUIDs`: the pods using it.
    #[serde(rename = "PodUIDs", default)]
    pub pod_uids: Option<BTreeMap<String, serde_json::Value>>,
    /// `DriverState`: per driver.
    #[serde(rename = "DriverState", default)]
    pub driver_state: Option<BTreeMap<String, DriverState>>,
}

/// What a read found.
#[derive(Debug, Clone, Serialize)]
pub struct StateReport {
    /// The file.
    pub file: std::path::PathBuf,
    /// `Checksum` as stored.
    pub stored_checksum: u32,
    /// CRC-32 of `Data` as computed.
    pub computed_checksum: u32,
    /// Stored equals computed.
    pub checksum_ok: bool,
    /// `kind` in `Data`.
    pub kind: String,
    /// `apiVersion` in `Data`.
    pub api_version: String,
    /// The key the list was under (`ClaimInfoStateList`, or `Entries`).
    pub list_key: Option<String>,
    /// The entries (in file order, which is Go map order: random).
    pub claims: Vec<ClaimState>,
    /// Release hints from the fields present (`ShareID`: 1.35+; `skipNodeOperations`: 1.37+).
    pub written_by: String,
    /// Problems the kubelet would have with the file, each a sentence.
    pub problems: Vec<String>,
}

#[derive(Deserialize)]
struct Outer {
    #[serde(rename = "Data")]
    data: String,
    #[serde(rename = "Checksum")]
    checksum: u64,
}

/// `Data`, as far as it is judged here.
#[derive(Deserialize)]
struct Data {
    #[serde(default)]
    kind: Option<String>,
    #[serde(rename = "apiVersion", default)]
    api_version: Option<String>,
    #[serde(rename = "ClaimInfoStateList", default, deserialize_with = "present")]
    claim_info_state_list: Option<Option<Vec<ClaimState>>>,
    #[serde(rename = "Entries", default, deserialize_with = "present")]
    entries: Option<Option<Vec<ClaimState>>>,
}

/// A key that is present, `null` included (Go writes an empty list as `null`).
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> std::result::Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// Reads and judges the file; an unreadable or non-checkpoint file is bad input.
pub fn read(path: &Path) -> Result<StateReport> {
    parse(path, &read_text(path)?)
}

/// The file's text: a file that cannot be a checkpoint (missing, not a
/// regular file, over the size limit, not UTF-8) is refused here, before
/// [`parse`] judges what it holds.
pub fn read_text(path: &Path) -> Result<String> {
    let place = path.display().to_string();
    crate::input::read_text_within(path, &place, crate::checkpoint::MAX_CHECKPOINT_BYTES)
}

/// Judges checkpoint text (see [`read`]).
pub fn parse(path: &Path, text: &str) -> Result<StateReport> {
    let place = path.display().to_string();
    let outer: Outer = serde_json::from_str(text).map_err(|e| {
        Error::invalid(&place, format!("not a DRA checkpoint ({e}); want {{\"Data\":\"<JSON text>\",\"Checksum\":N}}"))
    })?;
    let stored = u32::try_from(outer.checksum)
        .map_err(|_| Error::invalid(&place, format!("Checksum {} does not fit in 32 bits", outer.checksum)))?;
    let computed = crc32_ieee(outer.data.as_bytes());
    let mut problems = Vec::new();
    if stored != computed {
        problems.push(format!(
            "checksum mismatch (stored {stored}, computed {computed}): the kubelet reports \"checkpoint is corrupted\", \
             its DRA manager cannot start and neither does the kubelet; drain the node and remove the file"
        ));
    }
    // `Data` read straight into its types (linear time and memory in the
    // file: a JSON value tree of 64 MiB took 1.7 GB), and judged as JSON
    // only when that fails.
    let mut data = match serde_json::from_str::<Data>(&outer.data) {
        Ok(d) => Some(d),
        Err(e) => match serde_json::from_str::<serde::de::IgnoredAny>(&outer.data) {
            Err(_) => {
                problems.push(format!("Data is not JSON ({e}): the kubelet cannot read its claims and does not start"));
                None
            }
            Ok(_) => {
                return Err(Error::invalid(&place, format!("Data is not a DRA checkpoint's data: {e}")));
            }
        },
    };
    let (list_key, list) = match data.as_mut() {
        Some(d) if d.claim_info_state_list.is_some() => {
            (Some("ClaimInfoStateList".to_string()), d.claim_info_state_list.take().flatten())
        }
        Some(d) if d.entries.is_some() => (Some("Entries".to_string()), d.entries.take().flatten()),
        _ => (None, None),
    };
    if list_key.as_deref() == Some("Entries") {
        problems.push(
            "the claims are under \"Entries\": kubelets 1.34-1.37 read \"ClaimInfoStateList\" and restore nothing"
                .into(),
        );
    }
    let claims: Vec<ClaimState> = list.unwrap_or_default();
    let text_of = |f: fn(&Data) -> &Option<String>| data.as_ref().and_then(|d| f(d).clone()).unwrap_or_default();
    let (kind, api_version) = (text_of(|d| &d.kind), text_of(|d| &d.api_version));
    if data.is_some() && (kind != KIND || api_version != API_VERSION) {
        problems.push(format!("kind/apiVersion are {kind:?}/{api_version:?}, not {KIND:?}/{API_VERSION:?}"));
    }
    problems.extend(duplicate_names(&claims));
    let written_by = written_by(&outer.data);
    Ok(StateReport {
        file: path.to_path_buf(),
        stored_checksum: stored,
        computed_checksum: computed,
        checksum_ok: stored == computed,
        kind,
        api_version,
        list_key,
        claims,
        written_by,
        problems,
    })
}

/// The kubelet keys restored claims by `namespace/name`: a second entry with
/// the same pair replaces the first.
fn duplicate_names(claims: &[ClaimState]) -> Vec<String> {
    let mut seen = BTreeMap::new();
    let mut out = Vec::new();
    for c in claims {
        let key = format!("{}/{}", c.namespace, c.claim_name);
        if let Some(prev) = seen.insert(key.clone(), c.claim_uid.clone()) {
            out.push(format!("{key} is recorded twice (UIDs {prev} and {}): the kubelet keeps only one", c.claim_uid));
        }
    }
    out
}

fn written_by(data: &str) -> String {
    if data.contains("\"skipNodeOperations\"") {
        "1.37 or later (skipNodeOperations)".into()
    } else if data.contains("\"ShareID\"") {
        "1.35 or later (ShareID)".into()
    } else if data.contains("\"Devices\"") {
        "1.34 (no ShareID field)".into()
    } else {
        "unknown (no devices recorded)".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(data: &str) -> String {
        serde_json::json!({"Data": data, "Checksum": crc32_ieee(data.as_bytes())}).to_string()
    }

    #[test]
    fn data_is_judged_from_its_fields() {
        let p = Path::new("dra_manager_state");
        let r = parse(p, &file("{not json")).unwrap();
        assert!(r.problems[0].starts_with("Data is not JSON"), "{:?}", r.problems);
        let r = parse(
            p,
            &file(r#"{"kind":"DRACheckpoint","apiVersion":"v0","Entries":[{"ClaimUID":"u","ClaimName":"c"}]}"#),
        )
        .unwrap();
        assert_eq!((r.list_key.as_deref(), r.claims.len()), (Some("Entries"), 1));
        assert!(
            r.problems.iter().any(|p| p.contains("\"Entries\"")) && r.problems.iter().any(|p| p.contains("\"v0\""))
        );
        let e = parse(p, &file(r#"{"ClaimInfoStateList":[{"ClaimUID":7}]}"#)).unwrap_err().to_string();
        assert!(e.contains("Data is not a DRA checkpoint's data"), "{e}");
        let r = parse(
            p,
            &file(
                r#"{"kind":"DRACheckpoint","apiVersion":"checkpoint.dra.kubelet.k8s.io/v1","ClaimInfoStateList":null}"#,
            ),
        )
        .unwrap();
        assert!(r.problems.is_empty() && r.claims.is_empty(), "{:?}", r.problems);
        assert_eq!(r.list_key.as_deref(), Some("ClaimInfoStateList"));
    }

    #[test]
    fn crc32_matches_known_values() {
        assert_eq!(crc32_ieee(b""), 0);
        assert_eq!(crc32_ieee(b"123456789"), 0xCBF4_3926);
        let empty =
            r#"{"kind":"DRACheckpoint","apiVersion":"checkpoint.dra.kubelet.k8s.io/v1","ClaimInfoStateList":[]}"#;
        assert_eq!(crc32_ieee(empty.as_bytes()), 2_361_995_144);
    }
}
