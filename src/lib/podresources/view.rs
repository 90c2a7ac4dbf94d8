//! dpctl's own view of PodResources data: the shapes `dpctl podresources`
//! prints as JSON (stable snake_case keys that mirror the proto field names,
//! zero values kept) and the output layer renders as tables.
//!
//! Two differences from the proto, both for `jq`: `topology.nodes[].ID` is
//! flattened into `numa_nodes` (`null` when the kubelet sent no topology,
//! which is not the same as NUMA node 0), and CDI devices are plain strings.
//! Entries keep the kubelet's order and grouping (one `ContainerDevices` per
//! device and NUMA node upstream); whatever counts or groups devices (tables,
//! `free`, `watch`) first merges them per device with [`merge_devices`].

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::proto::podresources::{v1, v1alpha1};

/// Version of dpctl's PodResources JSON layout, printed as `schema_version`.
pub const SCHEMA_VERSION: u32 = 1;

/// Which PodResources API version answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// `v1.PodResourcesLister` (kubelet 1.20 and later).
    V1,
    /// `v1alpha1.PodResourcesLister`: devices only, no topology.
    V1alpha1,
}

impl Api {
    /// The proto package name, `v1` or `v1alpha1`.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::V1 => "v1",
            Api::V1alpha1 => "v1alpha1",
        }
    }
}

impl std::fmt::Display for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One pod as the kubelet reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodView {
    /// Pod name.
    pub name: String,
    /// Pod namespace.
    pub namespace: String,
    /// Containers in the kubelet's order: restartable init containers
    /// (sidecars) first, then regular containers.
    pub containers: Vec<ContainerView>,
    /// Pod-level exclusive CPUs (newest kubelets only); they overlap the
    /// containers' CPUs on purpose.
    pub cpu_ids: Vec<i64>,
    /// Pod-level memory (newest kubelets only); overlaps the containers'.
    pub memory: Vec<MemoryView>,
}

/// One container's resources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerView {
    /// Container name.
    pub name: String,
    /// Device-plugin devices, one entry per `ContainerDevices` the kubelet sent.
    pub devices: Vec<DevicesView>,
    /// Exclusive CPUs (static CPU manager policy), in the kubelet's order.
    pub cpu_ids: Vec<i64>,
    /// Memory and hugepages (static memory manager policy).
    pub memory: Vec<MemoryView>,
    /// DRA resource claims.
    pub dynamic_resources: Vec<ClaimView>,
}

/// One `ContainerDevices` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DevicesView {
    /// Extended resource name, e.g. `nvidia.com/gpu`.
    pub resource_name: String,
    /// Device IDs as the plugin named them.
    pub device_ids: Vec<String>,
    /// NUMA nodes; `None` when the entry has no topology.
    pub numa_nodes: Option<Vec<i64>>,
}

/// One `ContainerMemory` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryView {
    /// `memory` or `hugepages-<size>`.
    pub memory_type: String,
    /// Bytes.
    pub size: u64,
    /// NUMA nodes; `None` when the entry has no topology.
    pub numa_nodes: Option<Vec<i64>>,
}

/// One DRA claim (`DynamicResource`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimView {
    /// ResourceClaim name.
    pub claim_name: String,
    /// ResourceClaim namespace.
    pub claim_namespace: String,
    /// The allocated devices.
    pub claim_resources: Vec<ClaimResourceView>,
}

/// One `ClaimResource`: a device allocated to a claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimResourceView {
    /// Fully qualified CDI device names.
    pub cdi_devices: Vec<String>,
    /// DRA driver.
    pub driver_name: String,
    /// Resource pool.
    pub pool_name: String,
    /// Device within the pool.
    pub device_name: String,
    /// Share ID for shared devices (`null` when not sent).
    pub share_id: Option<String>,
}

impl ClaimResourceView {
    /// `driver/pool/device`, the DRA name of the device.
    pub fn qualified_device(&self) -> String {
        format!("{}/{}/{}", self.driver_name, self.pool_name, self.device_name)
    }
}

