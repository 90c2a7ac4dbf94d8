//! The manager's transitions without sockets or a runtime: one test per
//! rule of the release table (`kubelet_version`) that the manager plays,
//! named after the releases it holds for, plus the rules every release
//! shares. Time is a value here: a grace period passes by adding to it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::tests_support::{GPU, GRACE, who, words};
use super::{Effect, Manager};
use crate::kubelet_version::KubeletVersion;
use crate::model::{Counts, Device};
use crate::proto::deviceplugin::v1beta1 as dp;

fn manager(minor: u8, t0: Instant) -> Manager {
    Manager::new(KubeletVersion::Release(minor), GRACE, 1024, Default::default(), t0)
}

fn devices(n: usize) -> Vec<Device> {
    (0..n).map(|i| Device { id: format!("g{i}"), health: "Healthy".into(), numa_nodes: None }).collect()
}

/// Registers at `socket` and sends `n` healthy devices; the endpoint ID.
fn plugin(m: &mut Manager, socket: &str, n: usize, now: Instant) -> u64 {
    let id = m.register(&who(socket), dp::DevicePluginOptions::default(), now).expect("registered").id;
    m.snapshot(GPU, id, devices(n), 64, now);
    id
}

fn counts(m: &Manager) -> Counts {
    m.counts().get(GPU).copied().unwrap_or_default()
}

fn word(m: &Manager) -> &'static str {
    m.st.resources[GPU].state_word()
}

fn each(minors: std::ops::RangeInclusive<u8>) -> impl Iterator<Item = u8> {
    minors
}

/// docs/kubelet-versions.md §2, 1.37+ (PR #135437): a second Register at a
/// socket whose endpoint is live is refused with the kubelet's text, and the
/// failed connect drops the live client at that socket (it stays stored).
#[test]
fn register_same_live_socket_refused_from_1_37() {
    let t0 = Instant::now();
    let mut m = manager(37, t0);
    let first = plugin(&mut m, "a.sock", 2, t0);
    let err = m.register(&who("a.sock"), dp::DevicePluginOptions::default(), t0).unwrap_err();
    assert_eq!(err, "device plugin already connected: /dp/a.sock");
    assert_eq!(m.st.resources[GPU].endpoint.as_ref().map(|e| e.id), Some(first));
    assert_eq!(word(&m), "untracked", "its client was dropped by the failed connect");
    // Its stream end now disconnects nothing: health and capacity stay.
    let fx = m.stream_ended(GPU, first, "EOF".into(), t0);
    assert_eq!(words(&fx), ["stream_ended_untracked"]);
    assert_eq!(counts(&m), Counts { capacity: 2, allocatable: 2 });
}

/// docs/kubelet-versions.md §2, 1.26-1.36: the same Register is taken and
/// replaces the endpoint by name; the old connection keeps running.
#[test]
fn register_same_live_socket_replaces_by_name_1_26_to_1_36() {
    for minor in each(26..=36) {
        let t0 = Instant::now();
        let mut m = manager(minor, t0);
        let first = plugin(&mut m, "a.sock", 2, t0);
        let r = m.register(&who("a.sock"), dp::DevicePluginOptions::default(), t0).expect("1.{minor} takes it");
        assert!(r.replaced, "1.{minor}");
        assert!(r.effects.is_empty(), "1.{minor}: the old connection is not closed");
        assert_eq!(m.st.resources[GPU].superseded.iter().map(|e| e.id).collect::<Vec<_>>(), [first]);
    }
}

/// docs/kubelet-versions.md §2, 1.26-1.36 (runClient looks the client up by
/// name): the replaced plugin's stream end closes the new plugin's stream and
/// disconnects the resource, with a grace period.
#[test]
fn replaced_stream_end_disconnects_the_new_plugin_1_26_to_1_36() {
    for minor in each(26..=36) {
        let t0 = Instant::now();
        let mut m = manager(minor, t0);
        let old = plugin(&mut m, "a.sock", 2, t0);
        let new = plugin(&mut m, "b.sock", 2, t0);
        let fx = m.stream_ended(GPU, old, "EOF".into(), t0);
        assert_eq!(words(&fx), [format!("close:{old}"), format!("stop:{new}"), "stream_ended".into(), "grace".into()]);
        assert_eq!(counts(&m), Counts { capacity: 2, allocatable: 0 }, "1.{minor}");
        assert_eq!(word(&m), "stream-ended");
    }
}

