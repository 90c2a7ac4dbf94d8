//! The running half of `dpctl dra smoke`: the sandbox, the in-process API
//! server and kubelet-sim, the driver's processes, and each step's calls.
//! The verdicts are `dra check`'s or [`super::judge`]'s.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::judge::{self, DeviceRef, LongPathOutcome};
use super::runner::Engine;
use super::{DraSmokeConfig, NAMESPACE, NODE_NAME, SUITE_NAME, Sandbox, StepId};
use crate::check::{CheckResult, Outcome};
use crate::dra::claims::ClaimRef;
use crate::dra::{NodeApi, Service};
use crate::error::{Error, Result};
use crate::kubelet_sim::{AdmitOutcome, DraOutcome, EventKind, KubeletSim, PodSpec, SimConfig, SimEvent, SimHandle};
use crate::smoke::harness::{Head, Rows};
use crate::smoke::process::{OutputView, PluginProcess, Stream};
use crate::smoke::{SmokeProgress, SmokeReport};
use crate::transport::ClientConfig;

/// A registered driver instance, as the sim's plugin watcher saw it.
#[derive(Debug, Clone)]
struct Registered {
    driver: String,
    endpoint: PathBuf,
    registration: PathBuf,
    api: NodeApi,
    service: String,
}

/// How waiting for a registration ended.
enum RegWait {
    Registered(Registered),
    Rejected(String),
    Exited(String),
    /// None in time; the other drivers that registered meanwhile.
    TimedOut(Vec<String>),
    /// The driver registered again on the sockets of the instance it was
    /// to run beside (`not`): the new instance took them over.
    TookOver(PathBuf),
}

/// The pod whose claim the middle steps follow.
#[derive(Debug, Clone)]
struct MainPod {
    pod: String,
    claim: ClaimRef,
}

/// A test pod made ready for the sim: its spec, and its claim as stored.
struct TestPod {
    pod: String,
    claim: ClaimRef,
    spec: PodSpec,
}

struct Runner<'p> {
    cfg: DraSmokeConfig,
    sb: Sandbox,
    sim: SimHandle,
    api: crate::apiserver::Handle,
    procs: Vec<PluginProcess>,
    current: Option<usize>,
    reg: Option<Registered>,
    devices: Vec<DeviceRef>,
    next_pod: usize,
    main: Option<MainPod>,
    times: Vec<u64>,
    deadline_words: Option<String>,
    rows: Rows<'p, StepId>,
    /// Stops the API server, and its task.
    stop_api: Option<(CancellationToken, JoinHandle<Result<crate::apiserver::Record>>)>,
}

/// Runs a DRA smoke test (see the module docs of `smoke::dra`).
/// `interrupt` completes on Ctrl-C: the remaining steps are not run, the
/// driver is still stopped. `Err` only when nothing could run.
pub async fn run(
    cfg: DraSmokeConfig,
    interrupt: impl Future<Output = ()>,
    progress: &mut (dyn FnMut(SmokeProgress) + Send),
) -> Result<SmokeReport> {
    cfg.check_inputs()?;
    let started = SystemTime::now();
    let t0 = Instant::now();
    let root = crate::paths::fresh_dir("dpctl-dra-smoke")?;
    let mut guard = crate::paths::RemoveDirOnDrop::new(Some(root.clone()));
    let sb = Sandbox::under(&root, &root.join("device-plugins"));
    make_dirs(&sb)?;
    let (server, stop_api) = start_api(&sb).await?;
    let api = server.handle();
    let api_task = tokio::spawn(server.run(stop_api.clone().cancelled_owned(), |_| Ok(())));
    let sim = start_sim(&cfg, &sb).await?;
    progress(SmokeProgress::SimReady {
        dir: sb.root.clone(),
        kubelet_socket: sim.kubelet_socket().to_path_buf(),
        engine: crate::kubelet_sim::default_engine(),
    });
    crate::smoke::process::become_subreaper();
    let keep = cfg.keep;
    let mut r = Runner {
        rows: super::runner::rows(&cfg, progress),
        cfg,
        sb,
        sim,
        api,
        stop_api: Some((stop_api, api_task)),
        procs: Vec::new(),
        current: None,
        reg: None,
        devices: Vec::new(),
        next_pod: 0,
        main: None,
        times: Vec::new(),
        deadline_words: None,
    };
    let report = super::runner::drive(&mut r, interrupt, std::future::pending(), started, t0).await;
    guard.disarm();
    if !keep {
        let _ = std::fs::remove_dir_all(&root);
    }
    Ok(report)
}

fn make_dirs(sb: &Sandbox) -> Result<()> {
    for d in [&sb.registry_dir, &sb.plugin_dir, &sb.cdi_dir, &sb.device_plugins] {
        std::fs::create_dir_all(d).map_err(|e| Error::io(format!("creating {}", d.display()), e))?;
    }
    if let Some(p) = sb.kubeconfig.parent() {
        std::fs::create_dir_all(p).map_err(|e| Error::io(format!("creating {}", p.display()), e))?;
    }
    Ok(())
}

