//! Runs a scenario on an engine: a fresh layout, the engine, the mock
//! plugins in-process, then each step, recording after it what a user or a
//! plugin can observe ([`super::observe`]).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::dra::Driver;
use super::observe::{self, Names};
use super::{Action, DEFAULT_WAIT, PluginDef, Registration, Scenario, Until, parse_wait};
use crate::error::{Error, Result};
use crate::kubelet_sim::control::{Answer, RemoteError, Request};
use crate::kubelet_sim::{KubeletVersion, PodSpec, SimConfig};
use crate::mock_plugin::{MockConfig, MockEvent, MockHandle, MockPlugin};
use crate::smoke::engine::{Engine, EngineKind};
use crate::smoke::isolate::{Layout, STANDARD_DEVICE_PLUGINS, STANDARD_PLUGINS_REGISTRY, STANDARD_POD_RESOURCES};

/// How often a `wait until capacity` asks the kubelet.
const POLL: Duration = Duration::from_millis(20);

/// Which engine and release to run a scenario on.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The engine.
    pub engine: EngineKind,
    /// The release.
    pub version: KubeletVersion,
    /// The dpctl executable a referee's namespace helper is (default: this one).
    pub helper: Option<PathBuf>,
}

/// One step's observation.
#[derive(Debug, Clone, Serialize)]
pub struct StepObservation {
    /// The step's name.
    pub step: String,
    /// Its `do`.
    pub action: String,
    /// What was observed after it (normalised JSON).
    pub observed: Value,
}

/// A scenario's run on one engine and release.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioRun {
    /// The scenario's name.
    pub scenario: String,
    /// Its file.
    pub path: String,
    /// The release played.
    pub release: String,
    /// The pre-release tag the release is played from (1.38:
    /// `v1.38.0-beta.0`); absent for a release that is out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_release: Option<String>,
    /// What answered (`kubelet-sim`, `referee v1.37.2`).
    pub engine: String,
    /// Per step.
    pub steps: Vec<StepObservation>,
    /// Expectations not met and steps that could not run.
    pub failures: Vec<String>,
    /// How long the run took.
    pub duration_ms: u64,
}

impl ScenarioRun {
    /// No failure.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// One plugin of the scenario, running or not, with every event it reported.
///
/// Events are taken from the mock's channel synchronously, when they are
/// read: an event the mock sent before an observation is in that
/// observation however late a collecting task would have been scheduled
/// (on a loaded machine it can be later than any quiet period).
struct Plugin {
    def: PluginDef,
    handle: Option<MockHandle>,
    events: Mutex<Received>,
    /// Woken at each event, by a task that only wakes (see [`Runner::quiet`]).
    changed: Arc<Notify>,
    wakers: Vec<JoinHandle<()>>,
    /// Events up to here were shown in an earlier observation.
    shown: usize,
    /// Registrations (resource, count of its handshake starts) already waited for.
    settled: Vec<(String, usize)>,
}

/// The events taken so far and the channels of each launch of the plugin.
#[derive(Default)]
struct Received {
    taken: Vec<MockEvent>,
    channels: Vec<tokio::sync::broadcast::Receiver<MockEvent>>,
}

impl Received {
    fn drain(&mut self) {
        use tokio::sync::broadcast::error::TryRecvError;
        for rx in &mut self.channels {
            loop {
                match rx.try_recv() {
                    Ok(e) => self.taken.push(e),
                    Err(TryRecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "scenario fell behind a mock plugin's events");
                    }
                    Err(TryRecvError::Empty | TryRecvError::Closed) => break,
                }
            }
        }
    }
}

impl Plugin {
    fn new(def: PluginDef) -> Self {
        Plugin {
            def,
            handle: None,
            events: Mutex::default(),
            changed: Arc::default(),
            wakers: Vec::new(),
            shown: 0,
            settled: Vec::new(),
        }
    }

    fn received(&self) -> std::sync::MutexGuard<'_, Received> {
        let mut r = self.events.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        r.drain();
        r
    }

    fn events(&self) -> Vec<MockEvent> {
        self.received().taken.clone()
    }

    fn count(&self, pred: &(dyn Fn(&MockEvent) -> bool + Sync)) -> u64 {
        self.received().taken.iter().filter(|e| pred(e)).count() as u64
    }
}

