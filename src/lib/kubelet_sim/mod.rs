//! A simulated kubelet device manager: it serves `kubelet.sock` and accepts
//! plugin registrations exactly as a kubelet validates and answers them,
//! tracks devices through ListAndWatch, admits pods (GetPreferredAllocation,
//! Allocate, PreStartContainer), restarts like a kubelet (sockets deleted,
//! checkpoint kept, plugins expected back), and serves PodResources from its
//! own pods and devices.
//!
//! [`KubeletSim::start`] takes a plain [`SimConfig`] and returns a
//! [`SimHandle`] to drive it in-process; `dpctl kubelet-sim` is a thin layer
//! over it, and other processes steer a running sim through [`control`].
//!
//! Where the kubelet's behaviour changed between releases, the sim follows
//! v1.25+ (synchronous Register with dial-back; options from
//! GetDevicePluginOptions) and v1.26+ (`:authority: localhost`); what
//! changed from 1.26 on follows the release played ([`KubeletVersion`]),
//! a second registration of a resource included.

pub mod admission;
pub mod checkpoint;
pub mod control;
pub mod differences;
mod dra;
mod dra_api;
mod dra_claims;
mod dra_file;
pub use dra_file::MARKER_NAME as DRA_MARKER_NAME;
pub mod events;
mod late_socket;
mod manager;
mod outcome;
mod pod;
mod podres;
mod reboot;
mod registration;
mod registry;
mod restart;
pub mod steer;
pub mod topology;
pub mod version;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, broadcast, watch};
use tokio::task::JoinHandle;

pub use crate::kubelet_version::{Cleanup, cleanup_dir};
pub use admission::{
    AdmitOutcome, ContainerKind, ContainerOutcome, ContainerSpec, DeleteOutcome, PodSpec, PreferredCall,
    ResourceOutcome, RestartOutcome, UNEXPECTED_ADMISSION_ERROR, Warning,
};
pub use checkpoint::CheckpointStatus;
pub use events::{ContainerDevicesView, EventKind, RequestOptions, SimEvent, Via};
pub use manager::{ApiView, ClaimInfo, DraInstance, DraStatus, PreparedDevice};
pub use manager::{PodStatus, ResourceStatus, RestoredContainer, RestoredPodStatus, SimStatus, default_engine};
pub use outcome::{DraCall, DraOutcome};
pub use reboot::{RebootReport, seeded_order};
pub use registration::{DIAL_FAILED, MAX_RESOURCES, go_rpc_error};
pub use version::{CleanupRule, KubeletVersion};

use crate::error::{Error, Result};
use crate::model::Counts;
use crate::plugin_client::PluginClient;
use crate::podresources::server::{PodResourcesService, ServerConfig};
use crate::proto::deviceplugin::v1beta1::registration_server::RegistrationServer;
use crate::transport::{self, BindOptions};
use manager::{Effect, Effects, Manager, StatusPaths};

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
/// How many events the control protocol's `events` keeps (a plugin flapping
/// health for hours must not grow the sim without bound).
const MAX_WIRE_EVENTS: usize = 100_000;

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
            kubelet_version: KubeletVersion::DEFAULT,
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

/// The connection to a registered plugin (the manager keeps the endpoint
/// under the same ID).
struct Conn {
    /// Client for Allocate and GetPreferredAllocation.
    client: PluginClient,
    /// Client for PreStartContainer (its own deadline).
    pre_start: PluginClient,
    /// The ListAndWatch task.
    task: Option<tokio::task::AbortHandle>,
    /// The kubelet's `ClientConn.Close` of this connection (see [`registration::ConnClient`]).
    closing: tokio_util::sync::CancellationToken,
}

/// The socket server of kubelet.sock, stopped and re-created on restart.
struct ServerTask {
    stop: tokio::sync::oneshot::Sender<()>,
    join: JoinHandle<Result<()>>,
}

/// Paths the sim uses.
#[derive(Debug, Clone)]
struct Paths {
    dir: PathBuf,
    kubelet_socket: PathBuf,
    podresources_socket: Option<PathBuf>,
    control_socket: Option<PathBuf>,
    checkpoint: PathBuf,
    /// The record that this sim wrote the checkpoint.
    marker: PathBuf,
    /// The sim's own allocations while the checkpoint is read-only.
    journal: PathBuf,
}

