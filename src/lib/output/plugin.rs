//! Renderers for `dpctl plugin` data: options, device lists, ListAndWatch
//! events, Allocate and GetPreferredAllocation answers.

use std::collections::HashMap;
use std::io::{self, Write};

use colored::Colorize;
use serde::Serialize;

use super::{Format, health, list, numa, table, write_json, write_json_line, write_table};
use crate::contract::Violation;
use crate::model::{self, Change, ContainerAllocation, Counts, Device};
use crate::plugin_client::Snapshot;
use crate::proto::deviceplugin::v1beta1 as dp;

/// PreStartContainer's answer: it has none but OK.
pub fn prestarted(w: &mut dyn Write, format: Format, devices: &[String]) -> io::Result<()> {
    if format.is_json() {
        write_json(w, &serde_json::json!({ "device_ids": devices, "ok": true }))
    } else {
        writeln!(w, "PreStartContainer OK for {}", devices.join(","))
    }
}

/// A ListAndWatch message as shown: message `seq`, what changed since `prev`.
pub fn snapshot_view(seq: u64, prev: &[Device], snap: &Snapshot) -> SnapshotView {
    let devices = &snap.devices;
    let changes = if seq == 1 { Vec::new() } else { model::diff(prev, devices) };
    let removed = prev.iter().filter(|d| !devices.iter().any(|n| n.id == d.id)).cloned().collect();
    SnapshotView {
        time: super::timestamp(snap.received),
        seq,
        counts: model::counts(devices),
        message_bytes: snap.encoded_len,
        devices: devices.to_vec(),
        changes,
        removed,
    }
}

/// GetDevicePluginOptions, as dpctl shows it.
#[derive(Debug, Clone, Serialize)]
pub struct OptionsView {
    /// The plugin socket.
    pub socket: String,
    /// `pre_start_required`.
    pub pre_start_required: bool,
    /// `get_preferred_allocation_available`.
    pub get_preferred_allocation_available: bool,
}

/// Renders plugin options.
pub fn options(w: &mut dyn Write, format: Format, view: &OptionsView) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, view);
    }
    let mut t = table(["OPTION", "VALUE"]);
    t.add_row(["pre_start_required".to_string(), view.pre_start_required.to_string()]);
    t.add_row(["get_preferred_allocation_available".to_string(), view.get_preferred_allocation_available.to_string()]);
    write_table(w, &t)
}

/// One ListAndWatch message as dpctl shows it (`plugin call list`, `plugin watch`).
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotView {
    /// Receive time, RFC 3339.
    pub time: String,
    /// 1 for the first message of the stream.
    pub seq: u64,
    /// Counts as the kubelet would make them.
    #[serde(flatten)]
    pub counts: Counts,
    /// Encoded size in bytes.
    pub message_bytes: usize,
    /// The devices.
    pub devices: Vec<Device>,
    /// Changes from the previous message (empty for the first).
    pub changes: Vec<Change>,
    /// Devices of the previous message that are gone (for the table).
    #[serde(skip)]
    pub removed: Vec<Device>,
}

/// Renders a device list; with `changes`, added and changed rows are marked
/// and removed devices are shown struck out.
pub fn snapshot(w: &mut dyn Write, format: Format, view: &SnapshotView, stream: bool) -> io::Result<()> {
    if format.is_json() {
        return if stream { write_json_line(w, view) } else { write_json(w, view) };
    }
    if stream {
        let changed = if view.seq == 1 {
            String::new()
        } else {
            format!(", {}", crate::text::count(view.changes.len() as u64, "change", "changes"))
        };
        writeln!(
            w,
            "{} #{}  capacity {}  allocatable {}{}",
            view.time.dimmed(),
            view.seq,
            view.counts.capacity,
            view.counts.allocatable,
            changed
        )?;
    }
    let marks: HashMap<&str, &Change> = view.changes.iter().map(|c| (c.id(), c)).collect();
    let mut headers = vec!["ID", "HEALTH", "NUMA"];
    if stream {
        headers.insert(0, "");
    }
    let mut t = table(headers);
    for d in &view.devices {
        let mut row = vec![d.id.clone(), health(&d.health), numa(d.numa_nodes.as_deref())];
        if stream {
            let mark = match marks.get(d.id.as_str()) {
                Some(Change::Added { .. }) if view.seq > 1 => "+".green().bold().to_string(),
                Some(Change::HealthChanged { .. } | Change::TopologyChanged { .. }) => "~".yellow().bold().to_string(),
                _ => String::new(),
            };
            row.insert(0, mark);
        }
        t.add_row(row);
    }
    for d in &view.removed {
        t.add_row(vec![
            "-".red().bold().to_string(),
            d.id.strikethrough().to_string(),
            "removed".red().to_string(),
            String::new(),
        ]);
    }
    write_table(w, &t)?;
    if !stream {
        writeln!(
            w,
            "\ncapacity {}  allocatable {}  ({} bytes)",
            view.counts.capacity, view.counts.allocatable, view.message_bytes
        )?;
    }
    w.flush()
}

