//! `dpctl plugin`: call a device plugin's RPCs and watch its device list.

use std::path::Path;
use std::time::Duration;

use clap::Subcommand;

use super::args::Target;
use crate::error::{Result, exit};
use crate::model::Device;
use crate::output::{Streams, out_err, plugin as render};
use crate::plugin_client::{Call, PluginClient, WatchLimits};
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
    /// The plugin need not be registered with a kubelet. The kubelet never reads
    /// the options in a RegisterRequest; pass them with --register-options and
    /// options-answer notes where GetDevicePluginOptions differs (dpctl smoke
    /// does this from the real RegisterRequest). The suite calls Allocate and
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

/// Runs `dpctl plugin ...`.
pub async fn run(cmd: PluginCommand, s: &mut Streams<'_>) -> Result<u8> {
    let (target, call) = match cmd {
        PluginCommand::Check(args) => return super::check::run(*args, s).await,
        PluginCommand::Watch { target, count } => {
            let limits = WatchLimits { count, deadline: target.timeout.map(crate::duration::deadline) };
            let socket = target.socket_path()?;
            let config = ClientConfig { tap: s.wire.clone(), ..target.client_config(Duration::from_secs(10)) };
            return watch_plugin(&socket, &config, limits, s).await;
        }
        PluginCommand::Call(CallCommand::Options { target }) => (target, Call::Options),
        PluginCommand::Call(CallCommand::List { target }) => {
            let timeout = target.timeout.unwrap_or(Duration::from_secs(10));
            (target, Call::List(timeout))
        }
        PluginCommand::Call(CallCommand::Allocate { target, devices }) => (target, Call::allocate(&devices)?),
        PluginCommand::Call(CallCommand::Preferred { target, available, must_include, size }) => {
            (target, Call::preferred(available, must_include, size)?)
        }
        PluginCommand::Call(CallCommand::Prestart { target, devices }) => (target, Call::Prestart(devices)),
    };
    let socket = target.socket_path()?;
    let config = ClientConfig { tap: s.wire.clone(), ..target.client_config(Duration::from_secs(10)) };
    call_plugin(&socket, &config, call, s).await
}

/// Makes one call to the plugin at `socket` and renders the answer; the
/// exit code is 1 when the answer breaks the contract.
async fn call_plugin(socket: &Path, config: &ClientConfig, call: Call, s: &mut Streams<'_>) -> Result<u8> {
    let client = PluginClient::connect(socket, config).await?;
    let (out, format) = (&mut *s.out, s.format);
    let violations = match call {
        Call::Options => {
            let o = client.options().await?;
            let view = render::OptionsView {
                socket: client.path().display().to_string(),
                pre_start_required: o.pre_start_required,
                get_preferred_allocation_available: o.get_preferred_allocation_available,
            };
            render::options(out, format, &view).map_err(out_err)?;
            0
        }
        Call::List(timeout) => {
            let snap = client.list_once(timeout).await?;
            render::snapshot(out, format, &render::snapshot_view(1, &[], &snap), false).map_err(out_err)?;
            0
        }
        Call::Allocate(groups) => {
            let view = render::allocate_view(&groups, &client.allocate(&groups).await?);
            render::allocate(out, format, &view).map_err(out_err)?;
            view.violations.len()
        }
        Call::Preferred(req) => {
            // The kubelet calls GetPreferredAllocation only for a plugin whose
            // options advertise it (pkg/kubelet/cm/devicemanager/manager.go,
            // filterByAffinity / devicesToAllocate: `if !m.endpoints[...].opts.GetPreferredAllocationAvailable`).
            let advertised = client.options().await.map(|o| o.get_preferred_allocation_available).unwrap_or(true);
            if !advertised {
                s.note(format!(
                    "note: {} does not advertise GetPreferredAllocation (get_preferred_allocation_available is false \
                     in its options), so the kubelet never calls it: the answer below reaches no pod",
                    client.path().display()
                ))?;
            }
            let out = &mut *s.out;
            let resp = client.preferred(vec![req.clone()]).await?;
            let view = render::PreferredView {
                violations: crate::contract::check_preferred_response(&req, &resp),
                preferred: crate::contract::preferred_answer(&resp),
                available: req.available_device_i_ds,
                must_include: req.must_include_device_i_ds,
                size: req.allocation_size,
            };
            render::preferred(out, format, &view).map_err(out_err)?;
            view.violations.len()
        }
        Call::Prestart(devices) => {
            client.pre_start(devices.clone()).await?;
            render::prestarted(out, format, &devices).map_err(out_err)?;
            0
        }
    };
    Ok(if violations == 0 { exit::OK } else { exit::CHECK_FAILED })
}

/// Streams ListAndWatch (see [`crate::plugin_client::watch`]), rendering each
/// message with what changed since the one before.
async fn watch_plugin(socket: &Path, config: &ClientConfig, limits: WatchLimits, s: &mut Streams<'_>) -> Result<u8> {
    let mut prev: Vec<Device> = Vec::new();
    let stop = crate::signal::shutdown();
    crate::plugin_client::watch(socket, config, limits, stop, |seq, snap| {
        render::snapshot(s.out, s.format, &render::snapshot_view(seq, &prev, &snap), true).map_err(out_err)?;
        prev = snap.devices;
        Ok(())
    })
    .await?;
    Ok(exit::OK)
}
