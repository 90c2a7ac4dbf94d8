//! The simulated device manager's state: per resource the last snapshot and
//! the plugin endpoint, per pod the devices of each container. Only the
//! manager (this folder) changes it; the shell holds it behind one mutex
//! that is never held across an await.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::kubelet_sim::events::Via;
use crate::kubelet_sim::outcome::CheckpointStatus;
use crate::kubelet_sim::pod::PodSpec;
use crate::model::{self, Counts, Device};
use crate::proto::deviceplugin::v1beta1 as dp;

/// NUMA key of a device that reports no topology (the kubelet's `nodeWithoutTopology`).
pub const NO_TOPOLOGY: i64 = -1;

/// A registered plugin as the device manager records it. The connection
/// itself (clients, the ListAndWatch task) is the shell's, kept under the
/// same `id`.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// Unique per registration.
    pub(super) id: u64,
    /// The endpoint as the plugin named it.
    pub(super) endpoint: String,
    /// The socket dialed.
    pub(super) socket: PathBuf,
    /// How the plugin registered.
    pub(super) via: Via,
    /// From GetDevicePluginOptions.
    pub(super) options: dp::DevicePluginOptions,
    /// Its ListAndWatch stream runs (the shell's task for it is live).
    pub(super) streaming: bool,
    /// When Register answered.
    pub(super) registered_at: Instant,
    /// When the first snapshot arrived.
    pub(super) first_snapshot_at: Option<Instant>,
    /// The stream ended (the kubelet's `isStopped`).
    pub(super) stopped: bool,
}

/// One extended resource, as the device manager tracks it.
#[derive(Debug, Default)]
pub(crate) struct Resource {
    /// The last snapshot (the kubelet's `allDevices`), in the plugin's order.
    pub(super) devices: Vec<Device>,
    /// The stream ended: every device counts as unhealthy until the next snapshot.
    pub(super) disconnected: bool,
    /// The grace period after the stream end passed: capacity 0.
    pub(super) removed: bool,
    /// Shown in node status (after the first snapshot or a stream end).
    pub(super) reported: bool,
    /// The current plugin connection.
    pub(super) endpoint: Option<Endpoint>,
    /// When the endpoint stopped (stream end, or restored after a restart).
    pub(super) stopped_at: Option<Instant>,
    /// Bumped on every registration and stop, so stale timers do nothing.
    pub(super) generation: u64,
    /// Snapshots received, over all registrations.
    pub(super) snapshots: u64,
    /// Registrations accepted.
    pub(super) registrations: u64,
    /// Restored from a checkpoint and not registered since.
    pub(super) restored: bool,
    /// The device manager has device sets for it (the kubelet's
    /// `healthyDevices[r]` exists): after the first snapshot, or restored
    /// from a checkpoint; not after a bare Register, nor after the removal.
    pub(super) sets: bool,
    /// Endpoints of replaced registrations whose streams still run (every
    /// release: `registerClient` in
    /// pkg/kubelet/cm/devicemanager/plugin/v1beta1/handler.go never closes the
    /// old connection); from 1.37 they stay in the endpoint store, and one
    /// takes over when the current endpoint's stream ends.
    pub(super) superseded: Vec<Endpoint>,
    /// docs/kubelet-versions.md §2 (1.26-1.36): a Register of this name failed its
    /// dial-back or GetDevicePluginOptions while a client was live, and
    /// `deregisterClient(name)` dropped the registration server's entry. The
    /// running streams' ends then find no client: no disconnect, no grace
    /// period, the devices keep their health. Cleared by the next successful
    /// Register (the name has a client again).
    pub(super) untracked: bool,
    /// 1.37+ (PR #135437, `deregisterClient(name, socketPath)` in
    /// `pkg/kubelet/cm/devicemanager/plugin/v1beta1/handler.go`): endpoints
    /// (ID, socket) whose client a failed Register at the same socket path
    /// dropped. They stay in the device manager's endpoint store, never
    /// disconnect (their stream end finds no client), and every later
    /// Register at that socket is refused as already connected.
    pub(super) untracked_clients: Vec<(u64, PathBuf)>,
    /// Why the last stream of this resource ended (kept until a new stream
    /// delivers a snapshot), for `kubelet-sim status`.
    pub(super) stream_end: Option<String>,
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

    /// The kubelet's `healthyDevices[r]` exists (docs/kubelet-versions.md §5):
    /// a first snapshot arrived, or it was restored, and it was not removed.
    pub fn known(&self) -> bool {
        !self.removed && self.sets
    }

