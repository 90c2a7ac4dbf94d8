//! The mock plugin's configuration: a plain struct that the TOML config file
//! deserialises into and that command-line flags build the same way, plus
//! the validation that runs before anything starts (so nothing starts
//! half-configured). Errors name the file, the key path and the problem.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use super::placeholder::Template;
use crate::error::{Error, Result};
use crate::paths::MAX_SOCKET_PATH_LEN;
use crate::proto::deviceplugin::v1beta1 as dp;
use crate::validate::explain_resource_name;

/// How long one Register call may take by default: the kubelet dials the
/// plugin back inside Register with a 10 s blocking dial, so a little more.
pub const DEFAULT_REGISTER_TIMEOUT: Duration = Duration::from_secs(15);

/// Everything a mock plugin process serves.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockConfig {
    /// The device-plugin directory (kubelet.sock and the plugin sockets);
    /// `None` means `$DPCTL_DEVICE_PLUGIN_DIR` or the kubelet's default.
    #[serde(default)]
    pub dir: Option<PathBuf>,
    /// Write every RPC received to this file as JSON Lines.
    #[serde(default)]
    pub record: Option<PathBuf>,
    /// Register on `<dir>/kubelet.sock` (off: only serve).
    #[serde(default = "yes")]
    pub register: bool,
    /// Also register the plugin-watcher way: serve `pluginregistration.Registration`
    /// on `<registry_dir>/<endpoint>`.
    #[serde(default)]
    pub registry_dir: Option<PathBuf>,
    /// Serve a control socket per resource at `<dir>/.dpctl/<resource>.sock`.
    #[serde(default = "yes")]
    pub control: bool,
    /// Take sockets over even when a live process answers on them.
    #[serde(default)]
    pub force: bool,
    /// Report every RPC answered as an event to subscribers (off: only
    /// lifecycle and device events; `record` still gets every RPC).
    #[serde(default = "yes")]
    pub rpc_events: bool,
    /// Deadline of one Register call.
    #[serde(default = "default_register_timeout", deserialize_with = "de_duration")]
    pub register_timeout: Duration,
    /// The resources, one socket each.
    #[serde(default, rename = "resource")]
    pub resources: Vec<ResourceConfig>,
}

fn yes() -> bool {
    true
}

fn default_register_timeout() -> Duration {
    DEFAULT_REGISTER_TIMEOUT
}

impl Default for MockConfig {
    fn default() -> Self {
        MockConfig {
            dir: None,
            record: None,
            register: true,
            registry_dir: None,
            control: true,
            force: false,
            rpc_events: true,
            register_timeout: DEFAULT_REGISTER_TIMEOUT,
            resources: Vec::new(),
        }
    }
}

/// One extended resource: its devices, answers, changes over time and faults.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceConfig {
    /// The extended resource name, e.g. `example.com/gpu`.
    pub name: String,
    /// The socket file name in the directory [default: derived from the name,
    /// `example.com/gpu` gives `example-gpu.sock`].
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Generate this many devices (IDs `<id_prefix><n>`, from 0).
    #[serde(default)]
    pub count: Option<usize>,
    /// Prefix of generated IDs [default: the name's last part, upper-cased, and `-`: `GPU-`].
    #[serde(default)]
    pub id_prefix: Option<String>,
    /// Spread generated devices over this many NUMA nodes in contiguous blocks
    /// (0: devices report no topology).
    #[serde(default)]
    pub numa_nodes: usize,
    /// IDs that start unhealthy.
    #[serde(default)]
    pub unhealthy: Vec<String>,
    /// Explicit devices (instead of `count`).
    #[serde(default, rename = "device")]
    pub devices: Vec<DeviceConfig>,
    /// Advertise `pre_start_required`.
    #[serde(default)]
    pub pre_start_required: bool,
    /// Advertise `get_preferred_allocation_available`.
    #[serde(default)]
    pub get_preferred_allocation_available: bool,
    /// How GetPreferredAllocation chooses (answered whether advertised or not).
    #[serde(default)]
    pub preferred_policy: Policy,
    /// Seed of the `random` policy.
    #[serde(default)]
    pub seed: u64,
    /// Refuse Allocate of unhealthy devices (InvalidArgument).
    #[serde(default)]
    pub refuse_unhealthy: bool,
    /// What Allocate answers per container.
    #[serde(default)]
    pub allocate: AllocateConfig,
    /// Devices that toggle health periodically.
    #[serde(default)]
    pub flap: Vec<FlapConfig>,
    /// Changes at fixed times after start.
    #[serde(default)]
    pub timeline: Vec<TimelineStep>,
    /// Misbehaviour on request.
    #[serde(default)]
    pub faults: Faults,
}

