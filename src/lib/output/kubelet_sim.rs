//! Renderers for `dpctl kubelet-sim`: its events (JSON Lines or one readable
//! line each), the live terminal view, status, admission outcomes, deletions,
//! restart reports and `--expect` results.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::time::{Duration, Instant};

use colored::Colorize;
use serde::Serialize;

use super::{Format, Streams, list, out_err, table, timestamp, write_json, write_json_line, write_table};
use crate::kubelet_sim::control::{Answer, RemoteError};
use crate::kubelet_sim::steer::ExpectResult;
use crate::kubelet_sim::{AdmitOutcome, DeleteOutcome, EventKind, ResourceStatus, RestartReport, SimEvent, SimStatus};
use crate::text::fmt_duration;

/// One event as a JSON line: `time`, `event`, then its fields.
#[derive(Serialize)]
struct EventLine<'a> {
    time: String,
    #[serde(flatten)]
    kind: &'a EventKind,
}

/// The event's name, as in the JSON `event` key.
pub fn event_name(kind: &EventKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.get("event").and_then(|e| e.as_str().map(String::from)))
        .unwrap_or_default()
}

fn ms(v: u64) -> String {
    fmt_duration(Duration::from_millis(v))
}

/// What a cleanup did beyond sockets, and what it left that the played
/// kubelet would have deleted (empty when neither).
fn cleanup_extra(deleted_files: &[String], would_delete: &[String]) -> String {
    let mut s = String::new();
    if !deleted_files.is_empty() {
        s.push_str(&format!("; deleted other files, as this kubelet version does: {}", deleted_files.join(", ")));
    }
    if !would_delete.is_empty() {
        s.push_str(&format!(
            "; kept (this kubelet version would delete them; the sim did not create this directory, \
             --emulate-cleanup deletes them): {}",
            would_delete.join(", ")
        ));
    }
    s
}

