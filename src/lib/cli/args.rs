//! Argument groups several commands share, flattened with
//! `#[command(flatten)]`, so each flag is defined in one place.

use std::path::PathBuf;

use clap::Args;

use crate::paths::{DEFAULT_DEVICE_PLUGIN_DIR, ENV_DEVICE_PLUGIN_DIR};
use crate::topology;

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

/// `--topology-manager-policy`'s values: clap's side of [`topology::Policy`]
/// (the topology module knows nothing of clap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PolicyArg {
    /// No hints are collected; devices are not aligned.
    None,
    /// Merge the hints, always admit.
    BestEffort,
    /// Admit only a preferred hint.
    Restricted,
    /// Admit only a preferred hint on one NUMA node (or none).
    SingleNumaNode,
}

impl From<PolicyArg> for topology::Policy {
    fn from(p: PolicyArg) -> Self {
        match p {
            PolicyArg::None => topology::Policy::None,
            PolicyArg::BestEffort => topology::Policy::BestEffort,
            PolicyArg::Restricted => topology::Policy::Restricted,
            PolicyArg::SingleNumaNode => topology::Policy::SingleNumaNode,
        }
    }
}

/// `--topology-manager-scope`'s values: clap's side of [`topology::Scope`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ScopeArg {
    /// One hint per container, init containers first.
    Container,
    /// One hint for the whole pod.
    Pod,
}

impl From<ScopeArg> for topology::Scope {
    fn from(s: ScopeArg) -> Self {
        match s {
            ScopeArg::Container => topology::Scope::Container,
            ScopeArg::Pod => topology::Scope::Pod,
        }
    }
}

/// `--cpu-manager-policy`'s values: clap's side of [`topology::CpuPolicy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CpuPolicyArg {
    /// Every container in the shared pool; no CPU hints.
    None,
    /// Guaranteed pods with integer CPU requests get exclusive CPUs.
    Static,
}

impl From<CpuPolicyArg> for topology::CpuPolicy {
    fn from(c: CpuPolicyArg) -> Self {
        match c {
            CpuPolicyArg::None => topology::CpuPolicy::None,
            CpuPolicyArg::Static => topology::CpuPolicy::Static,
        }
    }
}
