//! Serving gRPC on a unix socket: careful binding, the authority fix, and
//! removal of the socket on shutdown.

use std::future::Future;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::Stream;
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use tonic::transport::server::Router;

use super::authority::AuthorityFix;
use super::client::file_kind;
use crate::error::{Error, Result};
use crate::paths::MAX_SOCKET_PATH_LEN;

/// How long a connect probe may take when deciding whether a socket is live.
const LIVENESS_PROBE: Duration = Duration::from_millis(500);
/// How long in-flight calls get to finish after shutdown is asked for.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// How to bind a socket.
#[derive(Debug, Clone)]
pub struct BindOptions {
    /// Take the socket over even when a live process answers on it.
    pub force: bool,
    /// The flag that sets `force`, named in the error when it is needed.
    pub force_flag: &'static str,
    /// File mode of the socket; owner-only by default.
    pub mode: u32,
    /// Create the parent directory if it is missing.
    pub create_dir: bool,
}

impl Default for BindOptions {
    fn default() -> Self {
        BindOptions { force: false, force_flag: "--force", mode: 0o600, create_dir: true }
    }
}

/// Removes the socket file it guards when dropped, but only while the file
/// is still the socket that was bound: a socket that someone else has since
/// replaced is left alone.
///
/// "Still the socket that was bound" is decided by inode, and the guard holds
/// an `O_PATH` descriptor of the file it bound. That keeps the inode alive
/// after the listener has closed and after someone else unlinked the path, so
/// its number cannot be handed to a new socket at the same path: without it,
/// a plugin restarted at once (unlink, bind) can get the freed inode number
/// back, and a late drop would delete the new plugin's live socket.
#[derive(Debug)]
pub struct SocketGuard {
    path: PathBuf,
    /// The bound file itself (`O_PATH`: no access to the socket, only a
    /// reference that keeps its inode from being reused).
    file: Option<std::fs::File>,
    dev: u64,
    ino: u64,
}

impl SocketGuard {
    /// Guards the socket just bound at `path`.
    fn new(path: &Path) -> std::io::Result<SocketGuard> {
        use std::os::unix::fs::OpenOptionsExt;
        // O_PATH|O_NOFOLLOW opens the socket file itself (a plain open of a
        // socket fails with ENXIO) without following a link swapped in.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        let meta = file.metadata()?;
        if !meta.file_type().is_socket() {
            return Err(std::io::Error::other(format!("{} is no longer the socket just bound", path.display())));
        }
        Ok(SocketGuard { path: path.to_path_buf(), file: Some(file), dev: meta.dev(), ino: meta.ino() })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True while the file at the path is still this socket.
    pub fn still_ours(&self) -> bool {
        self.file.is_some()
            && std::fs::symlink_metadata(&self.path)
                .map(|m| m.file_type().is_socket() && m.dev() == self.dev && m.ino() == self.ino)
                .unwrap_or(false)
    }
}

impl Drop for SocketGuard {
    fn drop(&mut self) {
        if self.still_ours() {
            let _ = std::fs::remove_file(&self.path);
        }
        // Only now may the inode go (and its number be reused).
        self.file.take();
    }
}

/// A bound unix socket and the guard that removes it.
#[derive(Debug)]
pub struct Listener {
    /// The listening socket.
    pub listener: UnixListener,
    /// Removes the socket file when dropped.
    pub guard: SocketGuard,
}

/// Binds a unix socket at `path` the safe way:
///
/// - fails clearly when the path is longer than a unix socket allows;
/// - when something is at the path: a live socket (a connect succeeds) is
///   refused unless `force`; a stale socket is removed; a regular file,
///   directory or symlink is never touched;
/// - the socket is created with `mode` (owner-only by default).
pub async fn bind(path: &Path, opts: &BindOptions) -> Result<Listener> {
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH_LEN {
        return Err(Error::PathTooLong { path: path.to_path_buf(), len, max: MAX_SOCKET_PATH_LEN });
    }
    // dpctl's own directory (`<dir>/.dpctl`) must be a directory in --dir: as a
    // symbolic link it would make dpctl create and delete its control
    // sockets wherever the link points.
    if let Some(parent) = path.parent().filter(|p| p.file_name() == Some(crate::paths::CONTROL_DIR_NAME.as_ref()))
        && std::fs::symlink_metadata(parent).is_ok_and(|m| m.file_type().is_symlink())
    {
        return Err(Error::invalid(
            parent.display().to_string(),
            "a symbolic link: dpctl keeps its control sockets in a directory of its own, never where a link points; \
             remove the link",
        ));
    }
    if opts.create_dir
        && let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
    {
        // As the kubelet creates its directories: 0750.
        crate::input::create_dir(parent, 0o750)?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            let probe = tokio::time::timeout(LIVENESS_PROBE, UnixStream::connect(path)).await;
            match probe {
                // Only a refused connection proves nobody serves the socket any more.
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {}
                // It went away meanwhile: nothing to remove.
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::PermissionDenied && !opts.force => {
                    return Err(Error::PermissionDenied {
                        path: path.to_path_buf(),
                        op: "probe the existing socket at",
                    });
                }
                // Accepted, a full backlog, a timeout, or anything else: someone may be there.
                _ if !opts.force => {
                    return Err(Error::AlreadyServing { path: path.to_path_buf(), force_flag: opts.force_flag });
                }
                _ => {}
            }
            tracing::info!(socket = %path.display(), forced = opts.force, "removing existing socket");
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::io(format!("removing stale socket {}", path.display()), e));
                }
                _ => {}
            }
        }
        Ok(meta) => {
            return Err(Error::NotReplaceable { path: path.to_path_buf(), kind: file_kind(&meta.file_type()) });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(format!("inspecting {}", path.display()), e)),
    }
    let (listener, guard) = bind_with_mode(path, opts.mode).map_err(|source| match source.kind() {
        std::io::ErrorKind::PermissionDenied => Error::PermissionDenied { path: path.to_path_buf(), op: "bind" },
        _ => Error::Bind { path: path.to_path_buf(), source },
    })?;
    Ok(Listener { listener, guard })
}

