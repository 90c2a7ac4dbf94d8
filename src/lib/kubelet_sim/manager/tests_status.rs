//! What the manager shows without sockets: `kubelet-sim status`, PodResources
//! (docs/kubelet-versions.md §8), the checkpoint and the sim's allocations
//! file (§7), a restart's bookkeeping, pods known only from the checkpoint.
//! Every release unless a test names its releases. Written to pin what
//! mutation testing (docs/testing.md, "Mutation testing") found unpinned.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::tests_support::{GPU, GRACE, who};
use super::{Alloc, Effect, Manager, Pod, StatusPaths};
use crate::checkpoint::{DeviceIds, PodDevicesEntry};
use crate::kubelet_sim::events::Via;
use crate::kubelet_sim::pod::{ContainerKind, ContainerSpec, PodSpec};
use crate::kubelet_version::KubeletVersion;
use crate::model::{Counts, Device};
use crate::proto::deviceplugin::v1beta1 as dp;
use crate::proto::podresources::v1;

fn manager(t0: Instant) -> Manager {
    Manager::new(KubeletVersion::NEWEST, GRACE, 1024, Default::default(), t0)
}

fn dev(id: &str, health: &str, numa: Option<&[i64]>) -> Device {
    Device { id: id.into(), health: health.into(), numa_nodes: numa.map(<[i64]>::to_vec) }
}

fn plugin(m: &mut Manager, socket: &str, devices: Vec<Device>, now: Instant) -> u64 {
    let options = dp::DevicePluginOptions { pre_start_required: true, ..Default::default() };
    let id = m.register(&who(socket), options, now).expect("registered").id;
    m.snapshot(GPU, id, devices, 64, now);
    id
}

fn paths() -> StatusPaths {
    StatusPaths {
        dir: "/dp".into(),
        kubelet_socket: "/dp/kubelet.sock".into(),
        podresources_socket: None,
        control_socket: None,
    }
}

fn entry(uid: &str, container: &str, ids: &[&str]) -> PodDevicesEntry {
    let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
    PodDevicesEntry {
        pod_uid: uid.into(),
        container_name: container.into(),
        resource_name: GPU.into(),
        device_ids: DeviceIds::PerNuma(Some([(0, Some(ids))].into())),
        alloc_resp: None,
    }
}

/// A pod with an init container, a sidecar and a regular container, each
/// holding one device (`by_numa` as given), the regular one two CPUs.
fn three_container_pod(m: &mut Manager) {
    let mut spec = PodSpec::shorthand("p", "default", &[]);
    spec.uid = Some("uid-p".into());
    spec.containers =
        [("init", ContainerKind::Init), ("side", ContainerKind::Sidecar), ("main", ContainerKind::Regular)]
            .iter()
            .map(|(n, kind)| ContainerSpec {
                name: n.to_string(),
                kind: *kind,
                limits: [(GPU.to_string(), 1)].into(),
                compute: Default::default(),
                claims: Vec::new(),
            })
            .collect();
    let a = |id: &str, node: i64| Alloc {
        ids: vec![id.into()],
        by_numa: [(node, vec![id.into()])].into(),
        response: Default::default(),
    };
    let allocs = [("init", a("g0", 0)), ("side", a("g1", -1)), ("main", a("g2", 1))]
        .into_iter()
        .map(|(c, al)| (c.to_string(), BTreeMap::from([(GPU.to_string(), al)])))
        .collect();
    m.st.pods.push(Pod { spec, allocs, running: Default::default() });
    m.st.exclusive_cpus.insert("uid-p".into(), [("main".to_string(), vec![2, 3])].into());
}

