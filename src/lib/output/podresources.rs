//! Renderers for `dpctl podresources`: pods (one table row per container and
//! resource, DRA claims in a second table), allocatable and free resources,
//! `watch` events, and the `serve` banner (JSON ready line, or narration). JSON is the view structs of
//! [`crate::podresources::view`] as they are (zero values kept).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{self, Write};

use colored::Colorize;
use serde::Serialize;

use super::{
    Format, Streams, bytes_binary, numa, out_err, ranges, table, timestamp, write_json, write_json_line, write_table,
};
use crate::podresources::diff::{self, AssignmentChange, ChangeKind, Held, PodEvent};
use crate::podresources::fake::{FakeKubelet, Served};
use crate::podresources::fixture::{FixtureFile, Reload};
use crate::podresources::free::FreeReport;
use crate::podresources::query::Calls;
use crate::podresources::view::{
    AllocatableReport, AllocatableView, Filter, GetView, HiddenDra, ListView, PodView, merge_devices,
};
use crate::podresources::watch::WatchUpdate;
use crate::text::fmt_duration;

/// How many device IDs a `table` cell shows before `+N more` (`wide` shows all).
pub const MAX_IDS_IN_TABLE: usize = 8;

fn ids_cell<S: AsRef<str>>(ids: &[S], wide: bool) -> String {
    if ids.is_empty() {
        return "-".into();
    }
    let join = |ids: &[S]| {
        let mut s = String::with_capacity(ids.iter().map(|i| i.as_ref().len() + 1).sum());
        for (n, id) in ids.iter().enumerate() {
            if n > 0 {
                s.push(',');
            }
            s.push_str(id.as_ref());
        }
        s
    };
    if wide || ids.len() <= MAX_IDS_IN_TABLE {
        return join(ids);
    }
    format!("{},... (+{} more)", join(&ids[..MAX_IDS_IN_TABLE]), ids.len() - MAX_IDS_IN_TABLE)
}

fn union_numa<'a>(sets: impl Iterator<Item = Option<&'a Vec<i64>>>) -> String {
    let mut all: Vec<i64> = Vec::new();
    let mut any = false;
    for s in sets.flatten() {
        any = true;
        all.extend(s);
    }
    if any { numa(Some(&all)) } else { "-".into() }
}

fn numa_label(n: Option<&Vec<i64>>) -> String {
    numa(n.map(Vec::as_slice))
}

const DASH: Cow<'static, str> = Cow::Borrowed("-");

/// Cells for one held resource: amount, IDs, NUMA, and (for `wide`) the
/// per-NUMA split.
fn held_cells(held: Option<&Held>, wide: bool) -> [Cow<'static, str>; 4] {
    match held {
        None => [DASH, DASH, DASH, DASH],
        Some(Held::Devices(groups)) => {
            let ids: Vec<&str> = groups.iter().flat_map(|g| g.device_ids.iter().map(String::as_str)).collect();
            let by_numa = if wide {
                groups
                    .iter()
                    .map(|g| format!("{}:{}", numa_label(g.numa_nodes.as_ref()), g.device_ids.join(",")))
                    .collect::<Vec<_>>()
                    .join(" ")
                    .into()
            } else {
                DASH
            };
            [
                ids.len().to_string().into(),
                ids_cell(&ids, wide).into(),
                union_numa(groups.iter().map(|g| g.numa_nodes.as_ref())).into(),
                by_numa,
            ]
        }
        Some(Held::CpuIds(cpus)) => [cpus.len().to_string().into(), ranges(cpus).into(), DASH, DASH],
        Some(Held::Memory(entries)) => {
            // Saturating: the sizes are the peer's uint64s (the sum used to overflow and panic).
            let total = entries.iter().fold(0u64, |t, m| t.saturating_add(m.size));
            let by_numa = if wide {
                entries
                    .iter()
                    .map(|m| format!("{}:{}", numa_label(m.numa_nodes.as_ref()), bytes_binary(m.size)))
                    .collect::<Vec<_>>()
                    .join(" ")
                    .into()
            } else {
                DASH
            };
            [
                bytes_binary(total).into(),
                DASH,
                union_numa(entries.iter().map(|m| m.numa_nodes.as_ref())).into(),
                by_numa,
            ]
        }
        Some(Held::ClaimResources(res)) => {
            let ids: Vec<String> = res.iter().map(|r| r.qualified_device()).collect();
            [res.len().to_string().into(), ids_cell(&ids, wide).into(), DASH, DASH]
        }
    }
}