/// True when the socket at `path` is stale: connecting to it is refused,
/// the only proof that nothing serves it any more. A socket that accepts, or
/// does not answer within a short probe, is live (or may be).
pub async fn is_stale(path: &Path) -> bool {
    matches!(
        tokio::time::timeout(LIVENESS_PROBE, UnixStream::connect(path)).await,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused
    )
}

/// Binds, sets the mode, and only then listens: no client can connect while
/// the socket still has the umask's permissions.
fn bind_with_mode(path: &Path, mode: u32) -> std::io::Result<(UnixListener, SocketGuard)> {
    use socket2::{Domain, SockAddr, Socket, Type};
    let socket = Socket::new(Domain::UNIX, Type::STREAM.cloexec(), None)?;
    socket.bind(&SockAddr::unix(path)?)?;
    let guard = SocketGuard::new(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    socket.listen(1024)?;
    socket.set_nonblocking(true)?;
    let listener = UnixListener::from_std(std::os::unix::net::UnixListener::from(std::os::fd::OwnedFd::from(socket)))?;
    Ok((listener, guard))
}

/// Most connections one dpctl server keeps open at once (a kubelet opens
/// one or two, a busy test a few dozen). When a new connection arrives at
/// the cap, the connection idle the longest (no call in progress) is closed
/// with GOAWAY to make room; only when every connection is busy is the new
/// one closed at once. Documented in the README's safety section.
pub const MAX_CONNECTIONS: usize = 256;
/// How long a new connection has to send the HTTP/2 preface and its first
/// frame (SETTINGS) before it is closed.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
pub use super::guard::IDLE_TIMEOUT;
/// How long accepting pauses when the process is out of file descriptors
/// (EMFILE/ENFILE) or memory, instead of spinning.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Limits on the connections one server accepts.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Most connections open at once ([`MAX_CONNECTIONS`]).
    pub max_connections: usize,
    /// Time to send the preface and first frame ([`HANDSHAKE_TIMEOUT`]).
    pub handshake_timeout: Duration,
    /// Time a connection may stay open with no call in progress ([`IDLE_TIMEOUT`]).
    pub idle_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: MAX_CONNECTIONS,
            handshake_timeout: HANDSHAKE_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
        }
    }
}

