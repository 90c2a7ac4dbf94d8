//! `dpctl doctor`: a read-only check of a node's device-plugin setup.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::args::DirArg;
use crate::doctor::{DoctorConfig, Severity};
use crate::duration::parse as parse_duration;
use crate::error::{Result, exit};
use crate::kubelet_version::KubeletVersion;
use crate::output::{self, Streams};
use crate::paths::{ENV_PODRESOURCES_SOCKET, ENV_ROOT};

const HELP: &str = "\
Examples:
  sudo dpctl doctor                         # on the node
  dpctl doctor --root /host -o json         # from `kubectl debug node/NAME` (host at /host)

Findings are ok, warning or error, each with its evidence and a hint; exit 1
when any is an error. Doctor only reads: it connects to kubelet.sock without
calling it, calls GetDevicePluginOptions and reads the first ListAndWatch
message of each plugin, List and Get on PodResources, GetInfo on
plugins_registry sockets, an empty NodePrepareResources (no claim: nothing
is prepared) on DRA drivers' service sockets, and reads the checkpoints,
CDI specs and the kubelet's command line. It never registers, allocates,
prepares or calls PreStartContainer.

--kubelet-version (default 1.37) picks the kubelet rules findings are judged
by: which non-socket files its start-up cleanup deletes (1.26-1.32: every
non-directory but the checkpoint; 1.33+: sockets only, so other files stay)
and whether it reads a pre-1.20 checkpoint (up to 1.30). Doctor does not ask
the kubelet its version: pass the node's (`kubectl get node NAME -o
jsonpath='{.status.nodeInfo.kubeletVersion}'`).

The kubelet's root directory is its --root-dir, read from the running
kubelet's command line in <root>/proc (default /var/lib/kubelet; a
kubelet-root finding says where it came from; --kubelet-root-dir skips the
look-up). plugins_registry, the PodResources socket and dra_manager_state
sit under it; the device-plugin directory does not move with it.

DRA drivers: each DRAPlugin registration in the kubelet's plugins_registry
with its driver, endpoint, service socket (live, stale or missing), the
versions it advertises and the one this --kubelet-version uses or why it
refuses them (1.34-1.37: the first it knows, in the driver's order); a
registration socket in /var/lib/kubelet/plugins_registry while the kubelet
watches another root's (never seen: an error), and a service socket outside
the root (a warning); dra_manager_state verified (CRC-32 over Data).

A device plugin and a DRA driver serving the same hardware: an error when a
host device node (or CDI device name) in the checkpoint's Allocate answers
is also in a CDI device a DRA driver prepared (CDI IDs of dra_manager_state
and PodResources, resolved in the CDI specs' per-device deviceNodes); a
warning when it is in a CDI device of a registered driver's spec (vendor =
driver name or a subdomain) not prepared now; a weaker warning when only a
resource's domain and a driver name match. Doctor sees a device plugin's
device nodes only in Allocate answers the kubelet checkpointed.";

/// `--kubelet-root-dir`: an absolute path (the kubelet's root is a host path).
fn absolute_dir(s: &str) -> std::result::Result<PathBuf, String> {
    if s.len() > 4096 {
        return Err(format!("{} bytes is longer than any path (4096)", s.len()));
    }
    let p = PathBuf::from(s);
    if !p.is_absolute() {
        return Err(format!("{s:?} is not an absolute path (the kubelet's --root-dir, e.g. /var/lib/kubelet)"));
    }
    Ok(p)
}

/// Check a node's device-plugin setup (read-only): kubelet.sock, plugin sockets, checkpoint,
/// PodResources, plugins_registry, CDI.
#[derive(Debug, Args)]
#[command(after_long_help = HELP, args_conflicts_with_subcommands = true)]
#[command(mut_args(super::args::dir_help("The device-plugin directory (a host path)")))]
pub struct DoctorArgs {
    /// `merge`: fold many nodes' JSON reports into one view (without it: check this node).
    #[command(subcommand)]
    pub command: Option<DoctorCommand>,
    /// Prefix of every host path (the host's / as mounted in a pod, e.g. /host).
    #[arg(long, value_name = "PATH", env = ENV_ROOT, default_value = "/")]
    pub root: PathBuf,
    /// `--dir`.
    #[command(flatten)]
    pub dir: DirArg,
    /// The kubelet's PodResources socket (a host path) [default: <kubelet root>/pod-resources/kubelet.sock].
    #[arg(long, value_name = "PATH", env = ENV_PODRESOURCES_SOCKET)]
    pub podresources_socket: Option<PathBuf>,
    /// The plugin watcher's directory (a host path) [default: <kubelet root>/plugins_registry].
    #[arg(long, value_name = "DIR")]
    pub registry_dir: Option<PathBuf>,
    /// The kubelet's --root-dir (a host path) [default: read from the running kubelet's command
    /// line in <root>/proc, else /var/lib/kubelet].
    #[arg(long, value_name = "DIR", value_parser = absolute_dir)]
    pub kubelet_root_dir: Option<PathBuf>,
    /// CDI spec directories (host paths; repeatable) [default: /etc/cdi, /var/run/cdi].
    #[arg(long, value_name = "DIR")]
    pub cdi_dir: Vec<PathBuf>,
    /// Deadline of each probe (connect, one call, the first ListAndWatch message).
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_positive, default_value = "1s")]
    pub timeout: Duration,
    /// Total time for the whole run.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    pub budget: Duration,
    /// Name of this node, recorded in the report (a DaemonSet sets it from spec.nodeName).
    #[arg(long, value_name = "NAME", env = crate::paths::ENV_NODE_NAME)]
    pub node: Option<String>,
    /// The kubelet release to judge files and the checkpoint by: 1.26 … 1.37 or master.
    #[arg(long, value_name = "VERSION", default_value = crate::kubelet_version::NEWEST_NAME, value_parser = super::values::kubelet_version())]
    pub kubelet_version: KubeletVersion,
    /// Run again every DURATION until stopped (one report per run; one JSON line each with -o json).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub every: Option<Duration>,
}

/// What `dpctl doctor` does besides checking this node.
#[derive(Debug, Subcommand)]
pub enum DoctorCommand {
    /// Fold many nodes' `dpctl doctor -o json` reports (e.g. `kubectl logs -l ... --tail=1`)
    /// into one view: a row per node, then every warning and error with its node; exit 1 when
    /// any node has an error.
    #[command(after_long_help = MERGE_HELP)]
    Merge(MergeArgs),
}

const MERGE_HELP: &str = "\
Examples:
  kubectl logs -n dpctl-doctor -l app.kubernetes.io/name=dpctl-doctor --tail=1 | dpctl doctor merge
  dpctl doctor merge node-a.json node-b.json -o json

Reads JSON Lines (the DaemonSet's `--every` output) or pretty JSON (one-shot
runs), with or without kubectl's --prefix. Lines that are not a report
(kubectl's own messages, a line cut short) are skipped and counted on stderr.
A node's later report replaces its earlier one; a report without a node name
is kept on its own. Exit 1 when any node has an error, 2 when the input holds
no report.";

/// `dpctl doctor merge` arguments.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Files with reports; `-` or none reads stdin.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Also list the findings that are ok.
    #[arg(long)]
    pub all: bool,
}

/// Runs `dpctl doctor`.
pub async fn run(args: DoctorArgs, s: &mut Streams<'_>) -> Result<u8> {
    if let Some(DoctorCommand::Merge(m)) = args.command {
        let merged = crate::doctor::merge::merge_files(&m.files, m.all)?;
        output::doctor::merged_answer(s, &merged)?;
        return Ok(if merged.worst() == Severity::Error { exit::CHECK_FAILED } else { exit::OK });
    }
    if let Some(every) = args.every
        && every < crate::doctor::MIN_EVERY
    {
        // 0 used to rerun doctor back to back, hundreds of reports a second.
        return Err(crate::Error::invalid(
            "--every",
            format!("{} is too short: at least 1s between runs", crate::text::fmt_duration(every)),
        ));
    }
    let mut cfg = DoctorConfig::new(&args.root);
    cfg.dir = args.dir.dir;
    cfg.podresources_socket = args.podresources_socket;
    cfg.registry_dir = args.registry_dir;
    cfg.kubelet_root_dir = args.kubelet_root_dir;
    if !args.cdi_dir.is_empty() {
        cfg.cdi_dirs = args.cdi_dir;
    }
    cfg.probe_timeout = args.timeout;
    cfg.budget = args.budget;
    cfg.kubelet_version = args.kubelet_version;
    run_doctor(&cfg, args.node, args.every, s).await
}

/// Runs `doctor` once (exit 1 on an error finding), or with `every` again
/// and again until Ctrl-C (one report each; a JSON line each with `-o json`),
/// saying on a terminal's stderr what it looks at.
async fn run_doctor(
    cfg: &DoctorConfig,
    node: Option<String>,
    every: Option<Duration>,
    s: &mut Streams<'_>,
) -> Result<u8> {
    if s.progress {
        s.note(format!(
            "dpctl doctor: looking at {} (budget {})",
            cfg.dir.display(),
            crate::text::fmt_duration(cfg.budget)
        ))?;
    }
    let Some(every) = every else {
        let mut r = crate::doctor::run(cfg).await;
        r.node = node;
        output::doctor::report(s.out, s.format, &r).map_err(output::out_err)?;
        return Ok(if r.worst() == Severity::Error { exit::CHECK_FAILED } else { exit::OK });
    };
    let stop = crate::signal::shutdown();
    tokio::pin!(stop);
    loop {
        let mut r = crate::doctor::run(cfg).await;
        r.node.clone_from(&node);
        if s.format.is_json() {
            output::write_json_line(s.out, &r).map_err(output::out_err)?;
        } else {
            output::doctor::report(s.out, s.format, &r).map_err(output::out_err)?;
            s.out.flush().map_err(output::out_err)?;
        }
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = &mut stop => return Ok(exit::OK),
        }
    }
}