/// A short text for what is held, for `watch`.
pub fn held_text(held: Option<&Held>) -> String {
    match held {
        None => "(no resources)".into(),
        Some(Held::Devices(groups)) => groups
            .iter()
            .map(|g| match &g.numa_nodes {
                Some(n) => format!("{} (NUMA {})", g.device_ids.join(","), numa(Some(n))),
                None => g.device_ids.join(","),
            })
            .collect::<Vec<_>>()
            .join("; "),
        Some(Held::CpuIds(cpus)) => ranges(cpus),
        Some(Held::Memory(entries)) => entries
            .iter()
            .map(|m| match &m.numa_nodes {
                Some(n) => format!("{} (NUMA {})", bytes_binary(m.size), numa(Some(n))),
                None => bytes_binary(m.size),
            })
            .collect::<Vec<_>>()
            .join("; "),
        Some(Held::ClaimResources(res)) => res
            .iter()
            .map(|r| {
                if r.cdi_devices.is_empty() {
                    r.qualified_device()
                } else {
                    format!("{} [{}]", r.qualified_device(), r.cdi_devices.join(","))
                }
            })
            .collect::<Vec<_>>()
            .join("; "),
    }
}

/// Rows under headers, aligned like [`super::table`] (columns padded to
/// their widest cell plus three spaces, trailing spaces trimmed), but cheap
/// enough for tens of thousands of rows: the pods table of a busy node.
struct Rows<'a> {
    headers: Vec<&'static str>,
    rows: Vec<Vec<Cow<'a, str>>>,
}

impl<'a> Rows<'a> {
    fn new(headers: Vec<&'static str>) -> Self {
        Rows { headers, rows: Vec::new() }
    }

    fn add_row(&mut self, row: Vec<Cow<'a, str>>) {
        self.rows.push(row);
    }

    fn write(&self, w: &mut dyn Write) -> io::Result<()> {
        const SPACES: &str = "                                                                ";
        fn width(s: &str) -> usize {
            if s.is_ascii() { s.len() } else { s.chars().count() }
        }
        let n = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| width(h)).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                widths[i] = widths[i].max(width(c));
            }
        }
        let mut line = String::new();
        let mut put = |cells: &mut dyn Iterator<Item = &str>, w: &mut dyn Write| -> io::Result<()> {
            line.clear();
            for (i, c) in cells.enumerate().take(n) {
                line.push_str(c);
                if i + 1 < n {
                    let mut pad = widths[i] + 3 - width(c);
                    while pad > 0 {
                        let k = pad.min(SPACES.len());
                        line.push_str(&SPACES[..k]);
                        pad -= k;
                    }
                }
            }
            let trimmed = line.trim_end().len();
            line.truncate(trimmed);
            line.push('\n');
            w.write_all(line.as_bytes())
        };
        if !super::no_headers() {
            put(&mut self.headers.iter().copied(), w)?;
        }
        for r in &self.rows {
            put(&mut r.iter().map(|c| c.as_ref()), w)?;
        }
        Ok(())
    }
}

fn pods_table(pods: &[PodView], wide: bool) -> Rows<'_> {
    let mut headers = vec!["NAMESPACE", "POD", "CONTAINER", "RESOURCE", "AMOUNT", "IDS", "NUMA"];
    if wide {
        headers.push("BY NUMA");
    }
    let mut t = Rows::new(headers);
    for p in pods {
        let ns: Cow<'_, str> = Cow::Borrowed(&p.namespace);
        let name: Cow<'_, str> = Cow::Borrowed(&p.name);
        let rows = diff::assignments(p);
        if rows.is_empty() {
            let mut row = vec![ns.clone(), name.clone(), DASH, DASH, DASH, DASH, DASH];
            if wide {
                row.push(DASH);
            }
            t.add_row(row);
        }
        for a in rows {
            let [amount, ids, numa, by_numa] = held_cells(a.held.as_ref(), wide);
            let mut row = vec![
                ns.clone(),
                name.clone(),
                a.container.into(),
                a.resource.map_or(DASH, Cow::Owned),
                amount,
                ids,
                numa,
            ];
            if wide {
                row.push(by_numa);
            }
            t.add_row(row);
        }
    }
    t
}

