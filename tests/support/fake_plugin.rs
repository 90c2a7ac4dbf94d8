//! The one fake device plugin of the tests and benchmarks, built directly on
//! the generated code (not on dpctl's mock plugin): a device list that can
//! change while streams are open, one [`Behaviour`] with a knob per RPC fault,
//! every call recorded, served on a unix socket through dpctl's transport
//! (with the plugin-watcher Registration service beside it), and registering
//! on kubelet.sock with the generated client when asked.
//!
//! Self-contained (no `super::`), so benches include it with
//! `#[path = "../tests/support/fake_plugin.rs"] mod fake_plugin;`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use dpctl::proto::deviceplugin::v1beta1 as dp;
use dpctl::proto::deviceplugin::v1beta1::device_plugin_server::{DevicePlugin, DevicePluginServer};
use dpctl::proto::pluginregistration as reg;
use futures_util::Stream;
use tokio::sync::{oneshot, watch};
use tonic::{Request, Response, Status};

/// What Allocate answers for a request it accepts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AllocateAnswer {
    /// One response per container: `VISIBLE_DEVICES`, a read-only `/data`
    /// mount, `/dev/<id>` device specs and `example.com/gpu=<id>` CDI names.
    #[default]
    Full,
    /// One response per container with only `VISIBLE_DEVICES` (the
    /// benchmarks' small answer).
    EnvOnly,
    /// No container responses at all.
    Empty,
    /// One container response, whatever was asked.
    FirstOnly,
    /// One (empty) container response more than asked.
    OneExtra,
}

/// What Allocate does with IDs the plugin never advertised.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UnknownIds {
    /// Allocates them like any other.
    #[default]
    Accept,
    /// Fails with InvalidArgument "unknown devices: ...".
    Refuse,
    /// Never answers.
    Hang,
}

/// How the plugin behaves: everything answers and nothing fails by default
/// (no options advertised, any ID allocated); each field switches on one
/// fault. Change it while serving with [`FakePlugin::set`].
#[derive(Clone, Default)]
pub struct Behaviour {
    /// What GetDevicePluginOptions answers.
    pub options: dp::DevicePluginOptions,
    /// GetDevicePluginOptions fails with this status.
    pub options_error: Option<Status>,
    /// ListAndWatch fails at once with this status.
    pub list_error: Option<Status>,
    /// ListAndWatch ends (status OK) after this many messages.
    pub end_after: Option<usize>,
    /// ListAndWatch sends nothing until the devices are first changed.
    pub hold_first: bool,
    /// ListAndWatch waits this long before its first message.
    pub first_list_delay: Option<Duration>,
    /// A new ListAndWatch ends the one before (one stream at a time).
    pub single_stream: bool,
    /// GetPreferredAllocation's answer; `None` keeps the contract
    /// (must-include first, then available IDs up to the size).
    pub preferred: Option<Vec<String>>,
    /// GetPreferredAllocation answers the first `size` available IDs, ignoring must-include.
    pub preferred_ignores_must_include: bool,
    /// GetPreferredAllocation answers one (empty) container response more than asked.
    pub preferred_extra_response: bool,
    /// Allocate fails with this status.
    pub allocate_error: Option<Status>,
    /// Allocate waits this long before answering.
    pub allocate_delay: Option<Duration>,
    /// The shape of Allocate's answer.
    pub allocate_answer: AllocateAnswer,
    /// What Allocate does with IDs never advertised.
    pub unknown_ids: UnknownIds,
    /// Allocate fails with ResourceExhausted "busy" while another Allocate is in flight.
    pub busy_when_concurrent: bool,
    /// PreStartContainer fails with this status.
    pub pre_start_error: Option<Status>,
    /// PreStartContainer waits this long before answering.
    pub pre_start_delay: Option<Duration>,
    /// GetInfo's answer (plugins_registry): type, name, endpoint, versions;
    /// `None` answers Unimplemented.
    pub info: Option<(String, String, String, Vec<String>)>,
    /// Record nothing (benchmarks that make many calls).
    pub quiet: bool,
}

impl Behaviour {
    /// A plugin that keeps every rule `dpctl plugin check` tests: both
    /// options advertised, IDs it never advertised refused.
    pub fn conformant() -> Self {
        Behaviour {
            options: dp::DevicePluginOptions { pre_start_required: true, get_preferred_allocation_available: true },
            unknown_ids: UnknownIds::Refuse,
            ..Behaviour::default()
        }
    }
}