/// The API server, serving the Node the driver runs on.
async fn start_api(sb: &Sandbox) -> Result<(crate::apiserver::Server, tokio_util::sync::CancellationToken)> {
    let dir = sb.kubeconfig.parent().unwrap_or(&sb.root).to_path_buf();
    let objects = dir.join("objects.yaml");
    let node = format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: {NODE_NAME}\n");
    std::fs::write(&objects, node).map_err(|e| Error::io(format!("writing {}", objects.display()), e))?;
    let config = crate::apiserver::Config {
        dir,
        objects,
        listen: crate::apiserver::DEFAULT_LISTEN.parse().map_err(|e| Error::invalid("--listen", format!("{e}")))?,
        kubeconfig_out: Some(sb.kubeconfig.clone()),
    };
    Ok((crate::apiserver::bind(&config).await?, tokio_util::sync::CancellationToken::new()))
}

/// The sim, playing the release's DRA manager on the sandbox's registry.
async fn start_sim(cfg: &DraSmokeConfig, sb: &Sandbox) -> Result<SimHandle> {
    let mut c = SimConfig::new(&sb.device_plugins);
    c.set_kubelet_version(cfg.kubelet_version);
    c.registry_dir = Some(sb.registry_dir.clone());
    c.control = false;
    c.owns_dir = true;
    c.dra_call_timeout = cfg.timeout;
    KubeletSim::start(c).await
}

/// Why nothing registered: the timeout, and the drivers that did register
/// when `--driver` named another.
fn not_registered(want: Option<&str>, other: &RegWait, timeout: Duration) -> String {
    let base = match want {
        Some(w) => format!("no DRA driver {w} registered within {} ms", timeout.as_millis()),
        None => format!("no DRA driver registered within {} ms", timeout.as_millis()),
    };
    match other {
        RegWait::TimedOut(seen) if !seen.is_empty() => format!("{base}; registered instead: {}", seen.join(", ")),
        _ => base,
    }
}

/// Waits for the sim to register an instance of the driver (another than
/// `not`), a refusal, the process's end, or `timeout`.
async fn wait_registered(
    events: &mut broadcast::Receiver<SimEvent>,
    proc: &PluginProcess,
    want: Option<&str>,
    not: Option<&Registered>,
    timeout: Duration,
) -> RegWait {
    let deadline = crate::duration::deadline(timeout);
    let mut others = Vec::new();
    loop {
        let ev = tokio::select! {
            ev = events.recv() => ev,
            exit = proc.exited() => return RegWait::Exited(exit.text),
            () = tokio::time::sleep_until(deadline) => return RegWait::TimedOut(others),
        };
        let kind = match ev {
            Ok(e) => e.kind,
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(broadcast::error::RecvError::Closed) => return RegWait::TimedOut(others),
        };
        match kind {
            EventKind::DraRegistered { driver, endpoint, service, registration, .. }
                if want.is_none_or(|w| w == driver)
                    && not.is_none_or(|n| {
                        n.endpoint != Path::new(&endpoint) || n.registration != Path::new(&registration)
                    }) =>
            {
                let api = match Service::from_advertised(&service) {
                    Some(Service::Node(n)) => n,
                    _ => NodeApi::V1,
                };
                let endpoint = PathBuf::from(endpoint);
                return RegWait::Registered(Registered {
                    driver,
                    endpoint,
                    registration: registration.into(),
                    api,
                    service,
                });
            }
            EventKind::DraRegistrationRejected { driver, message, .. } if want.is_none_or(|w| w == driver) => {
                return RegWait::Rejected(message);
            }
            EventKind::DraRegistered { driver, endpoint, .. } if not.is_some() && want.is_none_or(|w| w == driver) => {
                return RegWait::TookOver(endpoint.into());
            }
            EventKind::DraRegistered { driver, .. } if !others.contains(&driver) => others.push(driver),
            _ => {}
        }
    }
}

impl Runner<'_> {
    fn driver(&self) -> Option<&PluginProcess> {
        self.current.and_then(|i| self.procs.get(i))
    }

    fn client(&self) -> ClientConfig {
        ClientConfig { connect_timeout: self.cfg.timeout, call_timeout: self.cfg.timeout, ..Default::default() }
    }

    /// Records the kubelet's calls of an outcome for call-time.
    fn note(&mut self, dra: Option<&DraOutcome>) {
        let Some(d) = dra else { return };
        self.times.extend(d.calls.iter().map(|c| c.took_ms));
        if let Some(e) = d.error.as_ref().filter(|e| e.contains("DeadlineExceeded")) {
            self.deadline_words.get_or_insert_with(|| e.clone());
        }
    }
}

