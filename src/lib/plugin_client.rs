//! A client for a device plugin's socket: every DevicePlugin RPC, with
//! deadlines and errors that name the socket and the call.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use tonic::transport::Channel;

use crate::error::{Error, Result};
use crate::model::Device;
use crate::proto::deviceplugin::v1beta1 as dp;
use crate::proto::deviceplugin::v1beta1::device_plugin_client::DevicePluginClient;
use crate::transport::codec::{Reserve, Sized};
use crate::transport::{self, ClientConfig, WireChannel};

/// One ListAndWatch message, with when it arrived and how big it was.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The devices, in the order the plugin sent them.
    pub devices: Vec<Device>,
    /// Encoded size of the message in bytes.
    pub encoded_len: usize,
    /// When it was received.
    pub received: std::time::SystemTime,
}

/// A connected device-plugin client.
#[derive(Debug, Clone)]
pub struct PluginClient {
    inner: DevicePluginClient<WireChannel>,
    channel: WireChannel,
    path: PathBuf,
    config: ClientConfig,
}

impl PluginClient {
    /// Connects to the plugin socket at `path`.
    pub async fn connect(path: &Path, config: &ClientConfig) -> Result<Self> {
        let channel = transport::connect(path, config.connect_timeout).await?;
        Ok(Self::from_channel(channel, path, config))
    }

    /// Wraps an existing channel (for callers that dial themselves); its
    /// calls go to the config's tap when it has one.
    pub fn from_channel(channel: Channel, path: &Path, config: &ClientConfig) -> Self {
        let channel = WireChannel::new(channel, config.tap.clone());
        let inner = DevicePluginClient::new(channel.clone()).max_decoding_message_size(config.max_recv_bytes);
        PluginClient { inner, channel, path: path.to_path_buf(), config: config.clone() }
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs one unary call under the call deadline and classifies its error.
    async fn unary<T, F>(&self, rpc: &str, call: F) -> Result<T>
    where
        F: Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    {
        let timeout = self.config.call_timeout;
        let full = format!("v1beta1.DevicePlugin/{rpc}");
        match tokio::time::timeout(timeout, call).await {
            Ok(Ok(resp)) => Ok(resp.into_inner()),
            Ok(Err(status)) if crate::rpc::is_deadline(&status) => {
                Err(Error::DeadlineExceeded { rpc: full, path: self.path.clone(), timeout })
            }
            Ok(Err(status)) => Err(Error::from_status(&full, &self.path, &status, self.config.max_recv_bytes)),
            Err(_) => Err(Error::DeadlineExceeded { rpc: full, path: self.path.clone(), timeout }),
        }
    }

    /// The request with the call deadline sent along as `grpc-timeout`.
    fn request<T>(&self, msg: T) -> tonic::Request<T> {
        let mut req = tonic::Request::new(msg);
        req.set_timeout(self.config.call_timeout);
        req
    }

    /// GetDevicePluginOptions.
    pub async fn options(&self) -> Result<dp::DevicePluginOptions> {
        let mut c = self.inner.clone();
        let req = self.request(dp::Empty {});
        self.unary("GetDevicePluginOptions", async move { c.get_device_plugin_options(req).await }).await
    }

    /// Allocate with one container request per group of device IDs.
    pub async fn allocate(&self, groups: &[Vec<String>]) -> Result<dp::AllocateResponse> {
        let mut c = self.inner.clone();
        let req = self.request(dp::AllocateRequest {
            container_requests: groups
                .iter()
                .map(|g| dp::ContainerAllocateRequest { devices_ids: g.clone() })
                .collect(),
        });
        self.unary("Allocate", async move { c.allocate(req).await }).await
    }

    /// GetPreferredAllocation with the given container requests.
    pub async fn preferred(
        &self,
        requests: Vec<dp::ContainerPreferredAllocationRequest>,
    ) -> Result<dp::PreferredAllocationResponse> {
        let mut c = self.inner.clone();
        let req = self.request(dp::PreferredAllocationRequest { container_requests: requests });
        self.unary("GetPreferredAllocation", async move { c.get_preferred_allocation(req).await }).await
    }

    /// PreStartContainer for the given devices.
    pub async fn pre_start(&self, devices_ids: Vec<String>) -> Result<dp::PreStartContainerResponse> {
        let mut c = self.inner.clone();
        let req = self.request(dp::PreStartContainerRequest { devices_ids });
        self.unary("PreStartContainer", async move { c.pre_start_container(req).await }).await
    }

    /// Opens ListAndWatch without a deadline, as the kubelet does (some
    /// servers send the response headers only with the first message). The
    /// stream yields each snapshot, and ends with `None` when the plugin
    /// closes the stream or with the classified error.
    pub async fn list_and_watch(&self) -> Result<impl Stream<Item = Result<Snapshot>> + Send + 'static + use<>> {
        let full = "v1beta1.DevicePlugin/ListAndWatch";
        let limit = self.config.max_recv_bytes;
        let stream = match open_list_and_watch(self.channel.clone(), limit).await {
            Ok(stream) => stream,
            Err(status) => return Err(Error::from_status(full, &self.path, &status, limit)),
        };
        let path = self.path.clone();
        Ok(stream.map(move |item| match item {
            Ok(msg) => Ok(Snapshot {
                devices: msg.message.devices.into_iter().map(Device::from).collect(),
                encoded_len: msg.encoded_len,
                received: std::time::SystemTime::now(),
            }),
            Err(status) => Err(Error::from_status(full, &path, &status, limit)),
        }))
    }