/// Runs `scenario` on `config`'s engine and release.
pub async fn run(scenario: &Scenario, config: &RunConfig) -> Result<ScenarioRun> {
    let t0 = Instant::now();
    let release = config.version.numbered();
    let place = scenario.path.display().to_string();
    let topology = scenario.node.topology(&place)?;
    let layout = Layout::create(None)?;
    let mut sim = SimConfig::new(&layout.device_plugins);
    sim.set_kubelet_version(config.version);
    sim.topology = topology;
    sim.registry_dir = Some(layout.plugins_registry.clone());
    sim.podresources_socket = Some(layout.podresources_socket());
    sim.path_map = layout.path_map();
    sim.owns_dir = true;
    sim.control = false;
    let engine = match Engine::start(&config.engine, sim, &layout, config.helper.clone()).await {
        Ok(e) => e,
        Err(e) => {
            layout.remove();
            return Err(e);
        }
    };
    let mut names = Names::default();
    let root = layout.root.display().to_string();
    names.add(layout.device_plugins.display().to_string(), "{device-plugins}");
    names.add(layout.plugins_registry.display().to_string(), "{plugins_registry}");
    names.add(layout.pod_resources.display().to_string(), "{pod-resources}");
    names.add(STANDARD_DEVICE_PLUGINS, "{device-plugins}");
    names.add(STANDARD_PLUGINS_REGISTRY, "{plugins_registry}");
    names.add(STANDARD_POD_RESOURCES, "{pod-resources}");
    names.add(root, "{root}");
    let mut runner = Runner {
        scenario,
        engine: &engine,
        layout: &layout,
        plugins: scenario.plugins.iter().cloned().map(Plugin::new).collect(),
        drivers: scenario.drivers.iter().cloned().map(Driver::new).collect(),
        names,
        pods: Vec::new(),
        failures: Vec::new(),
        steps: Vec::new(),
    };
    let outcome = runner.run_all().await;
    let failures = std::mem::take(&mut runner.failures);
    let steps = std::mem::take(&mut runner.steps);
    for p in &mut runner.plugins {
        if let Some(h) = p.handle.take() {
            let _ = h.stop().await;
        }
        for w in p.wakers.drain(..) {
            w.abort();
        }
    }
    for d in &mut runner.drivers {
        let _ = d.stop().await;
    }
    let engine_name = engine.name().to_string();
    if let Err(e) = engine.stop().await {
        tracing::warn!(error = %e, "stopping the engine");
    }
    layout.remove();
    outcome?;
    Ok(ScenarioRun {
        scenario: scenario.name.clone(),
        path: place,
        release,
        pre_release: config.version.pre_release().map(str::to_string),
        engine: engine_name,
        steps,
        failures,
        duration_ms: crate::text::millis(t0.elapsed()),
    })
}

struct Runner<'a> {
    scenario: &'a Scenario,
    engine: &'a Engine,
    layout: &'a Layout,
    plugins: Vec<Plugin>,
    drivers: Vec<Driver>,
    names: Names,
    /// (namespace, name) of every pod admitted or asked for, in order.
    pods: Vec<(String, String)>,
    failures: Vec<String>,
    steps: Vec<StepObservation>,
}

