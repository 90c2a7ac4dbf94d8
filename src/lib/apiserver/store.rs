//! The objects, their resourceVersions and the event history. One counter
//! gives every change a resourceVersion, as etcd's revision does for the
//! real API server: lists report the counter, objects the version of their
//! last change, and a watch from version N replays every later event.
//!
//! Memory is bounded as the real API server bounds it: the history is a
//! window (etcd compacts old revisions, the watch cache keeps a window), so
//! a watch from a resourceVersion older than the window gets `410 Gone`
//! (reason `Expired`, "too old resource version"); one object may take at
//! most etcd's default request limit and all objects together at most a
//! quota, each refused with the words etcd gives the API server. Objects
//! are shared (`Arc`) between the store, the history and the watches.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};

use super::kinds::Kind;
use super::select::Selector;
use super::status::ApiError;

/// An object's place: resource, namespace ("" when cluster-scoped), name.
pub type Key = (&'static str, String, String);

/// What a change did, as watch events name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verb {
    /// POST.
    Create,
    /// PUT.
    Update,
    /// DELETE.
    Delete,
}

/// One recorded change.
#[derive(Debug, Clone, Serialize)]
pub struct Write {
    /// What was done.
    pub verb: Verb,
    /// The resource (plural), e.g. `resourceslices`.
    pub resource: &'static str,
    /// The object's name.
    pub name: String,
    /// The resourceVersion the change got.
    pub resource_version: String,
    /// The object as stored (for a delete: as it was, with the delete's version).
    pub object: Arc<Value>,
}

/// One change in the history a watch replays.
#[derive(Debug, Clone)]
pub struct Event {
    /// Its resourceVersion.
    pub rv: u64,
    /// What changed.
    pub verb: Verb,
    /// The object's place.
    pub key: Key,
    /// The object before (updates and deletes).
    pub old: Option<Arc<Value>>,
    /// The object after (for a delete: the last state, new version).
    pub new: Arc<Value>,
    /// `new`'s size as JSON, what the history's window counts.
    pub size: usize,
}

/// Largest object stored, as JSON: etcd's default `--max-request-bytes`
/// (1.5 MiB). The API server takes bodies up to 3 MiB, so a larger object
/// passes the body limit and is refused by etcd; the API server answers
/// etcd's error as a 500 Status with etcd's words ([`ApiError::etcd`]).
pub const MAX_OBJECT_BYTES: usize = 1_572_864;
/// Most bytes (as JSON) all objects together may take: past it a write is
/// refused as etcd refuses writes past its `--quota-backend-bytes` ("mvcc:
/// database space exceeded"), while deletes still go through.
pub const MAX_TOTAL_BYTES: usize = 32 * 1024 * 1024;
/// Most events the history keeps (the watch cache's window is a count too).
pub const HISTORY_EVENTS: usize = 1024;
/// Most bytes (as JSON) of object versions the history keeps; the oldest
/// events go first (as etcd compaction drops the oldest revisions).
pub const HISTORY_BYTES: usize = 8 * 1024 * 1024;

/// One stored object and its size as JSON.
#[derive(Debug, Clone)]
struct Stored {
    obj: Arc<Value>,
    size: usize,
}

/// The store.
#[derive(Debug, Default)]
pub struct Store {
    objects: BTreeMap<Key, Stored>,
    /// Sum of the stored objects' sizes.
    bytes: usize,
    rv: u64,
    history: VecDeque<Event>,
    /// Sum of the history's event sizes.
    history_bytes: usize,
    /// Events up to this resourceVersion are gone: a watch from an older one gets 410.
    compacted: u64,
}

/// Size of `v` as compact JSON, counted without building the text.
pub fn json_size(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// A random RFC 4122 version-4 UID, as the API server gives new objects.
pub fn new_uid() -> String {
    let b: [u8; 16] = rand::random();
    let h = |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
    format!("{}-{}-4{}-{:x}{}-{}", h(0..4), h(4..6), &h(6..8)[1..], 8 | (b[8] & 3), &h(8..10)[1..], h(10..16))
}

fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// The `name` an object is stored under for a `generateName` prefix.
fn generated(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let tail: String = (0..5).map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char).collect();
    format!("{prefix}{tail}")
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str).filter(|s| !s.is_empty())
}

