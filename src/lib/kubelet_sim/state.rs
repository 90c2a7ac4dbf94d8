//! The simulated device manager's state: per resource the last snapshot and
//! the plugin endpoint, per pod the devices of each container. All of it sits
//! behind one mutex that is never held across an await.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::admission::PodSpec;
use super::events::Via;
use crate::model::{self, Counts, Device};
use crate::plugin_client::PluginClient;
use crate::proto::deviceplugin::v1beta1 as dp;

/// NUMA key of a device that reports no topology (the kubelet's `nodeWithoutTopology`).
pub const NO_TOPOLOGY: i64 = -1;

/// The connection to a registered plugin.
#[derive(Debug)]
pub(crate) struct Endpoint {
    /// Unique per registration.
    pub id: u64,
    /// The endpoint as the plugin named it.
    pub endpoint: String,
    /// The socket dialed.
    pub socket: PathBuf,
    /// How the plugin registered.
    pub via: Via,
    /// From GetDevicePluginOptions.
    pub options: dp::DevicePluginOptions,
    /// Client for Allocate and GetPreferredAllocation.
    pub client: PluginClient,
    /// Client for PreStartContainer (its own deadline).
    pub pre_start_client: PluginClient,
    /// The ListAndWatch task.
    pub task: Option<tokio::task::AbortHandle>,
    /// When Register answered.
    pub registered_at: Instant,
    /// When the first snapshot arrived.
    pub first_snapshot_at: Option<Instant>,
    /// The stream ended (the kubelet's `isStopped`).
    pub stopped: bool,
}

/// One extended resource, as the device manager tracks it.
#[derive(Debug, Default)]
pub(crate) struct Resource {
    /// The last snapshot (the kubelet's `allDevices`), in the plugin's order.
    pub devices: Vec<Device>,
    /// The stream ended: every device counts as unhealthy until the next snapshot.
    pub disconnected: bool,
    /// The grace period after the stream end passed: capacity 0.
    pub removed: bool,
    /// Shown in node status (after the first snapshot or a stream end).
    pub reported: bool,
    /// The current plugin connection.
    pub endpoint: Option<Endpoint>,
    /// When the endpoint stopped (stream end, or restored after a restart).
    pub stopped_at: Option<Instant>,
    /// Bumped on every registration and stop, so stale timers do nothing.
    pub generation: u64,
    /// Snapshots received, over all registrations.
    pub snapshots: u64,
    /// Registrations accepted.
    pub registrations: u64,
    /// Restored from a checkpoint and not registered since.
    pub restored: bool,
}

impl Resource {
    /// Capacity and allocatable as node status shows them.
    pub fn counts(&self) -> Counts {
        if self.removed {
            return Counts::default();
        }
        let c = model::counts(&self.devices);
        if self.disconnected { Counts { capacity: c.capacity, allocatable: 0 } } else { c }
    }

    /// The healthy devices a pod may get (none after a stream end).
    pub fn healthy(&self) -> impl Iterator<Item = &Device> {
        let usable = !self.disconnected && !self.removed;
        self.devices.iter().filter(move |d| usable && d.is_healthy())
    }

    /// The kubelet's `healthyDevices[r]` exists: registered (or restored) and not removed.
    pub fn known(&self) -> bool {
        !self.removed
    }

    /// A short word for the resource's state.
    pub fn state_word(&self) -> &'static str {
        match (&self.endpoint, self.removed) {
            (_, true) => "removed",
            (None, false) if self.restored => "awaiting-registration",
            (None, false) => "stopped",
            (Some(e), false) if e.stopped => "stream-ended",
            (Some(e), false) if e.first_snapshot_at.is_none() => "registered",
            (Some(_), false) => "serving",
        }
    }
}

/// One container's devices for one resource (the kubelet's `podDevices` entry).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Alloc {
    /// Device IDs in the order they were chosen.
    pub ids: Vec<String>,
    /// Device IDs per NUMA node (`-1`: no topology); a device on several nodes is under each.
    pub by_numa: BTreeMap<i64, Vec<String>>,
    /// The plugin's answer, cached as the kubelet caches it.
    pub response: dp::ContainerAllocateResponse,
}