/// 1.37+ (one client per name and socket): the replaced plugin's stream end
/// drops only the old client; the new plugin keeps serving.
#[test]
fn replaced_stream_end_drops_only_the_old_client_from_1_37() {
    let t0 = Instant::now();
    let mut m = manager(37, t0);
    let old = plugin(&mut m, "a.sock", 2, t0);
    let _new = plugin(&mut m, "b.sock", 2, t0);
    let fx = m.stream_ended(GPU, old, "EOF".into(), t0);
    assert_eq!(words(&fx), [format!("close:{old}")]);
    assert_eq!((word(&m), counts(&m)), ("serving", Counts { capacity: 2, allocatable: 2 }));
}

/// 1.37+ (PluginDisconnected with another endpoint stored): the current
/// plugin's stream end hands over to the replaced, still-live one; no grace.
#[test]
fn current_stream_end_fails_over_to_a_stored_endpoint_from_1_37() {
    let t0 = Instant::now();
    let mut m = manager(37, t0);
    let old = plugin(&mut m, "a.sock", 2, t0);
    let new = plugin(&mut m, "b.sock", 2, t0);
    let fx = m.stream_ended(GPU, new, "EOF".into(), t0);
    assert_eq!(words(&fx), [format!("close:{new}"), "stream_ended_failover".into()]);
    assert_eq!(m.st.resources[GPU].endpoint.as_ref().map(|e| e.id), Some(old));
    assert_eq!(counts(&m), Counts { capacity: 2, allocatable: 2 });
}

/// docs/kubelet-versions.md §3, 1.26-1.38: a stream end disconnects the
/// stored endpoint's client (runClient finds it), which closes its
/// connection: the shell then fails every call on it, an Allocate in flight
/// included. 1.26-1.36's untracked client (a later Register failed) is
/// never disconnected, so its connection stays open.
#[test]
fn a_stream_end_closes_the_stored_endpoints_connection_1_26_to_1_38() {
    for minor in each(26..=38) {
        let t0 = Instant::now();
        let mut m = manager(minor, t0);
        let id = plugin(&mut m, "a.sock", 3, t0);
        assert!(!m.stopped_endpoint(GPU, id), "1.{minor}");
        m.stream_ended(GPU, id, "EOF".into(), t0);
        assert!(m.stopped_endpoint(GPU, id) && !m.stopped_endpoint(GPU, id + 1), "1.{minor}");
    }
    for minor in each(26..=36) {
        let t0 = Instant::now();
        let mut m = manager(minor, t0);
        let live = plugin(&mut m, "a.sock", 3, t0);
        m.register_failed(GPU, &PathBuf::from("/dp/other.sock"));
        m.stream_ended(GPU, live, "EOF".into(), t0);
        assert!(!m.stopped_endpoint(GPU, live), "1.{minor}: untracked, never disconnected");
    }
}

/// docs/kubelet-versions.md §2, 1.26-1.36: a Register that fails its
/// dial-back while a plugin of the name is live leaves that plugin
/// untracked: its stream end keeps health and starts no grace period.
#[test]
fn failed_register_leaves_the_live_plugin_untracked_1_26_to_1_36() {
    for minor in each(26..=36) {
        let t0 = Instant::now();
        let mut m = manager(minor, t0);
        let live = plugin(&mut m, "a.sock", 3, t0);
        m.register_failed(GPU, &PathBuf::from("/dp/other.sock"));
        assert_eq!(word(&m), "untracked", "1.{minor}");
        let fx = m.stream_ended(GPU, live, "EOF".into(), t0);
        assert_eq!(words(&fx), ["stream_ended_untracked"], "1.{minor}");
        assert_eq!(counts(&m), Counts { capacity: 3, allocatable: 3 });
    }
}

/// 1.37+ (PR #135437): a failed Register drops only the clients at its own
/// socket; the live plugin elsewhere stays tracked and disconnects normally.
#[test]
fn failed_register_elsewhere_keeps_the_live_plugin_tracked_from_1_37() {
    let t0 = Instant::now();
    let mut m = manager(37, t0);
    let live = plugin(&mut m, "a.sock", 3, t0);
    m.register_failed(GPU, &PathBuf::from("/dp/other.sock"));
    assert_eq!(word(&m), "serving");
    let fx = m.stream_ended(GPU, live, "EOF".into(), t0);
    assert_eq!(words(&fx), ["stream_ended", "grace"]);
    assert_eq!(counts(&m), Counts { capacity: 3, allocatable: 0 });
}

