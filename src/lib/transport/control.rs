//! dpctl's control sockets: a running `kubelet-sim` or `mock-plugin` is
//! steered from another process (a second terminal, a CI step) with one JSON
//! request per line and one JSON reply per line.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use super::server::Listener;

use crate::error::{Error, Result};

/// Most bytes one control request (one line) may have; a pod manifest fits
/// easily. A longer one is answered with an error and the connection closed.
/// The limit is per request: a client may keep a connection for any number
/// of requests.
pub const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;
/// Most control connections served at once. At the cap a new connection
/// takes the place of the one idle the longest (waiting for a request);
/// only when every connection is busy with a request is it closed at once.
pub const MAX_CONNECTIONS: usize = 64;

/// Answers requests on `listener` with `handler` until `shutdown` completes.
/// The socket is removed when this returns. A line that is not a valid
/// request is passed to `handler` as `Err` (with the parse error), so the
/// reply can say what was wrong.
pub async fn serve<Req, Resp, F, Fut>(listener: Listener, handler: F, shutdown: impl Future<Output = ()>)
where
    Req: DeserializeOwned + Send + 'static,
    Resp: Serialize + Send + 'static,
    F: Fn(std::result::Result<Req, String>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Resp> + Send + 'static,
{
    serve_limited(listener, handler, MAX_CONNECTIONS, MAX_REQUEST_BYTES, super::guard::IDLE_TIMEOUT, shutdown).await;
}

/// [`serve`] with explicit limits (for tests): a connection waiting for a
/// request longer than `idle_timeout` is closed (the transport's one idle
/// deadline, [`super::guard::IDLE_TIMEOUT`], by default).
pub async fn serve_limited<Req, Resp, F, Fut>(
    listener: Listener,
    handler: F,
    max_connections: usize,
    max_request: usize,
    idle_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) where
    Req: DeserializeOwned + Send + 'static,
    Resp: Serialize + Send + 'static,
    F: Fn(std::result::Result<Req, String>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Resp> + Send + 'static,
{
    let Listener { listener, guard } = listener;
    let table = super::guard::ConnTable::new(max_connections);
    let stop = tokio_util::sync::CancellationToken::new();
    // Every connection closes with the server, however this function ends.
    let _close_all = stop.clone().drop_guard();
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
                let slot = match table.admit(&stop) {
                    super::guard::Admission::Admitted(slot) => slot,
                    super::guard::Admission::Evicted(slot) => {
                        tracing::debug!(max = max_connections, "control socket: closed the oldest idle connection for a new one");
                        slot
                    }
                    super::guard::Admission::Full => {
                        tracing::warn!(max = max_connections, "control socket: every connection busy; closing a new one");
                        drop(stream);
                        continue;
                    }
                };
                tokio::spawn(serve_connection(stream, slot, handler.clone(), max_request, idle_timeout));
            }
        }
    }
    drop(guard);
}

/// Answers the requests of one control connection until it closes, sends
/// a request over `max_request` bytes, waits longer than `idle_timeout` for
/// a request, or its slot is taken away (evicted, or the server stopping).
/// The slot counts the connection busy only while a request is handled.
async fn serve_connection<Req, Resp, F, Fut>(
    stream: UnixStream,
    slot: super::guard::ConnSlot,
    handler: F,
    max_request: usize,
    idle_timeout: Duration,
) where
    Req: DeserializeOwned + Send + 'static,
    Resp: Serialize + Send + 'static,
    F: Fn(std::result::Result<Req, String>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Resp> + Send + 'static,
{
    let closed = slot.token();
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    loop {
        slot.set_idle(true);
        let line = tokio::select! {
            line = read_line(&mut reader, max_request) => line,
            () = closed.cancelled() => break,
            () = tokio::time::sleep(idle_timeout) => {
                tracing::debug!(idle = ?idle_timeout, "control socket: closing an idle connection");
                break;
            }
        };
        let line = match line {
            Ok(Some(line)) => line,
            Ok(None) | Err(_) => break,
        };
        slot.set_idle(false);
        let request = match line {
            Line::Complete(text) => serde_json::from_slice::<Req>(&text).map_err(|e| e.to_string()),
            Line::TooLong => Err(format!("request over {max_request} bytes")),
        };
        let too_long = request.as_ref().is_err_and(|e| e.starts_with("request over"));
        let reply = handler(request).await;
        let Ok(mut text) = serde_json::to_string(&reply) else { break };
        text.push('\n');
        if write.write_all(text.as_bytes()).await.is_err() || too_long {
            break;
        }
    }
}

/// One request line, or the news that it was over the limit.
enum Line {
    Complete(Vec<u8>),
    TooLong,
}

/// Reads one line of at most `max` bytes (without its newline); `None` at
/// the end of the stream.
async fn read_line<R: AsyncBufRead + Unpin>(reader: &mut R, max: usize) -> std::io::Result<Option<Line>> {
    let mut buf = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let n = (&mut *reader).take(limit).read_until(b'\n', &mut buf).await?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        return Ok(Some(Line::Complete(buf)));
    }
    if buf.len() > max {
        return Ok(Some(Line::TooLong));
    }
    // The last line, without a newline.
    Ok(Some(Line::Complete(buf)))
}

