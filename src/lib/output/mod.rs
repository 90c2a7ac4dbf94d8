//! The one output layer: every command's data goes through here, rendered as
//! a table for people or JSON for programs (JSON Lines for streams). Renderers
//! write into any `Write`, so tests render into a `Vec<u8>`; nothing here
//! decides where bytes go.

pub mod apiserver;
pub mod bench;
pub mod cases;
pub mod check;
pub mod checkpoint;
pub mod demo;
pub mod doctor;
pub mod dra;
pub mod explain;
pub mod fd;
pub mod github;
pub mod junit;
pub mod kubelet_sim;
pub mod layout;
pub mod mock_plugin;
pub mod plugin;
pub mod podresources;
pub mod scenario;
pub mod smoke;
pub mod topology;
pub mod verbose;

use std::io::{self, Write};

use colored::Colorize;
use comfy_table::{ContentArrangement, Table, presets};
use serde::Serialize;

/// Writes an error and its hint (`dpctl: error: ...`, `  hint: ...`),
/// made safe for a terminal ([`layout::clean`]): an error often quotes a
/// plugin's or driver's message, or a file's text.
pub fn write_error(w: &mut dyn Write, message: &str, hint: Option<&str>) -> io::Result<()> {
    crate::error::write(w, &layout::clean(message), hint.map(layout::clean).as_deref())
}
pub use crate::text::{list, ranges, timestamp};

/// How a command renders its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Aligned columns for people.
    #[default]
    Table,
    /// Like `table`, with more columns.
    Wide,
    /// JSON with stable snake_case keys; JSON Lines for streams.
    Json,
    /// The same data as `json`, as YAML (one document per stream event).
    Yaml,
}

impl Format {
    /// True for `json` and `yaml`: structured data, not a table.
    pub fn is_json(self) -> bool {
        matches!(self, Format::Json | Format::Yaml)
    }
}

/// Where dpctl writes: the binary makes one from the process's stdout and
/// stderr, tests from buffers. Commands see it through [`Term::streams`].
pub struct Term {
    /// Standard output: data only.
    pub out: Box<dyn Write + Send>,
    /// Standard error: progress, narration, warnings.
    pub err: Box<dyn Write + Send>,
    /// True when stderr is a terminal (progress bars and live views allowed).
    pub err_is_tty: bool,
    /// True when stdout is a terminal (a person reads the data as it comes).
    pub out_is_tty: bool,
}

impl std::fmt::Debug for Term {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Term")
            .field("err_is_tty", &self.err_is_tty)
            .field("out_is_tty", &self.out_is_tty)
            .finish_non_exhaustive()
    }
}

impl Term {
    /// The streams a command writes through, for the global flags: a
    /// progress display only on a terminal, not quiet, not `-v`, not JSON.
    pub fn streams(&mut self, format: Format, quiet: bool, verbose: u8) -> Streams<'_> {
        let progress = self.err_is_tty && !quiet && verbose == 0 && !format.is_json();
        if !format.is_json() {
            // Text for people: no control character from a plugin, driver
            // or file reaches the terminal (JSON and YAML escape their own).
            let out = std::mem::replace(&mut self.out, Box::new(io::sink()));
            self.out = Box::new(layout::Clean::new(out));
        }
        Streams {
            out: &mut *self.out,
            err: &mut *self.err,
            format,
            quiet,
            progress,
            out_is_tty: self.out_is_tty,
            err_is_tty: self.err_is_tty,
            wire: None,
        }
    }
}

/// Where a command's bytes go: data to `out`, narration and progress to
/// `err` (nothing when `quiet`), in `format`. The command layer makes one
/// from its [`Term`]; loops that show a stream of events write through it.
pub struct Streams<'a> {
    /// Standard output: data only.
    pub out: &'a mut (dyn Write + Send),
    /// Standard error: narration, warnings, live views.
    pub err: &'a mut (dyn Write + Send),
    /// The output format.
    pub format: Format,
    /// `--quiet`: no narration.
    pub quiet: bool,
    /// A progress display may be drawn on stderr (a terminal, not quiet, not JSON).
    pub progress: bool,
    /// `out` is a terminal (a person reads the data as it comes).
    pub out_is_tty: bool,
    /// `err` is a terminal: narration may shorten long lines to fit; in a
    /// CI log or a file they are written whole.
    pub err_is_tty: bool,
    /// `-v`: where the gRPC calls a command makes are reported ([`verbose`]).
    pub wire: Option<crate::wire_events::Tap>,
}

