//! dpctl's one error type. Every variant says what failed and where; [`Error::hint`]
//! adds what to do about it when the cause is known, and [`Error::exit_code`]
//! maps it to the documented process exit code.

use std::path::PathBuf;
use std::time::Duration;

/// What [`Error::Io`] says for a failed write to stdout or stderr (see
/// [`Error::is_closed_output`]).
pub const WRITING_OUTPUT: &str = "writing output";

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Exit codes, as documented in the README and `dpctl --help`.
pub mod exit {
    /// Everything worked and every check passed.
    pub const OK: u8 = 0;
    /// dpctl ran, but a check or expectation failed (the report says which).
    pub const CHECK_FAILED: u8 = 1;
    /// Bad usage or input: flags, config file, manifest.
    pub const USAGE: u8 = 2;
    /// A socket problem: nothing to connect to, permission denied, cannot bind.
    pub const SOCKET: u8 = 3;
    /// The peer answered with an error (gRPC status, rejection, over-size message).
    pub const RPC: u8 = 4;
    /// A deadline or wait timed out.
    pub const TIMEOUT: u8 = 5;
}

/// Everything that can go wrong in dpctl.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Nothing exists at the socket path.
    #[error("no socket at {}", path.display())]
    NoSocket {
        /// The socket path.
        path: PathBuf,
    },
    /// Something exists at the path, but it is not a unix socket.
    #[error("{} is not a unix socket (it is a {kind})", path.display())]
    NotASocket {
        /// The path.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// The OS refused access.
    #[error("permission denied: cannot {op} {}", path.display())]
    PermissionDenied {
        /// The path.
        path: PathBuf,
        /// What was attempted ("connect to", "bind", "read").
        op: &'static str,
    },
    /// The socket file exists but nothing accepts connections on it.
    #[error("connection refused at {}: nothing is listening on this socket", path.display())]
    ConnectionRefused {
        /// The socket path.
        path: PathBuf,
    },
    /// Connecting did not finish in time.
    #[error("timed out after {} connecting to {}", crate::text::fmt_duration(*timeout), path.display())]
    ConnectTimeout {
        /// The socket path.
        path: PathBuf,
        /// The connect timeout.
        timeout: Duration,
    },
    /// Connecting failed for another reason (including the HTTP/2 handshake).
    #[error("could not connect to {}: {reason}", path.display())]
    Connect {
        /// The socket path.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The server closed one of several connections while it was being
    /// opened, after earlier ones had been opened: most likely a cap on
    /// connections per server (`bench --connections`).
    #[error("could not open connection {index} of {wanted} to {}: {reason}", path.display())]
    ConnectionClosedPastOthers {
        /// The socket path.
        path: PathBuf,
        /// Which connection failed, counting from 1.
        index: usize,
        /// How many connections were asked for.
        wanted: usize,
        /// Connections opened before it.
        open: usize,
        /// The cap on connections of dpctl's own gRPC servers.
        dpctl_cap: usize,
        /// What the transport said.
        reason: String,
    },
    /// The server does not implement the service or method.
    #[error("{rpc} on {}: not implemented by the server{}", path.display(), in_parens(message))]
    Unimplemented {
        /// The full method, e.g. `v1beta1.DevicePlugin/Allocate`.
        rpc: String,
        /// The socket path.
        path: PathBuf,
        /// The server's message.
        message: String,
    },
    /// A server-streaming call ended although it should go on (ListAndWatch).
    #[error("{rpc} on {}: {message}", path.display())]
    StreamEnded {
        /// The full method.
        rpc: String,
        /// The socket path.
        path: PathBuf,
        /// What happened and what it means.
        message: String,
    },
    /// The call did not complete within its deadline.
    #[error("{rpc} on {}: no answer within {} (deadline exceeded)", path.display(), crate::text::fmt_duration(*timeout))]
    DeadlineExceeded {
        /// The full method.
        rpc: String,
        /// The socket path.
        path: PathBuf,
        /// The deadline.
        timeout: Duration,
    },
    /// A message was larger than the receive limit.
    #[error("{rpc} on {}: message of {} is over the receive limit of {limit} bytes", path.display(), size.map_or_else(|| "unknown size".to_string(), |s| format!("{s} bytes")))]
    MessageTooLarge {
        /// The full method.
        rpc: String,
        /// The socket path.
        path: PathBuf,
        /// The message size, when the transport reported it.
        size: Option<usize>,
        /// The receive limit in force.
        limit: usize,
    },
    /// The server answered with a gRPC error status.
    #[error("{rpc} on {} failed: {code:?}: {message}", path.display())]
    Rpc {
        /// The full method.
        rpc: String,
        /// The socket path.
        path: PathBuf,
        /// The status code.
        code: tonic::Code,
        /// The status message.
        message: String,
    },
    /// The socket path does not fit in `sun_path`.
    #[error("socket path {} is {len} bytes long; unix sockets allow at most {max}", path.display())]
    PathTooLong {
        /// The path.
        path: PathBuf,
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A live process already answers on the socket we were asked to serve.
    #[error("{} is already served by a live process", path.display())]
    AlreadyServing {
        /// The socket path.
        path: PathBuf,
        /// The flag that forces taking it over.
        force_flag: &'static str,
    },
    /// Something that is not a socket is in the way; dpctl never deletes it.
    #[error("refusing to replace {}: it is a {kind}, not a unix socket", path.display())]
    NotReplaceable {
        /// The path.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// Binding the socket failed.
    #[error("could not bind {}: {source}", path.display())]
    Bind {
        /// The socket path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Invalid input: a flag value, a config file, a manifest.
    #[error("{place}: {message}")]
    Invalid {
        /// Where: a flag, a file and key, a manifest field.
        place: String,
        /// What is wrong.
        message: String,
    },
    /// A registration was rejected by the kubelet.
    #[error("registration of {resource} rejected by the kubelet at {}: {message}", path.display())]
    Rejected {
        /// The resource name.
        resource: String,
        /// The kubelet socket.
        path: PathBuf,
        /// The kubelet's message.
        message: String,
    },
    /// A Kubernetes API server answered a request with an error status.
    #[error("{what} at {server}: HTTP {code}{}: {message}", if reason.is_empty() { String::new() } else { format!(" {reason}") })]
    Api {
        /// The request, in words ("LIST ResourceSlices").
        what: String,
        /// The server's URL.
        server: String,
        /// The HTTP status.
        code: u16,
        /// The Status `reason` (`Forbidden`, `NotFound`, `Conflict`), or empty.
        reason: String,
        /// The Status `message`.
        message: String,
    },
    /// A wait ran out of time.
    #[error("timed out after {}: {what}", crate::text::fmt_duration(*timeout))]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        timeout: Duration,
    },
    /// A local I/O operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was attempted, naming the file.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl Error {
    /// Shorthand for [`Error::Invalid`].
    pub fn invalid(place: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Invalid { place: place.into(), message: message.into() }
    }

    /// Shorthand for [`Error::Io`].
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io { what: what.into(), source }
    }

    /// True when writing dpctl's own output failed because its reader went
    /// away (`dpctl ... | head`): not an error. A broken pipe on a socket
    /// (a server that hung up mid-request) is not this, and stays an error.
    pub fn is_closed_output(&self) -> bool {
        matches!(self, Error::Io { what, source }
            if what == WRITING_OUTPUT && source.kind() == std::io::ErrorKind::BrokenPipe)
    }

    /// Classifies a gRPC status from a call of `rpc` on the socket at `path`.
    pub fn from_status(rpc: &str, path: &std::path::Path, status: &tonic::Status, limit: usize) -> Self {
        let message = status.message().to_string();
        let rpc = rpc.to_string();
        let path = path.to_path_buf();
        match status.code() {
            tonic::Code::Unimplemented => Error::Unimplemented { rpc, path, message },
            tonic::Code::OutOfRange | tonic::Code::ResourceExhausted if too_large_size(&message).is_some() => {
                Error::MessageTooLarge { rpc, path, size: too_large_size(&message).flatten(), limit }
            }
            code => Error::Rpc { rpc, path, code, message },
        }
    }

    /// What the user can do about it, when the cause is known: the general
    /// hints. PodResources calls have causes of their own (feature gates, rate
    /// limit, old kubelets): `podresources::hint` adds those and falls back
    /// to this one, so callers that show hints call it instead.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            Error::NoSocket { .. } => {
                "is the plugin (or kubelet) running, and is this the right path? A kubelet restart deletes plugin sockets"
                    .into()
            }
            Error::NotASocket { .. } => "point --socket at the plugin's unix socket file".into(),
            Error::PermissionDenied { .. } => "sockets under /var/lib/kubelet belong to root: run as root (sudo), \
                 or check the directory's mode and SELinux labels (ls -lZ)"
                .into(),
            Error::ConnectionRefused { .. } => {
                "the socket file is stale: the process that created it has exited or restarted".into()
            }
            Error::ConnectTimeout { .. } => {
                "the socket accepts connections but the gRPC handshake does not finish: the server is stuck or \
                 overloaded; raise --connect-timeout to wait longer"
                    .into()
            }
            Error::DeadlineExceeded { .. } | Error::Timeout { .. } => {
                "the peer is slow or stuck; raise --timeout to wait longer".into()
            }
            // pkg/kubelet/cm/devicemanager/manager.go, allocateContainerResources:
            // an Allocate error fails admission with UnexpectedAdmissionError.
            Error::Rpc { rpc, path, .. } if rpc.ends_with("DevicePlugin/Allocate") => format!(
                "a kubelet would reject the pod with UnexpectedAdmissionError (`dpctl explain` reads the pod's \
                 message). Are the IDs ones the plugin lists as Healthy (`dpctl plugin call list --socket {}`), \
                 and does the plugin's log say why it refused?",
                path.display()
            ),
            Error::ConnectionClosedPastOthers { open, dpctl_cap, .. } => format!(
                "the server closed this connection after {open} others to it had been opened: servers cap their \
                 connections (dpctl's own servers take {dpctl_cap} per gRPC server, closing the oldest idle ones \
                 to make room; a plugin may have its own limit); lower --connections"
            ),
            // The kubeletplugin helper's words for a claim whose UID is not
            // the API's (d-r-a kubeletplugin/draplugin.go).
            Error::Rpc { rpc, message, .. } if rpc.contains(".DRAPlugin/") && message.contains(" got replaced") => {
                "the driver's API server holds this claim under another UID: pass that UID in --claim \
                 (kubectl get resourceclaim -n NAMESPACE NAME -o jsonpath='{.metadata.uid}'), or give --kubeconfig \
                 FILE (the driver's) and dra prepare names it"
                    .into()
            }
            Error::Rpc { rpc, message, .. } if rpc.contains(".DRAPlugin/") && message.contains("retrieve claim ") => {
                "the driver reads each claim from its API server, which does not hold this one: create the \
                 ResourceClaim there (allocated to this driver), or check the namespace and name in --claim"
                    .into()
            }
            Error::Api { code: 401 | 403, .. } => {
                "the API server refused the kubeconfig's credentials: give --kubeconfig the file the server wrote \
                 (its bearer token)"
                    .into()
            }
            Error::Api { code: 404, .. } => "the object is not in this API server: check the kubeconfig, the \
                 namespace and the name"
                .into(),
            Error::Api { code: 409, .. } => {
                "another client changed or created the object meanwhile: run the command again".into()
            }
            Error::Unimplemented { .. } => return self.unimplemented_hint(),
            Error::MessageTooLarge { limit, .. } => format!(
                "the kubelet accepts at most {} bytes (4 MiB) per message; \
                 a plugin that sends more is marked unhealthy and never retried. \
                 Raise --max-recv-bytes (now {limit}) to inspect it anyway",
                crate::limits::KUBELET_MAX_RECV
            ),
            Error::PathTooLong { .. } => {
                "a unix socket path must fit in 107 bytes: use a shorter directory (e.g. under /tmp) or a symlink \
                 to it"
                    .into()
            }
            Error::AlreadyServing { force_flag, .. } => {
                format!("another process answers on this socket; stop it, or pass {force_flag} to take the socket over")
            }
            Error::NotReplaceable { .. } => "move it away, or choose another socket path".into(),
            Error::Bind { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied => {
                "run as root, or choose a directory you can write to".into()
            }
            _ => return None,
        })
    }

    /// [`Error::hint`] for a method the server does not serve: the socket
    /// it was, or the API it speaks.
    fn unimplemented_hint(&self) -> Option<String> {
        Some(match self {
            Error::Unimplemented { rpc, .. } if rpc.contains(".DRAPlugin/") || rpc.contains(".DRAResourceHealth/") => {
                "the driver does not serve this DRA service: `dpctl dra info` shows what it advertises and what it \
                 serves; choose another with --api"
                    .into()
            }
            Error::Unimplemented { rpc, path, .. } if rpc.contains("DevicePlugin/") && kubelet_socket(path) => {
                let dir = path.parent().unwrap_or(path).display();
                format!(
                    "{} is the kubelet's registration socket: it serves Registration (plugins call it), not \
                     DevicePlugin. A plugin serves on its own socket in the same directory: `ls {dir}/*.sock`, or \
                     `dpctl doctor --dir {dir}` lists them",
                    path.display()
                )
            }
            Error::Unimplemented { rpc, path, .. } if rpc.contains("DevicePlugin/") && podresources_socket(path) => {
                format!(
                    "{} is a PodResources socket, not a device plugin's: read it with `dpctl podresources list \
                     --socket {}`",
                    path.display(),
                    path.display()
                )
            }
            Error::Unimplemented { message, .. }
                if message.contains("deviceplugin.") || message.contains("v1alpha") =>
            {
                "the peer speaks an old API (deviceplugin v1alpha); current kubelets only speak v1beta1".into()
            }
            Error::Unimplemented { .. } => {
                "wrong API package or version: dpctl speaks device plugin v1beta1 and PodResources v1/v1alpha1; \
                 is this the right socket?"
                    .into()
            }
            _ => return None,
        })
    }

    /// The process exit code for this error (see [`exit`]).
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::NoSocket { .. }
            | Error::NotASocket { .. }
            | Error::PermissionDenied { .. }
            | Error::ConnectionRefused { .. }
            | Error::Connect { .. }
            | Error::ConnectionClosedPastOthers { .. }
            | Error::AlreadyServing { .. }
            | Error::NotReplaceable { .. }
            | Error::Bind { .. } => exit::SOCKET,
            Error::Unimplemented { .. }
            | Error::MessageTooLarge { .. }
            | Error::Rpc { .. }
            | Error::Rejected { .. }
            | Error::Api { .. }
            | Error::StreamEnded { .. } => exit::RPC,
            Error::ConnectTimeout { .. } | Error::DeadlineExceeded { .. } | Error::Timeout { .. } => exit::TIMEOUT,
            // A socket path no socket can have is bad input, whoever reads it.
            Error::Invalid { .. } | Error::PathTooLong { .. } => exit::USAGE,
            Error::Io { .. } => exit::SOCKET,
        }
    }
}

