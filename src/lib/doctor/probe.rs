//! Doctor's probes: what the device-plugin directory, its sockets,
//! PodResources and plugins_registry are, each within a deadline. They only
//! look (connect, GetDevicePluginOptions, the first ListAndWatch message,
//! GetInfo, List); what the answers mean is `judge.rs`'s.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::kubelet_view;
use crate::checkpoint::report::CheckpointReport;
use crate::error::Error;
use crate::limits::KUBELET_MAX_RECV;
use crate::plugin_client::PluginClient;
use crate::podresources::client::{PodResourcesClient, PodResourcesConfig};
use crate::proto::pluginregistration as reg;
use crate::transport::{self, ClientConfig};

/// What the device-plugin directory turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DirSeen {
    /// A directory (not a file).
    pub(super) is_dir: bool,
    /// Its permission bits.
    pub(super) mode: u32,
    /// Its SELinux label, where there is one.
    pub(super) label: Option<String>,
    /// Its entries can be listed.
    pub(super) listable: bool,
}

/// The kubelet's checkpoint in the device-plugin directory: its path, and
/// what reading and parsing it gave (a missing file is an error the judge
/// tells apart).
/// How long ago `path` was last modified (for a socket: created), or `None`
/// when it cannot be read or its time is in the future.
pub(super) fn age(path: &Path) -> Option<Duration> {
    let modified = std::fs::symlink_metadata(path).ok()?.modified().ok()?;
    std::time::SystemTime::now().duration_since(modified).ok()
}

pub(super) fn read_checkpoint(dir: &Path) -> (PathBuf, crate::Result<CheckpointReport>) {
    let path = dir.join(crate::paths::CHECKPOINT_FILE_NAME);
    let read = CheckpointReport::read(&path);
    (path, read)
}

/// A directory entry that is neither a socket nor a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Entry {
    /// A symbolic link, and what it points at.
    Symlink(Target),
    /// A FIFO.
    Fifo,
    /// A block or character device node.
    Device,
    /// A regular file.
    File,
}

/// What a symbolic link points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    /// A socket.
    Socket,
    /// A directory.
    Directory,
    /// Anything else that exists.
    File,
    /// Nothing.
    Dangling,
}

/// What a device-plugin socket turned out to be.
pub(super) enum Probe {
    Live {
        options: crate::proto::deviceplugin::v1beta1::DevicePluginOptions,
        first: crate::Result<crate::plugin_client::Snapshot>,
    },
    Stale,
    NotAPlugin(String),
    Slow(String),
    Failed(Error),
}

pub(super) async fn probe_plugin(path: PathBuf, timeout: Duration) -> (PathBuf, Probe) {
    let config =
        ClientConfig { connect_timeout: timeout, call_timeout: timeout, max_recv_bytes: KUBELET_MAX_RECV, tap: None };
    let client = match PluginClient::connect(&path, &config).await {
        Ok(c) => c,
        Err(Error::ConnectionRefused { .. }) => return (path, Probe::Stale),
        Err(Error::ConnectTimeout { .. }) => {
            return (
                path,
                Probe::Slow(format!("connect did not finish within {}", crate::text::fmt_duration(timeout))),
            );
        }
        Err(e) => return (path, Probe::Failed(e)),
    };
    let options = match client.options().await {
        Ok(o) => o,
        Err(Error::Unimplemented { message, .. }) => return (path, Probe::NotAPlugin(message)),
        Err(Error::DeadlineExceeded { .. }) => {
            return (
                path,
                Probe::Slow(format!(
                    "GetDevicePluginOptions did not answer within {}",
                    crate::text::fmt_duration(timeout)
                )),
            );
        }
        Err(e) => return (path, Probe::Failed(e)),
    };
    let first = match tokio::time::timeout(timeout, client.list_once(timeout)).await {
        Ok(r) => r,
        Err(_) => Err(Error::Timeout { what: "the first ListAndWatch message".into(), timeout }),
    };
    (path, Probe::Live { options, first })
}

/// What the device-plugin directory is: `Err` when it cannot be read.
pub(super) fn probe_dir(dir: &Path) -> Result<DirSeen, String> {
    let meta = std::fs::metadata(dir).map_err(|e| e.to_string())?;
    Ok(DirSeen {
        is_dir: meta.is_dir(),
        mode: meta.permissions().mode() & 0o7777,
        label: if meta.is_dir() { selinux_label(dir) } else { None },
        listable: meta.is_dir() && std::fs::read_dir(dir).is_ok(),
    })
}

