//! GetPreferredAllocation policies, as pure functions. Every policy returns
//! the must-include devices first, never an ID twice, and exactly
//! `allocation_size` devices whenever enough are available.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use rand::seq::SliceRandom;

use super::config::Policy;
use crate::proto::deviceplugin::v1beta1 as dp;

/// Chooses devices for one container request. `numa_of` gives a device's
/// (first) NUMA node, `-1` for none or unknown.
pub fn choose(
    policy: Policy,
    req: &dp::ContainerPreferredAllocationRequest,
    numa_of: &dyn Fn(&str) -> i64,
    rng: &mut dyn rand::RngCore,
) -> Vec<String> {
    let size = usize::try_from(req.allocation_size).unwrap_or(0);
    let mut taken: HashSet<&str> = HashSet::new();
    let mut out: Vec<String> = Vec::with_capacity(size.max(req.must_include_device_i_ds.len()));
    for id in &req.must_include_device_i_ds {
        if taken.insert(id.as_str()) {
            out.push(id.clone());
        }
    }
    let candidates: Vec<&str> =
        req.available_device_i_ds.iter().map(String::as_str).filter(|id| taken.insert(id)).collect();
    let need = size.saturating_sub(out.len()).min(candidates.len());
    if need == 0 {
        return out;
    }
    let picked: Vec<&str> = match policy {
        Policy::FirstFit => candidates.into_iter().take(need).collect(),
        Policy::Random => {
            let mut c = candidates;
            c.shuffle(rng);
            c.truncate(need);
            c
        }
        Policy::Pack => pack(&candidates, &out, need, numa_of),
        Policy::Spread => spread(&candidates, &out, need, numa_of),
        Policy::IgnoreNuma => candidates.into_iter().rev().take(need).collect(),
        Policy::Lowest => {
            let mut c = candidates;
            c.sort_unstable();
            c.truncate(need);
            c
        }
    };
    out.extend(picked.into_iter().map(str::to_string));
    out
}

/// Candidates grouped by NUMA node, each group in the kubelet's order.
fn by_node<'a>(candidates: &[&'a str], numa_of: &dyn Fn(&str) -> i64) -> BTreeMap<i64, VecDeque<&'a str>> {
    let mut groups: BTreeMap<i64, VecDeque<&str>> = BTreeMap::new();
    for id in candidates {
        groups.entry(numa_of(id)).or_default().push_back(id);
    }
    groups
}

fn must_counts(must: &[String], numa_of: &dyn Fn(&str) -> i64) -> HashMap<i64, usize> {
    let mut counts = HashMap::new();
    for id in must {
        *counts.entry(numa_of(id)).or_insert(0) += 1;
    }
    counts
}

fn pack<'a>(candidates: &[&'a str], must: &[String], mut need: usize, numa_of: &dyn Fn(&str) -> i64) -> Vec<&'a str> {
    let mut groups = by_node(candidates, numa_of);
    let must = must_counts(must, numa_of);
    let mut out = Vec::with_capacity(need);
    while need > 0 && !groups.is_empty() {
        // The node already holding the most must-include devices, if any has
        // candidates left; else the smallest node that fits the rest; else
        // the fullest node.
        let node = groups
            .keys()
            .filter(|n| must.contains_key(n))
            .max_by_key(|n| (must[n], std::cmp::Reverse(**n)))
            .copied()
            .or_else(|| {
                groups.iter().filter(|(_, g)| g.len() >= need).min_by_key(|(n, g)| (g.len(), **n)).map(|(n, _)| *n)
            })
            .or_else(|| groups.iter().max_by_key(|(n, g)| (g.len(), std::cmp::Reverse(**n))).map(|(n, _)| *n));
        let Some(node) = node else { break };
        let Some(group) = groups.remove(&node) else { break };
        let take = need.min(group.len());
        out.extend(group.into_iter().take(take));
        need -= take;
    }
    out
}

