//! Registration rules without sockets that the release tests in `tests.rs`
//! leave open: the sim's resource limit with room left, and 1.37's refusal
//! of a Register at a socket whose client is still in the endpoint store
//! (a replaced plugin's, or one a failed Register dropped). Written to pin
//! what mutation testing (docs/testing.md, "Mutation testing") found unpinned.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::{Manager, Registrant};
use crate::kubelet_sim::events::Via;
use crate::kubelet_version::KubeletVersion;
use crate::model::Device;
use crate::proto::deviceplugin::v1beta1 as dp;

const GPU: &str = "example.com/gpu";
const GRACE: Duration = Duration::from_secs(300);

fn who(socket: &str) -> Registrant {
    Registrant {
        resource: GPU.into(),
        endpoint: socket.into(),
        socket: PathBuf::from("/dp").join(socket),
        via: Via::KubeletSock,
        version: "v1beta1".into(),
    }
}

fn register(m: &mut Manager, socket: &str) -> Result<u64, String> {
    m.register(&who(socket), dp::DevicePluginOptions::default(), Instant::now()).map(|r| r.id)
}

fn plugin(m: &mut Manager, socket: &str) -> u64 {
    let id = register(m, socket).expect("registered");
    let devices = vec![Device { id: "g0".into(), health: "Healthy".into(), numa_nodes: None }];
    m.snapshot(GPU, id, devices, 64, Instant::now());
    id
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