/// docs/kubelet-versions.md §6, 1.26-1.36: DeRegisterPlugin finds the client
/// by name, so deleting a plugins_registry socket disconnects a same-named
/// plugin that registered through kubelet.sock.
#[test]
fn deregister_by_name_disconnects_another_socket_1_26_to_1_36() {
    for minor in each(26..=36) {
        let t0 = Instant::now();
        let mut m = manager(minor, t0);
        let id = plugin(&mut m, "a.sock", 1, t0);
        let fx = m.deregister(GPU, &PathBuf::from("/reg/x.sock"), &PathBuf::from("/reg/x.sock"), t0);
        assert_eq!(words(&fx), [format!("stop:{id}"), "stream_ended".into(), "grace".into()], "1.{minor}");
    }
}

/// 1.37+: DeRegisterPlugin matches the endpoint too; another socket's plugin stays.
#[test]
fn deregister_matches_the_endpoint_from_1_37() {
    let t0 = Instant::now();
    let mut m = manager(37, t0);
    plugin(&mut m, "a.sock", 1, t0);
    let fx = m.deregister(GPU, &PathBuf::from("/reg/x.sock"), &PathBuf::from("/reg/x.sock"), t0);
    assert!(fx.is_empty());
    assert_eq!(word(&m), "serving");
}

/// docs/kubelet-versions.md §3 (every release): after a stream end the
/// devices count as unhealthy; the grace period's end, not earlier, drops
/// capacity to 0 and writes the checkpoint; a Register meanwhile stops the timer.
#[test]
fn grace_expiry_removes_the_resource_only_after_the_period_every_release() {
    for minor in each(26..=37) {
        let t0 = Instant::now();
        let mut m = manager(minor, t0);
        let id = plugin(&mut m, "a.sock", 2, t0);
        let fx = m.stream_ended(GPU, id, "EOF".into(), t0);
        let Some(Effect::StartGrace { generation, .. }) = fx.last() else { panic!("no grace timer: {fx:?}") };
        let generation = *generation;
        assert_eq!(m.grace_deadline(GPU, generation), Some(t0 + GRACE));
        assert!(m.grace_expired(GPU, generation, t0 + GRACE - Duration::from_millis(1)).is_empty());
        let fx = m.grace_expired(GPU, generation, t0 + GRACE);
        assert_eq!(words(&fx), [format!("close:{id}"), "write".into(), "resource_removed".into()], "1.{minor}");
        assert_eq!((word(&m), counts(&m)), ("removed", Counts::default()));
        // A timer of a stop that a new Register ended does nothing.
        let id = plugin(&mut m, "a.sock", 2, t0);
        let fx = m.stream_ended(GPU, id, "EOF".into(), t0);
        let Some(Effect::StartGrace { generation, .. }) = fx.last() else { panic!() };
        let generation = *generation;
        plugin(&mut m, "a.sock", 2, t0);
        assert_eq!(m.grace_deadline(GPU, generation), None, "1.{minor}");
        assert!(m.grace_expired(GPU, generation, t0 + GRACE * 2).is_empty());
    }
}

/// A shorter grace period set while a timer runs moves its deadline.
#[test]
fn grace_deadline_follows_the_grace_period() {
    let t0 = Instant::now();
    let mut m = manager(37, t0);
    let id = plugin(&mut m, "a.sock", 1, t0);
    let fx = m.stream_ended(GPU, id, "EOF".into(), t0);
    let Some(Effect::StartGrace { generation, .. }) = fx.last() else { panic!() };
    m.set_grace_period(Duration::from_secs(1));
    assert_eq!(m.grace_deadline(GPU, *generation), Some(t0 + Duration::from_secs(1)));
}

