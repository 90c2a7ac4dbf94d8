//! A device plugin that behaves like a real one, and misbehaves on request.
//!
//! [`MockPlugin::start`] takes a [`MockConfig`] (from a TOML file or built in
//! code) and serves one socket per resource in the device-plugin directory,
//! then registers each on `<dir>/kubelet.sock` the way the kubelet needs
//! (serve first, then Register with `v1beta1`, the socket's file name, the
//! resource name and its options). It notices kubelet restarts and serves
//! and registers again. The returned [`MockHandle`] changes devices at run
//! time, reports [`MockEvent`]s, and stops everything cleanly (sockets
//! removed, record flushed).
//!
//! ```no_run
//! # async fn demo() -> dpctl::Result<()> {
//! use dpctl::mock_plugin::{MockConfig, MockPlugin, ResourceConfig};
//! let config = MockConfig {
//!     dir: Some("/tmp/dp".into()),
//!     resources: vec![ResourceConfig::new("example.com/gpu", 4)],
//!     ..MockConfig::default()
//! };
//! let plugin = MockPlugin::new(config)?;
//! let mut events = plugin.subscribe();
//! let handle = plugin.launch().await?;
//! handle.set_health("example.com/gpu", &["GPU-1".to_string()], "Unhealthy")?;
//! # let _ = events.recv().await;
//! handle.stop().await
//! # }
//! ```

pub mod config;
pub mod control;
pub mod events;
pub mod faults;
pub mod options;
pub mod placeholder;
pub mod policy;
pub mod record;
pub mod register;
pub mod service;
pub mod state;
pub mod template;
pub mod timeline;
pub mod wire;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;

pub use config::{
    AllocateConfig, DeviceConfig, ErrorSpec, Faults, FlapConfig, MockConfig, Policy, ResourceConfig, Rpc, RpcFault,
    RpcSelector, TimelineStep,
};
pub use events::{EventKind, MockEvent, RegisterView, RpcRecord};
pub use state::ResourceStatus;

use crate::error::{Error, Result};
use crate::model::{Change, Device};
use crate::transport::{self, BindOptions, Listener};
use record::Recorder;
use register::{Shared, Supervisor};
use service::MockService;
use state::Resource;

/// How many events a slow subscriber may fall behind before it misses some.
const EVENT_BACKLOG: usize = 4096;

/// A configured mock plugin, not yet started. Subscribe before launching to
/// see every event from the first one on.
#[derive(Debug)]
pub struct MockPlugin {
    config: MockConfig,
    events: broadcast::Sender<MockEvent>,
}

impl MockPlugin {
    /// Checks the config. Nothing is started.
    pub fn new(config: MockConfig) -> Result<Self> {
        config.check().map_err(|i| Error::invalid(format!("mock plugin config: {}", i.key), i.message))?;
        Ok(MockPlugin { config, events: broadcast::channel(EVENT_BACKLOG).0 })
    }

    /// Checks the config and launches it.
    pub async fn start(config: MockConfig) -> Result<MockHandle> {
        Self::new(config)?.launch().await
    }

    /// A receiver of every event from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<MockEvent> {
        self.events.subscribe()
    }

    /// Binds every socket (all or none: on any failure the ones already bound
    /// are removed again), then serves and starts registering. Returns once
    /// the sockets are served; registration goes on in the background.
    pub async fn launch(self) -> Result<MockHandle> {
        let MockPlugin { config, events } = self;
        let dir = config.dir();
        crate::input::create_dir(&dir, 0o750)?;
        let recorder = config.record.as_deref().map(Recorder::create).transpose()?.map(Arc::new);
        let mut resources = Vec::with_capacity(config.resources.len());
        for (i, rc) in config.resources.iter().enumerate() {
            let r = Resource::new(rc, &dir, events.clone(), recorder.clone(), config.rpc_events)
                .map_err(|m| Error::invalid(format!("mock plugin config: resource[{i}].allocate"), m))?;
            resources.push(Arc::new(r));
        }
        let shared = Arc::new(Shared {
            dir: dir.clone(),
            register: config.register,
            register_timeout: config.register_timeout,
            force: config.force,
        });

        // Bind everything before spawning anything.
        let bound = Bound::bind(&config, &resources, &shared, &dir).await?;

        let (fs_tx, _) = broadcast::channel(256);
        let watcher = register::watch_dir(&dir, fs_tx.clone());
        let (stop_tx, stop_rx) = watch::channel(false);
        let (fatal_tx, fatal_rx) = mpsc::unbounded_channel();
        let started = std::time::Instant::now();
        let start = tokio::time::Instant::now();
        let mut tasks: Vec<JoinHandle<()>> = Vec::new();

        for ((r, rc), listener) in resources.iter().zip(&config.resources).zip(bound.plugin) {
            let sup = Supervisor::new(
                Arc::clone(r),
                Arc::clone(&shared),
                rc.faults.clone(),
                fs_tx.subscribe(),
                stop_rx.clone(),
                fatal_tx.clone(),
                listener,
                started,
            );
            tasks.push(tokio::spawn(sup.run()));
            if !rc.flap.is_empty() || !rc.timeline.is_empty() {
                tasks.push(tokio::spawn(timeline::drive(
                    Arc::clone(r),
                    rc.flap.clone(),
                    rc.timeline.clone(),
                    start,
                    stop_rx.clone(),
                )));
            }
        }
        serve_registry(&resources, bound.registry, &stop_rx, &mut tasks);
        serve_control(&resources, bound.control, &stop_rx, &mut tasks);
        Ok(MockHandle { resources, dir, events, stop: stop_tx, tasks, fatal: fatal_rx, _watcher: watcher, recorder })
    }
}

