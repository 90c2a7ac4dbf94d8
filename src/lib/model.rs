//! dpctl's view of device-plugin data: devices, snapshots and what changed
//! between two snapshots, with counts as the kubelet makes them. These are the
//! types the output layer renders (stable snake_case JSON keys).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::proto::deviceplugin::v1beta1 as dp;

/// One device as a plugin advertises it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    /// The device ID.
    pub id: String,
    /// The health string exactly as sent; only `Healthy` counts as healthy.
    pub health: String,
    /// NUMA nodes; `None` when the device reports no topology.
    pub numa_nodes: Option<Vec<i64>>,
}

impl Device {
    /// True when the kubelet counts this device as allocatable.
    pub fn is_healthy(&self) -> bool {
        self.health == dp::HEALTHY
    }
}

impl From<&dp::Device> for Device {
    fn from(d: &dp::Device) -> Self {
        Device {
            id: d.id.clone(),
            health: d.health.clone(),
            numa_nodes: d.topology.as_ref().map(|t| t.nodes.iter().map(|n| n.id).collect()),
        }
    }
}

impl From<dp::Device> for Device {
    /// Moves the strings instead of copying them.
    fn from(d: dp::Device) -> Self {
        Device {
            id: d.id,
            health: d.health,
            numa_nodes: d.topology.map(|t| t.nodes.into_iter().map(|n| n.id).collect()),
        }
    }
}

impl From<&Device> for dp::Device {
    fn from(d: &Device) -> Self {
        dp::Device {
            id: d.id.clone(),
            health: d.health.clone(),
            topology: d
                .numa_nodes
                .as_ref()
                .map(|nodes| dp::TopologyInfo { nodes: nodes.iter().map(|id| dp::NumaNode { id: *id }).collect() }),
        }
    }
}

/// Capacity and allocatable as the kubelet computes them from a snapshot:
/// capacity = healthy + unhealthy, allocatable = healthy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Healthy plus unhealthy devices.
    pub capacity: usize,
    /// Healthy devices.
    pub allocatable: usize,
}

/// Counts a snapshot the kubelet's way (two sets: healthy and unhealthy IDs).
pub fn counts(devices: &[Device]) -> Counts {
    let mut healthy = std::collections::HashSet::new();
    let mut unhealthy = std::collections::HashSet::new();
    for d in devices {
        if d.is_healthy() {
            healthy.insert(d.id.as_str());
        } else {
            unhealthy.insert(d.id.as_str());
        }
    }
    Counts { capacity: healthy.len() + unhealthy.len(), allocatable: healthy.len() }
}

/// What happened to one device between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    /// A device that was not in the previous snapshot.
    Added {
        /// The device ID.
        id: String,
    },
    /// A device that is gone.
    Removed {
        /// The device ID.
        id: String,
    },
    /// The health string changed.
    HealthChanged {
        /// The device ID.
        id: String,
        /// Health before.
        from: String,
        /// Health now.
        to: String,
    },
    /// The NUMA nodes changed.
    TopologyChanged {
        /// The device ID.
        id: String,
    },
}

impl Change {
    /// The device the change is about.
    pub fn id(&self) -> &str {
        match self {
            Change::Added { id }
            | Change::Removed { id }
            | Change::HealthChanged { id, .. }
            | Change::TopologyChanged { id } => id,
        }
    }
}

/// The changes from `prev` to `next`, in the order of `next` (removals last).
pub fn diff(prev: &[Device], next: &[Device]) -> Vec<Change> {
    // The usual case, a plugin resending its list with some fields changed:
    // the same IDs in the same order are compared pairwise, without indexing
    // either list (100,000 devices per message on a large node).
    if prev.len() == next.len() && prev.iter().zip(next).all(|(a, b)| a.id == b.id) {
        let mut out = Vec::new();
        for (old, d) in prev.iter().zip(next) {
            changed_fields(old, d, &mut out);
        }
        return out;
    }
    let before: HashMap<&str, &Device> = prev.iter().map(|d| (d.id.as_str(), d)).collect();
    let after: HashMap<&str, &Device> = next.iter().map(|d| (d.id.as_str(), d)).collect();
    let mut out = Vec::new();
    for d in next {
        match before.get(d.id.as_str()) {
            None => out.push(Change::Added { id: d.id.clone() }),
            Some(old) => changed_fields(old, d, &mut out),
        }
    }
    out.extend(
        prev.iter().filter(|d| !after.contains_key(d.id.as_str())).map(|d| Change::Removed { id: d.id.clone() }),
    );
    out
}

/// What changed between two versions of one device.
fn changed_fields(old: &Device, d: &Device, out: &mut Vec<Change>) {
    if old.health != d.health {
        out.push(Change::HealthChanged { id: d.id.clone(), from: old.health.clone(), to: d.health.clone() });
    }
    if old.numa_nodes != d.numa_nodes {
        out.push(Change::TopologyChanged { id: d.id.clone() });
    }
}

