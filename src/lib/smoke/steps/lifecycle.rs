//! The node-lifecycle steps of `dpctl smoke` that follow the kubelet
//! restart: on the process that lived through it, a device fault and its
//! clearance (on the kubelet's new stream) and two changes in device count;
//! then the plugin process restarted while the kubelet runs on. Also what
//! every step that stops or watches the plugin shares: the stop judged
//! once (SIGKILL fails it), the settle window, the IDs compared, the fault
//! always undone.

use std::time::{Duration, Instant};

use super::{Runner, StepId, judge, shell_words};
use crate::check::Outcome;
use crate::mock_plugin::control::{self, ControlRequest};
use crate::model::Counts;
use crate::smoke::process::PluginProcess;

/// How long smoke waits to see a stopped plugin's devices leave allocatable
/// (the kubelet marks them unhealthy when the stream ends); only reported.
const DOWN_WAIT: Duration = Duration::from_secs(2);

/// How a device fault is made and cleared.
#[derive(Debug, Clone)]
pub(super) enum Fault {
    /// The user's shell commands.
    Hooks { fault: String, recover: String },
    /// dpctl's mock plugin: its control socket flips this device's health.
    Mock { device: String },
}

/// A round's verdict and its evidence.
pub(super) type Round = (Outcome, String);

impl Runner {
    /// Stops the plugin (SIGTERM, as a DaemonSet rollout does), starts the
    /// same command again, and checks that it registers again within the
    /// deadline (one clock: the deadline and the time reported both count
    /// from the new process's start), with the same IDs, and that capacity
    /// and allocatable come back as they were. Needing SIGKILL fails it.
    // long: one story in order (counts before, stop, relaunch, Register, counts and IDs after).
    pub(super) async fn plugin_restart(&mut self) {
        let id = StepId::PluginRestart;
        if self.skipped(id) {
            return self.skip(id, self.cfg.left_out());
        }
        let t = self.begin(id);
        let Some(reg) = self.reg.clone() else { return };
        if let Some(gone) = self.gone() {
            return self.ended_before(id, gone, t);
        }
        let r = reg.resource.clone();
        let before = match self.baseline {
            Some(b) => b,
            None => self.kubelet.counts().await.get(&r).copied().unwrap_or_default(),
        };
        let Some((stopped, after_term, mut problems)) = self.stop_judged("a DaemonSet rollout").await else {
            let ev = format!("the plugin had already {} before the restart; {}", self.exit_text(), self.last_output());
            return self.fail(id, ev, t);
        };
        let down = match self.kubelet.wait_for_counts(|c| c.get(&r).is_none_or(|c| c.allocatable == 0), DOWN_WAIT).await
        {
            Ok(_) => "allocatable 0 while it was down".to_string(),
            Err(last) => allocatable_note(last.get(&r)),
        };
        let (pid, at) = match self.relaunch(&r, id).await {
            Ok(x) => x,
            Err(ev) => {
                problems.insert(0, ev);
                return self.fail(id, problems.join("; "), t);
            }
        };
        let within = humantime::format_duration(self.cfg.restart_deadline);
        let left = self.cfg.restart_deadline.saturating_sub(at).max(Duration::from_millis(100));
        let counts = self.kubelet.wait_for_counts(|c| c.get(&r) == Some(&before), left).await;
        let after = self.kubelet.counts().await.get(&r).copied().unwrap_or_default();
        let story = format!(
            "{stopped} on SIGTERM after {} ms ({down}); the new process (pid {pid}) registered {} ms after it \
             started{}; capacity {} -> {}, allocatable {} -> {}",
            after_term.as_millis(),
            at.as_millis(),
            judge::near_deadline(at, self.cfg.restart_deadline),
            before.capacity,
            after.capacity,
            before.allocatable,
            after.allocatable
        );
        if counts.is_err() {
            problems.push(format!(
                "not back to where they were within {within}; after a restart the plugin must send its whole device \
                 list, each device Healthy as before"
            ));
        }
        problems.extend(self.ids_problem(&r, "the plugin restart").await);
        if problems.is_empty() {
            self.done(id, Outcome::Pass, story, t);
        } else {
            self.fail(id, format!("{story}: {}", problems.join("; ")), t);
        }
    }

