//! A mock DRA driver: registers on `plugins_registry` with type `DRAPlugin`
//! and the services it is told to advertise (any mix, any order), serves
//! `NodePrepareResources`/`NodeUnprepareResources` per claim on its
//! endpoint socket, writes one CDI spec file per prepared claim, streams
//! device health, and misbehaves on request ([`Faults`]). Every call is
//! reported as a [`DraEvent`] and, with a record file, written as a JSON line.
//!
//! Without an API server the mock cannot read a claim's allocation, so it
//! allocates itself: each new claim gets `devices_per_claim` free devices of
//! its one pool, and keeps them until it is unprepared. With one
//! ([`ApiOptions`], `--kubeconfig`) it publishes its pool as a ResourceSlice
//! and prepares the devices of each claim's allocation, as a driver on the
//! `kubeletplugin` helper does (see `api`).

mod api;
mod core;
mod wire;

pub use api::SliceWrite;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use tokio::sync::mpsc;

use super::Service;
use crate::error::{Error, Result};
use crate::mock_plugin::record::Recorder;

/// What to break.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Leave the first claim of each Prepare out of the answer.
    pub missing_uid: bool,
    /// A claim prepared again gets other devices (drivers must be idempotent).
    pub not_idempotent: bool,
    /// Answer with CDI IDs but write no spec: the runtime cannot resolve them.
    pub unresolvable_cdi: bool,
    /// Answer CDI IDs that do not parse (`/` and `=` missing).
    pub bad_cdi_id: bool,
    /// Advertise health but do not serve it.
    pub health_unserved: bool,
    /// Answer GetInfo once only: a kubelet that restarts cannot register the driver again.
    pub register_once: bool,
    /// Wait this long before answering Prepare (45 s is the kubelet's deadline).
    pub prepare_delay: Option<Duration>,
    /// Answer every claim of Prepare with this error.
    pub prepare_error: Option<String>,
    /// Fail Prepare as a whole with this gRPC status.
    pub prepare_status: Option<tonic::Code>,
    /// Answer every claim of Unprepare with this error.
    pub unprepare_error: Option<String>,
    /// Answer every claim with the pool's first device (its CDI ID), whatever
    /// was allocated: two claims, one device.
    pub same_device: bool,
    /// Answer every claim of Prepare with no device and no error.
    pub no_device: bool,
    /// Answer each device one past the pool's last (`dev-N` of N devices),
    /// which no ResourceSlice publishes: an off-by-one in the driver.
    pub unpublished_device: bool,
}

/// How the mock driver runs.
#[derive(Debug, Clone)]
pub struct MockConfig {
    /// The driver name (a DNS subdomain, e.g. `gpu.example.com`).
    pub driver: String,
    /// Where the registration socket goes (`<driver>-reg.sock`).
    pub registry_dir: PathBuf,
    /// The service socket (the endpoint it registers).
    pub endpoint: PathBuf,
    /// Where CDI spec files go.
    pub cdi_dir: PathBuf,
    /// `supported_versions`, in this order.
    pub services: Vec<Service>,
    /// The pool of its devices.
    pub pool: String,
    /// How many devices (`dev-0` ...).
    pub devices: usize,
    /// Devices per claim.
    pub devices_per_claim: usize,
    /// `request_names` of every device answered (empty: all requests).
    pub request_names: Vec<String>,
    /// Devices reported unhealthy on the health stream.
    pub unhealthy: BTreeSet<String>,
    /// Health stream period.
    pub health_interval: Duration,
    /// What to break.
    pub faults: Faults,
    /// JSON Lines record of every call.
    pub record: Option<PathBuf>,
    /// The host device node each device's CDI entry adds (`{index}`: the
    /// device's number, `{device}`: its name); none when unset.
    pub device_node: Option<String>,
}

impl MockConfig {
    /// The registration socket path.
    pub fn registration_socket(&self) -> PathBuf {
        self.registry_dir.join(format!("{}-reg.sock", self.driver))
    }

