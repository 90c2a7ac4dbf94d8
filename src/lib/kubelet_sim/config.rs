//! How to run the sim: [`SimConfig`] and the kubelet's own defaults it
//! starts from. Plain data; the release played sets the servers' defaults
//! ([`SimConfig::set_kubelet_version`]).

use std::path::PathBuf;
use std::time::Duration;

use super::version::KubeletVersion;
use crate::podresources::server::ServerConfig;

/// The kubelet's `endpointStopGracePeriod`.
pub const DEFAULT_GRACE_PERIOD: Duration = Duration::from_secs(5 * 60);
/// The kubelet's `defaultWipingDelay` (pkg/kubelet/cm/dra/manager.go, 1.34-1.37).
pub const DEFAULT_DRA_WIPING_DELAY: Duration = Duration::from_secs(30);
/// The kubelet's dial-back timeout inside `Register`.
pub const DEFAULT_DIAL_TIMEOUT: Duration = Duration::from_secs(10);
/// `KubeletPreStartContainerRPCTimeoutInSecs`.
pub const DEFAULT_PRE_START_TIMEOUT: Duration = Duration::from_secs(30);
/// The plugin watcher's GetInfo timeout.
pub const DEFAULT_GET_INFO_TIMEOUT: Duration = Duration::from_secs(1);
/// Deadline the sim puts on GetDevicePluginOptions, GetPreferredAllocation
/// and Allocate (the kubelet sets none; a sim should not hang forever).
pub const DEFAULT_RPC_TIMEOUT: Duration = Duration::from_secs(60);

/// How to run the sim. Build it with [`SimConfig::new`] and change fields.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The device-plugin directory (kubelet.sock, plugin sockets, checkpoint).
    pub dir: PathBuf,
    /// Take over sockets a live process answers on.
    pub force: bool,
    /// The flag that sets `force`, named in errors.
    pub force_flag: &'static str,
    /// Where to serve PodResources; `None` serves none.
    pub podresources_socket: Option<PathBuf>,
    /// PodResources server behaviour (Get gate, rate limit).
    pub podresources: ServerConfig,
    /// Serve the control socket (`<dir>/.dpctl/kubelet-sim.sock`).
    pub control: bool,
    /// Also watch this plugins_registry directory.
    pub registry_dir: Option<PathBuf>,
    /// `(seen by the plugin, real)` path pairs for endpoints a plugin in a
    /// private mount namespace or a container reports through GetInfo
    /// (`smoke`): a translated path that exists is dialled instead.
    pub path_map: Vec<(PathBuf, PathBuf)>,
    /// Grace period after a stream end before capacity drops to 0.
    pub grace_period: Duration,
    /// Dial-back timeout inside Register.
    pub dial_timeout: Duration,
    /// Deadline of GetDevicePluginOptions, GetPreferredAllocation, Allocate.
    pub rpc_timeout: Duration,
    /// Deadline of PreStartContainer.
    pub pre_start_timeout: Duration,
    /// Deadline of GetInfo (plugins_registry).
    pub get_info_timeout: Duration,
    /// Write `kubelet_internal_checkpoint` (and read it at start).
    pub checkpoint: bool,
    /// Write a checkpoint this sim did not write (by default such a file is
    /// read and restored, never changed).
    pub adopt_checkpoint: bool,
    /// A claim of the pod's manifest without `status.reservedFor` counts as
    /// reserved for the pod (`--assume-claims-reserved`; the kubelet's
    /// `IsReservedForPod` refuses an empty list).
    pub assume_claims_reserved: bool,
    /// Read the pre-1.20 checkpoint layout (kubelets up to 1.30 do).
    pub checkpoint_v1: crate::checkpoint::LegacyFormat,
    /// Delete the sockets in the directory at start, as a kubelet does.
    pub cleanup_on_start: bool,
    /// Events buffered per subscriber.
    pub event_capacity: usize,
    /// The kubelet release the sim plays (see [`version`]).
    pub kubelet_version: KubeletVersion,
    /// The sim created the directory itself (smoke's, demo's): its restart
    /// cleanup may delete files that are not sockets, as the chosen kubelet
    /// does. Otherwise only sockets are deleted and the report lists what
    /// that kubelet would also have deleted.
    pub owns_dir: bool,
    /// Delete what the chosen kubelet deletes (non-socket files too) even in
    /// a directory the sim did not create (`--emulate-cleanup`). The
    /// checkpoint is never deleted.
    pub emulate_cleanup: bool,
    /// Topology Manager, CPU manager and the simulated machine.
    pub topology: crate::topology::TopologyConfig,
    /// Distinct resource names tracked at most (a Register over it is
    /// refused with `ResourceExhausted`); [`MAX_RESOURCES`] by default.
    pub max_resources: usize,
    /// Create kubelet.sock this long after the sim has started
    /// (`--kubelet-socket-delay`; zero: at once).
    pub kubelet_socket_delay: Duration,
    /// Where to report the sim's calls to plugins on the wire (`smoke -v`).
    pub tap: Option<crate::transport::Tap>,
    /// Deadline of each NodePrepareResources and NodeUnprepareResources
    /// call: the kubelet's 45 s unless a user lowers it (`dra smoke --timeout`).
    pub dra_call_timeout: Duration,
    /// Serve these API objects in-process (`--api-objects`): the claims
    /// `admit` looks up, and the API a helper-built DRA driver needs
    /// (docs/dra.md §6). Needs `registry_dir`.
    pub api_objects: Option<PathBuf>,
    /// How long a DRA driver has to come back after its last instance went
    /// before its ResourceSlices are deleted (the kubelet's 30 s `defaultWipingDelay`).
    pub dra_wiping_delay: Duration,
    /// Read the claims `admit` looks up from this kubeconfig's API server
    /// instead (`--kubeconfig`; plain HTTP, e.g. `kubectl proxy`); nothing is
    /// written there.
    pub api_kubeconfig: Option<PathBuf>,
}

