//! `free`: what is left on a node, the question an operator asks when a pod
//! will not schedule. Allocatable (from `GetAllocatableResources`) minus what
//! the pods hold (from `List`), per resource and NUMA node, for devices,
//! exclusive CPUs and memory.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::Serialize;

use super::view::{AllocatableView, PodView, SCHEMA_VERSION, merge_devices};

/// Devices of one resource on one NUMA node (or set of nodes: a device on
/// two nodes is counted once, under both).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceFree {
    /// Extended resource name.
    pub resource_name: String,
    /// NUMA nodes of these devices; `None` for devices without topology.
    pub numa_nodes: Option<Vec<i64>>,
    /// Allocatable (healthy) devices.
    pub allocatable: usize,
    /// Of those, held by pods.
    pub in_use: usize,
    /// Of those, free.
    pub free: usize,
    /// The free device IDs.
    pub free_ids: Vec<String>,
    /// The device IDs in use.
    pub in_use_ids: Vec<String>,
}

/// Exclusive CPUs (static CPU manager policy).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CpuFree {
    /// Allocatable CPUs: online minus reserved; 0 without the static policy.
    pub allocatable: usize,
    /// Of those, held exclusively by pods.
    pub in_use: usize,
    /// Of those, free.
    pub free: usize,
    /// The free CPU IDs, sorted.
    pub free_ids: Vec<i64>,
    /// The CPU IDs in use, sorted.
    pub in_use_ids: Vec<i64>,
    /// Per NUMA node, when the CPUs' nodes are known (`free --cpus-per-numa`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_numa: Vec<CpuNumaFree>,
}

/// Exclusive CPUs of one NUMA node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CpuNumaFree {
    /// The NUMA node.
    pub numa_node: i64,
    /// Allocatable CPUs on it.
    pub allocatable: usize,
    /// Of those, held exclusively by pods.
    pub in_use: usize,
    /// Of those, free.
    pub free: usize,
    /// The free CPU IDs, sorted.
    pub free_ids: Vec<i64>,
}

impl CpuFree {
    /// Splits the CPUs by NUMA node, node `n` holding CPUs `n*per .. n*per+per-1`
    /// (the layout of `kubelet-sim --cpus-per-numa`). PodResources does not say
    /// which node a CPU is on.
    pub fn split_by_numa(&mut self, per: usize) {
        let per = i64::try_from(per.max(1)).unwrap_or(i64::MAX);
        let mut nodes: BTreeMap<i64, CpuNumaFree> = BTreeMap::new();
        for c in &self.free_ids {
            let n = nodes.entry(c / per).or_default();
            n.allocatable += 1;
            n.free += 1;
            n.free_ids.push(*c);
        }
        for c in &self.in_use_ids {
            let n = nodes.entry(c / per).or_default();
            n.allocatable += 1;
            n.in_use += 1;
        }
        self.per_numa = nodes.into_iter().map(|(numa_node, n)| CpuNumaFree { numa_node, ..n }).collect();
    }
}

/// Memory of one type on one NUMA node (or set of nodes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemoryFree {
    /// `memory` or `hugepages-<size>`.
    pub memory_type: String,
    /// NUMA nodes; `None` without topology.
    pub numa_nodes: Option<Vec<i64>>,
    /// Allocatable bytes.
    pub allocatable: u64,
    /// Bytes held by pods.
    pub in_use: u64,
    /// Allocatable minus in use (0 when more is in use than allocatable).
    pub free: u64,
}

/// A device a pod holds that the kubelet does not list as allocatable: it
/// turned unhealthy, or its plugin is gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldNotAllocatable {
    /// Extended resource name.
    pub resource_name: String,
    /// Device ID.
    pub device_id: String,
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub pod: String,
    /// Container name.
    pub container: String,
}

/// `dpctl podresources free`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FreeReport {
    /// Version of the JSON layout.
    pub schema_version: u32,
    /// Devices per resource and NUMA node, sorted by resource then NUMA.
    pub devices: Vec<DeviceFree>,
    /// Exclusive CPUs.
    pub cpus: CpuFree,
    /// Memory per type and NUMA node.
    pub memory: Vec<MemoryFree>,
    /// Devices in use that are not allocatable (unhealthy or gone).
    pub held_not_allocatable: Vec<HeldNotAllocatable>,
}

type NumaKey = Option<Vec<i64>>;

fn key(n: Option<&Vec<i64>>) -> NumaKey {
    n.map(|v| {
        let mut v = v.clone();
        v.sort_unstable();
        v.dedup();
        v
    })
}

/// Computes what is free from the allocatable resources and the pods.
pub fn free(alloc: &AllocatableView, pods: &[PodView]) -> FreeReport {
    let (devices, held_not_allocatable) = free_devices(alloc, pods);
    let cpus = free_cpus(alloc, pods);
    let memory = free_memory(alloc, pods);
    FreeReport { schema_version: SCHEMA_VERSION, devices, cpus, memory, held_not_allocatable }
}