/// `kubelet-sim status` of a serving resource, then during the grace
/// period (time left counts down), with devices only when asked for.
#[test]
fn status_shows_each_resource_and_the_grace_period_left() {
    let t0 = Instant::now();
    let mut m = manager(t0);
    let id = plugin(&mut m, "a.sock", vec![dev("g0", "Healthy", None), dev("g1", "Unhealthy", None)], t0);
    m.st.pods.push(Pod {
        spec: PodSpec { uid: Some("u".into()), ..PodSpec::shorthand("p", "ns", &[(GPU.into(), 1)]) },
        allocs: [(
            "c0".to_string(),
            [(
                GPU.to_string(),
                Alloc { ids: vec!["g0".into()], by_numa: BTreeMap::new(), response: Default::default() },
            )]
            .into(),
        )]
        .into(),
        running: Default::default(),
    });
    m.restarted();
    let s = m.status(&paths(), true, t0);
    assert_eq!((s.restarts, s.grace_period_ms, s.dir.as_str()), (1, 300_000, "/dp"));
    // The engine a report names when it comes from this sim (not a referee).
    assert_eq!((s.engine.as_str(), s.running), ("kubelet-sim", true));
    let r = s.resource(GPU).expect("listed");
    assert_eq!((r.state.as_str(), r.capacity, r.allocatable, r.in_use), ("serving", 2, 1, 1));
    assert_eq!(
        (r.socket.as_deref(), r.endpoint.as_deref(), r.via),
        (Some("/dp/a.sock"), Some("a.sock"), Some(Via::KubeletSock))
    );
    assert!(r.pre_start_required && !r.get_preferred_allocation_available);
    assert_eq!((r.snapshots, r.registrations, r.removal_in_ms, r.devices.len()), (1, 1, None, 2));
    assert_eq!(s.pods[0].containers[0].devices[GPU], ["g0"]);
    assert_eq!((s.pods[0].name.as_str(), s.pods[0].namespace.as_str(), s.pods[0].uid.as_str()), ("p", "ns", "u"));
    m.stream_ended(GPU, id, "EOF".into(), t0);
    let s = m.status(&paths(), false, t0 + Duration::from_secs(100));
    let r = s.resource(GPU).unwrap();
    assert_eq!((r.state.as_str(), r.removal_in_ms, r.devices.len()), ("stream-ended", Some(200_000), 0));
    assert_eq!(r.stream_end_reason.as_deref(), Some("EOF"));
    assert!(s.resource("example.com/none").is_none());
}

/// The state words of `status`: `registered` before the first snapshot,
/// `stopped` when the connections dropped, `removed` after the grace period.
#[test]
fn state_words_follow_the_endpoint() {
    let t0 = Instant::now();
    let mut m = manager(t0);
    m.register(&who("a.sock"), Default::default(), t0).unwrap();
    assert_eq!(m.st.resources[GPU].state_word(), "registered");
    assert_eq!(m.drop_connections().len(), 1);
    assert_eq!(m.st.resources[GPU].state_word(), "stopped");
    m.st.resources.get_mut(GPU).unwrap().removed = true;
    assert_eq!(m.st.resources[GPU].state_word(), "removed");
    assert_eq!(m.st.resources[GPU].counts(), Counts::default());
}

/// Pods known only from the checkpoint, grouped by UID then container, in
/// checkpoint order; their devices are in use.
#[test]
fn restored_pods_are_grouped_by_uid_and_container() {
    let t0 = Instant::now();
    let mut m = manager(t0);
    m.st.foreign_entries = vec![
        entry("u1", "a", &["g0"]),
        entry("u2", "a", &["g1"]),
        entry("u1", "b", &["g2"]),
        entry("u1", "a", &["g3"]),
    ];
    let s = m.status(&paths(), false, t0);
    // One line per pod: `UID container=IDs ...`.
    let view: Vec<String> = s
        .restored_pods
        .iter()
        .map(|p| {
            let containers: Vec<String> =
                p.containers.iter().map(|c| format!("{}={}", c.name, c.devices[GPU].join(","))).collect();
            format!("{} {}", p.uid, containers.join(" "))
        })
        .collect();
    assert_eq!(view, ["u1 a=g0,g3 b=g2", "u2 a=g1"]);
    assert_eq!(m.st.in_use(GPU).len(), 4);
    assert!(m.st.any_allocated(GPU) && !m.st.any_allocated("example.com/other"));
}

/// A pod known only from the checkpoint is released by UID: its devices
/// per resource are freed once each; an admitted pod's name or an unknown
/// UID frees nothing.
#[test]
fn releasing_a_restored_pod_frees_its_devices() {
    let t0 = Instant::now();
    let mut m = manager(t0);
    three_container_pod(&mut m);
    let mut nic = entry("u1", "b", &["n0"]);
    nic.resource_name = "example.com/nic".into();
    m.st.foreign_entries =
        vec![entry("u1", "a", &["g0", "g1"]), entry("u2", "a", &["g5"]), entry("u1", "b", &["g1"]), nic];
    assert_eq!(m.release_restored("default", "nope"), None);
    assert_eq!(m.release_restored("default", "p"), None, "an admitted pod's name");
    let freed = m.release_restored("default", "u1").expect("released");
    assert_eq!(
        freed,
        BTreeMap::from([
            (GPU.to_string(), vec!["g0".to_string(), "g1".to_string()]),
            ("example.com/nic".to_string(), vec!["n0".to_string()])
        ])
    );
    assert_eq!(m.st.foreign_entries.len(), 1);
    assert_eq!(m.release_restored("default", "u1"), None, "released once");
}