impl ResourceConfig {
    /// A resource with `count` generated healthy devices and defaults elsewhere.
    pub fn new(name: impl Into<String>, count: usize) -> Self {
        ResourceConfig {
            name: name.into(),
            endpoint: None,
            count: Some(count),
            id_prefix: None,
            numa_nodes: 0,
            unhealthy: Vec::new(),
            devices: Vec::new(),
            pre_start_required: false,
            get_preferred_allocation_available: false,
            preferred_policy: Policy::default(),
            seed: 0,
            refuse_unhealthy: false,
            allocate: AllocateConfig::default(),
            flap: Vec::new(),
            timeline: Vec::new(),
            faults: Faults::default(),
        }
    }

    /// The socket file name: `endpoint`, or derived from the resource name.
    pub fn endpoint_name(&self) -> String {
        self.endpoint.clone().unwrap_or_else(|| default_endpoint(&self.name))
    }

    /// The prefix of generated IDs.
    pub fn id_prefix(&self) -> String {
        self.id_prefix.clone().unwrap_or_else(|| {
            let last = self.name.rsplit('/').next().unwrap_or("dev");
            format!("{}-", last.to_uppercase())
        })
    }

    /// The options the plugin advertises.
    pub fn options(&self) -> dp::DevicePluginOptions {
        dp::DevicePluginOptions {
            pre_start_required: self.pre_start_required,
            get_preferred_allocation_available: self.get_preferred_allocation_available,
        }
    }

    /// The devices at start: generated or explicit, with `unhealthy` applied.
    pub fn initial_devices(&self) -> Vec<DeviceConfig> {
        let mut out: Vec<DeviceConfig> = match self.count {
            Some(n) => {
                let prefix = self.id_prefix();
                (0..n)
                    .map(|i| DeviceConfig {
                        id: format!("{prefix}{i}"),
                        health: dp::HEALTHY.to_string(),
                        numa: (self.numa_nodes > 0).then(|| vec![(i * self.numa_nodes / n.max(1)) as i64]),
                    })
                    .collect()
            }
            None => self.devices.clone(),
        };
        let unhealthy: HashSet<&str> = self.unhealthy.iter().map(String::as_str).collect();
        for d in &mut out {
            if unhealthy.contains(d.id.as_str()) {
                d.health = dp::UNHEALTHY.to_string();
            }
        }
        out
    }
}

/// `example.com/gpu` becomes `example-gpu.sock`.
pub fn default_endpoint(resource: &str) -> String {
    let (domain, name) = resource.split_once('/').unwrap_or(("mock", resource));
    let first = domain.split('.').next().unwrap_or("mock");
    let safe = |s: &str| -> String {
        s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_' { c } else { '_' }).collect()
    };
    format!("{}-{}.sock", safe(first), safe(name))
}

/// One device.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceConfig {
    /// The device ID.
    pub id: String,
    /// Health string sent as is (`Healthy` or `Unhealthy`; anything else counts as unhealthy).
    #[serde(default = "healthy")]
    pub health: String,
    /// NUMA nodes; absent means no topology.
    #[serde(default)]
    pub numa: Option<Vec<i64>>,
}

fn healthy() -> String {
    dp::HEALTHY.to_string()
}

impl DeviceConfig {
    /// A healthy device without topology.
    pub fn new(id: impl Into<String>) -> Self {
        DeviceConfig { id: id.into(), health: healthy(), numa: None }
    }
}

/// Devices that toggle between Healthy and Unhealthy every `every`. All
/// devices of one entry change together, in one ListAndWatch message.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlapConfig {
    /// The devices.
    pub ids: Vec<String>,
    /// Time between two toggles.
    #[serde(deserialize_with = "de_duration")]
    pub every: Duration,
}

/// One change at a fixed time after start: exactly one of `health` (with
/// `ids`), `add` or `remove`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimelineStep {
    /// When, after start.
    #[serde(deserialize_with = "de_duration")]
    pub at: Duration,
    /// Devices whose health is set (with `health`).
    #[serde(default)]
    pub ids: Vec<String>,
    /// The health to set on `ids`.
    #[serde(default)]
    pub health: Option<String>,
    /// Devices to add.
    #[serde(default)]
    pub add: Vec<DeviceConfig>,
    /// Devices to remove.
    #[serde(default)]
    pub remove: Vec<String>,
}

/// The Allocate answer of one container, as templates. In every string,
/// `{ids}` is the comma-separated allocated IDs, `{count}` their number and
/// `{resource}` the resource name. An entry that mentions `{id}` or `{index}`
/// is repeated once per allocated device (env and annotation keys too).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllocateConfig {
    /// Environment variables.
    #[serde(default)]
    pub envs: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Mounts.
    #[serde(default)]
    pub mounts: Vec<MountConfig>,
    /// Device nodes.
    #[serde(default)]
    pub devices: Vec<DeviceSpecConfig>,
    /// Fully qualified CDI device names, e.g. `example.com/gpu={id}`.
    #[serde(default)]
    pub cdi_devices: Vec<String>,
}

