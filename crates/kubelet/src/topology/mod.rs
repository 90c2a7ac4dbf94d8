//! The kubelet's Topology Manager and static CPU manager as pure functions
//! over plain data (`docs/topology.md`): NUMA masks, device and
//! CPU hints, merging and the four policies, the kubelet's configuration
//! checks, the split of free devices by a hint (`filterByAffinity`) and
//! which devices are taken, with or without GetPreferredAllocation. The
//! kubelet-sim calls these at admission; nothing here holds state.

pub mod cpu;
pub mod hints;
pub mod mask;
pub mod merge;

#[cfg(test)]
mod examples;
#[cfg(test)]
mod hint_cases;

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use cpu::{Compute, Machine, Role};
pub use hints::{Hint, HintView, ResourceHints};
pub use mask::Mask;
pub use merge::ProviderHints;

use crate::invalid::{Invalid, Result};

/// The reason of a Topology Manager rejection (`admission/errors.go`).
pub const TOPOLOGY_AFFINITY_ERROR: &str = "TopologyAffinityError";
/// The message of a Topology Manager rejection.
pub const TOPOLOGY_AFFINITY_MESSAGE: &str = crate::kubelet_texts::TOPOLOGY_AFFINITY.template;
/// The kubelet's `defaultMaxAllowableNUMANodes`.
pub const DEFAULT_MAX_ALLOWABLE_NUMA_NODES: usize = 8;
/// The most NUMA nodes the sim simulates (2^N-1 masks per resource).
pub const SIM_MAX_NUMA_NODES: usize = 16;
/// The most CPUs the sim simulates.
pub const SIM_MAX_CPUS: usize = 4096;

/// `--topology-manager-policy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// No hints are collected; devices are not aligned.
    #[default]
    None,
    /// Merge the hints, always admit.
    BestEffort,
    /// Admit only a preferred hint.
    Restricted,
    /// Admit only a preferred hint on one NUMA node (or none).
    SingleNumaNode,
}

impl Policy {
    /// The kubelet's name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::None => "none",
            Policy::BestEffort => "best-effort",
            Policy::Restricted => "restricted",
            Policy::SingleNumaNode => "single-numa-node",
        }
    }
}

/// `--topology-manager-scope`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// One hint per container, init containers first.
    #[default]
    Container,
    /// One hint for the whole pod.
    Pod,
}

impl Scope {
    /// The kubelet's name.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Container => "container",
            Scope::Pod => "pod",
        }
    }
}

/// `--cpu-manager-policy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CpuPolicy {
    /// Every container in the shared pool; no CPU hints.
    #[default]
    None,
    /// Guaranteed pods with integer CPU requests get exclusive CPUs.
    Static,
}

/// `--topology-manager-policy-options` (docs/topology.md §2.6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyOptions {
    /// `prefer-closest-numa-nodes`.
    pub prefer_closest_numa_nodes: bool,
    /// `max-allowable-numa-nodes`.
    pub max_allowable_numa_nodes: usize,
    /// The option names the user gave (a kubelet release that lacks one,
    /// or keeps it behind an alpha gate, refuses to start).
    #[serde(default)]
    pub given: BTreeSet<String>,
}

impl Default for PolicyOptions {
    fn default() -> Self {
        PolicyOptions {
            prefer_closest_numa_nodes: false,
            max_allowable_numa_nodes: DEFAULT_MAX_ALLOWABLE_NUMA_NODES,
            given: BTreeSet::new(),
        }
    }
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

impl FromStr for PolicyOptions {
    type Err = String;

    /// `key=value,key=value`, refused as the kubelet refuses it at startup.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let mut o = PolicyOptions::default();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = item.split_once('=').ok_or_else(|| format!("{item:?}: expected KEY=VALUE"))?;
            let (k, v) = (k.trim(), v.trim());
            match k {
                "prefer-closest-numa-nodes" => {
                    o.prefer_closest_numa_nodes = parse_go_bool(v).ok_or_else(|| {
                        format!("bad value for option {k:?}: strconv.ParseBool: parsing {v:?}: invalid syntax")
                    })?;
                }
                "max-allowable-numa-nodes" => {
                    let n: usize = v.parse().map_err(|_| {
                        format!("bad value for option {k:?}: strconv.Atoi: parsing {v:?}: invalid syntax")
                    })?;
                    if n < DEFAULT_MAX_ALLOWABLE_NUMA_NODES {
                        return Err(format!(
                            "the minimum value of {k:?} should not be less than {DEFAULT_MAX_ALLOWABLE_NUMA_NODES}"
                        ));
                    }
                    o.max_allowable_numa_nodes = n;
                }
                _ => return Err(format!("unknown Topology Manager Policy option: {k:?}")),
            }
            o.given.insert(k.to_string());
        }
        Ok(o)
    }
}

