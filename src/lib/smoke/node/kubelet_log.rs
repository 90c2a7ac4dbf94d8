//! What a real kubelet did, read off its own log (`--logging-format=json
//! --v=3`): the device manager's messages (the same texts every release
//! since 1.34, k8s.io/kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1
//! `server.Register`, `server.connectClient`, `client.Run`), turned into the
//! control protocol's events as the referee turns the same messages; and the
//! pod events the kubelet records (`Kubelet.rejectPod` for an admission
//! refusal, the runtime's failures), which a standalone kubelet only logs
//! (`eventBroadcaster.StartStructuredLogging(3)`, cmd/kubelet/app/server.go).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::kubelet_sim::Via;
use crate::kubelet_sim::control::{WireEvent, WireEventKind};

/// One fact a log line gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fact {
    /// A device-plugin event, as the control protocol's `events` answers it.
    Wire(WireEvent),
    /// A Warning event about a pod: an admission refusal or a runtime failure.
    PodWarning(PodWarning),
}

/// A Warning event the kubelet recorded for a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodWarning {
    /// When, in milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name, as the kubelet knows it (a static pod's has `-<node>`).
    pub name: String,
    /// The container it is about (its `fieldPath`, `spec.containers{NAME}`
    /// or `spec.initContainers{NAME}`); empty for the pod.
    pub container: String,
    /// `UnexpectedAdmissionError`, `OutOf<resource>`, `Failed`, ...
    pub reason: String,
    /// The kubelet's text.
    pub message: String,
}

impl PodWarning {
    /// An admission refusal (`Kubelet.rejectPod`), not a later failure: the
    /// reasons the admit handlers give (k8s.io/kubernetes
    /// pkg/kubelet/lifecycle/predicate.go and pkg/kubelet/cm/admission).
    pub fn is_rejection(&self) -> bool {
        self.reason == crate::kubelet_texts::UNEXPECTED_ADMISSION_ERROR
            || self.reason.starts_with("OutOf")
            || matches!(self.reason.as_str(), "TopologyAffinityError" | "SMTAlignmentError" | "NodeAffinity")
    }
}

impl PodWarning {
    /// The runtime could not run a container of the pod (k8s.io/kubernetes
    /// pkg/kubelet/events: `Failed`, `FailedCreatePodSandBox`, `BackOff`,
    /// `ErrImageNeverPull`, ...); other warnings (`DNSConfigForming`) are not failures.
    pub fn is_run_failure(&self) -> bool {
        self.reason.starts_with("Failed") || self.reason.starts_with("Err") || self.reason == "BackOff"
    }
}

/// The container an event's `fieldPath` names (k8s.io/kubernetes
/// pkg/kubelet/container/ref.go `fieldPath`: `spec.containers{NAME}`,
/// `spec.initContainers{NAME}`), or empty.
fn field_path_container(path: &str) -> String {
    path.split_once('{').and_then(|(_, rest)| rest.strip_suffix('}')).unwrap_or_default().to_string()
}

/// Where a registration under way began.
#[derive(Debug, Clone)]
struct Pending {
    unix_ms: u64,
    via: Via,
    endpoint: String,
}

/// Reads the kubelet's log line by line, keeping what a registration under
/// way looked like.
#[derive(Debug)]
pub struct LogReader {
    began: BTreeMap<String, Pending>,
    /// The last socket each resource registered with (a stream end names none).
    sockets: BTreeMap<String, String>,
    /// The kubelet's device-plugin directory (an endpoint is relative to it).
    dir: String,
}

