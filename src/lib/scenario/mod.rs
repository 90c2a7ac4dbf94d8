//! Scenarios as files: a node, mock plugins and steps (TOML, see
//! `docs/scenarios.md`), run on an engine ([`crate::smoke::engine`]) with
//! what a user or a plugin can observe recorded after each step, so that two
//! engines (kubelet-sim and a referee running the kubelet's own code) can be
//! compared ([`diff`]).

pub mod diff;
pub mod dra;
pub mod glue;
pub mod observe;
pub mod run;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::kubelet_sim::KubeletVersion;
use crate::mock_plugin::ResourceConfig;
use crate::topology::{CpuPolicy, Policy, Scope};

/// Longest wait a step may ask for (a scenario must stay fast).
pub const MAX_WAIT: Duration = Duration::from_secs(60);
/// A wait's deadline when the step names none.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);
/// Largest scenario file read.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// One scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// What the scenario shows, in a sentence.
    pub description: String,
    /// The kubelet releases it applies to (`1.34` ... `1.37`).
    pub releases: Vec<String>,
    /// The node.
    #[serde(default)]
    pub node: Node,
    /// The mock plugins.
    #[serde(default, rename = "plugin")]
    pub plugins: Vec<PluginDef>,
    /// The mock DRA drivers (plugins of the kind `DRAPlugin`; steps name them like plugins).
    #[serde(default, rename = "dra_driver")]
    pub drivers: Vec<DraDriverDef>,
    /// The steps, in order.
    #[serde(rename = "step")]
    pub steps: Vec<StepDef>,
    /// Known differences between kubelet-sim and the kubelet's code.
    #[serde(default, rename = "difference")]
    pub differences: Vec<Difference>,
    /// The file's name without `.toml` (filled in by [`Scenario::load`]).
    #[serde(skip)]
    pub name: String,
    /// The file.
    #[serde(skip)]
    pub path: PathBuf,
}

/// The node: machine, Topology Manager and CPU manager, as the kubelet's flags name them.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    /// NUMA nodes.
    #[serde(default = "two")]
    pub numa_nodes: usize,
    /// CPUs per NUMA node.
    #[serde(default = "four")]
    pub cpus_per_numa: usize,
    /// `--topology-manager-policy`.
    #[serde(default)]
    pub topology_manager_policy: Policy,
    /// `--topology-manager-scope`.
    #[serde(default)]
    pub topology_manager_scope: Scope,
    /// `--topology-manager-policy-options`, e.g. `prefer-closest-numa-nodes=true`.
    #[serde(default)]
    pub topology_manager_policy_options: Option<String>,
    /// `--cpu-manager-policy`.
    #[serde(default)]
    pub cpu_manager_policy: CpuPolicy,
    /// `--reserved-cpus`, e.g. `0`.
    #[serde(default)]
    pub reserved_cpus: Option<String>,
    /// `--numa-distances`, e.g. `10,21;21,10`.
    #[serde(default)]
    pub numa_distances: Option<String>,
}

fn two() -> usize {
    2
}
fn four() -> usize {
    4
}
fn yes() -> bool {
    true
}
fn default_namespace() -> String {
    "default".into()
}

impl Default for Node {
    fn default() -> Self {
        Node {
            numa_nodes: 2,
            cpus_per_numa: 4,
            topology_manager_policy: Policy::None,
            topology_manager_scope: Scope::Container,
            topology_manager_policy_options: None,
            cpu_manager_policy: CpuPolicy::None,
            reserved_cpus: None,
            numa_distances: None,
        }
    }
}

impl Node {
    /// The topology config both engines get.
    pub fn topology(&self, place: &str) -> Result<crate::topology::TopologyConfig> {
        let bad = |key: &str, e: String| Error::invalid(format!("{place}: node.{key}"), e);
        let options = match &self.topology_manager_policy_options {
            Some(s) => s.parse().map_err(|e| bad("topology_manager_policy_options", e))?,
            None => Default::default(),
        };
        let reserved_cpus = match &self.reserved_cpus {
            Some(s) => crate::topology::parse_cpu_list(s).map_err(|e| bad("reserved_cpus", e))?,
            None => Default::default(),
        };
        let distances = match &self.numa_distances {
            Some(s) => Some(crate::topology::parse_distances(s).map_err(|e| bad("numa_distances", e))?),
            None => None,
        };
        let config = crate::topology::TopologyConfig {
            policy: self.topology_manager_policy,
            scope: self.topology_manager_scope,
            options,
            cpu_policy: self.cpu_manager_policy,
            reserved_cpus,
            machine: crate::topology::Machine {
                numa_nodes: self.numa_nodes,
                cpus_per_numa: self.cpus_per_numa,
                distances,
            },
        };
        config.validate().map_err(|e| Error::invalid(format!("{place}: node"), e.to_string()))?;
        Ok(config)
    }
}