/// An Allocate answer, with the rules it breaks.
#[derive(Debug, Clone, Serialize)]
pub struct AllocateView {
    /// One entry per container response, paired with its request.
    pub containers: Vec<ContainerAllocation>,
    /// Broken rules (empty when the answer is fine).
    pub violations: Vec<Violation>,
}

/// Renders an Allocate answer, one block per container.
pub fn allocate(w: &mut dyn Write, format: Format, view: &AllocateView) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, view);
    }
    for (i, c) in view.containers.iter().enumerate() {
        if i > 0 {
            writeln!(w)?;
        }
        writeln!(w, "{} {}  devices: {}", "container".bold(), i, list(&c.devices_ids))?;
        allocation(w, c)?;
    }
    violations(w, &view.violations)
}

/// One container's answer as a KIND / NAME / VALUE / OPTIONS table.
pub fn allocation(w: &mut dyn Write, c: &ContainerAllocation) -> io::Result<()> {
    let mut t = table(["KIND", "NAME / CONTAINER PATH", "VALUE / HOST PATH", "OPTIONS"]);
    for (k, v) in &c.envs {
        t.add_row(["env", k.as_str(), v.as_str(), ""]);
    }
    for m in &c.mounts {
        t.add_row(["mount", m.container_path.as_str(), m.host_path.as_str(), if m.read_only { "ro" } else { "rw" }]);
    }
    for d in &c.devices {
        t.add_row(["device", d.container_path.as_str(), d.host_path.as_str(), d.permissions.as_str()]);
    }
    for (k, v) in &c.annotations {
        t.add_row(["annotation", k.as_str(), v.as_str(), ""]);
    }
    for n in &c.cdi_devices {
        t.add_row(["cdi", n.as_str(), "", ""]);
    }
    if t.row_count() == 0 {
        writeln!(w, "  (empty response: nothing is injected into the container)")
    } else {
        write_table(w, &t)
    }
}

/// A GetPreferredAllocation answer, with the rules it breaks.
#[derive(Debug, Clone, Serialize)]
pub struct PreferredView {
    /// What was asked.
    pub available: Vec<String>,
    /// Devices that had to be included.
    pub must_include: Vec<String>,
    /// The size asked for.
    pub size: i32,
    /// What the plugin preferred.
    pub preferred: Vec<String>,
    /// Broken rules (empty when the answer is fine).
    pub violations: Vec<Violation>,
}

/// Renders a GetPreferredAllocation answer.
pub fn preferred(w: &mut dyn Write, format: Format, view: &PreferredView) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, view);
    }
    let mut t = table(["AVAILABLE", "MUST INCLUDE", "SIZE", "PREFERRED"]);
    t.add_row([list(&view.available), list(&view.must_include), view.size.to_string(), list(&view.preferred)]);
    write_table(w, &t)?;
    violations(w, &view.violations)
}

/// Lists broken rules after a table, or nothing when there are none.
pub fn violations(w: &mut dyn Write, v: &[Violation]) -> io::Result<()> {
    if v.is_empty() {
        return Ok(());
    }
    writeln!(w)?;
    for x in v {
        writeln!(w, "{} {}: {}", "contract broken:".red().bold(), x.rule, x.evidence)?;
    }
    Ok(())
}

/// Builds the view of an Allocate answer for the given requests.
pub fn allocate_view(groups: &[Vec<String>], resp: &dp::AllocateResponse) -> AllocateView {
    let containers = resp
        .container_responses
        .iter()
        .enumerate()
        .map(|(i, r)| ContainerAllocation::from_response(groups.get(i).cloned().unwrap_or_default(), r))
        .collect();
    AllocateView { containers, violations: crate::contract::check_allocate(groups.len(), resp) }
}