/// Shared by the handle and every task of the sim.
pub(crate) struct Inner {
    config: SimConfig,
    paths: Paths,
    /// The device manager: every change to what the sim knows goes through it.
    manager: Mutex<Manager>,
    /// The plugin connections, by endpoint ID (the manager stores the endpoints).
    conns: Mutex<std::collections::HashMap<u64, Conn>>,
    events: broadcast::Sender<SimEvent>,
    first_events: Mutex<Option<broadcast::Receiver<SimEvent>>>,
    /// The events the control protocol's `events` answers, in order (bounded).
    wire_events: Mutex<Vec<control::WireEvent>>,
    /// Admissions, deletions and restarts take turns, as the kubelet's sync loop does.
    admission: tokio::sync::Mutex<()>,
    grace_changed: Notify,
    checkpoint_dirty: Notify,
    /// Serialises checkpoint writes: a snapshot is taken and written under
    /// it, so an older snapshot never lands after a newer one.
    checkpoint_write: std::sync::Mutex<()>,
    /// The tag in the names of the sim's temporary files (see
    /// [`checkpoint::clean_temps`]).
    tmp_tag: String,
    registry_rescan: Notify,
    /// The sim may write `dra_manager_state` (see [`dra`]).
    dra_writes: std::sync::atomic::AtomicBool,
    /// The embedded API server's objects, with `--api-objects`.
    api: std::sync::OnceLock<crate::apiserver::Handle>,
    /// The API server of `--kubeconfig`, read only.
    api_client: Option<crate::apiserver::client::Client>,
    /// `<dir>/.dpctl`, removed at stop when the sim created it and it is empty.
    control_dir: Mutex<Option<ControlDir>>,
    shutdown: watch::Sender<bool>,
    registration: tokio::sync::Mutex<Option<ServerTask>>,
    services: Mutex<Vec<JoinHandle<()>>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Inner {
    /// A sim's shared state before anything is served: no resources, no
    /// pods, the first event receiver kept for the first subscriber.
    fn new(config: SimConfig, paths: Paths) -> Inner {
        let (events, first_rx) = broadcast::channel(config.event_capacity.max(16));
        let (shutdown, _) = watch::channel(false);
        Inner {
            tmp_tag: checkpoint::temp_tag(&paths.marker),
            manager: Mutex::new(Manager::new(
                config.kubelet_version,
                config.grace_period,
                config.max_resources,
                config.topology.clone(),
                Instant::now(),
            )),
            conns: Mutex::new(std::collections::HashMap::new()),
            config,
            paths,
            events,
            first_events: Mutex::new(Some(first_rx)),
            wire_events: Mutex::new(Vec::new()),
            admission: tokio::sync::Mutex::new(()),
            grace_changed: Notify::new(),
            checkpoint_dirty: Notify::new(),
            checkpoint_write: std::sync::Mutex::new(()),
            registry_rescan: Notify::new(),
            dra_writes: std::sync::atomic::AtomicBool::new(false),
            api: std::sync::OnceLock::new(),
            api_client: None,
            control_dir: Mutex::new(None),
            shutdown,
            registration: tokio::sync::Mutex::new(None),
            services: Mutex::new(Vec::new()),
            tasks: Mutex::new(Vec::new()),
        }
    }

    /// The device manager. A poisoned lock (a panic elsewhere) still holds
    /// consistent data: every transition is one call without awaits.
    fn lock(&self) -> MutexGuard<'_, Manager> {
        self.manager.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The plugin connections.
    fn conns(&self) -> MutexGuard<'_, std::collections::HashMap<u64, Conn>> {
        self.conns.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The Allocate/GetPreferredAllocation client of endpoint `id`.
    fn client(&self, id: u64) -> Option<registration::ConnClient> {
        self.conns().get(&id).map(|c| registration::ConnClient::new(c.client.clone(), &c.closing))
    }

    /// The PreStartContainer client of endpoint `id`.
    fn pre_start_client(&self, id: u64) -> Option<registration::ConnClient> {
        self.conns().get(&id).map(|c| registration::ConnClient::new(c.pre_start.clone(), &c.closing))
    }

    /// The kubelet's client `Disconnect` of endpoint `id`: its connection
    /// closes, so every call on it, in flight or later, fails.
    fn close_conn(&self, id: u64) {
        if let Some(c) = self.conns().get(&id) {
            c.closing.cancel();
        }
    }

    /// Performs what a transition of the manager asks for, in order.
    fn apply(self: &Arc<Self>, effects: Effects) {
        for e in effects {
            match e {
                Effect::Emit(kind) => self.emit(kind),
                Effect::WriteCheckpoint => self.write_checkpoint_now(),
                Effect::StopStream(id) => {
                    self.close_conn(id);
                    if let Some(t) = self.conns().get_mut(&id).and_then(|c| c.task.take()) {
                        t.abort();
                    }
                }
                Effect::Close(id) => {
                    self.close_conn(id);
                    if let Some(t) = self.conns().remove(&id).and_then(|c| c.task) {
                        t.abort();
                    }
                }
                Effect::StartGrace { resource, generation } => registration::spawn_grace(self, &resource, generation),
            }
        }
    }

    /// Publishes an event.
    fn emit(&self, kind: EventKind) {
        let event = SimEvent { time: SystemTime::now(), kind };
        if let Some(w) = control::WireEvent::from_sim(&event) {
            let mut log = self.wire_events.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if log.len() < MAX_WIRE_EVENTS {
                log.push(w);
            }
        }
        let _ = self.events.send(event);
    }

    /// Writes the checkpoint now, as the kubelet does after each
    /// ListAndWatch update and when a resource is removed
    /// (`genericDeviceUpdateCallback` and `GetCapacity` in
    /// pkg/kubelet/cm/devicemanager/manager.go): a reader sees the new
    /// registered devices as soon as the update is applied.
    /// Not fsynced: the update holds no admission a crash could take back
    /// (the next write repeats it), and a plugin flapping health must not
    /// cost two disk syncs per message.
    fn write_checkpoint_now(&self) {
        if let Err(e) = self.write_checkpoint_with(false) {
            tracing::warn!(error = %e, "could not write the checkpoint");
        }
    }

    /// Asks for a checkpoint write within 100 ms.
    fn dirty(&self) {
        if self.config.checkpoint {
            self.checkpoint_dirty.notify_one();
        }
    }

    /// Keeps a background task so that `stop` can end it.
    fn track(&self, task: JoinHandle<()>) {
        let mut tasks = self.tasks.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    fn is_stopped(&self) -> bool {
        *self.shutdown.borrow()
    }

    fn shutdown_future(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.shutdown.subscribe();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    }

    /// True when the sim may write the checkpoint (enabled, and it wrote
    /// the file, created it, or was told to adopt it).
    fn writes_checkpoint(&self) -> bool {
        self.config.checkpoint && self.lock().writes_checkpoint()
    }

    /// Records the allocations durably where the sim keeps them: the
    /// checkpoint when it may write it, else its own file in `.dpctl/`;
    /// nothing with `--no-checkpoint`. The snapshot is taken under the write
    /// turn, so an older one never lands after a newer one.
    fn write_checkpoint(&self) -> Result<()> {
        self.write_checkpoint_with(true)
    }

    /// [`Inner::write_checkpoint`], fsynced only when `durable`.
    fn write_checkpoint_with(&self, durable: bool) -> Result<()> {
        if !self.config.checkpoint {
            return Ok(());
        }
        let _turn = self.checkpoint_write.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.writes_checkpoint() {
            let cp = self.lock().checkpoint();
            checkpoint::write_owned(&cp, &self.paths.checkpoint, &self.paths.marker, &self.tmp_tag, durable)
        } else {
            let cp = self.lock().journal();
            checkpoint::write_journal(&cp, &self.paths.journal, &self.tmp_tag, durable)
        }
    }

    /// Where an admitted pod's devices are recorded, for the admission's
    /// answer and `status`.
    fn kept_in(&self) -> String {
        if !self.config.checkpoint {
            "nowhere (--no-checkpoint): a sim killed now forgets this allocation".into()
        } else if self.writes_checkpoint() {
            self.paths.checkpoint.display().to_string()
        } else {
            format!(
                "{} (the checkpoint is read-only for the sim; it is restored from there at start)",
                self.paths.journal.display()
            )
        }
    }

    fn status_paths(&self) -> StatusPaths {
        StatusPaths {
            dir: self.paths.dir.display().to_string(),
            kubelet_socket: self.paths.kubelet_socket.display().to_string(),
            podresources_socket: self.paths.podresources_socket.as_ref().map(|p| p.display().to_string()),
            control_socket: self.paths.control_socket.as_ref().map(|p| p.display().to_string()),
        }
    }
}

/// Entry point: see the module docs.
#[derive(Debug)]
pub struct KubeletSim;

impl KubeletSim {
    /// Starts a sim: refuses a directory whose kubelet.sock a live process
    /// answers (unless `force`), reads an existing checkpoint, deletes the
    /// sockets in the directory as a kubelet does, and serves kubelet.sock,
    /// PodResources and the control socket.
    pub async fn start(config: SimConfig) -> Result<SimHandle> {
        config.topology.validate()?;
        config.kubelet_version.check_policy_options(&config.topology.options)?;
        let dir = config.dir.clone();
        // 0750, as the kubelet makes it.
        let made = crate::input::create_dir_undoable(&dir, 0o750)?;
        let control_dir = match ControlDir::check(&dir) {
            Ok(c) => c,
            Err(e) => {
                made.undo();
                return Err(e);
            }
        };
        let kubelet_socket = crate::paths::kubelet_socket(&dir);
        if is_live(&kubelet_socket).await && !config.force {
            control_dir.release();
            return Err(Error::AlreadyServing { path: kubelet_socket, force_flag: config.force_flag });
        }
        match Self::serve(config, dir, kubelet_socket, &control_dir).await {
            Ok(handle) => {
                made.keep();
                *handle.inner.control_dir.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(control_dir);
                Ok(handle)
            }
            Err(e) => {
                // A refused start leaves no directory it made.
                control_dir.release();
                made.undo();
                Err(e)
            }
        }
    }

    /// [`KubeletSim::start`] once the directory is known to be usable: binds
    /// and serves; on a failure, what it bound so far is closed again.
    async fn serve(config: SimConfig, dir: PathBuf, kubelet_socket: PathBuf, _ctl: &ControlDir) -> Result<SimHandle> {
        let bind_opts = BindOptions { force: config.force, force_flag: config.force_flag, ..BindOptions::default() };
        let control_path = config.control.then(|| crate::paths::control_socket(&dir, control::CONTROL_NAME));
        let control_listener = match &control_path {
            Some(p) => Some(transport::bind(p, &bind_opts).await?),
            None => None,
        };
        let podres_listener = match &config.podresources_socket {
            Some(p) => Some(transport::bind(p, &bind_opts).await?),
            None => None,
        };
        let paths = Paths {
            kubelet_socket: kubelet_socket.clone(),
            podresources_socket: config.podresources_socket.clone(),
            control_socket: control_path,
            checkpoint: dir.join(crate::paths::CHECKPOINT_FILE_NAME),
            marker: checkpoint::marker_path(&dir),
            journal: checkpoint::journal_path(&dir),
            dir: dir.clone(),
        };
        let api_client = match &config.api_kubeconfig {
            Some(k) => Some(crate::apiserver::client::Client::from_kubeconfig(k, "--kubeconfig")?),
            None => None,
        };
        let inner = Arc::new(Inner { api_client, ..Inner::new(config, paths) });
        let handle = SimHandle { inner: Arc::clone(&inner) };
        let api_task = dra::start(&inner).await?;
        let restored = load_checkpoint(&inner);
        let cleanup = if inner.config.cleanup_on_start { inner.startup_cleanup().await } else { Cleanup::default() };
        let mut services = spawn_services(&handle, podres_listener, control_listener);
        services.extend(api_task);
        let serving = async {
            late_socket::serve_registration_at(&inner).await?;
            match inner.config.registry_dir.clone() {
                Some(reg_dir) => registry::start(&inner, &reg_dir).map(Some),
                None => Ok(None),
            }
        };
        match serving.await {
            Ok(registry) => services.extend(registry),
            Err(e) => {
                // Not started: close what was opened, write nothing.
                inner.shutdown.send_replace(true);
                stop_registration(&inner).await;
                for s in services {
                    let _ = s.await;
                }
                return Err(e);
            }
        }
        for (name, generation) in &restored {
            registration::spawn_grace(&inner, name, *generation);
        }
        inner.services.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(services);
        inner.emit(EventKind::Started {
            kubelet_version: inner.config.kubelet_version,
            dir: dir.display().to_string(),
            kubelet_socket: inner.paths.kubelet_socket.display().to_string(),
            podresources_socket: inner.paths.podresources_socket.as_ref().map(|p| p.display().to_string()),
            control_socket: inner.paths.control_socket.as_ref().map(|p| p.display().to_string()),
            registry_dir: inner.config.registry_dir.as_ref().map(|p| p.display().to_string()),
            cleanup_rule: inner.config.kubelet_version.cleanup_rule(),
            deleted_sockets: cleanup.deleted_sockets,
            deleted_files: cleanup.deleted_files,
            would_delete: cleanup.would_delete,
            restored_resources: restored.into_iter().map(|(n, _)| n).collect(),
        });
        Ok(handle)
    }
}

/// A previous kubelet's checkpoint (docs/kubelet-versions.md §7): verified; a
/// valid one is restored (its resources show 0 until their plugins register,
/// its pods' devices are in use); a corrupt one restores nothing. Written
/// only when this sim wrote it or adopts it. Returns what [`restore`] did.
fn load_checkpoint(inner: &Arc<Inner>) -> Vec<(String, u64)> {
    if !inner.config.checkpoint {
        return Vec::new();
    }
    for path in checkpoint::clean_temps(&inner.paths.dir, &inner.paths.marker) {
        tracing::info!(path = %path, "deleted a temporary file an interrupted write of the sim left");
    }
    let loaded = checkpoint::load(
        &inner.paths.checkpoint,
        &inner.paths.marker,
        inner.config.adopt_checkpoint,
        inner.config.checkpoint_v1,
    );
    let mut status = loaded.status;
    let journal = match checkpoint::read_journal(&inner.paths.journal, inner.config.checkpoint_v1) {
        Ok(j) => j,
        Err(e) => {
            tracing::warn!(error = %e, "the sim's own allocations file cannot be used; nothing restored from it");
            status.journal_error = Some(e.to_string());
            None
        }
    };
    status.kept_in = Some(if status.writes {
        inner.paths.checkpoint.display().to_string()
    } else {
        status.ownership.push_str(&format!(
            "; the pods the sim admits are recorded in {} instead, and restored from there at start",
            inner.paths.journal.display()
        ));
        inner.paths.journal.display().to_string()
    });
    let cp = match &journal {
        Some(j) => {
            status.journal_entries = j.data.pod_device_entries.as_ref().map_or(0, Vec::len);
            Some(checkpoint::merge(loaded.checkpoint, j))
        }
        None => loaded.checkpoint,
    };
    announce_checkpoint(inner, &status);
    let writes = status.writes;
    inner.lock().set_checkpoint_status(status);
    let Some(cp) = cp else { return Vec::new() };
    if let Some(j) = &journal {
        inner.lock().set_journal_uids(j.data.pod_device_entries.iter().flatten().map(|e| e.pod_uid.clone()).collect());
    }
    let restored = restore(inner, &cp);
    // The sim may write the checkpoint again: what its own file held moves
    // into it, durably, before the file goes.
    if writes && journal.is_some() {
        match inner.write_checkpoint() {
            Ok(()) => {
                let _ = std::fs::remove_file(&inner.paths.journal);
                inner.lock().set_journal_uids(BTreeSet::new());
            }
            Err(e) => tracing::warn!(error = %e, "could not write the checkpoint; the allocations file stays"),
        }
    }
    restored
}

/// Serves PodResources and the control socket on their listeners, and
/// starts the checkpoint writer.
fn spawn_services(
    handle: &SimHandle,
    podres_listener: Option<transport::Listener>,
    control_listener: Option<transport::Listener>,
) -> Vec<JoinHandle<()>> {
    let inner = &handle.inner;
    let mut services = Vec::new();
    if let Some(listener) = podres_listener {
        let provider = Arc::new(podres::SimPodResources { inner: Arc::clone(inner) });
        let router = PodResourcesService::new(provider, inner.config.podresources.clone()).router();
        let stop = inner.shutdown_future();
        services.push(tokio::spawn(async move {
            if let Err(e) = transport::serve(router, listener, stop).await {
                tracing::warn!(error = %e, "PodResources server stopped");
            }
        }));
    }
    if let Some(listener) = control_listener {
        let sim = handle.clone();
        let handler = move |req| control::handle(sim.clone(), req);
        services.push(tokio::spawn(transport::control::serve(listener, handler, inner.shutdown_future())));
    }
    if inner.config.checkpoint {
        services.push(tokio::spawn(checkpoint_writer(Arc::clone(inner))));
    }
    services
}

/// `<dir>/.dpctl`, where the sim keeps its control socket and records.
/// Checked before anything is created: a symbolic link there is refused
/// (the sim would create and delete its sockets wherever it points, outside
/// `--dir`), and so is anything but a directory. Remembers whether it was
/// there, so that [`ControlDir::release`] removes only a directory the sim
/// created, and only when empty.
#[derive(Debug)]
struct ControlDir {
    path: PathBuf,
    existed: bool,
}

impl ControlDir {
    fn check(dir: &Path) -> Result<ControlDir> {
        let path = dir.join(crate::paths::CONTROL_DIR_NAME);
        let existed = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&path).map(|t| t.display().to_string()).unwrap_or_else(|_| "?".into());
                return Err(Error::invalid(
                    path.display().to_string(),
                    format!(
                        "a symbolic link (to {target}): the sim keeps its sockets and records in --dir only, never \
                         where a link points; remove the link"
                    ),
                ));
            }
            Ok(m) if !m.is_dir() => {
                return Err(Error::invalid(
                    path.display().to_string(),
                    "not a directory (dpctl keeps its sockets there)",
                ));
            }
            Ok(_) => true,
            Err(_) => false,
        };
        Ok(ControlDir { path, existed })
    }

    /// Removes the directory when the sim created it and left it empty
    /// (`remove_dir` refuses a directory with anything in it).
    fn release(&self) {
        if !self.existed {
            let _ = std::fs::remove_dir(&self.path);
        }
    }
}

