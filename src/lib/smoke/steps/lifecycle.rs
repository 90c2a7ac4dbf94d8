//! The node-lifecycle steps of `dpctl smoke` that follow the kubelet
//! restart: the plugin process restarted while the kubelet runs on, and a
//! device fault followed by its clearance.

use std::time::{Duration, Instant};

use super::{Runner, SmokeProgress, StepId, Waited, shell_words, spawn_error};
use crate::check::Outcome;
use crate::kubelet_sim::EventKind;
use crate::mock_plugin::control::{self, ControlRequest};
use crate::model::Counts;
use crate::smoke::process::PluginProcess;

/// How long smoke waits to see a stopped plugin's devices leave allocatable
/// (the kubelet marks them unhealthy when the stream ends); only reported.
const DOWN_WAIT: Duration = Duration::from_secs(2);

/// How a device fault is made and cleared.
enum Fault {
    /// The user's shell commands.
    Hooks { fault: String, recover: String },
    /// dpctl's mock plugin: its control socket flips this device's health.
    Mock { device: String },
}

impl Runner {
    /// Stops the plugin (SIGTERM, as a DaemonSet rollout does), starts the
    /// same command again, and checks that it registers again and that
    /// capacity and allocatable come back as they were.
    // long: one story in order (counts before, stop, relaunch, Register, counts after).
    pub(super) async fn plugin_restart(&mut self) {
        let id = StepId::PluginRestart;
        if self.skipped(id) {
            return self.skip(id, "skipped with --skip");
        }
        let t = self.begin(id);
        let Some(reg) = self.reg.clone() else { return };
        let r = reg.resource.clone();
        let before = match self.baseline {
            Some(b) => b,
            None => self.kubelet.counts().await.get(&r).copied().unwrap_or_default(),
        };
        let Some(old) = self.process.take() else { return };
        let term = old.terminate(self.cfg.grace).await;
        let stopped = term.exit.as_ref().map_or_else(|| "ended".to_string(), |e| e.text.clone());
        if term.already_exited {
            self.process = Some(old);
            let ev = format!("the plugin had already {stopped} before the restart; {}", self.last_output());
            return self.fail(id, ev, t);
        }
        drop(old);
        let down = match self.kubelet.wait_for_counts(|c| c.get(&r).is_none_or(|c| c.allocatable == 0), DOWN_WAIT).await
        {
            Ok(_) => "allocatable 0 while it was down".to_string(),
            Err(last) => allocatable_note(last.get(&r)),
        };
        self.kubelet.pull().await;
        let from = self.kubelet.seen.len();
        let launch = match self.launch_spec() {
            Ok(l) => l,
            Err(ev) => return self.fail(id, format!("the plugin could not be started again: {ev}"), t),
        };
        let started = Instant::now();
        match PluginProcess::spawn(launch).await {
            Ok(p) => {
                self.send(SmokeProgress::Launched { pid: p.pid(), command: self.command.clone() });
                self.process = Some(p);
            }
            Err(e) => return self.fail(id, format!("the plugin could not be started again: {}", spawn_error(e)), t),
        }
        let pid = self.process.as_ref().map_or(0, PluginProcess::pid);
        let deadline = crate::duration::deadline(self.cfg.restart_deadline);
        let r2 = r.clone();
        let pred = move |k: &EventKind| match k {
            EventKind::Registered { resource, .. } | EventKind::RegistrationRejected { resource, .. } => {
                *resource == r2
            }
            _ => false,
        };
        let within = humantime::format_duration(self.cfg.restart_deadline);
        let at = match self.kubelet.wait_for(from, pred, deadline, self.process.as_ref()).await {
            Waited::Found(i) => match self.kubelet.seen[i].kind.clone() {
                EventKind::RegistrationRejected { message, .. } => {
                    let ev = format!("the kubelet rejected the new process's Register (pid {pid}): {message}");
                    return self.fail(id, ev, t);
                }
                _ => {
                    if let Some(reg) = &mut self.reg {
                        reg.index = i;
                        reg.at = self.kubelet.seen[i].time;
                    }
                    started.elapsed()
                }
            },
            Waited::Exited(exit) => {
                let ev = format!("the restarted plugin (pid {pid}) {exit} before registering; {}", self.last_output());
                return self.fail(id, ev, t);
            }
            Waited::TimedOut => {
                let ev =
                    format!("the restarted plugin (pid {pid}) did not register within {within}{}", self.exit_note());
                return self.fail(id, ev, t);
            }
        };
        let left = deadline.saturating_duration_since(tokio::time::Instant::now()).max(Duration::from_millis(100));
        let counts = self.kubelet.wait_for_counts(|c| c.get(&r) == Some(&before), left).await;
        let after = self.kubelet.counts().await.get(&r).copied().unwrap_or_default();
        let story = format!(
            "{stopped} on SIGTERM after {} ms ({down}); the new process (pid {pid}) registered {} ms after it \
             started; capacity {} -> {}, allocatable {} -> {}",
            term.after.as_millis(),
            at.as_millis(),
            before.capacity,
            after.capacity,
            before.allocatable,
            after.allocatable
        );
        if counts.is_ok() {
            self.done(id, Outcome::Pass, story, t);
        } else {
            let ev = format!(
                "{story}: not back to where they were within {within}; after a restart the plugin must send its \
                 whole device list, each device Healthy as before"
            );
            self.fail(id, ev, t);
        }
    }

