//! The admission plans without sockets: the kubelet's `devicesToAllocate`
//! (pkg/kubelet/cm/devicemanager/manager.go), the PreStartContainer calls,
//! the predicate handler's unknown resources and a node reboot's
//! readmission, each as the manager plans it from the state. Every release
//! unless a test names its releases. Written to pin what mutation testing
//! (docs/testing.md, "Mutation testing") found unpinned.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Instant;

use super::tests_support::{GPU, GRACE, registrant as who};
use super::{Alloc, Manager, Pod};
use crate::kubelet_sim::pod::{ContainerKind, ContainerSpec, PodSpec};
use crate::kubelet_version::KubeletVersion;
use crate::model::Device;
use crate::proto::deviceplugin::v1beta1 as dp;
use crate::topology::Mask;

fn manager(t0: Instant) -> Manager {
    Manager::new(KubeletVersion::NEWEST, GRACE, 1024, Default::default(), t0)
}

fn dev(id: &str, numa: Option<&[i64]>) -> Device {
    Device { id: id.into(), health: "Healthy".into(), numa_nodes: numa.map(<[i64]>::to_vec) }
}

/// Registers `resource` with these options and sends `devices`; the endpoint ID.
fn plugin_with(m: &mut Manager, resource: &str, options: dp::DevicePluginOptions, devices: Vec<Device>) -> u64 {
    let now = Instant::now();
    let id = m.register(&who(resource, "a.sock"), options, now).expect("registered").id;
    m.snapshot(resource, id, devices, 64, now);
    id
}

fn plugin(m: &mut Manager, ids: &[&str]) -> u64 {
    plugin_with(m, GPU, dp::DevicePluginOptions::default(), ids.iter().map(|i| dev(i, None)).collect())
}

fn alloc(ids: &[&str]) -> Alloc {
    let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
    Alloc { by_numa: [(-1, ids.clone())].into(), ids, response: Default::default() }
}

fn container(name: &str, kind: ContainerKind, limits: &[(&str, u64)]) -> ContainerSpec {
    ContainerSpec {
        name: name.into(),
        kind,
        limits: limits.iter().map(|(r, n)| (r.to_string(), *n)).collect(),
        compute: Default::default(),
        claims: Vec::new(),
    }
}

/// A pod `name` whose one regular container `c0` holds `ids` of GPU.
fn pod_holding(name: &str, ids: &[&str]) -> Pod {
    let mut spec = PodSpec::shorthand(name, "default", &[(GPU.into(), ids.len() as u64)]);
    spec.uid = Some(format!("uid-{name}"));
    let allocs =
        if ids.is_empty() { BTreeMap::new() } else { [("c0".into(), [(GPU.into(), alloc(ids))].into())].into() };
    Pod { spec, allocs, running: Default::default() }
}

fn empty_pod() -> Pod {
    pod_holding("new", &[])
}

fn plan(m: &Manager, pod: &Pod, required: u64, reusable: &[&str]) -> Result<Option<super::AllocationPlan>, String> {
    let reusable: BTreeSet<String> = reusable.iter().map(|s| s.to_string()).collect();
    m.plan_allocation(pod, GPU, required, &reusable, None).map_err(|r| format!("{}: {}", r.reason, r.message))
}

/// `devicesToAllocate`: a resource no plugin registered and no pod holds is
/// not the device manager's (the predicate handler judges it).
#[test]
fn plan_skips_a_resource_the_device_manager_does_not_know() {
    let m = manager(Instant::now());
    assert!(plan(&m, &empty_pod(), 1, &[]).unwrap().is_none());
}

