//! The objects file: the API objects `dpctl apiserver` serves, as JSON or
//! YAML. One object, several YAML documents, a JSON array, or a `kind:
//! List` with `items` (what `kubectl get -o yaml` prints). Every object is
//! checked before anything is served: a served kind and version, a name,
//! a namespace only where the kind has one, no name twice, and for
//! ResourceClaims the shape of `status.allocation` and `reservedFor` that
//! drivers read.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;
use serde::de::DeserializeSeed;
use serde_json::Value;

use super::kinds::{KINDS, Kind};
use crate::error::{Error, Result};

/// Most objects one file may hold.
pub const MAX_OBJECTS: usize = 10_000;

/// Reads and checks the objects file at `path`.
pub fn load(path: &Path) -> Result<Vec<(&'static Kind, Value)>> {
    load_as(path, "--objects")
}

/// [`load`], naming the file by `flag` in errors.
pub fn load_as(path: &Path, flag: &str) -> Result<Vec<(&'static Kind, Value)>> {
    let place = format!("{flag} {}", path.display());
    let text = crate::input::read_text(path, &place)?;
    crate::input::check_depth(&text, &place, 64)?;
    parse(&text, &place)
}

/// Parses and checks the text of an objects file.
pub fn parse(text: &str, place: &str) -> Result<Vec<(&'static Kind, Value)>> {
    // A byte-order mark (as some editors write) is not part of the document.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let raw = read_objects(text, place)?;
    if raw.is_empty() {
        return Err(Error::invalid(
            place,
            "no objects: want Kubernetes objects (ResourceClaims, the Node, Pods, DeviceClasses, ResourceSlices) \
             as YAML documents, a JSON array or a List",
        ));
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(raw.len());
    for (i, obj) in raw.into_iter().enumerate() {
        let at = format!("{place}: object {}", i + 1);
        let (kind, obj) = check(obj, &at)?;
        let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default().to_string();
        let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
        if !seen.insert((kind.resource, ns.clone(), name.clone())) {
            let whole = if kind.namespaced { format!("{ns}/{name}") } else { name };
            let whole = crate::text::shorten(&whole, 120);
            return Err(Error::invalid(at, format!("{} {whole} is named twice", kind.kind)));
        }
        out.push((kind, obj));
    }
    Ok(out)
}

/// The objects of the file, counted while they are read: past
/// [`MAX_OBJECTS`] reading stops (a 60 MB file took 37 s and 1.4 GB before
/// it was refused). JSON (what starts with `[` or `{`) is read by the JSON
/// parser, in linear time; what it does not take is read as YAML.
fn read_objects(text: &str, place: &str) -> Result<Vec<Value>> {
    let too_many = || Error::invalid(place, format!("more than {MAX_OBJECTS} objects; at most {MAX_OBJECTS}"));
    if text.trim_start().starts_with(['[', '{']) {
        let mut raw = Vec::new();
        let mut docs = serde_json::Deserializer::from_str(text);
        let read = (|| {
            while docs.end().is_err() {
                Collect(&mut raw).deserialize(&mut docs)?;
            }
            Ok::<_, serde_json::Error>(())
        })();
        match read {
            Ok(()) => return Ok(raw),
            Err(e) if e.to_string().starts_with(TOO_MANY) => return Err(too_many()),
            Err(_) => {} // JSON-like YAML (`{a: b}`): read below.
        }
    }
    let mut raw = Vec::new();
    for (i, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
        Collect(&mut raw).deserialize(doc).map_err(|e| match e.to_string().starts_with(TOO_MANY) {
            true => too_many(),
            false => Error::invalid(place, format!("document {}: not JSON or YAML: {e}", i + 1)),
        })?;
    }
    Ok(raw)
}

/// The error [`Collect`] stops with.
const TOO_MANY: &str = "too many objects";

/// Reads one document into the objects it holds ([`flatten`]), an array's
/// items one at a time, failing with [`TOO_MANY`] past [`MAX_OBJECTS`].
struct Collect<'a>(&'a mut Vec<Value>);

