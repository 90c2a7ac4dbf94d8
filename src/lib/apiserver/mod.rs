//! `dpctl apiserver`: a small Kubernetes API server for DRA drivers, with
//! no cluster. A driver built on the `kubeletplugin` helper refuses to
//! start without a Kubernetes client, GETs every claim before it prepares
//! it and publishes its devices as ResourceSlices (list, watch, create,
//! update, delete; and a GET of its Node). This serves exactly that, from
//! an objects file, to the real client-go: JSON over plain HTTP on
//! loopback, resourceVersions and watches as the API server gives them,
//! and its `Status` bodies for failures (a 404 for every version it does
//! not serve, so the helper's v1 → v1beta2 → v1beta1 fallback works).
//! Every write is recorded in the directory (see [`record`]).
//!
//! Bounded like dpctl's gRPC servers (the transport's connection table):
//! at most [`MAX_CONNECTIONS`] connections, a new one taking the place of
//! the one idle the longest; request headers within [`HEADER_TIMEOUT`];
//! idle connections closed after the transport's idle deadline; accepting
//! pauses when descriptors run out. Only a client of this user (the kernel
//! names the owner of a loopback connection's other end) or one holding the
//! bearer token of the kubeconfig (mode 0600) is answered; others get 401. Writes are
//! shown through a bounded queue, so an output nobody reads never holds up
//! serving (writes not shown are counted).

pub mod client;
pub mod kinds;
pub mod objects;
pub mod protobuf;
pub mod record;
pub mod select;
pub mod status;
pub mod store;
pub mod watch;

mod http;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
pub use record::Record;
pub use store::{Verb, Write};

/// Where the server listens by default: loopback, a port the OS picks.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:0";
/// Most connections open at once: the gRPC servers' cap.
pub const MAX_CONNECTIONS: usize = crate::transport::MAX_CONNECTIONS;
/// Time a client has to send a request's headers.
pub const HEADER_TIMEOUT: Duration = crate::transport::HANDSHAKE_TIMEOUT;
/// Writes waiting for the record's saver.
const WRITE_QUEUE: usize = 4096;
/// Writes waiting to be shown.
/// Writes waiting to be shown: few, since each holds its object's version.
const SHOWN_QUEUE: usize = 16;

/// What `dpctl apiserver` serves and where.
#[derive(Debug, Clone)]
pub struct Config {
    /// The directory for the record and (by default) the kubeconfig.
    pub dir: PathBuf,
    /// The objects file.
    pub objects: PathBuf,
    /// The address to listen on (loopback only).
    pub listen: SocketAddr,
    /// Where the kubeconfig goes [default: DIR/kubeconfig].
    pub kubeconfig_out: Option<PathBuf>,
}

/// A bound server, not yet serving.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    state: Arc<http::State>,
    writes: tokio::sync::mpsc::Receiver<Write>,
    url: String,
    kubeconfig: PathBuf,
    objects: usize,
}

/// Loads the objects, binds the address and writes the kubeconfig and an
/// empty record: after this returns, clients can connect.
pub async fn bind(config: &Config) -> Result<Server> {
    if !config.listen.ip().is_loopback() {
        return Err(Error::invalid(
            "--listen",
            format!(
                "{} is not a loopback address: dpctl apiserver has no authentication and no TLS, so it \
                 listens on 127.0.0.1 or ::1 only",
                config.listen
            ),
        ));
    }
    let loaded = objects::load(&config.objects)?;
    let count = loaded.len();
    let kubeconfig = config.kubeconfig_out.clone().unwrap_or_else(|| config.dir.join("kubeconfig"));
    record::check_paths(&config.dir, &kubeconfig)?;
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| Error::Bind { path: PathBuf::from(config.listen.to_string()), source })?;
    let local = listener.local_addr().map_err(|e| Error::io("reading the bound address", e))?;
    let url = format!("http://{local}");
    let store = store::Store::new(loaded);
    let token = new_token();
    let recorder = record::Recorder::start(
        &config.dir,
        &url,
        &kubeconfig,
        &token,
        store.slices_shared(),
        store.resource_version(),
    )?;
    let (changed, _) = tokio::sync::watch::channel(store.resource_version());
    let (tx, writes) = tokio::sync::mpsc::channel(WRITE_QUEUE);
    let state = Arc::new(http::State {
        inner: Mutex::new((store, recorder)),
        changed,
        writes: tx,
        unshown: AtomicU64::new(0),
        owned: Mutex::new(std::collections::HashSet::new()),
        token,
        address: local.to_string(),
        stop: CancellationToken::new(),
        record_error: Mutex::new(None),
    });
    Ok(Server { listener, state, writes, url, kubeconfig, objects: count })
}