impl Runner<'_> {
    /// launch, registration, advertised-served, socket-paths.
    async fn launch_and_register(&mut self) -> bool {
        self.rows.started(StepId::Launch);
        let t0 = Instant::now();
        let mut events = self.sim.subscribe();
        let Some(proc) = super::runner::launch(&self.cfg, &self.sb, &mut self.rows, t0).await else {
            return false;
        };
        let pid = proc.pid();
        self.rows.send(SmokeProgress::Launched { pid, command: self.sb.substitute(&self.cfg.command, 1) });
        self.procs.push(proc);
        self.current = Some(self.procs.len() - 1);
        let Some(p) = self.driver() else { return false };
        let waited = wait_registered(&mut events, p, self.cfg.driver.as_deref(), None, self.cfg.register_timeout).await;
        let took = t0.elapsed();
        let reg = match waited {
            RegWait::Registered(r) => r,
            other => {
                let (launch_ok, why) = match other {
                    RegWait::Exited(exit) => (false, format!("the driver {exit} before registering")),
                    RegWait::Rejected(m) => (true, format!("the kubelet refused the registration: {m}")),
                    _ => (true, not_registered(self.cfg.driver.as_deref(), &other, self.cfg.register_timeout)),
                };
                let launch_ev = if launch_ok { format!("pid {pid} running") } else { why.clone() };
                self.rows.record(judge::verdict(StepId::Launch, launch_ok, launch_ev, took));
                self.rows.record(judge::verdict(StepId::Registration, false, why, took));
                self.rows.why_not = Some("the driver did not register".into());
                return false;
            }
        };
        self.rows.record(judge::verdict(StepId::Launch, true, format!("pid {pid} running"), took));
        self.registration_rows(&reg, took).await;
        self.reg = Some(reg);
        true
    }

    /// `dra check`'s verdicts on the registered driver's GetInfo.
    async fn registration_rows(&mut self, reg: &Registered, took: Duration) {
        // GetInfo was the sim's, within the kubelet's 1 s; the probes of each service get the call deadline.
        let cfg = self.client();
        let prefix = format!(
            "kubelet-sim {} registered {} at {} ({})",
            self.cfg.kubelet_version,
            reg.driver,
            reg.endpoint.display(),
            reg.service
        );
        match crate::dra::client::info(&reg.registration, &cfg).await {
            Err(e) => {
                self.rows.record(judge::verdict(StepId::Registration, true, prefix, took));
                for s in [StepId::AdvertisedServed, StepId::SocketPaths] {
                    self.rows.record(judge::result(
                        s,
                        Outcome::Error,
                        format!("GetInfo again failed: {e}"),
                        Duration::ZERO,
                    ));
                }
            }
            Ok(info) => {
                let rows = crate::dra::check::registration_results(&reg.registration, &info, took);
                for (i, mut row) in rows.into_iter().enumerate() {
                    if i == 0 {
                        let mut mine = judge::result(StepId::Registration, row.outcome, String::new(), took);
                        mine.evidence = format!("{prefix}; {}", row.evidence);
                        row = mine;
                    }
                    self.rows.record(row);
                }
            }
        }
    }

    async fn published_slices(&mut self) {
        let Some(driver) = self.reg.as_ref().map(|r| r.driver.clone()) else { return };
        let made_up = judge::made_up(2 + self.cfg.parallel);
        if self.rows.skipped(StepId::PublishedSlices) {
            self.devices = made_up;
            return;
        }
        self.rows.started(StepId::PublishedSlices);
        let t0 = Instant::now();
        let deadline = crate::duration::deadline(self.cfg.slice_timeout);
        let mut changes = self.api.changes();
        let ours = |s: &[Value]| s.iter().any(|x| x.pointer("/spec/driver").and_then(Value::as_str) == Some(&driver));
        while !ours(&self.api.slices()) {
            tokio::select! {
                r = changes.changed() => if r.is_err() { break },
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        let slices = self.api.slices();
        let (devices, _) = judge::slice_devices(&slices, &driver, NODE_NAME);
        self.rows.record(judge::published_slices(&slices, &driver, NODE_NAME, t0.elapsed(), &made_up));
        self.devices = if devices.is_empty() { made_up } else { devices };
    }

    /// The next test pod: its claim allocated and stored in the API server,
    /// the manifest parsed as `kubelet-sim admit` parses one.
    fn test_pod(&mut self, subrequest: bool) -> std::result::Result<TestPod, String> {
        let device = judge::device_for(&self.devices, self.next_pod);
        self.test_pod_on(subrequest, &device)
    }

    /// [`Self::test_pod`] with its claim allocated `device`.
    fn test_pod_on(&mut self, subrequest: bool, device: &DeviceRef) -> std::result::Result<TestPod, String> {
        let driver = self.reg.as_ref().map(|r| r.driver.clone()).unwrap_or_default();
        let n = self.next_pod;
        self.next_pod += 1;
        let (pod, claim, uid) = judge::pod_names(n);
        let obj = judge::claim_object(&claim, &driver, device, (&pod, &uid), subrequest);
        let stored = self.api.create(obj).map_err(|e| format!("storing claim {claim}: {e}"))?;
        let claim_uid = stored.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string();
        let spec = PodSpec::from_manifest(&judge::pod_manifest((&pod, &uid), &stored), "the smoke pod")
            .map_err(|e| e.to_string())?;
        Ok(TestPod { pod, claim: ClaimRef { namespace: NAMESPACE.into(), name: claim, uid: claim_uid }, spec })
    }

    /// Admits a test pod; `Err` when the sim refused the request itself.
    async fn admit(&mut self, subrequest: bool) -> std::result::Result<(TestPod, AdmitOutcome), String> {
        let tp = self.test_pod(subrequest)?;
        let out = self.sim.admit(tp.spec.clone()).await.map_err(|e| e.to_string())?;
        self.note(out.dra.as_deref());
        Ok((tp, out))
    }

    /// The claim's devices as the kubelet recorded them.
    fn devices_of(&self, uid: &str) -> Vec<crate::kubelet_sim::PreparedDevice> {
        let st = self.sim.status();
        st.dra
            .and_then(|d| d.claims.into_iter().find(|c| c.uid == uid))
            .map(|c| c.drivers.into_values().flatten().collect())
            .unwrap_or_default()
    }

    fn cdi_row(&self, step: StepId, ids: &[String]) -> CheckResult {
        let dirs = [self.sb.cdi_dir.clone()];
        let checks = crate::dra::cdi::judge(ids, &dirs);
        let nodes = device_nodes(&self.sb.cdi_dir, ids);
        let specs = std::fs::read_dir(&self.sb.cdi_dir).map(|d| d.flatten().count()).unwrap_or(0);
        judge::cdi(step, &checks, &nodes, &self.sb.cdi_dir.display().to_string(), specs)
    }

    async fn admission(&mut self) -> bool {
        self.rows.started(StepId::Admission);
        let (tp, out) = match self.admit(false).await {
            Ok(x) => x,
            Err(e) => {
                self.rows.record(judge::result(StepId::Admission, Outcome::Error, e, Duration::ZERO));
                self.rows.why_not = Some("the test pod could not be made".into());
                return false;
            }
        };
        self.main = Some(MainPod { pod: tp.pod.clone(), claim: tp.claim.clone() });
        let driver = self.reg.as_ref().map(|r| r.driver.clone()).unwrap_or_default();
        let pools = crate::dra::published::Pools::of(&self.api.slices(), &driver);
        let row = judge::admission_published(judge::admission(&out), &pools, &driver, &self.devices_of(&tp.claim.uid));
        let ok = row.outcome == Outcome::Pass;
        self.rows.record(row);
        if !ok {
            self.rows.why_not = Some("admission failed".into());
            return false;
        }
        let ids = out.dra.as_ref().and_then(|d| d.cdi_devices.get("main").cloned()).unwrap_or_default();
        let row = self.cdi_row(StepId::Cdi, &ids);
        self.rows.record(row);
        true
    }
}

/// The device nodes the CDI specs in `dir` name for `ids`, and whether
/// each exists (specs that do not parse are the CDI verdict's business).
fn device_nodes(dir: &Path, ids: &[String]) -> Vec<judge::DeviceNode> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for e in entries.flatten().take(10_000) {
        let path = e.path();
        let small = e.metadata().is_ok_and(|m| m.is_file() && m.len() < 4 << 20);
        let Some(spec) = small
            .then(|| std::fs::read_to_string(&path).ok())
            .flatten()
            .and_then(|t| serde_norway::from_str::<Value>(&t).ok())
        else {
            continue;
        };
        let kind = spec.get("kind").and_then(Value::as_str).unwrap_or_default();
        let nodes_of = |v: &Value| -> Vec<String> {
            v.pointer("/containerEdits/deviceNodes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|n| n.get("path").and_then(Value::as_str).map(String::from))
                .collect()
        };
        let common = nodes_of(&spec);
        for d in spec.get("devices").and_then(Value::as_array).into_iter().flatten() {
            let id = format!("{kind}={}", d.get("name").and_then(Value::as_str).unwrap_or_default());
            if !ids.contains(&id) {
                continue;
            }
            for p in nodes_of(d).into_iter().chain(common.iter().cloned()) {
                let exists = Path::new(&p).exists();
                out.push(judge::DeviceNode { id: id.clone(), path: p, exists });
            }
        }
    }
    out
}

impl Runner<'_> {
    async fn request_names(&mut self) {
        if self.rows.skipped(StepId::RequestNames) {
            return;
        }
        self.rows.started(StepId::RequestNames);
        let t0 = Instant::now();
        let row = match self.admit(true).await {
            Err(e) => judge::result(StepId::RequestNames, Outcome::Error, e, Duration::ZERO),
            Ok((tp, out)) => {
                let row = match out.dra.as_ref().and_then(|d| d.error.clone()) {
                    Some(e) => judge::verdict(StepId::RequestNames, false, e, t0.elapsed()),
                    None => {
                        let ids = out.dra.as_ref().and_then(|d| d.cdi_devices.get("main").cloned()).unwrap_or_default();
                        judge::request_names(&self.devices_of(&tp.claim.uid), &ids, t0.elapsed())
                    }
                };
                if let Ok(d) = self.sim.delete(NAMESPACE, &tp.pod).await {
                    self.note(d.dra.as_deref());
                }
                row
            }
        };
        self.rows.record(row);
    }

    async fn prepare_idempotent(&mut self) {
        let (Some(main), Some(reg)) = (self.main.clone(), self.reg.clone()) else { return };
        if self.rows.skipped(StepId::PrepareIdempotent) {
            return;
        }
        self.rows.started(StepId::PrepareIdempotent);
        let before = judge::answer_of(&self.devices_of(&main.claim.uid));
        let dirs = [self.sb.cdi_dir.clone()];
        let call = crate::dra::client::prepare(&reg.endpoint, reg.api, &[main.claim], &self.client(), &dirs).await;
        let row = match call {
            Err(e) => {
                if matches!(e, Error::DeadlineExceeded { .. }) {
                    self.deadline_words.get_or_insert_with(|| e.to_string());
                }
                judge::verdict(
                    StepId::PrepareIdempotent,
                    false,
                    format!("the second Prepare failed: {e}"),
                    Duration::ZERO,
                )
            }
            Ok(p) => {
                self.times.push(p.duration_ms);
                let problems = crate::dra::check::map_problems(&p);
                let took = Duration::from_millis(p.duration_ms);
                if problems.is_empty() {
                    let after: Vec<(String, Vec<String>)> = p
                        .claims
                        .iter()
                        .flat_map(|c| c.devices.iter())
                        .map(|d| {
                            (
                                format!("{}/{}", d.pool, d.device),
                                d.cdi_device_ids.iter().map(|x| x.id.clone()).collect(),
                            )
                        })
                        .collect();
                    judge::same_devices(
                        StepId::PrepareIdempotent,
                        &before,
                        &after,
                        "Prepare of the prepared claim",
                        took,
                    )
                } else {
                    let ev = format!("the second Prepare is not accepted: {}", problems.join("; "));
                    judge::verdict(StepId::PrepareIdempotent, false, ev, took)
                }
            }
        };
        self.rows.record(row);
    }

    async fn kubelet_restart(&mut self) {
        let Some(main) = self.main.clone() else { return };
        if self.rows.skipped(StepId::KubeletRestart) {
            return;
        }
        self.rows.started(StepId::KubeletRestart);
        let before = judge::answer_of(&self.devices_of(&main.claim.uid));
        let t0 = Instant::now();
        let row = match self.sim.restart(self.cfg.register_timeout).await {
            Err(e) => judge::result(StepId::KubeletRestart, Outcome::Error, e.to_string(), t0.elapsed()),
            Ok(rep) => {
                let drivers = self.reg.as_ref().map(|r| vec![r.driver.clone()]).unwrap_or_default();
                let back = self.sim.wait_dra_drivers(&drivers, self.cfg.register_timeout).await;
                judge::read_back(StepId::KubeletRestart, rep.dra_restored_claims, back, t0.elapsed()).unwrap_or_else(
                    || {
                        let after = judge::answer_of(&self.devices_of(&main.claim.uid));
                        let restored = crate::text::count(rep.dra_restored_claims, "restored claim", "restored claims");
                        let ctx = format!("{restored} read back, none prepared again (the pod keeps its sandbox)");
                        judge::same_devices(StepId::KubeletRestart, &before, &after, &ctx, t0.elapsed())
                    },
                )
            }
        };
        self.rows.record(row);
    }

    /// The driver stopped, the CDI directory emptied, kubelet and driver
    /// started again: the restored claim must resolve again.
    async fn node_reboot(&mut self) {
        let Some(main) = self.main.clone() else { return };
        if self.rows.skipped(StepId::NodeReboot) {
            return;
        }
        self.rows.started(StepId::NodeReboot);
        let t0 = Instant::now();
        if let Some(p) = self.driver() {
            p.terminate(self.cfg.grace).await;
        }
        let wiped = match wipe(&self.sb.cdi_dir) {
            Ok(n) => n,
            Err(why) => {
                self.rows.record(judge::verdict(StepId::NodeReboot, false, why, t0.elapsed()));
                return;
            }
        };
        let (rep, spawned) = tokio::join!(
            self.sim.reboot_when_drivers_back(self.cfg.register_timeout),
            super::runner::spawn(&self.cfg, &self.sb, 1, false)
        );
        match spawned {
            Ok(p) => {
                self.rows
                    .send(SmokeProgress::Launched { pid: p.pid(), command: self.sb.substitute(&self.cfg.command, 1) });
                self.procs.push(p);
                self.current = Some(self.procs.len() - 1);
            }
            Err(e) => {
                self.current = None;
                let ev = format!("the driver did not start again: {e}");
                self.rows.record(judge::verdict(StepId::NodeReboot, false, ev, t0.elapsed()));
                return;
            }
        }
        let row = match rep {
            Err(e) => judge::result(StepId::NodeReboot, Outcome::Error, e.to_string(), t0.elapsed()),
            Ok(rep) => {
                let prepared: Vec<&DraOutcome> = rep.pods.iter().filter_map(|p| p.dra.as_deref()).collect();
                for d in &prepared {
                    self.note(Some(d));
                }
                let errors: Vec<String> = prepared.iter().filter_map(|d| d.error.clone()).collect();
                judge::prepared_again(StepId::NodeReboot, &errors, prepared.len(), t0.elapsed()).unwrap_or_else(|| {
                    let ids: Vec<String> =
                        judge::answer_of(&self.devices_of(&main.claim.uid)).into_iter().flat_map(|a| a.1).collect();
                    let mut row = self.cdi_row(StepId::NodeReboot, &ids);
                    row.duration_ms = crate::text::millis(t0.elapsed());
                    row.evidence = if row.outcome == Outcome::Pass {
                        format!(
                            "{} wiped, the claim prepared again: {}",
                            crate::text::count(wiped, "spec file", "spec files"),
                            row.evidence
                        )
                    } else if row.evidence.contains("no spec in") {
                        format!(
                            "after the reboot emptied the CDI directory: {} (kubernetes/kubernetes#141433)",
                            row.evidence
                        )
                    } else {
                        row.evidence
                    };
                    row
                })
            }
        };
        self.rows.record(row);
    }

    async fn unprepare(&mut self) {
        let (Some(main), Some(reg)) = (self.main.take(), self.reg.clone()) else { return };
        self.rows.started(StepId::UnprepareIdempotent);
        let t0 = Instant::now();
        let deleted = match self.sim.delete(NAMESPACE, &main.pod).await {
            Ok(d) => d,
            Err(e) => {
                self.rows.record(judge::result(
                    StepId::UnprepareIdempotent,
                    Outcome::Error,
                    e.to_string(),
                    t0.elapsed(),
                ));
                return;
            }
        };
        self.note(deleted.dra.as_deref());
        let kubelet_error = deleted.dra.as_ref().and_then(|d| d.error.clone());
        let second = match crate::dra::client::unprepare(&reg.endpoint, reg.api, &[main.claim], &self.client()).await {
            Ok(r) => {
                self.times.push(r.duration_ms);
                Ok(crate::dra::check::map_problems(&r))
            }
            Err(e) => Err(e.to_string()),
        };
        let row = judge::unprepare(kubelet_error.as_deref(), second, t0.elapsed());
        if self.rows.why_not.as_deref() == Some("admission failed") {
            // The claim was never prepared: only the cleanup ran.
            self.rows.record(judge::not_run(StepId::UnprepareIdempotent, "admission failed"));
            return;
        }
        self.rows.record(row);
    }
}