    /// The first ListAndWatch message, waiting at most `timeout` (opening
    /// the stream included: a server that never sends the response headers
    /// must not hold the caller up either).
    pub async fn list_once(&self, timeout: Duration) -> Result<Snapshot> {
        let deadline = crate::duration::deadline(timeout);
        let timed_out =
            || Error::Timeout { what: format!("first ListAndWatch message from {}", self.path.display()), timeout };
        let mut stream = match tokio::time::timeout_at(deadline, self.list_and_watch()).await {
            Ok(stream) => Box::pin(stream?),
            Err(_) => return Err(timed_out()),
        };
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(item)) => item,
            Ok(None) => Err(Error::Rpc {
                rpc: "v1beta1.DevicePlugin/ListAndWatch".into(),
                path: self.path.clone(),
                code: tonic::Code::Ok,
                message: "the plugin ended the stream without sending a device list".into(),
            }),
            Err(_) => Err(timed_out()),
        }
    }
}

/// The socket a command names: `socket` (`--socket`), or `endpoint`
/// (`--endpoint`) in `dir`; with neither, an error listing the sockets in `dir`.
pub fn socket_path(socket: Option<&Path>, dir: &Path, endpoint: Option<&str>) -> Result<PathBuf> {
    if let Some(s) = socket {
        return Ok(s.to_path_buf());
    }
    if let Some(e) = endpoint {
        return Ok(dir.join(e));
    }
    let found = crate::paths::sockets_in(dir);
    let listing = if found.is_empty() {
        format!("no sockets in {}", dir.display())
    } else {
        format!("sockets in {}: {}", dir.display(), found.join(", "))
    };
    Err(Error::invalid("plugin socket", format!("name it with --socket PATH or --endpoint NAME ({listing})")))
}

/// How long `dpctl plugin watch` lasts.
#[derive(Debug, Clone, Copy, Default)]
pub struct WatchLimits {
    /// Stop after this many messages.
    pub count: Option<u64>,
    /// Stop at this instant (opening the stream included).
    pub deadline: Option<tokio::time::Instant>,
}

