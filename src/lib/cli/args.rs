//! Argument groups several commands share, flattened with
//! `#[command(flatten)]`, so each flag is defined in one place.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::duration::parse as parse_duration;
use crate::error::Result;
use crate::limits::KUBELET_MAX_RECV;
use crate::paths::{DEFAULT_DEVICE_PLUGIN_DIR, ENV_DEVICE_PLUGIN_DIR};
use crate::plugin_client;
use crate::transport::ClientConfig;

/// `--dir DIR`: the device-plugin directory, from `$DPCTL_DEVICE_PLUGIN_DIR`
/// or /var/lib/kubelet/device-plugins. A command that says what the directory
/// holds for it sets its own help text with
/// `#[command(mut_args(super::args::dir_help("...")))]` on the struct it flattens into.
#[derive(Debug, Args, Clone)]
pub struct DirArg {
    /// The device-plugin directory.
    #[arg(long, value_name = "DIR", env = ENV_DEVICE_PLUGIN_DIR, default_value = DEFAULT_DEVICE_PLUGIN_DIR)]
    pub dir: PathBuf,
}

/// For `#[command(mut_args(dir_help("...")))]`: gives [`DirArg`]'s `--dir` a
/// command's own help text, leaving the other flags (and their order, which
/// completions follow) as they are.
pub fn dir_help(help: &'static str) -> impl FnMut(clap::Arg) -> clap::Arg {
    move |a| if a.get_id() == "dir" { a.help(help) } else { a }
}

/// Which plugin socket, and how to talk to it.
#[derive(Debug, Args, Clone)]
#[command(mut_args(dir_help("The device-plugin directory (with --endpoint)")))]
pub struct Target {
    /// The plugin's socket.
    #[arg(long, value_name = "PATH", conflicts_with = "endpoint")]
    pub socket: Option<PathBuf>,
    /// `--dir`.
    #[command(flatten)]
    pub dir: DirArg,
    /// The plugin's socket name in --dir, as it registers it (e.g. nvidia-gpu.sock).
    #[arg(long, value_name = "NAME")]
    pub endpoint: Option<String>,
    /// Deadline of the call; for `watch`, how long to watch [default: 10s; watch: until stopped].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Limit for connecting to the socket.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    pub connect_timeout: Duration,
    /// Largest message accepted [default: the kubelet's 4 MiB].
    #[arg(long, value_name = "BYTES", default_value_t = KUBELET_MAX_RECV)]
    pub max_recv_bytes: usize,
}

impl Target {
    /// The socket path from --socket, or --dir and --endpoint.
    pub fn socket_path(&self) -> Result<PathBuf> {
        plugin_client::socket_path(self.socket.as_deref(), &self.dir.dir, self.endpoint.as_deref())
    }

    /// Client settings; `default_timeout` applies when --timeout is not given.
    pub fn client_config(&self, default_timeout: Duration) -> ClientConfig {
        ClientConfig {
            connect_timeout: self.connect_timeout,
            call_timeout: self.timeout.unwrap_or(default_timeout),
            max_recv_bytes: self.max_recv_bytes,
            tap: None,
        }
    }
}
