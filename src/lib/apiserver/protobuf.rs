//! Bodies in the Kubernetes protobuf encoding, as JSON. client-go's typed
//! clients send built-in objects as `application/vnd.kubernetes.protobuf`
//! (`gentype`'s `PrefersProtobuf`), so a driver's ResourceSlice writes and
//! their DeleteOptions arrive that way: the bytes `k8s\0`, then a
//! `runtime.Unknown` holding the object's apiVersion and kind and its own
//! protobuf bytes. They are decoded against the subset of the API's schema
//! in `proto/k8s/` and mapped to the JSON the API's Go types marshal to:
//! field names as in the schema, integers as numbers, a Quantity as its
//! string, a Time as RFC 3339.

use std::sync::OnceLock;

use prost_reflect::{DescriptorPool, DynamicMessage, MapKey, MessageDescriptor, ReflectMessage, Value as PValue};
use serde_json::{Map, Value, json};

use super::status::ApiError;

/// The media type of the encoding.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

const MAGIC: &[u8] = b"k8s\0";

fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        DescriptorPool::decode(&include_bytes!(concat!(env!("OUT_DIR"), "/k8s-descriptors.bin"))[..])
            .expect("build.rs writes a valid descriptor set")
    })
}

/// The protobuf message of each kind a client may send.
fn message_for(kind: &str) -> Option<&'static str> {
    match kind {
        "ResourceSlice" => Some("k8s.io.api.resource.v1.ResourceSlice"),
        "DeleteOptions" => Some("k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions"),
        _ => None,
    }
}

fn unsupported(message: String) -> ApiError {
    ApiError { code: 415, reason: "UnsupportedMediaType", message, details: None }
}

/// Decodes one body: the envelope, then the object it carries.
pub fn decode(bytes: &[u8]) -> Result<Value, ApiError> {
    let bad = |m: String| ApiError::bad_request(format!("the protobuf body: {m}"));
    let rest = bytes.strip_prefix(MAGIC).ok_or_else(|| bad("it does not start with the k8s\\0 prefix".into()))?;
    let envelope =
        pool().get_message_by_name("k8s.io.apimachinery.pkg.runtime.Unknown").expect("Unknown is in the schema");
    let unknown = DynamicMessage::decode(envelope, rest).map_err(|e| bad(format!("not a runtime.Unknown: {e}")))?;
    let text = |path: &[&str]| -> String {
        let mut msg = unknown.clone();
        for (i, p) in path.iter().enumerate() {
            let v = msg.get_field_by_name(p).map(|v| v.into_owned());
            match v {
                Some(PValue::Message(m)) if i + 1 < path.len() => msg = m,
                Some(PValue::String(s)) => return s,
                _ => return String::new(),
            }
        }
        String::new()
    };
    let (api_version, kind) = (text(&["typeMeta", "apiVersion"]), text(&["typeMeta", "kind"]));
    let Some(name) = message_for(&kind) else {
        return Err(unsupported(format!(
            "dpctl apiserver decodes protobuf for ResourceSlice and DeleteOptions only, not {kind:?}; send JSON"
        )));
    };
    let raw = match unknown.get_field_by_name("raw").map(|v| v.into_owned()) {
        Some(PValue::Bytes(b)) => b,
        _ => Default::default(),
    };
    let desc = pool().get_message_by_name(name).expect("the kinds above are in the schema");
    let msg = DynamicMessage::decode(desc, raw).map_err(|e| bad(format!("not a {kind}: {e}")))?;
    let mut obj = message(&msg).map_err(|e| bad(format!("in the {kind}: {e}")))?;
    if let Some(m) = obj.as_object_mut() {
        m.insert("kind".into(), json!(kind));
        if !api_version.is_empty() {
            m.insert("apiVersion".into(), json!(api_version));
        }
    }
    Ok(obj)
}

/// The latest time JSON can carry (Go's time.Time marshals years 0-9999
/// only): 9999-12-31T23:59:59Z in Unix seconds.
const LAST_SECOND: i64 = 253_402_300_799;

fn message(msg: &DynamicMessage) -> Result<Value, String> {
    let desc: MessageDescriptor = msg.descriptor();
    match desc.full_name() {
        "k8s.io.apimachinery.pkg.api.resource.Quantity" => {
            let q = msg.get_field_by_name("string").and_then(|v| v.as_str().map(|s| json!(s)));
            return Ok(q.unwrap_or(json!("0")));
        }
        "k8s.io.apimachinery.pkg.apis.meta.v1.Time" => {
            let secs = msg.get_field_by_name("seconds").and_then(|v| v.as_i64()).unwrap_or(0);
            let Some(secs) = u64::try_from(secs).ok().filter(|s| *s <= LAST_SECOND as u64) else {
                return Err(format!(
                    "a time of {secs} seconds since 1970 is outside 1970-01-01 to 9999-12-31, the times JSON can \
                     show (year 10000 and later cannot be encoded)"
                ));
            };
            let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
            return Ok(json!(humantime::format_rfc3339_seconds(t).to_string()));
        }
        _ => {}
    }
    let mut out = Map::new();
    for (field, value) in msg.fields() {
        out.insert(field.name().to_string(), scalar(value)?);
    }
    Ok(Value::Object(out))
}

