//! smoke's node-reboot step (docs/kubelet-versions.md §10): a pod holds
//! devices, the node reboots (every container gone, the plugin too, the
//! checkpoint kept), the kubelet admits the pod again before the plugin is
//! back, and the plugin starts late. The kubelet's verdict on the pod is
//! reported per release (on 1.34-1.37, checked against the kubelet's own
//! code: `UnexpectedAdmissionError`, the resource restored from the
//! checkpoint has no healthy device); the step passes when the plugin comes
//! back (Register, its whole list, the same device IDs), lives through the
//! settle window, streams a fault and its recovery and two changes in device
//! count, and a new pod is admitted on it. Stopping the plugin for the
//! reboot with SIGKILL fails it, as it fails shutdown.

use std::time::{Duration, Instant};

use super::{POD_NAMESPACE, Runner, SmokeProgress, StepId, Waited, judge, spawn_error};
use crate::check::Outcome;
use crate::kubelet_sim::{AdmitOutcome, EventKind, PodSpec, RebootReport};
use crate::smoke::process::PluginProcess;

/// The pod held across the reboot.
const REBOOT_POD: &str = "dpctl-smoke-reboot";
/// The pod admitted once the plugin is back.
const AFTER_POD: &str = "dpctl-smoke-after-reboot";

impl Runner {
    /// See the module docs.
    // long: one story in order (a pod, the stop, the reboot, the re-admission, the late plugin, a new pod).
    pub(super) async fn node_reboot(&mut self) {
        let id = StepId::NodeReboot;
        if self.skipped(id) {
            return self.skip(id, self.cfg.left_out());
        }
        if let Some(why) = self.kubelet.cannot_reboot() {
            return self.skip(id, format!("not played by {}: {why}", self.kubelet.name()));
        }
        if self.cfg.request == 0 {
            return self.skip(id, "--request 0: no pod to admit again");
        }
        let t = self.begin(id);
        let Some(reg) = self.reg.clone() else { return };
        if let Some(gone) = self.gone() {
            return self.ended_before(id, gone, t);
        }
        let r = reg.resource.clone();
        if let Some(why) = self.follow_on(&r).await {
            return self.done_with(id, Outcome::Skip, why, t);
        }
        let pod = PodSpec::shorthand(REBOOT_POD, POD_NAMESPACE, &[(r.clone(), self.cfg.request)]);
        let held = match self.kubelet.admit(pod).await {
            Ok(o) if o.admitted => devices(&o),
            Ok(o) => {
                let ev = format!("pod {POD_NAMESPACE}/{REBOOT_POD} was not admitted before the reboot: {}", why(&o));
                return self.done_with(id, Outcome::Fail, ev, t);
            }
            Err(e) => return self.done_with(id, Outcome::Error, format!("could not admit the pod: {e}"), t),
        };
        // A process that ended meanwhile is the reboot's to start anew.
        let (mut problems, ended) = match self.stop_judged("a node shutting down").await {
            Some((_, _, problems)) => (problems, String::new()),
            None => (Vec::new(), format!(" (the plugin had already {})", self.exit_text())),
        };
        let report = match self.kubelet.reboot(Duration::ZERO).await {
            Ok(r) => r,
            Err(e) => {
                return self.done_with(id, Outcome::Error, format!("{} could not reboot: {e}", self.kubelet.name()), t);
            }
        };
        let version = self.cfg.kubelet_version;
        let mut story = format!(
            "kubelet {version} rebooted with pod {POD_NAMESPACE}/{REBOOT_POD} holding {held} and the plugin \
             down{ended}: {}",
            readmissions(&report)
        );
        for p in report.pods.iter().filter(|p| p.admitted) {
            let _ = self.kubelet.delete(&p.namespace, &p.pod).await;
        }
        let (pid, after) = match self.relaunch(&r, id).await {
            Ok(x) => x,
            Err(ev) => {
                problems.insert(0, ev);
                return self.done_with(id, Outcome::Fail, format!("{story}; {}", problems.join("; ")), t);
            }
        };
        story.push_str(&format!(
            "; the plugin started again (pid {pid}) and registered {} ms later{}",
            after.as_millis(),
            judge::near_deadline(after, self.cfg.restart_deadline)
        ));
        let within = self.cfg.restart_deadline.saturating_sub(after).max(Duration::from_millis(100));
        let baseline = self.baseline;
        let counts = self.kubelet.wait_for_counts(|c| baseline.is_none_or(|b| c.get(&r) == Some(&b)), within).await;
        let now = self.kubelet.counts().await.get(&r).copied().unwrap_or_default();
        story.push_str(&format!(" (capacity {}, allocatable {})", now.capacity, now.allocatable));
        if counts.is_err() {
            problems.push(format!(
                "not back to {} within {}; after a reboot the plugin must send its whole list, each device Healthy",
                baseline.map_or_else(|| "the counts before".into(), |b| format!("allocatable {}", b.allocatable)),
                humantime::format_duration(self.cfg.restart_deadline)
            ));
        }
        problems.extend(self.ids_problem(&r, "the node reboot").await);
        if problems.is_empty() {
            let pod = PodSpec::shorthand(AFTER_POD, POD_NAMESPACE, &[(r.clone(), self.cfg.request)]);
            match self.kubelet.admit(pod).await {
                Ok(o) if o.admitted => {
                    let _ = self.kubelet.delete(POD_NAMESPACE, AFTER_POD).await;
                    story.push_str(&format!("; a new pod was admitted on {}", devices(&o)));
                }
                Ok(o) => problems.push(format!("a new pod was rejected: {}", why(&o))),
                Err(e) => {
                    let ev = format!("{story}; could not admit a new pod: {e}");
                    return self.done_with(id, Outcome::Error, ev, t);
                }
            }
        }
        self.after_reboot(&r, &mut story, &mut problems).await;
        if problems.is_empty() {
            self.done_with(id, Outcome::Pass, story, t);
        } else {
            self.done_with(id, Outcome::Fail, format!("{story}: {}", problems.join("; ")), t);
        }
    }