impl Store {
    /// A store holding `objects` (validated by the loader), each given a
    /// resourceVersion, and a UID and creation time when it has none.
    pub fn new(objects: Vec<(&'static Kind, Value)>) -> Self {
        let mut store = Store::default();
        for (kind, mut obj) in objects {
            store.rv += 1;
            let has_uid = meta_str(&obj, "uid").is_some();
            let meta = &mut obj["metadata"];
            if !has_uid {
                meta["uid"] = json!(new_uid());
            }
            if meta.get("creationTimestamp").is_none_or(Value::is_null) {
                meta["creationTimestamp"] = json!(now());
            }
            meta["resourceVersion"] = json!(store.rv.to_string());
            let ns = if kind.namespaced {
                meta_str(&obj, "namespace").unwrap_or("default").to_string()
            } else {
                String::new()
            };
            set_namespace(kind, &mut obj["metadata"], &ns);
            let name = meta_str(&obj, "name").unwrap_or_default().to_string();
            let size = json_size(&obj);
            store.bytes += size;
            if let Some(old) = store.objects.insert((kind.resource, ns, name), Stored { obj: Arc::new(obj), size }) {
                store.bytes -= old.size;
            }
        }
        // The file's objects have no events: a watch starts from the list's version.
        store.compacted = store.rv;
        store
    }

    /// The current resourceVersion (of the last change).
    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    /// One object.
    pub fn get(&self, kind: &Kind, ns: &str, name: &str) -> Result<Value, ApiError> {
        self.get_shared(kind, ns, name).map(|o| (*o).clone())
    }

    /// One object, shared (no copy).
    pub fn get_shared(&self, kind: &Kind, ns: &str, name: &str) -> Result<Arc<Value>, ApiError> {
        self.objects
            .get(&(kind.resource, ns.to_string(), name.to_string()))
            .map(|s| Arc::clone(&s.obj))
            .ok_or_else(|| not_found(kind, name))
    }

    /// The objects of `kind` (in `ns`, or all namespaces) that `sel` selects, by key.
    pub fn list(&self, kind: &Kind, ns: Option<&str>, sel: &Selector) -> Vec<Value> {
        self.list_shared(kind, ns, sel).into_iter().map(|o| (*o).clone()).collect()
    }

    /// [`Store::list`], shared (no copy of the objects).
    pub fn list_shared(&self, kind: &Kind, ns: Option<&str>, sel: &Selector) -> Vec<Arc<Value>> {
        self.objects
            .iter()
            .filter(|((r, n, _), s)| *r == kind.resource && ns.is_none_or(|ns| ns == n) && sel.matches(&s.obj))
            .map(|(_, s)| Arc::clone(&s.obj))
            .collect()
    }

    /// At most `max` events of `kind` (in `ns`) after resourceVersion
    /// `after`, and the resourceVersion to ask from next (the last event's
    /// when `max` were found, else the current one); the API server's
    /// `410 Gone` when events after `after` were compacted away.
    pub fn events_after(
        &self,
        kind: &Kind,
        ns: Option<&str>,
        after: u64,
        max: usize,
    ) -> Result<(Vec<Event>, u64), ApiError> {
        if after < self.compacted {
            return Err(ApiError::expired(after, self.compacted));
        }
        let start = self.history.partition_point(|e| e.rv <= after);
        let events: Vec<Event> = self
            .history
            .range(start..)
            .filter(|e| e.key.0 == kind.resource && ns.is_none_or(|ns| ns == e.key.1))
            .take(max)
            .cloned()
            .collect();
        let next = match events.last() {
            Some(e) if events.len() == max => e.rv,
            _ => self.rv.max(after),
        };
        Ok((events, next))
    }

    /// The oldest resourceVersion a watch may start from.
    pub fn compacted(&self) -> u64 {
        self.compacted
    }

    /// Bytes (as JSON) the objects take.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Refuses `new` (replacing the object at `key`, if any) past the
    /// per-object limit or the total quota, with etcd's words.
    fn admit(&self, key: &Key, new: &Value) -> Result<usize, ApiError> {
        let size = json_size(new);
        if size > MAX_OBJECT_BYTES {
            return Err(ApiError::etcd("request is too large"));
        }
        let replaced = self.objects.get(key).map_or(0, |s| s.size);
        if self.bytes - replaced + size > MAX_TOTAL_BYTES {
            return Err(ApiError::etcd("mvcc: database space exceeded"));
        }
        Ok(size)
    }

    fn commit(&mut self, verb: Verb, key: Key, old: Option<Arc<Value>>, mut new: Value, size: usize) -> Write {
        self.rv += 1;
        new["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let new = Arc::new(new);
        let replaced = match verb {
            Verb::Delete => self.objects.remove(&key),
            Verb::Create | Verb::Update => self.objects.insert(key.clone(), Stored { obj: Arc::clone(&new), size }),
        };
        if verb != Verb::Delete {
            self.bytes += size;
        }
        self.bytes -= replaced.map_or(0, |s| s.size);
        let write = Write {
            verb,
            resource: key.0,
            name: key.2.clone(),
            resource_version: self.rv.to_string(),
            object: Arc::clone(&new),
        };
        self.history.push_back(Event { rv: self.rv, verb, key, old, new, size });
        self.history_bytes += size;
        self.compact();
        write
    }

    /// Drops the oldest events past the window (the newest one always stays).
    fn compact(&mut self) {
        while self.history.len() > HISTORY_EVENTS || (self.history_bytes > HISTORY_BYTES && self.history.len() > 1) {
            let Some(gone) = self.history.pop_front() else { break };
            self.history_bytes -= gone.size;
            self.compacted = gone.rv;
        }
    }

    /// POST: stores a new object (name or generateName), as the API server does.
    pub fn create(&mut self, kind: &'static Kind, ns: &str, mut obj: Value) -> Result<(Value, Write), ApiError> {
        check_body(kind, ns, &obj)?;
        let name = match (meta_str(&obj, "name"), meta_str(&obj, "generateName")) {
            (Some(n), _) => n.to_string(),
            (None, Some(prefix)) => generated(prefix),
            (None, None) => {
                return Err(invalid(kind, "", "metadata.name: Required value: name or generateName is required"));
            }
        };
        validate(kind, &name, &obj)?;
        let key = (kind.resource, ns.to_string(), name.clone());
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(kind.group, kind.resource, &kind.qualified(), &name));
        }
        obj["kind"] = json!(kind.kind);
        obj["apiVersion"] = json!(kind.api_version());
        let meta = &mut obj["metadata"];
        meta["name"] = json!(name);
        set_namespace(kind, meta, ns);
        meta["uid"] = json!(new_uid());
        meta["creationTimestamp"] = json!(now());
        meta["generation"] = json!(1);
        let size = self.admit(&key, &obj)?;
        let write = self.commit(Verb::Create, key, None, obj, size);
        Ok(((*write.object).clone(), write))
    }

