//! `-v` on the wire, like grpcurl's: each gRPC call the transport reports
//! ([`WireEvent`]) rendered on stderr as it happens, so stdout stays the
//! command's data. `-v` shows the method, each request and response message
//! as JSON, the status and the latency; `-vv` adds the request and response
//! headers and the trailers; `-vvv` prints long messages whole. With
//! `-o json` or `-o yaml` each event is one JSON line on stderr instead.

use std::fmt::Write as _;
use std::io::Write;
use std::sync::{Arc, Mutex};

use super::{Format, Term};
use crate::wire_events::{Header, Tap, WireEvent, WireMessage};

/// Characters of a message's JSON shown below `-vvv`.
pub const MESSAGE_CHARS: usize = 4000;

/// How much of each call is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detail {
    /// Request and response headers and trailers (`-vv`).
    pub headers: bool,
    /// Messages whole, however long (`-vvv`).
    pub whole: bool,
    /// One JSON line per event (`-o json`/`-o yaml`).
    pub json: bool,
}

impl Detail {
    /// The detail `-v` given `verbose` times asks for; none for 0 or `--quiet`.
    pub fn from_flags(verbose: u8, quiet: bool, format: Format) -> Option<Detail> {
        (verbose > 0 && !quiet).then_some(Detail { headers: verbose >= 2, whole: verbose >= 3, json: format.is_json() })
    }
}

/// Makes the terminal's stderr shared and returns a tap that renders every
/// call on it at `detail`. The command's own stderr lines go through the
/// same lock, so an event is never cut by a line of narration.
pub fn tap(term: &mut Term, detail: Detail) -> Tap {
    let err = std::mem::replace(&mut term.err, Box::new(std::io::sink()));
    let shared = Shared(Arc::new(Mutex::new(err)));
    term.err = Box::new(shared.clone());
    // The calls dpctl serves, from their `Call` to their `End`: their arrows point the other way.
    let served = Mutex::new(std::collections::HashSet::new());
    Tap::new(move |event| {
        let id = event.call();
        let is_served = served.lock().is_ok_and(|mut s| {
            if let WireEvent::Call { served: true, .. } = event {
                s.insert(id);
            }
            let is = s.contains(&id);
            if let WireEvent::End { .. } = event {
                s.remove(&id);
            }
            is
        });
        let text = render(event, detail, is_served);
        if let Ok(mut w) = shared.0.lock() {
            // stderr going away must not fail the call being watched.
            let _ = w.write_all(text.as_bytes()).and_then(|()| w.flush());
        }
    })
}

/// stderr behind a lock, written by the command and by the tap.
#[derive(Clone)]
struct Shared(Arc<Mutex<Box<dyn Write + Send>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().map_err(|_| std::io::Error::other("stderr lock poisoned"))?.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.lock().map_err(|_| std::io::Error::other("stderr lock poisoned"))?.flush()
    }
}

/// One event as the lines a person reads (`>` dpctl sends, `<` dpctl
/// receives; `served`: dpctl answers the call), or one JSON line.
pub fn render(event: &WireEvent, detail: Detail, served: bool) -> String {
    if detail.json {
        let mut line = serde_json::to_string(event).unwrap_or_default();
        line.push('\n');
        return line;
    }
    let mut s = String::new();
    // The request goes out and the answer comes in, or the other way round when dpctl serves.
    let (out, back) = if served { ('<', '>') } else { ('>', '<') };
    match event {
        WireEvent::Call { call, method, by, served, headers } => {
            let by = by.as_ref().map(|b| format!(" (by {b})")).unwrap_or_default();
            let verb = if *served { "served" } else { "call" };
            let _ = writeln!(s, "{out} #{call} {verb} {method}{by}");
            if detail.headers {
                header_lines(&mut s, out, *call, "header", headers);
            }
        }
        WireEvent::Request { call, message, .. } => {
            let _ = writeln!(s, "{out} #{call} request {}", message_text(message, detail));
        }
        WireEvent::Headers { call, headers, elapsed_ms, .. } => {
            if detail.headers {
                let _ = writeln!(s, "{back} #{call} headers ({})", ms(*elapsed_ms));
                header_lines(&mut s, back, *call, "header", headers);
            }
        }
        WireEvent::Response { call, seq, message, elapsed_ms, .. } => {
            let bytes = crate::text::count(message.bytes as u64, "byte", "bytes");
            let text = message_text(message, detail);
            let _ = writeln!(s, "{back} #{call} response {seq} {text} ({bytes}, {})", ms(*elapsed_ms));
        }
        WireEvent::End {
            call, code, status_message, ended_by, trailers, trailers_only, responses, elapsed_ms, ..
        } => {
            if detail.headers && *trailers_only {
                let _ = writeln!(
                    s,
                    "{back} #{call} trailers: none (a trailers-only response: the status came in the headers)"
                );
            } else if detail.headers {
                header_lines(&mut s, back, *call, "trailer", trailers);
            }
            let code = code_text(code);
            let took = ms(*elapsed_ms);
            let _ = match *ended_by {
                "client" if !served => {
                    let n = crate::text::count(*responses, "response", "responses");
                    writeln!(s, "{back} #{call} status {code}: dpctl ended the call after {n} ({took})")
                }
                _ if status_message.is_empty() => writeln!(s, "{back} #{call} status {code} ({took})"),
                _ => writeln!(s, "{back} #{call} status {code}: {status_message} ({took})"),
            };
        }
    }
    s
}

