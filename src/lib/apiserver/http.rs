//! The HTTP side: routes Kubernetes API paths to the store, answers in
//! JSON, streams watches, and records every write.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::kinds::{KINDS, Kind, RESOURCE_GROUP};
use super::record::Recorder;
use super::select::Selector;
use super::status::{self, ApiError};
use super::store::{Store, Write};
use super::watch::{self, Start};

/// Largest request body taken (the API server's limit is 3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;
/// Events one watch takes from the history at a time.
const WATCH_BATCH: usize = 16;
/// Lines queued for one watch's connection: a watcher that does not read
/// holds at most these (and what the socket buffers), never the history.
const WATCH_QUEUE: usize = 4;

/// A response body: whole, or a watch stream.
pub type Body = BoxBody<Bytes, Infallible>;

/// The server's shared state.
#[derive(Debug)]
pub struct State {
    /// Objects and the record of writes, under one lock so the record
    /// follows the store's order.
    pub inner: Mutex<(Store, Recorder)>,
    /// Bumped after every write: watches wake on it.
    pub changed: tokio::sync::watch::Sender<u64>,
    /// Each write, for the record's saver and then the command to show
    /// (bounded: a write that finds it full is counted in `unshown`).
    pub writes: tokio::sync::mpsc::Sender<Write>,
    /// Writes not shown because the output fell behind.
    pub unshown: AtomicU64,
    /// Objects a program created through `Handle::put` (its to delete).
    pub owned: Mutex<std::collections::HashSet<super::store::Key>>,
    /// The bearer token every request must carry (it is in the kubeconfig only).
    pub token: String,
    /// `host:port` the server listens on.
    pub address: String,
    /// Cancelled when the server stops: ends the watches.
    pub stop: CancellationToken,
    /// The first failure to record a write, reported when the server stops.
    pub record_error: Mutex<Option<String>>,
}

/// Where a request goes.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    Doc(Value),
    Collection { kind: &'static Kind, ns: Option<String> },
    Item { kind: &'static Kind, ns: String, name: String },
}

fn json_response(code: u16, value: &Value) -> Response<Body> {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(bytes)).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

fn failure(e: &ApiError) -> Response<Body> {
    json_response(e.code, &e.body())
}

/// Percent-decodes a query component (`+` is a space).
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match std::str::from_utf8(&b[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(v) => {
                        out.push(v);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn query(req: &Request<Incoming>) -> BTreeMap<String, String> {
    req.uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn group_version(group: &str) -> Value {
    json!({"groupVersion": format!("{group}/v1"), "version": "v1"})
}

fn resource_list(group: &str) -> Value {
    let resources: Vec<Value> = KINDS
        .iter()
        .filter(|k| k.group == group)
        .map(|k| {
            let mut verbs = vec!["get", "list", "watch"];
            if k.writable {
                verbs.extend(["create", "update", "delete", "deletecollection"]);
            }
            json!({
                "name": k.resource,
                "singularName": k.kind.to_lowercase(),
                "namespaced": k.namespaced,
                "kind": k.kind,
                "verbs": verbs,
            })
        })
        .collect();
    let gv = if group.is_empty() { "v1".to_string() } else { format!("{group}/v1") };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
}

/// The discovery documents client-go and kubectl read.
fn discovery(segments: &[&str], address: &str) -> Option<Value> {
    let group = json!({
        "name": RESOURCE_GROUP,
        "versions": [group_version(RESOURCE_GROUP)],
        "preferredVersion": group_version(RESOURCE_GROUP),
    });
    Some(match segments {
        ["api"] => json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
        }),
        ["api", "v1"] => resource_list(""),
        ["apis"] => json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]}),
        ["apis", RESOURCE_GROUP] => {
            let mut g = group;
            g["kind"] = json!("APIGroup");
            g["apiVersion"] = json!("v1");
            g
        }
        ["apis", RESOURCE_GROUP, "v1"] => resource_list(RESOURCE_GROUP),
        ["version"] => json!({
            "major": "1",
            "minor": "37",
            "gitVersion": "v1.37.0-dpctl-apiserver",
            "platform": "linux/amd64",
        }),
        ["healthz" | "livez" | "readyz"] => json!("ok"),
        _ => return None,
    })
}