    /// The process that came back after the reboot, watched for the settle
    /// window, then a fault and its recovery and two changes in device count
    /// on it (each as in health-recovery and device-rescan).
    async fn after_reboot(&mut self, r: &str, story: &mut String, problems: &mut Vec<String>) {
        match self.settle_watch("the node reboot").await {
            Ok(note) => story.push_str(&format!("; {note}")),
            Err(ev) => return problems.push(ev),
        }
        for (what, round) in [("health", true), ("rescan", false)] {
            let (outcome, ev) = if round { self.fault_round(r).await } else { self.rescan_round(r).await };
            match outcome {
                Outcome::Pass => story.push_str(&format!("; {what}: {ev}")),
                Outcome::Skip => {}
                _ => problems.push(format!("{what} on the process started after the reboot: {ev}")),
            }
        }
    }

    fn done_with(&mut self, id: StepId, outcome: Outcome, evidence: String, t: Instant) {
        self.done(id, outcome, evidence, t);
    }

    /// Starts the plugin's command again (its log files named after `by`)
    /// and waits for its Register: its pid and how long after its start it
    /// registered, or the evidence why not. One clock: the deadline and the
    /// time reported both count from the process's start, so a Register
    /// seen after the deadline fails, with both numbers.
    // long: one wait in order (spawn, the Register or rejection, exit or deadline).
    pub(super) async fn relaunch(&mut self, resource: &str, by: StepId) -> Result<(u32, Duration), String> {
        self.kubelet.pull().await;
        let from = self.kubelet.seen.len();
        let launch = self.launch_spec(by).map_err(|ev| format!("the plugin could not be started again: {ev}"))?;
        let started = Instant::now();
        let p = PluginProcess::spawn(launch)
            .await
            .map_err(|e| format!("the plugin could not be started again: {}", spawn_error(e)))?;
        self.send(SmokeProgress::Launched { pid: p.pid(), command: self.command.clone() });
        let pid = p.pid();
        self.adopt(p, by);
        let bound = self.cfg.restart_deadline;
        let deadline = tokio::time::Instant::from_std(started) + bound;
        let r = resource.to_string();
        let pred = move |k: &EventKind| match k {
            EventKind::Registered { resource, .. } | EventKind::RegistrationRejected { resource, .. } => *resource == r,
            _ => false,
        };
        match self.kubelet.wait_for(from, pred, deadline, self.process.as_ref()).await {
            Waited::Found(i) => match self.kubelet.seen[i].kind.clone() {
                EventKind::RegistrationRejected { message, .. } => {
                    Err(format!("the kubelet rejected the new process's Register (pid {pid}): {message}"))
                }
                _ => {
                    let at = started.elapsed();
                    if at > bound {
                        return Err(format!(
                            "the plugin (pid {pid}) registered again {}: over the deadline (--restart-deadline)",
                            judge::against_deadline(at, bound)
                        ));
                    }
                    if let Some(reg) = &mut self.reg {
                        reg.index = i;
                        reg.at = self.kubelet.seen[i].time;
                    }
                    Ok((pid, at))
                }
            },
            Waited::Exited(exit) => {
                Err(format!("the plugin (pid {pid}) {exit} before registering again; {}", self.last_output()))
            }
            Waited::TimedOut => Err(format!(
                "the plugin (pid {pid}) did not register again within {}{}",
                humantime::format_duration(bound),
                self.exit_note()
            )),
        }
    }
}

/// Every device an admission gave, `a,b` (`none`).
fn devices(o: &AdmitOutcome) -> String {
    let ids: Vec<&str> = o
        .containers
        .iter()
        .flat_map(|c| c.resources.iter().flat_map(|r| r.devices.iter()))
        .map(String::as_str)
        .collect();
    if ids.is_empty() { "no device".into() } else { ids.join(",") }
}

/// `Reason: message` of a rejection.
fn why(o: &AdmitOutcome) -> String {
    format!("{}: {}", o.reason.as_deref().unwrap_or("?"), o.message.as_deref().unwrap_or(""))
}

/// What the kubelet did with each pod it admitted again.
fn readmissions(report: &RebootReport) -> String {
    let each: Vec<String> = report
        .pods
        .iter()
        .map(|p| {
            if p.admitted {
                format!("pod {}/{} admitted again on {}", p.namespace, p.pod, devices(p))
            } else {
                format!(
                    "pod {}/{}, admitted again before the plugin was back, failed with {} (the kubelet does not retry: \
                     a bare pod stays failed, a controller makes a new one)",
                    p.namespace,
                    p.pod,
                    why(p)
                )
            }
        })
        .collect();
    if each.is_empty() { "no pod to admit again".into() } else { each.join("; ") }
}
