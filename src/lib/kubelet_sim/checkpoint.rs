//! The device manager's checkpoint, `kubelet_internal_checkpoint`, in the
//! kubelet's JSON layout (`{"Data":{"PodDeviceEntries":..,"RegisteredDevices":..},"Checksum":N}`),
//! written atomically and read back on restart.
//!
//! `AllocResp` is the base64 of the `ContainerAllocateResponse` protobuf and
//! `DeviceIDs` maps a NUMA node (as a string key, `-1` for no topology) to
//! device IDs, as Go's `encoding/json` writes them.
//!
//! The checksum is a stand-in: the kubelet's is FNV-1a-32 over go-spew's dump
//! of its Go structs, which depends on Go type names. dpctl writes FNV-1a-32
//! of the compact JSON of `Data` instead; a real kubelet reading this file
//! would call it corrupt, log it and start without it.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine;
use prost::Message;
use serde::{Deserialize, Serialize};

use super::state::{Alloc, State};
use crate::error::{Error, Result};
use crate::proto::deviceplugin::v1beta1 as dp;

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The data.
    #[serde(rename = "Data")]
    pub data: Data,
    /// The checksum (a stand-in; see the module docs).
    #[serde(rename = "Checksum")]
    pub checksum: u64,
}

/// `checkpoint.Data`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Data {
    /// One entry per (pod, container, resource); `null` when there are none.
    #[serde(rename = "PodDeviceEntries")]
    pub pod_device_entries: Option<Vec<PodDevicesEntry>>,
    /// Healthy device IDs per resource at the time of writing.
    #[serde(rename = "RegisteredDevices")]
    pub registered_devices: BTreeMap<String, Vec<String>>,
}

/// `checkpoint.PodDevicesEntry`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodDevicesEntry {
    /// Pod UID.
    #[serde(rename = "PodUID")]
    pub pod_uid: String,
    /// Container name.
    #[serde(rename = "ContainerName")]
    pub container_name: String,
    /// Resource name.
    #[serde(rename = "ResourceName")]
    pub resource_name: String,
    /// Device IDs per NUMA node.
    #[serde(rename = "DeviceIDs")]
    pub device_ids: DeviceIds,
    /// base64 of the `ContainerAllocateResponse` protobuf.
    #[serde(rename = "AllocResp")]
    pub alloc_resp: String,
}

/// `DeviceIDs`: the v1.20+ map (NUMA node -> IDs), or the older plain list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DeviceIds {
    /// NUMA node (decimal string, `-1` without topology) to device IDs.
    PerNuma(BTreeMap<String, Vec<String>>),
    /// The pre-1.20 form.
    Legacy(Vec<String>),
}

impl DeviceIds {
    /// Per NUMA node, with integer keys (legacy lists count as no topology).
    pub fn per_numa(&self) -> BTreeMap<i64, Vec<String>> {
        match self {
            DeviceIds::PerNuma(m) => m.iter().filter_map(|(k, v)| k.parse().ok().map(|k| (k, v.clone()))).collect(),
            DeviceIds::Legacy(v) => BTreeMap::from([(super::state::NO_TOPOLOGY, v.clone())]),
        }
    }
}

/// FNV-1a, 32 bit.
fn fnv1a32(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(*b)).wrapping_mul(0x0100_0193))
}

impl Checkpoint {
    /// Wraps `data` with its (stand-in) checksum.
    pub fn new(data: Data) -> Self {
        let checksum = serde_json::to_vec(&data).map(|b| u64::from(fnv1a32(&b))).unwrap_or(0);
        Checkpoint { data, checksum }
    }

    /// True when the checksum is the one dpctl would write.
    pub fn checksum_matches(&self) -> bool {
        Checkpoint::new(self.data.clone()).checksum == self.checksum
    }