impl<'de> serde::de::DeserializeSeed<'de> for Collect<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Collect<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("Kubernetes objects")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(mut self, mut seq: A) -> std::result::Result<(), A::Error> {
        while let Some(v) = seq.next_element::<Value>()? {
            self.push(v)?;
        }
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(mut self, map: A) -> std::result::Result<(), A::Error> {
        self.push(Value::deserialize(serde::de::value::MapAccessDeserializer::new(map))?)
    }
    fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_none<E: serde::de::Error>(self) -> std::result::Result<(), E> {
        Ok(())
    }
    fn visit_bool<E: serde::de::Error>(mut self, v: bool) -> std::result::Result<(), E> {
        self.push(Value::Bool(v))
    }
    fn visit_i64<E: serde::de::Error>(mut self, v: i64) -> std::result::Result<(), E> {
        self.push(Value::from(v))
    }
    fn visit_u64<E: serde::de::Error>(mut self, v: u64) -> std::result::Result<(), E> {
        self.push(Value::from(v))
    }
    fn visit_f64<E: serde::de::Error>(mut self, v: f64) -> std::result::Result<(), E> {
        self.push(Value::from(v))
    }
    fn visit_str<E: serde::de::Error>(mut self, v: &str) -> std::result::Result<(), E> {
        self.push(Value::from(v))
    }
}

impl Collect<'_> {
    fn push<E: serde::de::Error>(&mut self, v: Value) -> std::result::Result<(), E> {
        flatten(v, self.0);
        if self.0.len() > MAX_OBJECTS { Err(E::custom(TOO_MANY)) } else { Ok(()) }
    }
}

/// Unpacks arrays and `List`s into objects; nulls (empty YAML documents) vanish.
fn flatten(value: Value, out: &mut Vec<Value>) {
    match value {
        Value::Null => {}
        Value::Array(items) => items.into_iter().for_each(|v| flatten(v, out)),
        Value::Object(ref m) if m.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List")) => {
            if let Some(Value::Array(items)) = m.get("items") {
                items.iter().cloned().for_each(|v| flatten(v, out));
            } else {
                out.push(value);
            }
        }
        other => out.push(other),
    }
}

fn served() -> String {
    KINDS.iter().map(|k| format!("{} {}", k.api_version(), k.kind)).collect::<Vec<_>>().join(", ")
}

/// Checks one object, giving a namespaced one `default` when it names none.
fn check(mut obj: Value, at: &str) -> Result<(&'static Kind, Value)> {
    let bad = |m: String| Error::invalid(at, m);
    if !obj.is_object() {
        return Err(bad(format!(
            "not an object (a {}); want a Kubernetes object with apiVersion and kind",
            type_name(&obj)
        )));
    }
    let text = |f: &str| obj.get(f).and_then(Value::as_str).map(str::to_string);
    let (Some(api_version), Some(kind_name)) = (text("apiVersion"), text("kind")) else {
        return Err(bad(
            "apiVersion and kind are required (e.g. apiVersion: resource.k8s.io/v1, kind: ResourceClaim)".into()
        ));
    };
    let Some(kind) = Kind::of_object(&api_version, &kind_name) else {
        let hint = match KINDS.iter().find(|k| k.kind == kind_name) {
            Some(k) => format!("; only {} is served (convert the object to it)", k.api_version()),
            None => String::new(),
        };
        return Err(bad(format!("{api_version} {kind_name} is not served{hint} (served: {})", served())));
    };
    let Some(name) = obj.pointer("/metadata/name").and_then(Value::as_str).map(str::to_string) else {
        return Err(bad(format!("{kind_name}: metadata.name is required")));
    };
    let label = format!("{kind_name} {:?}", crate::text::shorten(&name, 80));
    if !crate::validate::is_dns1123_subdomain(&name) {
        return Err(bad(format!("{label}: the name is not a DNS subdomain (lowercase letters, digits, '-', '.')")));
    }
    let ns = obj.pointer("/metadata/namespace").cloned();
    match (kind.namespaced, ns) {
        (true, None | Some(Value::Null)) => obj["metadata"]["namespace"] = Value::from("default"),
        (true, Some(Value::String(ns))) if crate::validate::is_dns1123_subdomain(&ns) && ns.len() <= 63 => {}
        (true, Some(ns)) => return Err(bad(format!("{label}: namespace {ns} is not a DNS label"))),
        (false, None | Some(Value::Null)) => {}
        (false, Some(_)) => {
            return Err(bad(format!("{label}: a {kind_name} is cluster-scoped; remove metadata.namespace")));
        }
    }
    let uid = obj.pointer("/metadata/uid").filter(|u| !u.is_null());
    if uid.is_some_and(|u| u.as_str().is_none_or(|u| u.is_empty() || u.len() > 128)) {
        return Err(bad(format!("{label}: metadata.uid must be a non-empty string of at most 128 characters")));
    }
    if kind.kind == "ResourceClaim" {
        check_claim(&obj).map_err(|m| bad(format!("{label}: {m}")))?;
    }
    Ok((kind, obj))
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "mapping",
    }
}

