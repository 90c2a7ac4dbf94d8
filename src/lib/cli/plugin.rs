//! `dpctl plugin`: call a device plugin's RPCs and watch its device list.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use futures_util::StreamExt;

use super::{Ctx, out_err};
use crate::duration::parse as parse_duration;
use crate::error::{Error, KUBELET_MAX_RECV, Result, exit};
use crate::model::{self, Device};
use crate::output::{self, plugin as render};
use crate::paths::sockets_in;
use crate::plugin_client::PluginClient;
use crate::proto::deviceplugin::v1beta1 as dp;
use crate::transport::ClientConfig;

/// `dpctl plugin ...`
#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Make one call to a plugin.
    #[command(subcommand)]
    Call(CallCommand),
    /// Stream ListAndWatch: every snapshot, with added, removed and
    /// health-changed devices marked, and capacity/allocatable as the kubelet
    /// counts them. Stops after --count messages, at --timeout, or on Ctrl-C.
    Watch {
        /// Which plugin.
        #[command(flatten)]
        target: Target,
        /// Stop after this many messages.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        count: Option<u64>,
    },
    /// Run the sanity suite: does the plugin behave as the kubelet needs?
    ///
    /// Like csi-sanity for CSI drivers. Talks to the plugin's socket as a
    /// kubelet would and checks each answer against what the kubelet needs:
    /// options, the first ListAndWatch message and the stream staying open,
    /// device IDs, health and NUMA values, the 4 MiB message limit, Allocate,
    /// GetPreferredAllocation, PreStartContainer and concurrent calls. Each
    /// failure shows the evidence and the rule it breaks.
    ///
    /// The plugin need not be registered with a kubelet. To also compare the
    /// options it registers with, pass --register-options (dpctl smoke does
    /// this from the real RegisterRequest). The suite calls Allocate and
    /// PreStartContainer: point it at a test instance, not at a plugin serving
    /// a production node.
    ///
    /// Example: dpctl plugin check --socket /var/lib/kubelet/device-plugins/vendor.sock --junit report.xml
    Check(Box<super::check::CheckArgs>),
}

/// `dpctl plugin call ...`
#[derive(Debug, Subcommand)]
pub enum CallCommand {
    /// GetDevicePluginOptions.
    Options {
        /// Which plugin.
        #[command(flatten)]
        target: Target,
    },
    /// The first ListAndWatch message (one snapshot of the device list).
    List {
        /// Which plugin.
        #[command(flatten)]
        target: Target,
    },
    /// Allocate: one container request per --devices group.
    ///
    /// Example, two containers: --devices GPU-0,GPU-1 --devices GPU-2
    Allocate {
        /// Which plugin.
        #[command(flatten)]
        target: Target,
        /// Device IDs for one container, comma-separated; repeat for more containers.
        #[arg(long, required = true, value_name = "ID,ID...")]
        devices: Vec<String>,
    },
    /// GetPreferredAllocation for one container, checking the answer against
    /// the contract (subset of available, includes must-include, right size).
    Preferred {
        /// Which plugin.
        #[command(flatten)]
        target: Target,
        /// Available device IDs, comma-separated.
        #[arg(long, required = true, value_delimiter = ',', value_name = "ID,ID...")]
        available: Vec<String>,
        /// Device IDs the answer must include, comma-separated.
        #[arg(long, value_delimiter = ',', value_name = "ID,ID...")]
        must_include: Vec<String>,
        /// How many devices to ask for.
        #[arg(long)]
        size: i32,
    },
    /// PreStartContainer for the given devices.
    Prestart {
        /// Which plugin.
        #[command(flatten)]
        target: Target,
        /// Device IDs, comma-separated.
        #[arg(long, required = true, value_delimiter = ',', value_name = "ID,ID...")]
        devices: Vec<String>,
    },
}

/// Which plugin socket, and how to talk to it.
#[derive(Debug, Args, Clone)]
pub struct Target {
    /// The plugin's socket.
    #[arg(long, value_name = "PATH", conflicts_with = "endpoint")]
    pub socket: Option<PathBuf>,
    /// The device-plugin directory (with --endpoint).
    #[arg(long, value_name = "DIR", env = crate::paths::ENV_DEVICE_PLUGIN_DIR, default_value = crate::paths::DEFAULT_DEVICE_PLUGIN_DIR)]
    pub dir: PathBuf,
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
        if let Some(s) = &self.socket {
            return Ok(s.clone());
        }
        match &self.endpoint {
            Some(e) => Ok(self.dir.join(e)),
            None => {
                let found = sockets_in(&self.dir);
                let listing = if found.is_empty() {
                    format!("no sockets in {}", self.dir.display())
                } else {
                    format!("sockets in {}: {}", self.dir.display(), found.join(", "))
                };
                Err(Error::invalid(
                    "plugin socket",
                    format!("name it with --socket PATH or --endpoint NAME ({listing})"),
                ))
            }
        }
    }

    /// Client settings; `default_timeout` applies when --timeout is not given.
    pub fn client_config(&self, default_timeout: Duration) -> ClientConfig {
        ClientConfig {
            connect_timeout: self.connect_timeout,
            call_timeout: self.timeout.unwrap_or(default_timeout),
            max_recv_bytes: self.max_recv_bytes,
        }
    }

    async fn connect(&self) -> Result<PluginClient> {
        PluginClient::connect(&self.socket_path()?, &self.client_config(Duration::from_secs(10))).await
    }
}

/// Runs `dpctl plugin ...`.
pub async fn run(cmd: PluginCommand, ctx: &mut Ctx<'_>) -> Result<u8> {
    match cmd {
        PluginCommand::Call(call) => run_call(call, ctx).await,
        PluginCommand::Watch { target, count } => watch(&target, count, ctx).await,
        PluginCommand::Check(args) => super::check::run(*args, ctx).await,
    }
}