/// Deleting an admitted pod frees its devices and exclusive CPUs; an
/// unknown pod lists the admitted ones.
#[test]
fn deleting_a_pod_frees_its_devices_and_cpus() {
    let mut m = manager(Instant::now());
    three_container_pod(&mut m);
    assert_eq!(m.delete_pod("default", "q").unwrap_err(), ["default/p"]);
    assert_eq!(m.delete_pod("other", "p").unwrap_err(), ["default/p"]);
    assert_eq!(m.pods_with_devices(), 1);
    let p = m.delete_pod("default", "p").expect("deleted");
    assert_eq!(p.uid(), "uid-p");
    assert!(m.st.exclusive_cpus.is_empty() && m.st.in_use(GPU).is_empty());
    assert_eq!(m.pods_with_devices(), 0);
}

/// docs/kubelet-versions.md §8: v1 `List` and `Get` (sidecars from 1.30,
/// before the regular containers), one device entry per (device, NUMA
/// node) with no topology for `-1`, the exclusive CPUs; v1alpha1 shows
/// regular containers only.
#[test]
fn podresources_show_devices_per_numa_node_and_cpus() {
    let mut m = manager(Instant::now());
    three_container_pod(&mut m);
    let list = m.podres_list();
    assert_eq!(list.len(), 1);
    let p = &list[0];
    assert_eq!((p.name.as_str(), p.namespace.as_str()), ("p", "default"));
    let names: Vec<&str> = p.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["side", "main"]);
    let main = &p.containers[1];
    assert_eq!(main.cpu_ids, [2, 3]);
    assert_eq!(main.devices.len(), 1);
    assert_eq!(main.devices[0].device_ids, ["g2"]);
    assert_eq!(main.devices[0].topology, Some(v1::TopologyInfo { nodes: vec![v1::NumaNode { id: 1 }] }));
    assert_eq!(p.containers[0].devices[0].topology, None, "-1: no topology");
    assert!(p.containers[0].cpu_ids.is_empty());
    assert_eq!(m.podres_get("p", "default").as_ref(), Some(p));
    assert_eq!(m.podres_get("p", "other"), None);
    let alpha = m.podres_list_regular();
    assert_eq!(alpha[0].containers.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["main"]);
    assert_eq!(alpha[0].containers[0].cpu_ids, [2, 3]);
    // 1.29: regular containers only in v1 too.
    let mut m = Manager::new(KubeletVersion::Release(29), GRACE, 1024, Default::default(), Instant::now());
    three_container_pod(&mut m);
    assert_eq!(m.podres_list()[0].containers.len(), 1);
}

/// `GetAllocatableResources`: healthy devices once each (the last entry of
/// a repeated ID wins), one entry per NUMA node, none for an empty list.
#[test]
fn allocatable_devices_list_healthy_devices_per_node() {
    let t0 = Instant::now();
    let mut m = manager(t0);
    let devices = vec![
        dev("a", "Healthy", Some(&[0])),
        dev("b", "Unhealthy", None),
        dev("c", "Healthy", None),
        dev("d", "Healthy", Some(&[0, 1])),
        dev("e", "Healthy", Some(&[])),
        dev("a", "Healthy", Some(&[1])),
    ];
    plugin(&mut m, "a.sock", devices, t0);
    let got: Vec<(String, Option<i64>)> = m
        .allocatable_devices()
        .into_iter()
        .map(|d| {
            assert_eq!(d.resource_name, GPU);
            (d.device_ids.concat(), d.topology.map(|t| t.nodes[0].id))
        })
        .collect();
    let want = [("a", Some(1)), ("c", None), ("d", Some(0)), ("d", Some(1))];
    assert_eq!(got, want.map(|(i, n)| (i.to_string(), n)));
}

