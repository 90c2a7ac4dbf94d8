//! A device plugin for the kubelet-sim tests, built on the generated code:
//! it records every request, can fail any RPC on demand, serves the
//! plugin-watcher Registration service on the same socket, and registers on
//! kubelet.sock with the generated Registration client.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use dpctl::proto::deviceplugin::v1beta1 as dp;
use dpctl::proto::deviceplugin::v1beta1::device_plugin_server::{DevicePlugin, DevicePluginServer};
use dpctl::proto::pluginregistration as reg;
use futures_util::Stream;
use tokio::sync::watch;
use tonic::{Request, Response, Status};

pub use super::plugin::device;

/// How the plugin behaves.
#[derive(Clone, Default)]
pub struct Script {
    pub options: dp::DevicePluginOptions,
    /// GetDevicePluginOptions fails with this message (status Unknown).
    pub options_error: Option<String>,
    /// ListAndWatch fails at once with this message.
    pub list_error: Option<String>,
    /// ListAndWatch ends (status OK) after this many messages.
    pub end_after: Option<usize>,
    /// GetPreferredAllocation answer; `None` echoes must-include then available up to the size.
    pub preferred: Option<Vec<String>>,
    /// Allocate fails with this message (status Unknown).
    pub allocate_error: Option<String>,
    /// Allocate answers with no container responses.
    pub allocate_empty: bool,
    /// PreStartContainer fails with this message.
    pub pre_start_error: Option<String>,
    /// GetInfo answers (plugins_registry): type, name, endpoint, versions.
    pub info: Option<(String, String, String, Vec<String>)>,
    /// ListAndWatch sends nothing until the devices are first changed.
    pub hold_first: bool,
}

/// Everything the plugin was asked.
#[derive(Default, Debug)]
pub struct Calls {
    pub rpcs: Vec<String>,
    pub preferred: Vec<dp::ContainerPreferredAllocationRequest>,
    pub allocate: Vec<Vec<String>>,
    pub pre_start: Vec<Vec<String>>,
    pub notify: Vec<(bool, String)>,
}

#[derive(Clone)]
pub struct SimPlugin {
    devices: Arc<watch::Sender<Vec<dp::Device>>>,
    script: Arc<Mutex<Script>>,
    pub calls: Arc<Mutex<Calls>>,
    /// Fired on every NotifyRegistrationStatus.
    pub notified: Arc<tokio::sync::Notify>,
    /// Set to end every open ListAndWatch stream (status OK), as the stub's Stop does.
    ended: Arc<watch::Sender<bool>>,
}

impl SimPlugin {
    pub fn new(devices: Vec<dp::Device>, script: Script) -> Self {
        let (tx, _rx) = watch::channel(devices);
        SimPlugin {
            devices: Arc::new(tx),
            script: Arc::new(Mutex::new(script)),
            calls: Arc::default(),
            notified: Arc::default(),
            ended: Arc::new(watch::channel(false).0),
        }
    }

    /// `n` healthy devices `dev-0..`, on NUMA node `i % 2` (or no topology).
    pub fn healthy(n: usize, numa: bool) -> Vec<dp::Device> {
        (0..n)
            .map(|i| {
                let node = [(i % 2) as i64];
                device(&format!("dev-{i}"), "Healthy", numa.then_some(&node[..]))
            })
            .collect()
    }

    /// Ends every open ListAndWatch stream with status OK.
    pub fn end_streams(&self) {
        self.ended.send_replace(true);
    }

    pub fn set_devices(&self, devices: Vec<dp::Device>) {
        self.devices.send_replace(devices);
    }

    pub fn script(&self, f: impl FnOnce(&mut Script)) {
        f(&mut self.script.lock().unwrap());
    }

    pub fn rpcs(&self) -> Vec<String> {
        self.calls.lock().unwrap().rpcs.clone()
    }

    fn record(&self, rpc: &str) {
        self.calls.lock().unwrap().rpcs.push(rpc.to_string());
    }

    fn s(&self) -> Script {
        self.script.lock().unwrap().clone()
    }

    /// Serves on `path` until the returned sender is dropped or fired.
    pub async fn serve(&self, path: &Path) -> tokio::sync::oneshot::Sender<()> {
        let listener = dpctl::transport::bind(path, &Default::default()).await.expect("bind sim plugin");
        let router = tonic::transport::Server::builder()
            .add_service(DevicePluginServer::new(self.clone()))
            .add_service(reg::registration_server::RegistrationServer::new(self.clone()));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(dpctl::transport::serve(router, listener, async {
            let _ = rx.await;
        }));
        tx
    }
}

