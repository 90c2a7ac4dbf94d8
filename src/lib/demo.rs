//! `dpctl demo`: a kubelet-sim and a mock plugin in one process, in a
//! temporary directory, walked through the device-plugin protocol step by
//! step: registration, ListAndWatch, a health change, admission of a pod
//! (GetPreferredAllocation, Allocate, PreStartContainer), PodResources read
//! over its real socket, a kubelet restart with re-registration, and cleanup.
//!
//! [`run_demo`] hands each finished [`DemoStep`] to a sink (the CLI renders
//! it as narration or a JSON line). Every step checks what it shows; the
//! first that does not hold stops the demo with `ok: false` and an error.
//! Cleanup runs whatever happens (a failed step, an interrupt).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::broadcast;

use crate::error::{Error, Result};
use crate::kubelet_sim::{
    EventKind, KubeletSim, PodSpec, PreferredCall, RequestOptions, SimConfig, SimEvent, SimHandle,
};
use crate::mock_plugin::{AllocateConfig, MockConfig, MockHandle, MockPlugin, Policy, ResourceConfig};
use crate::model::{ContainerAllocation, Device};
use crate::podresources::client::{PodResourcesClient, PodResourcesConfig};
use crate::text::millis;

/// The resource the demo's plugin serves.
pub const RESOURCE: &str = "example.com/gpu";
/// The device that turns unhealthy.
pub const FAILING_DEVICE: &str = "GPU-1";
/// The demo pod.
pub const POD: &str = "demo-pod";
/// Its namespace.
pub const NAMESPACE: &str = "default";
/// Devices the pod asks for.
pub const POD_DEVICES: u64 = 2;
/// How many steps the demo has.
pub const STEPS: u32 = 8;

/// How to run the demo.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    /// A pause after each step (for people watching; zero in scripts).
    pub pace: Duration,
    /// How long any one thing may take (registration, a health change, a restart).
    pub deadline: Duration,
}

impl Default for DemoConfig {
    fn default() -> Self {
        DemoConfig { pace: Duration::ZERO, deadline: Duration::from_secs(5) }
    }
}

/// One step as it finished.
#[derive(Debug, Clone, Serialize)]
pub struct DemoStep {
    /// 1-based step number.
    pub step: u32,
    /// Stable name, e.g. `registration`.
    pub name: &'static str,
    /// What happens, in a few words.
    pub title: &'static str,
    /// What the kubelet does and why it matters, in one line.
    pub why: &'static str,
    /// True when the step showed what it should.
    pub ok: bool,
    /// Why not, when `ok` is false.
    pub error: Option<String>,
    /// How long the step took.
    pub took_ms: u64,
    /// What was seen.
    pub details: Details,
}

