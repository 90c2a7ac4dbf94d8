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
use std::sync::{Arc, Mutex};

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
pub use record::Record;
pub use store::{Verb, Write};

/// Where the server listens by default: loopback, a port the OS picks.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:0";

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
    writes: tokio::sync::mpsc::UnboundedReceiver<Write>,
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
    let recorder = record::Recorder::start(&config.dir, &url, &kubeconfig, store.slices(), store.resource_version())?;
    let (changed, _) = tokio::sync::watch::channel(store.resource_version());
    let (tx, writes) = tokio::sync::mpsc::unbounded_channel();
    let state = Arc::new(http::State {
        inner: Mutex::new((store, recorder)),
        changed,
        writes: tx,
        address: local.to_string(),
        stop: CancellationToken::new(),
        record_error: Mutex::new(None),
    });
    Ok(Server { listener, state, writes, url, kubeconfig, objects: count })
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
        http::write(&self.0, |store| {
            let write = store.put(kind, obj);
            Ok((write.object.clone(), write))
        })
        .map_err(|e| Error::io("recording a write", std::io::Error::other(e.message)))
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
        let mut inner = self.0.inner.lock().map_err(|_| poisoned())?;
        let (store, recorder) = &mut *inner;
        let names: Vec<String> = store
            .list(kind, None, &sel)
            .iter()
            .filter_map(|o| o.pointer("/metadata/name").and_then(serde_json::Value::as_str).map(String::from))
            .collect();
        let mut writes = Vec::new();
        for n in &names {
            if let Ok((_, w)) = store.delete(kind, "", n, &serde_json::json!({})) {
                let recorded = recorder.record(&w, store.slices());
                writes.push(w);
                recorded.map_err(|e| Error::io("recording a write", e))?;
            }
        }
        let rv = store.resource_version();
        drop(inner);
        if !writes.is_empty() {
            self.0.changed.send_replace(rv);
        }
        for w in writes {
            let _ = self.0.writes.send(w);
        }
        Ok(names)
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
    /// as it happens. Returns the record as it stands at the end.
    pub async fn run(
        mut self,
        shutdown: impl Future<Output = ()>,
        mut on_write: impl FnMut(&Write) -> Result<()>,
    ) -> Result<Record> {
        tokio::pin!(shutdown);
        let mut connections = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                Some(w) = self.writes.recv() => on_write(&w)?,
                accepted = self.listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let state = Arc::clone(&self.state);
                    connections.spawn(serve_connection(stream, state));
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        self.state.stop.cancel();
        connections.abort_all();
        while let Ok(w) = self.writes.try_recv() {
            on_write(&w)?;
        }
        if let Some(e) = self.state.record_error.lock().ok().and_then(|e| e.clone()) {
            return Err(Error::io("recording a write", std::io::Error::other(e)));
        }
        let inner = self
            .state
            .inner
            .lock()
            .map_err(|_| Error::io("reading the record", std::io::Error::other("poisoned lock")))?;
        Ok(inner.1.current().clone())
    }
}

async fn serve_connection(stream: tokio::net::TcpStream, state: Arc<http::State>) {
    let io = hyper_util::rt::TokioIo::new(stream);
    let service = hyper::service::service_fn(move |req| http::handle(Arc::clone(&state), req));
    // A client that goes away mid-request is its own business.
    let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
}