/// Everything the plugin was asked.
#[derive(Default, Debug)]
pub struct Calls {
    /// RPC names in the order they came (NotifyRegistrationStatus not included).
    pub rpcs: Vec<String>,
    pub preferred: Vec<dp::ContainerPreferredAllocationRequest>,
    pub allocate: Vec<Vec<String>>,
    pub pre_start: Vec<Vec<String>>,
    pub notify: Vec<(bool, String)>,
}

/// The fake plugin; clones share devices, behaviour and recorded calls.
#[derive(Clone)]
pub struct FakePlugin {
    devices: Arc<watch::Sender<Vec<dp::Device>>>,
    behaviour: Arc<Mutex<Behaviour>>,
    calls: Arc<Mutex<Calls>>,
    notified: Arc<tokio::sync::Notify>,
    /// Set to end every open ListAndWatch stream (status OK).
    ended: Arc<watch::Sender<bool>>,
    /// Ends the current ListAndWatch stream (for `single_stream`).
    current_stream: Arc<Mutex<Option<oneshot::Sender<()>>>>,
    /// Allocate calls in flight (for `busy_when_concurrent`).
    allocating: Arc<AtomicUsize>,
}

/// A device with `health` and, when given, its NUMA nodes.
pub fn device(id: &str, health: &str, numa: Option<&[i64]>) -> dp::Device {
    dp::Device {
        id: id.into(),
        health: health.into(),
        topology: numa.map(|n| dp::TopologyInfo { nodes: n.iter().map(|id| dp::NumaNode { id: *id }).collect() }),
    }
}

/// `n` healthy devices `<prefix>-0..`, on NUMA node `i % 2` (or no topology).
pub fn numbered(prefix: &str, n: usize, numa: bool) -> Vec<dp::Device> {
    (0..n)
        .map(|i| {
            let node = [(i % 2) as i64];
            device(&format!("{prefix}-{i}"), dp::HEALTHY, numa.then_some(&node[..]))
        })
        .collect()
}

impl FakePlugin {
    pub fn new(devices: Vec<dp::Device>, behaviour: Behaviour) -> Self {
        FakePlugin {
            devices: Arc::new(watch::channel(devices).0),
            behaviour: Arc::new(Mutex::new(behaviour)),
            calls: Arc::default(),
            notified: Arc::default(),
            ended: Arc::new(watch::channel(false).0),
            current_stream: Arc::default(),
            allocating: Arc::default(),
        }
    }

    /// `n` healthy devices `dev-0..`, on NUMA node `i % 2` (or no topology).
    pub fn healthy(n: usize, numa: bool) -> Vec<dp::Device> {
        numbered("dev", n, numa)
    }

    /// Replaces the device list; open ListAndWatch streams get it.
    pub fn set_devices(&self, devices: Vec<dp::Device>) {
        self.devices.send_replace(devices);
    }

    /// Ends every open ListAndWatch stream with status OK.
    pub fn end_streams(&self) {
        self.ended.send_replace(true);
    }

    /// Changes the behaviour for the calls that come next.
    pub fn set(&self, f: impl FnOnce(&mut Behaviour)) {
        f(&mut self.behaviour.lock().unwrap());
    }

    /// What the plugin was asked so far.
    pub fn calls(&self) -> MutexGuard<'_, Calls> {
        self.calls.lock().unwrap()
    }

    /// The RPC names asked so far, in order.
    pub fn rpcs(&self) -> Vec<String> {
        self.calls().rpcs.clone()
    }

    /// Resolves at the next NotifyRegistrationStatus (or at once if one came unawaited).
    pub async fn notified(&self) {
        self.notified.notified().await;
    }

    fn behaviour(&self) -> Behaviour {
        self.behaviour.lock().unwrap().clone()
    }

    fn record(&self, rpc: &str, b: &Behaviour, more: impl FnOnce(&mut Calls)) {
        if !b.quiet {
            let mut calls = self.calls();
            calls.rpcs.push(rpc.to_string());
            more(&mut calls);
        }
    }

    fn known(&self, id: &str) -> bool {
        self.devices.borrow().iter().any(|d| d.id == id)
    }

    /// Serves on `path` (bound before this returns) until the returned sender
    /// is dropped or fired.
    pub async fn serve(&self, path: &Path) -> oneshot::Sender<()> {
        let listener = dpctl::transport::bind(path, &Default::default()).await.expect("bind the fake plugin");
        let router = tonic::transport::Server::builder()
            .add_service(DevicePluginServer::new(self.clone()))
            .add_service(reg::registration_server::RegistrationServer::new(self.clone()));
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(dpctl::transport::serve(router, listener, async {
            let _ = rx.await;
        }));
        tx
    }

    /// Serves as `<dir>/<name>` and registers it for `resource` on
    /// `<dir>/kubelet.sock` (v1beta1, no options), as a plugin does.
    pub async fn start(&self, dir: &Path, name: &str, resource: &str) -> (PathBuf, oneshot::Sender<()>) {
        let path = dir.join(name);
        let stop = self.serve(&path).await;
        register(&dir.join("kubelet.sock"), dp::VERSION, resource, name, None)
            .await
            .unwrap_or_else(|e| panic!("register {resource}: {e}"));
        (path, stop)
    }
}

