//! Argument groups several commands share, flattened with
//! `#[command(flatten)]`, so each flag is defined in one place.

use std::path::PathBuf;

use clap::Args;

use crate::paths::{DEFAULT_DEVICE_PLUGIN_DIR, ENV_DEVICE_PLUGIN_DIR};

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
