//! What changed between two `List` answers, for `dpctl podresources watch`:
//! pods that appeared or went away, and within a pod the assignments (one
//! per container and resource) that appeared, changed or went away.
//!
//! Assignments are compared in a normal form (IDs sorted, each device once
//! with all its NUMA nodes, devices grouped by NUMA node set), because the kubelet guarantees no order: the same answer in
//! another order is not a change.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use super::view::{CPU_RESOURCE, ClaimResourceView, MemoryView, PodView, merge_devices};

/// Device IDs by NUMA node set.
type IdsByNuma = BTreeMap<Option<Vec<i64>>, BTreeSet<String>>;

/// The container name used for pod-level CPUs and memory.
pub const POD_LEVEL: &str = "(pod)";

/// Devices of one resource on one NUMA node (set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceGroup {
    /// NUMA nodes, sorted; `None` without topology.
    pub numa_nodes: Option<Vec<i64>>,
    /// Device IDs, sorted.
    pub device_ids: Vec<String>,
}

/// What a container holds of one resource, in normal form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Held {
    /// Devices of one resource, each once, grouped by NUMA node set.
    Devices(Vec<DeviceGroup>),
    /// Exclusive CPUs, sorted.
    CpuIds(Vec<i64>),
    /// Memory of one type, one entry per NUMA node (set), sorted.
    Memory(Vec<MemoryView>),
    /// The devices of one DRA claim, sorted.
    ClaimResources(Vec<ClaimResourceView>),
}

/// One container's hold on one resource. A container that holds nothing has
/// one assignment with `resource` and `held` both `None`, so that it shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Assignment {
    /// Container name, or [`POD_LEVEL`].
    pub container: String,
    /// Resource name, memory type, `cpu`, or `claim NAMESPACE/NAME`.
    pub resource: Option<String>,
    /// What is held.
    pub held: Option<Held>,
}

fn sorted_numa(n: Option<&Vec<i64>>) -> Option<Vec<i64>> {
    n.map(|v| {
        let mut v = v.clone();
        v.sort_unstable();
        v.dedup();
        v
    })
}

fn memory_assignments(container: &str, memory: &[MemoryView], out: &mut Vec<Assignment>) {
    let mut by_type: Vec<(String, Vec<MemoryView>)> = Vec::new();
    for m in memory {
        let m = MemoryView { numa_nodes: sorted_numa(m.numa_nodes.as_ref()), ..m.clone() };
        match by_type.iter_mut().find(|(t, _)| *t == m.memory_type) {
            Some((_, v)) => v.push(m),
            None => by_type.push((m.memory_type.clone(), vec![m])),
        }
    }
    for (t, mut v) in by_type {
        v.sort_by(|a, b| (&a.numa_nodes, a.size).cmp(&(&b.numa_nodes, b.size)));
        out.push(Assignment { container: container.into(), resource: Some(t), held: Some(Held::Memory(v)) });
    }
}

fn cpu_assignment(container: &str, cpus: &[i64], out: &mut Vec<Assignment>) {
    if cpus.is_empty() {
        return;
    }
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    out.push(Assignment {
        container: container.into(),
        resource: Some(CPU_RESOURCE.into()),
        held: Some(Held::CpuIds(v)),
    });
}

/// The label of a DRA claim: `claim NAME`, or `claim NAMESPACE/NAME` when
/// the claim lives outside the pod's namespace.
pub fn claim_label(pod_namespace: &str, claim_namespace: &str, claim_name: &str) -> String {
    if claim_namespace.is_empty() || claim_namespace == pod_namespace {
        format!("claim {claim_name}")
    } else {
        format!("claim {claim_namespace}/{claim_name}")
    }
}

/// A pod's assignments in the kubelet's container order; within a container:
/// devices (by resource, in order of appearance), CPUs, memory, DRA claims.
pub fn assignments(p: &PodView) -> Vec<Assignment> {
    let mut out = Vec::new();
    for c in &p.containers {
        let start = out.len();
        let mut by_resource: Vec<(String, IdsByNuma)> = Vec::new();
        // One entry per device with all its NUMA nodes: upstream sends a device
        // on two nodes as two entries, which must not count as two devices.
        for d in merge_devices(&c.devices) {
            let idx = match by_resource.iter().position(|(r, _)| r == d.resource_name) {
                Some(i) => i,
                None => {
                    by_resource.push((d.resource_name.to_string(), BTreeMap::new()));
                    by_resource.len() - 1
                }
            };
            by_resource[idx].1.entry(d.numa_nodes).or_default().insert(d.device_id.to_string());
        }
        for (r, groups) in by_resource {
            let groups = groups
                .into_iter()
                .map(|(numa_nodes, ids)| DeviceGroup { numa_nodes, device_ids: ids.into_iter().collect() })
                .collect();
            out.push(Assignment { container: c.name.clone(), resource: Some(r), held: Some(Held::Devices(groups)) });
        }
        cpu_assignment(&c.name, &c.cpu_ids, &mut out);
        memory_assignments(&c.name, &c.memory, &mut out);
        for claim in &c.dynamic_resources {
            let mut res = claim.claim_resources.clone();
            res.sort_by(|a, b| {
                (&a.driver_name, &a.pool_name, &a.device_name).cmp(&(&b.driver_name, &b.pool_name, &b.device_name))
            });
            out.push(Assignment {
                container: c.name.clone(),
                resource: Some(claim_label(&p.namespace, &claim.claim_namespace, &claim.claim_name)),
                held: Some(Held::ClaimResources(res)),
            });
        }
        if out.len() == start {
            out.push(Assignment { container: c.name.clone(), resource: None, held: None });
        }
    }
    cpu_assignment(POD_LEVEL, &p.cpu_ids, &mut out);
    memory_assignments(POD_LEVEL, &p.memory, &mut out);
    out
}