    /// PUT: replaces an object, refusing a stale resourceVersion with a Conflict.
    pub fn update(
        &mut self,
        kind: &'static Kind,
        ns: &str,
        name: &str,
        mut obj: Value,
    ) -> Result<(Value, Write), ApiError> {
        check_body(kind, ns, &obj)?;
        if meta_str(&obj, "name").is_some_and(|n| n != name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                meta_str(&obj, "name").unwrap_or_default()
            )));
        }
        validate(kind, name, &obj)?;
        let key = (kind.resource, ns.to_string(), name.to_string());
        let old = self.objects.get(&key).map(|s| Arc::clone(&s.obj)).ok_or_else(|| not_found(kind, name))?;
        let stored_rv = meta_str(&old, "resourceVersion").unwrap_or_default();
        if meta_str(&obj, "resourceVersion").is_some_and(|rv| rv != stored_rv) {
            return Err(ApiError::conflict(
                kind.group,
                kind.resource,
                &kind.qualified(),
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
        obj["kind"] = json!(kind.kind);
        obj["apiVersion"] = json!(kind.api_version());
        let generation = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
        let meta = &mut obj["metadata"];
        meta["name"] = json!(name);
        set_namespace(kind, meta, ns);
        for field in ["uid", "creationTimestamp"] {
            meta[field] = old["metadata"][field].clone();
        }
        let changed = obj.get("spec") != old.get("spec");
        obj["metadata"]["generation"] = json!(if changed { generation + 1 } else { generation });
        let size = self.admit(&key, &obj)?;
        let write = self.commit(Verb::Update, key, Some(old), obj, size);
        Ok(((*write.object).clone(), write))
    }

    /// DELETE, with the DeleteOptions preconditions (UID, resourceVersion).
    pub fn delete(
        &mut self,
        kind: &'static Kind,
        ns: &str,
        name: &str,
        options: &Value,
    ) -> Result<(Value, Write), ApiError> {
        let key = (kind.resource, ns.to_string(), name.to_string());
        let old = self.objects.get(&key).map(|s| Arc::clone(&s.obj)).ok_or_else(|| not_found(kind, name))?;
        for (field, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
            let want = options.pointer(&format!("/preconditions/{field}")).and_then(Value::as_str);
            let have = meta_str(&old, field).unwrap_or_default();
            if let Some(want) = want.filter(|w| *w != have) {
                let why =
                    format!("Precondition failed: {label} in precondition: {want}, {label} in object meta: {have}");
                return Err(ApiError::conflict(kind.group, kind.resource, &kind.qualified(), name, &why));
            }
        }
        let size = json_size(&old);
        let write = self.commit(Verb::Delete, key, Some(Arc::clone(&old)), (*old).clone(), size);
        Ok(((*write.object).clone(), write))
    }

    /// Stores `obj` of a kind clients cannot write (a claim the sim was
    /// given with a pod) as its owner would: created when absent, else
    /// replaced; its UID kept (a new one when it has none), its
    /// creationTimestamp and generation kept from the stored object.
    pub fn put(&mut self, kind: &'static Kind, mut obj: Value) -> Result<Write, ApiError> {
        let ns =
            if kind.namespaced { meta_str(&obj, "namespace").unwrap_or("default").to_string() } else { String::new() };
        let name = meta_str(&obj, "name").unwrap_or_default().to_string();
        let key = (kind.resource, ns.clone(), name);
        let old = self.objects.get(&key).map(|s| Arc::clone(&s.obj));
        obj["kind"] = json!(kind.kind);
        obj["apiVersion"] = json!(kind.api_version());
        set_namespace(kind, &mut obj["metadata"], &ns);
        if meta_str(&obj, "uid").is_none() {
            obj["metadata"]["uid"] = json!(new_uid());
        }
        let created = old.as_ref().and_then(|o| meta_str(o, "creationTimestamp")).map_or_else(now, str::to_string);
        if meta_str(&obj, "creationTimestamp").is_none() {
            obj["metadata"]["creationTimestamp"] = json!(created);
        }
        let verb = if old.is_some() { Verb::Update } else { Verb::Create };
        let size = self.admit(&key, &obj)?;
        Ok(self.commit(verb, key, old, obj, size))
    }

    /// Deletes an object a program put (see [`Store::put`]), as its owner
    /// does when it goes; `None` when it is not there.
    pub fn remove(&mut self, kind: &'static Kind, ns: &str, name: &str) -> Option<Write> {
        self.delete(kind, ns, name, &json!({})).ok().map(|(_, w)| w)
    }

    /// Every ResourceSlice, by name.
    pub fn slices(&self) -> Vec<Value> {
        self.list(Kind::slices(), None, &Selector::default())
    }

    /// Every ResourceSlice, by name, shared.
    pub fn slices_shared(&self) -> Vec<Arc<Value>> {
        self.list_shared(Kind::slices(), None, &Selector::default())
    }
}

fn not_found(kind: &Kind, name: &str) -> ApiError {
    ApiError::not_found(kind.group, kind.resource, &kind.qualified(), name)
}

fn invalid(kind: &Kind, name: &str, message: impl Into<String>) -> ApiError {
    ApiError::invalid(kind.group, kind.resource, kind.kind, name, message)
}

/// The body is an object of this kind and version, in this namespace.
fn check_body(kind: &Kind, ns: &str, obj: &Value) -> Result<(), ApiError> {
    if !obj.is_object() || !obj.get("metadata").is_none_or(Value::is_object) {
        return Err(ApiError::bad_request(format!("the body is not a {} object", kind.kind)));
    }
    if let Some(v) = obj.get("apiVersion").and_then(Value::as_str).filter(|v| *v != kind.api_version()) {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({v}) does not match the expected API version ({})",
            kind.api_version()
        )));
    }
    if let Some(k) = obj.get("kind").and_then(Value::as_str).filter(|k| *k != kind.kind) {
        return Err(ApiError::bad_request(format!("the kind in the data ({k}) does not match {}", kind.kind)));
    }
    // rest.EnsureObjectNamespaceMatchesRequestNamespace
    // (k8s.io/apiserver/pkg/registry/rest/meta.go): an empty namespace takes
    // the request's, a cluster-scoped object's is cleared, a different one
    // is refused.
    if meta_str(obj, "namespace").is_some_and(|n| kind.namespaced && n != ns) {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    if let Some((path, n)) = not_int64(obj, String::new()) {
        // Go's decoder refuses it (json: cannot unmarshal number ...).
        return Err(ApiError::bad_request(format!(
            "json: cannot unmarshal number {n} into the integer field {path} of {}: it is no 64-bit integer",
            kind.kind
        )));
    }
    Ok(())
}