/// `GetAllocatableResources`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatableView {
    /// Healthy devices, one entry per `ContainerDevices`.
    pub devices: Vec<DevicesView>,
    /// Allocatable CPUs (static CPU manager policy only).
    pub cpu_ids: Vec<i64>,
    /// Allocatable memory (static memory manager policy only).
    pub memory: Vec<MemoryView>,
}

/// `dpctl podresources list -o json`.
#[derive(Debug, Clone, Serialize)]
pub struct ListView {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The API version that answered.
    pub api_version: Api,
    /// The pods.
    pub pod_resources: Vec<PodView>,
}

/// `dpctl podresources get -o json`.
#[derive(Debug, Clone, Serialize)]
pub struct GetView {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The API version that answered.
    pub api_version: Api,
    /// The pod.
    pub pod_resources: PodView,
}

/// `dpctl podresources allocatable -o json`.
#[derive(Debug, Clone, Serialize)]
pub struct AllocatableReport {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The allocatable resources.
    #[serde(flatten)]
    pub allocatable: AllocatableView,
}

fn numa(t: Option<&v1::TopologyInfo>) -> Option<Vec<i64>> {
    t.map(|t| t.nodes.iter().map(|n| n.id).collect())
}

fn topology(n: Option<&Vec<i64>>) -> Option<v1::TopologyInfo> {
    n.map(|nodes| v1::TopologyInfo { nodes: nodes.iter().map(|id| v1::NumaNode { id: *id }).collect() })
}

impl From<&v1::ContainerDevices> for DevicesView {
    fn from(d: &v1::ContainerDevices) -> Self {
        DevicesView {
            resource_name: d.resource_name.clone(),
            device_ids: d.device_ids.clone(),
            numa_nodes: numa(d.topology.as_ref()),
        }
    }
}

impl From<&DevicesView> for v1::ContainerDevices {
    fn from(d: &DevicesView) -> Self {
        v1::ContainerDevices {
            resource_name: d.resource_name.clone(),
            device_ids: d.device_ids.clone(),
            topology: topology(d.numa_nodes.as_ref()),
        }
    }
}

impl From<&v1::ContainerMemory> for MemoryView {
    fn from(m: &v1::ContainerMemory) -> Self {
        MemoryView { memory_type: m.memory_type.clone(), size: m.size, numa_nodes: numa(m.topology.as_ref()) }
    }
}

impl From<&MemoryView> for v1::ContainerMemory {
    fn from(m: &MemoryView) -> Self {
        v1::ContainerMemory {
            memory_type: m.memory_type.clone(),
            size: m.size,
            topology: topology(m.numa_nodes.as_ref()),
        }
    }
}

impl From<&v1::DynamicResource> for ClaimView {
    fn from(d: &v1::DynamicResource) -> Self {
        ClaimView {
            claim_name: d.claim_name.clone(),
            claim_namespace: d.claim_namespace.clone(),
            claim_resources: d
                .claim_resources
                .iter()
                .map(|r| ClaimResourceView {
                    cdi_devices: r.cdi_devices.iter().map(|c| c.name.clone()).collect(),
                    driver_name: r.driver_name.clone(),
                    pool_name: r.pool_name.clone(),
                    device_name: r.device_name.clone(),
                    share_id: r.share_id.clone(),
                })
                .collect(),
        }
    }
}

impl From<&ClaimView> for v1::DynamicResource {
    fn from(c: &ClaimView) -> Self {
        v1::DynamicResource {
            claim_name: c.claim_name.clone(),
            claim_namespace: c.claim_namespace.clone(),
            claim_resources: c
                .claim_resources
                .iter()
                .map(|r| v1::ClaimResource {
                    cdi_devices: r.cdi_devices.iter().map(|n| v1::CdiDevice { name: n.clone() }).collect(),
                    driver_name: r.driver_name.clone(),
                    pool_name: r.pool_name.clone(),
                    device_name: r.device_name.clone(),
                    share_id: r.share_id.clone(),
                })
                .collect(),
        }
    }
}

