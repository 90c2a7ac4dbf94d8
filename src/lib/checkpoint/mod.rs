//! The kubelet device manager's checkpoint, `kubelet_internal_checkpoint`:
//! its Go types with nil and empty kept apart, JSON read and written exactly
//! as the kubelet's `encoding/json` does, the kubelet's checksum
//! ([`spew`]), verification (stored against computed) and the kubelet's
//! atomic write. Reading never changes the file.
//!
//! Go types (package `checkpoint`, docs/kubelet-versions.md §7):
//! `Data{Data checkpointData; Checksum uint64}`,
//! `checkpointData{PodDeviceEntries []PodDevicesEntry; RegisteredDevices map[string][]string}`,
//! `PodDevicesEntry{PodUID, ContainerName, ResourceName string; DeviceIDs DevicesPerNUMA; AllocResp []byte}`,
//! `DevicesPerNUMA map[int64][]string`. The pre-1.20 ("v1") layout has
//! `DeviceIDs []string`; kubelets up to 1.30 fall back to it, 1.31+ do not.

mod json;
pub mod report;
pub mod spew;
mod write;

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

pub(crate) use write::link_target;
pub use write::{Temp, is_own_temp, write_atomic, write_with};

/// Largest checkpoint file dpctl reads: the 64 MiB every file dpctl is given
/// is held to (README, exit codes; a kubelet with thousands of pods writes a
/// few MiB). Over it: bad input, exit 2.
pub const MAX_CHECKPOINT_BYTES: u64 = 64 * 1024 * 1024;

/// The whole file: `{"Data":{...},"Checksum":N}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// `Data`.
    pub data: CheckpointData,
    /// `Checksum` as stored (a uint64 holding a 32-bit FNV-1a).
    pub checksum: u64,
}

/// `checkpointData`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CheckpointData {
    /// `PodDeviceEntries`; `None` is Go's nil slice (JSON `null`).
    pub pod_device_entries: Option<Vec<PodDevicesEntry>>,
    /// `RegisteredDevices`: healthy device IDs per resource; `None` is a nil map.
    pub registered_devices: Option<BTreeMap<String, Option<Vec<String>>>>,
}

/// `PodDevicesEntry`: one (pod, container, resource) allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodDevicesEntry {
    /// `PodUID` (the checkpoint has no pod names).
    pub pod_uid: String,
    /// `ContainerName`.
    pub container_name: String,
    /// `ResourceName`.
    pub resource_name: String,
    /// `DeviceIDs`.
    pub device_ids: DeviceIds,
    /// `AllocResp`: the `ContainerAllocateResponse` protobuf; `None` is a nil slice.
    pub alloc_resp: Option<Vec<u8>>,
}

/// `DeviceIDs` in either layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceIds {
    /// v1.20+: NUMA node (`-1` without topology) to IDs; `None` is a nil map.
    PerNuma(Option<BTreeMap<i64, Option<Vec<String>>>>),
    /// pre-1.20 ("v1"): a plain list.
    Legacy(Option<Vec<String>>),
}

impl DeviceIds {
    /// Per NUMA node (a legacy list counts as no topology, `-1`).
    pub fn per_numa(&self) -> BTreeMap<i64, Vec<String>> {
        match self {
            DeviceIds::PerNuma(m) => m.iter().flatten().map(|(k, v)| (*k, v.clone().unwrap_or_default())).collect(),
            DeviceIds::Legacy(v) => BTreeMap::from([(-1, v.clone().unwrap_or_default())]),
        }
    }

    /// Every device ID once, in NUMA-key order.
    pub fn ids(&self) -> Vec<String> {
        // A set of what is already out: `Vec::contains` per ID made one entry
        // of 100,000 IDs take minutes (quadratic).
        let mut seen = std::collections::HashSet::new();
        let mut out: Vec<String> = Vec::new();
        for list in self.per_numa().into_values() {
            for id in list {
                if seen.insert(id.clone()) {
                    out.push(id);
                }
            }
        }
        out
    }
}

/// The file layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// v1.20+ (`DeviceIDs` per NUMA node): every kubelet 1.26+ reads it.
    Current,
    /// pre-1.20 (`DeviceIDs` a list): read by kubelets up to 1.30, an error for 1.31+.
    V1,
}

impl Format {
    /// A name for people.
    pub fn describe(self) -> &'static str {
        match self {
            Format::Current => "v1.20+ (DeviceIDs per NUMA node)",
            Format::V1 => {
                "pre-1.20 v1 (DeviceIDs a plain list): kubelets up to 1.30 read it; 1.31+ fail to read it and start with no allocations"
            }
        }
    }
}