impl Runner<'_> {
    async fn run_all(&mut self) -> Result<()> {
        for i in 0..self.plugins.len() {
            if self.plugins[i].def.start {
                let id = self.plugins[i].def.id.clone();
                if let Err(e) = self.start_plugin(&id).await {
                    self.failures.push(format!("plugin {id}: could not start: {e}"));
                    return Ok(());
                }
            }
        }
        for i in 0..self.drivers.len() {
            if self.drivers[i].def.start {
                let id = self.drivers[i].def.id.clone();
                if let Err(e) = self.start_driver(i).await {
                    self.failures.push(format!("dra_driver {id}: could not start: {e}"));
                    return Ok(());
                }
            }
        }
        let names = self.scenario.step_names();
        for (step, name) in self.scenario.steps.iter().zip(names) {
            let result = match self.act(&step.action).await {
                Ok(v) => v,
                Err(e) => {
                    // The engine cannot be reached: nothing after this means anything.
                    self.failures.push(format!("step {name}: {e}{}", tail(self.engine)));
                    return Ok(());
                }
            };
            let mut observed = json!({"result": result});
            if step.action.settles() {
                self.observe(&mut observed).await;
            }
            let mut observed = self.names.value(observed);
            observe::sort_scalar_lists(&mut observed["result"]);
            for pointer in &step.unobserved {
                match observed.pointer_mut(pointer) {
                    Some(v) => *v = Value::String("unobserved: timing decides it".into()),
                    // A misspelt pointer would hide nothing and look like it did.
                    None => self.failures.push(format!(
                        "step {name}: unobserved {pointer} matches nothing this step observes (a misspelt pointer hides nothing)"
                    )),
                }
            }
            for (pointer, want) in &step.expect {
                let want = serde_json::to_value(want).unwrap_or(Value::Null);
                match observed.pointer(pointer) {
                    Some(got) if *got == want => {}
                    Some(got) => self.failures.push(format!("step {name}: {pointer} is {got}, expected {want}")),
                    None => self.failures.push(format!("step {name}: {pointer} was not observed (expected {want})")),
                }
            }
            self.steps.push(StepObservation { step: name, action: step.action.word().into(), observed });
        }
        Ok(())
    }

    fn driver(&self, id: &str) -> Option<usize> {
        self.drivers.iter().position(|d| d.def.id == id)
    }

    async fn start_driver(&mut self, i: usize) -> Result<()> {
        let (registry, root) = (self.layout.plugins_registry.clone(), self.layout.root.clone());
        self.drivers[i].start(&registry, &root).await
    }

    /// A `start` or `stop` of a DRA driver; `None` when `id` names a device plugin.
    async fn start_stop_driver(&mut self, id: &str, start: bool) -> Option<Value> {
        let i = self.driver(id)?;
        let r = if start { self.start_driver(i).await } else { self.drivers[i].stop().await };
        Some(match r {
            Ok(()) => json!(if start { "started" } else { "stopped" }),
            Err(e) => json!({"error": e.to_string()}),
        })
    }

    /// A `wait` on a DRA driver's registrations or calls; `None` when `id` names a device plugin.
    async fn wait_driver(
        &mut self,
        id: &str,
        until: Until,
        rpc: Option<&str>,
        count: u64,
        t: Duration,
    ) -> Option<bool> {
        let i = self.driver(id)?;
        let rpc = rpc.map(str::to_string);
        let pred = move |e: &crate::dra::mock::DraEvent| match until {
            Until::Registered => super::dra::registration(e, true),
            Until::Rejected => super::dra::registration(e, false),
            Until::Calls => match &e.kind {
                crate::dra::mock::DraEventKind::Rpc { rpc: r, .. } => rpc.as_deref() == Some(super::dra::method(r)),
                _ => false,
            },
            Until::Capacity => false,
        };
        Some(self.drivers[i].wait(&pred, count, t).await)
    }

    fn plugin(&mut self, id: &str) -> Result<&mut Plugin> {
        self.plugins
            .iter_mut()
            .find(|p| p.def.id == id)
            .ok_or_else(|| Error::invalid("scenario", format!("no plugin {id:?}")))
    }

    async fn start_plugin(&mut self, id: &str) -> Result<()> {
        let layout = self.layout;
        let p = self.plugin(id)?;
        if p.handle.is_some() {
            return Err(Error::invalid(format!("plugin {id}"), "is already running"));
        }
        let register_timeout = match &p.def.register_timeout {
            Some(t) => parse_wait(t, "register_timeout")?,
            None => crate::mock_plugin::config::DEFAULT_REGISTER_TIMEOUT,
        };
        let config = MockConfig {
            dir: Some(layout.device_plugins.clone()),
            record: None,
            register: p.def.registration == Registration::KubeletSock,
            registry_dir: (p.def.registration == Registration::PluginsRegistry)
                .then(|| layout.plugins_registry.clone()),
            control: p.def.control,
            force: false,
            rpc_events: true,
            register_timeout,
            resources: p.def.resources.clone(),
        };
        let plugin = MockPlugin::new(config)?;
        p.events.lock().unwrap_or_else(std::sync::PoisonError::into_inner).channels.push(plugin.subscribe());
        let mut rx = plugin.subscribe();
        let changed = Arc::clone(&p.changed);
        p.wakers.push(tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => changed.notify_waiters(),
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        }));
        p.handle = Some(plugin.launch().await?);
        Ok(())
    }

    /// A node reboot: each pod's admission outcome, in the order used.
    async fn reboot(&mut self, order: &[String], after: Duration) -> Result<Value> {
        let readmit_after_ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        let answer = self.engine.call(Request::Reboot { order: order.to_vec(), readmit_after_ms }).await?;
        Ok(match answer {
            Ok(Answer::Reboot(r)) => {
                let pods: Vec<Value> = r
                    .pods
                    .into_iter()
                    .map(|o| {
                        let name = format!("{}/{}", o.namespace, o.pod);
                        let mut v = admit_value(Ok(Answer::Admit(o)));
                        v["pod"] = json!(name);
                        v
                    })
                    .collect();
                json!({ "pods": pods })
            }
            Ok(other) => json!({"unexpected": format!("{other:?}")}),
            Err(e) => remote(&e),
        })
    }

    /// A kubelet restart: who came back, and each pod's re-admission (at once,
    /// or `readmit_after` later; its containers: running or not, the devices
    /// they hold).
    async fn restart_kubelet(&mut self, wait: Duration, readmit_after: Option<Duration>) -> Result<Value> {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let req = Request::Restart { wait_ms: ms(wait), readmit_after_ms: readmit_after.map(ms), no_readmit: false };
        Ok(match self.engine.call(req).await? {
            Ok(Answer::Restart(r)) => {
                let mut back: Vec<&str> =
                    r.resources.iter().filter(|x| x.reregistered).map(|x| x.resource.as_str()).collect();
                let mut missing: Vec<&str> =
                    r.resources.iter().filter(|x| !x.reregistered).map(|x| x.resource.as_str()).collect();
                back.sort_unstable();
                missing.sort_unstable();
                let mut v = json!({"all_returned": r.all_returned, "reregistered": back, "not_reregistered": missing});
                // Every restart re-admits the pods (at once without readmit_after).
                v["pods"] = r.readmitted.iter().map(readmitted_value).collect();
                v
            }
            Ok(other) => json!({"unexpected": format!("{other:?}")}),
            Err(e) => remote(&e),
        })
    }

    /// Does one step; `Err` only when the engine cannot be reached.
    // long: one arm per `do` of the scenario format, each a few lines; split, the arms would
    // only pass the runner's state around.
    async fn act(&mut self, action: &Action) -> Result<Value> {
        Ok(match action {
            Action::Start { plugin } if self.driver(plugin).is_some() => {
                self.start_stop_driver(plugin, true).await.unwrap_or_default()
            }
            Action::Stop { plugin } if self.driver(plugin).is_some() => {
                self.start_stop_driver(plugin, false).await.unwrap_or_default()
            }
            Action::Start { plugin } => match self.start_plugin(plugin).await {
                Ok(()) => json!("started"),
                Err(e) => json!({"error": e.to_string()}),
            },
            Action::Stop { plugin } => {
                let p = self.plugin(plugin)?;
                match p.handle.take() {
                    Some(h) => match h.stop().await {
                        Ok(()) => json!("stopped"),
                        Err(e) => json!({"error": e.to_string()}),
                    },
                    None => json!({"error": "not running"}),
                }
            }
            Action::Admit { pod } => {
                let mut spec = PodSpec::from_manifest(pod, "admit")?;
                let key = (spec.namespace.clone(), spec.name.clone());
                if spec.uid.is_none() {
                    // A stable UID: the checkpoint and its checksum then compare across engines.
                    spec.uid = Some(format!("uid-{}-{}", key.0, key.1));
                }
                if !self.pods.contains(&key) {
                    self.pods.push(key.clone());
                }
                let mut answer = self.engine.call(Request::Admit { pod: spec }).await?;
                if let (Ok(Answer::Admit(o)), false) = (&mut answer, self.engine.static_pod_suffix().is_empty()) {
                    // A real kubelet's start errors quote the runtime's failure with the node's context.
                    for c in &mut o.containers {
                        c.start_error = c.start_error.as_deref().map(|e| crate::smoke::node::kubelet_message(e).into());
                    }
                }
                if let Ok(Answer::Admit(o)) = &answer {
                    self.names.add(o.uid.clone(), format!("uid-{}-{}", key.0, key.1));
                }
                admit_value(answer)
            }
            Action::Delete { pod, namespace } => {
                let answer =
                    self.engine.call(Request::Delete { namespace: namespace.clone(), name: pod.clone() }).await?;
                match answer {
                    // A pod with claims: whether UnprepareResources failed (the calls show in the drivers' records).
                    Ok(Answer::Delete(d)) if d.dra.is_some() => {
                        json!({"deleted": true, "dra_error": d.dra.as_ref().and_then(|x| x.error.clone())})
                    }
                    Ok(_) => json!("deleted"),
                    Err(e) => remote(&e),
                }
            }
            Action::RestartKubelet { wait, readmit_after } => {
                let wait = match wait {
                    Some(w) => parse_wait(w, "wait")?,
                    None => DEFAULT_WAIT,
                };
                let readmit_after = readmit_after.as_ref().map(|w| parse_wait(w, "readmit_after")).transpose()?;
                self.restart_kubelet(wait, readmit_after).await?
            }
            Action::Reboot { order, readmit_after } => {
                let after = match readmit_after {
                    Some(w) => parse_wait(w, "readmit_after")?,
                    None => Duration::ZERO,
                };
                self.reboot(order, after).await?
            }
            Action::RestartContainer { pod, container, namespace } => {
                let req = Request::RestartContainer {
                    namespace: namespace.clone(),
                    name: pod.clone(),
                    container: container.clone(),
                };
                match self.engine.call(req).await? {
                    Ok(Answer::RestartContainer(r)) => {
                        // PreStartContainer shows in the plugin's calls; the per-resource
                        // summary is the sim's own report.
                        json!({"started": r.started, "start_error": r.start_error})
                    }
                    Ok(other) => json!({"unexpected": format!("{other:?}")}),
                    Err(e) => remote(&e),
                }
            }
            Action::SetHealth { plugin, resource, ids, health } => {
                let p = self.plugin(plugin)?;
                let resource = resource.clone().unwrap_or_else(|| p.def.resources[0].name.clone());
                let req = crate::mock_plugin::control::ControlRequest::set_health(ids.clone(), health);
                let dir = self.layout.device_plugins.clone();
                match crate::mock_plugin::control::call(&dir, &resource, &req, Duration::from_secs(5)).await {
                    Ok(r) if r.ok => json!("set"),
                    Ok(r) => json!({"error": r.error}),
                    Err(e) => json!({"error": e.to_string()}),
                }
            }
            Action::Wait { until, plugin, resource, capacity, allocatable, rpc, count, timeout } => {
                let timeout = match timeout {
                    Some(t) => parse_wait(t, "timeout")?,
                    None => DEFAULT_WAIT,
                };
                let count = count.unwrap_or(1);
                let met = match until {
                    Until::Capacity => {
                        let r = resource.clone().unwrap_or_default();
                        self.wait_capacity(&r, *capacity, *allocatable, timeout).await?
                    }
                    Until::Registered | Until::Rejected | Until::Calls
                        if self.driver(plugin.as_deref().unwrap_or_default()).is_some() =>
                    {
                        let id = plugin.as_deref().unwrap_or_default();
                        self.wait_driver(id, *until, rpc.as_deref(), count, timeout).await.unwrap_or(false)
                    }
                    Until::Registered | Until::Rejected | Until::Calls => {
                        let p = self.plugin(plugin.as_deref().unwrap_or_default())?;
                        let (until, rpc, resource) = (*until, rpc.clone(), resource.clone());
                        let pred = move |e: &MockEvent| {
                            resource.as_ref().is_none_or(|r| *r == e.resource)
                                && match (&e.kind, until) {
                                    (crate::mock_plugin::EventKind::Registered { .. }, Until::Registered) => true,
                                    (
                                        crate::mock_plugin::EventKind::RegistrationStatus { plugin_registered, .. },
                                        Until::Registered | Until::Rejected,
                                    ) => *plugin_registered == (until == Until::Registered),
                                    (crate::mock_plugin::EventKind::Rejected { .. }, Until::Rejected) => true,
                                    (crate::mock_plugin::EventKind::Rpc(r), Until::Calls) => {
                                        rpc.as_deref() == Some(r.rpc) && (r.rpc != "ListAndWatch" || r.seq == Some(1))
                                    }
                                    _ => false,
                                }
                        };
                        wait_events(p, &pred, count, timeout).await
                    }
                };
                json!({"met": met})
            }
        })
    }

    /// Polls the status (bounded by `timeout`) until the resource shows the counts.
    async fn wait_capacity(
        &self,
        resource: &str,
        capacity: Option<usize>,
        allocatable: Option<usize>,
        timeout: Duration,
    ) -> Result<bool> {
        let deadline = crate::duration::deadline(timeout);
        loop {
            let status = self.engine.status().await?;
            let r = status.resources.iter().find(|r| r.resource == resource && r.reported);
            let ok = r.is_some_and(|r| {
                capacity.is_none_or(|c| c == r.capacity) && allocatable.is_none_or(|a| a == r.allocatable)
            });
            if ok {
                return Ok(true);
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Adds the state to `observed`: capacity, what each plugin saw since the
    /// last observation, the checkpoint and PodResources.
    async fn observe(&mut self, observed: &mut Value) {
        self.settle_handshakes().await;
        self.quiet().await;
        let status = match self.engine.status().await {
            Ok(s) => s,
            Err(e) => {
                observed["status_error"] = json!(e.to_string());
                return;
            }
        };
        observed["resources"] = observe::resources(&status);
        let mut plugins = serde_json::Map::new();
        for p in &mut self.plugins {
            let events = p.events();
            plugins.insert(p.def.id.clone(), observe::plugin_events(&events[p.shown.min(events.len())..]));
            p.shown = events.len();
        }
        observed["plugins"] = Value::Object(plugins);
        let expect = observe::expected_entries(&status);
        let cp = self.layout.device_plugins.join(crate::paths::CHECKPOINT_FILE_NAME);
        observed["checkpoint"] = observe::checkpoint(&cp, &expect).await;
        observed["podresources"] =
            observe::podresources(&self.layout.podresources_socket(), &self.pods, &self.engine.static_pod_suffix())
                .await;
        if !self.drivers.is_empty() {
            let mut drivers = serde_json::Map::new();
            let deadline = crate::duration::deadline(HANDSHAKE_MAX);
            for d in &mut self.drivers {
                d.settle(deadline).await;
            }
            for d in &mut self.drivers {
                drivers.insert(d.def.id.clone(), d.observe());
            }
            observed["drivers"] = Value::Object(drivers);
            observed["dra_state"] = super::dra::state(&self.layout.root.join(crate::dra::state::FILE_NAME));
        }
    }
}

impl Runner<'_> {
    /// Waits until no plugin reports an event for [`QUIET`], at most
    /// [`QUIET_MAX`]: a plugin records a call or a registration a moment
    /// after the kubelet acted on it (a Register's answer reaches the plugin
    /// after the first ListAndWatch message may already count), so an
    /// observation taken at once would give the event to the next step on
    /// one engine and to this one on the other.
    async fn quiet(&self) {
        if self.plugins.is_empty() {
            return;
        }
        let deadline = crate::duration::deadline(QUIET_MAX);
        loop {
            let waits: Vec<_> = self.plugins.iter().map(|p| Arc::clone(&p.changed)).collect();
            let any = futures_util::future::select_all(waits.iter().map(|n| Box::pin(n.notified())));
            tokio::select! {
                _ = any => {}
                () = tokio::time::sleep(QUIET) => return,
                () = tokio::time::sleep_until(deadline) => return,
            }
        }
    }
}

impl Runner<'_> {
    /// Waits, at most [`HANDSHAKE_MAX`] in all, until every running
    /// plugin's registrations have finished their handshake with the
    /// kubelet (see [`pending_handshakes`]). A step that waited for one
    /// resource must not observe a second resource's registration half
    /// done: how far it got would depend on how loaded the machine is. A
    /// handshake that does not finish in time is not waited for again.
    async fn settle_handshakes(&mut self) {
        let deadline = crate::duration::deadline(HANDSHAKE_MAX);
        for p in &mut self.plugins {
            if p.handle.is_none() {
                continue;
            }
            loop {
                let changed = Arc::clone(&p.changed);
                let changed = changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                let pending = pending_handshakes(&p.def, &p.received().taken, &p.settled);
                if pending.is_empty() {
                    break;
                }
                tokio::select! {
                    () = changed => {}
                    () = tokio::time::sleep_until(deadline) => {
                        p.settled.extend(pending);
                        break;
                    }
                }
            }
        }
    }
}