impl From<&v1::ContainerResources> for ContainerView {
    fn from(c: &v1::ContainerResources) -> Self {
        ContainerView {
            name: c.name.clone(),
            devices: c.devices.iter().map(DevicesView::from).collect(),
            cpu_ids: c.cpu_ids.clone(),
            memory: c.memory.iter().map(MemoryView::from).collect(),
            dynamic_resources: c.dynamic_resources.iter().map(ClaimView::from).collect(),
        }
    }
}

impl From<&ContainerView> for v1::ContainerResources {
    fn from(c: &ContainerView) -> Self {
        v1::ContainerResources {
            name: c.name.clone(),
            devices: c.devices.iter().map(v1::ContainerDevices::from).collect(),
            cpu_ids: c.cpu_ids.clone(),
            memory: c.memory.iter().map(v1::ContainerMemory::from).collect(),
            dynamic_resources: c.dynamic_resources.iter().map(v1::DynamicResource::from).collect(),
        }
    }
}

impl From<&v1::PodResources> for PodView {
    fn from(p: &v1::PodResources) -> Self {
        PodView {
            name: p.name.clone(),
            namespace: p.namespace.clone(),
            containers: p.containers.iter().map(ContainerView::from).collect(),
            cpu_ids: p.cpu_ids.clone(),
            memory: p.memory.iter().map(MemoryView::from).collect(),
        }
    }
}

/// Moves the kubelet's answer into dpctl's view without copying strings
/// (the fast path for big nodes).
impl From<v1::PodResources> for PodView {
    fn from(p: v1::PodResources) -> Self {
        let memory = |m: Vec<v1::ContainerMemory>| {
            m.into_iter()
                .map(|m| MemoryView { numa_nodes: numa(m.topology.as_ref()), memory_type: m.memory_type, size: m.size })
                .collect()
        };
        PodView {
            name: p.name,
            namespace: p.namespace,
            containers: p
                .containers
                .into_iter()
                .map(|c| ContainerView {
                    dynamic_resources: c.dynamic_resources.iter().map(ClaimView::from).collect(),
                    name: c.name,
                    devices: c
                        .devices
                        .into_iter()
                        .map(|d| DevicesView {
                            numa_nodes: numa(d.topology.as_ref()),
                            resource_name: d.resource_name,
                            device_ids: d.device_ids,
                        })
                        .collect(),
                    cpu_ids: c.cpu_ids,
                    memory: memory(c.memory),
                })
                .collect(),
            cpu_ids: p.cpu_ids,
            memory: memory(p.memory),
        }
    }
}

impl From<&PodView> for v1::PodResources {
    fn from(p: &PodView) -> Self {
        v1::PodResources {
            name: p.name.clone(),
            namespace: p.namespace.clone(),
            containers: p.containers.iter().map(v1::ContainerResources::from).collect(),
            cpu_ids: p.cpu_ids.clone(),
            memory: p.memory.iter().map(v1::ContainerMemory::from).collect(),
        }
    }
}

impl From<&v1alpha1::PodResources> for PodView {
    fn from(p: &v1alpha1::PodResources) -> Self {
        PodView {
            name: p.name.clone(),
            namespace: p.namespace.clone(),
            containers: p
                .containers
                .iter()
                .map(|c| ContainerView {
                    name: c.name.clone(),
                    devices: c
                        .devices
                        .iter()
                        .map(|d| DevicesView {
                            resource_name: d.resource_name.clone(),
                            device_ids: d.device_ids.clone(),
                            numa_nodes: None,
                        })
                        .collect(),
                    cpu_ids: Vec::new(),
                    memory: Vec::new(),
                    dynamic_resources: Vec::new(),
                })
                .collect(),
            cpu_ids: Vec::new(),
            memory: Vec::new(),
        }
    }
}

impl From<&v1::AllocatableResourcesResponse> for AllocatableView {
    fn from(a: &v1::AllocatableResourcesResponse) -> Self {
        AllocatableView {
            devices: a.devices.iter().map(DevicesView::from).collect(),
            cpu_ids: a.cpu_ids.clone(),
            memory: a.memory.iter().map(MemoryView::from).collect(),
        }
    }
}