    /// A short word for the resource's state.
    pub fn state_word(&self) -> &'static str {
        match (&self.endpoint, self.removed) {
            (_, true) => "removed",
            (None, false) if self.restored => "awaiting-registration",
            (None, false) => "stopped",
            (Some(e), false) if e.stopped => "stream-ended",
            // docs/kubelet-versions.md §2 (1.26-1.36): no client under the name.
            (Some(_), false) if self.untracked => "untracked",
            // 1.37+: the current endpoint's client was dropped by a failed Register at its socket.
            (Some(e), false) if self.untracked_clients.iter().any(|(id, _)| *id == e.id) => "untracked",
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
    /// Containers running now (a plain init container runs to completion),
    /// what the runtime reports at the next kubelet start.
    pub running: std::collections::BTreeSet<String>,
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
    pub(super) resources: BTreeMap<String, Resource>,
    /// Admitted pods, in admission order.
    pub(super) pods: Vec<Pod>,
    /// The grace period after a stream end.
    pub(super) grace_period: Duration,
    /// Next endpoint ID.
    pub(super) next_endpoint_id: u64,
    /// Restarts so far.
    pub(super) restarts: u32,
    /// Checkpoint entries of pods this sim does not know (carried over
    /// unchanged; their devices count as in use, as the kubelet's).
    pub(super) foreign_entries: Vec<crate::checkpoint::PodDevicesEntry>,
    /// What the sim found in the checkpoint at start, and whether it writes it.
    pub(super) checkpoint: Option<CheckpointStatus>,
    /// The pod being admitted, from its first container's allocation until
    /// the answer: every checkpoint write includes it, so a write between the
    /// last container's and the answer cannot drop it (the kubelet's
    /// `podDevices` holds a pod from its first allocation on).
    pub(super) admitting: Option<Pod>,
    /// UIDs of the entries restored from the sim's own allocations file
    /// (`.dpctl/`, used while the checkpoint is read-only): the sim's own
    /// pods, kept there again at every write; the checkpoint's other entries
    /// are not the sim's to record.
    pub(super) journal_uids: BTreeSet<String>,
    /// Register calls refused because the sim tracks its maximum of
    /// distinct resource names.
    pub(super) refused_over_limit: u64,
    /// When the current kubelet.sock was created.
    pub(super) socket_created: Instant,
    /// Exclusive CPUs (static CPU manager) per pod UID, then container.
    pub(super) exclusive_cpus: BTreeMap<String, BTreeMap<String, Vec<u32>>>,
    /// UIDs of the pods this sim deleted, killed or rejected: no longer
    /// active. Their checkpoint entries (a deletion writes nothing, as in
    /// the kubelet) come back at a restart among `foreign_entries` and are
    /// dropped the next time the device manager looks at the active pods
    /// with its sources ready (`UpdateAllocatedDevices`).
    pub(super) gone: BTreeSet<String>,
    /// False while a restarted kubelet admits its first pod list (its pod
    /// sources are not ready: `UpdateAllocatedDevices` drops nothing).
    pub(super) sources_ready: bool,
    /// Pods the admit handlers rejected, by namespace/name (the newest of
    /// that name): the kubelet's pod manager keeps a rejected pod (phase
    /// Failed) until the API server deletes it.
    pub(super) rejected: BTreeMap<(String, String), Pod>,
    /// Exclusive CPUs the static CPU manager gave a pod's containers before
    /// the pod was rejected, per pod UID then container: nothing releases
    /// them at the rejection; the CPU manager's next `removeStaleState`
    /// (at the start of its next GetTopologyHints or Allocate, for any
    /// pod) drops them (pkg/kubelet/cm/cpumanager/cpu_manager.go). Only
    /// a Get that finds rejected pods shows them.
    pub(super) stale_cpus: BTreeMap<String, BTreeMap<String, Vec<u32>>>,
}

impl State {
    /// A fresh state.
    pub fn new(grace_period: Duration, now: Instant) -> Self {
        State {
            resources: BTreeMap::new(),
            pods: Vec::new(),
            grace_period,
            next_endpoint_id: 1,
            restarts: 0,
            foreign_entries: Vec::new(),
            checkpoint: None,
            admitting: None,
            journal_uids: BTreeSet::new(),
            refused_over_limit: 0,
            socket_created: now,
            exclusive_cpus: BTreeMap::new(),
            gone: BTreeSet::new(),
            sources_ready: true,
            rejected: BTreeMap::new(),
            stale_cpus: BTreeMap::new(),
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
        // Restored from the checkpoint for pods the sim does not know
        // (docs/kubelet-versions.md §7: restored allocations are in use).
        for e in self.foreign_entries.iter().filter(|e| e.resource_name == resource) {
            out.extend(e.device_ids.ids());
        }
        out
    }

    /// True when any pod holds devices of `resource`.
    pub fn any_allocated(&self, resource: &str) -> bool {
        self.pods.iter().any(|p| p.allocs.values().any(|r| r.get(resource).is_some_and(|a| !a.ids.is_empty())))
            || self.foreign_entries.iter().any(|e| e.resource_name == resource && !e.device_ids.ids().is_empty())
    }

    /// The pod with this namespace and name.
    pub fn pod_index(&self, namespace: &str, name: &str) -> Option<usize> {
        self.pods.iter().position(|p| p.spec.namespace == namespace && p.spec.name == name)
    }

    /// A public view of everything (the device lists only `with_devices`).
    pub fn status(&self, paths: &StatusPaths, with_devices: bool, now: Instant) -> SimStatus {
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
                        crate::text::millis(left)
                    }),
                    devices: if with_devices { r.devices.clone() } else { Vec::new() },
                    stream_end_reason: r.stream_end.clone(),
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
            engine: default_engine(),
            kubelet_version: crate::kubelet_version::KubeletVersion::default(),
            dir: paths.dir.clone(),
            kubelet_socket: paths.kubelet_socket.clone(),
            podresources_socket: paths.podresources_socket.clone(),
            control_socket: paths.control_socket.clone(),
            running: true,
            grace_period_ms: crate::text::millis(self.grace_period),
            restarts: self.restarts,
            resources,
            pods,
            restored_pods: restored_pods(&self.foreign_entries),
            checkpoint: self.checkpoint.clone().map(Box::new),
            resource_limit: 0,
            refused_over_limit: self.refused_over_limit,
            dra: None,
        }
    }
}

