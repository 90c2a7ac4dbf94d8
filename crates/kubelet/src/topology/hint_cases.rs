//! Boundary cases of device hint generation and NUMA masks, from the
//! kubelet's own tables (`pkg/kubelet/cm/devicemanager/topology_hints_test.go`,
//! `pkg/kubelet/cm/topologymanager/bitmask/bitmask_test.go`) as data. They
//! hold for releases 1.26 to 1.37 wherever every NUMA node of the machine
//! holds a device of the resource.

use super::hints::{self, Hint};
use super::mask::{MAX_NODES, Mask};

fn h(m: u64, preferred: bool) -> Hint {
    Hint::new(Mask(m), preferred)
}

/// D0, D1 on NUMA 0; D2, D3 on NUMA 1.
const ALL: [Option<&[i64]>; 4] = [Some(&[0]), Some(&[0]), Some(&[1]), Some(&[1])];

// 1.26-1.37 (`GetTopologyHints`): devices the container already holds (a
// kubelet restart) regenerate the hints from those devices alone, or give
// none when their number differs from the request.
#[test]
fn held_devices_regenerate_hints_only_when_their_number_matches_the_request() {
    let held = &ALL[..2];
    let same = hints::device_hints(&[0, 1], &ALL, &[], &[], held, 2);
    assert_eq!(same, Some(vec![h(0b01, true), h(0b11, false)]));
    // Fewer held than requested, more held than requested: no hint at all.
    assert_eq!(hints::device_hints(&[0, 1], &ALL, &ALL[2..], &[], held, 4), Some(vec![]));
    assert_eq!(hints::device_hints(&[0, 1], &ALL, &[], &[], &ALL, 2), Some(vec![]));
}

// 1.26-1.37: the free devices and the init containers' reusable ones count
// together against the request (the kubelet's `available.Union(reusable)`).
#[test]
fn reusable_and_free_devices_count_together() {
    // D0 (NUMA 0) is reusable, D2 (NUMA 1) is free: two devices for two.
    let got = hints::device_hints(&[0, 1], &ALL, &ALL[2..3], &ALL[..1], &[], 2);
    assert_eq!(got, Some(vec![h(0b11, false)]));
    // One of each is one short of three.
    assert_eq!(hints::device_hints(&[0, 1], &ALL, &ALL[2..3], &ALL[..1], &[], 3), Some(vec![]));
}

// The mask's bounds: node 63 is the last a uint64 holds.
#[test]
fn masks_hold_nodes_0_to_63() {
    assert_eq!(Mask::of(&[63]), Some(Mask(1 << 63)));
    assert_eq!(Mask::of(&[0, 64]), None);
    assert!(Mask(u64::MAX).is_set(63));
    assert!(!Mask(u64::MAX).is_set(64));
    assert!(!Mask(u64::MAX).any_set(&[64, -1]));
    assert!(Mask(0b10).any_set(&[0, 1]));
    assert_eq!(Mask::all(63), Mask(u64::MAX >> 1));
    assert_eq!(Mask::all(MAX_NODES + 1), Mask(u64::MAX));
    assert_eq!(Mask::all(1), Mask(1));
    assert_eq!(Mask(1 << 63).nodes(), [63]);
}