/// The environment variable of the default Allocate answer.
pub const DEFAULT_ALLOCATE_ENV: &str = "DPCTL_MOCK_DEVICES";

impl Default for AllocateConfig {
    fn default() -> Self {
        AllocateConfig {
            envs: [(DEFAULT_ALLOCATE_ENV.to_string(), "{ids}".to_string())].into(),
            annotations: BTreeMap::new(),
            mounts: Vec::new(),
            devices: Vec::new(),
            cdi_devices: Vec::new(),
        }
    }
}

/// A mount template.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MountConfig {
    /// Path in the container.
    pub container_path: String,
    /// Path on the host.
    pub host_path: String,
    /// Read-only.
    #[serde(default)]
    pub read_only: bool,
}

/// A device-node template.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpecConfig {
    /// Path in the container.
    pub container_path: String,
    /// Path on the host.
    pub host_path: String,
    /// cgroup permissions: any of `r`, `w`, `m`.
    #[serde(default = "rw")]
    pub permissions: String,
}

fn rw() -> String {
    "rw".into()
}

/// How GetPreferredAllocation picks devices. Every policy returns the
/// must-include devices first and exactly the requested size when enough
/// devices are available.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// The available devices in the order the kubelet listed them.
    #[default]
    FirstFit,
    /// As few NUMA nodes as possible: the nodes of must-include devices first,
    /// then the smallest node that fits the rest, then the fullest.
    Pack,
    /// Round-robin over NUMA nodes.
    Spread,
    /// A random choice from a seeded generator (reproducible per seed).
    Random,
    /// Deliberately ignores NUMA: the last available devices, last first, so
    /// the answer usually lands on another node than an aligned choice. Shows
    /// how the kubelet's Topology Manager restricts or overrides a plugin.
    IgnoreNuma,
    /// The available devices with the lowest IDs (byte order), whatever
    /// order the kubelet listed them in: the kubelet lists them from a Go
    /// map, in random order, so only this answer is the same on every run
    /// (scenarios compare runs).
    Lowest,
}

impl Policy {
    /// The names, for help texts and errors.
    pub const NAMES: &'static [&'static str] = &["first-fit", "pack", "spread", "random", "ignore-numa", "lowest"];

    /// The name as written in configs and flags.
    pub fn name(self) -> &'static str {
        match self {
            Policy::FirstFit => "first-fit",
            Policy::Pack => "pack",
            Policy::Spread => "spread",
            Policy::Random => "random",
            Policy::IgnoreNuma => "ignore-numa",
            Policy::Lowest => "lowest",
        }
    }
}

impl FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "first-fit" | "firstfit" => Ok(Policy::FirstFit),
            "pack" => Ok(Policy::Pack),
            "spread" => Ok(Policy::Spread),
            "random" => Ok(Policy::Random),
            "ignore-numa" => Ok(Policy::IgnoreNuma),
            "lowest" => Ok(Policy::Lowest),
            _ => Err(format!("unknown policy {s:?} (one of: {})", Policy::NAMES.join(", "))),
        }
    }
}