/// A one-line description of an event (without time and name).
/// long: one short arm per event kind, the catalogue of event texts in one
/// place, with no seam worth splitting.
pub fn event_detail(kind: &EventKind) -> String {
    match kind {
        EventKind::Started {
            kubelet_version,
            dir,
            kubelet_socket,
            podresources_socket,
            deleted_sockets,
            deleted_files,
            would_delete,
            restored_resources,
            ..
        } => {
            let mut s = format!("kubelet {}: serving {kubelet_socket}", kubelet_version.label());
            if let Some(p) = podresources_socket {
                s.push_str(&format!(", PodResources on {p}"));
            }
            s.push_str(&format!(" (dir {dir})"));
            if !deleted_sockets.is_empty() {
                s.push_str(&format!("; deleted stale sockets: {}", deleted_sockets.join(", ")));
            }
            s.push_str(&cleanup_extra(deleted_files, would_delete));
            if !restored_resources.is_empty() {
                s.push_str(&format!(
                    "; from the checkpoint, at 0 until their plugins register: {}",
                    restored_resources.join(", ")
                ));
            }
            s
        }
        EventKind::Registered {
            resource,
            endpoint,
            via,
            pre_start_required,
            get_preferred_allocation_available,
            request_options_differ,
            replaced,
            took_ms,
            ..
        } => {
            let mut s = format!(
                "{resource} via {via}, endpoint {endpoint} (pre_start_required={pre_start_required}, \
                 get_preferred_allocation_available={get_preferred_allocation_available}) in {}",
                ms(*took_ms)
            );
            if *replaced {
                s.push_str("; replaced the earlier registration");
            }
            if *request_options_differ {
                s.push_str("; note: the options in RegisterRequest differ from GetDevicePluginOptions (the kubelet uses the latter)");
            }
            s
        }
        EventKind::RegistrationRejected { resource, endpoint, via, message, .. } => {
            format!("{resource:?} (endpoint {endpoint:?}, via {via}): {message}")
        }
        EventKind::Snapshot { resource, seq, capacity, allocatable, devices, message_bytes, changes, violations } => {
            let mut s = format!(
                "{resource} #{seq}: capacity {capacity}, allocatable {allocatable} ({devices} devices, {message_bytes} bytes"
            );
            if *seq > 1 {
                s.push_str(&format!(", {}", crate::text::count(*changes, "change", "changes")));
            }
            s.push(')');
            for v in violations {
                s.push_str(&format!("; warning {}: {}", v.rule, v.evidence));
            }
            s
        }
        EventKind::HealthChanged { resource, id, from, to, capacity, allocatable } => {
            format!("{resource} {id}: {from} -> {to} (capacity {capacity}, allocatable {allocatable})")
        }
        EventKind::StreamEnded { resource, reason, capacity, grace_period_ms, .. } => format!(
            "{resource}: ListAndWatch ended ({reason}); allocatable 0, capacity {capacity} kept; \
             no retry: capacity drops to 0 in {} unless the plugin registers again",
            ms(*grace_period_ms)
        ),
        EventKind::StreamEndedUntracked { resource, reason, capacity, allocatable, .. } => format!(
            "{resource}: ListAndWatch ended ({reason}); the kubelet no longer tracks this client (a later Register \
             of {resource} failed or was refused), so it does not disconnect it: capacity {capacity}, allocatable \
             {allocatable} stay, no grace period"
        ),
        EventKind::StreamEndedFailover { resource, socket, now_serving, reason, capacity, allocatable } => format!(
            "{resource}: ListAndWatch of {socket} ended ({reason}); another endpoint of {resource} is still \
             connected, so the kubelet drops only this one and {now_serving} now serves it: capacity {capacity}, \
             allocatable {allocatable} stay, no grace period"
        ),
        EventKind::ResourceRemoved { resource } => {
            format!("{resource}: grace period over, capacity 0")
        }
        EventKind::Admitted { pod, namespace, containers, kept_in, .. } => {
            let parts: Vec<String> = containers
                .iter()
                .filter(|c| !c.devices.is_empty())
                .map(|c| {
                    let devs: Vec<String> = c.devices.iter().map(|(r, ids)| format!("{r}={}", ids.join(","))).collect();
                    format!("{} {}", c.name, devs.join(" "))
                })
                .collect();
            let kept = kept_in.as_ref().filter(|_| !parts.is_empty()).map(|k| format!(" (recorded in {k})"));
            if parts.is_empty() {
                format!("{namespace}/{pod} (no devices)")
            } else {
                format!("{namespace}/{pod}: {}{}", parts.join("; "), kept.unwrap_or_default())
            }
        }
        EventKind::AdmissionRejected { pod, namespace, reason, message } => {
            format!("{namespace}/{pod}: {reason}: {message}")
        }
        EventKind::ContainerStartFailed { pod, namespace, container, message } => {
            format!("{namespace}/{pod} container {container}: {message}")
        }
        EventKind::ContainerRestarted { pod, namespace, container, pre_start, started } => {
            let calls: Vec<String> = pre_start.iter().map(|(r, x)| format!("{r}: {x}")).collect();
            format!(
                "{namespace}/{pod} container {container} {}; PreStartContainer: {}",
                if *started { "started again" } else { "did not start" },
                if calls.is_empty() { "none (no devices)".to_string() } else { calls.join("; ") }
            )
        }
        EventKind::PodDeleted { pod, namespace, freed } => {
            let devs: Vec<String> = freed.iter().map(|(r, ids)| format!("{r}={}", ids.join(","))).collect();
            format!("{namespace}/{pod}; freed {}", if devs.is_empty() { "nothing".into() } else { devs.join(" ") })
        }
        EventKind::Restarting { resources } => format!("kubelet restart; expecting back: {}", list(resources)),
        EventKind::Restarted { deleted_sockets, deleted_files, would_delete, restored_pods, restored_resources } => {
            format!(
                "new kubelet.sock; deleted sockets: {}{}; pods restored: {restored_pods}; resources at 0 until \
                 re-registered: {}",
                list(deleted_sockets),
                cleanup_extra(deleted_files, would_delete),
                list(restored_resources)
            )
        }
        EventKind::PluginReregistered { resource, after_ms } => {
            format!("{resource} registered again {} after the restart", ms(*after_ms))
        }
        EventKind::RestartReport { report } => {
            let back = report.resources.iter().filter(|r| r.reregistered).count();
            format!(
                "{back}/{} back after {}{}",
                crate::text::count(report.resources.len(), "plugin", "plugins"),
                ms(report.waited_ms),
                if report.all_returned { "" } else { " (not all)" }
            )
        }
        EventKind::GracePeriodSet { grace_period_ms } => format!("grace period {}", ms(*grace_period_ms)),
        EventKind::RegistryPluginIgnored { socket, reason } => format!("{socket}: {reason}"),
        EventKind::CheckpointRead { checkpoint } => checkpoint_line(checkpoint),
        EventKind::CheckpointReadOnly { path, reason } => format!("{path}: {reason}"),
        EventKind::Stopped {} => "sockets removed".into(),
        EventKind::DraRegistered { driver, endpoint, service, .. } => format!("{driver} at {endpoint} ({service})"),
        EventKind::DraRegistrationRejected { socket, message, .. } => format!("{socket}: {message}"),
        EventKind::DraDeregistered { driver, endpoint } => format!("{driver} at {endpoint}"),
        EventKind::DraSlicesWiped { node, driver, slices, reason } => format!(
            "ResourceSlices of node {node}{} deleted ({reason}): {}",
            driver.as_ref().map(|d| format!(" and driver {d}")).unwrap_or_default(),
            if slices.is_empty() { "none".to_string() } else { slices.join(", ") }
        ),
        EventKind::DraHealthStream { driver, endpoint, service, error } => match error {
            None => format!("{driver} at {endpoint}: {service}/NodeWatchResources open"),
            Some(e) => format!("{driver} at {endpoint}: {service}/NodeWatchResources: {e} (tried again every 5 s)"),
        },
        EventKind::DraDeviceHealth { driver, pool, device, health, message } => {
            let note = if message.is_empty() { String::new() } else { format!(" ({message})") };
            format!("{driver} {pool}/{device}: {health}{note}")
        }
        EventKind::DraPrepared { pod, namespace, calls, error }
        | EventKind::DraUnprepared { pod, namespace, calls, error } => {
            let rpcs: Vec<String> = calls.iter().map(|c| format!("{} {}", c.driver, c.rpc)).collect();
            format!(
                "{namespace}/{pod}: {}{}",
                list(&rpcs),
                error.as_ref().map(|e| format!("; {e}")).unwrap_or_default()
            )
        }
    }
}

/// One line about the checkpoint found at start.
fn checkpoint_line(c: &crate::kubelet_sim::CheckpointStatus) -> String {
    let sums = match (c.stored_checksum, c.computed_checksum) {
        (Some(s), Some(k)) if s == k => format!(", checksum {s} verifies"),
        (Some(s), Some(k)) => format!(", stored checksum {s}, computed {k}"),
        _ => String::new(),
    };
    let mut line = match c.found.as_str() {
        "none" => format!("{}: none at start", c.path),
        "valid" => format!(
            "{}: valid{sums}; restored {}",
            c.path,
            crate::text::count(c.restored_entries as u64, "entry", "entries")
        ),
        other => format!("{}: {other}{sums}", c.path),
    };
    if let Some(e) = &c.error {
        line.push_str(&format!("; {e}"));
    }
    line
}

/// True for events that report a problem (colored red in text).
fn is_problem(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::RegistrationRejected { .. }
            | EventKind::StreamEnded { .. }
            | EventKind::StreamEndedUntracked { .. }
            | EventKind::ResourceRemoved { .. }
            | EventKind::AdmissionRejected { .. }
            | EventKind::ContainerStartFailed { .. }
            | EventKind::RegistryPluginIgnored { .. }
            | EventKind::CheckpointReadOnly { .. }
            | EventKind::DraRegistrationRejected { .. }
    ) || matches!(kind, EventKind::CheckpointRead { checkpoint } if checkpoint.error.is_some())
        || matches!(
            kind,
            EventKind::DraPrepared { error: Some(_), .. } | EventKind::DraUnprepared { error: Some(_), .. }
        )
}