fn scalar(v: &PValue) -> Result<Value, String> {
    Ok(match v {
        PValue::Bool(b) => json!(b),
        PValue::I32(n) => json!(n),
        PValue::I64(n) => json!(n),
        PValue::U32(n) => json!(n),
        PValue::U64(n) => json!(n),
        PValue::F32(n) => json!(n),
        PValue::F64(n) => json!(n),
        PValue::String(s) => json!(s),
        PValue::Bytes(b) => json!(base64::Engine::encode(&base64::engine::general_purpose::STANDARD, b)),
        PValue::EnumNumber(n) => json!(n),
        PValue::Message(m) => message(m)?,
        PValue::List(items) => Value::Array(items.iter().map(scalar).collect::<Result<_, _>>()?),
        PValue::Map(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let key = match k {
                    MapKey::String(s) => s.clone(),
                    MapKey::Bool(b) => b.to_string(),
                    MapKey::I32(n) => n.to_string(),
                    MapKey::I64(n) => n.to_string(),
                    MapKey::U32(n) => n.to_string(),
                    MapKey::U64(n) => n.to_string(),
                };
                out.insert(key, scalar(v)?);
            }
            Value::Object(out)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    /// Encodes `obj` (a ResourceSlice as JSON-ish fields) the way client-go does.
    fn envelope(kind: &str, inner: &DynamicMessage) -> Vec<u8> {
        let desc = pool().get_message_by_name("k8s.io.apimachinery.pkg.runtime.Unknown").unwrap();
        let mut unknown = DynamicMessage::new(desc.clone());
        let tm_desc = pool().get_message_by_name("k8s.io.apimachinery.pkg.runtime.TypeMeta").unwrap();
        let mut tm = DynamicMessage::new(tm_desc);
        tm.set_field_by_name("apiVersion", PValue::String("resource.k8s.io/v1".into()));
        tm.set_field_by_name("kind", PValue::String(kind.into()));
        unknown.set_field_by_name("typeMeta", PValue::Message(tm));
        unknown.set_field_by_name("raw", PValue::Bytes(inner.encode_to_vec().into()));
        let mut out = MAGIC.to_vec();
        out.extend(unknown.encode_to_vec());
        out
    }

    #[test]
    fn a_resource_slice_decodes_to_the_json_of_the_go_type() {
        let desc = pool().get_message_by_name("k8s.io.api.resource.v1.ResourceSlice").unwrap();
        let json_in = json!({
            "metadata": {"generateName": "node-1-gpu-", "labels": {"a": "b"}},
            "spec": {
                "driver": "gpu.example", "nodeName": "node-1",
                "pool": {"name": "node-1", "generation": 3, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0", "capacity": {"memory": {"value": {"string": "16Gi"}}}, "attributes": {"model": {"string": "x"}}}],
            },
        });
        let msg = DynamicMessage::deserialize(desc, json_in).unwrap();
        let v = decode(&envelope("ResourceSlice", &msg)).unwrap();
        assert_eq!(v["kind"], "ResourceSlice");
        assert_eq!(v["apiVersion"], "resource.k8s.io/v1");
        assert_eq!(v["spec"]["pool"]["generation"], json!(3));
        assert_eq!(v["spec"]["devices"][0]["capacity"]["memory"]["value"], json!("16Gi"));
        assert_eq!(v["spec"]["devices"][0]["attributes"]["model"]["string"], json!("x"));
        assert_eq!(v["metadata"]["labels"]["a"], json!("b"));
    }

    /// A slice stamped in year 10000 (or before 1970): 400 naming the time,
    /// not a panic in the handler; 9999-12-31T23:59:59 itself decodes.
    #[test]
    fn a_time_json_cannot_show_is_bad_request_not_a_panic() {
        let desc = pool().get_message_by_name("k8s.io.api.resource.v1.ResourceSlice").unwrap();
        let slice = |secs: i64| {
            let meta = json!({"name": "s", "creationTimestamp": {"seconds": secs}});
            DynamicMessage::deserialize(desc.clone(), json!({"metadata": meta})).unwrap()
        };
        for secs in [LAST_SECOND + 1, i64::MAX, -1, i64::MIN] {
            let e = decode(&envelope("ResourceSlice", &slice(secs))).unwrap_err();
            assert_eq!(e.code, 400, "{secs}");
            assert!(e.message.contains("outside 1970-01-01 to 9999-12-31"), "{}", e.message);
        }
        let v = decode(&envelope("ResourceSlice", &slice(LAST_SECOND))).unwrap();
        assert_eq!(v["metadata"]["creationTimestamp"], "9999-12-31T23:59:59Z");
    }

    #[test]
    fn other_kinds_and_garbage_are_refused() {
        assert_eq!(decode(b"nope").unwrap_err().code, 400);
        let desc = pool().get_message_by_name("k8s.io.api.resource.v1.ResourceSlice").unwrap();
        let e = decode(&envelope("Pod", &DynamicMessage::new(desc))).unwrap_err();
        assert_eq!(e.code, 415);
    }
}
