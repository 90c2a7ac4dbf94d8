//! The steps of `dpctl smoke`, in order, each turning what the kubelet-sim
//! and the plugin process did into a pass, fail or skip with evidence.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::mpsc;

use super::engine::Engine;
use super::harness::{self, Head, Ran, Rows};
mod judge;
mod lifecycle;
mod reboot;

use super::isolate::{Layout, Plan};
use super::kubelet::{Kubelet, Waited};
use super::process::{Launch, PluginProcess, Stream};
use super::{
    ENV_KUBELET_SOCKET, ENV_REGISTRY_DIR, ENV_SMOKE_DIR, SUITE_NAME, SmokeConfig, SmokeProgress, SmokeReport, StepId,
    shell_words, substitute,
};
use crate::check::{self, Case, CheckId, CheckOptions, CheckResult, CheckTarget, Outcome, Progress, Registration};
use crate::kubelet_sim::{EventKind, PodSpec, RequestOptions, Via};
use crate::proto::deviceplugin::v1beta1 as dp;

/// Name and namespace of the test pod.
const POD_NAME: &str = "dpctl-smoke";
const POD_NAMESPACE: &str = "default";

/// How many IDs a list in evidence shows before "and N more".
const MAX_IDS: usize = 12;

/// Lines of the plugin's output quoted in evidence when it exits early.
const QUOTED_LINES: usize = 5;

/// What the sim saw of the tested plugin's registration.
#[derive(Debug, Clone)]
struct Reg {
    resource: String,
    endpoint: String,
    socket: PathBuf,
    via: Via,
    version: String,
    request_options: Option<RequestOptions>,
    options: dp::DevicePluginOptions,
    at: SystemTime,
    /// Index of the `registered` event in the log.
    index: usize,
}

/// Runs the steps and keeps their results.
pub(super) struct Runner {
    cfg: SmokeConfig,
    kubelet: Kubelet,
    tx: mpsc::UnboundedSender<SmokeProgress>,
    /// The device-plugin directory, kubelet.sock and the PodResources socket, as the plugin sees them.
    dir: PathBuf,
    kubelet_socket: PathBuf,
    podresources_socket: PathBuf,
    command: Vec<String>,
    process: Option<PluginProcess>,
    launched_at: Option<SystemTime>,
    reg: Option<Reg>,
    admitted: bool,
    /// The rows, and why the remaining steps do not run.
    rows: Rows<'static, StepId>,
    /// The plugins_registry directory the sim watches.
    registry_dir: PathBuf,
    /// `--isolate`: how to wrap the command.
    isolate: Option<Plan>,
    /// The kubelet-restart step's tally.
    restarts: Option<super::RestartTally>,
    /// Capacity and allocatable before the lifecycle steps.
    baseline: Option<crate::model::Counts>,
    /// The device IDs the kubelet held before the lifecycle steps.
    ids_before: Option<Vec<String>>,
    /// The step that started the current process (its log files' name).
    started_by: StepId,
    /// The results recorded while the current process was the plugin.
    judged: Vec<String>,
    /// The processes stopped and replaced, for the report.
    retired: Vec<super::ProcessReport>,
    /// What the current process lived through (a kubelet restart), for evidence.
    lived_through: Option<&'static str>,
    /// A fault made and not cleared yet, and its resource: cleared whatever happens.
    pending_recover: Option<(lifecycle::Fault, String)>,
    /// Devices added by the rescan rounds so far (their IDs are numbered).
    rescans: u32,
    /// The shutdown step stopped the plugin: its end is no failure.
    stopping: bool,
}

impl Runner {
    pub(super) fn new(
        cfg: SmokeConfig,
        engine: std::sync::Arc<Engine>,
        tx: mpsc::UnboundedSender<SmokeProgress>,
        layout: &Layout,
        isolate: Option<Plan>,
    ) -> Self {
        let dir = layout.device_plugins.clone();
        let kubelet_socket = dir.join(crate::paths::KUBELET_SOCKET_NAME);
        let registry = layout.plugins_registry.display().to_string();
        let command = substitute(&cfg.command, &dir, &kubelet_socket)
            .into_iter()
            .map(|a| a.replace("{registry_dir}", &registry))
            .collect();
        let shown = tx.clone();
        let rows = Rows::new(cfg.skip_steps.clone(), move |p| {
            let _ = shown.send(p);
        });
        Runner {
            cfg,
            kubelet: Kubelet::new(engine, layout.path_map()),
            tx,
            dir,
            kubelet_socket,
            podresources_socket: layout.podresources_socket(),
            command,
            process: None,
            launched_at: None,
            reg: None,
            admitted: false,
            rows,
            registry_dir: layout.plugins_registry.clone(),
            isolate,
            restarts: None,
            baseline: None,
            ids_before: None,
            started_by: StepId::Launch,
            judged: Vec::new(),
            retired: Vec::new(),
            lived_through: None,
            pending_recover: None,
            rescans: 0,
            stopping: false,
        }
    }