    /// A device fault, then its clearance; passes when allocatable drops
    /// and then comes back within `--recovery-deadline`.
    // long: one story in order (fault, the drop, clearance, the recovery).
    pub(super) async fn health_recovery(&mut self) {
        let id = StepId::HealthRecovery;
        if self.skipped(id) {
            return self.skip(id, "skipped with --skip");
        }
        let Some(reg) = self.reg.clone() else { return };
        let r = reg.resource.clone();
        let Some(fault) = self.fault_kind(&r).await else {
            return self.skip(
                id,
                "no --fault-command and --recover-command given (with dpctl's mock plugin smoke flips a device's \
                 health itself)",
            );
        };
        let t = self.begin(id);
        let before = self.kubelet.counts().await.get(&r).copied().unwrap_or_default();
        if before.allocatable == 0 {
            let ev = format!("{r} has no allocatable device to fault (capacity {})", before.capacity);
            self.done(id, Outcome::Skip, ev, t);
            return;
        }
        let bound = self.cfg.recovery_deadline;
        let within = humantime::format_duration(bound);
        let what = match self.apply(&fault, true, &r).await {
            Ok(w) => w,
            Err(e) => return self.error(id, e, t),
        };
        let dropped =
            self.kubelet.wait_for_counts(|c| c.get(&r).is_some_and(|c| c.allocatable < before.allocatable), bound);
        let Ok(down) = dropped.await else {
            let ev = format!(
                "after the fault ({what}) allocatable stayed {} for {within}: the fault never reached the kubelet \
                 (the plugin must send the device Unhealthy on ListAndWatch)",
                before.allocatable
            );
            return self.fail(id, ev, t);
        };
        let low = down.get(&r).copied().unwrap_or_default();
        let cleared_at = Instant::now();
        let cleared = match self.apply(&fault, false, &r).await {
            Ok(w) => w,
            Err(e) => return self.error(id, e, t),
        };
        let back = self.kubelet.wait_for_counts(|c| c.get(&r) == Some(&before), bound).await;
        let now = self.kubelet.counts().await.get(&r).copied().unwrap_or_default();
        let story =
            format!("fault ({what}): allocatable {} -> {}; clearance ({cleared})", before.allocatable, low.allocatable);
        if back.is_ok() {
            let ev = format!(
                "{story}: Healthy again {} ms later, allocatable {} (capacity {})",
                cleared_at.elapsed().as_millis(),
                now.allocatable,
                now.capacity
            );
            self.done(id, Outcome::Pass, ev, t);
        } else {
            let ev = format!(
                "{story}: allocatable still {} of {} after {within} (capacity {}); a recovered device must be sent \
                 Healthy again on ListAndWatch",
                now.allocatable, before.allocatable, now.capacity
            );
            self.fail(id, ev, t);
        }
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

    fn error(&mut self, id: StepId, e: crate::Error, t: Instant) {
        self.done(id, Outcome::Error, e.to_string(), t);
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