/// The checkpoint written while the checkpoint file is read-only goes to
/// the sim's own allocations file, which keeps the sim's pods and the
/// restored entries of its own UIDs only.
#[test]
fn the_allocations_file_keeps_only_the_sims_own_pods() {
    let t0 = Instant::now();
    let mut m = manager(t0);
    three_container_pod(&mut m);
    m.st.foreign_entries = vec![entry("mine", "a", &["g7"]), entry("kubelet", "a", &["g8"])];
    m.set_journal_uids(["mine".to_string()].into());
    let uids = |cp: crate::checkpoint::Checkpoint| {
        cp.data.pod_device_entries.unwrap_or_default().into_iter().map(|e| e.pod_uid).collect::<Vec<_>>()
    };
    assert_eq!(uids(m.journal()), ["uid-p", "uid-p", "uid-p", "mine"]);
    assert_eq!(uids(m.checkpoint()), ["uid-p", "uid-p", "uid-p", "mine", "kubelet"]);
    assert!(!m.writes_checkpoint(), "nothing read yet");
    m.set_checkpoint_status(crate::kubelet_sim::outcome::CheckpointStatus { writes: true, ..Default::default() });
    assert!(m.writes_checkpoint());
    m.set_checkpoint_status(Default::default());
    assert!(!m.writes_checkpoint());
}

/// A restart's bookkeeping: the connections close (current and replaced
/// endpoints), the resources not removed are expected back, and a plugin
/// counts as returned only when it registered at or after the new socket.
#[test]
fn restart_expects_the_resources_back_and_sees_who_returned() {
    let t0 = Instant::now();
    let mut m = manager(t0);
    let old = plugin(&mut m, "a.sock", vec![dev("g0", "Healthy", None)], t0);
    let new = plugin(&mut m, "b.sock", vec![dev("g0", "Healthy", None)], t0);
    assert!(m.knows_endpoint(old) && m.knows_endpoint(new) && !m.knows_endpoint(new + 100));
    let closed: Vec<u64> =
        m.drop_connections().iter().filter_map(|e| if let Effect::Close(id) = e { Some(*id) } else { None }).collect();
    assert_eq!(closed, [new, old]);
    assert!(!m.knows_endpoint(old) && !m.knows_endpoint(new));
    m.st.resources.insert("example.com/gone".into(), super::state::Resource { removed: true, ..Default::default() });
    assert_eq!(m.expected_back(), [GPU]);
    let t1 = t0 + Duration::from_secs(5);
    m.socket_served(t1);
    assert_eq!(m.socket_created(), t1);
    assert_eq!(m.returned(GPU, t1).registered_at, None);
    let id = m.register(&who("a.sock"), Default::default(), t1).unwrap().id;
    let r = m.returned(GPU, t1);
    assert_eq!((r.registered_at, r.first_snapshot_at), (Some(t1), None));
    m.snapshot(GPU, id, vec![dev("g0", "Healthy", None)], 64, t1 + Duration::from_millis(3));
    let r = m.returned(GPU, t1);
    assert_eq!(
        (r.first_snapshot_at, r.counts),
        (Some(t1 + Duration::from_millis(3)), Counts { capacity: 1, allocatable: 1 })
    );
    assert_eq!(m.returned(GPU, t1 + Duration::from_secs(1)).registered_at, None, "registered before that");
    assert_eq!(m.returned("example.com/none", t1).counts, Counts::default());
}

/// A pod refused at its re-admission after a reboot stays in the pod
/// manager, phase Failed: 1.34's PodResources `Get` finds it without devices,
/// 1.35+ answer not found (scenario reboot-plugin-late, played against the referee).
#[test]
fn a_pod_refused_after_a_reboot_is_found_by_get_on_1_34_only() {
    for (minor, found) in [(34, true), (35, false), (37, false)] {
        let mut m = Manager::new(KubeletVersion::Release(minor), GRACE, 1024, Default::default(), Instant::now());
        three_container_pod(&mut m);
        let pods = m.take_pods();
        m.readmit_refused(&pods[0]);
        let got = m.podres_get("p", "default");
        assert_eq!(got.is_some(), found, "1.{minor}");
        if let Some(p) = got {
            assert!(p.containers.iter().all(|c| c.devices.is_empty()), "1.{minor}: no devices: {p:?}");
        }
        assert!(m.podres_list().is_empty(), "1.{minor}: List has only active pods");
    }
}