    pub(super) fn config(&self) -> &SmokeConfig {
        &self.cfg
    }

    fn send(&self, p: SmokeProgress) {
        let _ = self.tx.send(p);
    }

    fn begin(&mut self, id: StepId) -> Instant {
        self.rows.started(id);
        Instant::now()
    }

    /// Records a result. A step that would pass while the plugin process
    /// has ended (not stopped by smoke) fails instead, with its exit status
    /// and the tail of its output: a plugin that exits, panics or is killed
    /// in any step fails that step.
    fn record(&mut self, mut r: CheckResult) {
        if r.outcome == Outcome::Pass
            && !self.stopping
            && let Some(gone) = self.gone()
        {
            r.outcome = Outcome::Fail;
            r.evidence = format!("{}; but {gone}", r.evidence);
        }
        self.judged.push(r.name.clone());
        self.rows.record(r);
    }

    /// The evidence when the current plugin process has ended: its exit
    /// status and its last lines.
    fn gone(&self) -> Option<String> {
        let p = self.process.as_ref()?;
        let exit = p.exit()?;
        Some(format!("the plugin process (pid {}) {exit}; {}", p.pid(), last_output_of(p)))
    }

    /// How the current process ended, or "ended".
    fn exit_text(&self) -> String {
        self.process.as_ref().and_then(PluginProcess::exit).map_or_else(|| "ended".into(), |e| e.text)
    }

    /// Makes `p`, started by `by`, the plugin.
    fn adopt(&mut self, p: PluginProcess, by: StepId) {
        if let Some(old) = self.process.take() {
            self.retire(old);
        }
        self.process = Some(p);
        self.started_by = by;
        self.lived_through = None;
    }

    /// Keeps a stopped process in the report, with the steps that judged it.
    fn retire(&mut self, p: PluginProcess) {
        let report = process_report(&p, self.started_by, std::mem::take(&mut self.judged));
        self.retired.push(report);
    }

    fn done(&mut self, id: StepId, outcome: Outcome, evidence: impl Into<String>, t: Instant) -> bool {
        self.record(CheckResult::new(id, outcome, evidence, t.elapsed()));
        outcome == Outcome::Pass
    }

    fn skipped(&self, id: StepId) -> bool {
        self.rows.skipped(id)
    }

    fn skip(&mut self, id: StepId, why: impl Into<String>) {
        self.record(CheckResult::new(id, Outcome::Skip, why, Duration::ZERO));
    }

    fn any_failed(&self) -> bool {
        check::any_failure(self.rows.results())
    }

    /// " (the plugin process exited with code 1)" when it has ended.
    fn exit_note(&self) -> String {
        match self.process.as_ref().and_then(PluginProcess::exit) {
            Some(e) => format!(" (the plugin process {e})"),
            None => String::new(),
        }
    }

    /// The plugin's last lines of output, for evidence.
    fn last_output(&self) -> String {
        self.process.as_ref().map(last_output_of).unwrap_or_default()
    }

    /// All steps up to (not including) shutdown.
    pub(super) async fn run_steps(&mut self) {
        if !self.launch().await {
            self.rows.why_not = Some("not run: the plugin did not start".into());
            return;
        }
        if !self.registration().await {
            self.rows.why_not = Some("not run: the plugin did not register".into());
            return;
        }
        // The checks first: they take a while (the stream window), so the
        // health report below also sees a stream that ended meanwhile, and
        // the registration request a second Register the kubelet refused
        // (its row still goes right after registration's).
        let at = self.rows.results().len();
        self.checks().await;
        self.registration_request().await;
        let rows = self.rows.results_mut();
        if let Some(r) = rows.pop() {
            rows.insert(at.min(rows.len()), r);
        }
        self.first_snapshot().await;
        self.health_report().await;
        self.admission().await;
        self.pod_deletion().await;
        // The counts the lifecycle steps must come back to: the plugin's
        // whole list, no pod holding a device.
        if let Some(r) = self.reg.as_ref().map(|r| r.resource.clone()) {
            self.baseline = self.kubelet.counts().await.get(&r).copied();
            self.ids_before = Some(self.advertised_ids(&r).await);
        }
        // The steps on a process that lived through what came before, then
        // the fresh-process step.
        self.kubelet_restart().await;
        self.health_recovery().await;
        self.device_rescan().await;
        self.node_reboot().await;
        self.plugin_restart().await;
    }