/// What a step saw. Serialised as the fields of the variant.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Details {
    /// Nothing (a step that failed before it saw anything).
    None {},
    /// Step 1: the kubelet's sockets.
    Kubelet {
        /// The temporary device-plugin directory.
        dir: String,
        /// Registration socket.
        kubelet_socket: String,
        /// PodResources socket.
        podresources_socket: String,
    },
    /// Step 2: the RegisterRequest and the kubelet's dial-back.
    Registration {
        /// `RegisterRequest.version`.
        version: String,
        /// `RegisterRequest.resource_name`.
        resource_name: String,
        /// `RegisterRequest.endpoint`.
        endpoint: String,
        /// `RegisterRequest.options`.
        request_options: Option<RequestOptions>,
        /// The plugin socket the kubelet dialed back.
        plugin_socket: String,
        /// What GetDevicePluginOptions answered (the kubelet acts on these).
        options: RequestOptions,
        /// Dial-back plus GetDevicePluginOptions.
        dial_back_ms: u64,
    },
    /// Step 3: the first ListAndWatch message.
    Snapshot {
        /// The devices.
        devices: Vec<Device>,
        /// Node capacity.
        capacity: usize,
        /// Node allocatable.
        allocatable: usize,
        /// Encoded message size.
        message_bytes: usize,
    },
    /// Step 4: a device turned unhealthy.
    Health {
        /// The device.
        device: String,
        /// Health before.
        from: String,
        /// Health now.
        to: String,
        /// Capacity before and after.
        capacity: [usize; 2],
        /// Allocatable before and after.
        allocatable: [usize; 2],
        /// From the plugin's change to the kubelet's new counts.
        seen_after_ms: u64,
    },
    /// Step 5: a pod admitted.
    Admission {
        /// `namespace/name`.
        pod: String,
        /// Devices asked for.
        requested: u64,
        /// The GetPreferredAllocation call.
        preferred: Option<Box<PreferredCall>>,
        /// Devices given.
        devices: Vec<String>,
        /// NUMA nodes of those devices.
        numa_nodes: Vec<i64>,
        /// The Allocate answer.
        allocation: Option<Box<ContainerAllocation>>,
        /// PreStartContainer: `ok` or the error.
        pre_start: Option<String>,
        /// Admission time.
        admit_ms: u64,
    },
    /// Step 6: what PodResources lists.
    PodResources {
        /// The socket read.
        socket: String,
        /// The API version that answered.
        api: String,
        /// Per container of the demo pod: resource and device IDs with NUMA nodes.
        containers: Vec<PodResourcesContainer>,
    },
    /// Step 7: a kubelet restart.
    Restart {
        /// Sockets the restart deleted.
        deleted_sockets: Vec<String>,
        /// From the new kubelet.sock to the plugin's Register.
        reregistered_after_ms: u64,
        /// From the new kubelet.sock to its first device list.
        first_list_after_ms: u64,
        /// Pods restored from the checkpoint.
        restored_pods: usize,
        /// The demo pod's devices after the restart.
        pod_devices_kept: Vec<String>,
        /// Capacity after the restart.
        capacity: usize,
        /// Allocatable after the restart.
        allocatable: usize,
    },
    /// Step 8: everything removed.
    Cleanup {
        /// Sockets there were just before (all gone now).
        removed_sockets: Vec<String>,
        /// The directory was removed.
        dir_removed: bool,
    },
}

/// One container in the PodResources step.
#[derive(Debug, Clone, Serialize)]
pub struct PodResourcesContainer {
    /// Container name.
    pub name: String,
    /// Resource name.
    pub resource_name: String,
    /// Device IDs.
    pub device_ids: Vec<String>,
    /// NUMA nodes from the topology.
    pub numa_nodes: Vec<i64>,
}

/// What the demo reports as it goes.
#[derive(Debug, Clone)]
pub enum DemoEvent {
    /// The demo runs in this directory.
    Begin {
        /// The temporary directory.
        dir: PathBuf,
    },
    /// A step starts.
    Starting {
        /// Step number.
        step: u32,
        /// Its title.
        title: &'static str,
    },
    /// A step finished.
    Done(Box<DemoStep>),
}

/// The steps: name, title, why.
const PLAN: [(&str, &str, &str); STEPS as usize] = [
    (
        "kubelet",
        "The kubelet starts",
        "Its device manager serves Registration on kubelet.sock in the device-plugin directory; every device plugin \
         looks for it there.",
    ),
    (
        "registration",
        "The plugin registers",
        "The plugin serves its own socket, then calls Register on kubelet.sock; the kubelet dials the socket back and \
         asks GetDevicePluginOptions before it answers, so a plugin must serve before it registers.",
    ),
    (
        "list-and-watch",
        "ListAndWatch: the device list",
        "The kubelet opens ListAndWatch and keeps it open; every message is the full device list, and the node's \
         capacity and allocatable follow it.",
    ),
    (
        "health-change",
        "A device turns unhealthy",
        "The plugin sends a new list; the kubelet keeps the device in capacity but drops it from allocatable, so no \
         new pod gets it.",
    ),
    (
        "admission",
        "A pod asks for 2 GPUs",
        "The kubelet asks the plugin which devices it prefers (GetPreferredAllocation, here NUMA-aligned), then \
         Allocate returns what the runtime needs: env vars, device nodes, CDI names; PreStartContainer runs before \
         the container starts.",
    ),
    (
        "podresources",
        "PodResources shows who has what",
        "Monitoring agents (GPU exporters, topology tools) read the kubelet's PodResources socket to learn which pod \
         got which device.",
    ),
    (
        "kubelet-restart",
        "The kubelet restarts",
        "A restart deletes every socket in the directory; the plugin must notice the new kubelet.sock and register \
         again. Allocations survive in the kubelet's checkpoint.",
    ),
    (
        "cleanup",
        "Cleanup",
        "The plugin removes its socket when it stops, the kubelet-sim removes its own, and the temporary directory \
         goes.",
    ),
];