/// Renders one event: a JSON line, or `time  name  detail`.
pub fn event(w: &mut dyn Write, format: Format, ev: &SimEvent) -> io::Result<()> {
    if format.is_json() {
        return write_json_line(w, &EventLine { time: timestamp(ev.time), kind: &ev.kind });
    }
    writeln!(w, "{}", event_text(ev))?;
    w.flush()
}

/// An event as one readable line.
pub fn event_text(ev: &SimEvent) -> String {
    let name = format!("{:<20}", event_name(&ev.kind));
    let name = if is_problem(&ev.kind) { name.red().bold().to_string() } else { name.bold().to_string() };
    format!("{} {} {}", timestamp(ev.time).dimmed(), name, event_detail(&ev.kind))
}

/// Renders the status: resources, then pods.
pub fn status(w: &mut dyn Write, format: Format, s: &SimStatus) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, s);
    }
    let by = if s.engine == crate::kubelet_sim::default_engine() { "simulated".to_string() } else { s.engine.clone() };
    writeln!(w, "kubelet {} ({by}){}", s.kubelet_version.label(), if s.running { "" } else { ", stopped" })?;
    for line in status_lines(s, format == Format::Wide, super::width(), super::Fit::Cut) {
        writeln!(w, "{line}")?;
    }
    if let Some(d) = &s.dra {
        for i in &d.drivers {
            let health = i.health.map_or_else(|| "no health stream".to_string(), |h| h.advertised().to_string());
            writeln!(w, "dra driver {} at {} ({}; {health})", i.driver, i.endpoint, i.service.advertised())?;
        }
        for h in &d.device_health {
            let note = if h.message.is_empty() { String::new() } else { format!(" ({})", h.message) };
            writeln!(w, "dra device {} {}/{}: {}{note}", h.driver, h.pool, h.device, h.health)?;
        }
        for c in &d.claims {
            let devices: Vec<String> = c
                .drivers
                .iter()
                .flat_map(|(dr, l)| l.iter().map(move |x| format!("{dr}/{}/{}", x.pool, x.device)))
                .collect();
            let state = if c.prepared { "prepared" } else { "restored, not prepared" };
            writeln!(
                w,
                "dra claim {}/{} ({}): {state}; pods {}; devices {}",
                c.namespace,
                c.name,
                c.uid,
                c.pods.len(),
                list(&devices)
            )?;
        }
    }
    Ok(())
}

/// One row of the status's resource table.
fn resource_row(r: &ResourceStatus, running: bool, wide: bool) -> Vec<String> {
    let mut opts = Vec::new();
    if r.get_preferred_allocation_available {
        opts.push("preferred");
    }
    if r.pre_start_required {
        opts.push("pre-start");
    }
    let state = match r.removal_in_ms {
        Some(left) if r.state != "removed" && running => format!("{} (0 in {})", r.state, ms(left)),
        _ => r.state.clone(),
    };
    let (cap, alloc) = if r.reported {
        (r.capacity.to_string(), r.allocatable.to_string())
    } else {
        ("-".to_string(), "-".to_string())
    };
    let plugin = match (&r.endpoint, r.via) {
        (Some(e), Some(v)) => format!("{e} ({v})"),
        _ => "-".into(),
    };
    let mut row = vec![
        r.resource.clone(),
        state,
        cap,
        alloc,
        r.in_use.to_string(),
        plugin,
        if opts.is_empty() { "-".into() } else { opts.join(",") },
    ];
    if wide {
        let devs: Vec<String> = r
            .devices
            .iter()
            .map(|d| {
                let h = if d.is_healthy() { String::new() } else { format!("({})", d.health) };
                format!("{}{h}@{}", d.id, super::numa(d.numa_nodes.as_deref()))
            })
            .collect();
        row.push(list(&devs));
    }
    row
}

/// The status as lines, its tables fitted to `width` by `fit`.
fn status_lines(s: &SimStatus, wide: bool, width: Option<usize>, fit: super::Fit) -> Vec<String> {
    let mut out = Vec::new();
    let dra_drivers = s.dra.as_ref().map_or(0, |d| d.drivers.len());
    if s.resources.is_empty() && dra_drivers > 0 {
        out.push("no device-plugin resources: no device plugin has registered on kubelet.sock".to_string());
    } else if s.resources.is_empty() {
        out.push("no resources: no plugin has registered yet".to_string());
    } else {
        let mut headers = vec!["RESOURCE", "STATE", "CAPACITY", "ALLOCATABLE", "IN-USE", "PLUGIN", "OPTIONS"];
        if wide {
            headers.push("DEVICES");
        }
        let mut t = table(headers);
        for r in &s.resources {
            t.add_row(resource_row(r, s.running, wide));
        }
        out.extend(super::table_lines(&t, width, fit));
        for r in s.resources.iter().filter(|r| r.state != "serving") {
            if let Some(why) = &r.stream_end_reason {
                out.push(format!("{}: stream ended: {why}", r.resource));
            }
        }
    }
    out.push(String::new());
    if s.pods.is_empty() && s.restored_pods.is_empty() {
        out.push("no pods".to_string());
    } else {
        let mut t = table(["POD", "CONTAINER", "KIND", "DEVICES"]);
        for p in &s.pods {
            for c in &p.containers {
                let devs: Vec<String> = c.devices.iter().map(|(r, ids)| format!("{r}={}", ids.join(","))).collect();
                t.add_row([
                    format!("{}/{}", p.namespace, p.name),
                    c.name.clone(),
                    serde_json::to_value(c.kind).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default(),
                    list(&devs),
                ]);
            }
        }
        // Known from the checkpoint only: no name, no kind.
        for p in &s.restored_pods {
            for c in &p.containers {
                let devs: Vec<String> = c.devices.iter().map(|(r, ids)| format!("{r}={}", ids.join(","))).collect();
                t.add_row([format!("uid {} (checkpoint)", p.uid), c.name.clone(), "-".into(), list(&devs)]);
            }
        }
        out.extend(super::table_lines(&t, width, fit));
    }
    if s.refused_over_limit > 0 {
        out.push(String::new());
        out.push(format!(
            "refused {}: the sim tracks at most {} distinct resource names",
            crate::text::count(s.refused_over_limit, "Register call", "Register calls"),
            s.resource_limit
        ));
    }
    if let Some(c) = &s.checkpoint {
        out.push(String::new());
        out.push(format!("checkpoint {}", checkpoint_line(c)));
        let writes = if c.writes { "writes it" } else { "does NOT write it" };
        out.push(format!("  the sim {writes}: {}", c.ownership));
        if let Some(k) = &c.kept_in {
            out.push(format!("  admitted pods are recorded in {k}"));
        }
        if c.journal_entries > 0 {
            out.push(format!(
                "  restored {} from the sim's own allocations file",
                crate::text::count(c.journal_entries as u64, "entry", "entries")
            ));
        }
        if let Some(e) = &c.journal_error {
            out.push(format!("  the sim's own allocations file was not used: {e}"));
        }
    }
    out
}

