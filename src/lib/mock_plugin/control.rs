//! The control socket of a running mock (`<dir>/.dpctl/<resource>.sock`): set
//! health, add and remove devices, and read the status from another process,
//! one JSON request and reply per line.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::config::DeviceConfig;
use super::options::canonical_health;
use super::state::{Resource, ResourceStatus};
use crate::error::{Error, Result};
use crate::model::Change;

/// A request to a running mock.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ControlRequest {
    /// Set the health of devices.
    SetHealth {
        /// The devices.
        ids: Vec<String>,
        /// The health string to send.
        health: String,
        /// Reply without the status (no device list): for callers that flip
        /// health often on large lists, such as `dpctl bench list --churn`,
        /// where serialising 100,000 devices per flip would cost more than
        /// the change being timed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        brief: bool,
    },
    /// Add devices.
    AddDevices {
        /// The devices.
        devices: Vec<DeviceConfig>,
    },
    /// Remove devices.
    RemoveDevices {
        /// The devices.
        ids: Vec<String>,
    },
    /// Report the status.
    Status,
}

/// The answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ControlReply {
    /// Whether the request was carried out.
    pub ok: bool,
    /// Why not.
    pub error: Option<String>,
    /// What changed (empty for `status` and for no-op changes).
    pub changes: Vec<Change>,
    /// The status after the request.
    pub status: Option<ResourceStatus>,
}

impl ControlRequest {
    /// Set `ids` to `health` (`healthy`/`unhealthy` in any case are spelled
    /// as the API spells them; anything else is sent as is).
    pub fn set_health(ids: Vec<String>, health: &str) -> Self {
        ControlRequest::SetHealth { ids, health: canonical_health(health), brief: false }
    }

    /// Add `ids`, all with `health` and on the NUMA nodes `numa` (none: no topology).
    pub fn add_devices(ids: Vec<String>, health: &str, numa: Vec<i64>) -> Self {
        let health = canonical_health(health);
        let numa = (!numa.is_empty()).then_some(numa);
        ControlRequest::AddDevices {
            devices: ids
                .into_iter()
                .map(|id| DeviceConfig { id, health: health.clone(), numa: numa.clone() })
                .collect(),
        }
    }
}

/// Carries out one request on `res`.
pub fn handle(res: &Resource, req: std::result::Result<ControlRequest, String>) -> ControlReply {
    let outcome = match req {
        Err(e) => Err(format!("bad request: {e}")),
        Ok(ControlRequest::SetHealth { ids, health, brief }) => {
            return match res.set_health(&ids, &health, "control") {
                Ok(changes) => {
                    let status = (!brief).then(|| res.status());
                    ControlReply { ok: true, error: None, changes, status }
                }
                Err(e) => ControlReply { ok: false, error: Some(e), changes: Vec::new(), status: None },
            };
        }
        Ok(ControlRequest::AddDevices { devices }) => res.add(&devices, "control"),
        Ok(ControlRequest::RemoveDevices { ids }) => res.remove(&ids, "control"),
        Ok(ControlRequest::Status) => Ok(Vec::new()),
    };
    match outcome {
        Ok(changes) => ControlReply { ok: true, error: None, changes, status: Some(res.status()) },
        Err(e) => ControlReply { ok: false, error: Some(e), changes: Vec::new(), status: None },
    }
}

/// A handler for `transport::control::serve`.
pub fn handler(
    res: Arc<Resource>,
) -> impl Fn(std::result::Result<ControlRequest, String>) -> std::future::Ready<ControlReply> + Clone + Send + Sync + 'static
{
    move |req| std::future::ready(handle(&res, req))
}

/// The resources of the mocks that answer on a control socket in `dir`
/// (kubelet-sim's own control socket there is not a mock's), sorted.
pub async fn running(dir: &Path, timeout: Duration) -> Vec<String> {
    let ctl = dir.join(crate::paths::CONTROL_DIR_NAME);
    let mut socks: Vec<std::path::PathBuf> = std::fs::read_dir(&ctl)
        .map(|rd| rd.filter_map(std::result::Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    socks.retain(|p| p.extension().is_some_and(|x| x == "sock"));
    socks.sort();
    let answers = futures_util::future::join_all(socks.iter().map(|p| async move {
        crate::transport::control::call::<_, ControlReply>(p, &ControlRequest::Status, timeout).await
    }))
    .await;
    let mut out: Vec<String> = answers.into_iter().filter_map(|r| r.ok()?.status.map(|s| s.resource)).collect();
    out.sort();
    out.dedup();
    out
}

/// Sends `req` to the mock serving `resource` in `dir`. A refused request
/// (unknown device, ...) is an [`Error::Invalid`] naming the resource. No
/// mock there is a socket problem (exit 3), the rule of every command that
/// reaches a server; a `--dir` that is not a directory is bad input (exit 2).
pub async fn call(dir: &Path, resource: &str, req: &ControlRequest, timeout: Duration) -> Result<ControlReply> {
    let path = crate::paths::control_socket(dir, resource);
    let reply: ControlReply = crate::transport::control::call(&path, req, timeout).await.map_err(|e| match e {
        Error::NoSocket { path } | Error::ConnectionRefused { path } => {
            let text = format!(
                "no mock plugin serves {resource} in {} (no control socket at {})",
                dir.display(),
                path.display()
            );
            if std::fs::metadata(dir).is_ok_and(|m| !m.is_dir()) {
                Error::invalid(resource, format!("--dir is not a directory: {text}"))
            } else {
                Error::Connect { path, reason: text }
            }
        }
        other => other,
    })?;
    if !reply.ok {
        return Err(Error::invalid(resource, reply.error.unwrap_or_else(|| "request refused".into())));
    }
    Ok(reply)
}
