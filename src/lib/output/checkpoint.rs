//! Renderers for `dpctl checkpoint show|verify`: the verdict (stored against
//! computed checksum and what it means), entries with devices per NUMA node
//! and their decoded Allocate answers, and the registered devices.

use std::io::{self, Write};

use colored::Colorize;

use super::{Format, Streams, out_err, table, write_json, write_table};
use crate::checkpoint::report::CheckpointReport;

/// The longest ID a table cell shows, and the longest cell. The table
/// layout costs more than linear time in a cell's length (a 2 MiB device ID
/// took 70 s in a debug build), and nobody reads such a cell: past these
/// bounds a cell is cut, says how much is left out, and `-o json` has it all.
const MAX_ID_CHARS: usize = 80;
const MAX_CELL_CHARS: usize = 2000;

/// `s` cut to `max` characters, saying how many bytes it had when cut.
fn short(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((cut, _)) => format!("{}…({} bytes)", &s[..cut], s.len()),
    }
}

/// A comma-separated list of `items` within [`MAX_CELL_CHARS`]: each cut
/// to [`MAX_ID_CHARS`], then as many as fit, and how many more there are.
fn bounded_list<'a>(items: impl ExactSizeIterator<Item = std::borrow::Cow<'a, str>>) -> String {
    let total = items.len();
    if total == 0 {
        return "-".into();
    }
    let mut out = String::new();
    for (i, item) in items.enumerate() {
        let item = short(&item, MAX_ID_CHARS);
        if i > 0 && out.len() + item.len() > MAX_CELL_CHARS {
            out.push_str(&format!(",… {} more (-o json lists all)", total - i));
            break;
        }
        if i > 0 {
            out.push(',');
        }
        out.push_str(&item);
    }
    out
}

/// Devices per NUMA node: `GPU-0@0`, or just the ID without topology.
fn numa_devices(e: &crate::checkpoint::report::EntryView) -> String {
    let devs: Vec<std::borrow::Cow<'_, str>> = e
        .devices_per_numa
        .iter()
        .flat_map(|(node, ids)| {
            ids.iter().map(move |id| {
                if *node < 0 { id.as_str().into() } else { format!("{}@{node}", short(id, MAX_ID_CHARS)).into() }
            })
        })
        .collect();
    bounded_list(devs.into_iter())
}

/// The verdict lines.
fn verdict(w: &mut dyn Write, r: &CheckpointReport) -> io::Result<()> {
    let format = r.format.map_or("unreadable", crate::checkpoint::Format::describe);
    writeln!(w, "{} {}", "checkpoint".bold(), r.path)?;
    writeln!(w, "  format    {format}")?;
    match (r.stored_checksum, r.computed_checksum) {
        (Some(s), Some(c)) if s == c => writeln!(w, "  checksum  {} (stored {s} = computed {c})", "ok".green().bold())?,
        (Some(s), Some(c)) => {
            writeln!(w, "  checksum  {} (stored {s}, computed {c})", "MISMATCH".red().bold())?;
        }
        _ => writeln!(w, "  checksum  {}", "not computed: the file does not parse".red().bold())?,
    }
    if let Some(e) = &r.error {
        writeln!(w, "  error     {e}")?;
    }
    writeln!(w, "  meaning   {}", r.meaning)
}

/// Answers `checkpoint show` on stdout.
pub fn shown(s: &mut Streams<'_>, r: &CheckpointReport) -> crate::Result<()> {
    show(&mut *s.out, s.format, r).map_err(out_err)
}

/// Answers `checkpoint verify` on stdout.
pub fn verified(s: &mut Streams<'_>, r: &CheckpointReport) -> crate::Result<()> {
    verify(&mut *s.out, s.format, r).map_err(out_err)
}

/// `checkpoint verify`: the verdict only.
pub fn verify(w: &mut dyn Write, format: Format, r: &CheckpointReport) -> io::Result<()> {
    if format.is_json() {
        return write_json(
            w,
            &serde_json::json!({
                "path": r.path,
                "format": r.format,
                "stored_checksum": r.stored_checksum,
                "computed_checksum": r.computed_checksum,
                "verifies": r.verifies,
                "meaning": r.meaning,
                "error": r.error,
            }),
        );
    }
    verdict(w, r)
}

/// `checkpoint show`: the verdict, entries, their Allocate answers, registered devices.
pub fn show(w: &mut dyn Write, format: Format, r: &CheckpointReport) -> io::Result<()> {
    if format.is_json() {
        return write_json(w, r);
    }
    verdict(w, r)?;
    writeln!(w)?;
    if r.entries.is_empty() {
        writeln!(w, "no pod entries")?;
    } else {
        let mut t = table(["POD UID", "CONTAINER", "RESOURCE", "DEVICES (@NUMA)"]);
        for e in &r.entries {
            t.add_row([
                short(&e.pod_uid, MAX_ID_CHARS),
                short(&e.container, MAX_ID_CHARS),
                short(&e.resource, MAX_ID_CHARS),
                numa_devices(e),
            ]);
        }
        write_table(w, &t)?;
        for e in &r.entries {
            writeln!(w)?;
            writeln!(w, "{} {} / {}  {}", "AllocResp".bold(), e.pod_uid, e.container, e.resource)?;
            match (&e.allocation, &e.allocation_error) {
                (Some(a), _) => super::plugin::allocation(w, a)?,
                (None, Some(err)) => writeln!(w, "  {}", err.red())?,
                (None, None) => writeln!(w, "  (null)")?,
            }
        }
    }
    writeln!(w)?;
    if r.registered_devices.is_empty() {
        writeln!(w, "no registered devices")?;
    } else {
        let mut t = table(["REGISTERED RESOURCE", "HEALTHY DEVICES WHEN WRITTEN"]);
        for (res, ids) in &r.registered_devices {
            let ids = ids
                .as_deref()
                .map_or_else(|| "(null)".to_string(), |ids| bounded_list(ids.iter().map(|id| id.as_str().into())));
            t.add_row([short(res, MAX_ID_CHARS), ids]);
        }
        write_table(w, &t)?;
    }
    Ok(())
}