/// Registers on `kubelet_sock` with the generated client, as a plugin does
/// (the connection is bounded; the call's status is returned).
pub async fn register(
    kubelet_sock: &Path,
    version: &str,
    resource: &str,
    endpoint: &str,
    options: Option<dp::DevicePluginOptions>,
) -> Result<(), Status> {
    let channel = dpctl::transport::connect(kubelet_sock, Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| panic!("connect {}: {e}", kubelet_sock.display()));
    let mut c = dp::registration_client::RegistrationClient::new(channel);
    c.register(dp::RegisterRequest {
        version: version.into(),
        endpoint: endpoint.into(),
        resource_name: resource.into(),
        options,
    })
    .await
    .map(|_| ())
}

type Snapshots = Pin<Box<dyn Stream<Item = Result<dp::ListAndWatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl DevicePlugin for FakePlugin {
    async fn get_device_plugin_options(
        &self,
        _: Request<dp::Empty>,
    ) -> Result<Response<dp::DevicePluginOptions>, Status> {
        let b = self.behaviour();
        self.record("GetDevicePluginOptions", &b, |_| {});
        match b.options_error {
            Some(status) => Err(status),
            None => Ok(Response::new(b.options)),
        }
    }

    type ListAndWatchStream = Snapshots;

    async fn list_and_watch(&self, _: Request<dp::Empty>) -> Result<Response<Self::ListAndWatchStream>, Status> {
        let b = self.behaviour();
        self.record("ListAndWatch", &b, |_| {});
        if let Some(status) = b.list_error {
            return Err(status);
        }
        let mut rx = self.devices.subscribe();
        let mut ended = self.ended.subscribe();
        let (kill_tx, kill_rx) = oneshot::channel::<()>();
        if b.single_stream
            && let Some(previous) = self.current_stream.lock().unwrap().replace(kill_tx)
        {
            let _ = previous.send(());
        }
        let (tx, out) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            // Fires only when a newer stream replaces this one.
            let replaced = async move {
                if kill_rx.await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            tokio::pin!(replaced);
            if let Some(d) = b.first_list_delay {
                tokio::time::sleep(d).await;
            }
            if b.hold_first {
                rx.borrow_and_update();
                tokio::select! {
                    r = rx.changed() => if r.is_err() { return },
                    () = tx.closed() => return,
                }
            }
            let mut sent = 0;
            loop {
                let devices = rx.borrow_and_update().clone();
                if tx.send(Ok(dp::ListAndWatchResponse { devices })).await.is_err() {
                    return;
                }
                sent += 1;
                if b.end_after.is_some_and(|n| sent >= n) {
                    return;
                }
                tokio::select! {
                    r = rx.changed() => if r.is_err() { return },
                    () = tx.closed() => return,
                    _ = ended.wait_for(|e| *e) => return,
                    () = &mut replaced => return,
                }
            }
        });
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(out))))
    }

    async fn get_preferred_allocation(
        &self,
        req: Request<dp::PreferredAllocationRequest>,
    ) -> Result<Response<dp::PreferredAllocationResponse>, Status> {
        let r = req.into_inner();
        let b = self.behaviour();
        self.record("GetPreferredAllocation", &b, |c| c.preferred.extend(r.container_requests.iter().cloned()));
        let mut container_responses: Vec<_> = r
            .container_requests
            .iter()
            .map(|c| dp::ContainerPreferredAllocationResponse {
                device_i_ds: b.preferred.clone().unwrap_or_else(|| {
                    let size = usize::try_from(c.allocation_size).unwrap_or(0);
                    let must = if b.preferred_ignores_must_include { &[][..] } else { &c.must_include_device_i_ds[..] };
                    let mut picked: Vec<String> = Vec::new();
                    for id in must.iter().chain(&c.available_device_i_ds) {
                        if picked.len() < size && !picked.contains(id) {
                            picked.push(id.clone());
                        }
                    }
                    picked
                }),
            })
            .collect();
        if b.preferred_extra_response {
            container_responses.push(dp::ContainerPreferredAllocationResponse::default());
        }
        Ok(Response::new(dp::PreferredAllocationResponse { container_responses }))
    }

    async fn allocate(&self, req: Request<dp::AllocateRequest>) -> Result<Response<dp::AllocateResponse>, Status> {
        let r = req.into_inner();
        let b = self.behaviour();
        self.record("Allocate", &b, |c| c.allocate.extend(r.container_requests.iter().map(|c| c.devices_ids.clone())));
        if let Some(d) = b.allocate_delay {
            tokio::time::sleep(d).await;
        }
        if b.busy_when_concurrent {
            let before = self.allocating.fetch_add(1, Ordering::SeqCst);
            // Stay in flight a while, so concurrent calls overlap.
            tokio::time::sleep(Duration::from_millis(100)).await;
            self.allocating.fetch_sub(1, Ordering::SeqCst);
            if before > 0 {
                return Err(Status::resource_exhausted("busy: another Allocate is in progress"));
            }
        }
        if let Some(status) = b.allocate_error {
            return Err(status);
        }
        if b.unknown_ids != UnknownIds::Accept {
            let unknown: Vec<&str> = r
                .container_requests
                .iter()
                .flat_map(|c| c.devices_ids.iter())
                .filter(|id| !self.known(id))
                .map(String::as_str)
                .collect();
            if !unknown.is_empty() {
                if b.unknown_ids == UnknownIds::Hang {
                    std::future::pending::<()>().await;
                }
                return Err(Status::invalid_argument(format!("unknown devices: {}", unknown.join(","))));
            }
        }
        let full = b.allocate_answer == AllocateAnswer::Full;
        let mut container_responses: Vec<dp::ContainerAllocateResponse> = r
            .container_requests
            .iter()
            .map(|c| dp::ContainerAllocateResponse {
                envs: [("VISIBLE_DEVICES".to_string(), c.devices_ids.join(","))].into(),
                mounts: if full {
                    vec![dp::Mount { container_path: "/data".into(), host_path: "/srv/data".into(), read_only: true }]
                } else {
                    Vec::new()
                },
                devices: c
                    .devices_ids
                    .iter()
                    .filter(|_| full)
                    .map(|id| dp::DeviceSpec {
                        container_path: format!("/dev/{id}"),
                        host_path: "/dev/null".into(),
                        permissions: "rw".into(),
                    })
                    .collect(),
                annotations: Default::default(),
                cdi_devices: c
                    .devices_ids
                    .iter()
                    .filter(|_| full)
                    .map(|id| dp::CdiDevice { name: format!("example.com/gpu={id}") })
                    .collect(),
            })
            .collect();
        match b.allocate_answer {
            AllocateAnswer::Full | AllocateAnswer::EnvOnly => {}
            AllocateAnswer::Empty => container_responses.clear(),
            AllocateAnswer::FirstOnly => container_responses.truncate(1),
            AllocateAnswer::OneExtra => container_responses.push(dp::ContainerAllocateResponse::default()),
        }
        Ok(Response::new(dp::AllocateResponse { container_responses }))
    }

    async fn pre_start_container(
        &self,
        req: Request<dp::PreStartContainerRequest>,
    ) -> Result<Response<dp::PreStartContainerResponse>, Status> {
        let b = self.behaviour();
        self.record("PreStartContainer", &b, |c| c.pre_start.push(req.into_inner().devices_ids));
        if let Some(d) = b.pre_start_delay {
            tokio::time::sleep(d).await;
        }
        match b.pre_start_error {
            Some(status) => Err(status),
            None => Ok(Response::new(dp::PreStartContainerResponse {})),
        }
    }
}

#[tonic::async_trait]
impl reg::registration_server::Registration for FakePlugin {
    async fn get_info(&self, _: Request<reg::InfoRequest>) -> Result<Response<reg::PluginInfo>, Status> {
        let b = self.behaviour();
        self.record("GetInfo", &b, |_| {});
        let (r#type, name, endpoint, supported_versions) =
            b.info.ok_or_else(|| Status::unimplemented("no plugin info"))?;
        Ok(Response::new(reg::PluginInfo { r#type, name, endpoint, supported_versions }))
    }

    async fn notify_registration_status(
        &self,
        req: Request<reg::RegistrationStatus>,
    ) -> Result<Response<reg::RegistrationStatusResponse>, Status> {
        let r = req.into_inner();
        self.calls().notify.push((r.plugin_registered, r.error));
        self.notified.notify_one();
        Ok(Response::new(reg::RegistrationStatusResponse {}))
    }
}