/// Parses `--numa-distances`: rows separated by `;`, values by `,` (e.g. `10,21;21,10`).
pub fn parse_distances(s: &str) -> std::result::Result<Vec<Vec<u64>>, String> {
    let mut rows = Vec::new();
    for (i, row) in s.split(';').enumerate() {
        let mut r = Vec::new();
        for v in row.split(',') {
            let v = v.trim();
            r.push(v.parse::<u64>().map_err(|_| format!("row {i}: {v:?} is not a whole number"))?);
            if r.len() > SIM_MAX_NUMA_NODES {
                return Err(format!("row {i}: more than {SIM_MAX_NUMA_NODES} values"));
            }
        }
        rows.push(r);
        if rows.len() > SIM_MAX_NUMA_NODES {
            return Err(format!("more than {SIM_MAX_NUMA_NODES} rows"));
        }
    }
    Ok(rows)
}

/// Parses a Linux CPU list (`0`, `0-3,8`), as `--reserved-cpus` takes it:
/// at most [`SIM_MAX_CPUS`] comma-separated parts, each CPU below
/// [`SIM_MAX_CPUS`]. The CPUs are gathered in a fixed bitset, so repeated or
/// overlapping ranges cost no more than one.
pub fn parse_cpu_list(s: &str) -> std::result::Result<BTreeSet<u32>, String> {
    const WORDS: usize = SIM_MAX_CPUS.div_ceil(64);
    let mut bits = [0u64; WORDS];
    for (i, part) in s.split(',').enumerate() {
        // Bounds the work: 18,000 parts "0-4095" used to take 32 s of CPU.
        if i >= SIM_MAX_CPUS {
            return Err(format!(
                "--reserved-cpus: more than {SIM_MAX_CPUS} comma-separated parts; write ranges (0-3) instead"
            ));
        }
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let num = |x: &str| x.trim().parse::<u32>().map_err(|_| format!("{x:?} is not a CPU number"));
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if b < a {
            return Err(format!("{part:?} is not a valid range"));
        }
        let (a, b) = (a as usize, b as usize);
        if b >= SIM_MAX_CPUS {
            return Err(format!("{part:?}: CPU {b} is beyond the sim's limit of {SIM_MAX_CPUS} CPUs"));
        }
        // Whole words at once: at most 64 steps per part.
        let (first, last) = (a / 64, b / 64);
        for (w, word) in bits.iter_mut().enumerate().take(last + 1).skip(first) {
            let lo = if w == first { a % 64 } else { 0 };
            let hi = if w == last { b % 64 } else { 63 };
            let width = hi - lo + 1;
            let mask = if width == 64 { u64::MAX } else { ((1u64 << width) - 1) << lo };
            *word |= mask;
        }
    }
    let mut out = BTreeSet::new();
    for (w, word) in bits.iter().enumerate() {
        for bit in 0..64 {
            if word & (1u64 << bit) != 0 {
                out.insert(u32::try_from(w * 64 + bit).unwrap_or(u32::MAX));
            }
        }
    }
    Ok(out)
}

/// The node's Topology Manager, CPU manager and machine, as configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopologyConfig {
    /// `--topology-manager-policy`.
    pub policy: Policy,
    /// `--topology-manager-scope`.
    pub scope: Scope,
    /// `--topology-manager-policy-options`.
    pub options: PolicyOptions,
    /// `--cpu-manager-policy`.
    pub cpu_policy: CpuPolicy,
    /// `--reserved-cpus`.
    pub reserved_cpus: BTreeSet<u32>,
    /// The simulated machine.
    pub machine: Machine,
}

impl Default for TopologyConfig {
    fn default() -> Self {
        TopologyConfig {
            policy: Policy::None,
            scope: Scope::Container,
            options: PolicyOptions::default(),
            cpu_policy: CpuPolicy::None,
            reserved_cpus: BTreeSet::new(),
            machine: Machine { numa_nodes: 2, cpus_per_numa: 8, distances: None },
        }
    }
}