    async fn launch(&mut self) -> bool {
        let t = self.begin(StepId::Launch);
        let launch = match self.launch_spec(StepId::Launch) {
            Ok(l) => l,
            Err(ev) => return self.done(StepId::Launch, Outcome::Fail, ev, t),
        };
        self.launched_at = Some(SystemTime::now());
        match PluginProcess::spawn(launch).await {
            Ok(p) => {
                let pid = p.pid();
                self.adopt(p, StepId::Launch);
                self.send(SmokeProgress::Launched { pid, command: self.command.clone() });
                let ev = format!("pid {pid}: {}", shell_words(&self.command));
                self.done(StepId::Launch, Outcome::Pass, ev, t)
            }
            Err(e) => self.done(StepId::Launch, Outcome::Fail, spawn_error(e), t),
        }
    }

    /// The plugin's command, environment and output handling (for the
    /// launch and the steps that start it again, `by`, which names its log
    /// files), or why it cannot start.
    pub(super) fn launch_spec(&self, by: StepId) -> Result<Launch, String> {
        let dir = self.dir.display().to_string();
        let lines = self.cfg.forward_output.then(|| {
            let (ltx, mut lrx) = mpsc::unbounded_channel::<(Stream, String)>();
            let tx = self.tx.clone();
            tokio::spawn(async move {
                while let Some((stream, line)) = lrx.recv().await {
                    let _ = tx.send(SmokeProgress::Output { stream, line });
                }
            });
            ltx
        });
        let mut env = self.hook_env();
        env.push((crate::paths::ENV_DEVICE_PLUGIN_DIR.into(), dir));
        env.push((crate::paths::ENV_PODRESOURCES_SOCKET.into(), self.podresources_socket.display().to_string()));
        // --isolate: dpctl's helper sets the namespace up, then execs the
        // command; one it cannot find there fails here, as without --isolate.
        if let Some(why) = self.isolate.as_ref().and_then(Plan::launch_error) {
            return Err(format!("cannot start the plugin: {why}"));
        }
        let command = match &self.isolate {
            Some(plan) => {
                let w = plan.wrap(&self.command).map_err(|e| e.to_string())?;
                env.extend(w.env);
                w.command
            }
            None => self.command.clone(),
        };
        Ok(Launch {
            command,
            env,
            keep_bytes: self.cfg.output_limit,
            log_dir: self.cfg.log_dir.clone(),
            log_name: by.name().to_string(),
            lines,
        })
    }

    /// The environment the plugin and the user's hook commands get: the
    /// smoke directory, kubelet.sock and the plugins_registry directory.
    pub(super) fn hook_env(&self) -> Vec<(String, String)> {
        vec![
            (ENV_SMOKE_DIR.into(), self.dir.display().to_string()),
            (ENV_KUBELET_SOCKET.into(), self.kubelet_socket.display().to_string()),
            (ENV_REGISTRY_DIR.into(), self.registry_dir.display().to_string()),
        ]
    }

    async fn registration(&mut self) -> bool {
        let t = self.begin(StepId::Registration);
        let deadline = crate::duration::deadline(self.cfg.register_timeout);
        let wanted = self.cfg.resource.clone();
        let matches = move |r: &str| wanted.as_deref().is_none_or(|w| w == r);
        let m2 = matches.clone();
        let pred = move |k: &EventKind| match k {
            EventKind::Registered { resource, .. } | EventKind::RegistrationRejected { resource, .. } => m2(resource),
            _ => false,
        };
        let waited = self.kubelet.wait_for(0, pred, deadline, self.process.as_ref()).await;
        let kubelet_socket = self.kubelet_socket.display().to_string();
        match waited {
            Waited::Found(i) => {
                let ev = self.kubelet.seen[i].clone();
                match ev.kind {
                    EventKind::Registered {
                        resource,
                        endpoint,
                        socket,
                        via,
                        version,
                        request_options,
                        pre_start_required,
                        get_preferred_allocation_available,
                        took_ms,
                        ..
                    } => {
                        let since = self.launched_at.and_then(|l| ev.time.duration_since(l).ok()).unwrap_or_default();
                        let how = how_registered(via, &version, &endpoint);
                        let evidence = format!(
                            "{resource}: {how} accepted {} ms after launch; \
                             the kubelet's dial-back and GetDevicePluginOptions took {took_ms} ms and answered \
                             pre_start_required={pre_start_required}, \
                             get_preferred_allocation_available={get_preferred_allocation_available}{}",
                            since.as_millis(),
                            if self.kubelet.is_referee() { "" } else { watcher_authority_note(via) }
                        );
                        let wrong_way = self.cfg.registration.filter(|w| *w != via);
                        self.reg = Some(Reg {
                            resource,
                            endpoint,
                            socket: PathBuf::from(socket),
                            via,
                            version,
                            request_options,
                            options: dp::DevicePluginOptions { pre_start_required, get_preferred_allocation_available },
                            at: ev.time,
                            index: i,
                        });
                        if let Some(w) = wrong_way {
                            let evidence =
                                format!("registered through {via}, not through {w} (--registration): {evidence}");
                            return self.done(StepId::Registration, Outcome::Fail, evidence, t);
                        }
                        self.done(StepId::Registration, Outcome::Pass, evidence, t)
                    }
                    EventKind::RegistrationRejected { resource, endpoint, socket, version, message, .. } => {
                        let evidence = self.rejected_evidence(&resource, &endpoint, &socket, &version, &message);
                        self.done(StepId::Registration, Outcome::Fail, evidence, t)
                    }
                    _ => self.done(StepId::Registration, Outcome::Error, "unexpected event", t),
                }
            }
            Waited::Exited(exit) => {
                let evidence = format!(
                    "the plugin {exit} before registering on {kubelet_socket}{}; {}",
                    self.late_socket_note(),
                    self.last_output()
                );
                self.done(StepId::Registration, Outcome::Fail, evidence, t)
            }
            Waited::TimedOut => {
                let evidence = self.not_registered_evidence(&kubelet_socket, &matches) + &self.late_socket_note();
                self.done(StepId::Registration, Outcome::Fail, evidence, t)
            }
        }
    }