/// How `kubelet-sim` shows its events: JSON Lines or one line per event on
/// stdout, or a live view on stderr redrawn in place (a terminal, no `-o json`).
#[derive(Debug)]
pub enum EventDisplay {
    /// JSON Lines on stdout.
    Json,
    /// One text line per event on stdout.
    Lines,
    /// The live view on stderr.
    Live(LiveView),
}

/// The state of the live view: the last events and when it was drawn.
#[derive(Debug)]
pub struct LiveView {
    lines: usize,
    recent: VecDeque<SimEvent>,
    width: usize,
    drawn: Option<Instant>,
    dirty: bool,
}

/// Events the live view keeps on screen.
const LIVE_RECENT: usize = 12;

impl EventDisplay {
    /// A live view `width` columns wide.
    pub fn live(width: usize) -> Self {
        EventDisplay::Live(LiveView { lines: 0, recent: VecDeque::new(), width, drawn: None, dirty: false })
    }

    /// Shows one event: a line on `out`, or a new frame on `err` (at most 10
    /// frames a second; [`EventDisplay::tick`] draws what was held back).
    pub fn show(
        &mut self,
        out: &mut dyn Write,
        err: &mut dyn Write,
        status: &dyn Fn() -> SimStatus,
        ev: SimEvent,
    ) -> io::Result<()> {
        match self {
            EventDisplay::Json => event(out, Format::Json, &ev),
            EventDisplay::Lines => event(out, Format::Table, &ev),
            EventDisplay::Live(live) => {
                live.recent.push_back(ev);
                while live.recent.len() > LIVE_RECENT {
                    live.recent.pop_front();
                }
                if live.drawn.is_some_and(|d| d.elapsed() < Duration::from_millis(100)) {
                    live.dirty = true;
                    return Ok(());
                }
                live.redraw(err, status)
            }
        }
    }

    /// Called every 200ms: redraws what was held back, and once a second
    /// for the countdowns.
    pub fn tick(&mut self, err: &mut dyn Write, status: &dyn Fn() -> SimStatus) -> io::Result<()> {
        match self {
            EventDisplay::Live(live)
                if live.dirty || live.drawn.is_none_or(|d| d.elapsed() >= Duration::from_secs(1)) =>
            {
                live.redraw(err, status)
            }
            _ => Ok(()),
        }
    }

    /// Leaves the last frame of a live view on screen, followed by a newline.
    pub fn finish(&mut self, err: &mut dyn Write, status: &dyn Fn() -> SimStatus) -> io::Result<()> {
        if let EventDisplay::Live(live) = self {
            live.redraw(err, status)?;
            writeln!(err)?;
        }
        Ok(())
    }
}

impl LiveView {
    /// Redraws the view on `err`, replacing the previous frame.
    fn redraw(&mut self, err: &mut dyn Write, status: &dyn Fn() -> SimStatus) -> io::Result<()> {
        let recent: Vec<SimEvent> = self.recent.iter().cloned().collect();
        // The real size at every frame: a resized terminal gets a frame that fits.
        let (width, height) = terminal_size().unwrap_or((self.width, 40));
        let frame = live_frame(&status(), &recent, width, height);
        self.drawn = Some(Instant::now());
        self.dirty = false;
        if self.lines > 0 {
            write!(err, "\x1b[{}A\x1b[J", self.lines)?;
        }
        // The frame's text (plugins' resource names, drivers' errors) made
        // safe; the cursor moves above are the view's own.
        for l in &frame {
            writeln!(err, "{}", super::layout::clean_line(l))?;
        }
        err.flush()?;
        self.lines = frame.len();
        Ok(())
    }
}

/// The live view's DRA lines: the API server drivers are given, and each
/// registered driver.
fn dra_head(s: &SimStatus) -> Vec<String> {
    let Some(d) = &s.dra else { return vec![] };
    let mut out = vec![match &d.api {
        Some(a) => format!("API server {} (kubeconfig {}; {})", a.server, a.kubeconfig, a.from),
        None => "no API server: helper-built DRA drivers need one (--api-objects FILE or --kubeconfig FILE)".into(),
    }];
    if d.drivers.is_empty() {
        out.push("no DRA driver has registered on plugins_registry yet".into());
    }
    for i in &d.drivers {
        out.push(format!("DRA driver {} at {} ({})", i.driver, i.endpoint, i.service.advertised()));
    }
    out
}

/// The live view: header, status and the most recent events, as lines at
/// most `width` wide and fewer than `height` (older events go first, then
/// the bottom of the status, so the header never scrolls away).
pub fn live_frame(s: &SimStatus, recent: &[SimEvent], width: usize, height: usize) -> Vec<String> {
    let mut out = vec![
        format!(
            "{} {}{}  {}  grace {}  restarts {}",
            "kubelet-sim".bold(),
            s.kubelet_version.label(),
            if s.running { "" } else { " (stopped)" },
            s.kubelet_socket,
            ms(s.grace_period_ms),
            s.restarts
        ),
        match &s.podresources_socket {
            Some(p) => format!("PodResources on {p}"),
            None => "PodResources not served".into(),
        },
    ];
    out.extend(dra_head(s));
    out.push(String::new());
    out.extend(status_lines(s, false, Some(width), super::Fit::Live));
    out.push(String::new());
    out.push("RECENT EVENTS".bold().to_string());
    // Room for the events: the frame keeps one line free (the cursor's) and the footer (2 lines).
    let room = height.saturating_sub(1 + out.len() + 2);
    let recent = recent.get(recent.len().saturating_sub(room.max(1))..).unwrap_or(recent);
    if recent.is_empty() {
        out.push("(waiting for plugins to register on kubelet.sock)".dimmed().to_string());
    }
    for ev in recent {
        let name = format!("{:<20}", event_name(&ev.kind));
        let name = if is_problem(&ev.kind) { name.red().to_string() } else { name };
        let time = humantime::format_rfc3339_seconds(ev.time).to_string();
        let clock = time.get(11..19).unwrap_or(&time).to_string();
        out.push(format!("{} {} {}", clock.dimmed(), name, event_detail(&ev.kind)));
    }
    out.push(String::new());
    if s.running {
        out.push("Ctrl-C to stop".dimmed().to_string());
    }
    out.truncate(height.saturating_sub(1).max(3));
    out.into_iter().map(|l| super::layout::cut(&l, width)).collect()
}