/// Free devices per resource and NUMA node set, and the devices pods hold that are not allocatable.
fn free_devices(alloc: &AllocatableView, pods: &[PodView]) -> (Vec<DeviceFree>, Vec<HeldNotAllocatable>) {
    // Devices.
    // Each device once, with all its NUMA nodes (upstream lists a device on
    // two nodes twice), so it is counted once, under its node set.
    let mut groups: BTreeMap<(String, NumaKey), Vec<String>> = BTreeMap::new();
    let mut allocatable_ids: HashSet<(&str, &str)> = HashSet::new();
    for d in merge_devices(&alloc.devices) {
        allocatable_ids.insert((d.resource_name, d.device_id));
        groups.entry((d.resource_name.to_string(), d.numa_nodes)).or_default().push(d.device_id.to_string());
    }
    let mut held: HashSet<(&str, &str)> = HashSet::new();
    let mut held_not_allocatable = Vec::new();
    for p in pods {
        for c in &p.containers {
            for d in &c.devices {
                for id in &d.device_ids {
                    if held.insert((&d.resource_name, id)) && !allocatable_ids.contains(&(&d.resource_name, id)) {
                        held_not_allocatable.push(HeldNotAllocatable {
                            resource_name: d.resource_name.clone(),
                            device_id: id.clone(),
                            namespace: p.namespace.clone(),
                            pod: p.name.clone(),
                            container: c.name.clone(),
                        });
                    }
                }
            }
        }
    }
    let devices = groups
        .into_iter()
        .map(|((resource_name, numa_nodes), mut ids)| {
            ids.sort();
            let (in_use_ids, free_ids): (Vec<String>, Vec<String>) =
                ids.iter().cloned().partition(|id| held.contains(&(resource_name.as_str(), id.as_str())));
            DeviceFree {
                allocatable: ids.len(),
                in_use: in_use_ids.len(),
                free: free_ids.len(),
                resource_name,
                numa_nodes,
                free_ids,
                in_use_ids,
            }
        })
        .collect();
    (devices, held_not_allocatable)
}

/// Free CPUs.
fn free_cpus(alloc: &AllocatableView, pods: &[PodView]) -> CpuFree {
    // CPUs: pod-level CPUs overlap the containers', so take the union.
    let allocatable_cpus: BTreeSet<i64> = alloc.cpu_ids.iter().copied().collect();
    let used_cpus: HashSet<i64> = pods
        .iter()
        .flat_map(|p| p.cpu_ids.iter().chain(p.containers.iter().flat_map(|c| c.cpu_ids.iter())))
        .copied()
        .collect();
    let (in_use_ids, free_ids): (Vec<i64>, Vec<i64>) = allocatable_cpus.iter().partition(|c| used_cpus.contains(c));
    CpuFree {
        allocatable: allocatable_cpus.len(),
        in_use: in_use_ids.len(),
        free: free_ids.len(),
        free_ids,
        in_use_ids,
        per_numa: Vec::new(),
    }
}

