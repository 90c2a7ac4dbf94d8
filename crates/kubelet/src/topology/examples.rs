//! The worked examples of docs/topology.md §5 (hints, verdicts, allocations and
//! GetPreferredAllocation inputs), plus pod scope, devices without topology,
//! the NUMA-node limit and CPU + device merging. Kubelet logic pinned: v1.26+
//! (PR #112914), equal-mask rule and non-preferred ranking from v1.24.

use std::collections::{BTreeMap, BTreeSet};

use super::*;

const DEV: &str = "example.com/dev";

/// `(id, numa)` devices in plugin order.
type Devs = Vec<(String, Option<Vec<i64>>)>;

/// The common setup: D0, D1 on NUMA 0; D2, D3 on NUMA 1.
fn common() -> Devs {
    vec![
        ("D0".into(), Some(vec![0])),
        ("D1".into(), Some(vec![0])),
        ("D2".into(), Some(vec![1])),
        ("D3".into(), Some(vec![1])),
    ]
}

fn hints_for(all: &Devs, used: &[&str], request: u64) -> ResourceHints {
    let all_n: Vec<Option<&[i64]>> = all.iter().map(|(_, n)| n.as_deref()).collect();
    let avail: Vec<Option<&[i64]>> =
        all.iter().filter(|(id, _)| !used.contains(&id.as_str())).map(|(_, n)| n.as_deref()).collect();
    hints::device_hints(&[0, 1], &all_n, &avail, &[], &[], request)
}