/// Fields of the served kinds that are Go integers (int64): metadata's and a
/// pool's generation, a pool's slice count, a device attribute's `int`, a
/// request's `count`. Other numbers (quantities: `cpu: 0.5`) are left as sent.
const INT_FIELDS: [&str; 4] = ["generation", "resourceSliceCount", "int", "count"];

/// The first integer field in `v` (with its path) whose number is not a
/// 64-bit signed integer: a fraction, an exponent, or over 2^63-1.
fn not_int64(v: &Value, path: String) -> Option<(String, serde_json::Number)> {
    let at = |k: &str| if path.is_empty() { k.to_string() } else { format!("{path}.{k}") };
    match v {
        Value::Object(m) => m.iter().find_map(|(k, v)| match v {
            Value::Number(n) if INT_FIELDS.contains(&k.as_str()) && n.as_i64().is_none() => Some((at(k), n.clone())),
            _ => not_int64(v, at(k)),
        }),
        Value::Array(a) => a.iter().enumerate().find_map(|(i, v)| not_int64(v, format!("{path}[{i}]"))),
        _ => None,
    }
}

/// The namespace as the API server stores it: the request's for a
/// namespaced kind, none for a cluster-scoped one (a client's is cleared).
fn set_namespace(kind: &Kind, meta: &mut Value, ns: &str) {
    if kind.namespaced {
        meta["namespace"] = json!(ns);
    } else if let Some(m) = meta.as_object_mut() {
        m.remove("namespace");
    }
}

