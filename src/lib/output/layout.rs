//! Text laid out for a terminal of a given width: a table stacked into
//! `HEADER  value` lines, prose wrapped at words, a line cut with `…`. Widths
//! count what a terminal shows: ANSI color escapes take no room. Text that
//! came from a plugin, a driver, a checkpoint or an API object is made safe
//! for a terminal here ([`clean`], [`cell`]): every table cell goes through
//! it, and renderers pass such text through it in plain lines.

use std::borrow::Cow;

use comfy_table::Table;

/// The longest table cell shown, in characters. Laying out a table costs
/// more than linear time in a cell's length (a 4 MiB CDI ID took minutes),
/// and nobody reads such a cell: past this a cell is cut and says how long
/// it was (`-o json` has it whole).
pub const MAX_CELL_CHARS: usize = 2000;

/// Whether `c` is shown escaped: C0 and C1 controls (tab and newline
/// excepted), DEL, and the invisible marks that reorder or hide text
/// (bidi embeddings, overrides, isolates and marks; zero-width spaces).
fn unsafe_char(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

/// The length of the colour sequence (SGR: `ESC [ digits;… m`, conceal
/// excepted) at the start of `s`, when dpctl's colours are on: the only
/// escape kept, as dpctl's own colours are such sequences. Any other
/// escape (cursor moves, screen clears, titles, links) is shown escaped.
fn colour_len(s: &str, colours: bool) -> Option<usize> {
    if !colours {
        return None;
    }
    let body = s.strip_prefix("\x1b[")?;
    let end = body.find(|c: char| !c.is_ascii_digit() && c != ';')?;
    let params = &body[..end];
    (body[end..].starts_with('m') && !params.split(';').any(|p| p == "8" || p == "08")).then_some(2 + end + 1)
}

/// `s` safe to write to a terminal: every control character other than
/// tab and newline (escape, carriage return, backspace, bell, C1), and the
/// bidi and zero-width marks, shown as `\x1b`, `\r` or `\u{202e}`, so
/// that text from a plugin, driver or file cannot move the cursor, clear
/// the screen, set the title or reorder what is shown. With colours on,
/// colour sequences are kept (dpctl's own colours are made of them).
pub fn clean(s: &str) -> Cow<'_, str> {
    clean_as(s, colored::control::SHOULD_COLORIZE.should_colorize())
}

/// [`clean`], colour sequences kept when `colours`.
fn clean_as(s: &str, colours: bool) -> Cow<'_, str> {
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        let step = c.len_utf8();
        if c == '\x1b'
            && let Some(n) = colour_len(rest, colours)
        {
            out.push_str(&rest[..n]);
            rest = &rest[n..];
            continue;
        }
        match c {
            '\r' => out.push_str("\\r"),
            c if unsafe_char(c) && u32::from(c) < 0x100 => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c if unsafe_char(c) => out.push_str(&format!("\\u{{{:04x}}}", u32::from(c))),
            c => out.push(c),
        }
        rest = &rest[step..];
    }
    Cow::Owned(out)
}

/// Whether `c` ends a line on a terminal or in a reader that follows
/// Unicode: newline, and the line and paragraph separators (vertical tab,
/// form feed, carriage return and NEL are controls, escaped by [`clean`]).
fn line_break(c: char) -> bool {
    matches!(c, '\n' | '\u{2028}' | '\u{2029}')
}

/// [`clean`], with line breaks escaped too (`\n`, `\u{2028}`): for a value
/// shown on one line (an ID, a name, a message, a table cell) where a line
/// break would forge a line, or a row, of its own.
pub fn clean_line(s: &str) -> Cow<'_, str> {
    match clean(s) {
        c if !c.contains(line_break) => c,
        c => {
            let mut out = String::with_capacity(c.len() + 8);
            for ch in c.chars() {
                match ch {
                    '\n' => out.push_str("\\n"),
                    ch if line_break(ch) => out.push_str(&format!("\\u{{{:04x}}}", u32::from(ch))),
                    ch => out.push(ch),
                }
            }
            Cow::Owned(out)
        }
    }
}

/// A writer that passes text through [`clean`] on its way to `W`: standard
/// output in the table formats ([`super::Term::streams`]), so that no line
/// a renderer writes, table or prose, carries a plugin's, driver's or
/// file's control characters to the terminal. A character or colour
/// sequence split across two writes is held until its end arrives; bytes
/// that are not UTF-8 are shown as `\xNN`.
pub struct Clean<W: std::io::Write> {
    inner: W,
    held: Vec<u8>,
}

impl<W: std::io::Write> Clean<W> {
    /// `inner`, cleaned.
    pub fn new(inner: W) -> Self {
        Clean { inner, held: Vec::new() }
    }

