//! The Topology Manager and static CPU manager at admission, without
//! sockets, in dry runs (`kubelet-sim admit --dry-run` makes the same
//! choices as an admission): exclusive CPUs outside the reserved and taken
//! ones, init containers' CPUs and devices reused, the pod judged once in
//! scope `pod` (docs/topology.md §1-§4; every release). Written to pin what
//! mutation testing (docs/testing.md, "Mutation testing") found unpinned.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::{Manager, Registrant};
use crate::kubelet_sim::events::Via;
use crate::kubelet_sim::outcome::AdmitOutcome;
use crate::kubelet_sim::pod::{ContainerKind, ContainerSpec, PodSpec};
use crate::kubelet_version::KubeletVersion;
use crate::model::Device;
use crate::topology::{Compute, CpuPolicy, Policy, Scope, TopologyConfig};

const GPU: &str = "example.com/gpu";

fn config(cpu_policy: CpuPolicy, scope: Scope) -> TopologyConfig {
    TopologyConfig {
        policy: Policy::BestEffort,
        scope,
        cpu_policy,
        reserved_cpus: [0].into(),
        ..TopologyConfig::default()
    }
}

fn manager(config: TopologyConfig) -> Manager {
    let mut m = Manager::new(KubeletVersion::NEWEST, Duration::from_secs(300), 1024, config, Instant::now());
    let reg = Registrant {
        resource: GPU.into(),
        endpoint: "a.sock".into(),
        socket: PathBuf::from("/dp/a.sock"),
        via: Via::KubeletSock,
        version: "v1beta1".into(),
    };
    let id = m.register(&reg, Default::default(), Instant::now()).unwrap().id;
    let dev = |id: &str| Device { id: id.into(), health: "Healthy".into(), numa_nodes: Some(vec![0]) };
    m.snapshot(GPU, id, vec![dev("g0"), dev("g1")], 64, Instant::now());
    m
}

/// A Guaranteed container with `cpus` whole CPUs (0: no CPU or memory asked) and `gpus` devices.
fn container(name: &str, kind: ContainerKind, cpus: u64, gpus: u64) -> ContainerSpec {
    let compute = if cpus == 0 {
        Compute::default()
    } else {
        Compute {
            cpu_request_millis: Some(cpus * 1000),
            cpu_limit_millis: Some(cpus * 1000),
            memory_request: Some(1 << 30),
            memory_limit: Some(1 << 30),
        }
    };
    let limits = if gpus == 0 { BTreeMap::new() } else { [(GPU.to_string(), gpus)].into() };
    ContainerSpec { name: name.into(), kind, limits, compute, claims: Vec::new() }
}

fn pod(containers: Vec<ContainerSpec>) -> PodSpec {
    PodSpec { uid: Some("uid-p".into()), containers, ..PodSpec::shorthand("p", "default", &[]) }
}

fn dry_run(m: &Manager, spec: &PodSpec) -> AdmitOutcome {
    let mut outcome = AdmitOutcome::pending(spec, "uid-p".into());
    m.dry_run(spec, &mut outcome).expect("admitted");
    outcome
}

fn cpus(outcome: &AdmitOutcome) -> BTreeMap<String, Vec<u32>> {
    outcome.topology.as_ref().expect("a topology report").cpus.clone()
}