fn claims_table(pods: &[PodView], wide: bool) -> Option<Rows<'_>> {
    let mut headers = vec!["NAMESPACE", "POD", "CONTAINER", "CLAIM", "DRIVER", "POOL", "DEVICE", "CDI DEVICES"];
    if wide {
        headers.push("SHARE ID");
    }
    let mut t = Rows::new(headers);
    let mut any = false;
    for p in pods {
        for c in &p.containers {
            for claim in &c.dynamic_resources {
                let label = diff::claim_label(&p.namespace, &claim.claim_namespace, &claim.claim_name);
                let name: Cow<'_, str> = Cow::Owned(label.trim_start_matches("claim ").to_string());
                // A claim without resources still gets a row, of dashes.
                let resources: Vec<[Cow<'_, str>; 5]> = if claim.claim_resources.is_empty() {
                    vec![[DASH, DASH, DASH, DASH, DASH]]
                } else {
                    claim
                        .claim_resources
                        .iter()
                        .map(|r| {
                            [
                                Cow::Borrowed(r.driver_name.as_str()),
                                Cow::Borrowed(r.pool_name.as_str()),
                                Cow::Borrowed(r.device_name.as_str()),
                                Cow::Owned(super::list(&r.cdi_devices)),
                                r.share_id.as_deref().map_or(DASH, Cow::Borrowed),
                            ]
                        })
                        .collect()
                };
                for [driver, pool, device, cdi, share] in resources {
                    any = true;
                    let who = [p.namespace.as_str(), p.name.as_str(), c.name.as_str()].map(Cow::Borrowed);
                    let mut row: Vec<Cow<'_, str>> = who.into_iter().collect();
                    row.extend([name.clone(), driver, pool, device, cdi]);
                    if wide {
                        row.push(share);
                    }
                    t.add_row(row);
                }
            }
        }
    }
    any.then_some(t)
}

fn pods(w: &mut dyn Write, format: Format, pods: &[PodView]) -> io::Result<()> {
    let wide = format == Format::Wide;
    if pods.is_empty() {
        return Ok(());
    }
    pods_table(pods, wide).write(w)?;
    if let Some(t) = claims_table(pods, wide) {
        writeln!(w)?;
        t.write(w)?;
    }
    Ok(())
}

/// Renders `list`: a table row per container and resource, then DRA claims.
/// An empty list writes no table (the command says so on stderr).
pub fn list(w: &mut dyn Write, format: Format, view: &ListView) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, view);
    }
    pods(w, format, &view.pod_resources)
}

/// Renders `get`: the same table as `list`, for one pod.
pub fn get(w: &mut dyn Write, format: Format, view: &GetView) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, view);
    }
    pods(w, format, std::slice::from_ref(&view.pod_resources))
}

/// Renders `allocatable`: devices per resource and NUMA node, CPUs, memory.
pub fn allocatable(w: &mut dyn Write, format: Format, report: &AllocatableReport) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, report);
    }
    let wide = format == Format::Wide;
    let a = &report.allocatable;
    let mut t = table(["RESOURCE", "NUMA", "AMOUNT", "IDS"]);
    let mut rows = 0;
    // Each device once, under all its NUMA nodes (upstream lists a device on
    // two nodes in two entries).
    let mut groups: BTreeMap<(&str, Option<Vec<i64>>), Vec<&str>> = BTreeMap::new();
    for d in merge_devices(&a.devices) {
        groups.entry((d.resource_name, d.numa_nodes)).or_default().push(d.device_id);
    }
    for ((resource, nodes), mut ids) in groups {
        ids.sort();
        t.add_row([resource.to_string(), numa_label(nodes.as_ref()), ids.len().to_string(), ids_cell(&ids, wide)]);
        rows += 1;
    }
    if !a.cpu_ids.is_empty() {
        let mut cpus = a.cpu_ids.clone();
        cpus.sort_unstable();
        cpus.dedup();
        t.add_row(["cpu".to_string(), "-".into(), cpus.len().to_string(), ranges(&cpus)]);
        rows += 1;
    }
    for m in &a.memory {
        t.add_row([m.memory_type.clone(), numa_label(m.numa_nodes.as_ref()), bytes_binary(m.size), "-".into()]);
        rows += 1;
    }
    if rows == 0 {
        return Ok(());
    }
    write_table(w, &t)
}

