//! The sim's PodResources answers, encoded the way the kubelet encodes them:
//! one `ContainerDevices` per (device, NUMA node) with exactly one ID, no
//! `topology` for a device without topology, sidecars before regular
//! containers (from 1.30; regular only before), plain init containers left out; v1alpha1 lists regular
//! containers only. `GetAllocatableResources` lists healthy devices and,
//! under the static CPU manager, the CPUs minus the reserved ones; `cpu_ids`
//! are a container's exclusive CPUs.

use std::sync::Arc;

use super::shell::Inner;
use crate::podresources::server::{Provider, to_v1alpha1};
use crate::proto::podresources::{v1, v1alpha1};

/// A [`Provider`] over the sim's pods and devices.
#[derive(Clone)]
pub(crate) struct SimPodResources {
    pub inner: Arc<Inner>,
}

impl Provider for SimPodResources {
    /// List looks at the active pods first (UpdateAllocatedDevices in
    /// pkg/kubelet/apis/podresources/server_v1.go).
    fn list(&self) -> Vec<v1::PodResources> {
        let mut m = self.inner.lock();
        m.update_allocated_devices();
        m.podres_list()
    }

    fn get(&self, name: &str, namespace: &str) -> Option<v1::PodResources> {
        self.inner.lock().podres_get(name, namespace)
    }

    fn allocatable(&self) -> v1::AllocatableResourcesResponse {
        let devices = self.inner.lock().allocatable_devices();
        let t = &self.inner.config.topology;
        let cpu_ids = if t.cpu_policy == crate::topology::CpuPolicy::Static {
            t.machine.cpus().filter(|c| !t.reserved_cpus.contains(c)).map(i64::from).collect()
        } else {
            Vec::new()
        };
        v1::AllocatableResourcesResponse { devices, cpu_ids, memory: Vec::new() }
    }

    fn list_v1alpha1(&self) -> Vec<v1alpha1::PodResources> {
        self.inner.lock().podres_list_regular().iter().map(to_v1alpha1).collect()
    }
}