    /// Why the kubelet rejected Register, with the fix when the cause is known.
    fn rejected_evidence(&self, resource: &str, endpoint: &str, socket: &str, version: &str, message: &str) -> String {
        let mut evidence = format!(
            "the kubelet rejected Register(version {version:?}, resource_name {resource:?}, endpoint \
             {endpoint:?}): {message}"
        );
        if message == crate::kubelet_sim::DIAL_FAILED && endpoint.starts_with('/') {
            // docs/kubelet-versions.md §1: filepath.Join appends an absolute endpoint.
            evidence.push_str(&format!(
                " — the endpoint is an absolute path, and the kubelet joins it to its directory \
                 (Go filepath.Join), so it dialed {socket}, where nothing listens: register the \
                 socket's file name ({:?}) and serve it in {}",
                endpoint.rsplit('/').next().unwrap_or_default(),
                self.dir.as_path().display()
            ));
        } else if message == crate::kubelet_sim::DIAL_FAILED {
            evidence.push_str(&format!(
                " — the kubelet could not connect to {endpoint} within 10 s while handling Register: \
                 serve the socket before calling Register"
            ));
        }
        evidence
    }

    /// What is known when no registration came in time: other resources that
    /// registered, the sockets in both directories, and a hint.
    fn not_registered_evidence(&self, kubelet_socket: &str, matches: &dyn Fn(&str) -> bool) -> String {
        let mut evidence = format!(
            "no Register on {kubelet_socket} within {} (the plugin is still running)",
            humantime::format_duration(self.cfg.register_timeout)
        );
        let others: BTreeSet<String> = self
            .kubelet
            .seen
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Registered { resource, .. } if !matches(resource) => Some(resource.clone()),
                _ => None,
            })
            .collect();
        if !others.is_empty() {
            evidence.push_str(&format!("; registered instead: {}", others.into_iter().collect::<Vec<_>>().join(", ")));
        }
        let sockets = crate::paths::sockets_in(self.dir.as_path());
        let registry = crate::paths::sockets_in(&self.registry_dir);
        let hint = if self.isolate.is_some() {
            "does the plugin use the kubelet's standard paths (/var/lib/kubelet/device-plugins or \
             /var/lib/kubelet/plugins_registry)?"
        } else {
            "does the plugin use this directory (pass {dir} or {kubelet_socket} in its arguments, or \
             {registry_dir} for plugins_registry; or try --isolate for a plugin that only knows the \
             kubelet's standard paths)?"
        };
        evidence.push_str(&format!(
            "; sockets in {}: {}; in plugins_registry {}: {}; {hint} {}",
            self.dir.as_path().display(),
            crate::text::list(&sockets),
            self.registry_dir.display(),
            crate::text::list(&registry),
            self.last_output()
        ));
        evidence
    }

    async fn registration_request(&mut self) {
        let id = StepId::RegistrationRequest;
        if self.skipped(id) {
            return self.skip(id, self.cfg.left_out());
        }
        let t = self.begin(id);
        let Some(reg) = self.reg.clone() else { return };
        let mut problems = judge::registration_problems(&reg, &self.dir);
        self.kubelet.pull().await;
        let version = self.kubelet.status().await.map(|s| s.kubelet_version).unwrap_or(self.cfg.kubelet_version);
        let events = self.kubelet.seen.get(reg.index..).unwrap_or_default();
        problems.extend(judge::second_registers(events, &reg.resource, version));
        if reg.via == Via::PluginsRegistry {
            let seen = format!(
                "through plugins_registry: GetInfo named {}, endpoint {} (dialled as {}), supported versions include \
                 {}; no RegisterRequest (the kubelet reads the options from GetDevicePluginOptions)",
                reg.resource,
                reg.endpoint,
                reg.socket.display(),
                reg.version
            );
            return if problems.is_empty() {
                self.done(id, Outcome::Pass, seen, t);
            } else {
                self.done(id, Outcome::Fail, format!("{}; {seen}", problems.join("; ")), t);
            };
        }
        let options = match reg.request_options {
            Some(o) => format!(
                "options {{pre_start_required: {}, get_preferred_allocation_available: {}}}",
                o.pre_start_required, o.get_preferred_allocation_available
            ),
            None if self.kubelet.is_referee() => "options not seen (the kubelet logs no RegisterRequest options; \
                it reads them from GetDevicePluginOptions)"
                .into(),
            None => "no options (the kubelet reads them from GetDevicePluginOptions)".into(),
        };
        let seen =
            format!("version {}, resource_name {}, endpoint {}, {options}", reg.version, reg.resource, reg.endpoint);
        if problems.is_empty() {
            self.done(id, Outcome::Pass, seen, t);
        } else {
            self.done(id, Outcome::Fail, format!("{}; the request: {seen}", problems.join("; ")), t);
        }
    }

    async fn first_snapshot(&mut self) {
        let id = StepId::FirstSnapshot;
        if self.skipped(id) {
            return self.skip(id, self.cfg.left_out());
        }
        let t = self.begin(id);
        let Some(reg) = self.reg.clone() else { return };
        let deadline = crate::duration::deadline(self.cfg.first_list_timeout);
        let r = reg.resource.clone();
        let pred = move |k: &EventKind| match k {
            EventKind::Snapshot { resource, .. } | EventKind::StreamEnded { resource, .. } => *resource == r,
            _ => false,
        };
        let waited = self.kubelet.wait_for(reg.index, pred, deadline, self.process.as_ref()).await;
        let wait = match &waited {
            Waited::Found(i) => {
                let ev = &self.kubelet.seen[*i];
                let after_ms = ev.time.duration_since(reg.at).unwrap_or_default().as_millis();
                judge::FirstWait::Event { kind: &ev.kind, after_ms }
            }
            Waited::Exited(exit) => {
                judge::FirstWait::Exited { exit: exit.to_string(), last_output: self.last_output() }
            }
            Waited::TimedOut => judge::FirstWait::TimedOut { timeout: self.cfg.first_list_timeout },
        };
        let verdict = judge::first_snapshot(wait, &reg.resource, self.kubelet.is_referee(), &self.exit_note());
        if let Some((outcome, evidence)) = verdict {
            self.done(id, outcome, evidence, t);
        }
    }

    async fn health_report(&mut self) {
        let id = StepId::HealthReport;
        if self.skipped(id) {
            return self.skip(id, self.cfg.left_out());
        }
        let t = self.begin(id);
        let Some(reg) = self.reg.clone() else { return };
        self.kubelet.pull().await;
        let status = self.kubelet.status().await;
        let Some(res) = status.as_ref().and_then(|s| s.resource(&reg.resource)) else {
            let ev = format!("{} does not know {}", self.kubelet.name(), reg.resource);
            self.done(id, Outcome::Error, ev, t);
            return;
        };
        let seen = judge::HealthSeen {
            status: res,
            events: self.kubelet.seen.get(reg.index..).unwrap_or_default(),
            exit_note: self.exit_note(),
        };
        let (outcome, evidence) = judge::health_report(&seen);
        self.done(id, outcome, evidence, t);
    }

    async fn checks(&mut self) {
        let Some(reg) = self.reg.clone() else { return };
        let selected: Vec<CheckId> = CheckId::ALL.into_iter().filter(|c| !self.cfg.skip_checks.contains(c)).collect();
        let request = dp::RegisterRequest {
            version: reg.version.clone(),
            endpoint: reg.endpoint.clone(),
            resource_name: reg.resource.clone(),
            options: reg.request_options.map(Into::into),
        };
        // plugins_registry has no RegisterRequest to compare the options with.
        let by_registry = reg.via == Via::PluginsRegistry;
        // A referee reads the kubelet's log, which does not record the RegisterRequest.
        let by_registry = by_registry || self.kubelet.is_referee();
        let target = CheckTarget {
            registration: (!by_registry)
                .then(|| Registration::from_request(&request, "the RegisterRequest kubelet-sim received")),
            tap: self.cfg.tap.as_ref().map(|t| t.by("plugin check")),
            ..CheckTarget::new(&reg.socket)
        };
        let opts = CheckOptions {
            checks: selected,
            first_message_timeout: self.cfg.first_list_timeout,
            stream_window: self.cfg.stream_window,
            prestart_timeout: self.cfg.prestart_timeout,
            suite: SUITE_NAME.into(),
            ..CheckOptions::default()
        };
        let tx = self.tx.clone();
        let report = check::run_checks_with(&target, &opts, &mut |p| {
            let _ = tx.send(match p {
                Progress::Started(id) => SmokeProgress::StepStarted(id.name().into()),
                Progress::Finished(r) => SmokeProgress::StepFinished(r.clone()),
            });
        })
        .await;
        let mut by_name: std::collections::HashMap<String, CheckResult> =
            report.checks.into_iter().map(|c| (c.name.clone(), c)).collect();
        for c in CheckId::ALL {
            match by_name.remove(c.name()) {
                Some(r) => {
                    self.judged.push(r.name.clone());
                    self.rows.results_mut().push(r);
                }
                None => self.record(CheckResult::new(c, Outcome::Skip, self.cfg.left_out(), Duration::ZERO)),
            }
        }
    }

    async fn admission(&mut self) {
        let id = StepId::Admission;
        if self.skipped(id) {
            return self.skip(id, self.cfg.left_out());
        }
        if self.cfg.request == 0 {
            return self.skip(id, "--request 0: no pod admitted");
        }
        let t = self.begin(id);
        let Some(reg) = self.reg.clone() else { return };
        let before = self.kubelet.counts().await.get(&reg.resource).copied().unwrap_or_default();
        let pod = PodSpec::shorthand(POD_NAME, POD_NAMESPACE, &[(reg.resource.clone(), self.cfg.request)]);
        let outcome = match self.kubelet.admit(pod).await {
            Ok(o) => o,
            Err(e) => {
                self.done(id, Outcome::Error, format!("{} could not admit the pod: {e}", self.kubelet.name()), t);
                return;
            }
        };
        let stream_ended = if outcome.admitted {
            false
        } else {
            let status = self.kubelet.status().await;
            let state = status.as_ref().and_then(|s| s.resource(&reg.resource)).map(|r| r.state.clone());
            state.as_deref() == Some("stream-ended")
        };
        self.admitted |= outcome.admitted;
        let seen = judge::AdmissionSeen {
            outcome: &outcome,
            reg: &reg,
            request: self.cfg.request,
            allocatable_before: before.allocatable,
            stream_ended,
            kubelet_version: self.cfg.kubelet_version,
            exit_note: self.exit_note(),
        };
        let (outcome, evidence) = judge::admission(&seen);
        self.done(id, outcome, evidence, t);
    }

    async fn pod_deletion(&mut self) {
        let id = StepId::PodDeletion;
        if self.skipped(id) {
            return self.skip(id, self.cfg.left_out());
        }
        if !self.admitted {
            return self.skip(id, "no pod was admitted");
        }
        let t = self.begin(id);
        let Some(reg) = self.reg.clone() else { return };
        match self.kubelet.delete(POD_NAMESPACE, POD_NAME).await {
            Ok(out) => {
                let freed: Vec<String> = out.freed.get(&reg.resource).cloned().unwrap_or_default();
                let status = self.kubelet.status().await;
                let in_use = status.as_ref().and_then(|s| s.resource(&reg.resource)).map(|r| r.in_use).unwrap_or(0);
                if in_use > 0 {
                    let evidence = format!(
                        "freed {}, but {} still in use",
                        ids(&freed),
                        if in_use == 1 { "1 device is".to_string() } else { format!("{in_use} devices are") }
                    );
                    self.done(id, Outcome::Fail, evidence, t);
                } else {
                    let allocatable =
                        self.kubelet.counts().await.get(&reg.resource).map(|c| c.allocatable).unwrap_or(0);
                    let evidence = format!(
                        "pod {POD_NAMESPACE}/{POD_NAME} deleted; freed {}; no device in use, allocatable {allocatable}",
                        ids(&freed)
                    );
                    self.done(id, Outcome::Pass, evidence, t);
                }
            }
            Err(e) => {
                self.done(id, Outcome::Error, format!("{} could not delete the pod: {e}", self.kubelet.name()), t);
            }
        }
    }

    /// `--restarts N` kubelet restarts in a row; the step passes when the
    /// plugin came back from every one, and its evidence (in the table, the
    /// JSON and JUnit) gives the tally, e.g. "re-registered 29/30 (3.3% flaky)".
    async fn kubelet_restart(&mut self) {
        let id = StepId::KubeletRestart;
        if self.skipped(id) {
            return self.skip(id, self.cfg.left_out());
        }
        let t = self.begin(id);
        let Some(reg) = self.reg.clone() else { return };
        let n = self.cfg.restarts.max(1);
        let (mut back, mut first_bad, mut last_good) = (0u32, None::<String>, String::new());
        for round in 1..=n {
            match self.restart_once(&reg).await {
                Err(e) => {
                    let ev = format!("{} could not restart (restart {round} of {n}): {e}", self.kubelet.name());
                    self.done(id, Outcome::Error, ev, t);
                    return;
                }
                Ok(Ok(good)) => {
                    back += 1;
                    last_good = good;
                }
                Ok(Err(bad)) => {
                    first_bad.get_or_insert_with(|| if n == 1 { bad } else { format!("restart {round}: {bad}") });
                    if self.process.as_ref().and_then(PluginProcess::exit).is_some() {
                        // Nothing left to come back: the remaining restarts count as failed.
                        break;
                    }
                }
            }
        }
        let tally = super::RestartTally::new(n, back);
        let (mut outcome, mut evidence) = judge::restarts(&tally, first_bad, last_good);
        self.restarts = Some(tally);
        // The same process, watched for the settle window: a plugin that
        // crashes some seconds after the restart fails here, not later.
        if self.gone().is_none() {
            match self.settle_watch("the kubelet restart").await {
                Ok(note) => {
                    evidence.push_str(&format!("; {note}"));
                    self.lived_through = Some("the kubelet restart");
                }
                Err(ev) => {
                    outcome = Outcome::Fail;
                    evidence.push_str(&format!("; but {ev}"));
                    self.stopping = true;
                    self.done(id, outcome, evidence, t);
                    self.stopping = false;
                    return;
                }
            }
        }
        self.done(id, outcome, evidence, t);
    }

    /// One kubelet restart: `Ok(Ok(evidence))` when every resource came
    /// back, `Ok(Err(evidence))` when one did not.
    async fn restart_once(&mut self, reg: &Reg) -> Result<Result<String, String>, String> {
        self.kubelet.pull().await;
        let from = self.kubelet.seen.len();
        let report = self.kubelet.restart(self.cfg.restart_deadline).await?;
        self.kubelet.pull().await;
        let seen = judge::RestartSeen {
            report: &report,
            events: self.kubelet.seen.get(from..).unwrap_or_default(),
            deadline: self.cfg.restart_deadline,
            socket_back: std::fs::symlink_metadata(&reg.socket).is_ok(),
            endpoint: &reg.endpoint,
            exit_note: self.exit_note(),
        };
        Ok(judge::restart(&seen))
    }

    /// Marks every step that did not run (interrupted or stopped early) as skipped.
    pub(super) fn fill_missing(&mut self, interrupted: bool) {
        let why = if interrupted {
            "not run: interrupted".to_string()
        } else {
            self.rows.why_not.clone().unwrap_or_else(|| "not run".into())
        };
        let mut missing = Vec::new();
        for s in StepId::ALL {
            if s == StepId::FirstSnapshot {
                let checks = self.rows.missing(&CheckId::ALL);
                missing.extend(
                    checks.into_iter().map(|c| CheckResult::new(c, Outcome::Skip, why.clone(), Duration::ZERO)),
                );
            }
            if s != StepId::Shutdown && !self.rows.has(s.name()) {
                missing.push(CheckResult::new(s, Outcome::Skip, why.clone(), Duration::ZERO));
            }
        }
        for r in missing {
            self.record(r);
        }
    }

    /// Stops the plugin: SIGTERM, the grace period, SIGKILL; reports it.
    pub(super) async fn shutdown(&mut self) {
        let id = StepId::Shutdown;
        // A fault a failed or interrupted step made is cleared first.
        let undone = match self.undo_fault().await {
            Some(Ok(done)) => format!("; the fault an unfinished step made was cleared first ({done})"),
            Some(Err(e)) => format!("; clearing the fault an unfinished step made failed: {e}"),
            None => String::new(),
        };
        self.stopping = true;
        if self.process.is_none() {
            return self.skip(id, "the plugin never started");
        }
        let t = self.begin(id);
        let Some(p) = &self.process else { return };
        self.send(SmokeProgress::Stopping { grace: self.cfg.grace });
        let term = p.terminate(self.cfg.grace).await;
        let by_sigterm = term.exit.as_ref().is_some_and(|e| e.signal == Some(libc::SIGTERM));
        let exit = term.exit.map(|e| e.text).unwrap_or_else(|| "ended".into());
        let socket = self.reg.as_ref().map(|r| (r.endpoint.clone(), r.socket.clone()));
        let socket_note = match &socket {
            Some((name, path)) => {
                if std::fs::symlink_metadata(path).is_ok() {
                    format!(
                        "; it left its socket {name} behind (the kubelet only deletes stale sockets when it restarts)"
                    )
                } else {
                    format!("; its socket {name} is gone")
                }
            }
            None => String::new(),
        } + &undone;
        if term.already_exited {
            if self.any_failed() {
                self.done(id, Outcome::Skip, format!("the plugin had already {exit}"), t);
            } else {
                let evidence =
                    format!("the plugin {exit} on its own before it was asked to stop; {}", self.last_output());
                self.done(id, Outcome::Fail, evidence, t);
            }
        } else if term.killed {
            let evidence = format!(
                "still running {} after SIGTERM: killed with SIGKILL{socket_note}",
                humantime::format_duration(self.cfg.grace)
            );
            self.done(id, Outcome::Fail, evidence, t);
        } else if by_sigterm {
            let evidence = format!(
                "SIGTERM ended it after {} ms; it has no SIGTERM handler, so none of its own cleanup ran{socket_note}",
                term.after.as_millis()
            );
            self.done(id, Outcome::Pass, evidence, t);
        } else {
            let evidence = format!("{exit} {} ms after SIGTERM{socket_note}", term.after.as_millis());
            self.done(id, Outcome::Pass, evidence, t);
        }
    }

    pub(super) fn into_report(mut self, dir: &Path, dir_kept: bool, ran: Ran) -> SmokeReport {
        let mut processes = std::mem::take(&mut self.retired);
        if let Some(p) = &self.process {
            processes.push(process_report(p, self.started_by, std::mem::take(&mut self.judged)));
        }
        let plugin = processes.last().map_or_else(|| harness::plugin_report(None), |p| p.plugin.clone());
        let head = Head {
            suite: SUITE_NAME,
            kubelet_version: self.cfg.kubelet_version,
            engine: self.kubelet.name().to_string(),
            command: self.command.clone(),
            dir: dir.display().to_string(),
            dir_kept,
            kubelet_socket: self.kubelet_socket.display().to_string(),
            registry_dir: self.registry_dir.display().to_string(),
            resource: self.reg.as_ref().map(|r| r.resource.clone()),
            plugin_socket: self.reg.as_ref().map(|r| r.socket.display().to_string()),
        };
        let mut report = head.report(ran, self.rows.take(), plugin);
        report.processes = processes;
        report.restarts = self.restarts;
        report
    }
}