/// docs/topology.md §4 (static CPU manager): a Guaranteed container gets
/// whole CPUs from neither the reserved ones nor those of other pods or of
/// the pod's earlier containers; the CPU provider's hints ask for them, and
/// the admitted pod keeps them (PodResources lists them).
#[test]
fn exclusive_cpus_avoid_reserved_taken_and_earlier_ones() {
    let mut m = manager(config(CpuPolicy::Static, Scope::Container));
    m.st.exclusive_cpus.insert("uid-old".into(), [("c".to_string(), vec![1, 2])].into());
    let spec = pod(vec![container("a", ContainerKind::Regular, 2, 0), container("b", ContainerKind::Regular, 2, 0)]);
    let outcome = dry_run(&m, &spec);
    assert_eq!(cpus(&outcome), BTreeMap::from([("a".to_string(), vec![3, 4]), ("b".to_string(), vec![5, 6])]));
    let report = outcome.topology.as_ref().unwrap();
    let cpu_view = report.decisions[0].hints.iter().find(|h| h.provider == "cpu").unwrap();
    assert_eq!((cpu_view.resource.as_deref(), cpu_view.request), (Some("cpu"), 2));
    assert!(report.placements.iter().any(|p| p.container == "a" && p.resource == "cpu"));
    m.admit(super::Pod { spec, allocs: BTreeMap::new(), running: Default::default() }, &outcome);
    assert_eq!(m.podres_list()[0].containers[1].cpu_ids, [5, 6]);
}

/// docs/topology.md §4: a plain init container's CPUs are reused by the
/// container after it.
#[test]
fn init_container_cpus_are_reused() {
    let m = manager(config(CpuPolicy::Static, Scope::Container));
    let spec = pod(vec![container("init", ContainerKind::Init, 2, 0), container("main", ContainerKind::Regular, 2, 0)]);
    let got = cpus(&dry_run(&m, &spec));
    assert_eq!(got["init"], got["main"]);
}

/// No exclusive CPUs without the static policy, nor for a pod that is not
/// Guaranteed; the CPU provider then has no preference; an admitted pod
/// without exclusive CPUs records none.
#[test]
fn no_exclusive_cpus_without_static_policy_or_guaranteed_pod() {
    for (policy, n) in [(CpuPolicy::None, 2), (CpuPolicy::Static, 0)] {
        let mut m = manager(config(policy, Scope::Container));
        let spec = pod(vec![container("a", ContainerKind::Regular, n, 1)]);
        let outcome = dry_run(&m, &spec);
        assert!(cpus(&outcome).is_empty(), "{policy:?} {n}");
        let report = outcome.topology.as_ref().unwrap();
        let cpu_view = report.decisions[0].hints.iter().find(|h| h.provider == "cpu").unwrap();
        assert_eq!(cpu_view.resource, None, "{policy:?} {n}: no preference");
        m.admit(super::Pod { spec, allocs: BTreeMap::new(), running: Default::default() }, &outcome);
        assert!(m.st.exclusive_cpus.is_empty());
    }
}

/// docs/topology.md §2: scope `pod` judges the pod once (no container
/// named); scope `container` judges each container.
#[test]
fn pod_scope_judges_once_container_scope_per_container() {
    let spec = pod(vec![container("a", ContainerKind::Regular, 0, 1), container("b", ContainerKind::Regular, 0, 1)]);
    let decisions = |scope| {
        let outcome = dry_run(&manager(config(CpuPolicy::None, scope)), &spec);
        outcome.topology.unwrap().decisions.into_iter().map(|d| d.container).collect::<Vec<_>>()
    };
    assert_eq!(decisions(Scope::Pod), [None]);
    assert_eq!(decisions(Scope::Container), [Some("a".to_string()), Some("b".to_string())]);
}

/// `devicesToAllocate` in a dry run: an init container's device is reused
/// by the next container; two regular containers get different devices.
#[test]
fn dry_run_reuses_init_devices_and_keeps_regular_ones_apart() {
    let m = manager(config(CpuPolicy::None, Scope::Container));
    let devices = |outcome: &AdmitOutcome| -> Vec<Vec<String>> {
        outcome.containers.iter().map(|c| c.resources.iter().flat_map(|r| r.devices.clone()).collect()).collect()
    };
    let spec = pod(vec![container("init", ContainerKind::Init, 0, 1), container("main", ContainerKind::Regular, 0, 1)]);
    let outcome = dry_run(&m, &spec);
    assert_eq!(devices(&outcome), [vec!["g0".to_string()], vec!["g0".to_string()]]);
    assert_eq!(outcome.containers[1].resources[0].reused, ["g0"]);
    let spec = pod(vec![container("a", ContainerKind::Regular, 0, 1), container("b", ContainerKind::Regular, 0, 1)]);
    let outcome = dry_run(&m, &spec);
    assert_eq!(devices(&outcome), [vec!["g0".to_string()], vec!["g1".to_string()]]);
    assert!(!m.is_admitted("default", "p"), "a dry run keeps nothing");
}