/// Parses the size out of an over-limit message from tonic
/// ("found N bytes, the limit is: M bytes") or grpc-go ("larger than max (N vs. M)").
/// `Some(None)` means the message is an over-limit one without a size.
fn too_large_size(message: &str) -> Option<Option<usize>> {
    let number_after = |key: &str| {
        message.find(key).and_then(|i| {
            message[i + key.len()..]
                .trim_start()
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|n| n.parse().ok())
        })
    };
    if message.contains("message length too large") {
        Some(number_after("found"))
    } else if message.contains("larger than max") {
        Some(number_after("larger than max ("))
    } else {
        None
    }
}

/// Input the kubelet logic refused (`dpctl_kubelet`) is bad input like any
/// other: exit 2, in dpctl's one error style.
/// ` (MESSAGE)` after a status, or nothing when the server sent no message.
fn in_parens(message: &str) -> String {
    if message.is_empty() { String::new() } else { format!(" ({message})") }
}

/// `kubelet.sock` in a device-plugin directory: where the kubelet serves
/// Registration (the PodResources socket of the same name lives in `pod-resources/`).
fn kubelet_socket(path: &std::path::Path) -> bool {
    path.file_name().is_some_and(|n| n == "kubelet.sock") && !podresources_socket(path)
}

/// A PodResources socket by its place: kubelet-sim's `pod-resources.sock`,
/// or any socket in a kubelet's `pod-resources/` directory.
fn podresources_socket(path: &std::path::Path) -> bool {
    path.file_name().is_some_and(|n| n == "pod-resources.sock")
        || path.parent().and_then(|p| p.file_name()).is_some_and(|n| n == "pod-resources")
}