/// How a plugin registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Registration {
    /// Register on `<dir>/kubelet.sock`.
    #[default]
    #[serde(rename = "kubelet.sock")]
    KubeletSock,
    /// Serve a registration socket in plugins_registry for the plugin watcher.
    #[serde(rename = "plugins_registry")]
    PluginsRegistry,
}

/// One mock plugin (a `dpctl mock-plugin` process's worth of resources).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginDef {
    /// The name steps use.
    pub id: String,
    /// `kubelet.sock` (default) or `plugins_registry`.
    #[serde(default)]
    pub registration: Registration,
    /// Start it before the first step (otherwise a `start` step does).
    #[serde(default = "yes")]
    pub start: bool,
    /// Serve the control socket `set-health` uses (`<dir>/.dpctl/<resource>.sock`):
    /// turn it off for a second plugin of the same resource.
    #[serde(default = "yes")]
    pub control: bool,
    /// Deadline of one Register call, e.g. `2s`.
    #[serde(default)]
    pub register_timeout: Option<String>,
    /// Its resources: `dpctl mock-plugin --config`'s `[[resource]]` tables.
    #[serde(rename = "resource")]
    pub resources: Vec<ResourceConfig>,
}

/// One mock DRA driver (an in-process `dpctl dra mock`): registers on
/// plugins_registry as a `DRAPlugin` and answers the kubelet's
/// NodePrepareResources/NodeUnprepareResources calls (docs/scenarios.md).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DraDriverDef {
    /// The name steps use (shared with `[[plugin]]` ids).
    pub id: String,
    /// The driver name it registers under, as claims' allocation results name it.
    pub driver: String,
    /// Start it before the first step (otherwise a `start` step does).
    #[serde(default = "yes")]
    pub start: bool,
    /// `supported_versions` in this order (`dra mock --service`: `v1`, `v1beta1`,
    /// `health-v1alpha1`, `health-v1`) [default: `["v1"]`].
    #[serde(default)]
    pub services: Vec<String>,
    /// The pool of its devices [default: `pool-0`].
    #[serde(default)]
    pub pool: Option<String>,
    /// How many devices (`dev-0` ...) [default: 4].
    #[serde(default)]
    pub devices: Option<usize>,
    /// Devices per prepared claim [default: 1].
    #[serde(default)]
    pub devices_per_claim: Option<usize>,
    /// `request_names` of every device it answers (empty: all requests).
    #[serde(default)]
    pub request_names: Vec<String>,
    /// What to break (`dra mock`'s faults).
    #[serde(default)]
    pub faults: DraFaults,
}

/// The mock DRA driver's faults a scenario can ask for.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DraFaults {
    /// Leave the first claim of each Prepare out of the answer.
    #[serde(default)]
    pub missing_uid: bool,
    /// A claim prepared again gets other devices.
    #[serde(default)]
    pub not_idempotent: bool,
    /// Answer every claim of Prepare with this error.
    #[serde(default)]
    pub prepare_error: Option<String>,
    /// Answer every claim of Unprepare with this error.
    #[serde(default)]
    pub unprepare_error: Option<String>,
}

impl DraDriverDef {
    /// The mock's configuration in the run's directories: its service socket
    /// in `<root>/plugins/<id>/`, its CDI specs in `<root>/cdi/<id>/`.
    pub fn mock_config(&self, registry_dir: &Path, root: &Path) -> Result<crate::dra::mock::MockConfig> {
        let place = format!("dra_driver {:?}", self.id);
        let services = if self.services.is_empty() {
            vec![crate::dra::Service::Node(crate::dra::NodeApi::V1)]
        } else {
            self.services
                .iter()
                .map(|s| {
                    let bad = |e: String| Error::invalid(format!("{place}: services"), e);
                    if s.chars().count() > 64 {
                        let shown: String = s.chars().take(64).collect();
                        return Err(bad(format!(
                            "{shown:?}... is not a DRA service (v1, v1beta1, health-v1alpha1, health-v1)"
                        )));
                    }
                    crate::dra::Service::parse(s).map_err(bad)
                })
                .collect::<Result<Vec<_>>>()?
        };
        let f = &self.faults;
        let cfg = crate::dra::mock::MockConfig {
            driver: self.driver.clone(),
            registry_dir: registry_dir.to_path_buf(),
            endpoint: root.join("plugins").join(&self.id).join("dra.sock"),
            cdi_dir: root.join("cdi").join(&self.id),
            services,
            pool: self.pool.clone().unwrap_or_else(|| "pool-0".into()),
            devices: self.devices.unwrap_or(4),
            devices_per_claim: self.devices_per_claim.unwrap_or(1),
            request_names: self.request_names.clone(),
            unhealthy: Default::default(),
            health_interval: Duration::from_secs(5),
            faults: crate::dra::mock::Faults {
                missing_uid: f.missing_uid,
                not_idempotent: f.not_idempotent,
                prepare_error: f.prepare_error.clone(),
                unprepare_error: f.unprepare_error.clone(),
                ..Default::default()
            },
            record: None,
            device_node: None,
        };
        cfg.check().map_err(|e| Error::invalid(&place, e.to_string()))?;
        Ok(cfg)
    }
}