/// Empties the CDI directory (the sandbox's own): the reboot's tmpfs. Only
/// regular files directly in it go; a directory that is no longer a real
/// directory (the driver, running as root, replaced it with a link to
/// somewhere else) is not followed: the reason, for the step's failure.
fn wipe(dir: &Path) -> std::result::Result<usize, String> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => {
            let to = std::fs::read_link(dir).map(|t| t.display().to_string()).unwrap_or_else(|_| "?".into());
            return Err(format!(
                "the CDI directory {} was replaced by a link to {to} while the driver ran: it was not emptied (dpctl \
                 never follows a link out of a directory it cleans); write specs into {{cdi_dir}} itself",
                dir.display()
            ));
        }
        Ok(m) if !m.is_dir() => {
            return Err(format!("the CDI directory {} is no longer a directory: it was not emptied", dir.display()));
        }
        Ok(_) => {}
        Err(_) => return Ok(0),
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(0) };
    Ok(entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()) && std::fs::remove_file(e.path()).is_ok())
        .count())
}

impl Runner<'_> {
    // long: admit at once, read the answers, delete at once, then both verdicts (parallel-pods and
    // distinct-devices, judged on the same claims).
    async fn parallel_pods(&mut self) {
        if self.rows.skipped(StepId::ParallelPods) {
            let why = "skipped (--skip): it judges parallel-pods' claims, and parallel-pods was skipped";
            self.rows.record(judge::result(StepId::DistinctDevices, Outcome::Skip, why, Duration::ZERO));
            return;
        }
        self.rows.started(StepId::ParallelPods);
        let t0 = Instant::now();
        // One device per claim: the scheduler never allocates a device to two
        // claims at once, so there are as many pods as distinct devices.
        let mut distinct: Vec<DeviceRef> = Vec::new();
        for d in &self.devices {
            if !distinct.contains(d) {
                distinct.push(d.clone());
            }
        }
        let count = self.cfg.parallel.min(distinct.len());
        if count < 2 {
            let why = format!(
                "the driver publishes {}: two claims at once would need one device twice, which the scheduler never \
                 allocates",
                crate::text::count(distinct.len() as u64, "device", "devices")
            );
            self.rows.record(judge::result(StepId::ParallelPods, Outcome::Skip, why.clone(), Duration::ZERO));
            self.rows.record(judge::result(StepId::DistinctDevices, Outcome::Skip, why, Duration::ZERO));
            return;
        }
        let mut pods = Vec::new();
        for device in distinct.iter().take(count) {
            match self.test_pod_on(false, device) {
                Ok(p) => pods.push(p),
                Err(e) => {
                    self.rows.record(judge::result(StepId::ParallelPods, Outcome::Error, e, Duration::ZERO));
                    return;
                }
            }
        }
        let admitted = futures_util::future::join_all(pods.iter().map(|p| self.sim.admit(p.spec.clone()))).await;
        let mut outcomes = Vec::new();
        for (p, o) in pods.iter().zip(admitted) {
            outcomes.push(match o {
                Err(e) => Err(format!("pod {}: {e}", p.pod)),
                Ok(o) => {
                    self.note(o.dra.as_deref());
                    match o.dra.as_ref().and_then(|d| d.error.clone()) {
                        Some(e) => Err(format!("pod {}: {e}", p.pod)),
                        None => Ok(p.pod.clone()),
                    }
                }
            });
        }
        let answers: Vec<judge::ClaimAnswer> = pods
            .iter()
            .zip(&distinct)
            .map(|(p, d)| {
                (p.claim.name.clone(), format!("{}/{}", d.0, d.1), judge::answer_of(&self.devices_of(&p.claim.uid)))
            })
            .collect();
        let devices: Vec<Vec<String>> =
            answers.iter().map(|a| a.2.iter().map(|(device, _)| device.clone()).collect()).collect();
        let deleted = futures_util::future::join_all(pods.iter().map(|p| self.sim.delete(NAMESPACE, &p.pod))).await;
        for (p, d) in pods.iter().zip(deleted) {
            match d {
                Ok(d) => {
                    self.note(d.dra.as_deref());
                    if let Some(e) = d.dra.as_ref().and_then(|x| x.error.clone()) {
                        outcomes.push(Err(format!("pod {} deleted: {e}", p.pod)));
                    }
                }
                Err(e) => outcomes.push(Err(format!("pod {} deleted: {e}", p.pod))),
            }
        }
        let mut row = judge::parallel(&outcomes, &devices, true, t0.elapsed());
        if count < self.cfg.parallel {
            row.evidence.push_str(&format!(
                " ({count} pods, not --parallel {}: the driver publishes {count} devices, one per claim)",
                self.cfg.parallel
            ));
        }
        self.rows.record(row);
        if !self.rows.skipped(StepId::DistinctDevices) {
            self.rows.record(judge::distinct_devices(&answers, t0.elapsed()));
        }
    }

    async fn rolling_update(&mut self) {
        if self.rows.skipped(StepId::RollingUpdate) {
            return;
        }
        if !self.cfg.rolling {
            self.rows.record(judge::result(
                StepId::RollingUpdate,
                Outcome::Skip,
                "not asked: with --rolling a second instance ({instance} = 2) starts beside the first; a driver must \
                 support that (another registration socket and endpoint, e.g. the kubeletplugin helper's \
                 RollingUpdate option), or the second takes the first's sockets over",
                Duration::ZERO,
            ));
            return;
        }
        self.rows.started(StepId::RollingUpdate);
        let t0 = Instant::now();
        let Some(first) = self.reg.clone() else { return };
        let mut events = self.sim.subscribe();
        let second = match super::runner::spawn(&self.cfg, &self.sb, 2, false).await {
            Ok(p) => p,
            Err(e) => {
                self.rows.record(judge::verdict(
                    StepId::RollingUpdate,
                    false,
                    format!("the second instance: {e}"),
                    t0.elapsed(),
                ));
                return;
            }
        };
        let waited =
            wait_registered(&mut events, &second, Some(&first.driver), Some(&first), self.cfg.register_timeout).await;
        self.procs.push(second);
        let second_index = self.procs.len() - 1;
        let reg = match waited {
            RegWait::Registered(r) => r,
            other => {
                let why = match other {
                    RegWait::Exited(e) => {
                        let said = last_lines(&self.procs[second_index].output(Stream::Stderr));
                        match said.iter().rev().find(|l| l.contains("error")).or(said.last()) {
                            Some(l) => format!("the second instance {e}: {}", l.trim()),
                            None => format!("the second instance {e}"),
                        }
                    }
                    RegWait::Rejected(m) => format!("the kubelet refused the second instance: {m}"),
                    RegWait::TookOver(endpoint) => format!(
                        "the second instance registered on the first's sockets (endpoint {}, registration {}): it \
                         took them over instead of running beside the first, so a DaemonSet rolling update leaves \
                         the old pod's driver unreachable (the kubeletplugin helper does this without its \
                         RollingUpdate option, which gives each instance its own sockets)",
                        endpoint.display(),
                        first.registration.display()
                    ),
                    _ => {
                        let said = last_lines(&self.procs[second_index].output(Stream::Stderr));
                        let quoted = said.last().map(|l| format!("; its last line: {}", l.trim())).unwrap_or_default();
                        format!(
                            "no second instance registered within {} ms{quoted}",
                            self.cfg.register_timeout.as_millis()
                        )
                    }
                };
                self.procs[second_index].terminate(self.cfg.grace).await;
                self.rows.record(judge::verdict(StepId::RollingUpdate, false, why, t0.elapsed()));
                return;
            }
        };
        if let Some(p) = self.driver() {
            p.terminate(self.cfg.grace).await;
        }
        self.current = Some(second_index);
        self.reg = Some(reg.clone());
        let row = self.rolling_served(&first, &reg, t0).await;
        self.rows.record(row);
    }

    /// With the first instance stopped, a pod's claim must be prepared by the second.
    async fn rolling_served(&mut self, first: &Registered, reg: &Registered, t0: Instant) -> CheckResult {
        match self.admit(false).await {
            Err(e) => judge::result(StepId::RollingUpdate, Outcome::Error, e, t0.elapsed()),
            Ok((tp, out)) => {
                let dra = out.dra.clone().unwrap_or_default();
                let _ = self.sim.delete(NAMESPACE, &tp.pod).await;
                let served = dra.calls.iter().any(|c| Path::new(&c.endpoint) == reg.endpoint);
                judge::rolling(dra.error.as_deref(), served, &first.endpoint, &reg.endpoint, t0.elapsed())
            }
        }
    }

    fn call_time(&mut self) {
        let mut row = crate::dra::check::call_times(&self.times, self.deadline_words.is_some(), self.cfg.timeout);
        if let Some(w) = &self.deadline_words {
            row.evidence = format!("{} ({} ms): {w}", row.evidence, self.cfg.timeout.as_millis());
        }
        if self.cfg.timeout != crate::dra::KUBELET_CALL_TIMEOUT {
            row.evidence = format!(
                "{}; deadline lowered to {} ms by --timeout (the kubelet's is 45 s)",
                row.evidence,
                self.cfg.timeout.as_millis()
            );
        }
        self.rows.record(row);
    }

    async fn shutdown(&mut self) {
        if self.driver().is_none() {
            return;
        }
        self.rows.send(SmokeProgress::Stopping { grace: self.cfg.grace });
        let Some(p) = self.driver() else { return };
        let t = p.terminate(self.cfg.grace).await;
        let exit = t.exit.map(|e| e.text).unwrap_or_else(|| "ended".into());
        let row = if t.already_exited {
            judge::verdict(StepId::Shutdown, false, format!("the driver had already stopped ({exit})"), t.after)
        } else if t.exited_on_sigterm {
            judge::verdict(StepId::Shutdown, true, format!("{exit} {} ms after SIGTERM", t.after.as_millis()), t.after)
        } else {
            let ev = format!("still running {} ms after SIGTERM: killed", self.cfg.grace.as_millis());
            judge::verdict(StepId::Shutdown, false, ev, t.after)
        };
        self.rows.record(row);
    }
}