fn text(v: &Value, key: &str) -> String {
    match v.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

impl LogReader {
    /// A reader for a kubelet whose device-plugin directory is `dir`.
    pub fn new(dir: &str) -> LogReader {
        LogReader { began: BTreeMap::new(), sockets: BTreeMap::new(), dir: dir.to_string() }
    }

    /// The latest registration under way (the invalid-name refusal and
    /// Register's own dial error name no resource).
    fn latest(&self) -> (String, Option<Pending>) {
        self.began.iter().max_by_key(|(_, p)| p.unix_ms).map(|(r, p)| (r.clone(), Some(p.clone()))).unwrap_or_default()
    }

    /// The fact one line gives, if any (`now_ms` when the line has no time).
    // long: one match over the device manager's messages, one arm per message, as the referee's `observe`.
    pub fn observe(&mut self, line: &str, now_ms: u64) -> Option<Fact> {
        let v: Value = serde_json::from_str(line.trim()).ok()?;
        let msg = v.get("msg")?.as_str()?;
        // `ts` is milliseconds since the epoch, with a fraction (k8s.io/component-base/logs/json).
        let unix_ms = v.get("ts").and_then(Value::as_f64).map_or(now_ms, |ms| ms as u64);
        let wire = |kind| Some(Fact::Wire(WireEvent { unix_ms, kind }));
        match msg {
            "Got registration request from device plugin with resource" => {
                let p = Pending { unix_ms, via: Via::KubeletSock, endpoint: String::new() };
                self.began.insert(text(&v, "resourceName"), p);
                None
            }
            "Registering plugin at endpoint" => {
                let p = Pending { unix_ms, via: Via::PluginsRegistry, endpoint: text(&v, "endpoint") };
                self.began.insert(text(&v, "plugin"), p);
                None
            }
            "Connected to new client" => {
                let resource = text(&v, "resource");
                let socket = text(&v, "socketPath");
                let p = self.began.get(&resource).cloned();
                self.sockets.insert(resource.clone(), socket.clone());
                let endpoint = match &p {
                    Some(p) if p.via == Via::PluginsRegistry => p.endpoint.clone(),
                    // The kubelet dials filepath.Join(dir, endpoint).
                    _ => Path::new(&socket)
                        .strip_prefix(&self.dir)
                        .map_or_else(|_| socket.clone(), |r| r.display().to_string()),
                };
                wire(WireEventKind::Registered {
                    resource,
                    endpoint,
                    socket,
                    via: p.as_ref().map_or(Via::KubeletSock, |p| p.via),
                    version: "v1beta1".into(),
                    request_options: None,
                    pre_start_required: false,
                    get_preferred_allocation_available: false,
                    took_ms: p.map_or(0, |p| unix_ms.saturating_sub(p.unix_ms)),
                })
            }
            "Bad registration request from device plugin with resource"
            | "Bad registration request from device plugin"
            | "Failed to connect to new client"
            | "Error connecting to device plugin client" => {
                let named = [text(&v, "resourceName"), text(&v, "resource")].into_iter().find(|r| !r.is_empty());
                let (resource, p) = match named {
                    Some(r) => {
                        let p = self.began.get(&r).cloned();
                        (r, p)
                    }
                    None => self.latest(),
                };
                let via = p.as_ref().map_or(Via::KubeletSock, |p| p.via);
                // Register logs a failed dial twice ("Failed to connect ..." then "Error connecting ...").
                if msg == "Failed to connect to new client" && via == Via::KubeletSock {
                    return None;
                }
                wire(WireEventKind::RegistrationRejected {
                    resource,
                    endpoint: p.map(|p| p.endpoint).unwrap_or_default(),
                    socket: text(&v, "socketPath"),
                    via,
                    version: String::new(),
                    message: text(&v, "err"),
                })
            }
            "State pushed for device plugin" => {
                let devices = v.get("resourceCapacity").and_then(Value::as_u64).unwrap_or(0);
                let devices = usize::try_from(devices).unwrap_or(usize::MAX);
                wire(WireEventKind::Snapshot {
                    resource: text(&v, "resource"),
                    devices,
                    capacity: Some(devices),
                    allocatable: None,
                    message_bytes: None,
                })
            }
            "ListAndWatch ended unexpectedly for device plugin" => {
                let resource = text(&v, "resource");
                let socket = self.sockets.get(&resource).cloned().unwrap_or_default();
                wire(WireEventKind::StreamEnded { resource, socket, reason: text(&v, "err") })
            }
            "Event occurred" if text(&v, "type") == "Warning" && text(&v, "kind") == "Pod" => {
                let object = v.get("object").cloned().unwrap_or(Value::Null);
                Some(Fact::PodWarning(PodWarning {
                    unix_ms,
                    namespace: text(&object, "namespace"),
                    name: text(&object, "name"),
                    container: field_path_container(&text(&v, "fieldPath")),
                    reason: text(&v, "reason"),
                    message: text(&v, "message"),
                }))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIR: &str = "/var/lib/kubelet/device-plugins";

    #[test]
    fn a_registration_and_its_snapshots_read_as_the_referee_reports_them() {
        let mut r = LogReader::new(DIR);
        let got = r.observe(
            r#"{"ts":1000000.0,"caller":"v1beta1/server.go:161","msg":"Got registration request from device plugin with resource","v":0,"resourceName":"example.com/gpu"}"#,
            0,
        );
        assert_eq!(got, None);
        let got = r.observe(
            r#"{"ts":1000250.5,"msg":"Connected to new client","v":2,"resource":"example.com/gpu","socketPath":"/var/lib/kubelet/device-plugins/gpu.sock"}"#,
            0,
        );
        let Some(Fact::Wire(WireEvent { unix_ms, kind: WireEventKind::Registered { endpoint, took_ms, via, .. } })) =
            got
        else {
            panic!("{got:?}")
        };
        assert_eq!((unix_ms, endpoint.as_str(), took_ms, via), (1_000_250, "gpu.sock", 250, Via::KubeletSock));
        let got = r.observe(
            r#"{"ts":1001000,"msg":"State pushed for device plugin","v":2,"resource":"example.com/gpu","resourceCapacity":4}"#,
            0,
        );
        assert!(matches!(got, Some(Fact::Wire(WireEvent { kind: WireEventKind::Snapshot { devices: 4, .. }, .. }))));
        let got = r.observe(
            r#"{"ts":1002000,"msg":"ListAndWatch ended unexpectedly for device plugin","resource":"example.com/gpu","err":"EOF"}"#,
            0,
        );
        let Some(Fact::Wire(WireEvent { kind: WireEventKind::StreamEnded { socket, reason, .. }, .. })) = got else {
            panic!("{got:?}")
        };
        assert_eq!((socket.as_str(), reason.as_str()), ("/var/lib/kubelet/device-plugins/gpu.sock", "EOF"));
    }

    #[test]
    fn a_refusal_without_a_name_is_the_latest_registrations() {
        let mut r = LogReader::new(DIR);
        r.observe(
            r#"{"ts":5,"msg":"Got registration request from device plugin with resource","resourceName":"bad"}"#,
            0,
        );
        let got = r.observe(r#"{"ts":6,"msg":"Bad registration request from device plugin","err":"invalid name"}"#, 0);
        let Some(Fact::Wire(WireEvent { kind: WireEventKind::RegistrationRejected { resource, message, .. }, .. })) =
            got
        else {
            panic!("{got:?}")
        };
        assert_eq!((resource.as_str(), message.as_str()), ("bad", "invalid name"));
        assert_eq!(r.observe("not json", 0), None);
        assert_eq!(r.observe(r#"{"msg":"something else"}"#, 0), None);
    }

    #[test]
    fn pod_warnings_tell_a_refusal_from_a_runtime_failure() {
        let mut r = LogReader::new(DIR);
        let line = r#"{"ts":7,"msg":"Event occurred","v":3,"object":{"name":"p-dpctl-node","namespace":"default"},"fieldPath":"","kind":"Pod","apiVersion":"v1","type":"Warning","reason":"UnexpectedAdmissionError","message":"Allocate failed"}"#;
        let Some(Fact::PodWarning(w)) = r.observe(line, 0) else { panic!() };
        assert!(w.is_rejection());
        assert_eq!((w.name.as_str(), w.message.as_str()), ("p-dpctl-node", "Allocate failed"));
        let failed = line.replace("UnexpectedAdmissionError", "Failed");
        let Some(Fact::PodWarning(w)) = r.observe(&failed, 0) else { panic!() };
        assert!(!w.is_rejection() && w.is_run_failure());
        assert_eq!(w.container, "");
        let at_init = line.replace(r#""fieldPath":"""#, r#""fieldPath":"spec.initContainers{init}""#);
        let Some(Fact::PodWarning(w)) = r.observe(&at_init, 0) else { panic!("a warning") };
        assert_eq!(w.container, "init");
        let Some(Fact::PodWarning(w)) = r.observe(&line.replace("UnexpectedAdmissionError", "DNSConfigForming"), 0)
        else {
            panic!()
        };
        assert!(!w.is_run_failure());
        assert_eq!(r.observe(&line.replace("Warning", "Normal"), 0), None);
    }
}