/// Renders an admission outcome.
pub fn admit(w: &mut dyn Write, format: Format, o: &AdmitOutcome) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, o);
    }
    let who = format!("{}/{}", o.namespace, o.pod);
    let dry = o.topology.as_ref().is_some_and(|t| t.dry_run);
    if o.topology.as_ref().is_some_and(|t| t.beside_admitted) {
        writeln!(w, "{who} is already admitted and keeps its devices; judged as a second pod like it:")?;
    }
    if o.admitted && dry {
        writeln!(w, "{} {who}", "would be admitted".green().bold())?;
    } else if o.admitted {
        writeln!(w, "{} {who} (uid {}) in {}", "admitted".green().bold(), o.uid, ms(o.took_ms))?;
        if let Some(k) = &o.kept_in {
            writeln!(w, "recorded in {k}")?;
        }
    } else {
        writeln!(
            w,
            "{} {who}: {}: {}",
            if dry { "would be rejected".red().bold() } else { "rejected".red().bold() },
            o.reason.as_deref().unwrap_or_default(),
            o.message.as_deref().unwrap_or_default()
        )?;
    }
    let mut t =
        table(["CONTAINER", "KIND", "RESOURCE", "DEVICES", "REUSED", "PREFERRED (ASKED -> ANSWER)", "PRE-START"]);
    let mut rows = 0;
    for c in &o.containers {
        let kind = serde_json::to_value(c.kind).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        for r in &c.resources {
            let pref = match &r.preferred {
                Some(p) => format!("{} of {} -> {}", p.size, list(&p.available), list(&p.answer)),
                None => "-".into(),
            };
            t.add_row([
                c.name.clone(),
                kind.clone(),
                r.resource.clone(),
                list(&r.devices),
                list(&r.reused),
                pref,
                r.pre_start.clone().unwrap_or_else(|| "-".into()),
            ]);
            rows += 1;
        }
    }
    if rows > 0 {
        write_table(w, &t)?;
    }
    if let Some(topo) = &o.topology {
        super::topology::report(w, topo)?;
    }
    if let Some(d) = &o.dra {
        dra_lines(w, d)?;
    }
    for c in &o.containers {
        if let Some(e) = &c.start_error {
            writeln!(w, "{} container {}: {e}", "not started:".red().bold(), c.name)?;
        }
        for r in &c.resources {
            let pw = r.preferred.iter().flat_map(|p| p.warnings.iter());
            for x in r.warnings.iter().chain(pw) {
                writeln!(w, "{} {} {}: {}: {}", "warning:".yellow().bold(), c.name, r.resource, x.rule, x.evidence)?;
            }
        }
    }
    Ok(())
}

/// Renders a deletion.
pub fn delete(w: &mut dyn Write, format: Format, d: &DeleteOutcome) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, d);
    }
    let devs: Vec<String> = d.freed.iter().map(|(r, ids)| format!("{r}={}", ids.join(","))).collect();
    writeln!(
        w,
        "deleted {}/{}; freed {}",
        d.namespace,
        d.pod,
        if devs.is_empty() { "no devices".to_string() } else { devs.join(" ") }
    )?;
    if let Some(x) = &d.dra {
        dra_lines(w, x)?;
        if !x.unprepared.is_empty() {
            writeln!(w, "unprepared {}", list(&x.unprepared))?;
        }
    }
    Ok(())
}

/// The DRA manager's calls, its error and the CDI IDs per container.
fn dra_lines(w: &mut dyn Write, d: &crate::kubelet_sim::DraOutcome) -> io::Result<()> {
    for c in &d.calls {
        writeln!(w, "dra: {} {} {} ({})", c.driver, c.rpc, list(&c.claims), ms(c.took_ms))?;
    }
    for (container, ids) in &d.cdi_devices {
        writeln!(w, "cdi: container {container}: {}", list(ids))?;
    }
    if let Some(e) = &d.error {
        writeln!(w, "{} {e}", "dra failed:".red().bold())?;
    }
    Ok(())
}

/// Renders a container restart.
pub fn restart_container(w: &mut dyn Write, format: Format, r: &crate::kubelet_sim::RestartOutcome) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, r);
    }
    writeln!(
        w,
        "{}/{} container {}: {}",
        r.namespace,
        r.pod,
        r.container,
        match &r.start_error {
            None => "started again".green().to_string(),
            Some(e) => format!("{} ({e})", "did not start".red().bold()),
        }
    )?;
    for (res, x) in &r.pre_start {
        writeln!(w, "  PreStartContainer {res}: {x}")?;
    }
    Ok(())
}