    /// Checks the configuration; the error names the flag.
    pub fn check(&self) -> Result<()> {
        if !crate::validate::is_dns1123_subdomain(&self.driver) {
            return Err(Error::invalid(
                "DRIVER",
                format!(
                    "{:?} is not a DNS subdomain (lowercase letters, digits, '-', '.'), as driver names must be",
                    self.driver
                ),
            ));
        }
        if self.devices == 0 || self.devices > 100_000 {
            return Err(Error::invalid("--devices", format!("{} devices; 1 to 100000", self.devices)));
        }
        if self.devices_per_claim == 0 || self.devices_per_claim > self.devices {
            return Err(Error::invalid(
                "--devices-per-claim",
                format!("{}; 1 to --devices ({})", self.devices_per_claim, self.devices),
            ));
        }
        if !crate::validate::is_dns1123_subdomain(&self.pool) {
            let shown: String = self.pool.chars().take(64).collect();
            return Err(Error::invalid("--pool", format!("{shown:?} is not a DNS subdomain, as pool names must be")));
        }
        // '/' stays allowed: answering a subrequest name is a fault worth playing.
        if let Some(bad) =
            self.request_names.iter().find(|r| r.is_empty() || r.len() > 253 || r.chars().any(char::is_control))
        {
            let shown: String = bad.chars().take(64).collect();
            return Err(Error::invalid(
                "--request-name",
                format!("{shown:?}: 1 to 253 characters, no control characters"),
            ));
        }
        if self.health_interval < Duration::from_millis(100) {
            return Err(Error::invalid("--health-interval", "at least 100ms"));
        }
        if self.services.is_empty() {
            return Err(Error::invalid(
                "--service",
                "no services: a driver advertises at least one (e.g. --service v1)",
            ));
        }
        if let Some(t) = &self.device_node
            && (!t.starts_with('/') || t.len() > 4096 || t.chars().any(char::is_control))
        {
            let shown: String = t.chars().take(64).collect();
            return Err(Error::invalid(
                "--device-node",
                format!(
                    "{shown:?}: an absolute path of at most 4096 bytes, no control characters (e.g. /dev/gpu{{index}})"
                ),
            ));
        }
        if let Some(bad) = self.unhealthy.iter().find(|d| !self.device_names().contains(d)) {
            return Err(Error::invalid(
                "--unhealthy",
                format!("{bad} is not one of the devices (dev-0 ... dev-{})", self.devices - 1),
            ));
        }
        for p in [self.registration_socket(), self.endpoint.clone()] {
            let len = p.as_os_str().len();
            if len > crate::paths::MAX_SOCKET_PATH_LEN {
                return Err(Error::PathTooLong { path: p, len, max: crate::paths::MAX_SOCKET_PATH_LEN });
            }
        }
        Ok(())
    }

    /// The device node of device `name` (`dev-<i>`), from `--device-node`.
    pub fn device_node_of(&self, name: &str) -> Option<String> {
        let index = name.strip_prefix("dev-").unwrap_or(name);
        self.device_node.as_ref().map(|t| t.replace("{index}", index).replace("{device}", name))
    }

    /// The device names, `dev-0` ... `dev-<n-1>`.
    pub fn device_names(&self) -> Vec<String> {
        (0..self.devices).map(|i| format!("dev-{i}")).collect()
    }
}

/// The API server the mock uses, as a helper-built driver does.
#[derive(Debug, Clone)]
pub struct ApiOptions {
    /// The kubeconfig (its current context's server; plain HTTP).
    pub kubeconfig: PathBuf,
    /// The node the mock runs on (its Node must be in the API).
    pub node_name: String,
}

/// What the mock driver reports.
#[derive(Debug, Clone, Serialize)]
pub struct DraEvent {
    /// When (RFC 3339 in JSON).
    #[serde(serialize_with = "crate::mock_plugin::events::rfc3339")]
    pub time: SystemTime,
    /// The driver name (`resource`, as the device-plugin mock's records say).
    pub resource: String,
    /// What happened.
    #[serde(flatten)]
    pub kind: DraEventKind,
}

/// The kinds of events (`"event"` in JSON).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum DraEventKind {
    /// Both sockets are served.
    Serving {
        /// The registration socket.
        registration_socket: PathBuf,
        /// The service socket.
        endpoint: PathBuf,
        /// What it advertises, in order.
        supported_versions: Vec<String>,
        /// What it serves.
        served: Vec<String>,
        /// Where it writes CDI specs.
        cdi_dir: PathBuf,
    },
    /// One call answered (or failed).
    Rpc {
        /// `Registration/GetInfo`, `v1.DRAPlugin/NodePrepareResources`, ...
        rpc: String,
        /// The request, as JSON.
        request: serde_json::Value,
        /// The answer, as JSON (absent on error).
        #[serde(skip_serializing_if = "Option::is_none")]
        response: Option<serde_json::Value>,
        /// The gRPC error, if the call failed as a whole.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Time spent answering.
        duration_ms: u64,
    },
    /// Its pool was published as a ResourceSlice of its node.
    Published {
        /// The API server.
        server: String,
        /// The node.
        node: String,
        /// What was written: `create`, `update` or `delete`, and the slice (none: it was current).
        writes: Vec<SliceWrite>,
    },
    /// The mock stopped serving.
    Stopped {
        /// Why.
        reason: String,
    },
}

