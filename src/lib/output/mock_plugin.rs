//! Renderers for `dpctl mock-plugin`: its event stream (one line per event,
//! or JSON Lines), the status of a running mock, and the outcome of control
//! requests.

use std::io::{self, Write};

use colored::Colorize;
use serde_json::Value;

use super::{Format, Streams, health, numa, out_err, table, timestamp, write_json, write_json_line, write_table};
use crate::mock_plugin::MockConfig;
use crate::mock_plugin::control::{ControlReply, ControlRequest};
use crate::mock_plugin::events::{EventKind, MockEvent, RegisterView, RpcRecord};
use crate::mock_plugin::state::ResourceStatus;
use crate::model::Change;

/// Writes one event: a line for people, or a JSON line.
pub fn event(w: &mut dyn Write, format: Format, e: &MockEvent) -> io::Result<()> {
    if format.is_json() {
        return write_json_line(w, e);
    }
    let (name, detail) = describe(&e.kind);
    // Pad before coloring: escape codes would upset the width.
    let name = format!("{name:<13}");
    let name = match &e.kind {
        EventKind::Rejected { .. } => name.red().bold().to_string(),
        EventKind::Registered { .. } | EventKind::Serving { .. } => name.green().to_string(),
        EventKind::RegisterRetry { .. } | EventKind::KubeletRestartIgnored { .. } => name.yellow().to_string(),
        EventKind::Rpc(r) if r.error.is_some() => name.red().to_string(),
        _ => name,
    };
    writeln!(w, "{}  {}  {} {}", timestamp(e.time).dimmed(), e.resource, name, detail)?;
    w.flush()
}

/// The event's name and a one-line description.
pub fn describe(kind: &EventKind) -> (&'static str, String) {
    match kind {
        EventKind::Serving { socket, devices, generation, reason } => {
            let again = if *generation > 1 { format!(" again ({reason})") } else { String::new() };
            (
                "serving",
                format!("on {}{again}, {}", socket.display(), crate::text::count(*devices as u64, "device", "devices")),
            )
        }
        EventKind::RegistryServing { socket } => {
            ("registry", format!("plugin-watcher registration served on {}", socket.display()))
        }
        EventKind::RegisterRetry { kubelet_socket, attempt, error, retry_in_ms } => (
            "waiting",
            format!(
                "cannot register with {} yet (attempt {attempt}): {error}; retrying in {}",
                kubelet_socket.display(),
                crate::text::fmt_duration(std::time::Duration::from_millis(*retry_in_ms))
            ),
        ),
        EventKind::Registered { kubelet_socket, request, registration, reason, took_ms, .. } => {
            let name = if *registration > 1 { "re-registered" } else { "registered" };
            let why = if *registration > 1 { format!(" after {reason},") } else { String::new() };
            (name, format!("with {}{why} in {took_ms:.1}ms: {}", kubelet_socket.display(), register_summary(request)))
        }
        EventKind::Rejected { kubelet_socket, request, message } => {
            ("rejected", format!("by {} ({}): {message}", kubelet_socket.display(), register_summary(request)))
        }
        EventKind::KubeletRestartIgnored { reason } => {
            ("not-re-registering", format!("{reason}, but fault no_reregister is set"))
        }
        EventKind::DevicesChanged { cause, changes, capacity, allocatable } => (
            "devices",
            format!("{}; capacity {capacity} allocatable {allocatable} ({cause})", changes_summary(changes)),
        ),
        EventKind::Rpc(r) => ("rpc", rpc_summary(r)),
        EventKind::RegistrationStatus { plugin_registered, error } => (
            "registry",
            if error.is_empty() {
                format!("plugin watcher says registered={plugin_registered}")
            } else {
                format!("plugin watcher says registered={plugin_registered}: {error}")
            },
        ),
        EventKind::Stopped {} => ("stopped", "sockets removed".to_string()),
    }
}