/// An admitted pod.
#[derive(Debug, Clone)]
pub(crate) struct Pod {
    /// The pod as admitted (UID filled in).
    pub spec: PodSpec,
    /// Devices per container, then per resource.
    pub allocs: BTreeMap<String, BTreeMap<String, Alloc>>,
}

impl Pod {
    /// Pod UID.
    pub fn uid(&self) -> &str {
        self.spec.uid.as_deref().unwrap_or_default()
    }
}

/// Everything the device manager knows.
#[derive(Debug)]
pub(crate) struct State {
    /// Resources by name.
    pub resources: BTreeMap<String, Resource>,
    /// Admitted pods, in admission order.
    pub pods: Vec<Pod>,
    /// The grace period after a stream end.
    pub grace_period: Duration,
    /// Next endpoint ID.
    pub next_endpoint_id: u64,
    /// Restarts so far.
    pub restarts: u32,
    /// Checkpoint entries of pods this sim does not know (carried over unchanged).
    pub foreign_entries: Vec<super::checkpoint::PodDevicesEntry>,
    /// When the current kubelet.sock was created.
    pub socket_created: Instant,
    /// Exclusive CPUs (static CPU manager) per pod UID, then container.
    pub exclusive_cpus: BTreeMap<String, BTreeMap<String, Vec<u32>>>,
}

impl State {
    /// A fresh state.
    pub fn new(grace_period: Duration) -> Self {
        State {
            resources: BTreeMap::new(),
            pods: Vec::new(),
            grace_period,
            next_endpoint_id: 1,
            restarts: 0,
            foreign_entries: Vec::new(),
            socket_created: Instant::now(),
            exclusive_cpus: BTreeMap::new(),
        }
    }

    /// A fresh ID for an endpoint or a generation.
    pub fn next_id(&mut self) -> u64 {
        let id = self.next_endpoint_id;
        self.next_endpoint_id += 1;
        id
    }

    /// Device IDs of `resource` held by any admitted pod (the kubelet's `allocatedDevices`).
    pub fn in_use(&self, resource: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for pod in &self.pods {
            for by_res in pod.allocs.values() {
                if let Some(a) = by_res.get(resource) {
                    out.extend(a.ids.iter().cloned());
                }
            }
        }
        out
    }

    /// True when any pod holds devices of `resource`.
    pub fn any_allocated(&self, resource: &str) -> bool {
        self.pods.iter().any(|p| p.allocs.values().any(|r| r.get(resource).is_some_and(|a| !a.ids.is_empty())))
    }

    /// The pod with this namespace and name.
    pub fn pod_index(&self, namespace: &str, name: &str) -> Option<usize> {
        self.pods.iter().position(|p| p.spec.namespace == namespace && p.spec.name == name)
    }

    /// A public view of everything (the device lists only `with_devices`).
    pub fn status(&self, paths: &StatusPaths, with_devices: bool) -> SimStatus {
        let now = Instant::now();
        let resources = self
            .resources
            .iter()
            .map(|(name, r)| {
                let c = r.counts();
                let in_use = self.in_use(name).len();
                ResourceStatus {
                    resource: name.clone(),
                    state: r.state_word().to_string(),
                    reported: r.reported,
                    capacity: c.capacity,
                    allocatable: c.allocatable,
                    in_use,
                    socket: r.endpoint.as_ref().map(|e| e.socket.display().to_string()),
                    endpoint: r.endpoint.as_ref().map(|e| e.endpoint.clone()),
                    via: r.endpoint.as_ref().map(|e| e.via),
                    pre_start_required: r.endpoint.as_ref().is_some_and(|e| e.options.pre_start_required),
                    get_preferred_allocation_available: r
                        .endpoint
                        .as_ref()
                        .is_some_and(|e| e.options.get_preferred_allocation_available),
                    snapshots: r.snapshots,
                    registrations: r.registrations,
                    removal_in_ms: r.stopped_at.filter(|_| !r.removed).map(|at| {
                        let left = (at + self.grace_period).saturating_duration_since(now);
                        u64::try_from(left.as_millis()).unwrap_or(u64::MAX)
                    }),
                    devices: if with_devices { r.devices.clone() } else { Vec::new() },
                }
            })
            .collect();
        let pods = self
            .pods
            .iter()
            .map(|p| PodStatus {
                name: p.spec.name.clone(),
                namespace: p.spec.namespace.clone(),
                uid: p.uid().to_string(),
                containers: container_views(p),
            })
            .collect();
        SimStatus {
            dir: paths.dir.clone(),
            kubelet_socket: paths.kubelet_socket.clone(),
            podresources_socket: paths.podresources_socket.clone(),
            control_socket: paths.control_socket.clone(),
            running: true,
            grace_period_ms: u64::try_from(self.grace_period.as_millis()).unwrap_or(u64::MAX),
            restarts: self.restarts,
            resources,
            pods,
        }
    }
}