/// The mock's live state, shared by every service.
pub(crate) struct Shared {
    pub(crate) cfg: MockConfig,
    pub(crate) state: Mutex<Allocation>,
    pub(crate) api: Option<api::Api>,
    events: mpsc::UnboundedSender<DraEvent>,
    recorder: Option<Recorder>,
    /// GetInfo was answered (the register-once fault answers it once).
    pub(crate) info_given: std::sync::atomic::AtomicBool,
}

/// Which claim holds which devices.
#[derive(Debug, Default)]
pub(crate) struct Allocation {
    /// Claim UID → its devices.
    pub(crate) claims: BTreeMap<String, Vec<String>>,
    /// Devices no claim holds.
    pub(crate) free: BTreeSet<String>,
}

impl Shared {
    pub(crate) fn emit(&self, kind: DraEventKind) {
        let event = DraEvent { time: SystemTime::now(), resource: self.cfg.driver.clone(), kind };
        if let (Some(r), DraEventKind::Rpc { .. }) = (&self.recorder, &event.kind) {
            r.write(&event);
        }
        let _ = self.events.send(event);
    }
}

/// Serves both sockets until `shutdown` completes, reporting on `events`.
/// Binding refuses a live socket (never takes one over) and removes its own
/// sockets on the way out; CDI specs of claims still prepared stay, as a
/// driver's do across a restart.
pub async fn run(
    cfg: MockConfig,
    events: mpsc::UnboundedSender<DraEvent>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<()> {
    run_with_api(cfg, None, events, shutdown).await
}

/// [`run`], with an API server when `api` is given: the pool is published
/// before the sockets are served (a mock that cannot reach its API exits
/// with the reason), and each Prepare reads its claims from it.
pub async fn run_with_api(
    cfg: MockConfig,
    api: Option<ApiOptions>,
    events: mpsc::UnboundedSender<DraEvent>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<()> {
    cfg.check()?;
    let api = match api {
        None => None,
        Some(o) => {
            if !crate::validate::is_dns1123_subdomain(&o.node_name) {
                let shown: String = o.node_name.chars().take(64).collect();
                return Err(Error::invalid(
                    "--node-name",
                    format!("{shown:?} is not a DNS subdomain, as node names must be"),
                ));
            }
            let client = crate::apiserver::client::Client::from_kubeconfig(&o.kubeconfig, "--kubeconfig")?;
            Some(api::Api { client, node: o.node_name })
        }
    };
    crate::input::create_dir(&cfg.cdi_dir, 0o755)?;
    let recorder = cfg.record.as_deref().map(Recorder::create).transpose()?;
    if let Some(a) = &api {
        let writes = a.publish(&cfg).await?;
        let kind = DraEventKind::Published { server: a.client.server().to_string(), node: a.node.clone(), writes };
        let _ = events.send(DraEvent { time: SystemTime::now(), resource: cfg.driver.clone(), kind });
    }
    let free = cfg.device_names().into_iter().collect();
    let state = Mutex::new(Allocation { free, ..Default::default() });
    let info_given = std::sync::atomic::AtomicBool::new(false);
    let shared = Arc::new(Shared { cfg, state, api, events, recorder, info_given });
    let resync = republish(Arc::clone(&shared));
    tokio::select! {
        served = wire::serve(shared, shutdown) => served,
        () = resync => Ok(()),
    }
}

/// How often the mock checks its slice again (the helper's controller
/// watches instead; a slice deleted under it, as a kubelet wipes them at its
/// start, is recreated within this).
pub const REPUBLISH_INTERVAL: Duration = Duration::from_secs(5);

/// Publishes the pool again every [`REPUBLISH_INTERVAL`] while serving,
/// reporting only what it had to write; without an API server, never ends.
async fn republish(shared: Arc<Shared>) {
    let Some(api) = shared.api.clone() else { return std::future::pending().await };
    loop {
        tokio::time::sleep(REPUBLISH_INTERVAL).await;
        match api.publish(&shared.cfg).await {
            Ok(writes) if !writes.is_empty() => shared.emit(DraEventKind::Published {
                server: api.client.server().to_string(),
                node: api.node.clone(),
                writes,
            }),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "could not publish the ResourceSlice again"),
        }
    }
}