/// The parts of a claim a driver reads: `status.allocation.devices.results`
/// (request, driver, pool, device) and `status.reservedFor` (resource, name, uid).
fn check_claim(obj: &Value) -> std::result::Result<(), String> {
    let results = obj.pointer("/status/allocation/devices/results");
    if let Some(results) = results.filter(|r| !r.is_null()) {
        let Some(list) = results.as_array() else {
            return Err(format!("status.allocation.devices.results is a {}, not a list", type_name(results)));
        };
        for (i, r) in list.iter().enumerate() {
            for field in ["request", "driver", "pool", "device"] {
                if r.get(field).and_then(Value::as_str).is_none_or(|s| s.is_empty()) {
                    return Err(format!(
                        "status.allocation.devices.results[{i}].{field} is required (a non-empty string)"
                    ));
                }
            }
        }
    }
    if let Some(reserved) = obj.pointer("/status/reservedFor").filter(|r| !r.is_null()) {
        let Some(list) = reserved.as_array() else {
            return Err(format!("status.reservedFor is a {}, not a list", type_name(reserved)));
        };
        for (i, r) in list.iter().enumerate() {
            for field in ["resource", "name", "uid"] {
                if r.get(field).and_then(Value::as_str).is_none_or(|s| s.is_empty()) {
                    return Err(format!("status.reservedFor[{i}].{field} is required (a non-empty string)"));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "\
apiVersion: v1
kind: Node
metadata: {name: node-1}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu, uid: c1}
status:
  allocation:
    devices:
      results: [{request: r, driver: gpu.example, pool: node-1, device: gpu-0}]
  reservedFor: [{resource: pods, name: p, uid: p1}]
";

    #[test]
    fn yaml_documents_load_and_namespaced_objects_get_default() {
        let objs = parse(FILE, "f").unwrap();
        assert_eq!(objs.len(), 2);
        assert_eq!(objs[1].1["metadata"]["namespace"], "default");
        let list = r#"{"kind": "List", "apiVersion": "v1", "items": [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}]}"#;
        assert_eq!(parse(list, "f").unwrap().len(), 1);
    }

    #[test]
    fn json_like_yaml_and_a_byte_order_mark_read_as_objects() {
        let node = "{apiVersion: v1, kind: Node, metadata: {name: n}}";
        assert_eq!(parse(node, "f").unwrap().len(), 1);
        assert_eq!(parse(&format!("\u{feff}{FILE}"), "f").unwrap().len(), 2);
        let json = r#"[{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"}}]
{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "b"}}"#;
        assert_eq!(parse(json, "f").unwrap().len(), 2);
    }

    #[test]
    fn too_many_objects_stop_the_reading_at_the_limit() {
        let node = |i: usize| format!(r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"n{i}"}}}}"#);
        // The object past the limit is followed by one that does not parse:
        // the reading stopped at the limit, before it.
        let items: Vec<String> = (0..=MAX_OBJECTS).map(node).collect();
        let json = format!("[{},{{\"broken\": ]", items.join(","));
        let e = parse(&json, "--objects f").unwrap_err().to_string();
        assert!(e.contains("--objects f: more than 10000 objects; at most 10000"), "{e}");
        let yaml: String = (0..=MAX_OBJECTS).map(|i| format!("---\n{}\n", node(i))).collect::<String>() + "---\n: [\n";
        let e = parse(&yaml, "--objects f").unwrap_err().to_string();
        assert!(e.contains("more than 10000 objects"), "{e}");
    }

    #[test]
    fn bad_objects_are_refused_naming_the_object_and_the_field() {
        let e =
            parse("apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata: {name: a}\n", "f").unwrap_err();
        assert!(e.to_string().contains("only resource.k8s.io/v1 is served"), "{e}");
        let e = parse("apiVersion: v1\nkind: Secret\nmetadata: {name: a}\n", "f").unwrap_err();
        assert!(e.to_string().contains("v1 Secret is not served"), "{e}");
        let twice = format!("{FILE}---\n{}", FILE.split("---\n").nth(1).unwrap());
        assert!(parse(&twice, "f").unwrap_err().to_string().contains("named twice"));
        let e = parse(&FILE.replace("device: gpu-0", "device: ''"), "f").unwrap_err();
        assert!(e.to_string().contains("results[0].device"), "{e}");
        let e = parse("apiVersion: v1\nkind: Node\nmetadata: {name: n, namespace: x}\n", "f").unwrap_err();
        assert!(e.to_string().contains("cluster-scoped"), "{e}");
        assert!(parse("", "f").unwrap_err().to_string().contains("no objects"));
        assert!(parse("[1, 2]", "f").unwrap_err().to_string().contains("object 1"));
    }
}
