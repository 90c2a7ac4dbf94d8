//! The smoke steps' judgements as pure functions over what a step saw (the
//! registration, the kubelet's status, its event log): no sockets and no
//! waiting here, so every verdict is unit-tested on data. The steps in
//! `steps.rs` gather the data and record the verdict as the step's result
//! (its row in the report and its JUnit `<testcase>`).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::{POD_NAME, POD_NAMESPACE, Reg, ids};
use crate::check::Outcome;
use crate::contract;
use crate::kubelet_sim::{
    AdmitOutcome, EventKind, KubeletVersion, ResourceOutcome, ResourceReturn, ResourceStatus, RestartReport, SimEvent,
    Via,
};
use crate::proto::deviceplugin::v1beta1 as dp;
use crate::smoke::RestartTally;

/// What the registration-request step breaks: the version, the resource
/// name, and an endpoint the kubelet cannot dial (`dir`: the device-plugin
/// directory, named in the evidence).
pub(super) fn registration_problems(reg: &Reg, dir: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    if reg.version != dp::VERSION {
        problems.push(format!("version is {:?}, not {:?}", reg.version, dp::VERSION));
    }
    if let Some(why) = crate::validate::explain_resource_name(&reg.resource) {
        problems.push(format!("resource_name: {why}"));
    }
    let e = &reg.endpoint;
    if reg.via == Via::PluginsRegistry {
        // The plugin watcher dials GetInfo's endpoint as given: any socket path.
        if e.is_empty() {
            problems.push("GetInfo's endpoint is empty: the kubelet would dial the registration socket".into());
        }
    } else if e.is_empty() || e == "." || e == ".." || e.contains('/') {
        problems.push(format!(
            "endpoint {e:?} is not a bare file name: the kubelet dials filepath.Join({}, endpoint), so the \
             plugin socket must sit directly in the device-plugin directory and be named by its file name",
            dir.display()
        ));
    }
    problems
}

/// What the health-report step saw of the plugin's resource.
pub(super) struct HealthSeen<'a> {
    /// The kubelet's view of the resource now.
    pub(super) status: &'a ResourceStatus,
    /// The event log from the accepted registration on.
    pub(super) events: &'a [SimEvent],
    /// How the plugin exited, if it did (` (the plugin process exited ...)`), or empty.
    pub(super) exit_note: String,
}

/// The health-report verdict: every contract rule a ListAndWatch message
/// broke (as the contract judged it, once each), health strings in the
/// kubelet's terms and an ended stream fail the step; the evidence always ends with the counts as the kubelet keeps
/// them.
pub(super) fn health_report(seen: &HealthSeen<'_>) -> (Outcome, String) {
    let res = seen.status;
    let mut problems = Vec::new();
    // The contract's verdict on the devices now, told in the kubelet's terms:
    // which devices it counts unhealthy for a health string it does not know.
    let bad: Vec<String> =
        contract::bad_health(&res.devices).map(|d| format!("{} reports health {:?}", d.id, d.health)).collect();
    if !bad.is_empty() {
        problems.push(format!("{}: the kubelet counts any health but exactly \"Healthy\" as unhealthy", ids(&bad)));
    }
    let mut violations: Vec<String> = Vec::new();
    let mut stream_end = None;
    for e in seen.events {
        match &e.kind {
            EventKind::Snapshot { resource, violations: v, .. } if *resource == res.resource => {
                for x in v {
                    let s = format!("{}: {}", x.rule, x.evidence);
                    // Bad health strings are reported above, in the kubelet's terms.
                    let health_again = x.rule == contract::HEALTH_VALUE && !bad.is_empty();
                    if !health_again && !violations.contains(&s) {
                        violations.push(s);
                    }
                }
            }
            EventKind::StreamEnded { resource, reason, .. } if *resource == res.resource => {
                stream_end = Some(reason.clone());
            }
            _ => {}
        }
    }
    problems.extend(violations);
    if let Some(reason) = &stream_end
        && res.state == "stream-ended"
    {
        problems.push(format!(
            "ListAndWatch ended ({reason}): the kubelet counts every device unhealthy and never reopens the stream{}",
            seen.exit_note
        ));
    }
    let report = health_counts(res);
    if problems.is_empty() {
        (Outcome::Pass, report)
    } else {
        (Outcome::Fail, format!("{}; {report}", problems.join("; ")))
    }
}

/// The second Registers a kubelet refused after it accepted `resource`
/// (`events`: the log from the accepted registration on), once per message:
/// 1.37+ refuse a second client at a live (name, socket), k8s.io/kubernetes
/// pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go `Register`
/// (PR #135437). The registration-request step reports them: it is the
/// registration that is wrong, not the health the plugin reports.
pub(super) fn second_registers(events: &[SimEvent], resource: &str, version: KubeletVersion) -> Vec<String> {
    let mut seen: Vec<(String, String)> = Vec::new();
    for e in events {
        if let EventKind::RegistrationRejected { resource: r, endpoint, message, .. } = &e.kind
            && r == resource
            && !seen.iter().any(|(_, m)| m == message)
        {
            seen.push((endpoint.clone(), message.clone()));
        }
    }
    seen.into_iter()
        .map(|(endpoint, message)| {
            format!(
                "a second Register: after the accepted registration the plugin called Register for {resource} again \
                 (endpoint {endpoint}) and kubelet {version} refused it: {message}. A plugin registers once per \
                 kubelet start (again only when kubelet.sock is created anew)"
            )
        })
        .collect()
}