impl TopologyConfig {
    /// The kubelet's refusals at startup (docs/topology.md §1 NUMA limit, §2.6,
    /// §4 reserved CPUs), plus the sim's own limits. `place` names the flags.
    pub fn validate(&self) -> Result<()> {
        let m = &self.machine;
        if m.numa_nodes == 0 || m.numa_nodes > SIM_MAX_NUMA_NODES {
            return Err(Invalid::new(
                "--numa-nodes",
                format!("{} is outside 1..={SIM_MAX_NUMA_NODES} (the sim's limit)", m.numa_nodes),
            ));
        }
        if m.cpus_per_numa == 0 || m.numa_nodes.saturating_mul(m.cpus_per_numa) > SIM_MAX_CPUS {
            return Err(Invalid::new(
                "--cpus-per-numa",
                format!("{} CPUs per node: at least 1, at most {SIM_MAX_CPUS} CPUs in all", m.cpus_per_numa),
            ));
        }
        if self.policy != Policy::None && m.numa_nodes > self.options.max_allowable_numa_nodes {
            return Err(Invalid::new(
                "--topology-manager-policy",
                format!(
                    "unsupported on machines with more than {} NUMA Nodes (the machine has {}); \
                     hint: --topology-manager-policy-options max-allowable-numa-nodes={}",
                    self.options.max_allowable_numa_nodes, m.numa_nodes, m.numa_nodes
                ),
            ));
        }
        if let Some(d) = &m.distances
            && (d.len() != m.numa_nodes || d.iter().any(|r| r.len() != m.numa_nodes))
        {
            return Err(Invalid::new(
                "--numa-distances",
                format!("needs {0} rows of {0} values (one per NUMA node)", m.numa_nodes),
            ));
        }
        if self.options.prefer_closest_numa_nodes && m.distances.is_none() {
            return Err(Invalid::new(
                "--topology-manager-policy-options",
                "prefer-closest-numa-nodes: error getting NUMA distances from cadvisor; \
                 hint: give the simulated machine's distances with --numa-distances, e.g. 10,21;21,10",
            ));
        }
        let cpus = m.numa_nodes * m.cpus_per_numa;
        if let Some(c) = self.reserved_cpus.iter().find(|c| **c as usize >= cpus) {
            return Err(Invalid::new(
                "--reserved-cpus",
                format!("CPU {c} is not on the machine (CPUs 0-{})", cpus - 1),
            ));
        }
        if self.cpu_policy == CpuPolicy::Static && self.reserved_cpus.is_empty() {
            return Err(Invalid::new(
                "--cpu-manager-policy static",
                "[cpumanager] unable to determine reserved CPU resources for static policy; \
                 hint: reserve at least one CPU, e.g. --reserved-cpus 0",
            ));
        }
        Ok(())
    }

    /// The distances to rank by, when `prefer-closest-numa-nodes` applies.
    pub fn closest(&self) -> Option<&[Vec<u64>]> {
        if self.options.prefer_closest_numa_nodes && self.policy != Policy::SingleNumaNode {
            self.machine.distances.as_deref()
        } else {
            None
        }
    }

    /// The providers' hints merged under the policy: the best hint and the verdict.
    pub fn decide(&self, providers: &[ProviderHints]) -> std::result::Result<(Hint, bool), TopologyError> {
        merge::decide(self.policy, providers, self.machine.numa_nodes, self.closest())
    }
}

/// A merge the sim refuses to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologyError {
    /// The cross product is larger than [`merge::MAX_PERMUTATIONS`].
    TooManyPermutations(u64),
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologyError::TooManyPermutations(n) => write!(
                f,
                "merging the hints would walk {n} permutations, more than the sim's limit of {}",
                merge::MAX_PERMUTATIONS
            ),
        }
    }
}

/// The free devices of a resource split by a hint (`filterByAffinity`),
/// each set in the plugin's order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Split {
    /// On a node in the mask (a device on several nodes: any of them).
    pub aligned: Vec<String>,
    /// On nodes outside the mask only.
    pub unaligned: Vec<String>,
    /// Without topology, or every device when the hint has no mask.
    pub no_affinity: Vec<String>,
}

/// Splits `available` (ID, NUMA nodes) by `hint`. `has_topology`: some
/// device of the resource reports a NUMA node.
pub fn split(available: &[(String, Option<Vec<i64>>)], has_topology: bool, hint: Option<Mask>) -> Split {
    let mut s = Split::default();
    let Some(mask) = hint.filter(|_| has_topology) else {
        s.no_affinity = available.iter().map(|(id, _)| id.clone()).collect();
        return s;
    };
    for (id, nodes) in available {
        match nodes.as_deref() {
            Some(n) if !n.is_empty() && mask.any_set(n) => s.aligned.push(id.clone()),
            Some(n) if !n.is_empty() => s.unaligned.push(id.clone()),
            _ => s.no_affinity.push(id.clone()),
        }
    }
    s
}

/// The GetPreferredAllocation request the kubelet makes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ask {
    /// `available_deviceIDs`.
    pub available: Vec<String>,
    /// `must_include_deviceIDs`.
    pub must_include: Vec<String>,
    /// `allocation_size`: the container's whole request.
    pub size: u64,
}