/// docs/kubelet-versions.md §5 and §7 (every release): the checkpoint is
/// written after each ListAndWatch update, before anyone hears of it; a
/// bare Register creates no device sets.
#[test]
fn snapshot_writes_the_checkpoint_first_and_a_bare_register_has_no_sets() {
    let t0 = Instant::now();
    let mut m = manager(37, t0);
    let r = m.register(&who("a.sock"), dp::DevicePluginOptions::default(), t0).unwrap();
    assert_eq!(word(&m), "registered");
    assert!(m.checkpoint().data.registered_devices.unwrap().is_empty());
    let fx = m.snapshot(GPU, r.id, devices(2), 64, t0 + Duration::from_millis(5));
    assert_eq!(words(&fx), ["write", "snapshot"]);
    let mut sick = devices(2);
    sick[1].health = "Unhealthy".into();
    let fx = m.snapshot(GPU, r.id, sick, 64, t0);
    assert_eq!(words(&fx), ["write", "snapshot", "health_changed"]);
    assert_eq!(counts(&m), Counts { capacity: 2, allocatable: 1 });
    assert_eq!(m.returned(GPU, t0).first_snapshot_at, Some(t0 + Duration::from_millis(5)));
}

/// docs/kubelet-versions.md §7 (every release): a restored resource waits
/// at 0 for its plugin with the grace period running from the restore.
#[test]
fn restore_waits_at_zero_with_the_grace_period_running() {
    let t0 = Instant::now();
    let mut m = manager(37, t0);
    plugin(&mut m, "a.sock", 2, t0);
    let closed = m.drop_connections();
    assert_eq!(words(&closed).len(), 1);
    let cp = m.checkpoint();
    let t1 = t0 + Duration::from_secs(10);
    let restored = m.restore(&cp, t1);
    assert_eq!(restored.len(), 1);
    assert_eq!((word(&m), counts(&m)), ("awaiting-registration", Counts::default()));
    assert_eq!(m.grace_deadline(GPU, restored[0].1), Some(t1 + GRACE));
}

/// The sim's own limit (not the kubelet's): a new name over it is refused
/// and counted; a known name always registers.
#[test]
fn over_limit_refuses_new_names_only() {
    let t0 = Instant::now();
    let mut m = Manager::new(KubeletVersion::NEWEST, GRACE, 1, Default::default(), t0);
    plugin(&mut m, "a.sock", 1, t0);
    assert!(m.over_limit(GPU).is_none());
    let text = m.over_limit("example.com/other").expect("refused");
    assert!(text.contains("at most 1 distinct resource names"), "{text}");
    assert_eq!(m.st.refused_over_limit, 1);
}

/// docs/kubelet-versions.md §7 (every release): restoring a checkpoint gives
/// the admitted pods their devices back and keeps the entries of pods the
/// sim does not know (their devices stay in use).
#[test]
fn restore_gives_known_pods_their_devices_and_keeps_the_rest() {
    let t0 = Instant::now();
    let mut m = manager(37, t0);
    let mut spec = crate::kubelet_sim::pod::PodSpec::shorthand("p", "default", &[(GPU.into(), 1)]);
    spec.uid = Some("uid-1".into());
    let alloc = super::Alloc {
        ids: vec!["g0".into()],
        by_numa: std::collections::BTreeMap::from([(0, vec!["g0".to_string()])]),
        response: Default::default(),
    };
    let allocs = std::collections::BTreeMap::from([("c0".to_string(), [(GPU.to_string(), alloc.clone())].into())]);
    m.st.pods.push(super::Pod { spec, allocs, running: Default::default() });
    let mut cp = m.checkpoint();
    let mut foreign = cp.data.pod_device_entries.clone().unwrap()[0].clone();
    foreign.pod_uid = "other".into();
    cp.data.pod_device_entries.as_mut().unwrap().push(foreign);
    cp.data.registered_devices.get_or_insert_default().insert(GPU.into(), Some(vec!["g0".into()]));
    m.st.pods[0].allocs.clear();
    let restored = m.restore(&cp, t0);
    assert_eq!(restored.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), [GPU]);
    assert_eq!(m.st.pods[0].allocs["c0"][GPU].ids, alloc.ids);
    assert_eq!(m.st.foreign_entries.len(), 1);
    assert_eq!(m.st.in_use(GPU).len(), 1);
    assert_eq!(m.st.resources[GPU].counts(), Counts::default());
    assert!(m.st.resources[GPU].reported);
}

fn alloc_of(ids: &[&str]) -> super::Alloc {
    let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
    super::Alloc { by_numa: [(-1, ids.clone())].into(), ids, response: Default::default() }
}