/// A bearer token no one can guess: 32 random bytes, hex.
fn new_token() -> String {
    let b: [u8; 32] = rand::random();
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// In-process access to a bound server's objects, for a program that
/// embeds the server or plays the control plane beside it (kubelet-sim reads
/// the claims it prepares from it and adds those it is given with a pod;
/// `dra smoke` creates the claims it allocates from the published slices, as
/// the scheduler would). Writes through it are recorded and seen by watches,
/// as a client's are.
#[derive(Debug, Clone)]
pub struct Handle(Arc<http::State>);

impl Handle {
    /// The server's URL, `http://host:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.0.address)
    }

    /// One object of `resource` (plural, e.g. `resourceclaims`); `None` when absent.
    pub fn get(&self, resource: &str, ns: &str, name: &str) -> Result<Option<serde_json::Value>> {
        let Some(kind) = kinds::KINDS.iter().find(|k| k.resource == resource) else {
            return Err(Error::invalid(resource, "not a resource dpctl's API server serves"));
        };
        let inner = self.0.inner.lock().map_err(|_| poisoned())?;
        Ok(inner.0.get(kind, ns, name).ok())
    }

    /// Stores `obj` (one object as an objects file holds it, checked the
    /// same way), created or replaced, and records the write as a client's
    /// write is recorded; returns the object as stored.
    pub fn put(&self, obj: serde_json::Value, place: &str) -> Result<serde_json::Value> {
        let text = serde_json::to_string(&obj).map_err(|e| Error::invalid(place, e.to_string()))?;
        let mut checked = objects::parse(&text, place)?;
        let Some((kind, obj)) = checked.pop() else { return Err(Error::invalid(place, "no object")) };
        let mut created = None;
        let stored = http::write(&self.0, |store| {
            let write = store.put(kind, obj)?;
            if write.verb == Verb::Create {
                let ns = write.object.pointer("/metadata/namespace").and_then(serde_json::Value::as_str);
                created = Some((kind.resource, ns.unwrap_or_default().to_string(), write.name.clone()));
            }
            Ok(((*write.object).clone(), write))
        })
        .map_err(|e| Error::invalid(place, e.message))?;
        if let (Some(key), Ok(mut owned)) = (created, self.0.owned.lock()) {
            owned.insert(key);
        }
        Ok(stored)
    }

    /// Deletes an object [`Handle::put`] created (a claim the sim stored with
    /// a pod, when the pod goes, as the real controllers delete the claims
    /// they generated for a pod), recorded and seen by watches. An object it
    /// did not create (one from the objects file) stays; false then, or
    /// when it is gone already.
    pub fn delete_created(&self, resource: &str, ns: &str, name: &str) -> Result<bool> {
        let Some(kind) = kinds::KINDS.iter().find(|k| k.resource == resource) else {
            return Err(Error::invalid(resource, "not a resource dpctl's API server serves"));
        };
        let key = (kind.resource, ns.to_string(), name.to_string());
        if !self.0.owned.lock().map_err(|_| poisoned())?.remove(&key) {
            return Ok(false);
        }
        match http::write(&self.0, |store| store.delete(kind, ns, name, &serde_json::json!({}))) {
            Ok(_) => Ok(true),
            Err(e) if e.code == 404 => Ok(false),
            Err(e) => Err(Error::invalid(format!("{resource} {ns}/{name}"), e.message)),
        }
    }

    /// Creates an object of a served kind (from its `apiVersion` and
    /// `kind`), recorded and seen by watches as any write; returns it as
    /// stored (with its new UID and resourceVersion).
    pub fn create(&self, obj: serde_json::Value) -> Result<serde_json::Value> {
        let text = |k: &str| obj.get(k).and_then(serde_json::Value::as_str).unwrap_or_default().to_string();
        let Some(kind) = kinds::Kind::of_object(&text("apiVersion"), &text("kind")) else {
            return Err(Error::invalid("object", format!("{} {} is not served", text("apiVersion"), text("kind"))));
        };
        let ns = obj.pointer("/metadata/namespace").and_then(serde_json::Value::as_str).unwrap_or_default().to_string();
        http::write(&self.0, |store| store.create(kind, &ns, obj))
            .map_err(|e| Error::invalid(format!("{} {}", kind.kind, ns), e.message))
    }

    /// Wakes on every write (its value: the resourceVersion after it).
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.changed.subscribe()
    }

    /// Every ResourceSlice as it stands.
    pub fn slices(&self) -> Vec<serde_json::Value> {
        self.0.inner.lock().map(|inner| inner.0.slices()).unwrap_or_default()
    }
}