/// A process's last lines of output, for evidence.
fn last_output_of(p: &PluginProcess) -> String {
    let mut parts = Vec::new();
    for s in [Stream::Stderr, Stream::Stdout] {
        let o = p.output(s);
        let lines = o.last_lines(QUOTED_LINES);
        if !lines.is_empty() {
            parts.push(format!(
                "last {} of its {}: {}",
                crate::text::count(lines.len(), "line", "lines"),
                s.as_str(),
                lines.join(" | ")
            ));
        }
    }
    if parts.is_empty() { "it printed nothing".into() } else { parts.join("; ") }
}

/// A process in the report: who started it, what judged it, its output.
fn process_report(p: &PluginProcess, by: StepId, judged: Vec<String>) -> super::ProcessReport {
    super::ProcessReport {
        started_by: by.name().to_string(),
        judged_in: judged,
        plugin: harness::plugin_report(Some(p)),
    }
}

/// A failed spawn as evidence.
fn spawn_error(e: crate::Error) -> String {
    match e {
        crate::Error::Invalid { message, .. } => message,
        other => other.to_string(),
    }
}

/// A list of IDs, cut after [`MAX_IDS`].
/// How the plugin registered, for the registration step's evidence.
fn how_registered(via: Via, version: &str, endpoint: &str) -> String {
    match via {
        Via::KubeletSock => format!("Register(version {version}, endpoint {endpoint})"),
        Via::PluginsRegistry => {
            format!("through plugins_registry (GetInfo: endpoint {endpoint}; NotifyRegistrationStatus registered)")
        }
    }
}

/// docs/kubelet-versions.md §9 (every version): the plugin watcher's own dial
/// (GetInfo, NotifyRegistrationStatus) has no WithAuthority, so the kubelet
/// sends the socket path as :authority; kubelet-sim sends localhost.
fn watcher_authority_note(via: Via) -> &'static str {
    match via {
        Via::PluginsRegistry => {
            "; note: the kubelet's plugin watcher calls GetInfo without an :authority override (it sends the \
             socket path, which h2-based servers such as tonic reset with PROTOCOL_ERROR); kubelet-sim sends \
             localhost, so this step cannot catch that"
        }
        Via::KubeletSock => "",
    }
}

fn ids(list: &[String]) -> String {
    if list.is_empty() {
        return "-".into();
    }
    if list.len() <= MAX_IDS {
        return list.join(", ");
    }
    format!("{}, … and {} more", list[..MAX_IDS].join(", "), list.len() - MAX_IDS)
}
