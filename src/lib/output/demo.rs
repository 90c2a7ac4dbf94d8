//! Renderers for `dpctl demo`: each finished step as readable narration (a
//! numbered title, one line on what the kubelet does and why, then what was
//! seen), or as one JSON line with stable keys (`step`, `name`, `title`,
//! `why`, `ok`, `error`, `took_ms`, `details`).

use std::io::{self, Write};
use std::path::Path;

use colored::Colorize;

use super::{Format, health, numa, table, write_json_line};
use crate::demo::{DemoStep, Details, STEPS};
use crate::kubelet_sim::RequestOptions;

/// The error line of a failed step, as the binary prints errors (so even
/// with --quiet).
pub fn step_failed(w: &mut dyn Write, st: &DemoStep) -> io::Result<()> {
    let message = format!("demo step {}/{STEPS} ({}) failed: {}", st.step, st.title, st.error.as_deref().unwrap_or(""));
    super::write_error(w, &message, None)
}

/// The lines before the first step (nothing in JSON).
pub fn intro(w: &mut dyn Write, format: Format, dir: &Path) -> io::Result<()> {
    if format.is_json() {
        return Ok(());
    }
    let intro = format!(
        "{} a kubelet (kubelet-sim) and a device plugin (mock-plugin) in this one process, speaking the \
         device-plugin gRPC API over unix sockets in {}.",
        "dpctl demo:".bold(),
        dir.display()
    );
    for line in super::layout::wrap(&intro, prose_width() + 4) {
        writeln!(w, "{line}")?;
    }
    writeln!(w)?;
    w.flush()
}

/// Renders one finished step.
pub fn step(w: &mut dyn Write, format: Format, s: &DemoStep) -> io::Result<()> {
    if format.is_json() {
        return write_json_line(w, s);
    }
    let mark = if s.ok { "✓".green().bold().to_string() } else { "✗".red().bold().to_string() };
    writeln!(
        w,
        "{} {} {mark} {}",
        format!("{}/{STEPS}", s.step).bold(),
        s.title.bold(),
        format!("{} ms", s.took_ms).dimmed()
    )?;
    for line in wrap(s.why, prose_width()) {
        writeln!(w, "    {}", line.dimmed())?;
    }
    if let Some(e) = &s.error {
        writeln!(w, "    {} {e}", "failed:".red().bold())?;
    }
    details(w, &s.details)?;
    writeln!(w)?;
    w.flush()
}

/// The line after the last step.
pub fn outro(w: &mut dyn Write, format: Format, steps: &[DemoStep]) -> io::Result<()> {
    if format.is_json() {
        return Ok(());
    }
    let total: u64 = steps.iter().map(|s| s.took_ms).sum();
    if steps.iter().all(|s| s.ok) {
        writeln!(w, "{} {} steps in {total} ms, nothing left behind.", "Done:".green().bold(), steps.len())?;
        let next = "Next: dpctl kubelet-sim --help · dpctl mock-plugin --help · dpctl smoke --help · dpctl plugin \
                    check --help";
        for line in super::layout::wrap(next, prose_width() + 4) {
            writeln!(w, "{line}")?;
        }
    }
    w.flush()
}

/// Width of the wrapped explanation lines.
const WRAP: usize = 96;

/// The explanations' width: [`WRAP`], or less on a narrower terminal (they
/// sit 4 columns in), so no line is wrapped again by the terminal.
fn prose_width() -> usize {
    super::width().map_or(WRAP, |w| w.saturating_sub(4).clamp(30, WRAP))
}

/// Splits `text` into lines of at most `width` characters, at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

fn opts(o: &RequestOptions) -> String {
    format!(
        "pre_start_required={}, get_preferred_allocation_available={}",
        o.pre_start_required, o.get_preferred_allocation_available
    )
}

/// A label column, then text.
fn kv(w: &mut dyn Write, key: &str, value: impl std::fmt::Display) -> io::Result<()> {
    let lines = super::layout::wrap(&value.to_string(), prose_width().saturating_sub(23).max(20));
    for (i, line) in lines.iter().enumerate() {
        if i == 0 {
            writeln!(w, "    {:<22} {line}", key.cyan())?;
        } else {
            writeln!(w, "    {:<22} {line}", "")?;
        }
    }
    Ok(())
}

