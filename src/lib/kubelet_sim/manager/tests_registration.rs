//! Registration and ListAndWatch rules without sockets that the release
//! tests in `tests.rs` leave open: the sim's resource limit with room left,
//! 1.37's refusal of a Register at a socket whose client is still in the
//! endpoint store (a replaced plugin's, or one a failed Register dropped),
//! `DeRegisterPlugin` per release, whose snapshots count. Written to pin
//! what mutation testing (docs/testing.md, "Mutation testing") found unpinned.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::tests_support::{GPU, GRACE, who, words};
use super::{Effect, Manager};
use crate::kubelet_version::KubeletVersion;
use crate::model::Device;
use crate::proto::deviceplugin::v1beta1 as dp;

fn register(m: &mut Manager, socket: &str) -> Result<u64, String> {
    m.register(&who(socket), dp::DevicePluginOptions::default(), Instant::now()).map(|r| r.id)
}

fn plugin(m: &mut Manager, socket: &str) -> u64 {
    let id = register(m, socket).expect("registered");
    let devices = vec![Device { id: "g0".into(), health: "Healthy".into(), numa_nodes: None }];
    m.snapshot(GPU, id, devices, 64, Instant::now());
    id
}

fn manager(minor: u8) -> Manager {
    Manager::new(KubeletVersion::Release(minor), GRACE, 1024, Default::default(), Instant::now())
}

fn deregister(m: &mut Manager, socket: &str) -> Vec<String> {
    let path = PathBuf::from("/dp").join(socket);
    words(&m.deregister(GPU, &path, &path, Instant::now()))
}

fn word(m: &Manager) -> &'static str {
    m.st.resources[GPU].state_word()
}

/// The sim's own limit (not the kubelet's): new names register while there is room.
#[test]
fn over_limit_takes_new_names_while_there_is_room() {
    let mut m = Manager::new(KubeletVersion::NEWEST, GRACE, 2, Default::default(), Instant::now());
    assert_eq!(m.over_limit(GPU), None);
    plugin(&mut m, "a.sock");
    assert_eq!(m.over_limit("example.com/nic"), None, "1 of 2 names known");
    assert_eq!(m.st.refused_over_limit, 0);
}

/// 1.37+ (PR #135437, `PluginConnected`): a replaced plugin's client stays
/// in the endpoint store while its stream runs, so a Register at its
/// socket is refused as already connected.
#[test]
fn register_at_a_replaced_plugins_socket_refused_from_1_37() {
    let mut m = Manager::new(KubeletVersion::Release(37), GRACE, 1024, Default::default(), Instant::now());
    plugin(&mut m, "a.sock");
    plugin(&mut m, "b.sock");
    assert_eq!(register(&mut m, "a.sock").unwrap_err(), "device plugin already connected: /dp/a.sock");
    // 1.36 replaces by name and takes it.
    let mut m = Manager::new(KubeletVersion::Release(36), GRACE, 1024, Default::default(), Instant::now());
    plugin(&mut m, "a.sock");
    plugin(&mut m, "b.sock");
    assert!(register(&mut m, "a.sock").is_ok());
}

/// 1.37+: a client that a failed Register dropped stays in the endpoint
/// store after its stream ends, so every later Register at its socket is
/// refused too, while another socket registers.
#[test]
fn register_at_a_dropped_clients_socket_stays_refused_from_1_37() {
    let mut m = Manager::new(KubeletVersion::Release(37), GRACE, 1024, Default::default(), Instant::now());
    let old = plugin(&mut m, "a.sock");
    plugin(&mut m, "b.sock");
    assert!(register(&mut m, "a.sock").is_err(), "the replaced client is live");
    m.stream_ended(GPU, old, "EOF".into(), Instant::now());
    assert!(m.st.resources[GPU].superseded.is_empty(), "its stream is done");
    assert_eq!(register(&mut m, "a.sock").unwrap_err(), "device plugin already connected: /dp/a.sock");
    assert!(register(&mut m, "c.sock").is_ok());
}