/// Misbehaviour on request.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Faults {
    /// Errors and latency on RPCs.
    #[serde(default)]
    pub rpc: Vec<RpcFault>,
    /// End each ListAndWatch stream after this many messages.
    #[serde(default)]
    pub list_and_watch_end_after: Option<u64>,
    /// With `list_and_watch_end_after`: end with this status instead of OK.
    #[serde(default)]
    pub list_and_watch_end_error: Option<ErrorSpec>,
    /// Pad every ListAndWatch message to just over the kubelet's 4 MiB limit.
    #[serde(default)]
    pub list_and_watch_oversize: bool,
    /// Send an empty device list first on every ListAndWatch stream, then
    /// the real list (a plugin that sends before its first scan finished).
    #[serde(default)]
    pub list_and_watch_empty_first: bool,
    /// Answer every Allocate with the content of the resource's first
    /// devices, whatever was asked ("two pods got the same GPU").
    #[serde(default)]
    pub allocate_same_device: bool,
    /// Send this version in RegisterRequest instead of `v1beta1`.
    #[serde(default)]
    pub register_version: Option<String>,
    /// Send this resource name in RegisterRequest (e.g. an invalid one).
    #[serde(default)]
    pub register_resource_name: Option<String>,
    /// Send the opposite of the advertised options in RegisterRequest.
    #[serde(default)]
    pub register_options_mismatch: bool,
    /// Register before the socket is served (the classic bug: since 1.25 the
    /// kubelet's dial-back fails with a deadline).
    #[serde(default)]
    pub register_before_serving: bool,
    /// Do not serve or register again after a kubelet restart.
    #[serde(default)]
    pub no_reregister: bool,
    /// After a kubelet restart, ListAndWatch streams opened from then on
    /// get the list once and never a change (the first stream's goroutine
    /// kept the update channel: a Go plugin that never watches
    /// `stream.Context()`).
    #[serde(default)]
    pub stale_stream_after_restart: bool,
    /// This long after a kubelet restart is noticed, the process exits with
    /// Go's `panic: send on closed channel` (the old stream's Send failed,
    /// the plugin closed its update channel, and the next update panics).
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub crash_after_restart: Option<Duration>,
    /// Report the first N changes in device count, never a later one (a
    /// rescan loop blocked on a buffered channel nobody reads).
    #[serde(default)]
    pub scan_stops_after: Option<u64>,
    /// Ignore SIGTERM (and Ctrl-C): only SIGKILL ends the process (a
    /// shutdown that waits on a goroutine that never returns).
    #[serde(default)]
    pub hang_on_sigterm: bool,
    /// Device IDs differ on every process start (IDs made from enumeration
    /// order or a UUID minted at start instead of the hardware's serial).
    #[serde(default)]
    pub ids_change_per_start: bool,
    /// Call Register a second time, on the same socket, right after the
    /// first one succeeds (kubelet 1.26-1.36 accept it; 1.37+ reject a
    /// second client at a live (name, socket)). A rejection is reported and
    /// the first registration stands.
    #[serde(default)]
    pub register_twice: bool,
    /// Call Register once at start and give up (exit) when kubelet.sock is
    /// not there yet, as plugins that do not retry or watch the directory.
    #[serde(default)]
    pub register_once: bool,
}

/// An error and/or latency on one RPC (or all), from a given call on.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpcFault {
    /// Which RPC: `Allocate`, `ListAndWatch`, ... or `*` for every one.
    pub rpc: RpcSelector,
    /// Answer with this status (`code` or `code: message`).
    #[serde(default)]
    pub error: Option<ErrorSpec>,
    /// Wait this long before answering (ListAndWatch: before the first message).
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub latency: Option<Duration>,
    /// The first `after` calls behave; the fault applies from call `after + 1` on.
    /// Without `error` or `latency` it fails with `internal`.
    #[serde(default)]
    pub after: u64,
}

/// The RPCs a mock plugin answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Rpc {
    /// `v1beta1.DevicePlugin/GetDevicePluginOptions`.
    GetDevicePluginOptions,
    /// `v1beta1.DevicePlugin/ListAndWatch`.
    ListAndWatch,
    /// `v1beta1.DevicePlugin/GetPreferredAllocation`.
    GetPreferredAllocation,
    /// `v1beta1.DevicePlugin/Allocate`.
    Allocate,
    /// `v1beta1.DevicePlugin/PreStartContainer`.
    PreStartContainer,
    /// `pluginregistration.Registration/GetInfo`.
    GetInfo,
    /// `pluginregistration.Registration/NotifyRegistrationStatus`.
    NotifyRegistrationStatus,
}

impl Rpc {
    /// Every RPC, in a fixed order (index = position).
    pub const ALL: [Rpc; 7] = [
        Rpc::GetDevicePluginOptions,
        Rpc::ListAndWatch,
        Rpc::GetPreferredAllocation,
        Rpc::Allocate,
        Rpc::PreStartContainer,
        Rpc::GetInfo,
        Rpc::NotifyRegistrationStatus,
    ];

    /// The method name.
    pub fn name(self) -> &'static str {
        match self {
            Rpc::GetDevicePluginOptions => "GetDevicePluginOptions",
            Rpc::ListAndWatch => "ListAndWatch",
            Rpc::GetPreferredAllocation => "GetPreferredAllocation",
            Rpc::Allocate => "Allocate",
            Rpc::PreStartContainer => "PreStartContainer",
            Rpc::GetInfo => "GetInfo",
            Rpc::NotifyRegistrationStatus => "NotifyRegistrationStatus",
        }
    }

    /// Position in [`Rpc::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Which RPCs a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpcSelector {
    /// Every RPC.
    Any,
    /// One RPC.
    One(Rpc),
}

impl RpcSelector {
    /// True when the selector covers `rpc`.
    pub fn matches(self, rpc: Rpc) -> bool {
        match self {
            RpcSelector::Any => true,
            RpcSelector::One(r) => r == rpc,
        }
    }
}

