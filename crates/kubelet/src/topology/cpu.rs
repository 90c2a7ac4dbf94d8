//! The simulated machine's CPUs and the static CPU manager (docs/topology.md §4):
//! which containers get exclusive CPUs (Guaranteed pods, integer requests),
//! and which CPUs they get under a NUMA hint, with the spec's simplified
//! `takeByTopology` (one socket, no SMT).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::mask::Mask;

/// A container's CPU and memory requests and limits, as the pod manifest gives them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compute {
    /// `resources.requests.cpu` in millicores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_request_millis: Option<u64>,
    /// `resources.limits.cpu` in millicores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_limit_millis: Option<u64>,
    /// `resources.requests.memory` in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_request: Option<u64>,
    /// `resources.limits.memory` in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<u64>,
}

impl Compute {
    /// True when nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == Compute::default()
    }

    /// The effective CPU request (an unset request defaults to the limit).
    pub fn cpu_request(&self) -> Option<u64> {
        self.cpu_request_millis.or(self.cpu_limit_millis)
    }

    /// This container alone meets the Guaranteed rule: CPU and memory
    /// limits set, requests (when set) equal to them.
    fn guaranteed(&self) -> bool {
        let eq = |req: Option<u64>, lim: Option<u64>| lim.is_some() && req.is_none_or(|r| Some(r) == lim);
        eq(self.cpu_request_millis, self.cpu_limit_millis) && eq(self.memory_request, self.memory_limit)
    }
}

/// The pod's QoS class is Guaranteed: every container (init ones included)
/// has CPU and memory limits equal to its requests.
pub fn is_guaranteed<'a>(containers: impl IntoIterator<Item = &'a Compute>) -> bool {
    let mut any = false;
    for c in containers {
        if !c.guaranteed() {
            return false;
        }
        any = true;
    }
    any
}

/// The kubelet's `guaranteedCPUs`: the exclusive CPUs a container gets
/// (0: it stays in the shared pool).
pub fn guaranteed_cpus(pod_guaranteed: bool, c: &Compute) -> u64 {
    match c.cpu_request() {
        // equivalent mutant: `>=` for `>` lets m = 0 through, and 0 / 1000 is 0 anyway.
        Some(m) if pod_guaranteed && m > 0 && m % 1000 == 0 => m / 1000,
        _ => 0,
    }
}

/// A container's role in the pod request formula.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A plain init container.
    Init,
    /// A restartable init container.
    Sidecar,
    /// A regular container.
    App,
}

/// The pod-scope request (docs/topology.md §2.7): max(Σ app + Σ sidecars, max
/// over init containers of (it + the sidecars before it)).
pub fn pod_request(items: &[(Role, u64)]) -> u64 {
    let mut sidecars: u64 = 0;
    let mut init_peak: u64 = 0;
    let mut running: u64 = 0;
    for (role, n) in items {
        match role {
            Role::Init => init_peak = init_peak.max(sidecars.saturating_add(*n)),
            Role::Sidecar => {
                sidecars = sidecars.saturating_add(*n);
                running = running.saturating_add(*n);
                init_peak = init_peak.max(sidecars);
            }
            Role::App => running = running.saturating_add(*n),
        }
    }
    running.max(init_peak)
}

/// The simulated machine: NUMA nodes `0..numa_nodes`, node `n` holding CPUs
/// `n*cpus_per_numa .. (n+1)*cpus_per_numa`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// NUMA nodes.
    pub numa_nodes: usize,
    /// CPUs on each node.
    pub cpus_per_numa: usize,
    /// `distances[i][j]`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distances: Option<Vec<Vec<u64>>>,
}

impl Machine {
    /// The NUMA node IDs.
    pub fn nodes(&self) -> Vec<i64> {
        (0..self.numa_nodes as i64).collect()
    }

