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

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use super::outcome::CheckpointStatus;
use crate::checkpoint::{Checkpoint, LegacyFormat, PodDevicesEntry};
use crate::error::{Error, Result};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::CheckpointData;
    use std::collections::BTreeMap;

    #[test]
    fn ownership_follows_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubelet_internal_checkpoint");
        let marker = marker_path(dir.path());
        let loaded = load(&path, &marker, false, LegacyFormat::Refuse);
        assert_eq!((loaded.status.found.as_str(), loaded.status.writes), ("none", true));
        let cp =
            Checkpoint::new(CheckpointData { pod_device_entries: None, registered_devices: Some(BTreeMap::new()) });
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