/// The registration handshakes of `events` that have started and not
/// finished, as (resource, index of the event that started it), leaving out
/// those in `settled`. Through `kubelet.sock` a handshake starts when the
/// plugin serves its socket and ends at the kubelet's first ListAndWatch
/// call after an accepted Register, or at a refusal, a retry, an ignored
/// restart or a stop. Through `plugins_registry` it starts when the
/// registration socket is served and ends at the kubelet's
/// NotifyRegistrationStatus or a stop.
fn pending_handshakes(def: &PluginDef, events: &[MockEvent], settled: &[(String, usize)]) -> Vec<(String, usize)> {
    use crate::mock_plugin::EventKind as K;
    let registry = def.registration == Registration::PluginsRegistry;
    let mut open: Vec<(String, usize, bool)> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let r = &e.resource;
        match &e.kind {
            K::Serving { .. } if !registry => open.push((r.clone(), i, false)),
            K::RegistryServing { .. } if registry => open.push((r.clone(), i, false)),
            K::Registered { .. } => open.iter_mut().filter(|o| &o.0 == r).for_each(|o| o.2 = true),
            K::Rpc(rec) if rec.rpc == "ListAndWatch" && !registry => {
                open.retain(|o| !(&o.0 == r && o.2));
            }
            K::Rejected { .. }
            | K::RegisterRetry { .. }
            | K::KubeletRestartIgnored { .. }
            | K::RegistrationStatus { .. }
            | K::Stopped { .. } => open.retain(|o| &o.0 != r),
            _ => {}
        }
    }
    open.into_iter().map(|(r, i, _)| (r, i)).filter(|k| !settled.contains(k)).collect()
}

