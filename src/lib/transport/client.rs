//! Dialing a unix socket as a gRPC client.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint};

use crate::error::{Error, Result};
use crate::limits::KUBELET_MAX_RECV;

/// How to dial and call.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Limit for establishing the connection (socket and HTTP/2 handshake).
    pub connect_timeout: Duration,
    /// Deadline of each unary call.
    pub call_timeout: Duration,
    /// Largest message accepted from the server.
    pub max_recv_bytes: usize,
    /// Where to report each call on the wire (`-v`); none: not reported.
    pub tap: Option<super::wire::Tap>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            connect_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(10),
            max_recv_bytes: KUBELET_MAX_RECV,
            tap: None,
        }
    }
}

/// Connects to the gRPC server on the unix socket at `path`, sending
/// `:authority: localhost` as current kubelets do.
///
/// Before dialing, the path is checked so that the error says what is wrong:
/// nothing there, not a socket, permission denied, or nothing listening.
pub async fn connect(path: &Path, timeout: Duration) -> Result<Channel> {
    let deadline = crate::duration::deadline(timeout);
    let first = dial(path, timeout).await?;
    // The endpoint URI only sets :authority; the connector below ignores it.
    let endpoint = super::http2::client_settings(Endpoint::from_static("http://localhost"))
        .connect_timeout(timeout)
        .user_agent(concat!("dpctl/", env!("CARGO_PKG_VERSION")))
        .map_err(|e| Error::Connect { path: path.to_path_buf(), reason: e.to_string() })?;
    let (greeted_tx, greeted) = tokio::sync::oneshot::channel();
    let slot = Arc::new(Mutex::new(Some((first, greeted_tx))));
    let owned: PathBuf = path.to_path_buf();
    let connector = tower::service_fn(move |_: http::Uri| {
        let slot = Arc::clone(&slot);
        let path = owned.clone();
        async move {
            // The first connection is the one already checked; later ones (after
            // the server closed the connection) are dialed afresh.
            let ready = slot.lock().map_or(None, |mut s| s.take());
            let stream = match ready {
                Some((s, greeted)) => Greeted { inner: s, greeted: Some(greeted) },
                None => Greeted { inner: UnixStream::connect(&path).await?, greeted: None },
            };
            Ok::<_, std::io::Error>(TokioIo::new(stream))
        }
    });
    let channel = match tokio::time::timeout_at(deadline, endpoint.connect_with_connector(connector)).await {
        Ok(Ok(channel)) => channel,
        Ok(Err(e)) => return Err(Error::Connect { path: path.to_path_buf(), reason: crate::text::error_chain(&e) }),
        Err(_) => return Err(Error::ConnectTimeout { path: path.to_path_buf(), timeout }),
    };
    // hyper's client handshake only sends the preface: it does not wait
    // for the server's. A socket that accepts and never speaks HTTP/2 would
    // then pass for connected and every call (or stream) would hang on it
    // instead of failing within the connect timeout. The server's SETTINGS
    // (the first bytes any HTTP/2 server sends) are what proves a server.
    match tokio::time::timeout_at(deadline, greeted).await {
        Ok(Ok(true)) => Ok(channel),
        Ok(Ok(false) | Err(_)) => Err(Error::Connect {
            path: path.to_path_buf(),
            reason: "the server closed the connection without an HTTP/2 greeting".into(),
        }),
        Err(_) => Err(Error::ConnectTimeout { path: path.to_path_buf(), timeout }),
    }
}

/// A client connection that reports whether the server sent anything
/// (true) or closed it (false) with the first read that completes.
struct Greeted {
    inner: UnixStream,
    greeted: Option<tokio::sync::oneshot::Sender<bool>>,
}

impl tokio::io::AsyncRead for Greeted {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if let std::task::Poll::Ready(r) = &polled
            && let Some(tx) = self.greeted.take()
        {
            let _ = tx.send(r.is_ok() && buf.filled().len() > before);
        }
        polled
    }
}

impl tokio::io::AsyncWrite for Greeted {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Opens the raw connection, classifying every failure.
async fn dial(path: &Path, timeout: Duration) -> Result<UnixStream> {
    let owned = || path.to_path_buf();
    let len = path.as_os_str().len();
    if len > crate::paths::MAX_SOCKET_PATH_LEN {
        return Err(Error::PathTooLong { path: owned(), len, max: crate::paths::MAX_SOCKET_PATH_LEN });
    }
    match std::fs::metadata(path) {
        Ok(meta) if !meta.file_type().is_socket() => {
            return Err(Error::NotASocket { path: owned(), kind: file_kind(&meta.file_type()) });
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Error::NoSocket { path: owned() }),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(Error::PermissionDenied { path: owned(), op: "reach" });
        }
        Err(e) => return Err(Error::Connect { path: owned(), reason: e.to_string() }),
    }
    match tokio::time::timeout(timeout, UnixStream::connect(path)).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(match e.kind() {
            std::io::ErrorKind::ConnectionRefused => Error::ConnectionRefused { path: owned() },
            std::io::ErrorKind::PermissionDenied => Error::PermissionDenied { path: owned(), op: "connect to" },
            std::io::ErrorKind::NotFound => Error::NoSocket { path: owned() },
            _ => Error::Connect { path: owned(), reason: e.to_string() },
        }),
        Err(_) => Err(Error::ConnectTimeout { path: owned(), timeout }),
    }
}

/// Names a file type for messages.
pub(crate) fn file_kind(t: &std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "directory"
    } else if t.is_symlink() {
        "symbolic link"
    } else if t.is_file() {
        "regular file"
    } else if t.is_fifo() {
        "named pipe"
    } else if t.is_socket() {
        "socket"
    } else {
        "special file"
    }
}