/// A step as written: what to do, an optional name and expectations.
#[derive(Debug, Clone, Deserialize)]
pub struct StepDef {
    /// The action (the `do` key and its arguments).
    #[serde(flatten)]
    pub action: Action,
    /// A name the report and `[[difference]]` use [default: `N-<do>`].
    #[serde(default)]
    pub name: Option<String>,
    /// Expected values of this step's observation, by JSON pointer
    /// (`/result/admitted`, `/resources/example.com~1gpu/allocatable`).
    #[serde(default)]
    pub expect: BTreeMap<String, toml::Value>,
    /// JSON pointers this step's observation leaves out on every engine:
    /// what wall-clock timing decides (how many retries of a refused
    /// registration fell inside the step), never what the kubelet decides.
    #[serde(default)]
    pub unobserved: Vec<String>,
}

/// What a step does.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "do", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Action {
    /// Start a plugin (again).
    Start {
        /// The plugin's id.
        plugin: String,
    },
    /// Stop a plugin: its streams end, its sockets are removed.
    Stop {
        /// The plugin's id.
        plugin: String,
    },
    /// Admit a pod (a manifest, YAML).
    Admit {
        /// The Pod manifest.
        pod: String,
    },
    /// Delete a pod.
    Delete {
        /// Pod name.
        pod: String,
        /// Namespace.
        #[serde(default = "default_namespace")]
        namespace: String,
    },
    /// Restart the kubelet and wait for plugins to come back.
    RestartKubelet {
        /// How long to wait for re-registrations [default: 10s].
        #[serde(default)]
        wait: Option<String>,
        /// Admit every pod again this long after the new kubelet.sock, its
        /// containers still running [default: no re-admission].
        #[serde(default)]
        readmit_after: Option<String>,
    },
    /// Reboot the node: containers gone, checkpoint kept, every pod admitted
    /// again (in `order`, pod names; default: admission order).
    Reboot {
        /// The order pods are admitted again in.
        #[serde(default)]
        order: Vec<String>,
        /// From the kubelet's fresh start to the re-admission [default: 0s]:
        /// plugins that register meanwhile are back in time.
        #[serde(default)]
        readmit_after: Option<String>,
    },
    /// Restart one container of an admitted pod.
    RestartContainer {
        /// Pod name.
        pod: String,
        /// Container name.
        container: String,
        /// Namespace.
        #[serde(default = "default_namespace")]
        namespace: String,
    },
    /// Set devices' health through the plugin's control socket.
    SetHealth {
        /// The plugin's id.
        plugin: String,
        /// The resource [default: the plugin's first].
        #[serde(default)]
        resource: Option<String>,
        /// Device IDs.
        ids: Vec<String>,
        /// `Healthy` or `Unhealthy`.
        health: String,
    },
    /// Wait for a condition, at most `timeout`; whether it was met is observed.
    Wait {
        /// The condition.
        until: Until,
        /// The plugin (registered, rejected, calls).
        #[serde(default)]
        plugin: Option<String>,
        /// The resource (capacity; calls: optional).
        #[serde(default)]
        resource: Option<String>,
        /// Capacity wanted (capacity).
        #[serde(default)]
        capacity: Option<usize>,
        /// Allocatable wanted (capacity).
        #[serde(default)]
        allocatable: Option<usize>,
        /// The RPC (calls), e.g. `GetInfo`.
        #[serde(default)]
        rpc: Option<String>,
        /// How many (registered, rejected, calls) [default: 1].
        #[serde(default)]
        count: Option<u64>,
        /// Deadline [default: 10s, at most 60s].
        #[serde(default)]
        timeout: Option<String>,
    },
}

/// What a `wait` step waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Until {
    /// The plugin saw `count` accepted registrations in all.
    Registered,
    /// The plugin saw `count` rejected registrations in all.
    Rejected,
    /// The kubelet shows `capacity` and `allocatable` for `resource`.
    Capacity,
    /// The plugin received `count` calls of `rpc` in all.
    Calls,
}