impl Handle {
    /// The name of the one Node the objects hold (`None`: none, or several).
    pub fn only_node(&self) -> Result<Option<String>> {
        let inner = self.0.inner.lock().map_err(|_| poisoned())?;
        let nodes = inner.0.list(kinds::Kind::nodes(), None, &select::Selector::default());
        Ok(match nodes.as_slice() {
            [one] => one.pointer("/metadata/name").and_then(serde_json::Value::as_str).map(String::from),
            _ => None,
        })
    }

    /// DeleteCollection of ResourceSlices by field selector (e.g.
    /// `spec.nodeName=n,spec.driver=d`), each delete recorded and seen by
    /// watches; returns the names deleted.
    pub fn delete_slices(&self, field_selector: &str) -> Result<Vec<String>> {
        let kind = kinds::Kind::slices();
        let sel = select::Selector::parse(kind, Some(field_selector), None)
            .map_err(|e| Error::invalid(field_selector, e.message))?;
        let names: Vec<String> = {
            let inner = self.0.inner.lock().map_err(|_| poisoned())?;
            inner
                .0
                .list_shared(kind, None, &sel)
                .iter()
                .filter_map(|o| o.pointer("/metadata/name").and_then(serde_json::Value::as_str).map(String::from))
                .collect()
        };
        let mut gone = Vec::new();
        for n in names {
            match http::write(&self.0, |store| store.delete(kind, "", &n, &serde_json::json!({}))) {
                Ok(_) => gone.push(n),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(Error::io("recording a write", std::io::Error::other(e.message))),
            }
        }
        Ok(gone)
    }
}

fn poisoned() -> Error {
    Error::io("reading the API objects", std::io::Error::other("poisoned lock"))
}

impl Server {
    /// The server's URL, e.g. `http://127.0.0.1:38211`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The kubeconfig written for it.
    pub fn kubeconfig(&self) -> &std::path::Path {
        &self.kubeconfig
    }

    /// In-process access to its objects (see [`Handle`]).
    pub fn handle(&self) -> Handle {
        Handle(Arc::clone(&self.state))
    }

    /// How many objects it serves from the file.
    pub fn objects(&self) -> usize {
        self.objects
    }

    /// Serves until `shutdown` completes, calling `on_write` for each write
    /// as it happens (after the record holds it). Serving never waits for
    /// `on_write`: writes it has not taken are queued (bounded) and past
    /// the queue counted in the record's `unshown`. Returns the record as
    /// it stands at the end.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()>,
        mut on_write: impl FnMut(&Write) -> Result<()>,
    ) -> Result<Record> {
        let Server { listener, state, writes, .. } = self;
        let (shown_tx, mut shown) = tokio::sync::mpsc::channel(SHOWN_QUEUE);
        let acceptor = tokio::spawn(accept(listener, Arc::clone(&state)));
        let saver = tokio::spawn(save_loop(Arc::clone(&state), writes, shown_tx));
        tokio::pin!(shutdown);
        let mut result = Ok(());
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                Some(w) = shown.recv() => if let Err(e) = on_write(&w) {
                    result = Err(e);
                    break;
                },
            }
        }
        state.stop.cancel();
        acceptor.abort();
        let _ = acceptor.await;
        let mut writes = saver.await.map_err(|e| Error::io("saving the record", std::io::Error::other(e)))?;
        save_now(&state);
        if result.is_ok() {
            while let Ok(w) = shown.try_recv().or_else(|_| writes.try_recv()) {
                on_write(&w)?;
            }
        }
        result?;
        if let Some(e) = state.record_error.lock().ok().and_then(|e| e.clone()) {
            return Err(Error::io("recording a write", std::io::Error::other(e)));
        }
        let inner =
            state.inner.lock().map_err(|_| Error::io("reading the record", std::io::Error::other("poisoned lock")))?;
        let mut record = inner.1.current(inner.0.slices());
        record.unshown = state.unshown.load(Ordering::Relaxed);
        Ok(record)
    }
}

