//! What PodResources shows of the state (docs/kubelet-versions.md §8): the
//! admitted pods' devices and exclusive CPUs, and the healthy devices. The
//! shell (`kubelet_sim/podres.rs`) serves it.

use std::collections::BTreeMap;

use super::Manager;
use super::state::{NO_TOPOLOGY, Pod};
use crate::kubelet_sim::pod::ContainerKind;
use crate::proto::podresources::v1;

fn topology(node: i64) -> Option<v1::TopologyInfo> {
    (node != NO_TOPOLOGY).then(|| v1::TopologyInfo { nodes: vec![v1::NumaNode { id: node }] })
}

/// One container's devices, one entry per (device, NUMA node).
fn container_devices(pod: &Pod, container: &str) -> Vec<v1::ContainerDevices> {
    let mut out = Vec::new();
    if let Some(by_res) = pod.allocs.get(container) {
        for (resource, a) in by_res {
            for (node, ids) in &a.by_numa {
                for id in ids {
                    out.push(v1::ContainerDevices {
                        resource_name: resource.clone(),
                        device_ids: vec![id.clone()],
                        topology: topology(*node),
                    });
                }
            }
        }
    }
    out
}

/// A pod as v1 `List` shows it: sidecars first (when `sidecars`), then
/// regular containers.
fn pod_v1(
    pod: &Pod,
    cpus: Option<&BTreeMap<String, Vec<u32>>>,
    sidecars: bool,
    dra: &super::dra::DraState,
) -> v1::PodResources {
    let order: &[ContainerKind] =
        if sidecars { &[ContainerKind::Sidecar, ContainerKind::Regular] } else { &[ContainerKind::Regular] };
    let containers = order
        .iter()
        .flat_map(|kind| pod.spec.containers.iter().filter(move |c| c.kind == *kind))
        .map(|c| v1::ContainerResources {
            name: c.name.clone(),
            devices: container_devices(pod, &c.name),
            cpu_ids: cpus
                .and_then(|m| m.get(&c.name))
                .map(|v| v.iter().map(|x| i64::from(*x)).collect())
                .unwrap_or_default(),
            dynamic_resources: dra.dynamic_resources(&pod.spec.namespace, &pod.spec.resource_claims, &c.claims),
            ..Default::default()
        })
        .collect();
    v1::PodResources {
        name: pod.spec.name.clone(),
        namespace: pod.spec.namespace.clone(),
        containers,
        ..Default::default()
    }
}

impl Manager {
    /// docs/kubelet-versions.md §8: `List`/`Get` show restartable init
    /// containers from 1.30 (1.30-1.32 with `SidecarContainers` on, its
    /// default; always from 1.33); up to 1.29 regular containers only.
    fn sidecars(&self) -> bool {
        self.version.list_includes_sidecars()
    }

    /// v1 `List`: every admitted pod.
    pub fn podres_list(&self) -> Vec<v1::PodResources> {
        let sidecars = self.sidecars();
        let st = &self.st;
        st.pods.iter().map(|p| pod_v1(p, st.exclusive_cpus.get(p.uid()), sidecars, &self.dra)).collect()
    }

    /// v1 `Get` of one pod.
    /// A rejected pod is found where the release's GetPodByName does not
    /// filter inactive pods (docs/kubelet-versions.md §8).
    pub fn podres_get(&self, name: &str, namespace: &str) -> Option<v1::PodResources> {
        let sidecars = self.sidecars();
        let st = &self.st;
        let found = st.pod_index(namespace, name).map(|i| &st.pods[i]);
        let found = found.or_else(|| {
            self.version
                .podresources_get_finds_rejected()
                .then(|| st.rejected.get(&(namespace.to_string(), name.to_string())))
                .flatten()
        });
        found.map(|p| {
            let cpus = st.exclusive_cpus.get(p.uid()).or_else(|| st.stale_cpus.get(p.uid()));
            pod_v1(p, cpus, sidecars, &self.dra)
        })
    }

    /// v1alpha1 `List`: regular containers only, in the v1 shape.
    pub fn podres_list_regular(&self) -> Vec<v1::PodResources> {
        let st = &self.st;
        st.pods.iter().map(|pod| pod_v1(pod, st.exclusive_cpus.get(pod.uid()), false, &self.dra)).collect()
    }

    /// The healthy devices of `GetAllocatableResources`.
    pub fn allocatable_devices(&self) -> Vec<v1::ContainerDevices> {
        let mut devices = Vec::new();
        for (name, r) in &self.st.resources {
            // docs/protocol.md §3.4: the kubelet keeps `allDevices` as a map by ID,
            // the last entry of a repeated ID winning, and lists the healthy
            // ones once each.
            let last: std::collections::HashMap<&str, &crate::model::Device> =
                r.devices.iter().map(|d| (d.id.as_str(), d)).collect();
            let mut seen = std::collections::HashSet::new();
            for id in r.healthy().map(|d| d.id.as_str()) {
                let Some(d) = last.get(id).filter(|_| seen.insert(id)) else { continue };
                match &d.numa_nodes {
                    None => devices.push(v1::ContainerDevices {
                        resource_name: name.clone(),
                        device_ids: vec![d.id.clone()],
                        topology: None,
                    }),
                    // Like the kubelet: one entry per node, so a device with an
                    // empty node list is not listed at all.
                    Some(nodes) => devices.extend(nodes.iter().map(|n| v1::ContainerDevices {
                        resource_name: name.clone(),
                        device_ids: vec![d.id.clone()],
                        topology: Some(v1::TopologyInfo { nodes: vec![v1::NumaNode { id: *n }] }),
                    })),
                }
            }
        }
        devices
    }
}