impl Action {
    /// The `do` word.
    pub fn word(&self) -> &'static str {
        match self {
            Action::Start { .. } => "start",
            Action::Stop { .. } => "stop",
            Action::Admit { .. } => "admit",
            Action::Delete { .. } => "delete",
            Action::RestartKubelet { .. } => "restart-kubelet",
            Action::Reboot { .. } => "reboot",
            Action::RestartContainer { .. } => "restart-container",
            Action::SetHealth { .. } => "set-health",
            Action::Wait { .. } => "wait",
        }
    }

    /// True when the step ends with everything it caused done, so the state
    /// is worth observing (a start, stop or health flip takes effect in the
    /// kubelet a moment later: a `wait` step observes it).
    pub fn settles(&self) -> bool {
        !matches!(self, Action::Start { .. } | Action::Stop { .. } | Action::SetHealth { .. })
    }
}

/// Whether a known difference is deliberate or still open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DiffStatus {
    /// Deliberate, and stated in `kubelet-sim --help` (`stated_as` quotes it).
    Stated,
    /// Found and not yet fixed in the sim (the reason says what is wrong).
    Open,
}

/// A known difference between kubelet-sim and the kubelet's code.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Difference {
    /// The step name it is at [default: any step].
    #[serde(default)]
    pub step: Option<String>,
    /// JSON pointer of the one observable that differs, e.g. `/result/message`:
    /// matched exactly, so a declaration never hides another difference below it.
    pub path: String,
    /// The releases it holds for [default: all of the scenario's].
    #[serde(default)]
    pub releases: Vec<String>,
    /// Why the two differ.
    pub reason: String,
    /// `stated` or `open`.
    pub status: DiffStatus,
    /// For `stated`: words of `kubelet-sim --help` that state it.
    #[serde(default)]
    pub stated_as: Option<String>,
}

impl Difference {
    /// True when it covers an entry at `step` / `pointer` on `release`: the
    /// same observable exactly, never one below it.
    pub fn covers(&self, step: &str, pointer: &str, release: &str) -> bool {
        self.step.as_deref().is_none_or(|s| s == step)
            && pointer == self.path
            && (self.releases.is_empty() || self.releases.iter().any(|r| r == release))
    }
}

impl Scenario {
    /// Why a real kubelet with static pods (`--engine kubelet:PATH`) cannot
    /// play this scenario, or `None` when it can: it has no API server (no
    /// DRA driver's claims), is not restarted or rebooted on request, and
    /// runs on this machine's CPUs and NUMA nodes, not the scenario's.
    pub fn static_pods_cannot(&self) -> Option<String> {
        if !self.drivers.is_empty() {
            return Some("its DRA drivers need ResourceClaims from an API server".into());
        }
        let unplayable = |a: &Action| {
            matches!(a, Action::RestartKubelet { .. } | Action::Reboot { .. } | Action::RestartContainer { .. })
        };
        if let Some((i, step)) = self.steps.iter().enumerate().find(|(_, st)| unplayable(&st.action)) {
            let word = step.action.word();
            return Some(format!("its step {} is a {word}, which the kubelet engine does not play", i + 1));
        }
        let compute = |pod: &str| {
            crate::kubelet_sim::PodSpec::from_manifest(pod, "admit")
                .is_ok_and(|p| p.containers.iter().any(|c| c.compute != Default::default()))
        };
        if let Some(i) = self.steps.iter().position(|st| matches!(&st.action, Action::Admit { pod } if compute(pod))) {
            return Some(format!(
                "its step {} asks for CPU or memory, which fits this machine's capacity, not the scenario's node",
                i + 1
            ));
        }
        // A static pod is critical (k8s.io/kubernetes pkg/kubelet/types/pod_update.go
        // `IsCriticalPod`), so a node-resources fit refusal becomes an attempt to
        // preempt other pods, refused as UnexpectedAdmissionError
        // (pkg/kubelet/preemption/preemption.go `HandleAdmissionFailure`): the
        // OutOf<resource> an API server's pod gets cannot be seen with static pods.
        let out_of = |st: &StepDef| st.expect.values().any(|v| v.as_str().is_some_and(|r| r.starts_with("OutOf")));
        if let Some(i) = self.steps.iter().position(out_of) {
            return Some(format!(
                "its step {} expects an OutOf<resource> refusal, which a static pod never gets: it is critical, \
                 and the kubelet tries preemption instead (UnexpectedAdmissionError)",
                i + 1
            ));
        }
        let n = &self.node;
        let machine = n.topology_manager_policy != Policy::None
            || n.cpu_manager_policy != CpuPolicy::None
            || n.reserved_cpus.is_some()
            || n.numa_distances.is_some()
            || n.topology_manager_policy_options.is_some();
        machine.then(|| {
            "its [node] Topology or CPU manager needs the scenario's NUMA nodes and CPUs, not this machine's".into()
        })
    }