/// A kubelet root under `base` long enough that every socket under it
/// passes 107 bytes (registration sockets and endpoints alike).
fn long_root(base: &Path) -> PathBuf {
    let len = base.as_os_str().len() + 1;
    base.join(format!("long-root-{}", "x".repeat(100usize.saturating_sub(len + 10))))
}

impl Runner<'_> {
    /// The driver again, under a long kubelet root, with a sim of its own
    /// watching the long plugins_registry.
    async fn long_socket_path(&mut self) {
        if self.rows.skipped(StepId::LongSocketPath) {
            return;
        }
        self.rows.started(StepId::LongSocketPath);
        let t0 = Instant::now();
        let root = long_root(&self.sb.root);
        let mut sb = Sandbox::under(&root, &self.sb.root.join("device-plugins-long"));
        sb.kubeconfig = self.sb.kubeconfig.clone();
        let lengths = format!(
            "kubelet root {} bytes, plugins_registry sockets over {} bytes, endpoints over {} bytes (limit {})",
            root.as_os_str().len(),
            sb.registry_dir.as_os_str().len() + 1,
            sb.plugin_dir.as_os_str().len() + 1,
            crate::paths::MAX_SOCKET_PATH_LEN
        );
        let started = match make_dirs(&sb) {
            Ok(()) => start_sim(&self.cfg, &sb).await,
            Err(e) => Err(e),
        };
        let sim = match started {
            Ok(s) => s,
            Err(e) => {
                self.rows.record(judge::result(StepId::LongSocketPath, Outcome::Error, e.to_string(), t0.elapsed()));
                return;
            }
        };
        let outcome = self.long_run(&sim, &sb).await;
        let _ = sim.stop().await;
        self.rows.record(judge::long_path(&outcome, &root.display().to_string(), &lengths, t0.elapsed()));
    }

    async fn long_run(&mut self, sim: &SimHandle, sb: &Sandbox) -> LongPathOutcome {
        let mut events = sim.subscribe();
        let proc = match super::runner::spawn(&self.cfg, sb, 1, false).await {
            Ok(p) => p,
            Err(e) => return LongPathOutcome::Stopped { exit: "did not start".into(), lines: vec![e.to_string()] },
        };
        let want = self.reg.as_ref().map(|r| r.driver.clone());
        let waited = wait_registered(&mut events, &proc, want.as_deref(), None, self.cfg.register_timeout).await;
        let outcome = match waited {
            RegWait::Exited(exit) => {
                let lines =
                    [Stream::Stderr, Stream::Stdout].into_iter().flat_map(|s| last_lines(&proc.output(s))).collect();
                LongPathOutcome::Stopped { exit, lines }
            }
            RegWait::TimedOut(_) | RegWait::TookOver(_) => LongPathOutcome::Silent,
            RegWait::Rejected(m) => LongPathOutcome::Unreachable(format!("the kubelet refused it: {m}")),
            RegWait::Registered(_) => match self.test_pod(false) {
                Err(e) => LongPathOutcome::Unreachable(e),
                Ok(tp) => match sim.admit(tp.spec).await {
                    Err(e) => LongPathOutcome::Unreachable(e.to_string()),
                    Ok(o) => match o.dra.and_then(|d| d.error) {
                        Some(e) => LongPathOutcome::Unreachable(e),
                        None => LongPathOutcome::Reachable,
                    },
                },
            },
        };
        proc.terminate(self.cfg.grace).await;
        outcome
    }
}