impl SimConfig {
    /// The defaults of the newest kubelet release, for a sim serving `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        SimConfig {
            podresources_socket: Some(dir.join(crate::paths::SIM_PODRESOURCES_SOCKET_NAME)),
            dir,
            force: false,
            force_flag: "--force",
            podresources: ServerConfig::default(),
            control: true,
            registry_dir: None,
            path_map: Vec::new(),
            grace_period: DEFAULT_GRACE_PERIOD,
            dial_timeout: DEFAULT_DIAL_TIMEOUT,
            rpc_timeout: DEFAULT_RPC_TIMEOUT,
            pre_start_timeout: DEFAULT_PRE_START_TIMEOUT,
            get_info_timeout: DEFAULT_GET_INFO_TIMEOUT,
            checkpoint: true,
            adopt_checkpoint: false,
            assume_claims_reserved: false,
            checkpoint_v1: crate::checkpoint::LegacyFormat::Refuse,
            cleanup_on_start: true,
            event_capacity: 16 * 1024,
            kubelet_version: KubeletVersion::NEWEST,
            owns_dir: false,
            emulate_cleanup: false,
            topology: crate::topology::TopologyConfig::default(),
            max_resources: MAX_RESOURCES,
            kubelet_socket_delay: Duration::ZERO,
            tap: None,
            dra_call_timeout: crate::dra::KUBELET_CALL_TIMEOUT,
            api_objects: None,
            dra_wiping_delay: DEFAULT_DRA_WIPING_DELAY,
            api_kubeconfig: None,
        }
    }

    /// Plays kubelet release `v`: sets [`SimConfig::kubelet_version`] and
    /// the checkpoint formats and PodResources defaults of that release
    /// (v1 checkpoints up to 1.30, Get gate, rate limit).
    pub fn set_kubelet_version(&mut self, v: KubeletVersion) {
        self.kubelet_version = v;
        self.checkpoint_v1 = if v.reads_v1_checkpoint() {
            crate::checkpoint::LegacyFormat::Accept
        } else {
            crate::checkpoint::LegacyFormat::Refuse
        };
        self.podresources.get_enabled = v.podresources_get_default();
        self.podresources.get_exists = v.podresources_has_get();
        self.podresources.rate_limit =
            if v.podresources_rate_limited() { ServerConfig::default().rate_limit } else { None };
    }
}

/// Distinct resource names the sim tracks at once by default
/// ([`SimConfig::max_resources`]). Each costs a device
/// table, a plugin connection and its ListAndWatch task (about 60 KB); a
/// kubelet has no limit, but 3,000 names took the sim from 25 to 207 MB, so
/// a client looping over names could exhaust a CI runner. A Register of a
/// known name is always taken.
pub const MAX_RESOURCES: usize = 1024;