/// True when a process answers gRPC on the socket.
async fn is_live(socket: &Path) -> bool {
    let is_socket = std::fs::symlink_metadata(socket).is_ok_and(|m| m.file_type().is_socket());
    is_socket && transport::connect(socket, Duration::from_millis(500)).await.is_ok()
}

impl Inner {
    /// The cleanup of the played version, on the sim's directory (a restart).
    fn cleanup(&self) -> Cleanup {
        let keep: Vec<PathBuf> = self.paths.podresources_socket.iter().cloned().collect();
        let rule = self.config.kubelet_version.cleanup_rule();
        cleanup_dir(&self.paths.dir, &keep, rule, self.config.owns_dir || self.config.emulate_cleanup)
    }

    /// The cleanup at start: the played version's, except that sockets
    /// something still answers on are left to their servers unless `force`
    /// (a deliberate difference from the kubelet, which deletes them too).
    async fn startup_cleanup(&self) -> Cleanup {
        let mut keep: Vec<PathBuf> = self.paths.podresources_socket.iter().cloned().collect();
        if !self.config.force {
            let live = live_sockets(&self.paths.dir, &keep).await;
            keep.extend(live);
        }
        let rule = self.config.kubelet_version.cleanup_rule();
        cleanup_dir(&self.paths.dir, &keep, rule, self.config.owns_dir || self.config.emulate_cleanup)
    }
}