impl FromStr for RpcSelector {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let key: String =
            s.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '*').collect::<String>().to_lowercase();
        let rpc = match key.as_str() {
            "*" | "all" | "any" => return Ok(RpcSelector::Any),
            "getdevicepluginoptions" | "options" => Rpc::GetDevicePluginOptions,
            "listandwatch" | "list" | "watch" => Rpc::ListAndWatch,
            "getpreferredallocation" | "preferred" => Rpc::GetPreferredAllocation,
            "allocate" => Rpc::Allocate,
            "prestartcontainer" | "prestart" => Rpc::PreStartContainer,
            "getinfo" => Rpc::GetInfo,
            "notifyregistrationstatus" => Rpc::NotifyRegistrationStatus,
            _ => {
                return Err(format!(
                    "unknown RPC {s:?} (one of: {}, or * for all)",
                    Rpc::ALL.iter().map(|r| r.name()).collect::<Vec<_>>().join(", ")
                ));
            }
        };
        Ok(RpcSelector::One(rpc))
    }
}

impl<'de> Deserialize<'de> for RpcSelector {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A gRPC status to answer with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorSpec {
    /// The status code.
    pub code: tonic::Code,
    /// The status message.
    pub message: String,
}

/// Message of an injected error that names none.
pub const DEFAULT_FAULT_MESSAGE: &str = "injected by dpctl mock-plugin";

impl ErrorSpec {
    /// The status.
    pub fn status(&self) -> tonic::Status {
        tonic::Status::new(self.code, self.message.clone())
    }
}

impl FromStr for ErrorSpec {
    type Err = String;
    /// `code` or `code: message` (also `code:message`); the code by name in
    /// any case (`unavailable`, `InvalidArgument`, `invalid_argument`) or number.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (code, message) = match s.split_once(':') {
            Some((c, m)) => (c.trim(), m.trim()),
            None => (s.trim(), ""),
        };
        let code = crate::rpc::parse_code(code)?;
        let message = if message.is_empty() { DEFAULT_FAULT_MESSAGE.to_string() } else { message.to_string() };
        Ok(ErrorSpec { code, message })
    }
}

impl<'de> Deserialize<'de> for ErrorSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

struct DurationVisitor;

impl serde::de::Visitor<'_> for DurationVisitor {
    type Value = Duration;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a duration such as \"500ms\", \"10s\" or \"2m\" (a bare number is seconds)")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Duration, E> {
        crate::duration::parse(v).map_err(E::custom)
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<Duration, E> {
        crate::duration::check(Duration::from_secs(v)).map_err(|e| E::custom(format!("{v}: {e}")))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<Duration, E> {
        let secs = u64::try_from(v).map_err(|_| E::custom(format!("negative duration {v}")))?;
        self.visit_u64(secs)
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<Duration, E> {
        crate::duration::from_secs_f64(v).map_err(|e| E::custom(format!("{v}: {e}")))
    }
}

fn de_duration<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Duration, D::Error> {
    d.deserialize_any(DurationVisitor)
}

fn de_opt_duration<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Duration>, D::Error> {
    d.deserialize_any(DurationVisitor).map(Some)
}

/// A problem in a config, at a key path such as `resource[0].device[2].id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// The key path.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

fn issue(key: impl Into<String>, message: impl Into<String>) -> ConfigIssue {
    ConfigIssue { key: key.into(), message: message.into() }
}

impl MockConfig {
    /// Reads and validates a TOML config file. Errors name the file, the key
    /// path and the problem (with the line for syntax and type errors).
    pub fn load(path: &Path) -> Result<MockConfig> {
        let text = crate::input::read_text(path, &format!("config file {}", path.display()))?;
        let config =
            Self::from_toml(&text).map_err(|i| Error::invalid(format!("{}: {}", path.display(), i.key), i.message))?;
        config.check().map_err(|i| Error::invalid(format!("{}: {}", path.display(), i.key), i.message))?;
        Ok(config)
    }

    /// Parses TOML text (without the semantic checks of [`MockConfig::check`]).
    pub fn from_toml(text: &str) -> std::result::Result<MockConfig, ConfigIssue> {
        let de = toml::Deserializer::parse(text).map_err(|e| issue("(syntax)", toml_message(&e, text)))?;
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let key = if path == "." || path.is_empty() { "(top level)".to_string() } else { path };
            issue(key, toml_message(e.inner(), text))
        })
    }

    /// The device-plugin directory in force.
    pub fn dir(&self) -> PathBuf {
        self.dir.clone().unwrap_or_else(crate::paths::device_plugin_dir_default)
    }

    /// Checks everything that can be checked before starting: resource names,
    /// endpoints, device IDs, flaps, timelines, templates and faults.
    pub fn check(&self) -> std::result::Result<(), ConfigIssue> {
        if self.resources.is_empty() {
            return Err(issue("resource", "no resources configured (add a [[resource]] table, or --resource)"));
        }
        let dir = self.dir();
        let mut names: HashMap<&str, usize> = HashMap::new();
        let mut endpoints: HashMap<String, usize> = HashMap::new();
        for (i, r) in self.resources.iter().enumerate() {
            let at = format!("resource[{i}]");
            if let Some(why) = explain_resource_name(&r.name) {
                return Err(issue(format!("{at}.name"), format!("invalid resource name: {why}")));
            }
            if let Some(first) = names.insert(r.name.as_str(), i) {
                return Err(issue(
                    format!("{at}.name"),
                    format!("resource {:?} is already configured as resource[{first}]", r.name),
                ));
            }
            let endpoint = r.endpoint_name();
            let key = format!("{at}.endpoint");
            if endpoint.is_empty() || endpoint.contains('/') || endpoint == "." || endpoint == ".." {
                return Err(issue(key, format!("{endpoint:?} must be a plain file name in the directory")));
            }
            if endpoint == crate::paths::KUBELET_SOCKET_NAME {
                return Err(issue(key, "kubelet.sock is the kubelet's own socket"));
            }
            let full = dir.join(&endpoint);
            if full.as_os_str().len() > MAX_SOCKET_PATH_LEN {
                return Err(issue(
                    key,
                    format!(
                        "socket path {} is longer than the {MAX_SOCKET_PATH_LEN} bytes unix sockets allow",
                        full.display()
                    ),
                ));
            }
            if let Some(first) = endpoints.insert(endpoint.clone(), i) {
                return Err(issue(key, format!("socket {endpoint:?} is also used by resource[{first}]; set endpoint")));
            }
            check_resource(r, &at)?;
        }
        Ok(())
    }
}