/// The accepted connections of `listener`, each behind [`AuthorityFix`] and
/// aborted when `stop` is cancelled, within the default [`ConnectionLimits`].
pub fn incoming(
    listener: UnixListener,
    stop: CancellationToken,
) -> impl Stream<Item = std::io::Result<AuthorityFix<UnixStream>>> {
    incoming_with(listener, stop, ConnectionLimits::default())
}

/// [`incoming`] with explicit limits: at `max_connections`, a new connection
/// takes the place of the one idle the longest (closed with GOAWAY), and is
/// closed as soon as it is accepted only when every open connection is busy;
/// every connection must finish its handshake within `handshake_timeout` and
/// is closed after `idle_timeout` without an open stream; an accept that
/// fails for lack of file descriptors or memory pauses the loop for a moment
/// instead of spinning. No accept error ends the stream.
pub fn incoming_with(
    listener: UnixListener,
    stop: CancellationToken,
    limits: ConnectionLimits,
) -> impl Stream<Item = std::io::Result<AuthorityFix<UnixStream>>> {
    let table = super::guard::ConnTable::new(limits.max_connections);
    futures_util::stream::unfold(
        (listener, stop, table, 0u64, 0u64),
        move |(listener, stop, table, mut refused, mut evicted)| async move {
            loop {
                let conn = match listener.accept().await {
                    Ok((conn, _)) => conn,
                    Err(e) if is_resource_shortage(&e) => {
                        tracing::warn!(error = %e, "accept failed: out of file descriptors or memory; pausing");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                    Err(e) => {
                        // ECONNABORTED and the like concern one connection only.
                        tracing::debug!(error = %e, "accept failed");
                        continue;
                    }
                };
                let slot = match table.admit(&stop) {
                    super::guard::Admission::Admitted(slot) => slot,
                    super::guard::Admission::Evicted(slot) => {
                        evicted += 1;
                        if evicted.is_power_of_two() {
                            tracing::warn!(
                                max = limits.max_connections,
                                evicted,
                                "connection limit reached: closing the oldest idle connections for new ones"
                            );
                        }
                        slot
                    }
                    super::guard::Admission::Full => {
                        refused += 1;
                        if refused.is_power_of_two() {
                            tracing::warn!(
                                max = limits.max_connections,
                                refused,
                                "connection limit reached and every connection busy: closing new connections"
                            );
                        }
                        drop(conn);
                        continue;
                    }
                };
                widen_send_buffer(&conn);
                let guard = super::guard::Http2Guard::new(slot, limits.idle_timeout, super::authority::PREFACE.len());
                let fix = AuthorityFix::new(conn).guarded(guard).handshake_within(limits.handshake_timeout);
                return Some((Ok(fix), (listener, stop, table, refused, evicted)));
            }
        },
    )
}

/// What every accept loop does when `accept` fails: out of descriptors or
/// memory, it pauses for a moment instead of spinning (and says so); any
/// other failure concerns one connection and is only logged.
pub async fn accept_failed(e: &std::io::Error, server: &str) {
    if is_resource_shortage(e) {
        tracing::warn!(error = %e, server, "accept failed: out of file descriptors or memory; pausing");
        tokio::time::sleep(ACCEPT_BACKOFF).await;
    } else {
        tracing::debug!(error = %e, server, "accept failed");
    }
}

/// True for accept errors that say the process or system ran out of
/// descriptors or memory: retrying at once would spin.
fn is_resource_shortage(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM))
}

/// Serves `router` on `listener` until `shutdown` completes, then gives
/// in-flight calls a short grace period, closes every connection it
/// accepted, and removes the socket.
///
/// Streams that never end by themselves (ListAndWatch) do not hold the
/// shutdown up, and no connection outlives the server: a client sees its
/// stream end, as it would when a real plugin or kubelet exits.
pub async fn serve(router: Router, listener: Listener, shutdown: impl Future<Output = ()>) -> Result<()> {
    serve_with(router, listener, ConnectionLimits::default(), shutdown).await
}