/// What a step saw, one labelled line each (tables for device lists).
fn details(w: &mut dyn Write, d: &Details) -> io::Result<()> {
    match d {
        Details::None {} => Ok(()),
        Details::Kubelet { dir, kubelet_socket, podresources_socket } => {
            kv(w, "directory", dir)?;
            kv(w, "kubelet.sock", kubelet_socket)?;
            kv(w, "PodResources", podresources_socket)
        }
        Details::Registration {
            version,
            resource_name,
            endpoint,
            request_options,
            plugin_socket,
            options,
            dial_back_ms,
        } => {
            kv(w, "RegisterRequest", format!("version {version}, resource_name {resource_name}, endpoint {endpoint}"))?;
            if let Some(o) = request_options {
                kv(w, "", format!("options: {}", opts(o)))?;
            }
            kv(w, "dial-back", format!("the kubelet connected to {plugin_socket} ({dial_back_ms} ms)"))?;
            kv(w, "GetDevicePluginOptions", opts(options))
        }
        Details::Snapshot { devices, capacity, allocatable, message_bytes } => {
            device_table(w, devices)?;
            kv(
                w,
                "node status",
                format!("capacity {capacity}, allocatable {allocatable} (message: {message_bytes} bytes)"),
            )
        }
        Details::Health { device, from, to, capacity, allocatable, seen_after_ms } => {
            kv(
                w,
                device,
                format!("{} → {} (the kubelet had the new list {seen_after_ms} ms later)", health(from), health(to)),
            )?;
            kv(
                w,
                "node status",
                format!(
                    "capacity {} → {}, allocatable {} → {}",
                    capacity[0],
                    capacity[1],
                    allocatable[0],
                    allocatable[1].to_string().yellow().bold()
                ),
            )
        }
        Details::Admission { .. } => admission(w, d),
        Details::PodResources { socket, api, containers } => {
            kv(w, "List", format!("over {socket} ({api})"))?;
            let mut t = table(["POD", "CONTAINER", "RESOURCE", "DEVICES", "NUMA"]);
            for c in containers {
                let pod = format!("{}/{}", crate::demo::NAMESPACE, crate::demo::POD);
                t.add_row([
                    pod,
                    c.name.clone(),
                    c.resource_name.clone(),
                    c.device_ids.join(","),
                    numa(Some(&c.numa_nodes)),
                ]);
            }
            indented(w, &t)
        }
        Details::Restart { .. } => restart(w, d),
        Details::Cleanup { removed_sockets, dir_removed } => {
            kv(w, "stopped", "the plugin and the kubelet-sim")?;
            kv(w, "sockets removed", super::list(removed_sockets))?;
            kv(w, "directory", if *dir_removed { "removed" } else { "still there" })
        }
    }
}

/// Step 5: the pod, GetPreferredAllocation, the devices, Allocate's answer, PreStartContainer.
fn admission(w: &mut dyn Write, d: &Details) -> io::Result<()> {
    let Details::Admission { pod, requested, preferred, devices, numa_nodes, allocation, pre_start, admit_ms } = d
    else {
        return Ok(());
    };
    kv(w, "pod", format!("{pod} asks for {requested} example.com/gpu (admitted in {admit_ms} ms)"))?;
    if let Some(p) = preferred {
        let answer = p.answer.join(",").green().bold();
        kv(w, "GetPreferredAllocation", format!("available {}, size {} → {answer}", p.available.join(","), p.size))?;
    }
    let nodes: Vec<String> = numa_nodes.iter().map(i64::to_string).collect();
    kv(w, "devices", format!("{} (NUMA node {})", devices.join(","), nodes.join(",")))?;
    if let Some(a) = allocation {
        allocate_answer(w, a)?;
    }
    if let Some(p) = pre_start {
        kv(w, "PreStartContainer", p)?;
    }
    Ok(())
}

