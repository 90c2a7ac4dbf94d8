//! kubelet-sim's use of the device manager's checkpoint
//! ([`crate::checkpoint`]): read and verified at start as the kubelet does
//! (docs/kubelet-versions.md §7), restored into the state, written from the state
//! after changes, and never written when another program wrote it.
//!
//! Ownership: before every write the sim records the new file's length and
//! FNV-1a-64, next to those of the file it replaces, in
//! `<dir>/.dpctl/kubelet-sim-checkpoint.json` (so a crash between the two
//! writes still finds its own file). At start the sim writes the file only
//! when there is none, when the record matches the file byte for byte (the
//! sim wrote it and nobody has since), or when the
//! user adopts it (`--adopt-checkpoint`). Otherwise it reads and restores it
//! but never changes it, and says so in an event, the log and `status`.
//!
//! Durability: the kubelet writes its checkpoint inside admission, after each
//! container's devices are allocated and before the pod is admitted
//! (`pkg/kubelet/cm/devicemanager/manager.go`, `allocateContainerResources`
//! → `writeCheckpoint`); the sim does the same, fsyncing the file and the
//! directory, so an answered admission survives a kill. While the checkpoint
//! is read-only the sim keeps the same record of its own pods in
//! `<dir>/.dpctl/kubelet-sim-allocations` (the checkpoint's format and
//! checksum, never the foreign file) and restores it at start.
//!
//! The ownership record is renamed into place but not fsynced: a killed
//! process loses nothing (the page cache survives it); after a power cut the
//! record may predate the checkpoint, and the sim then treats its own file as
//! foreign (read-only, restored, allocations kept in `.dpctl/`), never the
//! reverse. Skipping that sync halves the cost of each admission's write.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use prost::Message;
use serde::{Deserialize, Serialize};

pub use super::outcome::CheckpointStatus;
use super::state::{Alloc, State};
use crate::checkpoint::{Checkpoint, CheckpointData, DeviceIds, LegacyFormat, PodDevicesEntry};
use crate::error::{Error, Result};
use crate::proto::deviceplugin::v1beta1 as dp;

/// The ownership record, inside `<dir>/.dpctl/`.
pub const MARKER_NAME: &str = "kubelet-sim-checkpoint.json";

/// The sim's own allocations while the checkpoint is read-only, inside
/// `<dir>/.dpctl/` (the checkpoint's JSON and checksum).
pub const JOURNAL_NAME: &str = "kubelet-sim-allocations";

/// The record of the files the sim wrote: the newest and the one before.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
struct Marker {
    written_by: String,
    files: Vec<Written>,
    /// The tag in the names of the sim's temporary files in `<dir>`
    /// (`.kubelet_internal_checkpoint.dpctl-<tag>-<random>.tmp`): recorded
    /// before the first such file exists, so that the next start deletes
    /// exactly the ones an interrupted write left.
    #[serde(default)]
    tmp_tag: Option<String>,
}

/// One file the sim wrote.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq, Clone)]
struct Written {
    bytes: u64,
    fnv64: String,
}

impl Written {
    fn of(bytes: &[u8]) -> Written {
        let h = bytes
            .iter()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3));
        Written { bytes: u64::try_from(bytes.len()).unwrap_or(u64::MAX), fnv64: format!("{h:016x}") }
    }
}

fn read_marker(marker: &Path) -> Option<Marker> {
    std::fs::read(marker).ok().and_then(|m| serde_json::from_slice::<Marker>(&m).ok())
}

/// The marker path for a device-plugin directory.
pub fn marker_path(dir: &Path) -> PathBuf {
    dir.join(crate::paths::CONTROL_DIR_NAME).join(MARKER_NAME)
}

/// The sim's own allocations file for a device-plugin directory.
pub fn journal_path(dir: &Path) -> PathBuf {
    dir.join(crate::paths::CONTROL_DIR_NAME).join(JOURNAL_NAME)
}

/// The temporary-file tag recorded in the marker, or a new one.
pub(crate) fn temp_tag(marker: &Path) -> String {
    read_marker(marker).and_then(|m| m.tmp_tag).filter(|t| valid_tag(t)).unwrap_or_else(|| {
        let n: u64 = rand::random();
        format!("{n:016x}")
    })
}