/// The sockets of a launch, bound before anything is spawned.
struct Bound {
    /// Each resource's plugin socket; `None` when it registers before serving.
    plugin: Vec<Option<Listener>>,
    /// Each resource's `plugins_registry` socket, when asked for.
    registry: Vec<Listener>,
    /// Each resource's control socket, when asked for.
    control: Vec<Listener>,
}

impl Bound {
    /// Binds them all, or none: on a failure the listeners bound so far are
    /// dropped, which removes their sockets.
    async fn bind(config: &MockConfig, resources: &[Arc<Resource>], shared: &Shared, dir: &Path) -> Result<Bound> {
        let opts = BindOptions { force: config.force, force_flag: "--force", ..BindOptions::default() };
        let mut plugin = Vec::new();
        for (r, rc) in resources.iter().zip(&config.resources) {
            let serve_now = !(rc.faults.register_before_serving && config.register);
            plugin.push(if serve_now { Some(register::bind(r, shared).await?) } else { None });
        }
        let mut registry = Vec::new();
        if let Some(rd) = &config.registry_dir {
            for r in resources {
                registry.push(transport::bind(&rd.join(&r.endpoint), &opts).await?);
            }
        }
        let mut control = Vec::new();
        if config.control {
            for r in resources {
                control.push(transport::bind(&crate::paths::control_socket(dir, &r.name), &opts).await?);
            }
        }
        Ok(Bound { plugin, registry, control })
    }
}

/// Serves each resource's `plugins_registry` socket until stop.
fn serve_registry(
    resources: &[Arc<Resource>],
    listeners: Vec<Listener>,
    stop_rx: &watch::Receiver<bool>,
    tasks: &mut Vec<JoinHandle<()>>,
) {
    for (r, l) in resources.iter().zip(listeners) {
        let socket = l.guard.path().to_path_buf();
        let router = wire::router(MockService::new(Arc::clone(r), stop_rx.clone()));
        let mut stop = stop_rx.clone();
        tasks.push(tokio::spawn(async move {
            let _ = transport::serve(router, l, async move {
                let _ = stop.wait_for(|s| *s).await;
            })
            .await;
        }));
        r.emit(EventKind::RegistryServing { socket });
    }
}

/// Serves each resource's control socket until stop.
fn serve_control(
    resources: &[Arc<Resource>],
    listeners: Vec<Listener>,
    stop_rx: &watch::Receiver<bool>,
    tasks: &mut Vec<JoinHandle<()>>,
) {
    for (r, l) in resources.iter().zip(listeners) {
        let mut stop = stop_rx.clone();
        tasks.push(tokio::spawn(transport::control::serve(l, control::handler(Arc::clone(r)), async move {
            let _ = stop.wait_for(|s| *s).await;
        })));
    }
}

/// A running mock plugin.
pub struct MockHandle {
    resources: Vec<Arc<Resource>>,
    dir: PathBuf,
    events: broadcast::Sender<MockEvent>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    fatal: mpsc::UnboundedReceiver<Error>,
    _watcher: Option<notify::RecommendedWatcher>,
    recorder: Option<Arc<Recorder>>,
}

impl std::fmt::Debug for MockHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockHandle").field("dir", &self.dir).field("resources", &self.resources).finish_non_exhaustive()
    }
}

impl MockHandle {
    /// The device-plugin directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The resource names, in config order.
    pub fn resources(&self) -> Vec<String> {
        self.resources.iter().map(|r| r.name.clone()).collect()
    }

    fn resource(&self, name: &str) -> Result<&Arc<Resource>> {
        self.resources.iter().find(|r| r.name == name).ok_or_else(|| {
            Error::invalid(
                "resource",
                format!("{name:?} is not served here (serving: {})", self.resources().join(", ")),
            )
        })
    }

    /// The plugin socket of a resource.
    pub fn socket(&self, resource: &str) -> Result<PathBuf> {
        Ok(self.resource(resource)?.socket.clone())
    }

    /// A receiver of every event from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<MockEvent> {
        self.events.subscribe()
    }

    /// Sets the health of devices; open ListAndWatch streams get a new list.
    pub fn set_health(&self, resource: &str, ids: &[String], health: &str) -> Result<Vec<Change>> {
        self.resource(resource)?.set_health(ids, health, "api").map_err(|m| Error::invalid(resource, m))
    }

    /// The devices of a resource now.
    pub fn devices(&self, resource: &str) -> Result<Vec<Device>> {
        Ok(self.resource(resource)?.devices())
    }

    /// The ListAndWatch message a new stream would get now.
    pub fn snapshot(&self, resource: &str) -> Result<state::Snapshot> {
        Ok(self.resource(resource)?.snapshot())
    }

    /// Status of every resource.
    pub fn status(&self) -> Vec<ResourceStatus> {
        self.resources.iter().map(|r| r.status()).collect()
    }

    /// Completes when a resource fails for good (the kubelet rejected its
    /// registration, or its socket could not be served again). Never
    /// completes otherwise.
    pub async fn failure(&mut self) -> Error {
        match self.fatal.recv().await {
            Some(e) => e,
            None => std::future::pending().await,
        }
    }

    /// Stops serving, removes every socket, flushes the record.
    pub async fn stop(mut self) -> Result<()> {
        let _ = self.stop.send(true);
        for t in std::mem::take(&mut self.tasks) {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
        if let Some(r) = &self.recorder {
            r.flush();
        }
        Ok(())
    }
}

impl Drop for MockHandle {
    fn drop(&mut self) {
        // Dropped without stop(): the tasks still shut down and remove their
        // sockets as long as the runtime runs.
        let _ = self.stop.send(true);
    }
}