    /// Reads and checks a scenario file.
    pub fn load(path: &Path) -> Result<Scenario> {
        let place = path.display().to_string();
        let meta = std::fs::metadata(path).map_err(|e| Error::invalid(&place, format!("cannot read it: {e}")))?;
        if !meta.is_file() {
            return Err(Error::invalid(&place, "not a regular file (a scenario is a .toml file)"));
        }
        if meta.len() > MAX_FILE_BYTES {
            return Err(Error::invalid(
                &place,
                format!("{} bytes, over the {MAX_FILE_BYTES} a scenario may have", meta.len()),
            ));
        }
        let text = crate::input::read_text(path, &place)?;
        let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let mut s = Scenario::parse(&text, &place)?;
        s.name = name;
        s.path = path.to_path_buf();
        Ok(s)
    }

    /// Parses and checks scenario text; `place` names it in errors.
    pub fn parse(text: &str, place: &str) -> Result<Scenario> {
        let s: Scenario = toml::from_str(text).map_err(|e| Error::invalid(place, e.to_string()))?;
        s.check(place)?;
        s.check_waits_follow_changes(place)?;
        Ok(s)
    }

    /// `start`, `stop` and `set-health` reach the kubelet a moment after
    /// their step ends. A capacity wait right after one of them that asks for
    /// the very counts the last capacity wait saw is met at once, before the
    /// kubelet has seen the change, so it would record the old state on a busy
    /// machine and the new one on an idle one: refused, naming both steps.
    fn check_waits_follow_changes(&self, place: &str) -> Result<()> {
        let names = self.step_names();
        let mut last: BTreeMap<&str, (Option<usize>, Option<usize>)> = BTreeMap::new();
        let mut pending: Option<&str> = None;
        for (step, name) in self.steps.iter().zip(&names) {
            match &step.action {
                Action::Start { .. } | Action::Stop { .. } | Action::SetHealth { .. } => pending = Some(name),
                Action::Wait { until: Until::Capacity, resource: Some(r), capacity, allocatable, .. } => {
                    let counts = (*capacity, *allocatable);
                    if let Some(action) = pending
                        && last.get(r.as_str()) == Some(&counts)
                    {
                        return Err(Error::invalid(
                            place,
                            format!(
                                "step {name} waits for the counts {r} already had before step {action}, so it is met before the \
                                 kubelet has seen {action}; wait for the state {action} leads to (a release where nothing \
                                 changes shows as met = false at the timeout)"
                            ),
                        ));
                    }
                    last.insert(r, counts);
                    pending = None;
                }
                Action::Wait { .. } => {}
                // A kubelet restart or a reboot starts from no devices: the counts before it say nothing.
                Action::RestartKubelet { .. } | Action::Reboot { .. } => {
                    last.clear();
                    pending = None;
                }
                _ => pending = None,
            }
        }
        Ok(())
    }

    /// The step names, in order (`N-<do>` when unnamed).
    pub fn step_names(&self) -> Vec<String> {
        self.steps
            .iter()
            .enumerate()
            .map(|(i, s)| s.name.clone().unwrap_or_else(|| format!("{}-{}", i + 1, s.action.word())))
            .collect()
    }

    /// The releases as versions the sim plays.
    pub fn versions(&self) -> Result<Vec<KubeletVersion>> {
        Ok(KubeletVersion::parse_list(&self.releases.join(","))?)
    }