/// [`serve`] with explicit connection limits.
pub async fn serve_with(
    router: Router,
    listener: Listener,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let Listener { listener, guard } = listener;
    let connections = CancellationToken::new();
    // Cancelled however this function ends, including when its future is dropped.
    let _close_all = connections.clone().drop_guard();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = router.serve_with_incoming_shutdown(incoming_with(listener, connections.clone(), limits), async {
        let _ = stop_rx.await;
    });
    tokio::pin!(server);
    let outcome = tokio::select! {
        r = &mut server => Some(r),
        () = shutdown => None,
    };
    let result = match outcome {
        Some(r) => r,
        None => {
            let _ = stop_tx.send(());
            tokio::time::timeout(SHUTDOWN_GRACE, &mut server).await.unwrap_or(Ok(()))
        }
    };
    drop(guard);
    result.map_err(|e| Error::io("serving gRPC", std::io::Error::other(e)))
}

/// The send buffer asked for each accepted connection: a whole message of
/// the kubelet's maximum size, so that a 2.6 MiB ListAndWatch list is
/// written in one go instead of about 13 pieces of the 208 KiB default,
/// each waiting for the reader. The kernel caps it at `net.core.wmem_max`
/// (208 KiB on many nodes, where this changes nothing); it is a limit on
/// what may be queued, not memory taken up front.
pub const SEND_BUFFER: usize = crate::limits::KUBELET_MAX_RECV;

/// Asks for [`SEND_BUFFER`] on `conn`; a refusal is not an error (the
/// default buffer works, only slower for large messages).
fn widen_send_buffer(conn: &UnixStream) {
    use std::os::fd::AsRawFd;
    let Ok(size) = libc::c_int::try_from(SEND_BUFFER) else { return };
    // SAFETY: setsockopt reads `size_of::<c_int>()` bytes from a pointer to a
    // live c_int, on a descriptor `conn` owns for the duration of the call.
    let rc = unsafe {
        libc::setsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            std::ptr::from_ref(&size).cast(),
            libc::socklen_t::try_from(std::mem::size_of::<libc::c_int>()).unwrap_or(4),
        )
    };
    if rc != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "SO_SNDBUF not widened");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send_buffer(conn: &UnixStream) -> usize {
        use std::os::fd::AsRawFd;
        let mut size: libc::c_int = 0;
        let mut len = libc::socklen_t::try_from(std::mem::size_of::<libc::c_int>()).unwrap();
        // SAFETY: getsockopt writes at most `len` bytes into the live c_int.
        let rc = unsafe {
            libc::getsockopt(
                conn.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                std::ptr::from_mut(&mut size).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0);
        usize::try_from(size).unwrap()
    }

    /// The send buffer grows to what the node allows (the kernel reports
    /// twice the size asked, capped by net.core.wmem_max).
    #[tokio::test]
    async fn accepted_connections_get_a_send_buffer_for_a_whole_message() {
        let (a, _b) = UnixStream::pair().unwrap();
        let before = send_buffer(&a);
        widen_send_buffer(&a);
        let max: usize = std::fs::read_to_string("/proc/sys/net/core/wmem_max")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        let after = send_buffer(&a);
        assert!(after >= before, "{before} -> {after}");
        assert!(after >= 2 * SEND_BUFFER.min(max), "{before} -> {after} (wmem_max {max})");
    }

    /// A plugin restarted at once: the old process's socket is unlinked and
    /// a new one bound at the same path before the old server's guard runs.
    /// The late guard must leave the new, live socket alone, even though the
    /// filesystem is free to hand the new socket the old one's inode number
    /// once the old listener has closed (it often does).
    #[tokio::test]
    async fn a_late_guard_never_removes_a_socket_rebound_at_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.sock");
        for round in 0..50 {
            let old = bind(&path, &BindOptions::default()).await.unwrap();
            let Listener { listener, guard } = old;
            drop(listener);
            std::fs::remove_file(&path).unwrap();
            let new = bind(&path, &BindOptions::default()).await.unwrap();
            drop(guard);
            assert!(
                std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket()),
                "round {round}: the old guard removed the new socket"
            );
            assert!(UnixStream::connect(&path).await.is_ok(), "round {round}: the new socket does not answer");
            drop(new);
            assert!(std::fs::symlink_metadata(&path).is_err(), "round {round}: the new guard left its socket");
        }
    }
}
