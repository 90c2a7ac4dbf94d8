//! The objects, their resourceVersions and the event history. One counter
//! gives every change a resourceVersion, as etcd's revision does for the
//! real API server: lists report the counter, objects the version of their
//! last change, and a watch from version N replays every later event.
//! The history is kept whole (a driver's few slices change rarely), so no
//! watch ever gets a 410 Gone.

use std::collections::BTreeMap;

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
    pub object: Value,
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
    pub old: Option<Value>,
    /// The object after (for a delete: the last state, new version).
    pub new: Value,
}

/// The store.
#[derive(Debug, Default)]
pub struct Store {
    objects: BTreeMap<Key, Value>,
    rv: u64,
    history: Vec<Event>,
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
            let name = meta_str(&obj, "name").unwrap_or_default().to_string();
            store.objects.insert((kind.resource, ns, name), obj);
        }
        store
    }

    /// The current resourceVersion (of the last change).
    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    /// One object.
    pub fn get(&self, kind: &Kind, ns: &str, name: &str) -> Result<Value, ApiError> {
        self.objects
            .get(&(kind.resource, ns.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| not_found(kind, name))
    }

    /// The objects of `kind` (in `ns`, or all namespaces) that `sel` selects, by key.
    pub fn list(&self, kind: &Kind, ns: Option<&str>, sel: &Selector) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|((r, n, _), obj)| *r == kind.resource && ns.is_none_or(|ns| ns == n) && sel.matches(obj))
            .map(|(_, obj)| obj.clone())
            .collect()
    }

    /// The events of `kind` (in `ns`) after resourceVersion `after`.
    pub fn events_after(&self, kind: &Kind, ns: Option<&str>, after: u64) -> Vec<Event> {
        let start = self.history.partition_point(|e| e.rv <= after);
        self.history[start..]
            .iter()
            .filter(|e| e.key.0 == kind.resource && ns.is_none_or(|ns| ns == e.key.1))
            .cloned()
            .collect()
    }

    fn commit(&mut self, verb: Verb, key: Key, old: Option<Value>, mut new: Value) -> Write {
        self.rv += 1;
        new["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        match verb {
            Verb::Delete => {
                self.objects.remove(&key);
            }
            Verb::Create | Verb::Update => {
                self.objects.insert(key.clone(), new.clone());
            }
        }
        let write = Write {
            verb,
            resource: key.0,
            name: key.2.clone(),
            resource_version: self.rv.to_string(),
            object: new.clone(),
        };
        self.history.push(Event { rv: self.rv, verb, key, old, new });
        write
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
        if kind.namespaced {
            meta["namespace"] = json!(ns);
        }
        meta["uid"] = json!(new_uid());
        meta["creationTimestamp"] = json!(now());
        meta["generation"] = json!(1);
        let write = self.commit(Verb::Create, key, None, obj);
        Ok((write.object.clone(), write))
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
        let old = self.objects.get(&key).cloned().ok_or_else(|| not_found(kind, name))?;
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
        if kind.namespaced {
            meta["namespace"] = json!(ns);
        }
        for field in ["uid", "creationTimestamp"] {
            meta[field] = old["metadata"][field].clone();
        }
        let changed = obj.get("spec") != old.get("spec");
        obj["metadata"]["generation"] = json!(if changed { generation + 1 } else { generation });
        let write = self.commit(Verb::Update, key, Some(old), obj);
        Ok((write.object.clone(), write))
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
        let old = self.objects.get(&key).cloned().ok_or_else(|| not_found(kind, name))?;
        for (field, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
            let want = options.pointer(&format!("/preconditions/{field}")).and_then(Value::as_str);
            let have = meta_str(&old, field).unwrap_or_default();
            if let Some(want) = want.filter(|w| *w != have) {
                let why =
                    format!("Precondition failed: {label} in precondition: {want}, {label} in object meta: {have}");
                return Err(ApiError::conflict(kind.group, kind.resource, &kind.qualified(), name, &why));
            }
        }
        let write = self.commit(Verb::Delete, key, Some(old.clone()), old);
        Ok((write.object.clone(), write))
    }

    /// Stores `obj` of a kind clients cannot write (a claim the sim was
    /// given with a pod) as its owner would: created when absent, else
    /// replaced; its UID kept (a new one when it has none), its
    /// creationTimestamp and generation kept from the stored object.
    pub fn put(&mut self, kind: &'static Kind, mut obj: Value) -> Write {
        let ns =
            if kind.namespaced { meta_str(&obj, "namespace").unwrap_or("default").to_string() } else { String::new() };
        let name = meta_str(&obj, "name").unwrap_or_default().to_string();
        let key = (kind.resource, ns.clone(), name);
        let old = self.objects.get(&key).cloned();
        obj["kind"] = json!(kind.kind);
        obj["apiVersion"] = json!(kind.api_version());
        if kind.namespaced {
            obj["metadata"]["namespace"] = json!(ns);
        }
        if meta_str(&obj, "uid").is_none() {
            obj["metadata"]["uid"] = json!(new_uid());
        }
        let created = old.as_ref().and_then(|o| meta_str(o, "creationTimestamp")).map_or_else(now, str::to_string);
        if meta_str(&obj, "creationTimestamp").is_none() {
            obj["metadata"]["creationTimestamp"] = json!(created);
        }
        let verb = if old.is_some() { Verb::Update } else { Verb::Create };
        self.commit(verb, key, old, obj)
    }

    /// Every ResourceSlice, by name.
    pub fn slices(&self) -> Vec<Value> {
        self.list(Kind::slices(), None, &Selector::default())
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
    if let Some(n) = meta_str(obj, "namespace").filter(|n| kind.namespaced && *n != ns) {
        return Err(ApiError::bad_request(format!(
            "the namespace of the provided object ({n}) does not match the namespace sent on the request ({ns})"
        )));
    }
    Ok(())
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
        let events = s.events_after(Kind::slices(), None, 1);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].verb, Verb::Update);
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
    fn uids_look_like_the_api_servers() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
    }
}