/// One container's share of an Allocate answer, in dpctl's JSON shape.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerAllocation {
    /// The device IDs that were requested for this container (JSON `device_ids`, as
    /// everywhere in dpctl's JSON; `devices_ids`, the proto's spelling, is read too).
    #[serde(rename = "device_ids", alias = "devices_ids")]
    pub devices_ids: Vec<String>,
    /// Environment variables.
    pub envs: BTreeMap<String, String>,
    /// Mounts.
    pub mounts: Vec<Mount>,
    /// Device nodes.
    pub devices: Vec<DeviceSpec>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
    /// Fully qualified CDI device names.
    pub cdi_devices: Vec<String>,
}

/// A mount of an Allocate answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    /// Path in the container.
    pub container_path: String,
    /// Path on the host.
    pub host_path: String,
    /// Read-only mount.
    pub read_only: bool,
}

/// A device node of an Allocate answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSpec {
    /// Path in the container.
    pub container_path: String,
    /// Path on the host.
    pub host_path: String,
    /// cgroup permissions (r, w, m).
    pub permissions: String,
}

impl ContainerAllocation {
    /// Builds dpctl's view of one container response.
    pub fn from_response(devices_ids: Vec<String>, r: &dp::ContainerAllocateResponse) -> Self {
        ContainerAllocation {
            devices_ids,
            envs: r.envs.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            mounts: r
                .mounts
                .iter()
                .map(|m| Mount {
                    container_path: m.container_path.clone(),
                    host_path: m.host_path.clone(),
                    read_only: m.read_only,
                })
                .collect(),
            devices: r
                .devices
                .iter()
                .map(|d| DeviceSpec {
                    container_path: d.container_path.clone(),
                    host_path: d.host_path.clone(),
                    permissions: d.permissions.clone(),
                })
                .collect(),
            annotations: r.annotations.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            cdi_devices: r.cdi_devices.iter().map(|c| c.name.clone()).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(id: &str, health: &str, numa: Option<Vec<i64>>) -> Device {
        Device { id: id.into(), health: health.into(), numa_nodes: numa }
    }

    #[test]
    fn counts_like_the_kubelet() {
        let d = vec![dev("a", "Healthy", None), dev("b", "Unhealthy", None), dev("c", "healthy", None)];
        assert_eq!(counts(&d), Counts { capacity: 3, allocatable: 1 });
        assert_eq!(counts(&[]), Counts::default());
    }

    #[test]
    fn diff_reports_every_kind_of_change() {
        let a = vec![dev("a", "Healthy", Some(vec![0])), dev("b", "Healthy", None)];
        let b = vec![dev("a", "Unhealthy", Some(vec![1])), dev("c", "Healthy", None)];
        assert_eq!(
            diff(&a, &b),
            vec![
                Change::HealthChanged { id: "a".into(), from: "Healthy".into(), to: "Unhealthy".into() },
                Change::TopologyChanged { id: "a".into() },
                Change::Added { id: "c".into() },
                Change::Removed { id: "b".into() },
            ]
        );
    }

    #[test]
    fn diff_of_the_same_ids_in_the_same_order_compares_pairwise() {
        let a = vec![dev("a", "Healthy", Some(vec![0])), dev("b", "Healthy", None), dev("c", "Healthy", None)];
        let b = vec![dev("a", "Healthy", Some(vec![1])), dev("b", "Unhealthy", None), dev("c", "Healthy", None)];
        let want = vec![
            Change::TopologyChanged { id: "a".into() },
            Change::HealthChanged { id: "b".into(), from: "Healthy".into(), to: "Unhealthy".into() },
        ];
        assert_eq!(diff(&a, &b), want);
        // The same lists in another order give the same changes (by ID).
        let reordered: Vec<Device> = b.iter().rev().cloned().collect();
        let mut got = diff(&a, &reordered);
        got.reverse();
        assert_eq!(got, want);
        assert!(diff(&a, &a).is_empty());
    }

    #[test]
    fn a_device_moved_out_of_its_wire_form_keeps_every_field() {
        let p = dp::Device {
            id: "x".into(),
            health: "Unhealthy".into(),
            topology: Some(dp::TopologyInfo { nodes: vec![dp::NumaNode { id: 0 }, dp::NumaNode { id: 3 }] }),
        };
        assert_eq!(Device::from(p.clone()), Device::from(&p));
        let bare = dp::Device { topology: None, ..p };
        assert_eq!(Device::from(bare).numa_nodes, None);
    }

    #[test]
    fn numa_zero_survives_conversion() {
        let p = dp::Device {
            id: "x".into(),
            health: "Healthy".into(),
            topology: Some(dp::TopologyInfo { nodes: vec![dp::NumaNode { id: 0 }] }),
        };
        let d = Device::from(&p);
        assert_eq!(d.numa_nodes, Some(vec![0]));
        assert_eq!(dp::Device::from(&d), p);
        assert_eq!(serde_json::to_value(&d).unwrap()["numa_nodes"], serde_json::json!([0]));
    }
}