/// `free`'s rows: devices, CPUs (per NUMA node when known), memory.
fn free_rows(report: &FreeReport, wide: bool) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for d in &report.devices {
        let mut row = vec![
            d.resource_name.clone(),
            numa_label(d.numa_nodes.as_ref()),
            d.allocatable.to_string(),
            d.in_use.to_string(),
            d.free.to_string(),
            ids_cell(&d.free_ids, wide),
        ];
        if wide {
            row.push(ids_cell(&d.in_use_ids, true));
        }
        rows.push(row);
    }
    let c = &report.cpus;
    for n in &c.per_numa {
        let mut row = vec![
            "cpu".to_string(),
            n.numa_node.to_string(),
            n.allocatable.to_string(),
            n.in_use.to_string(),
            n.free.to_string(),
            if n.free_ids.is_empty() { "-".into() } else { ranges(&n.free_ids) },
        ];
        if wide {
            row.push("-".into());
        }
        rows.push(row);
    }
    if c.per_numa.is_empty() && (c.allocatable > 0 || c.in_use > 0) {
        let mut row = vec![
            "cpu".to_string(),
            "-".into(),
            c.allocatable.to_string(),
            c.in_use.to_string(),
            c.free.to_string(),
            if c.free_ids.is_empty() { "-".into() } else { ranges(&c.free_ids) },
        ];
        if wide {
            row.push(if c.in_use_ids.is_empty() { "-".into() } else { ranges(&c.in_use_ids) });
        }
        rows.push(row);
    }
    for m in &report.memory {
        let mut row = vec![
            m.memory_type.clone(),
            numa_label(m.numa_nodes.as_ref()),
            bytes_binary(m.allocatable),
            bytes_binary(m.in_use),
            bytes_binary(m.free),
            "-".into(),
        ];
        if wide {
            row.push("-".into());
        }
        rows.push(row);
    }
    rows
}

/// Renders `free`: allocatable, in use and free per resource and NUMA node,
/// then devices held that are not allocatable.
pub fn free(w: &mut dyn Write, format: Format, report: &FreeReport) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, report);
    }
    let wide = format == Format::Wide;
    let mut headers = vec!["RESOURCE", "NUMA", "ALLOCATABLE", "IN USE", "FREE", "FREE IDS"];
    if wide {
        headers.push("IN USE IDS");
    }
    let all = free_rows(report, wide);
    let rows = all.len();
    let mut t = table(headers);
    for row in all {
        t.add_row(row);
    }
    if rows > 0 {
        write_table(w, &t)?;
    }
    if !report.held_not_allocatable.is_empty() {
        if rows > 0 {
            writeln!(w)?;
        }
        writeln!(w, "In use but not allocatable (unhealthy, or its plugin is gone):")?;
        let mut t = table(["RESOURCE", "DEVICE", "NAMESPACE", "POD", "CONTAINER"]);
        for h in &report.held_not_allocatable {
            t.add_row([
                h.resource_name.clone(),
                h.device_id.clone(),
                h.namespace.clone(),
                h.pod.clone(),
                h.container.clone(),
            ]);
        }
        write_table(w, &t)?;
    }
    Ok(())
}

/// One `watch` event as a JSON line: the time it was seen, the poll that saw
/// it, and the event.
#[derive(Debug, Clone, Serialize)]
pub struct WatchLine<'a> {
    /// When the poll that saw it was answered, RFC 3339.
    pub time: &'a str,
    /// The poll number, 1 for the first.
    pub poll: u64,
    /// The event.
    #[serde(flatten)]
    pub event: &'a PodEvent,
}