/// Capacity, allocatable, devices by NUMA node and the unhealthy ones.
fn health_counts(res: &ResourceStatus) -> String {
    let unhealthy: Vec<String> = res.devices.iter().filter(|d| !d.is_healthy()).map(|d| d.id.clone()).collect();
    let mut by_numa: BTreeMap<String, usize> = BTreeMap::new();
    for d in &res.devices {
        let key = match &d.numa_nodes {
            Some(n) if !n.is_empty() => format!("NUMA {}", crate::text::ranges(n)),
            _ => "no NUMA topology".into(),
        };
        *by_numa.entry(key).or_default() += 1;
    }
    let numa: Vec<String> = by_numa.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    let numa = if numa.is_empty() { String::new() } else { format!("; {}", numa.join(", ")) };
    let mut report = format!(
        "capacity {}, allocatable {} as the kubelet counts them ({}{}); reported unhealthy: {}",
        res.capacity,
        res.allocatable,
        crate::text::count(res.devices.len(), "device", "devices"),
        numa,
        if unhealthy.is_empty() { "none".to_string() } else { ids(&unhealthy) }
    );
    if res.devices.is_empty() {
        report.push_str("; the plugin advertises no devices");
    }
    report
}

/// What the first-snapshot step's wait for the plugin's first ListAndWatch
/// message ended with.
pub(super) enum FirstWait<'a> {
    /// The first event about the resource: a message or the stream's end.
    Event {
        /// The event.
        kind: &'a EventKind,
        /// Milliseconds after the accepted registration.
        after_ms: u128,
    },
    /// The plugin process ended first.
    Exited {
        /// How it ended ("exited with code 1").
        exit: String,
        /// Its last lines of output, for the evidence.
        last_output: String,
    },
    /// Nothing came within `timeout`.
    TimedOut {
        /// `--first-list-timeout`.
        timeout: Duration,
    },
}

/// The first-snapshot verdict: a message passes (with its size and counts;
/// a referee shows only the count its log has), a stream that ended first,
/// an exit or a timeout fail. `None` for an event of another kind (the
/// step's wait matches none).
pub(super) fn first_snapshot(
    wait: FirstWait<'_>,
    resource: &str,
    referee: bool,
    exit_note: &str,
) -> Option<(Outcome, String)> {
    let verdict = match wait {
        FirstWait::Event {
            kind: EventKind::Snapshot { capacity, allocatable, devices, message_bytes, .. },
            after_ms,
        } => {
            let devices = crate::text::count(*devices, "device", "devices");
            let evidence = if referee {
                // The kubelet logs the count ("State pushed for device plugin"), not the message.
                format!("{after_ms} ms after registration: {devices} (the kubelet's log)")
            } else {
                format!(
                    "{after_ms} ms after registration: {devices}, {message_bytes} bytes; \
                     capacity {capacity}, allocatable {allocatable}"
                )
            };
            (Outcome::Pass, evidence)
        }
        FirstWait::Event { kind: EventKind::StreamEnded { reason, .. }, after_ms } => (
            Outcome::Fail,
            format!(
                "ListAndWatch ended {after_ms} ms after registration before its first message: {reason}{exit_note}"
            ),
        ),
        FirstWait::Event { .. } => return None,
        FirstWait::Exited { exit, last_output } => {
            (Outcome::Fail, format!("the plugin {exit} before its first ListAndWatch message; {last_output}"))
        }
        FirstWait::TimedOut { timeout } => (
            Outcome::Fail,
            format!(
                "no ListAndWatch message within {} of registration: the node shows no capacity for {resource}",
                humantime::format_duration(timeout)
            ),
        ),
    };
    Some(verdict)
}

/// What the admission step saw when the test pod was admitted.
pub(super) struct AdmissionSeen<'a> {
    /// The kubelet's answer.
    pub(super) outcome: &'a AdmitOutcome,
    /// The plugin's registration.
    pub(super) reg: &'a Reg,
    /// Devices the pod asked for (`--request`).
    pub(super) request: u64,
    /// The resource's allocatable count before the admission.
    pub(super) allocatable_before: usize,
    /// The resource's stream had ended (read only after a rejection).
    pub(super) stream_ended: bool,
    /// The release the kubelet plays.
    pub(super) kubelet_version: KubeletVersion,
    /// How the plugin exited, if it did, or empty.
    pub(super) exit_note: String,
}

/// The admission verdict: a rejection (with the calls made, and why no
/// device was allocatable when the stream had ended), a container that
/// would not start, and an Allocate answer this release leaves nothing of
/// fail; otherwise the calls admission made pass.
pub(super) fn admission(seen: &AdmissionSeen<'_>) -> (Outcome, String) {
    let (outcome, reg) = (seen.outcome, seen.reg);
    let head = format!(
        "pod {POD_NAMESPACE}/{POD_NAME} ({} × {}; allocatable {})",
        seen.request, reg.resource, seen.allocatable_before
    );
    let calls = describe_admission(outcome, reg);
    if !outcome.admitted {
        let mut evidence = format!(
            "{head} rejected: {}: {}",
            outcome.reason.as_deref().unwrap_or("?"),
            outcome.message.as_deref().unwrap_or("")
        );
        if !calls.is_empty() {
            evidence.push_str(&format!("; calls: {calls}"));
        }
        if seen.stream_ended {
            evidence.push_str("; the plugin's ListAndWatch stream had ended, so no device was allocatable");
        }
        evidence.push_str(&seen.exit_note);
        return (Outcome::Fail, evidence);
    }
    if let Some(c) = outcome.containers.iter().find(|c| !c.started) {
        let evidence = format!(
            "{head} admitted, but container {} would not start: {}; calls: {calls}",
            c.name,
            c.start_error.as_deref().unwrap_or("PreStartContainer failed")
        );
        return (Outcome::Fail, evidence);
    }
    if let Some(c) = cdi_only_container(outcome, reg) {
        // docs/protocol.md §1.2: cdi_devices (field 5) exist from 1.28; 1.26-1.27
        // drop them and 1.28 passes them on only with its alpha gate
        // DevicePluginCDIDevices (off by default), so an answer with
        // nothing else gives the container nothing from the plugin. With
        // anything else, a warning is enough.
        let evidence = format!(
            "{head} admitted, but kubelet {} gives container {c} nothing from the plugin: its Allocate \
             answer carries only cdi_devices (ContainerAllocateResponse field 5), which kubelets 1.26-1.27 \
             drop and kubelet 1.28 passes to the runtime only with feature gate DevicePluginCDIDevices on \
             (alpha, off by default; on from 1.29); for those versions also return device nodes \
             (DeviceSpec) or env vars (or mounts) naming the devices; calls: {calls}",
            seen.kubelet_version
        );
        return (Outcome::Fail, evidence);
    }
    (Outcome::Pass, format!("{head} admitted in {} ms: {calls}", outcome.took_ms))
}