/// See [`Runner::settle_handshakes`]: a kubelet that has not answered a
/// registration in this long is observed as it is.
const HANDSHAKE_MAX: Duration = Duration::from_secs(2);

/// See [`Runner::quiet`].
const QUIET: Duration = Duration::from_millis(40);
/// See [`Runner::quiet`].
const QUIET_MAX: Duration = Duration::from_secs(1);

/// Waits until `pred` matched `count` of the plugin's events in all, at most `timeout`.
async fn wait_events(p: &Plugin, pred: &(dyn Fn(&MockEvent) -> bool + Sync), count: u64, timeout: Duration) -> bool {
    let deadline = crate::duration::deadline(timeout);
    loop {
        let changed = p.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if p.count(pred) >= count {
            return true;
        }
        tokio::select! {
            () = changed => {}
            () = tokio::time::sleep_until(deadline) => return p.count(pred) >= count,
        }
    }
}

fn remote(e: &RemoteError) -> Value {
    json!({"error": e.message, "exit_code": e.exit_code})
}

/// The devices a container holds, per resource, IDs sorted. A resource with
/// no devices (stripped, zero, unknown) is left out: engines differ in
/// whether they list it, a user sees no device either way.
fn held_devices(c: &crate::kubelet_sim::ContainerOutcome) -> serde_json::Map<String, Value> {
    c.resources
        .iter()
        .filter(|r| !r.devices.is_empty())
        .map(|r| {
            let mut ids = r.devices.clone();
            ids.sort();
            (r.resource.clone(), json!(ids))
        })
        .collect()
}