/// `devicesToAllocate`: devices still held by a pod of a resource whose
/// plugin is gone: `cannot allocate unregistered device`.
#[test]
fn plan_refuses_an_unregistered_resource_that_pods_hold() {
    let mut m = manager(Instant::now());
    m.st.pods.push(pod_holding("old", &["g0"]));
    let e = plan(&m, &empty_pod(), 1, &[]).unwrap_err();
    assert_eq!(
        e,
        "UnexpectedAdmissionError: Allocate failed due to cannot allocate unregistered device example.com/gpu, which is unexpected"
    );
    // The same when only the pod being admitted holds it (an earlier container).
    let m = manager(Instant::now());
    assert!(plan(&m, &pod_holding("new", &["g0"]), 1, &[]).unwrap_err().contains("unregistered device"));
    // A bare Register has no device sets yet (docs/kubelet-versions.md §5).
    let mut m = manager(Instant::now());
    m.register(&who(GPU, "a.sock"), Default::default(), Instant::now()).unwrap();
    m.st.pods.push(pod_holding("old", &["g0"]));
    assert!(plan(&m, &empty_pod(), 1, &[]).unwrap_err().contains("unregistered device"));
}

/// `devicesToAllocate`: no healthy device, even for a request of 0, and
/// after a stream end every device counts as unhealthy.
#[test]
fn plan_refuses_when_no_device_is_healthy() {
    let t0 = Instant::now();
    let mut m = manager(t0);
    let id = plugin(&mut m, &["g0", "g1"]);
    m.stream_ended(GPU, id, "EOF".into(), t0);
    let e = plan(&m, &empty_pod(), 0, &[]).unwrap_err();
    assert!(
        e.ends_with(
            "no healthy devices present; cannot allocate unhealthy devices example.com/gpu, which is unexpected"
        ),
        "{e}"
    );
    assert!(m.endpoint_stopped(GPU), "Allocate would find the endpoint stopped");
}

/// `devicesToAllocate`: a request of 0 takes nothing; a request beyond the
/// free devices names the numbers (`Requested: 3, Available: 1`): devices
/// of other pods and of the pod's own earlier containers are not free.
#[test]
fn plan_counts_only_free_devices() {
    let mut m = manager(Instant::now());
    plugin(&mut m, &["g0", "g1", "g2", "g3"]);
    assert!(plan(&m, &empty_pod(), 0, &[]).unwrap().is_none());
    m.st.pods.push(pod_holding("old", &["g0", "g1"]));
    let pod = pod_holding("new", &["g2"]);
    let e = plan(&m, &pod, 3, &[]).unwrap_err();
    assert!(
        e.contains("requested number of devices unavailable for example.com/gpu. Requested: 3, Available: 1"),
        "{e}"
    );
    let p = plan(&m, &pod, 1, &[]).unwrap().expect("a plan");
    assert_eq!(p.take.fallback, ["g3"]);
    assert!(!m.endpoint_stopped(GPU));
}

/// `devicesToAllocate`: a repeated device ID is one device
/// (docs/protocol.md §3.4: `allDevices` is a map by ID).
#[test]
fn plan_counts_a_repeated_device_id_once() {
    let mut m = manager(Instant::now());
    plugin_with(&mut m, GPU, Default::default(), vec![dev("g0", None), dev("g0", None)]);
    let e = plan(&m, &empty_pod(), 2, &[]).unwrap_err();
    assert!(e.contains("Requested: 2, Available: 1"), "{e}");
}

/// `devicesToAllocate`: init containers' devices are reused first; only the
/// rest is taken from the free devices, and when reuse covers the request
/// no free device is looked at (none is needed).
#[test]
fn plan_reuses_init_container_devices_first() {
    let mut m = manager(Instant::now());
    plugin(&mut m, &["g0", "g1", "g2"]);
    let p = plan(&m, &empty_pod(), 2, &["g1"]).unwrap().expect("a plan");
    assert_eq!(p.reused, ["g1"]);
    assert_eq!(p.take.taken, ["g1"], "the reused device first, then the preferred call");
    let ask = p.take.ask.expect("GetPreferredAllocation's request");
    assert_eq!((ask.must_include, ask.size), (vec!["g1".to_string()], 2));
    assert_eq!(ask.available, ["g1", "g0", "g2"]);
    assert_eq!(p.take.answer_from, ["g0", "g2"]);
    // Everything reused: nothing free needed, even with every device held.
    m.st.pods.push(pod_holding("old", &["g0", "g2"]));
    let p = plan(&m, &empty_pod(), 1, &["g1", "g0"]).unwrap().expect("a plan");
    assert_eq!((p.reused, p.take.taken), (vec!["g0".to_string()], vec!["g0".to_string()]));
}

