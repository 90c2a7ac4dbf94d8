//! Shared pieces of the kubelet-sim benchmarks: a device plugin built on the
//! generated code (served in the bench process), the generated registering
//! client, and a `dpctl kubelet-sim` child process whose JSON events and
//! resident memory the benchmarks read.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use dpctl::proto::deviceplugin::v1beta1 as dp;
use dpctl::proto::deviceplugin::v1beta1::device_plugin_server::{DevicePlugin, DevicePluginServer};
use futures_util::Stream;
use tokio::io::AsyncBufReadExt;
use tokio::sync::watch;
use tonic::{Request, Response, Status};

/// A plugin that serves a device list and answers every RPC.
#[derive(Clone)]
pub struct BenchPlugin {
    devices: Arc<watch::Sender<Vec<dp::Device>>>,
    options: dp::DevicePluginOptions,
}

/// `n` healthy devices `<prefix>-0..`, alternating NUMA nodes 0 and 1.
pub fn devices(prefix: &str, n: usize) -> Vec<dp::Device> {
    (0..n)
        .map(|i| dp::Device {
            id: format!("{prefix}-{i}"),
            health: dp::HEALTHY.into(),
            topology: Some(dp::TopologyInfo { nodes: vec![dp::NumaNode { id: (i % 2) as i64 }] }),
        })
        .collect()
}

impl BenchPlugin {
    pub fn new(devices: Vec<dp::Device>, options: dp::DevicePluginOptions) -> Self {
        BenchPlugin { devices: Arc::new(watch::channel(devices).0), options }
    }

    pub fn set_devices(&self, devices: Vec<dp::Device>) {
        self.devices.send_replace(devices);
    }

    /// Serves on `path` until the returned sender is dropped.
    pub async fn serve(&self, path: &Path) -> tokio::sync::oneshot::Sender<()> {
        let listener = dpctl::transport::bind(path, &Default::default()).await.expect("bind bench plugin");
        let router = tonic::transport::Server::builder().add_service(DevicePluginServer::new(self.clone()));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(dpctl::transport::serve(router, listener, async {
            let _ = rx.await;
        }));
        tx
    }
}

type Snapshots = Pin<Box<dyn Stream<Item = Result<dp::ListAndWatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl DevicePlugin for BenchPlugin {
    async fn get_device_plugin_options(
        &self,
        _: Request<dp::Empty>,
    ) -> Result<Response<dp::DevicePluginOptions>, Status> {
        Ok(Response::new(self.options))
    }

    type ListAndWatchStream = Snapshots;

    async fn list_and_watch(&self, _: Request<dp::Empty>) -> Result<Response<Self::ListAndWatchStream>, Status> {
        let mut rx = self.devices.subscribe();
        let (tx, out) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            loop {
                let devices = rx.borrow_and_update().clone();
                if tx.send(Ok(dp::ListAndWatchResponse { devices })).await.is_err() {
                    return;
                }
                tokio::select! {
                    r = rx.changed() => if r.is_err() { return },
                    () = tx.closed() => return,
                }
            }
        });
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(out))))
    }

    async fn get_preferred_allocation(
        &self,
        req: Request<dp::PreferredAllocationRequest>,
    ) -> Result<Response<dp::PreferredAllocationResponse>, Status> {
        let container_responses = req
            .into_inner()
            .container_requests
            .iter()
            .map(|c| {
                let mut ids = c.must_include_device_i_ds.clone();
                for id in &c.available_device_i_ds {
                    if ids.len() >= c.allocation_size as usize {
                        break;
                    }
                    if !ids.contains(id) {
                        ids.push(id.clone());
                    }
                }
                dp::ContainerPreferredAllocationResponse { device_i_ds: ids }
            })
            .collect();
        Ok(Response::new(dp::PreferredAllocationResponse { container_responses }))
    }

    async fn allocate(&self, req: Request<dp::AllocateRequest>) -> Result<Response<dp::AllocateResponse>, Status> {
        let container_responses = req
            .into_inner()
            .container_requests
            .iter()
            .map(|c| dp::ContainerAllocateResponse {
                envs: [("VISIBLE_DEVICES".to_string(), c.devices_ids.join(","))].into(),
                ..Default::default()
            })
            .collect();
        Ok(Response::new(dp::AllocateResponse { container_responses }))
    }

    async fn pre_start_container(
        &self,
        _: Request<dp::PreStartContainerRequest>,
    ) -> Result<Response<dp::PreStartContainerResponse>, Status> {
        Ok(Response::new(dp::PreStartContainerResponse {}))
    }
}

/// Registers `resource` served at `<dir>/<endpoint>` with the kubelet.sock in `dir`.
pub async fn register(dir: &Path, resource: &str, endpoint: &str) {
    let channel = dpctl::transport::connect(&dir.join("kubelet.sock"), Duration::from_secs(10))
        .await
        .expect("connect kubelet.sock");
    let mut c = dp::registration_client::RegistrationClient::new(channel);
    c.register(dp::RegisterRequest {
        version: dp::VERSION.into(),
        endpoint: endpoint.into(),
        resource_name: resource.into(),
        options: None,
    })
    .await
    .unwrap_or_else(|e| panic!("register {resource}: {e}"));
}

/// A `dpctl kubelet-sim -o json` child process.
pub struct SimChild {
    pub child: tokio::process::Child,
    pub lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    pub dir: PathBuf,
}

impl SimChild {
    /// Starts the sim in `dir` and waits for its `started` event.
    pub async fn start(dir: &Path, extra: &[&str]) -> SimChild {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_dpctl"));
        cmd.args(["kubelet-sim", "--dir", dir.to_str().unwrap(), "-o", "json"])
            .args(extra)
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn dpctl kubelet-sim");
        let stdout = child.stdout.take().unwrap();
        let mut sim = SimChild { child, lines: tokio::io::BufReader::new(stdout).lines(), dir: dir.to_path_buf() };
        sim.event("started", Duration::from_secs(10)).await;
        sim
    }

    /// The next event named `name`, as JSON.
    pub async fn event(&mut self, name: &str, timeout: Duration) -> serde_json::Value {
        let fut = async {
            loop {
                let line = self.lines.next_line().await.expect("read").expect("the sim exited");
                let v: serde_json::Value = serde_json::from_str(&line).expect("JSON line");
                if v["event"] == name {
                    return v;
                }
            }
        };
        tokio::time::timeout(timeout, fut).await.unwrap_or_else(|_| panic!("no {name} event within {timeout:?}"))
    }

    /// Resident and peak resident memory of the sim process, in KiB.
    pub fn rss_kib(&self) -> (u64, u64) {
        let pid = self.child.id().expect("running");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc status");
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    /// Asks the sim to stop (SIGTERM) and waits.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status();
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

/// A fresh short directory under /tmp (socket paths must stay short).
pub fn tempdir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(prefix).tempdir_in("/tmp").expect("temp dir")
}

/// The `p`-th percentile of sorted values.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p / 100.0).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Prints a result line and returns whether it met the target.
pub fn verdict(what: &str, ok: bool) -> bool {
    println!("{} {what}", if ok { "PASS" } else { "FAIL" });
    ok
}