fn mark(kind: ChangeKind) -> String {
    match kind {
        ChangeKind::Present => " ".into(),
        ChangeKind::Added => "+".green().bold().to_string(),
        ChangeKind::Changed => "~".yellow().bold().to_string(),
        ChangeKind::Removed => "-".red().bold().to_string(),
    }
}

fn change_text(c: &AssignmentChange) -> String {
    match c.change {
        ChangeKind::Changed => format!("{} -> {}", held_text(c.before.as_ref()), held_text(c.after.as_ref())),
        ChangeKind::Removed => held_text(c.before.as_ref()),
        ChangeKind::Present | ChangeKind::Added => held_text(c.after.as_ref()),
    }
}

/// Renders one `watch` event: a JSON line, or a heading line and one line
/// per assignment.
pub fn watch_event(w: &mut dyn Write, format: Format, line: &WatchLine<'_>) -> io::Result<()> {
    if format.is_json() {
        return write_json_line(w, line);
    }
    let e = line.event;
    writeln!(w, "{}  {:<8} {}/{}", line.time.dimmed(), e.event.as_str(), e.namespace, e.pod)?;
    let width = e.changes.iter().map(|c| c.container.len()).max().unwrap_or(0);
    let rwidth = e.changes.iter().map(|c| c.resource.as_deref().map_or(1, str::len)).max().unwrap_or(0);
    for c in &e.changes {
        writeln!(
            w,
            "  {} {:<width$}  {:<rwidth$}  {}",
            mark(c.change),
            c.container,
            c.resource.as_deref().unwrap_or("-"),
            change_text(c)
        )?;
    }
    w.flush()
}

/// What `serve` serves, printed once it answers.
#[derive(Debug, Clone, Serialize)]
pub struct ServingView {
    /// Always `serving`.
    pub event: &'static str,
    /// The socket path.
    pub socket: String,
    /// API versions served.
    pub apis: Vec<&'static str>,
    /// Pods in the fixture.
    pub pods: usize,
    /// Whether `Get` answers.
    pub get_enabled: bool,
    /// Calls per second, when rate-limited.
    pub rate_limit_qps: Option<f64>,
    /// Burst, when rate-limited.
    pub rate_limit_burst: Option<u32>,
}

/// The `serve` banner for people: one line of narration (stderr).
pub fn serving_text(v: &ServingView) -> String {
    let limit = match (v.rate_limit_qps, v.rate_limit_burst) {
        (Some(q), Some(b)) => format!("rate limit {q}/s burst {b}"),
        _ => "no rate limit".into(),
    };
    format!(
        "serving PodResources {} on {}: {}, Get {}, {}",
        v.apis.join(", "),
        v.socket,
        crate::text::count(v.pods, "pod", "pods"),
        if v.get_enabled { "enabled" } else { "disabled" },
        limit
    )
}

/// Renders the `serve` ready line for scripts: one JSON line (stdout).
pub fn serving_json(w: &mut dyn Write, v: &ServingView) -> io::Result<()> {
    write_json_line(w, v)
}

/// Renders into memory, then writes once: large tables reach stdout in a
/// few writes instead of one per line.
fn emit(s: &mut Streams<'_>, f: impl FnOnce(&mut dyn Write, Format) -> io::Result<()>) -> crate::Result<()> {
    let mut buf = Vec::with_capacity(64 * 1024);
    f(&mut buf, s.format).map_err(out_err)?;
    s.out.write_all(&buf).map_err(out_err)
}

/// Narration after calls: what was not recorded, the v1alpha1 fallback and rate-limit retries.
pub fn calls(s: &mut Streams<'_>, calls: &Calls) -> crate::Result<()> {
    if let Some(skipped) = &calls.skipped {
        s.note(format!("note: {skipped}"))?;
    }
    if let Some(path) = &calls.fell_back {
        s.note(format!(
            "note: {} does not serve PodResources v1 (a kubelet older than 1.20?); using v1alpha1, which \
             reports devices only: no NUMA topology, CPUs, memory or DRA claims",
            path.display()
        ))?;
    }
    let n = calls.rate_limited;
    if n > 0 {
        s.note(format!(
            "note: the kubelet rate-limited {} (100 calls/s, burst 10, shared by every client on the node); \
             dpctl backed off and retried",
            crate::text::count(n, "call", "calls")
        ))?;
    }
    Ok(())
}