/// How the devices of one (container, resource) are taken (docs/topology.md §3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Take {
    /// Taken before any call: reused devices, then (unless fewer are
    /// needed than aligned) the aligned ones.
    pub taken: Vec<String>,
    /// The GetPreferredAllocation request, when one is made (and the plugin offers it).
    pub ask: Option<Ask>,
    /// The answer counts only for these devices.
    pub answer_from: Vec<String>,
    /// Then these, in order, until enough.
    pub fallback: Vec<String>,
}

/// The kubelet's `devicesToAllocate` after `filterByAffinity`: `reused`
/// are the init containers' devices already picked, `needed` the devices
/// still needed, `total` the container's request; `available` in plugin order.
pub fn plan_take(reused: &[String], available: &[String], s: &Split, needed: u64, total: u64) -> Take {
    let n_aligned = s.aligned.len() as u64;
    if needed == 0 {
        return Take { taken: reused.to_vec(), ask: None, answer_from: Vec::new(), fallback: Vec::new() };
    }
    if needed < n_aligned {
        let mut offer = reused.to_vec();
        offer.extend(s.aligned.iter().cloned());
        return Take {
            taken: reused.to_vec(),
            ask: Some(Ask { available: offer, must_include: reused.to_vec(), size: total }),
            answer_from: s.aligned.clone(),
            fallback: s.aligned.clone(),
        };
    }
    let mut taken = reused.to_vec();
    taken.extend(s.aligned.iter().cloned());
    if needed == n_aligned {
        return Take { taken, ask: None, answer_from: Vec::new(), fallback: Vec::new() };
    }
    let mut offer = reused.to_vec();
    offer.extend(available.iter().filter(|id| !reused.contains(id)).cloned());
    let answer_from: Vec<String> = available.iter().filter(|id| !taken.contains(id)).cloned().collect();
    let mut fallback = s.unaligned.clone();
    fallback.extend(s.no_affinity.iter().cloned());
    Take { ask: Some(Ask { available: offer, must_include: taken.clone(), size: total }), taken, answer_from, fallback }
}

impl Take {
    /// The devices given to the container: `taken`, then the answer's
    /// devices that count, then the fallback, until `total`.
    pub fn finish(&self, answer: &[String], total: u64) -> Vec<String> {
        let mut out = self.taken.clone();
        let want = usize::try_from(total).unwrap_or(usize::MAX);
        for id in answer.iter().filter(|id| self.answer_from.contains(id)).chain(self.fallback.iter()) {
            if out.len() >= want {
                break;
            }
            if !out.contains(id) {
                out.push(id.clone());
            }
        }
        out
    }
}

#[cfg(test)]
mod cpu_list_tests {
    use super::*;

    // --reserved-cpus (the kubelet's Linux CPU list): 18,000 parts "0-4095"
    // took 32 s of CPU. More parts than the sim has CPUs are refused, naming
    // the flag.
    #[test]
    fn more_parts_than_cpus_are_refused() {
        let many = vec!["0-4095"; SIM_MAX_CPUS + 1].join(",");
        let e = parse_cpu_list(&many).unwrap_err();
        assert!(e.contains("--reserved-cpus: more than 4096 comma-separated parts"), "{e}");
        let many = vec!["7"; SIM_MAX_CPUS].join(",");
        assert_eq!(parse_cpu_list(&many).unwrap(), BTreeSet::from([7]));
    }

    #[test]
    fn repeated_and_overlapping_parts_give_the_right_set() {
        let all = vec!["0-4095"; SIM_MAX_CPUS].join(",");
        assert_eq!(parse_cpu_list(&all).unwrap(), (0..4096).collect::<BTreeSet<u32>>());
        assert_eq!(
            parse_cpu_list("0-3,8, 2-5 ,8,63-65,,127-128").unwrap(),
            BTreeSet::from([0, 1, 2, 3, 4, 5, 8, 63, 64, 65, 127, 128])
        );
        assert_eq!(parse_cpu_list("4095").unwrap(), BTreeSet::from([4095]));
        assert_eq!(parse_cpu_list("64-127").unwrap(), (64..128).collect::<BTreeSet<u32>>());
        assert_eq!(parse_cpu_list("").unwrap(), BTreeSet::new());
        assert!(parse_cpu_list("4096").unwrap_err().contains("beyond the sim's limit"));
        assert!(parse_cpu_list("3-1").unwrap_err().contains("not a valid range"));
        assert!(parse_cpu_list("x").unwrap_err().contains("not a CPU number"));
    }
}
