//! Topology hints: a NUMA mask (or none) and a `Preferred` flag, as the
//! kubelet's hint providers generate them (docs/topology.md §1 for devices, §4
//! for CPUs), shown in the kubelet's notation (`{01 true}`) and as JSON.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::mask::Mask;

/// One topology hint. `mask: None` is the kubelet's nil mask: "no preference".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hint {
    /// The NUMA nodes; `None` for a nil mask.
    pub mask: Option<Mask>,
    /// The kubelet's `Preferred`.
    pub preferred: bool,
}

impl Hint {
    /// A hint with a mask.
    pub fn new(mask: Mask, preferred: bool) -> Hint {
        Hint { mask: Some(mask), preferred }
    }

    /// A hint with a nil mask.
    pub fn nil(preferred: bool) -> Hint {
        Hint { mask: None, preferred }
    }

    /// The JSON view.
    pub fn view(&self) -> HintView {
        HintView {
            hint: self.to_string(),
            numa_nodes: self.mask.map(Mask::nodes),
            numa_node_affinity: self.mask.map(|m| m.0),
            preferred: self.preferred,
        }
    }
}

/// `{01 true}`, `{nil false}`: the notation of the kubelet's older logs.
impl fmt::Display for Hint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mask {
            Some(m) => write!(f, "{{{m} {}}}", self.preferred),
            None => write!(f, "{{nil {}}}", self.preferred),
        }
    }
}

/// A hint as reports show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HintView {
    /// The kubelet's short notation, e.g. `{01 true}`.
    pub hint: String,
    /// The NUMA node IDs; `null` for a nil mask.
    pub numa_nodes: Option<Vec<i64>>,
    /// The mask as the decimal `uint64` current kubelets log (`NUMANodeAffinity`); `null` for nil.
    pub numa_node_affinity: Option<u64>,
    /// `Preferred`.
    pub preferred: bool,
}

/// The hints one provider gives for one resource. `None` is the kubelet's
/// nil list ("don't care"); `Some(vec![])` is an empty list ("cannot satisfy").
pub type ResourceHints = Option<Vec<Hint>>;

/// One item (device or CPU) as hint generation sees it: its NUMA nodes
/// (empty: no topology).
pub type Nodes<'a> = &'a [i64];

/// The kubelet's `generateDeviceTopologyHints` (and the CPU manager's
/// equivalent): every non-empty subset of `machine_nodes` that the reusable
/// and available items can satisfy, preferred when its size is the smallest
/// that `all` installed items could satisfy.
///
/// `all` counts every installed item (unhealthy and allocated included);
/// each reusable item must lie in the mask (one with an empty node list
/// lies in none, so it drops every mask; callers leave out the reusable
/// items the kubelet skips: devices without a topology); an available item
/// counts when any of its nodes is in the mask (one on no machine node
/// never does). A request of 0 is satisfied by every mask.
pub fn generate(
    machine_nodes: &[i64],
    all: &[Nodes<'_>],
    reusable: &[Nodes<'_>],
    available: &[Nodes<'_>],
    request: u64,
) -> Vec<Hint> {
    let mut min_size = machine_nodes.len() as u32;
    let mut hints = Vec::new();
    for mask in Mask::subsets(machine_nodes) {
        let total = all.iter().filter(|n| mask.any_set(n)).count() as u64;
        // equivalent mutant: `<=` for `<` only stores the size min_size already holds.
        if total >= request && mask.count() < min_size {
            min_size = mask.count();
        }
        let mut n: u64 = 0;
        let mut fits = true;
        for r in reusable {
            if !mask.any_set(r) {
                fits = false;
                break;
            }
            n += 1;
        }
        if !fits {
            continue;
        }
        n += available.iter().filter(|a| mask.any_set(a)).count() as u64;
        if n >= request {
            hints.push(Hint::new(mask, false));
        }
    }
    for h in &mut hints {
        h.preferred = h.mask.is_some_and(|m| m.count() == min_size);
    }
    hints
}

/// The device manager's hints for one resource (`GetTopologyHints` and
/// `generateDeviceTopologyHints` in
/// pkg/kubelet/cm/devicemanager/topology_hints.go, 1.26-1.37).
///
/// `all` is every device of the resource (the kubelet's `allDevices`), with
/// its NUMA nodes (`None`: no topology). `held` is what the container (pod
/// scope: the pod) already holds of it. `reusable` is empty in pod scope.
/// A request of 0 (a limit of 0) still gets hints: every mask, the
/// single-node ones preferred. `machine_nodes` are the NUMA nodes the masks
/// are built from: see [`hint_nodes`].
pub fn device_hints(
    machine_nodes: &[i64],
    all: &[Option<&[i64]>],
    available: &[Option<&[i64]>],
    reusable: &[Option<&[i64]>],
    held: &[Option<&[i64]>],
    request: u64,
) -> ResourceHints {
    if !all.iter().any(|n| n.is_some_and(|n| !n.is_empty())) {
        return None; // deviceHasTopologyAlignment is false: don't care
    }
    let all_n = nodes(all);
    if !held.is_empty() {
        if held.len() as u64 != request {
            return Some(Vec::new());
        }
        return Some(generate(machine_nodes, &all_n, &[], &nodes(held), request));
    }
    if ((available.len() + reusable.len()) as u64) < request {
        return Some(Vec::new());
    }
    // The kubelet skips a reusable device whose Topology is nil; one whose
    // topology lists no node is not skipped and fits no mask.
    let reusable_n: Vec<&[i64]> = reusable.iter().filter_map(|r| *r).collect();
    Some(generate(machine_nodes, &all_n, &reusable_n, &nodes(available), request))
}

/// The NUMA nodes a resource's device hints are built from. Up to 1.35
/// every machine node; from 1.36 (`deviceNUMANodes` in
/// pkg/kubelet/cm/devicemanager/topology_hints.go of v1.36.3) only the
/// machine nodes that host at least one of its devices (`all`, unhealthy and
/// allocated included), or every machine node when none does. Masks with a
/// node that hosts none of its devices are then never offered.
pub fn hint_nodes(machine_nodes: &[i64], all: &[Option<&[i64]>], only_device_nodes: bool) -> Vec<i64> {
    if !only_device_nodes {
        return machine_nodes.to_vec();
    }
    let hosting: Vec<i64> =
        machine_nodes.iter().copied().filter(|n| all.iter().flatten().any(|d| d.contains(n))).collect();
    if hosting.is_empty() { machine_nodes.to_vec() } else { hosting }
}

/// Items without topology as empty node lists.
fn nodes<'a>(v: &[Option<&'a [i64]>]) -> Vec<&'a [i64]> {
    v.iter().map(|n| n.unwrap_or(&[])).collect()
}