/// What happened to a pod or an assignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Already there when the watch started.
    Present,
    /// Appeared.
    Added,
    /// Still there, different.
    Changed,
    /// Went away.
    Removed,
}

impl ChangeKind {
    /// The lower-case name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Present => "present",
            ChangeKind::Added => "added",
            ChangeKind::Changed => "changed",
            ChangeKind::Removed => "removed",
        }
    }
}

/// One assignment that appeared, changed or went away.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AssignmentChange {
    /// What happened.
    pub change: ChangeKind,
    /// Container name, or [`POD_LEVEL`].
    pub container: String,
    /// Resource (see [`Assignment::resource`]).
    pub resource: Option<String>,
    /// Before (`None` when it appeared).
    pub before: Option<Held>,
    /// After (`None` when it went away).
    pub after: Option<Held>,
}

/// One pod that appeared, changed or went away.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodEvent {
    /// What happened to the pod.
    pub event: ChangeKind,
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub pod: String,
    /// The assignments concerned: all of them for a pod that is present,
    /// added or removed; the differences for a changed pod.
    pub changes: Vec<AssignmentChange>,
    /// The pod as it is now (as it was last seen, for a removed pod).
    pub pod_resources: PodView,
}

fn whole(kind: ChangeKind, p: &PodView) -> PodEvent {
    let changes = assignments(p)
        .into_iter()
        .map(|a| {
            let (before, after) = if kind == ChangeKind::Removed { (a.held, None) } else { (None, a.held) };
            AssignmentChange { change: kind, container: a.container, resource: a.resource, before, after }
        })
        .collect();
    PodEvent { event: kind, namespace: p.namespace.clone(), pod: p.name.clone(), changes, pod_resources: p.clone() }
}

/// The pods already there when a watch starts, as `present` events.
pub fn present(pods: &[PodView]) -> Vec<PodEvent> {
    pods.iter().map(|p| whole(ChangeKind::Present, p)).collect()
}

/// The events that turn `prev` into `next`: added and changed pods in
/// `next`'s order, then removed pods in `prev`'s order.
pub fn diff(prev: &[PodView], next: &[PodView]) -> Vec<PodEvent> {
    let before: HashMap<(&str, &str), &PodView> =
        prev.iter().map(|p| ((p.namespace.as_str(), p.name.as_str()), p)).collect();
    let after: HashMap<(&str, &str), &PodView> =
        next.iter().map(|p| ((p.namespace.as_str(), p.name.as_str()), p)).collect();
    let mut events = Vec::new();
    for p in next {
        match before.get(&(p.namespace.as_str(), p.name.as_str())) {
            None => events.push(whole(ChangeKind::Added, p)),
            Some(old) if *old == p => {}
            Some(old) => {
                let changes = pod_changes(old, p);
                if !changes.is_empty() {
                    events.push(PodEvent {
                        event: ChangeKind::Changed,
                        namespace: p.namespace.clone(),
                        pod: p.name.clone(),
                        changes,
                        pod_resources: p.clone(),
                    });
                }
            }
        }
    }
    for p in prev {
        if !after.contains_key(&(p.namespace.as_str(), p.name.as_str())) {
            events.push(whole(ChangeKind::Removed, p));
        }
    }
    events
}