/// What one kubelet restart of the kubelet-restart step showed.
pub(super) struct RestartSeen<'a> {
    /// The restart's report.
    pub(super) report: &'a RestartReport,
    /// The event log from the restart on.
    pub(super) events: &'a [SimEvent],
    /// `--restart-deadline`.
    pub(super) deadline: Duration,
    /// The plugin's socket exists again.
    pub(super) socket_back: bool,
    /// The plugin's endpoint, named when its socket is not back.
    pub(super) endpoint: &'a str,
    /// How the plugin exited, if it did, or empty.
    pub(super) exit_note: String,
}

/// One restart's verdict: `Ok(evidence)` when every resource registered
/// again and sent its list in time, `Err(evidence)` naming the ones that did
/// not (with the kubelet's last refusal of a new Register, the socket not
/// served again, a late kubelet.sock) and what a plugin must do.
pub(super) fn restart(seen: &RestartSeen<'_>) -> Result<String, String> {
    let report = seen.report;
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    for r in &report.resources {
        match resource_return(r, seen.events, seen.deadline) {
            Ok(s) => good.push(s),
            Err(s) => bad.push(s),
        }
    }
    let mut evidence = format!(
        "restarted the kubelet: deleted {}; restored {} from the checkpoint; ",
        crate::text::list(&report.deleted_sockets),
        crate::text::count(report.restored_pods, "pod", "pods")
    );
    if bad.is_empty() {
        evidence.push_str(&good.join("; "));
        return Ok(evidence);
    }
    evidence.push_str(&bad.join("; "));
    if !good.is_empty() {
        evidence.push_str(&format!("; {}", good.join("; ")));
    }
    if !seen.socket_back {
        evidence.push_str(&format!("; its socket {} was not served again", seen.endpoint));
    }
    evidence.push_str(&late_restart_note(report.kubelet_socket_late_ms));
    evidence.push_str(
        ". A plugin must notice kubelet.sock being re-created (watch the directory), serve its socket again \
         and call Register again",
    );
    evidence.push_str(&seen.exit_note);
    Err(evidence)
}

/// One resource after a restart: `Ok` when it registered again and sent a
/// list, `Err` otherwise (with the kubelet's last refusal among `events`).
fn resource_return(r: &ResourceReturn, events: &[SimEvent], deadline: Duration) -> Result<String, String> {
    match (r.reregistered, r.register_after_ms, r.first_snapshot_after_ms) {
        // One clock: both numbers and the deadline count from the new
        // kubelet.sock, so a return seen after the deadline fails.
        (true, Some(reg_ms), Some(snap_ms)) if snap_ms.max(reg_ms) > crate::text::millis(deadline) => Err(format!(
            "{} registered again {reg_ms} ms after the new kubelet.sock and sent its first list after {snap_ms} ms \
             ({}): over the deadline (--restart-deadline)",
            r.resource,
            against_deadline(Duration::from_millis(snap_ms.max(reg_ms)), deadline)
        )),
        (true, Some(reg_ms), Some(snap_ms)) => Ok(format!(
            "{} registered again {reg_ms} ms after the new kubelet.sock, first list after {snap_ms} ms \
             (capacity {}, allocatable {}){}",
            r.resource,
            r.capacity,
            r.allocatable,
            near_deadline(Duration::from_millis(snap_ms.max(reg_ms)), deadline)
        )),
        (true, reg_ms, _) => Err(format!(
            "{} registered again after {} ms but sent no device list within {}",
            r.resource,
            reg_ms.unwrap_or(0),
            humantime::format_duration(deadline)
        )),
        (false, _, _) => {
            let rejected = events.iter().rev().find_map(|e| match &e.kind {
                EventKind::RegistrationRejected { resource, message, .. } if *resource == r.resource => Some(message),
                _ => None,
            });
            let mut s = format!(
                "{} did not register again within {} of the restart",
                r.resource,
                humantime::format_duration(deadline)
            );
            if let Some(m) = rejected {
                s.push_str(&format!(" (the kubelet rejected its new Register: {m})"));
            }
            Err(s)
        }
    }
}

/// "10.01 s, deadline 10 s": a time against its deadline, both read from
/// one clock.
pub(super) fn against_deadline(took: Duration, deadline: Duration) -> String {
    format!("{}, deadline {}", seconds(took), seconds(deadline))
}

/// A passing time within a tenth of its deadline: a verdict that may flip
/// from run to run, said so (empty otherwise).
pub(super) fn near_deadline(took: Duration, deadline: Duration) -> String {
    if took.saturating_mul(10) < deadline.saturating_mul(9) {
        return String::new();
    }
    format!(
        " — near the deadline ({}): a plugin this close passes or fails by chance; see README's smoke section on \
         choosing --restart-deadline",
        against_deadline(took, deadline)
    )
}

/// Seconds with up to two decimals: `10.01 s`, `10 s`, `0.5 s`.
fn seconds(d: Duration) -> String {
    let s = format!("{:.2}", d.as_secs_f64());
    format!("{} s", s.trim_end_matches('0').trim_end_matches('.'))
}