/// Saves `apiserver.json` if writes were logged since it was last saved
/// (serialized outside the store's lock); returns the resourceVersion it holds.
fn save_now(state: &http::State) -> u64 {
    let (snapshot, rv) = match state.inner.lock() {
        Ok(mut inner) => {
            let (store, recorder) = &mut *inner;
            (recorder.snapshot(store.slices_shared()), store.resource_version())
        }
        Err(_) => return 0,
    };
    if let Some(Err(e)) = snapshot.map(|s| s.save())
        && let Ok(mut first) = state.record_error.lock()
    {
        first.get_or_insert(format!("saving {}: {e}", record::RECORD_FILE));
    }
    rv
}

/// Saves the record after each burst of writes, then passes the writes it
/// holds on to be shown (a write is shown only once the record holds it);
/// returns the queue of writes when the server stops.
async fn save_loop(
    state: Arc<http::State>,
    mut writes: tokio::sync::mpsc::Receiver<Write>,
    shown: tokio::sync::mpsc::Sender<Write>,
) -> tokio::sync::mpsc::Receiver<Write> {
    let mut changed = state.changed.subscribe();
    let mut held: Option<Write> = None;
    let mut first = true;
    loop {
        // Writes made before the server ran (a program's, through its
        // Handle) are saved at once.
        if !std::mem::take(&mut first) {
            tokio::select! {
                r = changed.changed() => if r.is_err() { return writes },
                () = state.stop.cancelled() => return writes,
            }
        }
        let saved = save_now(&state);
        while let Some(w) = held.take().or_else(|| writes.try_recv().ok()) {
            if w.resource_version.parse::<u64>().unwrap_or(0) > saved {
                held = Some(w);
                break;
            }
            if shown.try_send(w).is_err() {
                state.unshown.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Accepts connections within the transport's limits until aborted (which
/// drops, and so closes, every connection).
async fn accept(listener: TcpListener, state: Arc<http::State>) {
    let table = crate::transport::guard::ConnTable::new(MAX_CONNECTIONS);
    let mut connections = tokio::task::JoinSet::new();
    let mut refused = 0u64;
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                crate::transport::accept_failed(&e, "apiserver").await;
                continue;
            }
        };
        let slot = match table.admit(&state.stop) {
            crate::transport::guard::Admission::Admitted(slot) | crate::transport::guard::Admission::Evicted(slot) => {
                slot
            }
            crate::transport::guard::Admission::Full => {
                refused += 1;
                if refused.is_power_of_two() {
                    tracing::warn!(
                        max = MAX_CONNECTIONS,
                        refused,
                        "apiserver: every connection busy; closing new ones"
                    );
                }
                continue;
            }
        };
        connections.spawn(serve_connection(stream, slot, Arc::clone(&state)));
    }
}

/// True when the connecting process runs as this server's user (or root).
/// client-go sends a kubeconfig's bearer token only over TLS
/// (`clientcmd`'s `ClientConfig` reads the user's credentials for a TLS
/// transport only), so a driver on plain loopback HTTP cannot prove itself
/// with it; the kernel can: `/proc/net/tcp` names the owner of the
/// client's end of a loopback connection. Another local user's process is
/// answered only with the token.
fn same_user(addrs: Option<(SocketAddr, SocketAddr)>) -> bool {
    let Some((local, peer)) = addrs else { return false };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    peer_uid(local, peer).is_some_and(|uid| uid == me || uid == 0)
}

/// The uid owning the client's end (`peer`) of a loopback connection to
/// `local`, from the kernel's socket table.
fn peer_uid(local: SocketAddr, peer: SocketAddr) -> Option<u32> {
    let (table, want_local, want_remote) = match (local, peer) {
        (SocketAddr::V4(l), SocketAddr::V4(p)) => ("/proc/net/tcp", hex_v4(&p), hex_v4(&l)),
        (SocketAddr::V6(l), SocketAddr::V6(p)) => ("/proc/net/tcp6", hex_v6(&p), hex_v6(&l)),
        _ => return None,
    };
    let text = std::fs::read_to_string(table).ok()?;
    text.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() > 7 && f[1].eq_ignore_ascii_case(&want_local) && f[2].eq_ignore_ascii_case(&want_remote))
            .then(|| f[7].parse().ok())
            .flatten()
    })
}