fn valid_tag(t: &str) -> bool {
    !t.is_empty() && t.len() <= 32 && t.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Deletes the temporary files interrupted writes of this sim left, and
/// returns their paths. Only the sim's own are candidates, told apart by
/// name and record: in `dir`, `.kubelet_internal_checkpoint.dpctl-<tag>-*.tmp`
/// with the tag the marker recorded (no record, no deletion: a kubelet's
/// `.<digits>` temporaries and anyone else's files never match); in
/// `<dir>/.dpctl/` (dpctl's own directory), `.<record or allocations
/// file>.dpctl-*-*.tmp`. Each must also be a regular file (not a link)
/// owned by this user.
pub(crate) fn clean_temps(dir: &Path, marker: &Path) -> Vec<String> {
    let mut gone = Vec::new();
    let recorded = read_marker(marker).and_then(|m| m.tmp_tag).filter(|t| valid_tag(t));
    if let Some(tag) = &recorded {
        let ours = |n: &str| crate::checkpoint::is_own_temp(n, crate::paths::CHECKPOINT_FILE_NAME, Some(tag));
        remove_matching(dir, &ours, &mut gone);
    }
    let ours = |n: &str| {
        crate::checkpoint::is_own_temp(n, MARKER_NAME, None) || crate::checkpoint::is_own_temp(n, JOURNAL_NAME, None)
    };
    remove_matching(&dir.join(crate::paths::CONTROL_DIR_NAME), &ours, &mut gone);
    gone
}

fn remove_matching(dir: &Path, ours: &dyn Fn(&str) -> bool, gone: &mut Vec<String>) {
    use std::os::unix::fs::MetadataExt;
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    for entry in rd.filter_map(std::result::Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !ours(&name) {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if !meta.file_type().is_file() || meta.uid() != me {
            continue;
        }
        match std::fs::remove_file(&path) {
            Ok(()) => gone.push(path.display().to_string()),
            Err(e) => tracing::warn!(path = %path.display(), error = %e, "could not delete a leftover temporary file"),
        }
    }
}

/// True when the sim's record says it wrote exactly `bytes`.
fn wrote(marker: &Path, bytes: &[u8]) -> bool {
    let this = Written::of(bytes);
    read_marker(marker).is_some_and(|m| m.files.contains(&this))
}

/// What [`load`] found.
pub(crate) struct Loaded {
    /// For `status` and events.
    pub status: CheckpointStatus,
    /// The checkpoint to restore (valid ones only, as the kubelet restores).
    pub checkpoint: Option<Checkpoint>,
}

/// Reads and verifies the checkpoint at start, and decides whether the sim
/// may write it. A corrupt or unreadable file restores nothing (the kubelet
/// logs "Continue after failing to read checkpoint file" and goes on).
pub(crate) fn load(path: &Path, marker: &Path, adopt: bool, legacy: LegacyFormat) -> Loaded {
    let mut status = CheckpointStatus { path: path.display().to_string(), ..CheckpointStatus::default() };
    let bytes = match crate::checkpoint::read_bounded(path) {
        Ok(None) => {
            status.found = "none".into();
            status.writes = true;
            status.ownership = "no checkpoint at start: the sim creates it and writes it".into();
            return Loaded { status, checkpoint: None };
        }
        Ok(Some(b)) => b,
        Err(e) => {
            status.found = "unreadable".into();
            status.error = Some(e.to_string());
            status.writes = false;
            status.ownership = "the checkpoint cannot be read: the sim will not touch it".into();
            return Loaded { status, checkpoint: None };
        }
    };
    let ours = wrote(marker, &bytes);
    let link = crate::checkpoint::link_target(path);
    status.writes = (ours || adopt) && link.is_none();
    status.ownership = if let Some(target) = &link {
        format!(
            "a symbolic link to {target}: read-only, the sim reads it but never replaces a symbolic link \
             (not even with --adopt-checkpoint)"
        )
    } else if ours {
        "written by this sim before (recorded in .dpctl/): the sim keeps writing it".into()
    } else if adopt {
        "not written by this sim; adopted (--adopt-checkpoint): the sim writes it from now on".into()
    } else {
        "not written by this sim (another kubelet's?): read-only, the sim will not change it; \
         pass --adopt-checkpoint to let it write"
            .into()
    };
    let checkpoint = match Checkpoint::parse(&bytes, &status.path, legacy) {
        Ok(cp) => {
            let v = cp.verify();
            status.format = Some(v.format);
            status.stored_checksum = Some(v.stored);
            status.computed_checksum = Some(v.computed);
            if v.ok() {
                status.found = "valid".into();
                status.restored_entries = cp.data.pod_device_entries.as_ref().map_or(0, Vec::len);
                Some(cp)
            } else {
                status.found = "corrupt".into();
                status.error = Some(format!(
                    "checkpoint is corrupted: stored checksum {} but the data hashes to {}; \
                     like the kubelet, nothing is restored",
                    v.stored, v.computed
                ));
                None
            }
        }
        Err(e) => {
            status.found = "unreadable".into();
            status.error = Some(format!("{e}; like the kubelet, nothing is restored"));
            None
        }
    };
    Loaded { status, checkpoint }
}

/// Writes the checkpoint (fsynced when `durable`) and records (first) that
/// the sim wrote it. `tag` names the temporary files ([`clean_temps`]).
pub(crate) fn write_owned(cp: &Checkpoint, path: &Path, marker: &Path, tag: &str, durable: bool) -> Result<()> {
    use crate::checkpoint::{Temp, write_with};
    let bytes = cp.to_json();
    let new = Written::of(&bytes);
    let previous = read_marker(marker).and_then(|m| m.files.into_iter().next());
    let mut files = vec![new.clone()];
    files.extend(previous.filter(|p| *p != new));
    let record = Marker { written_by: "dpctl kubelet-sim".into(), files, tmp_tag: Some(tag.to_string()) };
    let record =
        serde_json::to_vec(&record).map_err(|e| Error::io(format!("encoding {}", marker.display()), e.into()))?;
    write_with(marker, &record, &Temp { tag: Some(tag), durable: false })?;
    write_with(path, &bytes, &Temp { tag: Some(tag), durable })
}

/// Writes the sim's own allocations file (fsynced when `durable`).
pub(crate) fn write_journal(cp: &Checkpoint, path: &Path, tag: &str, durable: bool) -> Result<()> {
    crate::checkpoint::write_with(path, &cp.to_json(), &crate::checkpoint::Temp { tag: Some(tag), durable })
}

/// The sim's own allocations file: `Ok(None)` when there is none; an error
/// when it cannot be read or its checksum does not match.
pub(crate) fn read_journal(path: &Path, legacy: LegacyFormat) -> Result<Option<Checkpoint>> {
    let Some(cp) = Checkpoint::read(path, legacy)? else { return Ok(None) };
    let v = cp.verify();
    if !v.ok() {
        return Err(Error::invalid(
            path.display().to_string(),
            format!("stored checksum {} but the data hashes to {}", v.stored, v.computed),
        ));
    }
    Ok(Some(cp))
}

/// `cp` with the entries of `journal` it lacks (by pod, container and
/// resource) and its resources.
pub(crate) fn merge(cp: Option<Checkpoint>, journal: &Checkpoint) -> Checkpoint {
    let mut data = cp.map(|c| c.data).unwrap_or_default();
    for e in journal.data.pod_device_entries.iter().flatten() {
        let entries = data.pod_device_entries.get_or_insert_default();
        let same = |x: &PodDevicesEntry| {
            x.pod_uid == e.pod_uid && x.container_name == e.container_name && x.resource_name == e.resource_name
        };
        if !entries.iter().any(same) {
            entries.push(e.clone());
        }
    }
    for (name, ids) in journal.data.registered_devices.iter().flatten() {
        data.registered_devices.get_or_insert_default().entry(name.clone()).or_insert_with(|| ids.clone());
    }
    Checkpoint::new(data)
}

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
    use crate::kubelet_sim::state::Resource;

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
        let st = State::new(std::time::Duration::from_secs(1));
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
        let mut st = State::new(std::time::Duration::from_secs(1));
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

    #[test]
    fn ownership_follows_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubelet_internal_checkpoint");
        let marker = marker_path(dir.path());
        let loaded = load(&path, &marker, false, LegacyFormat::Refuse);
        assert_eq!((loaded.status.found.as_str(), loaded.status.writes), ("none", true));
        let cp = from_state(&State::new(std::time::Duration::from_secs(1)));
        write_owned(&cp, &path, &marker, "0a", true).unwrap();
        let loaded = load(&path, &marker, false, LegacyFormat::Refuse);
        assert_eq!((loaded.status.found.as_str(), loaded.status.writes), ("valid", true));
        // Someone else rewrites it (same data, other bytes): read-only from now on.
        std::fs::write(
            &path,
            b"{\"Data\":{\"PodDeviceEntries\":null,\"RegisteredDevices\":{}},\"Checksum\":3467439661}\n",
        )
        .unwrap();
        let loaded = load(&path, &marker, false, LegacyFormat::Refuse);
        assert_eq!((loaded.status.found.as_str(), loaded.status.writes), ("valid", false));
        assert!(loaded.status.ownership.contains("--adopt-checkpoint"));
        assert!(load(&path, &marker, true, LegacyFormat::Refuse).status.writes);
    }
}