/// The endpoints a plan calls: Allocate on the current endpoint, and
/// GetPreferredAllocation only when the plugin's options offer it.
#[test]
fn plan_calls_get_preferred_allocation_only_when_offered() {
    let mut m = manager(Instant::now());
    let id = plugin(&mut m, &["g0", "g1"]);
    let p = plan(&m, &empty_pod(), 1, &[]).unwrap().unwrap();
    assert_eq!((p.preferred, p.endpoint), (None, Some(id)));
    let mut m = manager(Instant::now());
    let options = dp::DevicePluginOptions { get_preferred_allocation_available: true, ..Default::default() };
    let id = plugin_with(&mut m, GPU, options, vec![dev("g0", None), dev("g1", None)]);
    let p = plan(&m, &empty_pod(), 1, &[]).unwrap().unwrap();
    assert_eq!((p.preferred, p.endpoint), (Some(id), Some(id)));
}

/// docs/topology.md §3: the stored hint splits the free devices; without a
/// hint, or when no device of the resource reports a NUMA node, every free
/// device is unaligned-free (`no_affinity`).
#[test]
fn plan_splits_free_devices_by_the_stored_hint() {
    let mut m = manager(Instant::now());
    let devices = vec![dev("a0", Some(&[0])), dev("b1", Some(&[1])), dev("c1", Some(&[1]))];
    plugin_with(&mut m, GPU, Default::default(), devices);
    let hint = Mask::of(&[1]);
    let none = BTreeSet::new();
    let p = m.plan_allocation(&empty_pod(), GPU, 2, &none, hint).unwrap().unwrap();
    assert_eq!(p.take.taken, ["b1", "c1"], "both devices of node 1");
    let p = m.plan_allocation(&empty_pod(), GPU, 1, &none, hint).unwrap().unwrap();
    assert_eq!(p.take.answer_from, ["b1", "c1"], "one of node 1's, as the plugin prefers");
    let p = m.plan_allocation(&empty_pod(), GPU, 2, &none, None).unwrap().unwrap();
    assert!(p.take.taken.is_empty() && p.take.fallback == ["a0", "b1", "c1"], "{:?}", p.take);
    // No device reports topology: the hint does not split.
    let mut m = manager(Instant::now());
    plugin_with(&mut m, GPU, Default::default(), vec![dev("x", None), dev("y", Some(&[]))]);
    let p = m.plan_allocation(&empty_pod(), GPU, 2, &none, hint).unwrap().unwrap();
    assert!(p.take.taken.is_empty() && p.take.fallback == ["x", "y"], "{:?}", p.take);
}

/// Where the devices a container got are (`-1`: no topology; a device on
/// two nodes is under each), from the current device list.
#[test]
fn numa_of_maps_devices_to_their_nodes() {
    let mut m = manager(Instant::now());
    plugin_with(&mut m, GPU, Default::default(), vec![dev("a", Some(&[0, 1])), dev("b", None), dev("c", Some(&[1]))]);
    let ids: Vec<String> = ["a", "b", "c", "gone"].iter().map(|s| s.to_string()).collect();
    let map = m.numa_of(GPU, &ids);
    assert_eq!(
        map,
        BTreeMap::from([
            (-1, vec!["b".into(), "gone".into()]),
            (0, vec!["a".into()]),
            (1, vec!["a".into(), "c".into()])
        ])
    );
    assert_eq!(m.numa_of("example.com/none", &ids[..1])[&-1], ["a"]);
}