/// One pod's re-admission after a kubelet restart: the verdict, and per
/// container whether the runtime reported it running and the devices it holds.
fn readmitted_value(o: &crate::kubelet_sim::AdmitOutcome) -> Value {
    let containers: Vec<Value> = o
        .containers
        .iter()
        .map(|c| json!({"name": c.name, "running": c.running, "devices": held_devices(c)}))
        .collect();
    json!({
        "pod": format!("{}/{}", o.namespace, o.pod),
        "admitted": o.admitted,
        "reason": o.reason,
        "message": o.message,
        "containers": containers,
    })
}

/// An admission as a user sees it: verdict, reason, message, and per
/// container whether it started and its devices.
fn admit_value(answer: std::result::Result<Answer, RemoteError>) -> Value {
    let o = match answer {
        Ok(Answer::Admit(o)) => o,
        Ok(other) => return json!({"unexpected": format!("{other:?}")}),
        Err(e) => return remote(&e),
    };
    if !o.admitted {
        // Which containers a rejection report lists is the engine's detail
        // (the sim lists every container, the kubelet's code those it
        // reached); what was allocated before the rejection shows in the
        // checkpoint.
        return json!({"admitted": false, "reason": o.reason, "message": o.message});
    }
    let containers: Vec<Value> = o
        .containers
        .iter()
        .map(
            |c| json!({"name": c.name, "started": c.started, "start_error": c.start_error, "devices": held_devices(c)}),
        )
        .collect();
    let mut v = json!({"admitted": true, "reason": o.reason, "message": o.message, "containers": containers});
    if let Some(d) = &o.dra {
        v["dra"] = super::dra::outcome(d);
    }
    v
}