/// docs/kubelet-versions.md §6, 1.37+ (`DeRegisterPlugin` by name and
/// endpoint): deleting a plugin's own plugins_registry socket disconnects
/// it (grace period); a replaced plugin's socket closes only that client,
/// and a socket no client has does nothing.
#[test]
fn deregister_finds_the_client_by_its_socket_from_1_37() {
    let mut m = manager(37);
    let a = plugin(&mut m, "a.sock");
    assert_eq!(deregister(&mut m, "a.sock"), [format!("stop:{a}"), "stream_ended".into(), "grace".into()]);
    let mut m = manager(37);
    let a = plugin(&mut m, "a.sock");
    let b = plugin(&mut m, "b.sock");
    assert!(deregister(&mut m, "c.sock").is_empty());
    assert_eq!(deregister(&mut m, "a.sock"), [format!("stop:{a}"), format!("close:{a}")]);
    assert_eq!(m.st.resources[GPU].endpoint.as_ref().map(|e| e.id), Some(b));
    assert_eq!(word(&m), "serving");
    assert!(deregister(&mut m, "a.sock").is_empty(), "closed already");
}

/// 1.37+: a client a failed Register at its socket dropped is found by
/// neither its stream end nor `DeRegisterPlugin`.
#[test]
fn deregister_of_a_dropped_client_does_nothing_from_1_37() {
    let mut m = manager(37);
    plugin(&mut m, "a.sock");
    assert!(register(&mut m, "a.sock").is_err());
    assert!(deregister(&mut m, "a.sock").is_empty());
    assert_eq!(word(&m), "untracked");
}

/// docs/kubelet-versions.md §2 and §6, 1.26-1.36: once a failed Register
/// left the name without a client, `DeRegisterPlugin` finds none either.
#[test]
fn deregister_of_an_untracked_plugin_does_nothing_1_26_to_1_36() {
    for minor in 26..=36 {
        let mut m = manager(minor);
        plugin(&mut m, "a.sock");
        m.register_failed(GPU, &PathBuf::from("/dp/other.sock"));
        assert!(deregister(&mut m, "a.sock").is_empty(), "1.{minor}");
        assert_eq!(word(&m), "untracked", "1.{minor}");
    }
}

/// 1.26-1.36: a failed Register when the name's only plugin has already
/// disconnected leaves nothing untracked (there was no live client).
#[test]
fn failed_register_after_the_stream_end_tracks_nothing_1_26_to_1_36() {
    for minor in 26..=36 {
        let mut m = manager(minor);
        let a = plugin(&mut m, "a.sock");
        m.stream_ended(GPU, a, "EOF".into(), Instant::now());
        m.register_failed(GPU, &PathBuf::from("/dp/other.sock"));
        assert_eq!(word(&m), "stream-ended", "1.{minor}");
    }
}

/// 1.37+ (`deregisterClient(name, socketPath)`): a failed Register drops
/// the clients at its own socket only, once each.
#[test]
fn failed_register_drops_only_the_clients_at_its_socket_from_1_37() {
    let mut m = manager(37);
    let a = plugin(&mut m, "a.sock");
    plugin(&mut m, "b.sock");
    m.register_failed(GPU, &PathBuf::from("/dp/c.sock"));
    assert!(m.st.resources[GPU].untracked_clients.is_empty());
    m.register_failed(GPU, &PathBuf::from("/dp/a.sock"));
    m.register_failed(GPU, &PathBuf::from("/dp/a.sock"));
    assert_eq!(m.st.resources[GPU].untracked_clients, [(a, PathBuf::from("/dp/a.sock"))]);
}

/// Every release: a new Register closes the old endpoint's connection when
/// its stream is already done (here an untracked client's, 1.26-1.36),
/// instead of keeping it as a replaced, still-streaming plugin.
#[test]
fn register_closes_an_endpoint_whose_stream_is_done_1_26_to_1_36() {
    for minor in 26..=36 {
        let mut m = manager(minor);
        let a = plugin(&mut m, "a.sock");
        m.register_failed(GPU, &PathBuf::from("/dp/other.sock"));
        m.stream_ended(GPU, a, "EOF".into(), Instant::now());
        let r = m.register(&who("b.sock"), dp::DevicePluginOptions::default(), Instant::now()).unwrap();
        assert_eq!(words(&r.effects), [format!("close:{a}")], "1.{minor}");
        assert!(m.st.resources[GPU].superseded.is_empty(), "1.{minor}");
    }
}

