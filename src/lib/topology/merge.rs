//! Merging the providers' hints into one best hint and the policies'
//! verdicts (docs/topology.md §2.2–2.5): normalisation, the cross product with
//! the equal-mask rule, the kubelet's comparison (preferred, narrowest or
//! closest, the non-preferred reference count) and each policy's admit rule.

use std::collections::BTreeMap;

use super::hints::{Hint, ResourceHints};
use super::mask::Mask;
use super::{Policy, TopologyError};

/// The most permutations one merge may walk. The kubelet has no limit (and
/// can take minutes on large machines); the sim refuses instead.
pub const MAX_PERMUTATIONS: u64 = 10_000_000;

/// What one provider returned: resource -> hints. An empty map means "no preference".
pub type ProviderHints = BTreeMap<String, ResourceHints>;

/// The kubelet's `filterProvidersHints`: one list per provider and resource.
pub fn normalise(providers: &[ProviderHints]) -> Vec<Vec<Hint>> {
    let mut out = Vec::new();
    for p in providers {
        if p.is_empty() {
            out.push(vec![Hint::nil(true)]);
            continue;
        }
        for hints in p.values() {
            out.push(match hints {
                None => vec![Hint::nil(true)],
                Some(h) if h.is_empty() => vec![Hint::nil(false)],
                Some(h) => h.clone(),
            });
        }
    }
    out
}

/// The kubelet's `filterSingleNumaHints`: keep preferred hints with a nil
/// mask or a single node.
pub fn single_numa_only(lists: &[Vec<Hint>]) -> Vec<Vec<Hint>> {
    lists
        .iter()
        .map(|l| l.iter().filter(|h| h.preferred && h.mask.is_none_or(|m| m.count() == 1)).copied().collect())
        .collect()
}

/// How two different preferred masks are ranked.
#[derive(Debug, Clone, Copy)]
pub enum Ranking<'a> {
    /// Fewer nodes, then numerically smaller.
    Narrowest,
    /// Fewer nodes, then lower mean distance, then numerically smaller
    /// (`prefer-closest-numa-nodes`). `distances[i][j]` as the machine reports it.
    Closest(&'a [Vec<u64>]),
}

impl Ranking<'_> {
    /// True when `a` ranks before `b`.
    fn better(self, a: Mask, b: Mask) -> bool {
        match self {
            Ranking::Narrowest => a.is_narrower_than(b),
            Ranking::Closest(d) => {
                if a.count() != b.count() {
                    return a.is_narrower_than(b);
                }
                // Same node count: comparing the sums compares the means.
                let (da, db) = (distance_sum(d, a), distance_sum(d, b));
                if da == db { a.0 < b.0 } else { da < db }
            }
        }
    }
}

/// Sum of `distances[i][j]` over all ordered pairs of nodes in the mask (i = j included).
fn distance_sum(d: &[Vec<u64>], m: Mask) -> u64 {
    let nodes = m.nodes();
    let mut sum = 0u64;
    for i in &nodes {
        for j in &nodes {
            let v = usize::try_from(*i)
                .ok()
                .and_then(|i| d.get(i))
                .and_then(|row| usize::try_from(*j).ok().and_then(|j| row.get(j)))
                .copied()
                .unwrap_or(u64::MAX / 4096);
            sum = sum.saturating_add(v);
        }
    }
    sum
}

/// The kubelet's `HintMerger`.
struct Merger<'a> {
    /// `maxOfMinAffinityCounts`: B in docs/topology.md §2.4.
    best_non_preferred: u32,
    ranking: Ranking<'a>,
}

impl Merger<'_> {
    fn masks(&self, current: Hint, candidate: Hint) -> Hint {
        match (current.mask, candidate.mask) {
            (Some(c), Some(n)) if c != n && self.ranking.better(n, c) => candidate,
            _ => current,
        }
    }

    /// `HintMerger.compare`: the better of the current best and a candidate.
    fn compare(&self, current: Hint, candidate: Hint) -> Hint {
        let count = |h: Hint| h.mask.map_or(0, Mask::count);
        if count(candidate) == 0 {
            return current;
        }
        match (current.preferred, candidate.preferred) {
            (false, true) => return candidate,
            (true, false) => return current,
            (true, true) => return self.masks(current, candidate),
            (false, false) => {}
        }
        let b = self.best_non_preferred;
        let (cur, cand) = (count(current), count(candidate));
        if cur > b {
            return self.masks(current, candidate);
        }
        if cur == b {
            return if cand == b { self.masks(current, candidate) } else { current };
        }
        // cur < b: creep back up to b.
        if cand > b {
            return current;
        }
        if cand == b || cand > cur {
            return candidate;
        }
        if cand < cur {
            return current;
        }
        self.masks(current, candidate)
    }
}