/// The sockets directly in `dir` (or symlinks to sockets) that something
/// answers on, other than `ours`; each is logged as left in place.
async fn live_sockets(dir: &Path, ours: &[PathBuf]) -> Vec<PathBuf> {
    let mut live = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else { return live };
    for entry in rd.filter_map(std::result::Result::ok) {
        let path = entry.path();
        let is_socket = std::fs::metadata(&path).is_ok_and(|m| m.file_type().is_socket());
        if is_socket && !ours.contains(&path) && !transport::is_stale(&path).await {
            tracing::warn!(socket = %path.display(), "leaving a live socket in place (--force deletes it, as a kubelet would)");
            live.push(path);
        }
    }
    live
}

/// Logs and publishes what the sim found in the checkpoint at start.
fn announce_checkpoint(inner: &Inner, status: &CheckpointStatus) {
    match (&status.error, status.found.as_str()) {
        (Some(e), _) => tracing::warn!(
            checkpoint = %status.path,
            error = %e,
            "Continue after failing to read checkpoint file. Device allocation info may NOT be up-to-date"
        ),
        (None, "none") => tracing::info!(checkpoint = %status.path, "no checkpoint at start"),
        (None, _) => tracing::info!(
            checkpoint = %status.path,
            entries = status.restored_entries,
            "restored the checkpoint"
        ),
    }
    inner.emit(EventKind::CheckpointRead { checkpoint: status.clone() });
    if !status.writes {
        tracing::warn!(checkpoint = %status.path, "{}", status.ownership);
        inner.emit(EventKind::CheckpointReadOnly { path: status.path.clone(), reason: status.ownership.clone() });
    }
}