/// Step 7: what the restart deleted, re-registration, the allocations kept.
fn restart(w: &mut dyn Write, d: &Details) -> io::Result<()> {
    let Details::Restart {
        deleted_sockets,
        reregistered_after_ms,
        first_list_after_ms,
        restored_pods,
        pod_devices_kept,
        capacity,
        allocatable,
    } = d
    else {
        return Ok(());
    };
    kv(w, "deleted", format!("{} (kubelet.sock re-created)", super::list(deleted_sockets)))?;
    let after = format!("{reregistered_after_ms} ms").green().bold();
    kv(w, "re-registered", format!("{after} after the new kubelet.sock, device list after {first_list_after_ms} ms"))?;
    let (ns, pod, kept) = (crate::demo::NAMESPACE, crate::demo::POD, pod_devices_kept.join(","));
    kv(
        w,
        "allocations kept",
        format!(
            "{ns}/{pod} holds {kept} ({} restored from the checkpoint)",
            crate::text::count(*restored_pods, "pod", "pods")
        ),
    )?;
    kv(w, "node status", format!("capacity {capacity}, allocatable {allocatable}"))
}

/// A table indented under the step's title.
fn indented(w: &mut dyn Write, t: &comfy_table::Table) -> io::Result<()> {
    for line in super::table_lines(t, super::width().map(|w| w.saturating_sub(4)), super::Fit::Cut) {
        writeln!(w, "    {line}")?;
    }
    Ok(())
}

/// The device list: ID, health (colored), NUMA nodes. Aligned by hand: the
/// health cell is colored, and the table helper would count the color codes
/// as width.
fn device_table(w: &mut dyn Write, devices: &[crate::model::Device]) -> io::Result<()> {
    let id_w = devices.iter().map(|d| d.id.chars().count()).chain([2]).max().unwrap_or(2);
    let h_w = devices.iter().map(|d| d.health.chars().count()).chain([6]).max().unwrap_or(6);
    writeln!(w, "    {:<id_w$}   {:<h_w$}   NUMA", "ID", "HEALTH")?;
    for d in devices {
        let pad = " ".repeat(h_w.saturating_sub(d.health.chars().count()));
        writeln!(w, "    {:<id_w$}   {}{pad}   {}", d.id, health(&d.health), numa(d.numa_nodes.as_deref()))?;
    }
    Ok(())
}

/// What the runtime gets from Allocate: environment, device nodes, mounts, CDI devices.
fn allocate_answer(w: &mut dyn Write, a: &crate::model::ContainerAllocation) -> io::Result<()> {
    kv(w, "Allocate", "the runtime gets:")?;
    for (k, v) in &a.envs {
        kv(w, "  env", format!("{k}={v}"))?;
    }
    for d in &a.devices {
        kv(w, "  device node", format!("{} (host {}, {})", d.container_path, d.host_path, d.permissions))?;
    }
    for m in &a.mounts {
        kv(w, "  mount", format!("{} (host {})", m.container_path, m.host_path))?;
    }
    if !a.cdi_devices.is_empty() {
        kv(w, "  CDI", a.cdi_devices.join(", "))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_words_whole() {
        assert_eq!(wrap("aa bb cc dd", 5), ["aa bb", "cc dd"]);
        assert_eq!(wrap("averylongword x", 4), ["averylongword", "x"]);
        assert!(wrap("", 10).is_empty());
    }

    #[test]
    fn a_failed_step_says_why() {
        colored::control::set_override(false);
        let s = DemoStep {
            step: 4,
            name: "health-change",
            title: "A device turns unhealthy",
            why: "why",
            ok: false,
            error: Some("timed out".into()),
            took_ms: 5000,
            details: Details::None {},
        };
        let mut out = Vec::new();
        step(&mut out, Format::Table, &s).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("4/8 A device turns unhealthy ✗ 5000 ms\n    why\n    failed: timed out\n"), "{text}");
        let mut out = Vec::new();
        step(&mut out, Format::Json, &s).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["ok"], false);
        assert_eq!(v["error"], "timed out");
        assert_eq!(v["details"], serde_json::json!({}));
    }
}
