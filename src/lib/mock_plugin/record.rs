//! `--record FILE`: every RPC the mock answers, one JSON object per line,
//! flushed as it happens; and the JSON shapes of the requests and responses
//! (snake_case keys, zero values kept).

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::model::Device;
use crate::proto::deviceplugin::v1beta1 as dp;
use crate::proto::pluginregistration as reg;

/// Writes events to a JSON Lines file, one flushed line each.
#[derive(Debug)]
pub struct Recorder {
    path: PathBuf,
    file: Mutex<BufWriter<std::fs::File>>,
    failed: std::sync::atomic::AtomicBool,
}

impl Recorder {
    /// Creates the file, or replaces one only when it is empty or a record
    /// dpctl wrote (its first line is one of these events): `--record` must
    /// never empty a file dpctl did not write. A symbolic link is refused
    /// (live or dangling: following it would create or empty its target),
    /// and so is anything but a regular file.
    pub fn create(path: &Path) -> Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let bad = |why: String| Error::invalid("--record", format!("{}: {why}", path.display()));
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(path).map(|t| t.display().to_string()).unwrap_or_else(|_| "?".into());
                return Err(bad(format!(
                    "a symbolic link (to {target}); --record never follows links: give the file's own path"
                )));
            }
            if !meta.is_file() {
                return Err(bad("not a regular file".into()));
            }
        }
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                Error::invalid("--record", format!("cannot create directory {}: {e}", parent.display()))
            })?;
        }
        // O_NOFOLLOW closes the gap between the check above and the open;
        // O_NONBLOCK keeps a FIFO put there meanwhile from blocking the open.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => bad("a symbolic link; --record never follows links".into()),
                // A bad --record path is bad input (exit 2), whatever the OS says.
                _ => bad(format!("cannot write it: {e}")),
            })?;
        let meta = file.metadata().map_err(|e| bad(format!("cannot write it: {e}")))?;
        if !meta.is_file() {
            return Err(bad("not a regular file".into()));
        }
        if meta.len() > 0 && !is_record(&file) {
            return Err(bad(
                "exists and is not a record dpctl wrote, so it is not overwritten; remove it or choose another file"
                    .into(),
            ));
        }
        file.set_len(0).map_err(|e| bad(format!("cannot write it: {e}")))?;
        Ok(Recorder { path: path.to_path_buf(), file: Mutex::new(BufWriter::new(file)), failed: Default::default() })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one event as a line and flushes it (a [`super::events::MockEvent`], or
    /// another event with the same `time`, `resource` and `event` keys).
    pub fn write<T: serde::Serialize + ?Sized>(&self, event: &T) {
        let Ok(mut f) = self.file.lock() else { return };
        let result = serde_json::to_writer(&mut *f, event)
            .map_err(std::io::Error::from)
            .and_then(|()| f.write_all(b"\n"))
            .and_then(|()| f.flush());
        if let Err(e) = result
            && !self.failed.swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            tracing::warn!(file = %self.path.display(), error = %e, "cannot write the record file");
        }
    }

    /// Flushes what is buffered.
    pub fn flush(&self) {
        if let Ok(mut f) = self.file.lock() {
            let _ = f.flush();
        }
    }
}

/// True when the file's first line (at most 64 KiB) is an event a recorder
/// writes: a JSON object with `time`, `resource` and `event` strings.
fn is_record(file: &std::fs::File) -> bool {
    use std::io::{BufRead, Read};
    let mut first = Vec::new();
    let read = std::io::BufReader::new(file.take(64 * 1024)).read_until(b'\n', &mut first);
    if read.is_err() {
        return false;
    }
    serde_json::from_slice::<Value>(&first)
        .is_ok_and(|v| ["time", "resource", "event"].iter().all(|k| v.get(k).is_some_and(Value::is_string)))
}

/// `{}` for Empty requests.
pub fn empty() -> Value {
    json!({})
}

/// DevicePluginOptions.
pub fn options(o: &dp::DevicePluginOptions) -> Value {
    json!({
        "pre_start_required": o.pre_start_required,
        "get_preferred_allocation_available": o.get_preferred_allocation_available,
    })
}

/// A ListAndWatch message; padding added by the oversize fault is counted, not listed.
pub fn list_and_watch(devices: &[dp::Device], padding: usize, encoded_len: usize) -> Value {
    let devices: Vec<Device> = devices.iter().map(Device::from).collect();
    json!({ "devices": devices, "padding_devices": padding, "message_bytes": encoded_len })
}

/// AllocateRequest.
pub fn allocate_request(r: &dp::AllocateRequest) -> Value {
    json!({
        "container_requests": r.container_requests.iter().map(|c| json!({ "device_ids": c.devices_ids })).collect::<Vec<_>>()
    })
}

/// AllocateResponse.
pub fn allocate_response(r: &dp::AllocateResponse) -> Value {
    let containers: Vec<Value> = r
        .container_responses
        .iter()
        .map(|c| {
            json!({
                "envs": c.envs.iter().collect::<BTreeMap<_, _>>(),
                "mounts": c.mounts.iter().map(|m| json!({
                    "container_path": m.container_path, "host_path": m.host_path, "read_only": m.read_only
                })).collect::<Vec<_>>(),
                "devices": c.devices.iter().map(|d| json!({
                    "container_path": d.container_path, "host_path": d.host_path, "permissions": d.permissions
                })).collect::<Vec<_>>(),
                "annotations": c.annotations.iter().collect::<BTreeMap<_, _>>(),
                "cdi_devices": c.cdi_devices.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "container_responses": containers })
}

/// PreferredAllocationRequest.
pub fn preferred_request(r: &dp::PreferredAllocationRequest) -> Value {
    json!({
        "container_requests": r.container_requests.iter().map(|c| json!({
            "available_device_ids": c.available_device_i_ds,
            "must_include_device_ids": c.must_include_device_i_ds,
            "allocation_size": c.allocation_size,
        })).collect::<Vec<_>>()
    })
}

/// PreferredAllocationResponse.
pub fn preferred_response(r: &dp::PreferredAllocationResponse) -> Value {
    json!({
        "container_responses": r.container_responses.iter().map(|c| json!({ "device_ids": c.device_i_ds })).collect::<Vec<_>>()
    })
}

/// PreStartContainerRequest.
pub fn pre_start_request(r: &dp::PreStartContainerRequest) -> Value {
    json!({ "device_ids": r.devices_ids })
}

/// PluginInfo (plugin watcher).
pub fn plugin_info(i: &reg::PluginInfo) -> Value {
    json!({ "type": i.r#type, "name": i.name, "endpoint": i.endpoint, "supported_versions": i.supported_versions })
}

/// RegistrationStatus (plugin watcher).
pub fn registration_status(s: &reg::RegistrationStatus) -> Value {
    json!({ "plugin_registered": s.plugin_registered, "error": s.error })
}