fn spread<'a>(candidates: &[&'a str], must: &[String], mut need: usize, numa_of: &dyn Fn(&str) -> i64) -> Vec<&'a str> {
    let groups = by_node(candidates, numa_of);
    let must = must_counts(must, numa_of);
    let mut queues: Vec<(usize, i64, VecDeque<&str>)> =
        groups.into_iter().map(|(n, g)| (must.get(&n).copied().unwrap_or(0), n, g)).collect();
    // Nodes with the fewest must-include devices go first.
    queues.sort_by_key(|(m, n, _)| (*m, *n));
    let mut out = Vec::with_capacity(need);
    while need > 0 {
        let mut progressed = false;
        for (_, _, q) in &mut queues {
            if need == 0 {
                break;
            }
            if let Some(id) = q.pop_front() {
                out.push(id);
                need -= 1;
                progressed = true;
            }
        }
        if !progressed {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::check_preferred;
    use crate::contract::tests::req;
    use rand::{Rng, SeedableRng, rngs::StdRng};

    /// Devices `n0-0`, `n0-1`, ... on node 0; `n1-0` ... on node 1; `x` has none.
    fn numa(id: &str) -> i64 {
        id.strip_prefix('n').and_then(|s| s.split('-').next()).and_then(|n| n.parse().ok()).unwrap_or(-1)
    }

    const ALL: [Policy; 6] =
        [Policy::FirstFit, Policy::Pack, Policy::Spread, Policy::Random, Policy::IgnoreNuma, Policy::Lowest];

    #[test]
    fn every_policy_honours_must_include_and_size() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut gen_rng = StdRng::seed_from_u64(42);
        for _ in 0..500 {
            let nodes = gen_rng.random_range(1..4);
            let per = gen_rng.random_range(1..6);
            let mut avail: Vec<String> = (0..nodes).flat_map(|n| (0..per).map(move |i| format!("n{n}-{i}"))).collect();
            avail.push("x".into());
            avail.shuffle(&mut gen_rng);
            let must_n = gen_rng.random_range(0..=avail.len().min(3));
            let must: Vec<String> = avail[..must_n].to_vec();
            let size = gen_rng.random_range(must_n..=avail.len()) as i32;
            let r = dp::ContainerPreferredAllocationRequest {
                available_device_i_ds: avail.clone(),
                must_include_device_i_ds: must.clone(),
                allocation_size: size,
            };
            for p in ALL {
                let got = choose(p, &r, &numa, &mut rng);
                assert_eq!(check_preferred(&r, &got), vec![], "{p:?} {r:?} -> {got:?}");
                assert_eq!(&got[..must.len()], must.as_slice(), "must-include first");
            }
        }
    }

    #[test]
    fn short_supply_and_zero_size() {
        for p in ALL {
            let mut rng = StdRng::seed_from_u64(1);
            assert_eq!(choose(p, &req(&["a", "b"], &[], 5), &numa, &mut rng).len(), 2);
            assert_eq!(choose(p, &req(&["a", "b"], &[], 0), &numa, &mut rng), Vec::<String>::new());
            // More must-include than the size: all of them, nothing else.
            assert_eq!(choose(p, &req(&["a", "b", "c"], &["a", "b"], 1), &numa, &mut rng), ["a", "b"]);
            // Duplicates in the request never appear twice.
            assert_eq!(choose(p, &req(&["a", "a", "b"], &["a"], 2), &numa, &mut rng), ["a", "b"]);
        }
    }

    /// The kubelet lists available devices from a Go map: `lowest` answers
    /// the same whatever the order, after the must-include devices.
    #[test]
    fn lowest_ignores_the_order_the_kubelet_lists_devices_in() {
        let mut rng = StdRng::seed_from_u64(1);
        for avail in [["d2", "d0", "d3", "d1"], ["d3", "d1", "d0", "d2"]] {
            assert_eq!(choose(Policy::Lowest, &req(&avail, &[], 2), &numa, &mut rng), ["d0", "d1"]);
            assert_eq!(choose(Policy::Lowest, &req(&avail, &["d3"], 2), &numa, &mut rng), ["d3", "d0"]);
        }
    }

    #[test]
    fn pack_fills_one_node_and_spread_alternates() {
        let avail = ["n0-0", "n1-0", "n0-1", "n1-1", "n1-2"];
        let mut rng = StdRng::seed_from_u64(1);
        // Two devices fit on node 0 (the smallest node that fits).
        assert_eq!(choose(Policy::Pack, &req(&avail, &[], 2), &numa, &mut rng), ["n0-0", "n0-1"]);
        // With a must-include device on node 1, the rest comes from node 1.
        assert_eq!(choose(Policy::Pack, &req(&avail, &["n1-2"], 3), &numa, &mut rng), ["n1-2", "n1-0", "n1-1"]);
        assert_eq!(choose(Policy::Spread, &req(&avail, &[], 4), &numa, &mut rng), ["n0-0", "n1-0", "n0-1", "n1-1"]);
        assert_eq!(choose(Policy::FirstFit, &req(&avail, &[], 2), &numa, &mut rng), ["n0-0", "n1-0"]);
        // ignore-numa takes from the end, whatever the nodes.
        assert_eq!(choose(Policy::IgnoreNuma, &req(&avail, &["n0-0"], 3), &numa, &mut rng), ["n0-0", "n1-2", "n1-1"]);
    }

    #[test]
    fn random_is_reproducible_per_seed() {
        let avail: Vec<String> = (0..16).map(|i| format!("d{i}")).collect();
        let avail: Vec<&str> = avail.iter().map(String::as_str).collect();
        let a = choose(Policy::Random, &req(&avail, &[], 4), &numa, &mut StdRng::seed_from_u64(3));
        let b = choose(Policy::Random, &req(&avail, &[], 4), &numa, &mut StdRng::seed_from_u64(3));
        assert_eq!(a, b);
    }
}