    /// On the process that lived through the kubelet restart (the one
    /// launched, when that step was skipped): a fault and its clearance,
    /// which must reach the kubelet's new stream.
    pub(super) async fn health_recovery(&mut self) {
        let id = StepId::HealthRecovery;
        if self.skipped(id) {
            return self.skip(id, self.cfg.left_out());
        }
        let Some(reg) = self.reg.clone() else { return };
        let t = self.begin(id);
        if let Some(gone) = self.gone() {
            return self.ended_before(id, gone, t);
        }
        let (outcome, evidence) = self.fault_round(&reg.resource).await;
        let evidence = if outcome == Outcome::Skip { evidence } else { format!("{}: {evidence}", self.on_process()) };
        self.done(id, outcome, evidence, t);
    }

    /// On the same process: a device added, then removed, each reaching the
    /// kubelet's capacity.
    pub(super) async fn device_rescan(&mut self) {
        let id = StepId::DeviceRescan;
        if self.skipped(id) {
            return self.skip(id, self.cfg.left_out());
        }
        let Some(reg) = self.reg.clone() else { return };
        let t = self.begin(id);
        if let Some(gone) = self.gone() {
            return self.ended_before(id, gone, t);
        }
        if let Some(why) = self.follow_on(&reg.resource).await {
            self.done(id, Outcome::Skip, why, t);
            return;
        }
        let (outcome, evidence) = self.rescan_round(&reg.resource).await;
        let evidence = if outcome == Outcome::Skip { evidence } else { format!("{}: {evidence}", self.on_process()) };
        self.done(id, outcome, evidence, t);
    }

    /// Why a step that needs the kubelet to see the plugin's devices is not
    /// run: the kubelet has none of `r` and an earlier step already failed
    /// (the one that saw the plugin go, named), so failing again would only
    /// repeat that finding. `None` when there is something to judge, or when
    /// nothing failed before (then an empty resource is this step's finding).
    pub(super) async fn follow_on(&self, r: &str) -> Option<String> {
        let first = self.rows.results().iter().find(|r| r.outcome.is_failure())?.name.clone();
        let capacity = self.kubelet.counts().await.get(r).map_or(0, |c| c.capacity);
        (capacity == 0).then(|| format!("not run: the kubelet has no device of {r} (see {first})"))
    }

    /// A step on a process that has ended: failed, unless a step before it
    /// failed already (the one that saw it end), which is then named.
    pub(super) fn ended_before(&mut self, id: StepId, gone: String, t: Instant) {
        match self.rows.results().iter().find(|r| r.outcome.is_failure()).map(|r| r.name.clone()) {
            Some(first) => {
                self.done(id, Outcome::Skip, format!("not run: {gone} (see {first})"), t);
            }
            None => self.fail(id, gone, t),
        }
    }

    /// "pid N (the process that lived through the kubelet restart; the
    /// kubelet's new stream)", or "pid N".
    fn on_process(&self) -> String {
        let pid = self.process.as_ref().map_or(0, PluginProcess::pid);
        match self.lived_through {
            Some(what) => format!("pid {pid} (the process that lived through {what}, on the kubelet's new stream)"),
            None => format!("pid {pid}"),
        }
    }

    /// A device fault, then its clearance: passes when allocatable drops and
    /// then comes back within `--recovery-deadline`. The clearance runs
    /// whenever the fault ran, whatever happened in between.
    pub(super) async fn fault_round(&mut self, r: &str) -> Round {
        let Some(fault) = self.fault_kind(r).await else {
            return (
                Outcome::Skip,
                "no --fault-command and --recover-command given (with dpctl's mock plugin smoke flips a device's \
                 health itself)"
                    .into(),
            );
        };
        let before = self.kubelet.counts().await.get(r).copied().unwrap_or_default();
        if before.allocatable == 0 {
            return (Outcome::Skip, format!("{r} has no allocatable device to fault (capacity {})", before.capacity));
        }
        self.pending_recover = Some((fault.clone(), r.to_string()));
        let verdict = self.fault_then_clear(&fault, r, before).await;
        match self.undo_fault().await {
            // Cleared here: the round failed before its own clearance.
            Some(Ok(done)) => (verdict.0, format!("{}; the fault was cleared afterwards ({done})", verdict.1)),
            Some(Err(e)) => (Outcome::Error, format!("{}; clearing the fault failed: {e}", verdict.1)),
            None => verdict,
        }
    }