/// `ADDR:PORT` as `/proc/net/tcp` writes an IPv4 socket address (the
/// address in host byte order, as stored).
fn hex_v4(a: &std::net::SocketAddrV4) -> String {
    format!("{:08X}:{:04X}", u32::from_ne_bytes(a.ip().octets()), a.port())
}

/// `ADDR:PORT` as `/proc/net/tcp6` writes an IPv6 socket address (four
/// 32-bit words, each in host byte order).
fn hex_v6(a: &std::net::SocketAddrV6) -> String {
    let o = a.ip().octets();
    let words: String = o.chunks(4).map(|c| format!("{:08X}", u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))).collect();
    format!("{words}:{:04X}", a.port())
}

/// Marks a connection busy while a request is answered (its response body
/// included: a watch keeps it busy), idle again when dropped.
struct Busy(Arc<crate::transport::guard::ConnSlot>);

impl Busy {
    fn new(slot: &Arc<crate::transport::guard::ConnSlot>) -> Self {
        slot.set_idle(false);
        Busy(Arc::clone(slot))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.set_idle(true);
    }
}

/// A response body that keeps its connection [`Busy`] until it is done
/// (its size passed on, so a whole answer keeps its Content-Length).
struct BusyBody {
    inner: http::Body,
    _busy: Busy,
}

impl hyper::body::Body for BusyBody {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<std::result::Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// Serves one connection: headers within [`HEADER_TIMEOUT`], closed when
/// idle past the transport's idle deadline or when its slot is taken away.
async fn serve_connection(
    stream: tokio::net::TcpStream,
    slot: crate::transport::guard::ConnSlot,
    state: Arc<http::State>,
) {
    let slot = Arc::new(slot);
    // Looked up once, at the first request without the token (an idle
    // connection costs no look-up).
    let addrs = stream.local_addr().ok().zip(stream.peer_addr().ok());
    let same = Arc::new(std::sync::OnceLock::new());
    let io = hyper_util::rt::TokioIo::new(stream);
    let served = Arc::clone(&slot);
    let service = hyper::service::service_fn(move |req| {
        let busy = Busy::new(&served);
        let state = Arc::clone(&state);
        let trusted = http::authorized(&state.token, req.headers()) || *same.get_or_init(|| same_user(addrs));
        async move {
            let resp = http::handle(state, req, trusted).await?;
            Ok::<_, std::convert::Infallible>(resp.map(|inner| BusyBody { inner, _busy: busy }))
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(io, service);
    tokio::pin!(conn);
    let close = slot.token();
    let idle_timeout = crate::transport::IDLE_TIMEOUT;
    let mut closing = false;
    loop {
        let check = slot.idle_for().map_or(idle_timeout, |d| idle_timeout.saturating_sub(d));
        tokio::select! {
            // A client that goes away mid-request is its own business.
            _ = conn.as_mut() => return,
            () = close.cancelled(), if !closing => {
                conn.as_mut().graceful_shutdown();
                closing = true;
            }
            () = tokio::time::sleep(check.max(Duration::from_millis(10))), if !closing => {
                if slot.idle_for().is_some_and(|d| d >= idle_timeout) {
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
        }
    }
}