impl<'p> Engine<'p> for Runner<'p> {
    fn rows(&mut self) -> &mut Rows<'p, StepId> {
        &mut self.rows
    }

    async fn steps(&mut self) {
        if !self.launch_and_register().await {
            return;
        }
        self.published_slices().await;
        for step in [StepId::MultiDeviceClaim, StepId::UnsatisfiableClaim] {
            if !self.rows.skipped(step) {
                let why = "the sim engine has no scheduler: --engine cluster:DIR plays it with the real one";
                self.rows.record(judge::result(step, Outcome::Skip, why, Duration::ZERO));
            }
        }
        let admitted = self.admission().await;
        if admitted {
            self.request_names().await;
            self.prepare_idempotent().await;
            self.kubelet_restart().await;
            self.node_reboot().await;
        }
        self.unprepare().await;
        if admitted {
            self.parallel_pods().await;
            self.rolling_update().await;
        }
        self.call_time();
        self.shutdown().await;
        self.long_socket_path().await;
    }

    /// Every instance still running (after an interrupt or a failure), the
    /// sim, the API server.
    async fn stop(&mut self) {
        for p in &self.procs {
            if p.exit().is_none() {
                p.terminate(self.cfg.grace).await;
            }
        }
        let _ = self.sim.stop().await;
        if let Some((stop, task)) = self.stop_api.take() {
            stop.cancel();
            let _ = task.await;
        }
    }

    fn head(&self) -> Head {
        Head {
            suite: SUITE_NAME,
            kubelet_version: self.cfg.kubelet_version,
            engine: crate::kubelet_sim::default_engine(),
            command: self.sb.substitute(&self.cfg.command, 1),
            dir: self.sb.root.display().to_string(),
            dir_kept: self.cfg.keep,
            kubelet_socket: self.sim.kubelet_socket().display().to_string(),
            registry_dir: self.sb.registry_dir.display().to_string(),
            resource: self.reg.as_ref().map(|r| r.driver.clone()),
            plugin_socket: self.reg.as_ref().map(|r| r.endpoint.display().to_string()),
        }
    }

    fn plugin(&self) -> Option<&PluginProcess> {
        self.driver().or(self.procs.last())
    }
}

fn last_lines(o: &OutputView) -> Vec<String> {
    o.last_lines(20).into_iter().map(String::from).collect()
}