/// Renders a restart report.
pub fn restart(w: &mut dyn Write, format: Format, r: &RestartReport) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, r);
    }
    writeln!(
        w,
        "restarted kubelet {}: deleted sockets {}{}; {} their devices; waited {}",
        r.kubelet_version.label(),
        list(&r.deleted_sockets),
        cleanup_extra(&r.deleted_files, &r.would_delete),
        if r.restored_pods == 1 { "1 pod kept".to_string() } else { format!("{} pods kept", r.restored_pods) },
        ms(r.waited_ms)
    )?;
    if r.dra_restored_claims > 0 {
        writeln!(
            w,
            "dra: {} restored from dra_manager_state (prepared again by a new user or after a reboot)",
            crate::text::count(r.dra_restored_claims, "claim", "claims")
        )?;
    }
    if r.resources.is_empty() {
        writeln!(w, "no resources were registered before the restart")?;
        return readmitted(w, r);
    }
    let mut t = table(["RESOURCE", "BACK", "REGISTERED AFTER", "FIRST SNAPSHOT AFTER", "CAPACITY", "ALLOCATABLE"]);
    for x in &r.resources {
        t.add_row([
            x.resource.clone(),
            if x.reregistered { "yes".green().to_string() } else { "no".red().bold().to_string() },
            x.register_after_ms.map_or_else(|| "-".into(), ms),
            x.first_snapshot_after_ms.map_or_else(|| "-".into(), ms),
            x.capacity.to_string(),
            x.allocatable.to_string(),
        ]);
    }
    write_table(w, &t)?;
    if !r.all_returned {
        writeln!(
            w,
            "\n{} a plugin that does not register again after a kubelet restart stays at 0 devices, and pods \
             asking for it fail with UnexpectedAdmissionError",
            "not all plugins came back:".red().bold()
        )?;
    }
    readmitted(w, r)
}

/// The pods admitted again after a restart, with their running containers.
fn readmitted(w: &mut dyn Write, r: &RestartReport) -> io::Result<()> {
    if r.readmitted.is_empty() {
        return Ok(());
    }
    writeln!(w)?;
    let skips = r.kubelet_version.skips_running_containers_after_restart();
    let mut t = table(["POD", "RESULT", "CONTAINERS (DEVICES KEPT)", "WHY"]);
    for p in &r.readmitted {
        let containers: Vec<String> = p
            .containers
            .iter()
            .filter(|c| !c.resources.is_empty())
            .map(|c| {
                let ids: Vec<&str> = c.resources.iter().flat_map(|x| x.devices.iter().map(String::as_str)).collect();
                let how = match c.running {
                    Some(true) if skips => "running, not checked",
                    Some(true) => "running, checked",
                    _ => "not running, checked",
                };
                format!("{} {} ({how})", c.name, ids.join(","))
            })
            .collect();
        t.add_row([
            format!("{}/{}", p.namespace, p.pod),
            if p.admitted { "kept".green().to_string() } else { "rejected".red().bold().to_string() },
            if containers.is_empty() { "-".into() } else { containers.join("; ") },
            match (&p.reason, &p.message) {
                (Some(r), Some(m)) => format!("{r}: {m}"),
                _ => "-".into(),
            },
        ]);
    }
    write_table(w, &t)?;
    if r.readmitted.iter().any(|p| !p.admitted) {
        writeln!(
            w,
            "\n{} the kubelet admits every pod again after a restart; a container that is not running (a \
             completed init container) has its devices checked, and a plugin not back yet fails the pod with \
             UnexpectedAdmissionError, killing its running containers: see docs/kubelet-versions.md §10",
            "rejected after the restart:".red().bold()
        )?;
    }
    Ok(())
}

/// Renders a reboot: every pod admitted again, in order, and why the
/// rejected ones failed.
pub fn reboot(w: &mut dyn Write, format: Format, r: &crate::kubelet_sim::RebootReport) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, r);
    }
    let rejected = r.rejected().count();
    writeln!(
        w,
        "rebooted the node: containers gone, checkpoint kept; {} admitted again, {rejected} rejected",
        crate::text::count(r.pods.len() - rejected, "pod", "pods")
    )?;
    if r.pods.is_empty() {
        return Ok(());
    }
    let mut t = table(["ORDER", "POD", "RESULT", "DEVICES", "WHY"]);
    for (i, p) in r.pods.iter().enumerate() {
        let devices: Vec<String> =
            p.containers.iter().flat_map(|c| c.resources.iter().flat_map(|x| x.devices.iter().cloned())).collect();
        t.add_row([
            (i + 1).to_string(),
            format!("{}/{}", p.namespace, p.pod),
            if p.admitted { "admitted".green().to_string() } else { "rejected".red().bold().to_string() },
            if devices.is_empty() { "-".into() } else { devices.join(",") },
            match (&p.reason, &p.message) {
                (Some(r), Some(m)) => format!("{r}: {m}"),
                _ => "-".into(),
            },
        ]);
    }
    write_table(w, &t)?;
    if rejected > 0 {
        writeln!(
            w,
            "\n{} a pod admitted before its plugin registers again is rejected for good (the kubelet does not retry; \
             a bare pod stays failed, a controller makes a new one): see docs/kubelet-versions.md §10",
            "rejected after the reboot:".red().bold()
        )?;
    }
    Ok(())
}

/// The `--expect` verdict, rendered as a final event line.
#[derive(Debug, Clone, Serialize)]
pub struct ExpectView {
    /// RFC 3339 time.
    pub time: String,
    /// Always `expectations`.
    pub event: &'static str,
    /// Every expectation holds.
    pub met: bool,
    /// Per expectation.
    pub results: Vec<ExpectResult>,
}

/// Renders the `--expect` verdict.
pub fn expectations(w: &mut dyn Write, format: Format, v: &ExpectView) -> io::Result<()> {
    if format.is_json() {
        return write_json_line(w, v);
    }
    let parts: Vec<String> = v
        .results
        .iter()
        .map(|r| {
            let seen = r.allocatable.map_or_else(|| "not in node status".to_string(), |a| format!("allocatable {a}"));
            format!("{} {seen} (expected {})", r.resource, r.expected)
        })
        .collect();
    let word = if v.met { "expectations met".green().bold() } else { "expectations NOT met".red().bold() };
    writeln!(w, "{word}: {}", parts.join("; "))?;
    w.flush()
}