impl std::fmt::Debug for Streams<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streams").field("format", &self.format).field("quiet", &self.quiet).finish_non_exhaustive()
    }
}

impl Streams<'_> {
    /// Writes a line of narration to `err` unless quiet, made safe for a
    /// terminal ([`layout::clean`]): narration quotes plugins, drivers and
    /// files. (The live views write their own cursor moves to `err`, so
    /// `err` as a whole is not filtered.)
    pub fn note(&mut self, line: impl std::fmt::Display) -> crate::Result<()> {
        if !self.quiet {
            writeln!(self.err, "{}", layout::clean(&line.to_string())).map_err(out_err)?;
        }
        Ok(())
    }
}

/// A progress display on stderr with this indicatif template (`len`: a bar
/// of that many steps; none: a spinner), or none when `allowed` is false.
/// The library's one direct write to the process's stderr (indicatif draws
/// it; tests/layers.rs allows only this): callers pass `Streams.progress`
/// as `allowed`, true only when stderr is a terminal and not quiet.
pub fn progress_bar(allowed: bool, len: Option<u64>, template: &str) -> Option<indicatif::ProgressBar> {
    allowed.then(|| {
        let bar = len.map_or_else(indicatif::ProgressBar::new_spinner, indicatif::ProgressBar::new);
        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        bar.enable_steady_tick(std::time::Duration::from_millis(100));
        bar
    })
}

/// Maps a failed write to stdout or stderr to an error.
pub fn out_err(e: io::Error) -> crate::Error {
    crate::Error::io(crate::error::WRITING_OUTPUT, e)
}

/// Whether structured output is YAML (`-o yaml`); see [`set_yaml`].
static YAML: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `-o yaml`: what is written as JSON is written as YAML instead (same keys).
pub fn set_yaml(on: bool) {
    YAML.store(on, std::sync::atomic::Ordering::Relaxed);
}

fn yaml(w: &mut dyn Write, value: &(impl Serialize + ?Sized), document: bool) -> io::Result<()> {
    let v = serde_json::to_value(value)?;
    let text = serde_norway::to_string(&v).map_err(io::Error::other)?;
    if document {
        writeln!(w, "---")?;
    }
    w.write_all(text.as_bytes())
}

/// The width tables are fitted to, or 0 for none; see [`set_width`].
static WIDTH: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Below this many columns a table too wide for the terminal is stacked
/// (one `HEADER  value` line per cell, rows apart); from it up the table
/// keeps its columns and its widest cells give way.
pub const STACK_BELOW: usize = 100;

/// Tables fit the terminal only for a person at one: the command layer sets
/// this once to stdout's width (a terminal, no `--no-trunc`) or `None`.
/// Pipes, files and CI logs get every cell whole on one line.
pub fn set_width(width: Option<usize>) {
    WIDTH.store(width.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
}

/// The width tables are fitted to ([`set_width`]), if any.
pub fn width() -> Option<usize> {
    Some(WIDTH.load(std::sync::atomic::Ordering::Relaxed)).filter(|w| *w > 0)
}

/// The size (columns, rows) of the terminal on `fd`; `None` when it is not
/// one (or reports no size): `libc::STDOUT_FILENO` or `libc::STDERR_FILENO`.
pub fn terminal_size(fd: std::os::fd::RawFd) -> Option<(usize, usize)> {
    let mut ws = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes one winsize into the pointed-to struct, which is valid and owned here.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) };
    (rc == 0 && ws.ws_col > 0 && ws.ws_row > 0).then(|| (usize::from(ws.ws_col), usize::from(ws.ws_row)))
}