/// The reuse pool after a container of `kind` held `g0`.
fn pool_after(minor: u8, kind: ContainerKind) -> Vec<String> {
    let m = manager(minor, Instant::now());
    let mine = std::collections::BTreeMap::from([(GPU.to_string(), alloc_of(&["g0"]))]);
    let mut reuse = std::collections::BTreeMap::new();
    m.update_reuse(kind, Some(&mine), &mut reuse);
    reuse.get(GPU).map(|s| s.iter().cloned().collect()).unwrap_or_default()
}

use crate::kubelet_sim::pod::{ContainerKind, ContainerSpec, PodSpec};

/// docs/kubelet-versions.md §5, up to 1.28: a sidecar's devices join the
/// reuse pool like a plain init container's.
#[test]
fn sidecar_devices_join_the_reuse_pool_1_26_to_1_28() {
    for minor in each(26..=28) {
        assert_eq!(pool_after(minor, ContainerKind::Sidecar), ["g0"], "1.{minor}");
        assert_eq!(pool_after(minor, ContainerKind::Init), ["g0"], "1.{minor}");
    }
}

/// 1.29+ (PR #120461): a sidecar's devices stay out of the reuse pool; a
/// plain init container's still join it, a regular container's never.
#[test]
fn sidecar_devices_stay_out_of_the_reuse_pool_from_1_29() {
    for minor in each(29..=37) {
        assert!(pool_after(minor, ContainerKind::Sidecar).is_empty(), "1.{minor}");
        assert_eq!(pool_after(minor, ContainerKind::Init), ["g0"], "1.{minor}");
        assert!(pool_after(minor, ContainerKind::Regular).is_empty(), "1.{minor}");
    }
}

/// docs/kubelet-versions.md §5: an Allocate answer with no container
/// response fails the admission; the text ends with the gogo dump up to
/// 1.33 and with nothing from 1.34.
#[test]
fn empty_allocate_answer_text_gogo_dump_up_to_1_33_empty_from_1_34() {
    let text =
        |minor: u8| manager(minor, Instant::now()).allocate_answer(&dp::AllocateResponse::default()).unwrap_err();
    for minor in each(26..=33) {
        let r = text(minor);
        assert_eq!(r.reason, "UnexpectedAdmissionError");
        assert!(
            r.message.contains(
                "allocation response &AllocateResponse{ContainerResponses:[]*ContainerAllocateResponse{},}, which"
            ),
            "1.{minor}: {}",
            r.message
        );
    }
    for minor in each(34..=37) {
        let r = text(minor);
        assert!(
            r.message.contains("no containers return in allocation response , which is unexpected"),
            "1.{minor}: {}",
            r.message
        );
    }
}

fn cdi_answer() -> dp::AllocateResponse {
    let c = dp::ContainerAllocateResponse {
        cdi_devices: vec![dp::CdiDevice { name: "vendor.com/gpu=0".into() }],
        ..Default::default()
    };
    dp::AllocateResponse { container_responses: vec![c] }
}

fn cdi_rules(minor: u8) -> (usize, Vec<String>) {
    let (first, warnings) = manager(minor, Instant::now()).allocate_answer(&cdi_answer()).unwrap();
    (first.cdi_devices.len(), warnings.into_iter().map(|w| w.rule).filter(|r| r.starts_with("cdi-")).collect())
}

/// docs/protocol.md §1.2, 1.26-1.27: `cdi_devices` is an unknown field, dropped with a warning.
#[test]
fn cdi_devices_dropped_1_26_to_1_27() {
    for minor in each(26..=27) {
        assert_eq!(cdi_rules(minor), (0, vec![super::CDI_DEVICES_UNKNOWN.to_string()]), "1.{minor}");
    }
}

/// 1.28 (PR #118254): kept in the answer, not passed to the runtime (gate off by default).
#[test]
fn cdi_devices_kept_but_gated_in_1_28() {
    assert_eq!(cdi_rules(28), (1, vec![super::CDI_DEVICES_GATED.to_string()]));
    let (_, warnings) = manager(28, Instant::now()).allocate_answer(&cdi_answer()).unwrap();
    let text = &warnings.iter().find(|w| w.rule == super::CDI_DEVICES_GATED).unwrap().evidence;
    assert!(text.contains("only with feature gate DevicePluginCDIDevices on"), "{text}");
    assert!(!text.contains("  "), "a run of spaces: {text:?}");
}