impl From<&AllocatableView> for v1::AllocatableResourcesResponse {
    fn from(a: &AllocatableView) -> Self {
        v1::AllocatableResourcesResponse {
            devices: a.devices.iter().map(v1::ContainerDevices::from).collect(),
            cpu_ids: a.cpu_ids.clone(),
            memory: a.memory.iter().map(v1::ContainerMemory::from).collect(),
        }
    }
}

/// One device of one resource with all of its NUMA nodes (see [`merge_devices`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergedDevice<'a> {
    /// Extended resource name.
    pub resource_name: &'a str,
    /// Device ID.
    pub device_id: &'a str,
    /// Every NUMA node the entries for this device named, sorted and
    /// deduplicated; `None` only when no entry had topology.
    pub numa_nodes: Option<Vec<i64>>,
}

/// Merges `ContainerDevices` entries into one per (resource, device ID), in
/// order of first appearance. The kubelet sends one entry per (device, NUMA
/// node), so a device on two NUMA nodes arrives as two entries with the same
/// single ID; counting entries (or IDs per entry) would count it twice.
pub fn merge_devices(devices: &[DevicesView]) -> Vec<MergedDevice<'_>> {
    /// Up to this many IDs a linear search beats hashing (most containers hold a few devices).
    const LINEAR: usize = 16;
    let total: usize = devices.iter().map(|d| d.device_ids.len()).sum();
    let mut out: Vec<MergedDevice<'_>> = Vec::with_capacity(total);
    let mut index: Option<HashMap<(&str, &str), usize>> = (total > LINEAR).then(|| HashMap::with_capacity(total));
    for d in devices {
        for id in &d.device_ids {
            let known = match &index {
                Some(map) => map.get(&(d.resource_name.as_str(), id.as_str())).copied(),
                None => out.iter().position(|m| m.device_id == id && m.resource_name == d.resource_name),
            };
            let i = known.unwrap_or_else(|| {
                out.push(MergedDevice { resource_name: &d.resource_name, device_id: id, numa_nodes: None });
                if let Some(map) = index.as_mut() {
                    map.insert((&d.resource_name, id), out.len() - 1);
                }
                out.len() - 1
            });
            if let Some(nodes) = &d.numa_nodes {
                out[i].numa_nodes.get_or_insert_with(Vec::new).extend(nodes);
            }
        }
    }
    for m in &mut out {
        if let Some(n) = m.numa_nodes.as_mut() {
            n.sort_unstable();
            n.dedup();
        }
    }
    out
}

/// The name `--resource` uses for exclusive CPUs.
pub const CPU_RESOURCE: &str = "cpu";

/// Which pods to show.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only pods in this namespace.
    pub namespace: Option<String>,
    /// Only this resource: a device resource name, a memory type (`memory`,
    /// `hugepages-2Mi`), `cpu`, or a DRA driver name. Other resources are
    /// dropped from the pods that remain.
    pub resource: Option<String>,
}

impl Filter {
    /// True when nothing is filtered.
    pub fn is_empty(&self) -> bool {
        self.namespace.is_none() && self.resource.is_none()
    }

    /// Applies the filter, keeping the kubelet's order.
    pub fn apply(&self, pods: Vec<PodView>) -> Vec<PodView> {
        pods.into_iter()
            .filter(|p| self.namespace.as_deref().is_none_or(|ns| p.namespace == ns))
            .filter_map(|p| match &self.resource {
                None => Some(p),
                Some(r) => only_resource(p, r),
            })
            .collect()
    }
}

