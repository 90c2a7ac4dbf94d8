//! The checkpoint's JSON as Go's `encoding/json` reads and writes it:
//! field names matched exactly, then case-insensitively; missing fields and
//! `null` leave Go's zero value (nil); map keys written sorted by their text;
//! strings escaped as Go escapes them (`<`, `>`, `&`, U+2028 and U+2029 as
//! `\uXXXX`); `[]byte` as padded base64.

use std::collections::BTreeMap;

use base64::Engine;
use serde_json::{Map, Value};

use super::{Checkpoint, CheckpointData, DeviceIds, LegacyFormat, PodDevicesEntry};
use crate::error::{Error, Result};

/// Go's `base64.StdEncoding` (padded; lenient about trailing bits).
const GO_STD_BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);

/// Where in the file a value is, for errors (`Data.PodDeviceEntries[0].DeviceIDs`).
struct At<'a> {
    source: &'a str,
    path: String,
}

impl At<'_> {
    fn err(&self, message: impl std::fmt::Display) -> Error {
        Error::invalid(self.source.to_string(), format!("{}: {message}", self.path))
    }

    fn child(&self, name: &str) -> At<'_> {
        let path = if self.path.is_empty() { name.to_string() } else { format!("{}.{name}", self.path) };
        At { source: self.source, path }
    }

    fn index(&self, i: usize) -> At<'_> {
        At { source: self.source, path: format!("{}[{i}]", self.path) }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A struct field as Go finds it: the exact name, else a case-insensitive match.
fn field<'v>(obj: &'v Map<String, Value>, name: &str) -> Option<&'v Value> {
    obj.get(name).or_else(|| obj.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v))
}

/// An object, or `None` for null (Go leaves the zero value).
fn object<'v>(v: &'v Value, at: &At<'_>, go_type: &str) -> Result<Option<&'v Map<String, Value>>> {
    match v {
        Value::Null => Ok(None),
        Value::Object(m) => Ok(Some(m)),
        other => Err(at.err(format_args!("cannot unmarshal {} into Go value of type {go_type}", kind(other)))),
    }
}

fn string(v: Option<&Value>, at: &At<'_>) -> Result<String> {
    match v {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(at.err(format_args!("cannot unmarshal {} into Go value of type string", kind(other)))),
    }
}

fn strings(v: Option<&Value>, at: &At<'_>) -> Result<Option<Vec<String>>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| string(Some(item), &at.index(i)))
            .collect::<Result<Vec<_>>>()
            .map(Some),
        Some(other) => Err(at.err(format_args!("cannot unmarshal {} into Go value of type []string", kind(other)))),
    }
}

fn string_map(v: Option<&Value>, at: &At<'_>) -> Result<Option<BTreeMap<String, Option<Vec<String>>>>> {
    let Some(m) = v.map(|v| object(v, at, "map[string][]string")).transpose()?.flatten() else { return Ok(None) };
    let mut out = BTreeMap::new();
    for (k, v) in m {
        out.insert(k.clone(), strings(Some(v), &at.child(k))?);
    }
    Ok(Some(out))
}

fn device_ids(v: Option<&Value>, at: &At<'_>, legacy: LegacyFormat) -> Result<DeviceIds> {
    match v {
        Some(Value::Array(_)) if legacy == LegacyFormat::Accept => Ok(DeviceIds::Legacy(strings(v, at)?)),
        Some(Value::Array(_)) => Err(at.err(
            "cannot unmarshal array into Go value of type checkpoint.DevicesPerNUMA: this is the pre-1.20 (v1) \
             checkpoint format, which kubelets up to 1.30 read and 1.31+ do not",
        )),
        None | Some(Value::Null) => Ok(DeviceIds::PerNuma(None)),
        Some(v) => {
            let Some(m) = object(v, at, "checkpoint.DevicesPerNUMA")? else { return Ok(DeviceIds::PerNuma(None)) };
            let mut out = BTreeMap::new();
            for (k, v) in m {
                let node: i64 = k
                    .parse()
                    .map_err(|_| at.err(format_args!("cannot unmarshal number {k:?} into Go value of type int64")))?;
                out.insert(node, strings(Some(v), &at.child(k))?);
            }
            Ok(DeviceIds::PerNuma(Some(out)))
        }
    }
}

fn alloc_resp(v: Option<&Value>, at: &At<'_>) -> Result<Option<Vec<u8>>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            // Go's decoder skips \r and \n inside base64.
            let clean: String = s.chars().filter(|c| *c != '\r' && *c != '\n').collect();
            GO_STD_BASE64.decode(clean.as_bytes()).map(Some).map_err(|e| at.err(format_args!("not base64: {e}")))
        }
        Some(other) => Err(at.err(format_args!("cannot unmarshal {} into Go value of type []uint8", kind(other)))),
    }
}

fn entry(v: &Value, at: &At<'_>, legacy: LegacyFormat) -> Result<PodDevicesEntry> {
    let empty = Map::new();
    let m = object(v, at, "checkpoint.PodDevicesEntry")?.unwrap_or(&empty);
    Ok(PodDevicesEntry {
        pod_uid: string(field(m, "PodUID"), &at.child("PodUID"))?,
        container_name: string(field(m, "ContainerName"), &at.child("ContainerName"))?,
        resource_name: string(field(m, "ResourceName"), &at.child("ResourceName"))?,
        device_ids: device_ids(field(m, "DeviceIDs"), &at.child("DeviceIDs"), legacy)?,
        alloc_resp: alloc_resp(field(m, "AllocResp"), &at.child("AllocResp"))?,
    })
}