    /// All CPU IDs.
    pub fn cpus(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.numa_nodes.saturating_mul(self.cpus_per_numa)).filter_map(|c| u32::try_from(c).ok())
    }

    /// The NUMA node of every CPU, indexed by CPU ID.
    pub fn node_of_cpu(&self) -> Vec<i64> {
        self.cpus().map(|c| self.node_of(c)).collect()
    }

    /// The NUMA node of a CPU.
    pub fn node_of(&self, cpu: u32) -> i64 {
        (cpu as usize / self.cpus_per_numa.max(1)) as i64
    }

    /// Takes `n` CPUs from `allocatable` (docs/topology.md §4 `allocateCPUs`):
    /// first up to `n` from the hint's nodes, then the rest from the others,
    /// each with [`Machine::take_packed`]. `None` when too few are allocatable.
    pub fn allocate(&self, allocatable: &BTreeSet<u32>, hint: Option<Mask>, n: usize) -> Option<Vec<u32>> {
        if allocatable.len() < n {
            return None;
        }
        let mut taken = Vec::with_capacity(n);
        if let Some(mask) = hint {
            let aligned: BTreeSet<u32> =
                allocatable.iter().copied().filter(|c| mask.is_set(self.node_of(*c))).collect();
            let k = n.min(aligned.len());
            taken.extend(self.take_packed(&aligned, k));
        }
        let rest: BTreeSet<u32> = allocatable.iter().copied().filter(|c| !taken.contains(c)).collect();
        let k = n - taken.len();
        taken.extend(self.take_packed(&rest, k));
        taken.sort_unstable();
        Some(taken)
    }

    /// The spec's simplified `takeByTopologyNUMAPacked`: whole free NUMA
    /// nodes in ascending ID while at least a node's worth is left, then
    /// single CPUs from the node with the fewest free CPUs, lowest ID first.
    pub fn take_packed(&self, free: &BTreeSet<u32>, n: usize) -> Vec<u32> {
        let mut free = free.clone();
        let mut out = Vec::with_capacity(n);
        let per = self.cpus_per_numa.max(1);
        for node in self.nodes() {
            if n - out.len() < per {
                break;
            }
            let cpus: Vec<u32> = free.iter().copied().filter(|c| self.node_of(*c) == node).collect();
            if cpus.len() == per {
                for c in cpus {
                    free.remove(&c);
                    out.push(c);
                }
            }
        }
        while out.len() < n {
            let Some(node) = self
                .nodes()
                .into_iter()
                .map(|nd| (free.iter().filter(|c| self.node_of(**c) == nd).count(), nd))
                .filter(|(k, _)| *k > 0)
                .min()
                .map(|(_, nd)| nd)
            else {
                break;
            };
            let Some(c) = free.iter().copied().find(|c| self.node_of(*c) == node) else { break };
            free.remove(&c);
            out.push(c);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(nodes: usize, per: usize) -> Machine {
        Machine { numa_nodes: nodes, cpus_per_numa: per, distances: None }
    }

    #[test]
    fn guaranteed_needs_cpu_and_memory_limits_equal_to_requests() {
        let g = Compute { cpu_limit_millis: Some(2000), memory_limit: Some(1 << 30), ..Default::default() };
        assert!(is_guaranteed([&g]));
        assert_eq!(guaranteed_cpus(true, &g), 2);
        let burst = Compute { cpu_request_millis: Some(1000), ..g };
        assert!(!is_guaranteed([&g, &burst]));
        let frac = Compute { cpu_limit_millis: Some(1500), ..g };
        assert!(is_guaranteed([&frac]));
        assert_eq!(guaranteed_cpus(true, &frac), 0, "a fractional request stays in the shared pool");
        assert!(!is_guaranteed([&Compute::default()]));
        assert!(Compute::default().is_empty());
        assert!(!Compute { memory_limit: Some(1), ..Default::default() }.is_empty());
    }

    // Whole free nodes first while a node's worth is still needed, then single
    // CPUs; exactly n allocatable CPUs are enough.
    #[test]
    fn packed_takes_whole_free_nodes_only_while_a_node_is_needed() {
        let mach = m(2, 4);
        let all: BTreeSet<u32> = (0..8).collect();
        assert_eq!(mach.take_packed(&all, 6), [0, 1, 2, 3, 4, 5]);
        // Node 1 has a CPU taken: node 0 is whole and taken whole.
        let part: BTreeSet<u32> = [0, 1, 2, 3, 5, 6, 7].into();
        assert_eq!(mach.take_packed(&part, 4), [0, 1, 2, 3]);
        assert_eq!(mach.allocate(&part, None, 7), Some(vec![0, 1, 2, 3, 5, 6, 7]));
        assert_eq!(mach.allocate(&part, None, 8), None);
    }

    #[test]
    fn pod_request_is_not_a_plain_sum() {
        // docs/topology.md §2.7: max(Σ app + Σ sidecars, max over init of (init + sidecars before it)).
        let items = [(Role::Init, 3), (Role::Sidecar, 1), (Role::Init, 4), (Role::App, 2)];
        assert_eq!(pod_request(&items), 5);
        assert_eq!(pod_request(&[(Role::Init, 1), (Role::App, 2), (Role::App, 2)]), 4);
    }

    #[test]
    fn packed_takes_whole_nodes_then_the_fullest_node() {
        let mc = m(2, 4);
        let free: BTreeSet<u32> = (1..8).collect();
        // Worked example (d): all of NUMA 1, then CPUs 1 and 2.
        assert_eq!(mc.allocate(&free, Some(Mask(3)), 6), Some(vec![1, 2, 4, 5, 6, 7]));
        // Under a hint for node 0 only 3 are aligned; the rest comes from node 1.
        assert_eq!(mc.allocate(&free, Some(Mask(1)), 4), Some(vec![1, 2, 3, 4]));
        assert_eq!(mc.allocate(&free, None, 2), Some(vec![1, 2]));
        assert_eq!(mc.allocate(&free, None, 8), None);
    }
}