/// The checks the API server makes that a driver can trip over: a valid
/// name and, for a ResourceSlice, its driver, its pool and a device list.
fn validate(kind: &Kind, name: &str, obj: &Value) -> Result<(), ApiError> {
    if !crate::validate::is_dns1123_subdomain(name) {
        return Err(invalid(
            kind,
            name,
            format!(
                "metadata.name: Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case \
                 alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
            ),
        ));
    }
    if kind.resource != "resourceslices" {
        return Ok(());
    }
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let text = |p: &str| spec.pointer(p).and_then(Value::as_str).filter(|s| !s.is_empty());
    if text("/driver").is_none() {
        return Err(invalid(kind, name, "spec.driver: Required value"));
    }
    if text("/pool/name").is_none() {
        return Err(invalid(kind, name, "spec.pool.name: Required value"));
    }
    if !spec.get("devices").is_none_or(|d| d.is_array() || d.is_null()) {
        return Err(invalid(kind, name, "spec.devices: Invalid value: must be a list"));
    }
    let owners = ["/nodeName", "/nodeSelector", "/allNodes", "/perDeviceNodeSelection"]
        .iter()
        .filter(|p| spec.pointer(p).is_some_and(|v| !v.is_null() && *v != json!(false) && *v != json!("")))
        .count();
    if owners != 1 {
        return Err(invalid(
            kind,
            name,
            "spec: Invalid value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(name: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"driver": "d", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "nodeName": "n"}})
    }

    #[test]
    fn every_write_gets_the_next_resource_version_and_is_replayed_to_a_watch() {
        let mut s = Store::new(vec![]);
        let (created, w) = s.create(Kind::slices(), "", slice("a")).unwrap();
        assert_eq!(w.resource_version, "1");
        assert_eq!(created["metadata"]["resourceVersion"], "1");
        let (_, w) = s.update(Kind::slices(), "", "a", created.clone()).unwrap();
        assert_eq!(w.resource_version, "2");
        let stale = s.update(Kind::slices(), "", "a", created).unwrap_err();
        assert_eq!((stale.code, stale.reason), (409, "Conflict"));
        let (events, _) = s.events_after(Kind::slices(), None, 1, usize::MAX).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].verb, Verb::Update);
    }

    /// rest.EnsureObjectNamespaceMatchesRequestNamespace: a cluster-scoped
    /// slice sent with a namespace is stored without one; a namespaced
    /// object in another namespace than the request's path is 400.
    #[test]
    fn namespaces_follow_the_kinds_scope() {
        let mut s = Store::new(vec![]);
        let mut obj = slice("a");
        obj["metadata"]["namespace"] = json!("default");
        let (made, _) = s.create(Kind::slices(), "", obj).unwrap();
        assert!(made["metadata"].get("namespace").is_none(), "{made}");
        let (got, _) = s.update(Kind::slices(), "", "a", made).unwrap();
        assert!(got["metadata"].get("namespace").is_none(), "{got}");
        let claims = Kind::of_path("resource.k8s.io", "v1", "resourceclaims").unwrap();
        let claim = json!({"metadata": {"name": "c", "namespace": "other"}, "spec": {}});
        let e = s.create(claims, "default", claim).unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(e.message, "the namespace of the provided object does not match the namespace sent on the request");
    }

    /// Numbers the Go types cannot hold (every field here is an integer):
    /// 400 naming the field, never stored as a float.
    #[test]
    fn a_number_no_int64_holds_is_bad_request() {
        let mut s = Store::new(vec![]);
        for n in [json!(18_446_744_073_709_551_615u64), json!(1.5), json!(1e300)] {
            let mut obj = slice("a");
            obj["spec"]["pool"]["generation"] = n.clone();
            let e = s.create(Kind::slices(), "", obj).unwrap_err();
            assert_eq!(e.code, 400, "{n}");
            assert!(e.message.contains("spec.pool.generation"), "{}", e.message);
        }
        let mut obj = slice("a");
        obj["spec"]["pool"]["generation"] = json!(i64::MAX);
        obj["spec"]["devices"] = json!([{"name": "d", "capacity": {"memory": {"value": 0.5}}}]);
        s.create(Kind::slices(), "", obj).unwrap();
    }

    #[test]
    fn generate_name_makes_a_name_and_a_taken_name_is_already_exists() {
        let mut s = Store::new(vec![]);
        let mut obj = slice("");
        obj["metadata"] = json!({"generateName": "n-gpu-"});
        let (made, _) = s.create(Kind::slices(), "", obj).unwrap();
        assert!(made["metadata"]["name"].as_str().unwrap().starts_with("n-gpu-"));
        s.create(Kind::slices(), "", slice("b")).unwrap();
        let e = s.create(Kind::slices(), "", slice("b")).unwrap_err();
        assert_eq!((e.code, e.reason), (409, "AlreadyExists"));
    }

    #[test]
    fn a_delete_with_a_stale_uid_precondition_is_a_conflict() {
        let mut s = Store::new(vec![]);
        s.create(Kind::slices(), "", slice("a")).unwrap();
        let e = s.delete(Kind::slices(), "", "a", &json!({"preconditions": {"uid": "other"}})).unwrap_err();
        assert!(e.message.contains("Precondition failed: UID"), "{}", e.message);
        s.delete(Kind::slices(), "", "a", &json!({})).unwrap();
        assert_eq!(s.get(Kind::slices(), "", "a").unwrap_err().code, 404);
    }

    #[test]
    fn a_slice_without_driver_or_owner_is_invalid() {
        let mut s = Store::new(vec![]);
        let mut obj = slice("a");
        obj["spec"]["driver"] = json!("");
        assert_eq!(s.create(Kind::slices(), "", obj).unwrap_err().code, 422);
        let mut obj = slice("a");
        obj["spec"]["allNodes"] = json!(true);
        assert!(s.create(Kind::slices(), "", obj).unwrap_err().message.contains("exactly one"));
    }

    #[test]
    fn the_history_is_a_window_and_an_older_watch_is_expired() {
        let mut s = Store::new(vec![(Kind::slices(), slice("seed"))]);
        assert_eq!(s.compacted(), 1, "the file's objects have no events: watch from the list's version");
        assert_eq!(s.events_after(Kind::slices(), None, 0, 10).unwrap_err().code, 410);
        let (mut obj, _) = s.create(Kind::slices(), "", slice("a")).unwrap();
        for _ in 0..HISTORY_EVENTS + 10 {
            let (o, _) = s.update(Kind::slices(), "", "a", obj).unwrap();
            obj = o;
        }
        assert_eq!(s.history.len(), HISTORY_EVENTS);
        let e = s.events_after(Kind::slices(), None, 5, 10).unwrap_err();
        assert_eq!((e.code, e.reason), (410, "Expired"));
        assert_eq!(e.message, format!("too old resource version: 5 ({})", s.compacted()));
        let body = e.body();
        assert!(body.get("details").is_none() && body["status"] == "Failure", "{body}");
        let (events, next) = s.events_after(Kind::slices(), None, s.compacted(), 10).unwrap();
        assert_eq!((events.len(), next), (10, events[9].rv));
    }

    #[test]
    fn the_history_is_bounded_in_bytes_and_objects_in_size_and_total() {
        let mut s = Store::new(vec![]);
        let mut big = slice("big");
        big["spec"]["devices"] = json!([{"name": "d", "attributes": {"x": {"string": "y".repeat(1_000_000)}}}]);
        let (mut obj, _) = s.create(Kind::slices(), "", big).unwrap();
        for _ in 0..40 {
            let (o, _) = s.update(Kind::slices(), "", "big", obj).unwrap();
            obj = o;
        }
        assert!(s.history_bytes <= HISTORY_BYTES, "{}", s.history_bytes);
        assert!(s.history.len() < 10, "{} events of 1 MB kept", s.history.len());
        let mut huge = slice("huge");
        huge["spec"]["devices"] = json!([{"name": "d", "attributes": {"x": {"string": "y".repeat(MAX_OBJECT_BYTES)}}}]);
        let e = s.create(Kind::slices(), "", huge).unwrap_err();
        assert_eq!((e.code, e.reason, e.message.as_str()), (500, "", "etcdserver: request is too large"));
        assert!(e.body().get("reason").is_none(), "StatusReasonUnknown is omitted: {}", e.body());
        let mut n = 0;
        let full = loop {
            let mut o = slice(&format!("s{n}"));
            o["spec"]["devices"] = json!([{"name": "d", "attributes": {"x": {"string": "y".repeat(1_400_000)}}}]);
            match s.create(Kind::slices(), "", o) {
                Ok(_) => n += 1,
                Err(e) => break e,
            }
        };
        assert_eq!(full.message, "etcdserver: mvcc: database space exceeded");
        assert!(s.bytes() <= MAX_TOTAL_BYTES && n > 15, "{n} objects, {} bytes", s.bytes());
        s.delete(Kind::slices(), "", "s0", &json!({})).unwrap();
        assert!(s.bytes() <= MAX_TOTAL_BYTES - 1_400_000, "a delete frees its bytes");
    }

    #[test]
    fn uids_look_like_the_api_servers() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
    }
}
