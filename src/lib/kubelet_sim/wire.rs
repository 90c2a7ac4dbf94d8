//! What the control protocol's `events` answers: one [`WireEvent`] per thing
//! the kubelet did with a plugin, made from the sim's own events. A leaf of
//! plain data, so that the shell records them and `control` serves them
//! without using each other.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::events::{EventKind, RequestOptions, SimEvent, Via};

/// One thing the kubelet did with a plugin, as `events` answers it. The sim
/// sends these from its own events; a referee reads them off the kubelet's
/// own log lines, and leaves out what those do not say (the fields with a
/// default).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireEvent {
    /// When, in milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// What.
    #[serde(flatten)]
    pub kind: WireEventKind,
}

/// What a [`WireEvent`] says happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum WireEventKind {
    /// A plugin registered (its dial-back and GetDevicePluginOptions worked).
    Registered {
        /// Resource name.
        resource: String,
        /// The endpoint it registered (kubelet.sock: a file name in the directory).
        #[serde(default)]
        endpoint: String,
        /// The plugin socket the kubelet dialed.
        #[serde(default)]
        socket: String,
        /// How it registered.
        via: Via,
        /// The API version.
        #[serde(default)]
        version: String,
        /// The options in RegisterRequest, when the engine saw them.
        #[serde(default)]
        request_options: Option<RequestOptions>,
        /// From GetDevicePluginOptions.
        #[serde(default)]
        pre_start_required: bool,
        /// From GetDevicePluginOptions.
        #[serde(default)]
        get_preferred_allocation_available: bool,
        /// How long the registration took.
        #[serde(default)]
        took_ms: u64,
    },
    /// A registration was refused with `message`.
    RegistrationRejected {
        /// Resource name.
        resource: String,
        /// Endpoint, when known.
        #[serde(default)]
        endpoint: String,
        /// The socket dialed, when known.
        #[serde(default)]
        socket: String,
        /// How it tried to register.
        via: Via,
        /// The API version, when known.
        #[serde(default)]
        version: String,
        /// The kubelet's error text.
        message: String,
    },
    /// A ListAndWatch message arrived.
    Snapshot {
        /// Resource name.
        resource: String,
        /// Devices in the message.
        #[serde(default)]
        devices: usize,
        /// Capacity after it, when the engine tells.
        #[serde(default)]
        capacity: Option<usize>,
        /// Allocatable after it, when the engine tells.
        #[serde(default)]
        allocatable: Option<usize>,
        /// The message's encoded size, when the engine tells.
        #[serde(default)]
        message_bytes: Option<usize>,
    },
    /// ListAndWatch ended: the kubelet counts every device unhealthy.
    StreamEnded {
        /// Resource name.
        resource: String,
        /// The plugin socket.
        #[serde(default)]
        socket: String,
        /// Why.
        #[serde(default)]
        reason: String,
    },
}

impl WireEvent {
    /// The wire form of a sim event, for the kinds `events` reports.
    pub fn from_sim(e: &SimEvent) -> Option<WireEvent> {
        use EventKind as K;
        let kind = match &e.kind {
            K::Registered {
                resource,
                endpoint,
                socket,
                via,
                version,
                request_options,
                pre_start_required,
                get_preferred_allocation_available,
                took_ms,
                ..
            } => WireEventKind::Registered {
                resource: resource.clone(),
                endpoint: endpoint.clone(),
                socket: socket.clone(),
                via: *via,
                version: version.clone(),
                request_options: *request_options,
                pre_start_required: *pre_start_required,
                get_preferred_allocation_available: *get_preferred_allocation_available,
                took_ms: *took_ms,
            },
            K::RegistrationRejected { resource, endpoint, socket, via, version, message } => {
                WireEventKind::RegistrationRejected {
                    resource: resource.clone(),
                    endpoint: endpoint.clone(),
                    socket: socket.clone(),
                    via: *via,
                    version: version.clone(),
                    message: message.clone(),
                }
            }
            K::Snapshot { resource, capacity, allocatable, devices, message_bytes, .. } => WireEventKind::Snapshot {
                resource: resource.clone(),
                devices: *devices,
                capacity: Some(*capacity),
                allocatable: Some(*allocatable),
                message_bytes: Some(*message_bytes),
            },
            K::StreamEnded { resource, socket, reason, .. } => WireEventKind::StreamEnded {
                resource: resource.clone(),
                socket: socket.clone(),
                reason: reason.clone(),
            },
            _ => return None,
        };
        let unix_ms = e.time.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        Some(WireEvent { unix_ms, kind })
    }

    /// When it happened.
    pub fn time(&self) -> std::time::SystemTime {
        std::time::UNIX_EPOCH + Duration::from_millis(self.unix_ms)
    }
}