/// `removeMissingExtendedResources` and the predicate handler: of the
/// extended resources the device manager skipped, those node status lists
/// (capacity 0) reject the pod, the others are stripped; a limit of 0, a
/// known resource and one a pod still holds are not in either list.
#[test]
fn unknown_resources_are_listed_or_stripped() {
    let t0 = Instant::now();
    let mut m = manager(t0);
    plugin(&mut m, &["g0"]);
    let ended = plugin_with(&mut m, "example.com/ended", Default::default(), vec![dev("e0", None)]);
    m.stream_ended("example.com/ended", ended, "EOF".into(), t0);
    let generation = m.st.resources["example.com/ended"].generation;
    m.grace_expired("example.com/ended", generation, t0 + GRACE);
    m.register(&who("example.com/bare", "b.sock"), Default::default(), t0).unwrap();
    let mut held = pod_holding("old", &[]);
    held.allocs.insert("c0".into(), [("example.com/held".to_string(), alloc(&["h0"]))].into());
    m.st.pods.push(held);
    let c = container(
        "c",
        ContainerKind::Regular,
        &[
            (GPU, 1),
            ("example.com/ended", 1),
            ("example.com/bare", 1),
            ("example.com/held", 1),
            ("example.com/zero", 0),
            ("example.com/nothing", 2),
        ],
    );
    let (listed, stripped) = m.unknown_resources(&[c]);
    assert_eq!(listed, ["example.com/ended"]);
    assert_eq!(stripped, ["example.com/bare", "example.com/nothing"]);
}

/// Every release: PreStartContainer is called, after admission, per
/// container and resource with devices, only for plugins that require it;
/// a resource with no endpoint is a call with none (the error comes then).
#[test]
fn pre_start_calls_only_plugins_that_require_it() {
    let mut m = manager(Instant::now());
    let req = dp::DevicePluginOptions { pre_start_required: true, ..Default::default() };
    let id = plugin_with(&mut m, GPU, req, vec![dev("g0", None), dev("g1", None)]);
    plugin_with(&mut m, "example.com/nic", Default::default(), vec![dev("n0", None)]);
    let mut pod = pod_holding("p", &["g0"]);
    pod.spec.containers[0].limits.insert("example.com/nic".into(), 1);
    pod.spec.containers[0].limits.insert("example.com/gone".into(), 1);
    pod.spec.containers.push(container("c1", ContainerKind::Regular, &[(GPU, 1)]));
    let by_res = pod.allocs.get_mut("c0").unwrap();
    by_res.insert("example.com/nic".into(), alloc(&["n0"]));
    by_res.insert("example.com/gone".into(), alloc(&["x0"]));
    let plan = m.pre_start_plan(&pod);
    let gpu_call = (GPU.to_string(), vec!["g0".to_string()], Some(id));
    let gone_call = ("example.com/gone".to_string(), vec!["x0".to_string()], None);
    assert_eq!(plan, [("c0".to_string(), vec![gone_call, gpu_call]), ("c1".to_string(), Vec::new())]);
}

/// docs/kubelet-versions.md §5 (every release): a container restart calls
/// PreStartContainer again: on a live endpoint that requires it; a stopped
/// endpoint fails with `endpoint ... has been stopped`, a removed resource
/// with `endpoint not found in cache`; a restored resource whose plugin is
/// not back has no options, so no call.
#[test]
fn restart_plan_follows_the_endpoint_state() {
    let t0 = Instant::now();
    let mut m = manager(t0);
    let req = dp::DevicePluginOptions { pre_start_required: true, ..Default::default() };
    let id = plugin_with(&mut m, GPU, req, vec![dev("g0", None)]);
    m.st.pods.push(pod_holding("p", &["g0"]));
    let call = |m: &Manager| m.restart_plan("default", "p", "c0").unwrap()[0].2.clone();
    assert_eq!(call(&m), Some(Ok(id)));
    assert_eq!(m.restart_plan("default", "p", "nope").unwrap_err(), Some(vec!["c0".to_string()]));
    assert_eq!(m.restart_plan("default", "q", "c0").unwrap_err(), None);
    assert_eq!(m.restart_plan("other", "p", "c0").unwrap_err(), None);
    m.stream_ended(GPU, id, "EOF".into(), t0);
    let e = call(&m).unwrap().unwrap_err();
    assert!(e.contains("endpoint /dp/a.sock has been stopped"), "{e}");
    let generation = m.st.resources[GPU].generation;
    m.grace_expired(GPU, generation, t0 + GRACE);
    let e = call(&m).unwrap().unwrap_err();
    assert_eq!(e, "endpoint not found in cache for a registered resource: example.com/gpu");
    // Restored from the checkpoint, plugin not back: no call.
    let mut cp2 = m.checkpoint();
    cp2.data.registered_devices.get_or_insert_default().insert(GPU.into(), Some(vec!["g0".into()]));
    m.restore(&cp2, t0);
    assert_eq!(call(&m), None);
    // A plugin that does not require it: no call.
    let mut m = manager(t0);
    plugin(&mut m, &["g0"]);
    m.st.pods.push(pod_holding("p", &["g0"]));
    assert_eq!(call(&m), None);
}