fn dry_run_err(m: &Manager, spec: &PodSpec) -> String {
    let mut outcome = AdmitOutcome::pending(spec, "uid-p".into());
    let e = m.dry_run(spec, &mut outcome).expect_err("rejected");
    format!("{}: {}", e.reason, e.message)
}

/// `kubelet-sim admit --dry-run` refuses as an admission would
/// (`devicesToAllocate`): too few free devices (other pods' are not free),
/// no healthy device, an unregistered resource pods still hold; a resource
/// that is not the device manager's, or a limit of 0, takes nothing.
#[test]
fn dry_run_refuses_as_an_admission_would() {
    let t0 = Instant::now();
    let mut m = manager(config(CpuPolicy::None, Scope::Container));
    let one = |name: &str, n: u64| {
        pod(vec![ContainerSpec {
            limits: [(name.to_string(), n)].into(),
            ..container("a", ContainerKind::Regular, 0, 0)
        }])
    };
    assert!(dry_run_err(&m, &one(GPU, 3)).contains("Requested: 3, Available: 2"));
    let outcome = dry_run(&m, &one("example.com/other", 1));
    assert!(outcome.containers[0].resources.is_empty());
    assert!(dry_run(&m, &one(GPU, 0)).containers[0].resources.is_empty());
    let mut held = pod(vec![container("c", ContainerKind::Regular, 0, 1)]);
    held.uid = Some("uid-old".into());
    let alloc =
        super::Alloc { ids: vec!["g0".into()], by_numa: [(0, vec!["g0".into()])].into(), response: Default::default() };
    m.st.pods.push(super::Pod {
        spec: held,
        allocs: [("c".to_string(), [(GPU.to_string(), alloc)].into())].into(),
        running: Default::default(),
    });
    let outcome = dry_run(&m, &one(GPU, 1));
    assert_eq!(outcome.containers[0].resources[0].devices, ["g1"], "g0 is another pod's");
    assert!(dry_run_err(&m, &one(GPU, 2)).contains("Requested: 2, Available: 1"));
    let id = m.st.resources[GPU].endpoint.as_ref().unwrap().id;
    m.stream_ended(GPU, id, "EOF".into(), t0);
    assert!(dry_run_err(&m, &one(GPU, 1)).contains("no healthy devices present"));
    let generation = m.st.resources[GPU].generation;
    m.grace_expired(GPU, generation, t0 + Duration::from_secs(300));
    assert!(dry_run_err(&m, &one(GPU, 1)).contains("cannot allocate unregistered device example.com/gpu"));
}

/// docs/topology.md §3: the stored hint picks the device on its node even
/// when the plugin lists another node's device first.
#[test]
fn dry_run_takes_the_device_on_the_hints_node() {
    let mut m = manager(config(CpuPolicy::None, Scope::Container));
    let id = m.st.resources[GPU].endpoint.as_ref().unwrap().id;
    let dev = |id: &str, node: i64| Device { id: id.into(), health: "Healthy".into(), numa_nodes: Some(vec![node]) };
    m.snapshot(GPU, id, vec![dev("g1", 1), dev("g0", 0)], 64, Instant::now());
    let outcome = dry_run(&m, &pod(vec![container("a", ContainerKind::Regular, 0, 1)]));
    assert_eq!(outcome.topology.as_ref().unwrap().decisions[0].best.hint, "{01 true}");
    assert_eq!(outcome.containers[0].resources[0].devices, ["g0"]);
}