/// Checkpoint entries of pods the sim does not know, grouped by pod UID
/// (the checkpoint has no pod names), in checkpoint order.
fn restored_pods(entries: &[crate::checkpoint::PodDevicesEntry]) -> Vec<RestoredPodStatus> {
    let mut out: Vec<RestoredPodStatus> = Vec::new();
    for e in entries {
        let i = match out.iter().position(|p| p.uid == e.pod_uid) {
            Some(i) => i,
            None => {
                out.push(RestoredPodStatus { uid: e.pod_uid.clone(), containers: Vec::new() });
                out.len() - 1
            }
        };
        let pod = &mut out[i];
        let j = match pod.containers.iter().position(|c| c.name == e.container_name) {
            Some(j) => j,
            None => {
                pod.containers.push(RestoredContainer { name: e.container_name.clone(), devices: BTreeMap::new() });
                pod.containers.len() - 1
            }
        };
        pod.containers[j].devices.entry(e.resource_name.clone()).or_default().extend(e.device_ids.ids());
    }
    out
}

/// The devices of each container of a pod, in spec order.
pub(crate) fn container_views(p: &Pod) -> Vec<crate::kubelet_sim::events::ContainerDevicesView> {
    p.spec
        .containers
        .iter()
        .map(|c| crate::kubelet_sim::events::ContainerDevicesView {
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

/// The engine a status comes from when it does not say (this sim).
pub fn default_engine() -> String {
    "kubelet-sim".to_string()
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
    /// What answers: `kubelet-sim`, or a referee running the kubelet's own
    /// code (`referee v1.37.2`), so that a report says which engine it shows.
    #[serde(default = "default_engine")]
    pub engine: String,
    /// The kubelet release the sim plays.
    #[serde(default)]
    pub kubelet_version: crate::kubelet_version::KubeletVersion,
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
    /// Pods the checkpoint holds devices for but the sim never admitted (a
    /// previous process's or a real kubelet's): known by UID only; their
    /// devices are in use.
    #[serde(default)]
    pub restored_pods: Vec<RestoredPodStatus>,
    /// The checkpoint: what was found at start and whether the sim writes it.
    #[serde(default)]
    pub checkpoint: Option<Box<CheckpointStatus>>,
    /// Distinct resource names the sim tracks at most.
    #[serde(default)]
    pub resource_limit: usize,
    /// Register calls refused for that limit.
    #[serde(default)]
    pub refused_over_limit: u64,
    /// The DRA manager (1.34+ with a plugins_registry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dra: Option<Box<super::dra::DraStatus>>,
}

/// A pod known only from the checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct RestoredPodStatus {
    /// Pod UID (the checkpoint has no names).
    pub uid: String,
    /// Containers and their devices.
    pub containers: Vec<RestoredContainer>,
}

/// A container of a pod known only from the checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct RestoredContainer {
    /// Container name.
    pub name: String,
    /// Device IDs per resource.
    pub devices: BTreeMap<String, Vec<String>>,
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
    /// `registered` (no snapshot yet), `serving`, `stream-ended`, `untracked` (1.26-1.36: a later Register
    /// of the name failed, docs/kubelet-versions.md §2), `awaiting-registration`, `stopped`, `removed`.
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
    /// Why the stream ended, while the resource is not served again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_end_reason: Option<String>,
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
    pub containers: Vec<crate::kubelet_sim::events::ContainerDevicesView>,
}
/// Device IDs per NUMA node, as the kubelet records them (`-1`: no topology).
pub(crate) fn numa_map(ids: &[String], devices: &[crate::model::Device]) -> BTreeMap<i64, Vec<String>> {
    let mut out: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for id in ids {
        let nodes = devices.iter().find(|d| &d.id == id).and_then(|d| d.numa_nodes.clone()).unwrap_or_default();
        if nodes.is_empty() {
            out.entry(NO_TOPOLOGY).or_default().push(id.clone());
        } else {
            for n in nodes {
                out.entry(n).or_default().push(id.clone());
            }
        }
    }
    out
}