fn pod_changes(old: &PodView, new: &PodView) -> Vec<AssignmentChange> {
    let a = assignments(old);
    let b = assignments(new);
    let old_containers: BTreeSet<&str> = a.iter().map(|x| x.container.as_str()).collect();
    let new_containers: BTreeSet<&str> = b.iter().map(|x| x.container.as_str()).collect();
    let key = |x: &Assignment| (x.container.clone(), x.resource.clone());
    let old_map: HashMap<_, &Assignment> = a.iter().map(|x| (key(x), x)).collect();
    let new_map: HashMap<_, &Assignment> = b.iter().map(|x| (key(x), x)).collect();
    let mut changes = Vec::new();
    for x in &b {
        match old_map.get(&key(x)) {
            Some(o) if o.held == x.held => {}
            Some(o) => changes.push(AssignmentChange {
                change: ChangeKind::Changed,
                container: x.container.clone(),
                resource: x.resource.clone(),
                before: o.held.clone(),
                after: x.held.clone(),
            }),
            // "Holds nothing" of a container that was there before is not news:
            // the removals of what it held say it.
            None if x.resource.is_none() && old_containers.contains(x.container.as_str()) => {}
            None => changes.push(AssignmentChange {
                change: ChangeKind::Added,
                container: x.container.clone(),
                resource: x.resource.clone(),
                before: None,
                after: x.held.clone(),
            }),
        }
    }
    for x in &a {
        if new_map.contains_key(&key(x)) {
            continue;
        }
        if x.resource.is_none() && new_containers.contains(x.container.as_str()) {
            continue;
        }
        changes.push(AssignmentChange {
            change: ChangeKind::Removed,
            container: x.container.clone(),
            resource: x.resource.clone(),
            before: x.held.clone(),
            after: None,
        });
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podresources::view::{ContainerView, DevicesView};

    fn pod(name: &str, ids: &[&str], cpus: &[i64]) -> PodView {
        PodView {
            name: name.into(),
            namespace: "ns".into(),
            containers: vec![ContainerView {
                name: "c".into(),
                devices: ids
                    .iter()
                    .map(|id| DevicesView {
                        resource_name: "x/gpu".into(),
                        device_ids: vec![id.to_string()],
                        numa_nodes: Some(vec![0]),
                    })
                    .collect(),
                cpu_ids: cpus.to_vec(),
                memory: vec![],
                dynamic_resources: vec![],
            }],
            cpu_ids: vec![],
            memory: vec![],
        }
    }

    #[test]
    fn reordering_is_not_a_change() {
        let a = vec![pod("p", &["g0", "g1"], &[1, 0])];
        let b = vec![pod("p", &["g1", "g0"], &[0, 1])];
        assert!(diff(&a, &b).is_empty());
    }

    #[test]
    fn a_device_on_two_numa_nodes_is_one_device_however_it_is_encoded() {
        let dev = |id: &str, n: &[i64]| DevicesView {
            resource_name: "x/gpu".into(),
            device_ids: vec![id.into()],
            numa_nodes: Some(n.to_vec()),
        };
        let mut upstream = pod("p", &[], &[]);
        upstream.containers[0].devices = vec![dev("g0", &[0]), dev("g1", &[1]), dev("g0", &[1])];
        let a = assignments(&upstream);
        let Some(Held::Devices(groups)) = &a[0].held else { panic!("{a:?}") };
        assert_eq!(
            groups,
            &[
                DeviceGroup { numa_nodes: Some(vec![0, 1]), device_ids: vec!["g0".into()] },
                DeviceGroup { numa_nodes: Some(vec![1]), device_ids: vec!["g1".into()] },
            ]
        );
        // The same devices with g0 in one entry naming both nodes: no change.
        let mut merged = pod("p", &[], &[]);
        merged.containers[0].devices = vec![dev("g1", &[1]), dev("g0", &[1, 0])];
        assert!(diff(&[upstream], &[merged]).is_empty());
    }

    #[test]
    fn added_changed_removed() {
        let a = vec![pod("p", &["g0"], &[]), pod("q", &["g1"], &[])];
        let b = vec![pod("p", &["g0", "g2"], &[4]), pod("r", &[], &[])];
        let e = diff(&a, &b);
        let kinds: Vec<_> = e.iter().map(|e| (e.event, e.pod.as_str())).collect();
        assert_eq!(kinds, [(ChangeKind::Changed, "p"), (ChangeKind::Added, "r"), (ChangeKind::Removed, "q")]);
        let ch = &e[0].changes;
        assert_eq!(ch.len(), 2);
        assert_eq!((ch[0].change, ch[0].resource.as_deref()), (ChangeKind::Changed, Some("x/gpu")));
        assert_eq!((ch[1].change, ch[1].resource.as_deref()), (ChangeKind::Added, Some("cpu")));
        // A container that holds nothing still shows.
        assert_eq!(e[1].changes.len(), 1);
        assert_eq!((e[1].changes[0].container.as_str(), e[1].changes[0].resource.as_ref()), ("c", None));
    }

    #[test]
    fn losing_everything_reports_the_removals_only() {
        let a = vec![pod("p", &["g0"], &[])];
        let b = vec![pod("p", &[], &[])];
        let e = diff(&a, &b);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].changes.len(), 1);
        assert_eq!(e[0].changes[0].change, ChangeKind::Removed);
    }
}