/// Restores a checkpoint into the manager (see [`Manager::restore`]).
fn restore(inner: &Arc<Inner>, cp: &crate::checkpoint::Checkpoint) -> Vec<(String, u64)> {
    inner.lock().restore(cp, Instant::now())
}

/// Binds kubelet.sock and serves the Registration service on it.
async fn serve_registration(inner: &Arc<Inner>) -> Result<()> {
    let opts = BindOptions { force: inner.config.force, force_flag: inner.config.force_flag, ..BindOptions::default() };
    let listener = transport::bind(&inner.paths.kubelet_socket, &opts).await?;
    inner.lock().socket_served(Instant::now());
    let service = registration::RegistrationService { inner: Arc::clone(inner) };
    let service = transport::WireService::new(RegistrationServer::new(service), inner.config.tap.clone());
    let router = transport::server_builder().add_service(service);
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let join = tokio::spawn(transport::serve(router, listener, async {
        let _ = rx.await;
    }));
    *inner.registration.lock().await = Some(ServerTask { stop, join });
    Ok(())
}

/// Stops serving kubelet.sock (the socket is removed).
async fn stop_registration(inner: &Arc<Inner>) {
    let task = inner.registration.lock().await.take();
    if let Some(t) = task {
        let _ = t.stop.send(());
        let _ = t.join.await;
    }
}

/// Writes the checkpoint after changes, at most every 100 ms.
async fn checkpoint_writer(inner: Arc<Inner>) {
    let mut shutdown = inner.shutdown.subscribe();
    loop {
        tokio::select! {
            () = inner.checkpoint_dirty.notified() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Err(e) = inner.write_checkpoint() {
            tracing::warn!(error = %e, "could not write the checkpoint");
        }
    }
}

/// Drives a running sim. Cheap to clone; every clone drives the same sim.
#[derive(Clone)]
pub struct SimHandle {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SimHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimHandle").field("dir", &self.inner.paths.dir).finish_non_exhaustive()
    }
}