/// Sends one request to the control socket at `path` and waits for the reply.
pub async fn call<Req: Serialize, Resp: DeserializeOwned>(
    path: &Path,
    request: &Req,
    timeout: Duration,
) -> Result<Resp> {
    let what = || format!("control request to {}", path.display());
    let mut text = serde_json::to_string(request).map_err(|e| Error::io(what(), e.into()))?;
    if text.len() > MAX_REQUEST_BYTES {
        return Err(Error::invalid(
            what(),
            format!(
                "the request is {} bytes, over the {MAX_REQUEST_BYTES} bytes a control socket reads per request; \
                 hint: send less at once (e.g. a pod with fewer containers)",
                text.len()
            ),
        ));
    }
    text.push('\n');
    let exchange = async {
        let stream = match UnixStream::connect(path).await {
            Ok(s) => s,
            Err(e) => {
                // ENOTDIR: a part of the path (the user's --dir) is a file;
                // there is no socket there either.
                let not_dir = e.raw_os_error() == Some(libc::ENOTDIR);
                return Err(match e.kind() {
                    std::io::ErrorKind::NotFound => Error::NoSocket { path: path.to_path_buf() },
                    _ if not_dir => Error::NoSocket { path: path.to_path_buf() },
                    std::io::ErrorKind::ConnectionRefused => Error::ConnectionRefused { path: path.to_path_buf() },
                    std::io::ErrorKind::PermissionDenied => {
                        Error::PermissionDenied { path: path.to_path_buf(), op: "connect to" }
                    }
                    _ => Error::io(what(), e),
                });
            }
        };
        let (read, mut write) = stream.into_split();
        let sent = write.write_all(text.as_bytes()).await;
        // A server that refuses a request answers before it hangs up, so
        // the reply is read even when the write failed part-way.
        let mut lines = BufReader::new(read).lines();
        let line = match (lines.next_line().await, sent) {
            (Ok(Some(line)), _) => line,
            (_, Err(e)) | (Err(e), Ok(())) => return Err(Error::io(what(), e)),
            (Ok(None), Ok(())) => {
                return Err(Error::io(what(), std::io::Error::other("the process closed the control socket")));
            }
        };
        serde_json::from_str(&line).map_err(|e| Error::io(what(), e.into()))
    };
    tokio::time::timeout(timeout, exchange).await.map_err(|_| Error::Timeout { what: what(), timeout })?
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{BindOptions, bind};
    use tokio::io::AsyncWriteExt;

    async fn echo(req: std::result::Result<serde_json::Value, String>) -> serde_json::Value {
        match req {
            Ok(v) => serde_json::json!({ "ok": v }),
            Err(e) => serde_json::json!({ "error": e }),
        }
    }

    // The size limit is per request, not per connection lifetime (a long-lived
    // client must not run out), and connections are capped (a flood of idle
    // ones must not exhaust the sim).
    #[tokio::test]
    async fn limits_are_per_request_and_connections_are_capped() {
        let dir = tempfile::Builder::new().prefix("dpc").tempdir_in("/tmp").unwrap();
        let path = dir.path().join("c.sock");
        let listener = bind(&path, &BindOptions::default()).await.unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_limited(listener, echo, 1, 100, Duration::from_secs(300), async {
            let _ = rx.await;
        }));
        let wait = Duration::from_secs(10);
        let conn = UnixStream::connect(&path).await.unwrap();
        let (read, mut write) = conn.into_split();
        let mut lines = BufReader::new(read).lines();
        // Ten requests of 60 bytes: 600 bytes on one connection, each under 100.
        for i in 0..10 {
            let req = format!("\"{}{i}\"\n", "x".repeat(56));
            write.write_all(req.as_bytes()).await.unwrap();
            let reply = tokio::time::timeout(wait, lines.next_line()).await.unwrap().unwrap().unwrap();
            assert!(reply.contains("\"ok\""), "request {i}: {reply}");
        }
        // One request over the limit: an error naming it, then the connection closes.
        write.write_all(format!("\"{}\"\n", "y".repeat(200)).as_bytes()).await.unwrap();
        let reply = tokio::time::timeout(wait, lines.next_line()).await.unwrap().unwrap().unwrap();
        assert!(reply.contains("request over 100 bytes"), "{reply}");
        assert!(tokio::time::timeout(wait, lines.next_line()).await.unwrap().unwrap_or(None).is_none());
        drop(tx);
        tokio::time::timeout(wait, server).await.unwrap().unwrap();
        assert!(!path.exists());
    }

    /// At the cap, a new connection takes the place of the oldest idle one
    /// (64 idle clients used to lock every other client out); only when
    /// every connection is busy is the newcomer refused.
    #[tokio::test]
    async fn at_the_cap_the_oldest_idle_connection_makes_room() {
        let dir = tempfile::Builder::new().prefix("dpc").tempdir_in("/tmp").unwrap();
        let path = dir.path().join("c.sock");
        let listener = bind(&path, &BindOptions::default()).await.unwrap();
        let release = std::sync::Arc::new(tokio::sync::Notify::new());
        let gate = std::sync::Arc::clone(&release);
        let handler = move |req: std::result::Result<serde_json::Value, String>| {
            let gate = std::sync::Arc::clone(&gate);
            async move {
                if req.as_ref().is_ok_and(|v| v == "hold") {
                    gate.notified().await;
                }
                echo(req).await
            }
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_limited(listener, handler, 2, 100, Duration::from_secs(300), async {
            let _ = rx.await;
        }));
        let wait = Duration::from_secs(10);
        // Two idle connections fill the table; the oldest goes for a third.
        let mut oldest = UnixStream::connect(&path).await.unwrap();
        let _second = UnixStream::connect(&path).await.unwrap();
        let reply: serde_json::Value = call(&path, &"hi", wait).await.unwrap();
        assert_eq!(reply["ok"], "hi");
        let mut buf = Vec::new();
        let n = tokio::time::timeout(wait, oldest.read_to_end(&mut buf)).await.unwrap().unwrap_or(0);
        assert_eq!(n, 0, "the oldest idle connection is closed");
        // Two busy connections: a third is refused, and the busy ones are answered.
        let busy = || async {
            let mut c = UnixStream::connect(&path).await.unwrap();
            c.write_all(b"\"hold\"\n").await.unwrap();
            c
        };
        let (mut a, mut b) = (busy().await, busy().await);
        // Wait until both are being handled (the third would otherwise evict one still idle).
        tokio::time::timeout(wait, async {
            loop {
                let mut probe = UnixStream::connect(&path).await.unwrap();
                let _ = probe.write_all(b"1\n").await;
                let mut buf = Vec::new();
                if probe.read_to_end(&mut buf).await.unwrap_or(0) == 0 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("a newcomer refused while every connection is busy");
        release.notify_waiters();
        for c in [&mut a, &mut b] {
            let mut line = String::new();
            tokio::time::timeout(wait, BufReader::new(c).read_line(&mut line)).await.unwrap().unwrap();
            assert!(line.contains("\"ok\":\"hold\""), "{line}");
        }
        drop(tx);
        tokio::time::timeout(wait, server).await.unwrap().unwrap();
    }

    /// A connection that sends no request within the idle deadline is closed.
    #[tokio::test]
    async fn idle_control_connections_are_closed_at_the_deadline() {
        let dir = tempfile::Builder::new().prefix("dpc").tempdir_in("/tmp").unwrap();
        let path = dir.path().join("c.sock");
        let listener = bind(&path, &BindOptions::default()).await.unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_limited(listener, echo, 4, 100, Duration::from_millis(300), async {
            let _ = rx.await;
        }));
        let started = std::time::Instant::now();
        let mut idle = UnixStream::connect(&path).await.unwrap();
        let mut buf = Vec::new();
        let n = tokio::time::timeout(Duration::from_secs(10), idle.read_to_end(&mut buf)).await.unwrap().unwrap_or(0);
        assert_eq!(n, 0);
        assert!(started.elapsed() >= Duration::from_millis(300), "{:?}", started.elapsed());
        drop(tx);
        tokio::time::timeout(Duration::from_secs(10), server).await.unwrap().unwrap();
    }

    // The absurd-input sweep: a request over the server's limit used to fail
    // the client's write with a broken pipe, which dpctl then took for a
    // closed stdout and exited 0 in silence. The server's answer is read.
    #[tokio::test]
    async fn a_refused_request_gets_the_servers_answer_not_a_broken_pipe() {
        let dir = tempfile::Builder::new().prefix("dpc").tempdir_in("/tmp").unwrap();
        let path = dir.path().join("c.sock");
        let listener = bind(&path, &BindOptions::default()).await.unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_limited(listener, echo, 4, 100, Duration::from_secs(300), async {
            let _ = rx.await;
        }));
        let big = "z".repeat(4 * 1024 * 1024);
        let reply: serde_json::Value = call(&path, &big, Duration::from_secs(10)).await.unwrap();
        assert_eq!(reply["error"], "request over 100 bytes", "{reply}");
        drop(tx);
        tokio::time::timeout(Duration::from_secs(10), server).await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_request_over_the_limit_is_refused_before_it_is_sent() {
        let dir = tempfile::Builder::new().prefix("dpc").tempdir_in("/tmp").unwrap();
        let path = dir.path().join("none.sock");
        let big = "z".repeat(MAX_REQUEST_BYTES);
        let err = call::<_, serde_json::Value>(&path, &big, Duration::from_secs(10)).await.unwrap_err();
        assert_eq!(err.exit_code(), crate::error::exit::USAGE, "{err}");
        assert!(err.to_string().contains("over the 16777216 bytes"), "{err}");
    }
}
