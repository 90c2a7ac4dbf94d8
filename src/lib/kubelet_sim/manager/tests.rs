//! The manager's transitions without sockets or a runtime: one test per
//! rule of the release table (`kubelet_version`) that the manager plays,
//! named after the releases it holds for, plus the rules every release
//! shares. Time is a value here: a grace period passes by adding to it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::{Effect, Effects, Manager, Registrant};
use crate::kubelet_sim::events::Via;
use crate::kubelet_version::KubeletVersion;
use crate::model::{Counts, Device};
use crate::proto::deviceplugin::v1beta1 as dp;

const GPU: &str = "example.com/gpu";
const GRACE: Duration = Duration::from_secs(300);

fn manager(minor: u8, t0: Instant) -> Manager {
    Manager::new(KubeletVersion::Release(minor), GRACE, 1024, t0)
}

fn who(socket: &str) -> Registrant {
    Registrant {
        resource: GPU.into(),
        endpoint: socket.into(),
        socket: PathBuf::from("/dp").join(socket),
        via: Via::KubeletSock,
        version: "v1beta1".into(),
    }
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

/// The effects as short words: `stream_ended` (an event), `write`, `stop:ID`, `close:ID`, `grace`.
fn words(effects: &Effects) -> Vec<String> {
    effects
        .iter()
        .map(|e| match e {
            Effect::Emit(kind) => serde_json::to_value(kind).unwrap()["event"].as_str().unwrap().to_string(),
            Effect::WriteCheckpoint => "write".into(),
            Effect::StopStream(id) => format!("stop:{id}"),
            Effect::Close(id) => format!("close:{id}"),
            Effect::StartGrace { .. } => "grace".into(),
        })
        .collect()
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
    let mut m = Manager::new(KubeletVersion::NEWEST, GRACE, 1, t0);
    plugin(&mut m, "a.sock", 1, t0);
    assert!(m.over_limit(GPU).is_none());
    let text = m.over_limit("example.com/other").expect("refused");
    assert!(text.contains("at most 1 distinct resource names"), "{text}");
    assert_eq!(m.st.refused_over_limit, 1);
}
