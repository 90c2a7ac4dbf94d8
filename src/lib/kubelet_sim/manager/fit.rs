//! The predicate admit handler's node-resources fit
//! (`pkg/kubelet/lifecycle/predicate.go`: `generalFilter` over the
//! scheduler's `noderesources` fit, every release 1.34-1.38): the pod's
//! effective requests against node allocatable minus what the other active
//! pods request, checked in the scheduler's order (pods, cpu, memory, then
//! each extended resource), the first that does not fit rejecting the pod
//! as `OutOf<resource>` with `InsufficientResourceError`'s text. Node
//! allocatable is the simulated machine's (the referee's: 16 GiB per NUMA
//! node, `--max-pods` 110) minus `--reserved-cpus` and the default hard
//! eviction threshold `memory.available<100Mi` (`hardEvictionReservation`,
//! `pkg/kubelet/cm/helpers.go`); an extended resource's is what node status
//! lists, raised to the devices allocated (`sanitizeNodeAllocatable`,
//! `pkg/kubelet/cm/devicemanager/manager.go`).

use std::collections::BTreeSet;

use super::Manager;
use super::rejection::Rejection;
use crate::kubelet_sim::pod::{ContainerKind, ContainerSpec, PodSpec};

/// Memory of each NUMA node of the simulated machine (as the referee's).
pub const MEMORY_PER_NUMA: u64 = 16 << 30;
/// The kubelet's default hard eviction threshold for memory.available.
pub const HARD_EVICTION_MEMORY: u64 = 100 << 20;
/// The kubelet's default `--max-pods`.
pub const MAX_PODS: u64 = 110;

/// The pod's effective request of one resource, as the kubelet's
/// `PodRequests` (k8s.io/component-helpers/resource): the larger of the
/// regular containers plus sidecars and each init container's need with the
/// sidecars started before it.
pub(crate) fn pod_request(spec: &PodSpec, get: impl Fn(&ContainerSpec) -> u64) -> u64 {
    let mut sidecars: u64 = 0;
    let mut init_peak: u64 = 0;
    let mut running: u64 = 0;
    for c in &spec.containers {
        let n = get(c);
        match c.kind {
            ContainerKind::Init => init_peak = init_peak.max(sidecars.saturating_add(n)),
            ContainerKind::Sidecar => {
                sidecars = sidecars.saturating_add(n);
                running = running.saturating_add(n);
                init_peak = init_peak.max(sidecars);
            }
            ContainerKind::Regular => running = running.saturating_add(n),
        }
    }
    running.max(init_peak)
}

fn cpu_millis(c: &ContainerSpec) -> u64 {
    c.compute.cpu_request().unwrap_or(0)
}

fn memory_bytes(c: &ContainerSpec) -> u64 {
    c.compute.memory_request.or(c.compute.memory_limit).unwrap_or(0)
}

fn out_of(resource: &str, reason: &str, requested: u64, used: u64, capacity: u64) -> Rejection {
    Rejection {
        reason: reason.into(),
        message: crate::kubelet_texts::OUT_OF.fill(&[&resource, &requested, &used, &capacity]),
    }
}

/// One container's request for a resource (CPU millis, memory bytes, a count).
type Request = dyn Fn(&ContainerSpec) -> u64;

impl Manager {
    /// Node allocatable CPU in millicores: the machine's CPUs minus `--reserved-cpus`.
    pub fn allocatable_cpu_millis(&self) -> u64 {
        let t = &self.topology;
        let all = t.machine.cpus().count() as u64;
        all.saturating_sub(t.reserved_cpus.len() as u64).saturating_mul(1000)
    }

    /// Node allocatable memory: the machine's minus the hard eviction threshold.
    pub fn allocatable_memory(&self) -> u64 {
        (self.topology.machine.numa_nodes as u64).saturating_mul(MEMORY_PER_NUMA).saturating_sub(HARD_EVICTION_MEMORY)
    }

    /// Node allocatable of an extended resource as the predicate handler sees
    /// it: node status's count (`None`: not listed), raised to the devices
    /// allocated, `mine` included (the pod under admission's), only when the
    /// pod itself holds devices (`UpdatePluginResources` returns at once for
    /// a pod the device manager holds nothing for).
    fn allocatable_extended(&self, resource: &str, mine: &BTreeSet<String>, sanitize: bool) -> Option<u64> {
        let listed = self.st.resources.get(resource).filter(|r| r.reported).map(|r| r.counts().allocatable as u64);
        if !sanitize {
            return listed;
        }
        let mut allocated = self.st.in_use(resource);
        allocated.extend(mine.iter().cloned());
        match (listed, allocated.len() as u64) {
            (None, 0) => None,
            (l, n) => Some(l.unwrap_or(0).max(n)),
        }
    }

    /// The fit of `pod` (holding `mine` devices per resource) next to the
    /// active pods `others`, its `stripped` extended resources left out: the
    /// first resource that does not fit, as the kubelet rejects it.
    pub fn node_fit(
        &self,
        pod: &PodSpec,
        mine: &std::collections::BTreeMap<String, BTreeSet<String>>,
        others: &[&PodSpec],
        stripped: &[String],
    ) -> Option<Rejection> {
        let used_pods = others.len() as u64;
        if used_pods.saturating_add(1) > MAX_PODS {
            return Some(out_of("pods", "OutOfpods", 1, used_pods, MAX_PODS));
        }
        let sum = |get: &dyn Fn(&ContainerSpec) -> u64| -> u64 {
            others.iter().map(|o| pod_request(o, get)).fold(0u64, u64::saturating_add)
        };
        let checks: [(&str, &str, &Request, u64); 2] = [
            ("cpu", "OutOfcpu", &cpu_millis, self.allocatable_cpu_millis()),
            ("memory", "OutOfmemory", &memory_bytes, self.allocatable_memory()),
        ];
        for (name, reason, get, allocatable) in checks {
            let want = pod_request(pod, get);
            let used = sum(get);
            if want > 0 && want > allocatable.saturating_sub(used) {
                return Some(out_of(name, reason, want, used, allocatable));
            }
        }
        let names: BTreeSet<&String> = pod.containers.iter().flat_map(|c| c.limits.keys()).collect();
        let none = BTreeSet::new();
        let sanitize = mine.values().any(|ids| !ids.is_empty());
        for r in names.into_iter().filter(|r| !stripped.contains(r)) {
            let get = |c: &ContainerSpec| c.limits.get(r.as_str()).copied().unwrap_or(0);
            let want = pod_request(pod, get);
            let allocatable =
                self.allocatable_extended(r, mine.get(r.as_str()).unwrap_or(&none), sanitize).unwrap_or(0);
            let used = sum(&get);
            if want > 0 && (allocatable < used || want > allocatable - used) {
                return Some(out_of(r, &format!("OutOf{r}"), want, used, allocatable));
            }
        }
        None
    }

    /// The specs of the admitted pods other than `uid` (the active pods the
    /// predicate handler counts).
    pub fn other_specs(&self, uid: &str) -> Vec<PodSpec> {
        self.st.pods.iter().filter(|p| p.uid() != uid).map(|p| p.spec.clone()).collect()
    }
}