/// Where a path goes, or the API server's 404 for what it does not serve
/// (other versions of resource.k8s.io among them: the DRA helper's client
/// then falls back from v1 to v1beta2 and v1beta1).
fn route(path: &str, address: &str) -> Result<Route, ApiError> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    if let Some(doc) = discovery(&segments, address) {
        return Ok(Route::Doc(doc));
    }
    let (group, version, rest) = match segments.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(ApiError::no_route()),
    };
    let find = |r: &str| Kind::of_path(group, version, r).ok_or_else(ApiError::no_route);
    let r = match rest {
        [r] => Route::Collection { kind: find(r)?, ns: None },
        ["namespaces", ns, r] => Route::Collection { kind: find(r)?, ns: Some(ns.to_string()) },
        [r, name] => Route::Item { kind: find(r)?, ns: String::new(), name: name.to_string() },
        ["namespaces", ns, r, name] => Route::Item { kind: find(r)?, ns: ns.to_string(), name: name.to_string() },
        _ => return Err(ApiError::no_route()),
    };
    let scoped_right = match &r {
        Route::Collection { kind, ns } => kind.namespaced || ns.is_none(),
        Route::Item { kind, ns, .. } => kind.namespaced != ns.is_empty(),
        Route::Doc(_) => true,
    };
    if scoped_right { Ok(r) } else { Err(ApiError::no_route()) }
}

/// Answers one request.
/// `trusted`: the client sent the bearer token or runs as this server's
/// user (see `same_user`); anyone else gets 401.
pub async fn handle(state: Arc<State>, req: Request<Incoming>, trusted: bool) -> Result<Response<Body>, Infallible> {
    if !trusted {
        return Ok(failure(&ApiError::unauthorized()));
    }
    Ok(answer(state, req).await.unwrap_or_else(|e| failure(&e)))
}

