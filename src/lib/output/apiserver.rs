//! Rendering for `dpctl apiserver`: the server's start, each write as it
//! happens, and the published ResourceSlices (at the end of a run, or read
//! back from the record with `dpctl apiserver slices|writes`).

use serde_json::{Value, json};

use super::{Streams, out_err, table, write_json, write_json_line, write_table};
use crate::apiserver::{Record, Write};
use crate::error::Result;

/// The server is up: where, and its kubeconfig (a JSON line for programs).
pub fn serving(s: &mut Streams<'_>, url: &str, kubeconfig: &std::path::Path, objects: usize) -> Result<()> {
    if s.format.is_json() {
        let v = json!({"event": "serving", "server": url, "kubeconfig": kubeconfig, "objects": objects});
        return write_json_line(s.out, &v).map_err(out_err);
    }
    s.note(format!("dpctl apiserver: serving {} at {url}", crate::text::count(objects, "object", "objects")))?;
    s.note(format!("kubeconfig: {} (Ctrl-C stops; writes are shown as they happen)", kubeconfig.display()))
}

/// One write, as it happens.
pub fn write(s: &mut Streams<'_>, w: &Write) -> Result<()> {
    if s.format.is_json() {
        let mut v = serde_json::to_value(w).map_err(|e| out_err(e.into()))?;
        v["event"] = json!("write");
        return write_json_line(s.out, &v).map_err(out_err);
    }
    let verb = serde_json::to_value(w.verb).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
    writeln!(s.out, "{verb:<7} {}/{}  resourceVersion {}", w.resource, w.name, w.resource_version).map_err(out_err)?;
    s.out.flush().map_err(out_err)
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn slices_table(s: &mut Streams<'_>, slices: &[Value]) -> Result<()> {
    let mut t = table(["NAME", "DRIVER", "NODE", "POOL", "GENERATION", "DEVICES"]);
    for sl in slices {
        let node = match text(sl, "/spec/nodeName") {
            "" if sl.pointer("/spec/allNodes") == Some(&json!(true)) => "(all nodes)".to_string(),
            "" => "(node selector)".to_string(),
            n => n.to_string(),
        };
        let devices: Vec<&str> = sl
            .pointer("/spec/devices")
            .and_then(Value::as_array)
            .map(|d| d.iter().map(|d| text(d, "/name")).collect())
            .unwrap_or_default();
        let generation = sl.pointer("/spec/pool/generation").map(Value::to_string).unwrap_or_default();
        t.add_row([
            text(sl, "/metadata/name").to_string(),
            text(sl, "/spec/driver").to_string(),
            node,
            text(sl, "/spec/pool/name").to_string(),
            generation,
            devices.join(","),
        ]);
    }
    write_table(s.out, &t).map_err(out_err)
}

/// The run ended: the slices as they stand (JSON: the whole record).
pub fn stopped(s: &mut Streams<'_>, r: &Record) -> Result<()> {
    if s.format.is_json() {
        let mut v = serde_json::to_value(r).map_err(|e| out_err(e.into()))?;
        v["event"] = json!("stopped");
        return write_json_line(s.out, &v).map_err(out_err);
    }
    s.note(format!("dpctl apiserver: stopped after {} writes; {} ResourceSlices:", r.writes, r.slices.len()))?;
    slices_table(s, &r.slices)
}

/// `dpctl apiserver slices`: the published slices (JSON: the objects as stored).
pub fn slices(s: &mut Streams<'_>, r: &Record) -> Result<()> {
    if s.format.is_json() {
        return write_json(s.out, &r.slices).map_err(out_err);
    }
    slices_table(s, &r.slices)
}

/// `dpctl apiserver writes`: every recorded write, in order.
pub fn writes(s: &mut Streams<'_>, writes: &[Value]) -> Result<()> {
    if s.format.is_json() {
        return write_json(s.out, writes).map_err(out_err);
    }
    let mut t = table(["RESOURCEVERSION", "VERB", "RESOURCE", "NAME"]);
    for w in writes {
        t.add_row([
            text(w, "/resource_version").to_string(),
            text(w, "/verb").to_string(),
            text(w, "/resource").to_string(),
            text(w, "/name").to_string(),
        ]);
    }
    write_table(s.out, &t).map_err(out_err)
}
