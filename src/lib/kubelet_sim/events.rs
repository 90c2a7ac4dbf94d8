//! What the simulated kubelet tells its watchers: one [`SimEvent`] per thing
//! a kubelet would log or change in node status (registrations, device
//! snapshots, health changes, admissions, stream ends, restarts). The CLI
//! renders them as JSON Lines or as a live view; tests subscribe to them.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::contract::Violation;
use crate::model::Change;

/// How a plugin reached the simulated kubelet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Via {
    /// A `Register` call on `kubelet.sock`.
    #[serde(rename = "kubelet.sock")]
    KubeletSock,
    /// The plugin watcher: a socket in the plugins_registry directory.
    #[serde(rename = "plugins_registry")]
    PluginsRegistry,
}

impl std::fmt::Display for Via {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Via::KubeletSock => "kubelet.sock",
            Via::PluginsRegistry => "plugins_registry",
        })
    }
}

/// One event, with when it happened.
#[derive(Debug, Clone, Serialize)]
pub struct SimEvent {
    /// When it happened (rendered as RFC 3339 by the output layer).
    #[serde(skip)]
    pub time: SystemTime,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// A container's devices, per resource, in an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerDevicesView {
    /// Container name.
    pub name: String,
    /// `init`, `sidecar` or `regular`.
    pub kind: super::pod::ContainerKind,
    /// Device IDs per resource.
    pub devices: BTreeMap<String, Vec<String>>,
}

/// The options a plugin sent in its `RegisterRequest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestOptions {
    /// `options.pre_start_required`.
    pub pre_start_required: bool,
    /// `options.get_preferred_allocation_available`.
    pub get_preferred_allocation_available: bool,
}

impl From<crate::proto::deviceplugin::v1beta1::DevicePluginOptions> for RequestOptions {
    fn from(o: crate::proto::deviceplugin::v1beta1::DevicePluginOptions) -> Self {
        RequestOptions {
            pre_start_required: o.pre_start_required,
            get_preferred_allocation_available: o.get_preferred_allocation_available,
        }
    }
}

impl From<RequestOptions> for crate::proto::deviceplugin::v1beta1::DevicePluginOptions {
    fn from(o: RequestOptions) -> Self {
        crate::proto::deviceplugin::v1beta1::DevicePluginOptions {
            pre_start_required: o.pre_start_required,
            get_preferred_allocation_available: o.get_preferred_allocation_available,
        }
    }
}

