//! What the manager's test modules share: the resource they register, the
//! kubelet's grace period, a registrant, and effects as short words.

use std::path::PathBuf;
use std::time::Duration;

use super::{Effect, Effects, Registrant};
use crate::kubelet_sim::events::Via;

/// The resource most tests register.
pub(super) const GPU: &str = "example.com/gpu";
/// The kubelet's grace period after a stream end (5 minutes).
pub(super) const GRACE: Duration = Duration::from_secs(300);

/// A plugin of `resource` at `/dp/<socket>`, registered on kubelet.sock.
pub(super) fn registrant(resource: &str, socket: &str) -> Registrant {
    Registrant {
        resource: resource.into(),
        endpoint: socket.into(),
        socket: PathBuf::from("/dp").join(socket),
        via: Via::KubeletSock,
        version: "v1beta1".into(),
    }
}

/// A plugin of [`GPU`] at `/dp/<socket>`.
pub(super) fn who(socket: &str) -> Registrant {
    registrant(GPU, socket)
}

/// The effects as short words: an event's name, `write`, `stop:ID`,
/// `close:ID`, `grace`.
pub(super) fn words(effects: &Effects) -> Vec<String> {
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
