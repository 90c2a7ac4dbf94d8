//! `bench list --churn`: how long a health change takes to reach a
//! ListAndWatch client. One stream stays open; one device at a time is
//! flipped Unhealthy and back, and each change is timed from just before it
//! was asked for until the client has decoded the message that carries it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::future::BoxFuture;

use super::{BenchConfig, Limit, Prepared, Progress, Tally};
use crate::error::{Error, Result};
use crate::mock_plugin::control::{ControlReply, ControlRequest};
use crate::proto::deviceplugin::v1beta1 as dp;
use crate::transport::codec::Sized;

/// Something that can change a device's health in the plugin under test.
pub trait HealthFlipper: Send + Sync {
    /// Sets the health of `ids` in the plugin.
    fn set_health<'a>(&'a self, ids: Vec<String>, health: &'static str) -> BoxFuture<'a, Result<()>>;
}

/// Flips health through the control socket of a running `dpctl mock-plugin`.
#[derive(Debug, Clone)]
pub struct ControlFlipper {
    path: PathBuf,
    timeout: Duration,
}

impl ControlFlipper {
    /// Finds the control socket of the mock serving `socket`: the one in
    /// `<dir>/.dpctl/` whose status names that socket.
    pub async fn find(socket: &Path, timeout: Duration) -> Result<Self> {
        let dir = socket.parent().unwrap_or(Path::new("."));
        let ctl = dir.join(crate::paths::CONTROL_DIR_NAME);
        let want = std::path::absolute(socket).unwrap_or_else(|_| socket.to_path_buf());
        let mut candidates: Vec<PathBuf> = std::fs::read_dir(&ctl)
            .map(|rd| rd.filter_map(std::result::Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        candidates.sort();
        for path in candidates {
            let reply: Result<ControlReply> =
                crate::transport::control::call(&path, &ControlRequest::Status, timeout).await;
            if let Ok(ControlReply { status: Some(s), .. }) = reply {
                let serves = std::path::absolute(&s.socket).unwrap_or(s.socket);
                if serves == want {
                    return Ok(ControlFlipper { path, timeout });
                }
            }
        }
        Err(Error::invalid(
            "--churn",
            format!(
                "no dpctl mock-plugin control socket in {} serves {} (hint: --churn changes health through \
                 the control socket of a running `dpctl mock-plugin`; other plugins cannot be asked to)",
                ctl.display(),
                socket.display()
            ),
        ))
    }
}

impl HealthFlipper for ControlFlipper {
    fn set_health<'a>(&'a self, ids: Vec<String>, health: &'static str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            // Brief: no status in the reply, so a flip on a 100,000-device mock
            // does not serialise (and this client parse) the whole device list.
            let req = ControlRequest::SetHealth { ids, health: health.to_string(), brief: true };
            let reply: ControlReply = crate::transport::control::call(&self.path, &req, self.timeout).await?;
            if reply.ok {
                Ok(())
            } else {
                Err(Error::invalid(
                    self.path.display().to_string(),
                    reply.error.unwrap_or_else(|| "set-health refused".into()),
                ))
            }
        })
    }
}

/// The RPC every error here names.
const LIST_AND_WATCH: &str = "v1beta1.DevicePlugin/ListAndWatch";

/// The next message on `t`'s ListAndWatch stream, within the call timeout.
async fn next_list(
    stream: &mut tonic::Streaming<Sized<dp::ListAndWatchResponse>>,
    t: &Prepared,
    cfg: &BenchConfig,
) -> Result<dp::ListAndWatchResponse> {
    let wait = cfg.client.call_timeout;
    match tokio::time::timeout(wait, stream.next()).await {
        Ok(Some(Ok(m))) => Ok(m.message),
        Ok(Some(Err(s))) => Err(Error::from_status(LIST_AND_WATCH, &t.socket, &s, cfg.client.max_recv_bytes)),
        Ok(None) => Err(Error::Rpc {
            rpc: LIST_AND_WATCH.into(),
            path: t.socket.clone(),
            code: tonic::Code::Ok,
            message: "the plugin ended the stream".into(),
        }),
        Err(_) => {
            Err(Error::Timeout { what: format!("a ListAndWatch message from {}", t.socket.display()), timeout: wait })
        }
    }
}

/// Measures health changes on `t`'s ListAndWatch stream until `limit`, one
/// change at a time. Leaves every device it touched Healthy again.
pub async fn run(
    t: &Prepared,
    cfg: &BenchConfig,
    flipper: Arc<dyn HealthFlipper>,
    progress: &Arc<Progress>,
) -> Result<Tally> {
    let channel = t.channels.first().cloned().ok_or_else(|| Error::invalid("--connections", "no connection"))?;
    let ids: Vec<String> = t.healthy_ids.iter().take(1024).cloned().collect();
    if ids.is_empty() {
        return Err(Error::invalid(t.socket.display().to_string(), "the plugin lists no healthy device to flip"));
    }
    let wait = cfg.client.call_timeout;
    let opened =
        tokio::time::timeout(wait, crate::plugin_client::open_list_and_watch(channel, t.max_recv)).await.map_err(
            |_| Error::Timeout { what: format!("ListAndWatch to open on {}", t.socket.display()), timeout: wait },
        )?;
    let mut stream =
        opened.map_err(|s| Error::from_status(LIST_AND_WATCH, &t.socket, &s, cfg.client.max_recv_bytes))?;
    next_list(&mut stream, t, cfg).await?;

    progress.reset(true);
    let mut tally = Tally::new()?;
    let start = Instant::now();
    let cpu0 = super::cpu_time();
    let mut first_send = None;
    let mut last_send = start;
    let mut i: u64 = 0;
    let mut left_unhealthy: Option<String> = None;
    loop {
        let more = !progress.stopped()
            && match cfg.limit {
                Limit::Total(n) => i < n,
                Limit::Duration(d) => start.elapsed() < d,
            };
        if !more {
            break;
        }
        let idx = usize::try_from(i / 2).unwrap_or(0) % ids.len();
        let id = ids[idx].clone();
        let health = if i.is_multiple_of(2) { dp::UNHEALTHY } else { dp::HEALTHY };
        let sent = Instant::now();
        first_send.get_or_insert(sent);
        last_send = sent;
        tally.sent += 1;
        progress.sent.fetch_add(1, Ordering::Relaxed);
        let (asked, seen) = tokio::join!(flipper.set_health(vec![id.clone()], health), async {
            loop {
                let msg = next_list(&mut stream, t, cfg).await?;
                if msg.devices.iter().any(|d| d.id == id && d.health == health) {
                    return Ok::<Instant, Error>(Instant::now());
                }
            }
        });
        asked?;
        let at = seen?;
        tally.ok += 1;
        progress.ok.fetch_add(1, Ordering::Relaxed);
        tally.record(u64::try_from(at.saturating_duration_since(sent).as_nanos()).unwrap_or(u64::MAX));
        left_unhealthy = (health == dp::UNHEALTHY).then_some(id);
        i += 1;
    }
    tally.elapsed = start.elapsed();
    tally.cpu = super::cpu_time().saturating_sub(cpu0);
    tally.send_span = last_send.saturating_duration_since(first_send.unwrap_or(last_send));
    if let Some(id) = left_unhealthy {
        flipper.set_health(vec![id], dp::HEALTHY).await?;
    }
    Ok(tally)
}
