//! NUMA affinity masks: a set of NUMA node IDs (0..64) as the kubelet's
//! `bitmask.BitMask` holds them, with its ordering rules and its short
//! notation (`01` = {0}, NUMA 0 rightmost).

use std::fmt;

/// The largest number of NUMA nodes a mask can hold (a `uint64`).
pub const MAX_NODES: usize = 64;

/// A set of NUMA nodes. Bit `n` is NUMA node `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Mask(pub u64);

impl Mask {
    /// The mask of the given nodes; `None` when a node is outside 0..64.
    pub fn of(nodes: &[i64]) -> Option<Mask> {
        let mut m = 0u64;
        for &n in nodes {
            let bit = u32::try_from(n).ok().filter(|b| (*b as usize) < MAX_NODES)?;
            m |= 1u64 << bit;
        }
        Some(Mask(m))
    }

    /// All nodes `0..count` (the kubelet's default affinity mask).
    pub fn all(count: usize) -> Mask {
        if count >= MAX_NODES { Mask(u64::MAX) } else { Mask((1u64 << count) - 1) }
    }

    /// Number of nodes in the mask.
    pub fn count(self) -> u32 {
        self.0.count_ones()
    }

    /// True when node `n` is in the mask.
    pub fn is_set(self, n: i64) -> bool {
        u32::try_from(n).ok().filter(|b| (*b as usize) < MAX_NODES).is_some_and(|b| self.0 & (1u64 << b) != 0)
    }

    /// True when any of `nodes` is in the mask (the kubelet's `AnySet`).
    pub fn any_set(self, nodes: &[i64]) -> bool {
        nodes.iter().any(|n| self.is_set(*n))
    }

    /// The intersection.
    pub fn and(self, other: Mask) -> Mask {
        Mask(self.0 & other.0)
    }

    /// The node IDs, ascending.
    pub fn nodes(self) -> Vec<i64> {
        (0..MAX_NODES as i64).filter(|n| self.is_set(*n)).collect()
    }

    /// Fewer nodes, or as many and numerically smaller (`IsNarrowerThan`).
    pub fn is_narrower_than(self, other: Mask) -> bool {
        self.count() < other.count() || (self.count() == other.count() && self.0 < other.0)
    }

    /// Every non-empty subset of `nodes`, in the kubelet's order
    /// (`IterateBitMasks`): by size ascending, then lexicographically by the
    /// node list. `nodes` must be sorted ascending.
    pub fn subsets(nodes: &[i64]) -> Vec<Mask> {
        let mut out = Vec::new();
        for size in 1..=nodes.len() {
            let mut pick: Vec<usize> = (0..size).collect();
            loop {
                let chosen: Vec<i64> = pick.iter().map(|i| nodes[*i]).collect();
                if let Some(m) = Mask::of(&chosen) {
                    out.push(m);
                }
                // Next combination in lexicographic order.
                let mut i = size;
                let mut advanced = false;
                while i > 0 {
                    i -= 1;
                    if pick[i] < nodes.len() - size + i {
                        pick[i] += 1;
                        for j in i + 1..size {
                            pick[j] = pick[j - 1] + 1;
                        }
                        advanced = true;
                        break;
                    }
                }
                if !advanced {
                    break;
                }
            }
        }
        out
    }
}

/// The kubelet's short notation (`bitMask.String` in
/// pkg/kubelet/cm/topologymanager/bitmask/bitmask.go, the same 1.26-1.37):
/// binary, NUMA 0 rightmost, zero-padded to the width s+2 of the largest
/// even s (62 down to 2) with mask > 2^s, else to two digits. So `01`, `10`, `11`, `0101`, `1000`,
/// but a single node 2, 4, ... (the mask 4^k) prints with no padding: `100`,
/// `10000`, since the comparison is strict.
impl fmt::Display for Mask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shift = (1..MAX_NODES / 2).rev().map(|k| 2 * k).find(|&shift| self.0 > 1u64 << shift);
        let width = shift.map_or(2, |shift| shift + 2);
        write!(f, "{:0width$b}", self.0, width = width)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subsets_follow_iterate_bitmasks_order() {
        // docs/topology.md §1 step 2: 2 nodes -> 01, 10, 11; 3 nodes -> 001, 010, 100, 011, 101, 110, 111.
        let two: Vec<u64> = Mask::subsets(&[0, 1]).iter().map(|m| m.0).collect();
        assert_eq!(two, [0b01, 0b10, 0b11]);
        let three: Vec<u64> = Mask::subsets(&[0, 1, 2]).iter().map(|m| m.0).collect();
        assert_eq!(three, [0b001, 0b010, 0b100, 0b011, 0b101, 0b110, 0b111]);
        assert_eq!(Mask::subsets(&[0, 1, 2, 3, 4, 5, 6, 7, 8]).len(), 511);
    }

    #[test]
    fn notation_and_order() {
        assert_eq!(Mask(1).to_string(), "01");
        assert_eq!(Mask(2).to_string(), "10");
        assert_eq!(Mask(3).to_string(), "11");
        // bitMask.String: strictly above 2^(w-2) pads to w digits, so 4^k is not padded.
        assert_eq!(Mask(4).to_string(), "100");
        assert_eq!(Mask(5).to_string(), "0101");
        assert_eq!(Mask(8).to_string(), "1000");
        assert_eq!(Mask(16).to_string(), "10000");
        assert_eq!(Mask(17).to_string(), "010001");
        assert_eq!(Mask(1 << 62).to_string(), format!("1{}", "0".repeat(62)));
        assert_eq!(Mask(u64::MAX).to_string(), "1".repeat(64));
        assert!(Mask(1).is_narrower_than(Mask(2)));
        assert!(Mask(2).is_narrower_than(Mask(3)));
        assert!(!Mask(3).is_narrower_than(Mask(3)));
        assert_eq!(Mask::all(2), Mask(3));
        assert_eq!(Mask::all(64), Mask(u64::MAX));
        assert_eq!(Mask::of(&[0, 3]).map(|m| m.nodes()), Some(vec![0, 3]));
        assert_eq!(Mask::of(&[-1]), None);
        assert!(!Mask(3).is_set(-1));
    }
}