impl SimHandle {
    /// The device-plugin directory.
    pub fn dir(&self) -> &Path {
        &self.inner.paths.dir
    }

    /// The registration socket.
    pub fn kubelet_socket(&self) -> &Path {
        &self.inner.paths.kubelet_socket
    }

    /// The PodResources socket, when served.
    pub fn podresources_socket(&self) -> Option<&Path> {
        self.inner.paths.podresources_socket.as_deref()
    }

    /// The control socket, when served.
    pub fn control_socket(&self) -> Option<&Path> {
        self.inner.paths.control_socket.as_deref()
    }

    /// A receiver of the events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<SimEvent> {
        self.inner.events.subscribe()
    }

    /// The control protocol's `events` from number `since` on, and the number to ask for next.
    pub fn wire_events(&self, since: u64) -> (Vec<control::WireEvent>, u64) {
        let log = self.inner.wire_events.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let from = usize::try_from(since).unwrap_or(usize::MAX).min(log.len());
        (log[from..].to_vec(), log.len() as u64)
    }

    /// A receiver of every event since the start (including `started`);
    /// only the first call gets it.
    pub fn events_from_start(&self) -> Option<broadcast::Receiver<SimEvent>> {
        self.inner.first_events.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }

    /// Admits a pod. A rejection is an `Ok` outcome with `admitted: false`;
    /// `Err` means the request itself is wrong (duplicate pod, bad names).
    pub async fn admit(&self, pod: PodSpec) -> Result<AdmitOutcome> {
        admission::admit(&self.inner, pod).await
    }

    /// Restarts one container of an admitted pod: PreStartContainer again
    /// where the plugin requires it; a failure stops only that container.
    pub async fn restart_container(&self, namespace: &str, pod: &str, container: &str) -> Result<RestartOutcome> {
        admission::restart_container(&self.inner, namespace, pod, container).await
    }

    /// Would this pod be admitted, and where? Nothing is allocated and no plugin is called.
    pub async fn admit_dry_run(&self, pod: PodSpec) -> Result<AdmitOutcome> {
        topology::dry_run(&self.inner, pod).await
    }

    /// Deletes a pod and frees its devices. `name` may also be the UID of a
    /// pod known only from the checkpoint (no admitted pod has that name):
    /// its entries are dropped and its devices freed.
    pub async fn delete(&self, namespace: &str, name: &str) -> Result<DeleteOutcome> {
        if let Some(freed) = self.release_restored(namespace, name).await {
            return Ok(freed);
        }
        let deleted = admission::delete(&self.inner, namespace, name).await;
        if deleted.is_err() && self.inner.lock().dra_holds(name) {
            // A pod known only from dra_manager_state (the sim was started
            // again): its claims are unprepared, as the kubelet's reconcile
            // loop does for pods that are gone.
            let spec = PodSpec::shorthand(name, namespace, &[]);
            let dra = dra::unprepare_pod(&self.inner, &spec, name, manager::Unpreparer::Gone).await.map(Box::new);
            return Ok(DeleteOutcome { pod: name.into(), namespace: namespace.into(), freed: BTreeMap::new(), dra });
        }
        deleted
    }

    /// Frees the checkpoint entries of the restored pod with UID `uid`.
    async fn release_restored(&self, namespace: &str, uid: &str) -> Option<DeleteOutcome> {
        let inner = &self.inner;
        let _turn = inner.admission.lock().await;
        let freed = inner.lock().release_restored(namespace, uid)?;
        inner.dirty();
        let ns = "(checkpoint)".to_string();
        inner.emit(EventKind::PodDeleted { pod: uid.into(), namespace: ns.clone(), freed: freed.clone() });
        let spec = PodSpec::shorthand(uid, namespace, &[]);
        let dra = dra::unprepare_pod(inner, &spec, uid, manager::Unpreparer::Gone).await.map(Box::new);
        Some(DeleteOutcome { pod: uid.into(), namespace: ns, freed, dra })
    }

    /// The state: resources, plugins, pods.
    pub fn status(&self) -> SimStatus {
        let mut s = self.inner.lock().status(&self.inner.status_paths(), true, Instant::now());
        s.resource_limit = self.inner.config.max_resources;
        s.running = !self.inner.is_stopped();
        s.kubelet_version = self.inner.config.kubelet_version;
        s.dra = self.dra_status();
        s
    }

    /// The DRA manager's part of the status, when it plays one.
    fn dra_status(&self) -> Option<Box<DraStatus>> {
        if !dra::enabled(&self.inner) {
            return None;
        }
        let mut st = self.inner.lock().dra_status();
        st.checkpoint =
            self.inner.config.registry_dir.as_deref().map(|r| dra_file::state_path(r).display().to_string());
        let root = self.inner.config.registry_dir.as_deref().and_then(std::path::Path::parent);
        st.api = match (self.inner.api.get(), &self.inner.api_client, &self.inner.config.api_kubeconfig) {
            (Some(h), _, _) => Some(manager::ApiView {
                server: h.url(),
                kubeconfig: root.map(|r| r.join("kubeconfig").display().to_string()).unwrap_or_default(),
                from: "--api-objects".into(),
            }),
            (None, Some(c), Some(k)) => Some(manager::ApiView {
                server: c.server().to_string(),
                kubeconfig: k.display().to_string(),
                from: "--kubeconfig".into(),
            }),
            _ => None,
        };
        Some(Box::new(st))
    }

    /// Like [`SimHandle::status`] without the device lists (cheap with many devices).
    pub fn summary(&self) -> SimStatus {
        let mut s = self.inner.lock().status(&self.inner.status_paths(), false, Instant::now());
        s.resource_limit = self.inner.config.max_resources;
        s.running = !self.inner.is_stopped();
        s.kubelet_version = self.inner.config.kubelet_version;
        s.dra = self.dra_status();
        s
    }

    /// Capacity and allocatable per resource, as node status shows them
    /// (resources not yet in node status are left out).
    pub fn counts(&self) -> BTreeMap<String, Counts> {
        self.inner.lock().counts()
    }

    /// Waits until `pred` holds for [`SimHandle::counts`], at most `timeout`.
    pub async fn wait_for_counts(
        &self,
        pred: impl Fn(&BTreeMap<String, Counts>) -> bool,
        timeout: Duration,
    ) -> Result<BTreeMap<String, Counts>> {
        let mut rx = self.subscribe();
        let deadline = crate::duration::deadline(timeout);
        loop {
            let counts = self.counts();
            if pred(&counts) {
                return Ok(counts);
            }
            tokio::select! {
                r = rx.recv() => {
                    if let Err(broadcast::error::RecvError::Closed) = r {
                        return Err(Error::invalid("kubelet-sim", "the sim has stopped"));
                    }
                }
                () = tokio::time::sleep_until(deadline) => {
                    return Err(Error::Timeout { what: "the expected device counts".into(), timeout });
                }
            }
        }
    }

    /// Sets the grace period after a stream end (running timers follow it).
    pub fn set_grace_period(&self, grace: Duration) {
        self.inner.lock().set_grace_period(grace);
        self.inner.grace_changed.notify_waiters();
        self.inner.emit(EventKind::GracePeriodSet { grace_period_ms: crate::text::millis(grace) });
    }

    /// Restarts the kubelet: stops kubelet.sock, drops every plugin
    /// connection, writes the checkpoint and reads it back (pods keep their
    /// devices; resources wait at 0), deletes the sockets in the directory
    /// (never this sim's own PodResources or control socket), serves a new
    /// kubelet.sock, then waits up to `wait` for every plugin to register
    /// again and send its devices.
    pub async fn restart(&self, wait: Duration) -> Result<RestartReport> {
        self.restart_readmit(wait, None).await
    }

    /// [`SimHandle::restart`] with the kubelet's re-admission of every pod,
    /// pods still running (see `restart.rs`): `readmit_after` after the new
    /// kubelet.sock, at once when `None` (every kubelet start admits the
    /// pods its sources hand it, HandlePodAdditions in pkg/kubelet/kubelet.go).
    pub async fn restart_readmit(&self, wait: Duration, readmit_after: Option<Duration>) -> Result<RestartReport> {
        self.restart_with(wait, Some(readmit_after.unwrap_or(Duration::ZERO))).await
    }

    /// `kubelet-sim restart --no-readmit`: a restart whose pods are not
    /// admitted again (they keep their devices unchecked). A sim-only
    /// choice: every kubelet start admits the pods its sources hand it.
    pub async fn restart_without_readmission(&self, wait: Duration) -> Result<RestartReport> {
        self.restart_with(wait, None).await
    }

    /// The restart itself; `readmit_after: None` re-admits nothing (a
    /// reboot admits its pods itself, their containers gone).
    // long: the kubelet restart in its order (stop, checkpoint read, socket cleanup, a new
    // kubelet.sock, the re-admission, the wait for re-registration).
    async fn restart_with(&self, wait: Duration, readmit_after: Option<Duration>) -> Result<RestartReport> {
        let inner = &self.inner;
        let turn = inner.admission.lock().await;
        if inner.is_stopped() {
            return Err(Error::invalid("kubelet-sim", "the sim has stopped"));
        }
        let expected: Vec<String> = inner.lock().expected_back();
        inner.emit(EventKind::Restarting { resources: expected.clone() });
        stop_registration(inner).await;
        let closed = inner.lock().drop_connections();
        inner.apply(closed);
        let snapshot = inner.lock().checkpoint();
        // A kubelet writes no checkpoint when it stops; the new one reads the
        // file as the old one last wrote it (readCheckpoint in
        // pkg/kubelet/cm/devicemanager/manager.go): a deleted pod's entries
        // are still there, and the devices listed are those of the last
        // device list update. A checkpoint the sim may not write is left
        // alone and the state carries over, as when there is no file (a
        // device manager that never held a device or a registration never
        // wrote one).
        let checkpoint = if inner.writes_checkpoint() && inner.paths.checkpoint.exists() {
            let _write = inner.checkpoint_write.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match crate::checkpoint::Checkpoint::read(&inner.paths.checkpoint, inner.config.checkpoint_v1)? {
                Some(cp) if cp.verify().ok() => cp,
                _ => snapshot,
            }
        } else {
            snapshot
        };
        let restored = restore(inner, &checkpoint);
        let restored_pods = inner.lock().pods_with_devices();
        let dra_restored_claims = dra::restart(inner)?;
        let cleanup = inner.cleanup();
        let mut rx = self.subscribe();
        // --kubelet-socket-delay holds at every start: the new kubelet.sock
        // appears late after a restart too (docs/kubelet-versions.md §10).
        let late = inner.config.kubelet_socket_delay;
        if !late.is_zero() {
            tokio::time::sleep(late).await;
        }
        serve_registration(inner).await?;
        let t0 = inner.lock().socket_created();
        inner.lock().restarted();
        for (name, generation) in &restored {
            registration::spawn_grace(inner, name, *generation);
        }
        inner.registry_rescan.notify_one();
        inner.emit(EventKind::Restarted {
            deleted_sockets: cleanup.deleted_sockets.clone(),
            deleted_files: cleanup.deleted_files.clone(),
            would_delete: cleanup.would_delete.clone(),
            restored_pods,
            restored_resources: restored.iter().map(|(n, _)| n.clone()).collect(),
        });
        drop(turn);
        let readmitted = match readmit_after {
            Some(after) => {
                inner.lock().set_sources_ready(false);
                let out = self.readmit_running(t0, after).await;
                inner.lock().set_sources_ready(true);
                out
            }
            None => Vec::new(),
        };
        let deadline = crate::duration::deadline(wait.saturating_sub(t0.elapsed()));
        let mut announced: BTreeSet<String> = BTreeSet::new();
        loop {
            let report = self.returns(&expected, t0);
            for r in report.iter().filter(|r| r.reregistered) {
                if announced.insert(r.resource.clone()) {
                    inner.emit(EventKind::PluginReregistered {
                        resource: r.resource.clone(),
                        after_ms: r.register_after_ms.unwrap_or(0),
                    });
                }
            }
            let done = report.iter().all(|r| r.reregistered && r.first_snapshot_after_ms.is_some());
            if done {
                break;
            }
            tokio::select! {
                r = rx.recv() => {
                    if let Err(broadcast::error::RecvError::Closed) = r {
                        break;
                    }
                }
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        let resources = self.returns(&expected, t0);
        // The DRA drivers count as the plugins do: every driver an admitted
        // pod's claims name must be registered again within the wait.
        let drivers = self.claim_drivers();
        let dra_ok =
            self.wait_dra_drivers(&drivers, deadline.saturating_duration_since(tokio::time::Instant::now())).await;
        let report = RestartReport {
            kubelet_version: inner.config.kubelet_version,
            cleanup_rule: inner.config.kubelet_version.cleanup_rule(),
            deleted_sockets: cleanup.deleted_sockets,
            deleted_files: cleanup.deleted_files,
            would_delete: cleanup.would_delete,
            restored_pods,
            checkpoint: inner.config.checkpoint.then(|| inner.paths.checkpoint.display().to_string()),
            waited_ms: crate::text::millis(t0.elapsed()),
            all_returned: dra_ok && resources.iter().all(|r| r.reregistered && r.first_snapshot_after_ms.is_some()),
            resources,
            readmitted,
            kubelet_socket_late_ms: (!late.is_zero()).then(|| crate::text::millis(late)),
            dra_restored_claims,
        };
        inner.emit(EventKind::RestartReport { report: report.clone() });
        Ok(report)
    }

    /// Per expected resource: registered since `t0`, and how fast.
    fn returns(&self, expected: &[String], t0: Instant) -> Vec<ResourceReturn> {
        let m = self.inner.lock();
        let ms = crate::text::millis;
        expected
            .iter()
            .map(|name| {
                let r = m.returned(name, t0);
                ResourceReturn {
                    resource: name.clone(),
                    reregistered: r.registered_at.is_some(),
                    register_after_ms: r.registered_at.map(|at| ms(at - t0)),
                    first_snapshot_after_ms: r.first_snapshot_at.map(|at| ms(at - t0)),
                    capacity: r.counts.capacity,
                    allocatable: r.counts.allocatable,
                }
            })
            .collect()
    }

    /// Stops the sim: closes every socket it serves (and removes them),
    /// drops plugin connections and writes the checkpoint a last time.
    pub async fn stop(&self) -> Result<()> {
        let inner = &self.inner;
        if inner.shutdown.send_replace(true) {
            return Ok(());
        }
        let _turn = inner.admission.lock().await;
        stop_registration(inner).await;
        let closed = inner.lock().drop_connections();
        inner.apply(closed);
        let tasks: Vec<JoinHandle<()>> =
            std::mem::take(&mut *inner.tasks.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        for t in tasks {
            t.abort();
        }
        let services: Vec<JoinHandle<()>> =
            std::mem::take(&mut *inner.services.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        for s in services {
            let _ = s.await;
        }
        let written = inner.write_checkpoint();
        if let Some(ctl) = inner.control_dir.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
            ctl.release();
        }
        inner.emit(EventKind::Stopped {});
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Pointed at a real node's directory, the sim must not cut off a live
    // listener (a real kubelet or plugin) by deleting its socket unless told
    // to with --force; stale sockets go, as a kubelet's cleanup would.
    #[tokio::test]
    async fn startup_cleanup_deletes_stale_sockets_only_unless_forced() {
        let dir = tempfile::Builder::new().prefix("dp").tempdir_in("/tmp").unwrap();
        let d = dir.path();
        std::fs::write(d.join("notes.txt"), "x").unwrap();
        let live = std::os::unix::net::UnixListener::bind(d.join("live.sock")).unwrap();
        drop(std::os::unix::net::UnixListener::bind(d.join("stale.sock")).unwrap());
        let live_ones = live_sockets(d, &[]).await;
        assert_eq!(live_ones, [d.join("live.sock")]);
        let c = cleanup_dir(d, &live_ones, CleanupRule::SocketsOnly, false);
        assert_eq!(c.deleted_sockets, ["stale.sock"]);
        assert!(d.join("live.sock").exists() && d.join("notes.txt").exists());
        let c = cleanup_dir(d, &[], CleanupRule::SocketsOnly, false);
        assert_eq!(c.deleted_sockets, ["live.sock"], "--force: as the kubelet");
        drop(live);
    }
}