/// Runs the demo. `interrupt` completes on Ctrl-C (cleanup still runs).
/// Returns the steps; `Err` only when the demo could not start at all.
pub async fn run_demo(
    config: DemoConfig,
    interrupt: impl std::future::Future<Output = ()>,
    sink: &mut (dyn FnMut(DemoEvent) + Send),
) -> Result<Vec<DemoStep>> {
    let dir = crate::paths::fresh_dir("dpctl-demo")?;
    // Removes the directory should anything below panic; cleanup() removes it otherwise.
    let _dir_guard = crate::paths::RemoveDirOnDrop::new(Some(dir.clone()));
    let mut demo = Demo { config, dir: dir.clone(), sim: None, mock: None, pod_devices: Vec::new(), steps: Vec::new() };
    sink(DemoEvent::Begin { dir: dir.clone() });
    let interrupted = {
        let fut = demo.run_steps(sink);
        tokio::select! {
            () = fut => false,
            () = interrupt => true,
        }
    };
    demo.cleanup(sink, interrupted).await;
    Ok(demo.steps)
}

struct Demo {
    config: DemoConfig,
    dir: PathBuf,
    sim: Option<SimHandle>,
    mock: Option<MockHandle>,
    pod_devices: Vec<String>,
    steps: Vec<DemoStep>,
}

/// A step's result before it is numbered.
type StepResult = Result<Details>;

impl Demo {
    async fn run_steps(&mut self, sink: &mut (dyn FnMut(DemoEvent) + Send)) {
        for n in 1..STEPS {
            sink(DemoEvent::Starting { step: n, title: PLAN[n as usize - 1].1 });
            let t = Instant::now();
            let result = match n {
                1 => self.kubelet().await,
                2 => self.registration().await,
                3 => self.list_and_watch().await,
                4 => self.health_change().await,
                5 => self.admission().await,
                6 => self.podresources().await,
                _ => self.restart().await,
            };
            let ok = result.is_ok();
            self.finish(n, result, t, sink);
            if !ok {
                return;
            }
            if !self.config.pace.is_zero() {
                tokio::time::sleep(self.config.pace).await;
            }
        }
    }

    fn finish(&mut self, n: u32, result: StepResult, t: Instant, sink: &mut (dyn FnMut(DemoEvent) + Send)) {
        let (name, title, why) = PLAN[n as usize - 1];
        let (ok, error, details) = match result {
            Ok(d) => (true, None, d),
            Err(e) => {
                let mut msg = e.to_string();
                match &e {
                    Error::Timeout { .. } => msg.push_str(" (on a slow or busy machine, raise --deadline)"),
                    Error::Invalid { .. } => {}
                    other => {
                        if let Some(h) = crate::podresources::hint(other) {
                            msg.push_str(&format!(" (hint: {h})"));
                        }
                    }
                }
                (false, Some(msg), Details::None {})
            }
        };
        let step = DemoStep { step: n, name, title, why, ok, error, took_ms: millis(t.elapsed()), details };
        self.steps.push(step.clone());
        sink(DemoEvent::Done(Box::new(step)));
    }

    fn sim(&self) -> Result<&SimHandle> {
        self.sim.as_ref().ok_or_else(|| Error::invalid("demo", "the kubelet-sim is not running"))
    }

    async fn kubelet(&mut self) -> StepResult {
        let mut cfg = SimConfig::new(&self.dir);
        cfg.control = false;
        cfg.owns_dir = true; // a temporary directory the demo created
        let sim = KubeletSim::start(cfg).await?;
        let details = Details::Kubelet {
            dir: self.dir.display().to_string(),
            kubelet_socket: sim.kubelet_socket().display().to_string(),
            podresources_socket: sim.podresources_socket().map(|p| p.display().to_string()).unwrap_or_default(),
        };
        self.sim = Some(sim);
        Ok(details)
    }

