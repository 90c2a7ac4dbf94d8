//! The device manager's state as the kubelet's checkpoint records it
//! (`kubelet_internal_checkpoint`, docs/kubelet-versions.md §7), and back:
//! the entries of the admitted pods and the healthy device IDs per known
//! resource. Reading and writing the file is the shell's
//! (`kubelet_sim/checkpoint.rs`).

use std::collections::BTreeMap;

use prost::Message;

use super::state::{Alloc, State};
use crate::checkpoint::{Checkpoint, CheckpointData, DeviceIds, PodDevicesEntry};
use crate::proto::deviceplugin::v1beta1 as dp;

/// The allocation an entry records (its `AllocResp` decoded; an undecodable
/// one counts as empty, the devices still count as in use).
pub(crate) fn entry_alloc(e: &PodDevicesEntry) -> Alloc {
    let response =
        e.alloc_resp.as_deref().and_then(|b| dp::ContainerAllocateResponse::decode(b).ok()).unwrap_or_default();
    Alloc { ids: e.device_ids.ids(), by_numa: e.device_ids.per_numa(), response }
}

/// The checkpoint of the current state, as the kubelet would write it:
/// `null` entries when there are none, healthy IDs per known resource.
pub(crate) fn from_state(st: &State) -> Checkpoint {
    let mut entries = own_entries(st);
    entries.extend(st.foreign_entries.iter().cloned());
    with_entries(st, entries)
}

/// The sim's own allocations file: [`from_state`] without the checkpoint's
/// entries of other pods (only the sim's pods, restored ones included).
pub(crate) fn journal_from_state(st: &State) -> Checkpoint {
    let mut entries = own_entries(st);
    entries.extend(st.foreign_entries.iter().filter(|e| st.journal_uids.contains(&e.pod_uid)).cloned());
    with_entries(st, entries)
}

/// The entries of the sim's pods, the one being admitted included.
fn own_entries(st: &State) -> Vec<PodDevicesEntry> {
    let mut entries = Vec::new();
    for pod in st.pods.iter().chain(st.admitting.as_ref()) {
        for (container, by_res) in &pod.allocs {
            for (resource, a) in by_res {
                entries.push(PodDevicesEntry {
                    pod_uid: pod.uid().to_string(),
                    container_name: container.clone(),
                    resource_name: resource.clone(),
                    device_ids: DeviceIds::PerNuma(Some(
                        a.by_numa.iter().map(|(k, v)| (*k, Some(v.clone()))).collect(),
                    )),
                    alloc_resp: Some(a.response.encode_to_vec()),
                });
            }
        }
    }
    entries
}

fn with_entries(st: &State, entries: Vec<PodDevicesEntry>) -> Checkpoint {
    let registered_devices: BTreeMap<String, Option<Vec<String>>> = st
        .resources
        .iter()
        // The kubelet writes `healthyDevices`: a key exists from the first
        // snapshot (or a restore) until the removal, not after a bare Register.
        .filter(|(_, r)| r.known())
        .map(|(name, r)| (name.clone(), Some(r.healthy().map(|d| d.id.clone()).collect())))
        .collect();
    Checkpoint::new(CheckpointData {
        pod_device_entries: if entries.is_empty() { None } else { Some(entries) },
        registered_devices: Some(registered_devices),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::LegacyFormat;
    use crate::kubelet_sim::manager::state::Resource;

    #[test]
    fn reads_both_layouts_into_allocations() {
        let text =
            br#"{"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c0","ResourceName":"example.com/resource",
            "DeviceIDs":{"-1":["Dev-1"],"0":["Dev-2"]},"AllocResp":"CgsKA0tFWRIEVkFMVQ=="}],
            "RegisteredDevices":{"example.com/resource":["Dev-1","Dev-2"]}},"Checksum":1234567890}"#;
        let cp = Checkpoint::parse(text, "t", LegacyFormat::Refuse).unwrap();
        let a = entry_alloc(&cp.data.pod_device_entries.as_ref().unwrap()[0]);
        assert_eq!(a.by_numa[&-1], ["Dev-1"]);
        assert_eq!(a.by_numa[&0], ["Dev-2"]);
        assert_eq!(a.ids, ["Dev-1", "Dev-2"]);
        assert_eq!(a.response.envs.get("KEY").map(String::as_str), Some("VALU"));
        assert!(!cp.verify().ok());
        let legacy = br#"{"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c","ResourceName":"r",
            "DeviceIDs":["a","b"],"AllocResp":""}],"RegisteredDevices":{}},"Checksum":0}"#;
        let cp = Checkpoint::parse(legacy, "t", LegacyFormat::Accept).unwrap();
        assert_eq!(entry_alloc(&cp.data.pod_device_entries.unwrap()[0]).ids, ["a", "b"]);
    }

    /// docs/kubelet-versions.md §7: an empty state writes `null` entries and verifies.
    #[test]
    fn empty_state_writes_null_entries_that_verify() {
        let st = State::new(std::time::Duration::from_secs(1), std::time::Instant::now());
        let cp = from_state(&st);
        let s = String::from_utf8(cp.to_json()).unwrap();
        assert_eq!(s, r#"{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}},"Checksum":3467439661}"#);
    }

    /// docs/kubelet-versions.md §5 ("`PluginConnected` does not create device
    /// sets; only the first snapshot does") and §7: `RegisteredDevices` is
    /// the kubelet's `healthyDevices`, so a resource that registered but sent
    /// no snapshot yet is not in it (a restart would otherwise restore it as
    /// known); after a stream end it is listed with no healthy IDs; after the
    /// removal it is gone. Every version.
    #[test]
    fn registered_devices_list_the_resources_with_device_sets() {
        let mut st = State::new(std::time::Duration::from_secs(1), std::time::Instant::now());
        st.resources.insert("example.com/bare".into(), Resource::default());
        st.resources
            .insert("example.com/ended".into(), Resource { sets: true, disconnected: true, ..Resource::default() });
        st.resources
            .insert("example.com/removed".into(), Resource { sets: true, removed: true, ..Resource::default() });
        let cp = from_state(&st);
        let reg = cp.data.registered_devices.unwrap();
        assert_eq!(reg.keys().collect::<Vec<_>>(), ["example.com/ended"]);
        assert_eq!(reg["example.com/ended"], Some(Vec::new()));
    }
}
