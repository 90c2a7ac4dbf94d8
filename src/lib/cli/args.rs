//! Argument groups several commands share, flattened with
//! `#[command(flatten)]`, so each flag is defined in one place.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::error::Result;
use crate::limits::KUBELET_MAX_RECV;
use crate::paths::{DEFAULT_DEVICE_PLUGIN_DIR, ENV_DEVICE_PLUGIN_DIR};
use crate::plugin_client;
use crate::topology;
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
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_positive)]
    pub timeout: Option<Duration>,
    /// Limit for connecting to the socket.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_positive, default_value = "5s")]
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

/// `--topology-manager-policy` and `--numa-nodes`: the policy the kubelet
/// admits under and the simulated machine's NUMA nodes, the same flags in
/// `kubelet-sim` and `smoke` (which sets its own help text with
/// `#[command(mut_args(help_for(...)))]`).
#[derive(Debug, Args, Clone)]
pub struct NumaPolicyArgs {
    /// The kubelet's --topology-manager-policy.
    #[arg(long, value_parser = super::values::TOPOLOGY_POLICIES, value_name = "POLICY", default_value = "none")]
    pub topology_manager_policy: topology::Policy,
    /// NUMA nodes of the simulated machine.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub numa_nodes: usize,
}

/// For `#[command(mut_args(help_for("id", "...")))]`: gives one flag of a
/// shared group a command's own help text, leaving the others as they are.
pub fn help_for(id: &'static str, help: &'static str) -> impl FnMut(clap::Arg) -> clap::Arg {
    move |a| if a.get_id() == id { a.help(help) } else { a }
}

#[cfg(test)]
mod tests {
    use super::NumaPolicyArgs;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    /// The NUMA group `kubelet-sim` and `smoke` share, as each parses it.
    fn numa_of(argv: &[&str]) -> Result<NumaPolicyArgs, String> {
        match Cli::try_parse_from(argv).map_err(|e| e.to_string())?.command {
            Command::KubeletSim(a) => Ok(a.serve.topology.numa),
            Command::Smoke(a) => Ok(a.numa),
            _ => Err("another command".into()),
        }
    }

    /// `--topology-manager-policy` and `--numa-nodes` are one definition:
    /// the same values and defaults in both commands, and a bad value gets
    /// the same error in each.
    #[test]
    fn kubelet_sim_and_smoke_read_the_numa_flags_alike() {
        let flags = ["--topology-manager-policy", "single-numa-node", "--numa-nodes", "4"];
        let sim = numa_of(&[&["dpctl", "kubelet-sim"][..], &flags].concat()).unwrap();
        let smoke = numa_of(&[&["dpctl", "smoke"][..], &flags, &["--", "true"]].concat()).unwrap();
        for n in [&sim, &smoke] {
            assert_eq!((n.topology_manager_policy, n.numa_nodes), (crate::topology::Policy::SingleNumaNode, 4));
        }
        let sim = numa_of(&["dpctl", "kubelet-sim"]).unwrap();
        let smoke = numa_of(&["dpctl", "smoke", "--", "true"]).unwrap();
        assert_eq!((sim.topology_manager_policy, sim.numa_nodes), (smoke.topology_manager_policy, smoke.numa_nodes));
        assert_eq!((sim.topology_manager_policy, sim.numa_nodes), (crate::topology::Policy::None, 2));
        for bad in [["--numa-nodes", "1e20"], ["--topology-manager-policy", "best"]] {
            let sim = numa_of(&[&["dpctl", "kubelet-sim"][..], &bad].concat()).unwrap_err();
            let smoke = numa_of(&[&["dpctl", "smoke"][..], &bad, &["--", "true"]].concat()).unwrap_err();
            let first = |e: &str| e.lines().next().unwrap_or_default().to_string();
            assert_eq!(first(&sim), first(&smoke));
            assert!(first(&sim).contains(&format!("invalid value '{}' for '{}", bad[1], bad[0])), "{sim}");
        }
    }
}
