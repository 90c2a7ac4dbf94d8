//! The one JUnit XML writer, for `dpctl plugin check` and `dpctl smoke`:
//! the `<testsuites>`/`<testsuite>` frame, one `<testcase>` per result, and
//! XML escaping (the `--junit` file itself is `cli::junit`'s).

use std::io::{self, Write};

use crate::check::{CheckResult, Outcome, Totals};

/// The frame of a JUnit suite: its name, counts and properties.
#[derive(Debug)]
pub struct JunitSuite<'a> {
    /// Suite name.
    pub name: &'a str,
    /// Counts by outcome.
    pub totals: &'a Totals,
    /// Run time.
    pub duration_ms: u64,
    /// Start time, RFC 3339.
    pub started: &'a str,
    /// `<property>` name/value pairs.
    pub properties: &'a [(&'a str, String)],
}

impl JunitSuite<'_> {
    /// Writes the XML declaration, `<testsuites>` (with this suite's totals),
    /// `<testsuite>` and its properties.
    pub fn open(&self, w: &mut dyn Write) -> io::Result<()> {
        open_many(w, self.totals, self.duration_ms)?;
        self.open_suite(w)
    }

    /// Writes `<testsuite>` and its properties (inside [`open_many`]).
    pub fn open_suite(&self, w: &mut dyn Write) -> io::Result<()> {
        writeln!(
            w,
            r#"  <testsuite name="{}" {} timestamp="{}">"#,
            attr(self.name),
            counts(self.totals, self.duration_ms),
            attr(self.started)
        )?;
        writeln!(w, "    <properties>")?;
        for (k, v) in self.properties {
            writeln!(w, r#"      <property name="{k}" value="{}"/>"#, attr(v))?;
        }
        writeln!(w, "    </properties>")
    }

    /// Closes one `<testsuite>` of several.
    pub fn close_suite(w: &mut dyn Write) -> io::Result<()> {
        writeln!(w, "  </testsuite>")
    }

    /// Closes what [`JunitSuite::open`] opened, and flushes.
    pub fn close(w: &mut dyn Write) -> io::Result<()> {
        JunitSuite::close_suite(w)?;
        close_many(w)
    }
}

/// `tests=".." failures=".." errors=".." skipped=".." time=".."`.
fn counts(t: &Totals, duration_ms: u64) -> String {
    format!(
        r#"tests="{}" failures="{}" errors="{}" skipped="{}" time="{:.3}""#,
        t.total,
        t.failed,
        t.errors,
        t.skipped,
        duration_ms as f64 / 1000.0
    )
}

/// The XML declaration and `<testsuites>` for suites with these summed totals.
pub fn open_many(w: &mut dyn Write, t: &Totals, duration_ms: u64) -> io::Result<()> {
    writeln!(w, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(w, r#"<testsuites name="dpctl" {}>"#, counts(t, duration_ms))
}

/// Closes what [`open_many`] opened, and flushes.
pub fn close_many(w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "</testsuites>")?;
    w.flush()
}

/// One `<testcase>` for a result: `<failure>`, `<error>` or `<skipped>`
/// carrying the evidence, the evidence of a pass in `<system-out>`.
pub fn testcase(w: &mut dyn Write, classname: &str, c: &CheckResult) -> io::Result<()> {
    write!(
        w,
        r#"    <testcase name="{}" classname="{}" time="{:.3}""#,
        attr(&c.name),
        attr(classname),
        c.duration_ms as f64 / 1000.0
    )?;
    match c.outcome {
        Outcome::Pass if c.evidence.is_empty() => return writeln!(w, "/>"),
        Outcome::Pass => {
            writeln!(w, ">")?;
            writeln!(w, "      <system-out>{}</system-out>", text(&c.evidence))?;
        }
        Outcome::Skip => {
            writeln!(w, ">")?;
            writeln!(w, r#"      <skipped message="{}"/>"#, attr(&c.evidence))?;
        }
        Outcome::Fail | Outcome::Error => {
            let tag = if c.outcome == Outcome::Fail { "failure" } else { "error" };
            let body = format!("evidence: {}\nrule: {}\nreason: {}", c.evidence, c.rule, c.reason);
            writeln!(w, ">")?;
            writeln!(
                w,
                r#"      <{tag} message="{}" type="{}">{}</{tag}>"#,
                attr(&c.evidence),
                attr(&c.name),
                text(&body)
            )?;
        }
    }
    writeln!(w, "    </testcase>")
}

/// Escapes character data for XML 1.0; characters XML cannot carry at all
/// (most control characters) are written as `\u{..}` so nothing is lost.
pub fn text(s: &str) -> String {
    escape(s, false)
}

/// Escapes an attribute value (quotes and newlines too).
pub fn attr(s: &str) -> String {
    escape(s, true)
}

fn escape(s: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            '\'' if attribute => out.push_str("&apos;"),
            '\n' if attribute => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' if attribute => out.push_str("&#9;"),
            '\t' | '\n' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {
                out.push_str(&format!("\\u{{{:04x}}}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(text("a<b>&c\"'\n"), "a&lt;b&gt;&amp;c\"'\n");
        assert_eq!(attr("a\"b'\nc\td"), "a&quot;b&apos;&#10;c&#9;d");
        assert_eq!(text("x\u{0}y\u{1b}"), "x\\u{0000}y\\u{001b}");
        assert_eq!(text("ünï"), "ünï");
    }
}