/// Streams ListAndWatch from the plugin at `socket` until `limits` or `stop`:
/// each message goes to `on_message` with its sequence number (from 1).
/// The first message must arrive within the call timeout (connecting and
/// opening the stream included), as a kubelet expects a plugin's device list
/// at once: a plugin that accepts and never answers is a timeout error, not
/// an empty watch. A stream the plugin ends is an error saying what a
/// kubelet would do.
pub async fn watch(
    socket: &Path,
    config: &ClientConfig,
    limits: WatchLimits,
    stop: impl Future<Output = ()>,
    mut on_message: impl FnMut(u64, Snapshot) -> Result<()>,
) -> Result<()> {
    tokio::pin!(stop);
    let until = || async move {
        match limits.deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    let first_by = crate::duration::deadline(config.call_timeout);
    let no_first = || Error::Timeout {
        what: format!("first ListAndWatch message from {}", socket.display()),
        timeout: config.call_timeout,
    };
    let opened = async {
        let client = PluginClient::connect(socket, config).await?;
        let stream = client.list_and_watch().await?;
        Ok::<_, Error>((client, stream))
    };
    let (client, stream) = tokio::select! {
        r = opened => r?,
        () = tokio::time::sleep_until(first_by) => return Err(no_first()),
        () = until() => return Err(no_first()),
        () = &mut stop => return Ok(()),
    };
    let mut stream = Box::pin(stream);
    let mut seq = 0u64;
    loop {
        let item = tokio::select! {
            item = stream.next() => item,
            () = tokio::time::sleep_until(first_by), if seq == 0 => return Err(no_first()),
            () = until() => return if seq == 0 { Err(no_first()) } else { Ok(()) },
            () = &mut stop => return Ok(()),
        };
        match item {
            Some(Ok(snap)) => {
                seq += 1;
                on_message(seq, snap)?;
                if limits.count.is_some_and(|c| seq >= c) {
                    return Ok(());
                }
            }
            Some(Err(e)) => return Err(e),
            None => {
                return Err(Error::StreamEnded {
                    rpc: "v1beta1.DevicePlugin/ListAndWatch".into(),
                    path: client.path().to_path_buf(),
                    message: "the plugin ended the stream; a kubelet would mark all its devices unhealthy \
                              and not call ListAndWatch again until the plugin registers anew"
                        .into(),
                });
            }
        }
    }
}

/// Splits `a,b, c` into IDs, dropping empty parts.
pub fn split_ids(s: &str) -> Vec<String> {
    s.split(',').map(str::trim).filter(|x| !x.is_empty()).map(String::from).collect()
}

/// One call `dpctl plugin call` makes, checked before anything is dialled.
#[derive(Debug, Clone)]
pub enum Call {
    /// GetDevicePluginOptions.
    Options,
    /// The first ListAndWatch message, within the deadline.
    List(Duration),
    /// Allocate: one container request per group of device IDs.
    Allocate(Vec<Vec<String>>),
    /// GetPreferredAllocation for one container.
    Preferred(dp::ContainerPreferredAllocationRequest),
    /// PreStartContainer for these devices.
    Prestart(Vec<String>),
}

impl Call {
    /// Allocate from `--devices` groups (`a,b` each): an empty group is an error naming it.
    pub fn allocate(groups: &[String]) -> Result<Call> {
        let groups: Vec<Vec<String>> = groups.iter().map(|g| split_ids(g)).collect();
        if let Some(i) = groups.iter().position(Vec::is_empty) {
            return Err(Error::invalid(format!("--devices (container {i})"), "no device IDs given"));
        }
        Ok(Call::Allocate(groups))
    }

    /// GetPreferredAllocation of `size` devices out of `available`; a negative size is an error.
    pub fn preferred(available: Vec<String>, must_include: Vec<String>, size: i32) -> Result<Call> {
        if size < 0 {
            return Err(Error::invalid("--size", "must not be negative"));
        }
        Ok(Call::Preferred(dp::ContainerPreferredAllocationRequest {
            available_device_i_ds: available,
            must_include_device_i_ds: must_include,
            allocation_size: size,
        }))
    }
}

/// Opens ListAndWatch on `channel`, accepting messages of at most
/// `max_recv` bytes. Each message is decoded from the receive buffer in one
/// piece and comes with its size on the wire (a 100,000-device list decodes
/// faster than through tonic's default codec, and its size need not be
/// computed again).
pub async fn open_list_and_watch(
    channel: impl Into<WireChannel>,
    max_recv: usize,
) -> std::result::Result<tonic::Streaming<Sized<dp::ListAndWatchResponse>>, tonic::Status> {
    transport::codec::server_streaming(channel.into(), "v1beta1.DevicePlugin", "ListAndWatch", dp::Empty {}, max_recv)
        .await
}

/// A list of 100,000 devices gets its 100,000 slots at once.
impl Reserve for dp::ListAndWatchResponse {
    fn with_room_for(encoded: &[u8]) -> Self {
        // Field 1: `repeated Device devices`.
        dp::ListAndWatchResponse { devices: Vec::with_capacity(transport::codec::count_field(encoded, 1)) }
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    /// The one-slice decode with room reserved gives what prost's own
    /// decode gives, unknown fields skipped, and the same errors.
    #[test]
    fn list_decoded_from_a_slice_is_prosts_decode() {
        let devices: Vec<dp::Device> = (0..300)
            .map(|i| dp::Device {
                id: format!("d{i}"),
                health: if i % 7 == 0 { dp::UNHEALTHY } else { dp::HEALTHY }.into(),
                topology: (i % 2 == 0).then(|| dp::TopologyInfo { nodes: vec![dp::NumaNode { id: i % 3 }] }),
            })
            .collect();
        let mut bytes = dp::ListAndWatchResponse { devices }.encode_to_vec();
        // An unknown varint field 2 and an unknown string field 5, between devices.
        bytes.extend_from_slice(&[0x10, 0x96, 0x01, 0x2a, 0x02, b'h', b'i']);
        bytes.extend_from_slice(&dp::ListAndWatchResponse { devices: vec![dp::Device::default()] }.encode_to_vec());
        assert_eq!(transport::codec::count_field(&bytes, 1), 301);
        let ours: dp::ListAndWatchResponse = transport::codec::decode_slice(&bytes).unwrap();
        assert_eq!(ours, dp::ListAndWatchResponse::decode(&bytes[..]).unwrap());
        assert_eq!(ours.devices.len(), 301);
        assert!(ours.devices.capacity() >= 301);
        // Cut short: both refuse it.
        let cut = &bytes[..bytes.len() - 12];
        assert!(transport::codec::decode_slice::<dp::ListAndWatchResponse>(cut).is_err());
        assert!(dp::ListAndWatchResponse::decode(cut).is_err());
        // Field 1 as a varint is malformed for both; it reserves nothing.
        let wrong = [0x08, 0x01];
        assert_eq!(transport::codec::count_field(&wrong, 1), 0);
        assert!(transport::codec::decode_slice::<dp::ListAndWatchResponse>(&wrong).is_err());
        assert!(dp::ListAndWatchResponse::decode(&wrong[..]).is_err());
    }

    #[test]
    fn the_socket_comes_from_socket_or_endpoint_and_else_the_error_lists_the_directory() {
        let dir = Path::new("/nonexistent-dpctl-dir");
        assert_eq!(socket_path(Some(Path::new("/a.sock")), dir, Some("b.sock")).unwrap(), Path::new("/a.sock"));
        assert_eq!(socket_path(None, dir, Some("b.sock")).unwrap(), dir.join("b.sock"));
        let e = socket_path(None, dir, None).unwrap_err().to_string();
        assert!(e.starts_with("plugin socket: name it with --socket PATH or --endpoint NAME"), "{e}");
        assert!(e.contains("no sockets in /nonexistent-dpctl-dir"), "{e}");
    }

    #[test]
    fn calls_are_checked_before_dialling() {
        let e = Call::allocate(&["GPU-0".into(), " , ".into()]).unwrap_err().to_string();
        assert!(e.starts_with("--devices (container 1): no device IDs given"), "{e}");
        assert!(Call::preferred(vec![], vec![], -1).unwrap_err().to_string().starts_with("--size"));
        assert!(matches!(Call::allocate(&["a, b".into()]).unwrap(), Call::Allocate(g) if g == [vec!["a", "b"]]));
    }
}
