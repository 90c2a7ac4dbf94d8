//! What a running mock plugin reports: serving, registering, retries,
//! rejections, device changes and every RPC it answers. Subscribers get these
//! as [`MockEvent`]s; `dpctl mock-plugin` renders them, and `--record` writes
//! the RPC ones as JSON Lines.

use std::path::PathBuf;
use std::time::SystemTime;

use serde::{Serialize, Serializer};

use crate::model::Change;

/// One thing that happened, to one resource.
#[derive(Debug, Clone, Serialize)]
pub struct MockEvent {
    /// When (RFC 3339 in JSON).
    #[serde(serialize_with = "rfc3339")]
    pub time: SystemTime,
    /// The resource it is about.
    pub resource: String,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// Serialises a time as RFC 3339 UTC with milliseconds.
pub fn rfc3339<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&humantime::format_rfc3339_millis(*t))
}

/// The kinds of events (`"event"` in JSON).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    /// The DevicePlugin service is being served on `socket`.
    Serving {
        /// The socket.
        socket: PathBuf,
        /// Devices advertised now.
        devices: usize,
        /// 1 at start, then +1 each time the socket is served again.
        generation: u32,
        /// Why it is served (again).
        reason: String,
    },
    /// The plugin-watcher registration socket is served.
    RegistryServing {
        /// The socket in the plugins_registry directory.
        socket: PathBuf,
    },
    /// A Register attempt failed in a way worth retrying.
    RegisterRetry {
        /// The kubelet socket.
        kubelet_socket: PathBuf,
        /// Attempt number (1 = first).
        attempt: u32,
        /// What went wrong.
        error: String,
        /// When the next attempt is made (earlier if kubelet.sock appears).
        retry_in_ms: u64,
    },
    /// The kubelet accepted a Register.
    Registered {
        /// The kubelet socket.
        kubelet_socket: PathBuf,
        /// What was sent.
        request: RegisterView,
        /// 1 for the first registration, 2 after the first re-registration, ...
        registration: u32,
        /// Attempts this registration took.
        attempts: u32,
        /// What caused it (start, kubelet.sock created, plugin socket deleted...).
        reason: String,
        /// From the cause to the kubelet's answer, in milliseconds.
        took_ms: f64,
    },
    /// The kubelet rejected Register; this resource stops.
    Rejected {
        /// The kubelet socket.
        kubelet_socket: PathBuf,
        /// What was sent.
        request: RegisterView,
        /// The kubelet's message.
        message: String,
    },
    /// A kubelet restart was seen and deliberately ignored (fault `no_reregister`).
    KubeletRestartIgnored {
        /// What was seen.
        reason: String,
    },
    /// The device list changed (a new ListAndWatch message went out).
    DevicesChanged {
        /// timeline, flap, control or api.
        cause: String,
        /// The changes.
        changes: Vec<Change>,
        /// Healthy plus unhealthy devices now.
        capacity: usize,
        /// Healthy devices now.
        allocatable: usize,
    },
    /// An RPC was answered (or one ListAndWatch message sent).
    Rpc(RpcRecord),
    /// The kubelet's plugin watcher reported the registration outcome.
    RegistrationStatus {
        /// Registered or not.
        plugin_registered: bool,
        /// The kubelet's error, if any.
        error: String,
    },
    /// The resource stopped serving and removed its sockets.
    Stopped {},
}

/// A RegisterRequest as sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RegisterView {
    /// `version`.
    pub version: String,
    /// `endpoint`.
    pub endpoint: String,
    /// `resource_name`.
    pub resource_name: String,
    /// `options.pre_start_required`.
    pub pre_start_required: bool,
    /// `options.get_preferred_allocation_available`.
    pub get_preferred_allocation_available: bool,
}

/// One RPC answered, as recorded: the request, the response or the error,
/// and how long answering took.
#[derive(Debug, Clone, Serialize)]
pub struct RpcRecord {
    /// The method name, e.g. `Allocate`.
    pub rpc: &'static str,
    /// The request (snake_case fields).
    pub request: serde_json::Value,
    /// The response, or null after an error.
    pub response: Option<serde_json::Value>,
    /// The error status, or null.
    pub error: Option<StatusView>,
    /// Time to answer in milliseconds (ListAndWatch: since the stream opened).
    pub latency_ms: f64,
    /// ListAndWatch: the message number in its stream (1 = first); null otherwise.
    pub seq: Option<u64>,
}

/// A gRPC status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatusView {
    /// snake_case code name, e.g. `invalid_argument`.
    pub code: &'static str,
    /// The message.
    pub message: String,
}

impl StatusView {
    /// From a tonic status.
    pub fn from_status(s: &tonic::Status) -> Self {
        StatusView { code: crate::rpc::code_name(s.code()), message: s.message().to_string() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialise_flat_with_a_tag() {
        let e = MockEvent {
            time: SystemTime::UNIX_EPOCH,
            resource: "example.com/gpu".into(),
            kind: EventKind::Rpc(RpcRecord {
                rpc: "Allocate",
                request: serde_json::json!({}),
                response: None,
                error: Some(StatusView { code: "invalid_argument", message: "x".into() }),
                latency_ms: 0.0,
                seq: None,
            }),
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["event"], "rpc");
        assert_eq!(v["time"], "1970-01-01T00:00:00.000Z");
        assert_eq!(v["rpc"], "Allocate");
        assert_eq!(v["error"]["code"], "invalid_argument");
        assert!(v["response"].is_null() && v["seq"].is_null(), "null keys are kept");
    }
}