fn text(h: &ResourceHints) -> String {
    match h {
        None => "nil".into(),
        Some(l) => format!("[{}]", l.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ")),
    }
}

/// Device hints plus empty CPU and memory providers.
fn providers(dev: ResourceHints) -> Vec<ProviderHints> {
    vec![BTreeMap::from([(DEV.to_string(), dev)]), BTreeMap::new(), BTreeMap::new()]
}

fn config(policy: Policy) -> TopologyConfig {
    TopologyConfig { policy, ..TopologyConfig::default() }
}

fn verdict(policy: Policy, dev: &ResourceHints) -> (String, bool) {
    let (h, ok) = config(policy).decide(&providers(dev.clone())).unwrap();
    (h.to_string(), ok)
}

fn available(all: &Devs, used: &[&str]) -> Devs {
    all.iter().filter(|(id, _)| !used.contains(&id.as_str())).cloned().collect()
}

fn ids(v: &Devs) -> Vec<String> {
    v.iter().map(|(id, _)| id.clone()).collect()
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// The take for `request` devices under `hint`.
fn take(avail: &Devs, hint: Option<Mask>, request: u64) -> Take {
    let has = true;
    let sp = split(avail, has, hint);
    plan_take(&[], &ids(avail), &sp, request, request)
}

#[test]
fn example_a_nothing_allocated_request_2() {
    let all = common();
    let h = hints_for(&all, &[], 2);
    assert_eq!(text(&h), "[{01 true} {10 true} {11 false}]");
    let json: Vec<u64> = h.as_ref().unwrap().iter().filter_map(|x| x.mask.map(|m| m.0)).collect();
    assert_eq!(json, [1, 2, 3], "JSON values of the masks");
    for p in [Policy::BestEffort, Policy::Restricted, Policy::SingleNumaNode] {
        assert_eq!(verdict(p, &h), ("{01 true}".into(), true), "{p:?}");
    }
    // needed = |aligned| = 2: both taken, no GetPreferredAllocation call.
    let t = take(&all, Some(Mask(1)), 2);
    assert_eq!(t.ask, None);
    assert_eq!(t.finish(&[], 2), s(&["D0", "D1"]));
    // Policy none (nil mask): GetPreferredAllocation({D0..D3}, {}, 2).
    let t = take(&all, None, 2);
    assert_eq!(t.ask, Some(Ask { available: s(&["D0", "D1", "D2", "D3"]), must_include: vec![], size: 2 }));
    assert_eq!(t.finish(&s(&["D3", "D1"]), 2), s(&["D3", "D1"]));
}

#[test]
fn example_a_request_3_single_numa_node_rejects() {
    let h = hints_for(&common(), &[], 3);
    assert_eq!(text(&h), "[{11 true}]");
    assert_eq!(verdict(Policy::BestEffort, &h), ("{11 true}".into(), true));
    assert_eq!(verdict(Policy::Restricted, &h), ("{11 true}".into(), true));
    assert_eq!(verdict(Policy::SingleNumaNode, &h), ("{nil false}".into(), false));
}

#[test]
fn example_b_d0_allocated_request_2() {
    let all = common();
    let h = hints_for(&all, &["D0"], 2);
    assert_eq!(text(&h), "[{10 true} {11 false}]");
    for p in [Policy::BestEffort, Policy::Restricted, Policy::SingleNumaNode] {
        assert_eq!(verdict(p, &h), ("{10 true}".into(), true), "{p:?}");
    }
    let avail = available(&all, &["D0"]);
    let t = take(&avail, Some(Mask(2)), 2);
    assert_eq!(t.ask, None);
    assert_eq!(t.finish(&[], 2), s(&["D2", "D3"]));
    let t = take(&avail, None, 2);
    assert_eq!(t.ask.map(|a| a.available), Some(s(&["D1", "D2", "D3"])));
}

#[test]
fn example_b_prime_fragmented_free_devices() {
    let all = common();
    let h = hints_for(&all, &["D0", "D2"], 2);
    assert_eq!(text(&h), "[{11 false}]");
    assert_eq!(verdict(Policy::BestEffort, &h), ("{11 false}".into(), true));
    assert_eq!(verdict(Policy::Restricted, &h), ("{11 false}".into(), false));
    assert_eq!(verdict(Policy::SingleNumaNode, &h), ("{nil false}".into(), false));
    let avail = available(&all, &["D0", "D2"]);
    // best-effort: both aligned devices, no call, spanning both nodes.
    let t = take(&avail, Some(Mask(3)), 2);
    assert_eq!(t.ask, None);
    assert_eq!(t.finish(&[], 2), s(&["D1", "D3"]));
    // none: GetPreferredAllocation({D1, D3}, {}, 2).
    let t = take(&avail, None, 2);
    assert_eq!(t.ask, Some(Ask { available: s(&["D1", "D3"]), must_include: vec![], size: 2 }));
}

#[test]
fn example_c1_device_without_topology_added() {
    let mut all = common();
    all.push(("D4".into(), None));
    let h = hints_for(&all, &[], 2);
    assert_eq!(text(&h), "[{01 true} {10 true} {11 false}]");
    assert_eq!(verdict(Policy::BestEffort, &h), ("{01 true}".into(), true));
    let sp = split(&all, true, Some(Mask(1)));
    assert_eq!(sp.aligned, s(&["D0", "D1"]));
    assert_eq!(sp.no_affinity, s(&["D4"]));
    let t = plan_take(&[], &ids(&all), &sp, 2, 2);
    assert_eq!(t.ask, None);
    assert_eq!(t.finish(&[], 2), s(&["D0", "D1"]));
}

#[test]
fn example_c2_free_devices_without_topology_give_no_hint() {
    let all: Devs = vec![("D0".into(), Some(vec![0])), ("DX".into(), None), ("DY".into(), None)];
    let h = hints_for(&all, &[], 2);
    assert_eq!(text(&h), "[]");
    assert_eq!(verdict(Policy::BestEffort, &h), ("{11 false}".into(), true));
    assert_eq!(verdict(Policy::Restricted, &h), ("{11 false}".into(), false));
    assert_eq!(verdict(Policy::SingleNumaNode, &h), ("{nil false}".into(), false));
    // best-effort: D0 taken, then GetPreferredAllocation({D0, DX, DY}, {D0}, 2).
    let sp = split(&all, true, Some(Mask(3)));
    let t = plan_take(&[], &ids(&all), &sp, 2, 2);
    assert_eq!(t.ask, Some(Ask { available: s(&["D0", "DX", "DY"]), must_include: s(&["D0"]), size: 2 }));
    assert_eq!(t.finish(&s(&["D0", "DY"]), 2), s(&["D0", "DY"]));
    assert_eq!(t.finish(&[], 2), s(&["D0", "DX"]), "without an answer, the next free device");
    // none: GetPreferredAllocation({D0, DX, DY}, {}, 2).
    let t = plan_take(&[], &ids(&all), &split(&all, true, None), 2, 2);
    assert_eq!(t.ask.map(|a| a.must_include), Some(vec![]));
    // If no device had a topology: nil hints, every policy admits.
    let none: Devs = vec![("DX".into(), None), ("DY".into(), None)];
    let h = hints_for(&none, &[], 2);
    assert_eq!(h, None);
    for p in [Policy::BestEffort, Policy::Restricted, Policy::SingleNumaNode] {
        assert!(verdict(p, &h).1, "{p:?}");
    }
}

/// Machine of example (d): NUMA n holds CPUs 4n..4n+3; CPU 0 reserved.
fn machine_d() -> TopologyConfig {
    TopologyConfig {
        cpu_policy: CpuPolicy::Static,
        reserved_cpus: BTreeSet::from([0]),
        machine: Machine { numa_nodes: 2, cpus_per_numa: 4, distances: None },
        ..TopologyConfig::default()
    }
}

#[test]
fn example_d_cpu_plus_device() {
    let cfg = machine_d();
    let node_of = cfg.machine.node_of_cpu();
    let free: Vec<u32> = (1..8).collect();
    let cpu = hints::cpu_hints(&[0, 1], &node_of, &free, &[], 6);
    assert_eq!(text(&Some(cpu.clone())), "[{11 true}]");
    let dev = hints_for(&common(), &[], 1);
    assert_eq!(text(&dev), "[{01 true} {10 true} {11 false}]");
    let providers = vec![
        BTreeMap::from([(DEV.to_string(), dev)]),
        BTreeMap::from([("cpu".to_string(), Some(cpu))]),
        BTreeMap::new(),
    ];
    let run = |p| TopologyConfig { policy: p, ..machine_d() }.decide(&providers).unwrap();
    let (best, ok) = run(Policy::BestEffort);
    assert_eq!((best.to_string(), ok), ("{11 false}".into(), true));
    assert!(!run(Policy::Restricted).1);
    assert!(!run(Policy::SingleNumaNode).1);
    // All 4 devices aligned, 1 needed: GetPreferredAllocation({D0..D3}, {}, 1).
    let t = take(&common(), best.mask, 1);
    assert_eq!(t.ask, Some(Ask { available: s(&["D0", "D1", "D2", "D3"]), must_include: vec![], size: 1 }));
    // CPUs (simplified takeByTopology): all of NUMA 1 plus CPUs 1 and 2.
    let allocatable: BTreeSet<u32> = free.into_iter().collect();
    assert_eq!(cfg.machine.allocate(&allocatable, best.mask, 6), Some(vec![1, 2, 4, 5, 6, 7]));
}

#[test]
fn equal_mask_rule_makes_differing_masks_non_preferred() {
    // docs/topology.md §2.3 (v1.24+, PR #108052): {0111 true} AND {0011 true} is not preferred.
    let merged =
        merge::merge_permutation(Mask(0b1111), &[Hint::new(Mask(0b0111), true), Hint::new(Mask(0b0011), true)]);
    assert_eq!(merged, Hint::new(Mask(0b0011), false));
}

#[test]
fn init_container_devices_constrain_the_hint() {
    // A reusable device on NUMA 1 must lie in every mask (docs/topology.md §1 step b).
    let all = common();
    let all_n: Vec<Option<&[i64]>> = all.iter().map(|(_, n)| n.as_deref()).collect();
    let reusable = [Some(&[1i64][..])];
    let avail: Vec<Option<&[i64]>> = all[..3].iter().map(|(_, n)| n.as_deref()).collect();
    let h = hints::device_hints(&[0, 1], &all_n, &avail, &reusable, &[], 2);
    assert_eq!(text(&h), "[{10 true} {11 false}]");
    // A reusable device without topology neither counts nor constrains.
    let h = hints::device_hints(&[0, 1], &all_n, &avail, &[None], &[], 2);
    assert_eq!(text(&h), "[{01 true} {11 false}]");
    // One whose topology lists no node is not skipped (only a nil Topology
    // is, in generateDeviceTopologyHints of 1.26-1.37): it lies in no mask,
    // so every mask is dropped.
    let h = hints::device_hints(&[0, 1], &all_n, &avail, &[Some(&[][..])], &[], 2);
    assert_eq!(text(&h), "[]");
}

#[test]
fn a_limit_of_0_gets_every_mask_single_nodes_preferred_in_every_release() {
    // getContainerDeviceRequest keeps a limit of 0 (1.26-1.37); numMatching >= 0 always holds.
    assert_eq!(text(&hints_for(&common(), &[], 0)), "[{01 true} {10 true} {11 false}]");
    // Even with every device in use.
    assert_eq!(text(&hints_for(&common(), &["D0", "D1", "D2", "D3"], 0)), "[{01 true} {10 true} {11 false}]");
}

#[test]
fn from_1_36_device_hints_skip_numa_nodes_without_devices() {
    // Devices on NUMA 0 only, a machine of 2 nodes. Up to 1.35 every machine
    // node takes part; 1.36+ (deviceNUMANodes) only node 0.
    let all_n = [Some(&[0i64][..]), Some(&[0i64][..])];
    let old = hints::hint_nodes(&[0, 1], &all_n, false);
    let new = hints::hint_nodes(&[0, 1], &all_n, true);
    assert_eq!((old.as_slice(), new.as_slice()), (&[0, 1][..], &[0][..]));
    let h = |nodes: &[i64], request| text(&hints::device_hints(nodes, &all_n, &all_n, &[], &[], request));
    assert_eq!(h(&old, 1), "[{01 true} {11 false}]");
    assert_eq!(h(&new, 1), "[{01 true}]");
    assert_eq!(h(&old, 0), "[{01 true} {10 true} {11 false}]");
    assert_eq!(h(&new, 0), "[{01 true}]");
    // Node IDs the machine lacks are dropped; no device node at all keeps every machine node.
    assert_eq!(hints::hint_nodes(&[0, 1], &[Some(&[1i64, 7][..])], true), [1]);
    assert_eq!(hints::hint_nodes(&[0, 1], &[Some(&[7i64][..]), None], true), [0, 1]);
}

#[test]
fn pod_scope_request_counts_init_containers_and_sidecars() {
    // docs/topology.md §2.7: init 2, sidecar 1, app 2 -> max(1 + 2, 2) = 3 devices for the pod.
    let req = cpu::pod_request(&[(Role::Init, 2), (Role::Sidecar, 1), (Role::App, 2)]);
    assert_eq!(req, 3);
    let h = hints_for(&common(), &[], req);
    assert_eq!(text(&h), "[{11 true}]");
    assert!(!verdict(Policy::SingleNumaNode, &h).1, "3 devices never fit one node of 2");
    // Init 3 then app 1: the init container's peak decides.
    assert_eq!(cpu::pod_request(&[(Role::Init, 3), (Role::App, 1)]), 3);
}

#[test]
fn more_numa_nodes_than_the_limit() {
    // docs/topology.md §1 NUMA limit: 9 nodes with a policy refuses to start; `none` has no limit.
    let mut c = TopologyConfig { policy: Policy::SingleNumaNode, ..TopologyConfig::default() };
    c.machine.numa_nodes = 9;
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("unsupported on machines with more than 8 NUMA Nodes"), "{e}");
    c.options = "max-allowable-numa-nodes=9".parse().unwrap();
    c.validate().unwrap();
    // Nine nodes, 511 masks: a device on node 8 gives a single-node hint.
    let all_n = [Some(&[8i64][..])];
    let nodes: Vec<i64> = (0..9).collect();
    let h = hints::device_hints(&nodes, &all_n, &all_n, &[], &[], 1).unwrap();
    assert_eq!(h.iter().filter(|x| x.preferred).count(), 1);
    let (best, ok) = c.decide(&[BTreeMap::from([(DEV.to_string(), Some(h))])]).unwrap();
    assert_eq!((best.mask, ok), (Some(Mask(1 << 8)), true));
    c.policy = Policy::None;
    c.options = PolicyOptions::default();
    c.validate().unwrap();
}

#[test]
fn policy_options_are_refused_as_the_kubelet_refuses_them() {
    // docs/topology.md §2.6.
    let e = "max-allowable-numa-nodes=4".parse::<PolicyOptions>().unwrap_err();
    assert_eq!(e, "the minimum value of \"max-allowable-numa-nodes\" should not be less than 8");
    let e = "foo=1".parse::<PolicyOptions>().unwrap_err();
    assert_eq!(e, "unknown Topology Manager Policy option: \"foo\"");
    assert!("prefer-closest-numa-nodes=yes".parse::<PolicyOptions>().unwrap_err().contains("ParseBool"));
    let o: PolicyOptions = "prefer-closest-numa-nodes=True, max-allowable-numa-nodes=16".parse().unwrap();
    assert!(o.prefer_closest_numa_nodes);
    assert_eq!(o.max_allowable_numa_nodes, 16);
    let c = TopologyConfig { policy: Policy::Restricted, options: o, ..TopologyConfig::default() };
    assert!(c.validate().unwrap_err().to_string().contains("error getting NUMA distances from cadvisor"));
    let s = TopologyConfig { cpu_policy: CpuPolicy::Static, ..TopologyConfig::default() };
    assert!(s.validate().unwrap_err().to_string().contains("reserved CPU"));
}

#[test]
fn prefer_closest_breaks_ties_by_distance() {
    // docs/topology.md §2.4: with 4 nodes where 0-2 are close and 0-1 far, {0,2} beats {0,1}.
    let d = vec![vec![10, 30, 12, 30], vec![30, 10, 30, 12], vec![12, 30, 10, 30], vec![30, 12, 30, 10]];
    let lists = vec![vec![Hint::new(Mask(0b0011), true), Hint::new(Mask(0b0101), true)]];
    let near = merge::merge(&lists, Mask::all(4), merge::Ranking::Closest(&d)).unwrap();
    assert_eq!(near.mask, Some(Mask(0b0101)));
    let narrow = merge::merge(&lists, Mask::all(4), merge::Ranking::Narrowest).unwrap();
    assert_eq!(narrow.mask, Some(Mask(0b0011)));
}

#[test]
fn single_numa_node_on_one_node_stores_a_nil_mask() {
    let mut c = config(Policy::SingleNumaNode);
    c.machine.numa_nodes = 1;
    let h = hints::device_hints(&[0], &[Some(&[0][..])], &[Some(&[0][..])], &[], &[], 1);
    let (best, ok) = c.decide(&[BTreeMap::from([(DEV.to_string(), h)])]).unwrap();
    assert_eq!((best.to_string(), ok), ("{nil true}".into(), true));
}
