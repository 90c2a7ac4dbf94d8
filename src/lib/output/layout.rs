//! Text laid out for a terminal of a given width: a table stacked into
//! `HEADER  value` lines, prose wrapped at words, a line cut with `…`. Widths
//! count what a terminal shows: ANSI color escapes take no room.

use comfy_table::Table;

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