    /// Reads a checkpoint; `None` when the file does not exist.
    pub fn read(path: &Path) -> Result<Option<Checkpoint>> {
        let text = match std::fs::read(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
        };
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| Error::invalid(path.display().to_string(), format!("not a device manager checkpoint: {e}")))
    }

    /// Writes the file atomically (a temporary file in `tmp_dir`, then a rename).
    pub fn write(&self, path: &Path, tmp_dir: &Path) -> Result<()> {
        let text = serde_json::to_vec(self).map_err(|e| Error::io("encoding the checkpoint", e.into()))?;
        std::fs::create_dir_all(tmp_dir).map_err(|e| Error::io(format!("creating {}", tmp_dir.display()), e))?;
        let tmp = tmp_dir.join("checkpoint.tmp");
        std::fs::write(&tmp, text).map_err(|e| Error::io(format!("writing {}", tmp.display()), e))?;
        std::fs::rename(&tmp, path).map_err(|e| Error::io(format!("replacing {}", path.display()), e))
    }

    /// The allocation of an entry.
    pub(crate) fn entry_alloc(e: &PodDevicesEntry) -> Alloc {
        let by_numa = e.device_ids.per_numa();
        let mut ids: Vec<String> = Vec::new();
        for list in by_numa.values() {
            for id in list {
                if !ids.contains(id) {
                    ids.push(id.clone());
                }
            }
        }
        let response = base64::engine::general_purpose::STANDARD
            .decode(&e.alloc_resp)
            .ok()
            .and_then(|b| dp::ContainerAllocateResponse::decode(b.as_slice()).ok())
            .unwrap_or_default();
        Alloc { ids, by_numa, response }
    }
}

/// The checkpoint of the current state, as the kubelet would write it.
pub(crate) fn from_state(st: &State) -> Checkpoint {
    let mut entries = Vec::new();
    for pod in &st.pods {
        for (container, by_res) in &pod.allocs {
            for (resource, a) in by_res {
                entries.push(PodDevicesEntry {
                    pod_uid: pod.uid().to_string(),
                    container_name: container.clone(),
                    resource_name: resource.clone(),
                    device_ids: DeviceIds::PerNuma(a.by_numa.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()),
                    alloc_resp: base64::engine::general_purpose::STANDARD.encode(a.response.encode_to_vec()),
                });
            }
        }
    }
    entries.extend(st.foreign_entries.iter().cloned());
    let registered_devices = st
        .resources
        .iter()
        .filter(|(_, r)| !r.removed)
        .map(|(name, r)| (name.clone(), r.healthy().map(|d| d.id.clone()).collect()))
        .collect();
    Checkpoint::new(Data {
        pod_device_entries: if entries.is_empty() { None } else { Some(entries) },
        registered_devices,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_kubelet_layout_both_forms() {
        let text = r#"{"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c0","ResourceName":"example.com/resource",
            "DeviceIDs":{"-1":["Dev-1"],"0":["Dev-2"]},"AllocResp":"CgsKA0tFWRIEVkFMVQ=="}],
            "RegisteredDevices":{"example.com/resource":["Dev-1","Dev-2"]}},"Checksum":1234567890}"#;
        let cp: Checkpoint = serde_json::from_str(text).unwrap();
        let e = &cp.data.pod_device_entries.as_ref().unwrap()[0];
        let a = Checkpoint::entry_alloc(e);
        assert_eq!(a.by_numa[&-1], ["Dev-1"]);
        assert_eq!(a.by_numa[&0], ["Dev-2"]);
        assert_eq!(a.response.envs.get("KEY").map(String::as_str), Some("VALU"));
        assert!(!cp.checksum_matches());
        let legacy = r#"{"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c","ResourceName":"r",
            "DeviceIDs":["a","b"],"AllocResp":""}],"RegisteredDevices":{}},"Checksum":0}"#;
        let cp: Checkpoint = serde_json::from_str(legacy).unwrap();
        let a = Checkpoint::entry_alloc(&cp.data.pod_device_entries.unwrap()[0]);
        assert_eq!(a.ids, ["a", "b"]);
    }

    #[test]
    fn writes_null_entries_and_keys_as_go_does() {
        let cp = Checkpoint::new(Data { pod_device_entries: None, registered_devices: BTreeMap::new() });
        let s = serde_json::to_string(&cp).unwrap();
        assert!(s.starts_with(r#"{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}},"Checksum":"#), "{s}");
        assert!(cp.checksum_matches());
    }
}