fn empty_reason(filter: &Filter) -> String {
    match (&filter.namespace, &filter.resource) {
        (None, None) => "no pods on this node: the kubelet reports none".into(),
        (Some(ns), None) => format!("no pods in namespace {ns} on this node"),
        (None, Some(r)) => format!("no pods on this node use {r}"),
        (Some(ns), Some(r)) => format!("no pods in namespace {ns} on this node use {r}"),
    }
}

/// Shows `list`'s answer: the notes, why nothing is listed (people only),
/// the DRA devices a filter by resource name hid (stderr, every format), the pods.
pub fn listed(
    s: &mut Streams<'_>,
    view: &ListView,
    filter: &Filter,
    hidden: Option<&HiddenDra>,
    c: &Calls,
) -> crate::Result<()> {
    calls(s, c)?;
    if view.pod_resources.is_empty() && !s.format.is_json() {
        s.note(empty_reason(filter))?;
    }
    if let Some(h) = hidden {
        s.note(format!(
            "note: {} hold{} DRA devices (driver{} {}) that --resource {} cannot show: PodResources lists a DRA \
             driver's devices by driver, pool and device, never by extended resource name, even for a pod that asked \
             for {} (served by DRA from 1.36, KEP-5004); see them with --resource {}",
            crate::text::count(u64::try_from(h.containers).unwrap_or(u64::MAX), "container", "containers"),
            if h.containers == 1 { "s" } else { "" },
            if h.drivers.len() == 1 { "" } else { "s" },
            h.drivers.join(", "),
            h.resource,
            h.resource,
            h.drivers.first().map_or("DRIVER", String::as_str),
        ))?;
    }
    emit(s, |w, f| list(w, f, view))
}

/// Shows `get`'s answer.
pub fn got(s: &mut Streams<'_>, view: &GetView, c: &Calls) -> crate::Result<()> {
    calls(s, c)?;
    emit(s, |w, f| get(w, f, view))
}

/// Says why nothing (or no CPU) is allocatable, for people: the causes
/// found against the node's checkpoint first (each a `warning:`), else
/// the general reasons.
fn explain_allocatable(s: &mut Streams<'_>, a: &AllocatableView, causes: &[String]) -> crate::Result<()> {
    if s.format.is_json() {
        return Ok(());
    }
    for c in causes {
        s.note(format!("warning: {c}"))?;
    }
    if !causes.is_empty() {
        return Ok(());
    }
    // k8s.io/kubernetes pkg/kubelet/apis/podresources/server_v1.go, containerDevicesFromResourceDeviceInstances:
    // a device with a TopologyInfo is listed once per NUMA node in it, so one with none listed never.
    if a.devices.is_empty() && a.cpu_ids.is_empty() && a.memory.is_empty() {
        s.note(
            "the kubelet reports nothing allocatable: the CPU manager policy is not static, the memory manager \
             policy is not Static, and no device is listed: either no device plugin has registered healthy \
             devices, or the devices registered carry a TopologyInfo with no NUMA node (the kubelet lists a \
             device once per node of its topology, so one with an empty TopologyInfo is never listed, though it \
             counts in capacity; `dpctl plugin watch --socket PLUGIN` shows each device's NUMA nodes)",
        )?;
    } else if a.cpu_ids.is_empty() {
        s.note("no CPUs listed: the kubelet fills cpu_ids only with the static CPU manager policy")?;
    }
    Ok(())
}

/// Shows `allocatable`'s answer.
pub fn allocatable_answer(
    s: &mut Streams<'_>,
    report: &AllocatableReport,
    causes: &[String],
    c: &Calls,
) -> crate::Result<()> {
    calls(s, c)?;
    explain_allocatable(s, &report.allocatable, causes)?;
    emit(s, |w, f| allocatable(w, f, report))
}