/// The devices of each container of a pod, in spec order.
pub(crate) fn container_views(p: &Pod) -> Vec<super::events::ContainerDevicesView> {
    p.spec
        .containers
        .iter()
        .map(|c| super::events::ContainerDevicesView {
            name: c.name.clone(),
            kind: c.kind,
            devices: p
                .allocs
                .get(&c.name)
                .map(|m| m.iter().map(|(r, a)| (r.clone(), a.ids.clone())).collect())
                .unwrap_or_default(),
        })
        .collect()
}

/// Paths shown in the status.
#[derive(Debug, Clone)]
pub(crate) struct StatusPaths {
    pub dir: String,
    pub kubelet_socket: String,
    pub podresources_socket: Option<String>,
    pub control_socket: Option<String>,
}

/// The sim's state as `status` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct SimStatus {
    /// The device-plugin directory.
    pub dir: String,
    /// The registration socket.
    pub kubelet_socket: String,
    /// The PodResources socket, when served.
    pub podresources_socket: Option<String>,
    /// The control socket, when served.
    pub control_socket: Option<String>,
    /// False once the sim has stopped.
    pub running: bool,
    /// Grace period after a stream end.
    pub grace_period_ms: u64,
    /// Restarts so far.
    pub restarts: u32,
    /// Resources, by name.
    pub resources: Vec<ResourceStatus>,
    /// Admitted pods.
    pub pods: Vec<PodStatus>,
}

impl SimStatus {
    /// The resource with this name.
    pub fn resource(&self, name: &str) -> Option<&ResourceStatus> {
        self.resources.iter().find(|r| r.resource == name)
    }
}

/// One resource in the status.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ResourceStatus {
    /// Resource name.
    pub resource: String,
    /// `registered` (no snapshot yet), `serving`, `stream-ended`, `awaiting-registration`, `stopped`, `removed`.
    pub state: String,
    /// Shown in node status (after the first snapshot or a stream end).
    pub reported: bool,
    /// Node capacity.
    pub capacity: usize,
    /// Node allocatable.
    pub allocatable: usize,
    /// Devices held by pods.
    pub in_use: usize,
    /// The plugin socket.
    pub socket: Option<String>,
    /// The endpoint as registered.
    pub endpoint: Option<String>,
    /// How the plugin registered.
    pub via: Option<Via>,
    /// From GetDevicePluginOptions.
    pub pre_start_required: bool,
    /// From GetDevicePluginOptions.
    pub get_preferred_allocation_available: bool,
    /// ListAndWatch messages received.
    pub snapshots: u64,
    /// Registrations accepted.
    pub registrations: u64,
    /// Time left until capacity drops to 0 (after a stream end).
    pub removal_in_ms: Option<u64>,
    /// The last snapshot.
    pub devices: Vec<Device>,
}

/// One pod in the status.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct PodStatus {
    /// Pod name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// UID.
    pub uid: String,
    /// Containers and their devices.
    pub containers: Vec<super::events::ContainerDevicesView>,
}