/// The device IDs the kubelet holds after `across` against those before:
/// the problem when the set changed, with both lists and the consequence.
pub(super) fn ids_changed(before: &[String], after: &[String], across: &str) -> Option<String> {
    if before == after {
        return None;
    }
    let gone: Vec<String> = before.iter().filter(|id| !after.contains(id)).cloned().collect();
    let new: Vec<String> = after.iter().filter(|id| !before.contains(id)).cloned().collect();
    Some(format!(
        "the device IDs changed across {across}: before {}; after {} (gone: {}; new: {}): the kubelet's checkpoint \
         names devices that no longer exist, so a pod holding one keeps an ID the plugin no longer serves while \
         the same hardware, under its new ID, can go to a second pod; derive IDs from the hardware (serial, UUID, \
         PCI address), never from enumeration order or the process's start",
        ids(before),
        ids(after),
        ids(&gone),
        ids(&new)
    ))
}

/// With `--late-kubelet-socket`, after a restart that a plugin did not come
/// back from: the new kubelet.sock appeared late (empty otherwise).
fn late_restart_note(late_ms: Option<u64>) -> String {
    match late_ms {
        Some(ms) => format!(
            " (kubelet.sock was re-created {ms} ms after the old one and the plugin's socket were deleted, \
             possibly with the same inode: a plugin must keep retrying Register, or watch the directory, until the \
             new kubelet.sock exists, and not take an inode it knows for the old kubelet)"
        ),
        None => String::new(),
    }
}

/// The kubelet-restart step's verdict over its restarts: the first failure,
/// or the last success; with several restarts the tally leads.
pub(super) fn restarts(tally: &RestartTally, first_bad: Option<String>, last_good: String) -> (Outcome, String) {
    let head = if tally.restarts == 1 { String::new() } else { format!("{}; ", tally.summary) };
    match first_bad {
        None => (Outcome::Pass, format!("{head}{last_good}")),
        Some(bad) => (Outcome::Fail, format!("{head}{bad}")),
    }
}

/// The first container whose Allocate answer for the plugin's resource had
/// only cdi_devices, which this kubelet dropped (`cdi-devices-unknown`,
/// 1.26-1.27) or does not pass to the runtime (`cdi-devices-gated`, 1.28):
/// nothing of it is left for the container.
fn cdi_only_container(outcome: &AdmitOutcome, reg: &Reg) -> Option<String> {
    outcome.containers.iter().find_map(|c| {
        c.resources
            .iter()
            .filter(|r| r.resource == reg.resource)
            .any(|r| {
                use crate::kubelet_sim::admission::{CDI_DEVICES_GATED, CDI_DEVICES_UNKNOWN};
                let dropped = r.warnings.iter().any(|w| w.rule == CDI_DEVICES_UNKNOWN || w.rule == CDI_DEVICES_GATED);
                let left = r.allocation.as_ref().is_some_and(|a| {
                    !(a.envs.is_empty() && a.devices.is_empty() && a.mounts.is_empty() && a.annotations.is_empty())
                });
                dropped && !left
            })
            .then(|| c.name.clone())
    })
}

/// The calls admission made to the plugin, in words.
fn describe_admission(outcome: &AdmitOutcome, reg: &Reg) -> String {
    let mut parts = Vec::new();
    for c in &outcome.containers {
        for r in c.resources.iter().filter(|r| r.resource == reg.resource) {
            parts.extend(describe_resource(r, reg));
        }
    }
    if let Some(t) = outcome.topology.as_deref() {
        for d in &t.decisions {
            let dev = d.hints.iter().find(|h| h.resource.as_deref() == Some(reg.resource.as_str()));
            let hints = match dev.and_then(|h| h.hints.as_ref()) {
                None => "nil".to_string(),
                Some(l) => format!("[{}]", l.iter().map(|x| x.hint.as_str()).collect::<Vec<_>>().join(" ")),
            };
            parts.push(format!(
                "topology {}: hints {hints} → best {} ({})",
                t.policy,
                d.best.hint,
                if d.admit { "admit" } else { "reject" }
            ));
        }
    }
    parts.join("; ")
}