/// Most devices one mock resource may have (`--devices`, `count`, or
/// `[[resource.device]]` entries): 100,000 devices make a ListAndWatch
/// message of about 2.6 MiB, under the kubelet's 4 MiB limit, and start in
/// well under a second.
pub const MAX_DEVICES: usize = 100_000;

/// One resource: its devices, the IDs its health settings and timeline
/// name, its Allocate templates and its faults, in that order.
fn check_resource(r: &ResourceConfig, at: &str) -> std::result::Result<(), ConfigIssue> {
    check_device_list(r, at)?;
    let initial = r.initial_devices();
    let known: HashSet<String> = initial.iter().map(|d| d.id.clone()).collect();
    check_health_ids(r, at, &known, &initial)?;
    check_timeline(r, at, known)?;
    check_templates(&r.allocate, &format!("{at}.allocate"))?;
    check_faults(&r.faults, at)
}

/// The device count (limit, `count` or entries) and each device entry.
fn check_device_list(r: &ResourceConfig, at: &str) -> std::result::Result<(), ConfigIssue> {
    let n = r.count.unwrap_or(r.devices.len());
    if n > MAX_DEVICES {
        let key = if r.count.is_some() { format!("{at}.count") } else { at.to_string() };
        return Err(issue(key, format!("{n} devices is over the limit of {MAX_DEVICES} per resource")));
    }
    match (r.count, r.devices.is_empty()) {
        (Some(_), false) => {
            return Err(issue(format!("{at}.count"), "give either `count` or [[resource.device]] entries, not both"));
        }
        (None, true) => {
            return Err(issue(at.to_string(), "no devices: set `count` or add [[resource.device]] entries"));
        }
        _ => {}
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (j, d) in r.devices.iter().enumerate() {
        check_device(d, &format!("{at}.device[{j}]"))?;
        if let Some(first) = seen.insert(d.id.as_str(), j) {
            return Err(issue(
                format!("{at}.device[{j}].id"),
                format!("duplicate device ID {:?} (also {at}.device[{first}])", d.id),
            ));
        }
    }
    Ok(())
}

/// `unhealthy` and `flap`: they name devices that exist at start.
fn check_health_ids(
    r: &ResourceConfig,
    at: &str,
    known: &HashSet<String>,
    initial: &[DeviceConfig],
) -> std::result::Result<(), ConfigIssue> {
    for (j, id) in r.unhealthy.iter().enumerate() {
        if !known.contains(id) {
            return Err(issue(format!("{at}.unhealthy[{j}]"), unknown_id(id, initial)));
        }
    }
    for (j, f) in r.flap.iter().enumerate() {
        let key = format!("{at}.flap[{j}]");
        if f.every.is_zero() {
            return Err(issue(format!("{key}.every"), "must be more than 0"));
        }
        if f.ids.is_empty() {
            return Err(issue(format!("{key}.ids"), "no device IDs"));
        }
        for (k, id) in f.ids.iter().enumerate() {
            if !known.contains(id) {
                return Err(issue(format!("{key}.ids[{k}]"), unknown_id(id, initial)));
            }
        }
    }
    Ok(())
}

/// The timeline: one action per step, naming devices that exist then.
/// `known` is the set of device IDs at start.
fn check_timeline(r: &ResourceConfig, at: &str, mut known: HashSet<String>) -> std::result::Result<(), ConfigIssue> {
    // Replay the timeline in time order, so each step can only name devices
    // that exist at that moment.
    let mut order: Vec<usize> = (0..r.timeline.len()).collect();
    order.sort_by_key(|&j| r.timeline[j].at);
    for j in order {
        let s = &r.timeline[j];
        let key = format!("{at}.timeline[{j}]");
        let actions =
            usize::from(s.health.is_some()) + usize::from(!s.add.is_empty()) + usize::from(!s.remove.is_empty());
        if actions != 1 {
            return Err(issue(key, "give exactly one of `health` (with `ids`), `add` or `remove`"));
        }
        if let Some(h) = &s.health {
            if h.is_empty() {
                return Err(issue(format!("{key}.health"), "empty health string"));
            }
            if s.ids.is_empty() {
                return Err(issue(format!("{key}.ids"), "`health` needs the device IDs in `ids`"));
            }
        } else if !s.ids.is_empty() {
            return Err(issue(format!("{key}.ids"), "`ids` goes with `health`"));
        }
        for (k, id) in s.ids.iter().chain(&s.remove).enumerate() {
            if !known.contains(id) {
                let field = if s.health.is_some() { "ids" } else { "remove" };
                let k = if s.health.is_some() { k } else { k - s.ids.len() };
                return Err(issue(
                    format!("{key}.{field}[{k}]"),
                    format!("no device {id:?} at {}", humantime::format_duration(s.at)),
                ));
            }
        }
        for (k, d) in s.add.iter().enumerate() {
            check_device(d, &format!("{key}.add[{k}]"))?;
            if known.contains(&d.id) {
                return Err(issue(
                    format!("{key}.add[{k}].id"),
                    format!("device {:?} already exists at {}", d.id, humantime::format_duration(s.at)),
                ));
            }
            known.insert(d.id.clone());
        }
        for id in &s.remove {
            known.remove(id);
        }
    }
    Ok(())
}

/// Faults: injected errors are errors, and the stream end is complete.
fn check_faults(f: &Faults, at: &str) -> std::result::Result<(), ConfigIssue> {
    let fk = format!("{at}.faults");
    for (j, rf) in f.rpc.iter().enumerate() {
        if let Some(e) = &rf.error
            && e.code == tonic::Code::Ok
        {
            return Err(issue(format!("{fk}.rpc[{j}].error"), "code ok is not an error"));
        }
    }
    if f.list_and_watch_end_error.is_some() && f.list_and_watch_end_after.is_none() {
        return Err(issue(format!("{fk}.list_and_watch_end_error"), "needs list_and_watch_end_after"));
    }
    if let Some(e) = &f.list_and_watch_end_error
        && e.code == tonic::Code::Ok
    {
        return Err(issue(
            format!("{fk}.list_and_watch_end_error"),
            "code ok is not an error (leave it out to end with OK)",
        ));
    }
    Ok(())
}

fn check_device(d: &DeviceConfig, key: &str) -> std::result::Result<(), ConfigIssue> {
    if d.id.is_empty() {
        return Err(issue(format!("{key}.id"), "empty device ID"));
    }
    if d.health.is_empty() {
        return Err(issue(format!("{key}.health"), "empty health string (use Healthy or Unhealthy)"));
    }
    if let Some(n) = &d.numa
        && let Some(bad) = n.iter().find(|n| **n < 0)
    {
        return Err(issue(format!("{key}.numa"), format!("NUMA node {bad} is negative")));
    }
    Ok(())
}

fn unknown_id(id: &str, devices: &[DeviceConfig]) -> String {
    let sample: Vec<&str> = devices.iter().take(4).map(|d| d.id.as_str()).collect();
    let more = if devices.len() > 4 { ", ..." } else { "" };
    format!("no device {id:?} (devices: {}{more})", sample.join(", "))
}

fn check_templates(a: &AllocateConfig, at: &str) -> std::result::Result<(), ConfigIssue> {
    let check = |key: String, s: &str| Template::parse(s).map(|_| ()).map_err(|m| issue(key, m));
    for (k, v) in &a.envs {
        check(format!("{at}.envs.{k}"), k)?;
        check(format!("{at}.envs.{k}"), v)?;
    }
    for (k, v) in &a.annotations {
        check(format!("{at}.annotations.{k}"), k)?;
        check(format!("{at}.annotations.{k}"), v)?;
    }
    for (j, m) in a.mounts.iter().enumerate() {
        check(format!("{at}.mounts[{j}].container_path"), &m.container_path)?;
        check(format!("{at}.mounts[{j}].host_path"), &m.host_path)?;
    }
    for (j, d) in a.devices.iter().enumerate() {
        check(format!("{at}.devices[{j}].container_path"), &d.container_path)?;
        check(format!("{at}.devices[{j}].host_path"), &d.host_path)?;
        if d.permissions.is_empty() || !d.permissions.chars().all(|c| matches!(c, 'r' | 'w' | 'm')) {
            return Err(issue(
                format!("{at}.devices[{j}].permissions"),
                format!("{:?}: use r, w and m", d.permissions),
            ));
        }
    }
    for (j, c) in a.cdi_devices.iter().enumerate() {
        check(format!("{at}.cdi_devices[{j}]"), c)?;
    }
    Ok(())
}

/// A toml error's message with its line and column.
fn toml_message(e: &toml::de::Error, text: &str) -> String {
    let msg = e.message().trim().to_string();
    match e.span() {
        Some(span) => {
            let (line, col) = line_col(text, span.start);
            format!("{msg} (line {line}, column {col})")
        }
        None => msg,
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> std::result::Result<MockConfig, ConfigIssue> {
        let c = MockConfig::from_toml(text)?;
        c.check()?;
        Ok(c)
    }

    #[test]
    fn a_small_config_parses_with_defaults() {
        let c =
            parse("dir = \"/tmp/x\"\n[[resource]]\nname = \"example.com/gpu\"\ncount = 4\nnuma_nodes = 2\n").unwrap();
        let r = &c.resources[0];
        assert_eq!(r.endpoint_name(), "example-gpu.sock");
        let d = r.initial_devices();
        assert_eq!(d.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(), ["GPU-0", "GPU-1", "GPU-2", "GPU-3"]);
        assert_eq!(d[0].numa, Some(vec![0]));
        assert_eq!(d[3].numa, Some(vec![1]));
        assert!(c.register && c.control);
        assert_eq!(c.register_timeout, DEFAULT_REGISTER_TIMEOUT);
    }

    #[test]
    fn errors_name_the_key_path() {
        let e = parse("[[resource]]\nname = \"example.com/gpu\"\ncount = 1\ncuont = 2\n").unwrap_err();
        assert!(e.message.contains("unknown field `cuont`"), "{e:?}");
        assert!(e.message.contains("line 4"), "{e:?}");
        let e = parse("[[resource]]\nname = \"example.com/gpu\"\ncount = 1\n[[resource.flap]]\nids = [\"GPU-0\"]\nevery = \"soon\"\n")
            .unwrap_err();
        assert_eq!(e.key, "resource[0].flap[0].every");
        assert!(e.message.contains("invalid duration \"soon\""), "{e:?}");
        let e = parse("[[resource]]\nname = \"Example.com/gpu\"\ncount = 1\n").unwrap_err();
        assert_eq!(e.key, "resource[0].name");
        let e = parse(
            "[[resource]]\nname = \"example.com/gpu\"\n[[resource.device]]\nid = \"a\"\n[[resource.device]]\nid = \"a\"\n",
        )
        .unwrap_err();
        assert_eq!(e.key, "resource[0].device[1].id");
        assert!(e.message.contains("duplicate device ID \"a\""), "{e:?}");
    }

    #[test]
    fn timeline_steps_may_only_name_devices_that_exist_then() {
        let base = "[[resource]]\nname = \"example.com/gpu\"\ncount = 1\n";
        let ok = format!(
            "{base}[[resource.timeline]]\nat = \"2s\"\nremove = [\"X\"]\n[[resource.timeline]]\nat = \"1s\"\nadd = [{{ id = \"X\" }}]\n"
        );
        parse(&ok).unwrap();
        let bad = format!("{base}[[resource.timeline]]\nat = \"1s\"\nremove = [\"X\"]\n");
        let e = parse(&bad).unwrap_err();
        assert_eq!(e.key, "resource[0].timeline[0].remove[0]");
    }

    #[test]
    fn error_specs_and_selectors_parse() {
        let e: ErrorSpec = "InvalidArgument: bad id".parse().unwrap();
        assert_eq!((e.code, e.message.as_str()), (tonic::Code::InvalidArgument, "bad id"));
        let e: ErrorSpec = "unavailable".parse().unwrap();
        assert_eq!(e.message, DEFAULT_FAULT_MESSAGE);
        assert_eq!("14".parse::<ErrorSpec>().unwrap().code, tonic::Code::Unavailable);
        assert!("nope".parse::<ErrorSpec>().is_err());
        assert_eq!("allocate".parse::<RpcSelector>().unwrap(), RpcSelector::One(Rpc::Allocate));
        assert_eq!("list-and-watch".parse::<RpcSelector>().unwrap(), RpcSelector::One(Rpc::ListAndWatch));
        assert_eq!("*".parse::<RpcSelector>().unwrap(), RpcSelector::Any);
    }
}