/// DRA devices that a `--resource` filter by extended resource name hid.
///
/// PodResources lists the devices a DRA driver prepared under
/// `dynamic_resources`, named by driver, pool and device: never under the
/// extended resource name, even for a pod that asked for `example.com/gpu`
/// and was served by a DRA driver (KEP-5004, "extended resources backed by
/// DRA": alpha in 1.34-1.35, on by default from 1.36). The API carries no link
/// from a claim back to that name, so a filter by it cannot show them; this
/// says they are there rather than showing nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HiddenDra {
    /// The resource asked for.
    pub resource: String,
    /// Containers (in the namespace asked for) that hold DRA devices.
    pub containers: usize,
    /// Their drivers, sorted, once each.
    pub drivers: Vec<String>,
}

impl Filter {
    /// The DRA devices this filter hid from `pods` (unfiltered), when it
    /// filters by an extended resource name (`vendor/name`; driver names
    /// have no `/`) and some container in scope holds DRA devices.
    pub fn hidden_dra(&self, pods: &[PodView]) -> Option<HiddenDra> {
        let r = self.resource.as_deref().filter(|r| r.contains('/'))?;
        let mut drivers: Vec<String> = Vec::new();
        let mut containers = 0;
        for p in pods.iter().filter(|p| self.namespace.as_deref().is_none_or(|ns| p.namespace == ns)) {
            for c in &p.containers {
                let held = c.dynamic_resources.iter().flat_map(|claim| &claim.claim_resources);
                let before = drivers.len();
                drivers.extend(held.map(|cr| cr.driver_name.clone()));
                containers += usize::from(drivers.len() > before);
            }
        }
        drivers.sort();
        drivers.dedup();
        (containers > 0).then(|| HiddenDra { resource: r.to_string(), containers, drivers })
    }
}