/// The one way dpctl states an error on stderr, whoever finds it (the
/// binary, a command that goes on after one, a steered sim's answer, a usage
/// error, smoke's namespace helper): `dpctl: error: MESSAGE`, then
/// `  hint: HINT` when there is one. Callers hand it the stream to write to.
pub fn write(w: &mut dyn std::io::Write, message: &str, hint: Option<&str>) -> std::io::Result<()> {
    writeln!(w, "dpctl: error: {message}")?;
    if let Some(h) = hint.filter(|h| !h.is_empty()) {
        writeln!(w, "  hint: {h}")?;
    }
    Ok(())
}

impl From<dpctl_kubelet::Invalid> for Error {
    fn from(e: dpctl_kubelet::Invalid) -> Self {
        Error::Invalid { place: e.place, message: e.message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_large_is_recognised_from_both_stacks() {
        let tonic = "Error, decoded message length too large: found 5000000 bytes, the limit is: 4194304 bytes";
        assert_eq!(too_large_size(tonic), Some(Some(5_000_000)));
        let go = "grpc: received message larger than max (23000000 vs. 4194304)";
        assert_eq!(too_large_size(go), Some(Some(23_000_000)));
        assert_eq!(too_large_size("something else"), None);
    }

    #[test]
    fn a_release_the_kubelet_crate_refuses_is_bad_input_exit_2() {
        for bad in ["1.25", "v1.30.7-", "1.x", ""] {
            let e = Error::from(crate::kubelet_version::KubeletVersion::parse(bad).unwrap_err());
            assert_eq!(e.exit_code(), exit::USAGE, "{bad}");
            assert!(e.to_string().starts_with("--kubelet-version"), "{e}");
        }
    }

    #[test]
    fn status_classification() {
        let p = std::path::Path::new("/x.sock");
        let e =
            Error::from_status("v1beta1.DevicePlugin/Allocate", p, &tonic::Status::unimplemented("unknown service"), 1);
        assert_eq!(e.exit_code(), exit::RPC);
        assert!(matches!(e, Error::Unimplemented { .. }));
        let st = tonic::Status::out_of_range(
            "Error, decoded message length too large: found 9 bytes, the limit is: 4 bytes",
        );
        assert!(matches!(Error::from_status("r", p, &st, 4), Error::MessageTooLarge { size: Some(9), limit: 4, .. }));
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(crate::text::fmt_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(crate::text::fmt_duration(Duration::from_secs(10)), "10s");
        assert_eq!(crate::text::fmt_duration(Duration::from_secs(90)), "1m 30s");
    }
}