/// Registers on `kubelet_sock` with the generated client, as a plugin does.
pub async fn register(
    kubelet_sock: &Path,
    version: &str,
    resource: &str,
    endpoint: &str,
    options: Option<dp::DevicePluginOptions>,
) -> Result<(), Status> {
    let channel =
        dpctl::transport::connect(kubelet_sock, std::time::Duration::from_secs(5)).await.expect("connect kubelet.sock");
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

/// Serves `plugin` as `<dir>/<name>` and registers it for `resource`.
pub async fn start(
    plugin: &SimPlugin,
    dir: &Path,
    name: &str,
    resource: &str,
) -> (PathBuf, tokio::sync::oneshot::Sender<()>) {
    let path = dir.join(name);
    let stop = plugin.serve(&path).await;
    register(&dir.join("kubelet.sock"), "v1beta1", resource, name, None).await.expect("register");
    (path, stop)
}

type Snapshots = Pin<Box<dyn Stream<Item = Result<dp::ListAndWatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl DevicePlugin for SimPlugin {
    async fn get_device_plugin_options(
        &self,
        _: Request<dp::Empty>,
    ) -> Result<Response<dp::DevicePluginOptions>, Status> {
        self.record("GetDevicePluginOptions");
        let s = self.s();
        match s.options_error {
            Some(m) => Err(Status::unknown(m)),
            None => Ok(Response::new(s.options)),
        }
    }

    type ListAndWatchStream = Snapshots;

    async fn list_and_watch(&self, _: Request<dp::Empty>) -> Result<Response<Self::ListAndWatchStream>, Status> {
        self.record("ListAndWatch");
        let s = self.s();
        if let Some(m) = s.list_error {
            return Err(Status::unknown(m));
        }
        let mut rx = self.devices.subscribe();
        let mut ended = self.ended.subscribe();
        let (tx, out) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            let mut sent = 0;
            if s.hold_first {
                rx.borrow_and_update();
                tokio::select! {
                    r = rx.changed() => if r.is_err() { return },
                    () = tx.closed() => return,
                }
            }
            loop {
                let devices = rx.borrow_and_update().clone();
                if tx.send(Ok(dp::ListAndWatchResponse { devices })).await.is_err() {
                    return;
                }
                sent += 1;
                if s.end_after.is_some_and(|n| sent >= n) {
                    return;
                }
                tokio::select! {
                    r = rx.changed() => if r.is_err() { return },
                    () = tx.closed() => return,
                    _ = ended.wait_for(|e| *e) => return,
                }
            }
        });
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(out))))
    }

    async fn get_preferred_allocation(
        &self,
        req: Request<dp::PreferredAllocationRequest>,
    ) -> Result<Response<dp::PreferredAllocationResponse>, Status> {
        self.record("GetPreferredAllocation");
        let r = req.into_inner();
        self.calls.lock().unwrap().preferred.extend(r.container_requests.iter().cloned());
        let s = self.s();
        let container_responses = r
            .container_requests
            .iter()
            .map(|c| dp::ContainerPreferredAllocationResponse {
                device_i_ds: s.preferred.clone().unwrap_or_else(|| {
                    let mut out = c.must_include_device_i_ds.clone();
                    for id in &c.available_device_i_ds {
                        if out.len() < c.allocation_size as usize && !out.contains(id) {
                            out.push(id.clone());
                        }
                    }
                    out
                }),
            })
            .collect();
        Ok(Response::new(dp::PreferredAllocationResponse { container_responses }))
    }

    async fn allocate(&self, req: Request<dp::AllocateRequest>) -> Result<Response<dp::AllocateResponse>, Status> {
        self.record("Allocate");
        let r = req.into_inner();
        self.calls.lock().unwrap().allocate.extend(r.container_requests.iter().map(|c| c.devices_ids.clone()));
        let s = self.s();
        if let Some(m) = s.allocate_error {
            return Err(Status::unknown(m));
        }
        if s.allocate_empty {
            return Ok(Response::new(dp::AllocateResponse::default()));
        }
        let container_responses = r
            .container_requests
            .iter()
            .map(|c| dp::ContainerAllocateResponse {
                envs: [("VISIBLE_DEVICES".to_string(), c.devices_ids.join(","))].into(),
                mounts: c
                    .devices_ids
                    .iter()
                    .map(|id| dp::Mount {
                        container_path: format!("/tmp/{id}"),
                        host_path: format!("/tmp/{id}"),
                        read_only: false,
                    })
                    .collect(),
                ..Default::default()
            })
            .collect();
        Ok(Response::new(dp::AllocateResponse { container_responses }))
    }

    async fn pre_start_container(
        &self,
        req: Request<dp::PreStartContainerRequest>,
    ) -> Result<Response<dp::PreStartContainerResponse>, Status> {
        self.record("PreStartContainer");
        self.calls.lock().unwrap().pre_start.push(req.into_inner().devices_ids);
        match self.s().pre_start_error {
            Some(m) => Err(Status::unknown(m)),
            None => Ok(Response::new(dp::PreStartContainerResponse {})),
        }
    }
}

#[tonic::async_trait]
impl reg::registration_server::Registration for SimPlugin {
    async fn get_info(&self, _: Request<reg::InfoRequest>) -> Result<Response<reg::PluginInfo>, Status> {
        self.record("GetInfo");
        let (r#type, name, endpoint, supported_versions) =
            self.s().info.ok_or_else(|| Status::unimplemented("no plugin info"))?;
        Ok(Response::new(reg::PluginInfo { r#type, name, endpoint, supported_versions }))
    }

    async fn notify_registration_status(
        &self,
        req: Request<reg::RegistrationStatus>,
    ) -> Result<Response<reg::RegistrationStatusResponse>, Status> {
        let r = req.into_inner();
        self.calls.lock().unwrap().notify.push((r.plugin_registered, r.error));
        self.notified.notify_one();
        Ok(Response::new(reg::RegistrationStatusResponse {}))
    }
}