fn register_summary(r: &RegisterView) -> String {
    format!(
        "version {}, endpoint {}, resource {}, pre_start_required={}, get_preferred_allocation_available={}",
        r.version, r.endpoint, r.resource_name, r.pre_start_required, r.get_preferred_allocation_available
    )
}

fn changes_summary(changes: &[Change]) -> String {
    const SHOWN: usize = 6;
    let mut parts: Vec<String> = changes
        .iter()
        .take(SHOWN)
        .map(|c| match c {
            Change::Added { id } => format!("+{id}"),
            Change::Removed { id } => format!("-{id}"),
            Change::HealthChanged { id, to, .. } => format!("{id} {}", health(to)),
            Change::TopologyChanged { id } => format!("{id} topology"),
        })
        .collect();
    if changes.len() > SHOWN {
        parts.push(format!("and {} more", changes.len() - SHOWN));
    }
    parts.join(", ")
}

fn ids(v: &Value) -> String {
    v.as_array().map_or_else(String::new, |a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(","))
}

fn rpc_summary(r: &RpcRecord) -> String {
    let req = &r.request;
    let what = match r.rpc {
        "Allocate" => req["container_requests"]
            .as_array()
            .map(|c| c.iter().map(|c| format!("[{}]", ids(&c["device_ids"]))).collect::<Vec<_>>().join(" "))
            .unwrap_or_default(),
        "GetPreferredAllocation" => req["container_requests"]
            .as_array()
            .map(|c| {
                c.iter()
                    .map(|c| {
                        format!(
                            "size {} of [{}] must [{}]",
                            c["allocation_size"],
                            ids(&c["available_device_ids"]),
                            ids(&c["must_include_device_ids"])
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default(),
        "PreStartContainer" => format!("[{}]", ids(&req["device_ids"])),
        "ListAndWatch" => r.seq.map(|s| format!("#{s}")).unwrap_or_default(),
        _ => String::new(),
    };
    let outcome = match (&r.error, &r.response) {
        (Some(e), _) => format!("{}: {}", e.code, e.message),
        (None, Some(resp)) => match r.rpc {
            "ListAndWatch" => {
                let devs = resp["devices"].as_array().map_or(0, Vec::len);
                let healthy = resp["devices"].as_array().map_or(0, |d| {
                    d.iter().filter(|d| d["health"] == crate::proto::deviceplugin::v1beta1::HEALTHY).count()
                });
                let pad = resp["padding_devices"].as_u64().unwrap_or(0);
                let pad = if pad > 0 { format!(" + {pad} padding") } else { String::new() };
                let devs = crate::text::count(devs as u64, "device", "devices");
                format!("{devs}, {healthy} healthy{pad}, {} bytes", resp["message_bytes"])
            }
            "GetPreferredAllocation" => resp["container_responses"]
                .as_array()
                .map(|c| c.iter().map(|c| format!("[{}]", ids(&c["device_ids"]))).collect::<Vec<_>>().join(" "))
                .unwrap_or_default(),
            "GetDevicePluginOptions" => format!(
                "pre_start_required={} get_preferred_allocation_available={}",
                resp["pre_start_required"], resp["get_preferred_allocation_available"]
            ),
            _ => "ok".to_string(),
        },
        (None, None) => "ok".to_string(),
    };
    let what = if what.is_empty() { String::new() } else { format!(" {what}") };
    format!("{}{what} -> {outcome} ({:.2}ms)", r.rpc, r.latency_ms)
}

/// Renders the status of a running mock.
pub fn status(w: &mut dyn Write, format: Format, s: &ResourceStatus) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, s);
    }
    let mut t = table(["RESOURCE", "SOCKET", "REGISTERED", "CAPACITY", "ALLOCATABLE", "STREAMS", "MESSAGES"]);
    t.add_row([
        s.resource.clone(),
        s.socket.display().to_string(),
        match (s.registered, s.registrations) {
            (_, 0) => "no".to_string(),
            (true, 1) => "yes".to_string(),
            (true, n) => format!("yes ({n} times)"),
            (false, n) => format!("no (was {n} times)"),
        },
        s.capacity.to_string(),
        s.allocatable.to_string(),
        s.open_streams.to_string(),
        s.messages_sent.to_string(),
    ]);
    write_table(w, &t)?;
    writeln!(w)?;
    devices(w, s)?;
    let calls: Vec<String> = s.calls.iter().filter(|(_, n)| **n > 0).map(|(r, n)| format!("{r} {n}")).collect();
    writeln!(w, "\ncalls: {}", if calls.is_empty() { "none".to_string() } else { calls.join(", ") })
}

fn devices(w: &mut dyn Write, s: &ResourceStatus) -> io::Result<()> {
    let mut t = table(["ID", "HEALTH", "NUMA"]);
    for d in &s.devices {
        t.add_row([d.id.clone(), health(&d.health), numa(d.numa_nodes.as_deref())]);
    }
    write_table(w, &t)
}

/// Renders the outcome of a control request that changed devices.
pub fn control(w: &mut dyn Write, format: Format, reply: &ControlReply) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, reply);
    }
    if reply.changes.is_empty() {
        writeln!(w, "no change")?;
    } else {
        let mut t = table(["ID", "CHANGE"]);
        for c in &reply.changes {
            let what = match c {
                Change::Added { .. } => "added".green().to_string(),
                Change::Removed { .. } => "removed".red().to_string(),
                Change::HealthChanged { from, to, .. } => format!("{} -> {}", health(from), health(to)),
                Change::TopologyChanged { .. } => "topology changed".to_string(),
            };
            t.add_row([c.id().to_string(), what]);
        }
        write_table(w, &t)?;
    }
    if let Some(s) = &reply.status {
        writeln!(w, "\n{}: capacity {}  allocatable {}", s.resource, s.capacity, s.allocatable)?;
    }
    Ok(())
}