    /// Writes out what is held up to `end` (all of it when `end` is the length).
    fn pass(&mut self, end: usize) -> std::io::Result<()> {
        let mut rest = &self.held[..end];
        let mut out = String::new();
        while !rest.is_empty() {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(&clean(text));
                    rest = &[];
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    out.push_str(&clean(std::str::from_utf8(good).unwrap_or_default()));
                    let n = e.error_len().unwrap_or(bad.len());
                    bad[..n].iter().for_each(|b| out.push_str(&format!("\\x{b:02x}")));
                    rest = &bad[n..];
                }
            }
        }
        self.held.drain(..end);
        self.inner.write_all(out.as_bytes())
    }

    /// Where an unfinished character or escape sequence begins at the end
    /// of what is held (the length when there is none).
    fn complete_up_to(&self) -> usize {
        let h = &self.held;
        let utf8_end = match std::str::from_utf8(h) {
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            _ => h.len(),
        };
        let tail_from = utf8_end.saturating_sub(32);
        match h[tail_from..utf8_end].iter().rposition(|&b| b == 0x1b) {
            Some(i)
                if h[tail_from + i + 1..utf8_end].iter().all(|b| b.is_ascii_digit() || *b == b'[' || *b == b';') =>
            {
                tail_from + i
            }
            _ => utf8_end,
        }
    }
}

impl<W: std::io::Write> std::io::Write for Clean<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.held.extend_from_slice(buf);
        let end = self.complete_up_to();
        self.pass(end)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.pass(self.held.len())?;
        self.inner.flush()
    }
}

impl<W: std::io::Write> Drop for Clean<W> {
    fn drop(&mut self) {
        let _ = std::io::Write::flush(self);
    }
}

/// A table cell as shown: [`clean_line`] (a line break in a cell would
/// break its row: it is shown as `\n`), and cut to [`MAX_CELL_CHARS`] with
/// the length it had.
pub fn cell(s: &str) -> Cow<'_, str> {
    let cut = s.char_indices().nth(MAX_CELL_CHARS).map(|(i, _)| i);
    match cut {
        None => clean_line(s),
        Some(i) => Cow::Owned(format!("{}…({} bytes; -o json shows it whole)", clean_line(&s[..i]), s.len())),
    }
}

/// How many columns `s` takes on a terminal (escapes count for nothing).
pub fn visible_width(s: &str) -> usize {
    let mut n = 0;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for e in chars.by_ref() {
                if e.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            n += 1;
        }
    }
    n
}

/// `line` cut to `width` visible characters, the cut marked `…` (escapes
/// kept whole, colour reset after a cut); whole when it fits.
pub fn cut(line: &str, width: usize) -> String {
    if visible_width(line) <= width {
        return line.to_string();
    }
    let keep = width.saturating_sub(1);
    let mut out = String::new();
    let mut visible = 0;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            out.push(c);
            for e in chars.by_ref() {
                out.push(e);
                if e.is_ascii_alphabetic() {
                    break;
                }
            }
            continue;
        }
        if visible < keep {
            out.push(c);
            visible += 1;
        }
    }
    if width > 0 {
        out.push('…');
    }
    if line.contains('\x1b') {
        out.push_str("\x1b[0m");
    }
    out
}

/// `text` wrapped at spaces into lines of at most `width` visible
/// characters; a word longer than a line is broken, nothing is dropped.
/// Its own line breaks are kept.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut out = Vec::new();
    for para in text.split('\n') {
        let mut line = String::new();
        let mut len = 0;
        for word in para.split(' ').filter(|w| !w.is_empty()) {
            let mut word = word.to_string();
            let wlen = visible_width(&word);
            if len > 0 && len + 1 + wlen > width {
                out.push(std::mem::take(&mut line));
                len = 0;
            }
            if wlen > width {
                // Only a word without escapes is this long in practice (a path, an ID).
                let chars: Vec<char> = word.chars().collect();
                let mut chunks: Vec<String> = chars.chunks(width).map(|c| c.iter().collect()).collect();
                word = chunks.pop().unwrap_or_default();
                out.extend(chunks);
            }
            let wlen = visible_width(&word);
            if len > 0 {
                line.push(' ');
                len += 1;
            }
            line.push_str(&word);
            len += wlen;
        }
        out.push(line);
    }
    out
}