/// The pod being admitted is in every checkpoint write from its first
/// allocation, and out again when the admission fails.
#[test]
fn the_pod_being_admitted_is_checkpointed_until_it_fails() {
    let mut m = manager(Instant::now());
    plugin(&mut m, &["g0"]);
    let entries = |m: &Manager| m.checkpoint().data.pod_device_entries.map_or(0, |e| e.len());
    m.admitting(&pod_holding("p", &["g0"]));
    assert_eq!(entries(&m), 1);
    assert!(!m.is_admitted("default", "p"));
    m.admission_failed(&pod_holding("p", &["g0"]));
    assert_eq!(entries(&m), 0);
    let pod = pod_holding("p", &["g0"]);
    m.admitting(&pod);
    let outcome = crate::kubelet_sim::outcome::AdmitOutcome::pending(&pod.spec, "uid-p".into());
    m.admit(pod, &outcome);
    assert_eq!(entries(&m), 1, "admitted: in the checkpoint once");
    assert!(m.is_admitted("default", "p") && !m.is_admitted("other", "p"));
    assert_eq!(m.pods_with_devices(), 1);
}

/// docs/kubelet-versions.md §10 (node reboot, played against the referee):
/// a pod is admitted again on its kept devices only when each container's
/// resource is registered with healthy devices and all of its devices are
/// healthy; the error says which.
#[test]
fn readmission_after_a_reboot_needs_every_kept_device_healthy() {
    let t0 = Instant::now();
    let mut m = manager(t0);
    let pod = pod_holding("p", &["g0", "g1"]);
    assert_eq!(m.readmit_refusal(&pod).unwrap(), "cannot allocate unregistered device example.com/gpu");
    assert!(!m.asks_for_devices(&pod.spec), "no such resource yet");
    let id = plugin(&mut m, &["g0", "g1"]);
    assert!(m.asks_for_devices(&pod.spec));
    assert!(!m.asks_for_devices(&PodSpec::shorthand("z", "default", &[(GPU.into(), 0)])));
    assert_eq!(m.readmit_refusal(&pod), None);
    let mut sick = vec![dev("g0", None), dev("g1", None)];
    sick[1].health = "Unhealthy".into();
    m.snapshot(GPU, id, sick, 64, t0);
    assert_eq!(
        m.readmit_refusal(&pod).unwrap(),
        "previously allocated devices are no longer healthy; cannot allocate unhealthy devices example.com/gpu"
    );
    assert_eq!(m.readmit_refusal(&pod_holding("q", &["g0"])), None);
    m.stream_ended(GPU, id, "EOF".into(), t0);
    assert_eq!(
        m.readmit_refusal(&pod).unwrap(),
        "no healthy devices present; cannot allocate unhealthy devices example.com/gpu"
    );
    m.readmit_kept(pod);
    assert_eq!(m.pods().len(), 1);
    assert_eq!(m.take_pods().len(), 1);
    assert!(m.pods().is_empty());
}