/// What happened. Serialized with an `event` key in snake_case.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    /// The sim serves its sockets.
    Started {
        /// The kubelet release the sim plays.
        kubelet_version: super::version::KubeletVersion,
        /// The device-plugin directory.
        dir: String,
        /// The registration socket.
        kubelet_socket: String,
        /// The PodResources socket, when served.
        podresources_socket: Option<String>,
        /// The control socket, when served.
        control_socket: Option<String>,
        /// The plugins_registry directory, when watched.
        registry_dir: Option<String>,
        /// What the played kubelet deletes at start.
        cleanup_rule: super::version::CleanupRule,
        /// Sockets deleted from the directory at start (as a kubelet does).
        deleted_sockets: Vec<String>,
        /// Other entries deleted (only in a directory the sim created, or with `--emulate-cleanup`).
        deleted_files: Vec<String>,
        /// Entries that kubelet would also have deleted, kept because the sim did not create the directory.
        would_delete: Vec<String>,
        /// Resources restored from an existing checkpoint (0 until their plugin registers).
        restored_resources: Vec<String>,
    },
    /// A plugin registered: the dial-back and GetDevicePluginOptions worked.
    Registered {
        /// Resource name.
        resource: String,
        /// Endpoint as registered.
        endpoint: String,
        /// The plugin socket dialed.
        socket: String,
        /// How it registered.
        via: Via,
        /// `RegisterRequest.version` as sent (`v1beta1` via plugins_registry).
        version: String,
        /// `RegisterRequest.options` as sent (none via plugins_registry, or
        /// when the request carried none).
        request_options: Option<RequestOptions>,
        /// From GetDevicePluginOptions.
        pre_start_required: bool,
        /// From GetDevicePluginOptions.
        get_preferred_allocation_available: bool,
        /// The options the plugin sent in RegisterRequest (ignored since v1.25),
        /// when they disagree with GetDevicePluginOptions.
        request_options_differ: bool,
        /// An earlier registration of the same resource was replaced.
        replaced: bool,
        /// How long Register took (dial-back plus GetDevicePluginOptions).
        took_ms: u64,
    },
    /// A registration failed; the plugin got `message`.
    RegistrationRejected {
        /// Resource name (as sent).
        resource: String,
        /// Endpoint (as sent).
        endpoint: String,
        /// The socket the kubelet dials for it (`filepath.Join(dir, endpoint)`).
        #[serde(default)]
        socket: String,
        /// How it tried to register.
        via: Via,
        /// `RegisterRequest.version` as sent.
        version: String,
        /// The kubelet's error text, as the plugin receives it.
        message: String,
    },
    /// A ListAndWatch message: a full snapshot of the resource's devices.
    Snapshot {
        /// Resource name.
        resource: String,
        /// 1 for the endpoint's first message.
        seq: u64,
        /// Healthy plus unhealthy devices.
        capacity: usize,
        /// Healthy devices.
        allocatable: usize,
        /// Devices in the message.
        devices: usize,
        /// Encoded size of the message.
        message_bytes: usize,
        /// Changes from the previous snapshot.
        changes: usize,
        /// Rules of the contract the message breaks (warnings; the kubelet accepts it).
        violations: Vec<Violation>,
    },
    /// One device changed health between two snapshots.
    HealthChanged {
        /// Resource name.
        resource: String,
        /// Device ID.
        id: String,
        /// Health before.
        from: String,
        /// Health now.
        to: String,
        /// Capacity after the change.
        capacity: usize,
        /// Allocatable after the change.
        allocatable: usize,
    },
    /// ListAndWatch ended: every device is now unhealthy; the kubelet never retries.
    StreamEnded {
        /// Resource name.
        resource: String,
        /// The plugin socket.
        socket: String,
        /// Why (the error, or that the plugin closed the stream).
        reason: String,
        /// Capacity (kept).
        capacity: usize,
        /// Allocatable (0).
        allocatable: usize,
        /// Time until capacity drops to 0 unless the plugin registers again.
        grace_period_ms: u64,
    },
    /// ListAndWatch of a client the kubelet no longer tracks ended
    /// (docs/kubelet-versions.md §2, 1.26-1.36: a later Register of the same name
    /// failed its dial-back or GetDevicePluginOptions, and `deregisterClient`
    /// dropped the name's only entry): nothing is disconnected, the devices
    /// keep their health and no grace period starts.
    StreamEndedUntracked {
        /// Resource name.
        resource: String,
        /// The plugin socket.
        socket: String,
        /// Why (the error, or that the plugin closed the stream).
        reason: String,
        /// Capacity (unchanged).
        capacity: usize,
        /// Allocatable (unchanged).
        allocatable: usize,
    },
    /// 1.37+: the current endpoint's ListAndWatch ended while another
    /// endpoint of the resource (another socket) is still stored: the kubelet
    /// drops only the ended one and the other takes over (Allocate goes
    /// there); the devices keep their health and no grace period starts.
    StreamEndedFailover {
        /// Resource name.
        resource: String,
        /// The socket whose stream ended.
        socket: String,
        /// The socket of the endpoint that now serves the resource.
        now_serving: String,
        /// Why (the error, or that the plugin closed the stream).
        reason: String,
        /// Capacity (unchanged).
        capacity: usize,
        /// Allocatable (unchanged).
        allocatable: usize,
    },
    /// The grace period after a stream end passed: capacity is now 0.
    ResourceRemoved {
        /// Resource name.
        resource: String,
    },
    /// A pod was admitted; every Allocate worked.
    Admitted {
        /// Pod name.
        pod: String,
        /// Namespace.
        namespace: String,
        /// Pod UID.
        uid: String,
        /// Devices per container.
        containers: Vec<ContainerDevicesView>,
        /// Where the allocation was recorded before the answer (the
        /// checkpoint, or the sim's own file while the checkpoint is read-only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kept_in: Option<String>,
    },
    /// A pod was rejected, as the kubelet reports it.
    AdmissionRejected {
        /// Pod name.
        pod: String,
        /// Namespace.
        namespace: String,
        /// `UnexpectedAdmissionError`, or `OutOf<resource>`.
        reason: String,
        /// The kubelet's message.
        message: String,
    },
    /// PreStartContainer failed, so the container would not start.
    ContainerStartFailed {
        /// Pod name.
        pod: String,
        /// Namespace.
        namespace: String,
        /// Container name.
        container: String,
        /// The kubelet's message.
        message: String,
    },
    /// A pod was deleted and its devices freed.
    PodDeleted {
        /// Pod name.
        pod: String,
        /// Namespace.
        namespace: String,
        /// Freed device IDs per resource.
        freed: BTreeMap<String, Vec<String>>,
    },
    /// A kubelet restart began: connections dropped, sockets about to be deleted.
    Restarting {
        /// Resources whose plugins are expected back.
        resources: Vec<String>,
    },
    /// A container of an admitted pod restarted (PreStartContainer called again).
    ContainerRestarted {
        /// Pod name.
        pod: String,
        /// Namespace.
        namespace: String,
        /// Container name.
        container: String,
        /// Per resource: PreStartContainer's result, or `not required`.
        pre_start: BTreeMap<String, String>,
        /// It started again.
        started: bool,
    },
    /// The restarted kubelet serves a new kubelet.sock.
    Restarted {
        /// Sockets deleted from the directory.
        deleted_sockets: Vec<String>,
        /// Other entries deleted (only in a directory the sim created, or with `--emulate-cleanup`).
        deleted_files: Vec<String>,
        /// Entries that kubelet would also have deleted, kept because the sim did not create the directory.
        would_delete: Vec<String>,
        /// Pods whose allocations were restored from the checkpoint.
        restored_pods: usize,
        /// Resources restored at 0 until their plugin registers again.
        restored_resources: Vec<String>,
    },
    /// After a restart, a plugin registered again.
    PluginReregistered {
        /// Resource name.
        resource: String,
        /// Time from the new kubelet.sock to the Register call's answer.
        after_ms: u64,
    },
    /// The restart report: who came back, and how fast.
    RestartReport {
        /// The report.
        report: super::outcome::RestartReport,
    },
    /// The grace period was changed.
    GracePeriodSet {
        /// The new grace period.
        grace_period_ms: u64,
    },
    /// A plugin watcher socket was seen but is not a device plugin or could not register.
    RegistryPluginIgnored {
        /// The socket in the registry directory.
        socket: String,
        /// Why.
        reason: String,
    },
    /// The checkpoint as found at start (docs/kubelet-versions.md §7).
    CheckpointRead {
        /// What was found, its checksums, and whether the sim writes it.
        checkpoint: super::outcome::CheckpointStatus,
    },
    /// The sim will not write the checkpoint: another program wrote it.
    CheckpointReadOnly {
        /// The checkpoint file.
        path: String,
        /// Why, and how to change it.
        reason: String,
    },
    /// A DRA driver's kubelet plugin registered (plugins_registry).
    DraRegistered {
        /// The driver.
        driver: String,
        /// Its service socket.
        endpoint: String,
        /// The node service chosen (`v1.DRAPlugin`, `v1beta1.DRAPlugin`).
        service: String,
        /// What it advertised, in its order.
        supported_versions: Vec<String>,
        /// The registration socket.
        registration: String,
    },
    /// A DRA driver's registration was refused; the text the plugin was sent.
    DraRegistrationRejected {
        /// The driver (GetInfo `name`).
        driver: String,
        /// The registration socket.
        socket: String,
        /// The kubelet's text.
        message: String,
    },
    /// The DRA manager opened (or failed to open) a driver's health stream
    /// (`NodeWatchResources`); it tries again every 5 s, as the kubelet does.
    DraHealthStream {
        /// The driver.
        driver: String,
        /// The instance's endpoint.
        endpoint: String,
        /// The health service.
        service: String,
        /// Why it failed or ended (absent: opened).
        error: Option<String>,
    },
    /// A device's health changed on a driver's health stream.
    DraDeviceHealth {
        /// The driver.
        driver: String,
        /// The pool.
        pool: String,
        /// The device.
        device: String,
        /// `Healthy`, `Unhealthy` or `Unknown`.
        health: String,
        /// The driver's message.
        message: String,
    },
    /// The DRA manager deleted ResourceSlices of the node in the sim's API
    /// server: all of them at start and at a restart, a driver's 30 s after its
    /// last instance went (unless it came back).
    DraSlicesWiped {
        /// The node.
        node: String,
        /// The driver (absent: every driver).
        driver: Option<String>,
        /// The slices deleted.
        slices: Vec<String>,
        /// `start`, `restart` or `deregistered`.
        reason: String,
    },
    /// A DRA driver instance's registration socket went away.
    DraDeregistered {
        /// The driver.
        driver: String,
        /// The instance's endpoint.
        endpoint: String,
    },
    /// A pod's claims were prepared (or the preparation failed: the
    /// kubelet's `FailedPrepareDynamicResources`).
    DraPrepared {
        /// Pod name.
        pod: String,
        /// Namespace.
        namespace: String,
        /// The calls made.
        calls: Vec<super::outcome::DraCall>,
        /// The kubelet's error text.
        error: Option<String>,
    },
    /// A deleted pod's claims were unprepared (those it was the last user of).
    DraUnprepared {
        /// Pod name.
        pod: String,
        /// Namespace.
        namespace: String,
        /// The calls made.
        calls: Vec<super::outcome::DraCall>,
        /// The kubelet's error text.
        error: Option<String>,
    },
    /// The sim stopped and removed its sockets.
    Stopped {},
}

/// Device changes between two snapshots, counted for an event.
pub(crate) fn health_changes(changes: &[Change]) -> impl Iterator<Item = (&str, &str, &str)> {
    changes.iter().filter_map(|c| match c {
        Change::HealthChanged { id, from, to } => Some((id.as_str(), from.as_str(), to.as_str())),
        _ => None,
    })
}