    // long: one story in order (fault, the drop, clearance, the recovery).
    async fn fault_then_clear(&mut self, fault: &Fault, r: &str, before: Counts) -> Round {
        let bound = self.cfg.recovery_deadline;
        let within = humantime::format_duration(bound);
        let what = match self.apply(fault, true, r).await {
            Ok(w) => w,
            Err(e) => return (Outcome::Error, e.to_string()),
        };
        let dropped =
            self.kubelet.wait_for_counts(|c| c.get(r).is_some_and(|c| c.allocatable < before.allocatable), bound);
        let Ok(down) = dropped.await else {
            return (
                Outcome::Fail,
                format!(
                    "after the fault ({what}) allocatable stayed {} for {within}: the fault never reached the \
                     kubelet (the plugin must send the device Unhealthy on the ListAndWatch stream the kubelet has \
                     open now){}",
                    before.allocatable,
                    self.exit_note()
                ),
            );
        };
        let low = down.get(r).copied().unwrap_or_default();
        let cleared_at = Instant::now();
        self.pending_recover = None;
        let cleared = match self.apply(fault, false, r).await {
            Ok(w) => w,
            Err(e) => return (Outcome::Error, e.to_string()),
        };
        let back = self.kubelet.wait_for_counts(|c| c.get(r) == Some(&before), bound).await;
        let now = self.kubelet.counts().await.get(r).copied().unwrap_or_default();
        let story =
            format!("fault ({what}): allocatable {} -> {}; clearance ({cleared})", before.allocatable, low.allocatable);
        if back.is_ok() {
            let ev = format!(
                "{story}: Healthy again {} ms later, allocatable {} (capacity {})",
                cleared_at.elapsed().as_millis(),
                now.allocatable,
                now.capacity
            );
            return (Outcome::Pass, ev);
        }
        let ev = format!(
            "{story}: allocatable still {} of {} after {within} (capacity {}); a recovered device must be sent \
             Healthy again on ListAndWatch{}",
            now.allocatable,
            before.allocatable,
            now.capacity,
            self.exit_note()
        );
        (Outcome::Fail, ev)
    }

    /// Runs the clearance of a fault that was made and not cleared yet
    /// (a failed round, an interrupted run): what was done, or why it failed.
    pub(super) async fn undo_fault(&mut self) -> Option<Result<String, String>> {
        let (fault, r) = self.pending_recover.take()?;
        Some(self.apply(&fault, false, &r).await.map_err(|e| e.to_string()))
    }