/// 1.29+: passed to the runtime, no warning.
#[test]
fn cdi_devices_passed_from_1_29() {
    for minor in each(29..=37) {
        assert_eq!(cdi_rules(minor), (1, Vec::new()), "1.{minor}");
    }
}

/// A pod with a sidecar and a regular container, each holding one device.
fn pod_with_sidecar(m: &mut Manager) {
    let mut spec = PodSpec::shorthand("p", "default", &[]);
    spec.uid = Some("uid-1".into());
    spec.containers = ["side", "main"]
        .iter()
        .zip([ContainerKind::Sidecar, ContainerKind::Regular])
        .map(|(n, kind)| ContainerSpec {
            name: n.to_string(),
            kind,
            limits: [(GPU.to_string(), 1)].into(),
            compute: Default::default(),
            claims: Vec::new(),
        })
        .collect();
    let allocs = [("side", "g0"), ("main", "g1")]
        .iter()
        .map(|(c, id)| (c.to_string(), std::collections::BTreeMap::from([(GPU.to_string(), alloc_of(&[id]))])))
        .collect();
    m.st.pods.push(super::Pod { spec, allocs, running: Default::default() });
}

fn listed_containers(minor: u8) -> Vec<String> {
    let mut m = manager(minor, Instant::now());
    pod_with_sidecar(&mut m);
    let list = m.podres_list();
    assert_eq!(m.podres_get("p", "default").as_ref(), list.first());
    list[0].containers.iter().map(|c| c.name.clone()).collect()
}

/// docs/kubelet-versions.md §8, 1.26-1.29: PodResources `List`/`Get` show regular containers only.
#[test]
fn podresources_list_regular_containers_only_1_26_to_1_29() {
    for minor in each(26..=29) {
        assert_eq!(listed_containers(minor), ["main"], "1.{minor}");
    }
}

/// 1.30+: sidecars are listed, before the regular containers.
#[test]
fn podresources_list_shows_sidecars_from_1_30() {
    for minor in each(30..=37) {
        assert_eq!(listed_containers(minor), ["side", "main"], "1.{minor}");
    }
}

/// The device provider's hints for one device of GPU on NUMA node 0 of a
/// two-node machine, under best-effort (a dry run: nothing is kept).
fn device_hints(minor: u8) -> Vec<String> {
    let topology = crate::topology::TopologyConfig {
        policy: crate::topology::Policy::BestEffort,
        ..crate::topology::TopologyConfig::default()
    };
    let mut m = Manager::new(KubeletVersion::Release(minor), GRACE, 1024, topology, Instant::now());
    let id = m.register(&who("a.sock"), dp::DevicePluginOptions::default(), Instant::now()).unwrap().id;
    let dev = Device { id: "g0".into(), health: "Healthy".into(), numa_nodes: Some(vec![0]) };
    m.snapshot(GPU, id, vec![dev], 64, Instant::now());
    let spec = PodSpec::shorthand("p", "default", &[(GPU.into(), 1)]);
    let mut outcome = crate::kubelet_sim::outcome::AdmitOutcome::pending(&spec, "uid".into());
    m.dry_run(&spec, &mut outcome).expect("admitted");
    assert!(!m.is_admitted("default", "p"), "a dry run keeps nothing");
    let report = outcome.topology.expect("a topology report");
    let device = report.decisions[0].hints.iter().find(|h| h.provider == "device").expect("device hints");
    device.hints.iter().flatten().map(|h| h.hint.clone()).collect()
}

/// docs/topology.md §1, 1.26-1.35: device hints range over every NUMA node
/// of the machine (node 1 appears, not preferred).
#[test]
fn device_hints_over_every_machine_node_1_26_to_1_35() {
    for minor in each(26..=35) {
        assert_eq!(device_hints(minor), ["{01 true}", "{11 false}"], "1.{minor}");
    }
}

/// 1.36+: only the nodes hosting the resource's devices.
#[test]
fn device_hints_only_on_device_nodes_from_1_36() {
    for minor in each(36..=37) {
        assert_eq!(device_hints(minor), ["{01 true}"], "1.{minor}");
    }
}
