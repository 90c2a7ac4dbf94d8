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
                // equivalent mutants: `<=` for either `<`: a != b here (masks()
                // never compares a mask with itself), and da != db in the else.
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

/// The size of the cross product of `lists`; more than [`MAX_PERMUTATIONS`] is refused.
fn permutations(lists: &[Vec<Hint>]) -> Result<u64, TopologyError> {
    let mut total: u64 = 1;
    for l in lists {
        total = total.saturating_mul(l.len() as u64);
    }
    if total > MAX_PERMUTATIONS {
        return Err(TopologyError::TooManyPermutations(total));
    }
    Ok(total)
}

/// The kubelet's `HintMerger.Merge`: walks the cross product of `lists`
/// and keeps the best merged hint; `{default false}` when none has a
/// non-empty mask (or a list is empty).
pub fn merge(lists: &[Vec<Hint>], default: Mask, ranking: Ranking<'_>) -> Result<Hint, TopologyError> {
    let total = permutations(lists)?;
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

/// The kubelet's own merge cases (`pkg/kubelet/cm/topologymanager/policy_test.go`,
/// `TestCompareHintsNarrowest`, `TestMaxOfMinAffinityCounts` and the best-effort /
/// restricted merge tables), as data. The merge logic they pin is the same in
/// releases 1.26 to 1.37 (`policy.go`, `numa_info.go`).
#[cfg(test)]
mod tests {
    use super::*;

    fn m(nodes: &[i64]) -> Mask {
        Mask::of(nodes).unwrap()
    }

    fn h(nodes: &[i64], preferred: bool) -> Hint {
        Hint::new(m(nodes), preferred)
    }

    /// One provider giving hints for one resource.
    fn one(resource: &str, hints: Vec<Hint>) -> ProviderHints {
        BTreeMap::from([(resource.to_string(), Some(hints))])
    }

    /// The kubelet's four-node test machine (`commonNUMAInfoFourNodes`).
    fn four() -> Vec<Vec<u64>> {
        vec![vec![10, 11, 12, 12], vec![11, 10, 12, 12], vec![12, 12, 10, 11], vec![12, 12, 11, 10]]
    }

    /// The kubelet's eight-node test machine (`commonNUMAInfoEightNodes`), row 7 as it is there.
    fn eight() -> Vec<Vec<u64>> {
        vec![
            vec![10, 11, 12, 12, 30, 30, 30, 30],
            vec![11, 10, 12, 12, 30, 30, 30, 30],
            vec![12, 12, 10, 11, 30, 30, 30, 30],
            vec![12, 12, 11, 10, 30, 30, 30, 30],
            vec![30, 30, 30, 30, 10, 11, 12, 12],
            vec![30, 30, 30, 30, 11, 10, 12, 12],
            vec![30, 30, 30, 30, 12, 12, 10, 11],
            vec![30, 30, 30, 30, 12, 12, 13, 10],
        ]
    }

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Pick {
        Current,
        Candidate,
    }
    use Pick::{Candidate, Current};

    // 1.26-1.37: `HintMerger.compare`, case by case (the kubelet's
    // TestCompareHintsNarrowest table, plus a few that tell "current" from
    // "candidate" where its own pair is equal). `b` is the best non-preferred count.
    #[test]
    fn compare_picks_as_the_kubelet_does() {
        let cases: &[(&str, u32, Hint, Hint, Pick)] = &[
            ("empty candidate", 0, h(&[0], false), Hint::new(Mask(0), true), Current),
            ("empty candidate, empty current", 0, Hint::new(Mask(0), true), Hint::new(Mask(0), false), Current),
            ("preferred beats non-preferred", 0, h(&[0], false), h(&[0], true), Candidate),
            ("preferred kept over non-preferred", 0, h(&[0], true), h(&[0], false), Current),
            ("wider preferred kept over narrower non-preferred", 0, h(&[0, 1], true), h(&[0], false), Current),
            ("both preferred, same mask", 0, h(&[0], true), h(&[0], true), Current),
            ("both preferred, narrower candidate", 0, h(&[0, 1], true), h(&[0], true), Candidate),
            ("both preferred, wider candidate", 0, h(&[0], true), h(&[0, 1], true), Current),
            ("both preferred, same width, lower candidate", 0, h(&[1], true), h(&[0], true), Candidate),
            ("both preferred, same width, higher candidate", 0, h(&[0], true), h(&[1], true), Current),
            // Case 1: current above B: the narrower wins.
            ("1.1", 1, h(&[0, 1], false), h(&[0, 1], false), Current),
            ("1.2", 1, h(&[1, 2], false), h(&[0, 1], false), Candidate),
            ("1.3", 1, h(&[0, 1], false), h(&[1, 2], false), Current),
            ("1: narrower candidate below B", 1, h(&[0, 1], false), h(&[0], false), Candidate),
            ("1: wider candidate", 1, h(&[0, 1], false), h(&[0, 1, 2], false), Current),
            ("1: current far above B, candidate at B", 1, h(&[0, 1, 2], false), h(&[3], false), Candidate),
            // Case 2: current at B: only a fitter candidate at B replaces it.
            ("2.1", 2, h(&[0, 1], false), h(&[0], false), Current),
            ("2.2", 2, h(&[0, 1], false), h(&[0, 1], false), Current),
            ("2.3", 2, h(&[1, 2], false), h(&[0, 1], false), Candidate),
            ("2.4", 2, h(&[0, 1], false), h(&[1, 2], false), Current),
            ("2: candidate above B", 2, h(&[1, 2], false), h(&[0, 1, 2], false), Current),
            ("2: lower candidate below B", 2, h(&[2, 3], false), h(&[0], false), Current),
            // Case 3: current below B: creep back up to B, never above.
            ("3a", 2, h(&[0], false), h(&[0, 1, 2], false), Current),
            ("3a: lower candidate above B", 2, h(&[3], false), h(&[0, 1, 2], false), Current),
            ("3b", 2, h(&[0], false), h(&[0, 1], false), Candidate),
            ("3b: higher candidate at B", 2, h(&[0], false), h(&[2, 3], false), Candidate),
            ("3ca.1", 3, h(&[0], false), h(&[0, 1], false), Candidate),
            ("3ca.2", 3, h(&[0], false), h(&[1, 2], false), Candidate),
            ("3ca.3", 4, h(&[0, 1], false), h(&[1, 2, 3], false), Candidate),
            ("3cb", 4, h(&[1, 2, 3], false), h(&[0, 1], false), Current),
            ("3cb: lower candidate", 4, h(&[2, 3], false), h(&[0], false), Current),
            ("3cc.1", 4, h(&[0, 1, 2], false), h(&[0, 1, 2], false), Current),
            ("3cc.2", 4, h(&[0, 1, 2], false), h(&[1, 2, 3], false), Current),
            ("3cc.3", 4, h(&[1, 2, 3], false), h(&[0, 1, 2], false), Candidate),
        ];
        for &(name, b, current, candidate, want) in cases {
            let merger = Merger { best_non_preferred: b, ranking: Ranking::Narrowest };
            let got = merger.compare(current, candidate);
            let want = if want == Current { current } else { candidate };
            assert_eq!(got, want, "{name}: compare({current}, {candidate}) with B = {b}");
        }
    }

    // 1.26-1.37: `maxOfMinAffinityCounts` (TestMaxOfMinAffinityCounts, plus nil
    // masks, which do not count, and a narrowest hint listed last).
    #[test]
    fn max_of_min_counts_as_the_kubelet_counts() {
        let cases: &[(&[&[Hint]], u32)] = &[
            (&[], 0),
            (&[&[Hint { mask: Some(Mask(0)), preferred: true }]], 0),
            (&[&[Hint::nil(true)]], 0),
            (&[&[h(&[0], true)]], 1),
            (&[&[h(&[0, 1], true)]], 2),
            (&[&[h(&[0, 1], true), h(&[0, 1, 2], true)]], 2),
            (&[&[h(&[0, 1, 2], true), h(&[0, 1], true)]], 2),
            (&[&[Hint::nil(true), h(&[0, 1, 2], true), Hint::nil(false)]], 3),
            (&[&[h(&[0, 1], true), h(&[0, 1, 2], true)], &[h(&[0, 1, 2], true)]], 3),
            (&[&[h(&[0, 1], true), h(&[0, 1, 2], true)], &[h(&[0, 1, 2], true), h(&[0, 1, 2, 3], true)]], 3),
            (&[&[h(&[0, 1, 2], false)], &[h(&[3], false)]], 3),
        ];
        for (lists, want) in cases {
            let lists: Vec<Vec<Hint>> = lists.iter().map(|l| l.to_vec()).collect();
            assert_eq!(max_of_min_counts(&lists), *want, "{lists:?}");
        }
    }

    /// best-effort merges on the kubelet's four-node machine: (name, providers, expected best).
    fn four_node_cases() -> Vec<(&'static str, Vec<ProviderHints>, Hint)> {
        let r = |a: Vec<Hint>, b: Vec<Hint>| vec![one("resource1", a), one("resource2", b)];
        vec![
            ("no common mask", r(vec![h(&[0], true)], vec![h(&[1], true)]), h(&[0, 1, 2, 3], false)),
            ("same mask, one not preferred", r(vec![h(&[0], true)], vec![h(&[0], false)]), h(&[0], false)),
            ("one wider mask, both preferred", r(vec![h(&[0], true)], vec![h(&[0, 1], true)]), h(&[0], false)),
            (
                "two hints, one non-preferred matching",
                r(vec![h(&[0], true), h(&[1], true)], vec![h(&[0, 1], false)]),
                h(&[0], false),
            ),
            (
                "less narrow preferred beats narrower non-preferred",
                r(vec![h(&[1], true), h(&[0, 1], false)], vec![h(&[0], true), h(&[1], true), h(&[0, 1], false)]),
                h(&[1], true),
            ),
            (
                "two resources of one provider",
                vec![BTreeMap::from([
                    ("resource1".to_string(), Some(vec![h(&[1], true), h(&[0, 1], false)])),
                    ("resource2".to_string(), Some(vec![h(&[0], true), h(&[1], true), h(&[0, 1], false)])),
                ])],
                h(&[1], true),
            ),
            (
                "bestNonPreferredAffinityCount (1)",
                r(vec![h(&[0, 1, 2, 3], false), h(&[0, 1], false)], vec![h(&[0, 1], false)]),
                h(&[0, 1], false),
            ),
            (
                "bestNonPreferredAffinityCount (2)",
                r(vec![h(&[0, 1, 2, 3], false), h(&[0, 1], false)], vec![h(&[0, 3], false)]),
                h(&[0, 3], false),
            ),
            (
                "bestNonPreferredAffinityCount (3)",
                r(vec![h(&[0, 1, 2, 3], false), h(&[0, 1], false)], vec![h(&[1, 2], false)]),
                h(&[1, 2], false),
            ),
            (
                "bestNonPreferredAffinityCount (4)",
                r(vec![h(&[0, 1, 2, 3], false), h(&[0, 1], false)], vec![h(&[2, 3], false)]),
                h(&[2, 3], false),
            ),
            (
                "bestNonPreferredAffinityCount (5)",
                r(vec![h(&[0, 1, 2, 3], false), h(&[0, 1], false)], vec![h(&[1, 2], false), h(&[2, 3], false)]),
                h(&[1, 2], false),
            ),
            (
                "bestNonPreferredAffinityCount (6)",
                r(
                    vec![h(&[0, 1, 2, 3], false), h(&[0, 1], false)],
                    vec![h(&[1, 2, 3], false), h(&[1, 2], false), h(&[1, 3], false), h(&[2, 3], false)],
                ),
                h(&[1, 2], false),
            ),
        ]
    }

    // 1.26-1.37: TestPolicyBestEffortMerge and TestPolicyRestrictedMerge on four nodes.
    #[test]
    fn best_effort_and_restricted_merge_as_the_kubelet_does() {
        for (name, providers, want) in four_node_cases() {
            let (best, ok) = decide(Policy::BestEffort, &providers, 4, None).unwrap();
            assert_eq!((best, ok), (want, true), "best-effort: {name}");
            let (best, ok) = decide(Policy::Restricted, &providers, 4, None).unwrap();
            assert_eq!((best, ok), (want, want.preferred), "restricted: {name}");
        }
    }

    // 1.26-1.37 with prefer-closest-numa-nodes (TestPolicyBestEffortMergeClosestNUMA):
    // on the eight-node machine the closer pair wins even where it is numerically higher.
    #[test]
    fn prefer_closest_merges_as_the_kubelet_does() {
        let d = eight();
        let r = |a: Vec<Hint>, b: Vec<Hint>| vec![one("resource1", a), one("resource2", b)];
        let cases = vec![
            (
                "same masks, closer pair",
                r(vec![h(&[0, 4], true), h(&[0, 2], true)], vec![h(&[0, 4], true), h(&[0, 2], true)]),
                h(&[0, 2], true),
            ),
            (
                "one node beats a close pair",
                r(vec![h(&[4], true), h(&[0, 2], true)], vec![h(&[4], true), h(&[0, 2], true)]),
                h(&[4], true),
            ),
            (
                "bestNonPreferredAffinityCount (5)",
                r(vec![h(&[0, 1, 2, 3], false), h(&[0, 1], false)], vec![h(&[1, 2], false), h(&[2, 3], false)]),
                h(&[2, 3], false),
            ),
            (
                "bestNonPreferredAffinityCount (6)",
                r(
                    vec![h(&[0, 1, 2, 3], false), h(&[0, 1], false)],
                    vec![h(&[1, 2, 3], false), h(&[1, 2], false), h(&[1, 3], false), h(&[2, 3], false)],
                ),
                h(&[2, 3], false),
            ),
        ];
        for (name, providers, want) in cases {
            for policy in [Policy::BestEffort, Policy::Restricted] {
                let (best, ok) = decide(policy, &providers, 8, Some(&d)).unwrap();
                assert_eq!(best, want, "{policy:?}: {name}");
                assert_eq!(ok, policy == Policy::BestEffort || want.preferred, "{policy:?}: {name}");
            }
        }
    }

    // 1.26-1.37 (`numa_info.go` Closest): a narrower mask wins whatever the
    // distances; equal mean distances fall back to the numerically lower mask.
    #[test]
    fn closest_ranking_orders_width_then_distance_then_number() {
        let d = four();
        let closest = Ranking::Closest(&d);
        // Equal means (both pairs 10/11 apart): the lower mask ranks first.
        assert!(closest.better(m(&[0, 1]), m(&[2, 3])));
        assert!(!closest.better(m(&[2, 3]), m(&[0, 1])));
        // Different means: distance beats the number.
        assert!(closest.better(m(&[2, 3]), m(&[0, 2])));
        assert!(!closest.better(m(&[0, 2]), m(&[2, 3])));
        // A node far from itself (the sim takes any matrix) still loses to
        // nothing wider: width is compared first.
        let odd = vec![vec![10, 10, 10], vec![10, 10, 10], vec![10, 10, 100]];
        let odd = Ranking::Closest(&odd);
        assert!(odd.better(m(&[2]), m(&[0, 1])));
        assert!(!odd.better(m(&[0, 1]), m(&[2])));
        assert!(Ranking::Narrowest.better(m(&[1]), m(&[0, 1])));
        assert!(!Ranking::Narrowest.better(m(&[0, 1]), m(&[1])));
    }

    #[test]
    fn distance_sum_adds_every_ordered_pair() {
        let d = four();
        assert_eq!(distance_sum(&d, m(&[0])), 10);
        assert_eq!(distance_sum(&d, m(&[0, 1])), 10 + 11 + 11 + 10);
        assert_eq!(distance_sum(&d, m(&[0, 2, 3])), 10 + 12 + 12 + 12 + 10 + 11 + 12 + 11 + 10);
        // A node the matrix lacks is far from everything: a pair of such
        // nodes loses to a pair 9000 apart.
        let far = vec![vec![10, 9000], vec![9000, 10]];
        assert!(distance_sum(&far, m(&[2, 3])) > distance_sum(&far, m(&[0, 1])));
        assert!(Ranking::Closest(&far).better(m(&[0, 1]), m(&[2, 3])));
    }

    // 1.26-1.37 (`mergePermutation`): preferred only when every hint is and
    // every non-nil mask is the same; nil masks neither narrow nor spoil it.
    #[test]
    fn merge_permutation_ands_masks_and_keeps_preferred_only_for_equal_masks() {
        let all = Mask::all(4);
        let cases: &[(&[Hint], Hint)] = &[
            (&[], Hint::new(all, true)),
            (&[Hint::nil(true), Hint::nil(true)], Hint::new(all, true)),
            (&[Hint::nil(false)], Hint::new(all, false)),
            (&[h(&[0, 1], true), Hint::nil(true), h(&[0, 1], true)], h(&[0, 1], true)),
            (&[h(&[0, 1], true), h(&[0, 1], true), h(&[0], true)], h(&[0], false)),
            (&[h(&[0], true), h(&[0, 1], true), h(&[0], true)], h(&[0], false)),
            (&[h(&[0, 1], true), h(&[0, 1], false)], h(&[0, 1], false)),
            (&[h(&[0], true), h(&[1], true)], Hint::new(Mask(0), false)),
        ];
        for (perm, want) in cases {
            assert_eq!(merge_permutation(all, perm), *want, "{perm:?}");
        }
    }

    // The sim's own limit: exactly MAX_PERMUTATIONS are walked, one more is refused.
    #[test]
    fn the_permutation_limit_is_inclusive() {
        let ten = vec![Hint::nil(true); 10];
        let mut lists = vec![ten; 7];
        assert_eq!(permutations(&lists), Ok(MAX_PERMUTATIONS));
        lists[0].push(Hint::nil(true));
        assert_eq!(permutations(&lists), Err(TopologyError::TooManyPermutations(11_000_000)));
        let e = merge(&lists, Mask::all(2), Ranking::Narrowest).unwrap_err();
        assert_eq!(e, TopologyError::TooManyPermutations(11_000_000));
        lists[1].clear();
        assert_eq!(permutations(&lists), Ok(0));
    }

    // 1.26-1.37 (`filterProvidersHints`): a resource that cannot be satisfied
    // (an empty list) becomes {nil false}: it spoils "preferred" but the other
    // providers' masks still decide the best hint.
    #[test]
    fn a_resource_without_hints_spoils_preferred_but_not_the_mask() {
        let providers = vec![one("example.com/dev", vec![]), one("cpu", vec![h(&[0], true), h(&[0, 1], false)])];
        let (best, ok) = decide(Policy::BestEffort, &providers, 2, None).unwrap();
        assert_eq!((best, ok), (h(&[0], false), true));
        let (best, ok) = decide(Policy::Restricted, &providers, 2, None).unwrap();
        assert_eq!((best, ok), (h(&[0], false), false));
        let only = normalise(&providers);
        assert_eq!(only[0], vec![Hint::nil(false)]);
        // A nil list ("don't care") and a provider without resources are {nil true}.
        let dont_care = vec![BTreeMap::from([("cpu".to_string(), None)]), BTreeMap::new()];
        assert_eq!(normalise(&dont_care), vec![vec![Hint::nil(true)], vec![Hint::nil(true)]]);
    }

    // An empty list (single-numa-node filtered every hint away) merges to
    // {default false}, as the kubelet's Merge does when it never sees a permutation.
    #[test]
    fn an_empty_list_merges_to_the_default_non_preferred() {
        let lists = vec![vec![h(&[0], true)], vec![]];
        assert_eq!(merge(&lists, Mask::all(2), Ranking::Narrowest), Ok(Hint::new(Mask::all(2), false)));
        assert_eq!(merge(&[], Mask::all(2), Ranking::Narrowest), Ok(Hint::new(Mask::all(2), true)));
    }
}