    async fn registration(&mut self) -> StepResult {
        let sim = self.sim()?.clone();
        let mut rx = sim.subscribe();
        let mut res = ResourceConfig::new(RESOURCE, 4);
        res.numa_nodes = 2;
        res.get_preferred_allocation_available = true;
        res.preferred_policy = Policy::Pack;
        res.pre_start_required = true;
        res.refuse_unhealthy = true;
        res.allocate = AllocateConfig {
            envs: [("EXAMPLE_VISIBLE_DEVICES".to_string(), "{ids}".to_string())].into(),
            annotations: Default::default(),
            mounts: Vec::new(),
            devices: vec![crate::mock_plugin::config::DeviceSpecConfig {
                container_path: "/dev/example{index}".into(),
                host_path: "/dev/null".into(),
                permissions: "rw".into(),
            }],
            cdi_devices: vec!["example.com/gpu={id}".into()],
        };
        let config = MockConfig {
            dir: Some(self.dir.clone()),
            control: false,
            rpc_events: false,
            resources: vec![res],
            ..MockConfig::default()
        };
        self.mock = Some(MockPlugin::start(config).await?);
        let ev = wait_event(&mut rx, self.config.deadline, "the plugin's registration", |k| {
            matches!(k, EventKind::Registered { resource, .. } | EventKind::RegistrationRejected { resource, .. } if resource == RESOURCE)
        })
        .await?;
        match ev.kind {
            EventKind::Registered {
                resource,
                endpoint,
                socket,
                version,
                request_options,
                pre_start_required,
                get_preferred_allocation_available,
                took_ms,
                ..
            } => Ok(Details::Registration {
                version,
                resource_name: resource,
                endpoint,
                request_options,
                plugin_socket: socket,
                options: RequestOptions { pre_start_required, get_preferred_allocation_available },
                dial_back_ms: took_ms,
            }),
            EventKind::RegistrationRejected { message, .. } => {
                Err(Error::invalid("demo", format!("the kubelet-sim rejected the mock plugin: {message}")))
            }
            _ => Err(Error::invalid("demo", "unexpected event")),
        }
    }

    async fn list_and_watch(&mut self) -> StepResult {
        let sim = self.sim()?.clone();
        let counts = sim
            .wait_for_counts(|c| c.get(RESOURCE).is_some_and(|c| c.capacity == 4), self.config.deadline)
            .await
            .map_err(|_| Error::Timeout {
                what: format!("the first ListAndWatch message of {RESOURCE}"),
                timeout: self.config.deadline,
            })?;
        let status = sim.status();
        let res = status.resource(RESOURCE).ok_or_else(|| Error::invalid("demo", "the resource vanished"))?;
        let c = counts.get(RESOURCE).copied().unwrap_or_default();
        if c.allocatable != 4 {
            return Err(check_failed(format!("expected 4 allocatable devices, the kubelet counts {}", c.allocatable)));
        }
        let message_bytes = crate::proto::deviceplugin::v1beta1::ListAndWatchResponse {
            devices: res.devices.iter().map(crate::proto::deviceplugin::v1beta1::Device::from).collect(),
        };
        Ok(Details::Snapshot {
            devices: res.devices.clone(),
            capacity: c.capacity,
            allocatable: c.allocatable,
            message_bytes: prost::Message::encoded_len(&message_bytes),
        })
    }

    async fn health_change(&mut self) -> StepResult {
        let sim = self.sim()?.clone();
        let before = sim.counts().get(RESOURCE).copied().unwrap_or_default();
        let mut rx = sim.subscribe();
        let t = Instant::now();
        let mock = self.mock.as_ref().ok_or_else(|| Error::invalid("demo", "the mock plugin is not running"))?;
        mock.set_health(RESOURCE, &[FAILING_DEVICE.to_string()], crate::proto::deviceplugin::v1beta1::UNHEALTHY)?;
        let ev = wait_event(
            &mut rx,
            self.config.deadline,
            "the kubelet to see the health change",
            |k| matches!(k, EventKind::HealthChanged { id, .. } if id == FAILING_DEVICE),
        )
        .await?;
        let seen_after_ms = millis(t.elapsed());
        let EventKind::HealthChanged { id, from, to, capacity, allocatable, .. } = ev.kind else {
            return Err(Error::invalid("demo", "unexpected event"));
        };
        if capacity != before.capacity || allocatable + 1 != before.allocatable {
            return Err(check_failed(format!(
                "expected capacity {} and allocatable {} after the change, the kubelet counts {capacity} and {allocatable}",
                before.capacity,
                before.allocatable.saturating_sub(1)
            )));
        }
        Ok(Details::Health {
            device: id,
            from,
            to,
            capacity: [before.capacity, capacity],
            allocatable: [before.allocatable, allocatable],
            seen_after_ms,
        })
    }