/// The static CPU manager's hints for `request` CPUs (docs/topology.md §4):
/// `node_of_cpu` maps every online CPU to its NUMA node.
pub fn cpu_hints(
    machine_nodes: &[i64],
    node_of_cpu: &[i64],
    available: &[u32],
    reusable: &[u32],
    request: u64,
) -> Vec<Hint> {
    let one = |c: &u32| -> &[i64] { node_of_cpu.get(*c as usize).map(std::slice::from_ref).unwrap_or(&[]) };
    let all: Vec<&[i64]> = node_of_cpu.iter().map(std::slice::from_ref).collect();
    // A CPU no machine node holds cannot be reusable; leave such out rather than drop every mask.
    let reusable: Vec<&[i64]> = reusable.iter().map(one).filter(|n| !n.is_empty()).collect();
    let available: Vec<&[i64]> = available.iter().map(one).collect();
    generate(machine_nodes, &all, &reusable, &available, request)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notation_and_json() {
        assert_eq!(Hint::new(Mask(1), true).to_string(), "{01 true}");
        assert_eq!(Hint::nil(false).to_string(), "{nil false}");
        let v = Hint::new(Mask(3), false).view();
        assert_eq!(v.numa_nodes, Some(vec![0, 1]));
        assert_eq!(v.numa_node_affinity, Some(3));
        let j = serde_json::to_value(Hint::nil(true).view()).unwrap();
        assert_eq!(j["numa_nodes"], serde_json::Value::Null);
    }

    /// docs/topology.md §4 (every release, `generateCPUTopologyHints` in
    /// pkg/kubelet/cm/cpumanager/policy_static.go): CPUs an init container
    /// held are reused, so every hint holds their node; a reusable CPU on no
    /// machine node is left out rather than failing every mask.
    #[test]
    fn cpu_hints_hold_the_reusable_cpus_nodes() {
        let node_of = [0, 0, 1, 1];
        let text = |v: Vec<Hint>| v.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert_eq!(text(cpu_hints(&[0, 1], &node_of, &[0], &[2], 2)), ["{11 false}"]);
        let without = text(cpu_hints(&[0, 1], &node_of, &[0, 1], &[], 1));
        assert!(!without.is_empty());
        assert_eq!(text(cpu_hints(&[0, 1], &node_of, &[0, 1], &[99], 1)), without);
    }
}
