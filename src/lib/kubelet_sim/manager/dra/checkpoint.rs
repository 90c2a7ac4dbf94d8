//! `dra_manager_state` (pkg/kubelet/cm/dra/state/checkpoint.go): the bytes
//! the kubelet writes for the claim-info cache, and the cache read back
//! from them at a start.

use super::{ClaimInfo, DraState, PreparedDevice, key};

impl DraState {
    /// The checkpoint file's bytes, as the kubelet writes them: `Data` is
    /// the JSON of the claim list (Go's field order; `ShareID` from 1.35),
    /// `Checksum` its CRC-32 (IEEE). Entries in `namespace/name` order
    /// (the kubelet's follow Go map order).
    pub fn checkpoint_bytes(&self) -> Vec<u8> {
        let share = self.version.checkpoints_dra_share_id();
        let list: Vec<String> = self.claims.values().map(|c| claim_json(c, share)).collect();
        let data = format!(
            "{{\"kind\":\"DRACheckpoint\",\"apiVersion\":\"checkpoint.dra.kubelet.k8s.io/v1\",\"ClaimInfoStateList\":[{}]}}",
            list.join(",")
        );
        let sum = crate::dra::state::crc32_ieee(data.as_bytes());
        let data_json = serde_json::Value::String(data).to_string();
        format!("{{\"Data\":{data_json},\"Checksum\":{sum}}}").into_bytes()
    }

    /// Restores a checkpoint's entries (not prepared: their next user
    /// prepares them again). A bad checksum is the kubelet's
    /// `checkpoint is corrupted`: its DRA manager, and the kubelet, do not start.
    pub fn restore(&mut self, report: &crate::dra::state::StateReport) -> Result<usize, String> {
        if !report.checksum_ok {
            return Err(format!(
                "checkpoint is corrupted: stored checksum {} but the data hashes to {}",
                report.stored_checksum, report.computed_checksum
            ));
        }
        self.claims.clear();
        for c in &report.claims {
            let drivers = c
                .driver_state
                .iter()
                .flatten()
                .map(|(d, s)| {
                    let devices = s.devices.iter().flatten().map(|x| PreparedDevice {
                        pool: x.pool_name.clone(),
                        device: x.device_name.clone(),
                        share_id: x.share_id.clone().flatten(),
                        request_names: x.request_names.clone().unwrap_or_default(),
                        cdi_device_ids: x.cdi_device_ids.clone().unwrap_or_default(),
                    });
                    (d.clone(), devices.collect())
                })
                .collect();
            let info = ClaimInfo {
                uid: c.claim_uid.clone(),
                name: c.claim_name.clone(),
                namespace: c.namespace.clone(),
                pods: c.pod_uids.iter().flatten().map(|(k, _)| k.clone()).collect(),
                drivers,
                prepared: false,
                unpreparing: false,
            };
            self.claims.insert(key(&info.namespace, &info.name), info);
        }
        Ok(self.claims.len())
    }

    /// A kubelet restart without a file to read back (the sim may not
    /// write it): the entries carry over, none prepared (a new DRA manager
    /// has prepared nothing, `newClaimInfoFromState`), none being unprepared.
    pub fn unprepare_all_in_memory(&mut self) {
        for c in self.claims.values_mut() {
            c.prepared = false;
            c.unpreparing = false;
        }
    }
}

/// A Go `[]string` as `encoding/json` writes it: `null` when empty (the
/// kubelet stores the gRPC answer's nil slices).
fn strings(v: &[String]) -> String {
    if v.is_empty() { "null".into() } else { serde_json::json!(v).to_string() }
}

fn js(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// One `ClaimInfoState` in Go's field order (maps with sorted keys, as
/// `encoding/json` writes them).
fn claim_json(c: &ClaimInfo, share: bool) -> String {
    let drivers: Vec<String> = c
        .drivers
        .iter()
        .map(|(d, devices)| {
            let list: Vec<String> = devices
                .iter()
                .map(|x| {
                    let share_id = if share {
                        format!(",\"ShareID\":{}", x.share_id.as_deref().map_or_else(|| "null".into(), js))
                    } else {
                        String::new()
                    };
                    format!(
                        "{{\"PoolName\":{},\"DeviceName\":{}{share_id},\"RequestNames\":{},\"CDIDeviceIDs\":{}}}",
                        js(&x.pool),
                        js(&x.device),
                        strings(&x.request_names),
                        strings(&x.cdi_device_ids)
                    )
                })
                .collect();
            let devices = if list.is_empty() { "null".to_string() } else { format!("[{}]", list.join(",")) };
            format!("{}:{{\"Devices\":{devices}}}", js(d))
        })
        .collect();
    let pods: Vec<String> = c.pods.iter().map(|p| format!("{}:{{}}", js(p))).collect();
    format!(
        "{{\"ClaimUID\":{},\"ClaimName\":{},\"Namespace\":{},\"PodUIDs\":{{{}}},\"DriverState\":{{{}}}}}",
        js(&c.uid),
        js(&c.name),
        js(&c.namespace),
        pods.join(","),
        drivers.join(",")
    )
}