fn gpus(n: usize) -> Vec<Device> {
    (0..n).map(|i| Device { id: format!("g{i}"), health: "Healthy".into(), numa_nodes: None }).collect()
}

/// docs/kubelet-versions.md §2 (every release): a replaced plugin's stream
/// still updates the resource; a stream the manager does not know (ended
/// and closed) changes nothing.
#[test]
fn a_replaced_plugins_snapshot_still_updates_the_resource() {
    for minor in [26, 36, 37] {
        let mut m = manager(minor);
        let a = plugin(&mut m, "a.sock");
        plugin(&mut m, "b.sock");
        let fx = m.snapshot(GPU, a, gpus(3), 64, Instant::now());
        assert_eq!(words(&fx), ["write", "snapshot"], "1.{minor}");
        assert_eq!(m.counts()[GPU].capacity, 3, "1.{minor}");
        assert!(m.snapshot(GPU, a + 100, gpus(5), 64, Instant::now()).is_empty());
        assert_eq!(m.counts()[GPU].capacity, 3, "1.{minor}");
    }
}

/// docs/protocol.md §3.4 (every release): the kubelet keeps `allDevices` as
/// a map by ID, so of a repeated ID the last entry's topology is the one
/// allocation uses.
#[test]
fn a_repeated_device_id_takes_the_last_entrys_topology() {
    let mut m = manager(37);
    let id = register(&mut m, "a.sock").unwrap();
    let on = |node: i64| Device { id: "g0".into(), health: "Healthy".into(), numa_nodes: Some(vec![node]) };
    m.snapshot(GPU, id, vec![on(0), on(1)], 64, Instant::now());
    assert_eq!(m.numa_of(GPU, &["g0".to_string()]), [(1, vec!["g0".to_string()])].into());
}

/// docs/kubelet-versions.md §3 (every release): a grace timer of an earlier
/// stop does nothing once the plugin registered and stopped again; only
/// the last stop's timer removes the resource.
#[test]
fn a_stale_grace_timer_does_nothing_after_a_second_stop() {
    let t0 = Instant::now();
    let mut m = manager(37);
    let stop = |m: &mut Manager, id: u64, at: Instant| match m.stream_ended(GPU, id, "EOF".into(), at).pop() {
        Some(Effect::StartGrace { generation, .. }) => generation,
        other => panic!("no grace timer: {other:?}"),
    };
    let a = plugin(&mut m, "a.sock");
    let first = stop(&mut m, a, t0);
    let b = plugin(&mut m, "a.sock");
    let t1 = t0 + Duration::from_secs(10);
    let second = stop(&mut m, b, t1);
    assert_eq!(m.grace_deadline(GPU, first), None);
    assert!(m.grace_expired(GPU, first, t1 + GRACE).is_empty());
    assert_eq!(m.grace_deadline(GPU, second), Some(t1 + GRACE));
}

/// docs/kubelet-versions.md §2, 1.26-1.36: a replaced plugin whose stream
/// still runs is a live client of the name, so a failed Register leaves it
/// untracked even after the current plugin disconnected: its own stream
/// end then disconnects nothing.
#[test]
fn failed_register_leaves_a_replaced_live_plugin_untracked_1_26_to_1_36() {
    for minor in 26..=36 {
        let mut m = manager(minor);
        let a = plugin(&mut m, "a.sock");
        let b = plugin(&mut m, "b.sock");
        m.stream_ended(GPU, b, "EOF".into(), Instant::now());
        m.register_failed(GPU, &PathBuf::from("/dp/other.sock"));
        let fx = m.stream_ended(GPU, a, "EOF".into(), Instant::now());
        assert_eq!(words(&fx), [format!("close:{a}"), "stream_ended_untracked".into()], "1.{minor}");
    }
}