async fn run_call(call: CallCommand, ctx: &mut Ctx<'_>) -> Result<u8> {
    let out = &mut ctx.term.out;
    let format = ctx.format;
    match call {
        CallCommand::Options { target } => {
            let client = target.connect().await?;
            let o = client.options().await?;
            let view = render::OptionsView {
                socket: client.path().display().to_string(),
                pre_start_required: o.pre_start_required,
                get_preferred_allocation_available: o.get_preferred_allocation_available,
            };
            render::options(out, format, &view).map_err(out_err)?;
            Ok(exit::OK)
        }
        CallCommand::List { target } => {
            let client = target.connect().await?;
            let timeout = target.timeout.unwrap_or(Duration::from_secs(10));
            let snap = client.list_once(timeout).await?;
            let view = snapshot_view(1, &[], &snap.devices, snap.encoded_len, snap.received);
            render::snapshot(out, format, &view, false).map_err(out_err)?;
            Ok(exit::OK)
        }
        CallCommand::Allocate { target, devices } => {
            let groups: Vec<Vec<String>> = devices.iter().map(|g| split_ids(g)).collect();
            if let Some(i) = groups.iter().position(Vec::is_empty) {
                return Err(Error::invalid(format!("--devices (container {i})"), "no device IDs given"));
            }
            let client = target.connect().await?;
            let resp = client.allocate(&groups).await?;
            let view = render::allocate_view(&groups, &resp);
            render::allocate(out, format, &view).map_err(out_err)?;
            Ok(if view.violations.is_empty() { exit::OK } else { exit::CHECK_FAILED })
        }
        CallCommand::Preferred { target, available, must_include, size } => {
            if size < 0 {
                return Err(Error::invalid("--size", "must not be negative"));
            }
            let client = target.connect().await?;
            let req = dp::ContainerPreferredAllocationRequest {
                available_device_i_ds: available.clone(),
                must_include_device_i_ds: must_include.clone(),
                allocation_size: size,
            };
            let resp = client.preferred(vec![req.clone()]).await?;
            let answer = crate::contract::preferred_answer(&resp);
            let violations = crate::contract::check_preferred_response(&req, &resp);
            let view = render::PreferredView { available, must_include, size, preferred: answer, violations };
            render::preferred(out, format, &view).map_err(out_err)?;
            Ok(if view.violations.is_empty() { exit::OK } else { exit::CHECK_FAILED })
        }
        CallCommand::Prestart { target, devices } => {
            let client = target.connect().await?;
            client.pre_start(devices.clone()).await?;
            if format.is_json() {
                output::write_json(out, &serde_json::json!({ "devices_ids": devices, "ok": true })).map_err(out_err)?;
            } else {
                use std::io::Write;
                writeln!(out, "PreStartContainer OK for {}", devices.join(",")).map_err(out_err)?;
            }
            Ok(exit::OK)
        }
    }
}

async fn watch(target: &Target, count: Option<u64>, ctx: &mut Ctx<'_>) -> Result<u8> {
    let deadline = target.timeout.map(crate::duration::deadline);
    let stop = crate::transport::shutdown_signal();
    tokio::pin!(stop);
    let until = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    // Opening waits as long as the watch may last: no deadline unless --timeout.
    let opened = async {
        let client = target.connect().await?;
        let stream = client.list_and_watch().await?;
        Ok::<_, Error>((client, stream))
    };
    let (client, stream) = tokio::select! {
        r = opened => r?,
        () = until => return Ok(exit::OK),
        () = &mut stop => return Ok(exit::OK),
    };
    let mut stream = Box::pin(stream);
    let mut prev: Vec<Device> = Vec::new();
    let mut seq = 0u64;
    loop {
        let until = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        let item = tokio::select! {
            item = stream.next() => item,
            () = until => return Ok(exit::OK),
            () = &mut stop => return Ok(exit::OK),
        };
        match item {
            Some(Ok(snap)) => {
                seq += 1;
                let view = snapshot_view(seq, &prev, &snap.devices, snap.encoded_len, snap.received);
                render::snapshot(&mut ctx.term.out, ctx.format, &view, true).map_err(out_err)?;
                prev = snap.devices;
                if count.is_some_and(|c| seq >= c) {
                    return Ok(exit::OK);
                }
            }
            Some(Err(e)) => return Err(e),
            None => {
                return Err(Error::StreamEnded {
                    rpc: "v1beta1.DevicePlugin/ListAndWatch".into(),
                    path: client.path().to_path_buf(),
                    message: "the plugin ended the stream; a kubelet would mark all its devices unhealthy \
                              and not call ListAndWatch again until the plugin registers anew"
                        .into(),
                });
            }
        }
    }
}

fn snapshot_view(
    seq: u64,
    prev: &[Device],
    devices: &[Device],
    bytes: usize,
    at: std::time::SystemTime,
) -> render::SnapshotView {
    let changes = if seq == 1 { Vec::new() } else { model::diff(prev, devices) };
    let removed = prev.iter().filter(|d| !devices.iter().any(|n| n.id == d.id)).cloned().collect();
    render::SnapshotView {
        time: output::timestamp(at),
        seq,
        counts: model::counts(devices),
        message_bytes: bytes,
        devices: devices.to_vec(),
        changes,
        removed,
    }
}

/// Splits `a,b, c` into IDs, dropping empty parts.
pub fn split_ids(s: &str) -> Vec<String> {
    s.split(',').map(str::trim).filter(|x| !x.is_empty()).map(String::from).collect()
}