/// A status code as gRPC spells it: `OK`, `InvalidArgument`.
fn code_text(code: &str) -> String {
    if code == "ok" {
        return "OK".into();
    }
    code.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect()
}

fn header_lines(s: &mut String, arrow: char, call: u64, kind: &str, headers: &[Header]) {
    if headers.is_empty() {
        let _ = writeln!(s, "{arrow} #{call} {kind}s: (none)");
    }
    for h in headers {
        let _ = writeln!(s, "{arrow} #{call} {kind} {}: {}", h.name, h.value);
    }
}

/// A message as compact JSON, shortened below `-vvv`; or why it is not JSON.
fn message_text(m: &WireMessage, detail: Detail) -> String {
    let Some(json) = &m.json else {
        return format!("({})", m.undecoded.as_deref().unwrap_or("not decoded"));
    };
    let text = json.to_string();
    let len = text.chars().count();
    if detail.whole || len <= MESSAGE_CHARS {
        return text;
    }
    let head: String = text.chars().take(MESSAGE_CHARS).collect();
    format!("{head}… ({} more characters; -vvv shows it whole)", len - MESSAGE_CHARS)
}

/// Milliseconds for people: `0.42ms`, `12.3ms`, `1.50s`.
fn ms(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.2}ms")
    } else if v < 1000.0 {
        format!("{v:.1}ms")
    } else {
        format!("{:.2}s", v / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(json: serde_json::Value) -> WireMessage {
        WireMessage { bytes: 2, json: Some(json), undecoded: None }
    }

    #[test]
    fn a_call_reads_as_sent_and_received_lines() {
        let d = Detail { headers: false, whole: false, json: false };
        let h = vec![Header { name: "te".into(), value: "trailers".into() }];
        let call = WireEvent::Call {
            call: 3,
            method: "/v1beta1.DevicePlugin/Allocate".into(),
            by: None,
            served: false,
            headers: h.clone(),
        };
        assert_eq!(render(&call, d, false), "> #3 call /v1beta1.DevicePlugin/Allocate\n");
        let with_headers = render(&call, Detail { headers: true, ..d }, false);
        assert_eq!(with_headers, "> #3 call /v1beta1.DevicePlugin/Allocate\n> #3 header te: trailers\n");
        let resp = WireEvent::Response {
            call: 3,
            method: String::new(),
            seq: 1,
            message: msg(serde_json::json!({"a": 1})),
            elapsed_ms: 1.234,
        };
        assert_eq!(render(&resp, d, false), "< #3 response 1 {\"a\":1} (2 bytes, 1.23ms)\n");
        let end = |by, code: &str, message: &str| WireEvent::End {
            call: 3,
            method: String::new(),
            code: code.into(),
            status_message: message.into(),
            ended_by: by,
            trailers: Vec::new(),
            trailers_only: false,
            responses: 1,
            elapsed_ms: 1500.0,
        };
        assert_eq!(render(&end("server", "ok", ""), d, false), "< #3 status OK (1.50s)\n");
        assert_eq!(render(&end("server", "not_found", "no dev"), d, false), "< #3 status NotFound: no dev (1.50s)\n");
        assert_eq!(
            render(&end("client", "cancelled", ""), d, false),
            "< #3 status Cancelled: dpctl ended the call after 1 response (1.50s)\n"
        );
        assert_eq!(
            render(&end("server", "ok", ""), Detail { headers: true, ..d }, false),
            "< #3 trailers: (none)\n< #3 status OK (1.50s)\n"
        );
        // Served: the request comes in, the answer goes out.
        assert_eq!(render(&resp, d, true), "> #3 response 1 {\"a\":1} (2 bytes, 1.23ms)\n");
        let json = render(&end("server", "ok", ""), Detail { json: true, ..d }, false);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            (v["event"].as_str(), v["code"].as_str(), v["elapsed_ms"].as_f64()),
            (Some("end"), Some("ok"), Some(1500.0))
        );
    }

    #[test]
    fn long_messages_are_shortened_below_vvv() {
        let long = msg(serde_json::Value::String("x".repeat(MESSAGE_CHARS * 2)));
        let d = Detail { headers: false, whole: false, json: false };
        let short = message_text(&long, d);
        assert!(short.ends_with(&format!("… ({} more characters; -vvv shows it whole)", MESSAGE_CHARS + 2)), "{short}");
        assert_eq!(message_text(&long, Detail { whole: true, ..d }).len(), MESSAGE_CHARS * 2 + 2);
        let odd = WireMessage { bytes: 9, json: None, undecoded: Some("compressed".into()) };
        assert_eq!(message_text(&odd, d), "(compressed)");
    }
}