/// True when the request carries `Authorization: Bearer TOKEN` (compared
/// in constant time).
pub fn authorized(token: &str, headers: &http::HeaderMap) -> bool {
    let Some(given) = headers.get(http::header::AUTHORIZATION).and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
    else {
        return false;
    };
    let want = token.as_bytes();
    given.len() == want.len() && given.iter().zip(want).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

async fn answer(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Body>, ApiError> {
    let route = route(req.uri().path(), &state.address)?;
    let q = query(&req);
    let method = req.method().clone();
    match (route, method) {
        (Route::Doc(doc), Method::GET) => Ok(json_response(200, &doc)),
        (Route::Collection { kind, ns }, Method::GET) => {
            if matches!(q.get("watch").map(String::as_str), Some("true" | "1")) {
                start_watch(&state, kind, ns, &q)
            } else {
                list(&state, kind, ns.as_deref(), &q)
            }
        }
        (Route::Item { kind, ns, name }, Method::GET) => {
            let obj = state.inner.lock().map_err(|_| poisoned())?.0.get_shared(kind, &ns, &name);
            obj.map(|o| json_response(200, &o))
        }
        (Route::Collection { kind, ns }, Method::POST) if kind.writable => {
            let body = read_body(req).await;
            let created = body.and_then(|b| write(&state, |s| s.create(kind, ns.as_deref().unwrap_or(""), b)));
            created.map(|o| json_response(201, &o))
        }
        (Route::Item { kind, ns, name }, Method::PUT) if kind.writable => {
            let body = read_body(req).await;
            body.and_then(|b| write(&state, |s| s.update(kind, &ns, &name, b))).map(|o| json_response(200, &o))
        }
        (Route::Item { kind, ns, name }, Method::DELETE) if kind.writable => {
            let options = read_body(req).await.map(|b| if b.is_null() { json!({}) } else { b });
            options.and_then(|o| delete(&state, kind, &ns, &name, &o))
        }
        (Route::Collection { kind, ns }, Method::DELETE) if kind.writable => {
            delete_collection(&state, kind, ns.as_deref(), &q)
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

fn poisoned() -> ApiError {
    ApiError::internal("the store's lock was poisoned by a panic")
}

async fn read_body(req: Request<Incoming>) -> Result<Value, ApiError> {
    let content_type =
        req.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let bytes = Limited::new(req.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| {
            if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() {
                ApiError::too_large(MAX_BODY)
            } else {
                ApiError::bad_request(format!("reading the request body: {e}"))
            }
        })?
        .to_bytes();
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    let media = content_type.split(';').next().unwrap_or("").trim();
    match media {
        "" | "application/json" | "*/*" => {
            serde_json::from_slice(&bytes).map_err(|e| ApiError::bad_request(format!("the body is not JSON: {e}")))
        }
        super::protobuf::MEDIA_TYPE => super::protobuf::decode(&bytes),
        other => Err(ApiError {
            code: 415,
            reason: "UnsupportedMediaType",
            message: format!(
                "the body's media type {other:?} is not served: send application/json or {}",
                super::protobuf::MEDIA_TYPE
            ),
            details: None,
        }),
    }
}

fn selector(kind: &Kind, q: &BTreeMap<String, String>) -> Result<Selector, ApiError> {
    Selector::parse(kind, q.get("fieldSelector").map(String::as_str), q.get("labelSelector").map(String::as_str))
}

fn list(
    state: &State,
    kind: &'static Kind,
    ns: Option<&str>,
    q: &BTreeMap<String, String>,
) -> Result<Response<Body>, ApiError> {
    let sel = selector(kind, q)?;
    if let Some(rv) = q.get("resourceVersion") {
        watch::parse_rv(rv)?;
    }
    let (shared, rv) = {
        let inner = state.inner.lock().map_err(|_| poisoned())?;
        (inner.0.list_shared(kind, ns, &sel), inner.0.resource_version())
    };
    let items: Vec<Value> = shared
        .iter()
        .map(|o| {
            let mut o = (**o).clone();
            // A list's items carry no kind or apiVersion, as the API server sends them.
            if let Some(m) = o.as_object_mut() {
                m.remove("kind");
                m.remove("apiVersion");
            }
            o
        })
        .collect();
    let body = json!({
        "kind": format!("{}List", kind.kind),
        "apiVersion": kind.api_version(),
        "metadata": {"resourceVersion": rv.to_string()},
        "items": items,
    });
    Ok(json_response(200, &body))
}

/// Runs a write on the store, records it and wakes the watches.
pub(super) fn write(
    state: &State,
    op: impl FnOnce(&mut Store) -> Result<(Value, Write), ApiError>,
) -> Result<Value, ApiError> {
    let mut inner = state.inner.lock().map_err(|_| poisoned())?;
    let (store, recorder) = &mut *inner;
    let (object, write) = op(store)?;
    let recorded = recorder.record(&write);
    let rv = store.resource_version();
    // Sent under the lock, so writes reach the saver in the store's order.
    if state.writes.try_send(write).is_err() {
        state.unshown.fetch_add(1, Ordering::Relaxed);
    }
    drop(inner);
    state.changed.send_replace(rv);
    if let Err(e) = recorded {
        let message = format!("the write was applied but recording it failed: {e}");
        state.record_error.lock().map_err(|_| poisoned())?.get_or_insert(message.clone());
        return Err(ApiError::internal(message));
    }
    Ok(object)
}

fn delete(
    state: &State,
    kind: &'static Kind,
    ns: &str,
    name: &str,
    options: &Value,
) -> Result<Response<Body>, ApiError> {
    let gone = write(state, |s| s.delete(kind, ns, name, options))?;
    let uid = gone.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
    Ok(json_response(200, &status::deleted(kind.group, kind.resource, name, uid)))
}

fn delete_collection(
    state: &State,
    kind: &'static Kind,
    ns: Option<&str>,
    q: &BTreeMap<String, String>,
) -> Result<Response<Body>, ApiError> {
    let sel = selector(kind, q)?;
    let names: Vec<(String, String)> = {
        let inner = state.inner.lock().map_err(|_| poisoned())?;
        let key =
            |o: &Value, f: &str| o.pointer(&format!("/metadata/{f}")).and_then(Value::as_str).unwrap_or("").to_string();
        inner.0.list(kind, ns, &sel).iter().map(|o| (key(o, "namespace"), key(o, "name"))).collect()
    };
    for (ns, name) in &names {
        match write(state, |s| s.delete(kind, ns, name, &json!({}))) {
            Ok(_) => {}
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(json_response(200, &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})))
}

/// Starts a watch: checks the parameters, then streams from a task.
fn start_watch(
    state: &Arc<State>,
    kind: &'static Kind,
    ns: Option<String>,
    q: &BTreeMap<String, String>,
) -> Result<Response<Body>, ApiError> {
    let sel = selector(kind, q)?;
    let current = state.inner.lock().map_err(|_| poisoned())?.0.resource_version();
    let bookmarks = q.get("allowWatchBookmarks").is_some_and(|v| v == "true" || v == "1");
    let start = Start::parse(
        q.get("resourceVersion").map(String::as_str),
        q.get("sendInitialEvents").map(String::as_str),
        bookmarks,
        current,
    )?;
    let timeout = match q.get("timeoutSeconds") {
        Some(t) => Some(Duration::from_secs(
            t.parse::<u64>().map_err(|_| ApiError::bad_request(format!("timeoutSeconds {t:?}: not a number")))?,
        )),
        None => None,
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(WATCH_QUEUE);
    tokio::spawn(stream(Arc::clone(state), kind, ns, sel, start, timeout, tx));
    let frames = tokio_stream::StreamExt::map(tokio_stream::wrappers::ReceiverStream::new(rx), |b| {
        Ok::<_, Infallible>(Frame::data(b))
    });
    Response::builder()
        .status(200)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(BodyExt::boxed(StreamBody::new(frames)))
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// Feeds one watch until the client goes, the timeout ends it, the server
/// stops, or the history it needs was compacted (then it ends with the API
/// server's ERROR event, a 410 Expired Status, and client-go lists again).
/// It holds one batch of shared events at a time and a few serialized
/// lines, whether or not the client reads.
async fn stream(
    state: Arc<State>,
    kind: &'static Kind,
    ns: Option<String>,
    sel: Selector,
    start: Start,
    timeout: Option<Duration>,
    tx: tokio::sync::mpsc::Sender<Bytes>,
) {
    let mut changed = state.changed.subscribe();
    changed.borrow_and_update();
    let (initial, mut last, bookmark) = {
        let Ok(inner) = state.inner.lock() else { return };
        let rv = inner.0.resource_version();
        match start {
            Start::Initial { bookmark } => (inner.0.list_shared(kind, ns.as_deref(), &sel), rv, bookmark),
            Start::After(n) => (Vec::new(), n, false),
        }
    };
    for o in initial {
        if tx.send(Bytes::from(watch::line("ADDED", &o))).await.is_err() {
            return;
        }
    }
    if bookmark && tx.send(Bytes::from(watch::initial_events_end(kind, last))).await.is_err() {
        return;
    }
    let deadline = tokio::time::sleep(timeout.unwrap_or(Duration::from_secs(365 * 24 * 3600)));
    tokio::pin!(deadline);
    loop {
        let events = match state.inner.lock() {
            Ok(inner) => inner.0.events_after(kind, ns.as_deref(), last, WATCH_BATCH),
            Err(_) => return,
        };
        let (events, next) = match events {
            Ok(e) => e,
            Err(gone) => {
                let _ = tx.send(Bytes::from(watch::line("ERROR", &gone.body()))).await;
                return;
            }
        };
        let more = events.len() == WATCH_BATCH;
        for e in &events {
            if let Some(l) = watch::seen(e, &sel)
                && tx.send(Bytes::from(l)).await.is_err()
            {
                return;
            }
        }
        drop(events);
        last = next;
        if more {
            continue;
        }
        tokio::select! {
            r = changed.changed() => if r.is_err() { return },
            () = &mut deadline => return,
            () = tx.closed() => return,
            () = state.stop.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unserved_versions_and_resources_are_the_api_servers_404() {
        for path in [
            "/apis/resource.k8s.io/v1beta2/resourceslices",
            "/apis/resource.k8s.io/v1beta1/namespaces/default/resourceclaims/a",
            "/api/v1/secrets",
            "/api/v1/nodes/n/status",
            "/apis/resource.k8s.io/v1/namespaces/default/resourceslices",
        ] {
            let e = route(path, "x").unwrap_err();
            assert_eq!(e.body()["reason"], "NotFound", "{path}");
            assert_eq!(e.body()["message"], "the server could not find the requested resource");
        }
    }

    #[test]
    fn paths_route_to_their_resource_and_scope() {
        let r = route("/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/gpu", "x").unwrap();
        assert!(
            matches!(r, Route::Item { kind, ns, name } if kind.resource == "resourceclaims" && ns == "ns" && name == "gpu")
        );
        let r = route("/api/v1/pods", "x").unwrap();
        assert!(matches!(r, Route::Collection { kind, ns: None } if kind.resource == "pods"));
        assert!(matches!(route("/apis", "x").unwrap(), Route::Doc(_)));
    }

    #[test]
    fn query_components_are_percent_decoded() {
        assert_eq!(decode("spec.driver%3Dgpu.example%2Cspec.nodeName%3Dn"), "spec.driver=gpu.example,spec.nodeName=n");
        assert_eq!(decode("a+b%"), "a b%");
        assert_eq!(decode("%zz"), "%zz");
    }
}