/// Renders a running mock's reply to a control request: the status table
/// for `status`, the changes otherwise.
pub fn reply(w: &mut dyn Write, format: Format, request: &ControlRequest, reply: &ControlReply) -> io::Result<()> {
    match (request, &reply.status) {
        (ControlRequest::Status, Some(s)) => status(w, format, s),
        _ => control(w, format, reply),
    }
}

/// Narration once serving: each resource's socket and how to change a device's health.
pub fn serving_notes(config: &MockConfig, dir: &std::path::Path, s: &mut Streams<'_>) -> crate::Result<()> {
    for r in &config.resources {
        let first = r.initial_devices().first().map_or_else(|| "ID".to_string(), |d| d.id.clone());
        s.note(format!(
            "mock plugin for {} on {} ({}){}",
            r.name,
            dir.join(r.endpoint_name()).display(),
            crate::text::count(r.initial_devices().len() as u64, "device", "devices"),
            if config.register {
                format!("; registering with {}", crate::paths::kubelet_socket(dir).display())
            } else {
                String::new()
            }
        ))?;
        if config.control {
            s.note(format!(
                "  change health: dpctl mock-plugin set-health --dir {} {} {first} unhealthy",
                dir.display(),
                r.name
            ))?;
        }
    }
    Ok(())
}

/// Retries are narration (stderr); every other event is data (stdout).
pub fn show(s: &mut Streams<'_>, ev: &MockEvent) -> crate::Result<()> {
    if let EventKind::RegisterRetry { .. } = &ev.kind {
        let (_, text) = describe(&ev.kind);
        return s.note(format!("{}: {text}", ev.resource));
    }
    event(s.out, s.format, ev).map_err(out_err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock_plugin::events::StatusView;

    #[test]
    fn rpc_lines_read_well() {
        let r = RpcRecord {
            rpc: "Allocate",
            request: serde_json::json!({"container_requests": [{"device_ids": ["G1", "G2"]}]}),
            response: None,
            error: Some(StatusView { code: "invalid_argument", message: "unknown device \"G2\"".into() }),
            latency_ms: 0.25,
            seq: None,
        };
        assert_eq!(rpc_summary(&r), "Allocate [G1,G2] -> invalid_argument: unknown device \"G2\" (0.25ms)");
    }
}
