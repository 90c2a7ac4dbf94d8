//! What `dpctl checkpoint show|verify` reports about a checkpoint file: its
//! layout, stored against computed checksum and what that means for the next
//! kubelet start, every entry with its devices per NUMA node and its stored
//! Allocate answer decoded, and the registered devices. Read-only.

use std::collections::BTreeMap;
use std::path::Path;

use prost::Message;
use serde::{Deserialize, Serialize};

use super::{Checkpoint, Format, LegacyFormat};
use crate::error::{Error, Result};
use crate::model::ContainerAllocation;
use crate::proto::deviceplugin::v1beta1 as dp;

/// The report on one checkpoint file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointReport {
    /// The file.
    pub path: String,
    /// The layout, when it parsed.
    pub format: Option<Format>,
    /// `Checksum` as stored.
    pub stored_checksum: Option<u64>,
    /// The checksum the kubelet computes from `Data`.
    pub computed_checksum: Option<u64>,
    /// The kubelet accepts the file.
    pub verifies: bool,
    /// What the next kubelet start does with it.
    pub meaning: String,
    /// Why it does not parse, when it does not.
    pub error: Option<String>,
    /// One per (pod, container, resource).
    pub entries: Vec<EntryView>,
    /// Healthy device IDs per resource when it was written (`None`: JSON `null`).
    pub registered_devices: BTreeMap<String, Option<Vec<String>>>,
}

/// One entry, decoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryView {
    /// Pod UID (the checkpoint has no names).
    pub pod_uid: String,
    /// Container name.
    pub container: String,
    /// Resource name.
    pub resource: String,
    /// Device IDs per NUMA node (`-1`: no topology).
    pub devices_per_numa: BTreeMap<i64, Vec<String>>,
    /// The stored Allocate answer, decoded (`None` when `AllocResp` is null).
    pub allocation: Option<ContainerAllocation>,
    /// Why `AllocResp` does not decode, when it does not.
    pub allocation_error: Option<String>,
}

/// What a mismatch or a parse failure means at the next kubelet start.
const CORRUPT_MEANING: &str = "the next kubelet start logs \"checkpoint is corrupted\" (or the JSON error), \
     restores nothing and goes on: devices of running pods are no longer known to be in use and can be \
     given to new pods, and resources stay at 0 until their plugins register; the kubelet then overwrites the file";

impl CheckpointReport {
    /// Reads `path` (never writes it). A missing file is an error (exit 2);
    /// a file the kubelet cannot parse is a report that does not verify.
    pub fn read(path: &Path) -> Result<CheckpointReport> {
        let Some(bytes) = super::read_bounded(path)? else {
            return Err(Error::invalid(
                path.display().to_string(),
                "no such file: the kubelet writes its checkpoint once a plugin has registered; \
                 pass the file or --dir",
            ));
        };
        Ok(CheckpointReport::from_bytes(&bytes, &path.display().to_string()))
    }

    /// The report on a file's bytes.
    pub fn from_bytes(bytes: &[u8], path: &str) -> CheckpointReport {
        let cp = match Checkpoint::parse(bytes, path, LegacyFormat::Accept) {
            Ok(cp) => cp,
            Err(e) => {
                let error = match e {
                    Error::Invalid { message, .. } => message,
                    other => other.to_string(),
                };
                return CheckpointReport {
                    path: path.to_string(),
                    format: None,
                    stored_checksum: None,
                    computed_checksum: None,
                    verifies: false,
                    meaning: CORRUPT_MEANING.to_string(),
                    error: Some(error),
                    entries: Vec::new(),
                    registered_devices: BTreeMap::new(),
                };
            }
        };
        let v = cp.verify();
        let meaning = match (v.ok(), v.format) {
            (true, Format::Current) => "every kubelet (1.26 and later) accepts it and restores its allocations".into(),
            (true, Format::V1) => "pre-1.20 layout: kubelets up to 1.30 accept it and restore its allocations; \
                 1.31 and later fail to parse it and start with no allocations"
                .into(),
            (false, _) => format!("checksum mismatch: {CORRUPT_MEANING}"),
        };
        let entries = cp
            .data
            .pod_device_entries
            .iter()
            .flatten()
            .map(|e| {
                let decoded = e.alloc_resp.as_deref().map(dp::ContainerAllocateResponse::decode);
                let (allocation, allocation_error) = match decoded {
                    None => (None, None),
                    Some(Ok(r)) => (Some(ContainerAllocation::from_response(e.device_ids.ids(), &r)), None),
                    Some(Err(err)) => (None, Some(format!("AllocResp is not a ContainerAllocateResponse: {err}"))),
                };
                EntryView {
                    pod_uid: e.pod_uid.clone(),
                    container: e.container_name.clone(),
                    resource: e.resource_name.clone(),
                    devices_per_numa: e.device_ids.per_numa(),
                    allocation,
                    allocation_error,
                }
            })
            .collect();
        CheckpointReport {
            path: path.to_string(),
            format: Some(v.format),
            stored_checksum: Some(v.stored),
            computed_checksum: Some(v.computed),
            verifies: v.ok(),
            meaning,
            error: None,
            entries,
            registered_devices: cp.data.registered_devices.unwrap_or_default(),
        }
    }
}