    // long: one rule after another over the file (releases, node, plugins, each step's
    // arguments, declared differences), each naming what is wrong; no seam in between.
    fn check(&self, place: &str) -> Result<()> {
        let bad = |what: String| Error::invalid(place, what);
        if self.releases.is_empty() {
            return Err(bad("releases: name at least one kubelet release, e.g. [\"1.36\"]".into()));
        }
        KubeletVersion::parse_list(&self.releases.join(",")).map_err(|e| bad(format!("releases: {e}")))?;
        self.node.topology(place)?;
        let mut ids = Vec::new();
        for p in &self.plugins {
            if ids.contains(&p.id) {
                return Err(bad(format!("plugin {:?} is defined twice", p.id)));
            }
            if p.resources.is_empty() {
                return Err(bad(format!("plugin {:?}: give at least one [[plugin.resource]]", p.id)));
            }
            if let Some(t) = &p.register_timeout {
                parse_wait(t, place)?;
            }
            ids.push(p.id.clone());
        }
        for d in &self.drivers {
            let short = |s: &str| s.chars().take(64).collect::<String>();
            if d.id.is_empty() || d.id.len() > 63 || !d.id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                return Err(bad(format!(
                    "dra_driver id {:?}: 1 to 63 letters, digits or '-' (it names the driver's socket directory)",
                    short(&d.id)
                )));
            }
            if d.driver.len() > 253 {
                return Err(bad(format!(
                    "dra_driver {:?}: driver {:?}...: at most 253 characters",
                    d.id,
                    short(&d.driver)
                )));
            }
            if ids.contains(&d.id) {
                return Err(bad(format!("plugin {:?} is defined twice", d.id)));
            }
            d.mock_config(Path::new("/r/plugins_registry"), Path::new("/r")).map_err(|e| bad(e.to_string()))?;
            ids.push(d.id.clone());
        }
        let known = |id: &str| {
            if ids.iter().any(|i| i == id) {
                Ok(())
            } else {
                Err(bad(format!(
                    "step names plugin {id:?}, which is not defined (plugins: {})",
                    crate::text::list(&ids)
                )))
            }
        };
        let plugin = |id: &str| {
            known(id)?;
            self.plugins
                .iter()
                .find(|p| p.id == id)
                .ok_or_else(|| bad(format!("step names DRA driver {id:?} where only a device plugin can be named")))
        };
        if self.steps.is_empty() {
            return Err(bad("give at least one [[step]]".into()));
        }
        let names = self.step_names();
        for (i, (step, name)) in self.steps.iter().zip(&names).enumerate() {
            if names[..i].contains(name) {
                return Err(bad(format!("two steps are named {name:?}")));
            }
            for pointer in step.expect.keys() {
                if !pointer.starts_with('/') {
                    return Err(bad(format!(
                        "step {name}: expect key {pointer:?} is not a JSON pointer (/result/...)"
                    )));
                }
            }
            for pointer in &step.unobserved {
                if !pointer.starts_with('/') {
                    return Err(bad(format!(
                        "step {name}: unobserved {pointer:?} is not a JSON pointer (/drivers/...)"
                    )));
                }
                // What is left out cannot also be expected: one of the two is a mistake.
                if let Some(e) = step.expect.keys().find(|e| *e == pointer || e.starts_with(&format!("{pointer}/"))) {
                    return Err(bad(format!(
                        "step {name}: unobserved {pointer:?} leaves out what expect {e:?} checks"
                    )));
                }
            }
            match &step.action {
                Action::Start { plugin: p } | Action::Stop { plugin: p } => {
                    known(p)?;
                }
                Action::SetHealth { plugin: p, resource, .. } => {
                    let def = plugin(p)?;
                    if let Some(r) = resource
                        && !def.resources.iter().any(|x| &x.name == r)
                    {
                        return Err(bad(format!("step {name}: plugin {p:?} has no resource {r:?}")));
                    }
                }
                Action::Admit { pod } => {
                    crate::kubelet_sim::PodSpec::from_manifest(pod, &format!("{place}: step {name}"))?;
                }
                Action::RestartKubelet { wait, readmit_after } => {
                    for w in wait.iter().chain(readmit_after) {
                        parse_wait(w, place)?;
                    }
                }
                Action::Wait { until, plugin: p, resource, rpc, timeout, .. } => {
                    if let Some(t) = timeout {
                        parse_wait(t, place)?;
                    }
                    match until {
                        Until::Registered | Until::Rejected | Until::Calls => {
                            let Some(p) = p else {
                                return Err(bad(format!("step {name}: wait until {until:?} needs plugin")));
                            };
                            known(p)?;
                            if *until == Until::Calls && rpc.is_none() {
                                return Err(bad(format!("step {name}: wait until calls needs rpc")));
                            }
                        }
                        Until::Capacity => {
                            if resource.is_none() {
                                return Err(bad(format!("step {name}: wait until capacity needs resource")));
                            }
                        }
                    }
                }
                Action::Reboot { readmit_after: Some(w), .. } => {
                    parse_wait(w, place)?;
                }
                Action::Delete { .. } | Action::RestartContainer { .. } | Action::Reboot { .. } => {}
            }
        }
        for d in &self.differences {
            if let Some(s) = &d.step
                && !names.contains(s)
            {
                return Err(bad(format!("[[difference]] names step {s:?}, which does not exist")));
            }
            if !d.path.starts_with('/') {
                return Err(bad(format!("[[difference]] path {:?} is not a JSON pointer", d.path)));
            }
            if d.reason.trim().is_empty() {
                return Err(bad("[[difference]] needs a reason".into()));
            }
            for r in &d.releases {
                if !self.releases.contains(r) {
                    return Err(bad(format!("[[difference]] names release {r}, which the scenario does not run")));
                }
            }
            if d.status == DiffStatus::Stated {
                let Some(words) = d.stated_as.as_deref() else {
                    return Err(bad(
                        "[[difference]] status = \"stated\" needs stated_as (words of kubelet-sim --help)".into(),
                    ));
                };
                if !stated_in_help(words) {
                    return Err(bad(format!(
                        "[[difference]] stated_as {words:?} is not in kubelet-sim --help: a deliberate difference must be stated there"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// True when `words` appear in `kubelet-sim --help`'s versions and
/// differences text (whitespace runs compared as one space).
pub fn stated_in_help(words: &str) -> bool {
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    squash(&crate::kubelet_sim::differences::versions_and_differences()).contains(&squash(words))
}

/// A wait from a scenario: a duration up to [`MAX_WAIT`].
pub fn parse_wait(s: &str, place: &str) -> Result<Duration> {
    let d = crate::duration::parse(s).map_err(|e| Error::invalid(place, format!("{s:?}: {e}")))?;
    if d > MAX_WAIT {
        return Err(Error::invalid(
            place,
            format!("{s:?} is longer than the {}s a scenario step may wait", MAX_WAIT.as_secs()),
        ));
    }
    Ok(d)
}

/// The scenario files among `paths`: files as given, directories' `*.toml` sorted.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let rd = std::fs::read_dir(p).map_err(|e| Error::io(format!("reading {}", p.display()), e))?;
            let mut files: Vec<PathBuf> = rd
                .filter_map(std::result::Result::ok)
                .map(|e| e.path())
                .filter(|f| f.extension().is_some_and(|x| x == "toml"))
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(Error::invalid(p.display().to_string(), "a directory with no *.toml scenario in it"));
            }
            out.extend(files);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
description = "a plugin registers"
releases = ["1.36"]
[[plugin]]
id = "gpu"
[[plugin.resource]]
name = "example.com/gpu"
count = 2
[[step]]
do = "wait"
until = "capacity"
resource = "example.com/gpu"
capacity = 2
allocatable = 2
"#;

    /// Every scenario the project ships passes the checks, so a broken one
    /// fails here in a second rather than minutes into the conformance run.
    #[test]
    fn every_shipped_scenario_parses() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/scenarios");
        let files = super::expand(&[dir]).unwrap();
        assert!(files.len() > 50, "{} scenarios", files.len());
        for f in files {
            Scenario::load(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        }
    }

    /// What a real kubelet with static pods cannot play is named; the rest it plays.
    #[test]
    fn static_pods_play_what_needs_no_api_server_restart_or_machine() {
        assert_eq!(Scenario::parse(MINIMAL, "t").unwrap().static_pods_cannot(), None);
        let why = |extra: &str| Scenario::parse(&format!("{MINIMAL}{extra}"), "t").unwrap().static_pods_cannot();
        let restart = why("[[step]]\ndo = \"restart-kubelet\"\n").unwrap();
        assert!(restart.contains("step 2 is a restart-kubelet"), "{restart}");
        let cpu = why(
            "[[step]]\ndo = \"admit\"\npod = \"metadata: {name: p}\\nspec: {containers: [{name: c, resources: {requests: {cpu: 1}}}]}\"\n",
        );
        assert!(cpu.unwrap().contains("asks for CPU or memory"));
        let out_of = why(
            "[[step]]\ndo = \"admit\"\npod = \"metadata: {name: p}\\nspec: {containers: [{name: c}]}\"\nexpect = { \"/result/reason\" = \"OutOfcpu\" }\n",
        );
        assert!(out_of.unwrap().contains("a static pod never gets"));
        let topology = why("[node]\ntopology_manager_policy = \"restricted\"\n").unwrap();
        assert!(topology.contains("NUMA nodes and CPUs"), "{topology}");
    }

    #[test]
    fn a_minimal_scenario_parses() {
        let s = Scenario::parse(MINIMAL, "t").unwrap();
        assert_eq!(s.step_names(), ["1-wait"]);
        assert_eq!(s.plugins[0].registration, Registration::KubeletSock);
    }

    #[test]
    fn mistakes_are_named() {
        let e = Scenario::parse(&MINIMAL.replace("until = \"capacity\"", "until = \"capacity\"\ntimout = \"1s\""), "t");
        assert!(e.unwrap_err().to_string().contains("timout"));
        let e = Scenario::parse(&MINIMAL.replace("\"1.36\"", "\"1.99\""), "t").unwrap_err().to_string();
        assert!(e.contains("releases"), "{e}");
        let e = Scenario::parse(&format!("{MINIMAL}\n[[step]]\ndo = \"start\"\nplugin = \"nic\"\n"), "t");
        assert!(e.unwrap_err().to_string().contains("\"nic\""));
        let e =
            Scenario::parse(&MINIMAL.replace("until = \"capacity\"", "until = \"capacity\"\ntimeout = \"1h\""), "t");
        assert!(e.unwrap_err().to_string().contains("longer than"));
    }

    #[test]
    fn unobserved_pointers_are_pointers_and_never_hide_what_is_expected() {
        let with = |line: &str| Scenario::parse(&format!("{MINIMAL}{line}\n"), "t");
        with("unobserved = [\"/plugins/gpu/registrations\"]").unwrap();
        let e = with("unobserved = [\"plugins\"]").unwrap_err().to_string();
        assert!(e.contains("step 1-wait: unobserved \"plugins\" is not a JSON pointer"), "{e}");
        let e = with("expect = { \"/result/admitted\" = true }\nunobserved = [\"/result\"]").unwrap_err().to_string();
        assert!(e.contains("unobserved \"/result\" leaves out what expect \"/result/admitted\" checks"), "{e}");
    }

    /// A wait for the counts before a stop is met before the kubelet sees the
    /// stop; a wait for the counts it leads to is not.
    #[test]
    fn a_wait_after_a_stop_must_wait_for_the_change() {
        let stop = "\n[[step]]\nname = \"stop\"\ndo = \"stop\"\nplugin = \"gpu\"\n[[step]]\nname = \"after\"\ndo = \"wait\"\n\
                    until = \"capacity\"\nresource = \"example.com/gpu\"\ncapacity = 2\nallocatable = ALLOC\n";
        let e = Scenario::parse(&format!("{MINIMAL}{}", stop.replace("ALLOC", "2")), "t").unwrap_err().to_string();
        assert!(e.contains("step after waits for the counts example.com/gpu already had before step stop"), "{e}");
        Scenario::parse(&format!("{MINIMAL}{}", stop.replace("ALLOC", "0")), "t").unwrap();
    }

    #[test]
    fn dra_drivers_are_checked_and_named_like_plugins() {
        let driver = "\n[[dra_driver]]\nid = \"ID\"\ndriver = \"gpu.example.com\"\nSERVICES\n";
        let with = |id: &str, services: &str| {
            Scenario::parse(&format!("{MINIMAL}{}", driver.replace("ID", id).replace("SERVICES", services)), "t")
        };
        let s = with("dra", "services = [\"v1beta1\", \"v1\"]").unwrap();
        assert_eq!(s.drivers[0].services, ["v1beta1", "v1"]);
        let e = with("gpu", "").unwrap_err().to_string();
        assert!(e.contains("plugin \"gpu\" is defined twice"), "{e}");
        let e = with("dra", "services = [\"v9\"]").unwrap_err().to_string();
        assert!(e.contains("services") && e.contains("v9"), "{e}");
        let e = with("dra", "devices = 0").unwrap_err().to_string();
        assert!(e.contains("--devices"), "{e}");
        let stop = "\n[[step]]\ndo = \"stop\"\nplugin = \"dra\"\n";
        Scenario::parse(&format!("{MINIMAL}{}{stop}", driver.replace("ID", "dra").replace("SERVICES", "")), "t")
            .unwrap();
        let health = "\n[[step]]\ndo = \"set-health\"\nplugin = \"dra\"\nids = [\"x\"]\nhealth = \"Unhealthy\"\n";
        let e =
            Scenario::parse(&format!("{MINIMAL}{}{health}", driver.replace("ID", "dra").replace("SERVICES", "")), "t")
                .unwrap_err()
                .to_string();
        assert!(e.contains("DRA driver \"dra\" where only a device plugin"), "{e}");
    }

    #[test]
    fn a_stated_difference_must_be_in_the_help() {
        let d = "\n[[difference]]\npath = \"/result\"\nreason = \"x\"\nstatus = \"stated\"\nstated_as = \"WORDS\"\n";
        let e = Scenario::parse(&format!("{MINIMAL}{d}"), "t").unwrap_err().to_string();
        assert!(e.contains("not in kubelet-sim --help"), "{e}");
        let ok = d.replace("WORDS", "Rejected pods are not kept,    so PodResources never lists them.");
        Scenario::parse(&format!("{MINIMAL}{ok}"), "t").unwrap();
    }

    #[test]
    fn differences_cover_one_observable_exactly_by_step_and_release() {
        let d = Difference {
            step: Some("admit".into()),
            path: "/result/message".into(),
            releases: vec!["1.34".into()],
            reason: "r".into(),
            status: DiffStatus::Open,
            stated_as: None,
        };
        assert!(d.covers("admit", "/result/message", "1.34"));
        assert!(!d.covers("admit", "/result/messages", "1.34"));
        assert!(!d.covers("admit", "/result/message/0", "1.34"), "nothing below the declared observable");
        assert!(!d.covers("admit", "/result/message", "1.35"));
        assert!(!d.covers("other", "/result/message", "1.34"));
    }
}