/// A table as records, for a terminal too narrow for its columns: each row
/// one `HEADER  value` line per non-empty cell, values wrapped under
/// themselves, a blank line between rows. A row whose first cell is empty
/// continues the row above (doctor's hint line): its cells follow it with no
/// label and no blank line.
pub fn stacked(t: &Table, width: usize) -> Vec<String> {
    let headers: Vec<String> = t.header().map(|h| h.cell_iter().map(|c| c.content()).collect()).unwrap_or_default();
    let label = headers.iter().map(|h| visible_width(h)).max().unwrap_or(0) + 2;
    let room = width.saturating_sub(label).max(20);
    let mut out: Vec<String> = Vec::new();
    for row in t.row_iter() {
        let cells: Vec<String> = row.cell_iter().map(|c| c.content()).collect();
        let continues = cells.first().is_some_and(|c| c.is_empty()) && !out.is_empty();
        if !continues && !out.is_empty() {
            out.push(String::new());
        }
        for (i, value) in cells.iter().enumerate().filter(|(_, v)| !v.trim().is_empty()) {
            let head = if continues { "" } else { headers.get(i).map_or("", String::as_str) };
            for (n, line) in wrap(value, room).into_iter().enumerate() {
                let head = if n == 0 { head } else { "" };
                let pad = label.saturating_sub(visible_width(head));
                out.push(format!("{head}{}{line}", " ".repeat(pad)).trim_end().to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_text_is_escaped_and_plain_text_is_kept() {
        let clean = |s| clean_as(s, false);
        assert!(matches!(clean("GPU-0 ok\tα\n"), Cow::Borrowed(_)));
        assert_eq!(clean("a\x1b[2Jb"), "a\\x1b[2Jb");
        assert_eq!(clean("a\x1b]0;owned\x07"), "a\\x1b]0;owned\\x07");
        assert_eq!(clean("ok\rFAIL"), "ok\\rFAIL");
        assert_eq!(clean("x\u{202e}gpj.exe"), "x\\u{202e}gpj.exe");
        assert_eq!(clean("\u{9b}31m\u{7f}\u{8}"), "\\x9b31m\\x7f\\x08");
        assert_eq!(clean_line("a\nb"), "a\\nb");
        // Colour sequences stay only while dpctl colours its output, and
        // never the one that hides text.
        assert_eq!(clean("\x1b[31mred\x1b[0m"), "\\x1b[31mred\\x1b[0m");
        let clean = |s| clean_as(s, true);
        assert_eq!(clean("\x1b[1;31mred\x1b[0m"), "\x1b[1;31mred\x1b[0m");
        assert_eq!(clean("\x1b[8mhidden"), "\\x1b[8mhidden");
        assert_eq!(clean("\x1b[2J"), "\\x1b[2J");
    }

    #[test]
    fn the_clean_writer_escapes_what_a_split_write_carries() {
        use std::io::Write;
        let mut buf = Vec::new();
        {
            let mut w = Clean::new(&mut buf);
            for part in [&b"GPU\x1b"[..], b"[2J-0 \xe2\x80", b"\xae ok\r\n", b"\xff end\n"] {
                w.write_all(part).unwrap();
            }
        }
        assert_eq!(String::from_utf8(buf).unwrap(), "GPU\\x1b[2J-0 \\u{202e} ok\\r\n\\xff end\n");
    }

    #[test]
    fn a_huge_cell_is_cut_and_says_its_length() {
        let id = format!("vendor.com/gpu={}", "a".repeat(4 << 20));
        let c = cell(&id);
        assert!(c.chars().count() < MAX_CELL_CHARS + 60, "{}", c.len());
        assert!(c.ends_with(&format!("…({} bytes; -o json shows it whole)", id.len())), "{}", &c[c.len() - 80..]);
        assert_eq!(cell("GPU-0"), "GPU-0");
    }

    #[test]
    fn widths_ignore_escapes() {
        assert_eq!(visible_width("\x1b[1mabc\x1b[0m"), 3);
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abc", 4), "abc");
        assert_eq!(cut("\x1b[1mabcdef\x1b[0m", 3), "\x1b[1mab\x1b[0m…\x1b[0m");
    }

    #[test]
    fn wrapping_keeps_every_character() {
        let text = "one two three averyveryverylongword four";
        let lines = wrap(text, 10);
        assert!(lines.iter().all(|l| visible_width(l) <= 10), "{lines:?}");
        assert_eq!(lines.join(" ").split_whitespace().collect::<String>(), text.split_whitespace().collect::<String>());
    }

    #[test]
    fn stacked_rows_are_labelled_and_apart() {
        let mut t = crate::output::table(["CHECK", "RESULT", "DETAIL"]);
        t.add_row(["options", "pass", "a b c d e f g h i j k l m n o p q r s t u v w x y z"]);
        t.add_row(["", "", "hint: x"]);
        t.add_row(["list", "fail", "short"]);
        let lines = stacked(&t, 28);
        assert_eq!(lines[0], "CHECK   options");
        assert_eq!(lines[1], "RESULT  pass");
        assert!(lines[2].starts_with("DETAIL  a b c"), "{lines:?}");
        assert!(lines.iter().all(|l| visible_width(l) <= 28), "{lines:?}");
        let hint = lines.iter().position(|l| l.trim() == "hint: x").unwrap();
        assert_eq!(lines[hint + 1], "", "{lines:?}");
        assert_eq!(lines[hint + 2], "CHECK   list");
    }
}