fn tail(engine: &Engine) -> String {
    let t = engine.output_tail();
    if t.is_empty() { t } else { format!(" ({t})") }
}

/// The runs a command asks for: each scenario once per release it names
/// (only those in `versions` when given).
#[derive(Debug, Clone)]
pub struct Plan {
    /// (scenario, release) in order.
    pub runs: Vec<(Scenario, KubeletVersion)>,
    /// What was left out and why.
    pub skipped: Vec<String>,
}

impl Plan {
    /// The runs `engine` can play: on a real kubelet (`kubelet:PATH`) a
    /// scenario static pods cannot express is left out with the reason.
    pub fn for_engine(mut self, engine: &EngineKind) -> Plan {
        if let EngineKind::Kubelet(_) = engine {
            let mut left_out: Vec<String> = Vec::new();
            self.runs.retain(|(s, _)| match s.static_pods_cannot() {
                None => true,
                Some(why) => {
                    let line = format!("{}: not on a real kubelet: {why}", s.name);
                    if !left_out.contains(&line) {
                        left_out.push(line);
                    }
                    false
                }
            });
            self.skipped.extend(left_out);
        }
        self
    }
}

/// Loads the scenario files (directories: their `*.toml`) and pairs each
/// with its releases, filtered by `versions`.
pub fn plan(files: &[PathBuf], versions: Option<&[KubeletVersion]>) -> Result<Plan> {
    let mut runs = Vec::new();
    let mut skipped = Vec::new();
    for f in super::expand(files)? {
        let s = Scenario::load(&f)?;
        let mine = s.versions()?;
        let chosen: Vec<KubeletVersion> = match versions {
            Some(v) => mine.iter().copied().filter(|x| v.contains(x)).collect(),
            None => mine.clone(),
        };
        if chosen.is_empty() {
            let names: Vec<String> = mine.iter().map(|v| v.numbered()).collect();
            skipped.push(format!("{}: it runs on {} only", s.name, names.join(", ")));
        }
        for v in chosen {
            runs.push((s.clone(), v));
        }
    }
    Ok(Plan { runs, skipped })
}

/// Every run of `dpctl scenario run`.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// The runs, in order.
    pub runs: Vec<ScenarioRun>,
    /// Scenarios left out (no chosen release).
    pub skipped: Vec<String>,
}

impl RunReport {
    /// 0 when every run met its expectations, else 1.
    pub fn exit_code(&self) -> u8 {
        if self.runs.iter().all(ScenarioRun::passed) {
            crate::error::exit::OK
        } else {
            crate::error::exit::CHECK_FAILED
        }
    }
}

/// Runs every planned scenario on `engine`; `each` sees each run as it ends.
pub async fn run_plan(
    plan: Plan,
    engine: &EngineKind,
    helper: Option<PathBuf>,
    each: &mut (dyn FnMut(&ScenarioRun) + Send),
) -> Result<RunReport> {
    let plan = plan.for_engine(engine);
    let mut runs = Vec::new();
    for (s, v) in &plan.runs {
        let r = run(s, &RunConfig { engine: engine.clone(), version: *v, helper: helper.clone() }).await?;
        each(&r);
        runs.push(r);
    }
    Ok(RunReport { runs, skipped: plan.skipped })
}