/// The bit count of each list's narrowest non-nil hint, maximised over lists.
fn max_of_min_counts(lists: &[Vec<Hint>]) -> u32 {
    let mut best = 0;
    for l in lists {
        let narrowest = l.iter().filter_map(|h| h.mask).fold(None::<Mask>, |acc, m| match acc {
            Some(a) if !m.is_narrower_than(a) => Some(a),
            _ => Some(m),
        });
        if let Some(m) = narrowest {
            best = best.max(m.count());
        }
    }
    best
}

/// The kubelet's `mergePermutation`: AND of the non-nil masks with the
/// default mask; preferred when all are preferred and all non-nil masks equal.
pub fn merge_permutation(default: Mask, perm: &[Hint]) -> Hint {
    let mut preferred = true;
    let mut first: Option<Mask> = None;
    let mut mask = default;
    for h in perm {
        if let Some(m) = h.mask {
            match first {
                None => first = Some(m),
                Some(f) if f != m => preferred = false,
                Some(_) => {}
            }
            mask = mask.and(m);
        }
        if !h.preferred {
            preferred = false;
        }
    }
    Hint::new(mask, preferred)
}

/// The kubelet's `HintMerger.Merge`: walks the cross product of `lists`
/// and keeps the best merged hint; `{default false}` when none has a
/// non-empty mask (or a list is empty).
pub fn merge(lists: &[Vec<Hint>], default: Mask, ranking: Ranking<'_>) -> Result<Hint, TopologyError> {
    let mut total: u64 = 1;
    for l in lists {
        total = total.saturating_mul(l.len() as u64);
    }
    if total > MAX_PERMUTATIONS {
        return Err(TopologyError::TooManyPermutations(total));
    }
    let merger = Merger { best_non_preferred: max_of_min_counts(lists), ranking };
    let mut best: Option<Hint> = None;
    if total > 0 {
        let mut idx = vec![0usize; lists.len()];
        let mut perm: Vec<Hint> = lists.iter().map(|l| l[0]).collect();
        loop {
            let merged = merge_permutation(default, &perm);
            if merged.mask.is_some_and(|m| m.count() > 0) {
                best = Some(match best {
                    None => merged,
                    Some(b) => merger.compare(b, merged),
                });
            }
            // Odometer: the last list turns fastest, like the kubelet's recursion.
            let mut i = lists.len();
            loop {
                if i == 0 {
                    return Ok(best.unwrap_or(Hint::new(default, false)));
                }
                i -= 1;
                idx[i] += 1;
                if idx[i] < lists[i].len() {
                    perm[i] = lists[i][idx[i]];
                    break;
                }
                idx[i] = 0;
                perm[i] = lists[i][0];
            }
        }
    }
    Ok(best.unwrap_or(Hint::new(default, false)))
}

/// A policy's merge and verdict (docs/topology.md §2.5): the best hint and
/// whether the pod (or container) is admitted. `distances` is used only
/// with `prefer_closest` and a policy other than `single-numa-node`.
pub fn decide(
    policy: Policy,
    providers: &[ProviderHints],
    numa_nodes: usize,
    prefer_closest: Option<&[Vec<u64>]>,
) -> Result<(Hint, bool), TopologyError> {
    let default = Mask::all(numa_nodes);
    let lists = normalise(providers);
    match policy {
        Policy::None => Ok((Hint::nil(true), true)),
        Policy::BestEffort | Policy::Restricted => {
            let ranking = prefer_closest.map_or(Ranking::Narrowest, Ranking::Closest);
            let best = merge(&lists, default, ranking)?;
            Ok((best, policy == Policy::BestEffort || best.preferred))
        }
        Policy::SingleNumaNode => {
            let lists = single_numa_only(&lists);
            let mut best = merge(&lists, default, Ranking::Narrowest)?;
            if best.mask == Some(default) {
                best.mask = None;
            }
            Ok((best, best.preferred))
        }
    }
}