    /// Two changes in device count through dpctl's mock plugin's control
    /// socket (a device added, then removed), each of which must reach the
    /// kubelet's capacity within `--recovery-deadline`.
    // long: one story in order (before, the addition and its count, the removal and its count).
    pub(super) async fn rescan_round(&mut self, r: &str) -> Round {
        let status = control::call(&self.dir, r, &ControlRequest::Status, Duration::from_secs(2)).await;
        if status.is_err() {
            return (
                Outcome::Skip,
                "dpctl changes the device count only of its own mock plugin (through its control socket); no mock \
                 answers for this resource"
                    .into(),
            );
        }
        self.rescans += 1;
        let new_id = format!("dpctl-rescan-{}", self.rescans);
        let bound = self.cfg.recovery_deadline;
        let within = humantime::format_duration(bound);
        let c0 = self.kubelet.counts().await.get(r).map_or(0, |c| c.capacity);
        let add = ControlRequest::add_devices(vec![new_id.clone()], "healthy", Vec::new());
        if let Err(e) = control::call(&self.dir, r, &add, Duration::from_secs(5)).await {
            return (Outcome::Error, format!("adding {new_id} through the mock's control socket: {e}"));
        }
        let t = Instant::now();
        if self.kubelet.wait_for_counts(|c| c.get(r).is_some_and(|c| c.capacity == c0 + 1), bound).await.is_err() {
            // The device goes again, so that the next steps find the list as it was.
            let remove = ControlRequest::RemoveDevices { ids: vec![new_id.clone()] };
            let _ = control::call(&self.dir, r, &remove, Duration::from_secs(5)).await;
            let ev = format!(
                "added {new_id} (the mock's control socket): capacity stayed {c0} for {within}: the plugin never \
                 reported the new device{}",
                self.exit_note()
            );
            return (Outcome::Fail, ev);
        }
        let first = format!("added {new_id}: capacity {c0} -> {} after {} ms", c0 + 1, t.elapsed().as_millis());
        let remove = ControlRequest::RemoveDevices { ids: vec![new_id.clone()] };
        if let Err(e) = control::call(&self.dir, r, &remove, Duration::from_secs(5)).await {
            return (Outcome::Error, format!("{first}; removing it through the mock's control socket: {e}"));
        }
        let t = Instant::now();
        if self.kubelet.wait_for_counts(|c| c.get(r).is_some_and(|c| c.capacity == c0), bound).await.is_err() {
            let ev = format!(
                "{first}; removed it: capacity still {} after {within}: the plugin stopped reporting changes in \
                 device count after the first (a rescan loop that stops, e.g. one blocked on a channel nobody \
                 reads): the node keeps advertising a device it no longer has{}",
                c0 + 1,
                self.exit_note()
            );
            return (Outcome::Fail, ev);
        }
        (
            Outcome::Pass,
            format!(
                "two changes in device count: {first}; removed it: capacity {} -> {c0} after {} ms",
                c0 + 1,
                t.elapsed().as_millis()
            ),
        )
    }

    /// Stops the current process for `what` (SIGTERM, `--grace`, SIGKILL)
    /// and keeps it in the report. `None` when it had already exited;
    /// otherwise how it ended, how long after SIGTERM, and the problem when
    /// it needed SIGKILL (the same rule as the shutdown step).
    pub(super) async fn stop_judged(&mut self, what: &str) -> Option<(String, Duration, Vec<String>)> {
        let old = self.process.take()?;
        let term = old.terminate(self.cfg.grace).await;
        let stopped = term.exit.as_ref().map_or_else(|| "ended".to_string(), |e| e.text.clone());
        if term.already_exited {
            self.process = Some(old);
            return None;
        }
        let mut problems = Vec::new();
        if term.killed {
            problems.push(format!(
                "stopping the plugin (pid {}, SIGTERM as {what} does) needed SIGKILL: still running {} after \
                 SIGTERM (a node drain or rollout waits the pod's grace period out, then kills it); {}",
                old.pid(),
                humantime::format_duration(self.cfg.grace),
                super::last_output_of(&old)
            ));
        }
        self.retire(old);
        Some((stopped, term.after, problems))
    }

    /// Watches the process that lived through `what` for `--settle`: the
    /// evidence when it ended in that window (or before), else a note.
    pub(super) async fn settle_watch(&mut self, what: &str) -> Result<String, String> {
        let Some(p) = &self.process else { return Err("no plugin process".into()) };
        let pid = p.pid();
        let settle = self.cfg.settle;
        let t = Instant::now();
        match tokio::time::timeout(settle, p.exited()).await {
            Ok(exit) => Err(format!(
                "the same process (pid {pid}) {exit} {} ms into the {} settle window after {what}; {}",
                t.elapsed().as_millis(),
                humantime::format_duration(settle),
                self.last_output()
            )),
            Err(_) => Ok(format!("pid {pid} still running {} after {what}", humantime::format_duration(settle))),
        }
    }

    /// The IDs the kubelet now holds for `r` against those before the
    /// lifecycle steps: the problem when they changed.
    pub(super) async fn ids_problem(&self, r: &str, across: &str) -> Option<String> {
        let before = self.ids_before.as_ref()?;
        let now = self.advertised_ids(r).await;
        judge::ids_changed(before, &now, across)
    }