/// docs/kubelet-versions.md §7 (every release): a resource restored from
/// the checkpoint has device sets (the kubelet's `readCheckpoint` fills
/// `healthyDevices` empty and `unhealthyDevices` with its IDs), so before
/// its plugin is back a pod gets `no healthy devices present`, not
/// `unregistered device`, and the next checkpoint still lists it.
#[test]
fn a_restored_resource_is_known_with_no_healthy_device() {
    let t0 = Instant::now();
    let mut m = manager(t0);
    plugin(&mut m, &["g0", "g1"]);
    let cp = m.checkpoint();
    m.drop_connections();
    m.restore(&cp, t0);
    let e = plan(&m, &empty_pod(), 1, &[]).unwrap_err();
    assert!(e.contains("no healthy devices present; cannot allocate unhealthy devices example.com/gpu"), "{e}");
    let registered = m.checkpoint().data.registered_devices.unwrap_or_default();
    assert_eq!(registered.get(GPU), Some(&Some(Vec::new())));
}

/// The device provider's hints per resource in a best-effort dry run of
/// `spec` (a two-node machine).
fn dry_run_device_hints(m: &Manager, spec: &PodSpec) -> Vec<(String, Vec<String>)> {
    let mut outcome = crate::kubelet_sim::outcome::AdmitOutcome::pending(spec, "uid".into());
    m.dry_run(spec, &mut outcome).expect("admitted");
    let report = outcome.topology.expect("a topology report");
    report.decisions[0]
        .hints
        .iter()
        .filter(|h| h.provider == "device")
        .map(|h| {
            let hints = h.hints.iter().flatten().map(|v| v.hint.clone()).collect();
            (h.resource.clone().unwrap_or_default(), hints)
        })
        .collect()
}

fn best_effort_manager() -> Manager {
    let topology = crate::topology::TopologyConfig {
        policy: crate::topology::Policy::BestEffort,
        ..crate::topology::TopologyConfig::default()
    };
    Manager::new(KubeletVersion::NEWEST, GRACE, 1024, topology, Instant::now())
}

/// docs/topology.md §1 (`GetTopologyHints`, every release): devices other
/// pods hold are not available, so only the node with a free device is
/// preferred; a resource no plugin registered gets no device hints at all.
#[test]
fn device_hints_count_free_devices_of_device_plugin_resources_only() {
    let mut m = best_effort_manager();
    plugin_with(&mut m, GPU, Default::default(), vec![dev("g0", Some(&[0])), dev("g1", Some(&[1]))]);
    m.st.pods.push(pod_holding("old", &["g0"]));
    let spec = PodSpec::shorthand("p", "default", &[(GPU.into(), 1), ("example.com/other".into(), 1)]);
    let hints = dry_run_device_hints(&m, &spec);
    assert_eq!(hints, [(GPU.to_string(), vec!["{10 true}".to_string(), "{11 false}".to_string()])]);
}

/// docs/kubelet-versions.md §2 (1.26-1.36): the stream end of a plugin
/// whose client a failed Register dropped names its socket and the
/// unchanged counts; a stream the manager does not know changes nothing.
#[test]
fn an_untracked_stream_end_names_its_socket_and_counts_1_26_to_1_36() {
    let t0 = Instant::now();
    let mut m = Manager::new(KubeletVersion::Release(36), GRACE, 1024, Default::default(), t0);
    let id = plugin(&mut m, &["g0", "g1"]);
    m.register_failed(GPU, &PathBuf::from("/dp/other.sock"));
    assert!(m.stream_ended(GPU, id + 100, "EOF".into(), t0).is_empty());
    let fx = m.stream_ended(GPU, id, "EOF".into(), t0);
    let [super::Effect::Emit(kind)] = fx.as_slice() else { panic!("{fx:?}") };
    let event = serde_json::to_value(kind).unwrap();
    assert_eq!(event["event"], "stream_ended_untracked");
    assert_eq!(event["socket"], "/dp/a.sock");
    assert_eq!((event["capacity"].as_u64(), event["allocatable"].as_u64()), (Some(2), Some(2)));
    assert!(!m.st.resources[GPU].endpoint.as_ref().unwrap().streaming, "its stream is done");
}