fn describe_resource(r: &ResourceOutcome, reg: &Reg) -> Vec<String> {
    let mut parts = Vec::new();
    match &r.preferred {
        Some(p) => {
            let mut s = format!(
                "GetPreferredAllocation(available {}, must_include {}, size {}) → [{}]",
                p.available.len(),
                p.must_include.len(),
                p.size,
                ids(&p.answer)
            );
            for w in &p.warnings {
                s.push_str(&format!(" (warning {}: {})", w.rule, w.evidence));
            }
            parts.push(s);
        }
        None if reg.options.get_preferred_allocation_available => {}
        None => parts.push("GetPreferredAllocation not advertised (not called)".into()),
    }
    match &r.allocation {
        Some(a) => {
            let mut what = Vec::new();
            if !a.envs.is_empty() {
                what.push(format!("envs {}", a.envs.keys().cloned().collect::<Vec<_>>().join(",")));
            }
            if !a.devices.is_empty() {
                what.push(crate::text::count(a.devices.len(), "device node", "device nodes"));
            }
            if !a.mounts.is_empty() {
                what.push(crate::text::count(a.mounts.len(), "mount", "mounts"));
            }
            if !a.annotations.is_empty() {
                what.push(crate::text::count(a.annotations.len(), "annotation", "annotations"));
            }
            if !a.cdi_devices.is_empty() {
                what.push(format!("CDI {}", a.cdi_devices.join(",")));
            }
            if what.is_empty() {
                what.push("an empty response".into());
            }
            parts.push(format!("Allocate([{}]) → {}", ids(&r.devices), what.join(", ")));
        }
        None if !r.devices.is_empty() => parts.push(format!("devices [{}] reused", ids(&r.devices))),
        None => {}
    }
    for w in &r.warnings {
        parts.push(format!("warning {}: {}", w.rule, w.evidence));
    }
    match &r.pre_start {
        Some(s) => parts.push(format!("PreStartContainer: {s}")),
        None if reg.options.pre_start_required => {}
        None => {}
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Device;
    use std::path::PathBuf;
    use std::time::SystemTime;

    fn device(id: &str, health: &str, numa: Option<Vec<i64>>) -> Device {
        Device { id: id.into(), health: health.into(), numa_nodes: numa }
    }

    fn resource(state: &str, devices: Vec<Device>) -> ResourceStatus {
        let allocatable = devices.iter().filter(|d| d.is_healthy()).count();
        ResourceStatus {
            resource: "example.com/gpu".into(),
            state: state.into(),
            reported: true,
            capacity: devices.len(),
            allocatable,
            in_use: 0,
            socket: Some("/tmp/dp/gpu.sock".into()),
            endpoint: Some("gpu.sock".into()),
            via: Some(Via::KubeletSock),
            pre_start_required: false,
            get_preferred_allocation_available: false,
            snapshots: 1,
            registrations: 1,
            removal_in_ms: None,
            devices,
            stream_end_reason: None,
        }
    }

    fn event(kind: EventKind) -> SimEvent {
        SimEvent { time: SystemTime::UNIX_EPOCH, kind }
    }

    /// A ListAndWatch message of `devices`, with the violations the contract finds in it.
    fn snapshot(resource: &str, devices: &[Device]) -> SimEvent {
        event(EventKind::Snapshot {
            resource: resource.into(),
            seq: 1,
            capacity: devices.len(),
            allocatable: devices.iter().filter(|d| d.is_healthy()).count(),
            devices: devices.len(),
            message_bytes: 64,
            changes: 0,
            violations: contract::check_snapshot(devices, 64),
        })
    }

    fn rejected(resource: &str, message: &str) -> SimEvent {
        event(EventKind::RegistrationRejected {
            resource: resource.into(),
            endpoint: "gpu2.sock".into(),
            socket: "/tmp/dp/gpu2.sock".into(),
            via: Via::KubeletSock,
            version: "v1beta1".into(),
            message: message.into(),
        })
    }

    fn judge(status: &ResourceStatus, events: &[SimEvent]) -> (Outcome, String) {
        let exit_note = " (the plugin process exited with status 1)".to_string();
        health_report(&HealthSeen { status, events, exit_note })
    }

    #[test]
    fn a_healthy_resource_passes_with_the_counts_by_numa_node() {
        let devices = vec![
            device("g0", "Healthy", Some(vec![0])),
            device("g1", "Healthy", Some(vec![1])),
            device("g2", "Healthy", None),
        ];
        let events = [snapshot("example.com/gpu", &devices)];
        let (outcome, evidence) = judge(&resource("serving", devices), &events);
        assert_eq!(outcome, Outcome::Pass, "{evidence}");
        assert_eq!(
            evidence,
            "capacity 3, allocatable 3 as the kubelet counts them (3 devices; NUMA 0: 1, NUMA 1: 1, \
             no NUMA topology: 1); reported unhealthy: none"
        );
        let (outcome, evidence) = judge(&resource("serving", Vec::new()), &[]);
        assert_eq!(outcome, Outcome::Pass);
        assert!(evidence.ends_with("reported unhealthy: none; the plugin advertises no devices"), "{evidence}");
    }

    /// A health string the kubelet does not know is told once, in the
    /// kubelet's terms, not again as the contract's rule; other rules the
    /// contract raised are listed once however many messages broke them.
    #[test]
    fn a_bad_health_string_is_told_once_and_other_broken_rules_once_each() {
        let devices = vec![device("g0", "Healthy", None), device("g1", "healthy", None), device("g1", "Healthy", None)];
        let events = [snapshot("example.com/gpu", &devices), snapshot("example.com/gpu", &devices)];
        let (outcome, evidence) = judge(&resource("serving", devices), &events);
        assert_eq!(outcome, Outcome::Fail);
        assert!(
            evidence.starts_with(
                "g1 reports health \"healthy\": the kubelet counts any health but exactly \"Healthy\" as unhealthy; \
                 device-id-unique: IDs listed more than once: g1; capacity 3, allocatable 2"
            ),
            "{evidence}"
        );
        assert!(!evidence.contains(contract::HEALTH_VALUE), "the contract's health rule again: {evidence}");
        assert_eq!(evidence.matches("device-id-unique").count(), 1, "{evidence}");
        assert!(evidence.ends_with("reported unhealthy: g1"), "{evidence}");
    }

    /// Fixed since: the devices are healthy now, but an earlier message broke
    /// the health rule: the contract's verdict on that message stands.
    #[test]
    fn an_earlier_bad_health_string_is_the_contracts_verdict() {
        let before = vec![device("g0", "ok", None)];
        let now = vec![device("g0", "Healthy", None)];
        let (outcome, evidence) = judge(&resource("serving", now), &[snapshot("example.com/gpu", &before)]);
        assert_eq!(outcome, Outcome::Fail);
        assert!(evidence.starts_with("health-value: health must be exactly"), "{evidence}");
    }

    /// Messages, stream ends and rejections of another resource do not count.
    #[test]
    fn only_the_plugins_own_resource_is_judged() {
        let bad = vec![device("x", "broken", None), device("x", "Healthy", None)];
        let events = [
            snapshot("other.io/nic", &bad),
            rejected("other.io/nic", "no"),
            event(EventKind::StreamEnded {
                resource: "other.io/nic".into(),
                socket: "/tmp/dp/nic.sock".into(),
                reason: "EOF".into(),
                capacity: 0,
                allocatable: 0,
                grace_period_ms: 300_000,
            }),
        ];
        let (outcome, evidence) = judge(&resource("serving", vec![device("g0", "Healthy", None)]), &events);
        assert_eq!(outcome, Outcome::Pass, "{evidence}");
    }

    /// 1.37+ (PR #135437) refuse a second client at a live (name, socket):
    /// named once per message, for the registration-request step; the
    /// health report does not fail on it.
    #[test]
    fn a_later_rejected_registration_is_named_once_per_message_and_not_a_health_problem() {
        let message = "a plugin is already registered at this socket";
        let events = [rejected("example.com/gpu", message), rejected("example.com/gpu", message)];
        let found = second_registers(&events, "example.com/gpu", KubeletVersion::NEWEST);
        let want = format!(
            "a second Register: after the accepted registration the plugin called Register for example.com/gpu \
             again (endpoint gpu2.sock) and kubelet {} refused it: {message}.",
            KubeletVersion::NEWEST
        );
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with(&want), "{found:?}");
        assert!(second_registers(&events, "example.com/nic", KubeletVersion::NEWEST).is_empty());
        let (outcome, evidence) = judge(&resource("serving", vec![device("g0", "Healthy", None)]), &events);
        assert_eq!(outcome, Outcome::Pass, "{evidence}");
    }

    /// An ended stream fails the step while the resource stays ended (with
    /// how the plugin exited), not once the plugin is serving again.
    #[test]
    fn an_ended_stream_fails_only_while_the_resource_is_not_served() {
        let ended = event(EventKind::StreamEnded {
            resource: "example.com/gpu".into(),
            socket: "/tmp/dp/gpu.sock".into(),
            reason: "stream closed".into(),
            capacity: 1,
            allocatable: 0,
            grace_period_ms: 300_000,
        });
        let devices = vec![device("g0", "Healthy", None)];
        let (outcome, evidence) = judge(&resource("stream-ended", devices.clone()), std::slice::from_ref(&ended));
        assert_eq!(outcome, Outcome::Fail);
        assert!(
            evidence.starts_with(
                "ListAndWatch ended (stream closed): the kubelet counts every device unhealthy and never reopens \
                 the stream (the plugin process exited with status 1); capacity 1"
            ),
            "{evidence}"
        );
        assert_eq!(judge(&resource("serving", devices), &[ended]).0, Outcome::Pass);
    }

    fn reg(via: Via, endpoint: &str, version: &str, resource: &str) -> Reg {
        Reg {
            resource: resource.into(),
            endpoint: endpoint.into(),
            socket: PathBuf::from("/tmp/dp").join(endpoint),
            via,
            version: version.into(),
            request_options: None,
            options: dp::DevicePluginOptions::default(),
            at: SystemTime::UNIX_EPOCH,
            index: 0,
        }
    }

    #[test]
    fn the_registration_request_is_judged_as_the_kubelet_reads_it() {
        let dir = Path::new("/tmp/dp");
        let good = reg(Via::KubeletSock, "gpu.sock", dp::VERSION, "example.com/gpu");
        assert!(registration_problems(&good, dir).is_empty());
        for endpoint in ["", ".", "..", "sub/gpu.sock", "/tmp/dp/gpu.sock"] {
            let p = registration_problems(&reg(Via::KubeletSock, endpoint, dp::VERSION, "example.com/gpu"), dir);
            assert_eq!(p.len(), 1, "{endpoint:?}: {p:?}");
            assert!(
                p[0].contains("is not a bare file name") && p[0].contains("filepath.Join(/tmp/dp, endpoint)"),
                "{p:?}"
            );
        }
        // Through plugins_registry the endpoint is dialled as given: a path is fine, nothing is not.
        let path = reg(Via::PluginsRegistry, "/run/gpu/plugin.sock", dp::VERSION, "example.com/gpu");
        assert!(registration_problems(&path, dir).is_empty());
        let empty = reg(Via::PluginsRegistry, "", dp::VERSION, "example.com/gpu");
        assert_eq!(
            registration_problems(&empty, dir),
            ["GetInfo's endpoint is empty: the kubelet would dial the registration socket"]
        );
        let old = reg(Via::KubeletSock, "gpu.sock", "v1alpha", "gpu");
        let p = registration_problems(&old, dir);
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(p[0], format!("version is \"v1alpha\", not {:?}", dp::VERSION));
        assert!(p[1].starts_with("resource_name: "), "{p:?}");
    }

    /// Lists of IDs in evidence are cut after MAX_IDS, saying how many more.
    #[test]
    fn id_lists_are_cut_with_a_count_of_the_rest() {
        assert_eq!(ids(&[]), "-");
        let many: Vec<String> = (0..super::super::MAX_IDS + 3).map(|i| format!("g{i}")).collect();
        let cut = ids(&many);
        assert!(cut.starts_with("g0, g1") && cut.ends_with(", … and 3 more"), "{cut}");
        assert_eq!(ids(&many[..2]), "g0, g1");
    }

    const GPU: &str = "example.com/gpu";

    #[test]
    fn a_first_message_passes_with_its_size_or_the_referees_count() {
        let kind = snapshot(GPU, &[device("g0", "Healthy", None), device("g1", "Unhealthy", None)]).kind;
        let seen = || FirstWait::Event { kind: &kind, after_ms: 12 };
        assert_eq!(
            first_snapshot(seen(), GPU, false, ""),
            Some((Outcome::Pass, "12 ms after registration: 2 devices, 64 bytes; capacity 2, allocatable 1".into()))
        );
        assert_eq!(
            first_snapshot(seen(), GPU, true, ""),
            Some((Outcome::Pass, "12 ms after registration: 2 devices (the kubelet's log)".into()))
        );
    }

    #[test]
    fn no_first_message_fails_with_what_happened_instead() {
        let ended = EventKind::StreamEnded {
            resource: GPU.into(),
            socket: "/tmp/dp/gpu.sock".into(),
            reason: "the plugin closed the stream".into(),
            capacity: 0,
            allocatable: 0,
            grace_period_ms: 300_000,
        };
        let exit = " (the plugin process exited with code 1)";
        assert_eq!(
            first_snapshot(FirstWait::Event { kind: &ended, after_ms: 5 }, GPU, false, exit),
            Some((
                Outcome::Fail,
                "ListAndWatch ended 5 ms after registration before its first message: the plugin closed the \
                 stream (the plugin process exited with code 1)"
                    .into()
            ))
        );
        let exited = FirstWait::Exited { exit: "exited with code 2".into(), last_output: "it printed nothing".into() };
        assert_eq!(
            first_snapshot(exited, GPU, false, ""),
            Some((
                Outcome::Fail,
                "the plugin exited with code 2 before its first ListAndWatch message; it printed nothing".into()
            ))
        );
        let late = FirstWait::TimedOut { timeout: Duration::from_secs(10) };
        assert_eq!(
            first_snapshot(late, GPU, false, ""),
            Some((
                Outcome::Fail,
                "no ListAndWatch message within 10s of registration: the node shows no capacity for example.com/gpu"
                    .into()
            ))
        );
        // The step waits for a message or the stream's end only; anything else is no verdict.
        let other = rejected(GPU, "x").kind;
        assert_eq!(first_snapshot(FirstWait::Event { kind: &other, after_ms: 1 }, GPU, false, ""), None);
    }

    fn allocation(envs: &[&str], cdi: &[&str]) -> crate::model::ContainerAllocation {
        crate::model::ContainerAllocation {
            envs: envs.iter().map(|e| (e.to_string(), "1".to_string())).collect(),
            cdi_devices: cdi.iter().map(|c| c.to_string()).collect(),
            ..Default::default()
        }
    }

    fn admitted(allocation: crate::model::ContainerAllocation, warning: Option<&str>) -> AdmitOutcome {
        let resource = ResourceOutcome {
            resource: GPU.into(),
            requested: 1,
            reused: Vec::new(),
            preferred: None,
            devices: vec!["g0".into()],
            allocation: Some(allocation),
            warnings: warning
                .map(|rule| crate::kubelet_sim::Warning { rule: rule.into(), evidence: "dropped".into() })
                .into_iter()
                .collect(),
            pre_start: None,
        };
        AdmitOutcome {
            pod: "dpctl-smoke".into(),
            namespace: "default".into(),
            uid: "uid-1".into(),
            admitted: true,
            reason: None,
            message: None,
            containers: vec![crate::kubelet_sim::ContainerOutcome {
                name: "main".into(),
                kind: crate::kubelet_sim::ContainerKind::Regular,
                resources: vec![resource],
                started: true,
                start_error: None,
                running: None,
            }],
            took_ms: 3,
            topology: None,
            kept_in: None,
            dra: None,
        }
    }

    fn judge_admission(outcome: &AdmitOutcome, minor: u8, stream_ended: bool) -> (Outcome, String) {
        let reg = reg(Via::KubeletSock, "gpu.sock", dp::VERSION, GPU);
        let seen = AdmissionSeen {
            outcome,
            reg: &reg,
            request: 1,
            allocatable_before: 2,
            stream_ended,
            kubelet_version: KubeletVersion::Release(minor),
            exit_note: " (the plugin process exited with code 1)".into(),
        };
        admission(&seen)
    }

    #[test]
    fn an_admitted_pod_passes_with_the_calls_made() {
        let (outcome, evidence) = judge_admission(&admitted(allocation(&["GPU"], &[]), None), 37, false);
        assert_eq!(outcome, Outcome::Pass);
        assert_eq!(
            evidence,
            "pod default/dpctl-smoke (1 × example.com/gpu; allocatable 2) admitted in 3 ms: GetPreferredAllocation \
             not advertised (not called); Allocate([g0]) → envs GPU"
        );
    }

    #[test]
    fn a_rejected_pod_fails_with_the_reason_and_an_ended_stream() {
        let mut o = admitted(allocation(&[], &[]), None);
        o.admitted = false;
        o.reason = Some("UnexpectedAdmissionError".into());
        o.message = Some("no healthy devices".into());
        o.containers.clear();
        let (outcome, evidence) = judge_admission(&o, 37, true);
        assert_eq!(outcome, Outcome::Fail);
        assert_eq!(
            evidence,
            "pod default/dpctl-smoke (1 × example.com/gpu; allocatable 2) rejected: UnexpectedAdmissionError: no \
             healthy devices; the plugin's ListAndWatch stream had ended, so no device was allocatable (the plugin \
             process exited with code 1)"
        );
        let (_, evidence) = judge_admission(&o, 37, false);
        assert!(!evidence.contains("stream had ended"), "{evidence}");
    }

    #[test]
    fn a_container_that_would_not_start_fails_the_admission() {
        let mut o = admitted(allocation(&["GPU"], &[]), None);
        o.containers[0].started = false;
        let (outcome, evidence) = judge_admission(&o, 37, false);
        assert_eq!(outcome, Outcome::Fail);
        assert!(
            evidence.contains("admitted, but container main would not start: PreStartContainer failed"),
            "{evidence}"
        );
    }

    /// 1.26-1.27 drop cdi_devices and 1.28 keeps them from the runtime: an
    /// answer with nothing else leaves the container nothing (a failure);
    /// with an env var beside it, the warning alone stays (1.28 here).
    #[test]
    fn a_cdi_only_answer_fails_where_the_release_drops_it_1_26_to_1_28() {
        use crate::kubelet_sim::admission::{CDI_DEVICES_GATED, CDI_DEVICES_UNKNOWN};
        for (minor, rule) in [(26, CDI_DEVICES_UNKNOWN), (27, CDI_DEVICES_UNKNOWN), (28, CDI_DEVICES_GATED)] {
            let o = admitted(allocation(&[], &["vendor.com/gpu=g0"]), Some(rule));
            let (outcome, evidence) = judge_admission(&o, minor, false);
            assert_eq!(outcome, Outcome::Fail, "1.{minor}");
            assert!(
                evidence.contains(&format!("admitted, but kubelet 1.{minor} gives container main nothing")),
                "{evidence}"
            );
        }
        let o = admitted(allocation(&["GPU"], &["vendor.com/gpu=g0"]), Some(CDI_DEVICES_GATED));
        let (outcome, evidence) = judge_admission(&o, 28, false);
        assert_eq!(outcome, Outcome::Pass, "{evidence}");
        assert!(
            evidence.ends_with("envs GPU, CDI vendor.com/gpu=g0; warning cdi-devices-gated: dropped"),
            "{evidence}"
        );
    }

    fn back(resource: &str, reregistered: bool, register_ms: Option<u64>, snapshot_ms: Option<u64>) -> ResourceReturn {
        ResourceReturn {
            resource: resource.into(),
            reregistered,
            register_after_ms: register_ms,
            first_snapshot_after_ms: snapshot_ms,
            capacity: 2,
            allocatable: 2,
        }
    }

    fn restart_report(resources: Vec<ResourceReturn>, late_ms: Option<u64>) -> RestartReport {
        RestartReport {
            kubelet_version: KubeletVersion::NEWEST,
            cleanup_rule: Default::default(),
            deleted_sockets: vec!["kubelet.sock".into(), "gpu.sock".into()],
            deleted_files: Vec::new(),
            would_delete: Vec::new(),
            restored_pods: 1,
            checkpoint: None,
            waited_ms: 40,
            all_returned: false,
            resources,
            readmitted: Vec::new(),
            kubelet_socket_late_ms: late_ms,
            dra_restored_claims: 0,
        }
    }

    fn judge_restart(report: &RestartReport, events: &[SimEvent], socket_back: bool) -> Result<String, String> {
        let seen = RestartSeen {
            report,
            events,
            deadline: Duration::from_secs(5),
            socket_back,
            endpoint: "gpu.sock",
            exit_note: String::new(),
        };
        restart(&seen)
    }

    #[test]
    fn a_restart_every_resource_came_back_from_passes() {
        let report = restart_report(vec![back(GPU, true, Some(30), Some(45))], None);
        assert_eq!(
            judge_restart(&report, &[], true),
            Ok("restarted the kubelet: deleted kubelet.sock,gpu.sock; restored 1 pod from the checkpoint; \
                example.com/gpu registered again 30 ms after the new kubelet.sock, first list after 45 ms \
                (capacity 2, allocatable 2)"
                .into())
        );
    }

    /// One clock: a return seen after the deadline fails with both numbers
    /// (before, "registered again 10016 ms" could pass against 10 s); one
    /// within a tenth of it passes and says it is near.
    #[test]
    fn a_restart_over_or_near_the_deadline_says_so() {
        let over = restart_report(vec![back(GPU, true, Some(4990), Some(5012))], None);
        let bad = judge_restart(&over, &[], true).unwrap_err();
        assert!(bad.contains("first list after 5012 ms (5.01 s, deadline 5 s): over the deadline"), "{bad}");
        let near = restart_report(vec![back(GPU, true, Some(4600), Some(4700))], None);
        let ok = judge_restart(&near, &[], true).unwrap();
        assert!(ok.contains("near the deadline (4.7 s, deadline 5 s)") && ok.contains("--restart-deadline"), "{ok}");
        let far = restart_report(vec![back(GPU, true, Some(30), Some(45))], None);
        assert!(!judge_restart(&far, &[], true).unwrap().contains("near"));
        assert_eq!(against_deadline(Duration::from_millis(10_010), Duration::from_secs(10)), "10.01 s, deadline 10 s");
        assert_eq!(near_deadline(Duration::from_millis(8_999), Duration::from_secs(10)), "");
    }

    #[test]
    fn changed_ids_fail_with_both_lists_and_the_consequence() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(ids_changed(&s(&["GPU-0", "GPU-1"]), &s(&["GPU-0", "GPU-1"]), "the plugin restart"), None);
        let bad = ids_changed(&s(&["GPU-0-aa", "GPU-1-aa"]), &s(&["GPU-0-bb", "GPU-1-bb"]), "the node reboot").unwrap();
        assert!(
            bad.starts_with(
                "the device IDs changed across the node reboot: before GPU-0-aa, GPU-1-aa; after GPU-0-bb, GPU-1-bb \
                 (gone: GPU-0-aa, GPU-1-aa; new: GPU-0-bb, GPU-1-bb): the kubelet's checkpoint names devices that no \
                 longer exist"
            ),
            "{bad}"
        );
    }

    #[test]
    fn a_restart_a_resource_missed_fails_with_the_kubelets_last_refusal() {
        let other = "example.com/nic";
        let report = restart_report(vec![back(GPU, false, None, None), back(other, true, Some(7), None)], Some(900));
        let events = [rejected(GPU, "first"), rejected(other, "not mine"), rejected(GPU, "last")];
        let bad = judge_restart(&report, &events, false).unwrap_err();
        assert!(
            bad.starts_with(
                "restarted the kubelet: deleted kubelet.sock,gpu.sock; restored 1 pod from the checkpoint; \
                 example.com/gpu did not register again within 5s of the restart (the kubelet rejected its new \
                 Register: last); example.com/nic registered again after 7 ms but sent no device list within 5s; \
                 its socket gpu.sock was not served again (kubelet.sock was re-created 900 ms after"
            ),
            "{bad}"
        );
        assert!(bad.ends_with("serve its socket again and call Register again"), "{bad}");
    }

    #[test]
    fn several_restarts_lead_with_the_tally() {
        let one = RestartTally::new(1, 1);
        assert_eq!(restarts(&one, None, "ok".into()), (Outcome::Pass, "ok".into()));
        let many = RestartTally::new(4, 3);
        assert_eq!(
            restarts(&many, Some("restart 2: gone".into()), "ok".into()),
            (Outcome::Fail, "re-registered 3/4 (25.0% flaky); restart 2: gone".into())
        );
    }
}
