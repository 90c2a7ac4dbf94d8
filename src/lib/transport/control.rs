//! dpctl's control sockets: a running `kubelet-sim` or `mock-plugin` is
//! steered from another process (a second terminal, a CI step) with one JSON
//! request per line and one JSON reply per line.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use super::server::Listener;

/// Most bytes one control connection may send (a pod manifest fits easily).
const MAX_CONTROL_BYTES: u64 = 16 * 1024 * 1024;
use crate::error::{Error, Result};

/// Answers requests on `listener` with `handler` until `shutdown` completes.
/// The socket is removed when this returns.
pub async fn serve<Req, Resp, F, Fut>(listener: Listener, handler: F, shutdown: impl Future<Output = ()>)
where
    Req: DeserializeOwned + Send + 'static,
    Resp: Serialize + Send + 'static,
    F: Fn(std::result::Result<Req, String>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Resp> + Send + 'static,
{
    let Listener { listener, guard } = listener;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            conn = listener.accept() => {
                let stream = match conn {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // E.g. out of file descriptors: back off instead of spinning.
                        tracing::warn!(error = %e, "control socket: accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let handler = handler.clone();
                tokio::spawn(async move {
                    let (read, mut write) = stream.into_split();
                    let mut lines = BufReader::new(read.take(MAX_CONTROL_BYTES)).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        let request = serde_json::from_str::<Req>(&line).map_err(|e| e.to_string());
                        let reply = handler(request).await;
                        let Ok(mut text) = serde_json::to_string(&reply) else { break };
                        text.push('\n');
                        if write.write_all(text.as_bytes()).await.is_err() {
                            break;
                        }
                    }
                });
            }
        }
    }
    drop(guard);
}

/// Sends one request to the control socket at `path` and waits for the reply.
pub async fn call<Req: Serialize, Resp: DeserializeOwned>(
    path: &Path,
    request: &Req,
    timeout: Duration,
) -> Result<Resp> {
    let what = || format!("control request to {}", path.display());
    let exchange = async {
        let stream = match UnixStream::connect(path).await {
            Ok(s) => s,
            Err(e) => {
                return Err(match e.kind() {
                    std::io::ErrorKind::NotFound => Error::NoSocket { path: path.to_path_buf() },
                    std::io::ErrorKind::ConnectionRefused => Error::ConnectionRefused { path: path.to_path_buf() },
                    std::io::ErrorKind::PermissionDenied => {
                        Error::PermissionDenied { path: path.to_path_buf(), op: "connect to" }
                    }
                    _ => Error::io(what(), e),
                });
            }
        };
        let (read, mut write) = stream.into_split();
        let mut text = serde_json::to_string(request).map_err(|e| Error::io(what(), e.into()))?;
        text.push('\n');
        write.write_all(text.as_bytes()).await.map_err(|e| Error::io(what(), e))?;
        let mut lines = BufReader::new(read).lines();
        let line = lines
            .next_line()
            .await
            .map_err(|e| Error::io(what(), e))?
            .ok_or_else(|| Error::io(what(), std::io::Error::other("the process closed the control socket")))?;
        serde_json::from_str(&line).map_err(|e| Error::io(what(), e.into()))
    };
    tokio::time::timeout(timeout, exchange).await.map_err(|_| Error::Timeout { what: what(), timeout })?
}