/// Free memory per type and NUMA node set.
fn free_memory(alloc: &AllocatableView, pods: &[PodView]) -> Vec<MemoryFree> {
    // Memory: per pod, the larger of the containers' sum and the pod-level value.
    // Sums saturate: sizes are the kubelet's (or a fixture's) uint64s, and
    // three of 8 EiB used to overflow and panic.
    let mut mem_alloc: BTreeMap<(String, NumaKey), u64> = BTreeMap::new();
    for m in &alloc.memory {
        let e = mem_alloc.entry((m.memory_type.clone(), key(m.numa_nodes.as_ref()))).or_default();
        *e = e.saturating_add(m.size);
    }
    let mut mem_used: BTreeMap<(String, NumaKey), u64> = BTreeMap::new();
    for p in pods {
        let mut per_pod: HashMap<(String, NumaKey), u64> = HashMap::new();
        for m in p.containers.iter().flat_map(|c| c.memory.iter()) {
            let e = per_pod.entry((m.memory_type.clone(), key(m.numa_nodes.as_ref()))).or_default();
            *e = e.saturating_add(m.size);
        }
        let mut pod_level: HashMap<(String, NumaKey), u64> = HashMap::new();
        for m in &p.memory {
            let e = pod_level.entry((m.memory_type.clone(), key(m.numa_nodes.as_ref()))).or_default();
            *e = e.saturating_add(m.size);
        }
        for (k, v) in pod_level {
            let e = per_pod.entry(k).or_default();
            *e = (*e).max(v);
        }
        for (k, v) in per_pod {
            let e = mem_used.entry(k).or_default();
            *e = e.saturating_add(v);
        }
    }
    let keys: BTreeSet<&(String, NumaKey)> = mem_alloc.keys().chain(mem_used.keys()).collect();
    keys.into_iter()
        .map(|k| {
            let allocatable = mem_alloc.get(k).copied().unwrap_or(0);
            let in_use = mem_used.get(k).copied().unwrap_or(0);
            MemoryFree {
                memory_type: k.0.clone(),
                numa_nodes: k.1.clone(),
                allocatable,
                in_use,
                free: allocatable.saturating_sub(in_use),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podresources::view::{ContainerView, DevicesView, MemoryView};

    fn dev(r: &str, ids: &[&str], numa: Option<&[i64]>) -> DevicesView {
        DevicesView {
            resource_name: r.into(),
            device_ids: ids.iter().map(|s| s.to_string()).collect(),
            numa_nodes: numa.map(<[i64]>::to_vec),
        }
    }

    fn mem(t: &str, size: u64, numa: &[i64]) -> MemoryView {
        MemoryView { memory_type: t.into(), size, numa_nodes: Some(numa.to_vec()) }
    }

    #[test]
    fn a_device_on_two_numa_nodes_counts_once() {
        // Upstream: one entry per (device, NUMA node); g0 is on nodes 0 and 1.
        let alloc = AllocatableView {
            devices: vec![
                dev("x/gpu", &["g0"], Some(&[0])),
                dev("x/gpu", &["g2"], Some(&[0])),
                dev("x/gpu", &["g0"], Some(&[1])),
                dev("x/gpu", &["g1"], Some(&[1])),
            ],
            ..AllocatableView::default()
        };
        let pods = vec![PodView {
            name: "p".into(),
            namespace: "ns".into(),
            containers: vec![ContainerView {
                name: "c".into(),
                devices: vec![dev("x/gpu", &["g0"], Some(&[0])), dev("x/gpu", &["g0"], Some(&[1]))],
                cpu_ids: vec![],
                memory: vec![],
                dynamic_resources: vec![],
            }],
            cpu_ids: vec![],
            memory: vec![],
        }];
        let r = free(&alloc, &pods);
        let rows: Vec<_> = r
            .devices
            .iter()
            .map(|d| (d.numa_nodes.clone(), d.allocatable, d.in_use, d.free, d.free_ids.clone()))
            .collect();
        assert_eq!(
            rows,
            [
                (Some(vec![0]), 1, 0, 1, vec!["g2".to_string()]),
                (Some(vec![0, 1]), 1, 1, 0, vec![]),
                (Some(vec![1]), 1, 0, 1, vec!["g1".to_string()]),
            ]
        );
        assert_eq!(r.devices.iter().map(|d| d.allocatable).sum::<usize>(), 3);
        assert!(r.held_not_allocatable.is_empty());
    }

    #[test]
    fn free_per_resource_and_numa() {
        let alloc = AllocatableView {
            devices: vec![
                dev("x/gpu", &["g0"], Some(&[0])),
                dev("x/gpu", &["g1"], Some(&[0])),
                dev("x/gpu", &["g2"], Some(&[1])),
                dev("x/nic", &["n0"], None),
            ],
            cpu_ids: vec![3, 2, 1, 0],
            memory: vec![mem("memory", 1000, &[0]), mem("memory", 1000, &[1])],
        };
        let pods = vec![PodView {
            name: "p".into(),
            namespace: "ns".into(),
            containers: vec![ContainerView {
                name: "c".into(),
                devices: vec![dev("x/gpu", &["g1"], Some(&[0])), dev("x/gpu", &["g9"], Some(&[1]))],
                cpu_ids: vec![2, 1],
                memory: vec![mem("memory", 300, &[0])],
                dynamic_resources: vec![],
            }],
            cpu_ids: vec![1, 2],
            memory: vec![mem("memory", 200, &[0])],
        }];
        let r = free(&alloc, &pods);
        assert_eq!(r.devices.len(), 3);
        let g0 = &r.devices[0];
        assert_eq!((g0.resource_name.as_str(), g0.numa_nodes.as_deref()), ("x/gpu", Some(&[0][..])));
        assert_eq!((g0.allocatable, g0.in_use, g0.free), (2, 1, 1));
        assert_eq!(g0.free_ids, ["g0"]);
        assert_eq!((r.devices[1].free, r.devices[1].numa_nodes.as_deref()), (1, Some(&[1][..])));
        assert_eq!((r.devices[2].resource_name.as_str(), r.devices[2].numa_nodes.as_deref()), ("x/nic", None));
        assert_eq!(r.cpus.free_ids, [0, 3]);
        assert_eq!(r.cpus.in_use, 2);
        assert_eq!((r.memory[0].in_use, r.memory[0].free), (300, 700));
        assert_eq!(r.memory[1].free, 1000);
        assert_eq!(r.held_not_allocatable.len(), 1);
        assert_eq!(r.held_not_allocatable[0].device_id, "g9");
    }
}