/// See [`Checkpoint::parse`].
pub(super) fn parse(bytes: &[u8], source: &str, legacy: LegacyFormat) -> Result<Checkpoint> {
    let root: Value = serde_json::from_slice(bytes).map_err(|e| {
        Error::invalid(source.to_string(), format!("not a device manager checkpoint (invalid JSON: {e})"))
    })?;
    let top = At { source, path: String::new() };
    let empty = Map::new();
    let m = object(&root, &top, "checkpoint.Data")?.unwrap_or(&empty);
    let data_at = top.child("Data");
    let data = match field(m, "Data").map(|v| object(v, &data_at, "checkpoint.checkpointData")).transpose()?.flatten() {
        None => CheckpointData::default(),
        Some(d) => {
            let entries_at = data_at.child("PodDeviceEntries");
            let pod_device_entries = match field(d, "PodDeviceEntries") {
                None | Some(Value::Null) => None,
                Some(Value::Array(items)) => Some(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| entry(v, &entries_at.index(i), legacy))
                        .collect::<Result<Vec<_>>>()?,
                ),
                Some(other) => {
                    return Err(entries_at.err(format_args!(
                        "cannot unmarshal {} into Go value of type []checkpoint.PodDevicesEntry",
                        kind(other)
                    )));
                }
            };
            let registered_devices = string_map(field(d, "RegisteredDevices"), &data_at.child("RegisteredDevices"))?;
            CheckpointData { pod_device_entries, registered_devices }
        }
    };
    let sum_at = top.child("Checksum");
    let checksum = match field(m, "Checksum") {
        None | Some(Value::Null) => 0,
        Some(Value::Number(n)) => n
            .as_u64()
            .ok_or_else(|| sum_at.err(format_args!("cannot unmarshal number {n} into Go value of type uint64")))?,
        Some(other) => {
            return Err(sum_at.err(format_args!("cannot unmarshal {} into Go value of type uint64", kind(other))));
        }
    };
    Ok(Checkpoint { data, checksum })
}

/// Appends `s` as a Go JSON string (HTML-safe escaping, as `json.Marshal`).
fn put_str(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            '\u{2028}' => out.extend_from_slice(b"\\u2028"),
            '\u{2029}' => out.extend_from_slice(b"\\u2029"),
            c if (c as u32) < 0x20 || c == '<' || c == '>' || c == '&' => {
                let b = c as u32;
                out.extend_from_slice(b"\\u00");
                out.push(HEX[((b >> 4) & 0xf) as usize]);
                out.push(HEX[(b & 0xf) as usize]);
            }
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

fn put_strings(out: &mut Vec<u8>, v: Option<&[String]>) {
    match v {
        None => out.extend_from_slice(b"null"),
        Some(items) => {
            out.push(b'[');
            for (i, s) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                put_str(out, s);
            }
            out.push(b']');
        }
    }
}

fn put_entry(out: &mut Vec<u8>, e: &PodDevicesEntry) {
    out.extend_from_slice(b"{\"PodUID\":");
    put_str(out, &e.pod_uid);
    out.extend_from_slice(b",\"ContainerName\":");
    put_str(out, &e.container_name);
    out.extend_from_slice(b",\"ResourceName\":");
    put_str(out, &e.resource_name);
    out.extend_from_slice(b",\"DeviceIDs\":");
    match &e.device_ids {
        DeviceIds::Legacy(ids) => put_strings(out, ids.as_deref()),
        DeviceIds::PerNuma(None) => out.extend_from_slice(b"null"),
        DeviceIds::PerNuma(Some(m)) => {
            // encoding/json sorts map keys by their text: "-1" < "0" < "10" < "2".
            let mut keys: Vec<(String, Option<&[String]>)> =
                m.iter().map(|(k, v)| (k.to_string(), v.as_deref())).collect();
            keys.sort_by(|a, b| a.0.cmp(&b.0));
            out.push(b'{');
            for (i, (k, v)) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                put_str(out, k);
                out.push(b':');
                put_strings(out, *v);
            }
            out.push(b'}');
        }
    }
    out.extend_from_slice(b",\"AllocResp\":");
    match &e.alloc_resp {
        None => out.extend_from_slice(b"null"),
        Some(b) => put_str(out, &GO_STD_BASE64.encode(b)),
    }
    out.push(b'}');
}

/// See [`Checkpoint::to_json`].
pub(super) fn to_json(cp: &Checkpoint) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"{\"Data\":{\"PodDeviceEntries\":");
    match &cp.data.pod_device_entries {
        None => out.extend_from_slice(b"null"),
        Some(entries) => {
            out.push(b'[');
            for (i, e) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                put_entry(&mut out, e);
            }
            out.push(b']');
        }
    }
    out.extend_from_slice(b",\"RegisteredDevices\":");
    match &cp.data.registered_devices {
        None => out.extend_from_slice(b"null"),
        Some(m) => {
            out.push(b'{');
            for (i, (k, v)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                put_str(&mut out, k);
                out.push(b':');
                put_strings(&mut out, v.as_deref());
            }
            out.push(b'}');
        }
    }
    out.extend_from_slice(b"},\"Checksum\":");
    out.extend_from_slice(cp.checksum.to_string().as_bytes());
    out.push(b'}');
    out
}