/// The pod with only resource `r` left, or `None` when it does not use it.
fn only_resource(mut p: PodView, r: &str) -> Option<PodView> {
    let cpu = r == CPU_RESOURCE;
    for c in &mut p.containers {
        c.devices.retain(|d| d.resource_name == r);
        c.memory.retain(|m| m.memory_type == r);
        if !cpu {
            c.cpu_ids.clear();
        }
        for claim in &mut c.dynamic_resources {
            claim.claim_resources.retain(|cr| cr.driver_name == r);
        }
        c.dynamic_resources.retain(|claim| !claim.claim_resources.is_empty());
    }
    p.containers.retain(|c| {
        !c.devices.is_empty() || !c.memory.is_empty() || !c.cpu_ids.is_empty() || !c.dynamic_resources.is_empty()
    });
    p.memory.retain(|m| m.memory_type == r);
    if !cpu {
        p.cpu_ids.clear();
    }
    if p.containers.is_empty() && p.memory.is_empty() && p.cpu_ids.is_empty() { None } else { Some(p) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ns: &str, name: &str, res: &str) -> PodView {
        PodView {
            name: name.into(),
            namespace: ns.into(),
            containers: vec![ContainerView {
                name: "c".into(),
                devices: vec![DevicesView {
                    resource_name: res.into(),
                    device_ids: vec!["d0".into()],
                    numa_nodes: Some(vec![0]),
                }],
                cpu_ids: vec![3, 1],
                memory: vec![],
                dynamic_resources: vec![],
            }],
            cpu_ids: vec![],
            memory: vec![],
        }
    }

    /// A pod served by a DRA driver for `x.io/gpu` (KEP-5004, 1.36+) shows
    /// in PodResources by driver only: a filter by the resource name says
    /// so instead of showing nothing; a filter by driver or CPU says nothing.
    #[test]
    fn a_filter_by_resource_name_tells_of_the_dra_devices_it_hid() {
        let mut dra = pod("a", "p2", "unused");
        dra.containers[0].devices.clear();
        dra.containers[0].dynamic_resources = vec![ClaimView {
            claim_name: "p2-gpu".into(),
            claim_namespace: "a".into(),
            claim_resources: ["gpu.x.io", "gpu.x.io", "nic.x.io"]
                .into_iter()
                .map(|d| ClaimResourceView {
                    cdi_devices: vec![],
                    driver_name: d.into(),
                    pool_name: "node".into(),
                    device_name: "dev".into(),
                    share_id: None,
                })
                .collect(),
        }];
        let pods = vec![pod("a", "p1", "x.io/gpu"), dra, pod("b", "p3", "x.io/gpu")];
        let f = Filter { namespace: None, resource: Some("x.io/gpu".into()) };
        assert_eq!(f.apply(pods.clone()).len(), 2, "only the device plugin's pods match");
        let hidden = f.hidden_dra(&pods).unwrap();
        assert_eq!(hidden.containers, 1);
        assert_eq!(hidden.drivers, ["gpu.x.io", "nic.x.io"]);
        let in_b = Filter { namespace: Some("b".into()), resource: Some("x.io/gpu".into()) };
        assert_eq!(in_b.hidden_dra(&pods), None, "no DRA devices in namespace b");
        for r in ["gpu.x.io", "cpu"] {
            assert_eq!(Filter { namespace: None, resource: Some(r.into()) }.hidden_dra(&pods), None, "{r}");
        }
        assert_eq!(Filter::default().hidden_dra(&pods), None);
    }

    #[test]
    fn filter_by_namespace_and_resource() {
        let pods = vec![pod("a", "p1", "x.io/gpu"), pod("b", "p2", "x.io/gpu"), pod("a", "p3", "y.io/nic")];
        let f = Filter { namespace: Some("a".into()), resource: None };
        assert_eq!(f.apply(pods.clone()).iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["p1", "p3"]);
        let f = Filter { namespace: None, resource: Some("x.io/gpu".into()) };
        let got = f.apply(pods.clone());
        assert_eq!(got.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["p1", "p2"]);
        assert!(got[0].containers[0].cpu_ids.is_empty(), "other resources are dropped");
        let f = Filter { namespace: None, resource: Some("cpu".into()) };
        let got = f.apply(pods);
        assert_eq!(got.len(), 3);
        assert!(got[0].containers[0].devices.is_empty());
        assert_eq!(got[0].containers[0].cpu_ids, [3, 1]);
    }

    #[test]
    fn merge_joins_the_numa_entries_of_one_device() {
        let d = |r: &str, id: &str, n: Option<Vec<i64>>| DevicesView {
            resource_name: r.into(),
            device_ids: vec![id.into()],
            numa_nodes: n,
        };
        // The upstream encoding: one entry per (device, NUMA node).
        let devices = [
            d("x/gpu", "g0", Some(vec![1])),
            d("x/gpu", "g1", Some(vec![1])),
            d("x/gpu", "g0", Some(vec![0])),
            d("y/nic", "g0", None),
            d("x/gpu", "g2", None),
        ];
        let m = merge_devices(&devices);
        let got: Vec<_> = m.iter().map(|m| (m.resource_name, m.device_id, m.numa_nodes.clone())).collect();
        assert_eq!(
            got,
            [
                ("x/gpu", "g0", Some(vec![0, 1])),
                ("x/gpu", "g1", Some(vec![1])),
                ("y/nic", "g0", None),
                ("x/gpu", "g2", None),
            ]
        );
        // Past the linear-search size, the same result through the index.
        let many: Vec<DevicesView> = (0..40).map(|i| d("x/gpu", &format!("d{}", i % 20), Some(vec![i / 20]))).collect();
        let m = merge_devices(&many);
        assert_eq!(m.len(), 20);
        assert!(m.iter().all(|m| m.numa_nodes == Some(vec![0, 1])), "{m:?}");
    }

    #[test]
    fn round_trip_keeps_absent_topology_apart_from_node_zero() {
        let v = pod("a", "p", "x.io/gpu");
        let raw = v1::PodResources::from(&v);
        assert_eq!(raw.containers[0].devices[0].topology.as_ref().map(|t| t.nodes[0].id), Some(0));
        assert_eq!(PodView::from(&raw), v);
        assert_eq!(PodView::from(raw), v, "moving gives the same view");
        let none = DevicesView { resource_name: "r".into(), device_ids: vec![], numa_nodes: None };
        assert!(v1::ContainerDevices::from(&none).topology.is_none());
    }
}