/// Whether to accept the pre-1.20 layout (kubelets up to 1.30 do).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegacyFormat {
    /// Read it (kubelet ≤ 1.30).
    Accept,
    /// Refuse it as the JSON error a 1.31+ kubelet reports.
    Refuse,
}

/// Stored against computed checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verification {
    /// The layout.
    pub format: Format,
    /// `Checksum` in the file.
    pub stored: u64,
    /// What the kubelet computes from `Data`.
    pub computed: u64,
}

impl Verification {
    /// The kubelet accepts the file.
    pub fn ok(&self) -> bool {
        self.stored == self.computed
    }
}

impl Checkpoint {
    /// Wraps `data` with the checksum the kubelet computes for it.
    pub fn new(data: CheckpointData) -> Self {
        let checksum = spew::checksum(&data);
        Checkpoint { data, checksum }
    }

    /// The layout: v1 when any entry has a list of device IDs.
    pub fn format(&self) -> Format {
        let legacy =
            self.data.pod_device_entries.iter().flatten().any(|e| matches!(e.device_ids, DeviceIds::Legacy(_)));
        if legacy { Format::V1 } else { Format::Current }
    }

    /// The checksum the kubelet computes for the data as parsed.
    pub fn computed_checksum(&self) -> u64 {
        spew::checksum(&self.data)
    }

    /// Stored against computed.
    pub fn verify(&self) -> Verification {
        Verification { format: self.format(), stored: self.checksum, computed: self.computed_checksum() }
    }

    /// Parses a file's bytes like the kubelet's `json.Unmarshal` into its Go
    /// types; `source` names the file in errors.
    pub fn parse(bytes: &[u8], source: &str, legacy: LegacyFormat) -> Result<Checkpoint> {
        json::parse(bytes, source, legacy)
    }

    /// Reads and parses a file; `Ok(None)` when it does not exist. Never writes.
    pub fn read(path: &Path, legacy: LegacyFormat) -> Result<Option<Checkpoint>> {
        match read_bounded(path)? {
            None => Ok(None),
            Some(bytes) => Checkpoint::parse(&bytes, &path.display().to_string(), legacy).map(Some),
        }
    }

    /// The file as the kubelet's `json.Marshal` writes it.
    pub fn to_json(&self) -> Vec<u8> {
        json::to_json(self)
    }

    /// Writes the file as the kubelet does (see [`write_atomic`]).
    pub fn write(&self, path: &Path) -> Result<()> {
        write_atomic(path, &self.to_json())
    }
}

/// The file's bytes, `None` when missing; refuses non-regular files and
/// files over [`MAX_CHECKPOINT_BYTES`]. A dangling symbolic link is not
/// missing: it is refused, so that a sim never writes over a link it did
/// not make.
pub fn read_bounded(path: &Path) -> Result<Option<Vec<u8>>> {
    use std::io::Read;
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Ok(target) = std::fs::read_link(path) {
                return Err(Error::invalid(
                    path.display().to_string(),
                    format!("a symbolic link to {}, which does not exist, so not a checkpoint", target.display()),
                ));
            }
            return Ok(None);
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
            return Err(Error::invalid(
                path.display().to_string(),
                "a part of the path is not a directory (is --dir a file?)",
            ));
        }
        // A path that cannot name a file is bad input, not an I/O failure.
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(Error::invalid(path.display().to_string(), "too many levels of symbolic links (a loop?)"));
        }
        Err(e) if e.raw_os_error() == Some(libc::ENAMETOOLONG) => {
            return Err(Error::invalid(path.display().to_string(), "the path is too long"));
        }
        Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
    };
    if !meta.is_file() {
        return Err(Error::invalid(path.display().to_string(), "not a regular file, so not a checkpoint"));
    }
    if meta.len() > MAX_CHECKPOINT_BYTES {
        return Err(over_limit(path, Some(meta.len())));
    }
    let file = std::fs::File::open(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    let mut bytes = Vec::new();
    file.take(MAX_CHECKPOINT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    // The file may have grown since the size was checked.
    if bytes.len() as u64 > MAX_CHECKPOINT_BYTES {
        return Err(over_limit(path, None));
    }
    Ok(Some(bytes))
}

fn over_limit(path: &Path, len: Option<u64>) -> Error {
    let size = len.map_or_else(|| "more than 64 MiB".to_string(), |n| format!("{n} bytes"));
    Error::invalid(
        path.display().to_string(),
        format!("{size} is over the 64 MiB ({MAX_CHECKPOINT_BYTES}-byte) limit for a checkpoint; not read"),
    )
}

#[cfg(test)]
mod tests;