/// Whether tables leave out their header line; see [`set_no_headers`].
static NO_HEADERS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--no-headers`: tables are written without their header line.
pub fn set_no_headers(on: bool) {
    NO_HEADERS.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether `--no-headers` was given (for tables not written by [`write_table`]).
pub fn no_headers() -> bool {
    NO_HEADERS.load(std::sync::atomic::Ordering::Relaxed)
}

/// How a table too wide for the terminal gives way from [`STACK_BELOW`] up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// One line per row; the widest cells are cut, each cut marked `…`
    /// (lists, whose rows people scan; `-o wide` or a pipe shows them whole).
    Cut,
    /// Cells wrap inside their column (prose people read: evidence, hints).
    Wrap,
    /// As `Cut` at any width, never stacked: a live view redrawn in place
    /// keeps one line per row and every column.
    Live,
}

/// Writes a table followed by a newline, with trailing spaces trimmed,
/// fitted to the terminal ([`set_width`]) with its rows cut.
pub fn write_table(w: &mut dyn Write, table: &Table) -> io::Result<()> {
    write_table_fit(w, table, width(), Fit::Cut)
}

/// [`write_table`] with rows that wrap instead of being cut.
pub fn write_table_wrapped(w: &mut dyn Write, table: &Table) -> io::Result<()> {
    write_table_fit(w, table, width(), Fit::Wrap)
}

/// Writes a table fitted to `width` columns (none: as wide as it is): as
/// it is when it fits, stacked below [`STACK_BELOW`], else by `fit`.
pub fn write_table_fit(w: &mut dyn Write, table: &Table, width: Option<usize>, fit: Fit) -> io::Result<()> {
    for line in table_lines(table, width, fit) {
        writeln!(w, "{line}")?;
    }
    Ok(())
}

/// The lines [`write_table_fit`] writes.
pub fn table_lines(table: &Table, width: Option<usize>, fit: Fit) -> Vec<String> {
    // Every cell made safe and bounded ([`layout::cell`]) before the layout
    // sees it; padding is set after the header exists, columns added later get it here.
    let mut t = cleaned(table);
    for col in t.column_iter_mut() {
        col.set_padding((0, 3));
    }
    let skip = usize::from(no_headers() && t.header().is_some());
    let natural: Vec<String> = t.lines().skip(skip).map(|l| l.trim_end().to_string()).collect();
    let Some(width) = width else { return natural };
    if natural.iter().all(|l| layout::visible_width(l) <= width) {
        return natural;
    }
    if width < STACK_BELOW && fit != Fit::Live {
        return layout::stacked(&t, width);
    }
    t.set_content_arrangement(ContentArrangement::Dynamic).set_width(u16::try_from(width).unwrap_or(u16::MAX));
    if fit != Fit::Wrap {
        t.set_truncation_indicator("…");
        for row in t.row_iter_mut() {
            row.max_height(1);
        }
    }
    t.lines().skip(skip).map(|l| l.trim_end().to_string()).collect()
}

/// `table` with every cell as [`layout::cell`] shows it.
fn cleaned(table: &Table) -> Table {
    let cells =
        |r: &comfy_table::Row| r.cell_iter().map(|c| layout::cell(&c.content()).into_owned()).collect::<Vec<_>>();
    let mut t = match table.header() {
        Some(h) => self::table(cells(h)),
        None => {
            let mut t = Table::new();
            t.load_preset(presets::NOTHING).set_content_arrangement(ContentArrangement::Disabled);
            t
        }
    };
    for row in table.row_iter() {
        t.add_row(cells(row));
    }
    t
}

/// A table in dpctl's style: kubectl-like columns, upper-case headers, no borders.
pub fn table<I, S>(headers: I) -> Table
where
    I: IntoIterator<Item = S>,
    S: Into<comfy_table::Cell>,
{
    let mut t = Table::new();
    t.load_preset(presets::NOTHING).set_content_arrangement(ContentArrangement::Disabled).set_header(headers);
    for col in t.column_iter_mut() {
        col.set_padding((0, 3));
    }
    t
}

/// Writes `value` as pretty JSON and a newline.
pub fn write_json<T: Serialize + ?Sized>(w: &mut dyn Write, value: &T) -> io::Result<()> {
    if YAML.load(std::sync::atomic::Ordering::Relaxed) {
        return yaml(w, value, false);
    }
    serde_json::to_writer_pretty(&mut *w, value)?;
    writeln!(w)
}

/// Writes `value` as one JSON line and flushes, so a reader sees it at once.
pub fn write_json_line<T: Serialize + ?Sized>(w: &mut dyn Write, value: &T) -> io::Result<()> {
    if YAML.load(std::sync::atomic::Ordering::Relaxed) {
        yaml(w, value, true)?;
        return w.flush();
    }
    serde_json::to_writer(&mut *w, value)?;
    writeln!(w)?;
    w.flush()
}

/// A health string, green when `Healthy`, red otherwise.
pub fn health(h: &str) -> String {
    if h == crate::proto::deviceplugin::v1beta1::HEALTHY { h.green().to_string() } else { h.red().to_string() }
}

/// NUMA nodes for a table: `0-1,3`, or `-` when the device has no topology.
pub fn numa(nodes: Option<&[i64]>) -> String {
    match nodes {
        Some(n) if !n.is_empty() => ranges(n),
        _ => "-".into(),
    }
}

/// Bytes in binary units: `512`, `1Ki`, `1.5Gi`, as Kubernetes quantities read.
pub fn bytes_binary(n: u64) -> String {
    const UNITS: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    if n < 1024 {
        return n.to_string();
    }
    let mut value = n as f64;
    let mut unit = "";
    for u in UNITS {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = u;
    }
    if (value - value.round()).abs() < 0.005 {
        format!("{}{unit}", value.round() as u64)
    } else {
        format!("{value:.2}{unit}").replace(".00", "")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_units() {
        assert_eq!(bytes_binary(512), "512");
        assert_eq!(bytes_binary(1024), "1Ki");
        assert_eq!(bytes_binary(2 * 1024 * 1024), "2Mi");
        assert_eq!(bytes_binary(1536 * 1024 * 1024), "1.50Gi");
    }

    #[test]
    fn numa_zero_is_shown() {
        assert_eq!(numa(Some(&[0])), "0");
        assert_eq!(numa(None), "-");
    }

    #[test]
    fn tables_are_trimmed_columns() {
        let mut t = table(["ID", "HEALTH"]);
        t.add_row(["dev-0", "Healthy"]);
        let mut out = Vec::new();
        write_table(&mut out, &t).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert_eq!(s, "ID      HEALTH\ndev-0   Healthy\n");
    }

    /// A line break inside a cell (a plugin's device ID, a driver's error)
    /// stays inside its row, at every width and fit.
    #[test]
    fn a_line_break_in_a_cell_keeps_its_row_whole() {
        let mut t = table(["ID", "HEALTH"]);
        t.add_row(["dev-0\nFORGED   Healthy", "Healthy"]);
        t.add_row(["dev-1\u{2028}x\r\x0bz", "Unhealthy"]);
        for (width, fit) in [(None, Fit::Cut), (Some(60), Fit::Wrap), (Some(120), Fit::Cut), (Some(30), Fit::Live)] {
            let lines = table_lines(&t, width, fit);
            assert_eq!(lines.len(), 3, "{width:?} {fit:?}: {lines:#?}");
            assert!(lines[1].starts_with("dev-0\\nFORGED"), "{lines:#?}");
            assert!(lines[2].starts_with("dev-1\\u{2028}x"), "{lines:#?}");
        }
    }

    /// Narration and errors on stderr quote plugins and drivers: their
    /// control characters are escaped (dpctl's own line breaks kept).
    #[test]
    fn narration_and_errors_on_stderr_are_escaped() {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut s = Streams {
            out: &mut out,
            err: &mut err,
            format: Format::Table,
            quiet: false,
            progress: false,
            out_is_tty: false,
            err_is_tty: false,
            wire: None,
        };
        s.note("plugin says \x1b[2J\x1b]0;owned\x07 done").unwrap();
        let mut e = Vec::new();
        write_error(&mut e, "rpc error: \x1b[1A\rfine", Some("ask \u{202e}them")).unwrap();
        assert_eq!(String::from_utf8(err).unwrap(), "plugin says \\x1b[2J\\x1b]0;owned\\x07 done\n");
        assert_eq!(
            String::from_utf8(e).unwrap(),
            "dpctl: error: rpc error: \\x1b[1A\\rfine\n  hint: ask \\u{202e}them\n"
        );
    }
}