/// Renders a running sim's answer to a steering command (`admit`, `delete`, ...).
pub fn answer(w: &mut dyn Write, format: Format, a: &Answer) -> io::Result<()> {
    match a {
        Answer::Admit(o) => admit(w, format, o),
        Answer::Delete(d) => delete(w, format, d),
        Answer::Restart(r) => restart(w, format, r),
        Answer::Reboot(r) => reboot(w, format, r),
        Answer::RestartContainer(r) => restart_container(w, format, r),
        Answer::Status(s) => status(w, format, s),
        Answer::SetGrace { grace_period_ms } if format.is_json() => {
            write_json(w, &serde_json::json!({ "grace_period_ms": grace_period_ms }))
        }
        Answer::SetGrace { grace_period_ms } => {
            writeln!(w, "grace period set to {}", fmt_duration(Duration::from_millis(*grace_period_ms)))
        }
        Answer::Events { events, .. } => {
            // One JSON object per line, as `kubelet-sim --json` streams events.
            for e in events {
                serde_json::to_writer(&mut *w, e).map_err(io::Error::other)?;
                writeln!(w)?;
            }
            Ok(())
        }
    }
}

/// Shows a running sim's answer, or the error it sent back (on stderr, as
/// dpctl's own errors read).
pub fn steered(s: &mut Streams<'_>, reply: &std::result::Result<Answer, RemoteError>) -> crate::Result<()> {
    match reply {
        Ok(a) => answer(s.out, s.format, a).map_err(out_err),
        Err(remote) => super::write_error(&mut *s.err, &remote.message, remote.hint.as_deref()).map_err(out_err),
    }
}

/// Writes the `--expect` verdict: data, so on stdout in every mode.
pub fn expect_verdict(s: &mut Streams<'_>, results: Vec<ExpectResult>, met: bool) -> crate::Result<()> {
    let view = ExpectView { time: timestamp(std::time::SystemTime::now()), event: "expectations", met, results };
    let format = if s.format.is_json() { Format::Json } else { Format::Table };
    expectations(s.out, format, &view).map_err(out_err)
}

/// The size (columns, rows) of the terminal on stderr, where the live view
/// is drawn; `None` when stderr is not a terminal.
fn terminal_size() -> Option<(usize, usize)> {
    super::terminal_size(libc::STDERR_FILENO)
}

/// The terminal width from the terminal, `COLUMNS`, or 120.
pub fn terminal_width() -> usize {
    if let Some((w, _)) = terminal_size() {
        return w;
    }
    std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()).filter(|w: &usize| *w >= 40).unwrap_or(120)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    #[test]
    fn events_as_json_lines_have_time_and_event() {
        let ev = SimEvent {
            time: SystemTime::UNIX_EPOCH,
            kind: EventKind::HealthChanged {
                resource: "example.com/gpu".into(),
                id: "g0".into(),
                from: "Healthy".into(),
                to: "Unhealthy".into(),
                capacity: 2,
                allocatable: 1,
            },
        };
        let mut out = Vec::new();
        event(&mut out, Format::Json, &ev).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["event"], "health_changed");
        assert_eq!(v["time"], "1970-01-01T00:00:00.000Z");
        assert_eq!(v["allocatable"], 1);
        colored::control::set_override(false);
        let line = event_text(&ev);
        assert!(line.contains("health_changed") && line.contains("g0: Healthy -> Unhealthy"), "{line}");
    }

    /// The live view draws at most 10 frames a second: an event right after
    /// a frame is held back, and the tick draws it, replacing the old frame.
    /// A running sim's status with one resource and one pod.
    fn status_fixture() -> SimStatus {
        serde_json::from_value(serde_json::json!({
            "dir": "/tmp/dp", "kubelet_socket": "/tmp/dp/kubelet.sock",
            "podresources_socket": "/tmp/dp/pod-resources.sock", "control_socket": null, "running": true,
            "grace_period_ms": 300000, "restarts": 1,
            "resources": [{"resource": "example.com/gpu", "state": "serving", "reported": true, "capacity": 4,
                "allocatable": 3, "in_use": 1, "socket": "/tmp/dp/gpu.sock", "endpoint": "gpu.sock",
                "via": "kubelet.sock", "pre_start_required": false, "get_preferred_allocation_available": true,
                "snapshots": 2, "registrations": 1, "removal_in_ms": null, "devices": []}],
            "pods": [{"name": "p", "namespace": "default", "uid": "u",
                "containers": [{"name": "c0", "kind": "regular", "devices": {"example.com/gpu": ["g1"]}}]}]
        }))
        .expect("a status")
    }

    #[test]
    fn the_live_view_holds_back_fast_events_and_the_tick_draws_them() {
        let sim = status_fixture();
        let status = || sim.clone();
        let ev = |id: &str| SimEvent {
            time: SystemTime::UNIX_EPOCH,
            kind: EventKind::HealthChanged {
                resource: "example.com/gpu".into(),
                id: id.into(),
                from: "Healthy".into(),
                to: "Unhealthy".into(),
                capacity: 2,
                allocatable: 1,
            },
        };
        colored::control::set_override(false);
        let mut display = EventDisplay::live(120);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        display.show(&mut out, &mut err, &status, ev("g0")).unwrap();
        let first = String::from_utf8_lossy(&err).into_owned();
        assert!(first.contains("g0: Healthy -> Unhealthy") && !first.contains("\x1b["), "{first}");
        display.show(&mut out, &mut err, &status, ev("g1")).unwrap();
        assert_eq!(String::from_utf8_lossy(&err), first, "held back within 100ms");
        display.tick(&mut err, &status).unwrap();
        let drawn = String::from_utf8_lossy(&err).into_owned();
        let second = &drawn[first.len()..];
        assert!(second.starts_with("\x1b[") && second.contains("g1: Healthy -> Unhealthy"), "{second}");
        display.finish(&mut err, &status).unwrap();
        assert!(String::from_utf8_lossy(&err).ends_with("\n\n"));
        assert!(out.is_empty(), "the live view writes nothing on stdout");
    }

    #[test]
    fn live_frame_shows_resources_pods_and_recent_events() {
        colored::control::set_override(false);
        let status = status_fixture();
        let ev =
            SimEvent { time: SystemTime::UNIX_EPOCH, kind: EventKind::ResourceRemoved { resource: "x.io/y".into() } };
        let frame = live_frame(&status, std::slice::from_ref(&ev), 200, 50);
        let text = frame.join("\n");
        assert!(text.contains("grace 5m  restarts 1"), "{text}");
        let row = frame.iter().find(|l| l.starts_with("example.com/gpu")).unwrap();
        assert_eq!(
            row.split_whitespace().collect::<Vec<_>>(),
            ["example.com/gpu", "serving", "4", "3", "1", "gpu.sock", "(kubelet.sock)", "preferred"]
        );
        assert!(text.contains("default/p   c0") && text.contains("example.com/gpu=g1"), "{text}");
        assert!(
            text.contains("00:00:00 resource_removed") && text.contains("x.io/y: grace period over, capacity 0"),
            "{text}"
        );
        assert!(live_frame(&status, &[], 20, 50).iter().all(|l| l.chars().count() <= 20));
        // 80x24: the header stays on screen, the frame fits, the newest events are the ones kept.
        let many: Vec<SimEvent> = (0..30).map(|_| ev.clone()).collect();
        let small = live_frame(&status, &many, 80, 24);
        assert!(small.len() < 24, "{} lines: {small:#?}", small.len());
        assert!(small[0].starts_with("kubelet-sim 1.37"), "{small:#?}");
        assert!(small.iter().any(|l| l.contains("resource_removed")), "{small:#?}");
        // 80 columns: the pods table keeps every column (DEVICES last), cells cut with a marker.
        let at80 = live_frame(&status, &[], 80, 50);
        assert!(at80.iter().any(|l| l.starts_with("POD") && l.contains("DEVICES")), "{at80:#?}");
        assert!(at80.iter().all(|l| l.chars().count() <= 80), "{at80:#?}");
        let at50 = live_frame(&status, &[], 50, 50);
        assert!(at50.iter().any(|l| l.starts_with("POD") && l.contains("DEVI")), "{at50:#?}");
        assert!(at50.iter().filter(|l| l.chars().count() == 50).all(|l| l.ends_with('…')), "{at50:#?}");
        // A wide terminal: long lines are not cut at 120.
        let wide = live_frame(&status, &[ev], 300, 50).join("\n");
        assert!(wide.contains("x.io/y: grace period over, capacity 0"), "{wide}");
    }

    /// With DRA drivers registered and no device plugin, the view says so
    /// (not "no plugin has registered yet"), names the API server and its
    /// kubeconfig, and each driver.
    #[test]
    fn live_frame_names_the_api_server_and_dra_drivers() {
        use crate::kubelet_sim::{ApiView, DraInstance, DraStatus};
        colored::control::set_override(false);
        let mut status = status_fixture();
        status.resources.clear();
        let driver = DraInstance {
            driver: "gpu.example.com".into(),
            endpoint: "/k/plugins/gpu.example.com/dra.sock".into(),
            socket: "/k/plugins/gpu.example.com/dra.sock".into(),
            registration: "/k/plugins_registry/gpu.example.com-reg.sock".into(),
            service: crate::dra::NodeApi::V1,
            health: None,
        };
        let api = ApiView {
            server: "http://127.0.0.1:40001".into(),
            kubeconfig: "/k/kubeconfig".into(),
            from: "--api-objects".into(),
        };
        status.dra = Some(Box::new(DraStatus { drivers: vec![driver], api: Some(api), ..DraStatus::default() }));
        let text = live_frame(&status, &[], 200, 50).join("\n");
        assert!(text.contains("API server http://127.0.0.1:40001 (kubeconfig /k/kubeconfig; --api-objects)"), "{text}");
        assert!(
            text.contains("DRA driver gpu.example.com at /k/plugins/gpu.example.com/dra.sock (v1.DRAPlugin)"),
            "{text}"
        );
        assert!(text.contains("no device-plugin resources: no device plugin has registered on kubelet.sock"), "{text}");
        assert!(!text.contains("no plugin has registered yet"), "{text}");
        status.dra = Some(Box::default());
        let text = live_frame(&status, &[], 200, 50).join("\n");
        assert!(
            text.contains("no API server: helper-built DRA drivers need one (--api-objects FILE or --kubeconfig FILE)"),
            "{text}"
        );
        assert!(text.contains("no DRA driver has registered on plugins_registry yet"), "{text}");
    }

    #[test]
    fn truncation_keeps_escapes() {
        assert_eq!(crate::output::layout::cut("abcdef", 3), "ab…");
        let t = crate::output::layout::cut("\x1b[1mabcdef\x1b[0m", 2);
        assert!(t.starts_with("\x1b[1ma\x1b[0m…"), "{t:?}");
    }
}