/// Shows `free`'s answer.
pub fn free_answer(s: &mut Streams<'_>, report: &FreeReport, alloc: &AllocatableView, c: &Calls) -> crate::Result<()> {
    calls(s, c)?;
    explain_allocatable(s, alloc, &[])?;
    emit(s, |w, f| free(w, f, report))
}

/// Shows `dump`'s fixture file (always JSON).
pub fn dumped(s: &mut Streams<'_>, file: &FixtureFile, c: &Calls) -> crate::Result<()> {
    calls(s, c)?;
    emit(s, |w, _| write_json(w, file))
}

/// Shows one update of `watch` after the first answer (whose calls the
/// runner shows with [`calls`]): each event as data, recoveries and
/// back-offs as narration.
pub fn watch_update(s: &mut Streams<'_>, update: WatchUpdate<'_>) -> crate::Result<()> {
    match update {
        WatchUpdate::FirstAnswer => Ok(()),
        WatchUpdate::Recovered => s.note("the kubelet answers again"),
        WatchUpdate::Event { time, poll, event } => {
            let time = timestamp(time);
            watch_event(s.out, s.format, &WatchLine { time: &time, poll, event }).map_err(out_err)
        }
        WatchUpdate::BackingOff { why, wait } => s.note(format!("{why}; backing off {}", fmt_duration(wait))),
    }
}

