//! The smoke steps' judgements as pure functions over what a step saw (the
//! registration, the kubelet's status, its event log): no sockets and no
//! waiting here, so every verdict is unit-tested on data. The steps in
//! `steps.rs` gather the data and record the verdict as the step's result
//! (its row in the report and its JUnit `<testcase>`).

use std::collections::BTreeMap;
use std::path::Path;

use super::{Reg, ids};
use crate::check::Outcome;
use crate::contract;
use crate::kubelet_sim::{EventKind, KubeletVersion, ResourceStatus, SimEvent, Via};
use crate::proto::deviceplugin::v1beta1 as dp;

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
    /// The release the kubelet plays.
    pub(super) kubelet_version: KubeletVersion,
    /// How the plugin exited, if it did (` (the plugin process exited ...)`), or empty.
    pub(super) exit_note: String,
}

/// The health-report verdict: every contract rule a ListAndWatch message
/// broke (as the contract judged it, once each), health strings in the
/// kubelet's terms, later rejected registrations and an ended stream fail
/// the step; the evidence always ends with the counts as the kubelet keeps
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
    let mut later_rejections: Vec<(String, String)> = Vec::new();
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
            EventKind::RegistrationRejected { resource, endpoint, message, .. }
                if *resource == res.resource && !later_rejections.iter().any(|(_, m)| m == message) =>
            {
                later_rejections.push((endpoint.clone(), message.clone()));
            }
            _ => {}
        }
    }
    problems.extend(violations);
    for (endpoint, message) in &later_rejections {
        // 1.37+ (PR #135437) refuse a second client at a live (name, socket).
        problems.push(format!(
            "after the accepted registration, kubelet {} rejected another Register of {} (endpoint {endpoint}): \
             {message}",
            seen.kubelet_version, res.resource
        ));
    }
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
        health_report(&HealthSeen { status, events, kubelet_version: KubeletVersion::NEWEST, exit_note })
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
    /// the step names the release, once per message.
    #[test]
    fn a_later_rejected_registration_fails_the_step_once_per_message() {
        let message = "a plugin is already registered at this socket";
        let events = [rejected("example.com/gpu", message), rejected("example.com/gpu", message)];
        let (outcome, evidence) = judge(&resource("serving", vec![device("g0", "Healthy", None)]), &events);
        assert_eq!(outcome, Outcome::Fail);
        let want = format!(
            "after the accepted registration, kubelet {} rejected another Register of example.com/gpu (endpoint \
             gpu2.sock): {message}; capacity 1",
            KubeletVersion::NEWEST
        );
        assert!(evidence.starts_with(&want), "{evidence}");
        assert_eq!(evidence.matches("rejected another Register").count(), 1);
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
}