/// The `security.selinux` extended attribute, when readable.
fn selinux_label(path: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let name = c"security.selinux";
    let mut buf = [0u8; 256];
    // SAFETY: both strings are NUL-terminated and the buffer length is passed.
    let n = unsafe { libc::getxattr(c.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    let n = usize::try_from(n).ok()?;
    let label = buf.get(..n)?;
    Some(String::from_utf8_lossy(label).trim_end_matches('\0').to_string())
}

/// The entries of the device-plugin directory other than `kubelet.sock`
/// and the checkpoint, sorted: the sockets (to probe), and every entry that
/// is neither a socket nor a directory, with its name and what it is.
pub(super) fn list_dir(dir: &Path) -> (Vec<PathBuf>, Vec<(PathBuf, String, Entry)>) {
    let (mut sockets, mut strays) = (Vec::new(), Vec::new());
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(std::result::Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    entries.sort();
    for path in entries {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name == crate::paths::KUBELET_SOCKET_NAME || name == crate::paths::CHECKPOINT_FILE_NAME {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        let ft = meta.file_type();
        if ft.is_socket() {
            sockets.push(path);
        } else if ft.is_dir() {
            continue;
        } else {
            let kind = entry(&path, ft);
            strays.push((path, name, kind));
        }
    }
    (sockets, strays)
}

/// What a directory entry other than a socket or a directory is (a
/// symlink is followed once, to say what it points at).
fn entry(path: &Path, ft: std::fs::FileType) -> Entry {
    if ft.is_symlink() {
        return Entry::Symlink(match std::fs::metadata(path) {
            Ok(m) if m.file_type().is_socket() => Target::Socket,
            Ok(m) if m.is_dir() => Target::Directory,
            Ok(_) => Target::File,
            Err(_) => Target::Dangling,
        });
    }
    if ft.is_fifo() {
        Entry::Fifo
    } else if ft.is_block_device() || ft.is_char_device() {
        Entry::Device
    } else {
        Entry::File
    }
}

/// What the PodResources probe learnt.
pub(super) struct PodResourcesProbe {
    /// The API version List answered over.
    pub(super) api: String,
    /// Whether Get is served.
    pub(super) get: String,
    /// The pods.
    pub(super) pods: Vec<crate::proto::podresources::v1::PodResources>,
    /// GetAllocatableResources: (resource, device ID) pairs, or why not.
    pub(super) allocatable: kubelet_view::Allocatable,
}

pub(super) async fn probe_podresources(path: PathBuf, timeout: Duration) -> crate::Result<PodResourcesProbe> {
    let config = PodResourcesConfig {
        transport: ClientConfig {
            connect_timeout: timeout,
            call_timeout: timeout,
            max_recv_bytes: PodResourcesConfig::default().transport.max_recv_bytes,
            tap: None,
        },
        rate_limit_retries: 0,
        ..PodResourcesConfig::default()
    };
    let client = PodResourcesClient::connect(&path, &config).await?;
    let listing = client.list().await?;
    let api = format!("{:?}", listing.api).to_lowercase();
    // A read-only Get of a pod that does not exist tells whether Get is served.
    let get = match client.get("dpctl-doctor-probe", "dpctl-doctor-probe").await {
        Ok(_) => "enabled".to_string(),
        Err(e) if e.to_string().contains("disabled") => {
            "disabled (feature gate KubeletPodResourcesGet off; beta from 1.34, GA in 1.36)".to_string()
        }
        Err(Error::Unimplemented { .. }) => "not served (kubelet older than 1.27, or v1alpha1 only)".to_string(),
        Err(Error::Invalid { .. }) => "not available over v1alpha1".to_string(),
        Err(_) => "enabled".to_string(),
    };
    let allocatable = match client.allocatable().await {
        Ok(a) => Ok(a
            .devices
            .iter()
            .flat_map(|d| d.device_ids.iter().map(move |id| (d.resource_name.clone(), id.clone())))
            .collect()),
        Err(e) => Err(e.to_string()),
    };
    Ok(PodResourcesProbe { api, get, pods: listing.pods, allocatable })
}

/// What plugins_registry holds: `None` when the directory cannot be read,
/// else every registration socket (sorted, hidden ones left out) and what
/// its GetInfo answered.
pub(super) type Registry = Option<Vec<(PathBuf, crate::Result<reg::PluginInfo>)>>;

/// `plugins_registry`: every socket's GetInfo (read-only).
pub(super) async fn probe_registry(dir: PathBuf, timeout: Duration) -> Registry {
    let rd = std::fs::read_dir(&dir).ok()?;
    let mut socks: Vec<PathBuf> = rd
        .filter_map(std::result::Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    socks.sort();
    let infos = futures_util::future::join_all(socks.iter().map(|p| async move {
        let channel = transport::connect(p, timeout).await?;
        let mut c = reg::registration_client::RegistrationClient::new(channel);
        match tokio::time::timeout(timeout, c.get_info(reg::InfoRequest {})).await {
            Ok(Ok(r)) => {
                let info = r.into_inner();
                // A name of megabytes or a hundred thousand services is refused, not judged.
                crate::dra::client::bounded_info(&info).map_err(|message| Error::Rpc {
                    rpc: "pluginregistration.Registration/GetInfo".into(),
                    path: p.clone(),
                    code: tonic::Code::OutOfRange,
                    message: format!("answer refused by dpctl: {message}"),
                })?;
                Ok(info)
            }
            Ok(Err(s)) => Err(Error::from_status("pluginregistration.Registration/GetInfo", p, &s, KUBELET_MAX_RECV)),
            Err(_) => Err(Error::DeadlineExceeded {
                rpc: "pluginregistration.Registration/GetInfo".into(),
                path: p.clone(),
                timeout,
            }),
        }
    }))
    .await;
    Some(socks.into_iter().zip(infos).collect())
}