/// What `kubelet-sim --engine referee:PATH` serves, for [`referee_serving`].
#[derive(Debug, Clone, Serialize)]
pub struct RefereeView {
    /// `referee v1.N.P`.
    pub engine: String,
    /// The device-plugin directory (kubelet.sock, the control socket).
    pub dir: std::path::PathBuf,
    /// The referee's PodResources socket (served where the release serves it).
    pub podresources_socket: std::path::PathBuf,
    /// The plugins_registry directory its plugin manager watches.
    pub registry_dir: std::path::PathBuf,
}

/// A referee serves: where, and how to steer it.
pub fn referee_serving(s: &mut Streams<'_>, v: &RefereeView) -> io::Result<()> {
    if s.format.is_json() {
        let mut line = serde_json::to_value(v).map_err(io::Error::other)?;
        line["event"] = "started".into();
        return write_json_line(s.out, &line);
    }
    let dir = v.dir.display();
    writeln!(s.out, "{}: serving {dir}/kubelet.sock (the kubelet's own code)", v.engine)?;
    writeln!(s.out, "  plugins_registry: {}", v.registry_dir.display())?;
    writeln!(s.out, "  PodResources:     {}", v.podresources_socket.display())?;
    writeln!(s.out, "  steer it:         dpctl kubelet-sim status|admit|delete|restart --dir {dir}")?;
    writeln!(s.out, "  Ctrl-C stops it.")?;
    s.out.flush()
}

/// The referee stopped (Ctrl-C, SIGTERM or --timeout).
pub fn referee_stopped(s: &mut Streams<'_>, v: &RefereeView) -> io::Result<()> {
    if s.format.is_json() {
        return write_json_line(s.out, &serde_json::json!({ "event": "stopped", "engine": v.engine }));
    }
    writeln!(s.out, "{}: stopped", v.engine)?;
    s.out.flush()
}
