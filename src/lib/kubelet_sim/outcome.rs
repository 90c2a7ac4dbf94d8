//! What kubelet_sim's operations report: an admission's outcome per
//! container and resource (with the GetPreferredAllocation call and contract
//! warnings), the Topology Manager's report, and the checkpoint's status at
//! start. A leaf module of plain data (it uses only [`super::pod`]), so that
//! admission, topology, state and events can share it without using each
//! other.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::pod::{ContainerKind, ContainerSpec};
use super::version::{CleanupRule, KubeletVersion};
use crate::checkpoint::Format;
use crate::model::ContainerAllocation;
use crate::topology::HintView;

/// The reason the kubelet gives a pod whose device allocation failed.
pub const UNEXPECTED_ADMISSION_ERROR: &str = crate::kubelet_texts::UNEXPECTED_ADMISSION_ERROR;

/// A GetPreferredAllocation call the sim made, with its inputs and the answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreferredCall {
    /// `available_deviceIDs`.
    pub available: Vec<String>,
    /// `must_include_deviceIDs`.
    pub must_include: Vec<String>,
    /// `allocation_size`.
    pub size: i32,
    /// `container_responses[0].deviceIDs`.
    pub answer: Vec<String>,
    /// Contract rules the answer breaks (the kubelet copes; shown as warnings).
    pub warnings: Vec<Warning>,
}

/// A broken contract rule, as a warning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// Rule name.
    pub rule: String,
    /// Evidence.
    pub evidence: String,
}

impl From<crate::contract::Violation> for Warning {
    fn from(v: crate::contract::Violation) -> Self {
        Warning { rule: v.rule.to_string(), evidence: v.evidence }
    }
}

/// What happened for one resource of one container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceOutcome {
    /// Resource name.
    pub resource: String,
    /// The container's limit.
    pub requested: u64,
    /// Devices reused from plain init containers.
    pub reused: Vec<String>,
    /// The GetPreferredAllocation call, when one was made.
    pub preferred: Option<PreferredCall>,
    /// The devices given to the container.
    pub devices: Vec<String>,
    /// The Allocate answer for the container (absent for a stripped request
    /// and in a dry run; the kubelet calls Allocate even for reused devices).
    pub allocation: Option<ContainerAllocation>,
    /// Contract rules the Allocate answer breaks (warnings).
    pub warnings: Vec<Warning>,
    /// PreStartContainer result: `ok`, or the error; absent when not required.
    pub pre_start: Option<String>,
}

/// What happened for one container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerOutcome {
    /// Container name.
    pub name: String,
    /// Init, sidecar or regular.
    pub kind: ContainerKind,
    /// Per resource in its limits that the device manager handles.
    pub resources: Vec<ResourceOutcome>,
    /// The container would start (every PreStartContainer worked).
    pub started: bool,
    /// Why it would not start.
    pub start_error: Option<String>,
    /// At a re-admission after a kubelet restart: whether the runtime
    /// reported the container running (1.27+ then checks none of its devices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<bool>,
}

impl ContainerOutcome {
    /// Records the devices `c` already holds (restored from the checkpoint,
    /// kept across a restart or a reboot): no Allocate, no preference, no
    /// PreStartContainer.
    pub fn keep(&mut self, c: &ContainerSpec, resource: &str, ids: &[String]) {
        self.resources.push(ResourceOutcome {
            resource: resource.to_string(),
            requested: c.limits.get(resource).copied().unwrap_or_default(),
            reused: Vec::new(),
            preferred: None,
            devices: ids.to_vec(),
            allocation: None,
            warnings: Vec::new(),
            pre_start: None,
        });
    }

    /// A container not started yet, with no resources handled.
    pub fn new(c: &ContainerSpec) -> Self {
        ContainerOutcome {
            name: c.name.clone(),
            kind: c.kind,
            resources: Vec::new(),
            started: false,
            start_error: None,
            running: None,
        }
    }
}