/// Shows what `serve` (see [`crate::podresources::fake::serve`]) did: the
/// ready line (data with `-o json`, narration otherwise), then reloads as
/// narration.
pub fn served(s: &mut Streams<'_>, fake: &FakeKubelet, served: Served) -> crate::Result<()> {
    let data = fake.data.clone().unwrap_or_default();
    match served {
        Served::Ready { pods } => {
            let apis = [(fake.apis.v1, "v1"), (fake.apis.v1alpha1, "v1alpha1")];
            let banner = ServingView {
                event: "serving",
                socket: fake.socket.display().to_string(),
                apis: apis.into_iter().filter(|(on, _)| *on).map(|(_, n)| n).collect(),
                pods,
                get_enabled: !fake.disable_get,
                rate_limit_qps: fake.rate_limit.map(|r| r.0),
                rate_limit_burst: fake.rate_limit.map(|r| r.1),
            };
            if s.format.is_json() {
                serving_json(s.out, &banner).map_err(out_err)
            } else {
                s.note(serving_text(&banner))
            }
        }
        Served::Reload(Reload::Reloaded { pods }) => {
            s.note(format!("reloaded {}: {}", data.display(), crate::text::count(pods, "pod", "pods")))
        }
        Served::Reload(Reload::Kept(e)) => s.note(format!("warning: kept the previous data: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podresources::view::{
        Api, ClaimResourceView, ClaimView, ContainerView, DevicesView, MemoryView, SCHEMA_VERSION,
    };

    fn sample() -> Vec<PodView> {
        vec![PodView {
            name: "p".into(),
            namespace: "ns".into(),
            containers: vec![
                ContainerView {
                    name: "side".into(),
                    devices: vec![],
                    cpu_ids: vec![],
                    memory: vec![],
                    dynamic_resources: vec![],
                },
                ContainerView {
                    name: "main".into(),
                    devices: vec![
                        DevicesView {
                            resource_name: "x/gpu".into(),
                            device_ids: vec!["g1".into()],
                            numa_nodes: Some(vec![1]),
                        },
                        DevicesView {
                            resource_name: "x/gpu".into(),
                            device_ids: vec!["g0".into()],
                            numa_nodes: Some(vec![0]),
                        },
                    ],
                    cpu_ids: vec![8, 0, 1, 2, 3],
                    memory: vec![MemoryView {
                        memory_type: "hugepages-2Mi".into(),
                        size: 64 << 20,
                        numa_nodes: Some(vec![0]),
                    }],
                    dynamic_resources: vec![ClaimView {
                        claim_name: "cl".into(),
                        claim_namespace: "ns".into(),
                        claim_resources: vec![ClaimResourceView {
                            cdi_devices: vec!["v/gpu=3".into()],
                            driver_name: "d".into(),
                            pool_name: "pool".into(),
                            device_name: "gpu-3".into(),
                            share_id: None,
                        }],
                    }],
                },
            ],
            cpu_ids: vec![],
            memory: vec![],
        }]
    }

    fn render(format: Format) -> String {
        let view = ListView { schema_version: SCHEMA_VERSION, api_version: Api::V1, pod_resources: sample() };
        let mut out = Vec::new();
        list(&mut out, format, &view).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn table_rows_per_container_and_resource() {
        let s = render(Format::Table);
        let rows: Vec<Vec<&str>> = s.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(rows[0], ["NAMESPACE", "POD", "CONTAINER", "RESOURCE", "AMOUNT", "IDS", "NUMA"]);
        assert_eq!(rows[1], ["ns", "p", "side", "-", "-", "-", "-"], "sidecar first, as given");
        assert_eq!(rows[2], ["ns", "p", "main", "x/gpu", "2", "g0,g1", "0-1"]);
        assert_eq!(rows[3], ["ns", "p", "main", "cpu", "5", "0-3,8", "-"]);
        assert_eq!(rows[4], ["ns", "p", "main", "hugepages-2Mi", "64Mi", "-", "0"]);
        assert_eq!(rows[5], ["ns", "p", "main", "claim", "cl", "1", "d/pool/gpu-3", "-"]);
        assert!(s.contains("CDI DEVICES"), "{s}");
        assert!(s.contains("v/gpu=3"), "{s}");
    }

    #[test]
    fn wide_splits_by_numa() {
        let s = render(Format::Wide);
        assert!(s.contains("0:g0 1:g1"), "{s}");
        assert!(s.contains("SHARE ID"), "{s}");
    }

    #[test]
    fn rows_align_like_the_house_table() {
        let headers = vec!["NAMESPACE", "POD", "IDS"];
        let data = [["default", "web-0", "a,b"], ["kube-system", "p", ""], ["x", "a-much-longer-pod-name", "GPU-0"]];
        let mut rows = Rows::new(headers.clone());
        let mut t = table(headers);
        for d in data {
            rows.add_row(d.iter().map(|s| Cow::Borrowed(*s)).collect());
            t.add_row(d);
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        rows.write(&mut a).unwrap();
        write_table(&mut b, &t).unwrap();
        assert_eq!(String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap());
    }

    #[test]
    fn a_device_on_two_numa_nodes_is_one_device_in_every_table() {
        let dev = |id: &str, n: i64| DevicesView {
            resource_name: "x/gpu".into(),
            device_ids: vec![id.into()],
            numa_nodes: Some(vec![n]),
        };
        // The upstream encoding: g0 is on NUMA nodes 0 and 1.
        let devices = vec![dev("g0", 0), dev("g0", 1), dev("g1", 1)];
        let mut pods = sample();
        pods[0].containers[1].devices = devices.clone();
        let view = ListView { schema_version: SCHEMA_VERSION, api_version: Api::V1, pod_resources: pods };
        let mut out = Vec::new();
        list(&mut out, Format::Table, &view).unwrap();
        let s = String::from_utf8(out).unwrap();
        let row: Vec<&str> = s.lines().nth(2).unwrap().split_whitespace().collect();
        assert_eq!(row, ["ns", "p", "main", "x/gpu", "2", "g0,g1", "0-1"], "{s}");

        let report = AllocatableReport {
            schema_version: SCHEMA_VERSION,
            allocatable: crate::podresources::view::AllocatableView { devices, ..Default::default() },
        };
        let mut out = Vec::new();
        allocatable(&mut out, Format::Table, &report).unwrap();
        let s = String::from_utf8(out).unwrap();
        let rows: Vec<Vec<&str>> = s.lines().skip(1).map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(rows, [["x/gpu", "0-1", "1", "g0"], ["x/gpu", "1", "1", "g1"]], "{s}");
    }

    #[test]
    fn long_id_lists_are_cut_in_table_only() {
        let ids: Vec<String> = (0..10).map(|i| format!("d{i}")).collect();
        assert!(ids_cell(&ids, false).ends_with("(+2 more)"));
        assert_eq!(ids_cell(&ids, true).split(',').count(), 10);
    }
}