    /// The device IDs the kubelet holds for `r`, sorted.
    pub(super) async fn advertised_ids(&self, r: &str) -> Vec<String> {
        let status = self.kubelet.status().await;
        let mut ids: Vec<String> = status
            .as_ref()
            .and_then(|s| s.resource(r))
            .map(|res| res.devices.iter().map(|d| d.id.clone()).collect())
            .unwrap_or_default();
        ids.sort();
        ids
    }

    /// The hooks, or the mock's switch when the plugin is dpctl's mock (its
    /// control socket answers for the resource), or `None`.
    async fn fault_kind(&self, resource: &str) -> Option<Fault> {
        if let (Some(fault), Some(recover)) = (&self.cfg.fault_command, &self.cfg.recover_command) {
            return Some(Fault::Hooks { fault: fault.clone(), recover: recover.clone() });
        }
        let status = control::call(&self.dir, resource, &ControlRequest::Status, Duration::from_secs(2)).await;
        let devices = status.ok()?.status?.devices;
        let device = devices.into_iter().find(crate::model::Device::is_healthy)?.id;
        Some(Fault::Mock { device })
    }

    /// Makes (`fault`) or clears the fault; returns what was done, for evidence.
    async fn apply(&self, f: &Fault, fault: bool, resource: &str) -> crate::Result<String> {
        match f {
            Fault::Hooks { fault: on, recover } => {
                let (flag, cmd) = if fault { ("--fault-command", on) } else { ("--recover-command", recover) };
                self.run_hook(flag, cmd).await
            }
            Fault::Mock { device } => {
                let health = if fault { "Unhealthy" } else { "Healthy" };
                let req = ControlRequest::set_health(vec![device.clone()], health);
                control::call(&self.dir, resource, &req, Duration::from_secs(5)).await?;
                Ok(format!("the mock's {device} set {health}"))
            }
        }
    }

    /// Runs a hook with `sh -c` (`{dir}` and `{kubelet_socket}` replaced, the
    /// plugin's environment), bounded by the recovery deadline.
    async fn run_hook(&self, flag: &str, cmd: &str) -> crate::Result<String> {
        let line = super::substitute(&[cmd.to_string()], &self.dir, &self.kubelet_socket).remove(0);
        let mut c = tokio::process::Command::new("sh");
        c.arg("-c").arg(&line).envs(self.hook_env()).stdin(std::process::Stdio::null()).kill_on_drop(true);
        let bound = self.cfg.recovery_deadline;
        let out = tokio::time::timeout(bound, c.output())
            .await
            .map_err(|_| crate::Error::Timeout { what: format!("{flag} {line:?}"), timeout: bound })?
            .map_err(|e| crate::Error::invalid(flag, format!("cannot run sh -c {line:?}: {e}")))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let tail = err.lines().last().unwrap_or("it printed nothing on stderr");
            let code = out.status.code().map_or_else(|| "a signal".to_string(), |c| format!("code {c}"));
            return Err(crate::Error::invalid(flag, format!("{} exited with {code}: {tail}", shell_words(&[line]))));
        }
        Ok(format!("{flag} {}", shell_words(&[line])))
    }

    fn fail(&mut self, id: StepId, evidence: String, t: Instant) {
        self.done(id, Outcome::Fail, evidence, t);
    }
}

/// "allocatable N while it was down" from what the sim shows now.
fn allocatable_note(now: Option<&Counts>) -> String {
    match now {
        Some(c) => format!("allocatable still {} while it was down", c.allocatable),
        None => "the resource left node status while it was down".to_string(),
    }
}

impl Runner {
    /// With `--late-kubelet-socket`: why a plugin that did not register
    /// failed (empty otherwise).
    pub(super) fn late_socket_note(&self) -> String {
        let late = self.cfg.late_kubelet_socket;
        if late.is_zero() {
            return String::new();
        }
        format!(
            " (kubelet.sock was created {} after the sim started, as a kubelet whose device manager starts late: \
             a plugin must retry Register, or watch the directory for kubelet.sock, until it exists)",
            humantime::format_duration(late)
        )
    }
}