/// The answer to an admission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdmitOutcome {
    /// Pod name.
    pub pod: String,
    /// Namespace.
    pub namespace: String,
    /// Pod UID.
    pub uid: String,
    /// True when the pod was admitted.
    pub admitted: bool,
    /// The kubelet's reason when rejected (`UnexpectedAdmissionError`, `OutOf<resource>`).
    pub reason: Option<String>,
    /// The kubelet's message when rejected.
    pub message: Option<String>,
    /// Per container, in spec order (up to the failure when rejected).
    pub containers: Vec<ContainerOutcome>,
    /// How long admission took.
    pub took_ms: u64,
    /// Topology Manager hints and verdicts, exclusive CPUs, NUMA placement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<Box<TopologyReport>>,
    /// Where the admitted pod's devices were recorded before the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_in: Option<String>,
    /// The DRA manager's part, for a pod with `resourceClaims`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dra: Option<Box<DraOutcome>>,
}

/// What the DRA manager did for a pod: its calls, the first error (the
/// kubelet's text; the containers do not start) and each container's CDI IDs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraOutcome {
    /// The calls made, in order (one per driver).
    pub calls: Vec<DraCall>,
    /// The error, as the kubelet reports it (`prepare dynamic resources: ...`).
    pub error: Option<String>,
    /// Container name -> the CDI device IDs the runtime gets.
    #[serde(default)]
    pub cdi_devices: BTreeMap<String, Vec<String>>,
    /// Claims whose last user went and that were unprepared (delete only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unprepared: Vec<String>,
}

/// One NodePrepareResources or NodeUnprepareResources call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraCall {
    /// The driver.
    pub driver: String,
    /// The service socket called.
    pub endpoint: String,
    /// `<advertised service>/<method>`.
    pub rpc: String,
    /// The claims sent, `namespace/name`.
    pub claims: Vec<String>,
    /// Time to the answer.
    pub took_ms: u64,
}

impl AdmitOutcome {
    /// The outcome of `spec` (with this UID) before anything was decided.
    pub fn pending(spec: &super::pod::PodSpec, uid: String) -> Self {
        AdmitOutcome {
            pod: spec.name.clone(),
            namespace: spec.namespace.clone(),
            uid,
            admitted: false,
            reason: None,
            message: None,
            containers: Vec::new(),
            took_ms: 0,
            topology: None,
            kept_in: None,
            dra: None,
        }
    }

    /// Devices of a container for a resource.
    pub fn devices(&self, container: &str, resource: &str) -> Vec<String> {
        self.containers
            .iter()
            .find(|c| c.name == container)
            .and_then(|c| c.resources.iter().find(|r| r.resource == resource))
            .map(|r| r.devices.clone())
            .unwrap_or_default()
    }
}

/// The hints of one provider for one resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderHintsView {
    /// `device`, `cpu` or `memory`.
    pub provider: String,
    /// The resource; absent when the provider gave no hints at all ("no preference").
    pub resource: Option<String>,
    /// What was asked of it.
    pub request: u64,
    /// The hints; `null` is the kubelet's nil list (don't care), `[]` cannot be satisfied.
    pub hints: Option<Vec<HintView>>,
}

/// One merge: for a container (scope `container`) or the pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopologyDecision {
    /// The container; absent in scope `pod`.
    pub container: Option<String>,
    /// Every provider's hints.
    pub hints: Vec<ProviderHintsView>,
    /// The merged best hint (stored for allocation).
    pub best: HintView,
    /// The policy's verdict.
    pub admit: bool,
}

/// Where a container's devices or CPUs went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// Container name.
    pub container: String,
    /// Resource name (`cpu` for exclusive CPUs).
    pub resource: String,
    /// IDs per NUMA node (`-1`: no topology); a device on two nodes is under both.
    pub numa: Vec<NumaIds>,
}

/// IDs on one NUMA node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaIds {
    /// The NUMA node (`-1`: no topology).
    pub numa: i64,
    /// Device or CPU IDs.
    pub ids: Vec<String>,
}

pub(crate) fn numa_ids(m: &BTreeMap<i64, Vec<String>>) -> Vec<NumaIds> {
    m.iter().map(|(n, ids)| NumaIds { numa: *n, ids: ids.clone() }).collect()
}

