//! Argument groups several commands share, flattened with
//! `#[command(flatten)]`, so each flag is defined in one place.

use std::path::PathBuf;

use clap::Args;

use crate::paths::{DEFAULT_DEVICE_PLUGIN_DIR, ENV_DEVICE_PLUGIN_DIR};

/// `--dir DIR`: the device-plugin directory, from `$DPCTL_DEVICE_PLUGIN_DIR`
/// or /var/lib/kubelet/device-plugins. A command that says what the directory
/// holds for it sets its own help text with
/// `#[command(mut_arg("dir", |a| a.help("...")))]` on the struct it flattens into.
#[derive(Debug, Args, Clone)]
pub struct DirArg {
    /// The device-plugin directory.
    #[arg(long, value_name = "DIR", env = ENV_DEVICE_PLUGIN_DIR, default_value = DEFAULT_DEVICE_PLUGIN_DIR)]
    pub dir: PathBuf,
}