    async fn admission(&mut self) -> StepResult {
        let sim = self.sim()?.clone();
        let pod = PodSpec::shorthand(POD, NAMESPACE, &[(RESOURCE.to_string(), POD_DEVICES)]);
        let out = sim.admit(pod).await?;
        if !out.admitted {
            return Err(check_failed(format!(
                "the pod was rejected: {}: {}",
                out.reason.unwrap_or_default(),
                out.message.unwrap_or_default()
            )));
        }
        let c = out.containers.first().ok_or_else(|| check_failed("the pod has no container".into()))?;
        if !c.started {
            return Err(check_failed(format!(
                "the container would not start: {}",
                c.start_error.clone().unwrap_or_default()
            )));
        }
        let r = c
            .resources
            .iter()
            .find(|r| r.resource == RESOURCE)
            .ok_or_else(|| check_failed(format!("no {RESOURCE} for the container")))?;
        if r.devices.len() as u64 != POD_DEVICES || r.devices.iter().any(|d| d == FAILING_DEVICE) {
            return Err(check_failed(format!("expected {POD_DEVICES} healthy devices, got {:?}", r.devices)));
        }
        if r.preferred.is_none() || r.allocation.is_none() {
            return Err(check_failed("GetPreferredAllocation or Allocate was not called".into()));
        }
        let status = sim.status();
        let mut numa_nodes: Vec<i64> = status
            .resource(RESOURCE)
            .map(|res| {
                res.devices
                    .iter()
                    .filter(|d| r.devices.contains(&d.id))
                    .flat_map(|d| d.numa_nodes.clone().unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default();
        numa_nodes.sort_unstable();
        numa_nodes.dedup();
        self.pod_devices = r.devices.clone();
        Ok(Details::Admission {
            pod: format!("{NAMESPACE}/{POD}"),
            requested: POD_DEVICES,
            preferred: r.preferred.clone().map(Box::new),
            devices: r.devices.clone(),
            numa_nodes,
            allocation: r.allocation.clone().map(Box::new),
            pre_start: r.pre_start.clone(),
            admit_ms: out.took_ms,
        })
    }

    async fn podresources(&mut self) -> StepResult {
        let sim = self.sim()?.clone();
        let socket = sim
            .podresources_socket()
            .ok_or_else(|| Error::invalid("demo", "the kubelet-sim serves no PodResources"))?
            .to_path_buf();
        let client = PodResourcesClient::connect(&socket, &PodResourcesConfig::default()).await?;
        let listing = client.list().await?;
        let pod = listing
            .pods
            .iter()
            .find(|p| p.name == POD && p.namespace == NAMESPACE)
            .ok_or_else(|| check_failed(format!("PodResources does not list {NAMESPACE}/{POD}")))?;
        let mut containers = Vec::new();
        let mut listed = Vec::new();
        for c in &pod.containers {
            for d in &c.devices {
                listed.extend(d.device_ids.iter().cloned());
                containers.push(PodResourcesContainer {
                    name: c.name.clone(),
                    resource_name: d.resource_name.clone(),
                    device_ids: d.device_ids.clone(),
                    numa_nodes: d.topology.as_ref().map(|t| t.nodes.iter().map(|n| n.id).collect()).unwrap_or_default(),
                });
            }
        }
        let (mut a, mut b) = (listed.clone(), self.pod_devices.clone());
        a.sort();
        b.sort();
        if a != b {
            return Err(check_failed(format!(
                "PodResources lists {listed:?}, the pod was given {:?}",
                self.pod_devices
            )));
        }
        let api = serde_json::to_value(listing.api).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        Ok(Details::PodResources { socket: socket.display().to_string(), api, containers })
    }

    async fn restart(&mut self) -> StepResult {
        let sim = self.sim()?.clone();
        let report = sim.restart(self.config.deadline).await?;
        let back = report.resources.iter().find(|r| r.resource == RESOURCE);
        let Some(back) = back.filter(|_| report.all_returned) else {
            return Err(Error::Timeout {
                what: format!("{RESOURCE} to register again after the kubelet restart"),
                timeout: self.config.deadline,
            });
        };
        let status = sim.status();
        let kept: Vec<String> = status
            .pods
            .iter()
            .find(|p| p.name == POD)
            .and_then(|p| p.containers.first())
            .and_then(|c| c.devices.get(RESOURCE).cloned())
            .unwrap_or_default();
        if kept != self.pod_devices {
            return Err(check_failed(format!(
                "after the restart the pod holds {kept:?}, before it held {:?}",
                self.pod_devices
            )));
        }
        Ok(Details::Restart {
            deleted_sockets: report.deleted_sockets.clone(),
            reregistered_after_ms: back.register_after_ms.unwrap_or(0),
            first_list_after_ms: back.first_snapshot_after_ms.unwrap_or(0),
            restored_pods: report.restored_pods,
            pod_devices_kept: kept,
            capacity: back.capacity,
            allocatable: back.allocatable,
        })
    }

    /// Stops the plugin and the sim and removes the directory; reported as
    /// the last step (also after a failure or an interrupt).
    async fn cleanup(&mut self, sink: &mut (dyn FnMut(DemoEvent) + Send), interrupted: bool) {
        sink(DemoEvent::Starting { step: STEPS, title: PLAN[STEPS as usize - 1].1 });
        let t = Instant::now();
        let before = crate::paths::sockets_in(&self.dir);
        let mut errors = Vec::new();
        if let Some(m) = self.mock.take()
            && let Err(e) = m.stop().await
        {
            errors.push(format!("stopping the mock plugin: {e}"));
        }
        if let Some(s) = self.sim.take()
            && let Err(e) = s.stop().await
        {
            errors.push(format!("stopping the kubelet-sim: {e}"));
        }
        let left = crate::paths::sockets_in(&self.dir);
        if !left.is_empty() {
            errors.push(format!("sockets left behind: {}", left.join(", ")));
        }
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            errors.push(format!("removing {}: {e}", self.dir.display()));
        }
        let dir_removed = !self.dir.exists();
        let result = if interrupted {
            Err(Error::invalid("demo", "interrupted; cleaned up"))
        } else if errors.is_empty() {
            Ok(Details::Cleanup { removed_sockets: before, dir_removed })
        } else {
            Err(check_failed(errors.join("; ")))
        };
        self.finish(STEPS, result, t, sink);
    }
}

/// An expectation of the demo that did not hold.
fn check_failed(message: String) -> Error {
    Error::invalid("demo", message)
}

/// Waits for an event matching `pred`.
async fn wait_event(
    rx: &mut broadcast::Receiver<SimEvent>,
    timeout: Duration,
    what: &str,
    pred: impl Fn(&EventKind) -> bool,
) -> Result<SimEvent> {
    let deadline = crate::duration::deadline(timeout);
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Err(_) => return Err(Error::Timeout { what: what.to_string(), timeout }),
            Ok(Ok(e)) if pred(&e.kind) => return Ok(e),
            Ok(Ok(_)) | Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
            Ok(Err(broadcast::error::RecvError::Closed)) => {
                return Err(Error::invalid("demo", "the kubelet-sim stopped"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_step_holds_and_nothing_is_left_behind() {
        let mut seen = Vec::new();
        let steps = run_demo(DemoConfig::default(), std::future::pending(), &mut |e| {
            if let DemoEvent::Done(s) = e {
                seen.push(s.name);
            }
        })
        .await
        .unwrap();
        assert_eq!(seen, PLAN.map(|p| p.0));
        for s in &steps {
            assert!(s.ok, "{s:?}");
        }
        let Details::Cleanup { dir_removed, .. } = &steps[7].details else { panic!("{:?}", steps[7]) };
        assert!(dir_removed);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_interrupt_still_cleans_up() {
        let mut dir = None;
        let steps = run_demo(DemoConfig::default(), async {}, &mut |e| {
            if let DemoEvent::Begin { dir: d } = e {
                dir = Some(d);
            }
        })
        .await
        .unwrap();
        let last = steps.last().unwrap();
        assert_eq!(last.name, "cleanup");
        assert!(!last.ok && last.error.as_deref().unwrap().contains("interrupted"), "{last:?}");
        assert!(!dir.unwrap().exists());
    }
}