/// What the Topology Manager and CPU manager did for an admission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopologyReport {
    /// `--topology-manager-policy`.
    pub policy: String,
    /// `--topology-manager-scope`.
    pub scope: String,
    /// `--cpu-manager-policy`.
    pub cpu_manager_policy: String,
    /// True for `admit --dry-run`: nothing was allocated and no plugin was called.
    pub dry_run: bool,
    /// A dry run of a pod already admitted: judged as a second pod like it,
    /// beside the first (which keeps its devices).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub beside_admitted: bool,
    /// The merges, in order (none under policy `none`).
    pub decisions: Vec<TopologyDecision>,
    /// Devices and exclusive CPUs per container and NUMA node.
    pub placements: Vec<Placement>,
    /// Exclusive CPUs per container (static CPU manager).
    pub cpus: BTreeMap<String, Vec<u32>>,
}

/// What the sim found in the checkpoint file at start, and whether it writes it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CheckpointStatus {
    /// The checkpoint file.
    pub path: String,
    /// At start: `none` (no file), `valid`, `corrupt` (checksum mismatch),
    /// `unreadable` (not JSON the kubelet can parse into its types).
    pub found: String,
    /// The layout, when the file parsed.
    pub format: Option<Format>,
    /// `Checksum` in the file.
    pub stored_checksum: Option<u64>,
    /// The checksum the kubelet computes for its `Data`.
    pub computed_checksum: Option<u64>,
    /// Why the file was not used, when it was not.
    pub error: Option<String>,
    /// Entries restored from it at start.
    pub restored_entries: usize,
    /// The sim writes the file.
    pub writes: bool,
    /// Why it writes it or not.
    pub ownership: String,
    /// Where the sim records the pods it admits: the checkpoint, or (while
    /// the checkpoint is read-only) its own file in `.dpctl/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_in: Option<String>,
    /// Entries restored from the sim's own allocations file at start.
    #[serde(default)]
    pub journal_entries: usize,
    /// Why the sim's own allocations file was not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_error: Option<String>,
}

/// Whether and how fast one resource's plugin came back after a restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceReturn {
    /// Resource name.
    pub resource: String,
    /// The plugin registered again.
    pub reregistered: bool,
    /// Time from the new kubelet.sock to the answered Register.
    pub register_after_ms: Option<u64>,
    /// Time from the new kubelet.sock to the first snapshot.
    pub first_snapshot_after_ms: Option<u64>,
    /// Capacity when the report was made.
    pub capacity: usize,
    /// Allocatable when the report was made.
    pub allocatable: usize,
}

/// What a restart did and who came back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartReport {
    /// The kubelet release the sim plays.
    #[serde(default)]
    pub kubelet_version: KubeletVersion,
    /// What the played kubelet deletes at start.
    #[serde(default)]
    pub cleanup_rule: CleanupRule,
    /// Sockets deleted from the directory.
    pub deleted_sockets: Vec<String>,
    /// Other entries deleted (only in a directory the sim created, or with `--emulate-cleanup`).
    #[serde(default)]
    pub deleted_files: Vec<String>,
    /// Entries that kubelet would also have deleted, kept because the sim did not create the directory.
    #[serde(default)]
    pub would_delete: Vec<String>,
    /// Pods whose allocations were restored from the checkpoint.
    pub restored_pods: usize,
    /// The checkpoint written and read back, when enabled.
    pub checkpoint: Option<String>,
    /// How long the sim waited.
    pub waited_ms: u64,
    /// Every resource's plugin registered again and sent a snapshot.
    pub all_returned: bool,
    /// Per resource known before the restart.
    pub resources: Vec<ResourceReturn>,
    /// Every pod admitted again after the restart (when asked), in admission
    /// order: its containers with `running` (what the runtime reported) and
    /// the devices they hold; a rejected pod was killed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readmitted: Vec<AdmitOutcome>,
    /// How long kubelet.sock stayed away between the cleanup and its
    /// re-creation (`--kubelet-socket-delay`; absent: at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_socket_late_ms: Option<u64>,
    /// Claims read back from `dra_manager_state`.
    #[serde(default)]
    pub dra_restored_claims: usize,
}
